//! Planner scenarios around the fleet and history rather than a single rollout: several
//! placementRefs, clusters leaving, placements disappearing, pruning, hash collisions,
//! adoption of ManifestWorks written before revisions existed, and duplicates.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use mwrs_api::labels;
use mwrs_engine::hash;
use mwrs_engine::placement::{PlacementState, PlacementView};
use mwrs_engine::plan::WorkChange;
use mwrs_engine::revision::RevisionView;
use mwrs_engine::work::WorkView;
use serde_json::json;
use support::{Behaviour, MemoryHub, secs, template};

fn all() -> serde_json::Value {
    json!({"type": "All", "all": {"progressDeadline": "60s"}})
}

fn complete(h: &MemoryHub) -> bool {
    h.condition("PlacementRolledOut") == ("True".into(), "Complete".into())
}

fn settle(h: &mut MemoryHub) {
    h.reconcile();
    for _ in 0..30 {
        if complete(h) {
            return;
        }
        h.step(secs(5));
    }
    panic!("did not complete: {:?}", h.conditions());
}

fn add_placement(h: &mut MemoryHub, name: &str, clusters: &[&str]) {
    h.mwrs
        .spec
        .placement_refs
        .push(serde_json::from_value(json!({"name": name, "rolloutStrategy": all()})).unwrap());
    h.set_groups(name, &[clusters]);
}

#[test]
fn a_cluster_selected_by_two_placements_gets_one_work() {
    let mut h = MemoryHub::new(all(), &[&["c1", "c2"]]);
    add_placement(&mut h, "q", &["c2", "c3"]);
    settle(&mut h);
    assert_eq!(h.works.len(), 3);
    assert_eq!(h.works["c2"].labels[labels::PLACEMENT_NAME], "p");
    assert_eq!(h.works["c3"].labels[labels::PLACEMENT_NAME], "q");
    let s = h.status();
    assert_eq!(s.summary.desired_total, 3);
    assert_eq!(s.summary.total, 3);
    assert_eq!(s.placement_summary[0].summary.desired_total, 2);
    assert_eq!(s.placement_summary[1].summary.desired_total, 1);

    // c2 leaves p: it moves to q, keeping its ManifestWork (relabelled, not re-created).
    h.set_groups("p", &[&["c1"]]);
    let p = h.step(secs(5)).clone();
    assert!(
        !p.works
            .iter()
            .any(|w| matches!(w, WorkChange::Delete { cluster, .. } if cluster == "c2")),
        "{:?}",
        p.works
    );
    assert_eq!(h.works["c2"].labels[labels::PLACEMENT_NAME], "q");
    assert_eq!(h.works["c2"].generation, 1, "spec untouched");
}

#[test]
fn a_removed_cluster_loses_its_work_whatever_revision_it_carries() {
    let mut h = MemoryHub::new(all(), &[&["c1", "c2", "c3"]]);
    settle(&mut h);
    h.behave("c3", "v2", Behaviour::Hang);
    h.set_template("v2");
    h.reconcile();
    // Mid-rollout, c3 (on v2, in flight) and c1 leave.
    h.set_groups("p", &[&["c2"]]);
    h.step(secs(5));
    assert_eq!(h.works.clusters(), vec!["c2"]);
    settle(&mut h);
    assert_eq!(h.status().summary.desired_total, 1);
}

#[test]
fn a_removed_cluster_is_deleted_mid_abort_and_a_new_one_gets_the_stable_revision() {
    let mut h = MemoryHub::new(
        json!({"type": "All", "all": {"progressDeadline": "20s"}, "failureStrategy": "AbortAll"}),
        &[&["c1", "c2", "c3"]],
    );
    settle(&mut h);
    h.behave("c1", "v2", Behaviour::Hang);
    h.set_template("v2");
    h.reconcile();
    for _ in 0..20 {
        if h.status().aborted_time.is_some() {
            break;
        }
        h.step(secs(5));
    }
    assert!(h.status().aborted_time.is_some());
    h.set_groups("p", &[&["c1", "c2", "c4"]]);
    h.step(secs(1));
    assert!(!h.works.contains("c3"));
    assert_eq!(
        h.version_of("c4").as_deref(),
        Some("v1"),
        "joins on the stable revision"
    );
    assert!(h.versions().values().all(|v| v == "v1"));
}

#[test]
fn a_missing_placement_keeps_its_works_and_the_others_go_on() {
    let mut h = MemoryHub::new(all(), &[&["c1", "c2"]]);
    add_placement(&mut h, "q", &["c3"]);
    settle(&mut h);
    // Placement p is deleted.
    h.placements.retain(|p| p.name != "p");
    h.placements.push(PlacementView {
        name: "p".into(),
        state: PlacementState::Missing,
        complete: false,
        changed_at: None,
        skipped: Vec::new(),
    });
    h.set_template("v2");
    h.reconcile();
    assert_eq!(
        h.condition("PlacementVerified"),
        ("False".into(), "PlacementDecisionNotFound".into())
    );
    assert!(h.message("PlacementVerified").contains('p'));
    assert_eq!(h.works.len(), 3, "no ManifestWork deleted");
    for _ in 0..10 {
        h.step(secs(5));
    }
    assert_eq!(h.version_of("c3").as_deref(), Some("v2"), "q rolls on");
    assert_eq!(
        h.version_of("c1").as_deref(),
        Some("v1"),
        "p's rollout stopped"
    );
    assert!(!complete(&h), "never promoted while a placement is unknown");
    assert!(
        h.message("Progressing")
            .contains("not promoted while the decisions of placement p"),
        "{}",
        h.message("Progressing")
    );
}

#[test]
fn history_is_pruned_to_the_limit_keeping_live_revisions() {
    let mut h = MemoryHub::new(all(), &[&["c1"]]);
    h.mwrs.spec.revision_history_limit = Some(2);
    settle(&mut h);
    for v in ["v2", "v3", "v4", "v5"] {
        h.set_template(v);
        settle(&mut h);
    }
    // The revision a promotion made non-live goes in the pass after the promotion was
    // stored (rules §11.6).
    h.step(secs(5));
    let mut revs: Vec<(i64, String)> = h
        .revisions
        .iter()
        .map(|r| {
            let v = r.template["workload"]["manifests"][0]["data"]["version"]
                .as_str()
                .unwrap()
                .to_string();
            (r.revision, v)
        })
        .collect();
    revs.sort();
    assert_eq!(
        revs,
        vec![(3, "v3".into()), (4, "v4".into()), (5, "v5".into())],
        "live v5 plus two non-live"
    );
    // Live revisions are never pruned, even with a limit of 0.
    h.mwrs.spec.revision_history_limit = Some(0);
    h.step(secs(5));
    assert_eq!(h.revisions.len(), 1);
    assert_eq!(h.revisions[0].hash, h.hash_of("v5"));
}

#[test]
fn a_hash_collision_bumps_the_count_and_converges() {
    let mut h = MemoryHub::new(all(), &[&["c1", "c2"]]);
    settle(&mut h);
    // Someone else's revision already holds the name v2 would get.
    let v2 = h.hash_of("v2");
    let other = json!({"workload": {"manifests": []}, "not": "v2"});
    h.revisions.push(RevisionView {
        marks: Default::default(),
        name: format!("app-{v2}"),
        hash: v2.clone(),
        revision: 7,
        digest: hash::digest(&other),
        template: other,
        created: None,
        change_cause: None,
        generation: None,
        resource_version: None,
    });
    h.set_template("v2");
    settle(&mut h);
    let s = h.status();
    assert_eq!(s.collision_count, Some(1));
    let expected = hash::revision_hash(&template("v2"), 1);
    assert_eq!(s.update_revision.as_deref(), Some(expected.as_str()));
    assert_eq!(s.current_revision.as_deref(), Some(expected.as_str()));
    assert!(h.versions().values().all(|v| v == "v2"));
    // The next pass computes the same name: nothing more is created.
    let p = h.step(secs(5)).clone();
    assert!(p.revisions.is_empty(), "{:?}", p.revisions);
}

fn legacy_work(cluster: &str, name: &str, version: &str, created: &str) -> WorkView {
    WorkView {
        cluster: cluster.into(),
        name: name.into(),
        uid: None,
        generation: 1,
        resource_version: Some("1".into()),
        labels: Arc::new(BTreeMap::from([
            (labels::MWRS_OWNER.to_string(), "default.app".to_string()),
            (labels::PLACEMENT_NAME.to_string(), "p".to_string()),
        ])),
        annotations: Arc::default(),
        spec_digest: Some(hash::digest(&template(version))),
        created: Some(created.parse().unwrap()),
        deleting: false,
        conditions: Arc::default(),
        status_seen: None,
        applied_note: None,
        written_generation: None,
        status_error: None,
        update_refused: false,
    }
}

#[test]
fn works_from_a_controller_without_history_are_adopted_not_rerolled() {
    let mut h = MemoryHub::new(all(), &[&["c1", "c2"]]);
    h.works
        .insert(legacy_work("c1", "appx7k2p", "v1", "2025-01-01T00:00:00Z"));
    h.works
        .insert(legacy_work("c2", "app9zz1q", "v1", "2025-01-01T00:00:00Z"));
    h.agents();
    let p = h.reconcile().clone();
    assert!(
        p.works
            .iter()
            .all(|w| matches!(w, WorkChange::Relabel { .. })),
        "{:?}",
        p.works
    );
    assert_eq!(h.works["c1"].generation, 1);
    assert_eq!(
        &*h.works["c1"].name, "appx7k2p",
        "upstream's generated name is kept"
    );
    assert_eq!(h.version_of("c1").as_deref(), Some("v1"));
    settle(&mut h);
    assert_eq!(h.works["c2"].generation, 1, "never re-rolled");
}

#[test]
fn duplicate_works_are_removed_once_the_survivor_carries_the_target() {
    let mut h = MemoryHub::new(all(), &[&["c1"]]);
    settle(&mut h);
    // A second owned ManifestWork in c1's namespace (left by upstream's generateName).
    // The in-memory hub keys works by cluster, so keep it aside and show it to the planner.
    let dup = legacy_work("c1", "appdup12", "v0", "2025-01-01T00:00:00Z");
    let mut works: Vec<WorkView> = h.works.as_slice().to_vec();
    works.push(dup);
    let observed = mwrs_engine::Observed {
        mwrs: &h.mwrs,
        placements: &h.placements,
        works: &works,
        revisions: &h.revisions,
        blocked: &[],
        taken_revision_names: &[],
        plugins: &mwrs_engine::plugin::NO_PLUGINS,
        sight: mwrs_engine::plan::Sight::Clear,
    };
    let p = mwrs_engine::plan(&observed, h.now, &h.cfg);
    assert_eq!(
        p.works,
        vec![WorkChange::Delete {
            cluster: "c1".into(),
            name: "appdup12".into(),
            resource_version: Some("1".into()),
        }],
        "the deterministic name survives; the other goes"
    );
}

#[test]
fn a_long_owner_uses_the_hashed_label_and_the_annotation() {
    let mut h = MemoryHub::new(all(), &[&["c1"]]);
    let long = "a-replica-set-name-that-is-long-enough-to-break-the-label-limit";
    h.mwrs.metadata.name = Some(long.into());
    settle(&mut h);
    let w = &h.works["c1"];
    assert_eq!(w.labels[labels::OWNER_KEY_HASH].len(), 32);
    // Upstream's hub garbage collector spares only ManifestWorks carrying its
    // replicaset key (#32 item 4): the key is there, with the hashed owner as its value.
    assert_eq!(
        w.labels.get(labels::MWRS_OWNER),
        Some(&w.labels[labels::OWNER_KEY_HASH])
    );
    assert_eq!(
        w.annotations[labels::MWRS_OWNER_ANNOTATION],
        format!("default/{long}")
    );
    assert!(w.name.len() <= 188);
    assert!(h.revisions[0].name.starts_with(long));
}

#[test]
fn placement_refs_keep_spec_order_for_ownership() {
    let mut h = MemoryHub::new(all(), &[&["c1"]]);
    add_placement(&mut h, "q", &["c1"]);
    h.mwrs.spec.placement_refs.reverse();
    settle(&mut h);
    assert_eq!(h.works["c1"].labels[labels::PLACEMENT_NAME], "q");
}

#[test]
fn the_plan_does_not_depend_on_the_order_manifestworks_come_in() {
    let strategy = json!({"type": "Progressive", "progressive": {"maxConcurrency": 2}});
    let clusters = ["c1", "c2", "c3", "c4", "c5", "c6"];
    let mut h = MemoryHub::new(strategy, &[&clusters]);
    settle(&mut h);
    h.set_template("v2");
    h.step(secs(5));
    // A second placement, a cluster gone from the first one, and a duplicate.
    add_placement(&mut h, "q", &["c2", "c7"]);
    h.set_groups("p", &[&["c1", "c2", "c3", "c4", "c6"]]);
    let mut works: Vec<WorkView> = h.works.as_slice().to_vec();
    works.push(legacy_work("c3", "appdup12", "v0", "2025-01-01T00:00:00Z"));
    let plan_of = |works: &[WorkView]| {
        let observed = mwrs_engine::Observed {
            mwrs: &h.mwrs,
            placements: &h.placements,
            works,
            revisions: &h.revisions,
            blocked: &[],
            taken_revision_names: &[],
            plugins: &mwrs_engine::plugin::NO_PLUGINS,
            sight: mwrs_engine::plan::Sight::Clear,
        };
        mwrs_engine::plan(&observed, h.now, &h.cfg)
    };
    let by_cluster = plan_of(&works);
    assert!(!by_cluster.works.is_empty(), "the pass has work to do");
    works.reverse();
    assert_eq!(plan_of(&works), by_cluster, "reversed");
    works.rotate_left(3);
    assert_eq!(plan_of(&works), by_cluster, "rotated");
}

/// At 300,000 ManifestWorks (issue #36) the controller's cache stayed behind the hub for
/// minutes (a relist outlived etcd's compaction and started over), every pass sent its
/// updates again on versions the hub had moved past, and the hub refused 583,304 in 15
/// minutes, each refusal loading the hub the relist waited on. A version the hub refused
/// an update on gets no update until the cache brings the hub's.
#[test]
fn no_update_is_sent_again_on_a_version_the_hub_refused_it_on() {
    let mut h = MemoryHub::new(all(), &[&["c1", "c2"]]);
    settle(&mut h);
    h.set_template("v2");
    h.works.get_mut("c1").unwrap().update_refused = true;
    let p = h.reconcile().clone();
    let written: Vec<&str> = p
        .works
        .iter()
        .filter_map(|w| match w {
            WorkChange::Apply(a) => Some(a.cluster.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(written, ["c2"], "{:?}", p.works);
    // The cache brings the hub's version: the update goes.
    h.works.get_mut("c1").unwrap().update_refused = false;
    settle(&mut h);
    assert_eq!(h.version_of("c1").as_deref(), Some("v2"));
}
