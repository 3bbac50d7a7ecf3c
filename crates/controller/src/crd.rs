//! Start-up check (SPEC §10.15): the installed MWRS CRD must carry the fields this
//! controller stores its state in. Upstream's schema would silently prune them (the
//! API server drops unknown fields), losing the abort hold and the revision pointers,
//! so the controller refuses to run against it and says which fields are missing.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::Api;
use serde_json::Value;

use crate::error::{Error, Result};

pub const CRD_NAME: &str = "manifestworkreplicasets.work.open-cluster-management.io";
const VERSION: &str = "v1alpha1";

/// Schema paths (dot-separated; `[]` steps into array items) that must exist.
pub const REQUIRED: &[&str] = &[
    "spec.revisionHistoryLimit",
    "spec.placementRefs[].rolloutStrategy.failureStrategy",
    "status.currentRevision",
    "status.updateRevision",
    "status.collisionCount",
    "status.abortedTime",
    "status.observedGeneration",
    "status.handledControls",
];

/// Reads the CRD and checks it.
pub async fn check(client: &Client) -> Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = api
        .get_opt(CRD_NAME)
        .await
        .map_err(|e| Error::kube(format!("read CRD {CRD_NAME}"), e))?
        .ok_or_else(|| Error::Crd(format!("CRD {CRD_NAME} is not installed")))?;
    let v = serde_json::to_value(&crd).map_err(|source| Error::Serialize {
        what: "CRD",
        source,
    })?;
    let missing = missing_fields(&v)?;
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::Crd(format!(
        "CRD {CRD_NAME} version {VERSION} lacks {}; install deploy/crds from this project \
         (upstream's schema would silently drop the revision and abort state)",
        missing.join(", ")
    )))
}

/// Paths of [`REQUIRED`] the CRD (as JSON) does not define. A schema node that keeps
/// unknown fields accepts everything below it.
pub fn missing_fields(crd: &Value) -> Result<Vec<String>> {
    let version = crd["spec"]["versions"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["name"] == VERSION))
        .ok_or_else(|| Error::Crd(format!("CRD {CRD_NAME} does not serve {VERSION}")))?;
    if version["subresources"]["status"].is_null() {
        return Err(Error::Crd(format!(
            "CRD {CRD_NAME} {VERSION} has no status subresource"
        )));
    }
    let root = &version["schema"]["openAPIV3Schema"];
    Ok(REQUIRED
        .iter()
        .filter(|p| !has_path(root, p))
        .map(|p| (*p).to_string())
        .collect())
}

fn has_path(schema: &Value, path: &str) -> bool {
    let mut node = schema;
    for step in path.split('.') {
        if node["x-kubernetes-preserve-unknown-fields"] == Value::Bool(true)
            && node.get("properties").is_none()
        {
            return true;
        }
        let (name, items) = match step.strip_suffix("[]") {
            Some(n) => (n, true),
            None => (step, false),
        };
        node = &node["properties"][name];
        if node.is_null() {
            return false;
        }
        if items {
            node = &node["items"];
            if node.is_null() {
                return false;
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd_with(status_props: Value) -> Value {
        json!({"spec": {"versions": [{"name": "v1alpha1", "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {"properties": {
                "spec": {"properties": {
                    "revisionHistoryLimit": {"type": "integer"},
                    "placementRefs": {"items": {"properties": {"rolloutStrategy": {
                        "properties": {"failureStrategy": {"type": "string"}}}}}}}},
                "status": {"properties": status_props}}}}}]}})
    }

    #[test]
    fn project_crd_passes() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../deploy/crds/0000_00_work.open-cluster-management.io_manifestworkreplicasets.crd.yaml"
        );
        let text = std::fs::read_to_string(path).expect("project CRD");
        let v: Value = serde_saphyr::from_str(&text).expect("yaml");
        assert_eq!(missing_fields(&v).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn upstream_like_crd_is_refused_with_field_names() {
        let v = crd_with(json!({"conditions": {}}));
        let missing = missing_fields(&v).unwrap();
        assert!(missing.contains(&"status.abortedTime".to_string()));
        assert!(missing.contains(&"status.updateRevision".to_string()));
        assert!(!missing.iter().any(|m| m.starts_with("spec.")));
    }

    #[test]
    fn preserve_unknown_fields_accepts_below() {
        let v = json!({"spec": {"versions": [{"name": "v1alpha1", "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {"x-kubernetes-preserve-unknown-fields": true}}}]}});
        assert!(missing_fields(&v).unwrap().is_empty());
    }
}
