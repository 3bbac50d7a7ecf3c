//! Our ManifestWorks survive upstream's hub garbage collector (issue #32 item 4): upstream's
//! hub work manager (`open-cluster-management.io/ocm` at `bench/peer`'s version, `bench/peer/run.sh`) with
//! only its `CleanUpCompletedManifestWork` feature gate on deletes every completed
//! ManifestWork whose template has `deleteOption.ttlSecondsAfterFinished`, unless it carries
//! the `work.open-cluster-management.io/manifestworkreplicaset` label key. An MWRS whose
//! `<namespace>.<name>` is too long for a label value, and one whose is not, keep every
//! ManifestWork (same UID) while the collector deletes a control ManifestWork without the
//! key, which shows it ran.
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`), skipped without it unless CI=true,
//! and Go (upstream's command is built on first use and cached).

// run-tests: alone (changes cluster-wide objects of the shared test hub)

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{QUICK, start_agent, start_controller, wait_complete, works_by_cluster};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use mwrs_api::work::ManifestWork;
use mwrs_testsupport::{ChildProcess, TestHub, configmap_template, mwrs, wait_for};
use serde_json::{Value, json};

/// A template with a TTL after completion, which makes upstream's collector look at it.
fn with_ttl(version: &str) -> Value {
    let mut t = configmap_template(version);
    t["deleteOption"] = json!({"propagationPolicy": "Foreground", "ttlSecondsAfterFinished": 1});
    t
}

/// Marks `w` Complete, as upstream's agent does when every manifest's completion rule holds.
async fn complete(hub: &TestHub, w: &ManifestWork) {
    let api: Api<ManifestWork> =
        Api::namespaced(hub.client.clone(), &w.namespace().unwrap_or_default());
    let mut conditions = w
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    conditions.retain(|c| c.type_ != "Complete");
    let mut done = serde_json::to_value(&conditions).unwrap();
    done.as_array_mut()
        .unwrap()
        .push(json!({"type": "Complete", "status": "True",
        "reason": "Completed", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}));
    let body = json!({"status": {"conditions": done}});
    api.patch_status(&w.name_any(), &PatchParams::default(), &Patch::Merge(&body))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstreams_garbage_collector_spares_our_works_whatever_the_name_length() {
    let Some(hub) = TestHub::from_env("gc", 3).await else {
        return;
    };
    let agent = start_agent(&hub, |_| QUICK);
    hub.publish_all("p").await;
    let long = "l".repeat(60);
    let names = ["app", long.as_str()];
    for name in names {
        hub.create_mwrs(&mwrs(
            name,
            with_ttl("v1"),
            &[("p", json!({"type": "All"}))],
        ))
        .await;
    }
    let controller = start_controller(&hub);
    for name in names {
        wait_complete(&hub, name, None).await;
    }
    // The agent stops first, so that nothing rewrites the Complete conditions.
    drop(agent);
    let before: Vec<BTreeMap<String, String>> = {
        let mut out = Vec::new();
        for name in names {
            for w in works_by_cluster(&hub, name).await.values() {
                complete(&hub, w).await;
            }
            out.push(common::work_uids(&hub, name).await);
        }
        out
    };
    assert!(before.iter().all(|u| u.len() == 3), "{before:?}");

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/peer/run.sh");
    let kubeconfig = hub.kubeconfig.to_string_lossy().to_string();
    let _collector = ChildProcess::spawn(
        &script,
        &[
            &kubeconfig,
            "--feature-gates=ManifestWorkReplicaSet=false,CleanUpCompletedManifestWork=true",
        ],
        &[],
    )
    .expect("upstream's work manager starts");

    // A control the collector must delete: completed, with a TTL, without the key.
    let cluster = &hub.clusters[0];
    let api: Api<ManifestWork> = Api::namespaced(hub.client.clone(), cluster);
    let control: ManifestWork = serde_json::from_value(json!({
        "metadata": {"name": format!("control-{}", hub.namespace)},
        "spec": with_ttl("control"),
    }))
    .unwrap();
    let control = api.create(&PostParams::default(), &control).await.unwrap();
    complete(&hub, &control).await;
    wait_for(
        "upstream's collector deletes the control",
        common::WAIT,
        || async {
            match api.get_opt(&control.name_any()).await {
                Ok(None) => Ok(()),
                other => Err(format!("{:?}", other.map(|o| o.is_some()))),
            }
        },
    )
    .await;

    for (name, was) in names.iter().zip(&before) {
        assert_eq!(
            &common::work_uids(&hub, name).await,
            was,
            "{name}: ManifestWorks deleted"
        );
    }
    drop(controller);
}
