//! The README's demo passes: on the test hub with the simulated fleet
//! (`MWRS_TEST_KUBECONFIG`), also behind the reference rollout plugin, and on upstream
//! OCM's placement controller and work agents
//! (the e2e environment, `. "$(e2e/env.sh up)"`). Each is skipped without its hub unless
//! CI=true, where that is a failure.

#![allow(clippy::expect_used)]

use std::process::Command;

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The variables, or None (skipped) when one is unset outside CI.
fn vars<const N: usize>(names: [&str; N]) -> Option<[String; N]> {
    let found = names.map(var);
    if found.iter().all(Option::is_some) {
        return Some(found.map(Option::unwrap_or_default));
    }
    let why = format!("{names:?} not all set");
    assert!(var("CI").as_deref() != Some("true"), "CI=true and {why}");
    eprintln!("SKIPPED: {why}");
    None
}

/// Runs mwrs-demo with `args`; asserts it passed, printing its whole output if not.
/// Returns its output.
fn demo_passes(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_mwrs-demo"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("mwrs-demo runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("DEMO PASSED"),
        "mwrs-demo {args:?}: {}\n{stdout}\n{stderr}",
        out.status
    );
    stdout.into_owned()
}

#[test]
fn the_demo_passes_with_the_simulated_fleet() {
    let Some([hub]) = vars(["MWRS_TEST_KUBECONFIG"]) else {
        return;
    };
    demo_passes(&["--kubeconfig", &hub]);
}

#[test]
fn the_demo_passes_behind_the_rollout_plugin() {
    let Some([hub]) = vars(["MWRS_TEST_KUBECONFIG"]) else {
        return;
    };
    let out = demo_passes(&["--kubeconfig", &hub, "--plugin"]);
    // v2 is reported done everywhere: only the plugin's FAILED can abort it.
    assert!(out.contains("MaxFailuresExceeded"), "{out}");
}

#[test]
fn the_demo_passes_on_upstream_ocm_components() {
    let Some([hub, spokes]) = vars(["MWRS_E2E_HUB_KUBECONFIG", "MWRS_E2E_CLUSTERS"]) else {
        return;
    };
    demo_passes(&["--kubeconfig", &hub, "--spokes", &spokes]);
}
