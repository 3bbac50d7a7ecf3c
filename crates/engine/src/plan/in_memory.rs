//! How a plan's writes land on objects held in memory, for the preview's simulated hub
//! and the engine's test hub: the same rules in both, as the API server would apply them
//! to what the planner reads back (a spec change bumps the generation, labels and
//! annotations merge, a revision's marks accumulate).

use super::*;

/// Carries out one revision change on `history`, a revision created at `now` for MWRS
/// generation `generation`.
pub fn apply_revision_change(
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
        }),
        RevisionChange::Renumber { name, revision } => {
            if let Some(i) = find(history, name) {
                history[i].revision = *revision;
            }
        }
        RevisionChange::Delete { name } => history.retain(|r| &r.name != name),
        RevisionChange::Mark { name, annotations } => {
            if let Some(i) = find(history, name) {
                history[i].marks = history[i].marks.with(annotations);
            }
        }
    }
}

/// Writes `apply` into `work`: the spec of digest `digest` (None: unknown, always a
/// change), its labels and annotations merged.
pub fn apply_work(work: &mut WorkView, apply: &WorkApply, digest: Option<Digest>) {
    if work.spec_digest != digest || digest.is_none() {
        work.generation += 1;
    }
    work.spec_digest = digest;
    relabel_work(work, &apply.labels, &apply.annotations);
}

/// Merges `labels` and `annotations` into `work`'s.
pub fn relabel_work(
    work: &mut WorkView,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) {
    work.labels.extend(labels.clone());
    work.annotations.extend(annotations.clone());
}
