//! Every connection to the hub goes silent without closing, as when the API server
//! instance behind a load balancer is lost without a word or a network path drops every
//! packet (and as the soak's hub stall does for as long as it lasts), just before a
//! template changes. The rollout goes on once the controller's bounds on a silent
//! connection pass (`--watch-timeout`, `--read-timeout`), not after kube's 290 s watch
//! timeout or never for a request in flight.
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`); skipped without it unless CI=true.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{
    create_app_for_all, current, rbac, start_agent_succeeding, start_controller_configured_through,
    wait_complete,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use mwrs_controller::Config;
use mwrs_controller::silence::SilenceBounds;
use mwrs_testsupport::silent_proxy::SilentProxy;
use mwrs_testsupport::{TestHub, configmap_template};

const CLUSTERS: usize = 3;

/// Short bounds, so that the test waits seconds where production waits a minute or two.
const BOUNDS: SilenceBounds = SilenceBounds {
    watch: Duration::from_secs(3),
    read: Duration::from_secs(8),
};

/// A kube config of the shipped role that reaches the hub through `proxy`, and the hub's
/// own address.
async fn through_proxy(hub: &TestHub) -> (kube::Config, SocketAddr) {
    let path = rbac::shipped_role_kubeconfig(&rbac::Site::of(hub))
        .await
        .unwrap();
    let kc = Kubeconfig::read_from(&path).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    let authority = config.cluster_url.authority().unwrap().as_str().to_string();
    let hub_addr = tokio::net::lookup_host(authority)
        .await
        .unwrap()
        .next()
        .unwrap();
    (config, hub_addr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_connection_delays_a_rollout_only_by_the_bounds() {
    let Some(hub) = TestHub::from_env("silentnet", CLUSTERS).await else {
        return;
    };
    let _agent = start_agent_succeeding(&hub, Duration::from_millis(100));
    let (mut config, hub_addr) = through_proxy(&hub).await;
    let proxy = SilentProxy::start(hub_addr).await.unwrap();
    config.cluster_url = format!("https://{}", proxy.addr).parse().unwrap();
    BOUNDS.apply(&mut config);
    let client = kube::Client::try_from(config).unwrap();
    let settings = Config {
        silence: BOUNDS,
        ..Config::default()
    };
    let _controller = start_controller_configured_through(&hub, settings, move |_| client);
    create_app_for_all(&hub).await;
    let v1 = current(&wait_complete(&hub, "app", None).await).unwrap();

    let silenced = proxy.silence();
    let t = Instant::now();
    hub.set_template("app", configmap_template("v2")).await;
    let v2 = wait_complete(&hub, "app", Some(&v1)).await;
    eprintln!(
        "{silenced} connections silenced; v2 complete {:.1?} after the template changed",
        t.elapsed()
    );
    assert_ne!(current(&v2), Some(v1));
}
