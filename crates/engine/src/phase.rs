//! Where a rollout stands, read from the MWRS alone (its status, conditions and control
//! annotations): one word ([`Phase`]) and a one-line explanation. The CLI's STATUS column
//! and `rollout status -w`'s exit, and the controller's `rollout_info` metric, read it here.

use mwrs_api::labels;
use mwrs_api::mwrs::{ManifestWorkReplicaSet, condition as mwrs_condition};
use serde::Serialize;

/// Where a rollout stands, in one word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Phase {
    Complete,
    Progressing,
    Paused,
    /// Cannot go on until someone acts: a Placement missing or without clusters.
    Blocked,
    Aborted,
    Degraded,
    Invalid,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Complete => "Complete",
            Phase::Progressing => "Progressing",
            Phase::Paused => "Paused",
            Phase::Blocked => "Blocked",
            Phase::Aborted => "Aborted",
            Phase::Degraded => "Degraded",
            Phase::Invalid => "Invalid",
        }
    }

    /// Does `rollout status -w` stop here? The rollout ended, or waits for someone to act
    /// (paused, blocked).
    pub fn is_final(self) -> bool {
        self != Phase::Progressing
    }
}

/// The Progressing condition: (status, reason, message).
pub fn progressing(m: &ManifestWorkReplicaSet) -> Option<(&str, &str, &str)> {
    condition(m, mwrs_condition::PROGRESSING)
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

/// The value of annotation `key` on `m`.
pub(crate) fn annotation<'a>(m: &'a ManifestWorkReplicaSet, key: &str) -> Option<&'a str> {
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

/// The phase of the rollout and a one-line explanation.
pub fn phase(m: &ManifestWorkReplicaSet) -> (Phase, String) {
    let Some(status) = m.status.as_ref() else {
        return (Phase::Progressing, "not reconciled yet".into());
    };
    let (cond_status, reason, message) = progressing(m).unwrap_or(("", "", ""));
    if reason == mwrs_condition::REASON_INVALID_SPEC {
        return (Phase::Invalid, message.to_string());
    }
    if let Some(req) = pending_request(m) {
        return (
            Phase::Progressing,
            format!("{req} requested; waiting for the controller"),
        );
    }
    if let (Some(seen), Some(generation)) = (status.observed_generation, m.metadata.generation)
        && seen < generation
    {
        return (
            Phase::Progressing,
            format!("waiting for the controller to observe generation {generation}"),
        );
    }
    if status.aborted_time.is_some() || reason == mwrs_condition::REASON_ROLLOUT_ABORTED {
        return (Phase::Aborted, message.to_string());
    }
    if matches!(
        reason,
        mwrs_condition::REASON_PROGRESS_DEADLINE_EXCEEDED
            | mwrs_condition::REASON_MAX_FAILURES_EXCEEDED
            | mwrs_condition::REASON_ABORT_FAILED
    ) {
        return (Phase::Degraded, message.to_string());
    }
    if let Some((_, _, why)) =
        condition(m, mwrs_condition::PLACEMENT_VERIFIED).filter(|(s, _, _)| *s == "False")
    {
        return (Phase::Blocked, why.to_string());
    }
    let promoted =
        status.current_revision.is_some() && status.current_revision == status.update_revision;
    if cond_status == "False"
        && reason == mwrs_condition::REASON_NEW_MANIFESTWORK_AVAILABLE
        && promoted
    {
        return (Phase::Complete, message.to_string());
    }
    if is_paused(m) {
        return (Phase::Paused, message.to_string());
    }
    if reason == mwrs_condition::REASON_ROLLOUT_PAUSED {
        return (
            Phase::Progressing,
            "resume requested; waiting for the controller".into(),
        );
    }
    (Phase::Progressing, message.to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

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
    fn phases_from_conditions() {
        let s = |st: serde_json::Value| phase(&mwrs(st, json!({}))).0;
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
            Phase::Complete
        );
        // Not promoted yet: still in progress whatever the reason says.
        assert_eq!(
            s(base(
                progressing("False", "NewManifestWorkAvailable"),
                json!({})
            )),
            Phase::Progressing
        );
        assert_eq!(
            s(base(progressing("True", "NewRevisionCreated"), json!({}))),
            Phase::Progressing
        );
        assert_eq!(
            s(base(
                progressing("False", "ProgressDeadlineExceeded"),
                json!({})
            )),
            Phase::Degraded
        );
        assert_eq!(
            s(base(progressing("False", "AbortFailed"), json!({}))),
            Phase::Degraded
        );
        assert_eq!(
            s(base(
                progressing("False", "RolloutAborted"),
                json!({"abortedTime": "2026-01-01T00:00:00Z"})
            )),
            Phase::Aborted
        );
        let paused = base(progressing("Unknown", "RolloutPaused"), json!({}));
        let with_pause = json!({labels::CONTROL_PAUSE: "true"});
        assert_eq!(phase(&mwrs(paused.clone(), with_pause)).0, Phase::Paused);
        // The annotation is gone: a resume the controller has not seen yet.
        assert_eq!(s(paused), Phase::Progressing);
        let placement_missing = json!([{"type": "PlacementVerified", "status": "False",
            "reason": "PlacementDecisionNotFound", "message": "placement p not found",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]);
        assert_eq!(s(base(placement_missing, json!({}))), Phase::Blocked);
        assert_eq!(
            s(base(progressing("False", "InvalidSpec"), json!({}))),
            Phase::Invalid
        );
        // A status of an older generation says nothing about the new spec.
        assert_eq!(
            s(base(
                progressing("False", "NewManifestWorkAvailable"),
                json!({"currentRevision": "b", "observedGeneration": 1})
            )),
            Phase::Progressing
        );
    }

    #[test]
    fn a_pending_request_is_not_the_old_state() {
        let st = json!({"observedGeneration": 2, "currentRevision": "a", "updateRevision": "b",
            "abortedTime": "2026-01-01T00:00:00Z",
            "conditions": progressing("False", "RolloutAborted"),
            "handledControls": {"retry": "t1"}});
        let m = mwrs(st.clone(), json!({labels::CONTROL_RETRY: "t2"}));
        assert_eq!(phase(&m).0, Phase::Progressing);
        let m = mwrs(st, json!({labels::CONTROL_RETRY: "t1"}));
        assert_eq!(phase(&m).0, Phase::Aborted);
    }
}
