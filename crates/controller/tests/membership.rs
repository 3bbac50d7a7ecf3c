//! Placement membership changing under the controller on the real test hub: clusters
//! added mid-rollout and mid-abort, a cluster removed mid-abort, and a placement whose
//! decisions hold no cluster.
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`); skipped without it unless CI=true.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{
    InFlight, QUICK, Timeline, aborted, all_aborting, assert_works_on, current, describe, message,
    patch_mwrs, revisions_of, start_agent, start_agent_succeeding, start_controller, update,
    version_of, wait_complete, wait_mwrs, wait_works,
};
use mwrs_api::labels;
use mwrs_fleet::Behaviour;
use mwrs_fleet::placement::DecisionGroup;
use mwrs_testsupport::{TestHub, configmap_template, has_condition, mwrs};
use serde_json::json;

fn on(clusters: &[String], hash: &str) -> BTreeMap<String, String> {
    clusters
        .iter()
        .map(|c| (c.clone(), hash.to_string()))
        .collect()
}

/// A cluster added to the placement while a progressive rollout is under way joins it
/// (within maxConcurrency) and the rollout completes on all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_added_mid_rollout_joins_it() {
    let Some(hub) = TestHub::from_env("joinroll", 4).await else {
        return;
    };
    let _controller = start_controller(&hub);
    let _agent = start_agent_succeeding(&hub, Duration::from_millis(1500));
    let first: Vec<String> = hub.clusters[..3].to_vec();
    hub.publish("p", &[DecisionGroup::new("", first.clone())])
        .await;
    let in_flight = InFlight::watch(&hub, "app").await;
    let strategy = json!({"type": "Progressive", "progressive": {"maxConcurrency": 1}});
    hub.create_mwrs(&mwrs("app", configmap_template("v1"), &[("p", strategy)]))
        .await;
    let m = wait_mwrs(&hub, "app", "the rollout under way", |m| {
        m.status
            .as_ref()
            .is_some_and(|s| s.summary.total >= 1 && s.summary.updated < 3)
            && current(m).is_none()
    })
    .await;
    assert_eq!(m.status.clone().unwrap().summary.desired_total, 3);
    hub.publish_all("p").await;
    let m = wait_complete(&hub, "app", None).await;
    let hash = update(&m).unwrap();
    assert_works_on(&hub, "app", &hub.clusters, &hash).await;
    let s = m.status.clone().unwrap().summary;
    assert_eq!((s.desired_total, s.updated, s.total), (4, 4, 4));
    assert!(in_flight.max_on(&hash) <= 1, "maxConcurrency 1 kept");
}

/// While an abort holds v1: a cluster joining the placement gets v1 (currentRevision),
/// not the held v2; a cluster leaving it loses its ManifestWork; the hold stands.
/// Then, with the controller down while every ManifestWork carries an in-flight v4, an
/// abort requested and the membership changed: on restart the cluster that left loses
/// its ManifestWork though it carries v4, the one that joined gets the stable v3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn membership_changes_mid_abort() {
    let Some(hub) = TestHub::from_env("joinabort", 5).await else {
        return;
    };
    let c = hub.clusters.clone();
    let controller = start_controller(&hub);
    let hang = c[0].clone();
    let _agent = start_agent(&hub, move |w| {
        let v = version_of(w.spec);
        if (w.cluster == hang && v == Some("v2")) || v == Some("v4") {
            Behaviour::Hang
        } else {
            QUICK
        }
    });
    hub.publish("p", &[DecisionGroup::new("", c[..3].to_vec())])
        .await;
    let strategy = all_aborting("3s");
    hub.create_mwrs(&mwrs("app", configmap_template("v1"), &[("p", strategy)]))
        .await;
    let v1 = current(&wait_complete(&hub, "app", None).await).unwrap();
    hub.set_template("app", configmap_template("v2")).await;
    let m = wait_mwrs(&hub, "app", "the abort holding", |m| {
        has_condition(m, "Progressing", "False", "RolloutAborted")
    })
    .await;
    let held_since = aborted(&m).expect("abortedTime");
    let v2 = update(&m).unwrap();
    wait_works(&hub, "app", &on(&c[..3], &v1)).await;

    // c3 joins, c2 leaves.
    let members = vec![c[0].clone(), c[1].clone(), c[3].clone()];
    hub.publish("p", &[DecisionGroup::new("", members.clone())])
        .await;
    wait_works(&hub, "app", &on(&members, &v1)).await;
    let m = wait_mwrs(&hub, "app", "the revert settled on the new members", |m| {
        has_condition(m, "ManifestworkApplied", "True", "AsExpected")
            && m.status
                .as_ref()
                .is_some_and(|s| s.summary.desired_total == 3)
    })
    .await;
    assert!(
        has_condition(&m, "Progressing", "False", "RolloutAborted"),
        "{}",
        describe(&m)
    );
    assert_eq!(
        aborted(&m).as_deref(),
        Some(held_since.as_str()),
        "the hold stands"
    );
    assert_eq!(current(&m).as_deref(), Some(v1.as_str()));
    assert_eq!(update(&m).as_deref(), Some(v2.as_str()));

    // A new template ends the hold and completes (nobody hangs on v3).
    hub.set_template("app", configmap_template("v3")).await;
    let m = wait_complete(&hub, "app", Some(&v1)).await;
    let v3 = current(&m).unwrap();
    assert_eq!(aborted(&m), None, "a new revision clears abortedTime");
    wait_works(&hub, "app", &on(&members, &v3)).await;

    // Every member in flight on v4 (it hangs everywhere; a long deadline so the
    // controller does not abort by itself), then the controller goes down.
    let strategy = all_aborting("10m");
    patch_mwrs(
        &hub,
        "app",
        &json!({"spec": {"placementRefs": [{"name": "p", "rolloutStrategy": strategy}]}}),
    )
    .await;
    hub.set_template("app", configmap_template("v4")).await;
    let m = wait_mwrs(&hub, "app", "v4 as the update revision", |m| {
        update(m).is_some_and(|u| u != v3)
    })
    .await;
    let v4 = update(&m).unwrap();
    wait_works(&hub, "app", &on(&members, &v4)).await;
    drop(controller);

    // While it is down: an abort is requested, c1 leaves (its ManifestWork carries
    // v4), c4 joins.
    let moved = vec![c[0].clone(), c[3].clone(), c[4].clone()];
    hub.publish("p", &[DecisionGroup::new("", moved.clone())])
        .await;
    patch_mwrs(
        &hub,
        "app",
        &json!({"metadata": {"annotations": {labels::CONTROL_ABORT: "first"}}}),
    )
    .await;
    let timeline = Timeline::watch(&hub, "app").await;
    let _controller = start_controller(&hub);
    wait_works(&hub, "app", &on(&moved, &v3)).await;
    let m = wait_mwrs(&hub, "app", "the requested abort settled", |m| {
        has_condition(m, "ManifestworkApplied", "True", "AsExpected")
    })
    .await;
    assert!(
        has_condition(&m, "Progressing", "False", "RolloutAborted"),
        "{}",
        describe(&m)
    );
    assert!(aborted(&m).is_some());
    assert_eq!(current(&m).as_deref(), Some(v3.as_str()));
    assert_eq!(update(&m).as_deref(), Some(v4.as_str()));
    let first = timeline
        .first("RolloutAborted")
        .expect("RolloutAborted seen");
    assert!(first.aborted.is_some(), "{:?}", timeline.entries());
    assert_eq!(revisions_of(&hub, "app").await.len(), 4, "v1..v4 kept");
    assert!(message(&m, "Progressing").contains(&v3));
}

/// A placement whose decisions list no cluster: PlacementVerified False
/// PlacementDecisionEmpty, no ManifestWork written, nothing promoted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_placement_writes_nothing() {
    let Some(hub) = TestHub::from_env("emptypl", 2).await else {
        return;
    };
    let _controller = start_controller(&hub);
    let _agent = start_agent(&hub, |_| QUICK);
    hub.publish("p", &[DecisionGroup::new("", Vec::<String>::new())])
        .await;
    hub.create_mwrs(&mwrs(
        "app",
        configmap_template("v1"),
        &[("p", json!({"type": "All"}))],
    ))
    .await;
    let m = wait_mwrs(&hub, "app", "PlacementDecisionEmpty", |m| {
        has_condition(m, "PlacementVerified", "False", "PlacementDecisionEmpty")
    })
    .await;
    assert!(
        has_condition(&m, "ManifestworkApplied", "False", "PlacementDecisionEmpty"),
        "{}",
        describe(&m)
    );
    assert_eq!(current(&m), None, "nothing to promote with zero clusters");
    assert!(
        update(&m).is_some(),
        "the revision of the spec is still recorded"
    );
    let s = m.status.clone().unwrap().summary;
    assert_eq!((s.desired_total, s.total, s.updated), (0, 0, 0));
    assert!(common::works_by_cluster(&hub, "app").await.is_empty());
    let msg = message(&m, "PlacementVerified");
    assert!(msg.contains("no cluster"), "{msg}");
}
