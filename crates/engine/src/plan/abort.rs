//! Stage 4, the abort decision: a breach of the failure limit (or a request) against the
//! stable revision there is to go back to, and the record of an abort's cause.

use super::*;

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
            Breach::Deadline => mc::REASON_PROGRESS_DEADLINE_EXCEEDED,
            Breach::Failures => mc::REASON_MAX_FAILURES_EXCEEDED,
            Breach::Requested => ABORT_TRIGGER_REQUESTED,
        }
    }
}

/// The Progressing message of a user's abort with no stable revision.
pub(super) fn stopped_message(update: &str) -> String {
    format!(
        "abort requested for revision {update}, and there is no stable revision to go back \
         to (the first rollout never completed): the rollout stops here until a retry or a \
         new template"
    )
}

/// Does the status hold a user's abort of `update` with nothing to go back to?
pub(super) fn stopped_now(status: &ManifestWorkReplicaSetStatus, update: &str) -> bool {
    status.last_abort.as_ref().is_some_and(|a| {
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
    pub(super) const FIRST: usize = 10;
    let with = |s: RolloutStatus| {
        let all: Vec<&ClusterReport> = reports.iter().filter(|c| c.status == s).collect();
        let names = all.iter().take(FIRST).map(|c| c.cluster.clone()).collect();
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
    /// Persist `abortedTime` now; revert on the next pass (SPEC §10.4).
    Starting(Breach),
    /// Holding on `currentRevision`, reverting whatever lacks it.
    Held,
    /// An abort was called for and cannot happen; the reason.
    Failed(String),
}

impl<'a> Pass<'a> {
    /// The first breach among placementRefs: its kind and whether that placementRef
    /// asked for AbortAll.
    pub(super) fn breach(
        &self,
        results: &[Option<RolloutResult>],
        reports: &[ClusterReport],
    ) -> Option<(Breach, bool)> {
        let mut found: Option<(Breach, bool)> = None;
        for (i, r) in results.iter().enumerate() {
            let Some(r) = r else { continue };
            let s = &self.validated.strategies[i];
            let name = &self.o.mwrs.spec.placement_refs[i].name;
            let mine = reports.iter().filter(|c| *c.placement == **name);
            let (failed, timed_out) = mine.fold((0usize, 0usize), |(f, t), c| match c.status {
                RolloutStatus::Failed => (f + 1, t),
                RolloutStatus::TimeOut => (f, t + 1),
                _ => (f, t),
            });
            let breached = match s.kind {
                // The engine never breaches for All (upstream); its own maxFailures counts
                // here (SPEC §10.3).
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
