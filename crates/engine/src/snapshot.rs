//! An owned snapshot of everything the planner reads about one MWRS, built from hub
//! objects. The controller builds it from its stores and the CLI from list calls, so
//! both select "what belongs to this MWRS" the same way.

use k8s_openapi::api::apps::v1::ControllerRevision;
use mwrs_api::labels;
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_api::placement::{Placement, PlacementDecision};

use crate::owner::OwnerKey;
use crate::placement::PlacementView;
use crate::plan::{BlockedWrite, Observed};
use crate::revision::RevisionView;
use crate::stored_work::StoredWork;
use crate::work::WorkView;

#[derive(Clone, Debug)]
pub struct Snapshot {
    pub mwrs: ManifestWorkReplicaSet,
    pub placements: Vec<PlacementView>,
    pub works: Vec<WorkView>,
    pub revisions: Vec<RevisionView>,
    /// The writes the controller found blocked, as its status publishes them.
    pub blocked: Vec<BlockedWrite>,
}

impl Snapshot {
    /// Picks, from any superset of objects, the placements the MWRS references (in its
    /// namespace), their decisions, the ManifestWorks it owns and its revisions.
    /// `works` are ManifestWorks as [`StoredWork`] decodes them (the digest of their spec
    /// taken, their bulk never read); [`Snapshot::with_work_views`] takes views.
    pub fn from_objects<'a>(
        mwrs: &ManifestWorkReplicaSet,
        placements: impl IntoIterator<Item = &'a Placement>,
        decisions: impl IntoIterator<Item = &'a PlacementDecision>,
        works: impl IntoIterator<Item = &'a StoredWork>,
        revisions: impl IntoIterator<Item = &'a ControllerRevision>,
    ) -> Self {
        let owner = owner_of(mwrs);
        let views = works
            .into_iter()
            .filter(|w| {
                owner.owns(
                    w.metadata.labels.as_ref().unwrap_or(&Default::default()),
                    w.metadata
                        .annotations
                        .as_ref()
                        .unwrap_or(&Default::default()),
                )
            })
            .map(StoredWork::view)
            .collect();
        Self::with_work_views(mwrs, placements, decisions, views, revisions)
    }

    /// As [`Snapshot::from_objects`], with the owned ManifestWorks already as views.
    pub fn with_work_views<'a>(
        mwrs: &ManifestWorkReplicaSet,
        placements: impl IntoIterator<Item = &'a Placement>,
        decisions: impl IntoIterator<Item = &'a PlacementDecision>,
        works: Vec<WorkView>,
        revisions: impl IntoIterator<Item = &'a ControllerRevision>,
    ) -> Self {
        let ns = mwrs.metadata.namespace.as_deref().unwrap_or_default();
        let placements: Vec<&Placement> = placements
            .into_iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some(ns))
            .collect();
        let decisions: Vec<&PlacementDecision> = decisions
            .into_iter()
            .filter(|d| d.metadata.namespace.as_deref() == Some(ns))
            .collect();
        let views = mwrs
            .spec
            .placement_refs
            .iter()
            .map(|r| {
                let placement = placements
                    .iter()
                    .find(|p| p.metadata.name.as_deref() == Some(r.name.as_str()))
                    .copied();
                let mine = decisions.iter().copied().filter(|d| {
                    d.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(labels::PLACEMENT_LABEL))
                        == Some(&r.name)
                });
                PlacementView::from_objects(&r.name, placement, mine)
            })
            .collect();
        let owner = owner_of(mwrs);
        let (key, value) = owner.selector();
        let revisions = revisions
            .into_iter()
            .filter(|cr| {
                cr.metadata.namespace.as_deref() == Some(ns)
                    && cr.metadata.labels.as_ref().and_then(|l| l.get(key)) == Some(&value)
            })
            .filter_map(RevisionView::from_controller_revision)
            // The same object may come from several stores (one per owner label key).
            .map(|r| (r.name.clone(), r))
            .collect::<std::collections::BTreeMap<_, _>>()
            .into_values()
            .collect();
        let blocked = mwrs
            .status
            .iter()
            .flat_map(|s| &s.blocked_clusters)
            .map(|b| BlockedWrite {
                cluster: b.cluster.clone(),
                why: b.message.clone(),
            })
            .collect();
        Self {
            mwrs: mwrs.clone(),
            placements: views,
            works,
            revisions,
            blocked,
        }
    }

    pub fn observed(&self) -> Observed<'_> {
        Observed {
            mwrs: &self.mwrs,
            placements: &self.placements,
            works: &self.works,
            revisions: &self.revisions,
            blocked: &self.blocked,
            taken_revision_names: &[],
            plugins: &crate::plugin::NO_PLUGINS,
            sight: crate::plan::Sight::Clear,
        }
    }
}

/// The owner key of an MWRS.
pub fn owner_of(mwrs: &ManifestWorkReplicaSet) -> OwnerKey {
    OwnerKey::new(
        mwrs.metadata.namespace.clone().unwrap_or_default(),
        mwrs.metadata.name.clone().unwrap_or_default(),
    )
}
