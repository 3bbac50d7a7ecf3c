//! Revision history on the real test hub: undo to a stored revision, history pruning
//! and a forced hash collision.
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`); skipped without it unless CI=true.

mod common;

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use common::{
    Timeline, WAIT, assert_works_on, current, describe, hash_label, revisions_of,
    start_agent_succeeding, update, wait_complete,
};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::ResourceExt;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use mwrs_api::labels;
use mwrs_engine::hash::revision_hash;
use mwrs_fleet::{Agent, AgentConfig};
use mwrs_testsupport::{TestHub, configmap_template, has_condition, mwrs, wait_for};
use serde_json::{Value, json};

fn crs_api(hub: &TestHub) -> Api<ControllerRevision> {
    Api::namespaced(hub.client.clone(), &hub.namespace)
}

/// Replaces spec.manifestWorkTemplate exactly (JSON patch, so no merge with the old one).
async fn replace_template(hub: &TestHub, name: &str, template: &Value) {
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "replace", "path": "/spec/manifestWorkTemplate", "value": template}
    ]))
    .expect("json patch");
    if let Err(e) = hub
        .mwrs_api()
        .patch(name, &PatchParams::default(), &Patch::Json::<()>(patch))
        .await
    {
        panic!("cannot patch MWRS {name}: {e}");
    }
}

/// 1. Undo: v1 → v2 → template set back from v1's ControllerRevision. The stored
/// revision is reused (renumbered, not re-created) and rolled out again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_reuses_the_stored_revision() {
    let Some((hub, _controller)) = common::started("undo", 3).await else {
        return;
    };
    // Slow enough that the in-progress state of each rollout can be seen.
    let _agent = start_agent_succeeding(&hub, Duration::from_millis(1500));
    hub.create_mwrs(&mwrs(
        "app",
        configmap_template("v1"),
        &[("p", json!({"type": "All"}))],
    ))
    .await;
    let v1 = current(&wait_complete(&hub, "app", None).await).expect("v1");
    hub.set_template("app", configmap_template("v2")).await;
    let v2 = current(&wait_complete(&hub, "app", Some(&v1)).await).expect("v2");
    assert_ne!(v1, v2);
    assert_works_on(&hub, "app", &hub.clusters, &v2).await;

    let before = revisions_of(&hub, "app").await;
    assert_eq!(before.len(), 2, "one revision per template");
    let v1_cr = before
        .iter()
        .find(|cr| hash_label(*cr).as_deref() == Some(v1.as_str()))
        .expect("v1's ControllerRevision (by controller-hash label)")
        .clone();
    assert_eq!(v1_cr.revision, 1);
    let v2_cr = before
        .iter()
        .find(|cr| hash_label(*cr).as_deref() == Some(v2.as_str()))
        .expect("v2's ControllerRevision");
    assert_eq!(v2_cr.revision, 2);
    let data = v1_cr.data.clone().expect("v1 data").0;

    // Undo: the template becomes v1's stored data.
    let timeline = Timeline::watch(&hub, "app").await;
    replace_template(&hub, "app", &data).await;
    let done = wait_complete(&hub, "app", Some(&v2)).await;
    timeline
        .wait_in_order(&["FoundNewRevision", "NewManifestWorkAvailable"])
        .await;
    let seen: Vec<(String, String)> = timeline
        .entries()
        .into_iter()
        .map(|m| (m.status, m.reason))
        .collect();
    assert_eq!(current(&done).as_deref(), Some(v1.as_str()), "back on v1");
    assert_eq!(update(&done).as_deref(), Some(v1.as_str()));
    let found = seen
        .iter()
        .position(|(s, r)| s == "True" && r == "FoundNewRevision");
    // The first entry may still be v2's completion: look for the end after the start.
    let end = found.and_then(|a| {
        seen[a..]
            .iter()
            .position(|(s, r)| s == "False" && r == "NewManifestWorkAvailable")
    });
    assert!(
        found.is_some() && end.is_some(),
        "Progressing True FoundNewRevision, then NewManifestWorkAvailable: {seen:?}"
    );
    assert!(
        !seen.iter().any(|(_, r)| r == "NewRevisionCreated"),
        "an undo creates no revision: {seen:?}"
    );
    let events = hub.events_of("app").await;
    assert!(
        events.iter().any(|(r, _)| r == "FoundNewRevision"),
        "a FoundNewRevision event: {events:?}"
    );
    assert_works_on(&hub, "app", &hub.clusters, &v1).await;

    let after = revisions_of(&hub, "app").await;
    assert_eq!(after.len(), 2, "no new ControllerRevision: {after:?}");
    let v1_after = after
        .iter()
        .find(|cr| hash_label(*cr).as_deref() == Some(v1.as_str()))
        .expect("v1's ControllerRevision");
    assert_eq!(
        v1_after.uid(),
        v1_cr.uid(),
        "v1's revision reused, not re-created"
    );
    assert_eq!(v1_after.name_any(), v1_cr.name_any());
    assert_eq!(v1_after.revision, 3, "undo renumbers to max + 1");
    assert_eq!(
        v1_after.data.as_ref().map(|d| &d.0),
        Some(&data),
        "data never mutated"
    );
}

/// 2. revisionHistoryLimit 1: after each of four templates completes, exactly the live
/// revision and the newest older one remain; a live revision is never missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_is_pruned_to_the_limit() {
    let Some((hub, _controller)) = common::started("prune", 2).await else {
        return;
    };
    let _agent = start_agent_succeeding(&hub, Duration::from_millis(300));
    let mut m = mwrs(
        "app",
        configmap_template("v1"),
        &[("p", json!({"type": "All"}))],
    );
    m.spec.revision_history_limit = Some(1);
    hub.create_mwrs(&m).await;

    let missing_live: Mutex<Vec<String>> = Mutex::default();
    let mut hashes: Vec<String> = Vec::new();
    for i in 1..=4 {
        if i > 1 {
            hub.set_template("app", configmap_template(&format!("v{i}")))
                .await;
        }
        let prev = hashes.last().cloned();
        let h = wait_for(&format!("v{i} to complete"), WAIT, || {
            let (hub, missing_live, prev) = (&hub, &missing_live, &prev);
            async move {
                let m = hub.get_mwrs("app").await.ok_or("no MWRS")?;
                // CRs listed after the status read: a live revision named there must exist.
                let names: BTreeSet<String> = revisions_of(hub, "app")
                    .await
                    .iter()
                    .filter_map(hash_label)
                    .collect();
                for live in [current(&m), update(&m)].into_iter().flatten() {
                    if !names.contains(&live) {
                        missing_live
                            .lock()
                            .expect("lock")
                            .push(format!("{live} missing; CRs {names:?}"));
                    }
                }
                let cur = current(&m);
                if cur.is_some()
                    && cur == update(&m)
                    && cur != *prev
                    && has_condition(&m, "PlacementRolledOut", "True", "Complete")
                {
                    Ok(cur.unwrap_or_default())
                } else {
                    Err(describe(&m))
                }
            }
        })
        .await;
        hashes.push(h.clone());
        assert_works_on(&hub, "app", &hub.clusters, &h).await;
        let expected: BTreeSet<String> = hashes.iter().rev().take(2).cloned().collect();
        let kept = wait_for(
            &format!("history after v{i} to be {expected:?}"),
            WAIT,
            || {
                let (hub, expected) = (&hub, &expected);
                async move {
                    let crs = revisions_of(hub, "app").await;
                    let got: BTreeSet<String> = crs.iter().filter_map(hash_label).collect();
                    if got == *expected && crs.len() == expected.len() {
                        Ok(crs)
                    } else {
                        Err(format!("CRs {got:?} ({} objects)", crs.len()))
                    }
                }
            },
        )
        .await;
        let live = kept
            .iter()
            .find(|cr| hash_label(*cr).as_deref() == Some(h.as_str()))
            .expect("live CR");
        assert_eq!(live.revision, i64::from(i), "revision numbers increase");
    }
    let missing = missing_live.into_inner().expect("lock");
    assert!(
        missing.is_empty(),
        "live revisions went missing: {missing:?}"
    );
    assert_eq!(
        hashes.iter().collect::<BTreeSet<_>>().len(),
        4,
        "four distinct revisions: {hashes:?}"
    );
}

/// 3. A ControllerRevision with other content already on v2's name: collisionCount
/// becomes 1 and v2 rolls out under the hash with the collision suffix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hash_collision_bumps_collision_count() {
    let Some((hub, _controller)) = common::started("collision", 2).await else {
        return;
    };
    let _agent = Agent::start(hub.client.clone(), AgentConfig::new(hub.clusters.clone()));
    let t1 = configmap_template("v1");
    let t2 = configmap_template("v2");
    hub.create_mwrs(&mwrs("app", t1.clone(), &[("p", json!({"type": "All"}))]))
        .await;
    let v1 = current(&wait_complete(&hub, "app", None).await).expect("v1");
    assert_eq!(
        v1,
        revision_hash(&t1, 0),
        "the test's hash of the template matches the controller's"
    );

    let plain = revision_hash(&t2, 0);
    let squatter = ControllerRevision {
        metadata: ObjectMeta {
            name: Some(format!("app-{plain}")),
            namespace: Some(hub.namespace.clone()),
            labels: Some(
                [
                    (
                        labels::MWRS_OWNER.to_string(),
                        format!("{}.app", hub.namespace),
                    ),
                    (labels::CONTROLLER_HASH.to_string(), plain.clone()),
                ]
                .into(),
            ),
            ..Default::default()
        },
        data: Some(RawExtension(configmap_template("squatter"))),
        revision: 1,
    };
    crs_api(&hub)
        .create(&PostParams::default(), &squatter)
        .await
        .expect("create the colliding ControllerRevision");

    hub.set_template("app", t2.clone()).await;
    let done = wait_complete(&hub, "app", Some(&v1)).await;
    let suffixed = revision_hash(&t2, 1);
    assert_ne!(suffixed, plain);
    let s = done.status.clone().unwrap_or_default();
    assert_eq!(s.collision_count, Some(1), "{}", describe(&done));
    assert_eq!(s.update_revision.as_deref(), Some(suffixed.as_str()));
    assert_eq!(s.current_revision.as_deref(), Some(suffixed.as_str()));
    assert_works_on(&hub, "app", &hub.clusters, &suffixed).await;

    let cr = crs_api(&hub)
        .get(&format!("app-{suffixed}"))
        .await
        .expect("v2's ControllerRevision under the suffixed hash");
    assert_eq!(cr.data.map(|d| d.0), Some(t2), "holds v2's template");
    let other = crs_api(&hub)
        .get_opt(&format!("app-{plain}"))
        .await
        .expect("get");
    if let Some(other) = other {
        assert_eq!(
            other.data.map(|d| d.0),
            Some(configmap_template("squatter")),
            "the colliding revision is not overwritten"
        );
    }
}

/// ControllerRevisions on the names the next revisions would get, which this MWRS does
/// not own: one with no owner label and other content, one with our owner label but
/// another owner's annotation (marks that disagree prove nothing, rules §11.4). Each is a collision: collisionCount moves on, the squatter is left
/// alone and the rollout converges (issue #12; before, a 409 every 300 ms for ever).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn squatting_revisions_are_collisions() {
    let Some((hub, _controller)) = common::started("squat", 2).await else {
        return;
    };
    let _agent = Agent::start(hub.client.clone(), AgentConfig::new(hub.clusters.clone()));
    let unlabelled = |name: String| ControllerRevision {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(hub.namespace.clone()),
            ..Default::default()
        },
        data: Some(RawExtension(configmap_template("someone else's"))),
        revision: 1,
    };
    let mixed_marks = |name: String, hash: &str| ControllerRevision {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(hub.namespace.clone()),
            labels: Some(
                [
                    (
                        labels::MWRS_OWNER.to_string(),
                        format!("{}.app", hub.namespace),
                    ),
                    (labels::CONTROLLER_HASH.to_string(), hash.to_string()),
                ]
                .into(),
            ),
            annotations: Some(
                [(
                    labels::MWRS_OWNER_ANNOTATION.to_string(),
                    "other/app".to_string(),
                )]
                .into(),
            ),
            ..Default::default()
        },
        data: Some(RawExtension(json!({"not": "a template"}))),
        revision: 1,
    };
    let (t1, t2) = (configmap_template("v1"), configmap_template("v2"));
    let h1 = revision_hash(&t1, 0);
    let h2 = revision_hash(&t2, 1);
    crs_api(&hub)
        .create(&PostParams::default(), &unlabelled(format!("app-{h1}")))
        .await
        .expect("create the unlabelled squatter");
    hub.create_mwrs(&mwrs("app", t1.clone(), &[("p", json!({"type": "All"}))]))
        .await;
    let m = wait_complete(&hub, "app", None).await;
    let s = m.status.clone().unwrap_or_default();
    assert_eq!(s.collision_count, Some(1), "{}", describe(&m));
    assert_eq!(s.current_revision, Some(revision_hash(&t1, 1)));

    // The next template, with collisionCount 1, would be named app-<h2>: squatted too.
    crs_api(&hub)
        .create(
            &PostParams::default(),
            &mixed_marks(format!("app-{h2}"), &h2),
        )
        .await
        .expect("create the squatter with mixed marks");
    hub.set_template("app", t2.clone()).await;
    let m = wait_complete(&hub, "app", s.current_revision.as_deref()).await;
    let s = m.status.clone().unwrap_or_default();
    assert_eq!(s.collision_count, Some(2), "{}", describe(&m));
    assert_eq!(s.current_revision, Some(revision_hash(&t2, 2)));
    // The squatters are left alone.
    let first = crs_api(&hub)
        .get(&format!("app-{h1}"))
        .await
        .expect("squatter 1");
    assert_eq!(
        first.data.map(|d| d.0),
        Some(configmap_template("someone else's"))
    );
    let second = crs_api(&hub)
        .get(&format!("app-{h2}"))
        .await
        .expect("squatter 2");
    assert_eq!(second.data.map(|d| d.0), Some(json!({"not": "a template"})));
}
