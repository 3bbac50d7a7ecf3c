//! Failed rollouts on the real test hub: a progress deadline exceeded without a
//! failureStrategy, an abort with no stable revision to go back to, and a breach caused
//! by Degraded clusters (with and without AbortAll).
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`); skipped without it unless CI=true.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;

use common::{
    Timeline, aborted, all_aborting, assert_works_on, current, describe, message,
    revisions_by_cluster, start_agent_degrading, start_agent_hanging, update, wait_complete,
    wait_mwrs, wait_works,
};
use mwrs_testsupport::{configmap_template, has_condition, mwrs};
use serde_json::json;

/// A cluster hangs on v2 past the deadline with no failureStrategy: the rollout stops
/// with ProgressDeadlineExceeded; nothing aborts, the stable revision stays v1 and the
/// ManifestWorks keep v2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadline_exceeded_without_failure_strategy_stops() {
    let Some((hub, _controller)) = common::started("deadline", 3).await else {
        return;
    };
    let _agent = start_agent_hanging(&hub, &hub.clusters[0], "v2");
    let strategy = json!({"type": "All", "all": {"progressDeadline": "4s"}});
    hub.create_mwrs(&mwrs("app", configmap_template("v1"), &[("p", strategy)]))
        .await;
    let v1 = current(&wait_complete(&hub, "app", None).await).unwrap();

    let timeline = Timeline::watch(&hub, "app").await;
    hub.set_template("app", configmap_template("v2")).await;
    let m = wait_mwrs(&hub, "app", "ProgressDeadlineExceeded", |m| {
        has_condition(m, "Progressing", "False", "ProgressDeadlineExceeded")
    })
    .await;
    timeline
        .wait_in_order(&["NewRevisionCreated", "ProgressDeadlineExceeded"])
        .await;
    assert!(
        !timeline
            .reasons()
            .iter()
            .any(|r| r == "RolloutAborted" || r == "AbortFailed")
    );
    let v2 = update(&m).unwrap();
    assert_ne!(v1, v2);
    assert!(
        has_condition(&m, "ManifestworkApplied", "False", "NotAsExpected"),
        "{}",
        describe(&m)
    );
    assert!(has_condition(
        &m,
        "PlacementRolledOut",
        "False",
        "RolloutDegraded"
    ));
    assert_eq!(
        current(&m).as_deref(),
        Some(v1.as_str()),
        "stable revision unchanged"
    );
    assert_eq!(aborted(&m), None, "no abort without failureStrategy");
    let msg = message(&m, "Progressing");
    assert!(
        msg.contains(&v2) && msg.contains(&hub.clusters[0]),
        "message: {msg}"
    );
    // The other clusters finish v2 and every ManifestWork keeps it: nothing reverts.
    let m = wait_mwrs(&hub, "app", "two clusters updated", |m| {
        m.status.as_ref().is_some_and(|s| s.summary.updated == 2)
    })
    .await;
    assert!(has_condition(
        &m,
        "Progressing",
        "False",
        "ProgressDeadlineExceeded"
    ));
    assert_eq!(aborted(&m), None);
    assert_works_on(&hub, "app", &hub.clusters, &v2).await;
}

/// The first rollout breaches with AbortAll: there is no stable revision, so the abort
/// fails (AbortFailed), abortedTime stays unset and nothing is reverted or deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_without_stable_revision_fails() {
    let Some((hub, _controller)) = common::started("abortfail", 2).await else {
        return;
    };
    let _agent = start_agent_hanging(&hub, &hub.clusters[0], "v1");
    let strategy = all_aborting("3s");
    let timeline = Timeline::watch(&hub, "app").await;
    hub.create_mwrs(&mwrs("app", configmap_template("v1"), &[("p", strategy)]))
        .await;
    let m = wait_mwrs(&hub, "app", "AbortFailed", |m| {
        has_condition(m, "Progressing", "False", "AbortFailed")
    })
    .await;
    timeline
        .wait_in_order(&["NewRevisionCreated", "AbortFailed"])
        .await;
    assert_eq!(current(&m), None, "no stable revision");
    assert_eq!(
        aborted(&m),
        None,
        "an abort that cannot happen sets no abortedTime"
    );
    assert!(has_condition(
        &m,
        "PlacementRolledOut",
        "False",
        "RolloutDegraded"
    ));
    let msg = message(&m, "Progressing");
    assert!(msg.contains("no stable revision"), "message: {msg}");
    let v1 = update(&m).unwrap();
    assert_works_on(&hub, "app", &hub.clusters, &v1).await;
    // It stays so: the next passes (the deadline recheck, the agent's writes) change
    // nothing.
    let m = wait_mwrs(&hub, "app", "the healthy cluster counted", |m| {
        m.status.as_ref().is_some_and(|s| s.summary.updated == 1)
    })
    .await;
    assert!(has_condition(&m, "Progressing", "False", "AbortFailed"));
    assert_eq!(aborted(&m), None);
    assert_works_on(&hub, "app", &hub.clusters, &v1).await;
}

/// Degraded clusters (no timeout) breach maxFailures: reason MaxFailuresExceeded. In
/// "stop", no further cluster starts v2 (Progressive, one at a time); in "abort"
/// (AbortAll) every cluster goes back to v1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn degraded_clusters_breach_max_failures() {
    let Some((hub, _controller)) = common::started("degrade", 3).await else {
        return;
    };
    let _agent = start_agent_degrading(&hub, &hub.clusters[0], "v2");
    let progressive = json!({"type": "Progressive", "progressive": {"maxConcurrency": 1}});
    let mut aborting = progressive.clone();
    aborting["failureStrategy"] = json!("AbortAll");
    hub.create_mwrs(&mwrs(
        "stop",
        configmap_template("v1"),
        &[("p", progressive)],
    ))
    .await;
    hub.create_mwrs(&mwrs("abort", configmap_template("v1"), &[("p", aborting)]))
        .await;
    let v1 = current(&wait_complete(&hub, "stop", None).await).unwrap();
    wait_complete(&hub, "abort", None).await;

    let stop_timeline = Timeline::watch(&hub, "stop").await;
    let abort_timeline = Timeline::watch(&hub, "abort").await;
    hub.set_template("stop", configmap_template("v2")).await;
    hub.set_template("abort", configmap_template("v2")).await;

    // Without failureStrategy: stopped after the first (degraded) cluster.
    let m = wait_mwrs(&hub, "stop", "MaxFailuresExceeded", |m| {
        has_condition(m, "Progressing", "False", "MaxFailuresExceeded")
    })
    .await;
    let v2 = update(&m).unwrap();
    stop_timeline
        .wait_in_order(&["NewRevisionCreated", "MaxFailuresExceeded"])
        .await;
    assert_eq!(aborted(&m), None);
    assert_eq!(current(&m).as_deref(), Some(v1.as_str()));
    assert!(has_condition(
        &m,
        "PlacementRolledOut",
        "False",
        "RolloutDegraded"
    ));
    assert!(has_condition(
        &m,
        "ManifestworkApplied",
        "False",
        "NotAsExpected"
    ));
    assert!(
        message(&m, "Progressing").contains("degraded"),
        "{}",
        describe(&m)
    );
    let mut want: BTreeMap<String, String> = hub
        .clusters
        .iter()
        .map(|c| (c.clone(), v1.clone()))
        .collect();
    want.insert(hub.clusters[0].clone(), v2.clone());
    assert_eq!(
        revisions_by_cluster(&hub, "stop").await,
        want,
        "only the first cluster started"
    );

    // AbortAll: MaxFailuresExceeded with abortedTime, then RolloutAborted, all on v1.
    let m = wait_mwrs(&hub, "abort", "RolloutAborted", |m| {
        has_condition(m, "Progressing", "False", "RolloutAborted")
    })
    .await;
    let started = aborted(&m).expect("abortedTime set");
    abort_timeline
        .wait_in_order(&[
            "NewRevisionCreated",
            "MaxFailuresExceeded",
            "RolloutAborted",
        ])
        .await;
    let breach = abort_timeline.first("MaxFailuresExceeded").unwrap();
    assert_eq!(
        breach.aborted.as_ref(),
        Some(&started),
        "abortedTime persisted with the breach, before the revert"
    );
    let all_v1: BTreeMap<String, String> = hub
        .clusters
        .iter()
        .map(|c| (c.clone(), v1.clone()))
        .collect();
    wait_works(&hub, "abort", &all_v1).await;
    let m = wait_mwrs(&hub, "abort", "the revert to settle", |m| {
        has_condition(m, "ManifestworkApplied", "True", "AsExpected")
    })
    .await;
    assert!(has_condition(&m, "Progressing", "False", "RolloutAborted"));
    assert!(has_condition(
        &m,
        "PlacementRolledOut",
        "False",
        "RolloutDegraded"
    ));
    assert_eq!(
        aborted(&m),
        Some(started),
        "abortedTime kept while the hold stands"
    );
    assert_eq!(current(&m).as_deref(), Some(v1.as_str()));
    assert_ne!(update(&m).as_deref(), Some(v1.as_str()));

    // The stopped one never moved further meanwhile.
    assert_eq!(revisions_by_cluster(&hub, "stop").await, want);
}

/// ProgressivePerGroup with no progressDeadline: a cluster that degrades in the second
/// of three groups stops the rollout with MaxFailuresExceeded; the third group never
/// gets v2. (Upstream's walk waited at the first group for ever: no breach, no stop.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_degraded_cluster_in_a_later_group_stops_a_per_group_rollout() {
    let Some((hub, _controller)) = common::started("pergroup-degrade", 6).await else {
        return;
    };
    let cs = hub.clusters.clone();
    hub.publish(
        "waves",
        &[
            mwrs_fleet::placement::DecisionGroup::new("", cs[0..2].to_vec()),
            mwrs_fleet::placement::DecisionGroup::new("", cs[2..4].to_vec()),
            mwrs_fleet::placement::DecisionGroup::new("", cs[4..6].to_vec()),
        ],
    )
    .await;
    let _agent = start_agent_degrading(&hub, &cs[2], "v2");
    hub.create_mwrs(&mwrs(
        "waves",
        configmap_template("v1"),
        &[("waves", json!({"type": "ProgressivePerGroup"}))],
    ))
    .await;
    let v1 = current(&wait_complete(&hub, "waves", None).await).unwrap();
    hub.set_template("waves", configmap_template("v2")).await;
    let m = wait_mwrs(&hub, "waves", "MaxFailuresExceeded", |m| {
        has_condition(m, "Progressing", "False", "MaxFailuresExceeded")
    })
    .await;
    let v2 = update(&m).unwrap();
    assert!(
        message(&m, "Progressing").contains(&cs[2]),
        "{}",
        describe(&m)
    );
    assert_eq!(current(&m).as_deref(), Some(v1.as_str()));
    assert_eq!(aborted(&m), None);
    let want: BTreeMap<String, String> = cs
        .iter()
        .enumerate()
        .map(|(i, c)| (c.clone(), if i < 4 { v2.clone() } else { v1.clone() }))
        .collect();
    assert_eq!(revisions_by_cluster(&hub, "waves").await, want);
}
