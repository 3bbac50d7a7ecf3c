//! A `RolloutStrategy` as written (strings, int-or-string) turned into the values the
//! engine runs on, refusing anything upstream would refuse at rollout time — and
//! naming the offending field relative to the strategy, so callers only prefix it.

use std::fmt;

use jiff::SignedDuration;
use mwrs_api::rollout::{
    FAILURE_STRATEGY_ABORT_ALL, RolloutConfig, RolloutStrategy, TYPE_ALL, TYPE_PROGRESSIVE,
    TYPE_PROGRESSIVE_PER_GROUP,
};

use super::groups::{MandatoryGroup, mandatory_groups};
use super::parse::{Deadline, Size, parse_deadline, parse_go_duration, parse_size};
use crate::Invalid;
use crate::plugin::{PolicyOverride, parse_override, parse_plugin_name};

/// The three rollout types.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum StrategyKind {
    #[default]
    All,
    Progressive,
    ProgressivePerGroup,
}

impl StrategyKind {
    pub fn as_str(self) -> &'static str {
        match self {
            StrategyKind::All => TYPE_ALL,
            StrategyKind::Progressive => TYPE_PROGRESSIVE,
            StrategyKind::ProgressivePerGroup => TYPE_PROGRESSIVE_PER_GROUP,
        }
    }

    /// The name of the sub-object holding this type's settings.
    fn field(self) -> &'static str {
        match self {
            StrategyKind::All => "all",
            StrategyKind::Progressive => "progressive",
            StrategyKind::ProgressivePerGroup => "progressivePerGroup",
        }
    }
}

impl fmt::Display for StrategyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A validated rollout strategy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ParsedStrategy {
    pub kind: StrategyKind,
    /// Soak time. Always zero for `All`, which ignores it upstream (the API documents it
    /// for the progressive types only); it is still validated.
    pub min_success_time: SignedDuration,
    pub deadline: Deadline,
    /// The engine ignores it for `All` (as upstream); the planner uses it there.
    pub max_failures: Size,
    /// `Progressive` only; absent means all non-mandatory clusters.
    pub max_concurrency: Option<Size>,
    /// `Progressive` and `ProgressivePerGroup` only.
    pub mandatory: Vec<MandatoryGroup>,
    /// `failureStrategy: AbortAll`.
    pub abort_all: bool,
    /// The rollout plugin that validates each cluster (issue #18).
    pub plugin: Option<String>,
    /// This placementRef's own failure budget for its plugin (rules §12.3).
    pub plugin_failure: PolicyOverride,
}

impl ParsedStrategy {
    /// Parses and validates. An absent (or empty) `type` is `All`; the sub-object of the
    /// chosen type is read (absent means all defaults), the others are ignored as
    /// upstream ignores them.
    pub fn parse(s: &RolloutStrategy) -> Result<Self, Invalid> {
        let kind = parse_kind(s.type_.as_deref())?;
        let abort_all = parse_failure_strategy(s.failure_strategy.as_deref())?;
        let plugin = s.plugin.as_deref().map(parse_plugin_name).transpose()?;
        let plugin_failure = s
            .plugin_failure_policy
            .as_ref()
            .map(parse_override)
            .transpose()?
            .unwrap_or_default();
        let (mandatory, max_concurrency) = match kind {
            StrategyKind::All => (None, None),
            StrategyKind::Progressive => s.progressive.as_ref().map_or((None, None), |p| {
                (
                    p.mandatory_decision_groups.as_deref(),
                    p.max_concurrency.as_ref(),
                )
            }),
            StrategyKind::ProgressivePerGroup => {
                s.progressive_per_group.as_ref().map_or((None, None), |p| {
                    (p.mandatory_decision_groups.as_deref(), None)
                })
            }
        };
        let within = |e: Invalid| e.within(kind.field());
        let config = parse_config(s.chosen_config()).map_err(within)?;
        let max_concurrency = max_concurrency
            .map(|v| parse_size(v).map_err(|r| Invalid::new("maxConcurrency", r)))
            .transpose()
            .map_err(within)?;
        Ok(Self {
            kind,
            min_success_time: if kind == StrategyKind::All {
                SignedDuration::ZERO
            } else {
                config.min_success_time
            },
            deadline: config.deadline,
            max_failures: config.max_failures,
            max_concurrency,
            mandatory: mandatory.map(mandatory_groups).unwrap_or_default(),
            abort_all,
            plugin,
            plugin_failure,
        })
    }
}

fn parse_kind(t: Option<&str>) -> Result<StrategyKind, Invalid> {
    match t {
        None | Some("") | Some(TYPE_ALL) => Ok(StrategyKind::All),
        Some(TYPE_PROGRESSIVE) => Ok(StrategyKind::Progressive),
        Some(TYPE_PROGRESSIVE_PER_GROUP) => Ok(StrategyKind::ProgressivePerGroup),
        Some(other) => Err(Invalid::new(
            "type",
            format!(
                "unknown rollout strategy type {other:?}; expected {TYPE_ALL}, {TYPE_PROGRESSIVE} or {TYPE_PROGRESSIVE_PER_GROUP}"
            ),
        )),
    }
}

fn parse_failure_strategy(v: Option<&str>) -> Result<bool, Invalid> {
    match v {
        None => Ok(false),
        Some(FAILURE_STRATEGY_ABORT_ALL) => Ok(true),
        Some(other) => Err(Invalid::new(
            "failureStrategy",
            format!(
                "unknown failure strategy {other:?}; the only value is {FAILURE_STRATEGY_ABORT_ALL} (leave it out to stop on failure)"
            ),
        )),
    }
}

/// The fields every type shares, with upstream's defaults.
struct Config {
    min_success_time: SignedDuration,
    deadline: Deadline,
    max_failures: Size,
}

fn parse_config(c: Option<&RolloutConfig>) -> Result<Config, Invalid> {
    let min_success_time = match c.and_then(|c| c.min_success_time.as_deref()) {
        None => SignedDuration::ZERO,
        Some(s) => parse_go_duration(s).map_err(|r| Invalid::new("minSuccessTime", r))?,
    };
    let deadline = match c.and_then(|c| c.progress_deadline.as_deref()) {
        None => Deadline::None,
        Some(s) => parse_deadline(s).map_err(|r| Invalid::new("progressDeadline", r))?,
    };
    let max_failures = match c.and_then(|c| c.max_failures.as_ref()) {
        None => Size::default(),
        Some(v) => parse_size(v).map_err(|r| Invalid::new("maxFailures", r))?,
    };
    Ok(Config {
        min_success_time,
        deadline,
        max_failures,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: serde_json::Value) -> Result<ParsedStrategy, Invalid> {
        let s: RolloutStrategy = serde_json::from_value(v).expect("valid RolloutStrategy JSON");
        ParsedStrategy::parse(&s)
    }

    fn field_of(v: serde_json::Value) -> String {
        parse(v).expect_err("should be refused").field
    }

    #[test]
    fn absent_strategy_is_all_with_defaults() {
        let p = parse(serde_json::json!({})).unwrap();
        assert_eq!(p, ParsedStrategy::default());
        assert_eq!(
            parse(serde_json::json!({"type": ""})).unwrap().kind,
            StrategyKind::All
        );
    }

    #[test]
    fn progressive_fields() {
        let p = parse(serde_json::json!({
            "type": "Progressive",
            "progressive": {
                "minSuccessTime": "1m30s", "progressDeadline": "10m", "maxFailures": "20%",
                "maxConcurrency": 3,
                "mandatoryDecisionGroups": [{"groupName": "canary", "groupIndex": 4}, {"groupIndex": 2}, {}]
            },
            "failureStrategy": "AbortAll"
        }))
        .unwrap();
        assert_eq!(p.kind, StrategyKind::Progressive);
        assert_eq!(p.min_success_time, SignedDuration::from_secs(90));
        assert_eq!(p.deadline, Deadline::After(SignedDuration::from_secs(600)));
        assert_eq!(p.max_failures, Size::Percent(20));
        assert_eq!(p.max_concurrency, Some(Size::Count(3)));
        assert_eq!(
            p.mandatory,
            vec![
                MandatoryGroup::Name("canary".into()),
                MandatoryGroup::Index(2),
                MandatoryGroup::Index(0)
            ]
        );
        assert!(p.abort_all);
    }

    #[test]
    fn all_ignores_soak_but_validates_it() {
        let p = parse(
            serde_json::json!({"type": "All", "all": {"minSuccessTime": "5m", "maxFailures": 2}}),
        )
        .unwrap();
        assert_eq!(p.min_success_time, SignedDuration::ZERO);
        assert_eq!(p.max_failures, Size::Count(2));
        assert_eq!(
            field_of(serde_json::json!({"all": {"minSuccessTime": "5 minutes"}})),
            "all.minSuccessTime"
        );
    }

    #[test]
    fn other_types_settings_are_ignored() {
        let p = parse(serde_json::json!({
            "type": "ProgressivePerGroup",
            "progressive": {"maxConcurrency": "not a size"},
            "progressivePerGroup": {"progressDeadline": "0s"}
        }))
        .unwrap();
        assert_eq!(p.deadline, Deadline::After(SignedDuration::ZERO));
        assert_eq!(p.max_concurrency, None);
    }

    #[test]
    fn errors_name_the_field() {
        use serde_json::json;
        assert_eq!(field_of(json!({"type": "Canary"})), "type");
        assert_eq!(
            field_of(json!({"failureStrategy": "Rollback"})),
            "failureStrategy"
        );
        assert_eq!(field_of(json!({"failureStrategy": ""})), "failureStrategy");
        assert_eq!(
            field_of(json!({"type": "Progressive", "progressive": {"maxConcurrency": "3"}})),
            "progressive.maxConcurrency"
        );
        assert_eq!(
            field_of(
                json!({"type": "ProgressivePerGroup", "progressivePerGroup": {"maxFailures": "x"}})
            ),
            "progressivePerGroup.maxFailures"
        );
        assert_eq!(
            field_of(json!({"type": "Progressive", "progressive": {"progressDeadline": "2d"}})),
            "progressive.progressDeadline"
        );
        let e = parse(json!({"type": "Progressive", "progressive": {"maxConcurrency": "3"}}))
            .unwrap_err()
            .within("spec.placementRefs[0].rolloutStrategy");
        assert_eq!(
            e.field,
            "spec.placementRefs[0].rolloutStrategy.progressive.maxConcurrency"
        );
        assert!(e.reason.contains("'3'"), "{e}");
    }
}
