//! Stage 6, the status a pass reports: summaries per placementRef, the four conditions
//! and the Events their changes make; also the plan for an invalid spec.

use jiff::{SignedDuration, Timestamp};
use mwrs_api::mwrs::{
    AbortRecord, BlockedCluster, HandledControls, ManifestWorkReplicaSetStatus, PlacementSummary,
    Summary, condition as mwrs_condition,
};
use mwrs_api::{Condition, labels};

use crate::conditions::{Cond, Status};
use crate::placement::PlacementState;
use crate::rollout::{DecisionGroups, RolloutStatus};
use crate::{Invalid, conditions};

use super::abort::{AbortDecision, AbortState, Hold};
use super::classify::Classified;
use super::controls::Controls;
use super::history::RevisionStep;
use super::outcome::{Around, Outcome, name_few};
use super::output::{
    BackToStable, BlockedWrite, ClusterReport, FinalizerAction, Plan, PlannedEvent, RevisionChange,
};
use super::pass::{Observed, Pass};

/// How long the abort `last` took to bring its clusters back to `hold.target`, as
/// `reports` (every cluster done there) show: None without a record or a cluster
/// reverted after it.
fn back_to_stable(
    reports: &[ClusterReport],
    hold: &Hold<'_>,
    last: Option<&AbortRecord>,
) -> Option<BackToStable> {
    let started = last?.time.0;
    let clusters: Vec<SignedDuration> = reports
        .iter()
        .filter(|r| r.revision.as_deref() == Some(hold.target.as_str()))
        .filter_map(|r| r.since.filter(|s| *s > started))
        .map(|s| s.duration_since(started))
        .collect();
    let whole = clusters.iter().max().copied()?;
    Some(BackToStable { whole, clusters })
}

pub(super) fn plan_invalid(
    observed: &Observed<'_>,
    old: &ManifestWorkReplicaSetStatus,
    invalid: Invalid,
    finalizer: FinalizerAction,
    now: Timestamp,
) -> Plan {
    let mut status = old.clone();
    let mut conds = status.conditions.clone().unwrap_or_default();
    let c = Cond::new(
        mwrs_condition::PROGRESSING,
        Status::False,
        mwrs_condition::REASON_INVALID_SPEC,
        invalid.to_string(),
    );
    conditions::set(&mut conds, &c, observed.mwrs.metadata.generation, now);
    status.conditions = Some(conds);
    status.observed_generation = observed.mwrs.metadata.generation;
    let mut plan = Plan::empty(finalizer);
    plan.events = transitions(old, &status);
    plan.status = Some(status);
    plan.invalid = Some(invalid);
    plan
}

/// The blocked writes as the status publishes them (sorted, the first 50), so the CLI
/// shows what only the controller learnt by writing.
pub(super) fn blocked_clusters(blocked: &[BlockedWrite]) -> Vec<BlockedCluster> {
    const MAX: usize = 50;
    let mut out: Vec<BlockedCluster> = blocked
        .iter()
        .map(|b| BlockedCluster {
            cluster: b.cluster.clone(),
            message: b.why.clone(),
        })
        .collect();
    out.sort_by(|a, b| a.cluster.cmp(&b.cluster));
    out.truncate(MAX);
    out
}

pub(super) fn add(a: Summary, b: Summary) -> Summary {
    Summary {
        total: a.total + b.total,
        progressing: a.progressing + b.progressing,
        available: a.available + b.available,
        degraded: a.degraded + b.degraded,
        applied: a.applied + b.applied,
        desired_total: a.desired_total + b.desired_total,
        updated: a.updated + b.updated,
    }
}

/// Conditions whose status or reason changed between two statuses.
pub(super) fn transitions(
    old: &ManifestWorkReplicaSetStatus,
    new: &ManifestWorkReplicaSetStatus,
) -> Vec<PlannedEvent> {
    let old_list: &[Condition] = old.conditions.as_deref().unwrap_or(&[]);
    new.conditions
        .iter()
        .flatten()
        .filter(|c| {
            conditions::find(old_list, &c.type_)
                .is_none_or(|o| o.status != c.status || o.reason != c.reason)
        })
        .map(|c| PlannedEvent {
            reason: c.reason.clone(),
            message: format!("{} {}: {}", c.type_, c.status, c.message),
            warning: matches!(
                c.reason.as_str(),
                mwrs_condition::REASON_PROGRESS_DEADLINE_EXCEEDED
                    | mwrs_condition::REASON_MAX_FAILURES_EXCEEDED
                    | mwrs_condition::REASON_ROLLOUT_ABORTED
                    | mwrs_condition::REASON_ABORT_FAILED
                    | mwrs_condition::REASON_ROLLOUT_DEGRADED
                    | mwrs_condition::REASON_INVALID_SPEC
                    | mwrs_condition::REASON_PLACEMENT_DECISION_NOT_FOUND
                    | mwrs_condition::REASON_PLUGINS_SKIPPED
            ),
        })
        .collect()
}

/// Stage 6's answer.
pub(super) struct StatusUpdate {
    pub(super) status: ManifestWorkReplicaSetStatus,
    /// Condition changes, a new revision, an abort starting or completed, in that order.
    pub(super) events: Vec<PlannedEvent>,
    /// The update revision's completed-at mark, when it completes in this pass.
    pub(super) mark: Option<RevisionChange>,
    /// The abort that completes in this pass, timed.
    pub(super) back_to_stable: Option<BackToStable>,
}

impl<'a> Pass<'a> {
    /// Stage 6: the status composed once from what the stages decided.
    pub(super) fn status_update(
        &self,
        revision: &RevisionStep,
        controls: &Controls,
        hold: &Hold<'_>,
        seen: &Classified,
        abort: &AbortDecision,
    ) -> StatusUpdate {
        let update = revision.update.as_str();
        let mut status = self.old.clone();
        status.observed_generation = self.observed.mwrs.metadata.generation;
        if revision.collision_count.is_some() {
            status.collision_count = revision.collision_count;
        }
        status.update_revision = Some(update.to_string());
        status.aborted_time = abort.memory.aborted_time.clone();
        status.last_abort = abort.memory.last_abort.clone();
        if controls.handled != HandledControls::default() {
            status.handled_controls = Some(controls.handled.clone());
        }
        let around = Around {
            unknown: self.unknown_placements(),
            with_work: self.clusters.works_len,
            current: self.old.current_revision.clone(),
            abort,
        };
        let outcome = Outcome::tally(&seen.reports, around, &hold.target, update);
        let mark = outcome
            .complete
            .then(|| self.complete(&mut status, update))
            .flatten();
        self.report(&mut status, &seen.reports, &hold.target, update);
        status.blocked_clusters = blocked_clusters(self.observed.blocked);
        status.plugin_judged = self.judged_record(&hold.target, &seen.judged);
        let conds = self.conditions(
            &outcome,
            &abort.state,
            update,
            controls.paused,
            revision.changed,
            revision.created,
        );
        status.conditions = Some(self.with_conditions(status.conditions.take(), &conds));
        let reverted = self.abort_completes(&outcome, &abort.state);
        let events =
            self.status_events(&status, revision, hold, &outcome, (&abort.state, reverted));
        StatusUpdate {
            back_to_stable: reverted
                .then(|| back_to_stable(&seen.reports, hold, self.old.last_abort.as_ref()))
                .flatten(),
            status,
            events,
            mark,
        }
    }

    /// `status` with `update` complete: the current revision, and no longer the aborted
    /// one (an automatic abort with nothing to go back to does not stop a rollout that
    /// recovers). The revision's completed-at mark when it has just completed.
    fn complete(
        &self,
        status: &mut ManifestWorkReplicaSetStatus,
        update: &str,
    ) -> Option<RevisionChange> {
        status.current_revision = Some(update.to_string());
        if status
            .last_abort
            .as_ref()
            .is_some_and(|a| a.revision == update)
        {
            status.last_abort = None;
        }
        let completed_now = self.old.current_revision.as_deref() != Some(update);
        completed_now
            .then(|| self.mark(update, labels::REVISION_COMPLETED_AT))
            .flatten()
    }

    /// The condition list `old` with `conds` set (PluginLoaded dropped when no plugin
    /// is named any more).
    fn with_conditions(&self, old: Option<Vec<Condition>>, conds: &[Cond]) -> Vec<Condition> {
        let mut list = old.unwrap_or_default();
        if conds
            .iter()
            .all(|c| c.type_ != mwrs_condition::PLUGIN_LOADED)
        {
            list.retain(|c| c.type_ != mwrs_condition::PLUGIN_LOADED);
        }
        for c in conds {
            conditions::set(
                &mut list,
                c,
                self.observed.mwrs.metadata.generation,
                self.now,
            );
        }
        list
    }

    /// Does the abort holding the rollout complete in this pass: every cluster back on
    /// the stable revision, which the last status did not say yet?
    fn abort_completes(&self, outcome: &Outcome, abort: &AbortState) -> bool {
        if *abort != AbortState::Held || outcome.done != outcome.desired || outcome.desired == 0 {
            return false;
        }
        let was_done = self
            .old
            .conditions
            .as_deref()
            .and_then(|l| conditions::find(l, mwrs_condition::MANIFESTWORK_APPLIED))
            .is_some_and(|c| c.status == "True");
        !was_done
    }

    /// The Events of stage 6: one per condition change, the new revision (also when the
    /// rollout completes in the same pass and Progressing never says so), an abort
    /// starting, and a revert completed (`reverted`: [`Self::abort_completes`]).
    fn status_events(
        &self,
        status: &ManifestWorkReplicaSetStatus,
        revision: &RevisionStep,
        hold: &Hold<'_>,
        outcome: &Outcome,
        (abort, reverted): (&AbortState, bool),
    ) -> Vec<PlannedEvent> {
        let update = revision.update.as_str();
        let mut events = transitions(&self.old, status);
        let started = self.in_progress_reason(revision.changed, revision.created);
        if revision.changed && !events.iter().any(|e| e.reason == started) {
            events.push(PlannedEvent {
                reason: started.into(),
                message: format!("revision {update} is the update revision"),
                warning: false,
            });
        }
        if reverted {
            events.push(PlannedEvent {
                reason: mwrs_condition::EVENT_ABORT_COMPLETED.into(),
                message: format!(
                    "all {} clusters are back on revision {}",
                    outcome.desired, hold.target
                ),
                warning: false,
            });
        }
        if matches!(abort, AbortState::Starting(_)) {
            events.push(PlannedEvent {
                reason: mwrs_condition::EVENT_ABORT_STARTED.into(),
                message: format!(
                    "reverting every cluster from revision {update} to {}",
                    self.old.current_revision.as_deref().unwrap_or("")
                ),
                warning: true,
            });
        }
        events
    }

    pub(super) fn report(
        &self,
        status: &mut ManifestWorkReplicaSetStatus,
        reports: &[ClusterReport],
        target: &str,
        update: &str,
    ) {
        let id = self.ids.id(target);
        let refs = &self.observed.mwrs.spec.placement_refs;
        let mut per: Vec<Summary> = vec![Summary::default(); refs.len()];
        let mut applied_on_target = vec![0i64; refs.len()];
        for c in reports {
            let Some(i) = refs.iter().position(|r| *r.name == *c.placement) else {
                continue;
            };
            per[i].desired_total += 1;
            if c.revision.as_deref() == Some(update) && c.status == RolloutStatus::Succeeded {
                per[i].updated += 1;
            }
        }
        for (_, row) in self.clusters.rows.iter() {
            if row.work.is_none() {
                continue;
            }
            let Some(i) = self.placement_index_of(row) else {
                continue;
            };
            let s = &mut per[i];
            s.total += 1;
            if self.carries_in(row, id) {
                let f = &row.facts;
                applied_on_target[i] += 1;
                s.applied += i64::from(f.applied);
                s.available += i64::from(f.available);
                s.progressing += i64::from(f.progressing);
                s.degraded += i64::from(f.degraded);
            }
        }
        let mut total = Summary::default();
        status.placement_summary = refs
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let s = per[i];
                total = add(total, s);
                let groups = self.views[i]
                    .and_then(|v| v.groups())
                    .map_or(0, DecisionGroups::group_count);
                PlacementSummary {
                    name: r.name.clone(),
                    available_decision_groups: format!(
                        "{groups} ({} / {} clusters applied)",
                        applied_on_target[i], s.desired_total
                    ),
                    summary: s,
                }
            })
            .collect();
        status.summary = total;
    }

    pub(super) fn conditions(
        &self,
        out: &Outcome,
        abort: &AbortState,
        update: &str,
        paused: bool,
        revision_changed: bool,
        created: bool,
    ) -> Vec<Cond> {
        let mut conds = vec![
            self.placement_verified(),
            out.manifestwork_applied(&self.placement_verified()),
            out.rolled_out(abort),
            out.progressing(
                abort,
                update,
                paused,
                self.in_progress_reason(revision_changed, created),
            ),
        ];
        conds.extend(self.plugin_loaded());
        conds
    }

    pub(super) fn in_progress_reason(&self, revision_changed: bool, created: bool) -> &'static str {
        if revision_changed {
            return if created {
                mwrs_condition::REASON_NEW_REVISION_CREATED
            } else {
                mwrs_condition::REASON_FOUND_NEW_REVISION
            };
        }
        match self
            .old
            .conditions
            .as_deref()
            .and_then(|l| conditions::find(l, mwrs_condition::PROGRESSING))
        {
            Some(c)
                if c.status == "True"
                    && c.reason == mwrs_condition::REASON_NEW_REVISION_CREATED =>
            {
                mwrs_condition::REASON_NEW_REVISION_CREATED
            }
            _ => mwrs_condition::REASON_FOUND_NEW_REVISION,
        }
    }

    pub(super) fn placement_verified(&self) -> Cond {
        let refs = &self.observed.mwrs.spec.placement_refs;
        for (i, v) in self.views.iter().enumerate() {
            let name = &refs[i].name;
            match v.map(|v| &v.state) {
                None | Some(PlacementState::Missing) => {
                    return Cond::new(
                        mwrs_condition::PLACEMENT_VERIFIED,
                        Status::False,
                        mwrs_condition::REASON_PLACEMENT_DECISION_NOT_FOUND,
                        format!("Placement {name} not found"),
                    );
                }
                Some(PlacementState::NoDecisions) => {
                    return Cond::new(
                        mwrs_condition::PLACEMENT_VERIFIED,
                        Status::False,
                        mwrs_condition::REASON_PLACEMENT_DECISION_NOT_FOUND,
                        format!("Placement {name} has no PlacementDecisions"),
                    );
                }
                Some(PlacementState::Invalid(why)) => {
                    return Cond::new(
                        mwrs_condition::PLACEMENT_VERIFIED,
                        Status::False,
                        mwrs_condition::REASON_NOT_AS_EXPECTED,
                        why.clone(),
                    );
                }
                Some(PlacementState::Found(_)) => {}
            }
        }
        let mut remarks = Vec::new();
        for v in self.views.iter().flatten() {
            if !v.skipped.is_empty() {
                let names: Vec<String> = v.skipped.iter().map(|c| format!("{c:?}")).collect();
                remarks.push(format!(
                    "placement {}: {} decisions skipped, not a valid cluster name: {}",
                    v.name,
                    v.skipped.len(),
                    name_few(&names)
                ));
            }
            if !v.complete {
                remarks.push(format!(
                    "placement {}: decisions incomplete; no ManifestWork is deleted until they are",
                    v.name
                ));
            }
        }
        let remarks: String = remarks.iter().map(|r| format!("; {r}")).collect();
        if self.clusters.desired_len == 0 {
            return Cond::new(
                mwrs_condition::PLACEMENT_VERIFIED,
                Status::False,
                mwrs_condition::REASON_PLACEMENT_DECISION_EMPTY,
                format!("no cluster is selected by any placement{remarks}"),
            );
        }
        Cond::new(
            mwrs_condition::PLACEMENT_VERIFIED,
            Status::True,
            mwrs_condition::REASON_AS_EXPECTED,
            format!("{} clusters selected{remarks}", self.clusters.desired_len),
        )
    }
}
