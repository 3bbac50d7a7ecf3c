//! Two replicas with leader election on the real test hub: the leader is frozen
//! (SIGSTOP) in the middle of a rollout until the other replica has taken the lease and
//! finished the rollout, then resumed (SIGCONT). The old leader must not write anything
//! after it wakes: its writes are fenced by the age of its last lease renewal.
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`); skipped without it unless CI=true.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{
    current, signal, spawn_controller_binary_logging, start_agent_succeeding, wait_complete,
    wait_holder, wait_mwrs,
};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use mwrs_testsupport::{TestHub, configmap_template, mwrs, wait_for};
use serde_json::json;

/// Logs every write the executor attempts (its DEBUG line "write").
const WRITES_LOGGED: &str = "info,mwrs_controller::execute=debug";

/// Lines of the executor's write log (a write about to be sent). A "write refused" line is
/// the gate stopping one: not a write.
fn writes(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains("mwrs_controller::execute") && l.contains(" write "))
        .filter(|l| !l.contains("write refused"))
        .collect()
}

/// MWRS `app` rolling out one cluster at a time (each answers after 1.5 s), its first
/// cluster updated; the agent runs while the handle is kept.
async fn rollout_under_way(hub: &TestHub) -> mwrs_fleet::AgentHandle {
    let agent = start_agent_succeeding(hub, Duration::from_millis(1500));
    hub.publish_all("p").await;
    let strategy = json!({"type": "Progressive", "progressive": {"maxConcurrency": 1}});
    hub.create_mwrs(&mwrs("app", configmap_template("v1"), &[("p", strategy)]))
        .await;
    wait_mwrs(hub, "app", "the rollout under way", |m| {
        m.status.as_ref().is_some_and(|s| s.summary.updated >= 1) && current(m).is_none()
    })
    .await;
    agent
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_leader_writes_nothing_after_it_wakes() {
    let Some(hub) = TestHub::from_env("leader", 4).await else {
        return;
    };
    let ns = hub.namespace.clone();
    let flags = ["--leader-elect", "--lease-namespace", ns.as_str()];
    let old = spawn_controller_binary_logging(&hub, &flags, WRITES_LOGGED).await;
    wait_holder(&hub, old.id(), common::WAIT).await;
    let new = spawn_controller_binary_logging(&hub, &flags, WRITES_LOGGED).await;
    // Freeze the leader with the rollout under way: it has requeues pending.
    let _agent = rollout_under_way(&hub).await;
    signal(&old, "-STOP");
    wait_holder(&hub, new.id(), Duration::from_secs(90)).await;
    let v1 = current(&wait_complete(&hub, "app", None).await);
    hub.set_template("app", configmap_template("v2")).await;
    wait_complete(&hub, "app", v1.as_deref()).await;
    let before = old.output().len();

    signal(&old, "-CONT");
    let mut old = old;
    wait_for("the old leader to stop", Duration::from_secs(60), || {
        let exited = old.try_wait();
        async move {
            exited
                .map(|_| ())
                .ok_or_else(|| "still running".to_string())
        }
    })
    .await;
    let log = old.output();
    let after = &log[before.min(log.len())..];
    let written = writes(after);
    assert!(
        written.is_empty(),
        "the old leader wrote after it woke:\n{}\n--- its log after SIGCONT:\n{after}",
        written.join("\n")
    );
    assert!(
        !writes(&new.output()).is_empty(),
        "the new leader did the rollout"
    );
}

/// A standby keeps its stores in sync while another replica leads, and its passes do
/// nothing: when the leader dies (SIGKILL, the Lease left to expire), it takes over on warm
/// stores (no second sync after it acquires the Lease) and finishes the rollout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_takes_over_on_warm_stores() {
    let Some(hub) = TestHub::from_env("leader-warm", 4).await else {
        return;
    };
    let ns = hub.namespace.clone();
    let flags = ["--leader-elect", "--lease-namespace", ns.as_str()];
    let old = spawn_controller_binary_logging(&hub, &flags, WRITES_LOGGED).await;
    wait_holder(&hub, old.id(), common::WAIT).await;
    let standby = spawn_controller_binary_logging(&hub, &flags, WRITES_LOGGED).await;
    let synced = |log: &str| log.matches("stores synced; ready").count();
    wait_for("the standby's stores synced", common::WAIT, || {
        let n = synced(&standby.output());
        async move { (n == 1).then_some(()).ok_or("not yet".to_string()) }
    })
    .await;
    let _agent = rollout_under_way(&hub).await;
    signal(&old, "-KILL");
    wait_holder(&hub, standby.id(), Duration::from_secs(90)).await;
    wait_complete(&hub, "app", None).await;
    let log = standby.output();
    let (before, after) = log
        .split_once("acquired leadership")
        .expect("the standby says it acquired leadership");
    // Not even a write its gate refused: a standby's passes plan nothing.
    assert!(
        writes(before).is_empty() && !before.contains("write refused"),
        "the standby planned writes before it led:\n{before}"
    );
    assert_eq!(
        (synced(before), synced(after)),
        (1, 0),
        "stores synced once, while standby:\n{log}"
    );
    assert!(!writes(after).is_empty(), "the new leader did the rollout");
}

/// A lease namespace that does not exist ends the controller at start with one short line
/// that names it and what to do, not the API server's status dumped whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_lease_namespace_is_one_clear_line() {
    let Some(hub) = TestHub::from_env("leader-missing-ns", 0).await else {
        return;
    };
    let missing = format!("{}-missing", hub.namespace);
    let mut child = common::spawn_controller_binary(
        &hub,
        &["--leader-elect", "--lease-namespace", missing.as_str()],
    )
    .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let exit = loop {
        if let Some(s) = child.try_wait() {
            break s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still running: {}",
            child.output()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(!exit.success(), "{}", child.output());
    let output = child.output();
    let last = output.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("mwrs-controller: ")
            && last.contains(&format!("{missing:?}"))
            && last.contains("--lease-namespace")
            && last.len() < 240,
        "one clear line: {last}"
    );
}

/// What the hooked client of [`held_lease_writes`] reports.
#[derive(Debug, PartialEq)]
enum LeaseCall {
    /// A write to a Lease, held until the test lets it go.
    WriteHeld,
    /// A read of a Lease, answered.
    ReadAnswered,
}

/// A client whose first Lease writes wait for a permit of `go`, and which reports its Lease
/// calls on `calls`: the test decides what lands first at the API server.
fn held_lease_writes(
    inner: kube::Client,
    namespace: &str,
    calls: tokio::sync::mpsc::UnboundedSender<LeaseCall>,
    go: std::sync::Arc<tokio::sync::Semaphore>,
) -> kube::Client {
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let (inner, calls, go) = (inner.clone(), calls.clone(), go.clone());
        async move {
            let lease = req.uri().path().contains("/leases");
            let read = req.method() == http::Method::GET;
            if lease && !read {
                let _ = calls.send(LeaseCall::WriteHeld);
                go.acquire().await?.forget();
            }
            let answer = inner.send(req).await;
            if lease && read {
                let _ = calls.send(LeaseCall::ReadAnswered);
            }
            answer.map_err(Box::<dyn std::error::Error + Send + Sync>::from)
        }
    });
    kube::Client::new(service, namespace)
}

/// Waits up to a minute for the contender's next `want`.
async fn next(calls: &mut tokio::sync::mpsc::UnboundedReceiver<LeaseCall>, want: LeaseCall) {
    let wanted = format!("{want:?}");
    let wait = async {
        while let Some(call) = calls.recv().await {
            if call == want {
                return;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(60), wait)
        .await
        .unwrap_or_else(|_| panic!("the contender's next {wanted}"));
}

/// A replica that found the lease expired must not take it when its holder's renewal
/// lands first (a hub back from a restart answers both at once): the takeover is
/// conditional on the version it judged expired. Otherwise the old holder, whose renewal
/// succeeded, writes while the Lease names the new one (the fault soak, seed 34).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_loses_to_a_renewal_that_lands_first() {
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    use kube::api::{Patch, PatchParams, PostParams};
    use tokio::sync::{Semaphore, mpsc};

    let Some(hub) = TestHub::from_env("leader-race", 0).await else {
        return;
    };
    let ns = hub.namespace.clone();
    let api: Api<Lease> = Api::namespaced(hub.client.clone(), &ns);
    let long_ago = MicroTime(jiff::Timestamp::now() - jiff::SignedDuration::from_secs(60));
    let expired = Lease {
        metadata: kube::api::ObjectMeta {
            name: Some("mwrs-controller".into()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("old".into()),
            acquire_time: Some(long_ago.clone()),
            renew_time: Some(long_ago),
            lease_duration_seconds: Some(15),
            ..Default::default()
        }),
    };
    api.create(&PostParams::default(), &expired).await.unwrap();
    let renew = || async {
        let now = json!({"spec": {"renewTime": MicroTime(jiff::Timestamp::now())}});
        api.patch(
            "mwrs-controller",
            &PatchParams::default(),
            &Patch::Merge(now),
        )
        .await
        .unwrap();
    };

    let (tx, mut calls) = mpsc::unbounded_channel();
    let go = std::sync::Arc::new(Semaphore::new(0));
    let client = held_lease_writes(hub.client.clone(), &ns, tx, go.clone());
    let contender = {
        let ns = ns.clone();
        tokio::spawn(async move {
            let gate = mwrs_controller::leader::WriteGate::fenced();
            mwrs_controller::leader::Leadership::acquire(client, &ns, "new", gate).await
        })
    };
    // The contender has read the expired lease and sends its takeover; the holder's
    // renewal lands before it.
    next(&mut calls, LeaseCall::WriteHeld).await;
    renew().await;
    go.add_permits(Semaphore::MAX_PERMITS / 2);
    for round in 0..2 {
        // Once the contender has read the lease again, it has seen its takeover's answer.
        next(&mut calls, LeaseCall::ReadAnswered).await;
        let holder = api
            .get("mwrs-controller")
            .await
            .unwrap()
            .spec
            .and_then(|s| s.holder_identity);
        assert_eq!(
            holder.as_deref(),
            Some("old"),
            "round {round}: a lease renewed after the contender looked was taken"
        );
        assert!(!contender.is_finished(), "the contender claims leadership");
        renew().await;
    }
    contender.abort();
}

/// A client whose every Lease request reaches the API server `delay` late, as on a hub
/// whose queue is seconds long under bulk writes.
fn late_lease_requests(inner: kube::Client, namespace: &str, delay: Duration) -> kube::Client {
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let inner = inner.clone();
        async move {
            if req.uri().path().contains("/leases") {
                tokio::time::sleep(delay).await;
            }
            inner
                .send(req)
                .await
                .map_err(Box::<dyn std::error::Error + Send + Sync>::from)
        }
    });
    kube::Client::new(service, namespace)
}

/// A leader whose Lease requests each take 3 s (the 300,000-ManifestWork run saw Lease
/// updates take up to 5 s in the API server while every MWRS changed) keeps its lease: a
/// renewal that lands proves the lease from the moment it was sent. Before, the gate
/// opened only as far as a read of the Lease proved, and a read that took 3 s saw a
/// renewal up to 8 s old: the gate closed for a few seconds in every round and the
/// leader exited in the middle of the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_answered_late_keeps_its_lease() {
    let Some(hub) = TestHub::from_env("leader-late", 0).await else {
        return;
    };
    let client = late_lease_requests(hub.client.clone(), &hub.namespace, Duration::from_secs(3));
    let gate = mwrs_controller::leader::WriteGate::fenced();
    let leadership =
        mwrs_controller::leader::Leadership::acquire(client, &hub.namespace, "late", gate.clone())
            .await
            .unwrap();
    let held = Duration::from_secs(45);
    assert!(
        tokio::time::timeout(held, leadership.lost()).await.is_err(),
        "a leader whose Lease requests take 3 s lost its lease within {held:?}"
    );
    assert!(gate.is_open(), "the write gate is open");
    leadership.release().await;
}
