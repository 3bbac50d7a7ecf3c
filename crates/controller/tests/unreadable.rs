//! An MWRS the API server accepts but this controller's types cannot read (an integer
//! `maxFailures` beyond int32: the CRD's int-or-string schema sets no bound, the
//! IntOrString type holds an i32), on the real test hub: it is reported (Progressing False InvalidSpec, a
//! Warning Event), nothing is written for it, the MWRS beside it rolls out, and once
//! fixed it rolls out too.
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`); skipped without it unless CI=true.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{QUICK, is_complete, patch_mwrs, revisions_of, start_agent};
use common::{wait_complete, wait_mwrs, works_by_cluster};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_testsupport::{configmap_template, mwrs, wait_for};
use serde_json::{Value, json};

/// Progressing (status, reason, message) of a raw MWRS.
fn raw_progressing(o: &DynamicObject) -> Option<(String, String, String)> {
    let list = o.data.pointer("/status/conditions")?.as_array()?;
    let c = list
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Progressing"))?;
    let field = |k: &str| {
        c.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    Some((field("status"), field("reason"), field("message")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_mwrs_is_reported_and_isolated() {
    let Some((hub, _controller)) = common::started("unreadable", 2).await else {
        return;
    };
    let _agent = start_agent(&hub, |_| QUICK);

    let ar = ApiResource::erase::<ManifestWorkReplicaSet>(&());
    let raw: Api<DynamicObject> = Api::namespaced_with(hub.client.clone(), &hub.namespace, &ar);
    let bad: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "work.open-cluster-management.io/v1alpha1",
        "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": "bad"},
        "spec": {
            "manifestWorkTemplate": configmap_template("v1"),
            "placementRefs": [{"name": "p", "rolloutStrategy": {"type": "All",
                "all": {"maxFailures": 3_000_000_000_i64}}}],
        },
    }))
    .unwrap();
    raw.create(&PostParams::default(), &bad)
        .await
        .expect("the API server accepts a maxFailures beyond int32");
    hub.create_mwrs(&mwrs(
        "good",
        configmap_template("v1"),
        &[("p", json!({"type": "All"}))],
    ))
    .await;

    wait_complete(&hub, "good", None).await;
    let message = wait_for("bad to be reported", common::WAIT, || async {
        let o = raw.get("bad").await.map_err(|e| e.to_string())?;
        match raw_progressing(&o) {
            Some((s, r, m)) if s == "False" && r == "InvalidSpec" => Ok(m),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert!(
        message.contains("3000000000"),
        "the message names the value: {message}"
    );
    let events = hub.events_of("bad").await;
    assert!(
        events.iter().any(|(r, _)| r == "InvalidSpec"),
        "a Warning event: {events:?}"
    );
    assert!(
        works_by_cluster(&hub, "bad").await.is_empty(),
        "nothing written for it"
    );
    assert!(revisions_of(&hub, "bad").await.is_empty());
    assert_eq!(works_by_cluster(&hub, "good").await.len(), 2);

    // Fixed: it becomes readable and rolls out like any other.
    let fixed =
        json!({"spec": {"placementRefs": [{"name": "p", "rolloutStrategy": {"type": "All"}}]}});
    patch_mwrs(&hub, "bad", &fixed).await;
    wait_mwrs(&hub, "bad", "complete once fixed", is_complete).await;
    assert_eq!(works_by_cluster(&hub, "bad").await.len(), 2);
}

/// One owned ManifestWork whose status our types cannot read (a condition time the API
/// server accepts): after a restart the controller still becomes ready, the MWRS beside
/// it rolls out, and the owner reports the cluster, never taking it for done (rules
/// §11.7; before, the whole ManifestWork list failed and nothing was ever ready).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_work_status_stalls_nothing_across_a_restart() {
    use mwrs_controller::Shared;
    use mwrs_fleet::placement::DecisionGroup;
    use mwrs_testsupport::TestHub;
    use std::sync::atomic::Ordering;

    let Some(hub) = TestHub::from_env("badwork", 2).await else {
        return;
    };
    let c = hub.clusters.clone();
    let start = |shared: Shared| common::start_controller_sharing(&hub, shared);
    let controller = start(Shared::default());
    let _agent = start_agent(&hub, |_| QUICK);
    hub.publish("pa", &[DecisionGroup::new("", vec![c[0].clone()])])
        .await;
    hub.publish("pb", &[DecisionGroup::new("", vec![c[1].clone()])])
        .await;
    for (name, p) in [("a", "pa"), ("b", "pb")] {
        hub.create_mwrs(&mwrs(
            name,
            configmap_template("v1"),
            &[(p, json!({"type": "All"}))],
        ))
        .await;
        wait_complete(&hub, name, None).await;
    }
    drop(controller);

    // As a work agent could: a condition time the API server accepts.
    let mw_api = ApiResource::erase::<mwrs_api::work::ManifestWork>(&());
    let works: Api<DynamicObject> = Api::namespaced_with(hub.client.clone(), &c[0], &mw_api);
    let name = format!("{}.a", hub.namespace);
    let w = works.get(&name).await.unwrap();
    let mut conditions = w.data["status"]["conditions"].clone();
    for cond in conditions.as_array_mut().unwrap() {
        if cond["type"] == "Progressing" {
            cond["lastTransitionTime"] = json!("2026-01-01T00:00:00x1Z");
        }
    }
    works
        .patch_status(
            &name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"status": {"conditions": conditions}})),
        )
        .await
        .unwrap();

    let shared = Shared::default();
    let _controller = start(shared.clone());
    wait_for("ready after the restart", common::WAIT, || async {
        if shared.ready.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err("not ready".to_string())
        }
    })
    .await;
    hub.set_template("b", configmap_template("v2")).await;
    let b = wait_complete(
        &hub,
        "b",
        common::current(&hub.get_mwrs("b").await.unwrap()).as_deref(),
    )
    .await;
    assert!(is_complete(&b));
    wait_mwrs(&hub, "a", "the unreadable status reported", |m| {
        common::message(m, "ManifestworkApplied").contains("its status cannot be read")
    })
    .await;
}
