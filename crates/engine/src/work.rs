//! What the planner sees of one ManifestWork, and the cluster rollout status derived from
//! its conditions (rules §3.9 to §3.15).

use std::collections::BTreeMap;
use std::sync::Arc;

use compact_str::CompactString;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use mwrs_api::Condition;
use mwrs_api::labels;
use mwrs_api::work::{ManifestReports, ManifestWork, condition};

use crate::hash::{self, Digest};
use crate::rollout::RolloutStatus;

/// One condition, reduced to what status mapping reads. Type and status are stored
/// inline (they are short): a pass over 100,000 ManifestWorks reads four conditions of
/// each, and separate heap strings made every read a cache miss.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CondView {
    pub type_: CompactString,
    pub status: CompactString,
    pub observed_generation: Option<i64>,
    pub last_transition_time: Timestamp,
}

/// Who a ManifestWork is, whatever its name: 16 bytes of a digest of its
/// `metadata.uid`, so that a cache of a large fleet keeps 16 bytes, not the 36-character
/// string. A ManifestWork deleted and made again under the same name has another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WorkUid(pub [u8; 16]);

impl WorkUid {
    pub fn of(uid: &str) -> Self {
        use sha2::Digest as _;
        let d = sha2::Sha256::digest(uid.as_bytes());
        let mut out = [0; 16];
        out.copy_from_slice(&d[..16]);
        Self(out)
    }
}

/// A ManifestWork as the planner needs it: metadata, the revision it carries, its
/// conditions; never its manifests.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkView {
    /// The cluster (the ManifestWork's namespace). This and the other strings are
    /// shared with the cache the view comes from: a pass over every ManifestWork of a
    /// fleet copies none of them (issue #16).
    pub cluster: Arc<str>,
    pub name: Arc<str>,
    /// None when not known (a simulation, a view made before the object was).
    pub uid: Option<WorkUid>,
    pub generation: i64,
    pub resource_version: Option<Arc<str>>,
    /// Shared: a cache hands the same map to every ManifestWork that has it, and a
    /// pass's copy of the view costs no copy of the map.
    pub labels: Arc<BTreeMap<String, String>>,
    pub annotations: Arc<BTreeMap<String, String>>,
    /// Digest of the spec as stored, when known; used to spot hand edits and to adopt
    /// ManifestWorks written before revisions existed.
    pub spec_digest: Option<Digest>,
    pub created: Option<Timestamp>,
    pub deleting: bool,
    /// Shared for the same reason as `labels`.
    pub conditions: Arc<Vec<CondView>>,
    /// When the controller last saw this ManifestWork's conditions change (None: not
    /// tracked, e.g. a simulation). Success counts only once it has settled (rules §11.3).
    pub status_seen: Option<Timestamp>,
    /// The agent's word on an `Applied` condition that is not True at the current
    /// generation (`reason: message`), for status messages (rules §11.2).
    pub applied_note: Option<Arc<str>>,
    /// The generation the API server gave this ManifestWork when this controller last
    /// wrote into it the revision its label names (None: not known, e.g. after a
    /// restart). At that generation the spec is that revision's template as the server
    /// stores it, defaults included, whatever its digest.
    pub written_generation: Option<i64>,
    /// Why part of the status cannot be read (a condition time the API server accepted
    /// and our types do not): the cluster is never taken for done meanwhile.
    pub status_error: Option<Arc<str>>,
    /// The hub refused an update planned on this version (its resourceVersion guard): it
    /// holds a newer one, and the same update would be refused again until the cache
    /// brings it.
    pub update_refused: bool,
}

/// A value of a small string map, found by a scan that compares lengths before bytes.
/// Our keys share the long `work.open-cluster-management.io/` prefix, so the ordered
/// lookup's byte comparisons were a large share of a planner pass over 100,000
/// ManifestWorks; a label map holds a handful of entries.
fn find<'m>(map: &'m BTreeMap<String, String>, key: &str) -> Option<&'m str> {
    map.iter().find(|(k, _)| *k == key).map(|(_, v)| v.as_str())
}

impl WorkView {
    /// A label's value.
    pub fn label(&self, key: &str) -> Option<&str> {
        find(&self.labels, key)
    }

    /// An annotation's value.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        find(&self.annotations, key)
    }

    /// Builds the view; the digest is computed from the spec when the object still has one.
    pub fn from_work(mw: &ManifestWork) -> Self {
        let digest = (!mw.spec.fields.is_empty()).then(|| hash::digest(&mw.spec.to_value()));
        Self::from_work_with_digest(mw, digest)
    }

    /// Builds the view of an object whose spec was stripped after `digest` was taken.
    pub fn from_work_with_digest(mw: &ManifestWork, spec_digest: Option<Digest>) -> Self {
        let status = mw.status.as_ref();
        let failed_manifest = status
            .and_then(|s| s.resource_status.as_ref())
            .and_then(|r| ManifestReports::from_value(r).first_failed());
        Self::from_parts(
            &mw.metadata,
            status.and_then(|s| s.conditions.as_deref()),
            status.and_then(|s| s.unreadable.clone()),
            failed_manifest.as_deref(),
            spec_digest,
        )
    }

    /// Builds the view from a ManifestWork's metadata, its conditions, why part of its
    /// status could not be read, the agent's line on the first manifest it could not
    /// apply, and the digest of its spec.
    pub fn from_parts(
        meta: &ObjectMeta,
        conditions: Option<&[Condition]>,
        status_error: Option<String>,
        failed_manifest: Option<&str>,
        spec_digest: Option<Digest>,
    ) -> Self {
        let generation = meta.generation.unwrap_or(0);
        // The manifest's own words say more than the top-level "Failed to apply manifest
        // work" of upstream's agent.
        let applied_note = conditions
            .and_then(|cs| cs.iter().find(|c| c.type_ == condition::APPLIED))
            .filter(|c| c.status != "True" && c.observed_generation == Some(generation))
            .map(|c| note_of(&c.status, &c.reason, failed_manifest.unwrap_or(&c.message)));
        let conditions = conditions
            .unwrap_or_default()
            .iter()
            .map(|c| CondView {
                type_: c.type_.as_str().into(),
                status: c.status.as_str().into(),
                observed_generation: c.observed_generation,
                last_transition_time: c.last_transition_time.0,
            })
            .collect();
        Self {
            cluster: meta.namespace.as_deref().unwrap_or_default().into(),
            name: meta.name.as_deref().unwrap_or_default().into(),
            uid: meta.uid.as_deref().map(WorkUid::of),
            generation,
            resource_version: meta.resource_version.as_deref().map(Into::into),
            labels: Arc::new(meta.labels.clone().unwrap_or_default()),
            annotations: Arc::new(meta.annotations.clone().unwrap_or_default()),
            spec_digest,
            created: meta.creation_timestamp.as_ref().map(|t| t.0),
            deleting: meta.deletion_timestamp.is_some(),
            conditions: Arc::new(conditions),
            status_seen: None,
            applied_note: applied_note.map(Into::into),
            written_generation: None,
            status_error: status_error.map(Into::into),
            update_refused: false,
        }
    }

    /// The `controller-hash` label.
    pub fn hash(&self) -> Option<&str> {
        self.label(labels::CONTROLLER_HASH)
    }

    /// The placementRef that selected this cluster.
    pub fn placement(&self) -> Option<&str> {
        self.label(labels::PLACEMENT_NAME)
    }

    /// When the controller wrote the revision this ManifestWork carries.
    pub fn applied_at(&self) -> Option<Timestamp> {
        self.annotation(labels::REVISION_APPLIED_AT)
            .and_then(|v| v.parse().ok())
    }

    pub fn condition(&self, type_: &str) -> Option<&CondView> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }

    /// A condition observed at the current generation.
    fn current(&self, type_: &str) -> Option<&CondView> {
        self.condition(type_)
            .filter(|c| c.observed_generation == Some(self.generation))
    }

    /// Is the condition True at the current generation? (summary counters)
    pub fn is_true(&self, type_: &str) -> bool {
        self.current(type_).is_some_and(|c| c.status == "True")
    }

    /// A ManifestWork just created on the hub: no labels yet, no status. For simulations.
    pub fn created(cluster: &str, name: &str, now: Timestamp) -> Self {
        Self {
            cluster: cluster.into(),
            name: name.into(),
            uid: None,
            generation: 0,
            resource_version: None,
            labels: Arc::default(),
            annotations: Arc::default(),
            spec_digest: None,
            created: Some(now),
            deleting: false,
            conditions: Arc::default(),
            status_seen: None,
            applied_note: None,
            written_generation: None,
            status_error: None,
            update_refused: false,
        }
    }

    /// Records a condition as an agent reports it: the transition time moves only when the
    /// status flips. For simulations (the CLI's `rollout plan`, tests).
    pub fn set_condition(&mut self, type_: &str, status: &str, generation: i64, now: Timestamp) {
        let conditions = Arc::make_mut(&mut self.conditions);
        match conditions.iter_mut().find(|c| c.type_ == type_) {
            Some(c) => {
                if c.status != status {
                    c.status = status.into();
                    c.last_transition_time = now;
                }
                c.observed_generation = Some(generation);
            }
            None => conditions.push(CondView {
                type_: type_.into(),
                status: status.into(),
                observed_generation: Some(generation),
                last_transition_time: now,
            }),
        }
    }
}

/// Rollout status of a cluster whose ManifestWork carries the target revision, and the
/// time it entered that status (rules §3.10 to §3.15; rules §3.9, the revision check, is
/// the planner's `ClusterRow::carries`).
pub fn cluster_status(work: &WorkView) -> (RolloutStatus, Option<Timestamp>) {
    let (status, time) = status_from_conditions(work);
    // rules §3.15: a condition that kept an old transition time across a revision change must
    // not shorten the soak or the deadline of the new revision.
    let time = match (time, work.applied_at()) {
        (Some(t), Some(a)) => Some(t.max(a)),
        (t, a) => t.or(a),
    };
    (status, time)
}

/// Status of a cluster whose ManifestWork carries the target revision, as the planner
/// uses it (rules §11.2): a ManifestWork the agent has not (or not yet successfully)
/// evaluated at its generation is in flight since the revision was written, never
/// ToApply, which would rewrite it on every pass. Upstream's mapping is
/// [`cluster_status`].
pub fn written_status(work: &WorkView) -> (RolloutStatus, Option<Timestamp>) {
    if work.status_error.is_some() {
        // What cannot be read might have said "not done": never count it as done.
        return (
            RolloutStatus::Progressing,
            work.applied_at().or(work.created),
        );
    }
    match cluster_status(work) {
        (RolloutStatus::ToApply, _) => (
            RolloutStatus::Progressing,
            work.applied_at().or(work.created),
        ),
        other => other,
    }
}

/// Why a written ManifestWork is not applied yet, in words for status messages: the
/// agent's own reason and message, or how long it has been silent.
pub fn awaiting_note(work: &WorkView) -> String {
    if let Some(e) = &work.status_error {
        return format!("its status cannot be read: {e}");
    }
    match (&work.applied_note, work.applied_at().or(work.created)) {
        (Some(n), _) => n.to_string(),
        (None, Some(t)) => format!("no report from the agent since {t}"),
        (None, None) => "no report from the agent".to_string(),
    }
}

/// Has the agent applied this generation (`Applied` True at it), in a status this
/// controller can read?
pub fn is_applied(work: &WorkView) -> bool {
    work.status_error.is_none() && work.is_true(condition::APPLIED)
}

fn note_of(status: &str, reason: &str, message: &str) -> String {
    crate::text::cut(format!("Applied {status} ({reason}): {message}"), 200)
}

fn status_from_conditions(work: &WorkView) -> (RolloutStatus, Option<Timestamp>) {
    let gen_ = work.generation;
    let at_gen = |c: &&CondView| c.observed_generation == Some(gen_);
    let applied = work
        .current(condition::APPLIED)
        .filter(|c| c.status == "True");
    let Some(applied) = applied else {
        return (RolloutStatus::ToApply, None);
    };
    let degraded = work.condition(condition::DEGRADED);
    if degraded.is_some_and(|d| !at_gen(&d)) {
        return (RolloutStatus::ToApply, None);
    }
    let degraded_true = degraded.filter(|d| d.status == "True");
    match work.condition(condition::PROGRESSING) {
        Some(p) if !at_gen(&p) => (RolloutStatus::ToApply, None),
        Some(p) => match (p.status.as_str(), degraded_true) {
            ("True", Some(d)) => (RolloutStatus::Failed, Some(d.last_transition_time)),
            ("False", _) => (RolloutStatus::Succeeded, Some(p.last_transition_time)),
            _ => (RolloutStatus::Progressing, Some(p.last_transition_time)),
        },
        // rules §3.14: no Progressing rule configured on the agent; fall back to Available.
        None => {
            if let Some(d) = degraded_true {
                return (RolloutStatus::Failed, Some(d.last_transition_time));
            }
            match work
                .current(condition::AVAILABLE)
                .filter(|a| a.status == "True")
            {
                Some(a) => (RolloutStatus::Succeeded, Some(a.last_transition_time)),
                None => (
                    RolloutStatus::Progressing,
                    Some(applied.last_transition_time),
                ),
            }
        }
    }
}
