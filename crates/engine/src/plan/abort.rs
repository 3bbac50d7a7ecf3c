//! Stage 4, the abort decision: a breach of the failure limit (or a request) against the
//! stable revision there is to go back to, and the record of an abort's cause.

use jiff::Timestamp;
use mwrs_api::mwrs::{ABORT_TRIGGER_REQUESTED, AbortRecord, condition as mwrs_condition};
use mwrs_api::{Time, labels};

use crate::revision;
use crate::revision::RevisionView;
use crate::rollout::{RolloutResult, RolloutStatus, StrategyKind};

use super::classify::Classified;
use super::output::{ClusterReport, RevisionChange};
use super::pass::Pass;

/// Why the rollout of the update revision must stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Breach {
    /// At least one cluster ran past its progress deadline.
    Deadline,
    /// Only Degraded (Failed) clusters.
    Failures,
    /// A user asked for it (the abort annotation).
    Requested,
}

impl Breach {
    /// [`AbortRecord::trigger`] of an abort this breach started.
    pub(super) fn trigger(self) -> &'static str {
        match self {
            Breach::Deadline => mwrs_condition::REASON_PROGRESS_DEADLINE_EXCEEDED,
            Breach::Failures => mwrs_condition::REASON_MAX_FAILURES_EXCEEDED,
            Breach::Requested => ABORT_TRIGGER_REQUESTED,
        }
    }
}

/// Does `last_abort` record a user's abort of `update` with nothing to go back to? Such
/// an abort keeps the rollout stopped until a retry or a new template (rules §10.6).
pub(super) fn stopped_now(last_abort: Option<&AbortRecord>, update: &str) -> bool {
    last_abort.is_some_and(|a| {
        a.revision == update && a.reverted_to.is_none() && a.trigger == ABORT_TRIGGER_REQUESTED
    })
}

/// The record of an abort of `update` started now by `breach`, with the clusters that
/// failed or timed out.
pub(super) fn abort_record(
    breach: Breach,
    now: Timestamp,
    update: &str,
    reverted_to: Option<String>,
    reports: &[ClusterReport],
) -> AbortRecord {
    const FIRST: usize = 10;
    let with = |s: RolloutStatus| {
        let all: Vec<&ClusterReport> = reports.iter().filter(|c| c.status == s).collect();
        let names = all
            .iter()
            .take(FIRST)
            .map(|c| c.cluster.to_string())
            .collect();
        (names, all.len() as i64)
    };
    let (timed_out_clusters, timed_out_count) = with(RolloutStatus::TimeOut);
    let (failed_clusters, failed_count) = with(RolloutStatus::Failed);
    AbortRecord {
        trigger: breach.trigger().into(),
        time: Time(now),
        revision: update.into(),
        reverted_to,
        timed_out_clusters,
        timed_out_count,
        failed_clusters,
        failed_count,
    }
}

/// How the abort machinery stands after this pass.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum AbortState {
    None,
    /// Persist `abortedTime` now; revert on the next pass (rules §10.4).
    Starting(Breach),
    /// Holding on `currentRevision`, reverting whatever lacks it.
    Held,
    /// An abort was called for and cannot happen.
    Failed(AbortFailure),
}

/// Why an abort that was called for cannot happen.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum AbortFailure {
    /// A user's abort with no stable revision: the rollout stops where it is.
    StoppedByRequest { update: String },
    /// A breach with no stable revision: the first rollout never completed.
    NoStableRevision { update: String },
    /// The stable revision's ControllerRevision is gone.
    StablePruned { stable: String },
}

impl AbortFailure {
    /// The Progressing message.
    pub(super) fn message(&self) -> String {
        match self {
            AbortFailure::StoppedByRequest { update } => format!(
                "abort requested for revision {update}, and there is no stable revision to go \
                 back to (the first rollout never completed): the rollout stops here until a \
                 retry or a new template"
            ),
            AbortFailure::NoStableRevision { update } => format!(
                "revision {update} breached its failure limit and there is no stable revision \
                 to go back to (the first rollout never completed)"
            ),
            AbortFailure::StablePruned { stable } => {
                format!("stable revision {stable} is no longer in history; cannot revert")
            }
        }
    }
}

/// `abortedTime` and `lastAbort` of the status, as a pass carries them from stage to stage.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct AbortMemory {
    pub(super) aborted_time: Option<Time>,
    pub(super) last_abort: Option<AbortRecord>,
}

/// What an abort already holds before this pass decides: the state, the revision every
/// cluster is measured against, and the stable revision when it is stored.
pub(super) struct Hold<'p> {
    /// `None`, `Held`, or `Failed` when the held revision is gone.
    pub(super) state: AbortState,
    pub(super) target: String,
    pub(super) stable: Option<&'p RevisionView>,
}

/// Stage 4's answer.
pub(super) struct AbortDecision {
    pub(super) state: AbortState,
    /// `abortedTime` and `lastAbort` after the decision.
    pub(super) memory: AbortMemory,
    /// The update revision's aborted-at mark, when this pass records an abort.
    pub(super) mark: Option<RevisionChange>,
    /// The failure limit a placementRef breaches now, whether or not it aborts (the
    /// conditions say so either way).
    pub(super) breach: Option<Breach>,
}

impl<'a> Pass<'a> {
    /// What `memory` holds: an abort of the update revision holds while `abortedTime` is
    /// set and there is a stable revision.
    pub(super) fn hold(&self, memory: &AbortMemory, update: &str) -> Hold<'a> {
        let current = self.old.current_revision.as_deref();
        let stable = current.and_then(|c| revision::find_by_hash(self.observed.revisions, c));
        match current.filter(|_| memory.aborted_time.is_some()) {
            Some(c) => Hold {
                state: match stable {
                    Some(_) => AbortState::Held,
                    None => AbortState::Failed(AbortFailure::StablePruned {
                        stable: c.to_string(),
                    }),
                },
                target: c.to_string(),
                stable,
            },
            None => Hold {
                state: AbortState::None,
                target: update.to_string(),
                stable,
            },
        }
    }

    /// Stage 4, before any update write (rules §10.4): abort on a breach of an AbortAll
    /// placementRef or on request, when there is a stable revision to go back to.
    pub(super) fn decide_abort(
        &self,
        update: &str,
        requested: bool,
        hold: &Hold<'_>,
        seen: &Classified,
        memory: AbortMemory,
    ) -> AbortDecision {
        let breach = self.breach(&seen.verdicts, &seen.reports);
        let mut decision = AbortDecision {
            state: hold.state.clone(),
            memory,
            mark: None,
            breach: breach.map(|(b, _)| b),
        };
        if stopped_now(decision.memory.last_abort.as_ref(), update) {
            decision.state = AbortState::Failed(AbortFailure::StoppedByRequest {
                update: update.to_string(),
            });
        }
        if decision.state != AbortState::None {
            return decision;
        }
        let trigger = match breach {
            Some((b, true)) => b,
            _ if requested => Breach::Requested,
            _ => return decision,
        };
        let current = self.old.current_revision.as_deref();
        decision.state = match (current, hold.stable) {
            (None, _) if trigger == Breach::Requested => {
                AbortState::Failed(AbortFailure::StoppedByRequest {
                    update: update.to_string(),
                })
            }
            (None, _) => AbortState::Failed(AbortFailure::NoStableRevision {
                update: update.to_string(),
            }),
            (Some(c), _) if c == update => AbortState::None,
            (Some(c), None) => AbortState::Failed(AbortFailure::StablePruned {
                stable: c.to_string(),
            }),
            (Some(_), Some(_)) => {
                decision.memory.aborted_time = Some(Time(self.now));
                AbortState::Starting(trigger)
            }
        };
        let recorded = decision
            .memory
            .last_abort
            .as_ref()
            .map(|a| a.revision.as_str());
        if decision.state != AbortState::None && recorded != Some(update) {
            let reverted_to = match decision.state {
                AbortState::Starting(_) => current.map(str::to_string),
                _ => None,
            };
            decision.memory.last_abort = Some(abort_record(
                trigger,
                self.now,
                update,
                reverted_to,
                &seen.reports,
            ));
            decision.mark = self.mark(update, labels::REVISION_ABORTED_AT);
        }
        decision
    }

    /// The first breach among placementRefs: its kind and whether that placementRef
    /// asked for AbortAll.
    pub(super) fn breach(
        &self,
        verdicts: &[Option<RolloutResult>],
        reports: &[ClusterReport],
    ) -> Option<(Breach, bool)> {
        let mut found: Option<(Breach, bool)> = None;
        for (i, r) in verdicts.iter().enumerate() {
            let Some(r) = r else { continue };
            let s = &self.validated.strategies[i];
            let name = &self.observed.mwrs.spec.placement_refs[i].name;
            let mine = reports.iter().filter(|c| *c.placement == **name);
            let (failed, timed_out) = mine.fold((0usize, 0usize), |(f, t), c| match c.status {
                RolloutStatus::Failed => (f + 1, t),
                RolloutStatus::TimeOut => (f, t + 1),
                _ => (f, t),
            });
            let breached = match s.kind {
                // The engine never breaches for All (upstream); its own maxFailures counts
                // here (rules §10.3).
                StrategyKind::All => {
                    let total = reports.iter().filter(|c| *c.placement == **name).count();
                    failed + timed_out > s.max_failures.resolve(total, 0)
                }
                _ => r.max_failure_breach,
            };
            if breached {
                let kind = if timed_out > 0 {
                    Breach::Deadline
                } else {
                    Breach::Failures
                };
                if s.abort_all {
                    return Some((kind, true));
                }
                found.get_or_insert((kind, false));
            }
        }
        found
    }
}
