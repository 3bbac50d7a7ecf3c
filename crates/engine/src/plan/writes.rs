//! Stage 5, the ManifestWork writes in order: roll forward what the rollout engine
//! releases, revert to the stable revision while an abort holds, relabel, and delete what
//! is no longer selected and duplicates.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use mwrs_api::labels;
use serde_json::Value;

use crate::plugin::Begin;
use crate::rollout::{RolloutResult, RolloutStatus};
use crate::work::WorkView;

use super::abort::{AbortDecision, AbortState, Hold, stopped_now};
use super::classify::{Classified, min_recheck};
use super::cluster_table::{ClusterRow, copied_labels};
use super::output::{WorkApply, WorkChange};
use super::pass::Pass;

/// Stage 5's answer.
#[derive(Default)]
pub(super) struct Writes {
    /// In the order to make them: applies, relabels, then deletes.
    pub(super) works: Vec<WorkChange>,
    pub(super) recheck: Option<SignedDuration>,
    /// BeginRollout and BeginAbort calls to make.
    pub(super) begins: Vec<Begin>,
}

/// A revision as a pass writes it: its hash and its template.
pub(super) type ToWrite<'t> = (&'t str, &'t Arc<Value>);

impl<'a> Pass<'a> {
    /// Stage 5: while an abort holds, revert to the stable revision; when one starts, write
    /// nothing yet (its `abortedTime` is stored first); otherwise roll forward what the
    /// rollout engine releases, unless paused or stopped by a user's abort.
    pub(super) fn writes(
        &self,
        update: ToWrite<'_>,
        paused: bool,
        hold: &Hold<'_>,
        seen: &Classified,
        abort: &AbortDecision,
    ) -> Writes {
        let mut w = Writes::default();
        let mut begin_next = None;
        match &abort.state {
            AbortState::Held => {
                if let Some(stable) = hold.stable {
                    let template = Arc::new(stable.template.clone());
                    begin_next = self.revert_to_stable((&stable.hash, &template), &mut w);
                }
            }
            AbortState::Starting(_) => w.recheck = Some(SignedDuration::ZERO),
            AbortState::None | AbortState::Failed(_) => {
                w.recheck = min_recheck(&seen.verdicts);
                if !paused && !stopped_now(abort.memory.last_abort.as_ref(), update.0) {
                    begin_next = self.roll_forward(&seen.verdicts, update, &mut w);
                }
            }
        }
        // A success still settling is looked at again once it has, and a plugin asked
        // again when due, whatever the state.
        let due = [seen.settling, seen.questions.next, begin_next];
        for at in due
            .into_iter()
            .flatten()
            .map(|t| t.duration_since(self.now))
        {
            w.recheck = Some(w.recheck.map_or(at, |r| r.min(at)));
        }
        self.relabel_and_delete(&hold.target, &mut w);
        self.write_verdicts(&seen.questions.to_write, &mut w);
        w
    }

    /// Writes each final plugin verdict onto its ManifestWork (with the labels and
    /// annotations of a relabel, so one write serves both), unless this pass already
    /// writes that ManifestWork: the next pass will.
    fn write_verdicts(&self, verdicts: &[(Arc<str>, String)], w: &mut Writes) {
        if verdicts.is_empty() {
            return;
        }
        let written: HashSet<&str> = w
            .works
            .iter()
            .map(|c| match c {
                WorkChange::Apply(a) => a.cluster.as_str(),
                WorkChange::Relabel { cluster, .. } | WorkChange::Delete { cluster, .. } => {
                    cluster.as_str()
                }
            })
            .collect();
        let mut verdict_writes = Vec::new();
        for (cluster, value) in verdicts {
            let Some(row) = self.clusters.get(cluster) else {
                continue;
            };
            let (Some(work), Some(d), Some(rev)) = (row.work, &row.desired, row.carried) else {
                continue;
            };
            if written.contains(&**cluster) {
                continue;
            }
            let placement = &self.observed.mwrs.spec.placement_refs[d.placement].name;
            let mut annotations = self.relabel_annotations(work);
            annotations.insert(labels::PLUGIN_VERDICT.into(), value.clone());
            verdict_writes.push(WorkChange::Relabel {
                cluster: cluster.to_string(),
                name: work.name.to_string(),
                labels: self.work_labels(placement, self.rev_name(rev)),
                dropped_labels: self.dropped_labels(work),
                annotations,
                resource_version: version(work),
            });
        }
        // Relabels come before deletes (the order `Plan::works` promises).
        let at = w
            .works
            .iter()
            .position(|c| matches!(c, WorkChange::Delete { .. }))
            .unwrap_or(w.works.len());
        w.works.splice(at..at, verdict_writes);
    }

    /// The write of `revision` into `cluster`'s ManifestWork by a pass at `now`.
    pub(super) fn apply(
        &self,
        cluster: &str,
        d_placement: usize,
        (revision, template): ToWrite<'_>,
        now: Timestamp,
    ) -> Option<WorkApply> {
        let placement = &self
            .observed
            .mwrs
            .spec
            .placement_refs
            .get(d_placement)?
            .name;
        let row = self.clusters.get(cluster);
        let existing = row.and_then(|s| s.work);
        // A ManifestWork on the way out keeps its name until the agent is done with it.
        if existing.is_none() && row.is_some_and(|s| s.name_blocked) {
            return None;
        }
        // The same update would be refused again; the watch bringing the hub's version
        // brings the next pass.
        if existing.is_some_and(|w| w.update_refused) {
            return None;
        }
        let mut annotations = self.owner_annotations();
        // The first write of a revision into this ManifestWork is its anchor for deadlines
        // and soak; a rewrite of the same revision (hand edit, lost write) keeps it.
        let applied_at = existing
            .filter(|w| w.hash() == Some(revision))
            .and_then(|w| w.annotation(labels::REVISION_APPLIED_AT))
            .map_or_else(|| now.to_string(), str::to_string);
        annotations.insert(labels::REVISION_APPLIED_AT.into(), applied_at);
        Some(WorkApply {
            cluster: cluster.to_string(),
            name: existing.map_or_else(|| self.owner.work_name(), |w| w.name.to_string()),
            create: existing.is_none(),
            revision: revision.to_string(),
            template: template.clone(),
            placement: placement.clone(),
            labels: self.shared(self.work_labels(placement, revision)),
            annotations: self.shared(annotations),
            resource_version: existing.and_then(version),
            spec: None,
            dropped_labels: existing.map_or_else(Vec::new, |w| self.dropped_labels(w)),
        })
    }

    pub(super) fn work_labels(&self, placement: &str, revision: &str) -> BTreeMap<String, String> {
        let mut l: BTreeMap<String, String> = copied_labels(
            self.observed.mwrs.metadata.labels.as_ref(),
            &self.cfg.labels_not_copied,
        )
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
        l.insert(self.owner_label.0.into(), self.owner_label.1.clone());
        if let Some((k, v)) = self.owner.collector_mark() {
            l.insert(k.into(), v);
        }
        l.insert(labels::PLACEMENT_NAME.into(), placement.into());
        l.insert(labels::CONTROLLER_HASH.into(), revision.into());
        l
    }

    /// The labels `w` carries that this MWRS's must not put there
    /// ([`super::PlanConfig::labels_not_copied`]).
    fn dropped_labels(&self, w: &WorkView) -> Vec<String> {
        let not_copied = self.cfg.labels_not_copied.iter();
        not_copied
            .filter(|k| w.label(k).is_some())
            .cloned()
            .collect()
    }

    pub(super) fn owner_annotations(&self) -> BTreeMap<String, String> {
        BTreeMap::from([(
            labels::MWRS_OWNER_ANNOTATION.to_string(),
            self.owner.slashed(),
        )])
    }

    /// Rolling forward: write the update revision to every ToApply cluster the engine
    /// releases, once its plugin (if any) has answered BeginRollout. Returns when to look
    /// again for a cluster that waits for that answer.
    pub(super) fn roll_forward(
        &self,
        verdicts: &[Option<RolloutResult>],
        update: ToWrite<'_>,
        w: &mut Writes,
    ) -> Option<Timestamp> {
        let mut next = None;
        for r in verdicts.iter().flatten() {
            for c in r
                .to_rollout
                .iter()
                .filter(|c| c.status == RolloutStatus::ToApply)
            {
                let Some(d) = self.clusters.desired(&c.cluster) else {
                    continue;
                };
                let calls = (&mut w.begins, &mut next);
                let Some(mutation) = self.may_begin(&c.cluster, d.placement, update, calls) else {
                    continue;
                };
                if let Some(a) = self.apply(&c.cluster, d.placement, update, self.now) {
                    w.works.push(WorkChange::Apply(self.mutated(a, mutation)));
                }
            }
        }
        next
    }

    /// Holding an abort: every owned ManifestWork and every desired cluster gets the
    /// stable revision, all at once, whatever the strategy. Returns when a BeginAbort
    /// not answered yet is due again.
    pub(super) fn revert_to_stable(
        &self,
        stable: ToWrite<'_>,
        w: &mut Writes,
    ) -> Option<Timestamp> {
        let target = stable.0;
        let id = self.ids.id(target);
        let mut next: Option<Timestamp> = None;
        for (cluster, row) in self.clusters.rows.iter() {
            let Some(i) = self.placement_index_of(row) else {
                continue;
            };
            // A plugin hears of a revert, not of a rewrite of the revision it carries.
            let reverting =
                row.work.is_some() && row.carried.map(|c| self.rev_name(c)) != Some(target);
            match self.abort_notice(cluster, i, stable, reverting) {
                Ok(notice) => w.begins.push(notice),
                Err(Some(at)) => next = Some(next.map_or(at, |n| n.min(at))),
                Err(None) => {}
            }
            // Written at once, and again with the spec the plugin returns if it returns
            // one: an abort waits for no plugin.
            let mutation = self.revert_mutation(cluster, i, target);
            if self.carries_in(row, id) && self.carries_mutation(row.work, target, mutation) {
                continue;
            }
            if let Some(a) = self.apply(cluster, i, stable, self.now) {
                w.works.push(WorkChange::Apply(self.mutated(a, mutation)));
            }
        }
        next
    }

    /// The placementRef a cluster belongs to: the one selecting it, else the one its
    /// ManifestWork names.
    pub(super) fn placement_index_of(&self, row: &ClusterRow<'a>) -> Option<usize> {
        if let Some(d) = &row.desired {
            return Some(d.placement);
        }
        let name = row.work?.placement()?;
        self.observed
            .mwrs
            .spec
            .placement_refs
            .iter()
            .position(|r| r.name == name)
    }

    /// May ManifestWorks of clusters no placementRef selects be deleted now? Only when
    /// the selection is known for certain (rules §11.5): every placementRef of the spec
    /// resolves to complete decisions that have not changed for the settle time. Err
    /// carries when to look again (None: only a change on the hub can open the gate).
    pub(super) fn unselected_may_go(&self) -> Result<(), Option<SignedDuration>> {
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
    pub(super) fn relabel_annotations(&self, w: &WorkView) -> BTreeMap<String, String> {
        let mut a = self.owner_annotations();
        if w.annotation(labels::REVISION_APPLIED_AT).is_none() {
            a.insert(labels::REVISION_APPLIED_AT.into(), self.now.to_string());
        }
        a
    }

    pub(super) fn relabel_and_delete(&self, target: &str, w: &mut Writes) {
        // By row position: the writes are a few per cent of the clusters, and hashing
        // every cluster's name to ask was a cache miss per cluster on a large fleet.
        let mut applied = vec![false; self.clusters.rows.len()];
        for c in &w.works {
            if let WorkChange::Apply(a) = c
                && let Some(i) = self.clusters.rows.position(&a.cluster)
            {
                applied[i] = true;
            }
        }
        let mut relabels = Vec::new();
        let mut deletes = Vec::new();
        let id = self.ids.id(target);
        let gate = self.unselected_may_go();
        let mut withheld = false;
        for (i, (cluster, row)) in self.clusters.rows.iter().enumerate() {
            let (Some(w), duplicates) = (row.work, &row.duplicates) else {
                continue;
            };
            match &row.desired {
                None => {
                    // Unselected: delete once the selection is certain (rules §10.12,
                    // §11.5); whatever revision it carries.
                    if gate.is_ok() {
                        deletes.extend(std::iter::once(w).chain(duplicates.iter().copied()));
                    } else {
                        withheld = true;
                    }
                    continue;
                }
                Some(d) => {
                    if !applied[i] {
                        let placement = &self.observed.mwrs.spec.placement_refs[d.placement].name;
                        if let Some(rev) = row.carried
                            && !row.facts.labelled
                        {
                            relabels.push(WorkChange::Relabel {
                                cluster: cluster.to_string(),
                                name: w.name.to_string(),
                                labels: self.work_labels(placement, self.rev_name(rev)),
                                dropped_labels: self.dropped_labels(w),
                                annotations: self.relabel_annotations(w),
                                resource_version: version(w),
                            });
                        }
                    }
                }
            }
            // Duplicates left by upstream's controller go once the survivor is settled.
            if !duplicates.is_empty() && !applied[i] && self.carries_in(row, id) {
                deletes.extend(duplicates.iter().copied());
            }
        }
        drop(applied);
        if withheld && let Err(Some(wait)) = gate {
            w.recheck = Some(w.recheck.map_or(wait, |r| r.min(wait)));
        }
        w.works.extend(relabels);
        w.works
            .extend(deletes.into_iter().map(|w| WorkChange::Delete {
                cluster: w.cluster.to_string(),
                name: w.name.to_string(),
                resource_version: version(w),
            }));
    }
}

/// The version a change to `work` is planned on.
fn version(work: &WorkView) -> Option<String> {
    work.resource_version.as_deref().map(String::from)
}
