//! A plan carried out after the world moved on changes nothing it was not planned on:
//! every change to an object that exists names the version it was planned on, and the
//! API server refuses it at any other (rules §12; security review S2). Without that, a
//! replica frozen between planning and writing, or a cache that lags, deletes what
//! another writer has since changed or created again.
//!
//! The plan here is made by the controller's own code (stores, planner, executor) on a
//! real hub; between planning and executing, the test changes what the plan deletes.
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`); skipped without it unless CI=true.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{create_app_for_all, patch_mwrs, start_agent_succeeding, wait_complete};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_api::work::ManifestWork;
use mwrs_controller::context::Config;
use mwrs_controller::crd::{SchemaWatch, TemplateDrift};
use mwrs_controller::metrics::Metrics;
use mwrs_controller::store_view::StoreView;
use mwrs_controller::watch::{self, Stores};
use mwrs_controller::{Context, execute};
use mwrs_engine::plan::{Plan, RevisionChange, WorkChange};
use mwrs_fleet::placement::DecisionGroup;
use mwrs_testsupport::{TestHub, configmap_template, wait_for};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);

/// The controller's runtime without its reconcile loop: stores fed by their watches, and
/// the gate open once the CRD has been read.
async fn runtime(hub: &TestHub) -> Context {
    let client: Client = hub.client.clone();
    let (stores, triggers) = watch::build(watch::Scope {
        client: &client,
        namespace: Some(&hub.namespace),
        silence: Default::default(),
    });
    // The reflectors only run while their streams are polled.
    tokio::spawn(triggers.mwrs.for_each(|_| async {}));
    tokio::spawn(triggers.works.for_each(|_| async {}));
    tokio::spawn(triggers.revisions.for_each(|_| async {}));
    tokio::spawn(triggers.placements.for_each(|_| async {}));
    tokio::spawn(triggers.decisions.for_each(|_| async {}));
    stores.wait_ready().await;
    let metrics = Arc::new(Metrics::new());
    let schema = SchemaWatch::start(
        client.clone(),
        metrics.clone(),
        Duration::from_secs(30),
        Default::default(),
    );
    tokio::time::timeout(WAIT, schema.usable())
        .await
        .expect("the CRD is readable");
    let config = Config {
        namespace: Some(hub.namespace.clone()),
        ..Config::default()
    };
    Context::new(
        client,
        stores,
        metrics,
        (config, Arc::default()),
        schema,
        Arc::new(TemplateDrift::new(Vec::new())),
    )
}

/// The controller's plan for `mwrs` from the stores as they are now.
fn plan_now(stores: &Stores, mwrs: &ManifestWorkReplicaSet, ctx: &Context) -> (StoreView, Plan) {
    let snap = StoreView::gather(stores, mwrs, Vec::new(), Vec::new());
    let plugins = ctx.plugins.inputs(&stores_key(mwrs));
    let observed = snap.observed(mwrs, &plugins);
    let plan = mwrs_engine::plan(&observed, jiff::Timestamp::now(), &ctx.config.plan);
    (snap, plan)
}

fn stores_key(mwrs: &ManifestWorkReplicaSet) -> String {
    format!(
        "{}/{}",
        mwrs.namespace().unwrap_or_default(),
        mwrs.name_any()
    )
}

fn deletes(plan: &Plan) -> (Vec<String>, Vec<String>) {
    let works = plan
        .works
        .iter()
        .filter_map(|c| match c {
            WorkChange::Delete { cluster, .. } => Some(cluster.clone()),
            _ => None,
        })
        .collect();
    let revisions = plan
        .revisions
        .iter()
        .filter_map(|c| match c {
            RevisionChange::Delete { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect();
    (works, revisions)
}

/// MWRS `app` as the stores show it, once its history limit of 0 has reached them.
fn stored_app(hub: &TestHub, ctx: &Context) -> Result<ManifestWorkReplicaSet, String> {
    let mwrs = ctx
        .stores
        .mwrs
        .state()
        .into_iter()
        .find_map(|m| {
            let m = m.0.as_ref().ok()?;
            (m.name_any() == "app" && m.namespace().as_deref() == Some(&hub.namespace))
                .then(|| m.clone())
        })
        .ok_or("no MWRS in the store")?;
    if mwrs.spec.revision_history_limit != Some(0) {
        return Err("the history limit has not reached the store".to_string());
    }
    Ok(mwrs)
}

/// Waits until the stores show MWRS `app` and a plan for it deletes cluster `gone`'s
/// ManifestWork and one revision; returns the MWRS, the plan and the revision's name.
async fn stale_plan_to_be(
    hub: &TestHub,
    ctx: &Context,
    gone: &str,
) -> (ManifestWorkReplicaSet, Plan, String) {
    wait_for(
        "a plan deleting a ManifestWork and a revision",
        WAIT,
        || async {
            let mwrs = stored_app(hub, ctx)?;
            let (_, plan) = plan_now(&ctx.stores, &mwrs, ctx);
            match deletes(&plan) {
                (works, revisions) if works == [gone] && revisions.len() == 1 => {
                    let revision = revisions[0].clone();
                    Ok((mwrs, plan, revision))
                }
                other => Err(format!("deletes planned: {other:?}")),
            }
        },
    )
    .await
}

#[tokio::test]
async fn a_plan_carried_out_after_its_objects_changed_changes_nothing() {
    let Some((hub, controller)) = common::started("preconditions", 2).await else {
        return;
    };
    let _agent = start_agent_succeeding(&hub, Duration::from_millis(100));
    create_app_for_all(&hub).await;
    let v1 = wait_complete(&hub, "app", None).await;
    hub.set_template("app", configmap_template("v2")).await;
    wait_complete(&hub, "app", common::current(&v1).as_deref()).await;
    // The controller stops; what follows is one pass of its code, held between
    // planning and writing.
    drop(controller);

    let ctx = runtime(&hub).await;
    let (kept, gone) = (hub.clusters[0].clone(), hub.clusters[1].clone());
    hub.publish("p", &[DecisionGroup::new("", vec![kept])])
        .await;
    patch_mwrs(&hub, "app", &json!({"spec": {"revisionHistoryLimit": 0}})).await;
    let (mwrs, plan, revision) = stale_plan_to_be(&hub, &ctx, &gone).await;

    // Meanwhile another writer (a new leader) changes the revision and creates the
    // cluster's ManifestWork again.
    let revisions: Api<ControllerRevision> = Api::namespaced(hub.client.clone(), &hub.namespace);
    let note = json!({"metadata": {"annotations": {"test/seen-by": "another writer"}}});
    revisions
        .patch(&revision, &PatchParams::default(), &Patch::Merge(&note))
        .await
        .expect("annotate the revision");
    let works: Api<ManifestWork> = Api::namespaced(hub.client.clone(), &gone);
    let work_name = format!("{}.app", hub.namespace);
    let old = works.get(&work_name).await.expect("the ManifestWork");
    works
        .delete(&work_name, &DeleteParams::default())
        .await
        .expect("delete");
    wait_for("the ManifestWork gone", WAIT, || async {
        match works.get_opt(&work_name).await {
            Ok(None) => Ok(()),
            other => Err(format!("{:?}", other.map(|o| o.map(|w| w.uid())))),
        }
    })
    .await;
    let mut again = ManifestWork::new(&work_name, old.spec.clone());
    again.metadata.labels = old.metadata.labels.clone();
    again.metadata.annotations = old.metadata.annotations.clone();
    let again = works
        .create(&PostParams::default(), &again)
        .await
        .expect("create it again");

    let result = execute::execute(&ctx, &mwrs, &plan).await;
    assert!(
        result.as_ref().is_err_and(|e| e.is_conflict()),
        "the stale plan is refused as a conflict: {:?}",
        result.map(|e| e.writes)
    );
    let still = works.get_opt(&work_name).await.expect("read");
    assert_eq!(
        still.map(|w| w.uid()),
        Some(again.uid()),
        "the ManifestWork created again survives a delete planned on the one before it"
    );
    assert!(
        revisions.get_opt(&revision).await.expect("read").is_some(),
        "the revision changed since the plan survives its pruning"
    );

    // The guard refuses what changed, not what is due: planned again on what the stores
    // show, the same deletes go through. Revisions are written before ManifestWorks, so a
    // pass planned while the stores still lag the ManifestWork made again deletes the
    // revision and is refused on the ManifestWork; the next pass finishes it.
    wait_for("a fresh plan carried out deleting both", WAIT, || async {
        let mwrs = stored_app(&hub, &ctx)?;
        let (_, plan) = plan_now(&ctx.stores, &mwrs, &ctx);
        let (planned_works, planned_revisions) = deletes(&plan);
        assert!(
            planned_works.iter().all(|c| *c == gone)
                && planned_revisions.iter().all(|r| *r == revision),
            "a fresh plan deletes only what the stale one did: {planned_works:?}, \
             {planned_revisions:?}"
        );
        let carried_out = execute::execute(&ctx, &mwrs, &plan).await;
        let work = works.get_opt(&work_name).await.map_err(|e| e.to_string())?;
        let rev = revisions
            .get_opt(&revision)
            .await
            .map_err(|e| e.to_string())?;
        match (work, rev) {
            (None, None) => Ok(()),
            (work, rev) => Err(format!(
                "still there: ManifestWork {:?}, revision {:?}; the pass: {:?}",
                work.map(|w| w.uid()),
                rev.map(|r| r.name_any()),
                carried_out.map(|e| e.writes)
            )),
        }
    })
    .await;
}
