//! The placement side of a simulated hub: cluster namespaces, and Placements with the
//! PlacementDecisions OCM's placement controller would publish (labels `placement`,
//! `decision-group-index`, `decision-group-name`; at most 100 clusters per decision;
//! Placement status with `numberOfSelectedClusters` and `decisionGroups`).
//!
//! Writes use server-side apply, so publishing the same decisions twice is a no-op and
//! re-publishing different ones converges (surplus decisions are deleted).

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use mwrs_api::labels;
use mwrs_api::placement::{MAX_DECISIONS_PER_PAGE, Placement, PlacementDecision};
use serde_json::json;

const FIELD_MANAGER: &str = "mwrs-fleet";

/// One decision group: a name ("" for unnamed) and its clusters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DecisionGroup {
    pub name: String,
    pub clusters: Vec<String>,
}

impl DecisionGroup {
    pub fn new(
        name: impl Into<String>,
        clusters: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self {
            name: name.into(),
            clusters: clusters.into_iter().map(Into::into).collect(),
        }
    }
}

fn apply() -> PatchParams {
    PatchParams::apply(FIELD_MANAGER).force()
}

/// Creates the namespace if it does not exist.
pub async fn ensure_namespace(client: &Client, name: &str) -> Result<(), kube::Error> {
    let api: Api<Namespace> = Api::all(client.clone());
    let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    api.patch(name, &apply(), &Patch::Apply(&body)).await?;
    Ok(())
}

/// Name of the `k`-th decision (1-based), as OCM names them.
pub fn decision_name(placement: &str, k: usize) -> String {
    format!("{placement}-decision-{k}")
}

/// Publishes `groups` as the decisions of Placement `name` in `namespace`, creating the
/// Placement if needed. Returns the names of the decisions written.
pub async fn publish(
    client: &Client,
    namespace: &str,
    name: &str,
    groups: &[DecisionGroup],
) -> Result<Vec<String>, kube::Error> {
    let placements: Api<Placement> = Api::namespaced(client.clone(), namespace);
    let decisions: Api<PlacementDecision> = Api::namespaced(client.clone(), namespace);
    let body = json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta1",
        "kind": "Placement",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {},
    });
    placements
        .patch(name, &apply(), &Patch::Apply(&body))
        .await?;

    let mut written = Vec::new();
    let mut group_status = Vec::new();
    let mut k = 0;
    let mut total = 0;
    for (index, g) in groups.iter().enumerate() {
        let mut names = Vec::new();
        // An empty group still gets one (empty) decision, as the scheduler writes.
        let chunks: Vec<&[String]> = if g.clusters.is_empty() {
            vec![&[]]
        } else {
            g.clusters.chunks(MAX_DECISIONS_PER_PAGE).collect()
        };
        for chunk in chunks {
            k += 1;
            let pd_name = decision_name(name, k);
            let body = json!({
                "apiVersion": "cluster.open-cluster-management.io/v1beta1",
                "kind": "PlacementDecision",
                "metadata": {"name": pd_name, "namespace": namespace, "labels": {
                    labels::PLACEMENT_LABEL: name,
                    labels::DECISION_GROUP_INDEX: index.to_string(),
                    labels::DECISION_GROUP_NAME: g.name,
                }},
            });
            decisions
                .patch(&pd_name, &apply(), &Patch::Apply(&body))
                .await?;
            let status = json!({
                "apiVersion": "cluster.open-cluster-management.io/v1beta1",
                "kind": "PlacementDecision",
                "status": {"decisions": chunk.iter()
                    .map(|c| json!({"clusterName": c, "reason": ""}))
                    .collect::<Vec<_>>()},
            });
            decisions
                .patch_status(&pd_name, &apply(), &Patch::Apply(&status))
                .await?;
            names.push(pd_name.clone());
            written.push(pd_name);
        }
        total += g.clusters.len();
        group_status.push(json!({
            "decisionGroupIndex": index,
            "decisionGroupName": g.name,
            "decisions": names,
            "clusterCount": g.clusters.len(),
        }));
    }

    // Decisions of an earlier, larger publication go.
    let lp = ListParams::default().labels(&format!("{}={name}", labels::PLACEMENT_LABEL));
    for pd in decisions.list(&lp).await?.items {
        let n = pd.name_any();
        if !written.contains(&n) {
            delete_ok(&decisions, &n).await?;
        }
    }

    let status = json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta1",
        "kind": "Placement",
        "status": {
            "numberOfSelectedClusters": total,
            "decisionGroups": group_status,
        },
    });
    placements
        .patch_status(name, &apply(), &Patch::Apply(&status))
        .await?;
    Ok(written)
}

/// Deletes every decision of Placement `name` (the Placement stays).
pub async fn clear_decisions(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<(), kube::Error> {
    let decisions: Api<PlacementDecision> = Api::namespaced(client.clone(), namespace);
    let lp = ListParams::default().labels(&format!("{}={name}", labels::PLACEMENT_LABEL));
    for pd in decisions.list(&lp).await?.items {
        delete_ok(&decisions, &pd.name_any()).await?;
    }
    Ok(())
}

async fn delete_ok(api: &Api<PlacementDecision>, name: &str) -> Result<(), kube::Error> {
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}
