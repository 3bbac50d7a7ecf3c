//! The CRD this project installs (deploy/crds/) and the Rust types must not drift:
//! - an object with every field the schema defines round-trips through the Rust types
//!   unchanged (no field unknown to Rust, none reshaped);
//! - a Rust object with every field set only uses paths the schema defines.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use mwrs_api::mwrs::{
    AbortRecord, BlockedCluster, HandledControls, LocalPlacementReference, ManifestWorkReplicaSet,
    ManifestWorkReplicaSetSpec, ManifestWorkReplicaSetStatus, PlacementSummary, PluginJudged,
    Summary,
};
use mwrs_api::rollout::{
    MandatoryDecisionGroup, RolloutConfig, RolloutProgressive, RolloutProgressivePerGroup,
    RolloutStrategy,
};
use mwrs_api::work::{ManifestWorkSpec, ManifestWorkTemplate};
use mwrs_api::{Condition, IntOrString, Time};
use serde_json::{Map, Value, json};

const CRD: &str = include_str!(
    "../../../deploy/crds/0000_00_work.open-cluster-management.io_manifestworkreplicasets.crd.yaml"
);

fn schema() -> Value {
    let crd: Value = serde_saphyr::from_str(CRD).expect("CRD parses");
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

/// An instance holding every field the schema defines, with a valid value for each.
fn sample(s: &Value) -> Value {
    if s.get("x-kubernetes-int-or-string") == Some(&json!(true)) {
        return json!("10%");
    }
    if s.get("x-kubernetes-embedded-resource") == Some(&json!(true))
        || (s.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true))
            && s.get("properties").is_none())
    {
        return json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "default"}, "data": {"k": "v"}});
    }
    if let Some(e) = s
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return e.clone();
    }
    match s.get("type").and_then(Value::as_str) {
        Some("object") => {
            let mut m = Map::new();
            for (k, v) in s
                .get("properties")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                m.insert(k.clone(), sample(v));
            }
            Value::Object(m)
        }
        Some("array") => json!([sample(&s["items"])]),
        Some("integer") => json!(3),
        Some("boolean") => json!(true),
        Some("string") => match s.get("format").and_then(Value::as_str) {
            Some("date-time") => json!("2026-01-02T03:04:05Z"),
            _ => json!("text"),
        },
        other => panic!("schema type {other:?} not handled: {s}"),
    }
}

/// Every object path (`spec.placementRefs[].name`) of a value.
fn paths(v: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                out.insert(p.clone());
                paths(v, &p, out);
            }
        }
        Value::Array(items) => {
            for i in items {
                paths(i, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

/// Every path the schema allows; below an open (preserve-unknown) object nothing is listed.
fn schema_paths(s: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    if let Some(props) = s.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            let p = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            out.insert(p.clone());
            schema_paths(v, &p, out);
        }
    }
    if let Some(items) = s.get("items") {
        schema_paths(items, &format!("{prefix}[]"), out);
    }
}

fn is_open(path: &str, schema: &Value) -> bool {
    // Paths under embedded manifests are free-form.
    path.contains("workload.manifests[].") || schema.is_null()
}

#[test]
fn every_schema_field_round_trips_through_the_rust_types() {
    let s = schema();
    let mut obj = sample(&s);
    obj["apiVersion"] = json!("work.open-cluster-management.io/v1alpha1");
    obj["kind"] = json!("ManifestWorkReplicaSet");
    obj["metadata"] = json!({"name": "app", "namespace": "default"});
    let typed: ManifestWorkReplicaSet = serde_json::from_value(obj.clone()).expect("deserializes");
    let back = serde_json::to_value(&typed).unwrap();
    assert_eq!(back, obj, "the Rust types drop or reshape a CRD field");

    // The typed view of the template knows every template field too.
    let template = obj["spec"]["manifestWorkTemplate"].clone();
    let spec: ManifestWorkSpec = serde_json::from_value(template.clone()).expect("typed template");
    assert_eq!(serde_json::to_value(&spec).unwrap(), template);
}

#[test]
fn every_rust_field_is_in_the_schema() {
    let s = schema();
    let mut allowed = BTreeSet::new();
    schema_paths(&s, "", &mut allowed);
    let mut used = BTreeSet::new();
    paths(&serde_json::to_value(full_object()).unwrap(), "", &mut used);
    let missing: Vec<_> = used
        .iter()
        .filter(|p| !["apiVersion", "kind"].contains(&p.as_str()) && !p.starts_with("metadata"))
        .filter(|p| !allowed.contains(*p) && !is_open(p, &Value::Bool(true)))
        .collect();
    assert!(missing.is_empty(), "fields not in the CRD: {missing:?}");
}

#[test]
fn new_fields_are_validated_by_the_schema() {
    let s = schema();
    let spec = &s["properties"]["spec"]["properties"];
    assert_eq!(spec["revisionHistoryLimit"]["minimum"], json!(0));
    assert_eq!(spec["revisionHistoryLimit"]["default"], json!(10));
    let fs = &spec["placementRefs"]["items"]["properties"]["rolloutStrategy"]["properties"]["failureStrategy"];
    assert_eq!(fs["enum"], json!(["AbortAll"]));
}

#[test]
fn objects_without_defaulted_fields_deserialize() {
    let minimal = json!({
        "apiVersion": "work.open-cluster-management.io/v1alpha1",
        "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": "app", "namespace": "default"},
        "spec": {"manifestWorkTemplate": {}, "placementRefs": [{"name": "p"}]},
        "status": {"summary": null, "placementSummary": null}
    });
    let m: ManifestWorkReplicaSet = serde_json::from_value(minimal).unwrap();
    assert_eq!(m.spec.revision_history_limit(), 10);
    assert!(!m.spec.is_foreground());
    assert_eq!(m.status.unwrap().summary, Summary::default());
}

fn full_object() -> ManifestWorkReplicaSet {
    let config = RolloutConfig {
        min_success_time: Some("1m".into()),
        progress_deadline: Some("10m".into()),
        max_failures: Some(IntOrString::Int(1)),
    };
    let groups = Some(vec![MandatoryDecisionGroup {
        group_name: Some("canary".into()),
        group_index: Some(0),
    }]);
    let strategy = RolloutStrategy {
        type_: Some("Progressive".into()),
        all: Some(mwrs_api::rollout::RolloutAll {
            config: config.clone(),
        }),
        progressive: Some(RolloutProgressive {
            config: config.clone(),
            mandatory_decision_groups: groups.clone(),
            max_concurrency: Some(IntOrString::String("25%".into())),
        }),
        progressive_per_group: Some(RolloutProgressivePerGroup {
            config,
            mandatory_decision_groups: groups,
        }),
        failure_strategy: Some("AbortAll".into()),
        plugin: Some("smoke-tests".into()),
        plugin_failure_policy: Some(mwrs_api::rollout::PluginFailurePolicy {
            policy: Some("Hold".into()),
            consecutive_errors: Some(2),
            unavailable_for: Some("10m".into()),
        }),
    };
    let now = Time("2026-01-02T03:04:05Z".parse().unwrap());
    let summary = Summary {
        total: 1,
        progressing: 1,
        available: 1,
        degraded: 1,
        applied: 1,
        desired_total: 1,
        updated: 1,
    };
    let template = json!({"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cm"}}]},
        "deleteOption": {"propagationPolicy": "SelectivelyOrphan", "ttlSecondsAfterFinished": 5,
            "selectivelyOrphans": {"orphaningRules": [{"group": "", "resource": "configmaps", "name": "cm", "namespace": "d"}]}},
        "manifestConfigs": [{"resourceIdentifier": {"group": "", "resource": "configmaps", "name": "cm", "namespace": "d"},
            "feedbackRules": [{"type": "JSONPaths", "jsonPaths": [{"name": "x", "path": ".data", "version": "v1"}]}],
            "updateStrategy": {"type": "ServerSideApply", "serverSideApply": {"force": true, "fieldManager": "m",
                "ignoreFields": [{"condition": "OnSpokeChange", "jsonPaths": [".a"], "jsonPointers": ["/a"], "jqPathExpressions": [".a"]}]}},
            "conditionRules": [{"condition": "Progressing", "type": "CEL", "celExpressions": ["true"], "message": "m", "messageExpression": "m"}],
            "feedbackScrapeType": "Poll"}],
        "executor": {"subject": {"type": "ServiceAccount", "serviceAccount": {"namespace": "n", "name": "s"}}}});
    let spec: ManifestWorkSpec = serde_json::from_value(template).unwrap();
    ManifestWorkReplicaSet {
        metadata: Default::default(),
        spec: ManifestWorkReplicaSetSpec {
            manifest_work_template: ManifestWorkTemplate::from(&spec),
            placement_refs: vec![LocalPlacementReference {
                name: "p".into(),
                rollout_strategy: Some(strategy),
            }],
            cascade_deletion_policy: Some("Foreground".into()),
            revision_history_limit: Some(3),
        },
        status: Some(ManifestWorkReplicaSetStatus {
            conditions: Some(vec![Condition {
                type_: "Progressing".into(),
                status: "True".into(),
                reason: "NewRevisionCreated".into(),
                message: "m".into(),
                observed_generation: Some(1),
                last_transition_time: now.clone(),
            }]),
            summary,
            placement_summary: vec![PlacementSummary {
                name: "p".into(),
                available_decision_groups: "1 (1 / 1 clusters applied)".into(),
                summary,
            }],
            current_revision: Some("a".into()),
            update_revision: Some("b".into()),
            collision_count: Some(1),
            aborted_time: Some(now.clone()),
            observed_generation: Some(2),
            handled_controls: Some(HandledControls {
                abort: Some("1".into()),
                retry: Some("2".into()),
            }),
            last_abort: Some(AbortRecord {
                trigger: "ProgressDeadlineExceeded".into(),
                time: now,
                revision: "b".into(),
                reverted_to: Some("a".into()),
                timed_out_clusters: vec!["c1".into()],
                timed_out_count: 1,
                failed_clusters: vec!["c2".into()],
                failed_count: 1,
            }),
            blocked_clusters: vec![BlockedCluster {
                cluster: "c3".into(),
                message: "the hub refused the ManifestWork write".into(),
            }],
            plugin_judged: Some(PluginJudged {
                revision: "b".into(),
                count: 1,
                clusters: "AQ==".into(),
                about: "00".into(),
                seal: "k:t".into(),
            }),
        }),
    }
}
