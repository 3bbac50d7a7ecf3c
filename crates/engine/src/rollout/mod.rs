//! The rollout engine: a pure port of Open Cluster Management's rollout library
//! (sdk-go `pkg/apis/cluster/v1alpha1/rollout.go`). Given a parsed strategy, one
//! placement's decision groups, the statuses of the clusters already on the target
//! revision and `now`, it says which clusters take part in the rollout, which timed
//! out, which left the placement, whether `maxFailures` was breached and when to look
//! again. No clock, no I/O.
//!
//! Upstream semantics are kept to the letter (sort orders, `f64` ceil rounding,
//! out-of-range sizes falling back to defaults, the deadline regex quirk, Failed
//! clusters within the deadline staying in the list, TimeOut/Skip inputs dropped)
//! except for the fixes below, each with a switch in [`Compat`] restoring upstream:
//! - the mandatory phase is held by mandatory-group clusters only (rules §10.3);
//! - groups after a gap in the decision-group indices still roll out;
//! - a group that breached `maxFailures` starts none of its remaining clusters
//!   (rules §5.8: a breach stops starting new clusters);
//! - a ProgressivePerGroup walk counts a Failed cluster of a later group in that group,
//!   instead of waiting for ever at an earlier, finished one.
//!
//! The controller's `--upstream-quirk` flag turns switches on by [`Quirk`] name.
//!
//! A cluster times out when `now` is at or past its deadline (rules §10.2), which is
//! also upstream's `now.Before(deadline)` test.
//!
//! Modules: [`parse`] (durations, deadlines, sizes), [`groups`] (decision groups and
//! mandatory-group resolution), [`strategy`] (the validated strategy), [`status`]
//! (per-cluster determination and recheck), `engine` (the decision).

mod engine;
pub mod groups;
pub mod parse;
pub mod status;
pub mod strategy;

#[cfg(test)]
mod upstream_cases;

pub use engine::{Budget, Compat, Quirk, RolloutResult, evaluate};
pub use groups::{DecisionGroups, GroupKey, MandatoryGroup, mandatory_groups};
pub use parse::{Deadline, Size, parse_deadline, parse_go_duration, parse_size, soak_end};
pub use status::{
    ClusterRolloutStatus, Determined, RolloutStatus, determine_rollout_status, min_recheck_after,
};
pub use strategy::{ParsedStrategy, StrategyKind};
