//! A placementRef's budget as a reader shows it ([`BudgetLine`]): the strategy, the
//! decision group it is counted in, the slots in flight and the failures against their
//! limits, and the line `rollout status` prints.

use jiff::Timestamp;
use mwrs_api::rollout::RolloutStrategy;
use mwrs_engine::rollout::{Budget, ParsedStrategy, StrategyKind};
use serde::Serialize;

use crate::output::age;

/// A decision group: its name (empty when it has none) and index.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct GroupLine {
    pub name: String,
    pub index: i32,
}

/// A placementRef's budget as the rollout engine counts it now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BudgetLine {
    /// The strategy's type.
    pub strategy: String,
    /// The decision group the limits are counted in, for strategies that walk groups.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<GroupLine>,
    /// Clusters holding a slot: progressing, validating, failed within the deadline,
    /// succeeded and still soaking.
    pub in_flight: usize,
    /// `maxConcurrency` resolved (none: no limit of its own).
    pub max_concurrency: Option<usize>,
    pub failures: usize,
    /// `maxFailures` resolved (none: failures never stop the rollout).
    pub max_failures: Option<usize>,
    /// The earliest progress deadline among the clusters in flight (none for a cluster a
    /// plugin holds).
    pub next_deadline: Option<Timestamp>,
    /// The line `rollout status` prints, without the countdown to `nextDeadline`.
    pub text: String,
}

impl BudgetLine {
    pub fn new(b: &Budget, strategy: Option<&RolloutStrategy>) -> Self {
        // The engine's reading of the type ("" and absent are All); the knobs as written.
        let kind = strategy
            .and_then(|s| ParsedStrategy::parse(s).ok())
            .map_or(StrategyKind::All, |p| p.kind)
            .as_str()
            .to_string();
        let config = strategy.and_then(RolloutStrategy::chosen_config);
        let group = b.group.as_ref().map(|g| GroupLine {
            name: g.name.clone(),
            index: g.index,
        });
        let mut parts = vec![match &group {
            Some(g) if g.name.is_empty() => format!("{kind}, group {}", g.index),
            Some(g) => format!("{kind}, group {} ({})", g.name, g.index),
            None => kind.clone(),
        }];
        parts.push(match b.max_concurrency {
            Some(n) => format!("{} in flight of maxConcurrency {n}", b.in_flight),
            None => format!("{} in flight", b.in_flight),
        });
        parts.push(match b.max_failures {
            Some(n) => format!("failures {} of maxFailures {n}", b.failures),
            None => format!("failures {} (never stop it)", b.failures),
        });
        // As written, where they say something: "" and "0" are the defaults.
        let said =
            |d: &Option<String>| d.clone().filter(|d| !matches!(d.as_str(), "" | "0" | "0s"));
        if let Some(c) = config {
            if let Some(d) = said(&c.progress_deadline) {
                parts.push(format!("progressDeadline {d}"));
            }
            if let Some(d) = said(&c.min_success_time) {
                parts.push(format!("minSuccessTime {d}"));
            }
        }
        Self {
            strategy: kind,
            group,
            in_flight: b.in_flight,
            max_concurrency: b.max_concurrency,
            failures: b.failures,
            max_failures: b.max_failures,
            next_deadline: b.next_deadline,
            text: parts.join(" · "),
        }
    }

    /// [`BudgetLine::text`] with the countdown to the next deadline at `now`.
    pub fn at(&self, now: Timestamp) -> String {
        match self.next_deadline {
            Some(t) if t > now => {
                format!("{} (the first passes in {})", self.text, age(Some(now), t))
            }
            Some(_) => format!("{} (passed)", self.text),
            None => self.text.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mwrs_engine::rollout::GroupKey;
    use serde_json::json;

    #[test]
    fn a_budget_line_says_the_resolved_limits() {
        let strategy: RolloutStrategy = serde_json::from_value(json!({"type": "Progressive",
            "progressive": {"maxConcurrency": "10%", "maxFailures": "5%",
                "progressDeadline": "15s"}}))
        .unwrap();
        let now: Timestamp = "2026-12-03T10:00:00Z".parse().unwrap();
        let budget = Budget {
            group: None,
            in_flight: 210,
            max_concurrency: Some(500),
            failures: 57,
            max_failures: Some(250),
            next_deadline: Some(now + jiff::SignedDuration::from_secs(9)),
        };
        let line = BudgetLine::new(&budget, Some(&strategy));
        assert_eq!(
            line.at(now),
            "Progressive · 210 in flight of maxConcurrency 500 · failures 57 of maxFailures 250 · \
             progressDeadline 15s (the first passes in 9s)"
        );
        let per_group = Budget {
            group: Some(GroupKey {
                name: "canary".into(),
                index: 0,
            }),
            max_concurrency: None,
            next_deadline: None,
            ..budget
        };
        let strategy: RolloutStrategy =
            serde_json::from_value(json!({"type": "ProgressivePerGroup"})).unwrap();
        assert_eq!(
            BudgetLine::new(&per_group, Some(&strategy)).at(now),
            "ProgressivePerGroup, group canary (0) · 210 in flight · failures 57 of maxFailures 250"
        );
        let all = Budget {
            max_concurrency: None,
            max_failures: None,
            next_deadline: None,
            ..Budget::default()
        };
        assert_eq!(
            BudgetLine::new(&all, None).text,
            "All · 0 in flight · failures 0 (never stop it)"
        );
    }
}
