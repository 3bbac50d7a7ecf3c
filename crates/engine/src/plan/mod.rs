//! The planner (SPEC §5, §6, §10): from everything the hub shows about one MWRS and `now`,
//! the writes to make and the status to report. Pure: no client, no clock.
//!
//! A pass runs in fixed stages so that no decision depends on a write made in the same
//! pass, one file each:
//!
//! 1. `history`: resolve the revision of the spec (store or renumber it);
//! 2. `controls`: read the manual abort and retry requests, each once;
//! 3. `classify`: every desired cluster's status against the target revision, and the
//!    rollout engine's verdict per placementRef;
//! 4. `abort`: whether to abort, before any update write (SPEC §10.4);
//! 5. `writes`: the ManifestWork writes;
//! 6. `status` (with `outcome` for the conditions' text): the status to report;
//! 7. `history`: prune the revisions.
//!
//! `cluster_table` and `revision_ids` hold what a pass reads once; `output` what it
//! returns; `deletion` the plan of an MWRS being deleted.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use hashbrown::HashMap;

use jiff::{SignedDuration, Timestamp};
use mwrs_api::labels;
use mwrs_api::mwrs::{
    ABORT_TRIGGER_REQUESTED, AbortRecord, BlockedCluster, HandledControls, ManifestWorkReplicaSet,
    ManifestWorkReplicaSetStatus, PlacementSummary, Summary, condition as mc,
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

mod abort;
mod classify;
mod cluster_table;
mod controls;
mod deletion;
mod history;
mod outcome;
mod output;
mod revision_ids;
mod status;
mod writes;

use abort::*;
use classify::*;
use cluster_table::*;
use deletion::*;
use outcome::*;
pub use output::*;
use revision_ids::*;
use status::*;

/// How many clusters a status message names before "and N more".
const NAMED_IN_MESSAGES: usize = 5;

/// Knobs of the planner that are not part of the MWRS.
#[derive(Clone, Debug)]
pub struct PlanConfig {
    pub manifest_size_limit: usize,
    pub compat: Compat,
    /// How long a ManifestWork's success, and a placement's decisions, must stay unchanged
    /// before the planner trusts them (SPEC §11.3, §11.5).
    pub settle: SignedDuration,
}

/// Default of [`PlanConfig::settle`].
pub const DEFAULT_SETTLE: SignedDuration = SignedDuration::from_secs(2);

impl Default for PlanConfig {
    fn default() -> Self {
        Self {
            manifest_size_limit: DEFAULT_MANIFEST_SIZE_LIMIT,
            compat: Compat::default(),
            settle: DEFAULT_SETTLE,
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
    /// an object on this MWRS's ManifestWork name that it does not own (SPEC §10.13), or
    /// the hub refused the last write there. Counted as failed while they lack the target.
    pub blocked: &'a [BlockedWrite],
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
    /// The revision of the current spec.
    resolution: Resolution,
    /// Every revision a ManifestWork is compared against.
    known: Known,
    /// The owner label, computed once (a hashed owner costs a SHA-256).
    owner_label: (&'static str, String),
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
        let resolution = revision::resolve(
            o.revisions,
            &owner.name,
            &validated.canonical,
            old.collision_count.unwrap_or(0),
        );
        let known = Known::new(
            o.revisions,
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
            owner_slashed: &owner_slashed,
            mwrs_labels: o.mwrs.metadata.labels.as_ref(),
            placements: refs.iter().map(|r| r.name.as_str()).collect(),
            known: &known,
        };
        let clusters = Clusters::new(&views, o.works, &expect);
        Self {
            owner_label,
            resolution,
            known,
            o,
            owner,
            old,
            validated,
            now,
            cfg,
            views,
            clusters,
        }
    }

    fn run(self, finalizer: FinalizerAction) -> Plan {
        let mut p = Plan::empty(finalizer);
        let spec = &self.o.mwrs.spec;
        let generation = self.o.mwrs.metadata.generation;
        let mut status = self.old.clone();
        status.observed_generation = generation;

        // 1. The revision of the current spec (resolved when the pass was set up: every
        // ManifestWork is read against it).
        let resolution = &self.resolution;
        let update = resolution.hash().to_string();
        let template = spec.manifest_work_template.to_value();
        let created = match resolution {
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
            status.last_abort = None;
        }

        // 2. Manual controls, each acted on once (SPEC §7, §10.5). A request that names
        // another revision than the update revision is read and answered, and does nothing.
        let mut handled = self.old.handled_controls.clone().unwrap_or_default();
        let elsewhere = |token: &Option<String>| {
            token
                .as_deref()
                .and_then(labels::requested_revision)
                .filter(|r| *r != update)
                .map(str::to_string)
        };
        let abort_token = self.take_request(labels::CONTROL_ABORT, &mut handled.abort);
        let abort_elsewhere = abort_token.then(|| elsewhere(&handled.abort)).flatten();
        let abort_requested = abort_token && abort_elsewhere.is_none();
        let retry_token = self.take_request(labels::CONTROL_RETRY, &mut handled.retry);
        let retry_elsewhere = retry_token.then(|| elsewhere(&handled.retry)).flatten();
        if let Some(r) = &retry_elsewhere {
            p.events.push(Transition {
                reason: EVENT_RETRY_REQUESTED.into(),
                message: format!(
                    "retry requested for revision {r}, which is no longer the update revision \
                     ({update} is); nothing to do"
                ),
                warning: false,
            });
        } else if retry_token {
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
            status.last_abort = None;
        }
        if abort_token {
            p.events.push(Transition {
                reason: EVENT_ABORT_REQUESTED.into(),
                message: match (&abort_elsewhere, &self.old.current_revision) {
                    (Some(r), _) => format!(
                        "abort requested for revision {r}, which is no longer the update \
                         revision ({update} is); nothing to abort"
                    ),
                    (None, Some(c)) if *c == update => format!(
                        "abort requested: revision {update} is the stable revision; nothing to abort"
                    ),
                    (None, _) => format!("abort requested for revision {update}"),
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
        let (reports, existing, settling) = self.classify(self.known.id(&target));
        let results = self.evaluate(&existing);

        // 4. Abort decision, before any update write. A user's abort with nothing to go
        // back to stops the rollout until a retry or a new template (SPEC §10.6); its
        // record is what keeps it stopped.
        if stopped_now(&status, &update) {
            abort = AbortState::Failed(stopped_message(&update));
        }
        if abort == AbortState::None {
            let breach = self.breach(&results, &reports);
            let trigger = match breach {
                Some((b, true)) => Some(b),
                _ if abort_requested => Some(Breach::Requested),
                _ => None,
            };
            if let Some(b) = trigger {
                abort = match (&current, current_template) {
                    (None, _) if b == Breach::Requested => {
                        AbortState::Failed(stopped_message(&update))
                    }
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
                let reverted_to = match abort {
                    AbortState::Starting(_) => current.clone(),
                    _ => None,
                };
                if abort != AbortState::None
                    && status.last_abort.as_ref().map(|a| &a.revision) != Some(&update)
                {
                    status.last_abort =
                        Some(abort_record(b, self.now, &update, reverted_to, &reports));
                    p.revisions
                        .extend(self.mark(&update, labels::REVISION_ABORTED_AT));
                }
            }
        }

        // 5. Writes.
        match &abort {
            AbortState::Held => self.revert(&target, &mut p),
            AbortState::Starting(_) => p.recheck = Some(SignedDuration::ZERO),
            AbortState::None | AbortState::Failed(_) => {
                if !paused && !stopped_now(&status, &update) {
                    self.roll(&results, &update, &mut p);
                }
                p.recheck = min_recheck(&results);
            }
        }
        // A success still settling is looked at again once it has, whatever the state.
        if let Some(settles) = settling.map(|t| t.duration_since(self.now)) {
            p.recheck = Some(p.recheck.map_or(settles, |r| r.min(settles)));
        }
        self.relabel_and_delete(&target, &mut p);

        // 6. Status.
        let outcome = Outcome::of(&self, &reports, &results, &target, &update, &abort);
        if outcome.complete {
            if self.old.current_revision.as_deref() != Some(update.as_str()) {
                p.revisions
                    .extend(self.mark(&update, labels::REVISION_COMPLETED_AT));
            }
            status.current_revision = Some(update.clone());
            // A revision that completed is no longer the aborted one (an automatic abort
            // with nothing to go back to does not stop a rollout that recovers).
            if status
                .last_abort
                .as_ref()
                .is_some_and(|a| a.revision == update)
            {
                status.last_abort = None;
            }
        }
        self.report(&mut status, &reports, &target, &update);
        status.blocked_clusters = blocked_clusters(self.o.blocked);
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
        self.prune(&status, &mut p);
        p.status = Some(status);
        p.clusters = reports;
        p
    }
}
