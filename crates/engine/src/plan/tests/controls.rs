//! Stage 2: each manual request is read once, answered with an Event, and acts only on
//! the revision it names; the pause is read as it stands.

use mwrs_api::labels;
use mwrs_api::mwrs::HandledControls;

use super::super::controls::Controls;
use super::{Fixture, STABLE, mwrs};

/// The controls a pass reads from `f`, with `held` telling whether an abort holds the
/// update revision.
fn controls(f: &Fixture, held: bool) -> Controls {
    let o = f.observed();
    let pass = f.pass(&o);
    pass.controls(&f.update(), held)
}

fn messages(c: &Controls) -> Vec<(&str, &str, bool)> {
    c.events
        .iter()
        .map(|e| (e.reason.as_str(), e.message.as_str(), e.warning))
        .collect()
}

#[test]
fn without_annotations_nothing_is_requested() {
    let f = Fixture::new(mwrs(Some(STABLE)), &["c1"]);
    let c = controls(&f, false);
    assert!(!c.abort && !c.retry && !c.paused);
    assert!(c.events.is_empty());
    assert_eq!(c.handled, HandledControls::default());
}

#[test]
fn an_abort_request_acts_once() {
    let mut f = Fixture::new(mwrs(Some(STABLE)), &["c1"]);
    let update = f.update();
    let token = labels::control_request("2026-12-03T09:59:00Z", &update);
    f.annotate(labels::CONTROL_ABORT, &token);
    let c = controls(&f, false);
    assert!(c.abort && !c.retry);
    assert_eq!(c.handled.abort.as_deref(), Some(token.as_str()));
    let want = format!("abort requested for revision {update}");
    assert_eq!(messages(&c), [("AbortRequested", want.as_str(), true)]);

    // The next pass finds it handled: no second abort, no second Event.
    f.status().handled_controls = Some(c.handled.clone());
    let again = controls(&f, false);
    assert!(!again.abort);
    assert!(again.events.is_empty());
    assert_eq!(again.handled, c.handled);
}

#[test]
fn a_bare_token_is_for_whatever_revision_is_the_update_revision() {
    let mut f = Fixture::new(mwrs(Some(STABLE)), &["c1"]);
    f.annotate(labels::CONTROL_ABORT, "by-hand-1");
    let c = controls(&f, false);
    assert!(c.abort);
    assert_eq!(c.handled.abort.as_deref(), Some("by-hand-1"));
}

#[test]
fn a_request_for_another_revision_is_answered_and_does_nothing() {
    let mut f = Fixture::new(mwrs(Some(STABLE)), &["c1"]);
    let update = f.update();
    f.annotate(
        labels::CONTROL_ABORT,
        &labels::control_request("t1", "older7"),
    );
    f.annotate(
        labels::CONTROL_RETRY,
        &labels::control_request("t2", "older7"),
    );
    let c = controls(&f, true);
    assert!(!c.abort && !c.retry, "neither request names {update}");
    assert_eq!(c.handled.abort.as_deref(), Some("t1/older7"), "read once");
    assert_eq!(c.handled.retry.as_deref(), Some("t2/older7"), "read once");
    let retry = format!(
        "retry requested for revision older7, which is no longer the update revision \
         ({update} is); nothing to do"
    );
    let abort = format!(
        "abort requested for revision older7, which is no longer the update revision \
         ({update} is); nothing to abort"
    );
    assert_eq!(
        messages(&c),
        [
            ("RetryRequested", retry.as_str(), false),
            ("AbortRequested", abort.as_str(), true)
        ]
    );
}

#[test]
fn a_retry_says_whether_an_abort_held_the_revision() {
    let mut f = Fixture::new(mwrs(Some(STABLE)), &["c1"]);
    let update = f.update();
    f.annotate(labels::CONTROL_RETRY, "r1");
    let held = controls(&f, true);
    assert!(held.retry);
    let want = format!("retry requested: revision {update} rolls out again");
    assert_eq!(messages(&held), [("RetryRequested", want.as_str(), false)]);

    let free = controls(&f, false);
    let want = format!("retry requested: no abort holds revision {update}; nothing to do");
    assert_eq!(messages(&free), [("RetryRequested", want.as_str(), false)]);
}

#[test]
fn an_abort_of_the_stable_revision_has_nothing_to_abort() {
    let mut f = Fixture::new(mwrs(None), &["c1"]);
    let update = f.update();
    f.status().current_revision = Some(update.clone());
    f.annotate(labels::CONTROL_ABORT, "a1");
    let c = controls(&f, false);
    let want =
        format!("abort requested: revision {update} is the stable revision; nothing to abort");
    assert_eq!(messages(&c), [("AbortRequested", want.as_str(), true)]);
}

#[test]
fn the_pause_is_read_as_it_stands() {
    let mut f = Fixture::new(mwrs(Some(STABLE)), &["c1"]);
    f.annotate(labels::CONTROL_PAUSE, "true");
    assert!(controls(&f, false).paused);
    f.annotate(labels::CONTROL_PAUSE, "false");
    assert!(!controls(&f, false).paused);
}
