//! `cluster.open-cluster-management.io/v1alpha1` RolloutStrategy, plus this project's
//! `failureStrategy`. Values stay as written (strings, int-or-string); the engine parses
//! them strictly and names the field when one is wrong.

use serde::{Deserialize, Serialize};

use crate::IntOrString;

/// How clusters are paced through a new revision.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStrategy {
    /// `All` (default), `Progressive` or `ProgressivePerGroup`. Kept as a string so an
    /// unknown value reaches the validator instead of failing the whole object.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all: Option<RolloutAll>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progressive: Option<RolloutProgressive>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progressive_per_group: Option<RolloutProgressivePerGroup>,
    /// NEW: what a breach of maxFailures does. Absent: stop starting clusters (upstream);
    /// `AbortAll`: revert every cluster to the stable revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_strategy: Option<String>,
    /// NEW (OCM enhancement 231): the rollout plugin, by its name in the controller's
    /// `--work-config`, that must validate each cluster before it counts as succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    /// NEW (rules §12.3): this placementRef's own failure budget for its plugin; each
    /// field absent takes the plugin's registration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin_failure_policy: Option<PluginFailurePolicy>,
}

impl RolloutStrategy {
    /// The settings of the type this strategy names (`all` for an absent or empty type):
    /// None when that sub-object is absent, or the type is unknown.
    pub fn chosen_config(&self) -> Option<&RolloutConfig> {
        match self.type_.as_deref() {
            None | Some("") | Some(TYPE_ALL) => self.all.as_ref().map(|a| &a.config),
            Some(TYPE_PROGRESSIVE) => self.progressive.as_ref().map(|p| &p.config),
            Some(TYPE_PROGRESSIVE_PER_GROUP) => {
                self.progressive_per_group.as_ref().map(|p| &p.config)
            }
            Some(_) => None,
        }
    }
}

/// What a rollout plugin's failures cost a rollout (rules §12.3).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PluginFailurePolicy {
    /// `Fail` or `Hold`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// Calls about one cluster going wrong in a row before the policy applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consecutive_errors: Option<i32>,
    /// Go duration the plugin may be unreachable before the policy applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable_for: Option<String>,
}

/// Fields shared by all three strategies (Go's inlined `RolloutConfig`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutConfig {
    /// Go duration ("90s", "2m", "1h30m"); default "0".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_success_time: Option<String>,
    /// Go duration or "None" (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_deadline: Option<String>,
    /// Int or percent; default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_failures: Option<IntOrString>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MandatoryDecisionGroup {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_index: Option<i32>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutAll {
    #[serde(flatten)]
    pub config: RolloutConfig,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutProgressivePerGroup {
    #[serde(flatten)]
    pub config: RolloutConfig,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mandatory_decision_groups: Option<Vec<MandatoryDecisionGroup>>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutProgressive {
    #[serde(flatten)]
    pub config: RolloutConfig,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mandatory_decision_groups: Option<Vec<MandatoryDecisionGroup>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<IntOrString>,
}

pub const TYPE_ALL: &str = "All";
pub const TYPE_PROGRESSIVE: &str = "Progressive";
pub const TYPE_PROGRESSIVE_PER_GROUP: &str = "ProgressivePerGroup";
pub const FAILURE_STRATEGY_ABORT_ALL: &str = "AbortAll";
