//! The plan for an MWRS being deleted: its ManifestWorks and revisions go, then the
//! finalizer.

use super::output::{FinalizerAction, Plan, RevisionChange, WorkChange};
use super::pass::Observed;

pub(super) fn plan_deletion(observed: &Observed<'_>, has_finalizer: bool) -> Plan {
    if !has_finalizer {
        return Plan::empty(FinalizerAction::Keep);
    }
    let mut plan = Plan::empty(FinalizerAction::Keep);
    plan.works = observed
        .works
        .iter()
        .filter(|w| !w.deleting)
        .map(|w| WorkChange::Delete {
            cluster: w.cluster.to_string(),
            name: w.name.to_string(),
            resource_version: w.resource_version.as_deref().map(String::from),
        })
        .collect();
    // Foreground: the finalizer stays until the agents have removed every ManifestWork.
    if !observed.mwrs.spec.is_foreground() || observed.works.is_empty() {
        plan.finalizer = FinalizerAction::Remove;
        plan.revisions = observed
            .revisions
            .iter()
            .map(|r| RevisionChange::Delete {
                name: r.name.clone(),
                resource_version: r.resource_version.clone(),
            })
            .collect();
    }
    plan
}
