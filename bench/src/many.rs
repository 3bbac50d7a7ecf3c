//! The many-MWRS benchmark (issue #16 item 2): `count` MWRS over the same `n` clusters,
//! each with a template of its own (`count × n` ManifestWorks), on one controller, each
//! phase against a plain client doing the same writes in the same run:
//!
//! - bare client: creates `count × n` ManifestWorks, updates them all, then the `n` of one
//!   name only (the references);
//! - create: the MWRS in two halves, steady RSS after each (the slope per ManifestWork and
//!   the projection to 300,000);
//! - idle: reconciles and writes per minute with nothing changing (must be 0 / 0);
//! - one change: the template of one MWRS; its `n` ManifestWorks against the bare update
//!   of `n`, and the writes to every other ManifestWork (must be 0);
//! - one abort: another MWRS's new template degrades on one cluster (`AbortAll`): breach
//!   to every one of its ManifestWorks back, against the bare update of `n`;
//! - all change: every MWRS at once, against the bare update of all;
//! - restart: time to ready against the bench's client listing the same ManifestWorks, and
//!   the start-up peak against the steady RSS.
//!
//! MWRS `app-NN` carries version `aNN-vK`; the tracker counts ManifestWorks per version,
//! so every wait is on one MWRS's ManifestWorks.

use std::time::{Duration, Instant};

use anyhow::bail;
use futures::{StreamExt, TryStreamExt, stream};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use mwrs_api::labels;
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_api::work::ManifestWork;
use mwrs_fleet::placement::{self, DecisionGroup};
use serde_json::{Value, json};

use crate::fleet_view::template;
use crate::process::{Proc, controller_counts, http_get, metric_sum_with};
use crate::sizes::Bench;

const NS: &str = "bench-many";

/// What one many-MWRS run measured.
#[derive(Debug, Default, Clone)]
pub struct ManyRow {
    pub count: usize,
    pub clusters: usize,
    pub bare_create_s: f64,
    pub bare_update_all_s: f64,
    pub bare_update_one_s: f64,
    pub create_s: f64,
    /// Steady RSS with half the MWRS, and with all of them.
    pub half_steady_rss_bytes: u64,
    pub steady_rss_bytes: u64,
    pub idle_reconciles_per_min: f64,
    pub idle_writes_per_min: f64,
    pub one_change_s: f64,
    /// ManifestWork writes the controller made during the one change beyond the `n` of
    /// the changed MWRS.
    pub one_change_other_writes: f64,
    pub one_abort_s: f64,
    pub all_change_s: f64,
    pub peak_rss_bytes: u64,
    pub restart_ready_s: f64,
    pub list_works_s: f64,
    pub startup_peak_rss_bytes: u64,
    pub restart_writes: f64,
}

fn name(i: usize) -> String {
    format!("app-{i:02}")
}

fn version(i: usize, k: usize) -> String {
    format!("a{i:02}-v{k}")
}

impl Bench {
    /// The whole many-MWRS run.
    pub async fn many(&self, count: usize, n: usize) -> anyhow::Result<ManyRow> {
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
            ..Default::default()
        };
        eprintln!("== {count} MWRS × {n} clusters: bare client");
        self.bare_many(count, n, &mut row).await?;
        eprintln!(
            "   create {:.2}s, update all {:.2}s, update {n} {:.2}s",
            row.bare_create_s, row.bare_update_all_s, row.bare_update_one_s
        );
        eprintln!("== {count} MWRS × {n} clusters: controller");
        let (p, addr) = self.start_controller(NS, "controller-many.log").await?;
        self.create_many(count, n, &p, &mut row).await?;
        self.idle_many(&addr, &mut row).await?;
        self.one_change(count, n, &addr, &mut row).await?;
        self.one_abort(n, &mut row).await?;
        self.all_change(count, n, &mut row).await?;
        row.peak_rss_bytes = p.peak_rss()?;
        let p = self.restart_many(count, p, &mut row).await?;
        for i in 0..count {
            self.mwrs_api(NS)
                .delete(&name(i), &DeleteParams::default())
                .await?;
        }
        self.wait_no_works().await?;
        p.stop().await;
        Ok(row)
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

    /// The references: a plain client creating and updating the same ManifestWorks.
    async fn bare_many(&self, count: usize, n: usize, row: &mut ManyRow) -> anyhow::Result<()> {
        let bare = |j: usize, k: usize| format!("b{j:02}-v{k}");
        let t0 = Instant::now();
        self.each_work(count, n, |api, j| async move {
            let mw: ManifestWork = serde_json::from_value(json!({
                "apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
                "metadata": {"name": format!("bare-{j:02}"), "labels": {"mwrs-bench": "bare"}},
                "spec": template(&bare(j, 1)),
            }))
            .map_err(kube::Error::SerdeError)?;
            api.create(&PostParams::default(), &mw).await.map(|_| ())
        })
        .await?;
        let all = |k: usize| (0..count).map(|j| bare(j, k)).collect::<Vec<_>>();
        row.bare_create_s = (self.wait_versions(&all(1), n).await? - t0).as_secs_f64();
        let update = |api: Api<ManifestWork>, j: usize, k: usize| async move {
            let body = json!({"spec": template(&bare(j, k))});
            api.patch(
                &format!("bare-{j:02}"),
                &PatchParams::default(),
                &Patch::Merge(&body),
            )
            .await
            .map(|_| ())
        };
        let t0 = Instant::now();
        self.each_work(count, n, |api, j| update(api, j, 2)).await?;
        row.bare_update_all_s = (self.wait_versions(&all(2), n).await? - t0).as_secs_f64();
        let t0 = Instant::now();
        self.each_work(1, n, |api, j| update(api, j, 3)).await?;
        row.bare_update_one_s = (self.wait_version(&bare(0, 3), n).await? - t0).as_secs_f64();
        self.each_work(count, n, |api, j| async move {
            api.delete(&format!("bare-{j:02}"), &DeleteParams::default())
                .await
                .map(|_| ())
        })
        .await?;
        self.wait_no_works().await
    }

    /// Creates the MWRS in two halves, the steady RSS after each. `app-00` aborts on a
    /// failure (`AbortAll`); the others tolerate none.
    async fn create_many(
        &self,
        count: usize,
        n: usize,
        p: &Proc,
        row: &mut ManyRow,
    ) -> anyhow::Result<()> {
        let half = count / 2;
        row.create_s = 0.0;
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
            row.create_s += (self.wait_versions(&versions, n).await? - t0).as_secs_f64();
            for i in range.clone() {
                self.wait_complete(&name(i), n).await?;
            }
            // jemalloc's background threads return freed pages within its decay time.
            tokio::time::sleep(Duration::from_secs(15)).await;
            if range.start == 0 {
                row.half_steady_rss_bytes = p.rss()?;
            } else {
                row.steady_rss_bytes = p.rss()?;
            }
        }
        Ok(())
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

    /// The template of the last MWRS changes; the others stay put.
    async fn one_change(
        &self,
        count: usize,
        n: usize,
        addr: &str,
        row: &mut ManyRow,
    ) -> anyhow::Result<()> {
        let i = count - 1;
        let before = http_get(addr, "/metrics").await.unwrap_or_default();
        let t0 = Instant::now();
        self.set_version(NS, &name(i), &version(i, 2)).await?;
        row.one_change_s = (self.wait_version(&version(i, 2), n).await? - t0).as_secs_f64();
        self.wait_complete(&name(i), n).await?;
        let after = http_get(addr, "/metrics").await.unwrap_or_default();
        let works = ["resource=\"manifestwork\""];
        let written = metric_sum_with(&after, "mwrs_controller_writes_total", &works)
            - metric_sum_with(&before, "mwrs_controller_writes_total", &works);
        row.one_change_other_writes = written - n as f64;
        let untouched: Vec<String> = (0..i).map(|j| version(j, 1)).collect();
        let seen = self
            .tracker
            .seen
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?;
        if let Some(v) = untouched.iter().find(|v| seen.count(v) != n) {
            bail!("a change of {} moved ManifestWorks of version {v}", name(i));
        }
        Ok(())
    }

    /// `app-00`'s new template degrades on the last cluster once every cluster has it:
    /// from the breach to every one of its ManifestWorks back on the stable version.
    async fn one_abort(&self, n: usize, row: &mut ManyRow) -> anyhow::Result<()> {
        let (stable, next) = (version(0, 1), version(0, 3));
        let (breach, reverted) = self
            .abort_to(NS, &name(0), (&next, &stable), n, row.one_change_s)
            .await?;
        row.one_abort_s = (reverted - breach).as_secs_f64();
        if let Ok(mut f) = self.failing.lock() {
            f.clear();
        }
        Ok(())
    }

    /// Every MWRS gets a new template at once.
    async fn all_change(&self, count: usize, n: usize, row: &mut ManyRow) -> anyhow::Result<()> {
        let t0 = Instant::now();
        for i in 0..count {
            self.set_version(NS, &name(i), &version(i, 4)).await?;
        }
        let versions: Vec<String> = (0..count).map(|i| version(i, 4)).collect();
        row.all_change_s = (self.wait_versions(&versions, n).await? - t0).as_secs_f64();
        for i in 0..count {
            self.wait_complete(&name(i), n).await?;
        }
        Ok(())
    }

    /// A new controller over every ManifestWork: time to ready against the bench's client
    /// listing them (pages of 500), its start-up peak, and its writes (none are due).
    async fn restart_many(&self, count: usize, p: Proc, row: &mut ManyRow) -> anyhow::Result<Proc> {
        p.stop().await;
        let t0 = Instant::now();
        let (p, addr) = self
            .start_controller(NS, "controller-many-restart.log")
            .await?;
        row.restart_ready_s = t0.elapsed().as_secs_f64();
        row.restart_writes = self.first_passes_done(&addr, count).await?;
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
}

pub fn print(r: &ManyRow) {
    let works = r.count * r.clusters;
    let mib = |b: u64| b as f64 / 1_048_576.0;
    println!(
        "\n{} MWRS × {} clusters = {works} ManifestWorks",
        r.count, r.clusters
    );
    println!("| phase | controller | reference (same run) | ratio |");
    println!("|---|---|---|---|");
    let line = |what: &str, ours: f64, reference: f64, what_ref: &str| {
        println!(
            "| {what} | {ours:.2} s | {reference:.2} s ({what_ref}) | {:.2} |",
            ours / reference
        );
    };
    line(
        "create every MWRS",
        r.create_s,
        r.bare_create_s,
        "bare create of all",
    );
    line(
        "one MWRS changes",
        r.one_change_s,
        r.bare_update_one_s,
        "bare update of one name",
    );
    line(
        "one MWRS aborts",
        r.one_abort_s,
        r.bare_update_one_s,
        "bare update of one name",
    );
    line(
        "every MWRS changes",
        r.all_change_s,
        r.bare_update_all_s,
        "bare update of all",
    );
    line(
        "restart to ready",
        r.restart_ready_s,
        r.list_works_s,
        "bench client lists them",
    );
    println!(
        "idle: {:.1} reconciles/min, {:.1} writes/min; one change wrote {} ManifestWorks of other MWRS",
        r.idle_reconciles_per_min, r.idle_writes_per_min, r.one_change_other_writes
    );
    let half = (r.count / 2 * r.clusters) as f64;
    let slope =
        (r.steady_rss_bytes as f64 - r.half_steady_rss_bytes as f64) / (works as f64 - half);
    let fixed = r.steady_rss_bytes as f64 - slope * works as f64;
    println!(
        "RSS: steady {:.1} MiB ({:.1} MiB at {half}), {slope:.0} B per ManifestWork, projected at 300,000: {:.0} MiB; start-up peak {:.1} MiB ({:.2}x steady), {} writes after restart; peak {:.1} MiB",
        mib(r.steady_rss_bytes),
        mib(r.half_steady_rss_bytes),
        (fixed + slope * 300_000.0) / 1_048_576.0,
        mib(r.startup_peak_rss_bytes),
        r.startup_peak_rss_bytes as f64 / r.steady_rss_bytes as f64,
        r.restart_writes,
        mib(r.peak_rss_bytes),
    );
}

pub fn json(r: &ManyRow) -> Value {
    json!({
        "mwrs": r.count, "clusters": r.clusters,
        "bare_create_s": r.bare_create_s, "bare_update_all_s": r.bare_update_all_s,
        "bare_update_one_s": r.bare_update_one_s, "create_s": r.create_s,
        "half_steady_rss_bytes": r.half_steady_rss_bytes, "steady_rss_bytes": r.steady_rss_bytes,
        "idle_reconciles_per_min": r.idle_reconciles_per_min,
        "idle_writes_per_min": r.idle_writes_per_min,
        "one_change_s": r.one_change_s, "one_change_other_writes": r.one_change_other_writes,
        "one_abort_s": r.one_abort_s, "all_change_s": r.all_change_s,
        "peak_rss_bytes": r.peak_rss_bytes, "restart_ready_s": r.restart_ready_s,
        "list_works_s": r.list_works_s, "startup_peak_rss_bytes": r.startup_peak_rss_bytes,
        "restart_writes": r.restart_writes,
    })
}
