//! The simulated agent's memory under a backlog (issue #36), measured with dhat's heap
//! accounting (bytes, not time). The agent starts one task per ManifestWork generation
//! and lets a few write at once; the others wait for a permit. Each waiting task held the
//! whole ManifestWork and its spec decoded again: the bench's harness took 6.2 GiB with
//! 150,000 ManifestWorks created faster than the hub let the agent answer, on track for
//! 12 GiB at OCM's ceiling beside the hub. A waiting task now holds what it answers with:
//! here a backlog of 1,000 peaked at 40.7 KB per ManifestWork before, 8.5 KB after (most
//! of it the task itself, sized for its largest state).
//!
//! The agent lives in `mwrs-fleet`; its test is here, where the test hub and dhat are.
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`); skipped without it unless CI=true.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt, stream};
use kube::api::{Api, PostParams};
use mwrs_api::work::ManifestWork;
use mwrs_fleet::{Agent, AgentConfig};
use mwrs_testsupport::{TestHub, wait_for};
use serde_json::{Value, json};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

const N: usize = 1_000;

/// The bench's template: a ConfigMap, a Deployment and a Service (about 1.5 KB of JSON).
fn template() -> Value {
    json!({"workload": {"manifests": [
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "web-config", "namespace": "web"},
         "data": {"version": "v1", "settings.yaml": "replicas: 3\nlogLevel: info\n"}},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "web", "namespace": "web", "labels": {"app": "web"}},
         "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
           "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{
             "name": "web", "image": "registry.example.com/web:v1",
             "ports": [{"containerPort": 8080}],
             "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}}}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": "web", "namespace": "web"},
         "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}},
    ]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_of_answers_holds_little_per_manifestwork() {
    let Some(hub) = TestHub::from_env("agent-memory", N).await else {
        return;
    };
    let _profiler = dhat::Profiler::builder().testing().build();
    let before = dhat::HeapStats::get().curr_bytes;
    let mut config = AgentConfig::new(hub.clusters.clone());
    config.concurrency = 1;
    let agent = Agent::start(hub.client.clone(), config);
    // Created faster than one permit lets the agent answer: a backlog builds up.
    stream::iter(hub.clusters.iter())
        .map(|c| {
            let api: Api<ManifestWork> = Api::namespaced(hub.client.clone(), c);
            let mw: ManifestWork = serde_json::from_value(json!({
                "apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
                "metadata": {"name": format!("{}-app", hub.namespace)},
                "spec": template(),
            }))
            .unwrap();
            async move { api.create(&PostParams::default(), &mw).await.map(|_| ()) }
        })
        .buffer_unordered(32)
        .try_collect::<()>()
        .await
        .unwrap();
    let answered = || agent.stats.status_writes.load(Ordering::Relaxed);
    wait_for(
        &format!("the agent's answers to {N} ManifestWorks"),
        Duration::from_secs(600),
        || {
            let n = answered();
            async move { (n >= N as u64).then_some(()).ok_or(format!("{n} so far")) }
        },
    )
    .await;
    let peak = dhat::HeapStats::get().max_bytes.saturating_sub(before) / N;
    println!("the agent's backlog peaked at {peak} B per ManifestWork");
    assert!(
        peak < 20_000,
        "the agent's backlog peaked at {peak} B per ManifestWork"
    );
    drop(agent);
}
