//! Stage 6: the status a pass composes from what the stages before it decided, and the
//! Events its changes make.

use mwrs_api::labels;
use mwrs_api::mwrs::{ManifestWorkReplicaSetStatus, condition as mwrs_condition};
use mwrs_api::{Condition, Time};

use super::super::status::{StatusUpdate, blocked_clusters, transitions};
use super::super::{BlockedWrite, Observation, RevisionChange};
use super::{Fixture, Reported, STABLE, mwrs, secs, t0};

fn status_update(f: &Fixture) -> StatusUpdate {
    let o = f.observed();
    let pass = f.pass(&o);
    let (observation, abort, _) = pass.decide();
    let Observation {
        revision,
        controls,
        hold,
        seen,
        ..
    } = &observation;
    pass.status_update(revision, controls, hold, seen, &abort)
}

fn reasons(update: &StatusUpdate) -> Vec<&str> {
    update.events.iter().map(|e| e.reason.as_str()).collect()
}

fn condition(type_: &str, status: &str, reason: &str, message: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        last_transition_time: Time(t0()),
        observed_generation: Some(2),
    }
}

fn with_conditions(list: Vec<Condition>) -> ManifestWorkReplicaSetStatus {
    ManifestWorkReplicaSetStatus {
        conditions: Some(list),
        ..Default::default()
    }
}

#[test]
fn a_fleet_done_on_the_update_revision_makes_it_current_and_marks_it_completed() {
    let mut f = Fixture::new(mwrs(Some(STABLE)), &["c1", "c2"]);
    let update = f.store_update();
    f.work("c1", &update, secs(60), Reported::Done);
    f.work("c2", &update, secs(60), Reported::Done);
    let s = status_update(&f);
    assert_eq!(s.status.current_revision.as_deref(), Some(update.as_str()));
    assert_eq!(s.status.summary.desired_total, 2);
    assert_eq!(s.status.summary.updated, 2);
    match &s.mark {
        Some(RevisionChange::Mark {
            name,
            annotations,
            resource_version,
        }) => {
            assert_eq!(*name, format!("app-{update}"));
            assert_eq!(*resource_version, Some(format!("rv-{update}")));
            assert_eq!(
                annotations.get(labels::REVISION_COMPLETED_AT),
                Some(&t0().to_string())
            );
        }
        other => panic!("want the completed-at mark, got {other:?}"),
    }
    // One Event per condition the status had not held before, none of them a warning.
    assert_eq!(
        reasons(&s),
        [
            mwrs_condition::REASON_AS_EXPECTED,
            mwrs_condition::REASON_AS_EXPECTED,
            mwrs_condition::REASON_COMPLETE,
            mwrs_condition::REASON_NEW_MANIFESTWORK_AVAILABLE,
        ],
        "{:?}",
        s.events
    );
    assert!(s.events.iter().all(|e| !e.warning));
}

#[test]
fn a_pass_that_finds_nothing_new_reports_the_same_status_and_no_event() {
    let mut f = Fixture::new(mwrs(Some(STABLE)), &["c1", "c2"]);
    let update = f.store_update();
    f.work("c1", &update, secs(60), Reported::Done);
    f.work("c2", STABLE, secs(600), Reported::Done);
    let first = status_update(&f);
    assert!(!first.events.is_empty());
    f.mwrs.status = Some(first.status.clone());
    let second = status_update(&f);
    assert_eq!(second.status, first.status);
    assert!(second.events.is_empty(), "{:?}", second.events);
    assert!(second.mark.is_none());
}

#[test]
fn an_abort_starting_is_announced_after_the_condition_changes() {
    let mut f = Fixture::new(mwrs(Some(STABLE)), &["c1", "c2"]);
    let update = f.store_update();
    f.work("c1", &update, secs(60), Reported::Degraded);
    f.work("c2", STABLE, secs(600), Reported::Done);
    let s = status_update(&f);
    assert!(s.status.aborted_time.is_some(), "{:?}", s.status);
    let last = s.events.last().expect("events");
    assert_eq!(last.reason, mwrs_condition::EVENT_ABORT_STARTED);
    assert!(last.warning);
    assert_eq!(
        last.message,
        format!("reverting every cluster from revision {update} to {STABLE}")
    );
    assert!(
        s.events[..s.events.len() - 1]
            .iter()
            .all(|e| e.reason != mwrs_condition::EVENT_ABORT_STARTED)
    );
}

#[test]
fn only_a_changed_status_or_reason_is_an_event_and_failures_are_warnings() {
    let old = with_conditions(vec![
        condition("Progressing", "True", "FoundNewRevision", "1 of 3"),
        condition("RolledOut", "False", "Progressing", "x"),
    ]);
    let new = with_conditions(vec![
        // Only the message moved: no Event.
        condition("Progressing", "True", "FoundNewRevision", "2 of 3"),
        condition(
            "RolledOut",
            "False",
            mwrs_condition::REASON_MAX_FAILURES_EXCEEDED,
            "c1 failed",
        ),
        // Not held before: an Event.
        condition(
            "PlacementVerified",
            "True",
            "AsExpected",
            "3 clusters selected",
        ),
    ]);
    let events = transitions(&old, &new);
    let seen: Vec<(&str, &str, bool)> = events
        .iter()
        .map(|e| (e.reason.as_str(), e.message.as_str(), e.warning))
        .collect();
    assert_eq!(
        seen,
        [
            (
                mwrs_condition::REASON_MAX_FAILURES_EXCEEDED,
                "RolledOut False: c1 failed",
                true
            ),
            (
                "AsExpected",
                "PlacementVerified True: 3 clusters selected",
                false
            ),
        ]
    );
}

#[test]
fn blocked_clusters_are_published_sorted_and_at_most_fifty() {
    let blocked: Vec<BlockedWrite> = (0..60)
        .rev()
        .map(|i| BlockedWrite {
            cluster: format!("c{i:02}"),
            why: "forbidden".into(),
        })
        .collect();
    let published = blocked_clusters(&blocked);
    assert_eq!(published.len(), 50);
    assert_eq!(published[0].cluster, "c00");
    assert_eq!(published[49].cluster, "c49");
    assert!(published.iter().all(|b| b.message == "forbidden"));
}

#[test]
fn an_abort_completing_is_timed_once_from_its_start_to_each_revert() {
    let mut f = Fixture::new(mwrs(Some(STABLE)), &["c1", "c2", "c3"]);
    let update = f.store_update();
    f.work("c1", &update, secs(200), Reported::Degraded);
    f.work("c2", &update, secs(200), Reported::Done);
    f.work("c3", STABLE, secs(600), Reported::Done);
    let started = status_update(&f);
    assert!(started.back_to_stable.is_none());
    let mut status = started.status;
    let at = Time(t0() - secs(100));
    status.aborted_time = Some(at.clone());
    status.last_abort.as_mut().expect("an abort record").time = at;
    f.mwrs.status = Some(status);
    // c1 and c2 are reverted and reported back 70 s and 40 s after the abort; c3 never
    // left the stable revision.
    f.works.clear();
    f.work("c1", STABLE, secs(30), Reported::Done);
    f.work("c2", STABLE, secs(60), Reported::Done);
    f.work("c3", STABLE, secs(600), Reported::Done);
    let done = status_update(&f);
    assert!(reasons(&done).contains(&mwrs_condition::EVENT_ABORT_COMPLETED));
    let timed = done.back_to_stable.clone().expect("the abort timed");
    assert_eq!(timed.whole, secs(70));
    assert_eq!(timed.clusters, [secs(70), secs(40)]);
    // The status now says so: the next pass times nothing.
    f.mwrs.status = Some(done.status);
    assert_eq!(status_update(&f).back_to_stable, None);
}
