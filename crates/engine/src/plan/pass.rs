//! What one planner pass reads, held once for every stage: the hub's view of one MWRS
//! ([`Observed`]), the planner's knobs ([`PlanConfig`]), and the [`Pass`] built from them
//! (the validated spec, the cluster table, the revision ids). Each stage is an `impl Pass`
//! in a file of its own; the driver in `mod.rs` sequences them.

use std::cell::{OnceCell, RefCell};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use mwrs_api::mwrs::{ManifestWorkReplicaSet, ManifestWorkReplicaSetStatus};

use crate::hash;
use crate::owner::OwnerKey;
use crate::placement::{PlacementState, PlacementView};
use crate::plugin::{JudgedBits, PluginInputs};
use crate::revision::{self, Resolution, RevisionView};
use crate::rollout::Compat;
use crate::validate::{self, DEFAULT_MANIFEST_SIZE_LIMIT};
use crate::work::WorkView;

use super::cluster_table::{ClusterRow, Clusters, Expected};
use super::output::BlockedWrite;
use super::revision_ids::{Carried, RevisionIds};

/// Knobs of the planner that are not part of the MWRS.
#[derive(Clone, Debug)]
pub struct PlanConfig {
    pub manifest_size_limit: usize,
    pub compat: Compat,
    /// How long a ManifestWork's success, and a placement's decisions, must stay unchanged
    /// before the planner trusts them (rules §11.3, §11.5).
    pub settle: SignedDuration,
    /// MWRS label keys never copied onto its ManifestWorks (and taken off them when a
    /// write finds them there): by default GitOps tools' tracking labels
    /// ([`mwrs_api::labels::GITOPS_TRACKING_LABELS`]).
    pub labels_not_copied: Vec<String>,
}

/// Default of [`PlanConfig::settle`].
pub const DEFAULT_SETTLE: SignedDuration = SignedDuration::from_secs(2);

impl Default for PlanConfig {
    fn default() -> Self {
        Self {
            manifest_size_limit: DEFAULT_MANIFEST_SIZE_LIMIT,
            compat: Compat::default(),
            settle: DEFAULT_SETTLE,
            labels_not_copied: mwrs_api::labels::GITOPS_TRACKING_LABELS
                .iter()
                .map(|k| k.to_string())
                .collect(),
        }
    }
}

/// Everything the hub shows about one MWRS at one moment.
#[derive(Clone, Copy, Debug)]
pub struct Observed<'a> {
    pub mwrs: &'a ManifestWorkReplicaSet,
    /// One view per placementRef name (any order; matched by name).
    pub placements: &'a [PlacementView],
    /// ManifestWorks owned by this MWRS, in every cluster namespace.
    pub works: &'a [WorkView],
    /// ControllerRevisions owned by this MWRS.
    pub revisions: &'a [RevisionView],
    /// Clusters this controller must not write to for now, and why: their namespace holds
    /// an object on this MWRS's ManifestWork name that it does not own (rules §10.13), or
    /// the hub refused the last write there. Counted as failed while they lack the target.
    pub blocked: &'a [BlockedWrite],
    /// ControllerRevision names in this MWRS's namespace that another object holds (a
    /// create met them): a new revision is never named so (rules §10, collisions).
    pub taken_revision_names: &'a [String],
    /// Rollout plugins' health and verdicts ([`crate::plugin::NO_PLUGINS`]: none).
    pub plugins: &'a PluginInputs,
    /// Whether the stores these views come from can be trusted to be current.
    pub sight: Sight,
}

/// How well the controller sees the hub (rules §12.6, security review W1): a watch that
/// keeps failing leaves its store stale, and a deadline must not run on what the
/// controller cannot see (an agent's report that never reached it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Sight {
    /// Every watch works, and none has kept failing since the process started.
    #[default]
    Clear,
    /// Every watch works again since this time, after one kept failing: an in-flight
    /// cluster's deadline counts from then at the earliest.
    ClearSince(Timestamp),
    /// A watch has kept failing past its bound: no deadline runs, as behind a plugin
    /// that holds.
    Blind,
}

impl Sight {
    /// A cluster's (`since`, `held`) as this sight lets its deadline run.
    pub(super) fn bound(self, since: Option<Timestamp>, held: bool) -> (Option<Timestamp>, bool) {
        match self {
            Sight::Clear => (since, held),
            Sight::ClearSince(at) => (since.map(|s| s.max(at)), held),
            Sight::Blind => (since, true),
        }
    }
}

pub(super) struct Pass<'a> {
    pub(super) observed: &'a Observed<'a>,
    pub(super) owner: OwnerKey,
    pub(super) old: ManifestWorkReplicaSetStatus,
    pub(super) validated: validate::Validated,
    pub(super) now: Timestamp,
    pub(super) cfg: &'a PlanConfig,
    /// placementRef index → its view (None: no view was given for that name).
    pub(super) views: Vec<Option<&'a PlacementView>>,
    /// Every cluster the MWRS wants or has a ManifestWork in, with both facts side by
    /// side so a pass walks them once.
    pub(super) clusters: Clusters<'a>,
    /// The revision of the current spec.
    pub(super) resolution: Resolution,
    /// Every revision a ManifestWork is compared against.
    pub(super) ids: RevisionIds,
    /// The owner label, computed once (a hashed owner costs a SHA-256).
    pub(super) owner_label: (&'static str, String),
    /// The label and annotation maps of the writes planned so far: a fan-out holds one of
    /// each per revision and placement, not one per cluster.
    maps: RefCell<HashSet<Arc<BTreeMap<String, String>>>>,
    /// The status record of the clusters judged SUCCEEDED, once decoded and checked.
    pub(super) prior_judged: OnceCell<Option<JudgedBits>>,
}

impl<'a> Pass<'a> {
    pub(super) fn new(
        observed: &'a Observed<'a>,
        owner: OwnerKey,
        old: ManifestWorkReplicaSetStatus,
        validated: validate::Validated,
        now: Timestamp,
        cfg: &'a PlanConfig,
    ) -> Self {
        let refs = &observed.mwrs.spec.placement_refs;
        let views: Vec<Option<&PlacementView>> = refs
            .iter()
            .map(|r| observed.placements.iter().find(|v| v.name == r.name))
            .collect();
        let resolution = revision::resolve(
            observed.revisions,
            observed.taken_revision_names,
            &owner.name,
            &validated.canonical,
            old.collision_count.unwrap_or(0),
        );
        let ids = RevisionIds::new(
            observed.revisions,
            (
                resolution.hash(),
                hash::digest_of_canonical(&validated.canonical),
            ),
            old.current_revision.as_deref(),
        );
        let owner_label = owner.selector();
        let owner_slashed = owner.slashed();
        let expect = Expected {
            owner_work_name: owner.work_name(),
            owner_label: &owner_label,
            collector_mark: owner.collector_mark(),
            owner_slashed: &owner_slashed,
            mwrs_labels: observed.mwrs.metadata.labels.as_ref(),
            not_copied: &cfg.labels_not_copied,
            placements: refs.iter().map(|r| r.name.as_str()).collect(),
            plugin_named: validated
                .strategies
                .iter()
                .map(|s| s.plugin.is_some())
                .collect(),
            ids: &ids,
            marks: &observed.plugins.marks,
            mwrs_uid: observed.mwrs.metadata.uid.as_deref().unwrap_or_default(),
        };
        let clusters = Clusters::new(&views, observed.works, &expect);
        Self {
            owner_label,
            maps: RefCell::default(),
            prior_judged: OnceCell::new(),
            resolution,
            ids,
            observed,
            owner,
            old,
            validated,
            now,
            cfg,
            views,
            clusters,
        }
    }

    /// `map`, shared with every write of this pass that carries an equal one.
    pub(super) fn shared(&self, map: BTreeMap<String, String>) -> Arc<BTreeMap<String, String>> {
        let mut maps = self.maps.borrow_mut();
        if let Some(shared) = maps.get(&map) {
            return shared.clone();
        }
        let shared = Arc::new(map);
        maps.insert(shared.clone());
        shared
    }

    /// The revision a ManifestWork carries: its label, or — for a ManifestWork written
    /// before revisions existed — the stored revision whose content its spec equals.
    pub(super) fn carried(&self, w: &'a WorkView) -> Option<Carried<'a>> {
        self.ids.carried(w)
    }

    pub(super) fn rev_name<'s>(&'s self, r: Carried<'s>) -> &'s str {
        match r {
            Carried::Known(i) => self.ids.name(i),
            Carried::Unstored(h) => h,
        }
    }

    /// Does the row's survivor carry revision `target` with its content? See
    /// [`ClusterRow::carries`].
    pub(super) fn carries_in(&self, row: &ClusterRow<'a>, target: Option<usize>) -> bool {
        row.carries(&self.ids, target)
    }

    /// The placementRefs whose decisions are unknown: their clusters cannot be counted, so
    /// the revision is never promoted meanwhile.
    pub(super) fn unknown_placements(&self) -> Vec<String> {
        self.views
            .iter()
            .zip(&self.observed.mwrs.spec.placement_refs)
            .filter(|(v, _)| !matches!(v.map(|v| &v.state), Some(PlacementState::Found(_))))
            .map(|(_, r)| r.name.clone())
            .collect()
    }
}
