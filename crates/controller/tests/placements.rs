//! Several placementRefs, a missing Placement, and mandatory decision groups with a
//! minimum success time, on the real test hub.
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`); skipped without it unless CI=true.

mod common;

use std::sync::Mutex;
use std::time::Duration;

use common::{
    WAIT, current, describe, start_agent_succeeding, start_controller, update, works_by_cluster,
};
use jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use mwrs_api::labels;
use mwrs_api::work::ManifestWork;
use mwrs_fleet::placement::DecisionGroup;
use mwrs_fleet::{Agent, AgentConfig};
use mwrs_testsupport::{TestHub, configmap_template, has_condition, mwrs, wait_for};
use serde_json::json;

/// Time at which `w` finished on its current generation (Progressing False at that
/// generation, not Degraded): the condition's lastTransitionTime.
fn succeeded_at(w: &ManifestWork) -> Option<Timestamp> {
    let g = w.metadata.generation;
    let cs = w.status.as_ref()?.conditions.as_ref()?;
    let degraded = cs
        .iter()
        .any(|c| c.type_ == "Degraded" && c.status == "True");
    cs.iter()
        .find(|c| c.type_ == "Progressing" && c.status == "False" && c.observed_generation == g)
        .filter(|_| !degraded)
        .map(|c| c.last_transition_time.0)
}

/// 4. Two placementRefs (Progressive and All) overlapping on one cluster: that cluster
/// gets exactly one ManifestWork (owned by the first ref), counted once; both complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_placements_share_one_work_per_cluster() {
    let Some(hub) = TestHub::from_env("overlap", 4).await else {
        return;
    };
    let _controller = start_controller(&hub);
    let _agent = start_agent_succeeding(&hub, Duration::from_millis(300));
    let c = &hub.clusters;
    let shared = c[2].clone();
    hub.publish("p1", &[DecisionGroup::new("", c[0..3].to_vec())])
        .await;
    hub.publish("p2", &[DecisionGroup::new("", c[2..4].to_vec())])
        .await;
    hub.create_mwrs(&mwrs(
        "app",
        configmap_template("v1"),
        &[
            (
                "p1",
                json!({"type": "Progressive", "progressive": {"maxConcurrency": 1}}),
            ),
            ("p2", json!({"type": "All"})),
        ],
    ))
    .await;

    let done = wait_for("both placements to complete", WAIT, || async {
        let m = hub.get_mwrs("app").await.ok_or("no MWRS")?;
        let complete = current(&m).is_some()
            && current(&m) == update(&m)
            && has_condition(&m, "PlacementVerified", "True", "AsExpected")
            && has_condition(&m, "Progressing", "False", "NewManifestWorkAvailable")
            && has_condition(&m, "PlacementRolledOut", "True", "Complete");
        if complete { Ok(m) } else { Err(describe(&m)) }
    })
    .await;
    let hash = update(&done).expect("update revision");

    let works = hub.works_of("app").await;
    assert_eq!(works.len(), 4, "one ManifestWork per selected cluster");
    let by_cluster = works_by_cluster(&hub, "app").await;
    assert_eq!(by_cluster.len(), 4, "no cluster has two");
    for (cluster, w) in &by_cluster {
        assert_eq!(
            w.labels().get(labels::CONTROLLER_HASH),
            Some(&hash),
            "{cluster}"
        );
        assert!(succeeded_at(w).is_some(), "{cluster} succeeded");
    }
    // Nothing else in the shared cluster's namespace either.
    let api: Api<ManifestWork> = Api::namespaced(hub.client.clone(), &shared);
    let in_shared = api.list(&ListParams::default()).await.expect("list").items;
    assert_eq!(in_shared.len(), 1, "exactly one ManifestWork in {shared}");
    assert_eq!(
        in_shared[0]
            .labels()
            .get(labels::PLACEMENT_NAME)
            .map(String::as_str),
        Some("p1"),
        "owned by the first placementRef that selects it"
    );
    let s = done.status.clone().unwrap_or_default();
    assert_eq!(
        (s.summary.total, s.summary.updated, s.summary.desired_total),
        (4, 4, 4),
        "the shared cluster counted once: {:?}",
        s.summary
    );
    let names: Vec<&str> = s
        .placement_summary
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(names, ["p1", "p2"], "a summary per placementRef");
}

/// 5. A placementRef naming a Placement that does not exist: PlacementVerified False
/// PlacementDecisionNotFound; the other placementRef still rolls out completely.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_placement_does_not_block_the_other() {
    let Some((hub, _controller)) = common::started("ghost", 2).await else {
        return;
    };
    let _agent = Agent::start(hub.client.clone(), AgentConfig::new(hub.clusters.clone()));
    hub.create_mwrs(&mwrs(
        "app",
        configmap_template("v1"),
        &[
            ("ghost", json!({"type": "All"})),
            ("p", json!({"type": "All"})),
        ],
    ))
    .await;

    let m = wait_for(
        "PlacementDecisionNotFound and p's clusters done",
        WAIT,
        || async {
            let m = hub.get_mwrs("app").await.ok_or("no MWRS")?;
            let hash = update(&m).ok_or_else(|| describe(&m))?;
            let works = hub.works_of("app").await;
            let done = works.len() == 2
                && works.iter().all(|w| {
                    w.labels().get(labels::CONTROLLER_HASH) == Some(&hash)
                        && succeeded_at(w).is_some()
                });
            let p_done = m.status.as_ref().is_some_and(|s| {
                s.placement_summary.iter().any(|p| {
                    p.name == "p" && p.summary.updated == 2 && p.summary.desired_total == 2
                })
            });
            if done
                && p_done
                && has_condition(
                    &m,
                    "PlacementVerified",
                    "False",
                    "PlacementDecisionNotFound",
                )
            {
                Ok(m)
            } else {
                Err(format!(
                    "works done={done} p_done={p_done} {}",
                    describe(&m)
                ))
            }
        },
    )
    .await;
    let msg = mwrs_testsupport::conditions(&m)
        .get("PlacementVerified")
        .map(|(_, _, msg)| msg.clone())
        .unwrap_or_default();
    assert!(msg.contains("ghost"), "message names the Placement: {msg}");
    eprintln!("missing placement, final status: {}", describe(&m));
}

/// 6. ProgressivePerGroup with a mandatory group and minSuccessTime 3s: no cluster of the
/// other group gets a ManifestWork before every mandatory cluster has succeeded and 3 s
/// have passed since the last of them did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mandatory_group_and_min_success_time_gate_the_next_group() {
    let Some(hub) = TestHub::from_env("mandatory", 4).await else {
        return;
    };
    let _controller = start_controller(&hub);
    let canary: Vec<String> = hub.clusters[0..2].to_vec();
    let rest: Vec<String> = hub.clusters[2..4].to_vec();
    let _agent = start_agent_succeeding(&hub, Duration::from_millis(800));
    hub.publish(
        "p",
        &[
            DecisionGroup::new("canary", canary.clone()),
            DecisionGroup::new("rest", rest.clone()),
        ],
    )
    .await;
    let strategy = json!({"type": "ProgressivePerGroup", "progressivePerGroup": {
        "mandatoryDecisionGroups": [{"groupName": "canary"}],
        "minSuccessTime": "3s"}});
    hub.create_mwrs(&mwrs("app", configmap_template("v1"), &[("p", strategy)]))
        .await;

    // Every poll: if a "rest" cluster has a ManifestWork, every canary must have
    // succeeded. (When things were seen is not asserted: polling lag under load makes it
    // noise; the server-side times below are exact.)
    let violations: Mutex<Vec<String>> = Mutex::default();
    let done = wait_for("the rollout to complete", WAIT, || {
        let (hub, canary, rest) = (&hub, &canary, &rest);
        let violations = &violations;
        async move {
            let m = hub.get_mwrs("app").await.ok_or("no MWRS")?;
            let works = works_by_cluster(hub, "app").await;
            let canary_done = canary
                .iter()
                .all(|c| works.get(c).and_then(succeeded_at).is_some());
            let started: Vec<&String> = rest.iter().filter(|c| works.contains_key(*c)).collect();
            if !started.is_empty() && !canary_done {
                violations.lock().expect("lock").push(format!(
                    "{started:?} have work before the canaries succeeded: {}",
                    describe(&m)
                ));
            }
            let complete = current(&m).is_some()
                && current(&m) == update(&m)
                && has_condition(&m, "PlacementRolledOut", "True", "Complete");
            if complete {
                Ok((m, works))
            } else {
                Err(describe(&m))
            }
        }
    })
    .await;
    let (_, works) = done;
    let violations = violations.into_inner().expect("lock");
    assert!(violations.is_empty(), "{violations:?}");

    // Server-side times (second resolution; the engine reads the same truncated times):
    // every "rest" ManifestWork was created at least 3 s after the last canary success.
    let last_canary = canary
        .iter()
        .filter_map(|c| works.get(c).and_then(succeeded_at))
        .max()
        .expect("canaries succeeded");
    for c in &rest {
        let w = works.get(c).expect("rest cluster has its work");
        let created = w.metadata.creation_timestamp.as_ref().expect("created").0;
        assert!(
            created >= last_canary + Duration::from_secs(3),
            "{c}'s ManifestWork created at {created}, last canary succeeded at {last_canary}"
        );
    }
}
