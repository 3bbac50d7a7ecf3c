//! The hub's ManifestWork CRD defaults a field the MWRS template schema does not know
//! (a newer OCM than this project's CRD): the API server stores every ManifestWork with
//! it, so its spec never hashes like the template. That must not look like a hand edit:
//! one write per revision, and the rollout completes (issue #12; before, every pass
//! rewrote every ManifestWork and the rollout never completed).
//!
//! The ManifestWork CRD is cluster-wide: this file holds this one test, so no other test
//! of its binary runs meanwhile, and the CRD is restored whatever happens.
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`); skipped without it unless CI=true.

// run-tests: alone (changes cluster-wide objects of the shared test hub)

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{QUICK, start_agent, start_controller_sharing, wait_complete};
use futures::FutureExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use mwrs_controller::Shared;
use mwrs_testsupport::{TestHub, configmap_template, mwrs};
use serde_json::json;

const MW_CRD: &str = "manifestworks.work.open-cluster-management.io";

/// JSON Pointer of spec.deleteOption's properties in version v1 of the ManifestWork CRD.
async fn delete_option_path(api: &Api<CustomResourceDefinition>) -> String {
    let crd = api.get(MW_CRD).await.unwrap();
    let i = crd
        .spec
        .versions
        .iter()
        .position(|v| v.name == "v1")
        .unwrap();
    format!(
        "/spec/versions/{i}/schema/openAPIV3Schema/properties/spec/properties/deleteOption/properties/extraDefaulted"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_default_is_not_a_hand_edit() {
    let Some(hub) = TestHub::from_env("mwdefault", 2).await else {
        return;
    };
    mwrs_testsupport::init_tracing();
    let crds: Api<CustomResourceDefinition> = Api::all(hub.client.clone());
    let path = delete_option_path(&crds).await;
    let add = json!([{"op": "add", "path": path,
        "value": {"type": "string", "default": "from-a-newer-ocm"}}]);
    crds.patch(
        MW_CRD,
        &PatchParams::default(),
        &Patch::Json::<()>(serde_json::from_value(add).unwrap()),
    )
    .await
    .unwrap();

    let run = async {
        let shared = Shared::default();
        let _controller = start_controller_sharing(&hub, shared.clone());
        let _agent = start_agent(&hub, |_| QUICK);
        hub.publish_all("p").await;
        let mut template = configmap_template("v1");
        template["deleteOption"] = json!({"propagationPolicy": "Foreground"});
        hub.create_mwrs(&mwrs("app", template, &[("p", json!({"type": "All"}))]))
            .await;
        wait_complete(&hub, "app", None).await;
        assert_eq!(common::work_writes(&shared, "create"), 2);
        // More passes (one per annotation change, waited for one by one): nothing is
        // rewritten.
        common::poke_passes(&hub, &shared, "app", 3).await;
        assert_eq!(
            common::work_writes(&shared, "update"),
            0,
            "a ManifestWork was rewritten"
        );
    };
    let outcome = std::panic::AssertUnwindSafe(run).catch_unwind().await;
    let remove = json!([{"op": "remove", "path": path}]);
    crds.patch(
        MW_CRD,
        &PatchParams::default(),
        &Patch::Json::<()>(serde_json::from_value(remove).unwrap()),
    )
    .await
    .unwrap();
    if let Err(p) = outcome {
        std::panic::resume_unwind(p);
    }
}
