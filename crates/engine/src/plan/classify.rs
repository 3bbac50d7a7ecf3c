//! Stage 3: every desired cluster's status against the target revision (deadlines,
//! soaks), the rollout engine's input, and its verdict per placementRef.

use std::borrow::Cow;
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};

use crate::rollout::{
    ClusterRolloutStatus, DecisionGroups, ParsedStrategy, RolloutResult, RolloutStatus,
};
use crate::{rollout, work};

use crate::plugin::JudgedBits;

use super::cluster_table::{ClusterRow, Desired};
use super::output::ClusterReport;
use super::pass::Pass;
use super::plugin_gate::{Gated, Questions};
use super::revision_ids::Carried;

pub(super) fn min_recheck(verdicts: &[Option<RolloutResult>]) -> Option<SignedDuration> {
    verdicts
        .iter()
        .flatten()
        .filter_map(|r| r.recheck_after)
        .filter(|d| d.is_positive())
        .min()
}

/// Stage 3's answer: every desired cluster against the target revision.
pub(super) struct Classified {
    pub(super) reports: Vec<ClusterReport>,
    /// The rollout engine's verdict per placementRef (None: it could not be asked).
    pub(super) verdicts: Vec<Option<RolloutResult>>,
    /// When the first success still settling has settled.
    pub(super) settling: Option<Timestamp>,
    /// What to ask rollout plugins now, and when the next question not due yet is.
    pub(super) questions: Questions,
    /// The chosen clusters (in the order of their names) their plugin judged SUCCEEDED.
    pub(super) judged: JudgedBits,
}

/// One walk over the desired clusters.
pub(super) struct Walk {
    pub(super) reports: Vec<ClusterReport>,
    /// The rollout engine's input per placementRef.
    pub(super) on_target: Vec<Vec<ClusterRolloutStatus>>,
    pub(super) settling: Option<Timestamp>,
    pub(super) questions: Questions,
    pub(super) judged: JudgedBits,
}

/// A gated cluster's deadline and soak, and its status with the deadline applied.
struct Timed {
    status: RolloutStatus,
    soak_until: Option<Timestamp>,
    deadline: Option<Timestamp>,
}

/// The rollout engine's input for a cluster whose ManifestWork carries the target, with
/// the status as the agent reports it (`since` and `held` as the sight bounds them).
fn engine_input(
    name: &Arc<str>,
    d: &Desired<'_>,
    gated: &Gated,
    since: Option<Timestamp>,
    held: bool,
) -> ClusterRolloutStatus {
    ClusterRolloutStatus {
        cluster: name.clone(),
        group: d.group.clone(),
        status: gated.status,
        // A held cluster's deadline does not run, not even a zero one: the wait is the
        // plugin's.
        last_transition_time: if held { Some(Timestamp::MAX) } else { since },
        recheck_time: None,
    }
}

impl<'a> Pass<'a> {
    /// Stage 3.
    pub(super) fn classified(&self, target: &str) -> Classified {
        let walk = self.classify(self.ids.id(target));
        let verdicts = self.evaluate(&walk.on_target);
        Classified {
            reports: walk.reports,
            verdicts,
            settling: walk.settling,
            questions: walk.questions,
            judged: walk.judged,
        }
    }

    /// The engine's verdict per placementRef (None: placement not usable).
    pub(super) fn evaluate(
        &self,
        on_target: &[Vec<ClusterRolloutStatus>],
    ) -> Vec<Option<RolloutResult>> {
        self.views
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let groups = v.and_then(|v| v.groups())?;
                let owned = self.owned_groups(i, groups);
                Some(rollout::evaluate(
                    &self.validated.strategies[i],
                    &owned,
                    &on_target[i],
                    self.now,
                    self.cfg.compat,
                ))
            })
            .collect()
    }

    /// A placement's groups without the clusters an earlier placementRef owns.
    pub(super) fn owned_groups<'g>(
        &self,
        i: usize,
        groups: &'g DecisionGroups,
    ) -> Cow<'g, DecisionGroups> {
        // The first placementRef with decisions owns every cluster it selects: no need to
        // look each one up (the common case of a single placementRef).
        let first = !self.views[..i]
            .iter()
            .any(|v| v.and_then(|v| v.groups()).is_some());
        let all_owned = first
            || groups
                .iter()
                .all(|(_, c)| self.clusters.desired(c).is_some_and(|d| d.placement == i));
        if all_owned {
            return Cow::Borrowed(groups);
        }
        Cow::Owned(DecisionGroups::from_pairs(
            groups
                .iter()
                .filter(|(_, c)| self.clusters.desired(c).is_some_and(|d| d.placement == i))
                .map(|(g, c)| (g.clone(), c.to_string())),
        ))
    }

    /// Each desired cluster's status against the target, with deadlines and soak applied,
    /// and — in the same walk over the ManifestWorks — the engine's input per placementRef:
    /// only clusters whose ManifestWork carries the target revision (rules §10.1), with the
    /// status as the agent reports it (the engine applies deadlines itself).
    /// Also finds when the first success still settling will have settled, and what to
    /// ask rollout plugins.
    pub(super) fn classify(&self, target: Option<usize>) -> Walk {
        let mut walk = Walk {
            reports: Vec::with_capacity(self.clusters.desired_len),
            on_target: vec![Vec::new(); self.views.len()],
            settling: None,
            questions: Questions::default(),
            judged: JudgedBits::of(self.clusters.desired_len),
        };
        let placements = self.placement_names();
        let revisions = self.revision_names();
        let prior = target.and_then(|i| self.prior_judged(self.ids.name(i)));
        for (k, (cluster, row)) in self.clusters.chosen().enumerate() {
            let Some(d) = &row.desired else { continue };
            let revision = row.carried.map(|r| match r {
                Carried::Known(i) => revisions[i].clone(),
                Carried::Unstored(h) => Arc::from(h),
            });
            // The ManifestWork's name is shared, not copied: at start-up a pass covers every
            // cluster, and two copies per cluster were a visible share of the peak.
            let name: Arc<str> = row
                .work
                .map_or_else(|| cluster.into(), |w| w.cluster.clone());
            let observed = self.observed_status(cluster, row, target);
            if let Some(t) = self.settles_at(row, observed.0) {
                walk.settling = Some(walk.settling.map_or(t, |s| s.min(t)));
            }
            let judged_before = prior.is_some_and(|p| p.get(k));
            let questions = &mut walk.questions;
            let gated = self.gate((&name, row, d), target, observed, judged_before, questions);
            if gated.judged {
                walk.judged.set(k);
            }
            let (since, held) = self.observed.sight.bound(gated.since, gated.held);
            if gated.status != RolloutStatus::ToApply {
                walk.on_target[d.placement].push(engine_input(&name, d, &gated, since, held));
            }
            let timed = self.timed(&self.validated.strategies[d.placement], &gated, since, held);
            walk.reports.push(ClusterReport {
                cluster: name,
                placement: placements[d.placement].clone(),
                group: Some(d.group.clone()),
                revision,
                status: timed.status,
                since,
                soak_until: timed.soak_until,
                deadline: timed.deadline,
                note: gated.note,
            });
        }
        walk
    }

    /// The name of each placementRef, shared by the reports of its clusters.
    fn placement_names(&self) -> Vec<Arc<str>> {
        let refs = &self.observed.mwrs.spec.placement_refs;
        refs.iter().map(|r| Arc::from(r.name.as_str())).collect()
    }

    /// The name of each revision id, shared by the reports of the clusters carrying it.
    fn revision_names(&self) -> Vec<Arc<str>> {
        (0..self.ids.len())
            .map(|i| Arc::from(self.ids.name(i)))
            .collect()
    }

    /// A gated cluster's deadline and soak, and its status once its deadline has passed
    /// (`since` and `held` as the sight bounds them).
    fn timed(
        &self,
        strategy: &ParsedStrategy,
        gated: &Gated,
        since: Option<Timestamp>,
        held: bool,
    ) -> Timed {
        let mut timed = Timed {
            status: gated.status,
            soak_until: None,
            deadline: None,
        };
        let in_flight = matches!(
            gated.status,
            RolloutStatus::Progressing | RolloutStatus::Validating | RolloutStatus::Failed
        );
        if in_flight && !held {
            timed.deadline = strategy.deadline.at(since, self.now);
        }
        match gated.status {
            RolloutStatus::Succeeded => {
                let end = rollout::soak_end(strategy.min_success_time, since, self.now);
                if end.is_some_and(|e| self.now < e) {
                    timed.soak_until = end;
                }
            }
            RolloutStatus::Progressing | RolloutStatus::Validating | RolloutStatus::Failed
                if !held
                    && strategy
                        .deadline
                        .passed(since, gated.asked_at.unwrap_or(self.now)) =>
            {
                timed.status = RolloutStatus::TimeOut;
            }
            _ => {}
        }
        timed
    }

    /// When a success reported for this row settles, if it is still settling (`status`
    /// is what [`Self::observed_status`] made of it).
    pub(super) fn settles_at(
        &self,
        row: &ClusterRow<'a>,
        status: RolloutStatus,
    ) -> Option<Timestamp> {
        let f = &row.facts;
        let t = f.seen?.saturating_add(self.cfg.settle).ok()?;
        (status == RolloutStatus::Progressing
            && f.status == RolloutStatus::Succeeded
            && self.now < t)
            .then_some(t)
    }

    /// A desired cluster's status against the target as the hub shows it, before
    /// deadlines and soak: ToApply when its ManifestWork lacks the target (the only
    /// status that makes a write); Failed when another owner holds the name; a success
    /// that has not settled yet is still in flight (rules §11.3).
    pub(super) fn observed_status(
        &self,
        cluster: &str,
        row: &ClusterRow<'a>,
        target: Option<usize>,
    ) -> (RolloutStatus, Option<Timestamp>, Option<String>) {
        if !self.carries_in(row, target) {
            if let Some(b) = self.observed.blocked.iter().find(|b| b.cluster == cluster) {
                return (RolloutStatus::Failed, None, Some(b.why.clone()));
            }
            return (RolloutStatus::ToApply, None, None);
        }
        let f = &row.facts;
        match (f.status, row.work) {
            (RolloutStatus::Succeeded, _)
                if self.settles_at(row, RolloutStatus::Progressing).is_some() =>
            {
                (RolloutStatus::Progressing, f.since, None)
            }
            (_, Some(w)) if f.awaiting => (f.status, f.since, Some(work::awaiting_note(w))),
            (status, _) => (status, f.since, None),
        }
    }
}
