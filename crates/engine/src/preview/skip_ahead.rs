//! Skipping ahead: between planner passes of a plain roll forward, only the rollout
//! engine decides which clusters start, so the preview runs the engine alone wave after
//! wave (a planner pass costs the whole fleet; the engine's call a fraction of it), then
//! writes what those passes would have written and lets the planner take over again for
//! the end. Clusters named as failing stop it before the wave that would start one: from
//! there the planner decides (the failure, an abort). The property test in `tests` holds
//! it to the same waves as a pass every time.

use std::collections::BTreeSet;
use std::sync::Arc;

use hashbrown::HashSet;
use jiff::Timestamp;
use mwrs_api::labels;

use crate::plan::{PlacementRollout, Plan, PlanConfig, RollForward, WorkApply, WorkChange};
use crate::rollout::{self, ClusterRolloutStatus, Compat, RolloutResult, RolloutStatus};
use crate::work::{self, WorkView};

use super::{Sim, Wave, WaveKind};

impl Sim<'_> {
    /// Did `plan` roll the update revision forward on a fleet where nothing can fail or
    /// change but by the engine's waves? Then the passes up to the last cluster started
    /// write nothing but those waves.
    pub(super) fn only_the_engine_decides(&self, plan: &Plan) -> bool {
        let rolled_forward = !plan.works.is_empty()
            && plan.works.iter().all(|w| {
                matches!(w, WorkChange::Apply(a) if Some(a.revision.as_str()) == self.update.as_deref())
            });
        let requests = || {
            self.mwrs.metadata.annotations.as_ref().is_some_and(|a| {
                [
                    labels::CONTROL_ABORT,
                    labels::CONTROL_RETRY,
                    labels::CONTROL_PAUSE,
                ]
                .iter()
                .any(|k| a.contains_key(*k))
            })
        };
        // Clusters left to start once this plan's writes land: none, nothing to skip.
        let waiting = || {
            plan.clusters
                .iter()
                .filter(|c| c.status == RolloutStatus::ToApply)
                .count()
        };
        let aborted = plan
            .status
            .as_ref()
            .is_none_or(|s| s.aborted_time.is_some());
        // Cheapest first: the walks over the fleet come last.
        rolled_forward
            && !aborted
            && !requests()
            && waiting() > plan.works.len()
            && self.works.iter().all(|w| self.quiet(w))
    }

    /// A ManifestWork that makes no write but the engine's: desired, not going away, and
    /// on the update revision only once it succeeded or while its agent has yet to answer
    /// (with a success: a failing cluster's answer is for the planner).
    fn quiet(&self, w: &WorkView) -> bool {
        let desired = self
            .placements
            .iter()
            .any(|p| p.groups().is_some_and(|g| g.contains(&w.cluster)));
        let on_update = w.hash().is_some() && w.hash() == self.update.as_deref();
        let unanswered = self.answered.get(&*w.cluster) != Some(&w.generation)
            && !self.failing.contains(&*w.cluster);
        desired
            && !w.deleting
            && (!on_update || unanswered || work::cluster_status(w).0 == RolloutStatus::Succeeded)
    }

    /// Runs the engine alone from `now` for at most `budget` passes, writes the waves it
    /// starts as the planner would, with the agent's answers, and returns the passes it
    /// stood for. The planner's next pass is the one after the last wave.
    pub(super) fn skip_ahead(
        &mut self,
        cfg: &PlanConfig,
        waves: &mut Vec<Wave>,
        budget: usize,
    ) -> usize {
        self.agents();
        let (writes, passes, end) = {
            let observed = self.observed();
            let Some(forward) = RollForward::new(&observed, self.now, cfg) else {
                return 0;
            };
            let mut placements = forward.placements();
            let run = engine_waves(&mut placements, self.now, cfg.compat, budget, self.failing);
            let writes: Vec<(Timestamp, Vec<WorkApply>)> = run
                .waves
                .into_iter()
                .map(|(at, starts)| {
                    let applies = starts
                        .iter()
                        .filter_map(|(c, i)| forward.write(c, placements[*i].index, at))
                        .collect();
                    (at, applies)
                })
                .collect();
            (writes, run.passes, run.now)
        };
        for (at, applies) in writes {
            self.land(at, applies, waves);
        }
        self.now = end;
        passes
    }

    /// One wave's writes at `at`, recorded, carried out and answered by the agents.
    fn land(&mut self, at: Timestamp, applies: Vec<WorkApply>, waves: &mut Vec<Wave>) {
        let clusters = applies
            .iter()
            .map(|a| (a.cluster.clone(), a.placement.clone()))
            .collect();
        let update = self.update.clone().unwrap_or_default();
        self.record_wave(waves, at, WaveKind::Rollout, &update, clusters);
        let changes: Vec<WorkChange> = applies.into_iter().map(WorkChange::Apply).collect();
        self.objects().write_works(changes.iter().map(|c| (c, at)));
        for c in &changes {
            if let WorkChange::Apply(a) = c {
                self.answer(&a.cluster, at);
            }
        }
    }
}

/// What the engine alone started: waves (time, (cluster, index in the placements)), the
/// passes they stand for and the time of the pass after the last.
struct EngineRun {
    waves: Vec<(Timestamp, Vec<(String, usize)>)>,
    passes: usize,
    now: Timestamp,
}

/// The rollout engine's waves over `placements` from `now`, every cluster succeeding as
/// soon as it starts: one pass per wave and per wait, until every cluster has started, no
/// wait is left, `budget` passes are spent or the next wave would start a cluster of
/// `failing` (which the planner's pass at the returned `now` starts instead).
fn engine_waves(
    placements: &mut [PlacementRollout],
    mut now: Timestamp,
    compat: Compat,
    budget: usize,
    failing: &BTreeSet<String>,
) -> EngineRun {
    let mut waves = Vec::new();
    let mut passes = 0;
    let mut started: HashSet<Arc<str>> = placements
        .iter()
        .flat_map(|p| p.on_target.iter().map(|s| s.cluster.clone()))
        .collect();
    while passes < budget {
        let verdicts: Vec<RolloutResult> = placements
            .iter()
            .map(|p| rollout::evaluate(&p.strategy, &p.groups, &p.on_target, now, compat))
            .collect();
        let starts: Vec<(usize, &ClusterRolloutStatus)> = verdicts
            .iter()
            .enumerate()
            .flat_map(|(i, v)| v.to_rollout.iter().map(move |c| (i, c)))
            .filter(|(_, c)| c.status == RolloutStatus::ToApply)
            .collect();
        // The engine starting a cluster that already carries the revision (the upstream
        // group-index quirk) is no plain roll forward: the planner decides from here.
        if starts
            .iter()
            .any(|(_, c)| started.contains(&c.cluster) || failing.contains(&*c.cluster))
        {
            break;
        }
        if !starts.is_empty() {
            passes += 1;
            let mut wave = Vec::with_capacity(starts.len());
            for (i, c) in starts {
                started.insert(c.cluster.clone());
                wave.push((c.cluster.to_string(), i));
                placements[i].on_target.push(ClusterRolloutStatus {
                    status: RolloutStatus::Succeeded,
                    last_transition_time: Some(now),
                    ..c.clone()
                });
            }
            waves.push((now, wave));
            continue;
        }
        let all_started = placements
            .iter()
            .all(|p| p.on_target.len() >= p.groups.len());
        let wait = verdicts
            .iter()
            .filter_map(|v| v.recheck_after)
            .filter(|d| d.is_positive())
            .min();
        match wait {
            Some(d) if !all_started => {
                passes += 1;
                now += d;
            }
            _ => break,
        }
    }
    EngineRun { waves, passes, now }
}
