//! Where the rollout stands after a pass, and the text of its conditions.

use std::sync::Arc;

use mwrs_api::mwrs::condition as mwrs_condition;

use crate::conditions::{Cond, Status};
use crate::rollout::RolloutStatus;

use super::abort::{AbortDecision, AbortState, Breach};
use super::output::ClusterReport;

/// How many clusters a status message names before "and N more".
const NAMED_IN_MESSAGES: usize = 5;

/// Where the rollout stands, in the terms conditions are written in.
pub(super) struct Outcome {
    pub(super) desired: usize,
    /// Clusters with an owned ManifestWork.
    pub(super) with_work: usize,
    pub(super) failed: Vec<Arc<str>>,
    pub(super) timed_out: Vec<Arc<str>>,
    pub(super) in_flight: usize,
    /// Clusters done on the target revision (Succeeded, soak over).
    pub(super) done: usize,
    /// Breach of the failure limit on any placementRef.
    pub(super) breach: Option<Breach>,
    /// Every desired cluster Succeeded on the update revision, soak over (rules §10.7).
    pub(super) complete: bool,
    pub(super) target: String,
    pub(super) current: Option<String>,
    /// placementRefs whose decisions are unknown: their clusters cannot be counted, so
    /// the revision is never promoted meanwhile.
    pub(super) unknown: Vec<String>,
    /// `cluster: why` for the first few clusters not done whose report has a note.
    pub(super) notes: Vec<String>,
    /// `cluster: what its plugin last said` for the first few Validating clusters.
    pub(super) validating: Vec<String>,
}

/// What a pass knows besides the cluster reports, for [`Outcome::tally`].
pub(super) struct Around<'d> {
    /// placementRefs whose decisions are unknown.
    pub(super) unknown: Vec<String>,
    /// Clusters with an owned ManifestWork.
    pub(super) with_work: usize,
    /// The stable revision the status names.
    pub(super) current: Option<String>,
    /// This pass's abort decision.
    pub(super) abort: &'d AbortDecision,
}

impl Outcome {
    pub(super) fn tally(
        reports: &[ClusterReport],
        around: Around<'_>,
        target: &str,
        update: &str,
    ) -> Self {
        let Around {
            unknown,
            with_work,
            current,
            abort,
        } = around;
        let mut failed = Vec::new();
        let mut timed_out = Vec::new();
        let mut in_flight = 0;
        let mut done = 0;
        let notes = reports
            .iter()
            .filter_map(|c| Some(format!("{}: {}", c.cluster, c.note.as_deref()?)))
            .take(NAMED_IN_MESSAGES)
            .collect();
        let validating = reports
            .iter()
            .filter(|c| c.status == RolloutStatus::Validating)
            .filter_map(|c| Some(format!("{}: {}", c.cluster, c.note.as_deref()?)))
            .take(NAMED_IN_MESSAGES)
            .collect();
        for c in reports {
            match c.status {
                RolloutStatus::Failed => failed.push(c.cluster.clone()),
                RolloutStatus::TimeOut => timed_out.push(c.cluster.clone()),
                RolloutStatus::Succeeded if c.soak_until.is_none() => done += 1,
                _ => in_flight += 1,
            }
        }
        let all_known = unknown.is_empty();
        let complete = abort.state == AbortState::None
            && target == update
            && all_known
            && !reports.is_empty()
            && done == reports.len();
        let breach = match abort.state {
            AbortState::Starting(b) => Some(b),
            _ => abort.breach,
        };
        Self {
            desired: reports.len(),
            with_work,
            failed,
            timed_out,
            in_flight,
            done,
            breach,
            complete,
            target: target.to_string(),
            current,
            unknown,
            notes,
            validating,
        }
    }

    /// The notes, as a suffix of a condition message.
    pub(super) fn noted(&self) -> String {
        if self.notes.is_empty() {
            String::new()
        } else {
            format!(" ({})", self.notes.join("; "))
        }
    }

    pub(super) fn failures(&self) -> usize {
        self.failed.len() + self.timed_out.len()
    }

    /// Ended with failures that maxFailures tolerated: nothing left to do, not promoted.
    pub(super) fn settled_with_failures(&self) -> bool {
        !self.complete && self.in_flight == 0 && self.failures() > 0
    }

    pub(super) fn failure_reason(&self) -> &'static str {
        if self.timed_out.is_empty() {
            mwrs_condition::REASON_MAX_FAILURES_EXCEEDED
        } else {
            mwrs_condition::REASON_PROGRESS_DEADLINE_EXCEEDED
        }
    }

    pub(super) fn failure_message(&self) -> String {
        let mut parts = Vec::new();
        if !self.timed_out.is_empty() {
            parts.push(format!(
                "{} past the progress deadline ({})",
                self.timed_out.len(),
                name_few(&self.timed_out)
            ));
        }
        if !self.failed.is_empty() {
            parts.push(format!(
                "{} degraded ({})",
                self.failed.len(),
                name_few(&self.failed)
            ));
        }
        format!(
            "revision {}: {} of {} clusters failed: {}{}",
            self.target,
            self.failures(),
            self.desired,
            parts.join("; "),
            self.noted()
        )
    }

    pub(super) fn manifestwork_applied(&self, verified: &Cond) -> Cond {
        let t = mwrs_condition::MANIFESTWORK_APPLIED;
        if self.desired == 0 && self.with_work == 0 {
            let reason = if verified.reason == mwrs_condition::REASON_PLACEMENT_DECISION_EMPTY {
                mwrs_condition::REASON_PLACEMENT_DECISION_EMPTY
            } else {
                mwrs_condition::REASON_NOT_AS_EXPECTED
            };
            return Cond::new(t, Status::False, reason, "no cluster is selected");
        }
        if self.failures() > 0 {
            return Cond::new(
                t,
                Status::False,
                mwrs_condition::REASON_NOT_AS_EXPECTED,
                self.failure_message(),
            );
        }
        if self.in_flight > 0 {
            return Cond::new(
                t,
                Status::False,
                mwrs_condition::REASON_PROCESSING,
                format!(
                    "revision {}: {} of {} clusters done, {} in progress{}",
                    self.target,
                    self.done,
                    self.desired,
                    self.in_flight,
                    self.noted()
                ),
            );
        }
        Cond::new(
            t,
            Status::True,
            mwrs_condition::REASON_AS_EXPECTED,
            format!(
                "revision {} applied on all {} clusters",
                self.target, self.desired
            ),
        )
    }

    pub(super) fn degraded(&self, abort: &AbortState) -> bool {
        !matches!(abort, AbortState::None) || self.breach.is_some() || self.settled_with_failures()
    }

    pub(super) fn rolled_out(&self, abort: &AbortState) -> Cond {
        let t = mwrs_condition::PLACEMENT_ROLLED_OUT;
        if self.complete {
            return Cond::new(
                t,
                Status::True,
                mwrs_condition::REASON_COMPLETE,
                format!("all {} clusters run revision {}", self.desired, self.target),
            );
        }
        if self.degraded(abort) {
            // An abort with no failed cluster (requested, or every cluster back on the
            // stable revision) has no failures to list.
            let message = if self.failures() == 0 {
                format!(
                    "rollout aborted: {} of {} clusters done on revision {}",
                    self.done, self.desired, self.target
                )
            } else {
                self.failure_message()
            };
            return Cond::new(
                t,
                Status::False,
                mwrs_condition::REASON_ROLLOUT_DEGRADED,
                message,
            );
        }
        Cond::new(
            t,
            Status::False,
            mwrs_condition::REASON_PROGRESSING,
            format!(
                "revision {}: {} of {} clusters done",
                self.target, self.done, self.desired
            ),
        )
    }

    /// The Progressing condition: an abort's state first, then failures, completion,
    /// a pause, and otherwise the rollout in progress.
    pub(super) fn progressing(
        &self,
        abort: &AbortState,
        update: &str,
        paused: bool,
        in_progress: &'static str,
    ) -> Cond {
        let t = mwrs_condition::PROGRESSING;
        if let Some(c) = self.aborting(abort, update) {
            return c;
        }
        if self.breach.is_some() || self.settled_with_failures() {
            let reason = self.failure_reason();
            return Cond::new(t, Status::False, reason, self.failure_message());
        }
        let (done, desired) = (self.done, self.desired);
        if self.complete {
            let message = format!("revision {update} is available on all {desired} clusters");
            return Cond::new(
                t,
                Status::False,
                mwrs_condition::REASON_NEW_MANIFESTWORK_AVAILABLE,
                message,
            );
        }
        if paused {
            let message = format!("paused: revision {update} on {done} of {desired} clusters");
            return Cond::new(
                t,
                Status::Unknown,
                mwrs_condition::REASON_ROLLOUT_PAUSED,
                message,
            );
        }
        let mut message = if self.unknown.is_empty() {
            format!("rolling out revision {update}: {done} of {desired} clusters done")
        } else {
            format!(
                "rolling out revision {update}: {done} of {desired} known clusters done; not \
                 promoted while the decisions of placement {} are unknown",
                self.unknown.join(", ")
            )
        };
        // What rollout plugins last said, so that a reader of the hub alone (the CLI)
        // sees it; it changes at most once a poll interval.
        if !self.validating.is_empty() {
            message.push_str(&format!("; validating: {}", self.validating.join("; ")));
        }
        Cond::new(t, Status::True, in_progress, message)
    }

    /// Progressing while an abort starts, holds or cannot happen.
    fn aborting(&self, abort: &AbortState, update: &str) -> Option<Cond> {
        let t = mwrs_condition::PROGRESSING;
        let current = self.current.as_deref().unwrap_or("");
        let (done, desired) = (self.done, self.desired);
        let (reason, message) = match abort {
            AbortState::None => return None,
            AbortState::Failed(why) => (mwrs_condition::REASON_ABORT_FAILED, why.message()),
            AbortState::Held if done == desired => (
                mwrs_condition::REASON_ROLLOUT_ABORTED,
                format!(
                    "rolled back to revision {current} on all {desired} clusters; revision \
                     {update} is held until a retry, an undo or a new template"
                ),
            ),
            AbortState::Held => (
                mwrs_condition::REASON_ROLLOUT_ABORTED,
                format!(
                    "rolling back to revision {current}: {done} of {desired} clusters done; \
                     revision {update} is held"
                ),
            ),
            AbortState::Starting(Breach::Requested) => (
                mwrs_condition::REASON_ROLLOUT_ABORTED,
                format!("abort requested: reverting revision {update} to {current}"),
            ),
            AbortState::Starting(_) => (
                self.failure_reason(),
                format!("{}; aborting to revision {current}", self.failure_message()),
            ),
        };
        Some(Cond::new(t, Status::False, reason, message))
    }
}

pub(super) fn name_few(clusters: &[impl AsRef<str>]) -> String {
    let shown: Vec<&str> = clusters
        .iter()
        .take(NAMED_IN_MESSAGES)
        .map(AsRef::as_ref)
        .collect();
    let more = clusters.len().saturating_sub(NAMED_IN_MESSAGES);
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}
