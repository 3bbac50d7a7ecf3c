//! The book's "Running the controller against a hub" (docs/src/operations/install.md) works when pasted: its shell block
//! runs as written on the test hub (CRDs, the namespace, the shipped RBAC, a kubeconfig with
//! the ServiceAccount's token, leader election), with two changes that keep the shared test
//! hub safe: the controller serves only the test's namespace and binds a free port; `cargo
//! run` is the binary already built. An MWRS in that namespace then completes.
//!
//! Needs `MWRS_TEST_KUBECONFIG` and a kubectl on PATH (`scripts/hub.sh kubectl` builds the
//! hub's own; `scripts/test.sh` puts it there).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{start_agent_succeeding, wait_complete};
use mwrs_testsupport::{ChildProcess, TestHub, configmap_template, mwrs};
use serde_json::json;

/// The first `sh` block of "Running the controller against a hub" in the book's install page.
fn readme_block() -> String {
    let readme = include_str!("../../../docs/src/operations/install.md");
    let section = readme
        .split("\n## Running the controller against a hub\n")
        .nth(1)
        .expect("the README has the section");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("\n```").next())
        .expect("the section starts with a sh block");
    block.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_runs_the_controller_as_written() {
    let Some(hub) = TestHub::from_env("readme-run", 2).await else {
        return;
    };
    let block = readme_block();
    let binary = env!("CARGO_BIN_EXE_mwrs-controller");
    let pasted = block
        .replace(
            "cargo run --release -p mwrs-controller --",
            &format!("exec {binary}"),
        )
        .replace(
            "--metrics-addr 127.0.0.1:8080",
            &format!("--metrics-addr 127.0.0.1:0 --namespace {}", hub.namespace),
        );
    assert!(
        pasted.contains("exec ") && pasted.contains("--namespace "),
        "the block still starts the controller with cargo run and --metrics-addr:\n{block}"
    );
    let repo = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let kubeconfig = hub.kubeconfig.to_string_lossy().to_string();
    let mut shell = ChildProcess::spawn(
        std::path::Path::new("bash"),
        &["-euo", "pipefail", "-c", &format!("cd {repo}\n{pasted}")],
        &[("KUBECONFIG", kubeconfig.as_str()), ("RUST_LOG", "info")],
    )
    .expect("bash runs");

    let _agent = start_agent_succeeding(&hub, Duration::from_millis(200));
    hub.publish_all("p").await;
    hub.create_mwrs(&mwrs(
        "app",
        configmap_template("v1"),
        &[("p", json!({"type": "All"}))],
    ))
    .await;
    let done = tokio::select! {
        m = wait_complete(&hub, "app", None) => Some(m),
        _ = exited(&mut shell) => None,
    };
    let log = shell.output();
    assert!(done.is_some(), "the pasted block stopped:\n{log}");
    assert!(log.contains("acquired leadership"), "{log}");
    assert!(
        !log.contains("forbidden"),
        "the shipped RBAC covers every call:\n{log}"
    );
}

/// Resolves when the process has exited (checked every 100 ms).
async fn exited(p: &mut ChildProcess) {
    while p.try_wait().is_none() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
