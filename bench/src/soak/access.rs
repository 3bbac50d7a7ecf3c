//! Who the soak's processes are to the hub: each controller replica its own
//! ServiceAccount (so that the audit log tells their writes apart), bound to cluster-admin;
//! the plugin a ServiceAccount that may read ManifestWorks only in the cluster namespaces
//! it is granted (so that taking the grant away makes it err on those clusters).

use std::path::{Path, PathBuf};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleBinding};
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

use super::NS;

/// The plugin's ServiceAccount and the ClusterRole its RoleBindings grant.
pub const PLUGIN_ACCOUNT: &str = "plugin";
const PLUGIN_READER: &str = "mwrs-soak-plugin-reader";

fn apply() -> PatchParams {
    PatchParams::apply("mwrs-soak").force()
}

/// A kubeconfig as ServiceAccount `sa` of [`NS`] (made if missing) on the hub of `hub`.
pub async fn account_kubeconfig(client: &Client, hub: &Path, sa: &str) -> anyhow::Result<PathBuf> {
    mwrs_testsupport::service_account_kubeconfig(client, hub, NS, sa).await
}

/// Binds ServiceAccount `sa` of [`NS`] to cluster-admin.
pub async fn bind_cluster_admin(client: &Client, sa: &str) -> anyhow::Result<()> {
    let name = format!("mwrs-soak-{sa}");
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": NS}]});
    Api::<ClusterRoleBinding>::all(client.clone())
        .patch(&name, &apply(), &Patch::Apply(&binding))
        .await?;
    Ok(())
}

/// Lets the plugin read ManifestWorks in `namespaces`.
pub async fn grant_plugin(client: &Client, namespaces: &[String]) -> anyhow::Result<()> {
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": PLUGIN_READER},
        "rules": [{"apiGroups": ["work.open-cluster-management.io"],
            "resources": ["manifestworks"], "verbs": ["get"]}]});
    Api::<ClusterRole>::all(client.clone())
        .patch(PLUGIN_READER, &apply(), &Patch::Apply(&role))
        .await?;
    // Futures made up front: a closure inside the stream type trips the higher-ranked
    // lifetime check of a spawned task.
    let writes: Vec<_> = namespaces
        .iter()
        .map(|ns| {
            let api = Api::<RoleBinding>::namespaced(client.clone(), ns);
            let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": PLUGIN_READER, "namespace": ns},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": PLUGIN_READER},
                "subjects": [{"kind": "ServiceAccount", "name": PLUGIN_ACCOUNT, "namespace": NS}]});
            async move {
                api.patch(PLUGIN_READER, &apply(), &Patch::Apply(&binding))
                    .await
                    .map(drop)
            }
        })
        .collect();
    all(writes).await
}

/// Takes the plugin's reading of ManifestWorks in `namespaces` away.
pub async fn revoke_plugin(client: &Client, namespaces: &[String]) -> anyhow::Result<()> {
    let deletes: Vec<_> = namespaces
        .iter()
        .map(|ns| {
            let api = Api::<RoleBinding>::namespaced(client.clone(), ns);
            async move {
                match api.delete(PLUGIN_READER, &DeleteParams::default()).await {
                    Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                    other => other.map(drop),
                }
            }
        })
        .collect();
    all(deletes).await
}

/// Runs `requests`, 32 at a time; the first error, if any.
async fn all(requests: Vec<impl Future<Output = Result<(), kube::Error>>>) -> anyhow::Result<()> {
    futures::stream::iter(requests)
        .buffer_unordered(32)
        .try_collect::<()>()
        .await?;
    Ok(())
}
