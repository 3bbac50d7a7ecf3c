//! The planner settings of a running controller, read back from its arguments as its
//! Deployment lists them, so that a reader (`rollout status`, the dashboard) judges the
//! clusters as that controller does. Only the planner's flags count; every other flag is
//! skipped.

use jiff::SignedDuration;

use super::PlanConfig;
use crate::rollout::{Compat, Quirk, parse_go_duration};

/// The controller's flags that change what the planner decides.
const SETTLE: &str = "--settle-time";
const QUIRK: &str = "--upstream-quirk";
const SIZE_LIMIT: &str = "--manifest-size-limit";
const LABELS: &str = "--labels-not-copied";

impl PlanConfig {
    /// The settings a controller started with `args` plans with (defaults for the flags
    /// it was not given). Err names the flag and why it cannot be read.
    pub fn from_controller_args(args: &[String]) -> Result<Self, String> {
        let mut config = PlanConfig::default();
        let mut quirks: Vec<Quirk> = Vec::new();
        let mut words = args.iter();
        while let Some(word) = words.next() {
            let (flag, inline) = match word.split_once('=') {
                Some((f, v)) => (f, Some(v.to_string())),
                None => (word.as_str(), None),
            };
            if ![SETTLE, QUIRK, SIZE_LIMIT, LABELS].contains(&flag) {
                continue;
            }
            let Some(value) = inline.or_else(|| words.next().cloned()) else {
                return Err(format!("{flag} has no value"));
            };
            let bad = |why: String| format!("{flag} {value:?}: {why}");
            match flag {
                SETTLE => config.settle = non_negative_duration(&value).map_err(bad)?,
                QUIRK => {
                    for name in value.split(',').filter(|n| !n.is_empty()) {
                        quirks.push(name.parse().map_err(bad)?);
                    }
                }
                SIZE_LIMIT => {
                    config.manifest_size_limit = value.parse().map_err(|e| bad(format!("{e}")))?
                }
                _ => {
                    let keys: Vec<String> = value.split(',').map(str::to_string).collect();
                    config.labels_not_copied = labels_not_copied(Some(&keys));
                }
            }
        }
        config.compat = Compat::with_quirks(&quirks);
        Ok(config)
    }

    /// The settings in a line: what differs from the defaults, or that none does.
    pub fn describe(&self) -> String {
        let quirks: Vec<&str> = self.compat.quirks().iter().map(|q| q.name()).collect();
        let quirks = if quirks.is_empty() {
            "no upstream quirk".to_string()
        } else {
            format!("upstream quirks {}", quirks.join(","))
        };
        format!("settle time {}, {quirks}", go_style(self.settle))
    }
}

/// `--labels-not-copied`: the keys given (empty ones left out), else GitOps tools'
/// tracking labels.
pub fn labels_not_copied(given: Option<&[String]>) -> Vec<String> {
    match given {
        Some(keys) => keys.iter().filter(|k| !k.is_empty()).cloned().collect(),
        None => PlanConfig::default().labels_not_copied,
    }
}

/// A controller flag's duration (`--settle-time` and the others): a Go duration, not
/// negative.
pub fn non_negative_duration(s: &str) -> Result<SignedDuration, String> {
    let d = parse_go_duration(s)?;
    if d.is_negative() {
        return Err("must not be negative".into());
    }
    Ok(d)
}

/// `d` as the flag would be written (`2s`, `1m30s`, `500ms`).
fn go_style(d: SignedDuration) -> String {
    let ms = d.as_millis();
    if ms % 1000 != 0 {
        return format!("{ms}ms");
    }
    let s = ms / 1000;
    match (s / 60, s % 60) {
        (0, s) => format!("{s}s"),
        (m, 0) => format!("{m}m"),
        (m, s) => format!("{m}m{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn the_planners_flags_are_read_in_either_spelling_and_the_rest_skipped() {
        let c = PlanConfig::from_controller_args(&args(&[
            "--leader-elect",
            "--settle-time=5s",
            "--upstream-quirk",
            "mandatory-leak,group-index-gaps",
            "--upstream-quirk=group-walk-arithmetic",
            "--metrics-addr=0.0.0.0:8443",
            "--manifest-size-limit=1000",
            "--labels-not-copied=",
        ]))
        .unwrap();
        assert_eq!(c.settle, SignedDuration::from_secs(5));
        assert_eq!(c.compat.quirks().len(), 3);
        assert_eq!(c.manifest_size_limit, 1000);
        assert!(c.labels_not_copied.is_empty(), "\"\" copies every label");
        assert_eq!(
            c.describe(),
            "settle time 5s, upstream quirks mandatory-leak,group-index-gaps,group-walk-arithmetic"
        );
    }

    #[test]
    fn no_flag_is_the_defaults() {
        let c = PlanConfig::from_controller_args(&args(&["--leader-elect"])).unwrap();
        let d = PlanConfig::default();
        assert_eq!(
            (c.settle, c.compat, &c.labels_not_copied),
            (d.settle, d.compat, &d.labels_not_copied)
        );
        assert_eq!(c.describe(), "settle time 2s, no upstream quirk");
    }

    #[test]
    fn a_flag_that_cannot_be_read_is_named() {
        let e = PlanConfig::from_controller_args(&args(&["--settle-time=soon"])).unwrap_err();
        assert!(e.starts_with("--settle-time \"soon\""), "{e}");
        let e = PlanConfig::from_controller_args(&args(&["--upstream-quirk=nope"])).unwrap_err();
        assert!(e.contains("unknown upstream quirk"), "{e}");
        let e = PlanConfig::from_controller_args(&args(&["--settle-time"])).unwrap_err();
        assert_eq!(e, "--settle-time has no value");
        assert_eq!(go_style(SignedDuration::from_millis(1500)), "1500ms");
        assert_eq!(go_style(SignedDuration::from_secs(90)), "1m30s");
    }
}
