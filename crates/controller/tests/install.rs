//! The README's install, upgrade and uninstall lines, run as written (issue #32 item 1),
//! on a hub where OCM's cluster-manager operator has put upstream's MWRS CRD in place (the
//! CRD of `open-cluster-management.io/ocm` at the version `bench/peer` builds, written the
//! way the operator writes it: an update with its own metadata and its version stamp) and
//! a user's MWRS exists:
//! - Helm: `helm install` (the published chart swapped for its directory, the release's
//!   namespace for the test's), `helm upgrade` to changed values, `helm uninstall`;
//! - the plain manifests of `deploy/`: `kubectl apply`, the same line on changed files,
//!   `kubectl delete`.
//!
//! Each install and upgrade leaves our CRD in place; each uninstall keeps it and the user's
//! MWRS (same UID, same template). Both ways replace a cluster-wide CRD, so they run one
//! after the other in this one test, which puts our CRD back at the end.
//!
//! Needs `MWRS_HELM` (`scripts/helm.sh`), kubectl on PATH, Go (upstream's CRD is read from
//! its module) and `MWRS_TEST_KUBECONFIG`; skipped without the hub or Helm.

// run-tests: alone (changes cluster-wide objects of the shared test hub)

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Command;

use common::operator::{crds, is_ours, operators_crd_in_place};
use common::{create_app_for_all, helm, readme_line, repo_root, run_in_repo};
use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use mwrs_controller::crd::CRD_NAME;
use mwrs_testsupport::TestHub;

/// Where the README and `deploy/` install the controller.
const HUB_NAMESPACE: &str = "open-cluster-management-hub";

/// Asserts our CRD is in place and the user's MWRS is as it was.
async fn assert_ours_and_kept(hub: &TestHub, when: &str, uid: &str, template: &serde_json::Value) {
    assert!(
        is_ours(&crds(hub).get(CRD_NAME).await.unwrap()),
        "our CRD {when}"
    );
    let m = hub
        .get_mwrs("app")
        .await
        .unwrap_or_else(|| panic!("the MWRS {when}"));
    assert_eq!(m.uid().as_deref(), Some(uid), "the same MWRS {when}");
    assert_eq!(
        &m.spec.manifest_work_template.to_value(),
        template,
        "its template {when}"
    );
}

/// Runs README words `line` (up to a `#` comment) with `program` in `dir`.
fn run_line(program: &str, line: &[String], dir: &Path, kubeconfig: &str) -> String {
    let args: Vec<&str> = line
        .iter()
        .skip(1)
        .map(String::as_str)
        .take_while(|w| *w != "#")
        .collect();
    let out = Command::new(program)
        .args(&args)
        .args(["--kubeconfig", kubeconfig])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readmes_install_lines_take_over_the_operators_crd_and_keep_it() {
    let Ok(helm_bin) = std::env::var("MWRS_HELM") else {
        eprintln!("MWRS_HELM not set (scripts/helm.sh): skipped");
        return;
    };
    let Some(hub) = TestHub::from_env("install", 1).await else {
        return;
    };
    let kubeconfig = hub.kubeconfig.display().to_string();
    operators_crd_in_place(&hub).await;
    create_app_for_all(&hub).await;
    let m = hub.get_mwrs("app").await.unwrap();
    let (uid, template) = (m.uid().unwrap(), m.spec.manifest_work_template.to_value());

    // Helm, as the README writes it.
    let ns = hub.namespace.as_str();
    let release = format!("r-{ns}");
    // The chart from the registry is this directory's; its `--version` goes with it.
    let words = readme_line("helm install ");
    let version_at = words.iter().position(|w| w == "--version");
    let install: Vec<String> = words
        .into_iter()
        .enumerate()
        .filter(|(i, _)| version_at.is_none_or(|v| *i != v && *i != v + 1))
        .map(|(i, w)| match (i, w.as_str()) {
            (2, _) => release.clone(),
            (3, w) if w.starts_with("oci://") || w.ends_with(".tgz") => {
                "deploy/helm/mwrs-controller".to_string()
            }
            (_, HUB_NAMESPACE) => ns.to_string(),
            _ => w,
        })
        .collect();
    run_line(&helm_bin, &install, &repo_root(), &kubeconfig);
    assert_ours_and_kept(&hub, "after helm install", &uid, &template).await;
    let upgrade = [
        "upgrade",
        &release,
        "deploy/helm/mwrs-controller",
        "-n",
        ns,
        "--kubeconfig",
        &kubeconfig,
        "--reset-then-reuse-values",
        "--set",
        "controller.workers=8",
    ];
    helm(&helm_bin, &upgrade);
    assert_ours_and_kept(&hub, "after helm upgrade", &uid, &template).await;
    let uninstall: Vec<String> = readme_line("helm uninstall ")
        .into_iter()
        .map(|w| match w.as_str() {
            "mwrs-controller" => release.clone(),
            HUB_NAMESPACE => ns.to_string(),
            _ => w,
        })
        .collect();
    run_line(&helm_bin, &uninstall, &repo_root(), &kubeconfig);
    assert_ours_and_kept(&hub, "after helm uninstall", &uid, &template).await;

    // The plain manifests of deploy/, as the README writes them.
    operators_crd_in_place(&hub).await;
    let namespaces: Api<Namespace> = Api::all(hub.client.clone());
    if namespaces.get_opt(HUB_NAMESPACE).await.unwrap().is_none() {
        let body = serde_json::from_value(serde_json::json!({"metadata": {"name": HUB_NAMESPACE}}));
        namespaces
            .create(&PostParams::default(), &body.unwrap())
            .await
            .unwrap();
    }
    let apply = readme_line("kubectl apply -f deploy/crds/");
    run_line("kubectl", &apply, &repo_root(), &kubeconfig);
    assert_ours_and_kept(&hub, "after kubectl apply", &uid, &template).await;
    // An upgrade: the same line on the next release's files (here, another --workers).
    let next = tempfile::tempdir().unwrap();
    run_in_repo(Command::new("cp").args(["-r", "deploy"]).arg(next.path()));
    let deployment = next.path().join("deploy/controller/deployment.yaml");
    let changed = std::fs::read_to_string(&deployment).unwrap().replacen(
        "- --workers=16",
        "- --workers=8",
        1,
    );
    std::fs::write(&deployment, changed).unwrap();
    let out = run_line("kubectl", &apply, next.path(), &kubeconfig);
    assert!(
        out.contains("deployment.apps/mwrs-controller configured"),
        "{out}"
    );
    assert_ours_and_kept(&hub, "after the upgrade", &uid, &template).await;
    let delete = readme_line("kubectl delete -f deploy/controller/");
    run_line("kubectl", &delete, &repo_root(), &kubeconfig);
    assert_ours_and_kept(&hub, "after kubectl delete", &uid, &template).await;
}
