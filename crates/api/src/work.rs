//! `work.open-cluster-management.io/v1` ManifestWork.
//!
//! The spec is kept as raw JSON ([`ManifestWorkTemplate`]): it is what the MWRS copies
//! into every ManifestWork, what revisions hash and store, and what the controller
//! compares. A typed view ([`ManifestWorkSpec`]) exists for validation and for building
//! templates in code; it is never used to re-serialize a template read from the hub.

use kube::CustomResource;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::Condition;

/// A ManifestWork spec exactly as written, keys and values untouched.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "work.open-cluster-management.io",
    version = "v1",
    kind = "ManifestWork",
    namespaced,
    status = "ManifestWorkStatus",
    schema = "disabled"
)]
pub struct ManifestWorkTemplate {
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}

impl ManifestWorkTemplate {
    /// Wraps a JSON value; anything but an object is an error (a ManifestWork spec is an
    /// object).
    pub fn from_value(v: Value) -> Result<Self, serde_json::Error> {
        serde_json::from_value(v)
    }

    pub fn to_value(&self) -> Value {
        Value::Object(self.fields.clone())
    }

    /// The typed view; fails when a field has the wrong shape.
    pub fn typed(&self) -> Result<ManifestWorkSpec, serde_json::Error> {
        serde_json::from_value(self.to_value())
    }

    /// `workload.manifests`, raw; empty when absent or not a list.
    pub fn manifests(&self) -> &[Value] {
        self.fields
            .get("workload")
            .and_then(|w| w.get("manifests"))
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }
}

impl From<&ManifestWorkSpec> for ManifestWorkTemplate {
    fn from(spec: &ManifestWorkSpec) -> Self {
        match serde_json::to_value(spec) {
            Ok(Value::Object(fields)) => Self { fields },
            // A struct always serializes to an object; keep the type total anyway.
            _ => Self::default(),
        }
    }
}

/// Typed ManifestWork spec (Go `work/v1.ManifestWorkSpec`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ManifestWorkSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<ManifestsTemplate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_option: Option<DeleteOption>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest_configs: Option<Vec<ManifestConfigOption>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor: Option<ManifestWorkExecutor>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ManifestsTemplate {
    /// Raw embedded objects, never re-shaped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifests: Option<Vec<Value>>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeleteOption {
    /// `Foreground` (CRD default), `Orphan` or `SelectivelyOrphan`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub propagation_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selectively_orphans: Option<SelectivelyOrphan>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i64>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SelectivelyOrphan {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub orphaning_rules: Option<Vec<OrphaningRule>>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OrphaningRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// Resource identifier in `manifestConfigs` (Go `ResourceIdentifier`).
pub type ResourceIdentifier = OrphaningRule;

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ManifestConfigOption {
    pub resource_identifier: ResourceIdentifier,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback_rules: Option<Vec<FeedbackRule>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy: Option<UpdateStrategy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition_rules: Option<Vec<ConditionRule>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback_scrape_type: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FeedbackRule {
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_paths: Option<Vec<JsonPath>>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct JsonPath {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    pub path: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct UpdateStrategy {
    /// `Update` (default), `CreateOnly`, `ServerSideApply`, `ReadOnly`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_side_apply: Option<ServerSideApplyConfig>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ServerSideApplyConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_manager: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_fields: Option<Vec<IgnoreField>>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct IgnoreField {
    /// `OnSpokePresent` or `OnSpokeChange`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_paths: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_pointers: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jq_path_expressions: Option<Vec<String>>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConditionRule {
    pub condition: String,
    /// `WellKnownConditions` or `CEL`.
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel_expressions: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_expression: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ManifestWorkExecutor {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<ManifestWorkExecutorSubject>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ManifestWorkExecutorSubject {
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<ServiceAccountSubject>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ServiceAccountSubject {
    pub namespace: String,
    pub name: String,
}

impl ManifestWork {
    /// Does its agent report condition `type_` as `status` for its current generation?
    pub fn reports(&self, type_: &str, status: &str) -> bool {
        let generation = self.metadata.generation;
        self.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| {
                cs.iter().any(|c| {
                    c.type_ == type_ && c.status == status && c.observed_generation == generation
                })
            })
    }
}

/// ManifestWork status as the work agent writes it. Read leniently: the API server
/// accepts condition times our types cannot parse (e.g. `2026-01-01T00:00:00x1Z`, an
/// offset of `+99:99`), and one such object must not make a whole list unreadable (rules
/// §11.7). A condition that cannot be read is left out and named in
/// [`ManifestWorkStatus::unreadable`].
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase", from = "RawWorkStatus")]
pub struct ManifestWorkStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    /// Per-manifest status; kept raw because the controller only passes it through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_status: Option<Value>,
    /// Why some condition could not be read (never serialized).
    #[serde(skip)]
    pub unreadable: Option<String>,
}

/// [`ManifestWorkStatus`] as it comes off the wire, before its conditions are read.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawWorkStatus {
    #[serde(default)]
    conditions: Option<Vec<Value>>,
    #[serde(default)]
    resource_status: Option<Value>,
}

impl From<RawWorkStatus> for ManifestWorkStatus {
    fn from(raw: RawWorkStatus) -> Self {
        let (conditions, unreadable) = read_conditions(raw.conditions);
        Self {
            conditions,
            resource_status: raw.resource_status,
            unreadable,
        }
    }
}

/// The conditions of a status list, each decoded on its own: one the API server accepted
/// and our types cannot read is left out and named in the error string instead of
/// failing the whole object.
fn read_conditions(list: Option<Vec<Value>>) -> (Option<Vec<Condition>>, Option<String>) {
    let mut errors = Vec::new();
    let conditions = list.map(|list| {
        list.into_iter()
            .filter_map(|c| {
                let type_ = c
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_string();
                serde_json::from_value::<Condition>(c)
                    .map_err(|e| errors.push(format!("condition {type_}: {e}")))
                    .ok()
            })
            .collect()
    });
    (conditions, (!errors.is_empty()).then(|| errors.join("; ")))
}

/// The part of a ManifestWork's status a controller reads: its conditions, decoded as
/// leniently as [`ManifestWorkStatus`]'s, and of the agent's per-manifest report only the
/// first manifest it could not apply, as one line (upstream's agent says only "Failed to
/// apply manifest work" at the top; the reason is on the manifest). A cache of these
/// never holds the rest of `resourceStatus`.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(from = "RawWorkConditions")]
pub struct WorkConditions {
    pub conditions: Option<Vec<Condition>>,
    pub unreadable: Option<String>,
    pub failed_manifest: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawWorkConditions {
    #[serde(default)]
    conditions: Option<Vec<Value>>,
    #[serde(default)]
    resource_status: Option<ManifestReports>,
}

impl From<RawWorkConditions> for WorkConditions {
    fn from(raw: RawWorkConditions) -> Self {
        let (conditions, unreadable) = read_conditions(raw.conditions);
        Self {
            conditions,
            unreadable,
            failed_manifest: raw.resource_status.and_then(|r| r.first_failed()),
        }
    }
}

/// `resourceStatus` as far as "which manifest failed to apply, and why" goes.
#[derive(Deserialize, Default)]
pub struct ManifestReports {
    #[serde(default)]
    manifests: Vec<ManifestReport>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ManifestReport {
    #[serde(default)]
    resource_meta: ReportedMeta,
    #[serde(default)]
    conditions: Vec<ReportedCondition>,
}

#[derive(Deserialize, Default)]
struct ReportedMeta {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    name: String,
}

#[derive(Deserialize)]
struct ReportedCondition {
    #[serde(rename = "type", default)]
    type_: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    message: String,
}

impl ManifestReports {
    /// `Kind namespace/name: message` of the first manifest whose `Applied` is False.
    pub fn first_failed(&self) -> Option<String> {
        self.manifests.iter().find_map(|m| {
            let c = m
                .conditions
                .iter()
                .find(|c| c.type_ == condition::APPLIED && c.status == "False")?;
            let r = &m.resource_meta;
            let at = if r.namespace.is_empty() {
                r.name.clone()
            } else {
                format!("{}/{}", r.namespace, r.name)
            };
            Some(format!("{} {at}: {}", r.kind, c.message))
        })
    }

    /// The same, read from a `resourceStatus` value.
    pub fn from_value(v: &Value) -> Self {
        serde_json::from_value(v.clone()).unwrap_or_default()
    }
}

/// ManifestWork condition types.
pub mod condition {
    pub const APPLIED: &str = "Applied";
    pub const AVAILABLE: &str = "Available";
    pub const PROGRESSING: &str = "Progressing";
    pub const DEGRADED: &str = "Degraded";
    pub const COMPLETE: &str = "Complete";
    pub const DELETING: &str = "Deleting";
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_condition_counts_only_for_the_generation_it_was_observed_at() {
        let work = |generation: i64| -> ManifestWork {
            serde_json::from_value(json!({
                "apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
                "metadata": {"name": "w", "namespace": "c1", "generation": generation},
                "spec": {},
                "status": {"conditions": [{"type": "Available", "status": "True",
                    "reason": "r", "message": "", "observedGeneration": 2,
                    "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
            }))
            .unwrap()
        };
        assert!(work(2).reports("Available", "True"));
        assert!(!work(2).reports("Available", "False"));
        assert!(!work(2).reports("Degraded", "True"));
        assert!(
            !work(3).reports("Available", "True"),
            "said of the last generation"
        );
    }

    /// The API server accepts this time; our types do not. The other conditions and the
    /// rest of the object still read, and the failure is named.
    #[test]
    fn a_condition_time_we_cannot_parse_leaves_the_rest_readable() {
        let status: ManifestWorkStatus = serde_json::from_value(json!({
            "conditions": [
                {"type": "Applied", "status": "True", "reason": "r", "message": "",
                 "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1},
                {"type": "Progressing", "status": "False", "reason": "r", "message": "",
                 "lastTransitionTime": "2026-01-01T00:00:00x1Z", "observedGeneration": 1}
            ],
            "resourceStatus": {"manifests": []}
        }))
        .expect("lenient");
        let conditions = status.conditions.expect("conditions");
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].type_, "Applied");
        let why = status.unreadable.expect("named");
        assert!(why.starts_with("condition Progressing:"), "{why}");
        // Never written back.
        let v = serde_json::to_value(ManifestWorkStatus {
            conditions: None,
            resource_status: None,
            unreadable: Some("x".into()),
        })
        .expect("json");
        assert_eq!(v, json!({}));
    }
}
