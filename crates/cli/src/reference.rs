//! The CLI reference page of the book (`docs/src/reference/cli.md`), written from the clap
//! definition itself, so that it cannot drift from what the parser accepts:
//! `crates/cli/tests/docs.rs` fails when the checked-in page differs and rewrites it with
//! `MWRS_BLESS=1`.

use std::fmt::Write as _;

use clap::{Arg, Command, CommandFactory};

use crate::args::{Cli, EXIT_CODES};

/// The whole page, in Markdown.
pub fn markdown() -> String {
    let mut cli = Cli::command();
    cli.build();
    let mut page = String::from(
        "# CLI reference\n\n\
         <!-- Generated from the command line's definition (crates/cli/src/reference.rs); \
         `MWRS_BLESS=1 cargo test -p mwrs-cli --test docs` rewrites it. -->\n\n\
         `mwrs` is also `kubectl mwrs` (installed as `kubectl-mwrs`). Every command takes \
         the global options listed under [`mwrs`](#mwrs).\n\n",
    );
    command(&mut page, &cli, "mwrs", true);
    page.push_str("## Exit codes\n\n| code | meaning |\n|---|---|\n");
    for (code, meaning) in exit_codes() {
        let _ = writeln!(page, "| {code} | {meaning} |");
    }
    page
}

/// (code, meaning) rows of [`EXIT_CODES`], continuation lines joined.
pub fn exit_codes() -> Vec<(u8, String)> {
    let mut rows: Vec<(u8, String)> = Vec::new();
    for line in EXIT_CODES.lines().skip(1) {
        let line = line.trim();
        let (head, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        match (head.parse::<u8>(), rows.last_mut()) {
            (Ok(code), _) => rows.push((code, rest.trim().to_string())),
            (Err(_), Some((_, meaning))) => {
                meaning.push(' ');
                meaning.push_str(line);
            }
            (Err(_), None) => {}
        }
    }
    rows
}

/// One command's section, then its subcommands'. `top` also lists the global options.
fn command(page: &mut String, cmd: &Command, path: &str, top: bool) {
    let _ = writeln!(page, "## `{path}`\n");
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        let _ = writeln!(page, "{about}\n");
    }
    let usage = cmd.clone().render_usage().to_string();
    let usage = usage.trim_start_matches("Usage: ");
    let _ = writeln!(page, "```text\n{usage}\n```\n");
    let args: Vec<&Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && (top || !a.is_global_set()))
        .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
        .collect();
    if !args.is_empty() {
        page.push_str("| argument | value | default | meaning |\n|---|---|---|---|\n");
        for a in args {
            let _ = writeln!(
                page,
                "| {} | {} | {} | {} |",
                name(a),
                value(a),
                default(a),
                help(a)
            );
        }
        page.push('\n');
    }
    if let Some(after) = cmd.get_after_long_help().or(cmd.get_after_help()) {
        let text = after.to_string();
        let text = text.split("Exit codes:").next().unwrap_or("").trim_end();
        if !text.is_empty() {
            let _ = writeln!(page, "```text\n{text}\n```\n");
        }
    }
    // clap's own `help` subcommands say what `--help` says.
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        command(page, sub, &format!("{path} {}", sub.get_name()), false);
    }
}

fn name(a: &Arg) -> String {
    match (a.get_short(), a.get_long()) {
        (Some(s), Some(l)) => format!("`-{s}`, `--{l}`"),
        (None, Some(l)) => format!("`--{l}`"),
        (Some(s), None) => format!("`-{s}`"),
        (None, None) => format!("`{}`", a.get_id().as_str().to_ascii_uppercase()),
    }
}

fn value(a: &Arg) -> String {
    let possible: Vec<String> = a
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| v.get_name().to_string())
        .collect();
    if !possible.is_empty() {
        return possible.join(" \\| ");
    }
    if !a.get_action().takes_values() || a.is_positional() {
        return String::new();
    }
    a.get_value_names()
        .map(|v| {
            v.iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|| a.get_id().as_str().to_ascii_uppercase())
}

fn default(a: &Arg) -> String {
    a.get_default_values()
        .iter()
        .map(|v| format!("`{}`", v.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn help(a: &Arg) -> String {
    let text = a
        .get_long_help()
        .or(a.get_help())
        .map(|h| h.to_string())
        .unwrap_or_default();
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}
