//! Every citation of a rule in the repository (`rules §N` or `rules §N.M`, in code,
//! scripts and the book) names a rule that `docs/src/reference/rules.md` has, and no
//! citation points at the old contract kept outside the repository.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const RULES: &str = include_str!("../../../docs/src/reference/rules.md");

/// What is not the project's own text.
const SKIPPED_DIRS: &[&str] = &["target", ".git", "node_modules", "book", "results"];
const TEXT: &[&str] = &[
    "rs", "md", "sh", "py", "go", "js", "html", "css", "yaml", "yml", "tpl", "toml", "txt",
    "proto", "json",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The rule numbers the page defines: `## N.` section headings and `### N.M` rules.
fn defined() -> BTreeSet<String> {
    RULES
        .lines()
        .filter_map(|l| {
            let heading = l.strip_prefix("### ").or_else(|| l.strip_prefix("## "))?;
            let number = heading.split_whitespace().next()?;
            let number = number.trim_end_matches('.');
            number
                .split('.')
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                .then(|| number.to_string())
        })
        .collect()
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        let name = e.file_name().to_string_lossy().to_string();
        if path.is_dir() {
            if !SKIPPED_DIRS.contains(&name.as_str()) {
                files(&path, out);
            }
        } else if path
            .extension()
            .is_some_and(|x| TEXT.contains(&x.to_string_lossy().as_ref()))
        {
            out.push(path);
        }
    }
}

/// Every `rules §…` citation in `text` (a "rules" at the end of one comment line and its
/// `§` at the start of the next count too), as the cited number.
fn citations(text: &str) -> Vec<String> {
    let joined = text
        .lines()
        .map(|l| {
            l.trim_start()
                .trim_start_matches(['/', '#', '*', '!', '-'])
                .trim()
        })
        .collect::<Vec<_>>()
        .join(" ");
    let mut out = Vec::new();
    let mut rest = joined.as_str();
    while let Some(at) = rest.find("rules §") {
        let after = &rest[at + "rules §".len()..];
        let number: String = after
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let number = number.trim_end_matches('.');
        // `rules §N`, spelling the form out, cites nothing.
        if !number.is_empty() {
            out.push(number.to_string());
        }
        rest = after;
    }
    out
}

#[test]
fn every_cited_rule_exists() {
    let defined = defined();
    assert!(defined.contains("12.6"), "the page defines its rules");
    let mut all = Vec::new();
    files(&root(), &mut all);
    let mut wrong = Vec::new();
    let mut count = 0;
    for path in &all {
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        let shown = path
            .strip_prefix(root())
            .unwrap_or(path)
            .display()
            .to_string();
        // Spelled in two parts so that this file does not cite what it looks for.
        let (old, old_md) = (format!("{} §", "SPEC"), format!("{}.md §", "SPEC"));
        if text.contains(&old) || text.contains(&old_md) {
            wrong.push(format!(
                "{shown}: cites SPEC; cite the rules page (rules §N.M)"
            ));
        }
        for n in citations(&text) {
            count += 1;
            if !defined.contains(&n) {
                wrong.push(format!("{shown}: rules §{n} is not a rule"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(
        count > 100,
        "only {count} citations found: is the walk right?"
    );
}

/// The page's own references (`§N.M`, without "rules") resolve too.
#[test]
fn every_rule_the_page_refers_to_exists() {
    let defined = defined();
    let wrong: Vec<String> = RULES
        .split('§')
        .skip(1)
        .map(|after| {
            let n: String = after
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            n.trim_end_matches('.').to_string()
        })
        .filter(|n| !n.is_empty() && !defined.contains(n))
        .collect();
    assert!(wrong.is_empty(), "not rules: {wrong:?}");
}

#[test]
fn a_citation_of_a_missing_rule_is_found() {
    let text = "// as rules §12.6 says, and rules\n/// §3.99 too; see rules §4.";
    assert_eq!(citations(text), ["12.6", "3.99", "4"]);
    assert!(!defined().contains("3.99"));
}
