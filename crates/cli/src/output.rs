//! Output: kubectl-style tables (columns padded, two spaces apart), ages ("45s", "3m",
//! "2h", "4d"), YAML and JSON, and colour only when stdout is a terminal (or forced with
//! `--color always`; `NO_COLOR` turns it off).

use std::io::IsTerminal;

use jiff::Timestamp;
use serde::Serialize;

use crate::args::{ColorMode, Format, Global};
use crate::error::{CliError, Result};

/// Where and how to print.
pub struct Out {
    pub format: Format,
    pub color: bool,
    /// stdout is a terminal (redraws, progress bars).
    pub tty: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Paint {
    Green,
    Yellow,
    Red,
    Cyan,
    Bold,
    Dim,
}

impl Out {
    pub fn new(g: &Global) -> Self {
        let tty = std::io::stdout().is_terminal();
        let color = match g.color {
            ColorMode::Always => true,
            ColorMode::Never => false,
            ColorMode::Auto => tty && std::env::var_os("NO_COLOR").is_none(),
        };
        Self {
            format: g.output,
            color,
            tty,
        }
    }

    pub fn paint(&self, p: Paint, s: &str) -> String {
        if !self.color || s.is_empty() {
            return s.to_string();
        }
        let code = match p {
            Paint::Green => "32",
            Paint::Yellow => "33",
            Paint::Red => "31",
            Paint::Cyan => "36",
            Paint::Bold => "1",
            Paint::Dim => "2",
        };
        format!("\x1b[{code}m{s}\x1b[0m")
    }

    /// Error text on stderr: red when stderr is a terminal.
    pub fn paint_err(&self, s: &str) -> String {
        if self.color && std::io::stderr().is_terminal() {
            format!("\x1b[31m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }

    pub fn structured(&self) -> bool {
        matches!(self.format, Format::Yaml | Format::Json)
    }

    /// Prints `v` as YAML or JSON (per `-o`).
    pub fn print_structured<T: Serialize>(&self, v: &T) -> Result<()> {
        print!("{}", self.render_structured(v)?);
        Ok(())
    }

    pub fn render_structured<T: Serialize>(&self, v: &T) -> Result<String> {
        match self.format {
            Format::Json => serde_json::to_string_pretty(v)
                .map(|s| s + "\n")
                .map_err(|e| CliError::error(format!("cannot write JSON: {e}"))),
            _ => to_yaml(v),
        }
    }
}

pub fn to_yaml<T: Serialize>(v: &T) -> Result<String> {
    // Through serde_json first: the API types serialize RawExtension and friends as JSON
    // values, which YAML then spells naturally.
    let value =
        serde_json::to_value(v).map_err(|e| CliError::error(format!("cannot encode: {e}")))?;
    serde_saphyr::to_string(&value).map_err(|e| CliError::error(format!("cannot write YAML: {e}")))
}

/// State words coloured by how they read: good green, waiting yellow, bad red.
pub fn paint_state(out: &Out, s: &str) -> String {
    let p = match s {
        "Complete" | "Succeeded" => Paint::Green,
        "Progressing" | "ToApply" | "Paused" | "Blocked" => Paint::Yellow,
        "Aborted" | "Degraded" | "Invalid" | "Failed" | "TimeOut" => Paint::Red,
        _ => return s.to_string(),
    };
    out.paint(p, s)
}

/// A table; cells may hold colour codes (widths count visible characters only).
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Self {
        Self {
            rows: vec![header.iter().map(|h| (*h).to_string()).collect()],
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let cols = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let mut widths = vec![0usize; cols];
        for r in &self.rows {
            for (i, c) in r.iter().enumerate() {
                widths[i] = widths[i].max(visible_len(c));
            }
        }
        let mut s = String::new();
        for r in &self.rows {
            let mut line = String::new();
            for (i, c) in r.iter().enumerate() {
                line.push_str(c);
                if i + 1 < r.len() {
                    line.push_str(&" ".repeat(widths[i] - visible_len(c) + 3));
                }
            }
            s.push_str(line.trim_end());
            s.push('\n');
        }
        s
    }
}

/// Length without ANSI colour sequences.
pub fn visible_len(s: &str) -> usize {
    let mut n = 0;
    let mut in_escape = false;
    for ch in s.chars() {
        match (in_escape, ch) {
            (false, '\x1b') => in_escape = true,
            (true, 'm') => in_escape = false,
            (true, _) => {}
            (false, _) => n += 1,
        }
    }
    n
}

/// kubectl's short age: "45s", "12m", "5h", "3d" ("<unknown>" without a time).
pub fn age(t: Option<Timestamp>, now: Timestamp) -> String {
    let Some(t) = t else {
        return "<unknown>".into();
    };
    let secs = now.duration_since(t).as_secs().max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 3600 * 2 => format!("{}m", s / 60),
        s if s < 86400 * 2 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

/// A duration as "1h30m", "2m", "45s", "0s".
pub fn duration(d: jiff::SignedDuration) -> String {
    let s = d.as_secs().max(0);
    let (h, m, sec) = (s / 3600, (s % 3600) / 60, s % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if sec > 0 || out.is_empty() {
        out.push_str(&format!("{sec}s"));
    }
    out
}

/// `[#####-----]` for `done` of `total`.
pub fn bar(done: usize, total: usize, width: usize) -> String {
    let filled = if total == 0 {
        0
    } else {
        (done * width).div_ceil(total).min(width)
    };
    let filled = if done < total {
        filled.min(width - 1)
    } else {
        filled
    };
    format!("[{}{}]", "#".repeat(filled), "-".repeat(width - filled))
}

/// Up to `n` names, then "and N more".
pub fn few(names: &[String], n: usize) -> String {
    let shown: Vec<&str> = names.iter().take(n).map(String::as_str).collect();
    let more = names.len().saturating_sub(n);
    if more > 0 {
        format!("{} (+{more} more)", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn ages_like_kubectl() {
        let now: Timestamp = "2026-01-10T00:00:00Z".parse().unwrap();
        let ago = |s: i64| Some(now - jiff::SignedDuration::from_secs(s));
        assert_eq!(age(ago(5), now), "5s");
        assert_eq!(age(ago(600), now), "10m");
        assert_eq!(age(ago(3 * 3600), now), "3h");
        assert_eq!(age(ago(5 * 86400), now), "5d");
        assert_eq!(age(None, now), "<unknown>");
    }

    #[test]
    fn tables_align_on_visible_width() {
        let mut t = Table::new(&["NAME", "STATUS"]);
        t.row(vec!["a".into(), "\x1b[32mComplete\x1b[0m".into()]);
        t.row(vec!["long-name".into(), "x".into()]);
        let s = t.render();
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "NAME        STATUS");
        assert_eq!(lines[2], "long-name   x");
        assert!(lines[1].starts_with("a           \x1b[32m"));
    }

    #[test]
    fn bars_and_durations() {
        assert_eq!(bar(0, 4, 8), "[--------]");
        assert_eq!(bar(2, 4, 8), "[####----]");
        assert_eq!(bar(4, 4, 8), "[########]");
        assert_eq!(bar(999, 1000, 8), "[#######-]", "never full before done");
        assert_eq!(duration(jiff::SignedDuration::from_secs(5400)), "1h30m");
        assert_eq!(duration(jiff::SignedDuration::ZERO), "0s");
        assert_eq!(
            few(&["a".into(), "b".into(), "c".into()], 2),
            "a, b (+1 more)"
        );
    }
}
