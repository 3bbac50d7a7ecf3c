//! The hub crashes (API server and etcd killed at once) and comes back on its data, under
//! a running controller, on a private test hub: the controller's watches resume, so a
//! template changed right after the restart rolls out.
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`; the private hub is built by the same
//! script); skipped without it unless CI=true.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::{
    create_app_for_all, current, spawn_controller_binary, start_agent_succeeding, wait_complete,
};
use mwrs_testsupport::{PrivateHub, TestHub, configmap_template};

const CLUSTERS: usize = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_goes_on_after_the_hub_crashes() {
    let Some(private) = PrivateHub::start("hubcrash") else {
        return;
    };
    let hub = TestHub::at(private.kubeconfig.clone(), "hubcrash", CLUSTERS).await;
    let _agent = start_agent_succeeding(&hub, Duration::from_millis(100));
    let controller = spawn_controller_binary(&hub, &[]).await;
    create_app_for_all(&hub).await;
    let v1 = current(&wait_complete(&hub, "app", None).await).unwrap();

    private.crash_restart();
    let t = Instant::now();
    hub.set_template("app", configmap_template("v2")).await;
    let v2 = wait_complete(&hub, "app", Some(&v1)).await;
    // Before each watch dropped its own errors, every store stood still for minutes here.
    eprintln!(
        "v2 complete {:.1?} after the restart (controller log: {})",
        t.elapsed(),
        controller.log.display()
    );
    assert_ne!(current(&v2), Some(v1));
}
