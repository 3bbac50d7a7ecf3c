//! Shell completion for `kubectl mwrs`, through kubectl's plugin protocol: for
//! `kubectl mwrs rollout undo a<TAB>` kubectl runs `kubectl_complete-mwrs rollout undo a`
//! (the last word is the one being completed, empty for a new word) and offers the lines
//! it prints: `value<TAB>description`, then `:<directive>` in Cobra's terms.
//!
//! Commands, flags and flag values come from the clap definition, so they never drift
//! from what the parser accepts; MWRS names come from the hub, within a short timeout,
//! and are simply left out when the hub cannot be reached.

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{Arg, Command, CommandFactory};
use kube::api::ListParams;

use crate::args::{Cli, ColorMode, Format, Global};
use crate::hub::HubClient;

/// Cobra's `ShellCompDirectiveDefault`: the shell may also offer file names.
pub const DIRECTIVE_DEFAULT: u8 = 0;
/// Cobra's `ShellCompDirectiveNoFileComp`: only the candidates printed.
pub const DIRECTIVE_NO_FILE: u8 = 4;

/// What to offer for the word being completed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Completion {
    /// `(value, description)`, in the order to show.
    pub candidates: Vec<(String, String)>,
    pub directive: u8,
    /// MWRS names starting with this prefix are wanted too (they need the hub).
    pub names: Option<String>,
    /// The connection flags given on the line, to reach the same hub as the command.
    pub kubeconfig: Option<String>,
    pub context: Option<String>,
    pub namespace: Option<String>,
}

/// The flag `word` names in `cmd` (`--long`, `--long=value`, `-s`), if any.
fn flag<'c>(cmd: &'c Command, word: &str) -> Option<&'c Arg> {
    if let Some(long) = word.strip_prefix("--") {
        let long = long.split_once('=').map_or(long, |(l, _)| l);
        return cmd.get_arguments().find(|a| a.get_long() == Some(long));
    }
    let mut chars = word.strip_prefix('-')?.chars();
    let short = chars.next()?;
    cmd.get_arguments().find(|a| a.get_short() == Some(short))
}

fn takes_value(a: &Arg) -> bool {
    a.get_action().takes_values()
}

fn help(a: &Arg) -> String {
    a.get_help().map(|h| h.to_string()).unwrap_or_default()
}

/// The values an argument accepts (value enums), with their help.
fn values(a: &Arg, prefix: &str) -> Vec<(String, String)> {
    a.get_possible_values()
        .into_iter()
        .filter(|v| !v.is_hide_set() && v.get_name().starts_with(prefix))
        .map(|v| {
            let about = v.get_help().map(|h| h.to_string()).unwrap_or_default();
            (v.get_name().to_string(), about)
        })
        .collect()
}

/// Candidates for a flag's value: its possible values; file names for a FILE; else none.
fn value_completion(
    a: &Arg,
    prefix: &str,
    shown: impl Fn(&str) -> String,
) -> (Vec<(String, String)>, u8) {
    let vs = values(a, prefix);
    if !vs.is_empty() {
        return (
            vs.into_iter().map(|(v, h)| (shown(&v), h)).collect(),
            DIRECTIVE_NO_FILE,
        );
    }
    let file = a
        .get_value_names()
        .is_some_and(|n| n.iter().any(|n| n.as_str() == "FILE"));
    (
        Vec::new(),
        if file {
            DIRECTIVE_DEFAULT
        } else {
            DIRECTIVE_NO_FILE
        },
    )
}

/// What to offer after `words` (the last one being completed), from the command line's
/// definition alone.
pub fn complete(words: &[String]) -> Completion {
    let mut root = Cli::command();
    root.build();
    let (partial, done) = match words.split_last() {
        Some((p, d)) => (p.as_str(), d),
        None => ("", &[][..]),
    };
    let mut out = Completion {
        directive: DIRECTIVE_NO_FILE,
        ..Completion::default()
    };
    let line = Line::read(&root, done, &mut out);
    let cmd = line.cmd;

    // The value of a flag given as the previous word, or as --flag=partial.
    if let Some(a) = line.pending {
        (out.candidates, out.directive) = value_completion(a, partial, str::to_string);
        return out;
    }
    if let Some((name, value)) = partial.split_once('=')
        && name.starts_with("--")
        && let Some(a) = flag(cmd, name)
    {
        (out.candidates, out.directive) = value_completion(a, value, |v| format!("{name}={v}"));
        return out;
    }
    if partial.starts_with('-') {
        out.candidates = flag_names(cmd, partial);
        return out;
    }
    if cmd.has_subcommands() && line.positionals == 0 {
        out.candidates = subcommands(cmd, partial);
        return out;
    }
    // A positional argument: its values, or MWRS names for `name`.
    let next = cmd
        .get_positionals()
        .filter(|a| !a.is_hide_set())
        .nth(line.positionals);
    if let Some(a) = next {
        let vs = values(a, partial);
        if !vs.is_empty() {
            out.candidates = vs;
        } else if a.get_id().as_str() == "name" {
            out.names = Some(partial.to_string());
        }
    }
    out
}

/// Where the words before the one being completed leave the command line.
struct Line<'c> {
    /// The (sub)command they reach.
    cmd: &'c Command,
    /// How many positional arguments they give it.
    positionals: usize,
    /// The flag given last, when it still waits for its value.
    pending: Option<&'c Arg>,
}

impl<'c> Line<'c> {
    /// Reads the words `done` under `root`: subcommands, flags with their values (those of
    /// the connection flags go into `out`) and positional arguments.
    fn read(root: &'c Command, done: &[String], out: &mut Completion) -> Self {
        let mut line = Line {
            cmd: root,
            positionals: 0,
            pending: None,
        };
        let mut i = 0;
        while i < done.len() {
            let w = done[i].as_str();
            i += 1;
            if w.starts_with('-') && w != "-" {
                let Some(a) = flag(line.cmd, w) else { continue };
                if !takes_value(a) {
                    continue;
                }
                let value = match w.split_once('=') {
                    Some((_, v)) => Some(v.to_string()),
                    None if i < done.len() => {
                        i += 1;
                        Some(done[i - 1].clone())
                    }
                    None => {
                        line.pending = Some(a);
                        None
                    }
                };
                if let Some(v) = value {
                    connection_flag(out, a, v);
                }
                continue;
            }
            match line.cmd.find_subcommand(w) {
                Some(sub) if line.positionals == 0 => {
                    line.cmd = sub;
                }
                _ => line.positionals += 1,
            }
        }
        line
    }
}

/// Keeps `value` in `out` when `a` is one of the flags that say which hub to reach.
fn connection_flag(out: &mut Completion, a: &Arg, value: String) {
    match a.get_id().as_str() {
        "kubeconfig" => out.kubeconfig = Some(value),
        "context" => out.context = Some(value),
        "namespace" => out.namespace = Some(value),
        _ => {}
    }
}

/// The flags of `cmd` starting with `partial`, long ones and (for `-` or `-x`) short ones.
fn flag_names(cmd: &Command, partial: &str) -> Vec<(String, String)> {
    let mut candidates = Vec::new();
    for a in cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !a.is_positional())
    {
        if let Some(l) = a.get_long().map(|l| format!("--{l}"))
            && l.starts_with(partial)
        {
            candidates.push((l, help(a)));
        }
        if let Some(s) = a.get_short().map(|s| format!("-{s}"))
            && s.starts_with(partial)
            && partial.len() <= 2
        {
            candidates.push((s, help(a)));
        }
    }
    candidates
}

/// The subcommands of `cmd` starting with `partial`, with their about lines.
fn subcommands(cmd: &Command, partial: &str) -> Vec<(String, String)> {
    cmd.get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .filter(|s| s.get_name().starts_with(partial))
        .map(|s| {
            let about = s.get_about().map(|h| h.to_string()).unwrap_or_default();
            (s.get_name().to_string(), about)
        })
        .collect()
}

/// Fills in the MWRS names `c` asks for, from the hub the line points at.
pub async fn add_names(c: &mut Completion) {
    let Some(prefix) = c.names.clone() else {
        return;
    };
    let g = Global {
        kubeconfig: c.kubeconfig.clone().map(Into::into),
        context: c.context.clone(),
        namespace: c.namespace.clone(),
        all_namespaces: false,
        output: Format::Table,
        color: ColorMode::Never,
        request_timeout: "3s".into(),
    };
    let Ok(hub) = HubClient::connect(&g, false).await else {
        return;
    };
    let Ok(list) = hub.mwrs_api().list(&ListParams::default()).await else {
        return;
    };
    let mut names: Vec<String> = list
        .items
        .into_iter()
        .filter_map(|m| m.metadata.name)
        .filter(|n| n.starts_with(&prefix))
        .collect();
    names.sort();
    c.candidates
        .extend(names.into_iter().map(|n| (n, String::new())));
}

/// Cobra's output: one `value\tdescription` per line, then `:directive`.
pub fn render(c: &Completion) -> String {
    let mut s = String::new();
    for (v, d) in &c.candidates {
        // A description is one line; tabs would split it into columns.
        let d = d.lines().next().unwrap_or("").replace('\t', " ");
        if d.is_empty() {
            s.push_str(v);
        } else {
            s.push_str(&format!("{v}\t{d}"));
        }
        s.push('\n');
    }
    s.push_str(&format!(":{}\n", c.directive));
    s
}

/// The `kubectl_complete-mwrs` program.
pub fn main() -> ExitCode {
    let words: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a: OsString| a.to_string_lossy().into_owned())
        .collect();
    let mut c = complete(&words);
    if c.names.is_some()
        && let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    {
        rt.block_on(add_names(&mut c));
    }
    print!("{}", render(&c));
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        let mut w: Vec<String> = line.split(' ').map(str::to_string).collect();
        if line.is_empty() {
            w = vec![String::new()];
        }
        w
    }

    fn values_of(line: &str) -> Vec<String> {
        complete(&words(line))
            .candidates
            .into_iter()
            .map(|(v, _)| v)
            .collect()
    }

    #[test]
    fn commands_come_from_the_parser() {
        assert_eq!(
            values_of(""),
            vec![
                "get",
                "rollout",
                "dashboard",
                "handover",
                "disable-upstream",
                "plugin",
                "completion",
                "version"
            ]
        );
        assert_eq!(
            values_of("rollout "),
            vec![
                "status", "history", "diff", "undo", "abort", "retry", "pause", "resume", "plan"
            ]
        );
        assert_eq!(values_of("rollout re"), vec!["retry", "resume"]);
        // Global flags before the command do not count as words.
        assert_eq!(values_of("-n prod rollout h"), vec!["history"]);
        let c = complete(&words("rollout "));
        assert_eq!(c.directive, DIRECTIVE_NO_FILE);
        let status = c.candidates.iter().find(|(v, _)| v == "status");
        assert!(status.is_some_and(|(_, d)| !d.is_empty()), "{status:?}");
    }

    #[test]
    fn flags_and_their_values() {
        let flags = values_of("rollout undo app --to");
        assert_eq!(flags, vec!["--to-revision"]);
        let global = values_of("get --kube");
        assert_eq!(global, vec!["--kubeconfig"]);
        assert_eq!(values_of("get -o "), vec!["table", "wide", "yaml", "json"]);
        assert_eq!(values_of("get -o y"), vec!["yaml"]);
        assert_eq!(values_of("get --output=j"), vec!["--output=json"]);
        assert_eq!(
            values_of("completion "),
            vec!["bash", "elvish", "fish", "powershell", "zsh"]
        );
        // A file argument leaves the shell to offer files.
        let c = complete(&words("rollout plan -f "));
        assert!(c.candidates.is_empty());
        assert_eq!(c.directive, DIRECTIVE_DEFAULT);
        // A flag's value is never taken for a command or a name.
        assert!(
            complete(&words("rollout status --timeout "))
                .names
                .is_none()
        );
    }

    #[test]
    fn names_are_asked_of_the_hub_with_the_lines_connection_flags() {
        let c = complete(&words("--context hub -n prod rollout status we"));
        assert_eq!(c.names.as_deref(), Some("we"));
        assert_eq!(c.context.as_deref(), Some("hub"));
        assert_eq!(c.namespace.as_deref(), Some("prod"));
        assert!(complete(&words("get ")).names.is_some());
        // Only the first positional of a command is an MWRS name.
        assert!(complete(&words("rollout undo app ")).names.is_none());
        let c = complete(&words("--kubeconfig=/tmp/kc rollout abort "));
        assert_eq!(c.kubeconfig.as_deref(), Some("/tmp/kc"));
    }

    #[test]
    fn the_output_is_cobras() {
        let c = Completion {
            candidates: vec![
                ("get".into(), "List\tthem\nmore".into()),
                ("x".into(), String::new()),
            ],
            directive: DIRECTIVE_NO_FILE,
            ..Completion::default()
        };
        assert_eq!(render(&c), "get\tList them\nx\n:4\n");
    }
}
