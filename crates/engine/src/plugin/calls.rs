//! What a pass asks of plugins ([`PluginCalls`]): the questions, Begins and progress
//! reports the controller makes at the edge, and the spec a MutateManifestWork returned.

use std::sync::Arc;

use jiff::Timestamp;

use crate::hash::Digest;
use crate::rollout::RolloutStatus;

/// The MWRS's placementRef a call is about, and the revisions at stake.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallTarget {
    pub plugin: String,
    /// The placementRef (its Placement's name).
    pub placement: String,
    /// Clusters that placementRef selects.
    pub total_clusters: usize,
    /// The stable revision (what an abort returns to), by hash.
    pub current: Option<String>,
    /// The revision being rolled out, by hash.
    pub update: String,
}

/// A question the controller is to put to a plugin: is `revision` good on `cluster`?
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Validation {
    pub target: CallTarget,
    pub cluster: String,
    pub manifest_work: String,
    pub revision: String,
    pub generation: i64,
    /// Since when the agent has reported the revision done.
    pub since: Option<Timestamp>,
    /// About an abort's revert (ValidateAbortCompletion), not a rollout.
    pub aborting: bool,
}

/// BeginRollout (or, `aborting`, BeginAbort) about writing `revision` to `cluster`.
#[derive(Clone, PartialEq, Eq)]
pub struct Begin {
    pub target: CallTarget,
    pub cluster: String,
    pub revision: String,
    /// That revision's template, which the call carries (shared by every call and write
    /// about it in a pass).
    pub template: Arc<serde_json::Value>,
    pub aborting: bool,
}

impl std::fmt::Debug for Begin {
    /// Every field but the template, which its revision names.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Begin")
            .field("target", &self.target)
            .field("cluster", &self.cluster)
            .field("revision", &self.revision)
            .field("aborting", &self.aborting)
            .finish()
    }
}

/// One cluster's place in a placementRef's rollout, as ProgressRollout tells it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterState {
    pub cluster: Arc<str>,
    pub status: RolloutStatus,
    /// The revision its ManifestWork carries (None: no ManifestWork).
    pub revision: Option<Arc<str>>,
    pub since: Option<Timestamp>,
}

/// ProgressRollout: the placementRef's cluster states, which differ from the last ones
/// sent (`fingerprint` identifies them: [`PluginInputs::progressed`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Progress {
    pub target: CallTarget,
    pub clusters: Vec<ClusterState>,
    pub aborting: bool,
    pub fingerprint: u64,
}

/// Every call a pass wants made.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PluginCalls {
    pub validations: Vec<Validation>,
    pub begins: Vec<Begin>,
    pub progress: Vec<Progress>,
}

impl PluginCalls {
    pub fn is_empty(&self) -> bool {
        self.validations.is_empty() && self.begins.is_empty() && self.progress.is_empty()
    }
}

/// The spec a plugin's MutateManifestWork returned, to write instead of the template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mutation {
    pub spec: Arc<serde_json::Value>,
    pub digest: Digest,
}

impl Mutation {
    pub fn new(spec: serde_json::Value) -> Self {
        let digest = crate::hash::digest(&spec);
        Self {
            spec: Arc::new(spec),
            digest,
        }
    }
}
