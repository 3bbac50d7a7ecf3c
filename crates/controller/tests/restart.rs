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

/// resourceVersions of the MWRS and its ManifestWorks.
async fn versions(hub: &TestHub) -> BTreeMap<String, Option<String>> {
    let mut out: BTreeMap<String, Option<String>> = common::works_by_cluster(hub, "app")
        .await
        .into_iter()
        .map(|(c, w)| (c, w.metadata.resource_version))
        .collect();
    let m = hub.get_mwrs("app").await.unwrap();
    out.insert("mwrs".into(), m.metadata.resource_version);
    out
}

/// A restart over a rollout where nothing changes writes nothing (rules §11.1): every
/// cluster done on the update revision but one whose agent never answers it (in flight).
/// The benchmark saw 9 writes from a restart at 5,000 clusters: the new process took the
/// first sight of each ManifestWork's conditions for a change, so every success was
/// unsettled again for the settle time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_over_an_unchanged_rollout_writes_nothing() {
    use common::{QUICK, start_agent, start_controller_sharing, version_of};
    use mwrs_fleet::agent::Behaviour;

    let Some(hub) = TestHub::from_env("restartquiet", 4).await else {
        return;
    };
    let silent = hub.clusters[0].clone();
    let _agent = start_agent(&hub, move |w| {
        if w.cluster == silent && version_of(w.spec) == Some("v2") {
            Behaviour::Silent
        } else {
            QUICK
        }
    });
    hub.publish_all("p").await;
    let first = start_controller_sharing(&hub, mwrs_controller::Shared::default());
    let all = serde_json::json!({"type": "All"});
    hub.create_mwrs(&mwrs("app", configmap_template("v1"), &[("p", all)]))
        .await;
    let v1 = current(&wait_complete(&hub, "app", None).await).unwrap();
    hub.set_template("app", configmap_template("v2")).await;
    wait_mwrs(&hub, "app", "3 of 4 clusters done on v2", |m| {
        update(m).is_some_and(|u| u != v1)
            && m.status
                .as_ref()
                .is_some_and(|s| s.summary.total == 4 && s.summary.available == 3)
    })
    .await;
    // Quiet: nothing written for twice the settle time.
    let before = wait_for("the first controller quiet", common::WAIT, || async {
        let a = versions(&hub).await;
        tokio::time::sleep(std::time::Duration::from_secs(4)).await;
        let b = versions(&hub).await;
        if a == b {
            Ok(b)
        } else {
            Err(format!("{a:?} → {b:?}"))
        }
    })
    .await;
    let events = hub.events_of("app").await.len();
    drop(first);

    let shared = mwrs_controller::Shared::default();
    let _second = start_controller_sharing(&hub, shared.clone());
    wait_for(
        "the restarted controller's first pass",
        common::WAIT,
        || async {
            let passes = shared.metrics.reconciles.get();
            if passes >= 1 {
                Ok(())
            } else {
                Err("no pass yet".to_string())
            }
        },
    )
    .await;
    // Past the settle time (2 s) and its recheck: a flap would have been written by now.
    tokio::time::sleep(std::time::Duration::from_secs(6)).await;
    assert_eq!(
        common::counted_writes(&shared),
        Vec::<String>::new(),
        "the restart wrote"
    );
    assert_eq!(versions(&hub).await, before);
    assert_eq!(hub.events_of("app").await.len(), events);
}
