//! A work agent stopped (SIGSTOP) during a rollout, as a spoke that hangs or loses its
//! network does: the controller writes its ManifestWork once and then leaves it alone
//! (no rewrite loop, rules §11.1–11.2) while the other clusters finish; once the agent
//! runs again the rollout completes. Then the controller is killed mid-rollout (its task
//! dropped, as a crash) and a new one finishes the next revision.
//!
//! Its own test binary: stopping a shared agent would stall the other tests' clusters.
//! Needs the e2e environment (`. "$(e2e/env.sh up)"`); skipped without it unless CI=true.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use kube::api::Api;
use mwrs_api::work::ManifestWork;
use mwrs_e2e::{Env, WAIT, configmap_template, manifest_version};
use mwrs_testsupport::wait_for;
use serde_json::json;

async fn work_version(env: &Env, cluster: &str) -> (Option<String>, Option<String>) {
    let api: Api<ManifestWork> = Api::namespaced(env.hub.client.clone(), cluster);
    let w = api
        .get(&format!("{}.app", env.hub.namespace))
        .await
        .unwrap();
    let v = manifest_version(&w);
    (v, w.metadata.resource_version)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_agent_is_left_alone_and_a_killed_controller_resumes() {
    let Some(env) = Env::from_env("stopped").await else {
        return;
    };
    env.canary_placement("p").await;
    let controller = env.start_controller();
    let cm = env.hub.namespace.clone();
    env.create_app(configmap_template(&cm, "v1"), json!({"type": "All"}))
        .await;

    let stopped = env.spoke("cluster2").stop_agent();
    env.hub
        .set_template("app", configmap_template(&cm, "v2"))
        .await;
    wait_for("the running clusters on v2", WAIT, || async {
        let v = env.spoke_versions(&cm).await;
        if v["cluster1"].as_deref() == Some("v2") && v["cluster3"].as_deref() == Some("v2") {
            Ok(())
        } else {
            Err(format!("{v:?}"))
        }
    })
    .await;
    let written = wait_for("cluster2's ManifestWork carrying v2", WAIT, || async {
        match work_version(&env, "cluster2").await {
            (Some(v), rv) if v == "v2" => Ok(rv),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    // Several settle times and rechecks: a rewrite loop would show within a second.
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(
        work_version(&env, "cluster2").await,
        (Some("v2".to_string()), written),
        "the stopped cluster's ManifestWork was rewritten"
    );
    assert_eq!(
        env.spoke_versions(&cm).await["cluster2"].as_deref(),
        Some("v1")
    );
    drop(stopped);
    env.wait_spokes_on(&cm, "v2").await;
    let v2 = env.wait_complete("app").await;

    // A crash mid-rollout: v3 starts, the controller goes away, a new one finishes it.
    let again = env.spoke("cluster3").stop_agent();
    env.hub
        .set_template("app", configmap_template(&cm, "v3"))
        .await;
    wait_for("v3 on cluster1", WAIT, || async {
        let v = env.spoke_versions(&cm).await;
        if v["cluster1"].as_deref() == Some("v3") {
            Ok(())
        } else {
            Err(format!("{v:?}"))
        }
    })
    .await;
    drop(controller);
    drop(again);
    let _controller = env.start_controller();
    env.wait_spokes_on(&cm, "v3").await;
    let v3 = env.wait_complete("app").await;
    assert_ne!(v3, v2);
    env.delete_and_wait_gone("app", &cm).await;
}
