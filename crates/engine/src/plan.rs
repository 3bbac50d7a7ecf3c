//! The planner (SPEC §5, §6, §10): from everything the hub shows about one MWRS and `now`,
//! the writes to make and the status to report. Pure: no client, no clock.
//!
//! A pass runs in fixed stages so that no decision depends on a write made in the same
//! pass: resolve the revision → read manual controls → classify every cluster → decide
//! whether to abort (before any update write, SPEC §10.4) → choose writes → report.

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

/// A cluster whose ManifestWork cannot be written for now, and why (in words for status
/// messages and `rollout status`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockedWrite {
    pub cluster: String,
    pub why: String,
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
    /// Set these annotations on the revision (its completed/aborted marks).
    Mark {
        name: String,
        annotations: BTreeMap<String, String>,
    },
}

/// One cluster's place in the rollout, for status, the CLI and metrics.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterReport {
    pub cluster: String,
    /// Shared by every report of a pass (a fleet has few placements and revisions, and
    /// one copy per cluster was a visible share of a 100,000-cluster pass).
    pub placement: Arc<str>,
    pub group: Option<GroupKey>,
    /// Revision its ManifestWork carries (None: no ManifestWork).
    pub revision: Option<Arc<str>>,
    /// Status against the target revision.
    pub status: RolloutStatus,
    pub since: Option<Timestamp>,
    /// A Succeeded cluster still soaking until then.
    pub soak_until: Option<Timestamp>,
    /// Why an in-flight or failed cluster is not done, when the hub says more than its
    /// status: the agent's apply error, its silence, a name taken (SPEC §11.2).
    pub note: Option<String>,
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

impl Breach {
    /// [`AbortRecord::trigger`] of an abort this breach started.
    fn trigger(self) -> &'static str {
        match self {
            Breach::Deadline => mc::REASON_PROGRESS_DEADLINE_EXCEEDED,
            Breach::Failures => mc::REASON_MAX_FAILURES_EXCEEDED,
            Breach::Requested => ABORT_TRIGGER_REQUESTED,
        }
    }
}

/// The blocked writes as the status publishes them (sorted, the first 50), so the CLI
/// shows what only the controller learnt by writing.
fn blocked_clusters(blocked: &[BlockedWrite]) -> Vec<BlockedCluster> {
    const MAX: usize = 50;
    let mut out: Vec<BlockedCluster> = blocked
        .iter()
        .map(|b| BlockedCluster {
            cluster: b.cluster.clone(),
            message: b.why.clone(),
        })
        .collect();
    out.sort_by(|a, b| a.cluster.cmp(&b.cluster));
    out.truncate(MAX);
    out
}

/// The Progressing message of a user's abort with no stable revision.
fn stopped_message(update: &str) -> String {
    format!(
        "abort requested for revision {update}, and there is no stable revision to go back \
         to (the first rollout never completed): the rollout stops here until a retry or a \
         new template"
    )
}

/// Does the status hold a user's abort of `update` with nothing to go back to?
fn stopped_now(status: &ManifestWorkReplicaSetStatus, update: &str) -> bool {
    status.last_abort.as_ref().is_some_and(|a| {
        a.revision == update && a.reverted_to.is_none() && a.trigger == ABORT_TRIGGER_REQUESTED
    })
}

/// The record of an abort of `update` started now by `breach`, with the clusters that
/// failed or timed out.
fn abort_record(
    breach: Breach,
    now: Timestamp,
    update: &str,
    reverted_to: Option<String>,
    reports: &[ClusterReport],
) -> AbortRecord {
    const FIRST: usize = 10;
    let with = |s: RolloutStatus| {
        let all: Vec<&ClusterReport> = reports.iter().filter(|c| c.status == s).collect();
        let names = all.iter().take(FIRST).map(|c| c.cluster.clone()).collect();
        (names, all.len() as i64)
    };
    let (timed_out_clusters, timed_out_count) = with(RolloutStatus::TimeOut);
    let (failed_clusters, failed_count) = with(RolloutStatus::Failed);
    AbortRecord {
        trigger: breach.trigger().into(),
        time: Time(now),
        revision: update.into(),
        reverted_to,
        timed_out_clusters,
        timed_out_count,
        failed_clusters,
        failed_count,
    }
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
#[derive(Clone)]
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

    /// The write that marks revision `hash` with annotation `key` = now.
    fn mark(&self, hash: &str, key: &str) -> Option<RevisionChange> {
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
    fn carried(&self, w: &'a WorkView) -> Option<Rev<'a>> {
        self.known.carried(w)
    }

    fn rev_name<'s>(&'s self, r: Rev<'s>) -> &'s str {
        match r {
            Rev::Known(i) => self.known.name(i),
            Rev::Foreign(h) => h,
        }
    }

    /// Does the slot's survivor carry revision `target` with its content? A spec that no
    /// longer matches (edited by hand) does not count.
    fn carries_in(&self, slot: &Slot<'a>, target: Option<usize>) -> bool {
        let Some(t) = target else { return false };
        slot.work.is_some()
            && slot.carried == Some(Rev::Known(t))
            && match (slot.facts.content, self.known.digest(t)) {
                (Some(have), Some(want)) => have.and_then(|k| self.known.digest(k)) == Some(want),
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
        // The first placementRef with decisions owns every cluster it selects: no need to
        // look each one up (the common case of a single placementRef).
        let first = !self.views[..i]
            .iter()
            .any(|v| v.and_then(|v| v.groups()).is_some());
        let all_owned = first
            || groups
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
    /// Also returns when the first success still settling will have settled.
    #[allow(clippy::type_complexity)]
    fn classify(
        &self,
        target: Option<usize>,
    ) -> (
        Vec<ClusterReport>,
        Vec<Vec<ClusterRolloutStatus>>,
        Option<Timestamp>,
    ) {
        let mut settling: Option<Timestamp> = None;
        let mut out = Vec::with_capacity(self.clusters.desired_len);
        let mut existing: Vec<Vec<ClusterRolloutStatus>> = vec![Vec::new(); self.views.len()];
        let names: Vec<Arc<str>> = self
            .o
            .mwrs
            .spec
            .placement_refs
            .iter()
            .map(|r| Arc::from(r.name.as_str()))
            .collect();
        let revisions: Vec<Arc<str>> = (0..self.known.len())
            .map(|i| Arc::from(self.known.name(i)))
            .collect();
        for (cluster, slot) in self.clusters.slots.iter() {
            let Some(d) = &slot.desired else { continue };
            let strategy = &self.validated.strategies[d.placement];
            let revision = slot.carried.map(|r| match r {
                Rev::Known(i) => revisions[i].clone(),
                Rev::Foreign(h) => Arc::from(h),
            });
            let (mut status, since, note) = self.observed_status(cluster, slot, target);
            if let Some(t) = self.settles_at(slot, status) {
                settling = Some(settling.map_or(t, |s| s.min(t)));
            }
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
                cluster: cluster.to_string(),
                placement: names[d.placement].clone(),
                group: Some(d.group.clone()),
                revision,
                status,
                since,
                soak_until,
                note,
            });
        }
        (out, existing, settling)
    }

    /// When a success reported for this slot settles, if it is still settling (`status`
    /// is what [`Self::observed_status`] made of it).
    fn settles_at(&self, slot: &Slot<'a>, status: RolloutStatus) -> Option<Timestamp> {
        let f = &slot.facts;
        let t = f.seen?.saturating_add(self.cfg.settle).ok()?;
        (status == RolloutStatus::Progressing
            && f.status == RolloutStatus::Succeeded
            && self.now < t)
            .then_some(t)
    }

    /// A desired cluster's status against the target as the hub shows it, before
    /// deadlines and soak: ToApply when its ManifestWork lacks the target (the only
    /// status that makes a write); Failed when another owner holds the name; a success
    /// that has not settled yet is still in flight (SPEC §11.3).
    fn observed_status(
        &self,
        cluster: &str,
        slot: &Slot<'a>,
        target: Option<usize>,
    ) -> (RolloutStatus, Option<Timestamp>, Option<String>) {
        if !self.carries_in(slot, target) {
            if let Some(b) = self.o.blocked.iter().find(|b| b.cluster == cluster) {
                return (RolloutStatus::Failed, None, Some(b.why.clone()));
            }
            return (RolloutStatus::ToApply, None, None);
        }
        let f = &slot.facts;
        match (f.status, slot.work) {
            (RolloutStatus::Succeeded, _)
                if self.settles_at(slot, RolloutStatus::Progressing).is_some() =>
            {
                (RolloutStatus::Progressing, f.since, None)
            }
            (_, Some(w)) if f.awaiting => (f.status, f.since, Some(work::awaiting_note(w))),
            (status, _) => (status, f.since, None),
        }
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
            let mine = reports.iter().filter(|c| *c.placement == **name);
            let (failed, timed_out) = mine.fold((0usize, 0usize), |(f, t), c| match c.status {
                RolloutStatus::Failed => (f + 1, t),
                RolloutStatus::TimeOut => (f, t + 1),
                _ => (f, t),
            });
            let breached = match s.kind {
                // The engine never breaches for All (upstream); its own maxFailures counts
                // here (SPEC §10.3).
                StrategyKind::All => {
                    let total = reports.iter().filter(|c| *c.placement == **name).count();
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
        let slot = self.clusters.get(cluster);
        let existing = slot.and_then(|s| s.work);
        // A ManifestWork on the way out keeps its name until the agent is done with it.
        if existing.is_none() && slot.is_some_and(|s| s.name_taken) {
            return None;
        }
        let mut annotations = self.owner_annotations();
        // The first write of a revision into this ManifestWork is its anchor for deadlines
        // and soak; a rewrite of the same revision (hand edit, lost write) keeps it.
        let applied_at = existing
            .filter(|w| w.hash() == Some(revision))
            .and_then(|w| w.annotation(labels::REVISION_APPLIED_AT))
            .map_or_else(|| self.now.to_string(), str::to_string);
        annotations.insert(labels::REVISION_APPLIED_AT.into(), applied_at);
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
        let mut l: BTreeMap<String, String> = copied_labels(self.o.mwrs.metadata.labels.as_ref())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
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
        let id = self.known.id(target);
        for (cluster, slot) in self.clusters.slots.iter() {
            if self.carries_in(slot, id) {
                continue;
            }
            if let Some(a) = self
                .placement_index_of(slot)
                .and_then(|i| self.apply(cluster, i, target))
            {
                p.works.push(WorkChange::Apply(a));
            }
        }
    }

    /// The placementRef a cluster belongs to: the one selecting it, else the one its
    /// ManifestWork names.
    fn placement_index_of(&self, slot: &Slot<'a>) -> Option<usize> {
        if let Some(d) = &slot.desired {
            return Some(d.placement);
        }
        let name = slot.work?.placement()?;
        self.o
            .mwrs
            .spec
            .placement_refs
            .iter()
            .position(|r| r.name == name)
    }

    /// May ManifestWorks of clusters no placementRef selects be deleted now? Only when
    /// the selection is known for certain (SPEC §11.5): every placementRef of the spec
    /// resolves to complete decisions that have not changed for the settle time. Err
    /// carries when to look again (None: only a change on the hub can open the gate).
    fn unselected_may_go(&self) -> Result<(), Option<SignedDuration>> {
        let mut wait = SignedDuration::ZERO;
        for v in &self.views {
            let Some(v) = v.filter(|v| v.complete && v.groups().is_some()) else {
                return Err(None);
            };
            if let Some(t) = v
                .changed_at
                .and_then(|t| t.saturating_add(self.cfg.settle).ok())
                && self.now < t
            {
                wait = wait.max(t.duration_since(self.now));
            }
        }
        if wait.is_zero() {
            Ok(())
        } else {
            Err(Some(wait))
        }
    }

    /// Annotations a relabel sets: the owner, and the applied-at anchor when the
    /// ManifestWork has none (written before it existed); an existing anchor is kept.
    fn relabel_annotations(&self, w: &WorkView) -> BTreeMap<String, String> {
        let mut a = self.owner_annotations();
        if w.annotation(labels::REVISION_APPLIED_AT).is_none() {
            a.insert(labels::REVISION_APPLIED_AT.into(), self.now.to_string());
        }
        a
    }

    fn relabel_and_delete(&self, target: &str, p: &mut Plan) {
        // By slot position: the writes are a few per cent of the clusters, and hashing
        // every cluster's name to ask was a cache miss per cluster on a large fleet.
        let mut applied = vec![false; self.clusters.slots.len()];
        for c in &p.works {
            if let WorkChange::Apply(a) = c
                && let Some(i) = self.clusters.slots.position(&a.cluster)
            {
                applied[i] = true;
            }
        }
        let mut relabels = Vec::new();
        let mut deletes = Vec::new();
        let id = self.known.id(target);
        let gate = self.unselected_may_go();
        let mut withheld = false;
        for (i, (cluster, slot)) in self.clusters.slots.iter().enumerate() {
            let (Some(w), dups) = (slot.work, &slot.dups) else {
                continue;
            };
            match &slot.desired {
                None => {
                    // Unselected: delete once the selection is certain (SPEC §10.12,
                    // §11.5); whatever revision it carries.
                    if gate.is_ok() {
                        deletes.extend(std::iter::once(w).chain(dups.iter().copied()));
                    } else {
                        withheld = true;
                    }
                    continue;
                }
                Some(d) => {
                    if !applied[i] {
                        let placement = &self.o.mwrs.spec.placement_refs[d.placement].name;
                        if let Some(rev) = slot.carried
                            && !slot.facts.labelled
                        {
                            relabels.push(WorkChange::Relabel {
                                cluster: cluster.to_string(),
                                name: w.name.clone(),
                                labels: self.work_labels(placement, self.rev_name(rev)),
                                annotations: self.relabel_annotations(w),
                            });
                        }
                    }
                }
            }
            // Duplicates left by upstream's controller go once the survivor is settled.
            if !dups.is_empty() && !applied[i] && self.carries_in(slot, id) {
                deletes.extend(dups.iter().copied());
            }
        }
        drop(applied);
        if withheld && let Err(Some(wait)) = gate {
            p.recheck = Some(p.recheck.map_or(wait, |r| r.min(wait)));
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
        let id = self.known.id(target);
        let refs = &self.o.mwrs.spec.placement_refs;
        let mut per: Vec<Summary> = vec![Summary::default(); refs.len()];
        let mut applied_on_target = vec![0i64; refs.len()];
        for c in reports {
            let Some(i) = refs.iter().position(|r| *r.name == *c.placement) else {
                continue;
            };
            per[i].desired_total += 1;
            if c.revision.as_deref() == Some(update) && c.status == RolloutStatus::Succeeded {
                per[i].updated += 1;
            }
        }
        for (_, slot) in self.clusters.slots.iter() {
            if slot.work.is_none() {
                continue;
            }
            let Some(i) = self.placement_index_of(slot) else {
                continue;
            };
            let s = &mut per[i];
            s.total += 1;
            if self.carries_in(slot, id) {
                let f = &slot.facts;
                applied_on_target[i] += 1;
                s.applied += i64::from(f.applied);
                s.available += i64::from(f.available);
                s.progressing += i64::from(f.progressing);
                s.degraded += i64::from(f.degraded);
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
        let mut remarks = Vec::new();
        for v in self.views.iter().flatten() {
            if !v.skipped.is_empty() {
                let names: Vec<String> = v.skipped.iter().map(|c| format!("{c:?}")).collect();
                remarks.push(format!(
                    "placement {}: {} decisions skipped, not a valid cluster name: {}",
                    v.name,
                    v.skipped.len(),
                    name_few(&names)
                ));
            }
            if !v.complete {
                remarks.push(format!(
                    "placement {}: decisions incomplete; no ManifestWork is deleted until they are",
                    v.name
                ));
            }
        }
        let remarks: String = remarks.iter().map(|r| format!("; {r}")).collect();
        if self.clusters.desired_len == 0 {
            return Cond::new(
                mc::PLACEMENT_VERIFIED,
                Status::False,
                mc::REASON_PLACEMENT_DECISION_EMPTY,
                format!("no cluster is selected by any placement{remarks}"),
            );
        }
        Cond::new(
            mc::PLACEMENT_VERIFIED,
            Status::True,
            mc::REASON_AS_EXPECTED,
            format!("{} clusters selected{remarks}", self.clusters.desired_len),
        )
    }

    fn prune(&self, status: &ManifestWorkReplicaSetStatus, p: &mut Plan) {
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
    /// `cluster: why` for the first few clusters not done whose report has a note.
    notes: Vec<String>,
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
        let notes = reports
            .iter()
            .filter_map(|c| Some(format!("{}: {}", c.cluster, c.note.as_deref()?)))
            .take(NAMED_IN_MESSAGES)
            .collect();
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
            notes,
        }
    }

    /// The notes, as a suffix of a condition message.
    fn noted(&self) -> String {
        if self.notes.is_empty() {
            String::new()
        } else {
            format!(" ({})", self.notes.join("; "))
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
            "revision {}: {} of {} clusters failed: {}{}",
            self.target,
            self.failures(),
            self.desired,
            parts.join("; "),
            self.noted()
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
                    "revision {}: {} of {} clusters done, {} in progress{}",
                    self.target,
                    self.done,
                    self.desired,
                    self.in_flight,
                    self.noted()
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

/// A revision a ManifestWork carries: one the pass knows (an index into [`Known`]), or a
/// label naming a revision that is in no history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rev<'a> {
    Known(usize),
    Foreign(&'a str),
}

/// Every revision a pass compares ManifestWorks against: the stored ones and the update
/// revision, by hash, and the stable revision even when history lost it. Indices let the
/// per-cluster comparisons be integer compares.
struct Known {
    /// Hash and content digest; the digest is unknown only for a stable revision that is
    /// no longer stored.
    list: Vec<(String, Option<Digest>)>,
    by_hash: HashMap<String, usize>,
}

impl Known {
    fn new(revisions: &[RevisionView], update: (&str, Digest), current: Option<&str>) -> Self {
        let mut digests: BTreeMap<&str, Digest> = revisions
            .iter()
            .map(|r| (r.hash.as_str(), r.digest))
            .collect();
        digests.insert(update.0, update.1);
        let mut list: Vec<(String, Option<Digest>)> = digests
            .into_iter()
            .map(|(h, d)| (h.to_string(), Some(d)))
            .collect();
        if let Some(c) = current
            && !list.iter().any(|(h, _)| h == c)
        {
            list.push((c.to_string(), None));
        }
        let by_hash = list
            .iter()
            .enumerate()
            .map(|(i, (h, _))| (h.clone(), i))
            .collect();
        Self { list, by_hash }
    }

    fn len(&self) -> usize {
        self.list.len()
    }

    fn id(&self, hash: &str) -> Option<usize> {
        self.by_hash.get(hash).copied()
    }

    fn name(&self, id: usize) -> &str {
        &self.list[id].0
    }

    fn digest(&self, id: usize) -> Option<Digest> {
        self.list[id].1
    }

    /// The first revision, by hash, with this content.
    fn with_content(&self, digest: Digest) -> Option<usize> {
        self.list.iter().position(|(_, d)| *d == Some(digest))
    }

    /// The revision a ManifestWork carries: its label, or — for a ManifestWork written
    /// before revisions existed — the revision whose content its spec equals.
    fn carried<'w>(&self, w: &'w WorkView) -> Option<Rev<'w>> {
        match w.hash() {
            Some(h) => Some(self.id(h).map_or(Rev::Foreign(h), Rev::Known)),
            None => self.with_content(w.spec_digest?).map(Rev::Known),
        }
    }
}

/// The MWRS labels copied onto its ManifestWorks: all but the keys this controller owns
/// (SPEC §11.4), so an MWRS can never forge another's ownership through its own labels.
fn copied_labels(
    mwrs_labels: Option<&BTreeMap<String, String>>,
) -> impl Iterator<Item = (&String, &String)> {
    mwrs_labels
        .into_iter()
        .flatten()
        .filter(|(k, _)| !labels::is_controller_key(k))
}

/// What this MWRS expects every ManifestWork it owns to carry.
struct Expected<'e> {
    owner_work_name: String,
    owner_label: &'e (&'static str, String),
    owner_slashed: &'e str,
    mwrs_labels: Option<&'e BTreeMap<String, String>>,
    /// placementRef names, by index.
    placements: Vec<&'e str>,
    known: &'e Known,
}

/// What a pass reads from a surviving ManifestWork, read in one go when the slots are
/// built: at 100,000 clusters every further visit to a ManifestWork's labels and
/// conditions is a cache miss.
#[derive(Clone, Copy, Debug)]
struct Facts {
    /// The status as the agent reports it and since when (SPEC §3 rules 2–7); it counts
    /// only when the ManifestWork carries the target revision.
    status: RolloutStatus,
    since: Option<Timestamp>,
    /// Written, but the agent has not applied this generation (SPEC §11.2).
    awaiting: bool,
    /// When the controller last saw the conditions change.
    seen: Option<Timestamp>,
    /// Conditions True at the current generation, for the summaries.
    applied: bool,
    available: bool,
    progressing: bool,
    degraded: bool,
    /// The spec's content among the known revisions: None when its digest is unknown,
    /// else the first revision with that content, if any.
    content: Option<Option<usize>>,
    /// Every label and annotation this controller sets is in place, for the placementRef
    /// that wants the cluster and the revision its label names.
    labelled: bool,
}

impl Facts {
    const NONE: Facts = Facts {
        status: RolloutStatus::ToApply,
        since: None,
        awaiting: false,
        seen: None,
        applied: false,
        available: false,
        progressing: false,
        degraded: false,
        content: None,
        labelled: false,
    };

    fn read(w: &WorkView, wanted: Option<&Desired<'_>>, e: &Expected<'_>) -> Self {
        use mwrs_api::work::condition as wc;
        let (status, since) = work::written_status(w);
        let labelled = wanted.is_some_and(|d| {
            let has = |k: &str, v: &str| w.label(k) == Some(v);
            let (owner_key, owner_value) = e.owner_label;
            w.hash().is_some()
                && has(labels::PLACEMENT_NAME, e.placements[d.placement])
                && has(owner_key, owner_value)
                && copied_labels(e.mwrs_labels).all(|(k, v)| has(k, v))
                && w.annotation(labels::MWRS_OWNER_ANNOTATION) == Some(e.owner_slashed)
                && w.annotation(labels::REVISION_APPLIED_AT).is_some()
        });
        Self {
            status,
            since,
            awaiting: !work::is_applied(w),
            seen: w.status_seen,
            applied: w.is_true(wc::APPLIED),
            available: w.is_true(wc::AVAILABLE),
            progressing: w.is_true(wc::PROGRESSING),
            degraded: w.is_true(wc::DEGRADED),
            content: if w.written_generation.is_some_and(|g| g == w.generation) {
                // Written by this controller and unchanged since: the revision its label
                // names, even when the server's defaults make the digest differ.
                Some(w.hash().and_then(|h| e.known.id(h)))
            } else {
                w.spec_digest.map(|d| e.known.with_content(d))
            },
            labelled,
        }
    }
}

/// What one pass knows per cluster: the placementRef that wants it (if any) and the
/// ManifestWork that represents it (if any).
struct Slot<'a> {
    desired: Option<Desired<'a>>,
    /// The survivor: the deterministic name, else the oldest.
    work: Option<&'a WorkView>,
    /// The revision the survivor carries.
    carried: Option<Rev<'a>>,
    facts: Facts,
    /// Other owned ManifestWorks in the same namespace.
    dups: Vec<&'a WorkView>,
    /// A ManifestWork of the deterministic name is being deleted there: a new one can
    /// only be created once the agent is done with it.
    name_taken: bool,
}

struct Clusters<'a> {
    slots: ClusterIndex<'a, Slot<'a>>,
    /// Owned ManifestWorks being deleted.
    gone: Vec<&'a WorkView>,
    desired_len: usize,
    works_len: usize,
}

impl<'a> Clusters<'a> {
    /// One walk that merges the placements' clusters (each already by name) with the
    /// ManifestWorks sorted by cluster: sorting runs that are in order costs a linear
    /// pass, so a fleet of 100,000 clusters is not sorted from scratch on every pass.
    fn new(views: &[Option<&'a PlacementView>], works: &'a [WorkView], e: &Expected<'_>) -> Self {
        let mut desired: Vec<(&'a str, Desired<'a>)> = Vec::new();
        for (i, groups) in views
            .iter()
            .enumerate()
            .filter_map(|(i, v)| Some((i, v.and_then(|v| v.groups())?)))
        {
            desired.extend(groups.by_name().map(|(cluster, group)| {
                (
                    cluster,
                    Desired {
                        placement: i,
                        group,
                    },
                )
            }));
        }
        // One placement's clusters come by name, each once; several need sorting.
        let placements = views
            .iter()
            .filter(|v| v.and_then(|v| v.groups()).is_some());
        // Stable: for a cluster two placementRefs select, the first one stays first.
        let by_name = |d: &mut Vec<(&'a str, Desired<'a>)>| {
            d.sort_by(|a, b| a.0.cmp(b.0));
            d.dedup_by(|later, first| later.0 == first.0);
        };
        if placements.count() > 1 {
            by_name(&mut desired);
        }
        // The controller hands ManifestWorks over by cluster already; only when they come
        // in another order is a sorted copy made (and a pass over sorted input is cheap).
        // The slow path also re-sorts the desired side, so that a merge that cannot
        // fail never depends on the decision groups keeping their order.
        let merged = Self::merge(&desired, works.iter(), e);
        let (entries, gone, works_len) = match merged {
            Some(m) => m,
            None => {
                by_name(&mut desired);
                let mut sorted: Vec<&'a WorkView> = works.iter().collect();
                sorted.sort_by(|a, b| a.cluster.cmp(&b.cluster));
                Self::merge(&desired, sorted.into_iter(), e).unwrap_or_else(|| {
                    unreachable!("both sides sorted by cluster, each desired name once")
                })
            }
        };
        let desired_len = desired.len();
        Self {
            slots: ClusterIndex::from_sorted(entries),
            gone,
            desired_len,
            works_len,
        }
    }

    /// Walks the desired clusters and the ManifestWorks side by side, both by cluster
    /// name; None when the ManifestWorks turn out not to be in that order.
    #[allow(clippy::type_complexity)]
    fn merge(
        desired: &[(&'a str, Desired<'a>)],
        works: impl Iterator<Item = &'a WorkView>,
        e: &Expected<'_>,
    ) -> Option<(Vec<(&'a str, Slot<'a>)>, Vec<&'a WorkView>, usize)> {
        use std::cmp::Ordering::{Equal, Greater, Less};
        debug_assert!(desired.windows(2).all(|w| w[0].0 < w[1].0));
        let mut entries = Vec::with_capacity(desired.len());
        let mut gone = Vec::new();
        let mut works_len = 0;
        let mut desired = desired.iter().peekable();
        let mut work_iter = works.peekable();
        // One comparison of names decides each step (they share long prefixes, and at
        // 100,000 clusters comparisons were a tenth of the pass).
        loop {
            let (take_desired, take_work) = match (desired.peek(), work_iter.peek()) {
                (None, None) => break,
                (Some(_), None) => (true, false),
                (None, Some(_)) => (false, true),
                (Some((c, _)), Some(w)) => match (*c).cmp(w.cluster.as_str()) {
                    Less => (true, false),
                    Equal => (true, true),
                    Greater => (false, true),
                },
            };
            let wanted = take_desired.then(|| desired.next()).flatten();
            let first = take_work.then(|| work_iter.next()).flatten();
            let cluster: &'a str = match (wanted, first) {
                (Some((c, _)), _) => c,
                (None, Some(w)) => w.cluster.as_str(),
                (None, None) => break,
            };
            let wanted = wanted.map(|(_, d)| d.clone());
            let mut dups = Vec::new();
            let mut name_taken = false;
            let mut next = first;
            while let Some(w) = next {
                if w.deleting {
                    name_taken |= w.name == e.owner_work_name;
                    gone.push(w);
                } else {
                    dups.push(w);
                }
                // More ManifestWorks in this namespace; a smaller name after this one
                // means the input is not in cluster order.
                next = match work_iter.peek().map(|n| n.cluster.as_str().cmp(cluster)) {
                    Some(Equal) => work_iter.next(),
                    Some(Less) => return None,
                    Some(Greater) | None => None,
                };
            }
            if wanted.is_none() && dups.is_empty() {
                continue;
            }
            // Survivor: the deterministic name, else the oldest (upstream's generateName
            // works), so restarts always pick the same one.
            dups.sort_by(|a, b| {
                (a.name != e.owner_work_name, a.created, &a.name).cmp(&(
                    b.name != e.owner_work_name,
                    b.created,
                    &b.name,
                ))
            });
            let survivor = (!dups.is_empty()).then(|| dups.remove(0));
            works_len += usize::from(survivor.is_some());
            let facts = survivor.map_or(Facts::NONE, |w| Facts::read(w, wanted.as_ref(), e));
            entries.push((
                cluster,
                Slot {
                    desired: wanted,
                    work: survivor,
                    carried: survivor.and_then(|w| e.known.carried(w)),
                    facts,
                    dups,
                    name_taken,
                },
            ));
        }
        Some((entries, gone, works_len))
    }

    fn get(&self, cluster: &str) -> Option<&Slot<'a>> {
        self.slots.get(cluster)
    }

    fn desired(&self, cluster: &str) -> Option<&Desired<'a>> {
        self.get(cluster).and_then(|s| s.desired.as_ref())
    }
}

/// Per-cluster state of one pass: entries sorted by cluster name (plans and reports come
/// out deterministic, and walks are sequential in memory) with a hashed position index for
/// the several lookups a pass makes per cluster (ordered-tree lookups made large fleets
/// superlinear).
struct ClusterIndex<'a, V> {
    entries: Vec<(&'a str, V)>,
    position: HashMap<&'a str, usize>,
}

impl<'a, V> ClusterIndex<'a, V> {
    /// `entries` sorted by cluster name, each name once.
    fn from_sorted(entries: Vec<(&'a str, V)>) -> Self {
        debug_assert!(entries.windows(2).all(|w| w[0].0 < w[1].0));
        let position = entries
            .iter()
            .enumerate()
            .map(|(i, (k, _))| (*k, i))
            .collect();
        Self { entries, position }
    }

    fn get(&self, cluster: &str) -> Option<&V> {
        self.position(cluster).map(|i| &self.entries[i].1)
    }

    fn position(&self, cluster: &str) -> Option<usize> {
        self.position.get(cluster).copied()
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    fn iter(&self) -> impl Iterator<Item = (&'a str, &V)> + '_ {
        self.entries.iter().map(|(k, v)| (*k, v))
    }
}
