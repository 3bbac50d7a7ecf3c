//! What the planner reads of plugins for one MWRS ([`PluginInputs`]): each plugin's
//! health as this replica's calls found it, the verdicts and Begins recorded per cluster,
//! the runs of errors, and the marks (sealed verdicts and spec digests) found on
//! ManifestWorks.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use mwrs_api::mwrs::{ManifestWorkReplicaSet, condition as mwrs_condition};

use crate::hash::Digest;
use crate::marks::{MarkPlace, Marks};
use crate::text::cut;

use super::calls::Mutation;
use super::policy::{ErrorRun, FailurePolicy};

/// A plugin's answer about one cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Succeeded,
    Failed,
    InProgress,
    /// The plugin answered the question with an error status (its message says which):
    /// it works, but could not judge this cluster. The cluster is held, as behind a
    /// plugin that is down, and asked again.
    Erred,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Succeeded => "SUCCEEDED",
            Verdict::Failed => "FAILED",
            Verdict::InProgress => "IN_PROGRESS",
            Verdict::Erred => "ERROR",
        }
    }

    /// SUCCEEDED and FAILED are final for the revision and generation they judged.
    pub fn is_final(self) -> bool {
        matches!(self, Verdict::Succeeded | Verdict::Failed)
    }
}

/// The last verdict recorded for a cluster, and what it was about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterVerdict {
    pub plugin: String,
    /// The revision name it judged.
    pub revision: String,
    /// The ManifestWork generation it judged.
    pub generation: i64,
    pub verdict: Verdict,
    pub message: String,
    /// When the answer came.
    pub at: Timestamp,
}

/// The annotation form of a final verdict ([`mwrs_api::labels::PLUGIN_VERDICT`]).
#[derive(serde::Serialize, serde::Deserialize)]
struct Persisted {
    plugin: String,
    revision: String,
    generation: i64,
    verdict: String,
    at: String,
    message: String,
    /// The controller's seal over the fields above and the ManifestWork they sit on
    /// ([`crate::marks`]); empty when written by a reader without a key.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    seal: String,
}

impl Persisted {
    fn sealed_fields(&self) -> [Vec<u8>; 6] {
        [
            self.plugin.as_bytes().to_vec(),
            self.revision.as_bytes().to_vec(),
            self.generation.to_string().into_bytes(),
            self.verdict.as_bytes().to_vec(),
            self.at.as_bytes().to_vec(),
            self.message.as_bytes().to_vec(),
        ]
    }
}

/// The longest text a plugin may put anywhere: its messages, descriptions and error
/// texts are cut to this at intake (rules §12.1).
pub const PLUGIN_TEXT_MAX: usize = 256;

impl ClusterVerdict {
    /// The annotation value, sealed for `place` (None for a verdict that is not final).
    pub fn to_annotation(&self, marks: &Marks, place: MarkPlace<'_>) -> Option<String> {
        if !self.verdict.is_final() {
            return None;
        }
        let mut p = Persisted {
            plugin: self.plugin.clone(),
            revision: self.revision.clone(),
            generation: self.generation,
            verdict: self.verdict.as_str().to_string(),
            at: self.at.to_string(),
            message: cut(self.message.clone(), PLUGIN_TEXT_MAX),
            seal: String::new(),
        };
        let fields = p.sealed_fields();
        p.seal = marks.seal(place, &fields.each_ref().map(Vec::as_slice));
        serde_json::to_string(&p).ok()
    }

    /// A final verdict read from its annotation as written, its seal unchecked: for
    /// readers that decide nothing (the CLI, tests).
    pub fn as_written(value: &str) -> Option<Self> {
        let nowhere = MarkPlace {
            mwrs_uid: "",
            cluster: "",
            work: "",
            work_uid: None,
            at_creation: false,
        };
        Self::from_annotation(value, &Marks::AsWritten, nowhere)
    }

    /// A final verdict read back from its annotation on the ManifestWork at `place`
    /// (None: not final, or not sealed by this controller for this place).
    pub fn from_annotation(value: &str, marks: &Marks, place: MarkPlace<'_>) -> Option<Self> {
        let p: Persisted = serde_json::from_str(value).ok()?;
        let fields = p.sealed_fields();
        if !marks.trusts(place, &fields.each_ref().map(Vec::as_slice), &p.seal) {
            return None;
        }
        let verdict = match p.verdict.as_str() {
            "SUCCEEDED" => Verdict::Succeeded,
            "FAILED" => Verdict::Failed,
            _ => return None,
        };
        Some(Self {
            plugin: p.plugin,
            revision: p.revision,
            generation: p.generation,
            verdict,
            message: p.message,
            at: p.at.parse().ok()?,
        })
    }
}

/// Whether a registered plugin answers, as this replica's own calls found (rules §12.6).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PluginHealth {
    /// This replica has asked it nothing yet (it started, or began to lead, since): it
    /// knows nothing of it. Its clusters wait, no deadline runs and no budget is spent.
    Unknown,
    /// Its `Initialize` answered (the description is the plugin's own), and has since
    /// this time: a Validating cluster's deadline counts from here at the earliest, so
    /// that an outage never times a cluster out.
    Available {
        description: String,
        since: Timestamp,
    },
    /// A call failed or timed out since this time (a recovery shorter than two poll
    /// intervals does not restart it: rules §12.3). No call is made meanwhile but
    /// `Initialize`.
    Unreachable { why: String, since: Timestamp },
    /// Still down since `since`, as for [`PluginHealth::Unreachable`], but its
    /// `Initialize` answers again after calls about clusters failed: those calls are
    /// made again, and the outage ends only when one of them succeeds (rules §12.6).
    Recovering { why: String, since: Timestamp },
}

impl PluginHealth {
    /// When the outage it is in began, if it is in one.
    pub fn down_since(&self) -> Option<(&str, Timestamp)> {
        match self {
            PluginHealth::Unreachable { why, since } | PluginHealth::Recovering { why, since } => {
                Some((why, *since))
            }
            PluginHealth::Unknown | PluginHealth::Available { .. } => None,
        }
    }

    /// May calls about clusters be made to it?
    pub fn callable(&self) -> bool {
        matches!(
            self,
            PluginHealth::Available { .. } | PluginHealth::Recovering { .. }
        )
    }
}

/// What the planner knows of plugins for one MWRS.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PluginInputs {
    /// Every registered plugin, by name; a name not here is not registered.
    pub health: BTreeMap<String, PluginHealth>,
    /// The last verdict per cluster of this MWRS.
    pub verdicts: BTreeMap<Arc<str>, ClusterVerdict>,
    /// When the last question about a cluster was sent, answered or not: an IN_PROGRESS
    /// or unanswered cluster is asked again `poll` after it.
    pub asked: BTreeMap<Arc<str>, Timestamp>,
    /// Per cluster, when the question about it that is still unanswered was sent: until
    /// its answer (or the call's own bound) comes, the cluster's deadline is judged as
    /// of then, so a slow or hung call never times a cluster out on its own.
    pub unanswered: BTreeMap<Arc<str>, Timestamp>,
    /// How often a cluster still Validating is asked again.
    pub poll: SignedDuration,
    /// The last BeginRollout or BeginAbort sent per cluster of this MWRS.
    pub begun: BTreeMap<Arc<str>, Begun>,
    /// Per placementRef, the fingerprint of the cluster states last sent with
    /// ProgressRollout.
    pub progressed: BTreeMap<String, u64>,
    /// Each plugin's failure budget as registered (absent: the default).
    pub policies: BTreeMap<String, FailurePolicy>,
    /// Per cluster of this MWRS, the calls that went wrong in a row.
    pub errors: BTreeMap<Arc<str>, ErrorRun>,
    /// How marks found on ManifestWorks are taken, and how new ones are sealed.
    pub marks: Marks,
}

/// No plugin registered: for callers that have none (simulations, tests).
pub static NO_PLUGINS: PluginInputs = PluginInputs {
    health: BTreeMap::new(),
    verdicts: BTreeMap::new(),
    asked: BTreeMap::new(),
    unanswered: BTreeMap::new(),
    poll: SignedDuration::ZERO,
    begun: BTreeMap::new(),
    progressed: BTreeMap::new(),
    policies: BTreeMap::new(),
    errors: BTreeMap::new(),
    marks: Marks::AsWritten,
};

/// The plugins `mwrs`'s placementRefs name (a name twice when two of them do).
pub fn named(mwrs: &ManifestWorkReplicaSet) -> impl Iterator<Item = String> + '_ {
    mwrs.spec
        .placement_refs
        .iter()
        .filter_map(|r| r.rollout_strategy.as_ref()?.plugin.clone())
}

impl PluginInputs {
    /// What a reader of the hub alone knows of `mwrs`'s plugins (the CLI): each one the
    /// placementRefs name answers if the controller's `PluginLoaded` says so, and the
    /// verdicts are those the ManifestWorks carry.
    pub fn from_status(mwrs: &ManifestWorkReplicaSet) -> Self {
        let loaded = mwrs
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_deref())
            .and_then(|l| crate::conditions::find(l, mwrs_condition::PLUGIN_LOADED));
        let health = named(mwrs)
            .map(|name| {
                let health = match loaded {
                    Some(c) if c.status == "True" => PluginHealth::Available {
                        description: c.message.clone(),
                        since: c.last_transition_time.0,
                    },
                    Some(c) => PluginHealth::Unreachable {
                        why: c.message.clone(),
                        since: c.last_transition_time.0,
                    },
                    None => PluginHealth::Unreachable {
                        why: "the controller has not reported on it yet".into(),
                        since: Timestamp::MAX,
                    },
                };
                (name, health)
            })
            .collect();
        Self {
            health,
            ..Self::default()
        }
    }
}

/// The value of [`mwrs_api::labels::PLUGIN_SPEC_DIGEST`] on the ManifestWork at `place`
/// that carries `digest`, the spec a plugin returned for `revision`: the digest, `.`, and
/// the seal over both.
pub fn spec_mark(marks: &Marks, place: MarkPlace<'_>, revision: &str, digest: &Digest) -> String {
    let hex = digest.to_hex();
    let seal = marks.seal(place, &spec_fields(revision, &hex));
    format!("{hex}.{seal}")
}

/// The digest a spec mark found on the ManifestWork at `place` vouches for as `revision`
/// (None: no digest, or not sealed by this controller for this place and revision).
pub fn read_spec_mark(
    value: &str,
    marks: &Marks,
    place: MarkPlace<'_>,
    revision: &str,
) -> Option<Digest> {
    let (hex, seal) = value.split_once('.').unwrap_or((value, ""));
    let digest = Digest::from_hex(hex)?;
    marks
        .trusts(place, &spec_fields(revision, hex), seal)
        .then_some(digest)
}

fn spec_fields<'a>(revision: &'a str, hex: &'a str) -> [&'a [u8]; 3] {
    [b"plugin-spec", revision.as_bytes(), hex.as_bytes()]
}

/// The last BeginRollout or BeginAbort sent about a cluster, with the
/// MutateManifestWork that follows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Begun {
    pub plugin: String,
    pub revision: String,
    pub aborting: bool,
    /// When it was sent.
    pub at: Timestamp,
    /// The plugin answered both calls.
    pub acked: bool,
    /// The spec MutateManifestWork returned (None: write the template unchanged).
    pub mutation: Option<Mutation>,
}
