//! Abort: a bad revision reaches every one of the N ManifestWorks, then the last cluster
//! degrades; timed from the breach (the first Degraded status on the bad revision) until
//! every ManifestWork is back on the stable revision, each round after a bare update of
//! its own, with the CPU of each process in both.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{AbortRound, Bench, Window};

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
        let (_, bare) = self
            .bare_versions(n, &format!("b{round}-v1"), &format!("b{round}-v2"))
            .await?;
        // The agent degrades a failing cluster's revision ending in v3.
        let bad = format!("r{round}-v3");
        let (breach, reverted) = self.abort_to(ns, "app", (&bad, "v2"), n, fanout_s).await?;
        Ok(self.round(bare, (breach, reverted)))
    }

    /// The round of a bare update and an abort from `breach` to `reverted`.
    pub(super) fn round(&self, bare: Window, (breach, reverted): (Instant, Instant)) -> AbortRound {
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
