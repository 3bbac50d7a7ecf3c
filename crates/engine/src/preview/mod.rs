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
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use mwrs_api::mwrs::{ManifestWorkReplicaSet, condition as mwrs_condition};
use mwrs_api::work::ManifestWorkTemplate;
use mwrs_api::work::condition as work_condition;

use crate::placement::PlacementView;
use crate::plan::in_memory::{Objects, Works};
use crate::plan::{Observed, Plan, PlanConfig, WorkChange};
use crate::plugin::{Begun, ClusterVerdict, PluginHealth, PluginInputs, Verdict};
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
    /// Whole planner passes run (the rest of the waves came from the engine alone).
    pub planner_passes: usize,
}

/// Knobs of a preview.
#[derive(Clone, Debug, Default)]
pub struct PreviewConfig {
    pub plan: PlanConfig,
    /// Most planner passes to run; None: enough for any strategy on the snapshot's fleet.
    pub max_passes: Option<usize>,
    /// Run the whole planner for every pass, never the rollout engine alone over a plain
    /// roll forward (the same waves, slower: one pass costs the whole fleet).
    pub every_pass: bool,
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
        planner_passes: sim.planner_passes,
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
        let mut passes = 0;
        while passes < budget {
            passes += 1;
            sim.agents();
            let plan = sim.plan(&cfg.plan);
            if plan.invalid.is_some() {
                sim.execute(&plan);
                return (waves, End::Invalid);
            }
            let update = plan.status.as_ref().and_then(|s| s.update_revision.clone());
            if sim.update.is_none() {
                sim.update = update.clone();
            }
            sim.record_waves(&plan, update.as_deref(), &mut waves);
            let changed = sim.execute(&plan) | sim.answer_plugins(&plan);
            if let Some(e) = sim.settled(!waves.is_empty()) {
                return (waves, e);
            }
            if changed {
                // Skipping ahead runs the rollout engine alone: no plugin gets asked.
                let plugins = !sim.plugins.health.is_empty();
                if !cfg.every_pass && !plugins && sim.only_the_engine_decides(&plan) {
                    passes += sim.skip_ahead(&cfg.plan, &mut waves, budget - passes);
                }
                continue;
            }
            match plan.recheck.filter(|d| d.is_positive()) {
                Some(d) => sim.now += d,
                None => return (waves, sim.stopped()),
            }
        }
        (waves, End::Unfinished)
    }

    /// The waves `plan` writes, one per revision.
    fn record_waves(&self, plan: &Plan, update: Option<&str>, waves: &mut Vec<Wave>) {
        let mut applies: BTreeMap<&str, Vec<(String, String)>> = BTreeMap::new();
        for w in &plan.works {
            if let WorkChange::Apply(a) = w {
                applies
                    .entry(a.revision.as_str())
                    .or_default()
                    .push((a.cluster.clone(), a.placement.clone()));
            }
        }
        for (revision, clusters) in applies {
            let kind = if Some(revision) == update {
                WaveKind::Rollout
            } else {
                WaveKind::Revert
            };
            self.record_wave(waves, self.now, kind, revision, clusters);
        }
    }

    fn record_wave(
        &self,
        waves: &mut Vec<Wave>,
        at: Timestamp,
        kind: WaveKind,
        revision: &str,
        mut clusters: Vec<(String, String)>,
    ) {
        clusters.sort();
        waves.push(Wave {
            number: waves.len() + 1,
            at: at.duration_since(self.start),
            kind,
            revision: revision.to_string(),
            clusters,
        });
    }
}

/// `(status, reason, message)` of the Progressing condition.
fn progressing(m: &ManifestWorkReplicaSet) -> Option<(&str, &str, &str)> {
    m.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == mwrs_condition::PROGRESSING)
        .map(|c| (c.status.as_str(), c.reason.as_str(), c.message.as_str()))
}

/// Every plugin `mwrs`'s placementRefs name, available.
fn simulated_plugins(mwrs: &ManifestWorkReplicaSet) -> PluginInputs {
    let health = crate::plugin::named(mwrs)
        .map(|name| {
            let simulated = PluginHealth::Available {
                description: "simulated".into(),
                since: Timestamp::UNIX_EPOCH,
            };
            (name, simulated)
        })
        .collect();
    PluginInputs {
        health,
        ..PluginInputs::default()
    }
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
    answered: HashMap<Arc<str>, i64>,
    update: Option<String>,
    /// Clusters seen Failed or TimeOut on the update revision in any pass.
    failed: BTreeSet<String>,
    planner_passes: usize,
    /// Every rollout plugin the spec names, answering at once: FAILED for a failing
    /// cluster, SUCCEEDED for the others.
    plugins: PluginInputs,
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
            planner_passes: 0,
            plugins: simulated_plugins(&snapshot.mwrs),
        }
    }

    /// Does a plugin judge `w`'s cluster? Then its agent reports a failing cluster done
    /// and the plugin says FAILED.
    fn judged(&self, w: &WorkView) -> bool {
        let placement = w.placement();
        self.mwrs.spec.placement_refs.iter().any(|r| {
            Some(r.name.as_str()) == placement
                && r.rollout_strategy
                    .as_ref()
                    .is_some_and(|s| s.plugin.is_some())
        })
    }

    /// The simulated plugins answer `plan`'s calls at once; true when there were any.
    fn answer_plugins(&mut self, plan: &Plan) -> bool {
        let calls = &plan.plugin_calls;
        for b in &calls.begins {
            self.plugins.begun.insert(
                Arc::from(b.cluster.as_str()),
                Begun {
                    plugin: b.target.plugin.clone(),
                    revision: b.revision.clone(),
                    aborting: b.aborting,
                    at: self.now,
                    acked: true,
                    mutation: None,
                },
            );
        }
        for p in &calls.progress {
            let placement = p.target.placement.clone();
            self.plugins.progressed.insert(placement, p.fingerprint);
        }
        for v in &calls.validations {
            let failing = self.failing.contains(&v.cluster);
            let verdict = if failing {
                Verdict::Failed
            } else {
                Verdict::Succeeded
            };
            self.plugins.verdicts.insert(
                Arc::from(v.cluster.as_str()),
                ClusterVerdict {
                    plugin: v.target.plugin.clone(),
                    revision: v.revision.clone(),
                    generation: v.generation,
                    verdict,
                    message: format!("simulated {}", verdict.as_str()),
                    at: self.now,
                },
            );
        }
        !calls.is_empty()
    }

    fn desired(&self) -> usize {
        let mut all: BTreeSet<&str> = BTreeSet::new();
        for p in &self.placements {
            all.extend(p.groups().into_iter().flat_map(|g| g.clusters()));
        }
        all.len()
    }

    fn observed(&self) -> Observed<'_> {
        Observed {
            mwrs: &self.mwrs,
            placements: &self.placements,
            works: self.works.as_slice(),
            revisions: &self.revisions,
            blocked: &[],
            taken_revision_names: &[],
            plugins: &self.plugins,
            sight: crate::plan::Sight::Clear,
        }
    }

    fn objects(&mut self) -> Objects<'_> {
        Objects {
            mwrs: &mut self.mwrs,
            revisions: &mut self.revisions,
            works: &mut self.works,
        }
    }

    fn plan(&mut self, cfg: &PlanConfig) -> Plan {
        self.planner_passes += 1;
        let plan = crate::plan::plan(&self.observed(), self.now, cfg);
        let update = plan
            .status
            .as_ref()
            .and_then(|s| s.update_revision.as_deref());
        self.failed.extend(
            plan.clusters
                .iter()
                .filter(|c| c.status.is_failure() && c.revision.as_deref() == update)
                .map(|c| c.cluster.to_string()),
        );
        plan
    }

    /// Every ManifestWork generation not answered yet gets its final conditions now.
    fn agents(&mut self) {
        let unanswered: Vec<Arc<str>> = self
            .works
            .iter()
            .filter(|w| self.answered.get(&*w.cluster) != Some(&w.generation) && !w.deleting)
            .map(|w| w.cluster.clone())
            .collect();
        for cluster in unanswered {
            self.answer(&cluster, self.now);
        }
    }

    /// The agent of `cluster` reports its ManifestWork's generation done at `at`: Degraded
    /// when the cluster fails on the update revision, else a success.
    fn answer(&mut self, cluster: &str, at: Timestamp) {
        let update = self.update.as_deref();
        let judged = self.works.get(cluster).is_some_and(|w| self.judged(w));
        let Some(w) = self.works.get_mut(cluster) else {
            return;
        };
        let fails = self.failing.contains(cluster) && update.is_some() && w.hash() == update;
        let fails = fails && !judged;
        let g = w.generation;
        w.set_condition(work_condition::APPLIED, "True", g, at);
        w.set_condition(work_condition::AVAILABLE, "True", g, at);
        let (progressing, degraded) = if fails {
            ("True", "True")
        } else {
            ("False", "False")
        };
        w.set_condition(work_condition::PROGRESSING, progressing, g, at);
        w.set_condition(work_condition::DEGRADED, degraded, g, at);
        self.answered.insert(Arc::from(cluster), g);
    }

    /// Carries out `plan`; true when anything observable changed.
    fn execute(&mut self, plan: &Plan) -> bool {
        let now = self.now;
        let changed = self.objects().execute(plan, now);
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
            ("False", mwrs_condition::REASON_NEW_MANIFESTWORK_AVAILABLE)
                if s.current_revision.is_some() && s.current_revision == s.update_revision =>
            {
                Some(if any_work_written {
                    End::Complete
                } else {
                    End::NothingToDo
                })
            }
            ("False", mwrs_condition::REASON_ROLLOUT_ABORTED)
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
            Some((_, mwrs_condition::REASON_ROLLOUT_PAUSED, _)) => End::Paused,
            Some((_, mwrs_condition::REASON_ABORT_FAILED, _)) => End::AbortFailed,
            Some((
                _,
                r @ (mwrs_condition::REASON_PROGRESS_DEADLINE_EXCEEDED
                | mwrs_condition::REASON_MAX_FAILURES_EXCEEDED),
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
    let done = at_gen(work_condition::PROGRESSING).is_some_and(|c| c.status == "False")
        || at_gen(work_condition::DEGRADED).is_some_and(|c| c.status == "True")
        || (w.condition(work_condition::PROGRESSING).is_none()
            && at_gen(work_condition::AVAILABLE).is_some_and(|c| c.status == "True"));
    done.then_some(w.generation)
}

mod skip_ahead;
#[cfg(test)]
mod tests;
