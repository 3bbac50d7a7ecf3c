//! The planner (rules §5, §6, §10): from everything the hub shows about one MWRS and `now`,
//! the writes to make and the status to report. Pure: no client, no clock.
//!
//! A pass runs in fixed stages so that no decision depends on a write made in the same
//! pass, each in a file of its name:
//!
//! 1. `history`: resolve the revision of the spec (store or renumber it);
//! 2. `controls`: read the manual abort and retry requests, each once;
//! 3. `classify`: every desired cluster's status against the target revision, and the
//!    rollout engine's verdict per placementRef (`plugin_gate` gives each cluster's
//!    plugin its say here);
//! 4. `abort`: whether to abort, before any update write (rules §10.4);
//! 5. `writes`: the ManifestWork writes (`plugin_gate` again: may the update revision be
//!    written yet);
//! 6. `status` (with `outcome` for the conditions' text): the status to report;
//! 7. `history`: prune the revisions.
//!
//! Beside the stages: `pass` holds what a pass reads once (its inputs, the `Pass` every
//! stage is an `impl` of), built on `cluster_table` and `revision_ids`; `output` holds
//! what it returns; `deletion` plans an MWRS being deleted; `forward` hands a roll
//! forward's inputs to a caller that runs the engine between passes (the preview), and
//! `in_memory` applies a plan to the objects it read (the simulations). Stages import from
//! those, never from this driver.

use jiff::Timestamp;
use mwrs_api::labels;

use crate::owner::OwnerKey;
use crate::plugin::PluginCalls;
use crate::validate;

use abort::{AbortDecision, AbortMemory, AbortState, Hold};
use classify::Classified;
use controls::Controls;
use deletion::plan_deletion;
use history::RevisionStep;
use status::plan_invalid;
use writes::Writes;

mod abort;
mod classify;
mod cluster_table;
mod controls;
mod deletion;
mod forward;
mod history;
pub mod in_memory;
mod outcome;
mod output;
mod pass;
mod plugin_gate;
mod revision_ids;
mod settings;
mod status;
#[cfg(test)]
mod tests;
mod writes;

pub use forward::{PlacementRollout, RollForward};
pub use output::*;
use pass::Pass;
pub use pass::{DEFAULT_SETTLE, Observed, PlanConfig, Sight};
pub use settings::{labels_not_copied, non_negative_duration};

/// Every desired cluster's place in the rollout and each placementRef's budget, as the
/// planner's first three stages see them, without deciding or writing anything: for
/// read-only views (`rollout status`, the dashboard). Empty for an MWRS being deleted or
/// with an invalid spec.
pub fn progress(observed: &Observed<'_>, now: Timestamp, cfg: &PlanConfig) -> Progress {
    let meta = &observed.mwrs.metadata;
    if meta.deletion_timestamp.is_some() {
        return Progress::default();
    }
    let Ok(validated) = validate::validate(&observed.mwrs.spec, cfg.manifest_size_limit) else {
        return Progress::default();
    };
    let owner = OwnerKey::new(
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    );
    let old = observed.mwrs.status.clone().unwrap_or_default();
    let Observation { hold, seen, .. } =
        Pass::new(observed, owner, old, validated, now, cfg).observe();
    let reverting = matches!(hold.state, AbortState::Held);
    let budgets = seen
        .verdicts
        .into_iter()
        .map(|v| v.filter(|_| !reverting).map(|r| r.budget))
        .collect();
    Progress {
        clusters: seen.reports,
        budgets,
    }
}

/// Plans one pass for one MWRS.
pub fn plan(observed: &Observed<'_>, now: Timestamp, cfg: &PlanConfig) -> Plan {
    let meta = &observed.mwrs.metadata;
    let owner = OwnerKey::new(
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    );
    let has_finalizer = meta
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|x| x == labels::MWRS_FINALIZER));
    if meta.deletion_timestamp.is_some() {
        return plan_deletion(observed, has_finalizer);
    }
    let finalizer = if has_finalizer {
        FinalizerAction::Keep
    } else {
        FinalizerAction::Add
    };
    let old = observed.mwrs.status.clone().unwrap_or_default();
    let validated = match validate::validate(&observed.mwrs.spec, cfg.manifest_size_limit) {
        Ok(v) => v,
        Err(invalid) => return plan_invalid(observed, &old, invalid, finalizer, now),
    };
    Pass::new(observed, owner, old, validated, now, cfg).run(finalizer)
}

/// What stages 1 to 3 found.
struct Observation<'a> {
    revision: RevisionStep,
    controls: Controls,
    memory: AbortMemory,
    hold: Hold<'a>,
    seen: Classified,
}

impl<'a> Pass<'a> {
    /// Stages 1 to 3: what this pass finds, before it decides anything.
    fn observe(&self) -> Observation<'a> {
        let revision = self.revision_step();
        let held = !revision.changed && self.old.aborted_time.is_some();
        let controls = self.controls(&revision.update, held);
        // A new revision or a retry ends an abort's hold and its record.
        let memory = if revision.changed || controls.retry {
            AbortMemory::default()
        } else {
            AbortMemory {
                aborted_time: self.old.aborted_time.clone(),
                last_abort: self.old.last_abort.clone(),
            }
        };
        let hold = self.hold(&memory, &revision.update);
        let mut seen = self.classified(&hold.target);
        if matches!(hold.state, AbortState::Held) {
            // Going back waits for no deadline.
            for c in &mut seen.reports {
                c.deadline = None;
            }
        }
        Observation {
            revision,
            controls,
            memory,
            hold,
            seen,
        }
    }

    /// Stages 1 to 5: what this pass finds, its abort decision and its ManifestWork
    /// writes.
    fn decide(&self) -> (Observation<'a>, AbortDecision, Writes) {
        let observation = self.observe();
        let Observation {
            revision,
            controls,
            memory,
            hold,
            seen,
        } = &observation;
        let abort = self.decide_abort(&revision.update, controls.abort, hold, seen, memory.clone());
        let update = (revision.update.as_str(), &revision.template);
        let writes = self.writes(update, controls.paused, hold, seen, &abort);
        (observation, abort, writes)
    }

    /// The stages in order, each a function of what the stages before it returned.
    fn run(self, finalizer: FinalizerAction) -> Plan {
        let (
            Observation {
                revision,
                controls,
                memory: _,
                hold,
                seen,
            },
            abort,
            writes,
        ) = self.decide();
        let status = self.status_update(&revision, &controls, &hold, &seen, &abort);
        let pruned = self.prune(&status.status);

        let mut revisions = revision.changes;
        revisions.extend(abort.mark);
        revisions.extend(status.mark);
        revisions.extend(pruned);
        let mut events = controls.events;
        events.extend(status.events);
        Plan {
            finalizer,
            works: writes.works,
            revisions,
            status: Some(status.status),
            events,
            recheck: writes.recheck,
            invalid: None,
            plugin_calls: PluginCalls {
                validations: seen.questions.due,
                begins: writes.begins,
                progress: self.progress(&seen.reports, &hold.target),
            },
            clusters: seen.reports,
            back_to_stable: status.back_to_stable,
        }
    }
}
