//! The book's generated pages that come from the CLI: `docs/src/reference/cli.md` is what
//! [`mwrs_cli::reference::markdown`] writes from the clap definition. The test fails when
//! the checked-in page is stale; `MWRS_BLESS=1` rewrites it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

#[test]
fn the_cli_reference_is_generated_from_the_parser() {
    mwrs_testsupport::check_generated(
        "docs/src/reference/cli.md",
        &mwrs_cli::reference::markdown(),
        "cargo test -p mwrs-cli --test docs",
    );
}

/// The repository's root.
fn root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A heading's anchor as mdBook (and GitHub) make it: lowercase, whitespace to `-`, other
/// punctuation dropped.
fn slug(heading: &str) -> String {
    heading
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_ascii_lowercase())
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// A Markdown file's lines without the fence lines, each with whether it is inside a
/// fenced code block.
fn lines(text: &str) -> Vec<(bool, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else {
            out.push((fenced, line));
        }
    }
    out
}

/// A Markdown file's lines outside fenced code blocks, with inline code removed.
fn prose(text: &str) -> Vec<String> {
    lines(text)
        .into_iter()
        .filter(|(fenced, _)| !fenced)
        .map(|(_, line)| line.split('`').step_by(2).collect())
        .collect()
}

/// The anchors of a Markdown file's headings.
fn anchors(text: &str) -> Vec<String> {
    lines(text)
        .into_iter()
        .filter(|(fenced, line)| !fenced && line.starts_with('#'))
        .map(|(_, line)| slug(line.trim_start_matches('#').trim()))
        .collect()
}

/// Every `[text](target)` of a line.
fn links(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        match after.find(')') {
            Some(end) => {
                out.push(after[..end].to_string());
                rest = &after[end..];
            }
            None => break,
        }
    }
    out
}

/// The Markdown files the book and the README are made of.
fn pages() -> Vec<std::path::PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    let mut out = vec![root().join("README.md")];
    walk(&root().join("docs/src"), &mut out);
    out.sort();
    out
}

#[test]
fn every_link_of_the_book_and_the_readme_leads_somewhere() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for line in prose(&text) {
            for target in links(&line) {
                if target.starts_with("http://")
                    || target.starts_with("https://")
                    || target.starts_with("mailto:")
                {
                    continue;
                }
                let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
                let dest = if file.is_empty() {
                    page.clone()
                } else {
                    page.parent().unwrap().join(file)
                };
                if !dest.exists() {
                    broken.push(format!("{}: {target}: no such file", page.display()));
                    continue;
                }
                let markdown = dest.extension().is_some_and(|x| x == "md");
                if !anchor.is_empty()
                    && markdown
                    && !anchors(&std::fs::read_to_string(&dest).unwrap())
                        .iter()
                        .any(|a| a == anchor)
                {
                    broken.push(format!("{}: {target}: no such heading", page.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_page_of_the_book_is_in_its_summary() {
    let src = root().join("docs/src");
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).unwrap();
    let listed: Vec<String> = prose(&summary).iter().flat_map(|l| links(l)).collect();
    for page in pages().into_iter().filter(|p| p.starts_with(&src)) {
        let rel = page
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .to_string();
        if rel == "SUMMARY.md" {
            continue;
        }
        assert!(listed.contains(&rel), "docs/src/{rel} is not in SUMMARY.md");
    }
}

/// The `mwrs ...` / `kubectl mwrs ...` command lines of a text: code-block lines and inline
/// code spans, without a prompt, a trailing comment or what a pipe or redirection adds.
/// Lines with placeholders in brackets or ellipses are left out.
fn command_lines(text: &str) -> Vec<String> {
    let mut spans: Vec<String> = Vec::new();
    for (fenced, line) in lines(text) {
        if fenced {
            spans.push(line.trim().trim_start_matches("$ ").to_string());
        } else {
            spans.extend(line.split('`').skip(1).step_by(2).map(str::to_string));
        }
    }
    spans
        .into_iter()
        .filter_map(|s| {
            let s = s.strip_prefix("kubectl ").unwrap_or(&s).to_string();
            let s = s.strip_prefix("mwrs ")?.to_string();
            let cut = [" #", " |", " >", " &&", ";", " 2>"]
                .iter()
                .filter_map(|c| s.find(c))
                .min()
                .unwrap_or(s.len());
            let s = s[..cut].trim().to_string();
            let placeholder = ["[", "...", "…", "{", "\\|", "<"]
                .iter()
                .any(|p| s.contains(p));
            (!placeholder).then_some(s)
        })
        .collect()
}

/// Every command line the README, the book and the CHANGELOG show names commands, flags
/// and values that the parser accepts (a line may leave out required arguments: it names
/// a command, it does not run it).
#[test]
fn every_command_line_the_docs_show_parses() {
    use clap::Parser;
    use clap::error::ErrorKind;
    let mut files = pages();
    files.push(root().join("CHANGELOG.md"));
    let mut checked = 0;
    let mut wrong = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for line in command_lines(&text) {
            let words = std::iter::once("mwrs".to_string()).chain(
                line.split_whitespace()
                    .map(|w| w.trim_matches(|c| c == '"' || c == '\'').to_string()),
            );
            checked += 1;
            if let Err(e) = mwrs_cli::args::Cli::try_parse_from(words) {
                // A flag named without its value names it all the same.
                let named_only = e.to_string().contains("a value is required");
                if !named_only
                    && matches!(
                        e.kind(),
                        ErrorKind::UnknownArgument
                            | ErrorKind::InvalidSubcommand
                            | ErrorKind::InvalidValue
                            | ErrorKind::NoEquals
                    )
                {
                    let first = e.to_string().lines().next().unwrap_or("").to_string();
                    wrong.push(format!("{}: mwrs {line}: {first}", file.display()));
                }
            }
        }
    }
    eprintln!("{checked} command lines checked");
    assert!(checked > 40, "only {checked} command lines found");
    assert!(
        wrong.is_empty(),
        "command lines the parser refuses:\n{}",
        wrong.join("\n")
    );
}
