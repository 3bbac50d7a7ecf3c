//! One MWRS changing against the bare client (issue #36's fan-out target): rounds of the
//! bare client's update of one name's ManifestWorks, then one MWRS's change of as many,
//! back to back on the same hub (every ManifestWork created, the controller's watches
//! open). Each side of a round carries the CPU of every process over its window and the
//! time to its first ManifestWork seen changed, so that a slower fan-out can be told
//! apart as a late start, a slower write rate, or CPU taken from the hub.

use std::future::Future;
use std::time::Instant;

use anyhow::bail;

use super::{ManyRow, NS, bare_name, bare_update, bare_version, name, secs, version};
use crate::cpu::Split;
use crate::measure;
use crate::process::{http_get, manifestwork_writes};
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
}

impl Moved {
    /// `54.13 s (first after 0.08 s; hub 90.1 s, …)`.
    fn text(&self) -> String {
        format!(
            "{:.2} s (first after {:.2} s; {})",
            self.s,
            self.first_s,
            self.cpu.text(self.s)
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
        let t0 = Instant::now();
        write.await?;
        let done = self.wait_version(to, n).await?;
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
        })
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
