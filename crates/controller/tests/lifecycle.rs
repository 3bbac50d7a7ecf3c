//! Deletion (Foreground and Background) and restart of the controller binary in the
//! middle of a rollout, on the real test hub.
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`); skipped without it unless CI=true.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{WAIT, current, describe, start_agent_succeeding, start_controller, update};
use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams};
use mwrs_api::labels;
use mwrs_api::work::ManifestWork;
use mwrs_fleet::{Agent, AgentConfig};
use mwrs_testsupport::{ChildProcess, TestHub, configmap_template, has_condition, mwrs, wait_for};
use serde_json::json;

async fn revisions_of(hub: &TestHub, name: &str) -> Vec<ControllerRevision> {
    let api: Api<ControllerRevision> = Api::namespaced(hub.client.clone(), &hub.namespace);
    let lp =
        ListParams::default().labels(&format!("{}={}.{name}", labels::MWRS_OWNER, hub.namespace));
    api.list(&lp).await.map(|l| l.items).unwrap_or_default()
}

async fn wait_complete(hub: &TestHub, name: &str) {
    wait_for(&format!("{name} to complete"), WAIT, || async {
        let m = hub.get_mwrs(name).await.ok_or("no MWRS")?;
        if current(&m).is_some() && has_condition(&m, "PlacementRolledOut", "True", "Complete") {
            Ok(())
        } else {
            Err(describe(&m))
        }
    })
    .await;
}

/// (c) Deleting an MWRS removes its ManifestWorks and revisions, then its finalizer;
/// Foreground keeps the MWRS until the works are gone, Background does not wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_foreground_and_background() {
    let Some(hub) = TestHub::from_env("deletion", 2).await else {
        return;
    };
    let _controller = start_controller(&hub);
    // The agent holds each deleted ManifestWork for 3 s, as a real agent cleaning up.
    let _agent = Agent::start(
        hub.client.clone(),
        AgentConfig::new(hub.clusters.clone()).finalizer(Duration::from_secs(3)),
    );
    hub.publish_all("p").await;
    let all = json!({"type": "All"});
    let mut fg = mwrs("fg", configmap_template("v1"), &[("p", all.clone())]);
    fg.spec.cascade_deletion_policy = Some("Foreground".into());
    let mut bg = mwrs("bg", configmap_template("v1"), &[("p", all)]);
    bg.spec.cascade_deletion_policy = Some("Background".into());
    hub.create_mwrs(&fg).await;
    hub.create_mwrs(&bg).await;
    wait_complete(&hub, "fg").await;
    wait_complete(&hub, "bg").await;
    assert_eq!(revisions_of(&hub, "fg").await.len(), 1);
    assert_eq!(hub.works_of("fg").await.len(), 2);

    // Foreground: while any work is still there (held by the agent), the MWRS stays.
    hub.mwrs_api()
        .delete("fg", &DeleteParams::default())
        .await
        .expect("delete fg");
    let held_while_works_existed = AtomicBool::new(false);
    wait_for("fg and everything it owned to go", WAIT, || async {
        let m = hub.get_mwrs("fg").await;
        let works = hub.works_of("fg").await;
        let revs = revisions_of(&hub, "fg").await;
        if m.is_some()
            && !works.is_empty()
            && works
                .iter()
                .all(|w| w.metadata.deletion_timestamp.is_some())
        {
            held_while_works_existed.store(true, Ordering::Relaxed);
        }
        if m.is_some() && works.is_empty() {
            // The finalizer may still be coming off; fine.
        }
        if m.is_none() && works.is_empty() && revs.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "mwrs present={} works={} revisions={}",
                m.is_some(),
                works.len(),
                revs.len()
            ))
        }
    })
    .await;
    assert!(
        held_while_works_existed.load(Ordering::Relaxed),
        "Foreground kept the MWRS while its ManifestWorks were being deleted"
    );

    // Background: the MWRS goes at once (finalizer removed after the delete calls),
    // the works follow when the agent lets them go.
    hub.mwrs_api()
        .delete("bg", &DeleteParams::default())
        .await
        .expect("delete bg");
    let gone_before_works = AtomicBool::new(false);
    wait_for("bg and everything it owned to go", WAIT, || async {
        let m = hub.get_mwrs("bg").await;
        let works = hub.works_of("bg").await;
        let revs = revisions_of(&hub, "bg").await;
        if m.is_none() && !works.is_empty() {
            gone_before_works.store(true, Ordering::Relaxed);
        }
        if m.is_none() && works.is_empty() && revs.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "mwrs present={} works={} revisions={}",
                m.is_some(),
                works.len(),
                revs.len()
            ))
        }
    })
    .await;
    assert!(
        gone_before_works.load(Ordering::Relaxed),
        "Background removed the MWRS without waiting for its ManifestWorks"
    );
}

/// The controller binary killed (SIGKILL) in the middle of a progressive rollout and
/// started again resumes it without a second ManifestWork for any cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_mid_rollout_resumes_without_duplicates() {
    let Some(hub) = TestHub::from_env("restart", 4).await else {
        return;
    };
    let binary = std::path::Path::new(env!("CARGO_BIN_EXE_mwrs-controller"));
    let kubeconfig = hub.kubeconfig.to_string_lossy().to_string();
    let args = [
        "--kubeconfig",
        kubeconfig.as_str(),
        "--namespace",
        hub.namespace.as_str(),
        "--metrics-addr",
        "127.0.0.1:0",
    ];
    let env = [("RUST_LOG", "info")];
    let _agent = start_agent_succeeding(&hub, Duration::from_secs(1));
    hub.publish_all("p").await;
    let mut first = ChildProcess::spawn(binary, &args, &env).expect("start controller");
    let strategy = json!({"type": "Progressive", "progressive": {"maxConcurrency": 1}});
    hub.create_mwrs(&mwrs("app", configmap_template("v1"), &[("p", strategy)]))
        .await;
    wait_for("the rollout to be under way", WAIT, || async {
        let n = hub.works_of("app").await.len();
        if (1..4).contains(&n) {
            Ok(())
        } else {
            Err(format!("{n} works; controller log:\n{}", first.output()))
        }
    })
    .await;
    first.kill();
    let _second = ChildProcess::spawn(binary, &args, &env).expect("restart controller");
    wait_complete(&hub, "app").await;

    let m = hub.get_mwrs("app").await.expect("MWRS");
    let hash = update(&m).expect("update revision");
    // One owned ManifestWork per cluster, across all names.
    let mut per_cluster: BTreeMap<String, usize> = BTreeMap::new();
    for c in &hub.clusters {
        let api: Api<ManifestWork> = Api::namespaced(hub.client.clone(), c);
        let items = api.list(&ListParams::default()).await.expect("list").items;
        per_cluster.insert(c.clone(), items.len());
        for w in items {
            assert_eq!(w.labels().get(labels::CONTROLLER_HASH), Some(&hash));
        }
    }
    assert!(per_cluster.values().all(|n| *n == 1), "{per_cluster:?}");
    assert_eq!(revisions_of(&hub, "app").await.len(), 1);
}
