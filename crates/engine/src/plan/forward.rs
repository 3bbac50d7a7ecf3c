//! What a planner pass reads for a roll forward, handed out so that a caller can run the
//! rollout engine itself between passes (the preview, over waves where nothing but the
//! engine decides): each placementRef's strategy, the decision groups it owns and the
//! clusters already on the update revision, and the write that rolls one cluster forward.

use std::sync::Arc;

use jiff::Timestamp;
use serde_json::Value;

use crate::owner::OwnerKey;
use crate::rollout::{ClusterRolloutStatus, DecisionGroups, ParsedStrategy};
use crate::validate;

use super::output::WorkApply;
use super::pass::{Observed, Pass, PlanConfig};

/// One placementRef with decisions, as the rollout engine sees it in a pass.
#[derive(Clone, Debug)]
pub struct PlacementRollout {
    /// Index in `spec.placementRefs`.
    pub index: usize,
    pub name: String,
    pub strategy: ParsedStrategy,
    /// Its decision groups, less the clusters an earlier placementRef owns.
    pub groups: DecisionGroups,
    /// Clusters whose ManifestWork carries the update revision, with the status the
    /// agent reports (the engine's `existing`).
    pub on_target: Vec<ClusterRolloutStatus>,
}

/// A pass set up on a snapshot whose spec revision is already stored, rolling forward
/// (no abort holds).
pub struct RollForward<'a> {
    pass: Pass<'a>,
    update: String,
    template: Arc<Value>,
}

impl<'a> RollForward<'a> {
    /// None when a pass would do something else first: the MWRS is being deleted, its
    /// spec is invalid, its revision is not stored yet, or an abort holds.
    pub fn new(observed: &'a Observed<'a>, now: Timestamp, cfg: &'a PlanConfig) -> Option<Self> {
        let meta = &observed.mwrs.metadata;
        if meta.deletion_timestamp.is_some() {
            return None;
        }
        let validated = validate::validate(&observed.mwrs.spec, cfg.manifest_size_limit).ok()?;
        let owner = OwnerKey::new(
            meta.namespace.clone().unwrap_or_default(),
            meta.name.clone().unwrap_or_default(),
        );
        let old = observed.mwrs.status.clone().unwrap_or_default();
        if old.aborted_time.is_some() {
            return None;
        }
        let pass = Pass::new(observed, owner, old, validated, now, cfg);
        let step = pass.revision_step();
        if step.changed {
            return None;
        }
        Some(Self {
            pass,
            update: step.update,
            template: step.template,
        })
    }

    /// The hash of the update revision.
    pub fn update(&self) -> &str {
        &self.update
    }

    /// Every placementRef with decisions, in spec order.
    pub fn placements(&self) -> Vec<PlacementRollout> {
        let pass = &self.pass;
        let on_target = pass.classify(pass.ids.id(&self.update)).on_target;
        let refs = &pass.observed.mwrs.spec.placement_refs;
        pass.views
            .iter()
            .zip(on_target)
            .enumerate()
            .filter_map(|(i, (view, on_target))| {
                let groups = view.and_then(|v| v.groups())?;
                Some(PlacementRollout {
                    index: i,
                    name: refs[i].name.clone(),
                    strategy: pass.validated.strategies[i].clone(),
                    groups: pass.owned_groups(i, groups).into_owned(),
                    on_target,
                })
            })
            .collect()
    }

    /// The write a pass at `at` makes to roll `cluster` of placementRef `placement` forward
    /// (None: the name is blocked by a ManifestWork on its way out, or the hub refused the
    /// same update on the version the cache holds).
    pub fn write(&self, cluster: &str, placement: usize, at: Timestamp) -> Option<WorkApply> {
        let update = (self.update.as_str(), &self.template);
        self.pass.apply(cluster, placement, update, at)
    }
}
