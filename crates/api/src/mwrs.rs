//! `work.open-cluster-management.io/v1alpha1` ManifestWorkReplicaSet: upstream's fields
//! plus the revision history, abort and manual-control fields this project adds.

use kube::CustomResource;
use serde::{Deserialize, Deserializer, Serialize};

use crate::rollout::RolloutStrategy;
use crate::work::ManifestWorkTemplate;
use crate::{Condition, Time};

/// Default of `spec.revisionHistoryLimit`.
pub const DEFAULT_REVISION_HISTORY_LIMIT: i32 = 10;

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "work.open-cluster-management.io",
    version = "v1alpha1",
    kind = "ManifestWorkReplicaSet",
    plural = "manifestworkreplicasets",
    shortname = "mwrs",
    namespaced,
    status = "ManifestWorkReplicaSetStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct ManifestWorkReplicaSetSpec {
    /// Copied verbatim into every ManifestWork.
    #[serde(default)]
    pub manifest_work_template: ManifestWorkTemplate,
    #[serde(default, deserialize_with = "null_as_default")]
    pub placement_refs: Vec<LocalPlacementReference>,
    /// `Background` (default) or `Foreground`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cascade_deletion_policy: Option<String>,
    /// NEW: non-live revisions kept (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
}

impl ManifestWorkReplicaSetSpec {
    pub fn revision_history_limit(&self) -> i32 {
        self.revision_history_limit
            .unwrap_or(DEFAULT_REVISION_HISTORY_LIMIT)
    }

    pub fn is_foreground(&self) -> bool {
        self.cascade_deletion_policy.as_deref() == Some(CASCADE_FOREGROUND)
    }
}

pub const CASCADE_FOREGROUND: &str = "Foreground";
pub const CASCADE_BACKGROUND: &str = "Background";

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LocalPlacementReference {
    pub name: String,
    /// CRD default: `{type: All, all: {progressDeadline: None}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout_strategy: Option<RolloutStrategy>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ManifestWorkReplicaSetStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub summary: Summary,
    #[serde(default, deserialize_with = "null_as_default")]
    pub placement_summary: Vec<PlacementSummary>,
    /// NEW: the last revision that completed on every desired cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_revision: Option<String>,
    /// NEW: the revision built from the current spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_revision: Option<String>,
    /// NEW: bumped when a revision name collides with other content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
    /// NEW: when the current abort began; cleared when a new revision starts rolling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aborted_time: Option<Time>,
    /// NEW: the `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// NEW: manual control requests already acted on, so none is acted on twice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handled_controls: Option<HandledControls>,
    /// NEW: the last abort and its cause; kept until a new revision or a retry rolls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_abort: Option<AbortRecord>,
    /// NEW: clusters whose ManifestWork this controller cannot write for now, and why
    /// (the hub refused the write, or another owner holds the name); the first 50.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub blocked_clusters: Vec<BlockedCluster>,
    /// NEW: the clusters a rollout plugin judged SUCCEEDED on the revision it is judging,
    /// sealed by the controller, so that a restarted replica asks none of them again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin_judged: Option<PluginJudged>,
}

/// The clusters a rollout plugin judged SUCCEEDED on one revision: one bit per cluster
/// the placementRefs choose, in the order of their names.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PluginJudged {
    /// The revision judged.
    pub revision: String,
    /// How many clusters were judged SUCCEEDED (the bits set).
    pub count: i64,
    /// The bits, base64: bit `i % 8` of byte `i / 8` is the `i`-th chosen cluster.
    pub clusters: String,
    /// A digest of what the bits are about: the chosen clusters' names, the judged ones'
    /// ManifestWork generations and the plugins named; a bitmap about other clusters or
    /// generations counts for none.
    pub about: String,
    /// The controller's seal over the fields above; empty when written without a key.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub seal: String,
}

/// A cluster whose ManifestWork cannot be written for now.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct BlockedCluster {
    pub cluster: String,
    pub message: String,
}

impl ManifestWorkReplicaSetStatus {
    /// Is the update revision aborted: held by an abort, or the subject of the last abort
    /// (which a new revision, a retry or its completion clears)?
    pub fn update_aborted(&self) -> bool {
        self.aborted_time.is_some()
            || self
                .last_abort
                .as_ref()
                .is_some_and(|a| self.update_revision.as_deref() == Some(a.revision.as_str()))
    }
}

/// Why and when a revision was aborted, and where the clusters went.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AbortRecord {
    /// `ProgressDeadlineExceeded`, `MaxFailuresExceeded` or `Requested` (a user's abort).
    pub trigger: String,
    pub time: Time,
    /// The aborted revision.
    pub revision: String,
    /// The stable revision the clusters went back to; absent when there was none (the
    /// first rollout): the rollout stopped where it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverted_to: Option<String>,
    /// Clusters past their progress deadline (the first ten) and how many in all.
    #[serde(default, deserialize_with = "null_as_default")]
    pub timed_out_clusters: Vec<String>,
    #[serde(default)]
    pub timed_out_count: i64,
    /// Clusters whose agent reported Degraded (the first ten) and how many in all.
    #[serde(default, deserialize_with = "null_as_default")]
    pub failed_clusters: Vec<String>,
    #[serde(default)]
    pub failed_count: i64,
}

/// [`AbortRecord::trigger`] of a user's abort request.
pub const ABORT_TRIGGER_REQUESTED: &str = "Requested";

/// The last handled value of each manual control annotation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct HandledControls {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PlacementSummary {
    pub name: String,
    #[serde(default)]
    pub available_decision_groups: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub summary: Summary,
}

/// Counters, all always serialized (as upstream).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    #[serde(default)]
    pub total: i64,
    #[serde(default)]
    pub progressing: i64,
    #[serde(default)]
    pub available: i64,
    #[serde(default)]
    pub degraded: i64,
    #[serde(default)]
    pub applied: i64,
    #[serde(default)]
    pub desired_total: i64,
    #[serde(default)]
    pub updated: i64,
}

/// Condition types and reasons of the MWRS status.
pub mod condition {
    pub const PLACEMENT_VERIFIED: &str = "PlacementVerified";
    pub const PLACEMENT_ROLLED_OUT: &str = "PlacementRolledOut";
    pub const MANIFESTWORK_APPLIED: &str = "ManifestworkApplied";
    pub const PROGRESSING: &str = "Progressing";
    /// OCM enhancement 231: every rollout plugin the placementRefs name answers.
    pub const PLUGIN_LOADED: &str = "PluginLoaded";
    pub const REASON_PLUGIN_AVAILABLE: &str = "Available";
    pub const REASON_PLUGIN_FAILED: &str = "Failed";
    /// `PluginLoaded` before this replica has asked a plugin anything (and the status
    /// said nothing of it before).
    pub const REASON_PLUGIN_NOT_ASKED: &str = "NotAskedYet";
    /// `PluginLoaded` when the update revision rolls out without its plugins.
    pub const REASON_PLUGINS_SKIPPED: &str = "Skipped";

    pub const REASON_AS_EXPECTED: &str = "AsExpected";
    pub const REASON_PLACEMENT_DECISION_NOT_FOUND: &str = "PlacementDecisionNotFound";
    pub const REASON_PLACEMENT_DECISION_EMPTY: &str = "PlacementDecisionEmpty";
    pub const REASON_NOT_AS_EXPECTED: &str = "NotAsExpected";
    pub const REASON_PROCESSING: &str = "Processing";
    pub const REASON_PROGRESSING: &str = "Progressing";
    pub const REASON_COMPLETE: &str = "Complete";
    pub const REASON_ROLLOUT_DEGRADED: &str = "RolloutDegraded";
    pub const REASON_INVALID_SPEC: &str = "InvalidSpec";

    pub const REASON_NEW_REVISION_CREATED: &str = "NewRevisionCreated";
    pub const REASON_FOUND_NEW_REVISION: &str = "FoundNewRevision";
    pub const REASON_NEW_MANIFESTWORK_AVAILABLE: &str = "NewManifestWorkAvailable";
    pub const REASON_PROGRESS_DEADLINE_EXCEEDED: &str = "ProgressDeadlineExceeded";
    pub const REASON_MAX_FAILURES_EXCEEDED: &str = "MaxFailuresExceeded";
    pub const REASON_ROLLOUT_ABORTED: &str = "RolloutAborted";
    pub const REASON_ABORT_FAILED: &str = "AbortFailed";
    pub const REASON_ROLLOUT_PAUSED: &str = "RolloutPaused";

    /// Event reasons that are not condition reasons.
    pub const EVENT_ABORT_STARTED: &str = "AbortStarted";
    pub const EVENT_ABORT_COMPLETED: &str = "AbortCompleted";
}

/// Go writes a nil slice or struct pointer as `null`; treat it as the default.
fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}
