//! Shared pieces of the CLI's hub tests: running the `mwrs` binary, parsing its tables,
//! an in-process controller and agents for the test's clusters.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use kube::ResourceExt;
use mwrs_api::labels;
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_controller::{Config, Shared};
use mwrs_testsupport::{TaskGuard, TestHub, conditions};
use serde_json::Value;

/// Default deadline of a wait in these tests.
pub const WAIT: Duration = Duration::from_secs(60);

/// What one run of the binary gave.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub out: String,
    pub err: String,
}

impl Run {
    /// The JSON printed on stdout.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.out)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:?}"))
    }
}

/// Runs `mwrs` with the hub's kubeconfig and namespace (async: the controller runs in
/// this process's runtime).
pub async fn mwrs(hub: &TestHub, args: &[&str]) -> Run {
    run_with(&hub.kubeconfig, Some(&hub.namespace), args).await
}

/// Creates MWRS `name` on v1 over Placement `p` with rollout `strategy`.
pub async fn create_v1(hub: &TestHub, name: &str, strategy: Value) {
    hub.create_mwrs(&mwrs_testsupport::mwrs(
        name,
        mwrs_testsupport::configmap_template("v1"),
        &[("p", strategy)],
    ))
    .await;
}

/// An agent for the test's clusters: every ManifestWork done `after` it is written.
pub fn agent_succeeding(hub: &TestHub, after: Duration) -> mwrs_fleet::AgentHandle {
    mwrs_fleet::Agent::start(
        hub.client.clone(),
        mwrs_fleet::AgentConfig::new(hub.clusters.clone())
            .behaviour(move |_| mwrs_fleet::Behaviour::Succeed { after }),
    )
}

/// `rollout status NAME -w --timeout 60s`: follows the rollout to its end.
pub async fn watch(hub: &TestHub, name: &str) -> Run {
    mwrs(hub, &["rollout", "status", name, "-w", "--timeout", "60s"]).await
}

pub async fn run_with(kubeconfig: &Path, ns: Option<&str>, args: &[&str]) -> Run {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mwrs"));
    cmd.arg("--kubeconfig").arg(kubeconfig);
    if let Some(ns) = ns {
        cmd.args(["-n", ns]);
    }
    let out = cmd
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .await
        .expect("run the mwrs binary");
    Run {
        code: out.status.code().unwrap_or(-1),
        out: String::from_utf8_lossy(&out.stdout).into_owned(),
        err: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Rows of a kubectl-style table, cut at the header's column starts.
pub fn rows(table: &str) -> Vec<BTreeMap<String, String>> {
    let mut lines = table.lines().filter(|l| !l.trim().is_empty());
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let mut starts: Vec<(usize, String)> = Vec::new();
    let mut prev_space = true;
    for (i, ch) in header.char_indices() {
        if ch != ' ' && prev_space {
            let name: String = header[i..].chars().take_while(|c| *c != ' ').collect();
            starts.push((i, name));
        }
        prev_space = ch == ' ';
    }
    lines
        .map(|l| {
            starts
                .iter()
                .enumerate()
                .map(|(k, (s, name))| {
                    let end = starts.get(k + 1).map_or(l.len(), |(e, _)| *e).min(l.len());
                    let cell = l.get((*s).min(l.len())..end).unwrap_or("").trim();
                    (name.clone(), cell.to_string())
                })
                .collect()
        })
        .collect()
}

/// The section of `text` that starts with a line beginning with `header`.
pub fn section<'a>(text: &'a str, header: &str) -> &'a str {
    let start = text.find(header).unwrap_or(text.len());
    let rest = &text[start..];
    let end = rest.find("\n\n").map_or(rest.len(), |e| e + 1);
    &rest[..end]
}

/// Runs the controller in this process for the test's namespace.
pub fn start_controller(hub: &TestHub) -> TaskGuard {
    start_controller_with(hub, Config::default(), Default::default())
}

/// [`start_controller`] with `config` (its namespace is the test's).
pub fn start_controller_with(
    hub: &TestHub,
    config: Config,
    plugins: std::sync::Arc<mwrs_controller::plugins::Plugins>,
) -> TaskGuard {
    let config = Config {
        namespace: Some(hub.namespace.clone()),
        ..config
    };
    let client = hub.client.clone();
    TaskGuard::spawn(async move {
        mwrs_controller::run(
            client,
            config,
            plugins,
            Shared::default(),
            std::future::pending(),
        )
        .await
    })
}

pub fn status(m: &ManifestWorkReplicaSet) -> mwrs_api::mwrs::ManifestWorkReplicaSetStatus {
    m.status.clone().unwrap_or_default()
}

/// One line describing the MWRS status, for timeout messages.
pub fn describe(m: &ManifestWorkReplicaSet) -> String {
    let s = status(m);
    format!(
        "{}: current={:?} update={:?} aborted={:?} handled={:?} conditions={:?}",
        m.name_any(),
        s.current_revision,
        s.update_revision,
        s.aborted_time.map(|t| t.0.to_string()),
        s.handled_controls,
        conditions(m)
    )
}

/// Revision hash each of the MWRS's ManifestWorks carries, by cluster.
pub async fn carried(hub: &TestHub, name: &str) -> BTreeMap<String, String> {
    hub.works_of(name)
        .await
        .into_iter()
        .map(|w| {
            (
                w.namespace().unwrap_or_default(),
                w.labels()
                    .get(labels::CONTROLLER_HASH)
                    .cloned()
                    .unwrap_or_default(),
            )
        })
        .collect()
}

/// `data.version` of a ManifestWork spec.
pub fn version_of(spec: &Value) -> Option<&str> {
    spec.pointer("/workload/manifests/0/data/version")
        .and_then(Value::as_str)
}

/// `mwrs dashboard` for the test's namespace: the process (killed on drop) and the URL
/// with the one-time code, the first line it prints (within 30 s).
pub async fn start_dashboard(hub: &TestHub, flags: &[&str]) -> (tokio::process::Child, String) {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mwrs"))
        .arg("--kubeconfig")
        .arg(&hub.kubeconfig)
        .args(["-n", &hub.namespace, "dashboard"])
        .args(flags)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run mwrs dashboard");
    let stdout = child.stdout.take().expect("its stdout");
    let mut first = String::new();
    tokio::time::timeout(
        Duration::from_secs(30),
        tokio::io::BufReader::new(stdout).read_line(&mut first),
    )
    .await
    .expect("the URL within 30 s")
    .expect("read the URL");
    (child, first.trim().to_string())
}
