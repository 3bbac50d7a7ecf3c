//! What the demo sees and prints: one look at the hub (and the spokes, with real clusters)
//! as a [`Frame`], the timeline line drawn from it, and the check that a rollout is
//! complete.

use std::collections::BTreeMap;

use mwrs_api::mwrs::{ManifestWorkReplicaSet, ManifestWorkReplicaSetStatus};
use mwrs_fleet::placement::DecisionGroup;

/// One cluster's ManifestWork as the timeline shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkState {
    pub hash: String,
    pub version: String,
    /// Its agent is done with the current generation.
    pub done: bool,
}

/// One look at the hub, and at the spokes when the clusters are real.
pub struct Frame {
    pub mwrs: ManifestWorkReplicaSet,
    /// cluster -> its ManifestWork
    pub works: BTreeMap<String, WorkState>,
    /// cluster -> `data.version` of the demo's ConfigMap on its spoke (empty when the
    /// clusters are simulated: they have no API of their own)
    pub spokes: BTreeMap<String, Option<String>>,
}

impl Frame {
    pub fn status(&self) -> ManifestWorkReplicaSetStatus {
        self.mwrs.status.clone().unwrap_or_default()
    }

    pub fn condition(&self, type_: &str) -> Option<(String, String, String)> {
        self.mwrs
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == type_))
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
    }

    pub fn has(&self, type_: &str, status: &str, reason: &str) -> bool {
        self.condition(type_)
            .is_some_and(|(s, r, _)| s == status && r == reason)
    }

    pub fn progressing_reason(&self) -> String {
        self.condition("Progressing")
            .map(|(_, r, _)| r)
            .unwrap_or_else(|| "-".into())
    }

    /// Every desired cluster has a ManifestWork on `hash` that its agent finished.
    pub fn all_done_on(&self, hash: &str, clusters: usize) -> bool {
        self.works.len() == clusters && self.works.values().all(|w| w.hash == hash && w.done)
    }

    pub fn count_on(&self, hash: &str) -> usize {
        self.works.values().filter(|w| w.hash == hash).count()
    }

    fn generation_observed(&self) -> bool {
        self.status().observed_generation == self.mwrs.metadata.generation
    }

    /// The spokes that do not run `version` (none when the clusters are simulated).
    pub fn spokes_not_on(&self, version: &str) -> Vec<String> {
        self.spokes
            .iter()
            .filter(|(_, v)| v.as_deref() != Some(version))
            .map(|(c, v)| format!("{c}={}", v.as_deref().unwrap_or("none")))
            .collect()
    }
}

/// Why the rollout of `hash` (template `version`) to `clusters` clusters is not complete,
/// or Ok when it is: conditions, both revisions, summary, every ManifestWork done, every
/// spoke running it, no abort held.
pub fn expect_complete(
    snap: &Frame,
    hash: &str,
    version: &str,
    clusters: usize,
) -> Result<(), String> {
    let s = snap.status();
    let mut missing = Vec::new();
    if !snap.generation_observed() {
        missing.push("observedGeneration behind".to_string());
    }
    if !snap.has("Progressing", "False", "NewManifestWorkAvailable") {
        missing.push(format!("Progressing={}", snap.progressing_reason()));
    }
    if !snap.has("PlacementRolledOut", "True", "Complete") {
        missing.push("PlacementRolledOut not Complete".into());
    }
    if s.update_revision.as_deref() != Some(hash) || s.current_revision.as_deref() != Some(hash) {
        missing.push(format!(
            "current={:?} update={:?} (want {hash})",
            s.current_revision, s.update_revision
        ));
    }
    if s.aborted_time.is_some() {
        missing.push("abortedTime still set".into());
    }
    let n = clusters as i64;
    if s.summary.updated != n || s.summary.desired_total != n {
        missing.push(format!(
            "updated {}/{} (want {n}/{n})",
            s.summary.updated, s.summary.desired_total
        ));
    }
    if !snap.all_done_on(hash, clusters) {
        missing.push(format!(
            "{} of {clusters} ManifestWorks on {hash}, not all done",
            snap.count_on(hash)
        ));
    }
    let behind = snap.spokes_not_on(version);
    if !behind.is_empty() {
        missing.push(format!("spokes not on {version}: {}", behind.join(" ")));
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(missing.join("; "))
    }
}

/// The first digit of a version label (`v2` -> '2').
fn digit_of(version: &str) -> char {
    version
        .strip_prefix('v')
        .and_then(|d| d.chars().next())
        .filter(char::is_ascii_digit)
        .unwrap_or('?')
}

/// One char per cluster, decision groups split by '|': the version digit when its agent is
/// done, a letter while in flight (1 -> a, 2 -> b, ...), '.' without a ManifestWork.
pub fn work_strip(groups: &[DecisionGroup], snap: &Frame) -> String {
    strip(groups, |cluster| match snap.works.get(cluster) {
        None => '.',
        Some(w) if w.done => digit_of(&w.version),
        Some(w) => digit_of(&w.version)
            .to_digit(10)
            .and_then(|d| char::from_digit(d + 9, 36))
            .unwrap_or('*'),
    })
}

/// One char per spoke, as [`work_strip`]: the version its object runs, '.' for none.
pub fn spoke_strip(groups: &[DecisionGroup], snap: &Frame) -> String {
    strip(groups, |cluster| match snap.spokes.get(cluster) {
        Some(Some(v)) => digit_of(v),
        _ => '.',
    })
}

fn strip(groups: &[DecisionGroup], mut cell: impl FnMut(&str) -> char) -> String {
    let mut out = String::from("|");
    for g in groups {
        out.extend(g.clusters.iter().map(|c| cell(c)));
        out.push('|');
    }
    out
}

/// `[######------]`: clusters done on the update revision out of those selected.
pub fn progress_bar(done: i64, total: i64) -> String {
    const WIDTH: i64 = 12;
    let filled = if total > 0 {
        (done.clamp(0, total) * WIDTH) / total
    } else {
        0
    };
    let filled = usize::try_from(filled).unwrap_or(0);
    let width = usize::try_from(WIDTH).unwrap_or(0);
    format!("[{}{}]", "#".repeat(filled), "-".repeat(width - filled))
}

/// Versions and how many ManifestWorks carry each: `v1:3 v2:1`.
pub fn version_counts(snap: &Frame) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for w in snap.works.values() {
        *counts.entry(w.version.as_str()).or_default() += 1;
    }
    counts
        .iter()
        .map(|(v, n)| format!("{v}:{n}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(works: &[(&str, &str, bool)], spokes: &[(&str, Option<&str>)]) -> Frame {
        Frame {
            mwrs: ManifestWorkReplicaSet::new("x", Default::default()),
            works: works
                .iter()
                .map(|(c, v, done)| {
                    let view = WorkState {
                        hash: format!("h{v}"),
                        version: (*v).to_string(),
                        done: *done,
                    };
                    ((*c).to_string(), view)
                })
                .collect(),
            spokes: spokes
                .iter()
                .map(|(c, v)| ((*c).to_string(), v.map(str::to_string)))
                .collect(),
        }
    }

    fn groups() -> Vec<DecisionGroup> {
        vec![
            DecisionGroup::new("canary", ["a"]),
            DecisionGroup::new("", ["b", "c"]),
        ]
    }

    #[test]
    fn strips_show_each_cluster_by_group() {
        let snap = frame(
            &[("a", "v2", false), ("b", "v1", true)],
            &[("a", Some("v2")), ("b", Some("v1")), ("c", None)],
        );
        assert_eq!(work_strip(&groups(), &snap), "|b|1.|");
        assert_eq!(spoke_strip(&groups(), &snap), "|2|1.|");
        assert_eq!(version_counts(&snap), "v1:1 v2:1");
    }

    #[test]
    fn spokes_behind_name_their_version() {
        let snap = frame(&[], &[("a", Some("v2")), ("b", Some("v1")), ("c", None)]);
        assert_eq!(snap.spokes_not_on("v1"), ["a=v2", "c=none"]);
        assert!(frame(&[], &[]).spokes_not_on("v1").is_empty());
    }

    #[test]
    fn progress_bar_is_clamped() {
        assert_eq!(progress_bar(3, 12), "[###---------]");
        assert_eq!(progress_bar(20, 10), "[############]");
        assert_eq!(progress_bar(1, 0), "[------------]");
    }
}
