//! Pure decision logic of the ManifestWorkReplicaSet controller. Nothing here reads a
//! clock, talks to a hub or spawns a task: observed state and `now` come in as
//! arguments, decisions come out as data, so the controller, the CLI's `rollout plan`
//! and the benchmarks all share one implementation.
//!
//! - [`rollout`]: upstream's rollout engine (which clusters may start now);
//! - [`work`]: a cluster's rollout status from its ManifestWork's conditions;
//! - [`stored_work`]: a ManifestWork decoded from the API's JSON without its bulk (the
//!   controller's cache and the CLI's reads);
//! - [`hash`], [`revision`]: revision identity and history;
//! - [`owner`]: owner labels and ManifestWork names;
//! - [`validate`]: what makes a spec unusable, by field;
//! - [`plan`]: all of the above turned into writes and a status;
//! - [`plugin`]: rollout plugins' health and verdicts, as the planner reads them;
//! - [`preview`]: the planner run pass after pass on a simulated fleet (`rollout plan`).

pub mod conditions;
pub mod hash;
pub mod invalid;
pub mod marks;
pub mod owner;
pub mod phase;
pub mod placement;
pub mod plan;
pub mod plugin;
pub mod preview;
pub mod revision;
pub mod rollout;
pub mod snapshot;
pub mod stored_work;
pub mod text;
pub mod validate;
pub mod work;

pub use invalid::Invalid;
pub use plan::{Observed, Plan, PlanConfig, plan};
