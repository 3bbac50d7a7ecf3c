//! The planner's input for one MWRS, gathered from the reflector stores only (never from
//! the API), plus the stored objects the executor needs to shape its patches.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use mwrs_api::labels;
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_api::work::ManifestWork;
use mwrs_engine::Observed;
use mwrs_engine::owner::OwnerKey;
use mwrs_engine::placement::PlacementView;
use mwrs_engine::revision::RevisionView;
use mwrs_engine::work::WorkView;

use crate::watch::{SPEC_DIGEST_ANNOTATION, Stores, stored_digest};

/// Everything the stores hold about one MWRS.
pub struct Snapshot {
    pub owner: OwnerKey,
    pub placements: Vec<PlacementView>,
    pub works: Vec<WorkView>,
    pub revisions: Vec<RevisionView>,
    /// Stored (stripped) ManifestWorks by (cluster, name).
    pub work_objects: BTreeMap<(String, String), Arc<ManifestWork>>,
}

impl Snapshot {
    pub fn gather(stores: &Stores, mwrs: &ManifestWorkReplicaSet) -> Self {
        let namespace = mwrs.namespace().unwrap_or_default();
        let owner = OwnerKey::new(namespace.clone(), mwrs.name_any());
        let empty = BTreeMap::new();
        let owns = |l: Option<&BTreeMap<String, String>>, a: Option<&BTreeMap<String, String>>| {
            owner.owns(l.unwrap_or(&empty), a.unwrap_or(&empty))
        };

        // A work carrying both owner labels sits in both stores: key by (ns, name).
        let mut work_objects = BTreeMap::new();
        for store in &stores.works {
            for mw in store.state() {
                if owns(
                    mw.metadata.labels.as_ref(),
                    mw.metadata.annotations.as_ref(),
                ) {
                    work_objects.insert((mw.namespace().unwrap_or_default(), mw.name_any()), mw);
                }
            }
        }
        let works = work_objects
            .values()
            .map(|mw| {
                let mut v = WorkView::from_work_with_digest(mw, stored_digest(mw));
                v.annotations.remove(SPEC_DIGEST_ANNOTATION);
                v
            })
            .collect();

        let mut revisions_by_name = BTreeMap::new();
        for store in &stores.revisions {
            for cr in store.state() {
                if cr.namespace().as_deref() == Some(namespace.as_str())
                    && owns(
                        cr.metadata.labels.as_ref(),
                        cr.metadata.annotations.as_ref(),
                    )
                {
                    revisions_by_name.insert(cr.name_any(), cr);
                }
            }
        }
        let revisions = revisions_by_name
            .values()
            .filter_map(|cr| RevisionView::from_controller_revision(cr))
            .collect();

        let decisions: Vec<_> = stores
            .decisions
            .state()
            .into_iter()
            .filter(|pd| pd.namespace().as_deref() == Some(namespace.as_str()))
            .collect();
        let placements = mwrs
            .spec
            .placement_refs
            .iter()
            .map(|r| {
                let placement = stores
                    .placements
                    .get(&ObjectRef::new(&r.name).within(&namespace));
                let mine = decisions.iter().filter(|pd| {
                    pd.labels().get(labels::PLACEMENT_LABEL).map(String::as_str)
                        == Some(r.name.as_str())
                });
                PlacementView::from_objects(&r.name, placement.as_deref(), mine.map(|a| a.as_ref()))
            })
            .collect();

        Self {
            owner,
            placements,
            works,
            revisions,
            work_objects,
        }
    }

    pub fn observed<'a>(&'a self, mwrs: &'a ManifestWorkReplicaSet) -> Observed<'a> {
        Observed {
            mwrs,
            placements: &self.placements,
            works: &self.works,
            revisions: &self.revisions,
        }
    }
}
