//! Where a rollout stands, read from the MWRS's status: the one-word state of `get`'s
//! STATUS column and of `rollout status -w`'s exit, and progress per placement and per
//! cluster from the planner's cluster reports.

use std::collections::BTreeMap;

use jiff::Timestamp;
use mwrs_api::labels;
use mwrs_api::mwrs::{AbortRecord, ManifestWorkReplicaSet, condition as mc};
use mwrs_engine::plan::ClusterReport;
use mwrs_engine::rollout::RolloutStatus;
use serde::Serialize;

/// The STATUS column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum State {
    Complete,
    Progressing,
    Paused,
    /// Cannot go on until someone acts: a Placement missing or without clusters.
    Blocked,
    Aborted,
    Degraded,
    Invalid,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Complete => "Complete",
            State::Progressing => "Progressing",
            State::Paused => "Paused",
            State::Blocked => "Blocked",
            State::Aborted => "Aborted",
            State::Degraded => "Degraded",
            State::Invalid => "Invalid",
        }
    }

    /// Does `rollout status -w` stop here? The rollout ended, or waits for someone to act
    /// (paused, blocked).
    pub fn is_final(self) -> bool {
        self != State::Progressing
    }
}

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

/// The Progressing condition: (status, reason, message).
pub fn progressing(m: &ManifestWorkReplicaSet) -> Option<(&str, &str, &str)> {
    condition(m, mc::PROGRESSING)
}

pub fn condition<'a>(
    m: &'a ManifestWorkReplicaSet,
    type_: &str,
) -> Option<(&'a str, &'a str, &'a str)> {
    m.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.as_str(), c.reason.as_str(), c.message.as_str()))
}

fn annotation<'a>(m: &'a ManifestWorkReplicaSet, key: &str) -> Option<&'a str> {
    m.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// A manual request (abort or retry) the controller has not acted on yet.
pub fn pending_request(m: &ManifestWorkReplicaSet) -> Option<&'static str> {
    let handled = m
        .status
        .as_ref()
        .and_then(|s| s.handled_controls.clone())
        .unwrap_or_default();
    if let Some(v) = annotation(m, labels::CONTROL_ABORT)
        && handled.abort.as_deref() != Some(v)
    {
        return Some("abort");
    }
    if let Some(v) = annotation(m, labels::CONTROL_RETRY)
        && handled.retry.as_deref() != Some(v)
    {
        return Some("retry");
    }
    None
}

pub fn is_paused(m: &ManifestWorkReplicaSet) -> bool {
    annotation(m, labels::CONTROL_PAUSE) == Some("true")
}

/// The state of the rollout and a one-line explanation.
pub fn state(m: &ManifestWorkReplicaSet) -> (State, String) {
    let Some(status) = m.status.as_ref() else {
        return (State::Progressing, "not reconciled yet".into());
    };
    let (cond_status, reason, message) = progressing(m).unwrap_or(("", "", ""));
    if reason == mc::REASON_INVALID_SPEC {
        return (State::Invalid, message.to_string());
    }
    if let Some(req) = pending_request(m) {
        return (
            State::Progressing,
            format!("{req} requested; waiting for the controller"),
        );
    }
    if let (Some(seen), Some(generation)) = (status.observed_generation, m.metadata.generation)
        && seen < generation
    {
        return (
            State::Progressing,
            format!("waiting for the controller to observe generation {generation}"),
        );
    }
    if status.aborted_time.is_some() || reason == mc::REASON_ROLLOUT_ABORTED {
        return (State::Aborted, message.to_string());
    }
    if matches!(
        reason,
        mc::REASON_PROGRESS_DEADLINE_EXCEEDED
            | mc::REASON_MAX_FAILURES_EXCEEDED
            | mc::REASON_ABORT_FAILED
    ) {
        return (State::Degraded, message.to_string());
    }
    if let Some((_, _, why)) =
        condition(m, mc::PLACEMENT_VERIFIED).filter(|(s, _, _)| *s == "False")
    {
        return (State::Blocked, why.to_string());
    }
    let promoted =
        status.current_revision.is_some() && status.current_revision == status.update_revision;
    if cond_status == "False" && reason == mc::REASON_NEW_MANIFESTWORK_AVAILABLE && promoted {
        return (State::Complete, message.to_string());
    }
    if is_paused(m) {
        return (State::Paused, message.to_string());
    }
    if reason == mc::REASON_ROLLOUT_PAUSED {
        return (
            State::Progressing,
            "resume requested; waiting for the controller".into(),
        );
    }
    (State::Progressing, message.to_string())
}

/// Counts of one placement's clusters by state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementProgress {
    pub name: String,
    pub desired: usize,
    /// Succeeded on the revision being rolled out (the update revision, or the stable one
    /// while an abort holds).
    pub done: usize,
    pub to_apply: usize,
    pub progressing: usize,
    pub succeeded: usize,
    pub failed: usize,
    pub time_out: usize,
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
                succeeded: done,
                failed,
                time_out: 0,
            }
        })
        .collect()
}

/// Reports ordered for reading: clusters needing attention first (TimeOut, Failed,
/// Progressing, ToApply), done ones last, by name within each.
pub fn ordered(reports: &[ClusterReport]) -> Vec<&ClusterReport> {
    let rank = |s: RolloutStatus| match s {
        RolloutStatus::TimeOut => 0,
        RolloutStatus::Failed => 1,
        RolloutStatus::Progressing => 2,
        RolloutStatus::ToApply => 3,
        RolloutStatus::Skip => 4,
        RolloutStatus::Succeeded => 5,
    };
    let mut v: Vec<&ClusterReport> = reports.iter().collect();
    v.sort_by(|a, b| (rank(a.status), &a.cluster).cmp(&(rank(b.status), &b.cluster)));
    v
}

/// A cluster as `rollout status -o json` prints it.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterLine {
    pub cluster: String,
    pub placement: String,
    pub revision: Option<String>,
    pub state: String,
    pub since: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub soak_until: Option<Timestamp>,
    /// Why it is not done: the agent's apply error, its silence, a name taken.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl From<&ClusterReport> for ClusterLine {
    fn from(r: &ClusterReport) -> Self {
        Self {
            cluster: r.cluster.clone(),
            placement: r.placement.to_string(),
            revision: r.revision.as_deref().map(str::to_string),
            state: r.status.as_str().to_string(),
            since: r.since,
            soak_until: r.soak_until,
            note: r.note.clone(),
        }
    }
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

    fn mwrs(status: serde_json::Value, annotations: serde_json::Value) -> ManifestWorkReplicaSet {
        serde_json::from_value(json!({
            "apiVersion": "work.open-cluster-management.io/v1alpha1",
            "kind": "ManifestWorkReplicaSet",
            "metadata": {"name": "app", "namespace": "ns", "generation": 2,
                "annotations": annotations},
            "spec": {"manifestWorkTemplate": {}, "placementRefs": [{"name": "p"}]},
            "status": status,
        }))
        .unwrap()
    }

    fn progressing(status: &str, reason: &str) -> serde_json::Value {
        json!([{"type": "Progressing", "status": status, "reason": reason, "message": "m",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}])
    }

    #[test]
    fn states_from_conditions() {
        let s = |st: serde_json::Value| state(&mwrs(st, json!({}))).0;
        let base = |cond: serde_json::Value, extra: serde_json::Value| {
            let mut v = json!({"observedGeneration": 2, "currentRevision": "a",
                "updateRevision": "b", "conditions": cond});
            v.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            v
        };
        assert_eq!(
            s(base(
                progressing("False", "NewManifestWorkAvailable"),
                json!({"currentRevision": "b"})
            )),
            State::Complete
        );
        // Not promoted yet: still in progress whatever the reason says.
        assert_eq!(
            s(base(
                progressing("False", "NewManifestWorkAvailable"),
                json!({})
            )),
            State::Progressing
        );
        assert_eq!(
            s(base(progressing("True", "NewRevisionCreated"), json!({}))),
            State::Progressing
        );
        assert_eq!(
            s(base(
                progressing("False", "ProgressDeadlineExceeded"),
                json!({})
            )),
            State::Degraded
        );
        assert_eq!(
            s(base(progressing("False", "AbortFailed"), json!({}))),
            State::Degraded
        );
        assert_eq!(
            s(base(
                progressing("False", "RolloutAborted"),
                json!({"abortedTime": "2026-01-01T00:00:00Z"})
            )),
            State::Aborted
        );
        let paused = base(progressing("Unknown", "RolloutPaused"), json!({}));
        let with_pause = json!({labels::CONTROL_PAUSE: "true"});
        assert_eq!(state(&mwrs(paused.clone(), with_pause)).0, State::Paused);
        // The annotation is gone: a resume the controller has not seen yet.
        assert_eq!(s(paused), State::Progressing);
        let placement_missing = json!([{"type": "PlacementVerified", "status": "False",
            "reason": "PlacementDecisionNotFound", "message": "placement p not found",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]);
        assert_eq!(s(base(placement_missing, json!({}))), State::Blocked);
        assert_eq!(
            s(base(progressing("False", "InvalidSpec"), json!({}))),
            State::Invalid
        );
        // A status of an older generation says nothing about the new spec.
        assert_eq!(
            s(base(
                progressing("False", "NewManifestWorkAvailable"),
                json!({"currentRevision": "b", "observedGeneration": 1})
            )),
            State::Progressing
        );
    }

    #[test]
    fn a_pending_request_is_not_the_old_state() {
        let st = json!({"observedGeneration": 2, "currentRevision": "a", "updateRevision": "b",
            "abortedTime": "2026-01-01T00:00:00Z",
            "conditions": progressing("False", "RolloutAborted"),
            "handledControls": {"retry": "t1"}});
        let m = mwrs(st.clone(), json!({labels::CONTROL_RETRY: "t2"}));
        assert_eq!(state(&m).0, State::Progressing);
        let m = mwrs(st, json!({labels::CONTROL_RETRY: "t1"}));
        assert_eq!(state(&m).0, State::Aborted);
    }
}
