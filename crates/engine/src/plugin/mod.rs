//! Rollout plugins as the planner sees them (issue #18, OCM enhancement 231): whether
//! each registered plugin answers, and its last verdict on each cluster of an MWRS. The
//! controller makes the calls and records the answers; the planner reads them as it reads
//! conditions, and says which clusters to ask about next ([`Validation`]).
//!
//! The gate, for a placementRef with `rolloutStrategy.plugin`: a cluster whose agent
//! reports the target revision applied and available is `Validating` until the plugin
//! says SUCCEEDED about that revision at that ManifestWork generation; FAILED counts as a
//! failure; IN_PROGRESS past `progressDeadline` times out. A plugin that does not answer
//! holds the clusters it has not judged where they are: no promotion and no timeout, until
//! its failure budget is spent ([`FailurePolicy`]). A final verdict it gave before stands.
//! Marks found on ManifestWorks count only with this controller's seal ([`crate::marks`]).
//!
//! The other calls, all made at the edge from what a pass plans ([`PluginCalls`]):
//! BeginRollout, then MutateManifestWork, before the update revision is written to a
//! cluster (the write waits for both answers, and carries the spec the plugin returned);
//! ProgressRollout whenever a placementRef's cluster states change; BeginAbort and
//! MutateManifestWork as an abort's reverts are written, and ValidateAbortCompletion about
//! each cluster the abort reverted (its revert counts as done on SUCCEEDED). An abort
//! never waits for a plugin: its reverts are written whatever the plugin says or does,
//! and written again with the plugin's spec when one comes.
//!
//! A SUCCEEDED verdict is kept in memory and in the MWRS status ([`JudgedBits`]), never
//! on its ManifestWork; a FAILED one is sealed onto its ManifestWork, where the abort
//! that follows writes anyway.
//!
//! In five files: `inputs` (what the planner reads of plugins), `calls` (what it asks of
//! them), `policy` (their failure budget and a placementRef's override, parsed), `gate`
//! (what a cluster becomes behind its plugin, from the first three) and `judged` (the
//! status record of the clusters judged SUCCEEDED).

mod calls;
mod gate;
mod inputs;
mod judged;
mod policy;

pub use calls::*;
pub(crate) use gate::*;
pub use inputs::*;
pub use judged::*;
pub use policy::*;
