//! Stage 6's text: the Progressing condition from a rollout's outcome.

use mwrs_api::mwrs::condition as mwrs_condition;

use super::super::abort::{AbortFailure, AbortState, Breach};
use super::super::outcome::Outcome;

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
        validating: vec![],
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
            mwrs_condition::REASON_ROLLOUT_PAUSED,
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
            mwrs_condition::REASON_NEW_MANIFESTWORK_AVAILABLE,
            "revision u2 is available on all 4 clusters",
        ),
        (
            outcome(2, 4),
            AbortState::Held,
            false,
            "False",
            mwrs_condition::REASON_ROLLOUT_ABORTED,
            "rolling back to revision s1: 2 of 4 clusters done; revision u2 is held",
        ),
        (
            outcome(4, 4),
            AbortState::Held,
            false,
            "False",
            mwrs_condition::REASON_ROLLOUT_ABORTED,
            "rolled back to revision s1 on all 4 clusters; revision u2 is held until a retry, an undo or a new template",
        ),
        (
            outcome(1, 4),
            AbortState::Starting(Breach::Requested),
            false,
            "False",
            mwrs_condition::REASON_ROLLOUT_ABORTED,
            "abort requested: reverting revision u2 to s1",
        ),
        (
            outcome(1, 4),
            AbortState::Failed(AbortFailure::StablePruned {
                stable: "s1".into(),
            }),
            false,
            "False",
            mwrs_condition::REASON_ABORT_FAILED,
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
