//! The planner (SPEC §5, §6, §10): from everything the hub shows about one MWRS and `now`,
//! the writes to make and the status to report. Pure: no client, no clock.
//!
//! A pass runs in fixed stages so that no decision depends on a write made in the same
//! pass: resolve the revision → read manual controls → classify every cluster → decide
//! whether to abort (before any update write, SPEC §10.4) → choose writes → report.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

use jiff::{SignedDuration, Timestamp};
use mwrs_api::labels;
use mwrs_api::mwrs::{
    HandledControls, ManifestWorkReplicaSet, ManifestWorkReplicaSetStatus, PlacementSummary,
    Summary, condition as mc,
};
use mwrs_api::{Condition, Time};
use serde_json::Value;

use crate::Invalid;
use crate::conditions::{self, Cond, Status};
use crate::hash::{self, Digest};
use crate::owner::OwnerKey;
use crate::placement::{PlacementState, PlacementView};
use crate::revision::{self, Resolution, RevisionView};
use crate::rollout::{
    self, ClusterRolloutStatus, Compat, DecisionGroups, GroupKey, RolloutResult, RolloutStatus,
    StrategyKind,
};
use crate::validate::{self, DEFAULT_MANIFEST_SIZE_LIMIT};
use crate::work::{self, WorkView};

/// How many clusters a status message names before "and N more".
const NAMED_IN_MESSAGES: usize = 5;

/// Event reasons of handled manual requests (SPEC §7).
pub const EVENT_ABORT_REQUESTED: &str = "AbortRequested";
pub const EVENT_RETRY_REQUESTED: &str = "RetryRequested";

/// Knobs of the planner that are not part of the MWRS.
#[derive(Clone, Debug)]
pub struct PlanConfig {
    pub manifest_size_limit: usize,
    pub compat: Compat,
}

impl Default for PlanConfig {
    fn default() -> Self {
        Self {
            manifest_size_limit: DEFAULT_MANIFEST_SIZE_LIMIT,
            compat: Compat::default(),
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
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinalizerAction {
    Keep,
    Add,
    Remove,
}

/// Write a revision's template into a cluster's ManifestWork.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkApply {
    pub cluster: String,
    pub name: String,
    /// No ManifestWork exists yet in that namespace.
    pub create: bool,
    /// Hash of the revision to write; its template is in [`Plan::templates`].
    pub revision: String,
    /// Labels and annotations this controller owns on the object (others are kept).
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// The version the decision was made on (updates only).
    pub resource_version: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum WorkChange {
    Apply(WorkApply),
    /// Set labels and annotations only (adoption, a move between placementRefs, MWRS
    /// labels changed); the spec is left alone.
    Relabel {
        cluster: String,
        name: String,
        labels: BTreeMap<String, String>,
        annotations: BTreeMap<String, String>,
    },
    Delete {
        cluster: String,
        name: String,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub enum RevisionChange {
    Create {
        name: String,
        hash: String,
        revision: i64,
        template: Value,
        labels: BTreeMap<String, String>,
        annotations: BTreeMap<String, String>,
    },
    Renumber {
        name: String,
        revision: i64,
    },
    Delete {
        name: String,
    },
}

/// One cluster's place in the rollout, for status, the CLI and metrics.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterReport {
    pub cluster: String,
    pub placement: String,
    pub group: Option<GroupKey>,
    /// Revision its ManifestWork carries (None: no ManifestWork).
    pub revision: Option<String>,
    /// Status against the target revision.
    pub status: RolloutStatus,
    pub since: Option<Timestamp>,
    /// A Succeeded cluster still soaking until then.
    pub soak_until: Option<Timestamp>,
}

/// A condition that changed in this pass (or a notable moment), for Events and metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transition {
    pub reason: String,
    pub message: String,
    /// Warning (true) or Normal.
    pub warning: bool,
}

/// What to do about one MWRS.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub finalizer: FinalizerAction,
    /// Work writes, in the order to make them (applies, relabels, then deletes).
    pub works: Vec<WorkChange>,
    pub revisions: Vec<RevisionChange>,
    /// Templates by revision hash, for every [`WorkApply::revision`] in `works`.
    pub templates: BTreeMap<String, Value>,
    /// The status to write; None means leave status alone (deletion).
    pub status: Option<ManifestWorkReplicaSetStatus>,
    pub events: Vec<Transition>,
    /// Look again after this long even if nothing changes.
    pub recheck: Option<SignedDuration>,
    pub invalid: Option<Invalid>,
    pub clusters: Vec<ClusterReport>,
}

impl Plan {
    fn empty(finalizer: FinalizerAction) -> Self {
        Self {
            finalizer,
            works: Vec::new(),
            revisions: Vec::new(),
            templates: BTreeMap::new(),
            status: None,
            events: Vec::new(),
            recheck: None,
            invalid: None,
            clusters: Vec::new(),
        }
    }
}

/// Plans one pass for one MWRS.
pub fn plan(o: &Observed<'_>, now: Timestamp, cfg: &PlanConfig) -> Plan {
    let meta = &o.mwrs.metadata;
    let owner = OwnerKey::new(
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    );
    let has_finalizer = meta
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|x| x == labels::MWRS_FINALIZER));
    if meta.deletion_timestamp.is_some() {
        return plan_deletion(o, has_finalizer);
    }
    let finalizer = if has_finalizer {
        FinalizerAction::Keep
    } else {
        FinalizerAction::Add
    };
    let old = o.mwrs.status.clone().unwrap_or_default();
    let validated = match validate::validate(&o.mwrs.spec, cfg.manifest_size_limit) {
        Ok(v) => v,
        Err(invalid) => return plan_invalid(o, &old, invalid, finalizer, now),
    };
    Pass::new(o, owner, old, validated, now, cfg).run(finalizer)
}

fn plan_deletion(o: &Observed<'_>, has_finalizer: bool) -> Plan {
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

fn plan_invalid(
    o: &Observed<'_>,
    old: &ManifestWorkReplicaSetStatus,
    invalid: Invalid,
    finalizer: FinalizerAction,
    now: Timestamp,
) -> Plan {
    let mut status = old.clone();
    let mut conds = status.conditions.clone().unwrap_or_default();
    let c = Cond::new(
        mc::PROGRESSING,
        Status::False,
        mc::REASON_INVALID_SPEC,
        invalid.to_string(),
    );
    conditions::set(&mut conds, &c, o.mwrs.metadata.generation, now);
    status.conditions = Some(conds);
    status.observed_generation = o.mwrs.metadata.generation;
    let mut p = Plan::empty(finalizer);
    p.events = transitions(old, &status);
    p.status = Some(status);
    p.invalid = Some(invalid);
    p
}

/// Why the rollout of the update revision must stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Breach {
    /// At least one cluster ran past its progress deadline.
    Deadline,
    /// Only Degraded (Failed) clusters.
    Failures,
    /// A user asked for it (the abort annotation).
    Requested,
}

/// How the abort machinery stands after this pass.
#[derive(Clone, Debug, PartialEq)]
enum AbortState {
    None,
    /// Persist `abortedTime` now; revert on the next pass (SPEC §10.4).
    Starting(Breach),
    /// Holding on `currentRevision`, reverting whatever lacks it.
    Held,
    /// An abort was called for and cannot happen; the reason.
    Failed(String),
}

/// One cluster the MWRS wants, with the placementRef that owns it.
struct Desired<'a> {
    placement: usize,
    group: &'a GroupKey,
}

struct Pass<'a> {
    o: &'a Observed<'a>,
    owner: OwnerKey,
    old: ManifestWorkReplicaSetStatus,
    validated: validate::Validated,
    now: Timestamp,
    cfg: &'a PlanConfig,
    /// placementRef index → its view (None: no view was given for that name).
    views: Vec<Option<&'a PlacementView>>,
    /// Every cluster the MWRS wants or has a ManifestWork in, with both facts side by
    /// side so a pass walks them once.
    clusters: Clusters<'a>,
    /// Digest by revision hash, for every stored revision and the update template.
    digests: BTreeMap<String, Digest>,
    /// The owner label and annotation, computed once (a hashed owner costs a SHA-256).
    owner_label: (&'static str, String),
    owner_slashed: String,
}

impl<'a> Pass<'a> {
    fn new(
        o: &'a Observed<'a>,
        owner: OwnerKey,
        old: ManifestWorkReplicaSetStatus,
        validated: validate::Validated,
        now: Timestamp,
        cfg: &'a PlanConfig,
    ) -> Self {
        let refs = &o.mwrs.spec.placement_refs;
        let views: Vec<Option<&PlacementView>> = refs
            .iter()
            .map(|r| o.placements.iter().find(|v| v.name == r.name))
            .collect();
        let clusters = Clusters::new(&views, o.works, &owner.work_name());
        let digests = o
            .revisions
            .iter()
            .map(|r| (r.hash.clone(), r.digest))
            .collect();
        Self {
            owner_label: owner.selector(),
            owner_slashed: owner.slashed(),
            o,
            owner,
            old,
            validated,
            now,
            cfg,
            views,
            clusters,
            digests,
        }
    }

    fn run(mut self, finalizer: FinalizerAction) -> Plan {
        let mut p = Plan::empty(finalizer);
        let spec = &self.o.mwrs.spec;
        let generation = self.o.mwrs.metadata.generation;
        let mut status = self.old.clone();
        status.observed_generation = generation;

        // 1. The revision of the current spec.
        let resolution = revision::resolve(
            self.o.revisions,
            &self.owner.name,
            &self.validated.canonical,
            self.old.collision_count.unwrap_or(0),
        );
        let update = resolution.hash().to_string();
        let update_digest = hash::digest_of_canonical(&self.validated.canonical);
        self.digests.insert(update.clone(), update_digest);
        let template = spec.manifest_work_template.to_value();
        let created = match &resolution {
            Resolution::Create {
                name,
                hash,
                revision,
                collision_count,
            } => {
                if *collision_count > 0 {
                    status.collision_count = Some(*collision_count);
                }
                p.revisions.push(RevisionChange::Create {
                    name: name.clone(),
                    hash: hash.clone(),
                    revision: *revision,
                    template: template.clone(),
                    labels: self.revision_labels(hash),
                    annotations: self.revision_annotations(),
                });
                true
            }
            Resolution::Existing {
                name, renumber_to, ..
            } => {
                if let Some(to) = renumber_to {
                    p.revisions.push(RevisionChange::Renumber {
                        name: name.clone(),
                        revision: *to,
                    });
                }
                // Created for this very generation by an earlier pass whose status write
                // was lost: still new content, not a revision found in history.
                self.o.revisions.iter().any(|r| {
                    &r.name == name && r.generation.is_some() && r.generation == generation
                })
            }
        };
        p.templates.insert(update.clone(), template);
        let revision_changed = self.old.update_revision.as_deref() != Some(update.as_str());
        status.update_revision = Some(update.clone());
        if revision_changed {
            status.aborted_time = None;
        }

        // 2. Manual controls, each acted on once (SPEC §7, §10.5).
        let mut handled = self.old.handled_controls.clone().unwrap_or_default();
        let abort_requested = self.take_request(labels::CONTROL_ABORT, &mut handled.abort);
        let retry_requested = self.take_request(labels::CONTROL_RETRY, &mut handled.retry);
        if retry_requested {
            // Each handled request gets its Event, also when there is nothing to act on,
            // so a user sees that the request was read (and only once).
            p.events.push(Transition {
                reason: EVENT_RETRY_REQUESTED.into(),
                message: if status.aborted_time.is_some() {
                    format!("retry requested: revision {update} rolls out again")
                } else {
                    format!("retry requested: no abort holds revision {update}; nothing to do")
                },
                warning: false,
            });
            status.aborted_time = None;
        }
        if abort_requested {
            p.events.push(Transition {
                reason: EVENT_ABORT_REQUESTED.into(),
                message: match &self.old.current_revision {
                    Some(c) if *c == update => format!(
                        "abort requested: revision {update} is the stable revision; nothing to abort"
                    ),
                    _ => format!("abort requested for revision {update}"),
                },
                warning: true,
            });
        }
        if handled != HandledControls::default() {
            status.handled_controls = Some(handled);
        }
        let paused = self
            .o
            .mwrs
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(labels::CONTROL_PAUSE))
            .is_some_and(|v| v == "true");

        // 3. Target revision and every cluster's status against it.
        let current = self.old.current_revision.clone();
        let mut abort = match (&status.aborted_time, &current) {
            (Some(_), Some(_)) => AbortState::Held,
            _ => AbortState::None,
        };
        let target = match abort {
            AbortState::Held => current.clone().unwrap_or_else(|| update.clone()),
            _ => update.clone(),
        };
        let current_template = current
            .as_ref()
            .and_then(|c| revision::find_by_hash(self.o.revisions, c));
        if abort == AbortState::Held {
            match current_template {
                Some(r) => {
                    p.templates.insert(r.hash.clone(), r.template.clone());
                }
                None => {
                    abort = AbortState::Failed(format!(
                        "stable revision {target} is no longer in history; cannot revert"
                    ));
                }
            }
        }
        let target_digest = self.digests.get(&target).copied();
        let (reports, existing) = self.classify(&target, target_digest);
        let results = self.evaluate(&existing);

        // 4. Abort decision, before any update write.
        if abort == AbortState::None {
            let breach = self.breach(&results, &reports);
            let trigger = match breach {
                Some((b, true)) => Some(b),
                _ if abort_requested => Some(Breach::Requested),
                _ => None,
            };
            if let Some(b) = trigger {
                abort = match (&current, current_template) {
                    (None, _) => AbortState::Failed(format!(
                        "revision {update} breached its failure limit and there is no stable \
                         revision to go back to (the first rollout never completed)"
                    )),
                    (Some(c), _) if *c == update => AbortState::None,
                    (Some(c), None) => AbortState::Failed(format!(
                        "stable revision {c} is no longer in history; cannot revert"
                    )),
                    (Some(_), Some(_)) => {
                        status.aborted_time = Some(Time(self.now));
                        AbortState::Starting(b)
                    }
                };
            }
        }

        // 5. Writes.
        match &abort {
            AbortState::Held => self.revert(&target, &mut p),
            AbortState::Starting(_) => p.recheck = Some(SignedDuration::ZERO),
            AbortState::None | AbortState::Failed(_) => {
                if !paused {
                    self.roll(&results, &update, &mut p);
                }
                p.recheck = min_recheck(&results);
            }
        }
        self.relabel_and_delete(&target, &mut p);

        // 6. Status.
        let outcome = Outcome::of(&self, &reports, &results, &target, &update, &abort);
        if outcome.complete {
            status.current_revision = Some(update.clone());
        }
        self.report(&mut status, &reports, &target, &update);
        let conds = self.conditions(&outcome, &abort, &update, paused, revision_changed, created);
        let mut list = status.conditions.clone().unwrap_or_default();
        for c in &conds {
            conditions::set(&mut list, c, generation, self.now);
        }
        status.conditions = Some(list);
        // After the events of handled requests, pushed above.
        p.events.extend(transitions(&self.old, &status));
        // A new revision is worth an event even when the rollout completes in the same
        // pass (an undo to what every cluster already runs) and Progressing never says so.
        let started = self.in_progress_reason(revision_changed, created);
        if revision_changed && !p.events.iter().any(|e| e.reason == started) {
            p.events.push(Transition {
                reason: started.into(),
                message: format!("revision {update} is the update revision"),
                warning: false,
            });
        }
        if abort == AbortState::Held && outcome.done == outcome.desired && outcome.desired > 0 {
            let was_done = self
                .old
                .conditions
                .as_deref()
                .and_then(|l| conditions::find(l, mc::MANIFESTWORK_APPLIED))
                .is_some_and(|c| c.status == "True");
            if !was_done {
                p.events.push(Transition {
                    reason: mc::EVENT_ABORT_COMPLETED.into(),
                    message: format!(
                        "all {} clusters are back on revision {target}",
                        outcome.desired
                    ),
                    warning: false,
                });
            }
        }
        if matches!(abort, AbortState::Starting(_)) {
            p.events.push(Transition {
                reason: mc::EVENT_ABORT_STARTED.into(),
                message: format!(
                    "reverting every cluster from revision {update} to {}",
                    current.as_deref().unwrap_or("")
                ),
                warning: true,
            });
        }

        // 7. History: prune against the live set after promotion.
        self.prune(&status, &resolution, &mut p);
        p.status = Some(status);
        p.clusters = reports;
        p
    }

    /// Has the annotation `key` a value not handled yet? Records it as handled.
    fn take_request(&self, key: &str, handled: &mut Option<String>) -> bool {
        let value = self
            .o
            .mwrs
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key));
        match value {
            Some(v) if handled.as_ref() != Some(v) => {
                *handled = Some(v.clone());
                true
            }
            _ => false,
        }
    }

    fn revision_labels(&self, hash: &str) -> BTreeMap<String, String> {
        let mut l = self.owner.labels();
        l.insert(labels::CONTROLLER_HASH.into(), hash.into());
        l
    }

    fn revision_annotations(&self) -> BTreeMap<String, String> {
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

    /// The revision a ManifestWork carries: its label, or — for a ManifestWork written
    /// before revisions existed — the stored revision whose content its spec equals.
    fn carried<'s>(&'s self, w: &'s WorkView) -> Option<&'s str> {
        if let Some(h) = w.hash() {
            return Some(h);
        }
        let d = w.spec_digest?;
        self.digests
            .iter()
            .find(|(_, v)| **v == d)
            .map(|(h, _)| h.as_str())
    }

    /// [`Self::carried`] for a slot's survivor, from the label read once per pass.
    fn carried_in<'s>(&'s self, slot: &'s Slot<'a>) -> Option<&'s str> {
        slot.label_hash
            .or_else(|| slot.work.and_then(|w| self.carried(w)))
    }

    /// Does the slot's survivor carry revision `target` with content `digest`? A spec
    /// that no longer matches (edited by hand) does not count.
    fn carries_in(&self, slot: &Slot<'a>, target: &str, digest: Option<Digest>) -> bool {
        let Some(w) = slot.work else { return false };
        self.carried_in(slot) == Some(target)
            && match (w.spec_digest, digest) {
                (Some(have), Some(want)) => have == want,
                _ => true,
            }
    }

    /// The engine's verdict per placementRef (None: placement not usable).
    fn evaluate(&self, existing: &[Vec<ClusterRolloutStatus>]) -> Vec<Option<RolloutResult>> {
        self.views
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let groups = v.and_then(|v| v.groups())?;
                let owned = self.owned_groups(i, groups);
                Some(rollout::evaluate(
                    &self.validated.strategies[i],
                    &owned,
                    &existing[i],
                    self.now,
                    self.cfg.compat,
                ))
            })
            .collect()
    }

    /// A placement's groups without the clusters an earlier placementRef owns.
    fn owned_groups<'g>(&self, i: usize, groups: &'g DecisionGroups) -> Cow<'g, DecisionGroups> {
        let all_owned = groups
            .iter()
            .all(|(_, c)| self.clusters.desired(c).is_some_and(|d| d.placement == i));
        if all_owned {
            return Cow::Borrowed(groups);
        }
        Cow::Owned(DecisionGroups::from_pairs(
            groups
                .iter()
                .filter(|(_, c)| self.clusters.desired(c).is_some_and(|d| d.placement == i))
                .map(|(g, c)| (g.clone(), c.to_string())),
        ))
    }

    /// Each desired cluster's status against the target, with deadlines and soak applied,
    /// and — in the same walk over the ManifestWorks — the engine's input per placementRef:
    /// only clusters whose ManifestWork carries the target revision (SPEC §10.1), with the
    /// status as the agent reports it (the engine applies deadlines itself).
    fn classify(
        &self,
        target: &str,
        digest: Option<Digest>,
    ) -> (Vec<ClusterReport>, Vec<Vec<ClusterRolloutStatus>>) {
        let mut out = Vec::with_capacity(self.clusters.desired_len);
        let mut existing: Vec<Vec<ClusterRolloutStatus>> = vec![Vec::new(); self.views.len()];
        for (cluster, slot) in self.clusters.slots.iter() {
            let Some(d) = &slot.desired else { continue };
            let strategy = &self.validated.strategies[d.placement];
            let work = slot.work;
            let revision = self.carried_in(slot).map(str::to_string);
            let (mut status, since) = match work {
                Some(w) if self.carries_in(slot, target, digest) => work::cluster_status(w),
                _ => (RolloutStatus::ToApply, None),
            };
            if status != RolloutStatus::ToApply {
                existing[d.placement].push(ClusterRolloutStatus {
                    cluster: cluster.to_string(),
                    group: d.group.clone(),
                    status,
                    last_transition_time: since,
                    recheck_time: None,
                });
            }
            let mut soak_until = None;
            match status {
                RolloutStatus::Succeeded => {
                    let end = rollout::soak_end(strategy.min_success_time, since, self.now);
                    if end.is_some_and(|e| self.now < e) {
                        soak_until = end;
                    }
                }
                RolloutStatus::Progressing | RolloutStatus::Failed
                    if strategy.deadline.passed(since, self.now) =>
                {
                    status = RolloutStatus::TimeOut;
                }
                _ => {}
            }
            out.push(ClusterReport {
                cluster: (*cluster).to_string(),
                placement: self.o.mwrs.spec.placement_refs[d.placement].name.clone(),
                group: Some(d.group.clone()),
                revision,
                status,
                since,
                soak_until,
            });
        }
        (out, existing)
    }

    /// The first breach among placementRefs: its kind and whether that placementRef
    /// asked for AbortAll.
    fn breach(
        &self,
        results: &[Option<RolloutResult>],
        reports: &[ClusterReport],
    ) -> Option<(Breach, bool)> {
        let mut found: Option<(Breach, bool)> = None;
        for (i, r) in results.iter().enumerate() {
            let Some(r) = r else { continue };
            let s = &self.validated.strategies[i];
            let name = &self.o.mwrs.spec.placement_refs[i].name;
            let mine = reports.iter().filter(|c| &c.placement == name);
            let (failed, timed_out) = mine.fold((0usize, 0usize), |(f, t), c| match c.status {
                RolloutStatus::Failed => (f + 1, t),
                RolloutStatus::TimeOut => (f, t + 1),
                _ => (f, t),
            });
            let breached = match s.kind {
                // The engine never breaches for All (upstream); its own maxFailures counts
                // here (SPEC §10.3).
                StrategyKind::All => {
                    let total = reports.iter().filter(|c| &c.placement == name).count();
                    failed + timed_out > s.max_failures.resolve(total, 0)
                }
                _ => r.max_failure_breach,
            };
            if breached {
                let kind = if timed_out > 0 {
                    Breach::Deadline
                } else {
                    Breach::Failures
                };
                if s.abort_all {
                    return Some((kind, true));
                }
                found.get_or_insert((kind, false));
            }
        }
        found
    }

    fn apply(&self, cluster: &str, d_placement: usize, revision: &str) -> Option<WorkApply> {
        let placement = &self.o.mwrs.spec.placement_refs.get(d_placement)?.name;
        let existing = self.clusters.work(cluster);
        // A ManifestWork on the way out keeps its name until the agent is done with it.
        if existing.is_none()
            && self
                .o
                .works
                .iter()
                .any(|w| w.deleting && w.cluster == cluster && w.name == self.owner.work_name())
        {
            return None;
        }
        let mut annotations = self.owner_annotations();
        annotations.insert(labels::REVISION_APPLIED_AT.into(), self.now.to_string());
        Some(WorkApply {
            cluster: cluster.to_string(),
            name: existing.map_or_else(|| self.owner.work_name(), |w| w.name.clone()),
            create: existing.is_none(),
            revision: revision.to_string(),
            labels: self.work_labels(placement, revision),
            annotations,
            resource_version: existing.and_then(|w| w.resource_version.clone()),
        })
    }

    fn work_labels(&self, placement: &str, revision: &str) -> BTreeMap<String, String> {
        let mut l = self.o.mwrs.metadata.labels.clone().unwrap_or_default();
        l.insert(self.owner_label.0.into(), self.owner_label.1.clone());
        l.insert(labels::PLACEMENT_NAME.into(), placement.into());
        l.insert(labels::CONTROLLER_HASH.into(), revision.into());
        l
    }

    fn owner_annotations(&self) -> BTreeMap<String, String> {
        BTreeMap::from([(
            labels::MWRS_OWNER_ANNOTATION.to_string(),
            self.owner.slashed(),
        )])
    }

    /// Does a ManifestWork lack any label or annotation it should carry? Checked in place:
    /// this runs for every cluster on every pass.
    fn needs_relabel(&self, w: &WorkView, placement: &str, revision: &str) -> bool {
        let has = |k: &str, v: &str| w.labels.get(k).is_some_and(|x| x == v);
        let (owner_key, owner_value) = &self.owner_label;
        !(has(labels::PLACEMENT_NAME, placement)
            && has(labels::CONTROLLER_HASH, revision)
            && has(owner_key, owner_value)
            && self
                .o
                .mwrs
                .metadata
                .labels
                .iter()
                .flatten()
                .all(|(k, v)| has(k, v))
            && w.annotations.get(labels::MWRS_OWNER_ANNOTATION) == Some(&self.owner_slashed))
    }

    /// Rolling forward: write the update revision to every ToApply cluster the engine
    /// releases.
    fn roll(&self, results: &[Option<RolloutResult>], update: &str, p: &mut Plan) {
        for r in results.iter().flatten() {
            for c in r
                .to_rollout
                .iter()
                .filter(|c| c.status == RolloutStatus::ToApply)
            {
                let Some(d) = self.clusters.desired(c.cluster.as_str()) else {
                    continue;
                };
                if let Some(a) = self.apply(&c.cluster, d.placement, update) {
                    p.works.push(WorkChange::Apply(a));
                }
            }
        }
    }

    /// Holding an abort: every owned ManifestWork and every desired cluster gets the
    /// stable revision, all at once, whatever the strategy.
    fn revert(&self, target: &str, p: &mut Plan) {
        let digest = self.digests.get(target).copied();
        for (cluster, slot) in self.clusters.slots.iter() {
            let work = slot.work;
            if self.carries_in(slot, target, digest) {
                continue;
            }
            let placement = self.placement_index_of(cluster, work);
            if let Some(a) = placement.and_then(|i| self.apply(cluster, i, target)) {
                p.works.push(WorkChange::Apply(a));
            }
        }
    }

    /// The placementRef a cluster belongs to: the one selecting it, else the one its
    /// ManifestWork names.
    fn placement_index_of(&self, cluster: &str, work: Option<&WorkView>) -> Option<usize> {
        if let Some(d) = self.clusters.desired(cluster) {
            return Some(d.placement);
        }
        let name = work?.placement()?;
        self.o
            .mwrs
            .spec
            .placement_refs
            .iter()
            .position(|r| r.name == name)
    }

    /// Is the placementRef named `name` one whose decisions are known?
    fn placement_known(&self, name: Option<&str>) -> bool {
        let Some(i) = name.and_then(|n| {
            self.o
                .mwrs
                .spec
                .placement_refs
                .iter()
                .position(|r| r.name == n)
        }) else {
            // Not referenced by the spec any more: its ManifestWorks go.
            return true;
        };
        matches!(
            self.views[i].map(|v| &v.state),
            Some(PlacementState::Found(_))
        )
    }

    fn relabel_and_delete(&self, target: &str, p: &mut Plan) {
        let applied: BTreeSet<&str> = p
            .works
            .iter()
            .filter_map(|c| match c {
                WorkChange::Apply(a) => Some(a.cluster.as_str()),
                _ => None,
            })
            .collect();
        let mut relabels = Vec::new();
        let mut deletes = Vec::new();
        let digest = self.digests.get(target).copied();
        for (cluster, slot) in self.clusters.slots.iter() {
            let (Some(w), dups) = (slot.work, &slot.dups) else {
                continue;
            };
            match &slot.desired {
                None => {
                    // Unselected: delete, unless its placement's decisions are unknown
                    // right now (SPEC §10.12).
                    if self.placement_known(w.placement()) {
                        deletes.extend(std::iter::once(w).chain(dups.iter().copied()));
                    }
                    continue;
                }
                Some(d) => {
                    if !applied.contains(cluster) {
                        let placement = &self.o.mwrs.spec.placement_refs[d.placement].name;
                        if let Some(rev) = self.carried_in(slot)
                            && self.needs_relabel(w, placement, rev)
                        {
                            relabels.push(WorkChange::Relabel {
                                cluster: (*cluster).to_string(),
                                name: w.name.clone(),
                                labels: self.work_labels(placement, rev),
                                annotations: self.owner_annotations(),
                            });
                        }
                    }
                }
            }
            // Duplicates left by upstream's controller go once the survivor is settled.
            if !dups.is_empty()
                && !applied.contains(cluster)
                && self.carries_in(slot, target, digest)
            {
                deletes.extend(dups.iter().copied());
            }
        }
        p.works.extend(relabels);
        p.works
            .extend(deletes.into_iter().map(|w| WorkChange::Delete {
                cluster: w.cluster.clone(),
                name: w.name.clone(),
            }));
    }

    fn report(
        &self,
        status: &mut ManifestWorkReplicaSetStatus,
        reports: &[ClusterReport],
        target: &str,
        update: &str,
    ) {
        let digest = self.digests.get(target).copied();
        let refs = &self.o.mwrs.spec.placement_refs;
        let mut per: Vec<Summary> = vec![Summary::default(); refs.len()];
        let mut applied_on_target = vec![0i64; refs.len()];
        for c in reports {
            let Some(i) = refs.iter().position(|r| r.name == c.placement) else {
                continue;
            };
            per[i].desired_total += 1;
            if c.revision.as_deref() == Some(update) && c.status == RolloutStatus::Succeeded {
                per[i].updated += 1;
            }
        }
        for (cluster, slot) in self.clusters.slots.iter() {
            let Some(w) = slot.work else { continue };
            let Some(i) = self.placement_index_of(cluster, Some(w)) else {
                continue;
            };
            let s = &mut per[i];
            s.total += 1;
            if self.carries_in(slot, target, digest) {
                applied_on_target[i] += 1;
                s.applied += i64::from(w.is_true(mwrs_api::work::condition::APPLIED));
                s.available += i64::from(w.is_true(mwrs_api::work::condition::AVAILABLE));
                s.progressing += i64::from(w.is_true(mwrs_api::work::condition::PROGRESSING));
                s.degraded += i64::from(w.is_true(mwrs_api::work::condition::DEGRADED));
            }
        }
        let mut total = Summary::default();
        status.placement_summary = refs
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let s = per[i];
                total = add(total, s);
                let groups = self.views[i]
                    .and_then(|v| v.groups())
                    .map_or(0, DecisionGroups::group_count);
                PlacementSummary {
                    name: r.name.clone(),
                    available_decision_groups: format!(
                        "{groups} ({} / {} clusters applied)",
                        applied_on_target[i], s.desired_total
                    ),
                    summary: s,
                }
            })
            .collect();
        status.summary = total;
    }

    fn conditions(
        &self,
        out: &Outcome,
        abort: &AbortState,
        update: &str,
        paused: bool,
        revision_changed: bool,
        created: bool,
    ) -> Vec<Cond> {
        vec![
            self.placement_verified(),
            out.manifestwork_applied(&self.placement_verified()),
            out.rolled_out(abort),
            out.progressing(
                abort,
                update,
                paused,
                self.in_progress_reason(revision_changed, created),
            ),
        ]
    }

    fn in_progress_reason(&self, revision_changed: bool, created: bool) -> &'static str {
        if revision_changed {
            return if created {
                mc::REASON_NEW_REVISION_CREATED
            } else {
                mc::REASON_FOUND_NEW_REVISION
            };
        }
        match self
            .old
            .conditions
            .as_deref()
            .and_then(|l| conditions::find(l, mc::PROGRESSING))
        {
            Some(c) if c.status == "True" && c.reason == mc::REASON_NEW_REVISION_CREATED => {
                mc::REASON_NEW_REVISION_CREATED
            }
            _ => mc::REASON_FOUND_NEW_REVISION,
        }
    }

    fn placement_verified(&self) -> Cond {
        let refs = &self.o.mwrs.spec.placement_refs;
        for (i, v) in self.views.iter().enumerate() {
            let name = &refs[i].name;
            match v.map(|v| &v.state) {
                None | Some(PlacementState::Missing) => {
                    return Cond::new(
                        mc::PLACEMENT_VERIFIED,
                        Status::False,
                        mc::REASON_PLACEMENT_DECISION_NOT_FOUND,
                        format!("Placement {name} not found"),
                    );
                }
                Some(PlacementState::NoDecisions) => {
                    return Cond::new(
                        mc::PLACEMENT_VERIFIED,
                        Status::False,
                        mc::REASON_PLACEMENT_DECISION_NOT_FOUND,
                        format!("Placement {name} has no PlacementDecisions"),
                    );
                }
                Some(PlacementState::Invalid(why)) => {
                    return Cond::new(
                        mc::PLACEMENT_VERIFIED,
                        Status::False,
                        mc::REASON_NOT_AS_EXPECTED,
                        why.clone(),
                    );
                }
                Some(PlacementState::Found(_)) => {}
            }
        }
        if self.clusters.desired_len == 0 {
            return Cond::new(
                mc::PLACEMENT_VERIFIED,
                Status::False,
                mc::REASON_PLACEMENT_DECISION_EMPTY,
                "no cluster is selected by any placement",
            );
        }
        Cond::new(
            mc::PLACEMENT_VERIFIED,
            Status::True,
            mc::REASON_AS_EXPECTED,
            format!("{} clusters selected", self.clusters.desired_len),
        )
    }

    fn prune(&self, status: &ManifestWorkReplicaSetStatus, res: &Resolution, p: &mut Plan) {
        let mut live: BTreeSet<&str> = BTreeSet::new();
        live.extend(status.current_revision.as_deref());
        live.extend(status.update_revision.as_deref());
        // Labelled works name their revision; only unlabelled ones need a content lookup.
        let unlabelled: Vec<String> = self
            .o
            .works
            .iter()
            .filter(|w| w.hash().is_none())
            .filter_map(|w| self.carried(w).map(str::to_string))
            .collect();
        live.extend(self.o.works.iter().filter_map(WorkView::hash));
        live.extend(unlabelled.iter().map(String::as_str));
        live.insert(res.hash());
        let limit = self.o.mwrs.spec.revision_history_limit();
        p.revisions.extend(
            revision::prune(self.o.revisions, &live, limit)
                .into_iter()
                .map(|name| RevisionChange::Delete { name }),
        );
    }
}

fn add(a: Summary, b: Summary) -> Summary {
    Summary {
        total: a.total + b.total,
        progressing: a.progressing + b.progressing,
        available: a.available + b.available,
        degraded: a.degraded + b.degraded,
        applied: a.applied + b.applied,
        desired_total: a.desired_total + b.desired_total,
        updated: a.updated + b.updated,
    }
}

fn min_recheck(results: &[Option<RolloutResult>]) -> Option<SignedDuration> {
    results
        .iter()
        .flatten()
        .filter_map(|r| r.recheck_after)
        .filter(|d| d.is_positive())
        .min()
}

/// Where the rollout stands, in the terms conditions are written in.
struct Outcome {
    desired: usize,
    /// Clusters with an owned ManifestWork.
    with_work: usize,
    failed: Vec<String>,
    timed_out: Vec<String>,
    in_flight: usize,
    /// Clusters done on the target revision (Succeeded, soak over).
    done: usize,
    /// Breach of the failure limit on any placementRef.
    breach: Option<Breach>,
    /// Every desired cluster Succeeded on the update revision, soak over (SPEC §10.7).
    complete: bool,
    target: String,
    current: Option<String>,
    /// placementRefs whose decisions are unknown: their clusters cannot be counted, so
    /// the revision is never promoted meanwhile.
    unknown: Vec<String>,
}

impl Outcome {
    fn of(
        pass: &Pass<'_>,
        reports: &[ClusterReport],
        results: &[Option<RolloutResult>],
        target: &str,
        update: &str,
        abort: &AbortState,
    ) -> Self {
        let mut failed = Vec::new();
        let mut timed_out = Vec::new();
        let mut in_flight = 0;
        let mut done = 0;
        for c in reports {
            match c.status {
                RolloutStatus::Failed => failed.push(c.cluster.clone()),
                RolloutStatus::TimeOut => timed_out.push(c.cluster.clone()),
                RolloutStatus::Succeeded if c.soak_until.is_none() => done += 1,
                _ => in_flight += 1,
            }
        }
        let unknown: Vec<String> = pass
            .views
            .iter()
            .zip(&pass.o.mwrs.spec.placement_refs)
            .filter(|(v, _)| !matches!(v.map(|v| &v.state), Some(PlacementState::Found(_))))
            .map(|(_, r)| r.name.clone())
            .collect();
        let all_known = unknown.is_empty();
        let complete = *abort == AbortState::None
            && target == update
            && all_known
            && !reports.is_empty()
            && done == reports.len();
        let breach = match abort {
            AbortState::Starting(b) => Some(*b),
            _ => pass.breach(results, reports).map(|(b, _)| b),
        };
        Self {
            desired: reports.len(),
            with_work: pass.clusters.works_len,
            failed,
            timed_out,
            in_flight,
            done,
            breach,
            complete,
            target: target.to_string(),
            current: pass.old.current_revision.clone(),
            unknown,
        }
    }

    fn failures(&self) -> usize {
        self.failed.len() + self.timed_out.len()
    }

    /// Ended with failures that maxFailures tolerated: nothing left to do, not promoted.
    fn settled_with_failures(&self) -> bool {
        !self.complete && self.in_flight == 0 && self.failures() > 0
    }

    fn failure_reason(&self) -> &'static str {
        if self.timed_out.is_empty() {
            mc::REASON_MAX_FAILURES_EXCEEDED
        } else {
            mc::REASON_PROGRESS_DEADLINE_EXCEEDED
        }
    }

    fn failure_message(&self) -> String {
        let mut parts = Vec::new();
        if !self.timed_out.is_empty() {
            parts.push(format!(
                "{} past the progress deadline ({})",
                self.timed_out.len(),
                name_few(&self.timed_out)
            ));
        }
        if !self.failed.is_empty() {
            parts.push(format!(
                "{} degraded ({})",
                self.failed.len(),
                name_few(&self.failed)
            ));
        }
        format!(
            "revision {}: {} of {} clusters failed: {}",
            self.target,
            self.failures(),
            self.desired,
            parts.join("; ")
        )
    }

    fn manifestwork_applied(&self, verified: &Cond) -> Cond {
        let t = mc::MANIFESTWORK_APPLIED;
        if self.desired == 0 && self.with_work == 0 {
            let reason = if verified.reason == mc::REASON_PLACEMENT_DECISION_EMPTY {
                mc::REASON_PLACEMENT_DECISION_EMPTY
            } else {
                mc::REASON_NOT_AS_EXPECTED
            };
            return Cond::new(t, Status::False, reason, "no cluster is selected");
        }
        if self.failures() > 0 {
            return Cond::new(
                t,
                Status::False,
                mc::REASON_NOT_AS_EXPECTED,
                self.failure_message(),
            );
        }
        if self.in_flight > 0 {
            return Cond::new(
                t,
                Status::False,
                mc::REASON_PROCESSING,
                format!(
                    "revision {}: {} of {} clusters done, {} in progress",
                    self.target, self.done, self.desired, self.in_flight
                ),
            );
        }
        Cond::new(
            t,
            Status::True,
            mc::REASON_AS_EXPECTED,
            format!(
                "revision {} applied on all {} clusters",
                self.target, self.desired
            ),
        )
    }

    fn degraded(&self, abort: &AbortState) -> bool {
        !matches!(abort, AbortState::None) || self.breach.is_some() || self.settled_with_failures()
    }

    fn rolled_out(&self, abort: &AbortState) -> Cond {
        let t = mc::PLACEMENT_ROLLED_OUT;
        if self.complete {
            return Cond::new(
                t,
                Status::True,
                mc::REASON_COMPLETE,
                format!("all {} clusters run revision {}", self.desired, self.target),
            );
        }
        if self.degraded(abort) {
            // An abort with no failed cluster (requested, or every cluster back on the
            // stable revision) has no failures to list.
            let message = if self.failures() == 0 {
                format!(
                    "rollout aborted: {} of {} clusters done on revision {}",
                    self.done, self.desired, self.target
                )
            } else {
                self.failure_message()
            };
            return Cond::new(t, Status::False, mc::REASON_ROLLOUT_DEGRADED, message);
        }
        Cond::new(
            t,
            Status::False,
            mc::REASON_PROGRESSING,
            format!(
                "revision {}: {} of {} clusters done",
                self.target, self.done, self.desired
            ),
        )
    }

    fn progressing(
        &self,
        abort: &AbortState,
        update: &str,
        paused: bool,
        in_progress: &'static str,
    ) -> Cond {
        let t = mc::PROGRESSING;
        let current = self.current.as_deref().unwrap_or("");
        match abort {
            AbortState::Failed(why) => {
                return Cond::new(t, Status::False, mc::REASON_ABORT_FAILED, why.clone());
            }
            AbortState::Held => {
                let message = if self.done == self.desired {
                    format!(
                        "rolled back to revision {current} on all {} clusters; revision {update} \
                         is held until a retry, an undo or a new template",
                        self.desired
                    )
                } else {
                    format!(
                        "rolling back to revision {current}: {} of {} clusters done; revision \
                         {update} is held",
                        self.done, self.desired
                    )
                };
                return Cond::new(t, Status::False, mc::REASON_ROLLOUT_ABORTED, message);
            }
            AbortState::Starting(Breach::Requested) => {
                return Cond::new(
                    t,
                    Status::False,
                    mc::REASON_ROLLOUT_ABORTED,
                    format!("abort requested: reverting revision {update} to {current}"),
                );
            }
            AbortState::Starting(_) => {
                return Cond::new(
                    t,
                    Status::False,
                    self.failure_reason(),
                    format!("{}; aborting to revision {current}", self.failure_message()),
                );
            }
            AbortState::None => {}
        }
        if self.breach.is_some() || self.settled_with_failures() {
            return Cond::new(
                t,
                Status::False,
                self.failure_reason(),
                self.failure_message(),
            );
        }
        if self.complete {
            return Cond::new(
                t,
                Status::False,
                mc::REASON_NEW_MANIFESTWORK_AVAILABLE,
                format!(
                    "revision {update} is available on all {} clusters",
                    self.desired
                ),
            );
        }
        if paused {
            return Cond::new(
                t,
                Status::Unknown,
                mc::REASON_ROLLOUT_PAUSED,
                format!(
                    "paused: revision {update} on {} of {} clusters",
                    self.done, self.desired
                ),
            );
        }
        Cond::new(
            t,
            Status::True,
            in_progress,
            if self.unknown.is_empty() {
                format!(
                    "rolling out revision {update}: {} of {} clusters done",
                    self.done, self.desired
                )
            } else {
                format!(
                    "rolling out revision {update}: {} of {} known clusters done; not promoted \
                     while the decisions of placement {} are unknown",
                    self.done,
                    self.desired,
                    self.unknown.join(", ")
                )
            },
        )
    }
}

fn name_few(clusters: &[String]) -> String {
    let shown: Vec<&str> = clusters
        .iter()
        .take(NAMED_IN_MESSAGES)
        .map(String::as_str)
        .collect();
    let more = clusters.len().saturating_sub(NAMED_IN_MESSAGES);
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

/// Conditions whose status or reason changed between two statuses.
fn transitions(
    old: &ManifestWorkReplicaSetStatus,
    new: &ManifestWorkReplicaSetStatus,
) -> Vec<Transition> {
    let old_list: &[Condition] = old.conditions.as_deref().unwrap_or(&[]);
    new.conditions
        .iter()
        .flatten()
        .filter(|c| {
            conditions::find(old_list, &c.type_)
                .is_none_or(|o| o.status != c.status || o.reason != c.reason)
        })
        .map(|c| Transition {
            reason: c.reason.clone(),
            message: format!("{} {}: {}", c.type_, c.status, c.message),
            warning: matches!(
                c.reason.as_str(),
                mc::REASON_PROGRESS_DEADLINE_EXCEEDED
                    | mc::REASON_MAX_FAILURES_EXCEEDED
                    | mc::REASON_ROLLOUT_ABORTED
                    | mc::REASON_ABORT_FAILED
                    | mc::REASON_ROLLOUT_DEGRADED
                    | mc::REASON_INVALID_SPEC
                    | mc::REASON_PLACEMENT_DECISION_NOT_FOUND
            ),
        })
        .collect()
}

/// What one pass knows per cluster: the placementRef that wants it (if any) and the
/// ManifestWork that represents it (if any).
struct Slot<'a> {
    desired: Option<Desired<'a>>,
    /// The survivor: the deterministic name, else the oldest.
    work: Option<&'a WorkView>,
    /// The survivor's `controller-hash` label, read once.
    label_hash: Option<&'a str>,
    /// Other owned ManifestWorks in the same namespace.
    dups: Vec<&'a WorkView>,
}

struct Clusters<'a> {
    slots: ClusterIndex<'a, Slot<'a>>,
    desired_len: usize,
    works_len: usize,
}

impl<'a> Clusters<'a> {
    fn new(
        views: &[Option<&'a PlacementView>],
        works: &'a [WorkView],
        owner_work_name: &str,
    ) -> Self {
        let mut slots: HashMap<&'a str, Slot<'a>> = HashMap::new();
        let empty = || Slot {
            desired: None,
            work: None,
            label_hash: None,
            dups: Vec::new(),
        };
        let mut desired_len = 0;
        for (i, view) in views.iter().enumerate() {
            for (group, cluster) in view
                .and_then(|v| v.groups())
                .into_iter()
                .flat_map(DecisionGroups::iter)
            {
                let slot = slots.entry(cluster).or_insert_with(empty);
                if slot.desired.is_none() {
                    slot.desired = Some(Desired {
                        placement: i,
                        group,
                    });
                    desired_len += 1;
                }
            }
        }
        for w in works.iter().filter(|w| !w.deleting) {
            slots
                .entry(w.cluster.as_str())
                .or_insert_with(empty)
                .dups
                .push(w);
        }
        let mut works_len = 0;
        for slot in slots.values_mut().filter(|s| !s.dups.is_empty()) {
            // Survivor: the deterministic name, else the oldest (upstream's generateName
            // works), so restarts always pick the same one.
            slot.dups.sort_by(|a, b| {
                (a.name != owner_work_name, a.created, &a.name).cmp(&(
                    b.name != owner_work_name,
                    b.created,
                    &b.name,
                ))
            });
            let survivor = slot.dups.remove(0);
            slot.label_hash = survivor.hash();
            slot.work = Some(survivor);
            works_len += 1;
        }
        Self {
            slots: slots.into(),
            desired_len,
            works_len,
        }
    }

    fn desired(&self, cluster: &str) -> Option<&Desired<'a>> {
        self.slots.get(cluster).and_then(|s| s.desired.as_ref())
    }

    fn work(&self, cluster: &str) -> Option<&'a WorkView> {
        self.slots.get(cluster).and_then(|s| s.work)
    }
}

/// Per-cluster state of one pass: entries sorted by cluster name (plans and reports come
/// out deterministic, and walks are sequential in memory) with a hashed position index for
/// the several lookups a pass makes per cluster (ordered-tree lookups made large fleets
/// superlinear).
struct ClusterIndex<'a, V> {
    entries: Vec<(&'a str, V)>,
    position: HashMap<&'a str, usize, BuildHasherDefault<Fnv64>>,
}

impl<'a, V> From<HashMap<&'a str, V>> for ClusterIndex<'a, V> {
    fn from(map: HashMap<&'a str, V>) -> Self {
        let mut entries: Vec<(&'a str, V)> = map.into_iter().collect();
        entries.sort_unstable_by_key(|(k, _)| *k);
        let position = entries
            .iter()
            .enumerate()
            .map(|(i, (k, _))| (*k, i))
            .collect();
        Self { entries, position }
    }
}

impl<'a, V> ClusterIndex<'a, V> {
    fn get(&self, cluster: &str) -> Option<&V> {
        self.position.get(cluster).map(|i| &self.entries[*i].1)
    }

    fn iter(&self) -> impl Iterator<Item = (&'a str, &V)> + '_ {
        self.entries.iter().map(|(k, v)| (*k, v))
    }
}

/// 64-bit FNV-1a: cluster names are short and not attacker-chosen within one pass, and
/// SipHash was a visible share of a pass at 100,000 clusters.
#[derive(Default)]
struct Fnv64(u64);

impl Hasher for Fnv64 {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for b in bytes {
            h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}
