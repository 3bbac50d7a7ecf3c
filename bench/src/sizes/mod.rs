//! The size run: for each fleet size N, its phases in order against the same N
//! ManifestWorks, into one [`Row`] (one file per phase: `bare.rs`, `controller.rs` with
//! `abort.rs` and `idle.rs`, `peer.rs`; `report.rs` prints and records the rows).
//!
//! [`Bench`] is what every run shares (the hub client, the ManifestWork tracker, the
//! simulated clusters and the agent's switches, the CPU sampler), with the helpers the
//! other runs (`many.rs`, `plugin.rs`, `dashboard.rs`) use too: the MWRS and its template,
//! the waits on versions and on the MWRS status, starting the controller.

mod abort;
mod bare;
mod controller;
mod idle;
mod peer;
mod report;

use std::collections::BTreeSet;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::bail;
use futures::{StreamExt, TryStreamExt, stream};
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_api::work::ManifestWork;
use mwrs_fleet::placement::{self, DecisionGroup};
use serde_json::json;

pub(crate) use report::{json_row, report, write_json};

use crate::Args;
use crate::cpu::{Role, Sampler, Split};
use crate::fleet_view::{Tracker, template};
use crate::process::{Proc, free_port, http_get};
use report::{median, print_aborts, print_controller};

pub(crate) struct Bench {
    pub(crate) args: Args,
    pub(crate) client: Client,
    pub(crate) tracker: Tracker,
    pub(crate) clusters: Vec<String>,
    pub(crate) degrade_after_ms: Arc<AtomicU64>,
    pub(crate) failing: Arc<Mutex<BTreeSet<String>>>,
    /// Clusters whose agent never answers revision v4.
    pub(crate) silent: Arc<Mutex<BTreeSet<String>>>,
    pub(crate) tck: f64,
    pub(crate) cpu: Sampler,
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
    /// From the bare update's first write to every agent's answer on it.
    bare_answered: abort::Answered,
    /// From the breach to every agent's answer on the stable revision: back to stable.
    back: abort::Answered,
}

impl AbortRound {
    fn ratio(&self) -> f64 {
        self.abort_s / self.bare_s
    }
}

#[derive(Debug, Default, Clone)]
pub(crate) struct Row {
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
    /// The first abort's time back to stable as the controller measures it
    /// (`mwrs_controller_abort_to_stable_seconds`: from its abort, not the breach).
    controller_back_to_stable_s: Option<f64>,
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
    /// leader election): median and largest, seconds (due every 2 s; expiry at 15 s).
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

/// How long a replica may take to be ready (every store listed) in the runs up to
/// 60,000 ManifestWorks.
pub(crate) const READY_WITHIN: Duration = Duration::from_secs(120);

impl Bench {
    pub(crate) fn timeout(&self) -> Duration {
        Duration::from_secs(self.args.timeout_secs)
    }

    pub(crate) fn mwrs_api(&self, ns: &str) -> Api<ManifestWorkReplicaSet> {
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

    pub(crate) async fn wait_version(&self, v: &str, n: usize) -> anyhow::Result<Instant> {
        self.tracker
            .until(&format!("{n} works on {v}"), self.timeout(), |s| {
                s.count(v) >= n
            })
            .await
    }

    pub(crate) async fn wait_no_works(&self) -> anyhow::Result<()> {
        self.tracker
            .until("no ManifestWork left", self.timeout(), |s| {
                s.works.is_empty()
            })
            .await?;
        Ok(())
    }

    pub(crate) fn mwrs(
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

    pub(crate) async fn set_version(
        &self,
        ns: &str,
        name: &str,
        version: &str,
    ) -> anyhow::Result<()> {
        let body = json!({"spec": {"manifestWorkTemplate": template(version)}});
        self.mwrs_api(ns)
            .patch(name, &PatchParams::default(), &Patch::Merge(&body))
            .await?;
        Ok(())
    }

    pub(crate) async fn wait_mwrs(
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

    /// Starts our controller on `ns` and waits until it is ready.
    pub(crate) async fn start_controller(
        &self,
        ns: &str,
        log: &str,
    ) -> anyhow::Result<(Proc, String)> {
        self.start_controller_with(ns, log, &[], READY_WITHIN).await
    }

    /// [`Bench::start_controller`] with `extra` arguments, ready within `ready_within`.
    pub(crate) async fn start_controller_with(
        &self,
        ns: &str,
        log: &str,
        extra: &[String],
        ready_within: Duration,
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
            if t.elapsed() > ready_within {
                bail!(
                    "controller not ready after {ready_within:?}; see {}",
                    log.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok((p, addr))
    }

    pub(crate) async fn wait_gone(&self, ns: &str, name: &str) -> anyhow::Result<()> {
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

    pub(crate) async fn size(&self, n: usize) -> anyhow::Result<Row> {
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
        print_aborts(&row);
        print_controller(&row);
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
