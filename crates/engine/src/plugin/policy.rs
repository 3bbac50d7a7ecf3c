//! A plugin's failure budget (rules §12.3): what its failures do to the clusters it
//! holds, how many errors in a row or how long unreachable before that applies, a
//! placementRef's override (parsed from its `pluginFailurePolicy`), and what the
//! clusters say when it is spent.

use jiff::{SignedDuration, Timestamp};
use mwrs_api::rollout::PluginFailurePolicy;

use crate::Invalid;

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

/// A plugin name as `--work-config` registers it: a DNS-1123 label, so that it can also
/// name the plugin's Service.
pub fn parse_plugin_name(name: &str) -> Result<String, Invalid> {
    if mwrs_api::labels::is_dns_label(name) {
        Ok(name.to_string())
    } else {
        Err(Invalid::new(
            "plugin",
            format!(
                "{name:?} is not a plugin name: lower-case letters, digits and '-', at most 63, starting and ending with a letter or digit"
            ),
        ))
    }
}

/// A placementRef's `pluginFailurePolicy`: each field it sets, checked.
pub fn parse_override(p: &PluginFailurePolicy) -> Result<PolicyOverride, Invalid> {
    let field = |f: &str| format!("pluginFailurePolicy.{f}");
    let mode = match p.policy.as_deref() {
        None => None,
        Some("Fail") => Some(FailureMode::Fail),
        Some("Hold") => Some(FailureMode::Hold),
        Some(other) => {
            return Err(Invalid::new(
                field("policy"),
                format!("unknown policy {other:?}; expected Fail or Hold"),
            ));
        }
    };
    let consecutive_errors = p
        .consecutive_errors
        .map(|n| {
            u32::try_from(n).ok().filter(|n| *n >= 1).ok_or_else(|| {
                Invalid::new(
                    field("consecutiveErrors"),
                    format!("must be 1 or more, got {n}"),
                )
            })
        })
        .transpose()?;
    let unavailable_for = p
        .unavailable_for
        .as_deref()
        .map(|d| {
            mwrs_duration::parse_go_duration(d)
                .ok()
                .filter(|d| d.is_positive())
                .ok_or_else(|| {
                    Invalid::new(
                        field("unavailableFor"),
                        format!("{d:?} is not a positive duration such as 30s or 5m"),
                    )
                })
        })
        .transpose()?;
    Ok(PolicyOverride {
        mode,
        consecutive_errors,
        unavailable_for,
    })
}
