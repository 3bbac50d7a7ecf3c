//! One rollout as every reader shows it: computed once from a snapshot by the engine's
//! planner stages ([`mwrs_engine::plan::progress`]), then printed by `rollout status`
//! (text, `-o json`, `-w`) and streamed to the dashboard, which only draws it. Every
//! judgement a reader shows lives here or in the engine: each cluster's place against the
//! revisions ([`Cell`]), whether it needs attention, each placementRef's budget as the
//! engine counts it, each band's progress, the actions that apply.

use jiff::Timestamp;
use kube::ResourceExt;
use mwrs_api::labels;
use mwrs_api::mwrs::{AbortRecord, ManifestWorkReplicaSet};
use mwrs_engine::phase::{Phase, phase};
use mwrs_engine::plan::{ClusterReport, Progress, progress};
use mwrs_engine::plugin::PluginInputs;
use mwrs_engine::rollout::RolloutStatus;
use mwrs_engine::snapshot::Snapshot;
use mwrs_engine::{Observed, PlanConfig};
use serde::Serialize;

use crate::budget::{BudgetLine, GroupLine};
use crate::hub::hidden_note;
use crate::settings::Judging;
use crate::state::{PlacementProgress, ordered, placements, published_placements};

/// What a reader shows of one MWRS.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct View {
    pub name: String,
    pub namespace: String,
    pub state: Phase,
    pub message: String,
    pub current_revision: Option<String>,
    pub update_revision: Option<String>,
    /// The last abort and its cause, until a new revision or a retry rolls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_abort: Option<AbortRecord>,
    /// While an abort holds: how many clusters are back on the stable revision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reverting: Option<Reverting>,
    pub placements: Vec<PlacementProgress>,
    /// Per placement and decision group, in rollout order: how far it is.
    pub bands: Vec<Band>,
    /// Every cluster, attention first (see [`ordered`]); none when they cannot be read.
    pub clusters: Vec<ClusterLine>,
    /// The `rollout` commands that mean something now, in the order a page offers them.
    pub actions: Vec<&'static str>,
    /// For each of `actions`, in the same order, what a page asks before it writes it.
    pub confirmations: Vec<Confirmation>,
    /// Why per-cluster states are missing, when they are.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Whose planner settings the clusters are judged with ([`crate::settings`]).
    pub judged_with: String,
    /// What the rollout plugins do to the rollout, when they hold it (or are skipped):
    /// the controller's `PluginLoaded` message, which says how to get past them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugins: Option<String>,
}

/// A cluster as a reader shows it.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterLine {
    pub cluster: String,
    pub placement: String,
    /// The placement's decision group it is in (the rollout's order).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<GroupLine>,
    pub revision: Option<String>,
    /// The engine's status against the target revision.
    pub state: String,
    pub since: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub soak_until: Option<Timestamp>,
    /// When its progress deadline passes (none for a cluster a plugin holds, or while an
    /// abort goes back).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Timestamp>,
    /// Why it is not done: the agent's apply error, its silence, a name taken.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub cell: Cell,
    /// Failed, timed out, or held with a note.
    pub attention: bool,
    /// One of the clusters that set off the abort holding the rollout.
    pub cause: bool,
}

/// Where a cluster stands against the revisions, as a reader colours it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Cell {
    Failed,
    #[serde(rename = "timedout")]
    TimedOut,
    Progressing,
    Validating,
    /// Succeeded, still within `minSuccessTime`.
    Soaking,
    /// Not yet on the revision being rolled out (during an abort: not back yet).
    Waiting,
    /// Done on the update revision.
    Updated,
    /// On the stable revision.
    Stable,
    /// No ManifestWork.
    None,
}

/// While an abort holds: clusters back on the stable revision, of how many.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Reverting {
    pub back: usize,
    pub of: usize,
}

/// One band of the rollout: a placement's decision group, and how many of its clusters
/// have reached the target (the update revision; while an abort holds, the stable one).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Band {
    pub placement: String,
    pub group: GroupLine,
    pub done: usize,
    pub of: usize,
}

impl View {
    /// The view of `snap` at `now`, judged with `judging`'s settings; with
    /// `works_hidden` (the ManifestWorks could not be read), the progress the controller
    /// publishes and no cluster lines.
    pub fn of(
        snap: &Snapshot,
        works_hidden: Option<&str>,
        now: Timestamp,
        judging: &Judging,
    ) -> Self {
        let m = &snap.mwrs;
        let (st, message) = phase(m);
        let status = m.status.clone().unwrap_or_default();
        let header = Header {
            aborted: st == Phase::Aborted,
            stable: status.current_revision.as_deref(),
            update: status.update_revision.as_deref(),
            causes: status.last_abort.as_ref(),
        };
        let (placements, clusters) = match works_hidden {
            Some(_) => (published_placements(m), Vec::new()),
            None => judged(snap, &header, now, &judging.plan),
        };
        let bands = bands(&placements, &clusters, header.target());
        let reverting = header.aborted.then(|| Reverting {
            back: clusters
                .iter()
                .filter(|c| c.revision.as_deref() == header.stable && c.state == "Succeeded")
                .count(),
            of: clusters.len(),
        });
        let offered = actions(st, header.stable, header.update);
        Self {
            name: m.name_any(),
            namespace: m.namespace().unwrap_or_default(),
            state: st,
            message,
            confirmations: offered
                .iter()
                .map(|a| Confirmation::of(a, &m.name_any(), &header))
                .collect(),
            actions: offered,
            current_revision: status.current_revision,
            update_revision: status.update_revision,
            last_abort: status.last_abort,
            reverting,
            placements,
            bands,
            clusters,
            note: works_hidden.map(|why| {
                hidden_note(
                    "per-cluster states are not shown and progress is the MWRS status's count",
                    why,
                )
            }),
            plugins: plugins_line(m),
            judged_with: judging.said.clone(),
        }
    }
}

/// Per placement and per cluster, as the engine's planner stages judge `snap` at `now`.
fn judged(
    snap: &Snapshot,
    header: &Header<'_>,
    now: Timestamp,
    config: &PlanConfig,
) -> (Vec<PlacementProgress>, Vec<ClusterLine>) {
    let m = &snap.mwrs;
    let plugins = PluginInputs::from_status(m);
    let observed = Observed {
        plugins: &plugins,
        sight: mwrs_engine::plan::Sight::Clear,
        ..snap.observed()
    };
    let Progress { clusters, budgets } = progress(&observed, now, config);
    let mut placements = placements(m, &clusters);
    for (p, (b, r)) in placements
        .iter_mut()
        .zip(budgets.iter().zip(&m.spec.placement_refs))
    {
        p.budget = b
            .as_ref()
            .map(|b| BudgetLine::new(b, r.rollout_strategy.as_ref()));
    }
    let lines = ordered(&clusters)
        .into_iter()
        .map(|r| header.line(r))
        .collect();
    (placements, lines)
}

/// What a cluster line is judged against.
struct Header<'a> {
    aborted: bool,
    stable: Option<&'a str>,
    update: Option<&'a str>,
    causes: Option<&'a AbortRecord>,
}

impl Header<'_> {
    /// The cell a band counts as done.
    fn target(&self) -> Cell {
        if self.aborted {
            Cell::Stable
        } else {
            Cell::Updated
        }
    }

    fn cell(&self, r: &ClusterReport) -> Cell {
        let on_stable = r.revision.is_some() && r.revision.as_deref() == self.stable;
        match r.status {
            RolloutStatus::Failed => Cell::Failed,
            RolloutStatus::TimeOut => Cell::TimedOut,
            RolloutStatus::Progressing => Cell::Progressing,
            RolloutStatus::Validating => Cell::Validating,
            RolloutStatus::Succeeded if r.soak_until.is_some() => Cell::Soaking,
            // During an abort the target is the stable revision: done there is "back",
            // done anywhere else still waits for its revert.
            RolloutStatus::Succeeded if self.aborted => {
                if on_stable {
                    Cell::Stable
                } else {
                    Cell::Waiting
                }
            }
            RolloutStatus::Succeeded => {
                if r.revision.as_deref() == self.update {
                    Cell::Updated
                } else {
                    Cell::Stable
                }
            }
            RolloutStatus::ToApply | RolloutStatus::Skip => match (&r.revision, on_stable) {
                (None, _) => Cell::None,
                (Some(_), true) => Cell::Stable,
                (Some(_), false) => Cell::Waiting,
            },
        }
    }

    /// Did `cluster` set off the abort holding the rollout?
    fn caused(&self, cluster: &str) -> bool {
        self.aborted
            && self.causes.is_some_and(|a| {
                a.failed_clusters
                    .iter()
                    .chain(&a.timed_out_clusters)
                    .any(|c| c == cluster)
            })
    }

    fn line(&self, r: &ClusterReport) -> ClusterLine {
        let cell = self.cell(r);
        ClusterLine {
            cluster: r.cluster.to_string(),
            placement: r.placement.to_string(),
            group: r.group.as_ref().map(|g| GroupLine {
                name: g.name.clone(),
                index: g.index,
            }),
            revision: r.revision.as_deref().map(str::to_string),
            state: r.status.as_str().to_string(),
            since: r.since,
            soak_until: r.soak_until,
            deadline: r.deadline,
            note: r.note.clone(),
            cell,
            attention: matches!(cell, Cell::Failed | Cell::TimedOut) || r.note.is_some(),
            cause: self.caused(&r.cluster),
        }
    }
}

/// The bands of `placements` (spec order), each decision group in rollout order.
fn bands(placements: &[PlacementProgress], clusters: &[ClusterLine], target: Cell) -> Vec<Band> {
    let mut out: Vec<Band> = Vec::new();
    for c in clusters {
        let group = c.group.clone().unwrap_or(GroupLine {
            name: String::new(),
            index: 0,
        });
        let at = out
            .iter()
            .position(|b| b.placement == c.placement && b.group.index == group.index);
        let band = match at {
            Some(i) => &mut out[i],
            None => {
                out.push(Band {
                    placement: c.placement.clone(),
                    group,
                    done: 0,
                    of: 0,
                });
                let last = out.len() - 1;
                &mut out[last]
            }
        };
        band.of += 1;
        band.done += usize::from(c.cell == target);
    }
    let rank = |p: &str| {
        placements
            .iter()
            .position(|x| x.name == p)
            .unwrap_or(usize::MAX)
    };
    out.sort_by(|a, b| {
        (rank(&a.placement), a.group.index).cmp(&(rank(&b.placement), b.group.index))
    });
    out
}

/// The `rollout` commands that mean something in state `st`.
fn actions(st: Phase, stable: Option<&str>, update: Option<&str>) -> Vec<&'static str> {
    let mut out = vec![if st == Phase::Paused {
        "resume"
    } else {
        "pause"
    }];
    let rolling = update.is_some() && update != stable;
    if rolling && st != Phase::Aborted {
        out.push("abort");
    }
    // Degraded covers an abort that failed (AbortFailed) and a rollout a budget stopped.
    if matches!(st, Phase::Aborted | Phase::Degraded) {
        out.push("retry");
    }
    out.push("undo");
    out
}

/// What an action does and writes, as a page asks before it writes it.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Confirmation {
    pub action: &'static str,
    pub title: String,
    pub does: String,
    pub writes: String,
}

impl Confirmation {
    /// The question before `action` on the MWRS `name`, whose revisions `header` holds.
    fn of(action: &'static str, name: &str, header: &Header<'_>) -> Self {
        let name = format!("mwrs/{name}");
        let update = header.update.unwrap_or("<none>");
        let annotation = |key: &str| format!("It writes the annotation {key} on {name}, as you.");
        let (title, does, writes) = match action {
            "pause" => (
                format!("Pause {name}?"),
                "No cluster starts a new revision until it is resumed; clusters already rolling \
                 finish."
                    .to_string(),
                annotation(labels::CONTROL_PAUSE),
            ),
            "resume" => (
                format!("Resume {name}?"),
                "The rollout goes on where it stopped.".to_string(),
                format!(
                    "It removes the annotation {} from {name}, as you.",
                    labels::CONTROL_PAUSE
                ),
            ),
            "abort" => (
                format!("Abort revision {update} of {name}?"),
                match header.stable {
                    Some(stable) => format!(
                        "Every cluster that got revision {update} goes back to the stable \
                         revision {stable}, and the rollout stops until a retry or a new \
                         template."
                    ),
                    None => format!(
                        "There is no stable revision to go back to: the rollout stops where it \
                         is (clusters keep revision {update}) until a retry or a new template."
                    ),
                },
                annotation(labels::CONTROL_ABORT),
            ),
            "retry" => (
                format!("Retry revision {update} of {name}?"),
                format!(
                    "The abort is lifted and revision {update} rolls out again from the start of \
                     the strategy."
                ),
                annotation(labels::CONTROL_RETRY),
            ),
            _ => (
                format!("Undo {name}?"),
                "The template goes back to the revision chosen below, which then rolls out as a \
                 new update."
                    .to_string(),
                format!(
                    "It rewrites spec.manifestWorkTemplate of {name}, as you, only if the spec has \
                     not changed since it was read."
                ),
            ),
        };
        Self {
            action,
            title,
            does,
            writes,
        }
    }
}

/// The `PluginLoaded` message of `m` when its plugins hold the rollout or are skipped.
fn plugins_line(m: &ManifestWorkReplicaSet) -> Option<String> {
    let list = m.status.as_ref()?.conditions.as_deref()?;
    let c = mwrs_engine::conditions::find(list, mwrs_api::mwrs::condition::PLUGIN_LOADED)?;
    let holds = c.status != "True" || c.reason == mwrs_api::mwrs::condition::REASON_PLUGINS_SKIPPED;
    holds.then(|| c.message.clone())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use mwrs_engine::rollout::GroupKey;
    use serde_json::json;

    use super::*;

    fn report(cluster: &str, revision: Option<&str>, status: RolloutStatus) -> ClusterReport {
        ClusterReport {
            cluster: cluster.into(),
            placement: Arc::from("p"),
            group: Some(GroupKey {
                name: String::new(),
                index: cluster.len() as i32 % 2,
            }),
            revision: revision.map(Arc::from),
            status,
            since: None,
            soak_until: None,
            deadline: None,
            note: None,
        }
    }

    const ROLLING: Header<'static> = Header {
        aborted: false,
        stable: Some("s1"),
        update: Some("u2"),
        causes: None,
    };

    #[test]
    fn a_cell_is_where_the_cluster_stands_against_the_revisions() {
        use RolloutStatus::*;
        let aborted = Header {
            aborted: true,
            ..ROLLING
        };
        let cases = [
            (Some("s1"), Succeeded, Cell::Stable, Cell::Stable),
            (Some("u2"), Succeeded, Cell::Updated, Cell::Waiting),
            (Some("s1"), ToApply, Cell::Stable, Cell::Stable),
            (Some("u2"), ToApply, Cell::Waiting, Cell::Waiting),
            (None, ToApply, Cell::None, Cell::None),
            (Some("u2"), Failed, Cell::Failed, Cell::Failed),
            (Some("u2"), TimeOut, Cell::TimedOut, Cell::TimedOut),
            (Some("u2"), Validating, Cell::Validating, Cell::Validating),
        ];
        for (revision, status, rolling, reverting) in cases {
            let r = report("c", revision, status);
            assert_eq!(ROLLING.cell(&r), rolling, "{revision:?} {status:?}");
            assert_eq!(
                aborted.cell(&r),
                reverting,
                "aborted: {revision:?} {status:?}"
            );
        }
        let mut soaking = report("c", Some("u2"), Succeeded);
        soaking.soak_until = Some(Timestamp::UNIX_EPOCH);
        assert_eq!(ROLLING.cell(&soaking), Cell::Soaking);
    }

    #[test]
    fn the_causes_of_an_abort_are_marked_while_it_holds() {
        let record: AbortRecord = serde_json::from_value(json!({
            "trigger": "ProgressDeadlineExceeded", "time": "2026-12-03T10:00:00Z",
            "revision": "u2", "timedOutClusters": ["c1"], "failedClusters": ["c2"]}))
        .unwrap();
        let aborted = Header {
            aborted: true,
            causes: Some(&record),
            ..ROLLING
        };
        let line = |h: &Header, c| h.line(&report(c, Some("u2"), RolloutStatus::Failed));
        assert!(line(&aborted, "c1").cause && line(&aborted, "c2").cause);
        assert!(!line(&aborted, "c3").cause);
        let retried = Header {
            aborted: false,
            ..aborted
        };
        assert!(!line(&retried, "c1").cause, "a retry lifts the abort");
        assert!(line(&retried, "c3").attention, "failed: needs attention");
    }

    #[test]
    fn bands_count_the_target_in_rollout_order() {
        let reports = [
            report("a", Some("u2"), RolloutStatus::Succeeded),
            report("bb", Some("u2"), RolloutStatus::Succeeded),
            report("cc", Some("s1"), RolloutStatus::ToApply),
            report("d", Some("u2"), RolloutStatus::Progressing),
        ];
        let lines: Vec<ClusterLine> = reports.iter().map(|r| ROLLING.line(r)).collect();
        let placements = [PlacementProgress {
            name: "p".into(),
            ..PlacementProgress::default()
        }];
        let got: Vec<(i32, usize, usize)> = bands(&placements, &lines, ROLLING.target())
            .iter()
            .map(|b| (b.group.index, b.done, b.of))
            .collect();
        // Group 0: bb done, cc waiting; group 1: a done, d progressing.
        assert_eq!(got, [(0, 1, 2), (1, 1, 2)]);
    }

    #[test]
    fn an_abort_says_where_the_clusters_go_as_the_engine_does() {
        let with = |stable| Header {
            aborted: false,
            stable,
            update: Some("u2"),
            causes: None,
        };
        let back = Confirmation::of("abort", "app", &with(Some("s1")));
        assert_eq!(back.title, "Abort revision u2 of mwrs/app?");
        assert!(
            back.does.contains("back to the stable revision s1"),
            "{}",
            back.does
        );
        assert!(
            back.writes.contains(labels::CONTROL_ABORT),
            "{}",
            back.writes
        );
        // The engine stops a first rollout where it is: nothing to go back to.
        let first = Confirmation::of("abort", "app", &with(None));
        assert!(first.does.contains("no stable revision"), "{}", first.does);
        assert!(!first.does.contains("goes back"), "{}", first.does);
        let resume = Confirmation::of("resume", "app", &with(None));
        assert!(
            resume.writes.contains(labels::CONTROL_PAUSE),
            "{}",
            resume.writes
        );
    }

    #[test]
    fn the_actions_that_mean_something_now() {
        let (s, u) = (Some("s1"), Some("u2"));
        assert_eq!(
            actions(Phase::Progressing, s, u),
            ["pause", "abort", "undo"]
        );
        assert_eq!(actions(Phase::Paused, s, u), ["resume", "abort", "undo"]);
        assert_eq!(actions(Phase::Aborted, s, u), ["pause", "retry", "undo"]);
        assert_eq!(actions(Phase::Degraded, s, s), ["pause", "retry", "undo"]);
        assert_eq!(actions(Phase::Complete, s, s), ["pause", "undo"]);
    }
}
