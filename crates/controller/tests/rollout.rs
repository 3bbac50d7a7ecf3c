//! Rollout, abort and invalid-spec behaviour of the controller on the real test hub,
//! with the simulated work agent answering for the clusters.
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`); skipped without it unless CI=true.

mod common;

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{
    WAIT, current, describe, progressing, start_agent_succeeding, start_controller, update,
};
use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use mwrs_api::labels;
use mwrs_fleet::{Agent, AgentConfig, Behaviour};
use mwrs_testsupport::{TestHub, configmap_template, has_condition, mwrs, wait_for};
use serde_json::{Value, json};

/// Appends the Progressing reason of `m` to `seen` when it changed.
fn record(seen: &Mutex<Vec<String>>, m: &mwrs_api::mwrs::ManifestWorkReplicaSet) {
    if let Some((_, reason)) = progressing(m)
        && let Ok(mut seen) = seen.lock()
        && seen.last() != Some(&reason)
    {
        seen.push(reason);
    }
}

fn version_of(spec: &Value) -> Option<&str> {
    spec.pointer("/workload/manifests/0/data/version")
        .and_then(Value::as_str)
}

/// (a) A new template rolls out progressively and completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progressive_rollout_completes() {
    let Some(hub) = TestHub::from_env("progressive", 4).await else {
        return;
    };
    let _controller = start_controller(&hub);
    let _agent = start_agent_succeeding(&hub, Duration::from_millis(700));
    hub.publish_all("p").await;
    let strategy = json!({"type": "Progressive", "progressive": {"maxConcurrency": 2}});
    hub.create_mwrs(&mwrs("app", configmap_template("v1"), &[("p", strategy)]))
        .await;

    // Record the Progressing reasons as they go by, and the most clusters seen
    // working on the new revision at once.
    let seen: Mutex<Vec<String>> = Mutex::default();
    let max_in_flight = Mutex::new(0usize);
    let done = wait_for("rollout to complete", WAIT, || {
        let (hub, seen, max_in_flight) = (&hub, &seen, &max_in_flight);
        async move {
            let m = hub.get_mwrs("app").await.ok_or("no MWRS")?;
            record(seen, &m);
            let works = hub.works_of("app").await;
            let in_flight = works
                .iter()
                .filter(|w| {
                    let g = w.metadata.generation;
                    !w.status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|cs| {
                            cs.iter().any(|c| {
                                c.type_ == "Progressing"
                                    && c.status == "False"
                                    && c.observed_generation == g
                            })
                        })
                })
                .count();
            let mut max = max_in_flight.lock().expect("lock");
            *max = (*max).max(in_flight);
            let complete = has_condition(&m, "Progressing", "False", "NewManifestWorkAvailable")
                && has_condition(&m, "PlacementRolledOut", "True", "Complete")
                && current(&m).is_some()
                && current(&m) == update(&m);
            if complete { Ok(m) } else { Err(describe(&m)) }
        }
    })
    .await;

    let hash = update(&done).expect("update revision");
    let seen = seen.into_inner().expect("lock");
    let max_in_flight = max_in_flight.into_inner().expect("lock");
    let first = seen.iter().position(|r| r == "NewRevisionCreated");
    let last = seen.iter().position(|r| r == "NewManifestWorkAvailable");
    assert!(
        matches!((first, last), (Some(a), Some(b)) if a < b),
        "Progressing reasons in order: {seen:?}"
    );
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
/// revision on every cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_all_reverts_to_stable_revision() {
    let Some(hub) = TestHub::from_env("abort", 3).await else {
        return;
    };
    let _controller = start_controller(&hub);
    let hang = hub.clusters[0].clone();
    let _agent = Agent::start(
        hub.client.clone(),
        AgentConfig::new(hub.clusters.clone()).behaviour(move |w| {
            if w.cluster == hang && version_of(w.spec) == Some("v2") {
                Behaviour::Hang
            } else {
                Behaviour::Succeed {
                    after: Duration::from_millis(200),
                }
            }
        }),
    );
    hub.publish_all("p").await;
    let strategy = json!({"type": "All", "all": {"progressDeadline": "10s"},
        "failureStrategy": "AbortAll"});
    hub.create_mwrs(&mwrs("app", configmap_template("v1"), &[("p", strategy)]))
        .await;
    let v1 = wait_for("v1 to complete", WAIT, || async {
        let m = hub.get_mwrs("app").await.ok_or("no MWRS")?;
        match current(&m) {
            Some(c) if has_condition(&m, "Progressing", "False", "NewManifestWorkAvailable") => {
                Ok(c)
            }
            _ => Err(describe(&m)),
        }
    })
    .await;

    hub.set_template("app", configmap_template("v2")).await;
    let seen: Mutex<Vec<String>> = Mutex::default();
    let aborted_seen = AtomicBool::new(false);
    let m = wait_for("the abort to finish reverting", WAIT, || {
        let (hub, seen, aborted_seen, v1) = (&hub, &seen, &aborted_seen, &v1);
        async move {
            let m = hub.get_mwrs("app").await.ok_or("no MWRS")?;
            record(seen, &m);
            if m.status.as_ref().is_some_and(|s| s.aborted_time.is_some()) {
                aborted_seen.store(true, Ordering::Relaxed);
            }
            let works = hub.works_of("app").await;
            let all_v1 = works.len() == 3
                && works
                    .iter()
                    .all(|w| w.labels().get(labels::CONTROLLER_HASH) == Some(v1));
            if all_v1 && has_condition(&m, "Progressing", "False", "RolloutAborted") {
                Ok(m)
            } else {
                Err(format!("all_v1={all_v1} {}", describe(&m)))
            }
        }
    })
    .await;

    let seen = seen.into_inner().expect("lock");
    assert!(
        aborted_seen.load(Ordering::Relaxed),
        "abortedTime was set; reasons seen: {seen:?}"
    );
    let s = m.status.clone().unwrap_or_default();
    assert!(s.aborted_time.is_some(), "the hold stands");
    assert_eq!(
        s.current_revision.as_deref(),
        Some(v1.as_str()),
        "stable revision kept"
    );
    assert_ne!(s.update_revision.as_deref(), Some(v1.as_str()));
    assert!(
        has_condition(&m, "PlacementRolledOut", "False", "RolloutDegraded"),
        "{}",
        describe(&m)
    );
    let events = hub.events_of("app").await;
    assert!(
        events.iter().any(|(r, _)| r == "AbortStarted"),
        "an AbortStarted event: {events:?}"
    );
}

/// (d) An invalid MWRS gets a condition naming the field; a valid one beside it
/// completes; the invalid one touches no ManifestWork.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_spec_is_reported_and_isolated() {
    let Some(hub) = TestHub::from_env("invalid", 2).await else {
        return;
    };
    let _controller = start_controller(&hub);
    let _agent = Agent::start(hub.client.clone(), AgentConfig::new(hub.clusters.clone()));
    hub.publish_all("p").await;
    let cm = configmap_template("v1")["workload"]["manifests"][0].clone();
    let duplicated = json!({"workload": {"manifests": [cm.clone(), cm]}});
    let all = json!({"type": "All"});
    hub.create_mwrs(&mwrs("bad", duplicated, &[("p", all.clone())]))
        .await;
    hub.create_mwrs(&mwrs("good", configmap_template("v1"), &[("p", all)]))
        .await;

    let bad = wait_for("the invalid condition", WAIT, || async {
        let m = hub.get_mwrs("bad").await.ok_or("no MWRS")?;
        if has_condition(&m, "Progressing", "False", "InvalidSpec") {
            Ok(m)
        } else {
            Err(describe(&m))
        }
    })
    .await;
    let message = mwrs_testsupport::conditions(&bad)
        .get("Progressing")
        .map(|(_, _, msg)| msg.clone())
        .unwrap_or_default();
    assert!(
        message.contains("spec.manifestWorkTemplate.workload.manifests[1]"),
        "message names the field: {message}"
    );
    wait_for("the valid MWRS to complete", WAIT, || async {
        let m = hub.get_mwrs("good").await.ok_or("no MWRS")?;
        if current(&m).is_some() && has_condition(&m, "PlacementRolledOut", "True", "Complete") {
            Ok(())
        } else {
            Err(describe(&m))
        }
    })
    .await;
    assert!(
        hub.works_of("bad").await.is_empty(),
        "invalid MWRS wrote no ManifestWork"
    );
    assert_eq!(hub.works_of("good").await.len(), 2);
}

/// A cluster dropped from the placement loses its ManifestWork; the others keep theirs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_removed_from_placement_loses_its_work() {
    let Some(hub) = TestHub::from_env("unselect", 3).await else {
        return;
    };
    let _controller = start_controller(&hub);
    let _agent = Agent::start(hub.client.clone(), AgentConfig::new(hub.clusters.clone()));
    hub.publish_all("p").await;
    hub.create_mwrs(&mwrs(
        "app",
        configmap_template("v1"),
        &[("p", json!({"type": "All"}))],
    ))
    .await;
    wait_for("three ManifestWorks", WAIT, || async {
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
        WAIT,
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
