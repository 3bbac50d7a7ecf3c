//! `mwrs handover` on the real test hub with the simulated agent (rules §12.5): what it
//! refuses (a controller holding its Lease, a rollout not complete, a ManifestWork of
//! another MWRS under the name it needs) writes nothing; a handover renames every
//! ManifestWork to upstream's name once the copy is applied, and a second run writes
//! nothing. Upstream's real controller and agents take over in
//! `e2e/tests/switch_over.rs`.
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{agent_succeeding, create_v1, mwrs, start_controller, watch};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use mwrs_api::labels;
use mwrs_api::work::ManifestWork;
use mwrs_testsupport::{TestHub, configmap_template};
use serde_json::json;

/// (name, uid, resourceVersion) of `app`'s ManifestWorks, by cluster.
async fn works(hub: &TestHub) -> BTreeMap<String, Vec<(String, String, String)>> {
    let mut out: BTreeMap<String, Vec<_>> = BTreeMap::new();
    for w in hub.works_of("app").await {
        out.entry(w.namespace().unwrap_or_default())
            .or_default()
            .push((w.name_any(), w.uid().unwrap_or_default(), written(&w)));
    }
    out
}

/// What a write by anyone but the agent changes: the generation (the spec), labels and
/// annotations. An agent's late status report changes the resourceVersion only (a
/// second handover beside two other test binaries saw one and counted it a write).
fn written(w: &ManifestWork) -> String {
    let m = &w.metadata;
    format!("{:?} {:?} {:?}", m.generation, m.labels, m.annotations)
}

/// A Lease in the test's namespace held by `holder`, renewed `ago` before now.
async fn lease(hub: &TestHub, holder: &str, ago: Duration) {
    let api: Api<Lease> = Api::namespaced(hub.client.clone(), &hub.namespace);
    let renewed = jiff::Timestamp::now() - jiff::SignedDuration::try_from(ago).unwrap();
    let l: Lease = serde_json::from_value(json!({
        "metadata": {"name": "mwrs-controller"},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
            "renewTime": MicroTime(renewed)},
    }))
    .unwrap();
    let _ = api.delete("mwrs-controller", &Default::default()).await;
    api.create(&PostParams::default(), &l).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handover_renames_only_when_safe_and_a_second_run_writes_nothing() {
    let Some(hub) = TestHub::from_env("handover", 3).await else {
        return;
    };
    let _agent = agent_succeeding(&hub, Duration::from_millis(200));
    hub.publish_all("p").await;
    let controller = start_controller(&hub);
    create_v1(&hub, "app", json!({"type": "All"})).await;
    assert_eq!(watch(&hub, "app").await.code, 0);
    drop(controller);
    let ours = works(&hub).await;
    let dotted = format!("{}.app", hub.namespace);
    assert!(
        ours.values().all(|w| w.len() == 1 && w[0].0 == dotted),
        "{ours:?}"
    );
    let lease_flag = format!("{}/mwrs-controller", hub.namespace);
    let handover = |extra: &'static [&'static str]| {
        let mut args = vec!["handover", "--controller-lease", lease_flag.as_str()];
        args.extend_from_slice(extra);
        args
    };

    // No Lease proves nothing: the controller may run in another namespace, or without
    // leader election.
    let r = mwrs(&hub, &handover(&[])).await;
    assert_eq!(r.code, 7, "{r:?}");
    assert!(r.err.contains("--controller-stopped"), "{r:?}");
    assert_eq!(works(&hub).await, ours, "nothing written");

    // A controller that holds its Lease would delete the copies as duplicates, whatever
    // --controller-stopped says.
    lease(&hub, "replica-1", Duration::from_secs(2)).await;
    let r = mwrs(&hub, &handover(&["--controller-stopped"])).await;
    assert_eq!(r.code, 7, "{r:?}");
    let r = mwrs(&hub, &handover(&[])).await;
    assert_eq!(r.code, 7, "{r:?}");
    assert!(r.err.contains("held by replica-1"), "{r:?}");
    assert_eq!(works(&hub).await, ours, "nothing written");
    // An expired Lease is a stopped controller.
    lease(&hub, "replica-1", Duration::from_secs(60)).await;

    // Upstream's controller would roll a template out that did not complete.
    hub.set_template("app", configmap_template("v2")).await;
    let r = mwrs(&hub, &handover(&[])).await;
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.err.contains("--force"), "{r:?}");
    assert_eq!(works(&hub).await, ours, "nothing written");
    hub.set_template("app", configmap_template("v1")).await;
    let controller = start_controller(&hub);
    assert_eq!(watch(&hub, "app").await.code, 0);
    drop(controller);

    // A ManifestWork of another MWRS under the name upstream would use, in one cluster.
    let taken = &hub.clusters[1];
    let api: Api<ManifestWork> = Api::namespaced(hub.client.clone(), taken);
    let other: ManifestWork = serde_json::from_value(json!({
        "metadata": {"name": "app", "labels": {labels::MWRS_OWNER: "elsewhere.app"}},
        "spec": configmap_template("other"),
    }))
    .unwrap();
    api.create(&PostParams::default(), &other).await.unwrap();
    let ours = works(&hub).await;
    let r = mwrs(&hub, &handover(&[])).await;
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.err.contains("belongs to MWRS elsewhere.app"), "{r:?}");
    assert_eq!(works(&hub).await, ours, "nothing written");
    api.delete("app", &Default::default()).await.unwrap();

    // A ManifestWork carrying app's owner label but another MWRS's owner annotation (rules
    // §11.4): not app's, so never copied nor deleted, and named in a note.
    let impostors: Api<ManifestWork> = Api::namespaced(hub.client.clone(), &hub.clusters[0]);
    let impostor: ManifestWork = serde_json::from_value(json!({
        "metadata": {"name": "impostor", "labels": {labels::MWRS_OWNER: dotted},
            "annotations": {labels::MWRS_OWNER_ANNOTATION: "elsewhere/app"}},
        "spec": configmap_template("other"),
    }))
    .unwrap();
    let impostor = impostors
        .create(&PostParams::default(), &impostor)
        .await
        .unwrap();

    // The handover: each cluster ends with one ManifestWork named `app`.
    let r = mwrs(&hub, &handover(&["--timeout", "60s"])).await;
    assert_eq!(r.code, 0, "{r:?}");
    let kept = impostors.get_opt("impostor").await.unwrap();
    assert_eq!(kept.and_then(|w| w.uid()), impostor.uid(), "{r:?}");
    assert!(r.err.contains("impostor carries"), "{r:?}");
    impostors
        .delete("impostor", &Default::default())
        .await
        .unwrap();
    let handed = works(&hub).await;
    assert_eq!(handed.len(), 3, "{handed:?}");
    for (c, w) in &handed {
        assert_eq!(w.len(), 1, "{c}: {w:?}");
        assert_eq!(w[0].0, "app", "{c}");
        assert_ne!(w[0].1, ours[c][0].1, "{c}: a new object");
    }
    let r = mwrs(&hub, &handover(&[])).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.out.contains("nothing to do"), "{r:?}");
    assert_eq!(works(&hub).await, handed, "a second run writes nothing");
}
