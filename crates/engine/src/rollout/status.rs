//! One cluster's rollout status and what the engine makes of it at `now` (upstream's
//! `determineRolloutStatus`), plus the earliest moment any of them needs another look
//! (`minRecheckAfter`).

use std::fmt;
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};

use super::groups::GroupKey;
use super::parse::{Deadline, soak_end};

/// Where one cluster stands with the target revision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RolloutStatus {
    /// Not applied yet (or applied but not yet reported on): needs the revision written.
    ToApply,
    Progressing,
    /// The agent reports the revision done; its placementRef's rollout plugin has not
    /// said SUCCEEDED yet (issue #18). Occupies a slot and has a deadline like
    /// Progressing.
    Validating,
    Succeeded,
    Failed,
    /// Progressing or Failed past the progress deadline.
    TimeOut,
    /// To be left alone by the rollout.
    Skip,
}

impl RolloutStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RolloutStatus::ToApply => "ToApply",
            RolloutStatus::Progressing => "Progressing",
            RolloutStatus::Validating => "Validating",
            RolloutStatus::Succeeded => "Succeeded",
            RolloutStatus::Failed => "Failed",
            RolloutStatus::TimeOut => "TimeOut",
            RolloutStatus::Skip => "Skip",
        }
    }

    /// Whether this status counts against `maxFailures`.
    pub fn is_failure(self) -> bool {
        matches!(self, RolloutStatus::Failed | RolloutStatus::TimeOut)
    }
}

impl fmt::Display for RolloutStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A cluster's status as the engine takes it in and gives it back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterRolloutStatus {
    pub cluster: Arc<str>,
    pub group: GroupKey,
    pub status: RolloutStatus,
    /// Since when the cluster has been in `status`; the deadline and the soak count
    /// from here.
    pub last_transition_time: Option<Timestamp>,
    /// Set by the engine: when the soak ends (Succeeded) or the deadline falls
    /// (Progressing, Failed, TimeOut).
    pub recheck_time: Option<Timestamp>,
}

impl ClusterRolloutStatus {
    /// A cluster the rollout has not reached yet.
    pub fn to_apply(cluster: impl Into<Arc<str>>, group: GroupKey) -> Self {
        Self {
            cluster: cluster.into(),
            group,
            status: RolloutStatus::ToApply,
            last_transition_time: None,
            recheck_time: None,
        }
    }
}

/// What the engine does with one cluster's status at `now`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Determined {
    /// Still occupies a rollout slot: ToApply, Progressing or Failed within the
    /// deadline, or Succeeded within its soak.
    Rollout(ClusterRolloutStatus),
    /// Progressing or Failed at or past the deadline; status rewritten to TimeOut.
    TimedOut(ClusterRolloutStatus),
    /// Done (Succeeded past its soak) or out of the rollout (TimeOut, Skip coming in).
    Dropped,
}

impl Determined {
    /// The status after the determination, as upstream's in-place mutation leaves it:
    /// TimeOut for a timeout, the input status otherwise.
    pub fn status_after(&self, input: RolloutStatus) -> RolloutStatus {
        match self {
            Determined::Rollout(s) | Determined::TimedOut(s) => s.status,
            Determined::Dropped => input,
        }
    }
}

/// Upstream's `determineRolloutStatus`. The recheck time is the soak end for a soaking
/// Succeeded cluster, and the deadline for a Progressing or Failed one (kept on the
/// TimeOut too). A cluster times out when `now` is at or past its deadline (rules §10.2).
pub fn determine_rollout_status(
    status: &ClusterRolloutStatus,
    min_success_time: SignedDuration,
    deadline: Deadline,
    now: Timestamp,
) -> Determined {
    let since = status.last_transition_time;
    match status.status {
        RolloutStatus::ToApply => Determined::Rollout(status.clone()),
        RolloutStatus::Succeeded => match soak_end(min_success_time, since, now) {
            Some(end) if now < end => Determined::Rollout(ClusterRolloutStatus {
                recheck_time: Some(end),
                ..status.clone()
            }),
            _ => Determined::Dropped,
        },
        RolloutStatus::TimeOut | RolloutStatus::Skip => Determined::Dropped,
        RolloutStatus::Progressing | RolloutStatus::Validating | RolloutStatus::Failed => {
            let at = deadline.at(since, now);
            let mut out = ClusterRolloutStatus {
                recheck_time: at,
                ..status.clone()
            };
            match at {
                Some(t) if now >= t => {
                    out.status = RolloutStatus::TimeOut;
                    Determined::TimedOut(out)
                }
                _ => Determined::Rollout(out),
            }
        }
    }
}

/// The shortest positive delay until one of `clusters`' recheck times (upstream's
/// `minRecheckAfter`); recheck times at or before `now` are ignored.
pub fn min_recheck_after(
    clusters: &[ClusterRolloutStatus],
    now: Timestamp,
) -> Option<SignedDuration> {
    clusters
        .iter()
        .filter_map(|c| c.recheck_time)
        .map(|t| t.duration_since(now))
        .filter(|d| d.is_positive())
        .min()
}
