//! Stage 5: the ManifestWork writes a pass makes after stages 1 to 4.

use std::collections::BTreeMap;
use std::sync::Arc;

use mwrs_api::Time;
use mwrs_api::labels;
use mwrs_api::mwrs::{ABORT_TRIGGER_REQUESTED, AbortRecord};

use crate::hash;

use super::super::{WorkApply, WorkChange};
use super::{Fixture, Reported, STABLE, mwrs, secs, t0};

fn writes(f: &Fixture) -> Vec<WorkChange> {
    let o = f.observed();
    let (_, _, writes) = f.pass(&o).decide();
    writes.works
}

fn applies(changes: &[WorkChange]) -> Vec<&WorkApply> {
    changes
        .iter()
        .filter_map(|c| match c {
            WorkChange::Apply(a) => Some(a),
            _ => None,
        })
        .collect()
}

#[test]
fn every_cluster_without_the_update_revision_gets_it() {
    let mut f = Fixture::new(mwrs(Some(STABLE)), &["c1", "c2", "c3"]);
    let update = f.store_update();
    f.work("c1", &update, secs(60), Reported::Done);
    f.work("c2", STABLE, secs(600), Reported::Done);
    let changes = writes(&f);
    let a = applies(&changes);
    assert_eq!(changes.len(), 2, "{changes:?}");
    let summary: Vec<_> = a
        .iter()
        .map(|a| {
            (
                a.cluster.as_str(),
                a.create,
                a.revision.as_str(),
                a.placement.as_str(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("c2", false, update.as_str(), "p"),
            ("c3", true, update.as_str(), "p")
        ]
    );
    for a in a {
        assert_eq!(a.labels[labels::CONTROLLER_HASH], update);
        assert_eq!(a.labels[labels::PLACEMENT_NAME], "p");
        assert_eq!(a.annotations[labels::MWRS_OWNER_ANNOTATION], "ns/app");
        assert_eq!(
            a.annotations[labels::REVISION_APPLIED_AT],
            t0().to_string(),
            "a new revision's deadlines start now"
        );
    }
}

#[test]
fn a_paused_rollout_writes_nothing_new() {
    let mut f = Fixture::new(mwrs(Some(STABLE)), &["c1", "c2"]);
    f.store_update();
    f.annotate(labels::CONTROL_PAUSE, "true");
    assert!(applies(&writes(&f)).is_empty());
}

#[test]
fn a_hand_edited_manifestwork_is_rewritten_and_keeps_its_deadline_anchor() {
    let mut f = Fixture::new(mwrs(Some(STABLE)), &["c1"]);
    let update = f.store_update();
    f.work("c1", &update, secs(60), Reported::Done);
    f.works[0].spec_digest = Some(hash::digest(&serde_json::json!({"edited": true})));
    f.works[0].resource_version = Some("41".into());
    let changes = writes(&f);
    let [WorkChange::Apply(a)] = changes.as_slice() else {
        panic!("one rewrite: {changes:?}");
    };
    assert!(!a.create);
    assert_eq!(
        a.resource_version.as_deref(),
        Some("41"),
        "written on what was read"
    );
    assert_eq!(
        a.annotations[labels::REVISION_APPLIED_AT],
        (t0() - secs(60)).to_string()
    );
}

#[test]
fn a_cluster_no_longer_selected_loses_its_manifestwork() {
    let mut f = Fixture::new(mwrs(Some(STABLE)), &["c1"]);
    let update = f.store_update();
    f.work("c1", &update, secs(60), Reported::Done);
    f.work("c9", &update, secs(60), Reported::Done);
    f.works[1].resource_version = Some("57".into());
    let changes = writes(&f);
    let name = f.works[1].name.to_string();
    assert_eq!(
        changes,
        [WorkChange::Delete {
            cluster: "c9".into(),
            name,
            // Refused by the API server if the object changed since (rules §12).
            resource_version: Some("57".into()),
        }]
    );
}

#[test]
fn a_held_abort_reverts_every_cluster_to_the_stable_revision_at_once() {
    let mut f = Fixture::new(mwrs(Some(STABLE)), &["c1", "c2", "c3"]);
    let update = f.store_update();
    f.work("c1", &update, secs(60), Reported::Degraded);
    f.work("c2", &update, secs(60), Reported::Done);
    f.work("c3", STABLE, secs(600), Reported::Done);
    let status = f.status();
    status.aborted_time = Some(Time(t0() - secs(5)));
    status.last_abort = Some(AbortRecord {
        trigger: ABORT_TRIGGER_REQUESTED.into(),
        time: Time(t0() - secs(5)),
        revision: update,
        reverted_to: Some(STABLE.into()),
        timed_out_clusters: vec![],
        timed_out_count: 0,
        failed_clusters: vec![],
        failed_count: 0,
    });
    let changes = writes(&f);
    let reverted: Vec<(&str, &str)> = applies(&changes)
        .iter()
        .map(|a| (a.cluster.as_str(), a.revision.as_str()))
        .collect();
    assert_eq!(reverted, [("c1", STABLE), ("c2", STABLE)]);
}

/// A GitOps tool's tracking label on the MWRS stays off its ManifestWorks (issue #51):
/// copied, it makes every ManifestWork look like a resource of the Application that owns
/// the MWRS, which its pruning deletes. One an earlier controller copied is taken off.
#[test]
fn gitops_tracking_labels_are_not_copied_and_are_taken_off() {
    let mut f = Fixture::new(mwrs(Some(STABLE)), &["c1", "c2", "c3"]);
    f.mwrs.metadata.labels = Some(BTreeMap::from([
        ("app.kubernetes.io/instance".to_string(), "apps".to_string()),
        (
            "kustomize.toolkit.fluxcd.io/name".to_string(),
            "apps".to_string(),
        ),
        ("team".to_string(), "a".to_string()),
    ]));
    let update = f.store_update();
    // c1 is written by an earlier controller that copied every label; c2 by this one.
    f.work("c1", &update, secs(60), Reported::Done);
    f.work("c2", &update, secs(60), Reported::Done);
    for (cluster, copied_all) in [("c1", true), ("c2", false)] {
        let w = f.works.iter_mut().find(|w| &*w.cluster == cluster).unwrap();
        let l = Arc::make_mut(&mut w.labels);
        l.insert("team".into(), "a".into());
        if copied_all {
            l.insert("app.kubernetes.io/instance".into(), "apps".into());
        }
    }
    let changes = writes(&f);
    let new = applies(&changes);
    assert_eq!(new.len(), 1, "{changes:?}");
    assert_eq!(new[0].cluster, "c3");
    assert_eq!(new[0].labels.get("team").map(String::as_str), Some("a"));
    assert!(!new[0].labels.contains_key("app.kubernetes.io/instance"));
    assert!(
        !new[0]
            .labels
            .contains_key("kustomize.toolkit.fluxcd.io/name")
    );
    let relabels: Vec<_> = changes
        .iter()
        .filter_map(|c| match c {
            WorkChange::Relabel {
                cluster,
                labels,
                dropped_labels,
                ..
            } => Some((cluster.as_str(), labels, dropped_labels)),
            _ => None,
        })
        .collect();
    assert_eq!(relabels.len(), 1, "c2 carries what it should: {changes:?}");
    let (cluster, labels, dropped) = relabels[0];
    assert_eq!(cluster, "c1");
    assert_eq!(dropped, &["app.kubernetes.io/instance".to_string()]);
    assert!(!labels.contains_key("app.kubernetes.io/instance"));

    // Configured to copy every label, as upstream does.
    f.cfg.labels_not_copied.clear();
    let changes = writes(&f);
    let new = applies(&changes);
    assert_eq!(new[0].labels["app.kubernetes.io/instance"], "apps");
    assert!(new[0].dropped_labels.is_empty());
}
