//! A watch that keeps failing while every other works (security review W1): the
//! controller's right to list and watch ManifestWorks is taken away and its connections
//! cut, on a private test hub. Past `blind_after` the replica is not ready and no deadline
//! runs on the agents' reports it cannot see; once the watch works again the rollout goes
//! on, with no abort.
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`; the private hub is built by the same
//! script); skipped without it unless CI=true.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{
    aborted, all_aborting, current, describe, rbac, start_agent_succeeding,
    start_controller_configured, wait_complete, wait_mwrs, work_done,
};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, Patch, PatchParams};
use mwrs_controller::{Config, Shared};
use mwrs_testsupport::{PrivateHub, TestHub, configmap_template, mwrs, wait_for};
use serde_json::Value;

const CLUSTERS: usize = 3;
/// How long the rollout may take to go on once the watch may list again.
const RECOVERY: Duration = Duration::from_secs(150);

/// The shipped ClusterRole, with `list` and `watch` on ManifestWorks or without them.
fn role(may_watch_works: bool) -> Value {
    let mut role = rbac::shipped("ClusterRole", "mwrs-controller");
    for rule in role["rules"].as_array_mut().unwrap() {
        if rule["resources"] == serde_json::json!(["manifestworks"]) && !may_watch_works {
            rule["verbs"] = serde_json::json!(["get", "create", "patch", "delete"]);
        }
    }
    role
}

async fn set_role(hub: &TestHub, may_watch_works: bool) {
    Api::<ClusterRole>::all(hub.client.clone())
        .patch(
            "mwrs-controller",
            &PatchParams::apply("mwrs-tests").force(),
            &Patch::Apply(&role(may_watch_works)),
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_deadline_runs_while_a_watch_cannot_see() {
    let Some(private) = PrivateHub::start("watchblind") else {
        return;
    };
    let hub = TestHub::at(private.kubeconfig.clone(), "watchblind", CLUSTERS).await;
    let _agent = start_agent_succeeding(&hub, Duration::from_millis(100));
    let shared = Shared::default();
    let config = Config {
        blind_after: Duration::from_secs(3),
        ..Config::default()
    };
    let _controller = start_controller_configured(&hub, config, shared.clone());
    hub.publish_all("p").await;
    let strategy = all_aborting("10s");
    hub.create_mwrs(&mwrs("app", configmap_template("v1"), &[("p", strategy)]))
        .await;
    let v1 = current(&wait_complete(&hub, "app", None).await).unwrap();

    // Relists of ManifestWorks are refused from now on; the restart cuts the watches.
    set_role(&hub, false).await;
    private.crash_restart();
    wait_for("the replica counts itself blind", common::WAIT, || async {
        if shared.blind.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err("still ready".to_string())
        }
    })
    .await;

    // v2 is written (writes still work) and the agents report it done, unseen.
    hub.set_template("app", configmap_template("v2")).await;
    wait_for("v2 written and done everywhere", common::WAIT, || async {
        let works = hub.works_of("app").await;
        let done = works.iter().filter(|w| {
            work_done(w)
                && common::version_of(&serde_json::to_value(&w.spec).unwrap()) == Some("v2")
        });
        let n = done.count();
        if n == CLUSTERS {
            Ok(())
        } else {
            Err(format!("{n} of {CLUSTERS}"))
        }
    })
    .await;
    // Twice the deadline past that: nothing timed out, nothing aborted, nothing promoted.
    let until = tokio::time::Instant::now() + Duration::from_secs(20);
    wait_mwrs(&hub, "app", "20 s blind", |m| {
        assert_eq!(aborted(m), None, "{}", describe(m));
        assert_eq!(current(m).as_deref(), Some(v1.as_str()), "promoted unseen");
        tokio::time::Instant::now() >= until
    })
    .await;
    assert!(shared.blind.load(Ordering::Acquire), "still blind");

    set_role(&hub, true).await;
    // Back within the watcher's backoff ceiling (30 s) plus the quiet that ends a run of
    // failures (65 s, `watch_health`), with room for a loaded machine: more than WAIT.
    let back = wait_for("v2 complete once the watch works", RECOVERY, || async {
        let m = hub.get_mwrs("app").await.ok_or("no MWRS")?;
        if common::is_complete(&m) && current(&m).as_deref() != Some(v1.as_str()) {
            Ok(m)
        } else {
            Err(describe(&m))
        }
    })
    .await;
    let m = back;
    assert_eq!(aborted(&m), None, "{}", describe(&m));
    wait_for("ready again", common::WAIT, || async {
        if shared.blind.load(Ordering::Acquire) {
            Err("blind".to_string())
        } else {
            Ok(())
        }
    })
    .await;
}
