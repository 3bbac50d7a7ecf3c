//! The MWRS CRD as OCM's cluster-manager operator leaves it: upstream's file, stamped with
//! the operator's version, written as an update (no Helm or kubectl ownership metadata).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use mwrs_controller::crd::CRD_NAME;
use mwrs_testsupport::TestHub;

const VERSION_ANNOTATION: &str = "operator.open-cluster-management.io/version";

pub fn crds(hub: &TestHub) -> Api<CustomResourceDefinition> {
    Api::all(hub.client.clone())
}

/// Puts upstream's MWRS CRD in place as the operator does: an update of the existing object
/// with upstream's file, stamped with the operator's version.
pub async fn operators_crd_in_place(hub: &TestHub) {
    let file = super::ocm_module_file(
        "manifests/cluster-manager/hub/crds/0000_00_work.open-cluster-management.io_manifestworkreplicasets.crd.yaml",
    );
    let mut upstream: CustomResourceDefinition =
        serde_saphyr::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let existing = crds(hub).get(CRD_NAME).await.unwrap();
    upstream.metadata.resource_version = existing.resource_version();
    upstream
        .annotations_mut()
        .insert(VERSION_ANNOTATION.into(), "1.2.1".into());
    crds(hub)
        .replace(CRD_NAME, &PostParams::default(), &upstream)
        .await
        .unwrap();
    assert!(!is_ours(&crds(hub).get(CRD_NAME).await.unwrap()));
}

/// Is `crd` this project's (the operator guard's version)?
pub fn is_ours(crd: &CustomResourceDefinition) -> bool {
    crd.annotations()
        .get(VERSION_ANNOTATION)
        .map(String::as_str)
        == Some("999.0.0")
}
