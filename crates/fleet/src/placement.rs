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
    let body = json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta1",
        "kind": "Placement",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {},
    });
    placements
        .patch(name, &apply(), &Patch::Apply(&body))
        .await?;

    let decisions = Decisions {
        api: Api::namespaced(client.clone(), namespace),
        namespace,
        placement: name,
    };
    let mut written = Vec::new();
    let mut group_status = Vec::new();
    for (index, g) in groups.iter().enumerate() {
        let names = decisions.write_group(index, g, written.len()).await?;
        group_status.push(json!({
            "decisionGroupIndex": index,
            "decisionGroupName": g.name,
            "decisions": names,
            "clusterCount": g.clusters.len(),
        }));
        written.extend(names);
    }
    decisions.delete_surplus(&written).await?;

    let total: usize = groups.iter().map(|g| g.clusters.len()).sum();
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

/// The PlacementDecisions of one Placement, as [`publish`] writes them.
struct Decisions<'a> {
    api: Api<PlacementDecision>,
    namespace: &'a str,
    placement: &'a str,
}

impl Decisions<'_> {
    /// Writes group `index` as decisions of at most [`MAX_DECISIONS_PER_PAGE`] clusters,
    /// numbered on after the `before` decisions of the groups ahead of it. Returns their
    /// names.
    async fn write_group(
        &self,
        index: usize,
        group: &DecisionGroup,
        before: usize,
    ) -> Result<Vec<String>, kube::Error> {
        // An empty group still gets one (empty) decision, as the scheduler writes.
        let chunks: Vec<&[String]> = if group.clusters.is_empty() {
            vec![&[]]
        } else {
            group.clusters.chunks(MAX_DECISIONS_PER_PAGE).collect()
        };
        let mut names = Vec::with_capacity(chunks.len());
        for (k, chunk) in (before + 1..).zip(chunks) {
            let pd_name = decision_name(self.placement, k);
            self.write(&pd_name, index, &group.name, chunk).await?;
            names.push(pd_name);
        }
        Ok(names)
    }

    /// Writes decision `pd_name` of group `index` (named `group`), choosing `clusters`.
    async fn write(
        &self,
        pd_name: &str,
        index: usize,
        group: &str,
        clusters: &[String],
    ) -> Result<(), kube::Error> {
        let body = json!({
            "apiVersion": "cluster.open-cluster-management.io/v1beta1",
            "kind": "PlacementDecision",
            "metadata": {"name": pd_name, "namespace": self.namespace, "labels": {
                labels::PLACEMENT_LABEL: self.placement,
                labels::DECISION_GROUP_INDEX: index.to_string(),
                labels::DECISION_GROUP_NAME: group,
            }},
        });
        self.api
            .patch(pd_name, &apply(), &Patch::Apply(&body))
            .await?;
        let status = json!({
            "apiVersion": "cluster.open-cluster-management.io/v1beta1",
            "kind": "PlacementDecision",
            "status": {"decisions": clusters.iter()
                .map(|c| json!({"clusterName": c, "reason": ""}))
                .collect::<Vec<_>>()},
        });
        self.api
            .patch_status(pd_name, &apply(), &Patch::Apply(&status))
            .await?;
        Ok(())
    }

    /// Deletes the decisions not `written`: those of an earlier, larger publication.
    async fn delete_surplus(&self, written: &[String]) -> Result<(), kube::Error> {
        let lp = ListParams::default().labels(&format!(
            "{}={}",
            labels::PLACEMENT_LABEL,
            self.placement
        ));
        for pd in self.api.list(&lp).await?.items {
            let n = pd.name_any();
            if !written.contains(&n) {
                delete_ok(&self.api, &n).await?;
            }
        }
        Ok(())
    }
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
