//! rules §6 transition sequences as pure multi-step scenarios: the planner runs against an
//! in-memory hub whose simulated agents feed ManifestWork conditions back, and every step
//! asserts the condition set and the revision fields.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use mwrs_api::labels;
use serde_json::json;
use support::{Behaviour, MemoryHub, c, secs};

const CLUSTERS: [&str; 6] = ["c1", "c2", "c3", "c4", "c5", "c6"];

fn progressive(extra: serde_json::Value) -> serde_json::Value {
    let mut p = json!({"maxConcurrency": 2, "progressDeadline": "60s"});
    if let (Some(p), Some(e)) = (p.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    json!({"type": "Progressive", "progressive": p})
}

fn hub(strategy: serde_json::Value) -> MemoryHub {
    MemoryHub::new(strategy, &[&CLUSTERS])
}

/// Steps 5s at a time until `done`, at most `max` steps; returns the steps taken.
fn run_until(h: &mut MemoryHub, max: usize, done: impl Fn(&MemoryHub) -> bool) -> usize {
    for i in 0..max {
        if done(h) {
            return i;
        }
        h.step(secs(5));
    }
    assert!(
        done(h),
        "not reached after {max} steps: {:?}",
        h.conditions()
    );
    max
}

fn complete(h: &MemoryHub) -> bool {
    h.condition("PlacementRolledOut") == ("True".into(), "Complete".into())
}

fn completed_rollout(strategy: serde_json::Value) -> MemoryHub {
    let mut h = hub(strategy);
    h.reconcile();
    run_until(&mut h, 50, complete);
    h
}

#[test]
fn new_template_rolls_out_and_is_promoted() {
    let mut h = hub(progressive(json!({})));
    let v1 = h.hash_of("v1");

    h.reconcile();
    let s = h.status();
    assert_eq!(s.update_revision.as_deref(), Some(v1.as_str()));
    assert_eq!(s.current_revision, None);
    assert_eq!(
        h.conditions(),
        vec![
            c("ManifestworkApplied", "False", "Processing"),
            c("PlacementRolledOut", "False", "Progressing"),
            c("PlacementVerified", "True", "AsExpected"),
            c("Progressing", "True", "NewRevisionCreated"),
        ]
    );
    // maxConcurrency 2: the first wave only.
    assert_eq!(h.works.len(), 2);
    assert_eq!(h.revisions.len(), 1);
    assert_eq!(h.revisions[0].revision, 1);
    assert_eq!(h.revisions[0].name, format!("app-{v1}"));

    // While rolling, the reason stays and current stays empty.
    let mut max_in_flight = 0;
    for _ in 0..40 {
        if complete(&h) {
            break;
        }
        h.step(secs(5));
        let in_flight = h
            .last_plan
            .as_ref()
            .unwrap()
            .clusters
            .iter()
            .filter(|c| {
                c.revision.is_some()
                    && c.soak_until.is_none()
                    && c.status.to_string() != "Succeeded"
            })
            .count();
        max_in_flight = max_in_flight.max(in_flight);
        if !complete(&h) {
            assert_eq!(
                h.condition("Progressing"),
                ("True".into(), "NewRevisionCreated".into())
            );
            assert_eq!(h.status().current_revision, None);
        }
    }
    assert!(max_in_flight <= 2, "window exceeded: {max_in_flight}");
    assert_eq!(
        h.conditions(),
        vec![
            c("ManifestworkApplied", "True", "AsExpected"),
            c("PlacementRolledOut", "True", "Complete"),
            c("PlacementVerified", "True", "AsExpected"),
            c("Progressing", "False", "NewManifestWorkAvailable"),
        ]
    );
    let s = h.status();
    assert_eq!(s.current_revision.as_deref(), Some(v1.as_str()));
    assert_eq!(s.summary.desired_total, 6);
    assert_eq!(s.summary.updated, 6);
    assert_eq!(s.summary.total, 6);
    assert_eq!(s.summary.available, 6);
    assert!(h.versions().values().all(|v| v == "v1"));

    // A pass with nothing new writes nothing and changes no condition.
    let before = h.status();
    let p = h.step(secs(5)).clone();
    assert!(p.works.is_empty() && p.revisions.is_empty(), "{p:?}");
    assert!(p.events.is_empty());
    assert_eq!(h.status().conditions, before.conditions);
}

#[test]
fn second_template_then_undo_renumbers_and_finds_revision() {
    let mut h = completed_rollout(progressive(json!({})));
    let (v1, v2) = (h.hash_of("v1"), h.hash_of("v2"));

    h.set_template("v2");
    h.reconcile();
    assert_eq!(
        h.condition("Progressing"),
        ("True".into(), "NewRevisionCreated".into())
    );
    let s = h.status();
    assert_eq!(s.update_revision.as_deref(), Some(v2.as_str()));
    assert_eq!(s.current_revision.as_deref(), Some(v1.as_str()));
    run_until(&mut h, 50, complete);
    assert_eq!(h.status().current_revision.as_deref(), Some(v2.as_str()));

    // Undo: the spec is rewritten with v1's template.
    h.set_template("v1");
    h.reconcile();
    assert_eq!(
        h.condition("Progressing"),
        ("True".into(), "FoundNewRevision".into())
    );
    assert_eq!(h.revisions.len(), 2, "no new revision for known content");
    let r1 = h.revisions.iter().find(|r| r.hash == v1).unwrap();
    assert_eq!(r1.revision, 3, "reused revision is renumbered to max + 1");
    run_until(&mut h, 50, complete);
    assert_eq!(
        h.conditions(),
        vec![
            c("ManifestworkApplied", "True", "AsExpected"),
            c("PlacementRolledOut", "True", "Complete"),
            c("PlacementVerified", "True", "AsExpected"),
            c("Progressing", "False", "NewManifestWorkAvailable"),
        ]
    );
    let s = h.status();
    assert_eq!(s.current_revision.as_deref(), Some(v1.as_str()));
    assert_eq!(s.update_revision.as_deref(), Some(v1.as_str()));
    assert!(h.versions().values().all(|v| v == "v1"));
}

#[test]
fn deadline_exceeded_without_failure_strategy_stops() {
    let mut h = completed_rollout(progressive(json!({"progressDeadline": "30s"})));
    let v1 = h.hash_of("v1");
    h.behave("c2", "v2", Behaviour::Hang);
    h.set_template("v2");
    h.reconcile();
    run_until(&mut h, 40, |h| {
        h.condition("Progressing").1 == "ProgressDeadlineExceeded"
    });
    assert_eq!(
        h.conditions(),
        vec![
            c("ManifestworkApplied", "False", "NotAsExpected"),
            c("PlacementRolledOut", "False", "RolloutDegraded"),
            c("PlacementVerified", "True", "AsExpected"),
            c("Progressing", "False", "ProgressDeadlineExceeded"),
        ]
    );
    assert!(
        h.message("Progressing").contains("c2"),
        "{}",
        h.message("Progressing")
    );
    let s = h.status();
    assert_eq!(s.current_revision.as_deref(), Some(v1.as_str()));
    assert_eq!(s.aborted_time, None);
    // Stopped: nothing new starts, however long we wait.
    let versions = h.versions();
    for _ in 0..10 {
        h.step(secs(30));
    }
    assert_eq!(h.versions(), versions);
    assert_eq!(h.condition("Progressing").1, "ProgressDeadlineExceeded");
}

#[test]
fn abort_all_reverts_every_cluster_and_holds() {
    let mut h = completed_rollout(progressive(json!({"progressDeadline": "30s"})));
    h.abort_all();
    let (v1, v2) = (h.hash_of("v1"), h.hash_of("v2"));
    h.behave("c3", "v2", Behaviour::Hang);
    h.set_template("v2");
    h.reconcile();
    run_until(&mut h, 40, |h| h.status().aborted_time.is_some());

    // Step 4 of the design: the breach is reported and abortedTime persisted, and this
    // pass writes no ManifestWork.
    assert_eq!(
        h.condition("Progressing"),
        ("False".into(), "ProgressDeadlineExceeded".into())
    );
    assert!(h.last_plan.as_ref().unwrap().works.is_empty());
    assert!(h.versions().values().any(|v| v == "v2"));

    // Step 5: every ManifestWork goes back to the stable revision at once.
    h.reconcile();
    assert!(
        h.versions().values().all(|v| v == "v1"),
        "{:?}",
        h.versions()
    );
    assert_eq!(h.condition("Progressing").1, "RolloutAborted");
    run_until(&mut h, 10, |h| {
        h.condition("ManifestworkApplied") == ("True".into(), "AsExpected".into())
    });
    assert_eq!(
        h.conditions(),
        vec![
            c("ManifestworkApplied", "True", "AsExpected"),
            c("PlacementRolledOut", "False", "RolloutDegraded"),
            c("PlacementVerified", "True", "AsExpected"),
            c("Progressing", "False", "RolloutAborted"),
        ]
    );
    let s = h.status();
    assert_eq!(s.current_revision.as_deref(), Some(v1.as_str()));
    assert_eq!(s.update_revision.as_deref(), Some(v2.as_str()));
    assert!(s.aborted_time.is_some());

    // Held: the failed revision is not retried by itself.
    for _ in 0..10 {
        h.step(secs(60));
    }
    assert!(h.versions().values().all(|v| v == "v1"));
    assert_eq!(h.condition("Progressing").1, "RolloutAborted");

    // A spec edit that keeps the template keeps the hold.
    h.mwrs.spec.revision_history_limit = Some(5);
    h.step(secs(5));
    assert!(h.status().aborted_time.is_some());

    // A new template ends the hold and rolls normally.
    h.set_template("v3");
    h.reconcile();
    assert_eq!(h.status().aborted_time, None);
    assert_eq!(
        h.condition("Progressing"),
        ("True".into(), "NewRevisionCreated".into())
    );
    run_until(&mut h, 50, complete);
    assert!(h.versions().values().all(|v| v == "v3"));
}

#[test]
fn abort_without_stable_revision_fails_and_stops() {
    let mut h = hub(progressive(
        json!({"progressDeadline": "30s", "maxFailures": 0}),
    ));
    h.abort_all();
    h.behave("c1", "v1", Behaviour::Hang);
    h.reconcile();
    run_until(&mut h, 40, |h| {
        h.condition("Progressing").1 == "AbortFailed"
    });
    let s = h.status();
    assert_eq!(s.aborted_time, None);
    assert_eq!(s.current_revision, None);
    assert!(
        h.message("Progressing").contains("no stable revision"),
        "{}",
        h.message("Progressing")
    );
    assert_eq!(
        h.condition("PlacementRolledOut"),
        ("False".into(), "RolloutDegraded".into())
    );
    let works = h.works.len();
    for _ in 0..5 {
        h.step(secs(60));
    }
    assert_eq!(h.works.len(), works, "the rollout stopped");
    assert!(h.works.len() < 6);
}

#[test]
fn degraded_clusters_breach_with_max_failures_exceeded() {
    let mut h = completed_rollout(progressive(json!({"maxFailures": 1})));
    h.abort_all();
    h.behave("c1", "v2", Behaviour::Degrade { after: secs(5) });
    h.behave("c2", "v2", Behaviour::Degrade { after: secs(5) });
    h.set_template("v2");
    h.reconcile();
    run_until(&mut h, 20, |h| h.status().aborted_time.is_some());
    assert_eq!(
        h.condition("Progressing"),
        ("False".into(), "MaxFailuresExceeded".into())
    );
    let m = h.message("Progressing");
    assert!(
        m.contains("c1") && m.contains("c2") && m.contains("degraded"),
        "{m}"
    );
    h.reconcile();
    assert!(h.versions().values().all(|v| v == "v1"));
}

#[test]
fn strategy_all_breach_counts_its_own_max_failures() {
    let mut h = completed_rollout(json!({"type": "All", "all": {"progressDeadline": "20s"}}));
    h.abort_all();
    h.behave("c4", "v2", Behaviour::Hang);
    h.set_template("v2");
    h.reconcile();
    assert_eq!(h.works.len(), 6);
    assert!(
        h.versions().values().all(|v| v == "v2"),
        "All writes every cluster at once"
    );
    run_until(&mut h, 20, |h| h.status().aborted_time.is_some());
    h.reconcile();
    assert!(h.versions().values().all(|v| v == "v1"));
}

#[test]
fn manual_abort_retry_and_pause() {
    let mut h = completed_rollout(progressive(json!({"maxConcurrency": 1})));
    h.behave("c1", "v2", Behaviour::Hang);
    h.set_template("v2");
    h.reconcile();
    assert_eq!(h.versions()["c1"], "v2");

    // Abort by request: same as an automatic abort, acted on once.
    h.annotate(labels::CONTROL_ABORT, "req-1");
    let reasons = |p: &mwrs_engine::Plan| -> Vec<String> {
        p.events.iter().map(|e| e.reason.clone()).collect()
    };
    let events = reasons(h.reconcile());
    assert!(events.contains(&"AbortRequested".to_string()), "{events:?}");
    assert!(h.status().aborted_time.is_some());
    assert_eq!(h.condition("Progressing").1, "RolloutAborted");
    let events = reasons(h.reconcile());
    assert!(
        !events.contains(&"AbortRequested".to_string()),
        "one request, one event: {events:?}"
    );
    let message = h.message("PlacementRolledOut");
    assert!(!message.ends_with(": "), "no empty failure list: {message}");
    assert!(h.versions().values().all(|v| v == "v1"));
    assert_eq!(
        h.status().handled_controls.unwrap().abort.as_deref(),
        Some("req-1")
    );

    // Retry: the hold ends and v2 rolls again through the strategy.
    h.behave("c1", "v2", Behaviour::Succeed { after: secs(5) });
    h.annotate(labels::CONTROL_RETRY, "req-2");
    let events = reasons(h.reconcile());
    assert!(events.contains(&"RetryRequested".to_string()), "{events:?}");
    assert_eq!(h.status().aborted_time, None);
    assert_eq!(h.condition("Progressing").0, "True");
    assert_eq!(
        h.versions().values().filter(|v| *v == "v2").count(),
        1,
        "maxConcurrency 1 again"
    );
    // The same retry token does nothing more.
    h.reconcile();
    assert_eq!(
        h.status().handled_controls.unwrap().retry.as_deref(),
        Some("req-2")
    );

    // Pause: nothing new starts; in-flight clusters finish.
    h.annotate(labels::CONTROL_PAUSE, "true");
    h.step(secs(10));
    assert_eq!(
        h.condition("Progressing"),
        ("Unknown".into(), "RolloutPaused".into())
    );
    let versions = h.versions();
    h.step(secs(10));
    h.step(secs(10));
    assert_eq!(h.versions(), versions, "paused: no new cluster starts");
    h.annotate(labels::CONTROL_PAUSE, "false");
    run_until(&mut h, 60, complete);
    assert!(h.versions().values().all(|v| v == "v2"));
}

/// An abort request that names its revision (as the CLI's do) acts on that revision only:
/// asked for while v1 is the stable revision and read in the pass that meets the new
/// template v2, it aborts nothing, then or later.
#[test]
fn an_abort_request_for_an_older_revision_aborts_nothing() {
    let mut h = completed_rollout(progressive(json!({"maxConcurrency": 1})));
    let v1 = h.hash_of("v1");
    h.annotate(labels::CONTROL_ABORT, &format!("2026-12-03T21:32:05Z/{v1}"));
    h.set_template("v2");
    let events: Vec<(String, String)> = h
        .reconcile()
        .events
        .iter()
        .map(|e| (e.reason.clone(), e.message.clone()))
        .collect();
    let (_, message) = events
        .iter()
        .find(|(r, _)| r == "AbortRequested")
        .expect("the request is read and answered");
    assert!(message.contains("nothing to abort"), "{message}");
    run_until(&mut h, 60, complete);
    assert!(h.versions().values().all(|v| v == "v2"));
    assert_eq!(h.status().last_abort, None);

    // Naming the update revision, it aborts as any request does.
    h.behave("c1", "v3", Behaviour::Hang);
    h.set_template("v3");
    h.reconcile();
    let v3 = h.hash_of("v3");
    h.annotate(labels::CONTROL_ABORT, &format!("2026-12-03T21:40:00Z/{v3}"));
    h.reconcile();
    assert!(h.status().aborted_time.is_some());
}

/// rules §10.6: a user's abort of a first rollout (nothing to go back to) stops it: no new
/// cluster starts, pass after pass, until a retry.
#[test]
fn a_manual_abort_of_the_first_rollout_stops_it_until_a_retry() {
    let mut h = hub(progressive(json!({"maxConcurrency": 2})));
    h.reconcile();
    assert_eq!(h.works.len(), 2);
    h.annotate(labels::CONTROL_ABORT, "req-1");
    for _ in 0..10 {
        h.step(secs(10));
    }
    assert_eq!(h.works.len(), 2, "no cluster started after the abort");
    assert_eq!(
        h.condition("Progressing"),
        ("False".into(), "AbortFailed".into())
    );
    let m = h.message("Progressing");
    assert!(
        m.contains("abort requested") && m.contains("stops here"),
        "{m}"
    );
    let record = h.status().last_abort.expect("the abort is recorded");
    assert_eq!(record.trigger, "Requested");
    assert_eq!(record.reverted_to, None);
    assert_eq!(h.status().current_revision, None);

    h.annotate(labels::CONTROL_RETRY, "req-2");
    run_until(&mut h, 60, complete);
    assert_eq!(h.works.len(), 6);
    assert_eq!(h.status().last_abort, None, "a retry ends the record");
}

/// The last abort's cause stays in the status after its revert is done, until a new
/// revision rolls; the revisions carry completed/aborted marks.
#[test]
fn an_abort_keeps_its_cause_and_marks_the_revisions() {
    let mut h = completed_rollout(progressive(
        json!({"progressDeadline": "30s", "maxFailures": 0}),
    ));
    let v1 = h.hash_of("v1");
    h.abort_all();
    h.behave("c1", "v2", Behaviour::Hang);
    h.set_template("v2");
    h.reconcile();
    let v2 = h.hash_of("v2");
    run_until(&mut h, 40, |h| h.status().aborted_time.is_some());
    run_until(&mut h, 40, |h| h.versions().values().all(|v| v == "v1"));
    for _ in 0..5 {
        h.step(secs(60));
    }
    let record = h
        .status()
        .last_abort
        .expect("the cause outlives the revert");
    assert_eq!(record.trigger, "ProgressDeadlineExceeded");
    assert_eq!(record.revision, v2);
    assert_eq!(record.reverted_to.as_deref(), Some(v1.as_str()));
    assert_eq!(record.timed_out_clusters, ["c1"]);
    assert_eq!((record.timed_out_count, record.failed_count), (1, 0));
    let marks = |hash: &str| {
        h.revisions
            .iter()
            .find(|r| r.hash == hash)
            .map(|r| r.marks)
            .unwrap_or_default()
    };
    assert!(marks(&v1).completed.is_some() && marks(&v1).aborted.is_none());
    assert!(marks(&v2).aborted.is_some() && marks(&v2).completed.is_none());
    let writes = h.writes;
    let revisions = h.revisions.clone();
    h.reconcile();
    assert_eq!(
        (h.writes, &h.revisions),
        (writes, &revisions),
        "marked once"
    );

    h.set_template("v3");
    h.reconcile();
    assert_eq!(
        h.status().last_abort,
        None,
        "a new revision ends the record"
    );
}

#[test]
fn invalid_input_names_the_field_and_touches_nothing() {
    let mut h = completed_rollout(progressive(json!({})));
    let works = h.works.clone();
    type Breaker = Box<dyn Fn(&mut MemoryHub)>;
    let cases: Vec<(Breaker, &str)> = vec![
        (
            Box::new(|h: &mut MemoryHub| {
                h.mwrs.spec.placement_refs[0]
                    .rollout_strategy
                    .as_mut()
                    .unwrap()
                    .failure_strategy = Some("RollbackAll".into())
            }),
            "spec.placementRefs[0].rolloutStrategy.failureStrategy",
        ),
        (
            Box::new(|h: &mut MemoryHub| {
                h.mwrs.spec.placement_refs[0] = serde_json::from_value(
                    json!({"name": "p", "rolloutStrategy": {"type": "Progressive", "progressive": {"maxConcurrency": "lots"}}}),
                )
                .unwrap()
            }),
            "spec.placementRefs[0].rolloutStrategy.progressive.maxConcurrency",
        ),
        (
            Box::new(|h: &mut MemoryHub| {
                h.mwrs.spec.placement_refs[0] = serde_json::from_value(
                    json!({"name": "p", "rolloutStrategy": {"type": "All", "all": {"progressDeadline": "2d"}}}),
                )
                .unwrap()
            }),
            "spec.placementRefs[0].rolloutStrategy.all.progressDeadline",
        ),
        (
            Box::new(|h: &mut MemoryHub| {
                h.mwrs.spec.manifest_work_template.fields.insert(
                    "workload".into(),
                    json!({"manifests": [{"kind": "ConfigMap", "metadata": {"name": "x"}}]}),
                );
            }),
            "spec.manifestWorkTemplate.workload.manifests[0]",
        ),
    ];
    for (break_it, field) in cases {
        let saved = h.mwrs.spec.clone();
        break_it(&mut h);
        let p = h.step(secs(5)).clone();
        assert!(p.works.is_empty(), "{field}: {:?}", p.works);
        assert!(p.revisions.is_empty(), "{field}: {:?}", p.revisions);
        assert_eq!(p.invalid.as_ref().map(|i| i.field.as_str()), Some(field));
        assert_eq!(
            h.condition("Progressing"),
            ("False".into(), "InvalidSpec".into())
        );
        assert!(
            h.message("Progressing").starts_with(field),
            "{}",
            h.message("Progressing")
        );
        assert_eq!(h.works, works);
        h.mwrs.spec = saved;
        h.step(secs(5));
        assert!(complete(&h));
    }
}

/// ProgressivePerGroup with no progressDeadline: a cluster that degrades in a later group
/// is a failure at once (maxFailures 0), not a wait for a deadline that never comes.
fn per_group_with_a_degraded_cluster_in_the_second_group(abort_all: bool) -> MemoryHub {
    let groups: [&[&str]; 3] = [&["c1", "c2"], &["c3", "c4"], &["c5", "c6"]];
    let mut h = MemoryHub::new(json!({"type": "ProgressivePerGroup"}), &groups);
    h.reconcile();
    run_until(&mut h, 50, complete);
    if abort_all {
        h.abort_all();
    }
    h.behave("c3", "v2", Behaviour::Degrade { after: secs(5) });
    h.set_template("v2");
    h.reconcile();
    run_until(&mut h, 40, |h| {
        h.condition("Progressing") == ("False".into(), "MaxFailuresExceeded".into())
            || h.status().aborted_time.is_some()
    });
    assert!(
        h.message("Progressing").contains("c3"),
        "{}",
        h.message("Progressing")
    );
    h
}

#[test]
fn per_group_without_deadline_stops_on_a_degraded_cluster_in_a_later_group() {
    let mut h = per_group_with_a_degraded_cluster_in_the_second_group(false);
    for _ in 0..10 {
        h.step(secs(30));
    }
    let v = h.versions();
    assert_eq!(v["c1"], "v2");
    assert_eq!(v["c2"], "v2");
    assert_eq!(v["c5"], "v1", "the third group never starts: {v:?}");
    assert_eq!(v["c6"], "v1", "the third group never starts: {v:?}");
    assert_eq!(
        h.condition("Progressing"),
        ("False".into(), "MaxFailuresExceeded".into())
    );
    assert_eq!(
        h.condition("PlacementRolledOut"),
        ("False".into(), "RolloutDegraded".into())
    );
    assert_eq!(h.status().current_revision, Some(h.hash_of("v1")));
}

#[test]
fn per_group_without_deadline_aborts_on_a_degraded_cluster_in_a_later_group() {
    let mut h = per_group_with_a_degraded_cluster_in_the_second_group(true);
    assert!(h.status().aborted_time.is_some());
    h.reconcile();
    h.step(secs(5));
    assert!(
        h.versions().values().all(|v| v == "v1"),
        "{:?}",
        h.versions()
    );
    assert_eq!(
        h.condition("Progressing"),
        ("False".into(), "RolloutAborted".into())
    );
}
