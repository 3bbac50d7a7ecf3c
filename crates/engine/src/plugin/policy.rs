//! A plugin's failure budget (rules §12.3): what its failures do to the clusters it
//! holds, how many errors in a row or how long unreachable before that applies, a
//! placementRef's override, and what the clusters say when it is spent.

use jiff::{SignedDuration, Timestamp};

/// What a plugin's failures do to the clusters it holds (rules §12.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureMode {
    /// Past the budget, a held cluster counts as Failed (reason `PluginFailed`), so that
    /// `maxFailures` and `AbortAll` apply.
    Fail,
    /// Held clusters stay held, however long the plugin fails; the rollout says so.
    Hold,
}

impl FailureMode {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureMode::Fail => "Fail",
            FailureMode::Hold => "Hold",
        }
    }
}

/// A plugin's failure budget: how many errors in a row about one cluster, or how long
/// unreachable, before `mode` applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FailurePolicy {
    pub mode: FailureMode,
    pub consecutive_errors: u32,
    pub unavailable_for: SignedDuration,
}

impl Default for FailurePolicy {
    /// Fail after 4 errors in a row (Argo Rollouts' `consecutiveErrorLimit`) or 5
    /// minutes unreachable.
    fn default() -> Self {
        Self {
            mode: FailureMode::Fail,
            consecutive_errors: 4,
            unavailable_for: SignedDuration::from_mins(5),
        }
    }
}

/// A placementRef's own failure budget for its plugin (`pluginFailurePolicy`): each field
/// set replaces the registration's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PolicyOverride {
    pub mode: Option<FailureMode>,
    pub consecutive_errors: Option<u32>,
    pub unavailable_for: Option<SignedDuration>,
}

impl PolicyOverride {
    /// `base` with what this override sets.
    pub fn over(self, base: FailurePolicy) -> FailurePolicy {
        FailurePolicy {
            mode: self.mode.unwrap_or(base.mode),
            consecutive_errors: self.consecutive_errors.unwrap_or(base.consecutive_errors),
            unavailable_for: self.unavailable_for.unwrap_or(base.unavailable_for),
        }
    }
}

/// The note a cluster's status carries when a plugin's failure counts against it.
pub const PLUGIN_FAILED: &str = "PluginFailed";

/// What a spent run of errors says.
pub(crate) fn spent_words(plugin: &str, run: &ErrorRun) -> String {
    format!(
        "plugin {plugin} went wrong {} times in a row: {}",
        run.count, run.last
    )
}

/// The calls about one cluster that went wrong in a row (an error status, or an answer
/// refused as unusable), about one revision; any usable answer ends the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorRun {
    pub plugin: String,
    pub revision: String,
    pub count: u32,
    /// When the run's first error came.
    pub since: Timestamp,
    /// The last error, cut to [`PLUGIN_TEXT_MAX`].
    pub last: String,
}
