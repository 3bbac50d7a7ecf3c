//! The controller phase of a size: its create and fan-out (with the Lease renewals under
//! `--leader-elect`), the abort rounds, idle, peak RSS, then a restart over the same N
//! ManifestWorks (start-up RSS and writes) and the CLI's reads of the rollout.

use std::time::{Duration, Instant};

use anyhow::bail;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use mwrs_api::labels;
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_api::work::ManifestWork;
use tokio::process::Command;

use super::{AbortRound, Bench, READY_WITHIN, Row, median};
use crate::lease;
use crate::process::{Proc, controller_counts, http_get, metric_sum_with};

/// Has the MWRS promoted its update revision (current and update revision the same)?
fn complete(m: &ManifestWorkReplicaSet) -> bool {
    m.status
        .as_ref()
        .is_some_and(|s| s.current_revision.is_some() && s.current_revision == s.update_revision)
}

impl Bench {
    pub(super) async fn controller(&self, n: usize, ns: &str, row: &mut Row) -> anyhow::Result<()> {
        // With --leader-elect, as a production replica runs, and its Lease renewals watched
        // through the fan-out.
        let election = ["--leader-elect", "--lease-namespace", ns].map(String::from);
        let extra: &[String] = if self.args.leader_elect {
            &election
        } else {
            &[]
        };
        let (p, addr) = self
            .start_controller_with(ns, &format!("controller-{n}.log"), extra, READY_WITHIN)
            .await?;
        let renewals = lease::Renewals::watch(&self.client, ns).await;
        self.create(n, ns, row).await?;
        self.fan_out(n, ns, &renewals, row).await?;
        self.abort_rounds(n, ns, &addr, row).await?;
        self.idle_controller(n, ns, &p, &addr, row).await?;
        row.peak_rss_bytes = p.peak_rss()?;
        let p = self.restart(n, ns, p, row).await?;
        self.cli_reads(ns, row).await?;

        self.mwrs_api(ns)
            .delete("app", &DeleteParams::default())
            .await?;
        self.wait_no_works().await?;
        self.wait_gone(ns, "app").await?;
        p.stop().await;
        let (_, base) = self.idle(None).await?;
        row.baseline_requests_per_min = base;
        Ok(())
    }

    /// Creates the MWRS "app" on v1: the time until every cluster carries it, then its
    /// promotion.
    async fn create(&self, n: usize, ns: &str, row: &mut Row) -> anyhow::Result<()> {
        let t0 = Instant::now();
        self.mwrs_api(ns)
            .create(&PostParams::default(), &self.mwrs("app", "v1", true)?)
            .await?;
        row.create_s = (self.wait_version("v1", n).await? - t0).as_secs_f64();
        self.wait_mwrs(ns, "app", "complete on v1", complete)
            .await?;
        Ok(())
    }

    /// Moves "app" to v2: the time and CPU until every cluster carries it, the Lease's
    /// renewal gaps meanwhile, then its promotion.
    async fn fan_out(
        &self,
        n: usize,
        ns: &str,
        renewals: &lease::Renewals,
        row: &mut Row,
    ) -> anyhow::Result<()> {
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
        Ok(())
    }

    /// The `--abort-runs` rounds, each a bare update then an abort; the first one also
    /// with what the controller did meanwhile. The failing cluster recovers after.
    async fn abort_rounds(
        &self,
        n: usize,
        ns: &str,
        addr: &str,
        row: &mut Row,
    ) -> anyhow::Result<()> {
        row.abort_rounds = vec![self.first_abort_round(n, ns, addr, row).await?];
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
        Ok(())
    }

    /// The first round: a bare update, then v3 reaches every cluster; only then does
    /// one cluster report Degraded, so that the abort is timed on its own. With the
    /// controller's reconciles and writes during the abort, and where its time goes.
    async fn first_abort_round(
        &self,
        n: usize,
        ns: &str,
        addr: &str,
        row: &mut Row,
    ) -> anyhow::Result<AbortRound> {
        let (_, bare, bare_answered) = self.bare_versions(n, "b1-v1", "b1-v2").await?;
        let before_v3 = http_get(addr, "/metrics").await.unwrap_or_default();
        let (breach, reverted) = self
            .abort_to(ns, "app", ("v3", "v2"), n, row.fanout_s)
            .await?;
        row.abort_s = (reverted - breach).as_secs_f64();
        let after = http_get(addr, "/metrics").await.unwrap_or_default();
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
        let back = self.answered("v2", n, breach).await?;
        row.controller_back_to_stable_s = controller_back_to_stable(addr, &before_v3).await;
        Ok(self.round((bare, bare_answered), (breach, reverted), back))
    }

    /// The controller idle over N ManifestWorks: its CPU, the hub's requests, its own
    /// reconciles and writes per minute; then with 1% of the clusters silent.
    async fn idle_controller(
        &self,
        n: usize,
        ns: &str,
        p: &Proc,
        addr: &str,
        row: &mut Row,
    ) -> anyhow::Result<()> {
        // Settle: let the last status writes and rechecks pass before counting.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let (r0, w0) = controller_counts(addr).await;
        let (cpu, reqs) = self.idle(Some(p)).await?;
        let (r1, w1) = controller_counts(addr).await;
        row.idle_cpu_s_per_min = cpu;
        row.idle_requests_per_min = reqs;
        let mins = self.args.idle_secs as f64 / 60.0;
        row.idle_reconciles_per_min = (r1 - r0) / mins;
        row.idle_writes_per_min = (w1 - w0) / mins;
        self.idle_with_silent_clusters(n, ns, addr, row).await?;
        Ok(())
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
        row.restart_writes = self.first_passes_done(&addr, 1).await?.0;
        row.startup_peak_rss_bytes = p.peak_rss()?;
        Ok(p)
    }

    /// Waits until a started controller's first passes are done (at least `passes`
    /// reconciles, then none for 3 s); returns the writes it made by then, and when the
    /// last of those passes was seen.
    pub(crate) async fn first_passes_done(
        &self,
        addr: &str,
        passes: usize,
    ) -> anyhow::Result<(f64, Instant)> {
        let t0 = Instant::now();
        let mut last = (f64::NAN, Instant::now());
        loop {
            let (r, w) = controller_counts(addr).await;
            if r != last.0 {
                last = (r, Instant::now());
            } else if r >= passes as f64 && last.1.elapsed() > Duration::from_secs(3) {
                return Ok((w, last.1));
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
}

/// The abort's time back to stable as the controller at `addr` observed it once it wrote
/// the abort complete (its histogram's sum since `before`), waiting up to a minute.
async fn controller_back_to_stable(addr: &str, before: &str) -> Option<f64> {
    const SUM: &str = "mwrs_controller_abort_to_stable_seconds_sum";
    const COUNT: &str = "mwrs_controller_abort_to_stable_seconds_count";
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        let now = http_get(addr, "/metrics").await.unwrap_or_default();
        if metric_sum_with(&now, COUNT, &[]) > metric_sum_with(before, COUNT, &[]) {
            return Some(metric_sum_with(&now, SUM, &[]) - metric_sum_with(before, SUM, &[]));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    None
}
