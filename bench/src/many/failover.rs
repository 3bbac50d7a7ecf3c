//! The failover phase: a standby replica joins; one MWRS changes; once a third of its
//! ManifestWorks carry the change, the leader is killed (SIGKILL: it neither finishes its
//! writes nor releases the Lease). Measured: the kill to the standby's first ManifestWork
//! write (the Lease expiring, then the standby's cold start), to the last ManifestWork
//! changed, the writes the standby repeated (those beyond what was left at the kill; the
//! dead leader's in-flight writes may land after it, so the standby may write fewer), and
//! the standby's peak RSS from its start to the end of the fan-out.

use std::time::{Duration, Instant};

use anyhow::bail;

use super::{NS, name, secs, until_exit, version};
use crate::process::{Proc, http_get, manifestwork_writes};
use crate::sizes::Bench;

/// What the failover measured.
#[derive(Debug, Default, Clone)]
pub struct Failover {
    /// ManifestWorks of the MWRS not yet changed when the leader was killed.
    pub left_at_kill: usize,
    pub kill_to_first_write_s: f64,
    pub kill_to_done_s: f64,
    /// ManifestWork writes the standby made, and those beyond `left_at_kill`.
    pub standby_writes: f64,
    pub repeated_writes: f64,
    pub standby_peak_rss_bytes: u64,
}

/// The MWRS that changes during the failover, and its version then.
const WHICH: usize = 1;
const VERSION: usize = 6;

/// The standby's ManifestWork writes so far (any result).
async fn work_writes(addr: &str) -> Option<f64> {
    Some(manifestwork_writes(&http_get(addr, "/metrics").await?))
}

impl Bench {
    /// Runs the failover with `leader` leading; returns the new leader and its metrics
    /// address.
    pub(super) async fn failover(
        &self,
        n: usize,
        leader: Proc,
        row: &mut super::ManyRow,
    ) -> anyhow::Result<(Proc, String)> {
        let log = "controller-many-standby.log";
        let (standby, addr) = self.start_many_controller(log).await?;
        // A standby that exits ends the phase: nothing else would write.
        until_exit(
            &standby,
            log,
            self.kill_leader(n, leader, &addr, &mut row.failover),
        )
        .await?;
        let f = &mut row.failover;
        f.standby_peak_rss_bytes = standby.peak_rss()?;
        eprintln!(
            "   failover: first write {:.1}s after the kill, last {:.1}s; the standby wrote {} ({} repeated)",
            f.kill_to_first_write_s, f.kill_to_done_s, f.standby_writes, f.repeated_writes
        );
        Ok((standby, addr))
    }

    /// One MWRS changes; the leader is killed a third of the way, and the standby at
    /// `addr` finishes it.
    async fn kill_leader(
        &self,
        n: usize,
        leader: Proc,
        addr: &str,
        f: &mut Failover,
    ) -> anyhow::Result<()> {
        let target = version(WHICH, VERSION);
        self.set_version(NS, &name(WHICH), &target).await?;
        let third = n / 3;
        self.tracker
            .until(&format!("{third} works on {target}"), self.timeout(), |s| {
                s.count(&target) >= third
            })
            .await?;
        f.left_at_kill = n.saturating_sub(self.tracker.count(&target));
        let killed = Instant::now();
        leader.stop().await;
        eprintln!(
            "   failover: leader killed with {} of {n} ManifestWorks left",
            f.left_at_kill
        );
        loop {
            if work_writes(addr).await.is_some_and(|w| w > 0.0) {
                f.kill_to_first_write_s = killed.elapsed().as_secs_f64();
                break;
            }
            if killed.elapsed() > self.timeout() {
                bail!("the standby wrote nothing within {:?}", self.timeout());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        f.kill_to_done_s = secs(killed, self.wait_version(&target, n).await?);
        self.wait_complete(&name(WHICH), n).await?;
        f.standby_writes = work_writes(addr).await.unwrap_or(f64::NAN);
        f.repeated_writes = (f.standby_writes - f.left_at_kill as f64).max(0.0);
        Ok(())
    }
}
