//! How a plan's writes land on objects held in memory, for the preview's simulated hub
//! and the engine's test hub: one executor, with the rules the API server would apply to
//! what the planner reads back (a spec change bumps the generation, labels and
//! annotations merge, a revision's marks accumulate).

use std::ops::Index;
use std::sync::Arc;

use hashbrown::HashMap;
use jiff::Timestamp;
use mwrs_api::labels;
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use serde_json::Value;

use crate::hash::{self, Digest};
use crate::revision::RevisionView;
use crate::work::WorkView;

use super::output::{FinalizerAction, Plan, RevisionChange, WorkApply, WorkChange};

/// The ManifestWorks of one MWRS, at most one per cluster namespace, kept as one slice
/// the planner reads without a copy.
#[derive(Clone, Debug, Default)]
pub struct Works {
    list: Vec<WorkView>,
    /// Cluster → index in `list`.
    index: HashMap<Arc<str>, usize>,
}

impl Works {
    /// `views` keyed by cluster; a later view of a cluster replaces an earlier one.
    pub fn new(views: Vec<WorkView>) -> Self {
        let mut works = Self::default();
        for v in views {
            works.insert(v);
        }
        works
    }

    pub fn as_slice(&self) -> &[WorkView] {
        &self.list
    }

    pub fn into_vec(self) -> Vec<WorkView> {
        self.list
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn get(&self, cluster: &str) -> Option<&WorkView> {
        self.index.get(cluster).map(|i| &self.list[*i])
    }

    pub fn get_mut(&mut self, cluster: &str) -> Option<&mut WorkView> {
        self.index.get(cluster).map(|i| &mut self.list[*i])
    }

    pub fn contains(&self, cluster: &str) -> bool {
        self.index.contains_key(cluster)
    }

    /// Inserts `view`, replacing the ManifestWork of its cluster.
    pub fn insert(&mut self, view: WorkView) {
        match self.index.get(&*view.cluster) {
            Some(i) => self.list[*i] = view,
            None => {
                self.index.insert(view.cluster.clone(), self.list.len());
                self.list.push(view);
            }
        }
    }

    /// Removes the ManifestWork of `cluster` (the last one takes its place in the slice).
    pub fn remove(&mut self, cluster: &str) -> Option<WorkView> {
        let i = self.index.remove(cluster)?;
        let removed = self.list.swap_remove(i);
        if let Some(moved) = self.list.get(i) {
            self.index.insert(moved.cluster.clone(), i);
        }
        Some(removed)
    }

    pub fn iter(&self) -> impl Iterator<Item = &WorkView> {
        self.list.iter()
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut WorkView> {
        self.list.iter_mut()
    }

    /// The clusters, in name order.
    pub fn clusters(&self) -> Vec<&str> {
        let mut clusters: Vec<&str> = self.index.keys().map(|c| &**c).collect();
        clusters.sort_unstable();
        clusters
    }
}

/// The same ManifestWorks, in any order.
impl PartialEq for Works {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().all(|w| other.get(&w.cluster) == Some(w))
    }
}

impl Index<&str> for Works {
    type Output = WorkView;

    /// The ManifestWork of `cluster`; panics when there is none, like a map.
    fn index(&self, cluster: &str) -> &WorkView {
        self.get(cluster)
            .unwrap_or_else(|| panic!("no ManifestWork in cluster {cluster}"))
    }
}

/// The objects one MWRS's plans write, held in memory.
pub struct Objects<'a> {
    pub mwrs: &'a mut ManifestWorkReplicaSet,
    pub revisions: &'a mut Vec<RevisionView>,
    pub works: &'a mut Works,
}

impl Objects<'_> {
    /// Carries out `plan` at `now`; true when anything the planner reads changed.
    pub fn execute(&mut self, plan: &Plan, now: Timestamp) -> bool {
        let mut changed = !plan.revisions.is_empty() || !plan.works.is_empty();
        if plan.finalizer == FinalizerAction::Add {
            self.mwrs
                .metadata
                .finalizers
                .get_or_insert_with(Vec::new)
                .push(labels::MWRS_FINALIZER.into());
            changed = true;
        }
        let generation = self.mwrs.metadata.generation;
        for r in &plan.revisions {
            apply_revision_change(self.revisions, r, now, generation);
        }
        self.write_works(plan.works.iter().map(|w| (w, now)));
        if let Some(s) = &plan.status
            && self.mwrs.status.as_ref() != Some(s)
        {
            self.mwrs.status = Some(s.clone());
            changed = true;
        }
        changed
    }

    /// Carries out ManifestWork writes, each at its own time.
    pub fn write_works<'w>(
        &mut self,
        writes: impl IntoIterator<Item = (&'w WorkChange, Timestamp)>,
    ) {
        // One digest per spec, however many ManifestWorks it is written to.
        let mut digests = HashMap::new();
        for (w, now) in writes {
            self.apply_work_change(w, &mut digests, now);
        }
    }

    fn apply_work_change(
        &mut self,
        change: &WorkChange,
        digests: &mut HashMap<*const Value, Digest>,
        now: Timestamp,
    ) {
        match change {
            WorkChange::Apply(a) => {
                if !self.works.contains(&a.cluster) {
                    self.works
                        .insert(WorkView::created(&a.cluster, &a.name, now));
                }
                if let Some(work) = self.works.get_mut(&a.cluster) {
                    let spec = a.spec.as_ref().unwrap_or(&a.template);
                    let digest = *digests
                        .entry(Arc::as_ptr(spec))
                        .or_insert_with(|| hash::digest(spec));
                    apply_work(work, a, Some(digest));
                }
            }
            WorkChange::Relabel {
                cluster,
                name,
                labels,
                dropped_labels,
                annotations,
                resource_version: _,
            } => {
                if let Some(work) = self.works.get_mut(cluster).filter(|w| *w.name == **name) {
                    let carried = Arc::make_mut(&mut work.labels);
                    carried.retain(|k, _| !dropped_labels.contains(k));
                    carried.extend(labels.clone());
                    Arc::make_mut(&mut work.annotations).extend(annotations.clone());
                }
            }
            WorkChange::Delete { cluster, name, .. } => {
                if self.works.get(cluster).is_some_and(|w| *w.name == **name) {
                    self.works.remove(cluster);
                }
            }
        }
    }
}

/// Carries out one revision change on `history`, a revision created at `now` for MWRS
/// generation `generation`.
fn apply_revision_change(
    history: &mut Vec<RevisionView>,
    change: &RevisionChange,
    now: Timestamp,
    generation: Option<i64>,
) {
    let find = |history: &mut Vec<RevisionView>, name: &str| {
        history.iter_mut().position(|r| r.name == name)
    };
    match change {
        RevisionChange::Create {
            name,
            hash: h,
            revision,
            template,
            labels: _,
            annotations,
        } => history.push(RevisionView {
            marks: Default::default(),
            name: name.clone(),
            hash: h.clone(),
            revision: *revision,
            digest: hash::digest(template),
            template: template.clone(),
            created: Some(now),
            change_cause: annotations.get(labels::CHANGE_CAUSE).cloned(),
            generation,
            resource_version: None,
        }),
        RevisionChange::Renumber { name, revision, .. } => {
            if let Some(i) = find(history, name) {
                history[i].revision = *revision;
            }
        }
        RevisionChange::Delete { name, .. } => history.retain(|r| &r.name != name),
        RevisionChange::Mark {
            name, annotations, ..
        } => {
            if let Some(i) = find(history, name) {
                history[i].marks = history[i].marks.with(annotations);
            }
        }
    }
}

/// Writes `apply` into `work`: the spec of digest `digest` (None: unknown, always a
/// change), its labels and annotations merged.
fn apply_work(work: &mut WorkView, apply: &WorkApply, digest: Option<Digest>) {
    if work.spec_digest != digest || digest.is_none() {
        work.generation += 1;
    }
    work.spec_digest = digest;
    let labels = Arc::make_mut(&mut work.labels);
    labels.retain(|k, _| !apply.dropped_labels.contains(k));
    labels.extend((*apply.labels).clone());
    Arc::make_mut(&mut work.annotations).extend((*apply.annotations).clone());
}
