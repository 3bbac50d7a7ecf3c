//! The MWRS CRD replaced while the controller runs, as OCM's cluster-manager operator
//! does when it re-applies upstream's CRD over this project's (rules §11.6): with an
//! abort holding, the CRD loses this project's fields; the controller must stop every
//! write (so the held revision is not rolled out), turn not ready and say why on each
//! MWRS; once the CRD is restored it resumes on fresh stores and the hold is intact.
//!
//! The CRD is cluster-wide: this file holds this one test, so no other test of its
//! binary runs meanwhile, and no other binary either (scripts/run-tests.py runs it alone).
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`); skipped without it unless CI=true.

// run-tests: alone (changes cluster-wide objects of the shared test hub)

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::Ordering;

use common::{HeldAbort, aborted, current, start_agent_hanging, update, work_versions};
use futures::FutureExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use mwrs_controller::Shared;
use mwrs_controller::crd::CRD_NAME;
use mwrs_testsupport::{TestHub, wait_for};

/// This project's CRD without its own fields: what upstream's schema keeps.
fn without_our_fields(crd: &CustomResourceDefinition) -> CustomResourceDefinition {
    let mut v = serde_json::to_value(crd).unwrap();
    for version in v["spec"]["versions"].as_array_mut().unwrap() {
        let root = &mut version["schema"]["openAPIV3Schema"]["properties"];
        for f in [
            "currentRevision",
            "updateRevision",
            "collisionCount",
            "abortedTime",
            "handledControls",
        ] {
            root["status"]["properties"]
                .as_object_mut()
                .unwrap()
                .remove(f);
        }
        root["spec"]["properties"]
            .as_object_mut()
            .unwrap()
            .remove("revisionHistoryLimit");
        let strategy = &mut root["spec"]["properties"]["placementRefs"]["items"]["properties"]["rolloutStrategy"]
            ["properties"];
        strategy.as_object_mut().unwrap().remove("failureStrategy");
    }
    serde_json::from_value(v).unwrap()
}

async fn replace_crd(api: &Api<CustomResourceDefinition>, with: &CustomResourceDefinition) {
    let mut with = with.clone();
    let now = api.get(CRD_NAME).await.unwrap();
    with.metadata.resource_version = now.resource_version();
    with.metadata.managed_fields = None;
    api.replace(CRD_NAME, &PostParams::default(), &with)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crd_without_our_fields_stops_every_write_until_restored() {
    let Some(hub) = TestHub::from_env("crdswap", 2).await else {
        return;
    };
    let shared = Shared::default();
    let _controller = common::start_controller_sharing(&hub, shared.clone());
    let _agent = start_agent_hanging(&hub, &hub.clusters[0], "v2");
    let HeldAbort { v1, v2, since } = common::hold_an_abort(&hub).await;
    let versions = work_versions(&hub).await;

    let crds: Api<CustomResourceDefinition> = Api::all(hub.client.clone());
    let ours = crds.get(CRD_NAME).await.unwrap();
    replace_crd(&crds, &without_our_fields(&ours)).await;
    let outage = async {
        wait_for("an Event on the MWRS", common::WAIT, || async {
            let events = hub.events_of("app").await;
            if events.iter().any(|(r, _)| r == "StateFieldsMissing") {
                Ok(())
            } else {
                Err(format!("{events:?}"))
            }
        })
        .await;
        assert!(!shared.ready.load(Ordering::Acquire), "not ready meanwhile");
        assert_eq!(shared.metrics.crd_usable.get(), 0);
        // The held v2 went nowhere.
        assert_eq!(work_versions(&hub).await, versions);
    };
    let outage = std::panic::AssertUnwindSafe(outage).catch_unwind().await;
    // Restore whatever happened, so that later tests find the hub as it was.
    replace_crd(&crds, &ours).await;
    if let Err(p) = outage {
        std::panic::resume_unwind(p);
    }

    let reconciles = shared.metrics.reconciles.get();
    wait_for(
        "ready again, and a pass on fresh stores",
        common::WAIT,
        || async {
            let ready = shared.ready.load(Ordering::Acquire);
            let passes = shared.metrics.reconciles.get();
            if ready && passes > reconciles {
                Ok(())
            } else {
                Err(format!("ready {ready}, reconciles {passes}"))
            }
        },
    )
    .await;
    let m = hub.get_mwrs("app").await.unwrap();
    assert_eq!(current(&m), Some(v1), "{}", common::describe(&m));
    assert_eq!(update(&m), Some(v2));
    assert_eq!(aborted(&m), Some(since), "the hold is intact");
    assert_eq!(work_versions(&hub).await, versions, "nothing rolled out");
}
