//! The simulated work agent behaves like upstream's where a hub fault meets it: a status
//! write the hub refuses (down, restarting, stalled, forbidden) is tried again until it
//! lands, as upstream's agent requeues; a dropped write would leave the cluster in progress
//! for ever and a rollout past its deadline for no fault of the controller (the fault soak,
//! seed 34, found it: 8 clusters aborted after the hub restarted under their writes).
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`); skipped without it unless CI=true.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::Ordering;
use std::time::Duration;

use kube::Api;
use kube::api::PostParams;
use mwrs_api::work::{ManifestWork, ManifestWorkTemplate};
use mwrs_fleet::{Agent, AgentConfig};
use mwrs_testsupport::{TestHub, client_from, configmap_template, wait_for};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);

/// Reading ManifestWorks, and `status_verbs` on their status.
fn rules(status_verbs: &[&str]) -> serde_json::Value {
    json!([
        {"apiGroups": ["work.open-cluster-management.io"], "resources": ["manifestworks"],
         "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["work.open-cluster-management.io"], "resources": ["manifestworks/status"],
         "verbs": status_verbs},
    ])
}

#[tokio::test]
async fn a_refused_status_write_is_tried_again_until_it_lands() {
    let Some(hub) = TestHub::from_env("agent-retry", 1).await else {
        return;
    };
    // The agent may read ManifestWorks but not write their status, for now.
    hub.grant("agent", rules(&["get"])).await;
    let kubeconfig = hub
        .service_account_kubeconfig("agent")
        .await
        .expect("kubeconfig");
    let agent_client = client_from(&kubeconfig).await.expect("client");
    let agent = Agent::start(agent_client, AgentConfig::new(hub.clusters.clone()));

    let cluster = hub.clusters[0].clone();
    let works: Api<ManifestWork> = Api::namespaced(hub.client.clone(), &cluster);
    let spec = ManifestWorkTemplate::from_value(configmap_template("v1")).expect("template");
    works
        .create(&PostParams::default(), &ManifestWork::new("w", spec))
        .await
        .expect("create");
    let stats = agent.stats.clone();
    wait_for("the agent's status write refused", WAIT, || async {
        match stats.errors.load(Ordering::Relaxed) {
            0 => Err("no error yet".to_string()),
            _ => Ok(()),
        }
    })
    .await;

    hub.grant("agent", rules(&["patch", "update"])).await;
    wait_for("the status written once allowed", WAIT, || async {
        let w = works.get("w").await.map_err(|e| e.to_string())?;
        let conditions = w.status.and_then(|s| s.conditions).unwrap_or_default();
        if conditions
            .iter()
            .any(|c| c.type_ == "Applied" && c.status == "True")
        {
            Ok(())
        } else {
            Err(format!("conditions {conditions:?}"))
        }
    })
    .await;
    agent.stop();
    hub.revoke().await;
}
