//! The many-MWRS benchmark (issues #16 and #36): `count` MWRS over the same `n` clusters,
//! each with a template of its own (`count × n` ManifestWorks; 100 × 3,000 is OCM's
//! documented hub ceiling), on one controller with leader election, each phase against a
//! plain client doing the same writes in the same run:
//!
//! - bare client: creates the ManifestWorks of `sample` names (all `count` by default)
//!   over the `n` clusters, updates them all, then the `n` of one name (the references;
//!   where `sample < count`, the figures of `count` names are the sample's, scaled); that
//!   name's `n` stay, to be updated again beside the controller;
//! - create: the MWRS in two halves, steady RSS after each (the slope per ManifestWork);
//! - idle: reconciles and writes per minute with nothing changing (must be 0 / 0);
//! - one change (`one.rs`): rounds of the bare client's update of one name's `n`, then
//!   the template of one MWRS changing, back to back beside the controller (the same
//!   hub, its watches open); the writes to every other ManifestWork (must be 0);
//! - one abort: another MWRS's new template degrades on one cluster (`AbortAll`);
//! - several change at once (`--many-at-once`, ten by default): time against the bare
//!   client's, the peak RSS;
//! - restart: a cold start (the old replica stops as in a rollout) to every first pass
//!   done, against the bench's client listing the same ManifestWorks; start-up peak;
//! - failover (`failover.rs`): a standby replica, the leader killed mid fan-out;
//! - all change at once, on the new leader: throughput against the bare client's, the
//!   peak RSS, the reconcile queue delay and the requests by verb; to its end, or over
//!   its first `--many-all-window` seconds where its end would not fit the run (last for
//!   that reason: nothing after it waits for the hub to catch up).
//!
//! Throughout: the Lease's renewals, and the hub's memory. Per phase: the controller's
//! requests by verb (its `mwrs_controller_api_requests_total`).
//!
//! MWRS `app-NN` carries version `aNN-vK`; the tracker counts ManifestWorks per version,
//! so every wait is on one MWRS's ManifestWorks.

mod failover;
mod one;
mod report;

use std::time::{Duration, Instant};

use anyhow::bail;
use futures::{StreamExt, TryStreamExt, stream};
use jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PostParams};
use mwrs_api::labels;
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_api::work::ManifestWork;
use mwrs_fleet::placement::{self, DecisionGroup};

pub use report::{json, print};

use crate::cpu::Split;
use crate::lease::Renewals;
use crate::measure::{self, histogram_quantile, per_verb};
use crate::mirror;
use crate::process::{Proc, controller_counts, http_get, hub_heap, refused_writes};
use crate::sizes::Bench;

const NS: &str = "bench-many";
const REQUESTS: &str = "mwrs_controller_api_requests_total";

/// What one many-MWRS run measured.
#[derive(Debug, Default, Clone)]
pub struct ManyRow {
    pub count: usize,
    pub clusters: usize,
    /// Names the bare client wrote (each over every cluster).
    pub bare_sample: usize,
    pub bare_create_s: f64,
    pub bare_update_all_s: f64,
    pub bare_update_one_s: f64,
    /// The median of the bare client's updates of one name in the one-change rounds: on
    /// the same hub as the controller's one-name phases (every ManifestWork created, the
    /// controller's watches open), where the first was on a hub with nothing else.
    pub bare_update_one_beside_s: f64,
    pub create_s: f64,
    /// Steady RSS with half the MWRS, and with all of them.
    pub half_steady_rss_bytes: u64,
    pub steady_rss_bytes: u64,
    /// The peak while the MWRS were created.
    pub create_peak_rss_bytes: u64,
    pub idle_reconciles_per_min: f64,
    pub idle_writes_per_min: f64,
    /// The median of the rounds' fan-outs.
    pub one_change_s: f64,
    pub one_rounds: Vec<one::OneRound>,
    /// ManifestWork writes the controller made during the one-change rounds beyond the
    /// `n` of the changed MWRS in each.
    pub one_change_other_writes: f64,
    pub one_abort_s: f64,
    /// How many MWRS change at once in the phase named "ten" (`--many-at-once`).
    pub ten: usize,
    pub ten_change_s: f64,
    /// CPU of each process while the bare client updated every name it wrote, while the
    /// `ten` MWRS changed at once, and while every MWRS did: where the hub's time per
    /// write went.
    pub bare_update_all_cpu: Split,
    pub ten_cpu: Split,
    pub all_cpu: Split,
    pub ten_peak_rss_bytes: u64,
    /// Every MWRS changing at once: the time measured, and the ManifestWorks that carried
    /// their new template by its end (all of them unless it was measured over a window).
    pub all_change_s: f64,
    pub all_change_works: usize,
    pub all_peak_rss_bytes: u64,
    /// The reconcile queue delay while every MWRS changed: p50, p99 and passes counted.
    pub queue_delay_p50_s: f64,
    pub queue_delay_p99_s: f64,
    pub queue_delay_passes: f64,
    /// ManifestWork creates the hub refused as existing while the MWRS were created, and
    /// updates refused by their resourceVersion guard while every MWRS changed.
    pub create_refused: f64,
    pub all_change_conflicts: f64,
    /// Requests per second by verb: while the MWRS were created, and every MWRS changed.
    pub create_requests: Vec<(String, f64)>,
    pub all_change_requests: Vec<(String, f64)>,
    /// The old replica stopped (SIGTERM) to the new one's first passes over every MWRS
    /// done, and to its `/readyz`.
    pub cold_start_s: f64,
    pub restart_ready_s: f64,
    pub list_works_s: f64,
    pub startup_peak_rss_bytes: u64,
    pub restart_writes: f64,
    pub failover: failover::Failover,
    /// Gaps between the Lease's renewals by one holder (a takeover is not a gap): p50,
    /// p99, largest, and how many, over the whole run.
    pub lease_gap_p50_s: f64,
    pub lease_gap_p99_s: f64,
    pub lease_gap_max_s: f64,
    pub lease_gaps: usize,
    /// The hub process (kube-apiserver with etcd): RSS with every MWRS created (anonymous
    /// and file-backed: etcd's database is mapped), and its peak from the controller's
    /// start to the end.
    pub hub_rss_bytes: u64,
    pub hub_rss_anon_bytes: u64,
    pub hub_rss_file_bytes: u64,
    pub hub_peak_rss_bytes: u64,
    /// The hub process's live Go heap (API server and etcd) with half the MWRS settled,
    /// and with all: what it holds per ManifestWork (etcd's index; the watch cache, when
    /// it has one for them).
    pub hub_half_heap_bytes: u64,
    pub hub_heap_bytes: u64,
}

/// Some MWRS changing at once: for how long, how many ManifestWorks changed, and the
/// CPU of each process meanwhile.
struct Changed {
    s: f64,
    works: usize,
    cpu: Split,
}

fn name(i: usize) -> String {
    format!("app-{i:02}")
}

fn version(i: usize, k: usize) -> String {
    format!("a{i:02}-v{k}")
}

/// `phase` run with `p` alive: the controller's exit ends it with an error naming `log`.
/// Resolves on SIGINT or SIGTERM: a run cut short (at 300,000 one runs for hours) still
/// prints what it measured, and its controllers go with it (`kill_on_drop`).
async fn interrupted() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
    }
}

async fn until_exit<F>(p: &Proc, log: &str, phase: F) -> anyhow::Result<()>
where
    F: std::future::Future<Output = anyhow::Result<()>>,
{
    tokio::select! {
        done = phase => done,
        () = p.exited() => bail!("the controller exited before its phases ended ({log})"),
    }
}

fn bare_name(j: usize) -> String {
    format!("bare-{j:02}")
}

fn bare_version(j: usize, k: usize) -> String {
    format!("b{j:02}-v{k}")
}

/// The bare client's ManifestWork of name `j` on version `k` ([`mirror::work`]).
fn bare_object(j: usize, k: usize) -> serde_json::Value {
    mirror::work(NS, &bare_name(j), &bare_name(j), &bare_version(j, k))
}

/// The bare client's update of name `j` to version `k` in the cluster of `api`.
async fn bare_update(api: Api<ManifestWork>, j: usize, k: usize) -> Result<(), kube::Error> {
    let body = bare_object(j, k);
    api.patch(&bare_name(j), &mirror::patch_params(), &Patch::Merge(&body))
        .await
        .map(|_| ())
}

/// Seconds since `t0` at `t`.
fn secs(t0: Instant, t: Instant) -> f64 {
    t.saturating_duration_since(t0).as_secs_f64()
}

impl Bench {
    /// The whole many-MWRS run.
    pub async fn many(&self, count: usize, n: usize, sample: usize) -> anyhow::Result<ManyRow> {
        if count < 3 {
            bail!("the many-MWRS run needs at least 3 MWRS (one changes, one aborts)");
        }
        placement::ensure_namespace(&self.client, NS).await?;
        placement::publish(
            &self.client,
            NS,
            "fleet",
            &[DecisionGroup::new("", self.clusters[..n].to_vec())],
        )
        .await?;
        let mut row = ManyRow {
            count,
            clusters: n,
            bare_sample: sample.clamp(1, count),
            ten: self.args.many_at_once.clamp(1, count - 2),
            ..Default::default()
        };
        eprintln!(
            "== {count} MWRS × {n} clusters: bare client ({} names)",
            row.bare_sample
        );
        self.bare_many(row.bare_sample, n, &mut row).await?;
        eprintln!(
            "   create {:.2}s, update all {:.2}s, update {n} {:.2}s",
            row.bare_create_s, row.bare_update_all_s, row.bare_update_one_s
        );
        eprintln!("== {count} MWRS × {n} clusters: controller");
        if let Err(e) = self.controller_phases(count, n, &mut row).await {
            // A phase that fails late must not take the earlier ones' figures with it: at
            // 300,000 a run is over an hour.
            eprintln!("   stopped: {e:#}\n   what was measured before (0: not reached):");
            print(&row);
            return Err(e);
        }
        Ok(row)
    }

    /// Every phase of the controller's, in order, each filling its part of `row`; the
    /// Lease renewal gaps over the phases run, whether or not they all ended.
    async fn controller_phases(
        &self,
        count: usize,
        n: usize,
        row: &mut ManyRow,
    ) -> anyhow::Result<()> {
        if let Some(hub) = self.args.hub_pid {
            measure::reset_peak(hub);
        }
        let renewals = Renewals::watch(&self.client, NS).await;
        let start = Timestamp::now();
        let phases = tokio::select! {
            done = self.phases(count, n, row) => done,
            () = interrupted() => Err(anyhow::anyhow!("interrupted (SIGINT or SIGTERM)")),
        };
        self.lease_gaps(&renewals.gaps(start, Timestamp::now()), row);
        phases
    }

    async fn phases(&self, count: usize, n: usize, row: &mut ManyRow) -> anyhow::Result<()> {
        let (p, addr) = self.start_many_controller("controller-many.log").await?;
        until_exit(&p, "controller-many.log", async {
            self.one_replica_phases(count, n, &p, &addr, row).await
        })
        .await?;
        let p = self.restart_many(count, p, row).await?;
        let (p, addr) = self.failover(n, p, row).await?;
        until_exit(&p, "controller-many-standby.log", async {
            self.all_change(count, n, &p, &addr, row).await
        })
        .await?;
        row.hub_peak_rss_bytes = self
            .args
            .hub_pid
            .map_or(0, |hub| measure::tree_status_bytes(hub, "VmHWM:"));
        // No clean-up: deleting every ManifestWork would take as long as creating them,
        // and the hub goes with the run (bench/run.sh).
        p.stop().await;
        Ok(())
    }

    /// The phases one replica runs from its start to several MWRS changed at once.
    async fn one_replica_phases(
        &self,
        count: usize,
        n: usize,
        p: &Proc,
        addr: &str,
        row: &mut ManyRow,
    ) -> anyhow::Result<()> {
        self.create_many(count, n, p, addr, row).await?;
        self.hub_memory(row);
        self.idle_many(addr, row).await?;
        let rounds = self.args.many_rounds.max(1);
        self.one_change_rounds(count, n, rounds, addr, row).await?;
        self.one_abort(n, row).await?;
        let ten = self.change_at_once(2..2 + row.ten, 5, n, None, p).await?;
        (row.ten_change_s, row.ten_cpu) = (ten.s, ten.cpu);
        row.ten_peak_rss_bytes = p.peak_rss()?;
        Ok(())
    }

    /// A replica of the controller with leader election, its Lease in the MWRS namespace.
    /// It may take up to the run's wait deadline to be ready (every store listed): a
    /// replica starting over 300,000 ManifestWorks took over 10 minutes on the test hub,
    /// and a slow start is a figure to judge against its target, not the run's end.
    async fn start_many_controller(&self, log: &str) -> anyhow::Result<(Proc, String)> {
        let election = ["--leader-elect", "--lease-namespace", NS].map(String::from);
        self.start_controller_with(NS, log, &election, self.timeout())
            .await
    }

    /// Every (cluster, index) pair of `count` ManifestWorks in each of `n` clusters, `f`
    /// run on each with the write concurrency.
    async fn each_work<F, Fut>(&self, count: usize, n: usize, f: F) -> anyhow::Result<()>
    where
        F: Fn(Api<ManifestWork>, usize) -> Fut,
        Fut: std::future::Future<Output = Result<(), kube::Error>>,
    {
        let pairs = self.clusters[..n]
            .iter()
            .flat_map(|c| (0..count).map(move |j| (c, j)));
        stream::iter(pairs)
            .map(|(c, j)| f(Api::namespaced(self.client.clone(), c), j))
            .buffer_unordered(self.args.concurrency.max(1))
            .try_collect::<()>()
            .await?;
        Ok(())
    }

    async fn wait_versions(&self, versions: &[String], n: usize) -> anyhow::Result<Instant> {
        let what = format!("{n} works on each of {} versions", versions.len());
        self.tracker
            .until(&what, self.timeout(), |s| {
                versions.iter().all(|v| s.count(v) >= n)
            })
            .await
    }

    /// The references: a plain client creating and updating the same ManifestWorks
    /// (those of `sample` names). The first name's stay, for the one-change rounds.
    async fn bare_many(&self, sample: usize, n: usize, row: &mut ManyRow) -> anyhow::Result<()> {
        let t0 = Instant::now();
        self.each_work(sample, n, |api, j| async move {
            let mw: ManifestWork =
                serde_json::from_value(bare_object(j, 1)).map_err(kube::Error::SerdeError)?;
            api.create(&mirror::post_params(), &mw).await.map(|_| ())
        })
        .await?;
        let all = |k: usize| (0..sample).map(|j| bare_version(j, k)).collect::<Vec<_>>();
        row.bare_create_s = secs(t0, self.wait_versions(&all(1), n).await?);
        let t0 = Instant::now();
        self.each_work(sample, n, |api, j| bare_update(api, j, 2))
            .await?;
        let done = self.wait_versions(&all(2), n).await?;
        row.bare_update_all_s = secs(t0, done);
        row.bare_update_all_cpu = self.cpu.between(t0, done);
        row.bare_update_one_s = self.bare_update_one(n, 3).await?;
        self.each_work(sample, n, |api, j| async move {
            if j == 0 {
                return Ok(());
            }
            api.delete(&bare_name(j), &DeleteParams::default())
                .await
                .map(|_| ())
        })
        .await?;
        self.tracker
            .until("only the first bare name's left", self.timeout(), |s| {
                s.works.len() == n
            })
            .await?;
        Ok(())
    }

    /// The bare client's update of its first name's `n` ManifestWorks to version `k`.
    async fn bare_update_one(&self, n: usize, k: usize) -> anyhow::Result<f64> {
        let t0 = Instant::now();
        self.each_work(1, n, |api, j| bare_update(api, j, k))
            .await?;
        Ok(secs(t0, self.wait_version(&bare_version(0, k), n).await?))
    }

    /// Creates the MWRS in two halves, the steady RSS after each. `app-00` aborts on a
    /// failure (`AbortAll`); the others tolerate none.
    async fn create_many(
        &self,
        count: usize,
        n: usize,
        p: &Proc,
        addr: &str,
        row: &mut ManyRow,
    ) -> anyhow::Result<()> {
        let half = count / 2;
        let before = http_get(addr, "/metrics").await.unwrap_or_default();
        for range in [0..half, half..count] {
            // Timed like the bare create: until every ManifestWork carries its template.
            let t0 = Instant::now();
            for i in range.clone() {
                self.mwrs_api(NS)
                    .create(
                        &PostParams::default(),
                        &self.mwrs(&name(i), &version(i, 1), i == 0)?,
                    )
                    .await?;
            }
            let versions: Vec<String> = range.clone().map(|i| version(i, 1)).collect();
            row.create_s += secs(t0, self.wait_versions(&versions, n).await?);
            for i in range.clone() {
                self.wait_complete(&name(i), n).await?;
            }
            // jemalloc's background threads return freed pages within its decay time.
            tokio::time::sleep(Duration::from_secs(15)).await;
            let heap = hub_heap(&self.client).await.unwrap_or(0);
            if range.start == 0 {
                row.half_steady_rss_bytes = p.rss()?;
                row.hub_half_heap_bytes = heap;
            } else {
                row.steady_rss_bytes = p.rss()?;
                row.hub_heap_bytes = heap;
            }
        }
        let after = http_get(addr, "/metrics").await.unwrap_or_default();
        row.create_requests = per_verb(&before, &after, REQUESTS, row.create_s);
        row.create_refused = refused_writes(&after).0 - refused_writes(&before).0;
        row.create_peak_rss_bytes = p.peak_rss()?;
        Ok(())
    }

    /// The hub process's memory now (every MWRS created and settled).
    fn hub_memory(&self, row: &mut ManyRow) {
        if let Some(hub) = self.args.hub_pid {
            row.hub_rss_bytes = measure::tree_status_bytes(hub, "VmRSS:");
            row.hub_rss_anon_bytes = measure::tree_status_bytes(hub, "RssAnon:");
            row.hub_rss_file_bytes = measure::tree_status_bytes(hub, "RssFile:");
        }
    }

    /// Every ManifestWork of `name` answered on its update revision, promoted.
    async fn wait_complete(&self, name: &str, n: usize) -> anyhow::Result<()> {
        self.wait_mwrs(NS, name, "complete", |m: &ManifestWorkReplicaSet| {
            m.status.as_ref().is_some_and(|s| {
                s.current_revision.is_some()
                    && s.current_revision == s.update_revision
                    && s.summary.updated == n as i64
            })
        })
        .await
    }

    async fn idle_many(&self, addr: &str, row: &mut ManyRow) -> anyhow::Result<()> {
        let (r0, w0) = controller_counts(addr).await;
        tokio::time::sleep(Duration::from_secs(self.args.idle_secs)).await;
        let (r1, w1) = controller_counts(addr).await;
        let mins = self.args.idle_secs as f64 / 60.0;
        row.idle_reconciles_per_min = (r1 - r0) / mins;
        row.idle_writes_per_min = (w1 - w0) / mins;
        Ok(())
    }

    /// `app-00`'s new template degrades on the last cluster once every cluster has it:
    /// from the breach to every one of its ManifestWorks back on the stable version.
    async fn one_abort(&self, n: usize, row: &mut ManyRow) -> anyhow::Result<()> {
        let (stable, next) = (version(0, 1), version(0, 3));
        let (breach, reverted) = self
            .abort_to(NS, &name(0), (&next, &stable), n, row.one_change_s)
            .await?;
        row.one_abort_s = secs(breach, reverted);
        if let Ok(mut f) = self.failing.lock() {
            f.clear();
        }
        Ok(())
    }

    /// The MWRS of `which` get version `k` at once: the time until every one of their
    /// ManifestWorks carries it (each MWRS promoted after), how many do, and the CPU of
    /// each process over that time. With a `window`, measured over it at most: past it,
    /// the time is the window's and the count those changed by then (the hub may still be
    /// writing the rest). The controller's peak is reset first, so that its peak after is
    /// this phase's.
    async fn change_at_once(
        &self,
        which: std::ops::Range<usize>,
        k: usize,
        n: usize,
        window: Option<Duration>,
        p: &Proc,
    ) -> anyhow::Result<Changed> {
        p.reset_peak()?;
        let t0 = Instant::now();
        for i in which.clone() {
            self.set_version(NS, &name(i), &version(i, k)).await?;
        }
        let versions: Vec<String> = which.clone().map(|i| version(i, k)).collect();
        let all = versions.len() * n;
        let changed = |done: Instant, works: usize| Changed {
            s: secs(t0, done),
            works,
            cpu: self.cpu.between(t0, done),
        };
        let Some(window) = window else {
            let done = self.wait_versions(&versions, n).await?;
            for i in which {
                self.wait_complete(&name(i), n).await?;
            }
            return Ok(changed(done, all));
        };
        let left = window.saturating_sub(t0.elapsed());
        if let Ok(done) = tokio::time::timeout(left, self.wait_versions(&versions, n)).await {
            return Ok(changed(done?, all));
        }
        let works = versions.iter().map(|v| self.tracker.count(v)).sum();
        let c = changed(Instant::now(), works);
        eprintln!(
            "   every MWRS at once: {works} ManifestWorks changed in {:.0} s",
            c.s
        );
        Ok(c)
    }

    /// Every MWRS gets a new template at once: the time, the peak, the queue delay and the
    /// requests by verb; with `--many-all-window`, over that window from the change.
    async fn all_change(
        &self,
        count: usize,
        n: usize,
        p: &Proc,
        addr: &str,
        row: &mut ManyRow,
    ) -> anyhow::Result<()> {
        let before = http_get(addr, "/metrics").await.unwrap_or_default();
        let window =
            (self.args.many_all_window > 0).then(|| Duration::from_secs(self.args.many_all_window));
        let all = self.change_at_once(0..count, 4, n, window, p).await?;
        (row.all_change_s, row.all_change_works, row.all_cpu) = (all.s, all.works, all.cpu);
        row.all_peak_rss_bytes = p.peak_rss()?;
        let after = http_get(addr, "/metrics").await.unwrap_or_default();
        let delay = "mwrs_controller_queue_delay_seconds";
        (row.queue_delay_p50_s, row.queue_delay_passes) =
            histogram_quantile(&before, &after, delay, 0.5);
        row.queue_delay_p99_s = histogram_quantile(&before, &after, delay, 0.99).0;
        row.all_change_requests = per_verb(&before, &after, REQUESTS, row.all_change_s);
        row.all_change_conflicts = refused_writes(&after).1 - refused_writes(&before).1;
        Ok(())
    }

    /// The replica stops as in a rollout (SIGTERM: it releases the Lease) and a new one
    /// starts over every ManifestWork: time to its first passes over every MWRS done and
    /// to ready, against the bench's client listing them (pages of 500); its start-up
    /// peak, and its writes (none are due).
    async fn restart_many(&self, count: usize, p: Proc, row: &mut ManyRow) -> anyhow::Result<Proc> {
        p.terminate().await;
        let t0 = Instant::now();
        let (p, addr) = self
            .start_many_controller("controller-many-restart.log")
            .await?;
        row.restart_ready_s = t0.elapsed().as_secs_f64();
        let (writes, passed) = self.first_passes_done(&addr, count).await?;
        row.restart_writes = writes;
        row.cold_start_s = secs(t0, passed);
        row.startup_peak_rss_bytes = p.peak_rss()?;
        let t0 = Instant::now();
        let api = Api::<ManifestWork>::all(self.client.clone());
        let mut lp = ListParams::default().labels(labels::MWRS_OWNER).limit(500);
        let mut listed = 0;
        loop {
            let page = api.list(&lp).await?;
            listed += page.items.len();
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(c) => lp = lp.continue_token(&c),
                None => break,
            }
        }
        row.list_works_s = t0.elapsed().as_secs_f64();
        eprintln!("   listed {listed} ManifestWorks");
        Ok(p)
    }

    /// The gaps between the Lease's renewals by one holder.
    fn lease_gaps(&self, gaps: &[f64], row: &mut ManyRow) {
        row.lease_gaps = gaps.len();
        row.lease_gap_p50_s = measure::quantile(gaps, 0.5).unwrap_or(f64::NAN);
        row.lease_gap_p99_s = measure::quantile(gaps, 0.99).unwrap_or(f64::NAN);
        row.lease_gap_max_s = measure::quantile(gaps, 1.0).unwrap_or(f64::NAN);
    }
}
