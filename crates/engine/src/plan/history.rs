//! Stages 1 and 7, the pass's ControllerRevision writes: the labels and annotations of a
//! new revision, completed/aborted marks, and pruning to the history limit.

use super::*;

impl<'a> Pass<'a> {
    /// The write that marks revision `hash` with annotation `key` = now.
    pub(super) fn mark(&self, hash: &str, key: &str) -> Option<RevisionChange> {
        let name = match revision::find_by_hash(self.o.revisions, hash) {
            Some(r) => r.name.clone(),
            None => match &self.resolution {
                Resolution::Create { name, hash: h, .. } if h == hash => name.clone(),
                _ => return None,
            },
        };
        Some(RevisionChange::Mark {
            name,
            annotations: BTreeMap::from([(key.to_string(), self.now.to_string())]),
        })
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
        if let Some(g) = self.o.mwrs.metadata.generation {
            a.insert(labels::REVISION_GENERATION.into(), g.to_string());
        }
        if let Some(cause) = self
            .o
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

    pub(super) fn prune(&self, status: &ManifestWorkReplicaSetStatus, p: &mut Plan) {
        let mut live: BTreeSet<&str> = BTreeSet::new();
        live.extend(status.current_revision.as_deref());
        live.extend(status.update_revision.as_deref());
        // A revision the stored status still names is pruned only in a pass after the
        // status write that dropped it succeeded (SPEC §11.6): a lost write must never
        // leave `currentRevision` naming a deleted revision.
        live.extend(self.old.current_revision.as_deref());
        live.extend(self.old.update_revision.as_deref());
        // Every revision any owned ManifestWork carries, survivors read once per pass;
        // one flag per known revision so 100,000 works cost no set insertions.
        let mut carried = vec![false; self.known.len()];
        let survivors = self.clusters.slots.iter().flat_map(|(_, slot)| {
            slot.carried
                .into_iter()
                .chain(slot.dups.iter().filter_map(|w| self.carried(w)))
        });
        let gone = self.clusters.gone.iter().filter_map(|w| self.carried(w));
        for r in survivors.chain(gone) {
            match r {
                Rev::Known(i) => carried[i] = true,
                Rev::Foreign(h) => {
                    live.insert(h);
                }
            }
        }
        live.extend(
            carried
                .iter()
                .enumerate()
                .filter(|(_, c)| **c)
                .map(|(i, _)| self.known.name(i)),
        );
        live.insert(self.resolution.hash());
        let limit = self.o.mwrs.spec.revision_history_limit();
        p.revisions.extend(
            revision::prune(self.o.revisions, &live, limit)
                .into_iter()
                .map(|name| RevisionChange::Delete { name }),
        );
    }
}
