//! Progress as the CLI shows it: per placement and per cluster from the planner's cluster
//! reports (or the counts the controller publishes), and the last abort in one line. The
//! one-word phase is the engine's ([`mwrs_engine::phase`]).

use std::collections::BTreeMap;

use jiff::Timestamp;
use mwrs_api::mwrs::{AbortRecord, ManifestWorkReplicaSet};
use mwrs_api::rollout::RolloutStrategy;
use mwrs_engine::plan::ClusterReport;
use mwrs_engine::rollout::RolloutStatus;
use serde::Serialize;

use crate::budget::BudgetLine;

/// The last abort in one line: "ProgressDeadlineExceeded 3m ago: revision X went back to
/// Y; timed out: a, b; degraded: c (+2 more)".
pub fn abort_line(a: &AbortRecord, now: Timestamp) -> String {
    let outcome = match &a.reverted_to {
        Some(to) => format!("revision {} went back to {to}", a.revision),
        None => format!(
            "revision {} stopped where it was (no stable revision)",
            a.revision
        ),
    };
    let mut line = format!(
        "{} {} ago: {outcome}",
        a.trigger,
        crate::output::age(Some(a.time.0), now)
    );
    for (what, names, count) in [
        ("timed out", &a.timed_out_clusters, a.timed_out_count),
        ("degraded", &a.failed_clusters, a.failed_count),
    ] {
        if count == 0 {
            continue;
        }
        line.push_str(&format!("; {what}: {}", names.join(", ")));
        let more = count - names.len() as i64;
        if more > 0 {
            line.push_str(&format!(" (+{more} more)"));
        }
    }
    line
}

/// Counts of one placement's clusters by state.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementProgress {
    pub name: String,
    pub desired: usize,
    /// Succeeded on the revision being rolled out (the update revision, or the stable one
    /// while an abort holds).
    pub done: usize,
    pub to_apply: usize,
    pub progressing: usize,
    /// Done by their agents, waiting for their rollout plugin's SUCCEEDED.
    pub validating: usize,
    pub succeeded: usize,
    pub failed: usize,
    pub time_out: usize,
    /// The placementRef's `rolloutStrategy` as the spec gives it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strategy: Option<RolloutStrategy>,
    /// What its clusters hold of the strategy's limits, as the engine counts them (none
    /// while an abort holds, or when the clusters cannot be read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetLine>,
}

/// Per placementRef (in spec order), counts from the planner's reports.
pub fn placements(m: &ManifestWorkReplicaSet, reports: &[ClusterReport]) -> Vec<PlacementProgress> {
    let mut by: BTreeMap<&str, PlacementProgress> = BTreeMap::new();
    for r in reports {
        let p = by.entry(&*r.placement).or_default();
        p.desired += 1;
        match r.status {
            RolloutStatus::ToApply | RolloutStatus::Skip => p.to_apply += 1,
            RolloutStatus::Progressing => p.progressing += 1,
            RolloutStatus::Validating => p.validating += 1,
            RolloutStatus::Succeeded => {
                p.succeeded += 1;
                if r.soak_until.is_none() {
                    p.done += 1;
                }
            }
            RolloutStatus::Failed => p.failed += 1,
            RolloutStatus::TimeOut => p.time_out += 1,
        }
    }
    m.spec
        .placement_refs
        .iter()
        .map(|r| PlacementProgress {
            name: r.name.clone(),
            strategy: r.rollout_strategy.clone(),
            ..by.remove(r.name.as_str()).unwrap_or_default()
        })
        .collect()
}

/// Per placementRef, the counts the controller publishes in `status.placementSummary`,
/// for a reader who cannot see the ManifestWorks: done is `updated` (succeeded on the
/// update revision), or while an abort holds `available` (on the stable revision, which
/// the summary then counts); failed is `degraded`; timeouts are not told apart.
pub fn published_placements(m: &ManifestWorkReplicaSet) -> Vec<PlacementProgress> {
    let status = m.status.clone().unwrap_or_default();
    let reverting = status.aborted_time.is_some();
    let count = |n: i64| usize::try_from(n).unwrap_or(0);
    status
        .placement_summary
        .iter()
        .map(|p| {
            let s = &p.summary;
            let desired = count(s.desired_total);
            let done = count(if reverting { s.available } else { s.updated });
            let progressing = count(s.progressing);
            let failed = count(s.degraded);
            PlacementProgress {
                name: p.name.clone(),
                desired,
                done,
                to_apply: desired.saturating_sub(done + progressing + failed),
                progressing,
                validating: 0,
                succeeded: done,
                failed,
                time_out: 0,
                budget: None,
                strategy: m
                    .spec
                    .placement_refs
                    .iter()
                    .find(|r| r.name == p.name)
                    .and_then(|r| r.rollout_strategy.clone()),
            }
        })
        .collect()
}

/// Reports ordered for reading: clusters needing attention first (TimeOut, Failed,
/// Progressing, Validating, ToApply), done ones last, by name within each.
pub fn ordered(reports: &[ClusterReport]) -> Vec<&ClusterReport> {
    let rank = |s: RolloutStatus| match s {
        RolloutStatus::TimeOut => 0,
        RolloutStatus::Failed => 1,
        RolloutStatus::Progressing => 2,
        RolloutStatus::Validating => 3,
        RolloutStatus::ToApply => 4,
        RolloutStatus::Skip => 5,
        RolloutStatus::Succeeded => 6,
    };
    let mut v: Vec<&ClusterReport> = reports.iter().collect();
    v.sort_by(|a, b| (rank(a.status), &a.cluster).cmp(&(rank(b.status), &b.cluster)));
    v
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn an_abort_in_one_line() {
        let now: Timestamp = "2026-12-03T10:03:00Z".parse().unwrap();
        let record: AbortRecord = serde_json::from_value(json!({
            "trigger": "ProgressDeadlineExceeded", "time": "2026-12-03T10:00:00Z",
            "revision": "b2", "revertedTo": "a1",
            "timedOutClusters": ["c1", "c2"], "timedOutCount": 5,
            "failedClusters": ["c9"], "failedCount": 1}))
        .unwrap();
        assert_eq!(
            abort_line(&record, now),
            "ProgressDeadlineExceeded 3m ago: revision b2 went back to a1; timed out: c1, \
             c2 (+3 more); degraded: c9"
        );
        let stopped: AbortRecord = serde_json::from_value(json!({
            "trigger": "Requested", "time": "2026-12-03T10:02:00Z", "revision": "b2"}))
        .unwrap();
        assert_eq!(
            abort_line(&stopped, now),
            "Requested 60s ago: revision b2 stopped where it was (no stable revision)"
        );
    }
}
