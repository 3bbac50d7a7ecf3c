//! The plan for an MWRS being deleted: its ManifestWorks and revisions go, then the
//! finalizer.

use super::{FinalizerAction, Observed, Plan, RevisionChange, WorkChange};

pub(super) fn plan_deletion(o: &Observed<'_>, has_finalizer: bool) -> Plan {
    if !has_finalizer {
        return Plan::empty(FinalizerAction::Keep);
    }
    let mut p = Plan::empty(FinalizerAction::Keep);
    p.works = o
        .works
        .iter()
        .filter(|w| !w.deleting)
        .map(|w| WorkChange::Delete {
            cluster: w.cluster.clone(),
            name: w.name.clone(),
        })
        .collect();
    // Foreground: the finalizer stays until the agents have removed every ManifestWork.
    if !o.mwrs.spec.is_foreground() || o.works.is_empty() {
        p.finalizer = FinalizerAction::Remove;
        p.revisions = o
            .revisions
            .iter()
            .map(|r| RevisionChange::Delete {
                name: r.name.clone(),
            })
            .collect();
    }
    p
}
