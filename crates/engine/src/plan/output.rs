//! What the planner returns: the [`Plan`] for one MWRS and the writes, revision changes,
//! cluster reports and events it is made of.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use mwrs_api::mwrs::ManifestWorkReplicaSetStatus;
use serde_json::Value;

use crate::Invalid;
use crate::plugin::PluginCalls;
use crate::rollout::{Budget, GroupKey, RolloutStatus};

/// Event reasons of handled manual requests (rules §7).
pub const EVENT_ABORT_REQUESTED: &str = "AbortRequested";
pub const EVENT_RETRY_REQUESTED: &str = "RetryRequested";

/// A cluster whose ManifestWork cannot be written for now, and why (in words for status
/// messages and `rollout status`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockedWrite {
    pub cluster: String,
    pub why: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinalizerAction {
    Keep,
    Add,
    Remove,
}

/// Write a revision's template into a cluster's ManifestWork.
#[derive(Clone, PartialEq)]
pub struct WorkApply {
    pub cluster: String,
    pub name: String,
    /// No ManifestWork exists yet in that namespace.
    pub create: bool,
    /// Hash of the revision to write.
    pub revision: String,
    /// That revision's template, shared by every write of it in a pass.
    pub template: Arc<Value>,
    /// The placementRef the cluster is rolled out by.
    pub placement: String,
    /// Labels and annotations this controller owns on the object (others are kept);
    /// shared by the writes of a pass that carry equal ones.
    pub labels: Arc<BTreeMap<String, String>>,
    pub annotations: Arc<BTreeMap<String, String>>,
    /// The version the decision was made on (updates only).
    pub resource_version: Option<String>,
    /// The spec to write instead of the revision's template: what the placementRef's
    /// rollout plugin returned from MutateManifestWork.
    pub spec: Option<Arc<Value>>,
    /// Labels the ManifestWork carries that this MWRS's must not put there (a GitOps
    /// tool's tracking label an earlier controller copied): removed by this write.
    pub dropped_labels: Vec<String>,
}

impl WorkApply {
    /// The ManifestWork spec this write carries: the plugin's, else the revision's.
    pub fn written_spec(&self) -> &Value {
        self.spec.as_deref().unwrap_or(&self.template)
    }
}

impl std::fmt::Debug for WorkApply {
    /// Every field but the template (its revision names it), `spec` only when set: plans
    /// without a plugin print as they always did (the engine's golden plans are compared
    /// as text).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("WorkApply");
        d.field("cluster", &self.cluster)
            .field("name", &self.name)
            .field("create", &self.create)
            .field("revision", &self.revision)
            .field("placement", &self.placement)
            .field("labels", &self.labels)
            .field("annotations", &self.annotations)
            .field("resource_version", &self.resource_version);
        if !self.dropped_labels.is_empty() {
            d.field("dropped_labels", &self.dropped_labels);
        }
        if let Some(spec) = &self.spec {
            d.field("spec", spec);
        }
        d.finish()
    }
}

#[derive(Clone, PartialEq)]
pub enum WorkChange {
    Apply(WorkApply),
    /// Set labels and annotations only (adoption, a move between placementRefs, MWRS
    /// labels changed); the spec is left alone.
    Relabel {
        cluster: String,
        name: String,
        labels: BTreeMap<String, String>,
        /// Labels to take off ([`WorkApply::dropped_labels`]).
        dropped_labels: Vec<String>,
        annotations: BTreeMap<String, String>,
        /// The version the change was planned on (see [`WorkChange::Delete`]).
        resource_version: Option<String>,
    },
    Delete {
        cluster: String,
        name: String,
        /// The version the change was planned on: the API server refuses the change once
        /// the object is another (deleted and created again: a new resourceVersion) or has
        /// changed since, so a change planned on a stale cache, or sent by a replica that
        /// has lost the lease, never lands on what it was not planned on (rules §12).
        resource_version: Option<String>,
    },
}

impl std::fmt::Debug for WorkChange {
    /// As derived, but `dropped_labels` only when a relabel drops some: plans that drop
    /// none print as they always did (the engine's golden plans are compared as text).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WorkChange::Apply(a) => f.debug_tuple("Apply").field(a).finish(),
            WorkChange::Relabel {
                cluster,
                name,
                labels,
                dropped_labels,
                annotations,
                resource_version,
            } => {
                let mut d = f.debug_struct("Relabel");
                d.field("cluster", cluster)
                    .field("name", name)
                    .field("labels", labels);
                if !dropped_labels.is_empty() {
                    d.field("dropped_labels", dropped_labels);
                }
                d.field("annotations", annotations)
                    .field("resource_version", resource_version)
                    .finish()
            }
            WorkChange::Delete {
                cluster,
                name,
                resource_version,
            } => f
                .debug_struct("Delete")
                .field("cluster", cluster)
                .field("name", name)
                .field("resource_version", resource_version)
                .finish(),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum RevisionChange {
    Create {
        name: String,
        hash: String,
        revision: i64,
        template: Value,
        labels: BTreeMap<String, String>,
        annotations: BTreeMap<String, String>,
    },
    /// `resource_version` here and below: the version the change was planned on, as for
    /// [`WorkChange::Delete`].
    Renumber {
        name: String,
        revision: i64,
        resource_version: Option<String>,
    },
    Delete {
        name: String,
        resource_version: Option<String>,
    },
    /// Set these annotations on the revision (its completed/aborted marks).
    Mark {
        name: String,
        annotations: BTreeMap<String, String>,
        resource_version: Option<String>,
    },
}

impl RevisionChange {
    /// The revision's object name.
    pub fn name(&self) -> &str {
        match self {
            RevisionChange::Create { name, .. }
            | RevisionChange::Renumber { name, .. }
            | RevisionChange::Delete { name, .. }
            | RevisionChange::Mark { name, .. } => name,
        }
    }

    /// The version the change was planned on (None for a create).
    pub fn resource_version(&self) -> Option<&str> {
        match self {
            RevisionChange::Create { .. } => None,
            RevisionChange::Renumber {
                resource_version, ..
            }
            | RevisionChange::Delete {
                resource_version, ..
            }
            | RevisionChange::Mark {
                resource_version, ..
            } => resource_version.as_deref(),
        }
    }
}

/// One cluster's place in the rollout, for status, the CLI and metrics.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterReport {
    pub cluster: Arc<str>,
    /// Shared by every report of a pass (a fleet has few placements and revisions, and
    /// one copy per cluster was a visible share of a 100,000-cluster pass).
    pub placement: Arc<str>,
    pub group: Option<GroupKey>,
    /// Revision its ManifestWork carries (None: no ManifestWork).
    pub revision: Option<Arc<str>>,
    /// Status against the target revision.
    pub status: RolloutStatus,
    pub since: Option<Timestamp>,
    /// A Succeeded cluster still soaking until then.
    pub soak_until: Option<Timestamp>,
    /// When its progress deadline passes (or passed, for a TimeOut): none for a cluster a
    /// rollout plugin holds, none without a deadline, none while an abort holds.
    pub deadline: Option<Timestamp>,
    /// Why an in-flight or failed cluster is not done, when the hub says more than its
    /// status: the agent's apply error, its silence, a name taken (rules §11.2).
    pub note: Option<String>,
}

/// What a read-only view shows of a rollout: every desired cluster's place in it, and
/// per placementRef what its clusters hold of the strategy's limits.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Progress {
    pub clusters: Vec<ClusterReport>,
    /// Per placementRef, in spec order: the budget as the rollout engine counts it now.
    /// None when the placement's decisions cannot be read, and while an abort holds (every
    /// cluster goes back at once: no limit applies and no deadline runs).
    pub budgets: Vec<Option<Budget>>,
}

/// A condition that changed in this pass (or a notable moment), for Events and metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedEvent {
    pub reason: String,
    pub message: String,
    /// Warning (true) or Normal.
    pub warning: bool,
}

/// An abort completed in this pass: how long its clusters took to be back on the stable
/// revision, from the abort (the pass that found the breach, `lastAbort.time`) to each
/// reverted cluster's agent reporting the stable revision applied and available.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BackToStable {
    /// To the last reverted cluster's report.
    pub whole: SignedDuration,
    /// Per reverted cluster (one whose report on the stable revision came after the
    /// abort), in the order of their names.
    pub clusters: Vec<SignedDuration>,
}

/// What to do about one MWRS.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub finalizer: FinalizerAction,
    /// Work writes, in the order to make them (applies, relabels, then deletes).
    pub works: Vec<WorkChange>,
    pub revisions: Vec<RevisionChange>,
    /// The status to write; None means leave status alone (deletion).
    pub status: Option<ManifestWorkReplicaSetStatus>,
    pub events: Vec<PlannedEvent>,
    /// Look again after this long even if nothing changes.
    pub recheck: Option<SignedDuration>,
    pub invalid: Option<Invalid>,
    pub clusters: Vec<ClusterReport>,
    /// Calls to make to rollout plugins now (issue #18); their answers are the next
    /// pass's input.
    pub plugin_calls: PluginCalls,
    /// The abort this pass finds complete, timed (once: the status it writes says so).
    pub back_to_stable: Option<BackToStable>,
}

impl Plan {
    pub(super) fn empty(finalizer: FinalizerAction) -> Self {
        Self {
            finalizer,
            works: Vec::new(),
            revisions: Vec::new(),
            status: None,
            events: Vec::new(),
            recheck: None,
            invalid: None,
            clusters: Vec::new(),
            plugin_calls: PluginCalls::default(),
            back_to_stable: None,
        }
    }
}
