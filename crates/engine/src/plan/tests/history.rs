//! Stages 1 and 7: the revision of the spec (stored, found, renumbered) and pruning to
//! the history limit without ever deleting a revision in use.

use std::collections::BTreeSet;

use mwrs_api::labels;
use mwrs_api::mwrs::ManifestWorkReplicaSetStatus;
use serde_json::json;

use super::super::RevisionChange;
use super::{Fixture, Reported, STABLE, mwrs, revision, secs};

#[test]
fn a_new_template_is_stored_as_the_next_revision() {
    let mut f = Fixture::new(mwrs(Some(STABLE)), &["c1"]);
    f.annotate(labels::CHANGE_CAUSE, "bump v to 2");
    let o = f.observed();
    let step = f.pass(&o).revision_step();
    assert!(step.changed, "the status names no update revision yet");
    assert!(step.created);
    assert_eq!(step.collision_count, None);
    let [
        RevisionChange::Create {
            name,
            hash,
            revision,
            labels: l,
            annotations,
            ..
        },
    ] = step.changes.as_slice()
    else {
        panic!("one create: {:?}", step.changes);
    };
    assert_eq!(hash, &step.update);
    assert_eq!(name, &format!("app-{hash}"));
    assert_eq!(*revision, 2, "after the stable revision 1");
    assert_eq!(l.get(labels::CONTROLLER_HASH), Some(hash));
    assert_eq!(
        annotations
            .get(labels::REVISION_GENERATION)
            .map(String::as_str),
        Some("2")
    );
    assert_eq!(
        annotations.get(labels::CHANGE_CAUSE).map(String::as_str),
        Some("bump v to 2")
    );
    assert_eq!(
        annotations
            .get(labels::MWRS_OWNER_ANNOTATION)
            .map(String::as_str),
        Some("ns/app")
    );
}

#[test]
fn a_template_stored_before_is_renumbered_not_copied() {
    let mut f = Fixture::new(mwrs(Some(STABLE)), &["c1"]);
    let update = f.store_update();
    // A newer revision was rolled out since: going back renumbers the stored one.
    f.revisions.push(revision(
        "newer3",
        3,
        json!({"workload": {"manifests": [], "n": 3}}),
    ));
    f.status().update_revision = Some("newer3".into());
    f.mwrs.metadata.generation = Some(5);
    let o = f.observed();
    let step = f.pass(&o).revision_step();
    assert_eq!(step.update, update);
    assert!(step.changed);
    assert!(!step.created, "found in history, not new content");
    assert_eq!(
        step.changes,
        [RevisionChange::Renumber {
            name: format!("app-{update}"),
            revision: 4,
            // Guarded by the version it was planned on (rules §12).
            resource_version: Some(format!("rv-{update}")),
        }]
    );
}

#[test]
fn the_update_revision_in_the_status_changes_nothing() {
    let mut f = Fixture::new(mwrs(Some(STABLE)), &["c1"]);
    f.store_update();
    let o = f.observed();
    let step = f.pass(&o).revision_step();
    assert!(!step.changed);
    assert!(step.changes.is_empty());
    assert!(
        step.created,
        "stored for this generation by an earlier pass whose status write may be lost"
    );
}

/// Revisions 1 (stable) to 6 and the update revision 7, limit 2, a ManifestWork on
/// revision 3: what the status names and what a ManifestWork carries stays, then the two
/// newest of the rest.
#[test]
fn pruning_keeps_what_is_in_use_and_the_newest_of_the_rest() {
    let mut f = Fixture::new(mwrs(Some(STABLE)), &["c1", "c2"]);
    for n in 2..=6 {
        let template = json!({"workload": {"manifests": [], "n": n}});
        f.revisions.push(revision(&format!("old{n}"), n, template));
    }
    let update = f.store_update();
    f.mwrs.spec.revision_history_limit = Some(2);
    f.work("c1", "old3", secs(60), Reported::Done);
    // The stored status still names revision 4 as stable; this pass's status does not.
    f.status().current_revision = Some("old4".into());
    let new_status = ManifestWorkReplicaSetStatus {
        current_revision: Some(STABLE.into()),
        update_revision: Some(update),
        ..Default::default()
    };
    let o = f.observed();
    let deleted: BTreeSet<String> = f
        .pass(&o)
        .prune(&new_status)
        .into_iter()
        .map(|c| match c {
            RevisionChange::Delete {
                name,
                resource_version,
            } => {
                assert_eq!(resource_version, Some(format!("rv-{}", &name[4..])));
                name
            }
            other => panic!("only deletes: {other:?}"),
        })
        .collect();
    assert_eq!(deleted, BTreeSet::from(["app-old2".to_string()]));
}
