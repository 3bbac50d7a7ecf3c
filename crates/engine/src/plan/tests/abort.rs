//! Stage 4: the abort decision table.

use mwrs_api::Time;
use mwrs_api::mwrs::{ABORT_TRIGGER_REQUESTED, AbortRecord, ManifestWorkReplicaSetStatus};

use crate::rollout::{RolloutResult, RolloutStatus};

use super::super::abort::{AbortFailure, AbortMemory, AbortState};
use super::super::classify::Classified;
use super::{Fixture, STABLE, mwrs, report, t0};

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
        let mut f = Fixture::new(mwrs(row.current), &[]);
        if !row.stable_stored {
            f.revisions.clear();
        }
        let update = f.update();
        if row.current_is_update {
            f.mwrs.status = Some(ManifestWorkReplicaSetStatus {
                current_revision: Some(update.clone()),
                ..Default::default()
            });
        }
        let o = f.observed();
        let pass = f.pass(&o);
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
            verdicts: vec![Some(RolloutResult::default())],
            settling: None,
            questions: Default::default(),
            judged: Default::default(),
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
