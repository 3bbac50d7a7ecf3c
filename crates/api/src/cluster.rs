//! `cluster.open-cluster-management.io/v1` ManagedCluster: written by the simulated fleet,
//! never consulted by the controller (clusters come from PlacementDecisions only).

use kube::CustomResource;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::Condition;

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "cluster.open-cluster-management.io",
    version = "v1",
    kind = "ManagedCluster",
    status = "ManagedClusterStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hub_accepts_client: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_duration_seconds: Option<i32>,
    /// Everything else, untouched.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    #[serde(flatten)]
    pub other: Map<String, Value>,
}
