//! Stages 1 and 7, the pass's ControllerRevision writes: the labels and annotations of a
//! new revision, completed/aborted marks, and pruning to the history limit.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use mwrs_api::labels;
use mwrs_api::mwrs::ManifestWorkReplicaSetStatus;
use serde_json::Value;

use crate::revision;
use crate::revision::Resolution;

use super::output::RevisionChange;
use super::pass::Pass;
use super::revision_ids::Carried;

/// Stage 1: the revision of the current spec, and what storing it takes.
pub(super) struct RevisionStep {
    /// Its hash: the update revision.
    pub(super) update: String,
    pub(super) template: Arc<Value>,
    /// The new ControllerRevision, or the renumbering of a stored one.
    pub(super) changes: Vec<RevisionChange>,
    /// The collision count its name was computed with, when above 0.
    pub(super) collision_count: Option<i32>,
    /// New content: stored in this pass, or for this generation by an earlier pass whose
    /// status write was lost (not a revision found in history).
    pub(super) created: bool,
    /// Not the update revision the status names: a new rollout starts.
    pub(super) changed: bool,
}

impl<'a> Pass<'a> {
    /// Stage 1 (resolved when the pass was set up: every ManifestWork is read against it).
    pub(super) fn revision_step(&self) -> RevisionStep {
        let generation = self.observed.mwrs.metadata.generation;
        let update = self.resolution.hash().to_string();
        let template = Arc::new(self.observed.mwrs.spec.manifest_work_template.to_value());
        let mut changes = Vec::new();
        let mut collision_count = None;
        let created = match &self.resolution {
            Resolution::Create {
                name,
                hash,
                revision,
                collision_count: count,
            } => {
                collision_count = (*count > 0).then_some(*count);
                changes.push(RevisionChange::Create {
                    name: name.clone(),
                    hash: hash.clone(),
                    revision: *revision,
                    template: (*template).clone(),
                    labels: self.revision_labels(hash),
                    annotations: self.revision_annotations(),
                });
                true
            }
            Resolution::Existing {
                name, renumber_to, ..
            } => {
                if let Some(to) = renumber_to {
                    changes.push(RevisionChange::Renumber {
                        name: name.clone(),
                        revision: *to,
                        resource_version: self.version_of(name),
                    });
                }
                self.observed.revisions.iter().any(|r| {
                    &r.name == name && r.generation.is_some() && r.generation == generation
                })
            }
        };
        RevisionStep {
            changed: self.old.update_revision.as_deref() != Some(update.as_str()),
            update,
            template,
            changes,
            collision_count,
            created,
        }
    }

    /// The write that marks revision `hash` with annotation `key` = now.
    pub(super) fn mark(&self, hash: &str, key: &str) -> Option<RevisionChange> {
        let (name, resource_version) = match revision::find_by_hash(self.observed.revisions, hash) {
            Some(r) => (r.name.clone(), r.resource_version.clone()),
            // Created by this very plan: the executor knows the version its create made.
            None => match &self.resolution {
                Resolution::Create { name, hash: h, .. } if h == hash => (name.clone(), None),
                _ => return None,
            },
        };
        Some(RevisionChange::Mark {
            name,
            annotations: BTreeMap::from([(key.to_string(), self.now.to_string())]),
            resource_version,
        })
    }

    /// The version stored revision `name` was read at.
    fn version_of(&self, name: &str) -> Option<String> {
        self.observed
            .revisions
            .iter()
            .find(|r| r.name == name)
            .and_then(|r| r.resource_version.clone())
    }

    pub(super) fn revision_labels(&self, hash: &str) -> BTreeMap<String, String> {
        let mut l = self.owner.labels();
        l.insert(labels::CONTROLLER_HASH.into(), hash.into());
        l
    }

    pub(super) fn revision_annotations(&self) -> BTreeMap<String, String> {
        let mut a = BTreeMap::from([(
            labels::MWRS_OWNER_ANNOTATION.to_string(),
            self.owner.slashed(),
        )]);
        if let Some(g) = self.observed.mwrs.metadata.generation {
            a.insert(labels::REVISION_GENERATION.into(), g.to_string());
        }
        if let Some(cause) = self
            .observed
            .mwrs
            .metadata
            .annotations
            .as_ref()
            .and_then(|m| m.get(labels::CHANGE_CAUSE))
        {
            a.insert(labels::CHANGE_CAUSE.into(), cause.clone());
        }
        a
    }

    pub(super) fn prune(&self, status: &ManifestWorkReplicaSetStatus) -> Vec<RevisionChange> {
        let mut live: BTreeSet<&str> = BTreeSet::new();
        live.extend(status.current_revision.as_deref());
        live.extend(status.update_revision.as_deref());
        // A revision the stored status still names is pruned only in a pass after the
        // status write that dropped it succeeded (rules §11.6): a lost write must never
        // leave `currentRevision` naming a deleted revision.
        live.extend(self.old.current_revision.as_deref());
        live.extend(self.old.update_revision.as_deref());
        // Every revision any owned ManifestWork carries, survivors read once per pass;
        // one flag per known revision so 100,000 works cost no set insertions.
        let mut carried = vec![false; self.ids.len()];
        let survivors = self.clusters.rows.iter().flat_map(|(_, row)| {
            row.carried
                .into_iter()
                .chain(row.duplicates.iter().filter_map(|w| self.carried(w)))
        });
        let deleting = self
            .clusters
            .deleting
            .iter()
            .filter_map(|w| self.carried(w));
        for r in survivors.chain(deleting) {
            match r {
                Carried::Known(i) => carried[i] = true,
                Carried::Unstored(h) => {
                    live.insert(h);
                }
            }
        }
        live.extend(
            carried
                .iter()
                .enumerate()
                .filter(|(_, c)| **c)
                .map(|(i, _)| self.ids.name(i)),
        );
        live.insert(self.resolution.hash());
        let limit = self.observed.mwrs.spec.revision_history_limit();
        revision::prune(self.observed.revisions, &live, limit)
            .into_iter()
            .map(|name| RevisionChange::Delete {
                resource_version: self.version_of(&name),
                name,
            })
            .collect()
    }
}
