//! State that cannot be confirmed is not acted on (rules §11.6; security review C1): when
//! the controller can no longer read the MWRS CRD (its RBAC edited, the API refusing), it
//! cannot know whether another installer has replaced the CRD with one that drops its
//! state, so after `crd_stale_after` it stops writing and turns not ready, says so in
//! `mwrs_controller_crd_usable`, and resumes once the CRD can be read again.
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{WAIT, start_controller_configured};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, DeleteParams};
use mwrs_controller::{Config, Shared};
use mwrs_testsupport::{TestHub, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crd_that_cannot_be_read_stops_writes_until_it_can() {
    let Some(hub) = TestHub::from_env("crd-unknown", 1).await else {
        return;
    };
    let shared = Shared::default();
    let config = Config {
        crd_stale_after: Duration::from_secs(3),
        ..Config::default()
    };
    let _controller = start_controller_configured(&hub, config, shared.clone());
    let state = |shared: &Shared| {
        (
            shared.metrics.crd_usable.get(),
            shared.ready.load(Ordering::Acquire),
        )
    };
    wait_for("ready, the CRD usable", WAIT, || async {
        match state(&shared) {
            (1, true) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;

    // The controller's ServiceAccount loses every right (its binding deleted).
    let bindings: Api<ClusterRoleBinding> = Api::all(hub.client.clone());
    let name = format!("mwrs-controller-{}", hub.namespace);
    let binding = bindings.get(&name).await.unwrap();
    bindings
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    wait_for("writes stopped: the CRD unknown", WAIT, || async {
        match state(&shared) {
            (0, false) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;

    // Restored: it reads the CRD again and resumes.
    let mut again = binding.clone();
    again.metadata = kube::api::ObjectMeta {
        name: Some(name.clone()),
        ..Default::default()
    };
    bindings.create(&Default::default(), &again).await.unwrap();
    wait_for("ready again", WAIT, || async {
        match state(&shared) {
            (1, true) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}
