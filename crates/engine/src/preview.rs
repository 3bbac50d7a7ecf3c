//! A dry run of a rollout (the CLI's `rollout plan`): from a [`Snapshot`] and `now`, run
//! the real planner ([`crate::plan::plan`]) pass after pass on an in-memory copy of the
//! hub, with a simulated work agent answering every ManifestWork at once, and report the
//! waves of clusters the strategy starts, and where the rollout completes, stops or
//! aborts. Pure like the planner: no clock, no client.
//!
//! The simulated agent makes every cluster succeed as soon as it receives a revision,
//! except the clusters named as failing, which report Degraded on the update revision
//! (they succeed on any other revision, so an abort's revert completes). So the times of
//! the waves are the strategy's own waits — `minSuccessTime` soaks and
//! `progressDeadline`s — not how long real clusters take. Conditions the hub already
//! shows are kept: a cluster that is Failed on the hub stays Failed.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use jiff::{SignedDuration, Timestamp};
use mwrs_api::mwrs::{ManifestWorkReplicaSet, condition as mc};
use mwrs_api::work::ManifestWorkTemplate;
use mwrs_api::work::condition as wc;

use crate::placement::PlacementView;
use crate::plan::in_memory::{Objects, Works};
use crate::plan::{Observed, Plan, PlanConfig, WorkChange};
use crate::revision::RevisionView;
use crate::snapshot::Snapshot;
use crate::work::WorkView;

/// Whether a wave rolls the update revision forward or reverts to the stable one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaveKind {
    Rollout,
    Revert,
}

/// The clusters one planner pass writes a revision to.
#[derive(Clone, Debug, PartialEq)]
pub struct Wave {
    /// 1-based.
    pub number: usize,
    /// Time from the start of the preview.
    pub at: SignedDuration,
    pub kind: WaveKind,
    /// Revision written.
    pub revision: String,
    /// (cluster, placementRef) in cluster name order.
    pub clusters: Vec<(String, String)>,
}

/// How the simulated rollout ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum End {
    /// Every desired cluster runs the update revision and it was promoted.
    Complete,
    /// The update revision was already complete: nothing to roll out.
    NothingToDo,
    /// Failures breached `maxFailures` (or were tolerated but the rollout cannot finish):
    /// no new cluster starts. `reason` is the Progressing reason.
    Stopped { reason: String },
    /// Every cluster was reverted to the stable revision `to`.
    Aborted { to: String },
    /// An abort was called for and cannot happen (no stable revision).
    AbortFailed,
    /// The pause annotation holds the rollout.
    Paused,
    /// The spec cannot be acted on.
    Invalid,
    /// Nothing more happens and none of the above applies (e.g. a placement without
    /// decisions).
    Stuck,
    /// The step budget ran out (a very long rollout).
    Unfinished,
}

/// The result of a preview.
#[derive(Clone, Debug, PartialEq)]
pub struct Preview {
    pub update_revision: Option<String>,
    pub current_revision: Option<String>,
    /// Clusters selected by the placements.
    pub desired: usize,
    pub waves: Vec<Wave>,
    pub end: End,
    /// The Progressing condition's message at the end.
    pub message: String,
    /// Clusters that failed (Failed or TimeOut) on the update revision, in name order.
    pub failed: Vec<String>,
    /// Simulated time from the start to the end.
    pub duration: SignedDuration,
}

/// Knobs of a preview.
#[derive(Clone, Debug, Default)]
pub struct PreviewConfig {
    pub plan: PlanConfig,
    /// Most planner passes to run; None: enough for any strategy on the snapshot's fleet.
    pub max_passes: Option<usize>,
}

/// Simulates the rollout of `snapshot`'s MWRS from `now`, with `failing` clusters
/// reporting Degraded on the update revision.
pub fn preview(
    snapshot: &Snapshot,
    failing: &BTreeSet<String>,
    now: Timestamp,
    cfg: &PreviewConfig,
) -> Preview {
    let mut sim = Sim::new(snapshot, failing, now);
    let (waves, end) = sim.run(cfg);
    let status = sim.mwrs.status.clone().unwrap_or_default();
    let message = progressing(&sim.mwrs)
        .map(|(_, _, m)| m.to_string())
        .unwrap_or_default();
    Preview {
        update_revision: status.update_revision.clone(),
        current_revision: status.current_revision.clone(),
        desired: sim.desired(),
        waves,
        end,
        message,
        failed: sim.failed.iter().cloned().collect(),
        duration: sim.now.duration_since(sim.start),
    }
}

/// How far back [`assume_settled`] starts its simulation: further than any rollout lasts,
/// so every soak of the stable revision is over by `now`.
const SETTLED_SINCE: SignedDuration = SignedDuration::from_hours(24 * 365);

/// `snapshot` as it would be if every selected cluster ran the stable revision
/// (`status.currentRevision`) and had settled on it, for a reader who may not list the
/// ManifestWorks in the cluster namespaces (a namespace-scoped user). The works are those
/// of the stable revision rolled out on an empty fleet by the same simulation; the MWRS,
/// its status, placements and revisions stay as the hub shows them. Without a stable
/// revision no cluster carries anything.
pub fn assume_settled(snapshot: &Snapshot, now: Timestamp) -> Snapshot {
    let mut out = snapshot.clone();
    out.works = Vec::new();
    let stable = snapshot
        .mwrs
        .status
        .as_ref()
        .and_then(|s| s.current_revision.as_deref())
        .and_then(|c| snapshot.revisions.iter().find(|r| r.hash == c));
    let Some(template) =
        stable.and_then(|r| ManifestWorkTemplate::from_value(r.template.clone()).ok())
    else {
        return out;
    };
    let mut fresh = out.clone();
    fresh.mwrs.spec.manifest_work_template = template;
    // The stable revision as first rolled out: no status, no pause or abort request.
    fresh.mwrs.status = None;
    fresh.mwrs.metadata.annotations = None;
    let nobody = BTreeSet::new();
    let mut sim = Sim::new(&fresh, &nobody, now - SETTLED_SINCE);
    sim.run(&PreviewConfig::default());
    out.works = sim.works.into_vec();
    out
}

impl Sim<'_> {
    /// Planner passes, agent answers and waits until the rollout ends or the budget is
    /// spent: the waves started and the end.
    fn run(&mut self, cfg: &PreviewConfig) -> (Vec<Wave>, End) {
        let sim = self;
        // A pass starts at most one wave; a wave needs a pass to write it, one to see the
        // agent's answer and one at the end of a soak or deadline.
        let budget = cfg
            .max_passes
            .unwrap_or_else(|| 4 * (sim.desired() + sim.works.len()) + 64);
        let mut waves: Vec<Wave> = Vec::new();
        let mut any_work_written = false;
        let mut end = End::Unfinished;
        for _ in 0..budget {
            sim.agents();
            let plan = sim.plan(&cfg.plan);
            if plan.invalid.is_some() {
                end = End::Invalid;
                sim.execute(&plan);
                break;
            }
            let update = plan.status.as_ref().and_then(|s| s.update_revision.clone());
            if sim.update.is_none() {
                sim.update = update.clone();
            }
            let mut applies: BTreeMap<&str, Vec<(String, String)>> = BTreeMap::new();
            for w in &plan.works {
                if let WorkChange::Apply(a) = w {
                    applies
                        .entry(a.revision.as_str())
                        .or_default()
                        .push((a.cluster.clone(), a.placement.clone()));
                }
            }
            for (revision, mut clusters) in applies {
                clusters.sort();
                any_work_written = true;
                waves.push(Wave {
                    number: waves.len() + 1,
                    at: sim.now.duration_since(sim.start),
                    kind: if Some(revision) == update.as_deref() {
                        WaveKind::Rollout
                    } else {
                        WaveKind::Revert
                    },
                    revision: revision.to_string(),
                    clusters,
                });
            }
            let changed = sim.execute(&plan);
            if let Some(e) = sim.settled(any_work_written) {
                end = e;
                break;
            }
            if changed {
                continue;
            }
            match plan.recheck.filter(|d| d.is_positive()) {
                Some(d) => sim.now += d,
                None => {
                    end = sim.stopped();
                    break;
                }
            }
        }
        (waves, end)
    }
}

/// `(status, reason, message)` of the Progressing condition.
fn progressing(m: &ManifestWorkReplicaSet) -> Option<(&str, &str, &str)> {
    m.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == mc::PROGRESSING)
        .map(|c| (c.status.as_str(), c.reason.as_str(), c.message.as_str()))
}

/// The in-memory hub the planner's writes land on.
struct Sim<'f> {
    start: Timestamp,
    now: Timestamp,
    mwrs: ManifestWorkReplicaSet,
    placements: Vec<PlacementView>,
    works: Works,
    revisions: Vec<RevisionView>,
    failing: &'f BTreeSet<String>,
    /// The generation the agent has answered, per cluster.
    answered: HashMap<String, i64>,
    update: Option<String>,
    /// Clusters seen Failed or TimeOut on the update revision in any pass.
    failed: BTreeSet<String>,
}

impl<'f> Sim<'f> {
    fn new(snapshot: &Snapshot, failing: &'f BTreeSet<String>, now: Timestamp) -> Self {
        let works = Works::new(snapshot.works.clone());
        // What the hub shows is already answered: keep it as the agent reported it.
        let answered = works
            .iter()
            .filter_map(|w| Some((w.cluster.clone(), settled_at(w)?)))
            .collect();
        Self {
            start: now,
            now,
            mwrs: snapshot.mwrs.clone(),
            placements: snapshot.placements.clone(),
            works,
            revisions: snapshot.revisions.clone(),
            failing,
            answered,
            update: None,
            failed: BTreeSet::new(),
        }
    }

    fn desired(&self) -> usize {
        let mut all: BTreeSet<&str> = BTreeSet::new();
        for p in &self.placements {
            all.extend(p.groups().into_iter().flat_map(|g| g.clusters()));
        }
        all.len()
    }

    fn plan(&mut self, cfg: &PlanConfig) -> Plan {
        let observed = Observed {
            mwrs: &self.mwrs,
            placements: &self.placements,
            works: self.works.as_slice(),
            revisions: &self.revisions,
            blocked: &[],
            taken_revision_names: &[],
        };
        let plan = crate::plan::plan(&observed, self.now, cfg);
        let update = plan
            .status
            .as_ref()
            .and_then(|s| s.update_revision.as_deref());
        self.failed.extend(
            plan.clusters
                .iter()
                .filter(|c| c.status.is_failure() && c.revision.as_deref() == update)
                .map(|c| c.cluster.clone()),
        );
        plan
    }

    /// Every ManifestWork generation not answered yet gets its final conditions now.
    fn agents(&mut self) {
        let now = self.now;
        for w in self.works.iter_mut() {
            if self.answered.get(&w.cluster) == Some(&w.generation) || w.deleting {
                continue;
            }
            let fails = self.failing.contains(&w.cluster)
                && self.update.is_some()
                && w.hash() == self.update.as_deref();
            let g = w.generation;
            w.set_condition(wc::APPLIED, "True", g, now);
            w.set_condition(wc::AVAILABLE, "True", g, now);
            if fails {
                w.set_condition(wc::PROGRESSING, "True", g, now);
                w.set_condition(wc::DEGRADED, "True", g, now);
            } else {
                w.set_condition(wc::PROGRESSING, "False", g, now);
                w.set_condition(wc::DEGRADED, "False", g, now);
            }
            self.answered.insert(w.cluster.clone(), g);
        }
    }

    /// Carries out `plan`; true when anything observable changed.
    fn execute(&mut self, plan: &Plan) -> bool {
        let changed = Objects {
            mwrs: &mut self.mwrs,
            revisions: &mut self.revisions,
            works: &mut self.works,
        }
        .execute(plan, self.now);
        // A ManifestWork created again starts unanswered.
        if plan
            .works
            .iter()
            .any(|w| matches!(w, WorkChange::Delete { .. }))
        {
            let works = &self.works;
            self.answered.retain(|c, _| works.contains(c));
        }
        changed
    }

    /// The end of the rollout, once the status says so.
    fn settled(&self, any_work_written: bool) -> Option<End> {
        let (status, reason, _) = progressing(&self.mwrs)?;
        let s = self.mwrs.status.as_ref()?;
        match (status, reason) {
            ("False", mc::REASON_NEW_MANIFESTWORK_AVAILABLE)
                if s.current_revision.is_some() && s.current_revision == s.update_revision =>
            {
                Some(if any_work_written {
                    End::Complete
                } else {
                    End::NothingToDo
                })
            }
            ("False", mc::REASON_ROLLOUT_ABORTED)
                if s.aborted_time.is_some() && self.all_on(s.current_revision.as_deref()) =>
            {
                Some(End::Aborted {
                    to: s.current_revision.clone().unwrap_or_default(),
                })
            }
            _ => None,
        }
    }

    /// Does every desired cluster's ManifestWork carry `revision`, answered by the agent?
    fn all_on(&self, revision: Option<&str>) -> bool {
        let Some(revision) = revision else {
            return false;
        };
        self.placements
            .iter()
            .flat_map(|p| p.groups().into_iter().flat_map(|g| g.clusters()))
            .all(|c| {
                self.works.get(c).is_some_and(|w| {
                    w.hash() == Some(revision) && self.answered.get(c) == Some(&w.generation)
                })
            })
    }

    /// Nothing more will happen: why.
    fn stopped(&self) -> End {
        match progressing(&self.mwrs) {
            Some((_, mc::REASON_ROLLOUT_PAUSED, _)) => End::Paused,
            Some((_, mc::REASON_ABORT_FAILED, _)) => End::AbortFailed,
            Some((
                _,
                r @ (mc::REASON_PROGRESS_DEADLINE_EXCEEDED | mc::REASON_MAX_FAILURES_EXCEEDED),
                _,
            )) => End::Stopped {
                reason: r.to_string(),
            },
            _ => End::Stuck,
        }
    }
}

/// The generation a ManifestWork's conditions already settle (done or failed), if any.
fn settled_at(w: &WorkView) -> Option<i64> {
    let at_gen = |t: &str| {
        w.condition(t)
            .filter(|c| c.observed_generation == Some(w.generation))
    };
    let done = at_gen(wc::PROGRESSING).is_some_and(|c| c.status == "False")
        || at_gen(wc::DEGRADED).is_some_and(|c| c.status == "True")
        || (w.condition(wc::PROGRESSING).is_none()
            && at_gen(wc::AVAILABLE).is_some_and(|c| c.status == "True"));
    done.then_some(w.generation)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::rollout::{DecisionGroups, GroupKey};
    use mwrs_api::labels;
    use mwrs_api::mwrs::{LocalPlacementReference, ManifestWorkReplicaSetSpec};
    use mwrs_api::work::ManifestWorkTemplate;
    use serde_json::{Value, json};

    fn template(version: &str) -> Value {
        json!({"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "app", "namespace": "default"},
            "data": {"version": version}}]}})
    }

    fn t0() -> Timestamp {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    /// A snapshot of MWRS `app` with one placementRef `p` over `groups`.
    fn snapshot(strategy: Value, groups: &[&[&str]]) -> Snapshot {
        let mut mwrs = ManifestWorkReplicaSet::new(
            "app",
            ManifestWorkReplicaSetSpec {
                manifest_work_template: ManifestWorkTemplate::from_value(template("v1")).unwrap(),
                placement_refs: vec![LocalPlacementReference {
                    name: "p".into(),
                    rollout_strategy: Some(serde_json::from_value(strategy).unwrap()),
                }],
                ..Default::default()
            },
        );
        mwrs.metadata.namespace = Some("default".into());
        mwrs.metadata.generation = Some(1);
        let pairs = groups.iter().enumerate().flat_map(|(i, cs)| {
            cs.iter()
                .map(move |c| (GroupKey::new("", i as i32), c.to_string()))
        });
        Snapshot {
            mwrs,
            placements: vec![PlacementView::found("p", DecisionGroups::from_pairs(pairs))],
            works: Vec::new(),
            revisions: Vec::new(),
            blocked: Vec::new(),
        }
    }

    fn names(w: &Wave) -> Vec<&str> {
        w.clusters.iter().map(|(c, _)| c.as_str()).collect()
    }

    fn none() -> BTreeSet<String> {
        BTreeSet::new()
    }

    /// Runs a snapshot to completion and returns it as the hub would then show it, with
    /// the template changed to `next`.
    fn completed_then(snap: &Snapshot, next: &str) -> Snapshot {
        let nobody = BTreeSet::new();
        let mut sim = Sim::new(snap, &nobody, t0());
        for _ in 0..100 {
            sim.agents();
            let plan = sim.plan(&PlanConfig::default());
            if !sim.execute(&plan) {
                break;
            }
        }
        let mut out = snap.clone();
        out.mwrs = sim.mwrs.clone();
        out.works = sim.works.as_slice().to_vec();
        out.revisions = sim.revisions.clone();
        out.mwrs.spec.manifest_work_template =
            ManifestWorkTemplate::from_value(template(next)).unwrap();
        out.mwrs.metadata.generation = Some(2);
        out
    }

    #[test]
    fn a_reader_without_the_manifestworks_sees_the_waves_of_a_settled_fleet() {
        let strategy = json!({"type": "Progressive",
            "progressive": {"maxConcurrency": 2, "minSuccessTime": "1m"}});
        let first = snapshot(strategy, &[&["c1", "c2", "c3", "c4", "c5"]]);
        // The hub: v1 completed an hour ago, then the template changed to v2.
        let nobody = none();
        let mut past = Sim::new(&first, &nobody, t0() - SignedDuration::from_hours(1));
        assert_eq!(past.run(&PreviewConfig::default()).1, End::Complete);
        let mut hub = first.clone();
        hub.mwrs = past.mwrs.clone();
        hub.works = past.works.as_slice().to_vec();
        hub.revisions = past.revisions.clone();
        hub.mwrs.spec.manifest_work_template =
            ManifestWorkTemplate::from_value(template("v2")).unwrap();
        hub.mwrs.metadata.generation = Some(2);

        let mut blind = hub.clone();
        blind.works.clear();
        let assumed = assume_settled(&blind, t0());
        assert_eq!(assumed.works.len(), 5);
        let v1 = hub.works[0].hash();
        assert!(assumed.works.iter().all(|w| w.hash() == v1));
        let cfg = PreviewConfig::default();
        let seen = preview(&hub, &none(), t0(), &cfg);
        let guessed = preview(&assumed, &none(), t0(), &cfg);
        assert_eq!(guessed.waves, seen.waves);
        assert_eq!((guessed.end, guessed.duration), (seen.end, seen.duration));
        assert_eq!(seen.waves.len(), 3);

        // Nothing completed yet: nothing is assumed.
        assert!(assume_settled(&first, t0()).works.is_empty());
    }

    #[test]
    fn progressive_waves_follow_max_concurrency() {
        let snap = snapshot(
            json!({"type": "Progressive", "progressive": {"maxConcurrency": 2}}),
            &[&["c1", "c2", "c3", "c4", "c5"]],
        );
        let p = preview(&snap, &none(), t0(), &PreviewConfig::default());
        assert_eq!(p.end, End::Complete);
        let waves: Vec<Vec<&str>> = p.waves.iter().map(names).collect();
        assert_eq!(waves, vec![vec!["c1", "c2"], vec!["c3", "c4"], vec!["c5"]]);
        assert!(p.waves.iter().all(|w| w.kind == WaveKind::Rollout));
        assert_eq!(p.desired, 5);
        assert_eq!(p.update_revision, p.current_revision);
    }

    #[test]
    fn soak_time_spaces_the_waves() {
        let snap = snapshot(
            json!({"type": "Progressive",
                "progressive": {"maxConcurrency": 1, "minSuccessTime": "2m"}}),
            &[&["a", "b", "c"]],
        );
        let p = preview(&snap, &none(), t0(), &PreviewConfig::default());
        assert_eq!(p.end, End::Complete);
        let at: Vec<i64> = p.waves.iter().map(|w| w.at.as_secs()).collect();
        assert_eq!(at, vec![0, 120, 240]);
        assert_eq!(p.duration.as_secs(), 360, "the last soak ends the rollout");
    }

    #[test]
    fn per_group_waves_and_a_failure_stops_the_rollout() {
        let snap = snapshot(
            json!({"type": "ProgressivePerGroup"}),
            &[&["a1", "a2"], &["b1", "b2"], &["c1"]],
        );
        let p = preview(&snap, &none(), t0(), &PreviewConfig::default());
        let waves: Vec<Vec<&str>> = p.waves.iter().map(names).collect();
        assert_eq!(waves, vec![vec!["a1", "a2"], vec!["b1", "b2"], vec!["c1"]]);

        // First rollout, b1 fails and there is no deadline: the failure counts in its own
        // group at once (maxFailures 0) and the rollout stops before group c. Upstream's
        // walk would wait for ever at group a instead (`Compat::upstream_group_walk_arithmetic`).
        let failing = BTreeSet::from(["b1".to_string()]);
        let p = preview(&snap, &failing, t0(), &PreviewConfig::default());
        let waves: Vec<Vec<&str>> = p.waves.iter().map(names).collect();
        assert_eq!(waves, vec![vec!["a1", "a2"], vec!["b1", "b2"]]);
        assert_eq!(
            p.end,
            End::Stopped {
                reason: mc::REASON_MAX_FAILURES_EXCEEDED.into()
            }
        );
        assert_eq!(p.failed, vec!["b1".to_string()]);

        // With a deadline the failure times out, the group breaches maxFailures 0 and the
        // rollout stops before group c; with no stable revision there is nothing to
        // abort to.
        let mut snap = snap;
        snap.mwrs.spec.placement_refs[0].rollout_strategy = Some(
            serde_json::from_value(json!({"type": "ProgressivePerGroup",
                "progressivePerGroup": {"progressDeadline": "1m"}}))
            .unwrap(),
        );
        let p = preview(&snap, &failing, t0(), &PreviewConfig::default());
        let waves: Vec<Vec<&str>> = p.waves.iter().map(names).collect();
        assert_eq!(waves, vec![vec!["a1", "a2"], vec!["b1", "b2"]]);
        assert_eq!(
            p.end,
            End::Stopped {
                reason: mc::REASON_PROGRESS_DEADLINE_EXCEEDED.into()
            }
        );
        assert_eq!(p.duration.as_secs(), 60);
        assert_eq!(p.failed, vec!["b1".to_string()]);
        assert_ne!(p.current_revision, p.update_revision);
    }

    #[test]
    fn abort_all_reverts_every_cluster_in_one_wave() {
        let base = snapshot(
            json!({"type": "Progressive", "progressive": {"maxConcurrency": 2},
                "failureStrategy": "AbortAll"}),
            &[&["c1", "c2", "c3", "c4"]],
        );
        let snap = completed_then(&base, "v2");
        let v1 = snap.mwrs.status.as_ref().unwrap().current_revision.clone();
        assert!(v1.is_some());
        let failing = BTreeSet::from(["c3".to_string()]);
        let p = preview(&snap, &failing, t0(), &PreviewConfig::default());
        assert_eq!(
            p.end,
            End::Aborted {
                to: v1.clone().unwrap()
            }
        );
        let kinds: Vec<(WaveKind, Vec<&str>)> =
            p.waves.iter().map(|w| (w.kind, names(w))).collect();
        assert_eq!(
            kinds,
            vec![
                (WaveKind::Rollout, vec!["c1", "c2"]),
                (WaveKind::Rollout, vec!["c3", "c4"]),
                (WaveKind::Revert, vec!["c1", "c2", "c3", "c4"]),
            ]
        );
        assert_eq!(p.waves[2].revision, v1.unwrap());
        assert!(p.message.contains("on all 4 clusters"), "{}", p.message);
        assert_eq!(p.failed, vec!["c3".to_string()]);
    }

    #[test]
    fn the_hub_state_is_the_starting_point() {
        let base = snapshot(json!({"type": "All"}), &[&["c1", "c2"]]);
        let done = completed_then(&base, "v1");
        let p = preview(&done, &none(), t0(), &PreviewConfig::default());
        assert_eq!(p.end, End::NothingToDo);
        assert!(p.waves.is_empty());
    }

    #[test]
    fn deadline_turns_a_failure_into_a_timeout() {
        let base = snapshot(
            json!({"type": "All", "all": {"progressDeadline": "5m", "maxFailures": 1}}),
            &[&["c1", "c2", "c3"]],
        );
        let snap = completed_then(&base, "v2");
        let failing = BTreeSet::from(["c1".to_string()]);
        let p = preview(&snap, &failing, t0(), &PreviewConfig::default());
        // One failure is tolerated: the rollout settles with it, not promoted, once the
        // deadline turned it into a TimeOut.
        assert_eq!(
            p.end,
            End::Stopped {
                reason: mc::REASON_PROGRESS_DEADLINE_EXCEEDED.into()
            }
        );
        assert_eq!(p.duration.as_secs(), 300);
        assert_eq!(p.waves.len(), 1);
    }

    #[test]
    fn paused_rollout_starts_nothing() {
        let mut snap = snapshot(json!({"type": "All"}), &[&["c1"]]);
        snap.mwrs
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(labels::CONTROL_PAUSE.into(), "true".into());
        let p = preview(&snap, &none(), t0(), &PreviewConfig::default());
        assert_eq!(p.end, End::Paused);
        assert!(p.waves.is_empty());
    }

    #[test]
    fn invalid_spec_is_reported() {
        let mut snap = snapshot(json!({"type": "Sideways"}), &[&["c1"]]);
        snap.mwrs.metadata.generation = Some(3);
        let p = preview(&snap, &none(), t0(), &PreviewConfig::default());
        assert_eq!(p.end, End::Invalid);
        assert!(!p.message.is_empty());
    }
}
