//! One MWRS changing against the bare client (issue #36's fan-out target): rounds of the
//! bare client's update of one name's ManifestWorks, then one MWRS's change of as many,
//! back to back on the same hub (every ManifestWork created, the controller's watches
//! open). Each side of a round carries the CPU of every process over its window, the time
//! to its first ManifestWork seen changed and what the hub served, so that a slower
//! fan-out can be told apart as a late start, more writes or watch events, or CPU taken
//! from the hub.

use std::future::Future;
use std::time::Instant;

use anyhow::bail;

use super::{ManyRow, NS, bare_name, bare_update, bare_version, name, secs, version};
use crate::cpu::Split;
use crate::measure;
use crate::process::{http_get, hub_metrics, manifestwork_writes, metric_sum_with};
use crate::sizes::Bench;

/// The controller's round `r` moves the last MWRS to version `FIRST_VERSION + r` (clear
/// of the versions the other phases use).
const FIRST_VERSION: usize = 20;
/// The bare client's round `r` moves its first name to version `FIRST_BARE_VERSION + r`
/// (after its create, update of all and update of one).
const FIRST_BARE_VERSION: usize = 4;

/// One side of a round: `n` ManifestWorks moved to a new template.
#[derive(Debug, Default, Clone, Copy)]
pub struct Moved {
    /// From the first write sent (bare) or the template changed (controller) to the
    /// last ManifestWork seen on the new template.
    pub s: f64,
    /// To the first ManifestWork seen on it.
    pub first_s: f64,
    pub cpu: Split,
    pub hub: HubTraffic,
}

impl Moved {
    /// `54.13 s (first after 0.08 s; hub 90.1 s, …; 3000 + 3000 status writes, …)`.
    fn text(&self) -> String {
        format!(
            "{:.2} s (first after {:.2} s; {}; {})",
            self.s,
            self.first_s,
            self.cpu.text(self.s),
            self.hub.text()
        )
    }
}

/// What the hub served over a window, from its own metrics: writes of ManifestWorks
/// (their spec, their status) and of MWRS, and the ManifestWork watch events it sent.
#[derive(Debug, Default, Clone, Copy)]
pub struct HubTraffic {
    pub work_writes: f64,
    pub work_status_writes: f64,
    pub mwrs_writes: f64,
    pub work_watch_events: f64,
    pub work_watch_bytes: f64,
}

impl HubTraffic {
    /// The hub's counts in `text` (its metrics).
    fn of(text: &str) -> Self {
        let requests = |resource: &str, subresource: &str| {
            ["POST", "PUT", "PATCH"]
                .iter()
                .map(|verb| {
                    metric_sum_with(
                        text,
                        "apiserver_request_total",
                        &[
                            &format!("resource=\"{resource}\""),
                            &format!("subresource=\"{subresource}\""),
                            &format!("verb=\"{verb}\""),
                        ],
                    )
                })
                .sum::<f64>()
        };
        let works = ["resource=\"manifestworks\""];
        Self {
            work_writes: requests("manifestworks", ""),
            work_status_writes: requests("manifestworks", "status"),
            mwrs_writes: requests("manifestworkreplicasets", "")
                + requests("manifestworkreplicasets", "status"),
            work_watch_events: metric_sum_with(text, "apiserver_watch_events_total", &works),
            work_watch_bytes: metric_sum_with(text, "apiserver_watch_events_sizes_sum", &works),
        }
    }

    fn since(self, before: Self) -> Self {
        Self {
            work_writes: self.work_writes - before.work_writes,
            work_status_writes: self.work_status_writes - before.work_status_writes,
            mwrs_writes: self.mwrs_writes - before.mwrs_writes,
            work_watch_events: self.work_watch_events - before.work_watch_events,
            work_watch_bytes: self.work_watch_bytes - before.work_watch_bytes,
        }
    }

    fn text(&self) -> String {
        format!(
            "the hub: {:.0} + {:.0} status ManifestWork writes, {:.0} MWRS writes, {:.0} watch events ({:.1} MB)",
            self.work_writes,
            self.work_status_writes,
            self.mwrs_writes,
            self.work_watch_events,
            self.work_watch_bytes / 1e6
        )
    }
}

/// The bare client's update, then the controller's fan-out, back to back.
#[derive(Debug, Default, Clone, Copy)]
pub struct OneRound {
    pub bare: Moved,
    pub change: Moved,
}

impl OneRound {
    pub fn ratio(&self) -> f64 {
        self.change.s / self.bare.s.max(f64::EPSILON)
    }
}

/// The median of the rounds' `f` (0 for none).
pub(super) fn median_of(rounds: &[OneRound], f: impl Fn(&OneRound) -> f64) -> f64 {
    let values: Vec<f64> = rounds.iter().map(f).collect();
    // The lower middle for an even count: nearest rank, as every other quantile here.
    measure::quantile(&values, 0.5).unwrap_or(0.0)
}

impl Bench {
    /// `rounds` rounds over the last MWRS (the others stay put, and none of their
    /// ManifestWorks may be written).
    pub(super) async fn one_change_rounds(
        &self,
        count: usize,
        n: usize,
        rounds: usize,
        addr: &str,
        row: &mut ManyRow,
    ) -> anyhow::Result<()> {
        let i = count - 1;
        let before = http_get(addr, "/metrics").await.unwrap_or_default();
        for r in 0..rounds {
            let bare_to = bare_version(0, FIRST_BARE_VERSION + r);
            let bare = self
                .moved(&bare_to, n, async {
                    let to = FIRST_BARE_VERSION + r;
                    self.each_work(1, n, |api, j| bare_update(api, j, to)).await
                })
                .await?;
            // Its agent's last answers are the bare side's work: they must not fall in
            // the controller's window (as the controller's fall in neither: it waits for
            // its MWRS to complete below).
            self.tracker
                .until("the bare update answered", self.timeout(), |s| {
                    s.answered(&bare_to) >= n
                })
                .await?;
            let to = version(i, FIRST_VERSION + r);
            let change = self
                .moved(&to, n, async {
                    self.set_version(NS, &name(i), &to).await?;
                    Ok(())
                })
                .await?;
            self.wait_complete(&name(i), n).await?;
            let round = OneRound { bare, change };
            eprintln!(
                "   round {}: bare update of {n} ({}) {}; one MWRS changes {} ({:.2}×)",
                r + 1,
                bare_name(0),
                bare.text(),
                change.text(),
                round.ratio()
            );
            row.one_rounds.push(round);
        }
        row.bare_update_one_beside_s = median_of(&row.one_rounds, |r| r.bare.s);
        row.one_change_s = median_of(&row.one_rounds, |r| r.change.s);
        let after = http_get(addr, "/metrics").await.unwrap_or_default();
        let written = manifestwork_writes(&after) - manifestwork_writes(&before);
        row.one_change_other_writes = written - (rounds * n) as f64;
        self.untouched_but(i, n)
    }

    /// Runs `write` and waits for `n` ManifestWorks on version `to`.
    async fn moved(
        &self,
        to: &str,
        n: usize,
        write: impl Future<Output = anyhow::Result<()>>,
    ) -> anyhow::Result<Moved> {
        let before = self.hub_traffic().await;
        let t0 = Instant::now();
        write.await?;
        let done = self.wait_version(to, n).await?;
        let hub = self.hub_traffic().await.since(before);
        let first = self
            .tracker
            .seen
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?
            .first_moved_to
            .get(to)
            .copied()
            .unwrap_or(done);
        Ok(Moved {
            s: secs(t0, done),
            first_s: secs(t0, first),
            cpu: self.cpu.between(t0, done),
            hub,
        })
    }

    /// The hub's traffic counts now (0 when its metrics cannot be read).
    async fn hub_traffic(&self) -> HubTraffic {
        let text = hub_metrics(&self.client).await.unwrap_or_default();
        HubTraffic::of(&text)
    }

    /// Every MWRS before `i` still has its `n` ManifestWorks on its first version.
    fn untouched_but(&self, i: usize, n: usize) -> anyhow::Result<()> {
        let seen = self
            .tracker
            .seen
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?;
        if let Some(v) = (0..i).map(|j| version(j, 1)).find(|v| seen.count(v) != n) {
            bail!("a change of {} moved ManifestWorks of version {v}", name(i));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hubs_traffic_is_read_from_its_own_counters() {
        let line = |resource: &str, sub: &str, verb: &str, v: u32| {
            format!(
                "apiserver_request_total{{code=\"200\",component=\"apiserver\",group=\"work.open-cluster-management.io\",resource=\"{resource}\",scope=\"resource\",subresource=\"{sub}\",verb=\"{verb}\",version=\"v1\"}} {v}\n"
            )
        };
        let text = |k: u32| {
            [
                line("manifestworks", "", "PATCH", 100 * k),
                line("manifestworks", "", "POST", 7),
                line("manifestworks", "", "GET", 999 * k),
                line("manifestworks", "status", "PATCH", 90 * k),
                line("manifestworkreplicasets", "status", "PATCH", 3 * k),
                line("manifestworkreplicasets", "", "PATCH", k),
                format!("apiserver_watch_events_total{{group=\"work.open-cluster-management.io\",resource=\"manifestworks\",version=\"v1\"}} {}\n", 400 * k),
                format!("apiserver_watch_events_sizes_sum{{group=\"work.open-cluster-management.io\",resource=\"manifestworks\",version=\"v1\"}} {}\n", 1_200_000 * k),
                format!("apiserver_watch_events_total{{group=\"\",resource=\"leases\",version=\"v1\"}} {}\n", 50 * k),
            ]
            .concat()
        };
        let t = HubTraffic::of(&text(2)).since(HubTraffic::of(&text(1)));
        assert_eq!(t.work_writes, 100.0, "reads are not writes");
        assert_eq!(t.work_status_writes, 90.0);
        assert_eq!(t.mwrs_writes, 4.0);
        assert_eq!(t.work_watch_events, 400.0, "only ManifestWorks' events");
        assert_eq!(t.work_watch_bytes, 1_200_000.0);
    }
}
