//! A client that has exactly the shipped RBAC (`deploy/rbac/rbac.yaml`): a ServiceAccount
//! of the test's namespace bound to the shipped ClusterRole and to the leader-election
//! Role, authenticated by a token from the TokenRequest API. Controllers run in the hub
//! tests with it, so a verb the code uses and the ClusterRole lacks fails a test.

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use mwrs_testsupport::TestHub;
use serde_json::{Value, json};

const SHIPPED: &str = include_str!("../../../../deploy/rbac/rbac.yaml");
const SA: &str = "mwrs-controller";

/// The shipped document of `kind` named `name`.
pub fn shipped(kind: &str, name: &str) -> Value {
    serde_saphyr::from_multiple::<Value>(SHIPPED)
        .expect("deploy/rbac/rbac.yaml parses")
        .into_iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("deploy/rbac/rbac.yaml has no {kind} {name}"))
}

fn apply() -> PatchParams {
    PatchParams::apply("mwrs-tests").force()
}

/// Where the test's controller runs: the admin client and kubeconfig of the test hub,
/// and the test's namespace.
#[derive(Clone)]
pub struct Site {
    pub client: Client,
    pub kubeconfig: std::path::PathBuf,
    pub namespace: String,
}

impl Site {
    pub fn of(hub: &TestHub) -> Self {
        Self {
            client: hub.client.clone(),
            kubeconfig: hub.kubeconfig.clone(),
            namespace: hub.namespace.clone(),
        }
    }
}

/// A client of the shipped role (see [`shipped_role_kubeconfig`]).
pub async fn shipped_role_client(site: &Site) -> anyhow::Result<Client> {
    let path = shipped_role_kubeconfig(site).await?;
    let kc = Kubeconfig::read_from(&path)?;
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(config)?)
}

/// Sets up the ServiceAccount and bindings in `hub`'s namespace; writes a kubeconfig that
/// authenticates as it (for the controller binary) and returns its path.
pub async fn shipped_role_kubeconfig(site: &Site) -> anyhow::Result<std::path::PathBuf> {
    let ns = site.namespace.as_str();
    let c = site.client.clone();
    // The shipped ClusterRole itself, under its own name (the same for every test).
    let role = shipped("ClusterRole", "mwrs-controller");
    let name = role["metadata"]["name"].as_str().unwrap_or(SA).to_string();
    Api::<ClusterRole>::all(c.clone())
        .patch(&name, &apply(), &Patch::Apply(&role))
        .await?;
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": SA, "namespace": ns}});
    Api::<ServiceAccount>::namespaced(c.clone(), ns)
        .patch(SA, &apply(), &Patch::Apply(&sa))
        .await?;
    let subject = json!([{"kind": "ServiceAccount", "name": SA, "namespace": ns}]);
    let binding_name = format!("mwrs-controller-{ns}");
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": binding_name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": subject});
    Api::<ClusterRoleBinding>::all(c.clone())
        .patch(&binding_name, &apply(), &Patch::Apply(&binding))
        .await?;
    // Leader election's Role, in the test's namespace (tests pass it as --lease-namespace).
    let mut leader = shipped("Role", "mwrs-controller-leader-election");
    leader["metadata"]["namespace"] = json!(ns);
    let leader_name = leader["metadata"]["name"]
        .as_str()
        .unwrap_or(SA)
        .to_string();
    Api::<Role>::namespaced(c.clone(), ns)
        .patch(&leader_name, &apply(), &Patch::Apply(&leader))
        .await?;
    let rb = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": leader_name, "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": leader_name},
        "subjects": subject});
    Api::<RoleBinding>::namespaced(c.clone(), ns)
        .patch(&leader_name, &apply(), &Patch::Apply(&rb))
        .await?;

    mwrs_testsupport::service_account_kubeconfig(&c, &site.kubeconfig, ns, SA).await
}
