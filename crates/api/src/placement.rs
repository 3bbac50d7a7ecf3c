//! `cluster.open-cluster-management.io/v1beta1` Placement and PlacementDecision. The
//! controller reads these; only the simulated fleet writes them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::CustomResource;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::Condition;

/// Placement spec, kept raw: scheduling inputs are the placement controller's business.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "cluster.open-cluster-management.io",
    version = "v1beta1",
    kind = "Placement",
    namespaced,
    status = "PlacementStatus",
    schema = "disabled"
)]
pub struct PlacementSpec {
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PlacementStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number_of_selected_clusters: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision_groups: Option<Vec<DecisionGroupStatus>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DecisionGroupStatus {
    #[serde(default)]
    pub decision_group_index: i32,
    #[serde(default)]
    pub decision_group_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decisions: Option<Vec<String>>,
    #[serde(default)]
    pub cluster_count: i32,
}

/// A page of a Placement's decisions (at most 100 clusters). It has no spec.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PlacementDecision {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<PlacementDecisionStatus>,
}

impl PlacementDecision {
    /// The clusters this page decides, in order.
    pub fn cluster_names(&self) -> impl Iterator<Item = &str> {
        self.status
            .iter()
            .flat_map(|s| s.decisions.iter())
            .map(|d| d.cluster_name.as_str())
    }
}

impl k8s_openapi::Resource for PlacementDecision {
    const API_VERSION: &'static str = "cluster.open-cluster-management.io/v1beta1";
    const GROUP: &'static str = "cluster.open-cluster-management.io";
    const KIND: &'static str = "PlacementDecision";
    const VERSION: &'static str = "v1beta1";
    const URL_PATH_SEGMENT: &'static str = "placementdecisions";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::Metadata for PlacementDecision {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// Serializes with `apiVersion` and `kind`, which the API server requires on writes.
impl PlacementDecision {
    pub fn to_object(&self) -> Value {
        let mut v = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Value::Object(m) = &mut v {
            m.insert(
                "apiVersion".into(),
                Value::String(<Self as k8s_openapi::Resource>::API_VERSION.into()),
            );
            m.insert(
                "kind".into(),
                Value::String(<Self as k8s_openapi::Resource>::KIND.into()),
            );
        }
        v
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PlacementDecisionStatus {
    #[serde(default)]
    pub decisions: Vec<ClusterDecision>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterDecision {
    pub cluster_name: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<i64>,
}

/// Most clusters one PlacementDecision lists (OCM's scheduler splits there).
pub const MAX_DECISIONS_PER_PAGE: usize = 100;
