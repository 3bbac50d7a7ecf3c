//! Abort: a bad revision reaches every one of the N ManifestWorks, then the last cluster
//! degrades; timed from the breach (the first Degraded status on the bad revision) until
//! every ManifestWork is back on the stable revision, and until every agent has answered
//! it there (the time back to stable), each round after a bare update of its own, with
//! the CPU of each process in both.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{AbortRound, Bench, Window};

/// How long after a start (a bare update's first write, an abort's breach) the agents had
/// answered a version: the last of them, and the median and 99th percentile of each
/// ManifestWork's answer.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Answered {
    pub(crate) whole_s: f64,
    pub(crate) p50_s: f64,
    pub(crate) p99_s: f64,
}

impl Answered {
    fn of(mut delays: Vec<f64>) -> Self {
        delays.sort_by(f64::total_cmp);
        let at = |q: f64| {
            let i = ((delays.len() as f64 * q).ceil() as usize).saturating_sub(1);
            delays.get(i).copied().unwrap_or_default()
        };
        Self {
            whole_s: delays.last().copied().unwrap_or_default(),
            p50_s: at(0.50),
            p99_s: at(0.99),
        }
    }

    /// `whole (p50 …, p99 …)`, seconds.
    pub(crate) fn text(&self) -> String {
        format!(
            "{:.2}s (p50 {:.2}s, p99 {:.2}s)",
            self.whole_s, self.p50_s, self.p99_s
        )
    }

    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::json!({"whole_s": self.whole_s, "p50_s": self.p50_s, "p99_s": self.p99_s})
    }
}

impl Bench {
    /// One abort round after the first, alternated with the bare client: the bare update
    /// of `n`, then a new bad revision that reaches every cluster before the last one
    /// degrades, and its revert to v2.
    pub(super) async fn abort_round(
        &self,
        n: usize,
        ns: &str,
        round: usize,
        fanout_s: f64,
    ) -> anyhow::Result<AbortRound> {
        let (_, bare, bare_answered) = self
            .bare_versions(n, &format!("b{round}-v1"), &format!("b{round}-v2"))
            .await?;
        // The agent degrades a failing cluster's revision ending in v3.
        let bad = format!("r{round}-v3");
        let (breach, reverted) = self.abort_to(ns, "app", (&bad, "v2"), n, fanout_s).await?;
        let back = self.answered("v2", n, breach).await?;
        Ok(self.round((bare, bare_answered), (breach, reverted), back))
    }

    /// The round of a bare update (and its agents' answers) and an abort from `breach`
    /// to `reverted` (and back to stable).
    pub(super) fn round(
        &self,
        (bare, bare_answered): (Window, Answered),
        (breach, reverted): (Instant, Instant),
        back: Answered,
    ) -> AbortRound {
        let abort = Window {
            from: breach,
            to: reverted,
        };
        AbortRound {
            bare_s: bare.secs(),
            abort_s: abort.secs(),
            bare_cpu: self.cpu.between(bare.from, bare.to),
            abort_cpu: self.cpu.between(abort.from, abort.to),
            bare_answered,
            back,
        }
    }

    /// Waits until every one of the `n` ManifestWorks on `version` is answered by its
    /// agent; how long after `from` each answer and the last one came.
    pub(crate) async fn answered(
        &self,
        version: &str,
        n: usize,
        from: Instant,
    ) -> anyhow::Result<Answered> {
        let what = format!("{n} works answered on {version}");
        self.tracker
            .until(&what, self.timeout(), |s| s.answered(version) >= n)
            .await?;
        let delays = self
            .tracker
            .seen
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?
            .answer_delays(version, from);
        Ok(Answered::of(delays))
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
    pub(crate) async fn abort_to(
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
}
