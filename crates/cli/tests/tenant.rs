//! The CLI for a tenant: a ServiceAccount holding Kubernetes' `edit` in the test's
//! namespace alone — with `deploy/rbac/users.yaml` aggregated into it — runs every
//! `kubectl mwrs` command on its own MWRS; it cannot see the ManifestWorks in the cluster
//! namespaces, and the CLI says so and shows what the controller publishes. A user with
//! no rights gets "forbidden" and exit 9.
//!
//! The test hub runs no kube-controller-manager, so nothing fills the aggregated `edit`
//! role; the test does what its ClusterRole aggregation controller does and grants the
//! result by a Role in the test's namespace, the same rights a RoleBinding of `edit` gives.
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`).

// run-tests: alone (changes cluster-wide objects of the shared test hub)

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use common::{Run, WAIT, describe, mwrs, rows, run_with, start_controller, status, watch};
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role, RoleBinding};
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams};
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_testsupport::{TestHub, configmap_template, wait_for};
use serde_json::{Value, json};

const USERS: &str = include_str!("../../../deploy/rbac/users.yaml");

fn apply() -> PatchParams {
    PatchParams::apply("mwrs-tests").force()
}

/// The rules of ClusterRole `name` once aggregated: its own, or with an aggregationRule
/// the union of the rules of every ClusterRole its selectors match, transitively.
fn aggregated(all: &BTreeMap<String, ClusterRole>, name: &str, depth: usize) -> Vec<PolicyRule> {
    let Some(role) = all.get(name) else {
        return Vec::new();
    };
    let Some(rule) = &role.aggregation_rule else {
        return role.rules.clone().unwrap_or_default();
    };
    assert!(depth < 8, "aggregation of {name} does not end");
    let selectors = rule.cluster_role_selectors.clone().unwrap_or_default();
    let mut out = Vec::new();
    for (other, r) in all {
        let labels = r.metadata.labels.clone().unwrap_or_default();
        let picked = selectors.iter().any(|s| {
            s.match_labels
                .iter()
                .flatten()
                .all(|(k, v)| labels.get(k) == Some(v))
                && s.match_expressions.as_ref().is_none_or(Vec::is_empty)
        });
        if picked && other != name {
            out.extend(aggregated(all, other, depth + 1));
        }
    }
    out
}

/// Grants ServiceAccount `sa` of the test's namespace what a RoleBinding of `edit` there
/// gives, with the shipped user roles installed; returns a kubeconfig as `sa`.
async fn tenant_with_edit(hub: &TestHub, sa: &str) -> std::path::PathBuf {
    let c: &Client = &hub.client;
    let ns = hub.namespace.as_str();
    let cluster_roles = Api::<ClusterRole>::all(c.clone());
    for doc in serde_saphyr::from_multiple::<Value>(USERS).unwrap() {
        let name = doc["metadata"]["name"].as_str().unwrap().to_string();
        cluster_roles
            .patch(&name, &apply(), &Patch::Apply(&doc))
            .await
            .unwrap();
    }
    let all: BTreeMap<String, ClusterRole> = cluster_roles
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|r| (r.metadata.name.clone().unwrap_or_default(), r))
        .collect();
    let rules = aggregated(&all, "edit", 0);
    assert!(
        rules.iter().any(|r| r
            .resources
            .iter()
            .flatten()
            .any(|x| x == "manifestworkreplicasets")),
        "the shipped roles aggregate into edit"
    );
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "edit", "namespace": ns}, "rules": rules});
    Api::<Role>::namespaced(c.clone(), ns)
        .patch("edit", &apply(), &Patch::Apply(&role))
        .await
        .unwrap();
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": format!("edit-{sa}"), "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "edit"},
        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]});
    Api::<RoleBinding>::namespaced(c.clone(), ns)
        .patch(&format!("edit-{sa}"), &apply(), &Patch::Apply(&binding))
        .await
        .unwrap();
    hub.service_account_kubeconfig(sa).await.unwrap()
}

async fn as_user(kubeconfig: &Path, hub: &TestHub, args: &[&str]) -> Run {
    run_with(kubeconfig, Some(&hub.namespace), args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_with_edit_in_one_namespace_runs_every_command() {
    let Some(hub) = TestHub::from_env("cli-tenant", 3).await else {
        return;
    };
    let _controller = start_controller(&hub);
    let _agent = common::agent_succeeding(&hub, Duration::from_millis(200));
    hub.publish_all("p").await;
    let strategy = json!({"type": "Progressive", "progressive": {"maxConcurrency": 1}});
    common::create_v1(&hub, "app", strategy).await;
    let r = watch(&hub, "app").await;
    assert_eq!(r.code, 0, "v1 completes: {r:?}");
    let alice = tenant_with_edit(&hub, "alice").await;

    // Reading.
    let r = as_user(&alice, &hub, &["get", "-o", "wide"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(rows(&r.out)[0]["STATUS"], "Complete", "{}", r.out);
    let r = as_user(&alice, &hub, &["rollout", "status", "app"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.out.contains("per-cluster states are not shown"),
        "{}",
        r.out
    );
    let placement = &rows(common::section(&r.out, "PLACEMENT"))[0];
    assert_eq!(placement["DONE"], "3/3", "{}", r.out);
    let r = as_user(&alice, &hub, &["rollout", "status", "app", "-o", "json"]).await;
    assert_eq!(r.json()["placements"][0]["done"], 3, "{r:?}");
    let r = as_user(&alice, &hub, &["rollout", "history", "app"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(rows(&r.out)[0]["CLUSTERS"], "-", "{}", r.out);
    assert!(r.err.contains("CLUSTERS is not counted"), "{r:?}");
    for args in [
        &["rollout", "history", "app", "--revision", "1"][..],
        &["rollout", "plan", "app"],
    ] {
        let r = as_user(&alice, &hub, args).await;
        assert_eq!(r.code, 0, "{args:?}: {r:?}");
    }

    // The plan of a new template: what the admin, who sees every ManifestWork, gets.
    let mut next = serde_json::to_value(hub.get_mwrs("app").await.unwrap()).unwrap();
    next["spec"]["manifestWorkTemplate"] = configmap_template("v2");
    let file = std::env::temp_dir().join(format!("{}-app-v2.json", hub.namespace));
    std::fs::write(&file, serde_json::to_vec(&next).unwrap()).unwrap();
    let file = file.to_str().unwrap();
    let admin = mwrs(&hub, &["rollout", "plan", "-f", file, "-o", "json"]).await;
    let tenant = as_user(&alice, &hub, &["rollout", "plan", "-f", file, "-o", "json"]).await;
    std::fs::remove_file(file).unwrap();
    assert_eq!(admin.code, 0, "{admin:?}");
    assert_eq!(tenant.code, 0, "{tenant:?}");
    assert_eq!(tenant.json()["waves"], admin.json()["waves"], "{tenant:?}");
    assert!(
        tenant.json()["note"].as_str().unwrap().contains("settled"),
        "{tenant:?}"
    );

    // Writing: the controls, a new template, undo; status -w follows to the end.
    for control in ["pause", "resume", "abort", "retry"] {
        let r = as_user(&alice, &hub, &["rollout", control, "app"]).await;
        assert_eq!(r.code, 0, "{control}: {r:?}");
    }
    // The tenant applies v2 with its own client.
    let own = mwrs_testsupport::client_from(&alice).await.unwrap();
    Api::<ManifestWorkReplicaSet>::namespaced(own, &hub.namespace)
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"manifestWorkTemplate": configmap_template("v2")}})),
        )
        .await
        .unwrap();
    let r = as_user(
        &alice,
        &hub,
        &["rollout", "status", "app", "-w", "--timeout", "60s"],
    )
    .await;
    assert_eq!(r.code, 0, "v2 completes: {r:?}");
    let r = as_user(&alice, &hub, &["rollout", "diff", "app", "1", "2"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.out.contains("v2"), "{}", r.out);
    let r = as_user(&alice, &hub, &["rollout", "undo", "app"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    wait_for("v1 again", WAIT, || async {
        let m = hub.get_mwrs("app").await.ok_or("no MWRS")?;
        let s = status(&m);
        (s.current_revision == s.update_revision
            && s.update_revision.is_some()
            && m.spec.manifest_work_template.to_value() == configmap_template("v1"))
        .then_some(())
        .ok_or_else(|| describe(&m))
    })
    .await;

    // No rights: forbidden, said so, exit 9.
    let nobody = hub.service_account_kubeconfig("nobody").await.unwrap();
    let r = as_user(&nobody, &hub, &["rollout", "status", "app"]).await;
    assert_eq!(r.code, 9, "{r:?}");
    assert!(r.err.contains("forbidden"), "{r:?}");
}
