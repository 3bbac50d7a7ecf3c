//! What the controller does with an MWRS it cannot read (the API server accepted it but
//! our types reject it, e.g. an integer `maxFailures` beyond int32: the CRD's
//! int-or-string schema sets no bound, `IntOrString` holds an i32):
//! report it — a log line, a metric, a Warning Event and a `Progressing` False
//! `InvalidSpec` condition — and touch nothing else (rules §8: no ManifestWork or
//! revision is deleted because of a parse error). The watch goes on for the others.
//!
//! The object cannot be deserialized, so its status is handled as raw JSON: only the
//! `Progressing` condition is replaced, every other condition is kept as stored.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ApiResource, DynamicObject, Patch};
use kube::core::error_boundary::InvalidObject;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use mwrs_api::mwrs::{ManifestWorkReplicaSet, condition as mwrs_condition};
use serde_json::{Value, json};

use crate::announce::publish_on;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::events::EventType;
use crate::execute::patch_params;

/// The message of the condition and Event for an unreadable object.
pub fn unreadable_message(error: &str) -> String {
    format!(
        "the object cannot be read by this controller ({error}); fix the field named, \
         nothing is rolled out or deleted meanwhile"
    )
}

/// The conditions list to write: `old` (the stored `status.conditions`, any JSON) with
/// `Progressing` set to False `InvalidSpec` and `message`. None when the stored one
/// already says exactly that (no write, no Event: a reconcile loop stays quiet).
/// `lastTransitionTime` moves only when status or reason change.
pub fn unreadable_conditions(
    old: Option<&Value>,
    message: &str,
    generation: Option<i64>,
    now: Timestamp,
) -> Option<Vec<Value>> {
    let mut list: Vec<Value> = old
        .and_then(Value::as_array)
        .map(|a| a.iter().filter(|c| c.is_object()).cloned().collect())
        .unwrap_or_default();
    let pos = list
        .iter()
        .position(|c| c.get("type").and_then(Value::as_str) == Some(mwrs_condition::PROGRESSING));
    let same_state = |c: &Value| {
        c.get("status").and_then(Value::as_str) == Some("False")
            && c.get("reason").and_then(Value::as_str) == Some(mwrs_condition::REASON_INVALID_SPEC)
    };
    let ltt = match pos.map(|i| &list[i]) {
        Some(c)
            if same_state(c)
                && c.get("message").and_then(Value::as_str) == Some(message)
                && c.get("observedGeneration").and_then(Value::as_i64) == generation =>
        {
            return None;
        }
        Some(c) if same_state(c) => c
            .get("lastTransitionTime")
            .cloned()
            .unwrap_or_else(|| json!(now.to_string())),
        _ => json!(now.to_string()),
    };
    let mut cond = json!({
        "type": mwrs_condition::PROGRESSING,
        "status": "False",
        "reason": mwrs_condition::REASON_INVALID_SPEC,
        "message": message,
        "lastTransitionTime": ltt,
    });
    if let Some(g) = generation {
        cond["observedGeneration"] = json!(g);
    }
    match pos {
        Some(i) => list[i] = cond,
        None => list.push(cond),
    }
    Some(list)
}

/// A reference to the MWRS named by `meta`, for Events.
fn object_ref(meta: &ObjectMeta) -> ObjectReference {
    ObjectReference {
        api_version: Some(ManifestWorkReplicaSet::api_version(&()).to_string()),
        kind: Some(ManifestWorkReplicaSet::kind(&()).to_string()),
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        ..Default::default()
    }
}

/// Reports an unreadable MWRS once per distinct error; never requeues by itself (a
/// fix is an edit, which the watch delivers).
pub async fn report(ctx: &Context, invalid: &InvalidObject) -> Result<Action> {
    let meta = &invalid.metadata;
    let ns = meta
        .namespace
        .clone()
        .ok_or(Error::MissingField("namespace"))?;
    let name = meta.name.clone().ok_or(Error::MissingField("name"))?;
    ctx.metrics.invalid_specs.inc();
    tracing::warn!(mwrs = %format!("{ns}/{name}"), error = %invalid.error, "cannot read ManifestWorkReplicaSet");

    let ar = ApiResource::erase::<ManifestWorkReplicaSet>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &ns, &ar);
    // The cache holds only metadata for this object: read its stored conditions.
    let raw = api
        .get_status(&name)
        .await
        .map_err(|e| Error::kube(format!("status of {ns}/{name}"), e))?;
    let message = unreadable_message(&invalid.error);
    let old = raw.data.get("status").and_then(|s| s.get("conditions"));
    let Some(list) = unreadable_conditions(old, &message, meta.generation, Timestamp::now()) else {
        return Ok(Action::await_change());
    };
    if !ctx.gate_is_open("patch", "status of an unreadable MWRS") {
        return Ok(Action::await_change());
    }
    let mut body = json!({"status": {"conditions": list}});
    if let Some(rv) = raw.resource_version() {
        body["metadata"] = json!({ "resourceVersion": rv });
    }
    let r = api
        .patch_status(&name, &patch_params(), &Patch::Merge(&body))
        .await
        .map_err(|e| Error::kube(format!("status of {ns}/{name}"), e));
    ctx.metrics
        .write("status", "patch", if r.is_ok() { "ok" } else { "error" });
    r?;
    publish_on(
        ctx,
        &object_ref(meta),
        EventType::Warning,
        mwrs_condition::REASON_INVALID_SPEC,
        &message,
    )
    .await;
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        "2026-01-01T00:00:00Z".parse().unwrap_or_default()
    }

    #[test]
    fn sets_progressing_and_keeps_the_others() {
        let old = json!([
            {"type": "PlacementVerified", "status": "True", "reason": "AsExpected",
             "message": "", "lastTransitionTime": "2025-01-01T00:00:00Z"},
            {"type": "Progressing", "status": "True", "reason": "NewRevisionCreated",
             "message": "", "lastTransitionTime": "2025-01-01T00:00:00Z"},
        ]);
        let list = unreadable_conditions(Some(&old), "m", Some(3), now()).expect("a change");
        assert_eq!(list.len(), 2);
        assert_eq!(list[0], old[0], "other conditions kept as stored");
        assert_eq!(list[1]["status"], "False");
        assert_eq!(list[1]["reason"], mwrs_condition::REASON_INVALID_SPEC);
        assert_eq!(list[1]["observedGeneration"], 3);
        assert_eq!(list[1]["lastTransitionTime"], now().to_string());
    }

    #[test]
    fn same_report_writes_nothing_and_a_new_one_keeps_the_transition_time() {
        let first = unreadable_conditions(None, "m", Some(1), now()).expect("a change");
        let stored = Value::Array(first.clone());
        assert_eq!(
            unreadable_conditions(Some(&stored), "m", Some(1), now()),
            None
        );
        let later: Timestamp = "2026-01-02T00:00:00Z".parse().unwrap_or_default();
        let second =
            unreadable_conditions(Some(&stored), "other", Some(2), later).expect("a change");
        assert_eq!(
            second[0]["lastTransitionTime"],
            first[0]["lastTransitionTime"]
        );
        assert_eq!(second[0]["message"], "other");
    }

    #[test]
    fn garbage_in_the_stored_list_is_dropped() {
        let old = json!(["not an object", 3]);
        let list = unreadable_conditions(Some(&old), "m", None, now()).expect("a change");
        assert_eq!(list.len(), 1);
        assert!(list[0].get("observedGeneration").is_none());
    }

    #[test]
    fn the_guard_keeps_metadata_of_an_object_our_types_reject() {
        // The API server stores this (int-or-string has no bound); IntOrString is i32.
        let obj = json!({
            "apiVersion": "work.open-cluster-management.io/v1alpha1",
            "kind": "ManifestWorkReplicaSet",
            "metadata": {"name": "bad", "namespace": "ns", "generation": 2},
            "spec": {"manifestWorkTemplate": {}, "placementRefs": [{"name": "p",
                "rolloutStrategy": {"type": "All", "all": {"maxFailures": 3_000_000_000_i64}}}]},
        });
        let g: crate::watch::GuardedMwrs = serde_json::from_value(obj).expect("guarded");
        let Err(invalid) = g.0 else {
            panic!("our type should reject it")
        };
        assert_eq!(invalid.metadata.name.as_deref(), Some("bad"));
        assert!(invalid.error.contains("3000000000"), "{}", invalid.error);
    }
}
