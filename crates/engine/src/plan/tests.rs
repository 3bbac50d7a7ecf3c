//! Table tests of single stages, on a pass built from a small hub (plain, synchronous):
//! the abort decision and the Progressing condition's text.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use mwrs_api::Time;
use mwrs_api::mwrs::{ABORT_TRIGGER_REQUESTED, AbortRecord, condition as mc};

use crate::rollout::{RolloutResult, RolloutStatus};

use super::abort::{AbortFailure, Breach};
use super::outcome::Outcome;
use super::*;
use mwrs_api::mwrs::{LocalPlacementReference, ManifestWorkReplicaSetSpec};
use mwrs_api::work::ManifestWorkTemplate;
use serde_json::json;

const STABLE: &str = "stable1";

fn t0() -> Timestamp {
    "2026-12-03T10:00:00Z".parse().unwrap()
}

/// MWRS `app`, one placementRef `p` of type All with AbortAll, its stable revision
/// `STABLE` when `current` says so.
fn mwrs(current: Option<&str>) -> ManifestWorkReplicaSet {
    let template = json!({"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "app", "namespace": "default"}, "data": {"v": "2"}}]}});
    let strategy = json!({"type": "All", "failureStrategy": "AbortAll"});
    let mut m = ManifestWorkReplicaSet::new(
        "app",
        ManifestWorkReplicaSetSpec {
            manifest_work_template: ManifestWorkTemplate::from_value(template).unwrap(),
            placement_refs: vec![LocalPlacementReference {
                name: "p".into(),
                rollout_strategy: Some(serde_json::from_value(strategy).unwrap()),
            }],
            ..Default::default()
        },
    );
    m.metadata.namespace = Some("ns".into());
    m.metadata.generation = Some(2);
    m.status = Some(ManifestWorkReplicaSetStatus {
        current_revision: current.map(str::to_string),
        ..Default::default()
    });
    m
}

fn stable_revision() -> RevisionView {
    let template = json!({"workload": {"manifests": []}});
    RevisionView {
        marks: Default::default(),
        name: format!("app-{STABLE}"),
        hash: STABLE.into(),
        revision: 1,
        digest: hash::digest(&template),
        template,
        created: Some(t0()),
        change_cause: None,
        generation: Some(1),
    }
}

fn report(cluster: &str, status: RolloutStatus) -> ClusterReport {
    ClusterReport {
        cluster: cluster.into(),
        placement: Arc::from("p"),
        group: None,
        revision: None,
        status,
        since: None,
        soak_until: None,
        note: None,
    }
}

/// One row of the abort decision table.
struct Row {
    current: Option<&'static str>,
    stable_stored: bool,
    /// The current revision is the update revision.
    current_is_update: bool,
    requested: bool,
    failed: bool,
    /// The status already records a user's abort of the update revision with nowhere to go.
    stopped: bool,
    want: &'static str,
}

fn state_word(s: &AbortState) -> String {
    match s {
        AbortState::None => "None".into(),
        AbortState::Starting(b) => format!("Starting({})", b.trigger()),
        AbortState::Held => "Held".into(),
        AbortState::Failed(f) => match f {
            AbortFailure::StoppedByRequest { .. } => "Failed(StoppedByRequest)".into(),
            AbortFailure::NoStableRevision { .. } => "Failed(NoStableRevision)".into(),
            AbortFailure::StablePruned { .. } => "Failed(StablePruned)".into(),
        },
    }
}

/// The hash of `m`'s template as a pass resolves it.
fn update_hash(m: &ManifestWorkReplicaSet, v: &validate::Validated, cfg: &PlanConfig) -> String {
    let o = Observed {
        mwrs: m,
        placements: &[],
        works: &[],
        revisions: &[],
        blocked: &[],
        taken_revision_names: &[],
    };
    let old = m.status.clone().unwrap_or_default();
    let pass = Pass::new(&o, OwnerKey::new("ns", "app"), old, v.clone(), t0(), cfg);
    pass.resolution.hash().to_string()
}

#[test]
fn the_abort_decision_table() {
    let rows = [
        // Nothing wrong, nothing asked.
        Row {
            current: Some(STABLE),
            stable_stored: true,
            current_is_update: false,
            requested: false,
            failed: false,
            stopped: false,
            want: "None",
        },
        // A breach of an AbortAll placementRef with a stable revision: the abort starts.
        Row {
            current: Some(STABLE),
            stable_stored: true,
            current_is_update: false,
            requested: false,
            failed: true,
            stopped: false,
            want: "Starting(MaxFailuresExceeded)",
        },
        // A request with a stable revision: the same, triggered by the user.
        Row {
            current: Some(STABLE),
            stable_stored: true,
            current_is_update: false,
            requested: true,
            failed: false,
            stopped: false,
            want: "Starting(Requested)",
        },
        // A breach wins over a request in the record.
        Row {
            current: Some(STABLE),
            stable_stored: true,
            current_is_update: false,
            requested: true,
            failed: true,
            stopped: false,
            want: "Starting(MaxFailuresExceeded)",
        },
        // Nothing to go back to: a request stops the rollout, a breach cannot abort.
        Row {
            current: None,
            stable_stored: false,
            current_is_update: false,
            requested: true,
            failed: false,
            stopped: false,
            want: "Failed(StoppedByRequest)",
        },
        Row {
            current: None,
            stable_stored: false,
            current_is_update: false,
            requested: false,
            failed: true,
            stopped: false,
            want: "Failed(NoStableRevision)",
        },
        // The stable revision's ControllerRevision is gone.
        Row {
            current: Some(STABLE),
            stable_stored: false,
            current_is_update: false,
            requested: false,
            failed: true,
            stopped: false,
            want: "Failed(StablePruned)",
        },
        // The update revision is the stable one: there is nothing to abort.
        Row {
            current: Some("UPDATE"),
            stable_stored: true,
            current_is_update: true,
            requested: true,
            failed: true,
            stopped: false,
            want: "None",
        },
        // A user's abort with nowhere to go keeps the rollout stopped, pass after pass.
        Row {
            current: None,
            stable_stored: false,
            current_is_update: false,
            requested: false,
            failed: false,
            stopped: true,
            want: "Failed(StoppedByRequest)",
        },
    ];
    for (i, row) in rows.iter().enumerate() {
        let mut m = mwrs(row.current);
        let revisions = if row.stable_stored {
            vec![stable_revision()]
        } else {
            vec![]
        };
        let cfg = PlanConfig::default();
        let validated = validate::validate(&m.spec, cfg.manifest_size_limit).unwrap();
        let update = update_hash(&m, &validated, &cfg);
        if row.current_is_update {
            m.status = Some(ManifestWorkReplicaSetStatus {
                current_revision: Some(update.clone()),
                ..Default::default()
            });
        }
        let old = m.status.clone().unwrap_or_default();
        let o = Observed {
            mwrs: &m,
            placements: &[],
            works: &[],
            revisions: &revisions,
            blocked: &[],
            taken_revision_names: &[],
        };
        let pass = Pass::new(&o, OwnerKey::new("ns", "app"), old, validated, t0(), &cfg);
        let memory = AbortMemory {
            aborted_time: None,
            last_abort: row.stopped.then(|| AbortRecord {
                trigger: ABORT_TRIGGER_REQUESTED.into(),
                time: Time(t0()),
                revision: update.clone(),
                reverted_to: None,
                timed_out_clusters: vec![],
                timed_out_count: 0,
                failed_clusters: vec![],
                failed_count: 0,
            }),
        };
        let hold = pass.hold(&memory, &update);
        let seen = Classified {
            reports: vec![report(
                "c1",
                if row.failed {
                    RolloutStatus::Failed
                } else {
                    RolloutStatus::Succeeded
                },
            )],
            results: vec![Some(RolloutResult::default())],
            settling: None,
        };
        let d = pass.decide_abort(&update, row.requested, &hold, &seen, memory.clone());
        assert_eq!(state_word(&d.state), row.want, "row {i}");
        let starting = matches!(d.state, AbortState::Starting(_));
        assert_eq!(
            d.memory.aborted_time.is_some(),
            starting,
            "row {i}: abortedTime only when an abort starts"
        );
        let new_record = d.memory.last_abort != memory.last_abort;
        assert_eq!(
            d.mark.is_some(),
            new_record,
            "row {i}: a new record marks the revision"
        );
        if starting {
            let record = d.memory.last_abort.unwrap();
            assert_eq!(record.reverted_to.as_deref(), Some(STABLE), "row {i}");
            assert_eq!(record.revision, update, "row {i}");
        }
    }
}

fn outcome(done: usize, desired: usize) -> Outcome {
    Outcome {
        desired,
        with_work: desired,
        failed: vec![],
        timed_out: vec![],
        in_flight: desired - done,
        done,
        breach: None,
        complete: false,
        target: "u2".into(),
        current: Some("s1".into()),
        unknown: vec![],
        notes: vec![],
    }
}

#[test]
fn the_progressing_condition_says_where_the_rollout_stands() {
    let cases: Vec<(Outcome, AbortState, bool, &str, &str, &str)> = vec![
        (
            outcome(1, 4),
            AbortState::None,
            false,
            "True",
            "NewRevisionCreated",
            "rolling out revision u2: 1 of 4 clusters done",
        ),
        (
            outcome(1, 4),
            AbortState::None,
            true,
            "Unknown",
            mc::REASON_ROLLOUT_PAUSED,
            "paused: revision u2 on 1 of 4 clusters",
        ),
        (
            Outcome {
                complete: true,
                ..outcome(4, 4)
            },
            AbortState::None,
            false,
            "False",
            mc::REASON_NEW_MANIFESTWORK_AVAILABLE,
            "revision u2 is available on all 4 clusters",
        ),
        (
            outcome(2, 4),
            AbortState::Held,
            false,
            "False",
            mc::REASON_ROLLOUT_ABORTED,
            "rolling back to revision s1: 2 of 4 clusters done; revision u2 is held",
        ),
        (
            outcome(4, 4),
            AbortState::Held,
            false,
            "False",
            mc::REASON_ROLLOUT_ABORTED,
            "rolled back to revision s1 on all 4 clusters; revision u2 is held until a retry, an undo or a new template",
        ),
        (
            outcome(1, 4),
            AbortState::Starting(Breach::Requested),
            false,
            "False",
            mc::REASON_ROLLOUT_ABORTED,
            "abort requested: reverting revision u2 to s1",
        ),
        (
            outcome(1, 4),
            AbortState::Failed(AbortFailure::StablePruned {
                stable: "s1".into(),
            }),
            false,
            "False",
            mc::REASON_ABORT_FAILED,
            "stable revision s1 is no longer in history; cannot revert",
        ),
        (
            Outcome {
                unknown: vec!["q".into()],
                ..outcome(1, 4)
            },
            AbortState::None,
            false,
            "True",
            "NewRevisionCreated",
            "rolling out revision u2: 1 of 4 known clusters done; not promoted while the decisions of placement q are unknown",
        ),
    ];
    for (i, (o, abort, paused, status, reason, message)) in cases.into_iter().enumerate() {
        let c = o.progressing(&abort, "u2", paused, "NewRevisionCreated");
        assert_eq!(
            (c.status.as_str(), c.reason, c.message.as_str()),
            (status, reason, message),
            "case {i}"
        );
    }
}
