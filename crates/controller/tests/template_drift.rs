//! After an OCM upgrade adds a field to the ManifestWork spec, a template that sets it loses
//! it silently until this project's CRD is regenerated (issue #32 item 2). On a hub whose
//! ManifestWork CRD has a field the MWRS template schema lacks, the controller counts it in
//! `mwrs_controller_template_fields_missing` and gives every MWRS one Warning Event naming
//! it, however many passes follow.
//!
//! Changes the cluster-wide ManifestWork CRD (and puts it back), so this file holds this one
//! test. Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`).

// run-tests: alone (changes cluster-wide objects of the shared test hub)

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{QUICK, start_agent, start_controller_sharing, wait_complete};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use mwrs_controller::Shared;
use mwrs_testsupport::{TestHub, configmap_template, mwrs, wait_for};
use serde_json::json;

const WORK_CRD: &str = "manifestworks.work.open-cluster-management.io";
const FIELD: &str = "mwrsTestFutureField";

/// The served version's spec properties of the ManifestWork CRD: a JSON pointer.
fn spec_properties(crd: &CustomResourceDefinition) -> String {
    let i = crd
        .spec
        .versions
        .iter()
        .position(|v| v.name == "v1")
        .expect("ManifestWork v1");
    format!("/spec/versions/{i}/schema/openAPIV3Schema/properties/spec/properties")
}

/// Adds (or, with `add` false, removes) the field to the ManifestWork spec schema.
async fn set_field(hub: &TestHub, add: bool) {
    let api: Api<CustomResourceDefinition> = Api::all(hub.client.clone());
    let crd = api.get(WORK_CRD).await.unwrap();
    let path = format!("{}/{FIELD}", spec_properties(&crd));
    let there = serde_json::to_value(&crd).unwrap().pointer(&path).is_some();
    let op = match (add, there) {
        (true, false) => json!({"op": "add", "path": path, "value": {"type": "string"}}),
        (false, true) => json!({"op": "remove", "path": path}),
        _ => return,
    };
    let patch: json_patch::Patch = serde_json::from_value(json!([op])).unwrap();
    api.patch(WORK_CRD, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_field_the_crd_lacks_is_named_once_on_every_mwrs() {
    let Some(hub) = TestHub::from_env("drift", 2).await else {
        return;
    };
    set_field(&hub, true).await;
    let _agent = start_agent(&hub, |_| QUICK);
    hub.publish_all("p").await;
    for name in ["a", "b"] {
        let template = configmap_template("v1");
        hub.create_mwrs(&mwrs(name, template, &[("p", json!({"type": "All"}))]))
            .await;
    }
    let shared = Shared::default();
    let controller = start_controller_sharing(&hub, shared.clone());
    for name in ["a", "b"] {
        wait_complete(&hub, name, None).await;
        wait_for("the Warning Event", common::WAIT, || async {
            let told: Vec<String> = hub
                .events_of(name)
                .await
                .into_iter()
                .filter(|(reason, _)| reason == "TemplateFieldsMissing")
                .map(|(_, note)| note)
                .collect();
            match told.as_slice() {
                [note] if note.contains(FIELD) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
    }
    assert_eq!(shared.metrics.template_fields_missing.get(), 1);
    // More passes (a template change rolls out) tell nothing again.
    hub.set_template("a", configmap_template("v2")).await;
    let v1 = common::current(&hub.get_mwrs("a").await.unwrap());
    wait_complete(&hub, "a", v1.as_deref()).await;
    let again = hub
        .events_of("a")
        .await
        .into_iter()
        .filter(|(reason, _)| reason == "TemplateFieldsMissing")
        .count();
    assert_eq!(again, 1, "one Event per MWRS");
    drop(controller);
    set_field(&hub, false).await;
}
