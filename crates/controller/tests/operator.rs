//! Coexistence with upstream's cluster-manager operator (issue #12 item 1): the real
//! operator (`open-cluster-management.io/ocm` `cmd/registration-operator`, built from the
//! Go module by `bench/peer/build.sh`) manages the test hub through a ClusterManager that
//! leaves upstream's ManifestWorkReplicaSet controller off, while an abort of ours holds.
//! The operator re-applies every hub CRD it ships on each reconcile unless the installed
//! copy's `operator.open-cluster-management.io/version` is higher than its own; ours
//! carries a version above any release, so after several reconciles our CRD is the one we
//! installed, the hold is intact and nothing rolled out.
//!
//! The operator changes cluster-wide objects (CRDs), so this file holds this one test and
//! restores every CRD it replaced. Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`),
//! skipped without it unless CI=true, and Go (the operator is built on first use and
//! cached; `MWRS_OCM_OPERATOR` names a prebuilt binary instead).

// run-tests: alone (changes cluster-wide objects of the shared test hub)

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

use common::{HeldAbort, aborted, current, start_agent_hanging, update, work_versions};
use futures::FutureExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use mwrs_cli::cmd::upstream::{self, cluster_managers};
use mwrs_controller::Shared;
use mwrs_controller::crd::CRD_NAME;
use mwrs_testsupport::{ChildProcess, TestHub, wait_for};
use serde_json::json;

const OPERATOR_NAMESPACE: &str = "open-cluster-management";
const HUB_NAMESPACE: &str = "open-cluster-management-hub";
const VERSION_ANNOTATION: &str = "operator.open-cluster-management.io/version";
/// A CRD the test hub has and the operator applies after ours in each reconcile: its
/// version annotation coming back after we remove it shows that a CRD pass has run past
/// ours.
const PROBE_CRD: &str = "placementdecisions.cluster.open-cluster-management.io";
const RECONCILES: usize = 3;
/// The operator's Deployment of upstream's work controller (MWRS among its gates).
const WORK_CONTROLLER: &str = "cluster-manager-work-controller";

/// The operator binary: `MWRS_OCM_OPERATOR`, or built (and cached) by bench/peer.
fn operator_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("MWRS_OCM_OPERATOR") {
        return PathBuf::from(p);
    }
    let out = std::process::Command::new(common::repo_root().join("bench/peer/build.sh"))
        .arg("registration-operator")
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("bench/peer/build.sh runs");
    assert!(out.status.success(), "building upstream's operator failed");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// The ClusterManager CRD of the same upstream module.
fn cluster_manager_crd() -> CustomResourceDefinition {
    let file = common::ocm_module_file(
        "deploy/cluster-manager/config/crds/0000_01_operator.open-cluster-management.io_clustermanagers.crd.yaml",
    );
    serde_saphyr::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap()
}

async fn apply<K>(api: &Api<K>, name: &str, body: serde_json::Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let pp = PatchParams::apply("mwrs-operator-test").force();
    api.patch(name, &pp, &Patch::Apply(body)).await.unwrap();
}

/// ClusterManager settings that leave upstream's MWRS controller off (README recipe).
fn cluster_manager(poke: usize) -> serde_json::Value {
    json!({
        "apiVersion": "operator.open-cluster-management.io/v1",
        "kind": "ClusterManager",
        "metadata": {"name": "cluster-manager", "labels": {"mwrs-test/poke": poke.to_string()}},
        "spec": {"workConfiguration": {"featureGates": [
            {"feature": "ManifestWorkReplicaSet", "mode": "Disable"}
        ]}}
    })
}

/// The ClusterManager of a hub that ran upstream's MWRS controller: its first entry turns
/// the gate on (a later `Disable` is ignored by the operator).
fn cluster_manager_running_upstream() -> serde_json::Value {
    json!({
        "apiVersion": "operator.open-cluster-management.io/v1",
        "kind": "ClusterManager",
        "metadata": {"name": "cluster-manager"},
        "spec": {"workConfiguration": {"featureGates": [
            {"feature": "ManifestWorkReplicaSet", "mode": "Enable"},
            {"feature": "ManifestWorkReplicaSet", "mode": "Disable"}
        ]}}
    })
}

/// Upstream's MWRS controller deployed by the operator, then `kubectl mwrs
/// disable-upstream` (the README's install step): the first entry turned off in place,
/// the rest of the list untouched, and the command returns once the operator has removed
/// the controller.
async fn disable_upstream(hub: &TestHub) {
    let managers = cluster_managers(&hub.client);
    apply(
        &managers,
        "cluster-manager",
        cluster_manager_running_upstream(),
    )
    .await;
    let deployments: Api<Deployment> = Api::namespaced(hub.client.clone(), HUB_NAMESPACE);
    wait_for(
        "upstream's MWRS controller deployed",
        common::WAIT,
        || async {
            let d = deployments
                .get_opt(WORK_CONTROLLER)
                .await
                .map_err(|e| e.to_string())?;
            let spec = d.and_then(|d| d.spec).and_then(|s| s.template.spec);
            match spec {
                Some(p) if upstream::runs_mwrs(&p.containers) => Ok(()),
                other => Err(format!("not yet: {other:?}")),
            }
        },
    )
    .await;
    let cli = mwrs_cli::hub::HubClient {
        client: hub.client.clone(),
        namespace: hub.namespace.clone(),
        url: String::new(),
    };
    // The README's line, as written.
    let words = common::readme_line("kubectl mwrs disable-upstream");
    let cli_line = std::iter::once("kubectl-mwrs".to_string()).chain(words.into_iter().skip(2));
    let parsed = <mwrs_cli::args::Cli as clap::Parser>::try_parse_from(cli_line).unwrap();
    let mwrs_cli::args::Command::DisableUpstream(args) = parsed.command else {
        panic!("the README's line is not disable-upstream: {parsed:?}");
    };
    let exit = upstream::run(&cli, &args).await;
    assert!(
        matches!(exit, Ok(mwrs_cli::error::Exit::Ok)),
        "{:?}",
        exit.err()
    );
    let cm = managers.get("cluster-manager").await.unwrap();
    assert_eq!(
        cm.data["spec"]["workConfiguration"]["featureGates"],
        json!([
            {"feature": "ManifestWorkReplicaSet", "mode": "Disable"},
            {"feature": "ManifestWorkReplicaSet", "mode": "Disable"}
        ])
    );
    let left = deployments.get_opt(WORK_CONTROLLER).await.unwrap();
    let spec = left.and_then(|d| d.spec).and_then(|s| s.template.spec);
    assert!(
        !spec.is_some_and(|p| upstream::runs_mwrs(&p.containers)),
        "upstream's MWRS controller still deployed"
    );
}

/// Puts back every CRD the operator replaced, as it was before the test.
async fn restore(
    crds: &Api<CustomResourceDefinition>,
    before: &BTreeMap<String, CustomResourceDefinition>,
) {
    for (name, was) in before {
        let Ok(now) = crds.get(name).await else {
            continue;
        };
        if now.resource_version() == was.resource_version() {
            continue;
        }
        let mut back = was.clone();
        back.metadata.resource_version = now.resource_version();
        back.metadata.managed_fields = None;
        back.status = None;
        if let Err(e) = crds.replace(name, &PostParams::default(), &back).await {
            eprintln!("restoring CRD {name}: {e}");
        }
    }
}

/// One whole CRD pass of the operator: the probe CRD's version annotation, removed here,
/// is back after a change of the ClusterManager.
async fn one_reconcile(hub: &TestHub, crds: &Api<CustomResourceDefinition>, poke: usize) {
    crds.patch(
        PROBE_CRD,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {VERSION_ANNOTATION: null}}})),
    )
    .await
    .unwrap();
    apply(
        &cluster_managers(&hub.client),
        "cluster-manager",
        cluster_manager(poke),
    )
    .await;
    wait_for(
        &format!("operator reconcile {poke} re-applying its CRDs"),
        common::WAIT,
        || async {
            let probe = crds.get(PROBE_CRD).await.map_err(|e| e.to_string())?;
            match probe.annotations().get(VERSION_ANNOTATION) {
                Some(v) => Ok(v.clone()),
                None => Err("probe CRD not re-applied yet".to_string()),
            }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstreams_operator_leaves_our_crd_and_an_abort_hold_alone() {
    let Some(hub) = TestHub::from_env("operator", 2).await else {
        return;
    };
    let operator = operator_binary();
    let crds: Api<CustomResourceDefinition> = Api::all(hub.client.clone());

    // An abort holding v1 against a failed v2, as in the CRD-swap test.
    let shared = Shared::default();
    let _controller = common::start_controller_sharing(&hub, shared.clone());
    let _agent = start_agent_hanging(&hub, &hub.clusters[0], "v2");
    let HeldAbort { v1, v2, since } = common::hold_an_abort(&hub).await;
    let versions = work_versions(&hub).await;

    let before: BTreeMap<String, CustomResourceDefinition> = crds
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| (c.name_any(), c))
        .collect();
    let ours = before.get(CRD_NAME).expect("our CRD is installed").clone();
    assert!(
        ours.annotations().contains_key(VERSION_ANNOTATION),
        "the installed CRD lacks the operator guard annotation"
    );

    let mut cm_crd = cluster_manager_crd();
    cm_crd.metadata.managed_fields = None;
    apply(
        &crds,
        &cm_crd.name_any(),
        serde_json::to_value(&cm_crd).unwrap(),
    )
    .await;
    wait_for(
        "the ClusterManager CRD established",
        common::WAIT,
        || async {
            let c = crds
                .get(&cm_crd.name_any())
                .await
                .map_err(|e| e.to_string())?;
            let ok = c.status.and_then(|s| s.conditions).is_some_and(|cs| {
                cs.iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            });
            if ok {
                Ok(())
            } else {
                Err("not established".to_string())
            }
        },
    )
    .await;
    let namespaces: Api<Namespace> = Api::all(hub.client.clone());
    apply(
        &namespaces,
        OPERATOR_NAMESPACE,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OPERATOR_NAMESPACE}}),
    )
    .await;

    let kubeconfig = hub.kubeconfig.display().to_string();
    let mut op = ChildProcess::spawn(
        &operator,
        &[
            "hub",
            "--kubeconfig",
            &kubeconfig,
            "--namespace",
            OPERATOR_NAMESPACE,
            "--disable-leader-election",
        ],
        &[],
    )
    .unwrap();

    let checks = async {
        disable_upstream(&hub).await;
        for poke in 1..=RECONCILES {
            one_reconcile(&hub, &crds, poke).await;
        }
        let now = crds.get(CRD_NAME).await.unwrap();
        assert_eq!(
            now.resource_version(),
            ours.resource_version(),
            "the operator replaced our CRD (annotations now {:?})",
            now.annotations()
        );
        // The operator managed the hub and did not deploy upstream's MWRS controller.
        let deployments: Api<Deployment> = Api::namespaced(hub.client.clone(), HUB_NAMESPACE);
        let names: Vec<String> = deployments
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .iter()
            .map(|d| d.name_any())
            .collect();
        assert!(
            names
                .iter()
                .any(|n| n == "cluster-manager-placement-controller"),
            "{names:?}"
        );
        assert!(
            !names.iter().any(|n| n == WORK_CONTROLLER),
            "upstream's MWRS controller was deployed: {names:?}"
        );
        assert!(shared.ready.load(Ordering::Acquire), "still ready");
        assert_eq!(shared.metrics.crd_usable.get(), 1);
        let m = hub.get_mwrs("app").await.unwrap();
        assert_eq!(current(&m), Some(v1.clone()), "{}", common::describe(&m));
        assert_eq!(update(&m), Some(v2.clone()));
        assert_eq!(aborted(&m), Some(since.clone()), "the hold is intact");
        assert_eq!(work_versions(&hub).await, versions, "nothing rolled out");
    };
    let outcome = std::panic::AssertUnwindSafe(checks).catch_unwind().await;
    op.kill();
    restore(&crds, &before).await;
    if let Err(p) = outcome {
        eprintln!("operator output:\n{}", op.output());
        std::panic::resume_unwind(p);
    }
}
