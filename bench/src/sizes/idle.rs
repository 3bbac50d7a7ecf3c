//! Idle cost: a process's CPU and the hub's requests per minute with nothing changing, and
//! the controller's passes and writes per minute while 1% of the clusters never answer
//! the latest revision.

use std::time::{Duration, Instant};

use super::{Bench, Row};
use crate::process::{Proc, controller_counts, hub_requests};

impl Bench {
    pub(super) async fn idle(&self, p: Option<&Proc>) -> anyhow::Result<(f64, f64)> {
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

    /// 1% of the clusters never answer a new revision (rules §11.1): once every
    /// ManifestWork carries it, the controller writes nothing more.
    pub(super) async fn idle_with_silent_clusters(
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
}
