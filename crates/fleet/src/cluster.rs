//! The managed clusters of a simulated fleet as a hub sees them: a ManagedCluster (accepted,
//! available) and its cluster namespace, both labelled with the fleet's name so that a
//! fleet can be listed and torn down as one. Writes are server-side applies (idempotent:
//! bringing up the same fleet twice is a no-op) with bounded concurrency.

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use mwrs_api::cluster::ManagedCluster;
use serde_json::json;

/// Label on every object of a fleet; its value is the fleet name.
pub const FLEET_LABEL: &str = "fleet.mwrs.open-cluster-management.io/name";
const FIELD_MANAGER: &str = "mwrs-fleet";

/// `prefix-00000` … : zero-padded so that names sort in index order.
pub fn cluster_names(prefix: &str, n: usize) -> Vec<String> {
    let width = n.saturating_sub(1).to_string().len().max(3);
    (0..n).map(|i| format!("{prefix}-{i:0width$}")).collect()
}

/// Creates (or leaves as they are) the ManagedCluster and namespace of every cluster.
pub async fn ensure_clusters(
    client: &Client,
    fleet: &str,
    names: &[String],
    concurrency: usize,
) -> Result<(), kube::Error> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let clusters: Api<ManagedCluster> = Api::all(client.clone());
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    stream::iter(names)
        .map(|name| {
            let (namespaces, clusters, pp) = (&namespaces, &clusters, &pp);
            async move {
                let labels = json!({ FLEET_LABEL: fleet });
                let ns = json!({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": name, "labels": labels}});
                namespaces.patch(name, pp, &Patch::Apply(&ns)).await?;
                let managed_cluster = json!({
                    "apiVersion": "cluster.open-cluster-management.io/v1",
                    "kind": "ManagedCluster",
                    "metadata": {"name": name, "labels": labels},
                    "spec": {"hubAcceptsClient": true, "leaseDurationSeconds": 60},
                });
                clusters
                    .patch(name, pp, &Patch::Apply(&managed_cluster))
                    .await?;
                let status = json!({
                    "apiVersion": "cluster.open-cluster-management.io/v1",
                    "kind": "ManagedCluster",
                    "status": {"conditions": [{
                        "type": "ManagedClusterConditionAvailable",
                        "status": "True",
                        "reason": "SimulatedClusterAvailable",
                        "message": "simulated by mwrs-fleet",
                        "lastTransitionTime": jiff::Timestamp::now().to_string(),
                    }]},
                });
                clusters
                    .patch_status(name, pp, &Patch::Apply(&status))
                    .await?;
                Ok::<_, kube::Error>(())
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<()>()
        .await
}

/// Deletes every ManagedCluster and namespace of the fleet; returns how many clusters.
pub async fn delete_fleet(
    client: &Client,
    fleet: &str,
    concurrency: usize,
) -> Result<usize, kube::Error> {
    let lp = ListParams::default().labels(&format!("{FLEET_LABEL}={fleet}"));
    let clusters: Api<ManagedCluster> = Api::all(client.clone());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mc_names: Vec<String> = clusters
        .list_metadata(&lp)
        .await?
        .items
        .iter()
        .map(|m| m.name_any())
        .collect();
    let ns_names: Vec<String> = namespaces
        .list_metadata(&lp)
        .await?
        .items
        .iter()
        .map(|m| m.name_any())
        .collect();
    delete_all(&clusters, &mc_names, concurrency).await?;
    delete_all(&namespaces, &ns_names, concurrency).await?;
    Ok(mc_names.len())
}

/// Deletes `names` (already gone is fine), `concurrency` at a time.
async fn delete_all<K>(
    api: &Api<K>,
    names: &[String],
    concurrency: usize,
) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let dp = DeleteParams::background();
    stream::iter(names)
        .map(|name| {
            let dp = &dp;
            async move {
                match api.delete(name, dp).await {
                    Ok(_) => Ok(()),
                    Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                    Err(e) => Err(e),
                }
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<()>()
        .await
}

/// Splits clusters into `groups` decision groups of (near) equal size, in order.
pub fn split_groups(names: &[String], groups: usize) -> Vec<Vec<String>> {
    let g = groups.clamp(1, names.len().max(1));
    let base = names.len() / g;
    let extra = names.len() % g;
    let mut out = Vec::with_capacity(g);
    let mut start = 0;
    for i in 0..g {
        let len = base + usize::from(i < extra);
        out.push(names[start..start + len].to_vec());
        start += len;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sort_in_index_order() {
        let n = cluster_names("c", 1200);
        assert_eq!(n[0], "c-0000");
        assert_eq!(n[1199], "c-1199");
        let mut sorted = n.clone();
        sorted.sort();
        assert_eq!(sorted, n);
        assert_eq!(cluster_names("c", 5)[4], "c-004");
    }

    #[test]
    fn groups_cover_every_cluster_once() {
        let n = cluster_names("c", 10);
        let g = split_groups(&n, 3);
        assert_eq!(g.iter().map(Vec::len).collect::<Vec<_>>(), vec![4, 3, 3]);
        assert_eq!(g.concat(), n);
        assert_eq!(split_groups(&n[..2], 5).len(), 2);
        assert_eq!(split_groups(&[], 3), vec![Vec::<String>::new()]);
    }
}
