//! Revision history over ControllerRevisions (rules §4): naming, content lookup, collision
//! handling, renumbering and pruning, as small functions over a list of revisions (the
//! shape of Kubernetes' own controller-history helpers).

use std::collections::BTreeSet;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ControllerRevision;
use mwrs_api::labels;
use serde_json::Value;

use crate::hash::{self, Digest};

/// Longest object name (DNS subdomain).
const MAX_NAME_LEN: usize = 253;

/// What the planner needs of one stored revision.
#[derive(Clone, Debug, PartialEq)]
pub struct RevisionView {
    pub name: String,
    /// The `controller-hash` label (falls back to the name's suffix).
    pub hash: String,
    pub revision: i64,
    pub digest: Digest,
    pub template: Value,
    pub created: Option<Timestamp>,
    pub change_cause: Option<String>,
    pub generation: Option<i64>,
    pub marks: Marks,
    /// The object's version as read (None: not read from the API); every change to the
    /// revision is guarded by it.
    pub resource_version: Option<String>,
}

/// When a revision last completed and was last aborted (annotations of its
/// ControllerRevision, written by the planner at promotion and at an abort).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Marks {
    pub completed: Option<Timestamp>,
    pub aborted: Option<Timestamp>,
}

impl Marks {
    fn read(annotations: Option<&std::collections::BTreeMap<String, String>>) -> Self {
        let at = |key| {
            annotations
                .and_then(|a| a.get(key))
                .and_then(|v| v.parse::<Timestamp>().ok())
        };
        Self {
            completed: at(labels::REVISION_COMPLETED_AT),
            aborted: at(labels::REVISION_ABORTED_AT),
        }
    }

    /// These marks with those `annotations` set (an in-memory [`RevisionChange::Mark`]).
    ///
    /// [`RevisionChange::Mark`]: crate::plan::RevisionChange::Mark
    pub fn with(self, annotations: &std::collections::BTreeMap<String, String>) -> Self {
        let set = Self::read(Some(annotations));
        Self {
            completed: set.completed.or(self.completed),
            aborted: set.aborted.or(self.aborted),
        }
    }

    /// Completed, and not aborted since.
    pub fn is_good(&self) -> bool {
        match (self.completed, self.aborted) {
            (Some(c), Some(a)) => c > a,
            (c, _) => c.is_some(),
        }
    }
}

impl RevisionView {
    /// None when the object holds no template (not one of ours, or damaged).
    pub fn from_controller_revision(cr: &ControllerRevision) -> Option<Self> {
        let name = cr.metadata.name.clone()?;
        let template = cr.data.as_ref()?.0.clone();
        if !template.is_object() {
            return None;
        }
        let label = cr
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(labels::CONTROLLER_HASH))
            .cloned();
        let hash = label.or_else(|| name.rsplit_once('-').map(|(_, h)| h.to_string()))?;
        let annotations = cr.metadata.annotations.as_ref();
        Some(Self {
            digest: hash::digest(&template),
            hash,
            revision: cr.revision,
            template,
            created: cr.metadata.creation_timestamp.as_ref().map(|t| t.0),
            change_cause: annotations
                .and_then(|a| a.get(labels::CHANGE_CAUSE))
                .cloned(),
            generation: annotations
                .and_then(|a| a.get(labels::REVISION_GENERATION))
                .and_then(|g| g.parse().ok()),
            marks: Marks::read(annotations),
            resource_version: cr.metadata.resource_version.clone(),
            name,
        })
    }
}

/// `<mwrs-name>-<hash>`, the prefix cut so the whole name is a valid object name.
pub fn revision_name(mwrs_name: &str, hash: &str) -> String {
    let room = MAX_NAME_LEN.saturating_sub(hash.len() + 1);
    let prefix = truncate_name(mwrs_name, room);
    format!("{prefix}-{hash}")
}

/// Cuts `s` to at most `max` bytes on a char boundary without leaving a trailing `-` or
/// `.`, which would make the joined name invalid.
pub(crate) fn truncate_name(s: &str, max: usize) -> &str {
    crate::text::prefix(s, max).trim_end_matches(['-', '.'])
}

/// The revision whose content equals `digest`.
pub fn find_by_content(history: &[RevisionView], digest: Digest) -> Option<&RevisionView> {
    history.iter().find(|r| r.digest == digest)
}

pub fn find_by_hash<'a>(history: &'a [RevisionView], hash: &str) -> Option<&'a RevisionView> {
    history.iter().find(|r| r.hash == hash)
}

pub fn max_revision(history: &[RevisionView]) -> i64 {
    history.iter().map(|r| r.revision).max().unwrap_or(0)
}

/// Where the template of the current spec lives in history.
#[derive(Clone, Debug, PartialEq)]
pub enum Resolution {
    /// Stored already. `renumber_to` is set when it is not the newest revision (undo).
    Existing {
        hash: String,
        name: String,
        renumber_to: Option<i64>,
    },
    /// Not stored: create it. `collision_count` is the count the name was computed with
    /// (bumped past every name taken by other content).
    Create {
        hash: String,
        name: String,
        revision: i64,
        collision_count: i32,
    },
}

impl Resolution {
    pub fn hash(&self) -> &str {
        match self {
            Resolution::Existing { hash, .. } | Resolution::Create { hash, .. } => hash,
        }
    }
}

/// Finds or names the revision for a template with canonical JSON `canonical`; a new
/// name is neither in `history` nor among the `taken` names other objects hold.
pub fn resolve(
    history: &[RevisionView],
    taken: &[String],
    mwrs_name: &str,
    canonical: &str,
    collision_count: i32,
) -> Resolution {
    let digest = hash::digest_of_canonical(canonical);
    let newest = max_revision(history);
    if let Some(found) = find_by_content(history, digest) {
        let is_newest = history
            .iter()
            .all(|r| r.revision < found.revision || r.name == found.name);
        return Resolution::Existing {
            hash: found.hash.clone(),
            name: found.name.clone(),
            renumber_to: (!is_newest).then_some(newest + 1),
        };
    }
    // Same name, other content: a hash collision. Bump until the name is free; the
    // count is persisted in status so the next pass computes the same name.
    let mut count = collision_count.max(0);
    loop {
        let hash = hash::revision_hash_of_canonical(canonical, count);
        let name = revision_name(mwrs_name, &hash);
        let free =
            !history.iter().any(|r| r.name == name || r.hash == hash) && !taken.contains(&name);
        if free {
            return Resolution::Create {
                hash,
                name,
                revision: newest + 1,
                collision_count: count,
            };
        }
        count = count.saturating_add(1);
    }
}

/// Why `rollout undo` without a revision has nowhere to go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoUndoTarget {
    /// The update revision is held or failed and no revision ever completed.
    NoStableRevision,
    /// No revision other than the spec's completed and was not aborted since.
    NoEarlierCompleted,
}

/// Where `rollout undo` goes without `--to-revision`: the stable revision
/// (`currentRevision`) while the update revision is held by an abort or was aborted;
/// otherwise the newest revision other than the spec's that completed and was not aborted
/// since. Never to an aborted revision: that one must be named.
pub fn undo_target<'a>(
    history: &'a [RevisionView],
    status: &mwrs_api::mwrs::ManifestWorkReplicaSetStatus,
    spec_digest: Digest,
) -> Result<&'a RevisionView, NoUndoTarget> {
    let current = status.current_revision.as_deref();
    if status.update_aborted() {
        return current
            .and_then(|c| find_by_hash(history, c))
            .ok_or(NoUndoTarget::NoStableRevision);
    }
    history
        .iter()
        .filter(|r| r.digest != spec_digest)
        .filter(|r| Some(r.hash.as_str()) == current || r.marks.is_good())
        .max_by_key(|r| r.revision)
        .ok_or(NoUndoTarget::NoEarlierCompleted)
}

/// Names of revisions to delete so at most `limit` non-live revisions remain, lowest
/// `.revision` first. Live revisions are never returned.
pub fn prune(history: &[RevisionView], live: &BTreeSet<&str>, limit: i32) -> Vec<String> {
    let mut dead: Vec<&RevisionView> = history
        .iter()
        .filter(|r| !live.contains(r.hash.as_str()))
        .collect();
    let keep = usize::try_from(limit.max(0)).unwrap_or(0);
    if dead.len() <= keep {
        return Vec::new();
    }
    dead.sort_by_key(|r| (r.revision, r.name.clone()));
    let excess = dead.len() - keep;
    dead.into_iter()
        .take(excess)
        .map(|r| r.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rev(name_hash: &str, revision: i64, template: Value) -> RevisionView {
        RevisionView {
            marks: Marks::default(),
            name: format!("app-{name_hash}"),
            hash: name_hash.into(),
            revision,
            digest: hash::digest(&template),
            template,
            created: None,
            change_cause: None,
            generation: None,
            resource_version: None,
        }
    }

    #[test]
    fn name_fits_and_stays_valid() {
        assert_eq!(revision_name("app", "5859f96865"), "app-5859f96865");
        let long = format!("{}-.x", "a".repeat(300));
        let n = revision_name(&long, "5859f96865");
        assert_eq!(n.len(), 253);
        assert!(n.ends_with("-5859f96865"));
        let tricky = format!("{}-{}", "a".repeat(241), "b".repeat(20));
        let n = revision_name(&tricky, "5859f96865");
        assert!(!n.contains("--"), "{n}");
        assert!(n.len() <= 253);
    }

    #[test]
    fn resolve_new_template_creates_next_revision() {
        let h = vec![rev("x", 1, json!({"a": 1})), rev("y", 4, json!({"a": 2}))];
        let canonical = hash::canonical_json(&json!({"a": 3}));
        match resolve(&h, &[], "app", &canonical, 0) {
            Resolution::Create {
                revision,
                collision_count,
                name,
                hash,
            } => {
                assert_eq!(revision, 5);
                assert_eq!(collision_count, 0);
                assert_eq!(name, format!("app-{hash}"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn resolve_existing_content_reuses_and_renumbers_older() {
        let h = vec![rev("x", 1, json!({"a": 1})), rev("y", 4, json!({"a": 2}))];
        let older = hash::canonical_json(&json!({"a": 1}));
        assert_eq!(
            resolve(&h, &[], "app", &older, 0),
            Resolution::Existing {
                hash: "x".into(),
                name: "app-x".into(),
                renumber_to: Some(5)
            }
        );
        let newest = hash::canonical_json(&json!({"a": 2}));
        assert_eq!(
            resolve(&h, &[], "app", &newest, 0),
            Resolution::Existing {
                hash: "y".into(),
                name: "app-y".into(),
                renumber_to: None
            }
        );
    }

    #[test]
    fn a_name_another_object_holds_is_skipped() {
        let t = json!({"a": 4});
        let canonical = hash::canonical_json(&t);
        let first = revision_name("app", &hash::revision_hash_of_canonical(&canonical, 0));
        let second = revision_name("app", &hash::revision_hash_of_canonical(&canonical, 1));
        let taken = [first, second];
        match resolve(&[], &taken, "app", &canonical, 0) {
            Resolution::Create {
                collision_count,
                name,
                ..
            } => {
                assert_eq!(collision_count, 2);
                assert!(!taken.contains(&name));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn resolve_collision_bumps_count() {
        let t = json!({"a": 3});
        let canonical = hash::canonical_json(&t);
        let taken = hash::revision_hash_of_canonical(&canonical, 0);
        // A stored revision holds the name this template would get, with other content.
        let h = vec![rev(&taken, 1, json!({"other": true}))];
        match resolve(&h, &[], "app", &canonical, 0) {
            Resolution::Create {
                collision_count,
                hash,
                ..
            } => {
                assert_eq!(collision_count, 1);
                assert_eq!(hash, hash::revision_hash_of_canonical(&canonical, 1));
                assert_ne!(hash, taken);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn prune_keeps_live_and_newest_dead() {
        let h: Vec<_> = (1..=6)
            .map(|i| rev(&format!("h{i}"), i, json!({ "v": i })))
            .collect();
        let live: BTreeSet<&str> = ["h1", "h6"].into();
        assert_eq!(prune(&h, &live, 2), vec!["app-h2", "app-h3"]);
        assert!(prune(&h, &live, 10).is_empty());
        let all_dead = prune(&h, &live, 0);
        assert_eq!(all_dead.len(), 4);
        assert!(!all_dead.iter().any(|n| n == "app-h1" || n == "app-h6"));
    }

    fn at(s: i64) -> Option<Timestamp> {
        Timestamp::from_second(1_800_000_000 + s).ok()
    }

    /// Six revisions h1..h6 (revision i = hi): h1 and h4 completed, h2 completed then was
    /// aborted later (an undo to it that failed), h3 aborted, h5 never finished.
    fn marked_history() -> Vec<RevisionView> {
        let marks = [
            (at(1), None),
            (at(2), at(20)),
            (None, at(3)),
            (at(4), None),
            (None, None),
            (None, None),
        ];
        marks
            .iter()
            .enumerate()
            .map(|(i, &(completed, aborted))| {
                let n = i as i64 + 1;
                let mut r = rev(&format!("h{n}"), n, json!({ "v": n }));
                r.marks = Marks { completed, aborted };
                r
            })
            .collect()
    }

    fn status(current: &str, update: &str) -> mwrs_api::mwrs::ManifestWorkReplicaSetStatus {
        mwrs_api::mwrs::ManifestWorkReplicaSetStatus {
            current_revision: Some(current.into()),
            update_revision: Some(update.into()),
            ..Default::default()
        }
    }

    fn undo_hash(
        h: &[RevisionView],
        s: &mwrs_api::mwrs::ManifestWorkReplicaSetStatus,
        spec: &str,
    ) -> Result<String, NoUndoTarget> {
        let digest = find_by_hash(h, spec).map_or(hash::digest(&Value::Null), |r| r.digest);
        undo_target(h, s, digest).map(|r| r.hash.clone())
    }

    #[test]
    fn undo_after_aborts_goes_to_the_stable_revision() {
        let h = marked_history();
        // Two aborts in a row: h5 held (abortedTime), h3 aborted before it; h4 is current.
        let mut held = status("h4", "h6");
        held.aborted_time = Some(mwrs_api::Time(at(30).unwrap_or_default()));
        assert_eq!(undo_hash(&h, &held, "h6"), Ok("h4".into()));
        // The hold ended in a failed abort record only (no abortedTime).
        let mut recorded = status("h4", "h6");
        recorded.last_abort = Some(mwrs_api::mwrs::AbortRecord {
            trigger: mwrs_api::mwrs::ABORT_TRIGGER_REQUESTED.into(),
            time: mwrs_api::Time(at(30).unwrap_or_default()),
            revision: "h6".into(),
            reverted_to: Some("h4".into()),
            timed_out_clusters: vec![],
            timed_out_count: 0,
            failed_clusters: vec![],
            failed_count: 0,
        });
        assert_eq!(undo_hash(&h, &recorded, "h6"), Ok("h4".into()));
        // Aborted with nothing stable: nowhere to go unless named.
        let mut first = recorded.clone();
        first.current_revision = None;
        assert_eq!(
            undo_hash(&h, &first, "h6"),
            Err(NoUndoTarget::NoStableRevision)
        );
    }

    #[test]
    fn undo_of_a_completed_revision_goes_to_the_newest_good_one() {
        let h = marked_history();
        // h4 complete and current: back to h1 (h2 was aborted after completing, h3
        // aborted, h5 never completed).
        assert_eq!(undo_hash(&h, &status("h4", "h4"), "h4"), Ok("h1".into()));
        // A rollout of h6 in flight: back to the stable h4.
        assert_eq!(undo_hash(&h, &status("h4", "h6"), "h6"), Ok("h4".into()));
        // Only the spec's revision ever completed.
        let only = vec![h[0].clone()];
        assert_eq!(
            undo_hash(&only, &status("h1", "h1"), "h1"),
            Err(NoUndoTarget::NoEarlierCompleted)
        );
    }
}
