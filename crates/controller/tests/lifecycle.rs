//! Deletion (Foreground and Background) and restart of the controller binary in the
//! middle of a rollout, on the real test hub.
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`); skipped without it unless CI=true.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{
    WAIT, delete_and_wait_gone, hash_label, revisions_of, spawn_controller_binary,
    start_agent_succeeding, start_controller, update, wait_complete, works_by_cluster,
};
use kube::api::{Api, ListParams};
use mwrs_api::work::ManifestWork;
use mwrs_fleet::{Agent, AgentConfig};
use mwrs_testsupport::{TestHub, configmap_template, mwrs, wait_for};
use serde_json::json;

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
    wait_complete(&hub, "fg", None).await;
    wait_complete(&hub, "bg", None).await;
    assert_eq!(revisions_of(&hub, "fg").await.len(), 1);
    assert_eq!(hub.works_of("fg").await.len(), 2);

    // Foreground: while any work is still there (held by the agent), the MWRS stays.
    let held_while_works_existed = AtomicBool::new(false);
    delete_and_wait_gone(&hub, "fg", |present, works| {
        if present
            && !works.is_empty()
            && works
                .iter()
                .all(|w| w.metadata.deletion_timestamp.is_some())
        {
            held_while_works_existed.store(true, Ordering::Relaxed);
        }
    })
    .await;
    assert!(
        held_while_works_existed.load(Ordering::Relaxed),
        "Foreground kept the MWRS while its ManifestWorks were being deleted"
    );

    // Background: the MWRS goes at once (finalizer removed after the delete calls),
    // the works follow when the agent lets them go.
    let gone_before_works = AtomicBool::new(false);
    delete_and_wait_gone(&hub, "bg", |present, works| {
        if !present && !works.is_empty() {
            gone_before_works.store(true, Ordering::Relaxed);
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
    let _agent = start_agent_succeeding(&hub, Duration::from_secs(1));
    hub.publish_all("p").await;
    let mut first = spawn_controller_binary(&hub, &[]).await;
    let strategy = json!({"type": "Progressive", "progressive": {"maxConcurrency": 1}});
    hub.create_mwrs(&mwrs("app", configmap_template("v1"), &[("p", strategy)]))
        .await;
    wait_for("the rollout to be under way", WAIT, || async {
        let n = works_by_cluster(&hub, "app").await.len();
        if (1..4).contains(&n) {
            Ok(())
        } else {
            Err(format!("{n} works; controller log:\n{}", first.output()))
        }
    })
    .await;
    first.kill();
    let _second = spawn_controller_binary(&hub, &[]).await;
    let m = wait_complete(&hub, "app", None).await;

    let hash = update(&m).expect("update revision");
    // One ManifestWork per cluster namespace, across all names.
    for c in &hub.clusters {
        let api: Api<ManifestWork> = Api::namespaced(hub.client.clone(), c);
        let items = api.list(&ListParams::default()).await.expect("list").items;
        assert_eq!(items.len(), 1, "{c}: {items:?}");
        assert_eq!(hash_label(&items[0]), Some(hash.clone()));
    }
    assert_eq!(revisions_of(&hub, "app").await.len(), 1);
}
