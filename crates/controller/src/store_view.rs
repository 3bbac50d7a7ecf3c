//! The planner's input for one MWRS, gathered from the caches only (never from the
//! API). Owned ManifestWorks and revisions are found by owner: the cost of a snapshot
//! grows with what the MWRS owns, not with the size of the hub.

use std::collections::BTreeMap;

use kube::ResourceExt;
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_engine::Observed;
use mwrs_engine::owner::OwnerKey;
use mwrs_engine::placement::PlacementView;
use mwrs_engine::plan::{BlockedWrite, Sight};
use mwrs_engine::plugin::PluginInputs;
use mwrs_engine::revision::RevisionView;
use mwrs_engine::snapshot::Snapshot as EngineSnapshot;
use mwrs_engine::work::WorkView;

use crate::watch::Stores;

/// Everything the stores hold about one MWRS.
pub struct StoreView {
    pub owner: OwnerKey,
    pub placements: Vec<PlacementView>,
    pub works: Vec<WorkView>,
    pub revisions: Vec<RevisionView>,
    /// Clusters whose ManifestWork cannot be written for now, and why.
    pub blocked: Vec<BlockedWrite>,
    /// Revision names of the namespace other objects hold.
    pub taken_revision_names: Vec<String>,
    /// Whether the stores are current ([`crate::watch_health`]).
    pub sight: Sight,
}

impl StoreView {
    /// `blocked`: clusters where a write found this MWRS's ManifestWork name held by an
    /// object it does not own (the stores never hold such objects), or was refused;
    /// `taken_revision_names`: the same for ControllerRevision names.
    pub fn gather(
        stores: &Stores,
        mwrs: &ManifestWorkReplicaSet,
        blocked: Vec<BlockedWrite>,
        taken_revision_names: Vec<String>,
    ) -> Self {
        let namespace = mwrs.namespace().unwrap_or_default();
        let owner = OwnerKey::new(namespace.clone(), mwrs.name_any());
        let empty = BTreeMap::new();
        let owns = |l: Option<&BTreeMap<String, String>>, a: Option<&BTreeMap<String, String>>| {
            owner.owns(l.unwrap_or(&empty), a.unwrap_or(&empty))
        };

        let mut works = stores.owned_works(&owner);
        works.retain(|w| owner.owns(&w.labels, &w.annotations));

        // Only the referenced Placements and their decisions are fetched (by name and
        // through the decision index); the engine then selects among them exactly as it
        // does for the CLI.
        let (placements, decisions) = stores.placements_named(
            &namespace,
            mwrs.spec.placement_refs.iter().map(|r| r.name.as_str()),
        );
        // Only revisions whose every ownership mark names this MWRS: pruning deletes them.
        let revisions: Vec<_> = stores
            .owned_revisions(&owner)
            .into_iter()
            .filter(|cr| {
                owns(
                    cr.metadata.labels.as_ref(),
                    cr.metadata.annotations.as_ref(),
                )
            })
            .collect();
        let inner = EngineSnapshot::with_work_views(
            mwrs,
            placements.iter().map(AsRef::as_ref),
            decisions.iter().map(AsRef::as_ref),
            works,
            revisions.iter().map(AsRef::as_ref),
        );
        let mut placements = inner.placements;
        for v in &mut placements {
            v.changed_at = stores
                .placement_changes
                .get(&(namespace.clone(), v.name.clone()));
        }
        Self {
            owner,
            blocked,
            taken_revision_names,
            sight: stores.ready.failures.sight(),
            placements,
            works: inner.works,
            revisions: inner.revisions,
        }
    }

    pub fn observed<'a>(
        &'a self,
        mwrs: &'a ManifestWorkReplicaSet,
        plugins: &'a PluginInputs,
    ) -> Observed<'a> {
        Observed {
            mwrs,
            placements: &self.placements,
            works: &self.works,
            revisions: &self.revisions,
            blocked: &self.blocked,
            taken_revision_names: &self.taken_revision_names,
            plugins,
            sight: self.sight,
        }
    }
}
