//! The end-to-end environment as the tests see it (started by `e2e/env.sh up`): the hub
//! with upstream's placement controller, three spokes each with upstream's work agent.
//! [`Env::from_env`] registers the clusters on the hub (idempotently) and gives each test
//! its own namespace bound to the cluster set, a Placement with decision groups, and our
//! controller; assertions read the spokes' objects.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use kube::Client;
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_api::work::ManifestWork;
use mwrs_fleet::ocm;
use mwrs_testsupport::{TaskGuard, TestHub, client_from, wait_for};
use rand::Rng;
use serde_json::{Value, json};

/// The cluster set every test's namespace is bound to.
pub use mwrs_fleet::ocm::CLUSTER_SET;
/// Default deadline of a wait: upstream's agent reports within its sync interval.
pub const WAIT: Duration = Duration::from_secs(120);

/// One spoke: its cluster name, its API, its agent.
pub struct Spoke {
    pub name: String,
    pub client: Client,
    pub agent_pid_file: PathBuf,
}

/// The environment of one test.
pub struct Env {
    /// The hub, with this test's namespace and the three clusters.
    pub hub: TestHub,
    pub spokes: Vec<Spoke>,
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// `a=x,b=y` as pairs.
fn pairs(s: &str) -> BTreeMap<String, String> {
    s.split(',')
        .filter_map(|p| p.split_once('='))
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

fn suffix() -> String {
    const CHARS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..6)
        .map(|_| char::from(CHARS[rng.random_range(0..CHARS.len())]))
        .collect()
}

impl Env {
    /// The environment for test `test`, or None (skipped) when `e2e/env.sh` has not been
    /// sourced; with CI=true that is a failure instead.
    pub async fn from_env(test: &str) -> Option<Self> {
        mwrs_testsupport::init_tracing();
        let (Some(hub_kc), Some(clusters), Some(pids)) = (
            var("MWRS_E2E_HUB_KUBECONFIG"),
            var("MWRS_E2E_CLUSTERS"),
            var("MWRS_E2E_AGENT_PIDS"),
        ) else {
            let why = "the e2e environment is not up: `. \"$(e2e/env.sh up)\"`";
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI=true and {why}"
            );
            eprintln!("SKIPPED {test}: {why}");
            return None;
        };
        let hub_kc = PathBuf::from(hub_kc);
        let client = client_from(&hub_kc).await.expect("hub client");
        let pids = pairs(&pids);
        let mut spokes = Vec::new();
        for (name, kc) in pairs(&clusters) {
            let spoke = client_from(&PathBuf::from(&kc))
                .await
                .expect("spoke client");
            spokes.push(Spoke {
                agent_pid_file: PathBuf::from(pids.get(&name).cloned().unwrap_or_default()),
                name,
                client: spoke,
            });
        }
        let namespace = format!("e2e-{}-{}", test.to_ascii_lowercase(), suffix());
        let hub = TestHub {
            client,
            kubeconfig: hub_kc,
            namespace,
            clusters: spokes.iter().map(|s| s.name.clone()).collect(),
            // Every test shares the three clusters.
            owns_clusters: false,
        };
        let env = Self { hub, spokes };
        env.register().await;
        Some(env)
    }

    /// ManagedClusters (cluster1 is the canary), their namespaces, the set, and this
    /// test's namespace with its binding. Idempotent.
    async fn register(&self) {
        let c = &self.hub.client;
        ocm::register_clusters(c, CLUSTER_SET, &self.hub.clusters)
            .await
            .expect("register the clusters");
        ocm::bind_namespace(c, &self.hub.namespace, CLUSTER_SET)
            .await
            .expect("bind the test namespace");
    }

    /// A Placement over every cluster of the set in two decision groups: `canary`
    /// (cluster1) first, then the others. Returns once its decisions list all three.
    pub async fn canary_placement(&self, name: &str) {
        let (c, ns) = (&self.hub.client, &self.hub.namespace);
        ocm::canary_placement(c, ns, name, CLUSTER_SET)
            .await
            .expect("Placement");
        wait_for("the placement controller's decisions", WAIT, || async {
            match ocm::decided_clusters(c, ns, name).await {
                Ok(3) => Ok(()),
                Ok(n) => Err(format!("{n} clusters decided")),
                Err(e) => Err(e.to_string()),
            }
        })
        .await;
    }

    /// Our controller, in this process, for this test's namespace.
    pub fn start_controller(&self) -> TaskGuard {
        let config = mwrs_controller::Config {
            namespace: Some(self.hub.namespace.clone()),
            ..mwrs_controller::Config::default()
        };
        let client = self.hub.client.clone();
        TaskGuard::spawn(async move {
            let shared = mwrs_controller::Shared::default();
            mwrs_controller::run(
                client,
                config,
                Default::default(),
                shared,
                std::future::pending(),
            )
            .await
        })
    }

    /// Waits until MWRS `name` has completed a rollout (its current revision is its update
    /// revision); returns that revision.
    pub async fn wait_complete(&self, name: &str) -> String {
        wait_for(&format!("{name} complete"), WAIT, || async {
            let m = self.hub.get_mwrs(name).await.ok_or("no MWRS")?;
            let s = m.status.unwrap_or_default();
            match (s.current_revision, s.update_revision) {
                (Some(c), Some(u)) if c == u => Ok(c),
                other => Err(format!("current/update {other:?}")),
            }
        })
        .await
    }

    /// Creates MWRS `app` on Placement `p` with `template` and `strategy` and waits until
    /// that first rollout has completed; returns its revision.
    pub async fn create_app(&self, template: Value, strategy: Value) -> String {
        self.create_app_named("app", template, strategy).await
    }

    /// [`Env::create_app`] for an MWRS called `name`.
    pub async fn create_app_named(&self, name: &str, template: Value, strategy: Value) -> String {
        self.hub
            .create_mwrs(&mwrs_testsupport::mwrs(name, template, &[("p", strategy)]))
            .await;
        self.wait_complete(name).await
    }

    /// Waits until MWRS `name` holds an abort; returns it.
    pub async fn wait_aborted(&self, name: &str) -> ManifestWorkReplicaSet {
        wait_for(&format!("{name} aborted"), WAIT, || async {
            let m = self.hub.get_mwrs(name).await.ok_or("no MWRS")?;
            if m.status.as_ref().is_some_and(|s| s.aborted_time.is_some()) {
                Ok(m)
            } else {
                Err(format!("{:?}", m.status))
            }
        })
        .await
    }

    /// The spoke named `cluster`.
    pub fn spoke(&self, cluster: &str) -> &Spoke {
        self.spokes
            .iter()
            .find(|s| s.name == cluster)
            .unwrap_or_else(|| panic!("no spoke {cluster}"))
    }

    /// `data.version` of ConfigMap `name` in namespace `default` of each spoke.
    pub async fn spoke_versions(&self, name: &str) -> BTreeMap<String, Option<String>> {
        let mut out = BTreeMap::new();
        for s in &self.spokes {
            let v = ocm::configmap_version(&s.client, "default", name).await;
            out.insert(s.name.clone(), v);
        }
        out
    }

    /// Waits until every spoke's ConfigMap `name` has `version`.
    pub async fn wait_spokes_on(&self, name: &str, version: &str) {
        wait_for(&format!("every spoke on {version}"), WAIT, || async {
            let v = self.spoke_versions(name).await;
            if v.values().all(|x| x.as_deref() == Some(version)) {
                Ok(())
            } else {
                Err(format!("{v:?}"))
            }
        })
        .await;
    }
}

/// `data.version` of a ManifestWork's first manifest (the templates below).
pub fn manifest_version(mw: &ManifestWork) -> Option<String> {
    mw.spec
        .manifests()
        .first()
        .and_then(|m| m.pointer("/data/version"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// A template of one ConfigMap `name` in namespace `default` with `data.version`.
pub fn configmap_template(name: &str, version: &str) -> Value {
    json!({"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": {"version": version}}]}})
}

/// [`configmap_template`] with a CEL condition rule that reports the ConfigMap Progressing
/// while its `data.version` is `stuck`: the agent then keeps the ManifestWork's
/// `Progressing` True on every cluster that gets that version.
pub fn configmap_template_stuck_on(name: &str, version: &str, stuck: &str) -> Value {
    let mut t = configmap_template(name, version);
    t["manifestConfigs"] = json!([ocm::configmap_progressing_while("default", name, stuck)]);
    t
}

/// The `mwrs` binary of this workspace's build (cargo builds every binary before it runs
/// the tests of `--workspace --all-targets`).
pub fn mwrs_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    // target/<profile>/deps/<test> → target/<profile>/mwrs
    let bin = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|dir| dir.join("mwrs"))
        .expect("target directory");
    assert!(
        bin.exists(),
        "{} is missing: `cargo build -p mwrs-cli`",
        bin.display()
    );
    bin
}

impl Env {
    /// Runs `mwrs ARGS -n <test namespace>` against the hub; (exit code, stdout, stderr).
    pub fn mwrs(&self, args: &[&str]) -> (i32, String, String) {
        let out = std::process::Command::new(mwrs_binary())
            .args(args)
            .args(["-n", &self.hub.namespace, "--color", "never"])
            .env("KUBECONFIG", &self.hub.kubeconfig)
            .output()
            .expect("mwrs runs");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    }

    /// Deletes MWRS `name` and waits until its objects are gone from every spoke.
    pub async fn delete_and_wait_gone(&self, name: &str, configmap: &str) {
        self.hub
            .mwrs_api()
            .delete(name, &Default::default())
            .await
            .expect("delete the MWRS");
        wait_for("the spokes' objects gone", WAIT, || async {
            let v = self.spoke_versions(configmap).await;
            if v.values().all(Option::is_none) {
                Ok(())
            } else {
                Err(format!("{v:?}"))
            }
        })
        .await;
    }
}

/// A spoke's agent stopped with SIGSTOP; continued (SIGCONT) when dropped, so a failing
/// test does not leave it frozen for the others.
pub struct StoppedAgent {
    pid: String,
}

impl Spoke {
    /// Stops this spoke's work agent until the guard is dropped.
    pub fn stop_agent(&self) -> StoppedAgent {
        let pid = std::fs::read_to_string(&self.agent_pid_file)
            .unwrap_or_else(|e| panic!("{}: {e}", self.agent_pid_file.display()))
            .trim()
            .to_string();
        signal(&pid, "-STOP");
        StoppedAgent { pid }
    }
}

impl Drop for StoppedAgent {
    fn drop(&mut self) {
        signal(&self.pid, "-CONT");
    }
}

fn signal(pid: &str, sig: &str) {
    let ok = std::process::Command::new("kill")
        .args([sig, pid])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill {sig} {pid} failed");
}
