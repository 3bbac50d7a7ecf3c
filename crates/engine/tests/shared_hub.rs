//! rules §11 in the planner: idempotent writes with a stable applied-at, written-but-not-
//! applied clusters in flight, success that must settle, ownership that cannot be forged,
//! no deletion on a gap in the decisions, invalid cluster names, pruning after promotion
//! and a ManifestWork name taken by another owner. Pure multi-step scenarios on the
//! in-memory hub of `support`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;

use mwrs_api::labels;
use mwrs_api::placement::{
    ClusterDecision, Placement, PlacementDecision, PlacementDecisionStatus, PlacementSpec,
    PlacementStatus,
};
use mwrs_engine::placement::PlacementView;
use mwrs_engine::plan::WorkChange;
use mwrs_engine::rollout::RolloutStatus;
use serde_json::json;
use support::{APPLY_ERROR, Behaviour, MemoryHub, secs};

fn all(deadline: &str) -> serde_json::Value {
    json!({"type": "All", "all": {"progressDeadline": deadline}})
}

fn applies(h: &MemoryHub) -> usize {
    h.last_plan.as_ref().map_or(0, |p| {
        p.works
            .iter()
            .filter(|w| matches!(w, WorkChange::Apply(_)))
            .count()
    })
}

fn complete(h: &MemoryHub) -> bool {
    h.condition("PlacementRolledOut") == ("True".into(), "Complete".into())
}

fn applied_at(h: &MemoryHub, cluster: &str) -> Option<String> {
    h.works[cluster]
        .annotations
        .get(labels::REVISION_APPLIED_AT)
        .cloned()
}

/// One write per revision whatever the agent does; then nothing, until the deadline
/// makes the silent cluster a failure that AbortAll acts on.
#[test]
fn a_silent_agent_gets_one_write_and_times_out_into_an_abort() {
    let mut h = MemoryHub::new(all("30s"), &[&["c1", "c2", "c3"]]);
    h.abort_all();
    h.reconcile();
    while !complete(&h) {
        h.step(secs(5));
    }
    h.set_template("v2");
    h.behave("c2", "v2", Behaviour::Silent);
    h.reconcile();
    assert_eq!(applies(&h), 3);
    let anchor = applied_at(&h, "c2");
    let writes = h.writes;
    for _ in 0..5 {
        h.step(secs(5));
        let c2 = h
            .last_plan
            .as_ref()
            .unwrap()
            .clusters
            .iter()
            .find(|c| &*c.cluster == "c2");
        assert_eq!(c2.map(|c| c.status), Some(RolloutStatus::Progressing));
    }
    assert_eq!(h.writes, writes, "no write while c2's agent is silent");
    assert_eq!(applied_at(&h, "c2"), anchor);
    let msg = h.message("ManifestworkApplied");
    assert!(msg.contains("c2: no report from the agent since"), "{msg}");
    // 30s after the write: TimeOut, breach, abort back to v1.
    h.step(secs(5));
    h.step(secs(5));
    assert!(h.status().aborted_time.is_some(), "{:?}", h.conditions());
    h.step(secs(1));
    assert_eq!(h.version_of("c1").as_deref(), Some("v1"));
}

#[test]
fn an_apply_error_is_in_flight_with_the_agents_message_then_fails() {
    let mut h = MemoryHub::new(all("20s"), &[&["c1", "c2"]]);
    h.behave("c1", "v1", Behaviour::ApplyError);
    h.reconcile();
    h.step(secs(5));
    let writes = h.writes;
    h.step(secs(5));
    assert_eq!(h.writes, writes);
    let msg = h.message("ManifestworkApplied");
    assert!(msg.contains(APPLY_ERROR), "{msg}");
    for _ in 0..3 {
        h.step(secs(5));
    }
    assert_eq!(
        h.condition("Progressing"),
        ("False".into(), "ProgressDeadlineExceeded".into())
    );
    assert!(h.message("Progressing").contains(APPLY_ERROR));
    assert_eq!(h.writes, writes, "a failed cluster is not rewritten");
}

/// A ManifestWork whose spec no longer matches its revision is rewritten, and keeps
/// the time the revision was first written into it (rules §11.1).
#[test]
fn a_rewrite_of_the_same_revision_keeps_its_applied_at() {
    let mut h = MemoryHub::new(all("None"), &[&["c1"]]);
    h.reconcile();
    let first = applied_at(&h, "c1");
    h.works.get_mut("c1").unwrap().spec_digest = Some(mwrs_engine::hash::digest(&json!({"x": 1})));
    h.step(secs(30));
    assert_eq!(applies(&h), 1, "the edit is undone");
    assert_eq!(applied_at(&h, "c1"), first);
    // A new revision moves it.
    h.set_template("v2");
    h.step(secs(30));
    assert_ne!(applied_at(&h, "c1"), first);
}

/// Upstream's agent can report success for a new generation evaluated against the old
/// object and take it back 500 ms later: nothing is promoted and no slot is freed until
/// the success has stood for the settle time (rules §11.3).
#[test]
fn success_counts_only_once_it_has_settled() {
    let strategy = json!({"type": "Progressive", "progressive": {"maxConcurrency": 1}});
    let mut h = MemoryHub::new(strategy, &[&["c1", "c2"]]);
    h.reconcile();
    // c1 reports success at once; the controller saw that report just now.
    let gen_ = h.works["c1"].generation;
    let w = h.works.get_mut("c1").unwrap();
    for (t, s) in [
        ("Applied", "True"),
        ("Available", "True"),
        ("Progressing", "False"),
        ("Degraded", "False"),
    ] {
        w.set_condition(t, s, gen_, h.now);
    }
    w.status_seen = Some(h.now);
    h.reconcile();
    let c1 = &h.last_plan.as_ref().unwrap().clusters[0];
    assert_eq!(c1.status, RolloutStatus::Progressing);
    assert!(!h.works.contains("c2"), "c1's slot is not freed yet");
    assert_eq!(h.last_plan.as_ref().unwrap().recheck, Some(secs(2)));
    // 500 ms later the agent takes it back.
    h.now += jiff::SignedDuration::from_millis(500);
    let w = h.works.get_mut("c1").unwrap();
    w.set_condition("Progressing", "True", gen_, h.now);
    w.status_seen = Some(h.now);
    h.reconcile();
    assert!(!h.works.contains("c2"));
    // Success again, and it stands: the slot frees after the settle time.
    h.now += jiff::SignedDuration::from_millis(500);
    let w = h.works.get_mut("c1").unwrap();
    w.set_condition("Progressing", "False", gen_, h.now);
    w.status_seen = Some(h.now);
    h.reconcile();
    assert!(!h.works.contains("c2"));
    h.now += secs(2);
    h.reconcile();
    assert!(h.works.contains("c2"), "settled: c2 starts");
}

/// An MWRS's own labels never set the keys this controller owns (rules §11.4).
#[test]
fn mwrs_labels_cannot_forge_ownership_keys() {
    let mut h = MemoryHub::new(all("None"), &[&["c1"]]);
    let forged = BTreeMap::from([
        (labels::MWRS_OWNER.to_string(), "tenant-a.app".to_string()),
        (labels::OWNER_KEY_HASH.to_string(), "0123".to_string()),
        (labels::PLACEMENT_NAME.to_string(), "pa".to_string()),
        (labels::CONTROLLER_HASH.to_string(), "bbbbbb".to_string()),
        ("team".to_string(), "blue".to_string()),
    ]);
    h.mwrs.metadata.labels = Some(forged);
    h.reconcile();
    let l = &h.works["c1"].labels;
    assert_eq!(
        l.get(labels::MWRS_OWNER).map(String::as_str),
        Some("default.app")
    );
    assert_eq!(l.get(labels::OWNER_KEY_HASH), None);
    assert_eq!(l.get(labels::PLACEMENT_NAME).map(String::as_str), Some("p"));
    assert_eq!(l.get(labels::CONTROLLER_HASH), Some(&h.hash_of("v1")));
    assert_eq!(l.get("team").map(String::as_str), Some("blue"));
    // Nothing to relabel afterwards: the forged keys are not "missing".
    h.step(secs(30));
    h.step(secs(30));
    assert!(h.last_plan.as_ref().unwrap().works.is_empty());
}

fn settled(h: &mut MemoryHub) {
    h.reconcile();
    while !complete(h) {
        h.step(secs(5));
    }
}

fn deletes(h: &MemoryHub) -> Vec<String> {
    h.last_plan
        .as_ref()
        .unwrap()
        .works
        .iter()
        .filter_map(|w| match w {
            WorkChange::Delete { cluster, .. } => Some(cluster.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn renaming_a_placement_ref_to_a_missing_placement_deletes_nothing() {
    let mut h = MemoryHub::new(all("None"), &[&["c1", "c2"]]);
    settled(&mut h);
    h.mwrs.spec.placement_refs[0].name = "p2".into();
    for _ in 0..5 {
        h.step(secs(5));
        assert!(deletes(&h).is_empty());
    }
    assert_eq!(h.works.len(), 2);
    // The new Placement selects the same clusters: they keep their ManifestWorks.
    h.set_groups("p2", &[&["c1", "c2"]]);
    h.step(secs(5));
    assert!(deletes(&h).is_empty());
    assert_eq!(
        h.works["c1"]
            .labels
            .get(labels::PLACEMENT_NAME)
            .map(String::as_str),
        Some("p2")
    );
    settled(&mut h);
}

fn decision(name: &str, clusters: Option<&[&str]>) -> PlacementDecision {
    let mut pd = PlacementDecision::default();
    pd.metadata.name = Some(name.into());
    pd.metadata.labels = Some(BTreeMap::from([(
        labels::PLACEMENT_LABEL.to_string(),
        "p".to_string(),
    )]));
    pd.status = clusters.map(|cs| PlacementDecisionStatus {
        decisions: cs
            .iter()
            .map(|c| ClusterDecision {
                cluster_name: (*c).into(),
                ..Default::default()
            })
            .collect(),
    });
    pd
}

fn placement(selected: Option<i32>) -> Placement {
    let mut p = Placement::new("p", PlacementSpec::default());
    p.status = Some(PlacementStatus {
        number_of_selected_clusters: selected,
        ..Default::default()
    });
    p
}

/// OCM's scheduler re-pages: a new page is created before its status is written, and a
/// cluster leaves one page before it appears on the next. Nothing is deleted meanwhile.
#[test]
fn decisions_in_flux_delete_nothing() {
    let mut h = MemoryHub::new(all("None"), &[&["c1", "c2", "c3"]]);
    settled(&mut h);
    let pl = placement(Some(3));
    let steps: [Vec<PlacementDecision>; 2] = [
        // Page 2 created, no status yet.
        vec![
            decision("p-1", Some(&["c1", "c2", "c3"])),
            decision("p-2", None),
        ],
        // c3 left page 1, not yet on page 2.
        vec![
            decision("p-1", Some(&["c1", "c2"])),
            decision("p-2", Some(&[])),
        ],
    ];
    for pds in &steps {
        let v = PlacementView::from_objects("p", Some(&pl), pds);
        assert!(!v.complete);
        h.placements = vec![v];
        h.step(secs(5));
        assert!(deletes(&h).is_empty(), "{:?}", h.last_plan);
    }
    let pds = [
        decision("p-1", Some(&["c1", "c2"])),
        decision("p-2", Some(&["c3"])),
    ];
    let mut v = PlacementView::from_objects("p", Some(&pl), &pds);
    assert!(v.complete);
    h.placements = vec![v.clone()];
    h.step(secs(5));
    assert_eq!(h.works.len(), 3);
    // A real removal, seen just now: kept until the decisions have settled.
    let pl = placement(Some(2));
    let pds = [
        decision("p-1", Some(&["c1", "c2"])),
        decision("p-2", Some(&[])),
    ];
    v = PlacementView::from_objects("p", Some(&pl), &pds);
    v.changed_at = Some(h.now);
    h.placements = vec![v];
    h.reconcile();
    assert!(deletes(&h).is_empty());
    assert_eq!(h.last_plan.as_ref().unwrap().recheck, Some(secs(2)));
    h.now += secs(2);
    h.reconcile();
    assert_eq!(deletes(&h), vec!["c3".to_string()]);
}

/// A new or re-created Placement (a GitOps replace) whose status the scheduler has not
/// written yet, while it pages its decisions: the pages so far are not the selection, so
/// nothing is deleted on their word however long they stay (security review S1).
#[test]
fn decisions_of_a_placement_without_its_count_delete_nothing() {
    let mut h = MemoryHub::new(all("None"), &[&["c1", "c2", "c3"]]);
    settled(&mut h);
    // Page 1 written with two clusters; page 2 (c3) not yet; no numberOfSelectedClusters.
    let pds = [decision("p-1", Some(&["c1", "c2"]))];
    for pl in [
        placement(None),
        Placement::new("p", PlacementSpec::default()),
    ] {
        let v = PlacementView::from_objects("p", Some(&pl), &pds);
        assert!(!v.complete, "{pl:?}");
        h.placements = vec![v];
        h.step(secs(60));
        assert!(deletes(&h).is_empty(), "{:?}", h.last_plan);
    }
}

#[test]
fn an_empty_placement_without_decision_status_is_complete() {
    let pl = placement(Some(0));
    let v = PlacementView::from_objects("p", Some(&pl), &[decision("p-1", None)]);
    assert!(v.complete);
}

/// OCM: an empty cluster name is "not scheduled yet". Skipped and reported; the
/// rollout completes on the others.
#[test]
fn invalid_cluster_names_are_skipped_and_reported() {
    let mut h = MemoryHub::new(all("None"), &[&["c1"]]);
    let pl = placement(Some(2));
    let pds = [decision("p-1", Some(&["c1", "", "../kube-system"]))];
    let v = PlacementView::from_objects("p", Some(&pl), &pds);
    assert_eq!(v.skipped, vec![String::new(), "../kube-system".to_string()]);
    h.placements = vec![v];
    settled(&mut h);
    assert_eq!(h.works.clusters(), ["c1"]);
    let msg = h.message("PlacementVerified");
    assert!(
        msg.contains("2 decisions skipped") && msg.contains("\"\""),
        "{msg}"
    );
}

/// A revision made non-live by a promotion is deleted only in a later pass, once the
/// status naming its successor is stored (rules §11.6).
#[test]
fn the_old_stable_revision_is_pruned_after_the_promotion_is_stored() {
    let mut h = MemoryHub::new(all("None"), &[&["c1"]]);
    h.mwrs.spec.revision_history_limit = Some(0);
    settled(&mut h);
    let v1 = h.hash_of("v1");
    h.set_template("v2");
    h.reconcile();
    loop {
        let before = h.status().current_revision.clone();
        h.step(secs(5));
        let plan = h.last_plan.as_ref().unwrap();
        let pruned: Vec<_> = plan
            .revisions
            .iter()
            .filter_map(|r| match r {
                mwrs_engine::plan::RevisionChange::Delete { name, .. } => Some(name.clone()),
                _ => None,
            })
            .collect();
        if before.as_deref() == Some(v1.as_str()) {
            assert!(
                pruned.is_empty(),
                "v1 pruned in the pass that promotes: {pruned:?}"
            );
        }
        if !pruned.is_empty() {
            assert_ne!(before.as_deref(), Some(v1.as_str()));
            break;
        }
    }
}

/// A ManifestWork on this MWRS's name that belongs to someone else: never written,
/// counted as a failed cluster, so AbortAll sees it.
#[test]
fn a_taken_name_counts_as_a_failed_cluster() {
    let mut h = MemoryHub::new(all("None"), &[&["c1", "c2"]]);
    h.abort_all();
    settled(&mut h);
    h.set_template("v2");
    h.works.remove("c2");
    let taken = vec![mwrs_engine::plan::BlockedWrite {
        cluster: "c2".into(),
        why: "ManifestWork c2/x exists and belongs to another owner".into(),
    }];
    let works: Vec<_> = h.works.as_slice().to_vec();
    let observed = mwrs_engine::Observed {
        mwrs: &h.mwrs,
        placements: &h.placements,
        works: &works,
        revisions: &h.revisions,
        blocked: &taken,
        taken_revision_names: &[],
        plugins: &mwrs_engine::plugin::NO_PLUGINS,
        sight: mwrs_engine::plan::Sight::Clear,
    };
    let plan = mwrs_engine::plan(&observed, h.now, &h.cfg);
    assert!(
        plan.works
            .iter()
            .all(|w| !matches!(w, WorkChange::Apply(a) if a.cluster == "c2")),
        "{:?}",
        plan.works
    );
    let c2 = plan.clusters.iter().find(|c| &*c.cluster == "c2").unwrap();
    assert_eq!(c2.status, RolloutStatus::Failed);
    assert!(
        c2.note
            .as_deref()
            .unwrap_or("")
            .contains("belongs to another owner")
    );
    assert!(
        plan.status.unwrap().aborted_time.is_some(),
        "AbortAll acts on it"
    );
}

/// A spec the API server defaulted beyond what the template says has another digest;
/// at the generation this controller's own write produced it is still that revision.
/// Only a change after that write (a new generation) is an edit to undo (issue #12).
#[test]
fn a_spec_defaulted_by_the_server_is_not_a_hand_edit() {
    let mut h = MemoryHub::new(all("None"), &[&["c1"]]);
    h.reconcile();
    let w = h.works.get_mut("c1").unwrap();
    w.spec_digest = Some(mwrs_engine::hash::digest(&json!({"defaulted": true})));
    w.written_generation = Some(w.generation);
    for _ in 0..3 {
        h.step(secs(5));
        assert_eq!(applies(&h), 0, "{:?}", h.last_plan);
    }
    assert!(complete(&h), "{:?}", h.conditions());
    // Someone edits it: a new generation, not written by us.
    let w = h.works.get_mut("c1").unwrap();
    w.generation += 1;
    h.step(secs(5));
    assert_eq!(applies(&h), 1, "the edit is undone");
}
