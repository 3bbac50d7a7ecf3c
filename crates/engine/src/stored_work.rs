//! A ManifestWork as the controller's stores and the CLI's reads hold it: its metadata
//! (without managed fields), the digest of its spec and its conditions, decoded straight
//! from the API's JSON. Neither the manifests nor the agent's `resourceStatus` are ever
//! materialized, so a list of a large fleet costs what is kept, not what is sent
//! (rules §11.7).

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::hash::{self, CanonicalJson, Digest};
use crate::work::WorkView;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::Resource;
use kube::core::NamespaceResourceScope;
use mwrs_api::work::{ManifestWork, WorkConditions};
use serde::{Deserialize, Deserializer};

/// A cached ManifestWork.
#[derive(Deserialize, Clone, Debug, Default)]
pub struct StoredWork {
    #[serde(deserialize_with = "meta_without_managed_fields")]
    pub metadata: ObjectMeta,
    /// SHA-256 of the spec's canonical JSON (the revision content digest); None when the
    /// spec is absent or empty.
    #[serde(default, rename = "spec", deserialize_with = "spec_digest")]
    pub spec_digest: Option<Digest>,
    #[serde(default)]
    pub status: Option<WorkConditions>,
}

impl StoredWork {
    /// What the planner sees of it.
    pub fn view(&self) -> WorkView {
        let status = self.status.as_ref();
        WorkView::from_parts(
            &self.metadata,
            status.and_then(|s| s.conditions.as_deref()),
            status.and_then(|s| s.unreadable.clone()),
            status.and_then(|s| s.failed_manifest.as_deref()),
            self.spec_digest,
        )
    }
}

impl Resource for StoredWork {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        ManifestWork::kind(&())
    }
    fn group(_: &()) -> Cow<'_, str> {
        ManifestWork::group(&())
    }
    fn version(_: &()) -> Cow<'_, str> {
        ManifestWork::version(&())
    }
    fn plural(_: &()) -> Cow<'_, str> {
        ManifestWork::plural(&())
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

fn spec_digest<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Digest>, D::Error> {
    let CanonicalJson(canonical) = CanonicalJson::deserialize(d)?;
    Ok((canonical != "{}" && canonical != "null").then(|| hash::digest_of_canonical(&canonical)))
}

/// ObjectMeta's fields but `managedFields` (skipped unread: on a ManifestWork they grow
/// with the agent's status report) and the deprecated `selfLink`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CachedMeta {
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
    #[serde(default)]
    creation_timestamp: Option<Time>,
    #[serde(default)]
    deletion_grace_period_seconds: Option<i64>,
    #[serde(default)]
    deletion_timestamp: Option<Time>,
    #[serde(default)]
    finalizers: Option<Vec<String>>,
    #[serde(default)]
    generate_name: Option<String>,
    #[serde(default)]
    generation: Option<i64>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    owner_references: Option<Vec<OwnerReference>>,
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(default)]
    uid: Option<String>,
}

fn meta_without_managed_fields<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    let m = CachedMeta::deserialize(d)?;
    Ok(ObjectMeta {
        annotations: m.annotations,
        creation_timestamp: m.creation_timestamp,
        deletion_grace_period_seconds: m.deletion_grace_period_seconds,
        deletion_timestamp: m.deletion_timestamp,
        finalizers: m.finalizers,
        generate_name: m.generate_name,
        generation: m.generation,
        labels: m.labels,
        managed_fields: None,
        name: m.name,
        namespace: m.namespace,
        owner_references: m.owner_references,
        resource_version: m.resource_version,
        self_link: None,
        uid: m.uid,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use mwrs_api::work::ManifestWorkTemplate;
    use serde_json::json;

    fn api_json() -> serde_json::Value {
        json!({
            "apiVersion": "work.open-cluster-management.io/v1",
            "kind": "ManifestWork",
            "metadata": {
                "name": "w", "namespace": "c1", "generation": 3, "resourceVersion": "7",
                "labels": {"a": "b"},
                "managedFields": [{"manager": "agent", "operation": "Update",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}}]
            },
            "spec": {"workload": {"manifests": [{"kind": "ConfigMap", "data": {"k": "v"}}]}},
            "status": {
                "conditions": [{"type": "Applied", "status": "True", "reason": "r",
                    "message": "", "observedGeneration": 3,
                    "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                "resourceStatus": {"manifests": [{"conditions": []}]}
            }
        })
    }

    #[test]
    fn decodes_the_digest_of_the_spec_and_nothing_of_its_bulk() {
        let v = api_json();
        let stored: StoredWork = serde_json::from_value(v.clone()).unwrap();
        let full: ManifestWork = serde_json::from_value(v).unwrap();
        assert_eq!(
            stored.spec_digest,
            Some(hash::digest(&full.spec.to_value())),
            "the digest is the revision content digest of the same spec"
        );
        assert_eq!(stored.metadata.managed_fields, None);
        assert_eq!(stored.metadata.generation, Some(3));
        let view = stored.view();
        assert_eq!(view, WorkView::from_work(&full));
    }

    /// Upstream's agent says only "Failed to apply manifest work" at the top; the note
    /// carries the first failed manifest's own message, and nothing else of
    /// `resourceStatus` is kept.
    #[test]
    fn an_apply_error_is_told_in_the_manifests_words() {
        let mut v = api_json();
        v["status"]["conditions"][0] = json!({"type": "Applied", "status": "False",
            "reason": "AppliedManifestWorkFailed", "message": "Failed to apply manifest work",
            "observedGeneration": 3, "lastTransitionTime": "2026-01-01T00:00:00Z"});
        v["status"]["resourceStatus"] = json!({"manifests": [
            {"resourceMeta": {"kind": "Service", "name": "ok", "namespace": "default"},
             "conditions": [{"type": "Applied", "status": "True", "message": "Apply manifest complete"}]},
            {"resourceMeta": {"kind": "ConfigMap", "name": "x", "namespace": "gone"},
             "conditions": [{"type": "Applied", "status": "False",
                "message": "Failed to apply manifest: namespaces \"gone\" not found"}]}]});
        let stored: StoredWork = serde_json::from_value(v.clone()).unwrap();
        let note = stored.view().applied_note.unwrap();
        assert!(
            note.contains(
                "ConfigMap gone/x: Failed to apply manifest: namespaces \"gone\" not found"
            ),
            "{note}"
        );
        let full: ManifestWork = serde_json::from_value(v).unwrap();
        assert_eq!(WorkView::from_work(&full).applied_note, Some(note));
    }

    #[test]
    fn an_empty_spec_has_no_digest() {
        let mut v = api_json();
        v["spec"] = json!({});
        let stored: StoredWork = serde_json::from_value(v).unwrap();
        assert_eq!(stored.spec_digest, None);
        let empty = ManifestWork::new("w", ManifestWorkTemplate::default());
        assert_eq!(WorkView::from_work(&empty).spec_digest, None);
    }

    #[test]
    fn an_unreadable_condition_is_reported_not_fatal() {
        let mut v = api_json();
        v["status"]["conditions"][0]["lastTransitionTime"] = json!("2026-01-01T00:00:00x1Z");
        let stored: StoredWork = serde_json::from_value(v).unwrap();
        let view = stored.view();
        assert!(
            view.status_error
                .as_deref()
                .unwrap_or("")
                .contains("Applied")
        );
        assert!(view.conditions.is_empty());
    }
}
