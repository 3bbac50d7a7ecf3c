//! The book's walkthrough (docs/src/getting-started.md) cannot rot: `examples/walkthrough.sh` (the script that captured
//! it, with the example MWRS files) runs on the test hub, every step with the exit code it
//! expects, and every command the walkthrough shows is one the script ran.
//!
//! Needs `MWRS_TEST_KUBECONFIG` (skipped without it unless CI=true), kubectl, and the `mwrs`
//! and `mwrs-controller` binaries beside this package's `mwrs-fleet` (a workspace test run
//! builds them; alone: `cargo build -p mwrs-cli -p mwrs-controller` first).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `$ ` lines of the book's walkthrough (docs/src/getting-started.md).
fn readme_commands() -> Vec<String> {
    let readme = std::fs::read_to_string(repo().join("docs/src/getting-started.md")).unwrap();
    let start = readme
        .find("## Walkthrough")
        .expect("the getting-started page has a walkthrough");
    let section = &readme[start..];
    let end = section[4..].find("\n## ").map_or(section.len(), |e| e + 4);
    section[..end]
        .lines()
        .filter_map(|l| l.strip_prefix("$ "))
        .map(str::to_string)
        .collect()
}

#[test]
fn the_readme_walkthrough_runs_as_written() {
    let Some(hub) = std::env::var_os("MWRS_TEST_KUBECONFIG").filter(|v| !v.is_empty()) else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true and MWRS_TEST_KUBECONFIG is not set"
        );
        eprintln!("SKIPPED: MWRS_TEST_KUBECONFIG is not set");
        return;
    };
    let bin = Path::new(env!("CARGO_BIN_EXE_mwrs-fleet"))
        .parent()
        .unwrap();
    for b in ["mwrs", "mwrs-controller"] {
        assert!(
            bin.join(b).exists(),
            "{b} is not built in {}: cargo build -p mwrs-cli -p mwrs-controller",
            bin.display()
        );
    }
    // Names of its own: tests run in parallel on the same hub.
    let unique = format!(
        "walk{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
            % 0xffffff
    );
    let out = Command::new("bash")
        .arg(repo().join("examples/walkthrough.sh"))
        .env("KUBECONFIG", &hub)
        .env("NAMESPACE", &unique)
        .env("CLUSTER_PREFIX", &unique)
        .env("FLEET_NAME", &unique)
        .env("MWRS_BIN_DIR", bin)
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "examples/walkthrough.sh: {}\n{stdout}\n{stderr}",
        out.status
    );
    let ran: Vec<String> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("$ "))
        .map(|l| l.replace(&unique, "@"))
        .collect();
    let shown = readme_commands();
    assert!(shown.len() >= 10, "the walkthrough shows commands");
    for cmd in shown {
        let cmd = cmd.replace("-n demo", "-n @").replace("cluster-", "@-");
        assert!(
            ran.contains(&cmd),
            "the walkthrough shows `{cmd}`, which the script did not run:\n{ran:#?}"
        );
    }
}
