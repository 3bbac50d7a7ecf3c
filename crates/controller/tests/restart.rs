//! The controller binary killed (SIGKILL) in the middle of an abort and started again,
//! on the real test hub: it resumes from what is stored (abortedTime, revisions,
//! ManifestWork labels), finishes the revert, keeps abortedTime, and never leaves two
//! ManifestWorks for one cluster or loses a revision.
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`); skipped without it unless CI=true.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;

use common::{
    aborted, all_aborting, current, describe, hash_label, revisions_by_cluster, revisions_of,
    spawn_controller_binary, start_agent_hanging, update, wait_complete, wait_mwrs, wait_works,
};
use kube::api::{Api, ListParams};
use mwrs_api::work::ManifestWork;
use mwrs_testsupport::{TestHub, configmap_template, has_condition, mwrs, wait_for};

/// Enough clusters that a revert written one at a time takes a while to kill into.
const CLUSTERS: usize = 40;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_mid_abort_resumes_it() {
    let Some(hub) = TestHub::from_env("restartabort", CLUSTERS).await else {
        return;
    };
    let _agent = start_agent_hanging(&hub, &hub.clusters[0], "v2");
    hub.publish_all("p").await;
    // One write at a time, so the revert spans many requests.
    let mut first = spawn_controller_binary(&hub, &["--concurrency", "1"]).await;
    let strategy = all_aborting("3s");
    hub.create_mwrs(&mwrs("app", configmap_template("v1"), &[("p", strategy)]))
        .await;
    let v1 = current(&wait_complete(&hub, "app", None).await).unwrap();
    hub.set_template("app", configmap_template("v2")).await;
    let m = wait_mwrs(&hub, "app", "v2 as the update revision", |m| {
        update(m).is_some_and(|u| u != v1)
    })
    .await;
    let v2 = update(&m).unwrap();
    let all = |h: &str| -> BTreeMap<String, String> {
        hub.clusters
            .iter()
            .map(|c| (c.clone(), h.to_string()))
            .collect()
    };
    wait_works(&hub, "app", &all(&v2)).await;

    // Kill as soon as the revert has begun.
    let reverted = wait_for("the revert to begin", common::WAIT, || async {
        let got = revisions_by_cluster(&hub, "app").await;
        let n = got.values().filter(|h| **h == v1).count();
        if n > 0 {
            Ok(n)
        } else {
            Err(format!("{got:?}; controller log:\n{}", first.output()))
        }
    })
    .await;
    first.kill();
    eprintln!("MEASURED killed with {reverted} of {CLUSTERS} clusters reverted");
    let m = hub.get_mwrs("app").await.unwrap();
    let held_since = aborted(&m).expect("abortedTime persisted before the first revert write");
    assert_eq!(current(&m).as_deref(), Some(v1.as_str()));

    let second = spawn_controller_binary(&hub, &[]).await;
    wait_works(&hub, "app", &all(&v1)).await;
    let m = wait_mwrs(&hub, "app", "the abort to settle", |m| {
        has_condition(m, "ManifestworkApplied", "True", "AsExpected")
            && has_condition(m, "Progressing", "False", "RolloutAborted")
    })
    .await;
    assert_eq!(
        aborted(&m).as_deref(),
        Some(held_since.as_str()),
        "abortedTime unchanged by the restart; {}",
        describe(&m)
    );
    assert_eq!(current(&m).as_deref(), Some(v1.as_str()));
    assert_eq!(update(&m).as_deref(), Some(v2.as_str()));
    assert!(has_condition(
        &m,
        "PlacementRolledOut",
        "False",
        "RolloutDegraded"
    ));

    // Exactly one ManifestWork per cluster namespace, whatever its name.
    for c in &hub.clusters {
        let api: Api<ManifestWork> = Api::namespaced(hub.client.clone(), c);
        let items = api.list(&ListParams::default()).await.unwrap().items;
        assert_eq!(items.len(), 1, "{c}: {items:?}");
        assert_eq!(hash_label(&items[0]).as_deref(), Some(v1.as_str()));
    }
    let mut kept: Vec<String> = revisions_of(&hub, "app")
        .await
        .iter()
        .filter_map(hash_label)
        .collect();
    kept.sort();
    let mut want = vec![v1.clone(), v2.clone()];
    want.sort();
    assert_eq!(kept, want, "no revision lost or duplicated");
    drop(second);
}
