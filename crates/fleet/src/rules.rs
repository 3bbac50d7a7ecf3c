//! Behaviour rules of the simulated fleet: which cluster does what with which revision.
//!
//! A rule is `SELECTORS=BEHAVIOUR`; the first rule whose selectors all match a ManifestWork
//! decides, otherwise the default latency applies. Selectors (comma-separated, all must
//! match):
//!
//! - `cluster=GLOB` (`*` and `?`), `group=N` (decision group index),
//! - `revision=PREFIX` (the ManifestWork's controller-hash label),
//! - `manifest=TEXT` (a substring of the ManifestWork spec as JSON: pick a template version
//!   without knowing its hash),
//! - `fraction=F` (a stable share 0..1 of the clusters, by a hash of the name).
//!
//! Behaviours: `succeed[:LATENCY]`, `degrade[:AFTER]`, `hang`, `flap[:PERIOD]`, `silent`
//! (never reports), `refuse` (reports `Applied` False with an apply error), `early[:GLITCH]`
//! (reports success for a new generation at once, then Progressing for GLITCH, then
//! success: upstream's agent evaluating the new generation against the old object). A latency
//! is a duration (`2s`, `500ms`) or a uniform range `1s..5s`, drawn per cluster and
//! generation from a seeded hash so that two runs with the same seed behave the same.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use crate::agent::{Behaviour, WorkInfo};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{what} {input:?}: {reason}")]
pub struct RuleError {
    pub what: &'static str,
    pub input: String,
    pub reason: String,
}

fn err(what: &'static str, input: &str, reason: impl Into<String>) -> RuleError {
    RuleError {
        what,
        input: input.to_string(),
        reason: reason.into(),
    }
}

/// A fixed duration or a uniform range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Latency {
    pub min: Duration,
    pub max: Duration,
}

impl Latency {
    pub const ZERO: Latency = Latency {
        min: Duration::ZERO,
        max: Duration::ZERO,
    };

    /// The latency for one draw `key` (a hash); uniform between min and max.
    pub fn pick(&self, key: u64) -> Duration {
        if self.max <= self.min {
            return self.min;
        }
        let span = (self.max - self.min).as_nanos();
        // u128 arithmetic: spans up to centuries cannot overflow.
        let off = u128::from(key) % (span + 1);
        self.min + Duration::from_nanos(u64::try_from(off).unwrap_or(u64::MAX))
    }
}

impl std::str::FromStr for Latency {
    type Err = RuleError;
    fn from_str(s: &str) -> Result<Self, RuleError> {
        match s.split_once("..") {
            Some((a, b)) => {
                let (min, max) = (duration(a)?, duration(b)?);
                if max < min {
                    return Err(err("latency", s, "the range ends before it starts"));
                }
                Ok(Latency { min, max })
            }
            None => {
                let d = duration(s)?;
                Ok(Latency { min: d, max: d })
            }
        }
    }
}

impl fmt::Display for Latency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.min == self.max {
            write!(f, "{:?}", self.min)
        } else {
            write!(f, "{:?}..{:?}", self.min, self.max)
        }
    }
}

/// `250ms`, `2s`, `1m30s`, `0`.
pub fn duration(s: &str) -> Result<Duration, RuleError> {
    let t = s.trim();
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    let d: jiff::SignedDuration = t
        .parse()
        .map_err(|e| err("duration", s, format!("{e} (write e.g. 500ms, 2s, 1m)")))?;
    if d.is_negative() {
        return Err(err("duration", s, "must not be negative"));
    }
    Duration::try_from(d).map_err(|e| err("duration", s, e.to_string()))
}

#[derive(Clone, Debug, PartialEq)]
enum Selector {
    Cluster(String),
    Group(usize),
    Revision(String),
    Manifest(String),
    Fraction(f64),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Succeed(Latency),
    Degrade(Latency),
    Hang,
    Flap(Duration),
    Silent,
    Refuse,
    Early(Duration),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    selectors: Vec<Selector>,
    pub action: Action,
    text: String,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for Rule {
    type Err = RuleError;
    fn from_str(s: &str) -> Result<Self, RuleError> {
        // The behaviour follows the last '=' so that selector values may not contain one.
        let (sel, act) = s
            .rsplit_once('=')
            .ok_or_else(|| err("rule", s, "expected SELECTORS=BEHAVIOUR"))?;
        let mut selectors = Vec::new();
        for part in sel.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .or_else(|| part.split_once(':'))
                .ok_or_else(|| err("selector", part, "expected KEY=VALUE"))?;
            selectors.push(match k {
                "cluster" => Selector::Cluster(v.to_string()),
                "group" => Selector::Group(
                    v.parse()
                        .map_err(|_| err("selector", part, "group wants an index"))?,
                ),
                "revision" => Selector::Revision(v.to_string()),
                "manifest" => Selector::Manifest(v.to_string()),
                "fraction" => {
                    let f: f64 = v
                        .parse()
                        .map_err(|_| err("selector", part, "fraction wants a number"))?;
                    if !(0.0..=1.0).contains(&f) {
                        return Err(err("selector", part, "fraction must be within 0..1"));
                    }
                    Selector::Fraction(f)
                }
                _ => {
                    return Err(err(
                        "selector",
                        part,
                        "unknown key (cluster, group, revision, manifest, fraction)",
                    ));
                }
            });
        }
        if selectors.is_empty() {
            return Err(err("rule", s, "needs at least one selector"));
        }
        let (name, arg) = match act.split_once(':') {
            Some((n, a)) => (n.trim(), Some(a.trim())),
            None => (act.trim(), None),
        };
        let action = match (name, arg) {
            ("succeed", None) => Action::Succeed(Latency::ZERO),
            ("succeed", Some(a)) => Action::Succeed(a.parse()?),
            ("degrade", None) => Action::Degrade(Latency::ZERO),
            ("degrade", Some(a)) => Action::Degrade(a.parse()?),
            ("hang", None) => Action::Hang,
            ("flap", None) => Action::Flap(Duration::from_secs(5)),
            ("flap", Some(a)) => Action::Flap(duration(a)?),
            ("silent", None) => Action::Silent,
            ("refuse", None) => Action::Refuse,
            ("early", None) => Action::Early(Duration::from_millis(500)),
            ("early", Some(a)) => Action::Early(duration(a)?),
            _ => {
                return Err(err(
                    "behaviour",
                    act,
                    "expected succeed[:LATENCY], degrade[:AFTER], hang, flap[:PERIOD], silent, \
                     refuse or early[:GLITCH]",
                ));
            }
        };
        Ok(Rule {
            selectors,
            action,
            text: s.to_string(),
        })
    }
}

/// Everything that decides a cluster's behaviour.
#[derive(Clone, Debug)]
pub struct Rules {
    pub rules: Vec<Rule>,
    pub default_latency: Latency,
    pub seed: u64,
    /// Decision group index of each cluster (for `group=`).
    pub groups: HashMap<String, usize>,
}

impl Rules {
    pub fn behaviour(&self, w: &WorkInfo<'_>) -> Behaviour {
        let draw = fnv(
            self.seed,
            &[w.cluster.as_bytes(), &w.generation.to_le_bytes()],
        );
        // The spec as text is built at most once per ManifestWork, and only for `manifest=`.
        let spec = std::cell::OnceCell::new();
        let action = self
            .rules
            .iter()
            .find(|r| r.selectors.iter().all(|s| self.matches(s, w, &spec)))
            .map(|r| r.action)
            .unwrap_or(Action::Succeed(self.default_latency));
        match action {
            Action::Succeed(l) => Behaviour::Succeed {
                after: l.pick(draw),
            },
            Action::Degrade(l) => Behaviour::Degrade {
                after: l.pick(draw),
            },
            Action::Hang => Behaviour::Hang,
            Action::Flap(period) => Behaviour::Flap { period },
            Action::Silent => Behaviour::Silent,
            Action::Refuse => Behaviour::Refuse,
            Action::Early(glitch) => Behaviour::EarlyReport {
                glitch,
                after: self.default_latency.pick(draw),
            },
        }
    }

    fn matches(&self, s: &Selector, w: &WorkInfo<'_>, spec: &std::cell::OnceCell<String>) -> bool {
        match s {
            Selector::Cluster(g) => glob(g, w.cluster),
            Selector::Group(i) => self.groups.get(w.cluster) == Some(i),
            Selector::Revision(p) => w.revision.is_some_and(|r| r.starts_with(p.as_str())),
            Selector::Manifest(t) => spec.get_or_init(|| w.spec.to_string()).contains(t.as_str()),
            Selector::Fraction(f) => {
                // Independent of the generation: the same clusters are chosen every time.
                let h = fnv(self.seed ^ 0x9e37_79b9, &[w.cluster.as_bytes()]);
                (h as f64 / u64::MAX as f64) < *f
            }
        }
    }
}

fn fnv(seed: u64, parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
    for p in parts {
        for b in *p {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    // Final avalanche so that neighbouring names spread over the whole range.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

/// Shell-style glob with `*` and `?`.
pub fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn info<'a>(
        cluster: &'a str,
        rev: Option<&'a str>,
        spec: &'a serde_json::Value,
    ) -> WorkInfo<'a> {
        WorkInfo {
            cluster,
            name: "w",
            generation: 1,
            revision: rev,
            spec,
        }
    }

    fn rules(rs: &[&str], groups: &[(&str, usize)]) -> Rules {
        Rules {
            rules: rs.iter().map(|r| r.parse().unwrap()).collect(),
            default_latency: "1s".parse().unwrap(),
            seed: 7,
            groups: groups.iter().map(|(c, g)| (c.to_string(), *g)).collect(),
        }
    }

    #[test]
    fn first_matching_rule_wins_else_default() {
        let spec = json!({"workload": {"manifests": [{"data": {"version": "v2"}}]}});
        let r = rules(
            &[
                "group=1,manifest=\"v2\"=hang",
                "cluster=edge-*=degrade:2s",
                "revision=abc=flap:3s",
            ],
            &[("c1", 1), ("c2", 0)],
        );
        assert_eq!(r.behaviour(&info("c1", None, &spec)), Behaviour::Hang);
        assert_eq!(
            r.behaviour(&info("c2", None, &spec)),
            Behaviour::Succeed {
                after: Duration::from_secs(1)
            }
        );
        assert_eq!(
            r.behaviour(&info("edge-7", None, &spec)),
            Behaviour::Degrade {
                after: Duration::from_secs(2)
            }
        );
        assert_eq!(
            r.behaviour(&info("c2", Some("abcdef"), &spec)),
            Behaviour::Flap {
                period: Duration::from_secs(3)
            }
        );
        let other = json!({"workload": {"manifests": [{"data": {"version": "v3"}}]}});
        assert!(matches!(
            r.behaviour(&info("c1", None, &other)),
            Behaviour::Succeed { .. }
        ));
    }

    #[test]
    fn latency_ranges_are_seeded_and_within_bounds() {
        let l: Latency = "1s..3s".parse().unwrap();
        let picks: Vec<Duration> = (0..1000u64)
            .map(|k| l.pick(fnv(1, &[&k.to_le_bytes()])))
            .collect();
        assert!(
            picks
                .iter()
                .all(|d| *d >= Duration::from_secs(1) && *d <= Duration::from_secs(3))
        );
        let below_2 = picks
            .iter()
            .filter(|d| **d < Duration::from_secs(2))
            .count();
        assert!(
            (350..650).contains(&below_2),
            "not uniform: {below_2}/1000 below the middle"
        );
        let r = rules(&[], &[]);
        let spec = json!({});
        let r2 = Rules {
            default_latency: l,
            ..r.clone()
        };
        assert_eq!(
            r2.behaviour(&info("c9", None, &spec)),
            r2.behaviour(&info("c9", None, &spec))
        );
    }

    #[test]
    fn fraction_picks_a_stable_share() {
        let r = rules(&["fraction=0.1=degrade"], &[]);
        let spec = json!({});
        let names: Vec<String> = (0..5000).map(|i| format!("cluster-{i:05}")).collect();
        let failing = names
            .iter()
            .filter(|n| {
                matches!(
                    r.behaviour(&info(n, None, &spec)),
                    Behaviour::Degrade { .. }
                )
            })
            .count();
        assert!((400..600).contains(&failing), "{failing} of 5000");
    }

    #[test]
    fn bad_rules_name_the_part() {
        let e = "cluster=a=explode".parse::<Rule>().unwrap_err();
        assert_eq!(e.what, "behaviour");
        let e = "colour=red=hang".parse::<Rule>().unwrap_err();
        assert_eq!((e.what, e.input.as_str()), ("selector", "colour=red"));
        let e = "fraction=2=hang".parse::<Rule>().unwrap_err();
        assert!(e.reason.contains("0..1"));
        let e = "cluster=a=succeed:3..1s".parse::<Rule>().unwrap_err();
        assert_eq!(e.what, "duration");
        assert!("hang".parse::<Rule>().is_err());
        assert_eq!(
            "cluster=a=silent".parse::<Rule>().unwrap().action,
            Action::Silent
        );
        assert_eq!(
            "cluster=a=refuse".parse::<Rule>().unwrap().action,
            Action::Refuse
        );
        assert_eq!(
            "cluster=a=early:250ms".parse::<Rule>().unwrap().action,
            Action::Early(Duration::from_millis(250))
        );
        assert!("3s..1s".parse::<Latency>().is_err());
        assert!(duration("-1s").is_err());
        assert_eq!(duration("250ms").unwrap(), Duration::from_millis(250));
    }

    #[test]
    fn glob_matches_like_a_shell() {
        assert!(glob("cluster-00*", "cluster-0012"));
        assert!(glob("c?-*-x", "c1-abc-x"));
        assert!(!glob("c?-*-x", "c12-abc-x"));
        assert!(glob("*", ""));
        assert!(!glob("a*b", "acbx"));
    }
}
