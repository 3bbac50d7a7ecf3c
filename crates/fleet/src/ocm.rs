//! Real managed clusters on a hub that runs upstream OCM's placement controller (the e2e
//! environment, `scripts/demo.sh --ocm`): the ManagedClusters of an exclusive
//! ManagedClusterSet, a namespace bound to that set, and a Placement with a canary decision
//! group whose decisions the placement controller writes. The first cluster is the canary.
//!
//! Writes are server-side applies, so registering the same clusters again is a no-op.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use mwrs_api::cluster::ManagedCluster;
use mwrs_api::placement::{Placement, PlacementDecision};
use serde_json::{Value, json};

const FIELD_MANAGER: &str = "mwrs-fleet";
const CLUSTER_GROUP: &str = "cluster.open-cluster-management.io";
/// The cluster set of the e2e environment's spokes; the e2e tests and the demo on real
/// clusters share it, so neither moves the clusters out of the other's set.
pub const CLUSTER_SET: &str = "spokes";
/// The label that puts a ManagedCluster into an exclusive cluster set.
pub const CLUSTER_SET_LABEL: &str = "cluster.open-cluster-management.io/clusterset";
/// The label (`"true"`) that selects the canary decision group.
pub const CANARY_LABEL: &str = "canary";
/// The name of the first decision group of [`canary_placement`].
pub const CANARY_GROUP: &str = "canary";

fn apply() -> PatchParams {
    PatchParams::apply(FIELD_MANAGER).force()
}

fn cluster_resource(version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: CLUSTER_GROUP.into(),
        version: version.into(),
        api_version: format!("{CLUSTER_GROUP}/{version}"),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// ManagedClusters `clusters` (the first labelled canary) with their namespaces, in the
/// exclusive ManagedClusterSet `set`.
pub async fn register_clusters(
    client: &Client,
    set: &str,
    clusters: &[String],
) -> Result<(), kube::Error> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let managed: Api<ManagedCluster> = Api::all(client.clone());
    for (i, name) in clusters.iter().enumerate() {
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        namespaces.patch(name, &apply(), &Patch::Apply(ns)).await?;
        let managed_cluster = json!({"apiVersion": format!("{CLUSTER_GROUP}/v1"), "kind": "ManagedCluster",
            "metadata": {"name": name, "labels": {
                CLUSTER_SET_LABEL: set, CANARY_LABEL: (i == 0).to_string()}},
            "spec": {"hubAcceptsClient": true}});
        managed
            .patch(name, &apply(), &Patch::Apply(managed_cluster))
            .await?;
    }
    let sets: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &cluster_resource("v1beta2", "ManagedClusterSet", "managedclustersets"),
    );
    let body = json!({"apiVersion": format!("{CLUSTER_GROUP}/v1beta2"),
        "kind": "ManagedClusterSet", "metadata": {"name": set},
        "spec": {"clusterSelector": {"selectorType": "ExclusiveClusterSetLabel"}}});
    sets.patch(set, &apply(), &Patch::Apply(body)).await?;
    Ok(())
}

/// Namespace `namespace`, bound to cluster set `set` so its Placements may select from it.
pub async fn bind_namespace(
    client: &Client,
    namespace: &str,
    set: &str,
) -> Result<(), kube::Error> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
    namespaces
        .patch(namespace, &apply(), &Patch::Apply(body))
        .await?;
    let bindings: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        namespace,
        &cluster_resource(
            "v1beta2",
            "ManagedClusterSetBinding",
            "managedclustersetbindings",
        ),
    );
    let binding = json!({"apiVersion": format!("{CLUSTER_GROUP}/v1beta2"),
        "kind": "ManagedClusterSetBinding",
        "metadata": {"name": set, "namespace": namespace},
        "spec": {"clusterSet": set}});
    bindings
        .patch(set, &apply(), &Patch::Apply(binding))
        .await?;
    Ok(())
}

/// Placement `name` in `namespace` over every cluster of `set`, in two decision groups:
/// [`CANARY_GROUP`] (the clusters labelled canary) first, then all the others.
pub async fn canary_placement(
    client: &Client,
    namespace: &str,
    name: &str,
    set: &str,
) -> Result<(), kube::Error> {
    let placements: Api<Placement> = Api::namespaced(client.clone(), namespace);
    let body = json!({"apiVersion": format!("{CLUSTER_GROUP}/v1beta1"),
        "kind": "Placement", "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterSets": [set],
            "decisionStrategy": {"groupStrategy": {
                "decisionGroups": [{"groupName": CANARY_GROUP,
                    "groupClusterSelector": {"labelSelector": {
                        "matchLabels": {CANARY_LABEL: "true"}}}}],
                "clustersPerDecisionGroup": "100%"}}}});
    placements
        .patch(name, &apply(), &Patch::Apply(body))
        .await?;
    Ok(())
}

/// How many clusters the PlacementDecisions of Placement `name` list.
pub async fn decided_clusters(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<usize, kube::Error> {
    let decisions: Api<PlacementDecision> = Api::namespaced(client.clone(), namespace);
    let lp = ListParams::default().labels(&format!("{CLUSTER_GROUP}/placement={name}"));
    let list = decisions.list(&lp).await?;
    Ok(list.items.iter().map(|d| d.cluster_names().count()).sum())
}

/// A `manifestConfigs` entry for ConfigMap `namespace/name`: upstream's agent reports the
/// ManifestWork `Progressing` while the ConfigMap's `data.version` is `version` (a CEL
/// condition rule), so a revision carrying it never finishes on any cluster.
pub fn configmap_progressing_while(namespace: &str, name: &str, version: &str) -> Value {
    json!({
        "resourceIdentifier": {"group": "", "resource": "configmaps", "name": name,
            "namespace": namespace},
        "conditionRules": [{"condition": "Progressing", "type": "CEL",
            "celExpressions": [format!("object.data.version == '{version}'")],
            "message": format!("version {version} never settles")}]
    })
}

/// `data.version` of ConfigMap `namespace/name` on a spoke; None when it is absent or
/// cannot be read.
pub async fn configmap_version(spoke: &Client, namespace: &str, name: &str) -> Option<String> {
    Api::<ConfigMap>::namespaced(spoke.clone(), namespace)
        .get_opt(name)
        .await
        .ok()
        .flatten()
        .and_then(|cm| cm.data)
        .and_then(|d| d.get("version").cloned())
}
