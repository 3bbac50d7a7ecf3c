//! `mwrs-bench`: fan-out, abort, idle cost and memory of the controller at fleet scale,
//! each against a reference measured on the same hub in the same run.
//!
//! For every size N it brings up N simulated clusters (one in-process work agent answers
//! all of them, for every phase alike) and measures:
//!
//! - bare: a plain client creating, then updating, the same N ManifestWorks with the same
//!   write concurrency the controller is given: the hub's own limit;
//! - fan-out: a template change (strategy All) until every ManifestWork carries it;
//! - abort: from the first Degraded status on the new revision (the breach) until every
//!   ManifestWork is back on the stable revision, in rounds that each follow a bare update
//!   of their own, with the CPU of the hub, the controller and this harness split out;
//! - idle: controller CPU seconds and hub API requests per minute with nothing changing
//!   (requests counted by the hub, minus a window with no controller running); then its
//!   reconciles and writes per minute while 1% of the clusters never answer a new
//!   revision (after every ManifestWork carries it: must be 0);
//! - memory: the controller's peak RSS with N ManifestWorks;
//! - optionally the same fan-out and memory for a peer (upstream's controller), started
//!   as `PEER KUBECONFIG`.
//!
//! Every ManifestWork is observed through one watch; "carries version v" means its first
//! manifest's `data.version` is v, so the same check serves the controller and the peer.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use clap::Parser;
use futures::{StreamExt, TryStreamExt, stream};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, watcher as watch_fn};
use kube::{Client, Config as KubeConfig, ResourceExt};
use mwrs_api::labels;
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_api::work::ManifestWork;
use mwrs_fleet::cluster;
use mwrs_fleet::placement::{self, DecisionGroup};
use mwrs_fleet::{Agent, AgentConfig, Behaviour};
use serde_json::{Value, json};
use tokio::process::{Child, Command};

use crate::cpu::{Role, Sampler, Split};

mod cpu;
mod dashboard;
mod lease;
mod many;
mod plugin;
mod record;
mod soak;

#[derive(Parser, Debug)]
#[command(about = "Fleet-scale benchmarks of the MWRS controller against a bare client")]
struct Args {
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: PathBuf,
    /// The controller binary (built with --release).
    #[arg(long)]
    controller: PathBuf,
    /// A command started as `PEER KUBECONFIG` that runs upstream's controller.
    #[arg(long)]
    peer: Option<PathBuf>,
    /// Fleet sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1000,5000")]
    sizes: Vec<usize>,
    /// Write concurrency of the bare client and of the controller (`--concurrency`).
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Length of the idle measurement window, seconds.
    #[arg(long, default_value_t = 60)]
    idle_secs: u64,
    /// Deadline of each wait, seconds.
    #[arg(long, default_value_t = 900)]
    timeout_secs: u64,
    /// Where logs of the started processes go.
    #[arg(long, default_value = "/tmp/mwrs-bench")]
    workdir: PathBuf,
    /// Results as JSON (a record: the results with the run's command, date, commit and
    /// machine; see `record.rs`).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also file the record in this directory as `<UTC time>-<mode>.json` (bench/run.sh
    /// --record: `bench/results/`, which the book's results page is written from).
    #[arg(long, value_name = "DIR")]
    record: Option<PathBuf>,
    /// The CLI binary (built with --release): times `rollout status` and `rollout plan`
    /// over the N ManifestWorks.
    #[arg(long)]
    cli: Option<PathBuf>,
    /// Run the many-MWRS benchmark instead of the sizes: this many MWRS over
    /// `--many-clusters` clusters (see `many.rs`).
    #[arg(long, value_name = "COUNT")]
    many_mwrs: Option<usize>,
    #[arg(long, default_value_t = 3000, value_name = "N")]
    many_clusters: usize,
    /// Abort rounds per size, each just after a bare update of its own (alternated): the
    /// abort ratio is the median of the rounds' ratios.
    /// Instead of the sizes: the rollout-plugin run over this many clusters
    /// (bench/src/plugin.rs), with `--feedback-plugin`.
    #[arg(long, value_name = "N", conflicts_with = "many_mwrs")]
    plugin_clusters: Option<usize>,
    /// The `mwrs-feedback-plugin` binary, for `--plugin-clusters`.
    #[arg(long)]
    feedback_plugin: Option<PathBuf>,
    /// With `--plugin-clusters`: pad the template's ConfigMap to about this many KiB (the
    /// memory a plugin's calls cost grows with the template).
    #[arg(long, default_value_t = 0, value_name = "KIB")]
    plugin_template_kib: usize,
    /// Instead of the sizes: the dashboard run over this many clusters
    /// (bench/src/dashboard.rs), with `--cli`.
    #[arg(long, value_name = "N", conflicts_with_all = ["many_mwrs", "plugin_clusters"])]
    dashboard_clusters: Option<usize>,
    #[arg(long, default_value_t = 5, value_name = "K")]
    abort_runs: usize,
    /// The test hub's process (`hub.pid` of its state dir): its CPU is split out of the
    /// measured windows.
    #[arg(long)]
    hub_pid: Option<u32>,
    /// Run the sizes' controller with leader election and report the gaps between its
    /// Lease renewals during the fan-out (its idle request count then includes the
    /// Lease's renewals and the watchdog's reads).
    #[arg(long)]
    leader_elect: bool,
    /// Instead of the sizes: the fault soak for this long (`10m`, `2h`; bench/soak.sh and
    /// `soak/mod.rs`), with `--feedback-plugin` and `--cli`.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration,
        conflicts_with_all = ["many_mwrs", "plugin_clusters", "dashboard_clusters"])]
    soak: Option<Duration>,
    /// With `--soak`: stop after this many rounds if the duration has not passed first.
    #[arg(long, value_name = "N")]
    soak_rounds: Option<u32>,
    /// The soak's seed: the same seed makes the same choices of actions and faults.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The soak's fleet, in that many decision groups.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    soak_clusters: usize,
    #[arg(long, default_value_t = 5, value_name = "N")]
    soak_groups: usize,
    /// The test hub's audit log (bench/soak.sh starts the hub with one): the writes each
    /// replica made, for the soak's checks of who wrote and of idle writes.
    #[arg(long)]
    audit_log: Option<PathBuf>,
    /// How long a soak round may take to settle, seconds.
    #[arg(long, default_value_t = 300)]
    round_timeout_secs: u64,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    mwrs_fleet::rules::duration(s).map_err(|e| e.to_string())
}

/// A realistic template: a ConfigMap carrying the version, a Deployment and a Service.
fn template(version: &str) -> Value {
    json!({"workload": {"manifests": [
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "web-config", "namespace": "web"},
         "data": {"version": version, "settings.yaml": "replicas: 3\nlogLevel: info\nfeatures:\n  - a\n  - b\n"}},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "web", "namespace": "web", "labels": {"app": "web"}},
         "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
           "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{
             "name": "web", "image": format!("registry.example.com/web:{version}"),
             "ports": [{"containerPort": 8080}],
             "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}}}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": "web", "namespace": "web"},
         "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}},
    ]}})
}

fn version_of(mw: &ManifestWork) -> Option<String> {
    mw.spec
        .to_value()
        .pointer("/workload/manifests/0/data/version")
        .and_then(Value::as_str)
        .map(str::to_string)
}

// ---------------------------------------------------------------------------------------
// Observation: one watch over every ManifestWork.

#[derive(Default)]
struct Seen {
    works: HashMap<(String, String), Option<String>>,
    counts: HashMap<String, usize>,
    /// First time a ManifestWork on this version reported Degraded at its generation.
    first_degraded: HashMap<String, Instant>,
    /// First time a ManifestWork was seen moving to this version (since last cleared).
    first_moved_to: HashMap<String, Instant>,
}

impl Seen {
    fn set(&mut self, key: (String, String), version: Option<String>, now: Instant) {
        if let Some(Some(old)) = self.works.get(&key)
            && let Some(c) = self.counts.get_mut(old)
        {
            *c -= 1;
            if let Some(v) = version.as_ref().filter(|v| *v != old) {
                self.first_moved_to.entry(v.clone()).or_insert(now);
            }
        }
        if let Some(v) = &version {
            *self.counts.entry(v.clone()).or_default() += 1;
        }
        self.works.insert(key, version);
    }

    fn remove(&mut self, key: &(String, String)) {
        if let Some(Some(old)) = self.works.remove(key)
            && let Some(c) = self.counts.get_mut(&old)
        {
            *c -= 1;
        }
    }

    fn count(&self, version: &str) -> usize {
        self.counts.get(version).copied().unwrap_or(0)
    }
}

#[derive(Clone)]
struct Tracker {
    seen: Arc<Mutex<Seen>>,
    changed: tokio::sync::watch::Receiver<u64>,
}

fn degraded(mw: &ManifestWork) -> bool {
    let generation = mw.metadata.generation;
    mw.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.type_ == "Degraded" && c.status == "True" && c.observed_generation == generation
            })
        })
}

impl Tracker {
    async fn start(client: Client) -> anyhow::Result<Self> {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (tx, rx) = tokio::sync::watch::channel(0u64);
        let api: Api<ManifestWork> = Api::all(client);
        let s = seen.clone();
        let (synced_tx, synced) = tokio::sync::oneshot::channel::<()>();
        let mut ready_tx = Some(synced_tx);
        tokio::spawn(async move {
            let mut events = watch_fn(api, watcher::Config::default().any_semantic())
                .default_backoff()
                .boxed();
            let mut seq = 0u64;
            while let Some(ev) = events.next().await {
                let Ok(ev) = ev else { continue };
                let now = Instant::now();
                {
                    let Ok(mut st) = s.lock() else { return };
                    match ev {
                        Event::Apply(mw) | Event::InitApply(mw) => {
                            let key = (mw.namespace().unwrap_or_default(), mw.name_any());
                            let v = version_of(&mw);
                            if degraded(&mw)
                                && let Some(v) = &v
                            {
                                st.first_degraded.entry(v.clone()).or_insert(now);
                            }
                            st.set(key, v, now);
                        }
                        Event::Delete(mw) => {
                            st.remove(&(mw.namespace().unwrap_or_default(), mw.name_any()));
                        }
                        Event::InitDone => {
                            if let Some(t) = ready_tx.take() {
                                let _ = t.send(());
                            }
                        }
                        Event::Init => {}
                    }
                }
                seq += 1;
                let _ = tx.send(seq);
            }
        });
        tokio::time::timeout(Duration::from_secs(120), synced)
            .await
            .context("ManifestWork watch did not sync")??;
        Ok(Tracker { seen, changed: rx })
    }

    /// Waits until `pred` holds; returns when it was first seen to hold.
    async fn until(
        &self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&Seen) -> bool,
    ) -> anyhow::Result<Instant> {
        let deadline = Instant::now() + timeout;
        let mut rx = self.changed.clone();
        loop {
            {
                let st = self.seen.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
                if pred(&st) {
                    return Ok(Instant::now());
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let st = self.seen.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
                bail!(
                    "timed out waiting for {what}; works {} by version {:?}",
                    st.works.len(),
                    st.counts
                );
            }
            let _ = tokio::time::timeout(left.min(Duration::from_secs(1)), rx.changed()).await;
        }
    }
}

// ---------------------------------------------------------------------------------------
// Processes.

struct Proc {
    child: Child,
    name: String,
}

impl Proc {
    fn spawn(name: &str, program: &Path, args: &[String], log: &Path) -> anyhow::Result<Self> {
        Self::spawn_with(name, program, args, &[], log)
    }

    /// [`Proc::spawn`] with `env` set for the process.
    fn spawn_with(
        name: &str,
        program: &Path,
        args: &[String],
        env: &[(&str, &str)],
        log: &Path,
    ) -> anyhow::Result<Self> {
        let out = std::fs::File::create(log).with_context(|| format!("{}", log.display()))?;
        let err = out.try_clone()?;
        let child = Command::new(program)
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", program.display()))?;
        Ok(Proc {
            child,
            name: name.to_string(),
        })
    }

    fn pid(&self) -> anyhow::Result<u32> {
        self.child
            .id()
            .ok_or_else(|| anyhow::anyhow!("{} has exited", self.name))
    }

    /// The process and its children (a wrapper script `exec`s, but be safe).
    fn tree(&self) -> anyhow::Result<Vec<u32>> {
        Ok(cpu::tree(self.pid()?))
    }

    /// CPU seconds (user + system) of the process tree.
    fn cpu_secs(&self, tck: f64) -> anyhow::Result<f64> {
        Ok(cpu::tree_cpu_secs(self.pid()?, tck).unwrap_or(0.0))
    }

    /// Peak resident set size in bytes, summed over the tree.
    fn peak_rss(&self) -> anyhow::Result<u64> {
        self.status_bytes("VmHWM:")
    }

    /// Resident set size now, in bytes, summed over the tree.
    fn rss(&self) -> anyhow::Result<u64> {
        self.status_bytes("VmRSS:")
    }

    /// A kB field of `/proc/PID/status`, in bytes, summed over the tree.
    fn status_bytes(&self, field: &str) -> anyhow::Result<u64> {
        let mut total = 0;
        for p in self.tree()? {
            let Ok(s) = std::fs::read_to_string(format!("/proc/{p}/status")) else {
                continue;
            };
            total += s
                .lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
                * 1024;
        }
        Ok(total)
    }

    async fn stop(mut self) {
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
    }
}

fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

fn free_port() -> anyhow::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// The body of a 200 answer to a plain HTTP GET, else None.
async fn http_get(addr: &str, path: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
    let req = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n");
    s.write_all(req.as_bytes()).await.ok()?;
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf).await;
    let text = String::from_utf8_lossy(&buf);
    if !(text.starts_with("HTTP/1.1 200") || text.starts_with("HTTP/1.0 200")) {
        return None;
    }
    text.split_once("\r\n\r\n").map(|(_, b)| b.to_string())
}

/// Sum of the samples of `metric` (any labels) in Prometheus text.
fn metric_sum(text: &str, metric: &str) -> f64 {
    metric_sum_with(text, metric, &[])
}

/// Sum of the samples of `metric` whose labels include every one of `labels`
/// (`name="value"`).
fn metric_sum_with(text: &str, metric: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(metric)
                .is_some_and(|r| r.starts_with('{') || r.starts_with(' '))
        })
        .filter(|l| labels.iter().all(|want| l.contains(want)))
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()))
        // An empty f64 sum is -0.0; print 0.
        .sum::<f64>()
        + 0.0
}

/// (reconciles, writes) the controller has counted so far.
async fn controller_counts(addr: &str) -> (f64, f64) {
    match http_get(addr, "/metrics").await {
        Some(t) => (
            metric_sum(&t, "mwrs_controller_reconciles_total"),
            metric_sum(&t, "mwrs_controller_writes_total"),
        ),
        None => (f64::NAN, f64::NAN),
    }
}

/// Requests the hub has completed so far (every verb, every client).
async fn hub_requests(client: &Client) -> anyhow::Result<f64> {
    let req = http::Request::get("/metrics").body(Vec::new())?;
    let text = client.request_text(req).await?;
    Ok(metric_sum(&text, "apiserver_request_total"))
}

// ---------------------------------------------------------------------------------------
// The phases.

struct Bench {
    args: Args,
    client: Client,
    tracker: Tracker,
    clusters: Vec<String>,
    degrade_after_ms: Arc<AtomicU64>,
    failing: Arc<Mutex<BTreeSet<String>>>,
    /// Clusters whose agent never answers revision v4.
    silent: Arc<Mutex<BTreeSet<String>>>,
    tck: f64,
    cpu: Sampler,
}

/// A measured stretch of time.
#[derive(Clone, Copy, Debug)]
struct Window {
    from: Instant,
    to: Instant,
}

impl Window {
    fn secs(&self) -> f64 {
        self.to.saturating_duration_since(self.from).as_secs_f64()
    }
}

/// One abort round: the bare client's update of the N ManifestWorks, then the abort
/// (breach → last revert), each with the CPU the processes used meanwhile.
#[derive(Clone, Copy, Debug)]
struct AbortRound {
    bare_s: f64,
    abort_s: f64,
    bare_cpu: Split,
    abort_cpu: Split,
}

impl AbortRound {
    fn ratio(&self) -> f64 {
        self.abort_s / self.bare_s
    }
}

#[derive(Debug, Default, Clone)]
struct Row {
    n: usize,
    bare_create_s: f64,
    bare_update_s: f64,
    create_s: f64,
    fanout_s: f64,
    /// The first abort round (the one whose passes, writes and parts are counted).
    abort_s: f64,
    /// Every abort round, each just after a bare update of its own: an abort is compared
    /// with the hub as it is at that moment. The first is `abort_s`.
    abort_rounds: Vec<AbortRound>,
    /// CPU of each process during the first bare update and the fan-out.
    bare_update_cpu: Split,
    fanout_cpu: Split,
    /// The abort's first part: breach → first ManifestWork back on the stable version.
    abort_to_first_revert_s: f64,
    /// Its second part: first → last ManifestWork back.
    abort_reverts_s: f64,
    /// From the v3 change to the last revert: the controller's passes, its ManifestWork
    /// writes, and those of them the API server refused with a conflict (a write pinned
    /// to a resourceVersion the agent's status report had moved).
    abort_reconciles: f64,
    abort_work_writes: f64,
    abort_conflicts: f64,
    /// Its MWRS status writes (each one more hub write and watch event).
    abort_status_writes: f64,
    fanout_ratio: f64,
    abort_ratio: f64,
    idle_cpu_s_per_min: f64,
    idle_requests_per_min: f64,
    baseline_requests_per_min: f64,
    idle_reconciles_per_min: f64,
    idle_writes_per_min: f64,
    /// Idle with 1% of the clusters silent on the update revision.
    silent_clusters: usize,
    silent_idle_reconciles_per_min: f64,
    silent_idle_writes_per_min: f64,
    peak_rss_bytes: u64,
    /// The gaps between the controller's Lease renewals during the fan-out (it runs with
    /// leader election): median and largest, seconds (due every 5 s; expiry at 15 s).
    lease_gap_p50_s: Option<f64>,
    lease_gap_max_s: Option<f64>,
    /// RSS of the controller that ran every phase, at the end (idle).
    steady_rss_bytes: u64,
    /// A restarted controller over the same N ManifestWorks: time to ready, peak RSS
    /// once its first passes are done, and its writes (0 expected).
    restart_ready_s: f64,
    startup_peak_rss_bytes: u64,
    restart_writes: f64,
    /// The bench's client listing every ManifestWork of the MWRS (the reference), and the
    /// CLI's `rollout status` (its first screen) and `rollout plan`, each a process of its
    /// own, over the same ManifestWorks.
    list_works_s: f64,
    cli_status_s: f64,
    cli_plan_s: f64,
    peer_fanout_s: Option<f64>,
    peer_fanout_ratio: Option<f64>,
    peer_peak_rss_bytes: Option<u64>,
    peer_idle_cpu_s_per_min: Option<f64>,
}

impl Bench {
    fn timeout(&self) -> Duration {
        Duration::from_secs(self.args.timeout_secs)
    }

    fn mwrs_api(&self, ns: &str) -> Api<ManifestWorkReplicaSet> {
        Api::namespaced(self.client.clone(), ns)
    }

    async fn each_cluster<F, Fut>(&self, n: usize, f: F) -> anyhow::Result<()>
    where
        F: Fn(Api<ManifestWork>) -> Fut,
        Fut: std::future::Future<Output = Result<(), kube::Error>>,
    {
        stream::iter(self.clusters[..n].iter())
            .map(|c| f(Api::namespaced(self.client.clone(), c)))
            .buffer_unordered(self.args.concurrency.max(1))
            .try_collect::<()>()
            .await?;
        Ok(())
    }

    async fn wait_version(&self, v: &str, n: usize) -> anyhow::Result<Instant> {
        self.tracker
            .until(&format!("{n} works on {v}"), self.timeout(), |s| {
                s.count(v) >= n
            })
            .await
    }

    async fn wait_no_works(&self) -> anyhow::Result<()> {
        self.tracker
            .until("no ManifestWork left", self.timeout(), |s| {
                s.works.is_empty()
            })
            .await?;
        Ok(())
    }

    /// The hub's limit: the same writes from a plain client.
    async fn bare(&self, n: usize) -> anyhow::Result<(f64, Window)> {
        self.bare_versions(n, "v1", "v2").await
    }

    /// A plain client creates `n` ManifestWorks on version `created`, updates them to
    /// `updated` and deletes them: the time of the creates, and when the updates ran.
    async fn bare_versions(
        &self,
        n: usize,
        created: &str,
        updated: &str,
    ) -> anyhow::Result<(f64, Window)> {
        let pp = PostParams::default();
        let t0 = Instant::now();
        self.each_cluster(n, |api| {
            let pp = pp.clone();
            async move {
                let mw: ManifestWork = serde_json::from_value(json!({
                    "apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
                    "metadata": {"name": "bare-client", "labels": {"mwrs-bench": "bare"}},
                    "spec": template(created),
                }))
                .map_err(kube::Error::SerdeError)?;
                api.create(&pp, &mw).await.map(|_| ())
            }
        })
        .await?;
        let create = self.wait_version(created, n).await? - t0;
        let t0 = Instant::now();
        let body = json!({"spec": template(updated)});
        self.each_cluster(n, |api| {
            let body = body.clone();
            async move {
                api.patch("bare-client", &PatchParams::default(), &Patch::Merge(&body))
                    .await
                    .map(|_| ())
            }
        })
        .await?;
        let update = Window {
            from: t0,
            to: self.wait_version(updated, n).await?,
        };
        self.each_cluster(n, |api| async move {
            api.delete("bare-client", &DeleteParams::default())
                .await
                .map(|_| ())
        })
        .await?;
        self.tracker
            .until(
                "the bare client's ManifestWorks gone",
                self.timeout(),
                |s| s.count(updated) == 0,
            )
            .await?;
        Ok((create.as_secs_f64(), update))
    }

    /// One abort round after the first, alternated with the bare client: the bare update
    /// of `n`, then a new bad revision that reaches every cluster before the last one
    /// degrades, and its revert to v2.
    async fn abort_round(
        &self,
        n: usize,
        ns: &str,
        round: usize,
        fanout_s: f64,
    ) -> anyhow::Result<AbortRound> {
        let (_, bare) = self
            .bare_versions(n, &format!("b{round}-v1"), &format!("b{round}-v2"))
            .await?;
        // The agent degrades a failing cluster's revision ending in v3.
        let bad = format!("r{round}-v3");
        let (breach, reverted) = self.abort_to(ns, "app", (&bad, "v2"), n, fanout_s).await?;
        Ok(self.round(bare, (breach, reverted)))
    }

    /// The round of a bare update and an abort from `breach` to `reverted`.
    fn round(&self, bare: Window, (breach, reverted): (Instant, Instant)) -> AbortRound {
        let abort = Window {
            from: breach,
            to: reverted,
        };
        AbortRound {
            bare_s: bare.secs(),
            abort_s: abort.secs(),
            bare_cpu: self.cpu.between(bare.from, bare.to),
            abort_cpu: self.cpu.between(abort.from, abort.to),
        }
    }

    fn mwrs(
        &self,
        name: &str,
        version: &str,
        abort: bool,
    ) -> anyhow::Result<ManifestWorkReplicaSet> {
        let mut strategy = json!({"type": "All", "all": {"maxFailures": 0}});
        if abort {
            strategy["failureStrategy"] = json!("AbortAll");
        }
        Ok(serde_json::from_value(json!({
            "apiVersion": "work.open-cluster-management.io/v1alpha1",
            "kind": "ManifestWorkReplicaSet",
            "metadata": {"name": name},
            "spec": {
                "manifestWorkTemplate": template(version),
                "placementRefs": [{"name": "fleet", "rolloutStrategy": strategy}],
            },
        }))?)
    }

    async fn current_revision(&self, ns: &str, name: &str) -> anyhow::Result<Option<String>> {
        let m = self.mwrs_api(ns).get(name).await?;
        Ok(m.status.and_then(|s| s.current_revision))
    }

    async fn set_version(&self, ns: &str, name: &str, version: &str) -> anyhow::Result<()> {
        let body = json!({"spec": {"manifestWorkTemplate": template(version)}});
        self.mwrs_api(ns)
            .patch(name, &PatchParams::default(), &Patch::Merge(&body))
            .await?;
        Ok(())
    }

    async fn wait_mwrs(
        &self,
        ns: &str,
        name: &str,
        what: &str,
        pred: impl Fn(&ManifestWorkReplicaSet) -> bool,
    ) -> anyhow::Result<()> {
        let api = self.mwrs_api(ns);
        let deadline = Instant::now() + self.timeout();
        loop {
            // A status read per half second is noise next to N ManifestWorks.
            if let Some(m) = api.get_opt(name).await?
                && pred(&m)
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("timed out waiting for {ns}/{name} to be {what}");
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    async fn idle(&self, p: Option<&Proc>) -> anyhow::Result<(f64, f64)> {
        let cpu0 = match p {
            Some(p) => p.cpu_secs(self.tck)?,
            None => 0.0,
        };
        let r0 = hub_requests(&self.client).await?;
        let t0 = Instant::now();
        tokio::time::sleep(Duration::from_secs(self.args.idle_secs)).await;
        let r1 = hub_requests(&self.client).await?;
        let mins = t0.elapsed().as_secs_f64() / 60.0;
        let cpu1 = match p {
            Some(p) => p.cpu_secs(self.tck)?,
            None => 0.0,
        };
        // Our own /metrics read is one request.
        Ok(((cpu1 - cpu0) / mins, (r1 - r0 - 1.0).max(0.0) / mins))
    }

    /// Starts our controller on `ns` and waits until it is ready.
    async fn start_controller(&self, ns: &str, log: &str) -> anyhow::Result<(Proc, String)> {
        self.start_controller_with(ns, log, &[]).await
    }

    /// [`Bench::start_controller`] with `extra` arguments.
    async fn start_controller_with(
        &self,
        ns: &str,
        log: &str,
        extra: &[String],
    ) -> anyhow::Result<(Proc, String)> {
        let port = free_port()?;
        let addr = format!("127.0.0.1:{port}");
        let mut args = vec![
            "--kubeconfig".into(),
            self.args.kubeconfig.display().to_string(),
            "--namespace".into(),
            ns.to_string(),
            "--metrics-addr".into(),
            addr.clone(),
            "--concurrency".into(),
            self.args.concurrency.to_string(),
            "--log-format".into(),
            "json".into(),
        ];
        args.extend_from_slice(extra);
        let log = self.args.workdir.join(log);
        let p = Proc::spawn("controller", &self.args.controller, &args, &log)?;
        self.cpu.follow(Role::Controller, p.pid()?);
        let t = Instant::now();
        while http_get(&addr, "/readyz").await.is_none() {
            if t.elapsed() > Duration::from_secs(120) {
                bail!("controller not ready after 120s; see {}", log.display());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok((p, addr))
    }

    /// The next new template (v3, aNN-v3) degrades on the last of `n` clusters once the
    /// fan-out of that template (about `fanout_s`) is surely over, so that the abort is
    /// timed on its own.
    fn degrade_last_cluster(&self, n: usize, fanout_s: f64) {
        let lag = Duration::from_secs_f64(fanout_s * 1.5 + 3.0);
        self.degrade_after_ms
            .store(lag.as_millis() as u64, Ordering::Relaxed);
        if let Ok(mut f) = self.failing.lock() {
            f.clear();
            f.insert(self.clusters[n - 1].clone());
        }
        // The tracker outlives a phase: forget an earlier breach.
        if let Ok(mut st) = self.tracker.seen.lock() {
            st.first_degraded.clear();
        }
    }

    /// MWRS `name` gets the bad template `bad`, which reaches every one of its `n`
    /// ManifestWorks before the last cluster degrades (see [`Bench::degrade_last_cluster`]);
    /// waits until all `n` are back on `stable`. Returns the breach and the last revert.
    async fn abort_to(
        &self,
        ns: &str,
        name: &str,
        (bad, stable): (&str, &str),
        n: usize,
        fanout_s: f64,
    ) -> anyhow::Result<(Instant, Instant)> {
        self.degrade_last_cluster(n, fanout_s);
        self.set_version(ns, name, bad).await?;
        self.wait_version(bad, n).await?;
        if let Ok(mut st) = self.tracker.seen.lock() {
            st.first_moved_to.clear();
        }
        let breach = self.breach(bad).await?;
        let reverted = self.wait_version(stable, n).await?;
        Ok((breach, reverted))
    }

    /// When a ManifestWork on `version` first reported Degraded (waits for it).
    async fn breach(&self, version: &str) -> anyhow::Result<Instant> {
        let seen = self
            .tracker
            .until(
                &format!("a Degraded cluster on {version}"),
                self.timeout(),
                |s| s.first_degraded.contains_key(version),
            )
            .await?;
        Ok(self
            .tracker
            .seen
            .lock()
            .ok()
            .and_then(|s| s.first_degraded.get(version).copied())
            .unwrap_or(seen))
    }

    /// Restarts the controller over the N ManifestWorks it owns: its start-up peak RSS
    /// (ready, and its first passes done) against the steady RSS of the one that ran
    /// every phase, and what the restart wrote (nothing is due).
    async fn restart(&self, n: usize, ns: &str, p: Proc, row: &mut Row) -> anyhow::Result<Proc> {
        row.steady_rss_bytes = p.rss()?;
        p.stop().await;
        let t0 = Instant::now();
        let (p, addr) = self
            .start_controller(ns, &format!("controller-{n}-restart.log"))
            .await?;
        row.restart_ready_s = t0.elapsed().as_secs_f64();
        row.restart_writes = self.first_passes_done(&addr, 1).await?;
        row.startup_peak_rss_bytes = p.peak_rss()?;
        Ok(p)
    }

    /// Waits until a started controller's first passes are done (at least `passes`
    /// reconciles, then none for 3 s); returns the writes it made by then.
    async fn first_passes_done(&self, addr: &str, passes: usize) -> anyhow::Result<f64> {
        let t0 = Instant::now();
        let mut last = (f64::NAN, Instant::now());
        loop {
            let (r, w) = controller_counts(addr).await;
            if r != last.0 {
                last = (r, Instant::now());
            } else if r >= passes as f64 && last.1.elapsed() > Duration::from_secs(3) {
                return Ok(w);
            }
            if t0.elapsed() > self.timeout() {
                bail!(
                    "the restarted controller kept reconciling for {:?}",
                    self.timeout()
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// What a user waits for reading the rollout with the CLI, against the bench's own
    /// client listing the same ManifestWorks: the median of three runs of each, in turn.
    async fn cli_reads(&self, ns: &str, row: &mut Row) -> anyhow::Result<()> {
        let Some(cli) = &self.args.cli else {
            return Ok(());
        };
        let list = || async {
            let t0 = Instant::now();
            let owned = ListParams::default().labels(&format!("{}={ns}.app", labels::MWRS_OWNER));
            let works = Api::<ManifestWork>::all(self.client.clone())
                .list(&owned)
                .await?;
            anyhow::Ok((t0.elapsed().as_secs_f64(), works.items.len()))
        };
        let run = |args: &'static [&'static str]| async move {
            let t0 = Instant::now();
            let out = Command::new(cli)
                .arg("--kubeconfig")
                .arg(&self.args.kubeconfig)
                .args(["-n", ns])
                .args(args)
                .output()
                .await?;
            let took = t0.elapsed().as_secs_f64();
            if out.stdout.is_empty() {
                bail!(
                    "`mwrs {}` printed nothing: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            anyhow::Ok(took)
        };
        let mut times: [Vec<f64>; 3] = Default::default();
        for _ in 0..3 {
            let (took, listed) = list().await?;
            if listed == 0 {
                bail!("the bench's client listed no ManifestWork of {ns}/app");
            }
            times[0].push(took);
            times[1].push(run(&["rollout", "status", "app"]).await?);
            times[2].push(run(&["rollout", "plan", "app"]).await?);
        }
        let [list_s, status_s, plan_s] = times.map(|t| median(t.into_iter()));
        (row.list_works_s, row.cli_status_s, row.cli_plan_s) = (list_s, status_s, plan_s);
        Ok(())
    }

    async fn controller(&self, n: usize, ns: &str, row: &mut Row) -> anyhow::Result<()> {
        // With --leader-elect, as a production replica runs, and its Lease renewals watched
        // through the fan-out.
        let election = ["--leader-elect", "--lease-namespace", ns].map(String::from);
        let extra: &[String] = if self.args.leader_elect {
            &election
        } else {
            &[]
        };
        let (p, addr) = self
            .start_controller_with(ns, &format!("controller-{n}.log"), extra)
            .await?;
        let renewals = lease::Renewals::watch(&self.client, ns).await;
        let complete = |m: &ManifestWorkReplicaSet| {
            m.status.as_ref().is_some_and(|s| {
                s.current_revision.is_some() && s.current_revision == s.update_revision
            })
        };
        let api = self.mwrs_api(ns);
        let t0 = Instant::now();
        api.create(&PostParams::default(), &self.mwrs("app", "v1", true)?)
            .await?;
        row.create_s = (self.wait_version("v1", n).await? - t0).as_secs_f64();
        self.wait_mwrs(ns, "app", "complete on v1", complete)
            .await?;

        let v1 = self.current_revision(ns, "app").await?;
        let t0 = Instant::now();
        let wall0 = jiff::Timestamp::now();
        self.set_version(ns, "app", "v2").await?;
        let fanout_end = self.wait_version("v2", n).await?;
        row.fanout_s = (fanout_end - t0).as_secs_f64();
        row.fanout_cpu = self.cpu.between(t0, fanout_end);
        // The renewal after the fan-out's end closes its last gap.
        tokio::time::sleep(Duration::from_secs(6)).await;
        let gaps = renewals.gaps(
            wall0,
            jiff::Timestamp::now() - jiff::SignedDuration::from_secs(6),
        );
        if let Some((p50, max)) = lease::summary(&gaps) {
            (row.lease_gap_p50_s, row.lease_gap_max_s) = (Some(p50), Some(max));
            eprintln!(
                "   Lease renewals during the fan-out: {} gaps, median {p50:.2}s, largest {max:.2}s (due every 5s, expiry at 15s)",
                gaps.len()
            );
        }
        // Promoted past v1: a status read just after the writes may still show v1 as
        // both current and update revision.
        let v2_done = |m: &ManifestWorkReplicaSet| {
            complete(m)
                && m.status.as_ref().and_then(|s| s.current_revision.as_ref()) != v1.as_ref()
                && m.status
                    .as_ref()
                    .is_some_and(|s| s.summary.updated == n as i64)
        };
        self.wait_mwrs(ns, "app", "complete on v2", v2_done).await?;

        // The first round: a bare update, then v3 reaches every cluster; only then does
        // one cluster report Degraded, so that the abort is timed on its own.
        let (_, bare) = self.bare_versions(n, "b1-v1", "b1-v2").await?;
        let before_v3 = http_get(&addr, "/metrics").await.unwrap_or_default();
        let (breach, reverted) = self
            .abort_to(ns, "app", ("v3", "v2"), n, row.fanout_s)
            .await?;
        row.abort_s = (reverted - breach).as_secs_f64();
        let after = http_get(&addr, "/metrics").await.unwrap_or_default();
        let delta = |metric: &str, labels: &[&str]| {
            metric_sum_with(&after, metric, labels) - metric_sum_with(&before_v3, metric, labels)
        };
        row.abort_reconciles = delta("mwrs_controller_reconciles_total", &[]);
        row.abort_work_writes = delta(
            "mwrs_controller_writes_total",
            &["resource=\"manifestwork\""],
        );
        row.abort_status_writes = delta("mwrs_controller_writes_total", &["resource=\"status\""]);
        row.abort_conflicts = delta(
            "mwrs_controller_writes_total",
            &["resource=\"manifestwork\"", "result=\"conflict\""],
        );
        // Where the time goes: from the breach to the first revert seen (the agent's
        // report reaching the controller, its pass, the status write that persists the
        // abort, the first write), then the revert writes themselves.
        let first_revert = self
            .tracker
            .seen
            .lock()
            .ok()
            .and_then(|s| s.first_moved_to.get("v2").copied());
        if let Some(first) = first_revert {
            row.abort_to_first_revert_s = first.saturating_duration_since(breach).as_secs_f64();
            row.abort_reverts_s = reverted.saturating_duration_since(first).as_secs_f64();
        }
        self.wait_mwrs(ns, "app", "aborted", |m| {
            m.status.as_ref().is_some_and(|s| s.aborted_time.is_some())
        })
        .await?;
        row.abort_rounds = vec![self.round(bare, (breach, reverted))];
        for round in 2..=self.args.abort_runs {
            let r = self.abort_round(n, ns, round, row.fanout_s).await?;
            eprintln!(
                "   abort round {round}: bare update {:.2}s, abort {:.2}s ({:.2}x)",
                r.bare_s,
                r.abort_s,
                r.ratio()
            );
            row.abort_rounds.push(r);
        }
        if let Ok(mut f) = self.failing.lock() {
            f.clear();
        }

        // Settle: let the last status writes and rechecks pass before counting.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let (r0, w0) = controller_counts(&addr).await;
        let (cpu, reqs) = self.idle(Some(&p)).await?;
        let (r1, w1) = controller_counts(&addr).await;
        row.idle_cpu_s_per_min = cpu;
        row.idle_requests_per_min = reqs;
        let mins = self.args.idle_secs as f64 / 60.0;
        row.idle_reconciles_per_min = (r1 - r0) / mins;
        row.idle_writes_per_min = (w1 - w0) / mins;
        self.idle_with_silent_clusters(n, ns, &addr, row).await?;
        row.peak_rss_bytes = p.peak_rss()?;
        let p = self.restart(n, ns, p, row).await?;
        self.cli_reads(ns, row).await?;

        api.delete("app", &DeleteParams::default()).await?;
        self.wait_no_works().await?;
        self.wait_gone(ns, "app").await?;
        p.stop().await;
        let (_, base) = self.idle(None).await?;
        row.baseline_requests_per_min = base;
        Ok(())
    }

    /// 1% of the clusters never answer a new revision (SPEC §11.1): once every
    /// ManifestWork carries it, the controller writes nothing more.
    async fn idle_with_silent_clusters(
        &self,
        n: usize,
        ns: &str,
        addr: &str,
        row: &mut Row,
    ) -> anyhow::Result<()> {
        let silent = (n / 100).max(1);
        if let Ok(mut s) = self.silent.lock() {
            s.clear();
            s.extend(self.clusters[..silent].iter().cloned());
        }
        self.set_version(ns, "app", "v4").await?;
        self.wait_version("v4", n).await?;
        let others = (n - silent) as i64;
        self.wait_mwrs(ns, "app", "the others done on v4", |m| {
            m.status
                .as_ref()
                .is_some_and(|s| s.summary.updated == others)
        })
        .await?;
        tokio::time::sleep(Duration::from_secs(5)).await;
        let (r0, w0) = controller_counts(addr).await;
        tokio::time::sleep(Duration::from_secs(self.args.idle_secs)).await;
        let (r1, w1) = controller_counts(addr).await;
        let mins = self.args.idle_secs as f64 / 60.0;
        row.silent_clusters = silent;
        row.silent_idle_reconciles_per_min = (r1 - r0) / mins;
        row.silent_idle_writes_per_min = (w1 - w0) / mins;
        if let Ok(mut s) = self.silent.lock() {
            s.clear();
        }
        Ok(())
    }

    async fn wait_gone(&self, ns: &str, name: &str) -> anyhow::Result<()> {
        let api = self.mwrs_api(ns);
        let deadline = Instant::now() + self.timeout();
        while api.get_opt(name).await?.is_some() {
            if Instant::now() > deadline {
                bail!("{ns}/{name} was not deleted");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Ok(())
    }

    async fn peer(&self, peer: &Path, n: usize, ns: &str, row: &mut Row) -> anyhow::Result<()> {
        let log = self.args.workdir.join(format!("peer-{n}.log"));
        let p = Proc::spawn(
            "peer",
            peer,
            &[self.args.kubeconfig.display().to_string()],
            &log,
        )?;
        let api = self.mwrs_api(ns);
        // The first rollout includes the peer's start-up: not timed.
        api.create(&PostParams::default(), &self.mwrs("peer", "v1", false)?)
            .await?;
        self.wait_version("v1", n)
            .await
            .with_context(|| format!("peer log: {}", log.display()))?;
        let t0 = Instant::now();
        self.set_version(ns, "peer", "v2").await?;
        let fanout = (self.wait_version("v2", n).await? - t0).as_secs_f64();
        row.peer_fanout_s = Some(fanout);
        row.peer_fanout_ratio = Some(fanout / row.bare_update_s);
        tokio::time::sleep(Duration::from_secs(5)).await;
        let (cpu, _) = self.idle(Some(&p)).await?;
        row.peer_idle_cpu_s_per_min = Some(cpu);
        row.peer_peak_rss_bytes = Some(p.peak_rss()?);
        api.delete("peer", &DeleteParams::default()).await?;
        // Upstream removes its ManifestWorks through its own finalizer; if it does not
        // within the deadline, clean up so the next size starts empty.
        if self.wait_no_works().await.is_err() {
            let lp = ListParams::default()
                .labels("work.open-cluster-management.io/manifestworkreplicaset");
            let all: Api<ManifestWork> = Api::all(self.client.clone());
            for mw in all.list_metadata(&lp).await?.items {
                let a: Api<ManifestWork> =
                    Api::namespaced(self.client.clone(), &mw.namespace().unwrap_or_default());
                let _ = a.delete(&mw.name_any(), &DeleteParams::default()).await;
            }
            self.wait_no_works().await?;
        }
        p.stop().await;
        Ok(())
    }

    async fn size(&self, n: usize) -> anyhow::Result<Row> {
        let ns = format!("bench-{n}");
        placement::ensure_namespace(&self.client, &ns).await?;
        placement::publish(
            &self.client,
            &ns,
            "fleet",
            &[DecisionGroup::new("", self.clusters[..n].to_vec())],
        )
        .await?;
        let mut row = Row {
            n,
            ..Default::default()
        };
        eprintln!("== N={n}: bare client");
        let (create_s, update) = self.bare(n).await?;
        (row.bare_create_s, row.bare_update_s) = (create_s, update.secs());
        row.bare_update_cpu = self.cpu.between(update.from, update.to);
        eprintln!(
            "   create {:.2}s, update {:.2}s",
            row.bare_create_s, row.bare_update_s
        );
        eprintln!("== N={n}: controller");
        self.controller(n, &ns, &mut row).await?;
        row.fanout_ratio = row.fanout_s / row.bare_update_s;
        row.abort_ratio = median(row.abort_rounds.iter().map(AbortRound::ratio));
        eprintln!(
            "   abort ratios of the {} rounds: {}",
            row.abort_rounds.len(),
            ratios_text(&row.abort_rounds)
        );
        eprintln!(
            "   CPU during the bare update: {}",
            row.bare_update_cpu.text(row.bare_update_s)
        );
        eprintln!(
            "   CPU during the fan-out: {}",
            row.fanout_cpu.text(row.fanout_s)
        );
        for (i, r) in row.abort_rounds.iter().enumerate() {
            eprintln!(
                "   CPU, round {}: bare update {}; abort {}",
                i + 1,
                r.bare_cpu.text(r.bare_s),
                r.abort_cpu.text(r.abort_s)
            );
        }
        eprintln!(
            "   abort: breach → first revert {:.2}s, first → last revert {:.2}s; from v3 to the \
             last revert {} passes, {} ManifestWork writes, {} conflicts, {} status writes",
            row.abort_to_first_revert_s,
            row.abort_reverts_s,
            row.abort_reconciles,
            row.abort_work_writes,
            row.abort_conflicts,
            row.abort_status_writes
        );
        eprintln!(
            "   create {:.2}s, fan-out {:.2}s ({:.2}x), abort {:.2}s ({:.2}x), idle {:.3} cpu-s/min, {:.1} req/min (baseline {:.1}), {:.1} reconciles/min, {:.1} writes/min, with {} silent: {:.1} reconciles/min, {:.1} writes/min, peak rss {:.1} MiB",
            row.create_s,
            row.fanout_s,
            row.fanout_ratio,
            row.abort_s,
            row.abort_ratio,
            row.idle_cpu_s_per_min,
            row.idle_requests_per_min,
            row.baseline_requests_per_min,
            row.idle_reconciles_per_min,
            row.idle_writes_per_min,
            row.silent_clusters,
            row.silent_idle_reconciles_per_min,
            row.silent_idle_writes_per_min,
            row.peak_rss_bytes as f64 / 1048576.0
        );
        eprintln!(
            "   CLI: list {:.2}s; rollout status {:.2}s ({:.2}x), rollout plan {:.2}s ({:.2}x)",
            row.list_works_s,
            row.cli_status_s,
            row.cli_status_s / row.list_works_s,
            row.cli_plan_s,
            row.cli_plan_s / row.list_works_s
        );
        eprintln!(
            "   restart: ready in {:.2}s, start-up peak rss {:.1} MiB vs steady {:.1} MiB ({:.2}x), {} writes",
            row.restart_ready_s,
            row.startup_peak_rss_bytes as f64 / 1048576.0,
            row.steady_rss_bytes as f64 / 1048576.0,
            row.startup_peak_rss_bytes as f64 / row.steady_rss_bytes.max(1) as f64,
            row.restart_writes
        );
        if let Some(peer) = &self.args.peer {
            eprintln!("== N={n}: peer");
            match self.peer(peer, n, &ns, &mut row).await {
                Ok(()) => eprintln!(
                    "   fan-out {:.2}s ({:.2}x), peak rss {:.1} MiB",
                    row.peer_fanout_s.unwrap_or_default(),
                    row.peer_fanout_ratio.unwrap_or_default(),
                    row.peer_peak_rss_bytes.unwrap_or_default() as f64 / 1048576.0
                ),
                Err(e) => eprintln!("   peer failed: {e:#}"),
            }
        }
        Ok(row)
    }
}

/// The median of `values` (the mean of the middle two for an even count; 0 for none).
fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        len if len % 2 == 1 => v[len / 2],
        len => (v[len / 2 - 1] + v[len / 2]) / 2.0,
    }
}

/// Each round's abort ratio, in round order, and their spread.
fn ratios_text(rounds: &[AbortRound]) -> String {
    let ratios: Vec<f64> = rounds.iter().map(AbortRound::ratio).collect();
    let min = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let max = ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let each: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
    format!("{} (spread {min:.2}–{max:.2})", each.join(", "))
}

fn cpu_json(c: &Split) -> Value {
    json!({"hub_s": c.hub, "controller_s": c.controller, "harness_s": c.harness})
}

fn json_row(r: &Row) -> Value {
    json!({
        "clusters": r.n,
        "bare_create_s": r.bare_create_s, "bare_update_s": r.bare_update_s,
        "controller_create_s": r.create_s, "fanout_s": r.fanout_s, "abort_s": r.abort_s,
        "fanout_ratio": r.fanout_ratio, "abort_ratio": r.abort_ratio,
        "abort_rounds": r.abort_rounds.iter()
            .map(|a| json!({
                "bare_update_s": a.bare_s, "abort_s": a.abort_s,
                "bare_update_cpu": cpu_json(&a.bare_cpu), "abort_cpu": cpu_json(&a.abort_cpu),
            }))
            .collect::<Vec<_>>(),
        "bare_update_cpu": cpu_json(&r.bare_update_cpu), "fanout_cpu": cpu_json(&r.fanout_cpu),
        "abort_to_first_revert_s": r.abort_to_first_revert_s, "abort_reverts_s": r.abort_reverts_s,
        "abort_reconciles": r.abort_reconciles, "abort_work_writes": r.abort_work_writes,
        "abort_conflicts": r.abort_conflicts, "abort_status_writes": r.abort_status_writes,
        "idle_cpu_s_per_min": r.idle_cpu_s_per_min,
        "idle_requests_per_min": r.idle_requests_per_min,
        "baseline_requests_per_min": r.baseline_requests_per_min,
        "idle_reconciles_per_min": r.idle_reconciles_per_min,
        "idle_writes_per_min": r.idle_writes_per_min,
        "silent_clusters": r.silent_clusters,
        "silent_idle_reconciles_per_min": r.silent_idle_reconciles_per_min,
        "silent_idle_writes_per_min": r.silent_idle_writes_per_min,
        "peak_rss_bytes": r.peak_rss_bytes,
        "lease_renewal_gap_p50_s": r.lease_gap_p50_s,
        "lease_renewal_gap_max_s": r.lease_gap_max_s,
        "steady_rss_bytes": r.steady_rss_bytes,
        "restart_ready_s": r.restart_ready_s,
        "startup_peak_rss_bytes": r.startup_peak_rss_bytes,
        "restart_writes": r.restart_writes,
        "list_works_s": r.list_works_s, "cli_status_s": r.cli_status_s, "cli_plan_s": r.cli_plan_s,
        "peer_fanout_s": r.peer_fanout_s, "peer_fanout_ratio": r.peer_fanout_ratio,
        "peer_peak_rss_bytes": r.peer_peak_rss_bytes,
        "peer_idle_cpu_s_per_min": r.peer_idle_cpu_s_per_min,
    })
}

fn report(rows: &[Row]) {
    let mib = |b: u64| b as f64 / 1048576.0;
    println!();
    println!(
        "| N | bare update | fan-out | ratio | abort (round 1) | abort ratio (median of rounds) | idle CPU s/min | idle hub req/min (no controller) | idle reconciles/min | idle writes/min, 1% silent | peak RSS | steady RSS | restart: start-up peak (ratio), writes | peer fan-out | peer ratio | peer RSS |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let opt =
            |v: Option<f64>, unit: &str| v.map_or("–".to_string(), |x| format!("{x:.2}{unit}"));
        println!(
            "| {} | {:.2} s | {:.2} s | {:.2} | {:.2} s | {:.2} | {:.3} | {:.1} ({:.1}) | {:.1} | {:.1} ({} silent) | {:.1} MiB | {:.1} MiB | {:.1} MiB ({:.2}), {} | {} | {} | {} |",
            r.n,
            r.bare_update_s,
            r.fanout_s,
            r.fanout_ratio,
            r.abort_s,
            r.abort_ratio,
            r.idle_cpu_s_per_min,
            r.idle_requests_per_min,
            r.baseline_requests_per_min,
            r.idle_reconciles_per_min,
            r.silent_idle_writes_per_min,
            r.silent_clusters,
            mib(r.peak_rss_bytes),
            mib(r.steady_rss_bytes),
            mib(r.startup_peak_rss_bytes),
            r.startup_peak_rss_bytes as f64 / r.steady_rss_bytes.max(1) as f64,
            r.restart_writes,
            opt(r.peer_fanout_s, " s"),
            opt(r.peer_fanout_ratio, ""),
            r.peer_peak_rss_bytes
                .map_or("–".to_string(), |b| format!("{:.1} MiB", mib(b))),
        );
    }
    if let [a, .., b] = rows
        && b.n > a.n
    {
        let slope = |x: u64, y: u64| (y as f64 - x as f64) / (b.n - a.n) as f64;
        let steady = slope(a.steady_rss_bytes, b.steady_rss_bytes);
        println!(
            "\ncontroller RSS growth per cluster (N={} → N={}): steady {:.0} bytes, peak {:.0} bytes",
            a.n,
            b.n,
            steady,
            slope(a.peak_rss_bytes, b.peak_rss_bytes)
        );
        // The fixed cost is what the line through both sizes gives at N = 0.
        let fixed = a.steady_rss_bytes as f64 - steady * a.n as f64;
        println!(
            "steady RSS projected at 300,000 ManifestWorks: {:.0} MiB (fixed {:.1} MiB)",
            (fixed + steady * 300_000.0) / 1_048_576.0,
            fixed / 1_048_576.0
        );
        if let (Some(pa), Some(pb)) = (a.peer_peak_rss_bytes, b.peer_peak_rss_bytes) {
            let pper = (pb as f64 - pa as f64) / (b.n - a.n) as f64;
            println!("peer RSS growth: {:.0} bytes per cluster", pper);
        }
    }
}

/// Writes a run's record (its results, command, date, commit and machine) to `--json` and
/// `--record`, if given.
fn write_json(bench: &Bench, mode: &str, results: &Value) -> anyhow::Result<()> {
    let args = &bench.args;
    record::write(
        &record::record(mode, results),
        args.json.as_deref(),
        args.record.as_deref(),
    )
}

/// The fault soak (`soak/`): fails when it finds a violation.
async fn soak(client: Client, args: &Args, duration: Duration) -> anyhow::Result<()> {
    let (Some(plugin), Some(cli)) = (args.feedback_plugin.clone(), args.cli.clone()) else {
        bail!("--soak needs --feedback-plugin and --cli");
    };
    let soak_args = soak::SoakArgs {
        kubeconfig: args.kubeconfig.clone(),
        controller: args.controller.clone(),
        plugin,
        cli,
        workdir: args.workdir.clone(),
        hub_pid: args.hub_pid,
        audit_log: args.audit_log.clone(),
        seed: args.seed,
        duration,
        rounds: args.soak_rounds,
        clusters: args.soak_clusters,
        groups: args.soak_groups,
        idle_secs: args.idle_secs,
        round_timeout: Duration::from_secs(args.round_timeout_secs),
    };
    let (results, violations) = soak::run(client, soak_args).await?;
    record::write(
        &record::record("soak", &results),
        args.json.as_deref(),
        args.record.as_deref(),
    )?;
    if violations > 0 {
        bail!(
            "the soak found {violations} violations (seed {}): see the report above",
            args.seed
        );
    }
    Ok(())
}

async fn client_from(path: &Path) -> anyhow::Result<Client> {
    let kc = Kubeconfig::read_from(path)?;
    let config = KubeConfig::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(config)?)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    std::fs::create_dir_all(&args.workdir)?;
    let client = client_from(&args.kubeconfig).await?;
    if let Some(duration) = args.soak {
        return soak(client, &args, duration).await;
    }
    let max = match (
        args.many_mwrs,
        args.plugin_clusters.or(args.dashboard_clusters),
    ) {
        (Some(_), _) => args.many_clusters,
        (None, Some(n)) => n,
        (None, None) => args.sizes.iter().copied().max().unwrap_or(0),
    };
    if max == 0 {
        bail!("--sizes (or --many-clusters) must name at least one positive size");
    }
    let clusters = cluster::cluster_names("bench", max);
    let t = Instant::now();
    cluster::ensure_clusters(&client, "bench", &clusters, args.concurrency).await?;
    eprintln!("{max} clusters ready in {:.1}s", t.elapsed().as_secs_f64());

    let degrade_after_ms = Arc::new(AtomicU64::new(0));
    let failing: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let silent: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let (d, f, q) = (degrade_after_ms.clone(), failing.clone(), silent.clone());
    let agent = Agent::start(
        client.clone(),
        AgentConfig::new(clusters.iter().cloned()).behaviour(move |w| {
            if q.lock().is_ok_and(|s| s.contains(w.cluster))
                && w.spec.to_string().contains("\"version\":\"v4\"")
            {
                return Behaviour::Silent;
            }
            // Version v3, or aNN-v3 in the many-MWRS run.
            let fails = f.lock().is_ok_and(|s| s.contains(w.cluster))
                && w.spec.to_string().contains("v3\"");
            if fails {
                Behaviour::Degrade {
                    after: Duration::from_millis(d.load(Ordering::Relaxed)),
                }
            } else {
                Behaviour::succeed_now()
            }
        }),
    );
    let tracker = Tracker::start(client.clone()).await?;
    let tck = clock_ticks();
    let args_hub_pid = args.hub_pid;
    let bench = Bench {
        args,
        client,
        tracker,
        clusters,
        degrade_after_ms,
        failing,
        silent,
        tck,
        cpu: Sampler::start(args_hub_pid, tck),
    };
    if let Some(count) = bench.args.many_mwrs {
        let row = bench.many(count, max).await?;
        agent.stop();
        many::print(&row);
        return write_json(&bench, "many", &many::json(&row));
    }
    if let Some(n) = bench.args.plugin_clusters {
        let Some(program) = bench.args.feedback_plugin.clone() else {
            bail!("--plugin-clusters needs --feedback-plugin");
        };
        eprintln!("== the rollout plugin over {n} clusters");
        let row = bench.plugin_run(&program, n).await?;
        agent.stop();
        plugin::print(&row);
        return write_json(&bench, "plugin", &plugin::json(&row));
    }
    if let Some(n) = bench.args.dashboard_clusters {
        let Some(cli) = bench.args.cli.clone() else {
            bail!("--dashboard-clusters needs --cli");
        };
        eprintln!("== the dashboard over {n} clusters");
        let row = bench.dashboard_run(&cli, n).await?;
        agent.stop();
        dashboard::print(&row);
        return write_json(&bench, "dashboard", &dashboard::json(&row));
    }
    let mut rows = Vec::new();
    let sizes = bench.args.sizes.clone();
    for n in sizes {
        rows.push(bench.size(n).await?);
    }
    let agent_writes = agent.stats.status_writes.load(Ordering::Relaxed);
    agent.stop();
    report(&rows);
    // This process holds the simulated fleet's agent for every cluster and a watch cache
    // of every ManifestWork: what `mwrs-fleet` costs at this size.
    let peak = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .unwrap_or(0);
    println!(
        "fleet: {max} simulated clusters in this process, {agent_writes} status writes, peak RSS {:.1} MiB (agent + a watch cache of every ManifestWork)",
        peak as f64 / 1024.0
    );
    let v: Vec<Value> = rows.iter().map(json_row).collect();
    write_json(&bench, "sizes", &Value::Array(v))
}
