//! The reference plugin gating rollouts on the real test hub (issue #18): the plugin binary
//! reads the status feedback the simulated fleet reports for a Deployment, and the
//! controller (in-process, registered through `--work-config`'s parser) promotes a
//! revision only once every cluster's `ReadyReplicas == Replicas` has held for the soak;
//! a revision whose values never satisfy the check times out and aborts.
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`); skipped without it unless CI=true.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use mwrs_api::labels;
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_controller::plugins::Plugins;
use mwrs_controller::{Config, Shared};
use mwrs_fleet::{Agent, AgentConfig, Behaviour};
use mwrs_plugin::config::WorkConfig;
use mwrs_testsupport::{ChildProcess, TaskGuard, TestHub, mwrs, wait_for};
use serde_json::{Value, json};

const CLUSTERS: usize = 3;
const WAIT: Duration = Duration::from_secs(90);

/// A Deployment `web/web` of `replicas`, with the well-known status feedback rule.
fn template(replicas: i64) -> Value {
    json!({
        "workload": {"manifests": [{
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "web"},
            "spec": {"replicas": replicas},
        }]},
        "manifestConfigs": [{
            "resourceIdentifier": {"group": "apps", "resource": "deployments",
                "namespace": "web", "name": "web"},
            "feedbackRules": [{"type": "WellKnownStatus"}],
        }],
    })
}

/// Starts the plugin binary on a free loopback port; returns it and its address.
async fn start_plugin(hub: &TestHub) -> (ChildProcess, String) {
    let config = std::env::temp_dir().join(format!("feedback-plugin-{}.yaml", hub.namespace));
    std::fs::write(
        &config,
        "listen: 127.0.0.1:0\nchecks:\n  - resource: {group: apps, resource: deployments, namespace: web, name: web}\n    succeedWhen: ReadyReplicas == Replicas && Replicas <= 5\n    failWhen: ReadyReplicas < 1\n    soak: 1s\n",
    )
    .unwrap();
    let binary = Path::new(env!("CARGO_BIN_EXE_mwrs-feedback-plugin"));
    let kubeconfig = hub.kubeconfig.to_string_lossy().to_string();
    let config = config.to_string_lossy().to_string();
    let plugin = ChildProcess::spawn(
        binary,
        &["--config", &config, "--kubeconfig", &kubeconfig],
        &[],
    )
    .unwrap();
    let addr = {
        let plugin = &plugin;
        wait_for("the plugin listening", WAIT, || async move {
            let out = plugin.output();
            out.lines()
                .find_map(|l| l.strip_prefix("listening on ").map(str::to_string))
                .ok_or(out)
        })
        .await
    };
    (plugin, addr)
}

/// The in-process controller for the test's namespace, knowing plugin `feedback` at
/// `addr` (asked again every second).
fn start_controller(hub: &TestHub, addr: &str) -> TaskGuard {
    let work_config = format!("plugins:\n  - name: feedback\n    endpoint: http://{addr}\n");
    let plugins = Plugins::new(
        &WorkConfig::parse(&work_config).unwrap(),
        Duration::from_secs(1),
        "test",
    )
    .unwrap();
    let config = Config {
        namespace: Some(hub.namespace.clone()),
        ..Config::default()
    };
    let client = hub.client.clone();
    TaskGuard::spawn(async move {
        mwrs_controller::run(
            client,
            config,
            Arc::new(plugins),
            Shared::default(),
            std::future::pending(),
        )
        .await
    })
}

/// Waits until `done` holds of MWRS `name`.
async fn wait_mwrs(
    hub: &TestHub,
    what: &str,
    done: impl Fn(&ManifestWorkReplicaSet) -> bool,
) -> ManifestWorkReplicaSet {
    let done = &done;
    wait_for(what, WAIT, || async move {
        let m = hub.get_mwrs("web").await.ok_or("no MWRS")?;
        if done(&m) {
            Ok(m)
        } else {
            Err(format!("{:?}", m.status))
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_feedback_plugin_gates_a_rollout_on_the_fleets_feedback() {
    let Some(hub) = TestHub::from_env("feedback-plugin", CLUSTERS).await else {
        return;
    };
    let (_plugin, addr) = start_plugin(&hub).await;
    let _controller = start_controller(&hub, &addr);
    hub.publish_all("p").await;
    let _agent = Agent::start(
        hub.client.clone(),
        AgentConfig::new(hub.clusters.clone()).behaviour(|_| Behaviour::Succeed {
            after: Duration::from_millis(300),
        }),
    );
    let strategy = json!({"type": "All", "plugin": "feedback", "failureStrategy": "AbortAll",
        "all": {"progressDeadline": "8s"}});
    hub.create_mwrs(&mwrs("web", template(3), &[("p", strategy)]))
        .await;

    // Three ready replicas of three, held for the soak: promoted.
    let status = |m: &ManifestWorkReplicaSet| m.status.clone().unwrap_or_default();
    let m = wait_mwrs(&hub, "v1 promoted", |m| {
        let s = status(m);
        s.current_revision.is_some() && s.current_revision == s.update_revision
    })
    .await;
    let v1 = status(&m).current_revision.unwrap();
    let hub = &hub;
    let v1 = &v1;
    // Every cluster judged SUCCEEDED on v1, as the status records it.
    wait_mwrs(hub, "every cluster's verdict recorded", |m| {
        status(m)
            .plugin_judged
            .is_some_and(|j| &j.revision == v1 && j.count == CLUSTERS as i64)
    })
    .await;

    // Six replicas break `Replicas <= 5`: the plugin never says SUCCEEDED, the deadline
    // passes and AbortAll takes every cluster back to v1.
    hub.set_template("web", template(6)).await;
    let m = wait_mwrs(hub, "v2 aborted", |m| status(m).aborted_time.is_some()).await;
    assert_eq!(status(&m).current_revision.as_deref(), Some(v1.as_str()));
    let last = status(&m).last_abort.expect("the abort's record");
    assert_eq!(last.trigger, "ProgressDeadlineExceeded");
    wait_for("every cluster back on v1", WAIT, || async move {
        let works = hub.works_of("web").await;
        let on: Vec<Option<&String>> = works
            .iter()
            .map(|w| w.metadata.labels.as_ref()?.get(labels::CONTROLLER_HASH))
            .collect();
        if on.len() == CLUSTERS && on.iter().all(|h| *h == Some(v1)) {
            Ok(())
        } else {
            Err(format!("{on:?}"))
        }
    })
    .await;
}

/// A plugin whose ServiceAccount may `get` ManifestWorks but not watch them (the soak's
/// per-namespace grants) reads each with a GET, says once that its watch fails, and
/// retries the watch with a backoff. Its watch used to be retried at once, forever, with
/// a warning each time: the fault soak found gigabytes of log in minutes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_it_may_not_make_is_retried_with_backoff_and_reported_once() {
    let Some(hub) = TestHub::from_env("feedback-plugin-rbac", 1).await else {
        return;
    };
    let get_only = json!([{"apiGroups": ["work.open-cluster-management.io"],
        "resources": ["manifestworks"], "verbs": ["get"]}]);
    hub.grant("plugin", get_only).await;
    let kubeconfig = hub.service_account_kubeconfig("plugin").await.unwrap();
    let config = std::env::temp_dir().join(format!("feedback-plugin-{}.yaml", hub.namespace));
    std::fs::write(
        &config,
        "listen: 127.0.0.1:0\nchecks:\n  - resource: {group: apps, resource: deployments, namespace: web, name: web}\n    succeedWhen: ReadyReplicas == Replicas\n",
    )
    .unwrap();
    let binary = Path::new(env!("CARGO_BIN_EXE_mwrs-feedback-plugin"));
    let plugin = ChildProcess::spawn(
        binary,
        &[
            "--config",
            &config.to_string_lossy(),
            "--kubeconfig",
            &kubeconfig.to_string_lossy(),
        ],
        &[],
    )
    .unwrap();
    let failures = || {
        plugin
            .output()
            .lines()
            .filter(|l| l.contains("watching ManifestWorks"))
            .count()
    };
    wait_for("the watch refused", WAIT, || async {
        match failures() {
            0 => Err(plugin.output()),
            n => Ok(n),
        }
    })
    .await;
    // A window long enough for thousands of retries without a backoff.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let n = failures();
    assert!(
        n <= 2,
        "{n} lines about the failing watch in 3 s:\n{}",
        plugin
            .output()
            .lines()
            .filter(|l| l.contains("watching ManifestWorks"))
            .take(5)
            .collect::<Vec<_>>()
            .join("\n")
    );
    hub.revoke().await;
}
