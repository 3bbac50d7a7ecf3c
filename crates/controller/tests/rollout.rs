//! Rollout, abort and invalid-spec behaviour of the controller on the real test hub,
//! with the simulated work agent answering for the clusters.
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`); skipped without it unless CI=true.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{
    InFlight, Timeline, aborted, all_aborting, assert_works_on, current, describe, is_complete,
    message, start_agent_hanging, start_agent_succeeding, update, wait_complete, wait_mwrs,
    wait_works,
};
use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use mwrs_api::labels;
use mwrs_fleet::{Agent, AgentConfig};
use mwrs_testsupport::{TestHub, configmap_template, has_condition, mwrs, wait_for};
use serde_json::json;

/// (a) A new template rolls out progressively and completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progressive_rollout_completes() {
    let Some((hub, _controller)) = common::started("progressive", 4).await else {
        return;
    };
    let _agent = start_agent_succeeding(&hub, Duration::from_millis(700));
    let in_flight = InFlight::watch(&hub, "app").await;
    let timeline = Timeline::watch(&hub, "app").await;
    let strategy = json!({"type": "Progressive", "progressive": {"maxConcurrency": 2}});
    hub.create_mwrs(&mwrs("app", configmap_template("v1"), &[("p", strategy)]))
        .await;

    let done = wait_complete(&hub, "app", None).await;
    let hash = update(&done).expect("update revision");
    timeline
        .wait_in_order(&["NewRevisionCreated", "NewManifestWorkAvailable"])
        .await;
    let max_in_flight = in_flight.max_on(&hash);
    assert!(
        max_in_flight <= 2,
        "maxConcurrency 2 exceeded: {max_in_flight}"
    );

    let works = hub.works_of("app").await;
    assert_eq!(works.len(), 4, "one ManifestWork per cluster");
    let clusters: BTreeSet<_> = works.iter().filter_map(|w| w.namespace()).collect();
    assert_eq!(clusters.len(), 4);
    for w in &works {
        assert_eq!(
            w.labels().get(labels::CONTROLLER_HASH),
            Some(&hash),
            "{} carries the update revision",
            w.name_any()
        );
        assert_eq!(
            w.labels().get(labels::PLACEMENT_NAME).map(String::as_str),
            Some("p")
        );
    }

    let crs: Api<ControllerRevision> = Api::namespaced(hub.client.clone(), &hub.namespace);
    let cr = crs
        .get(&format!("app-{hash}"))
        .await
        .expect("ControllerRevision of the update revision");
    let owner = cr
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true))
        .expect("controller ownerReference");
    assert_eq!(owner.kind, "ManifestWorkReplicaSet");
    assert_eq!(Some(&owner.uid), done.metadata.uid.as_ref());
    assert_eq!(owner.block_owner_deletion, Some(true));
    assert_eq!(cr.revision, 1);
    assert!(
        done.finalizers()
            .iter()
            .any(|f| f == labels::MWRS_FINALIZER)
    );
    let summary = done.status.as_ref().map(|s| s.summary).unwrap_or_default();
    assert_eq!(
        (summary.total, summary.updated, summary.desired_total),
        (4, 4, 4)
    );
}

/// (b) With AbortAll, a cluster hanging past the deadline aborts back to the stable
/// revision on every cluster: ProgressDeadlineExceeded with abortedTime set, then
/// RolloutAborted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_all_reverts_to_stable_revision() {
    let Some(hub) = TestHub::from_env("abort", 3).await else {
        return;
    };
    let shared = mwrs_controller::Shared::default();
    let _controller = common::start_controller_sharing(&hub, shared.clone());
    hub.publish_all("p").await;
    let _agent = start_agent_hanging(&hub, &hub.clusters[0], "v2");
    let strategy = all_aborting("10s");
    hub.create_mwrs(&mwrs("app", configmap_template("v1"), &[("p", strategy)]))
        .await;
    let v1 = current(&wait_complete(&hub, "app", None).await).expect("v1");

    let timeline = Timeline::watch(&hub, "app").await;
    hub.set_template("app", configmap_template("v2")).await;
    let all_v1 = hub
        .clusters
        .iter()
        .map(|c| (c.clone(), v1.clone()))
        .collect();
    let m = wait_mwrs(&hub, "app", "RolloutAborted", |m| {
        has_condition(m, "Progressing", "False", "RolloutAborted")
    })
    .await;
    wait_works(&hub, "app", &all_v1).await;

    timeline
        .wait_in_order(&[
            "NewRevisionCreated",
            "ProgressDeadlineExceeded",
            "RolloutAborted",
        ])
        .await;
    let breach = timeline.first("ProgressDeadlineExceeded").expect("seen");
    let started = aborted(&m).expect("the hold stands");
    assert_eq!(
        breach.aborted.as_ref(),
        Some(&started),
        "abortedTime set with the breach"
    );
    assert_eq!(
        current(&m).as_deref(),
        Some(v1.as_str()),
        "stable revision kept"
    );
    assert_ne!(update(&m).as_deref(), Some(v1.as_str()));
    assert!(
        has_condition(&m, "PlacementRolledOut", "False", "RolloutDegraded"),
        "{}",
        describe(&m)
    );
    assert_works_on(&hub, "app", &hub.clusters, &v1).await;
    let events = hub.events_of("app").await;
    assert!(
        events.iter().any(|(r, _)| r == "AbortStarted"),
        "an AbortStarted event: {events:?}"
    );
    // The metrics a user alerts on say the same.
    let v2 = update(&m).unwrap_or_default();
    let info = format!(
        "mwrs_controller_rollout_info{{namespace=\"{}\",name=\"app\",phase=\"Aborted\",\
         current_revision=\"{v1}\",update_revision=\"{v2}\"}} 1",
        hub.namespace
    );
    let abort =
        r#"mwrs_controller_aborts_total{trigger="ProgressDeadlineExceeded",outcome="reverted"} 1"#;
    let text = shared.metrics.encode();
    assert!(
        text.contains(&info) && text.contains(abort),
        "{info}\n{abort}\n{text}"
    );
    // Once every agent reports v1 again: the time back to stable, once for the abort and
    // once per reverted cluster (all three had v2).
    let shared = &shared;
    wait_for(
        "the abort timed back to stable",
        common::WAIT,
        || async move {
            let text = shared.metrics.encode();
            let timed = text.contains("mwrs_controller_abort_to_stable_seconds_count 1\n")
                && text.contains("mwrs_controller_abort_cluster_to_stable_seconds_count 3\n");
            timed.then_some(()).ok_or(text)
        },
    )
    .await;
}

/// (d) An invalid MWRS gets a condition naming the field; a valid one beside it
/// completes; the invalid one touches no ManifestWork.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_spec_is_reported_and_isolated() {
    let Some((hub, _controller)) = common::started("invalid", 2).await else {
        return;
    };
    let _agent = Agent::start(hub.client.clone(), AgentConfig::new(hub.clusters.clone()));
    let cm = configmap_template("v1")["workload"]["manifests"][0].clone();
    let duplicated = json!({"workload": {"manifests": [cm.clone(), cm]}});
    let all = json!({"type": "All"});
    hub.create_mwrs(&mwrs("bad", duplicated, &[("p", all.clone())]))
        .await;
    hub.create_mwrs(&mwrs("good", configmap_template("v1"), &[("p", all)]))
        .await;

    let bad = wait_mwrs(&hub, "bad", "the invalid condition", |m| {
        has_condition(m, "Progressing", "False", "InvalidSpec")
    })
    .await;
    let message = message(&bad, "Progressing");
    assert!(
        message.contains("spec.manifestWorkTemplate.workload.manifests[1]"),
        "message names the field: {message}"
    );
    wait_mwrs(&hub, "good", "complete", is_complete).await;
    assert!(
        hub.works_of("bad").await.is_empty(),
        "invalid MWRS wrote no ManifestWork"
    );
    assert_eq!(hub.works_of("good").await.len(), 2);
}

/// A cluster dropped from the placement loses its ManifestWork; the others keep theirs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_removed_from_placement_loses_its_work() {
    let Some((hub, _controller)) = common::started("unselect", 3).await else {
        return;
    };
    let _agent = Agent::start(hub.client.clone(), AgentConfig::new(hub.clusters.clone()));
    hub.create_mwrs(&mwrs(
        "app",
        configmap_template("v1"),
        &[("p", json!({"type": "All"}))],
    ))
    .await;
    wait_for("three ManifestWorks", common::WAIT, || async {
        let n = hub.works_of("app").await.len();
        if n == 3 {
            Ok(())
        } else {
            Err(format!("{n} works"))
        }
    })
    .await;
    let kept: Vec<String> = hub.clusters[..2].to_vec();
    hub.publish(
        "p",
        &[mwrs_fleet::placement::DecisionGroup::new("", kept.clone())],
    )
    .await;
    wait_for(
        "the unselected cluster's ManifestWork to go",
        common::WAIT,
        || async {
            let mut ns: Vec<String> = hub
                .works_of("app")
                .await
                .iter()
                .filter_map(|w| w.namespace())
                .collect();
            ns.sort();
            if ns == kept {
                Ok(())
            } else {
                Err(format!("works in {ns:?}"))
            }
        },
    )
    .await;
    let crs: Api<ControllerRevision> = Api::namespaced(hub.client.clone(), &hub.namespace);
    let lp = ListParams::default().labels(labels::MWRS_OWNER);
    assert_eq!(crs.list(&lp).await.expect("list").items.len(), 1);
}
