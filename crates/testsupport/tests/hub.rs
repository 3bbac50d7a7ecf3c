//! The test hub behaves like a real hub where the controller depends on it: our MWRS CRD
//! keeps every field (upstream's and ours), accepts what upstream accepts, rejects invalid
//! new fields at admission, and owner references / namespace deletion really cascade.

// run-tests: alone (waits for the hub's namespace controller, which the namespaces other
// tests delete, thousands of cluster namespaces at a time, would hold up; run alone, it
// runs first, on a fresh hub)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use kube::{Api, Resource, ResourceExt};
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_testsupport::{TestHub, wait_for};
use serde_json::{Value, json};

/// An MWRS with every field, upstream's and ours, set to a non-default value.
fn full(ns: &str, name: &str) -> Value {
    json!({
        "apiVersion": "work.open-cluster-management.io/v1alpha1",
        "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "cascadeDeletionPolicy": "Foreground",
            "revisionHistoryLimit": 3,
            "manifestWorkTemplate": {
                "workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "cm", "namespace": "default"},
                    "data": {"k": "v", "n": "1.50"}, "x-unknown": {"kept": [1, 2.5, true]}}]},
                "deleteOption": {"propagationPolicy": "SelectivelyOrphan", "ttlSecondsAfterFinished": 30,
                    "selectivelyOrphans": {"orphaningRules": [{"group": "", "resource": "configmaps", "name": "cm", "namespace": "default"}]}},
                "manifestConfigs": [{"resourceIdentifier": {"group": "", "resource": "configmaps", "name": "cm", "namespace": "default"},
                    "feedbackRules": [{"type": "JSONPaths", "jsonPaths": [{"name": "k", "path": ".data.k"}]}],
                    "updateStrategy": {"type": "ServerSideApply", "serverSideApply": {"force": true, "fieldManager": "work-agent-demo",
                        "ignoreFields": [{"condition": "OnSpokeChange", "jsonPaths": [".data.x"]}]}},
                    "conditionRules": [{"condition": "Progressing", "type": "CEL", "celExpressions": ["false"], "message": "m"}],
                    "feedbackScrapeType": "Poll"}],
                "executor": {"subject": {"type": "ServiceAccount", "serviceAccount": {"namespace": "ns", "name": "sa"}}}
            },
            "placementRefs": [
                {"name": "a", "rolloutStrategy": {"type": "Progressive", "failureStrategy": "AbortAll",
                    "progressive": {"maxConcurrency": "25%", "maxFailures": 2, "minSuccessTime": "1m",
                        "progressDeadline": "10m", "mandatoryDecisionGroups": [{"groupName": "canary"}, {"groupIndex": 1}]}}},
                {"name": "b", "rolloutStrategy": {"type": "ProgressivePerGroup",
                    "progressivePerGroup": {"maxFailures": "10%", "minSuccessTime": "30s", "progressDeadline": "None",
                        "mandatoryDecisionGroups": [{"groupIndex": 0}]}}}
            ]
        }
    })
}

fn status() -> Value {
    json!({
        "conditions": [{"type": "Progressing", "status": "True", "reason": "NewRevisionCreated",
            "message": "m", "observedGeneration": 1, "lastTransitionTime": "2026-01-02T03:04:05Z"}],
        "summary": {"total": 3, "applied": 3, "available": 2, "degraded": 0, "progressing": 1,
            "desiredTotal": 3, "updated": 2},
        "placementSummary": [{"name": "a", "availableDecisionGroups": "2 (3 / 3 clusters applied)",
            "summary": {"total": 3, "applied": 3, "available": 2, "degraded": 0, "progressing": 1,
                "desiredTotal": 3, "updated": 2}}],
        "currentRevision": "5859f96865",
        "updateRevision": "76cb8ddb9d",
        "collisionCount": 1,
        "abortedTime": "2026-01-02T03:05:00Z",
        "observedGeneration": 1,
        "handledControls": {"abort": "t1", "retry": "t2"}
    })
}

async fn create_raw(hub: &TestHub, obj: &Value) -> Result<ManifestWorkReplicaSet, kube::Error> {
    let typed: ManifestWorkReplicaSet = serde_json::from_value(obj.clone()).unwrap();
    hub.mwrs_api().create(&PostParams::default(), &typed).await
}

#[tokio::test]
async fn every_field_round_trips_through_the_api_server() {
    let Some(hub) = TestHub::from_env("crd-roundtrip", 0).await else {
        return;
    };
    let obj = full(&hub.namespace, "full");
    let created = create_raw(&hub, &obj).await.expect("created");
    let mut with_status = created.clone();
    with_status.status = Some(serde_json::from_value(status()).unwrap());
    let api = hub.mwrs_api();
    let stored = api
        .replace_status("full", &PostParams::default(), &with_status)
        .await
        .expect("status written");
    let back = serde_json::to_value(&stored).unwrap();
    assert_eq!(back["spec"], obj["spec"], "spec changed on the way through");
    assert_eq!(
        back["status"],
        status(),
        "status changed on the way through"
    );
}

#[tokio::test]
async fn an_upstream_object_is_accepted_and_defaulted() {
    let Some(hub) = TestHub::from_env("crd-upstream", 0).await else {
        return;
    };
    // What clusteradm writes: no strategy, no policy, none of the new fields.
    let obj = json!({
        "apiVersion": "work.open-cluster-management.io/v1alpha1",
        "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": "plain", "namespace": hub.namespace},
        "spec": {"manifestWorkTemplate": {"workload": {"manifests": [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "default"}}]}},
            "placementRefs": [{"name": "p"}]}
    });
    let created = create_raw(&hub, &obj).await.expect("accepted");
    let v = serde_json::to_value(&created).unwrap();
    assert_eq!(v["spec"]["cascadeDeletionPolicy"], "Background");
    assert_eq!(v["spec"]["revisionHistoryLimit"], 10);
    assert_eq!(
        v["spec"]["placementRefs"][0]["rolloutStrategy"],
        json!({"type": "All", "all": {"progressDeadline": "None", "maxFailures": 0, "minSuccessTime": "0"}})
    );
}

#[tokio::test]
async fn invalid_new_fields_are_rejected_at_admission() {
    let Some(hub) = TestHub::from_env("crd-invalid", 0).await else {
        return;
    };
    let mut bad_strategy = full(&hub.namespace, "bad-strategy");
    bad_strategy["spec"]["placementRefs"][0]["rolloutStrategy"]["failureStrategy"] =
        json!("RollbackAll");
    let err = create_raw(&hub, &bad_strategy).await.unwrap_err();
    assert!(
        err.to_string().contains("failureStrategy"),
        "error names the field: {err}"
    );
    let mut bad_limit = full(&hub.namespace, "bad-limit");
    bad_limit["spec"]["revisionHistoryLimit"] = json!(-1);
    let err = create_raw(&hub, &bad_limit).await.unwrap_err();
    assert!(
        err.to_string().contains("revisionHistoryLimit"),
        "error names the field: {err}"
    );
}

#[tokio::test]
async fn revisions_are_garbage_collected_with_their_mwrs() {
    let Some(hub) = TestHub::from_env("crd-gc", 0).await else {
        return;
    };
    let mwrs = create_raw(&hub, &full(&hub.namespace, "owner"))
        .await
        .unwrap();
    let owner = OwnerReference {
        api_version: ManifestWorkReplicaSet::api_version(&()).into(),
        kind: ManifestWorkReplicaSet::kind(&()).into(),
        name: mwrs.name_any(),
        uid: mwrs.uid().unwrap(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let crs: Api<ControllerRevision> = Api::namespaced(hub.client.clone(), &hub.namespace);
    let cr = ControllerRevision {
        metadata: ObjectMeta {
            name: Some("owner-5859f96865".into()),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        data: Some(RawExtension(json!({"workload": {}}))),
        revision: 1,
    };
    crs.create(&PostParams::default(), &cr).await.unwrap();
    hub.mwrs_api()
        .delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    wait_for(
        "the revision to be collected",
        Duration::from_secs(60),
        || {
            let crs = crs.clone();
            async move {
                match crs.get_opt("owner-5859f96865").await {
                    Ok(None) => Ok(()),
                    Ok(Some(_)) => Err("still there".to_string()),
                    Err(e) => Err(e.to_string()),
                }
            }
        },
    )
    .await;
}

#[tokio::test]
async fn a_deleted_namespace_finishes_deleting() {
    let Some(hub) = TestHub::from_env("ns-delete", 1).await else {
        return;
    };
    let ns = hub.clusters[0].clone();
    let cms: Api<ConfigMap> = Api::namespaced(hub.client.clone(), &ns);
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("x".into()),
            ..Default::default()
        },
        binary_data: Some(BTreeMap::from([("b".into(), ByteString(vec![1, 2]))])),
        ..Default::default()
    };
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let namespaces: Api<Namespace> = Api::all(hub.client.clone());
    namespaces
        .delete(&ns, &DeleteParams::background())
        .await
        .unwrap();
    // The namespace controller waits a few seconds before it starts; allow for that.
    wait_for("the namespace to be gone", Duration::from_secs(90), || {
        let namespaces = namespaces.clone();
        let ns = ns.clone();
        async move {
            match namespaces.get_opt(&ns).await {
                Ok(None) => Ok(()),
                Ok(Some(n)) => Err(format!("phase {:?}", n.status.and_then(|s| s.phase))),
                Err(e) => Err(e.to_string()),
            }
        }
    })
    .await;
}
