//! The manual controls of rules §7 end to end: the `mwrs` binary sets the annotation, the
//! controller (in this process) acts on each request exactly once, with Events and
//! conditions showing it. Abort then retry; retry after an automatic abort; pause during
//! a Progressive rollout, then resume.
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{WAIT, carried, describe, mwrs, start_controller, status, version_of, watch};
use mwrs_api::labels;
use mwrs_fleet::{Agent, AgentConfig, AgentHandle, Behaviour};
use mwrs_testsupport::{TestHub, configmap_template, has_condition, mwrs as mwrs_object, wait_for};
use serde_json::{Value, json};

/// An agent for the test's clusters: the first cluster does what `first` says for the
/// template version it gets (None: that cluster behaves as the others); every other
/// answer is success after `after`.
fn agent_where_first(
    hub: &TestHub,
    after: Duration,
    first: impl Fn(Option<&str>) -> Option<Behaviour> + Send + Sync + 'static,
) -> AgentHandle {
    let name = hub.clusters[0].clone();
    Agent::start(
        hub.client.clone(),
        AgentConfig::new(hub.clusters.clone()).behaviour(move |w| {
            (w.cluster == name)
                .then(|| first(version_of(w.spec)))
                .flatten()
                .unwrap_or(Behaviour::Succeed { after })
        }),
    )
}

/// An agent for the test's clusters: `slow` (while set) hangs on v2 in the first cluster;
/// everything else succeeds after `after`.
fn agent(hub: &TestHub, slow: Arc<AtomicBool>, after: Duration) -> AgentHandle {
    agent_where_first(hub, after, move |v| {
        (v == Some("v2") && slow.load(Ordering::SeqCst)).then_some(Behaviour::Hang)
    })
}

/// Creates `app` on v1 with `strategy`, waits for it to complete, moves the template to v2.
/// Returns (v1, v2) hashes.
async fn v1_then_v2(hub: &TestHub, strategy: Value) -> (String, String) {
    hub.publish_all("p").await;
    common::create_v1(hub, "app", strategy).await;
    let r = watch(hub, "app").await;
    assert_eq!(r.code, 0, "v1 completes: {r:?}");
    let v1 = status(&hub.get_mwrs("app").await.unwrap())
        .current_revision
        .unwrap();
    hub.set_template("app", configmap_template("v2")).await;
    let v2 = wait_for("the v2 revision", WAIT, || async {
        let m = hub.get_mwrs("app").await.ok_or("no MWRS")?;
        match status(&m).update_revision {
            Some(u) if u != v1 => Ok(u),
            _ => Err(describe(&m)),
        }
    })
    .await;
    (v1, v2)
}

/// Waits until every ManifestWork carries `hash`.
async fn all_on(hub: &TestHub, hash: &str, what: &str) {
    wait_for(what, WAIT, || async {
        let on = carried(hub, "app").await;
        if on.len() == hub.clusters.len() && on.values().all(|h| h == hash) {
            Ok(())
        } else {
            Err(format!("{on:?}"))
        }
    })
    .await;
}

/// Manual abort during a rollout, then retry: each acted on once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_then_retry() {
    let Some(hub) = TestHub::from_env("cli-abort", 3).await else {
        return;
    };
    let _controller = start_controller(&hub);
    let slow = Arc::new(AtomicBool::new(true));
    let _agent = agent(&hub, slow.clone(), Duration::from_millis(200));
    let strategy = json!({"type": "Progressive", "progressive": {"maxConcurrency": 1}});
    let (v1, v2) = v1_then_v2(&hub, strategy).await;
    // The first cluster hangs on v2: the rollout is stuck in flight, not failed.
    wait_for("the first cluster on v2", WAIT, || async {
        let on = carried(&hub, "app").await;
        (on.get(&hub.clusters[0]) == Some(&v2))
            .then_some(())
            .ok_or(format!("{on:?}"))
    })
    .await;
    let r = mwrs(&hub, &["rollout", "status", "app"]).await;
    assert_eq!(r.code, 0, "in progress is not a failure: {r:?}");
    assert!(r.out.starts_with("mwrs/app  Progressing"), "{}", r.out);

    let r = mwrs(&hub, &["rollout", "abort", "app"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let token = r
        .out
        .split("(request ")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .unwrap()
        .to_string();
    let m = hub.get_mwrs("app").await.unwrap();
    assert_eq!(
        m.metadata.annotations.as_ref().unwrap()[labels::CONTROL_ABORT],
        token,
        "the request token is the annotation"
    );
    all_on(&hub, &v1, "every cluster back on v1").await;
    let m = wait_for("the abort to be recorded", WAIT, || async {
        let m = hub.get_mwrs("app").await.ok_or("no MWRS")?;
        let handled = status(&m).handled_controls.and_then(|h| h.abort);
        if handled.as_deref() == Some(token.as_str())
            && has_condition(&m, "Progressing", "False", "RolloutAborted")
            && status(&m).aborted_time.is_some()
        {
            Ok(m)
        } else {
            Err(describe(&m))
        }
    })
    .await;
    assert_eq!(status(&m).current_revision.as_deref(), Some(v1.as_str()));
    let events = hub.events_of("app").await;
    assert!(
        events
            .iter()
            .any(|(r, n)| r == "AbortStarted" && n.contains(&v2)),
        "{events:?}"
    );
    assert!(
        events.iter().any(|(r, _)| r == "RolloutAborted"),
        "{events:?}"
    );
    let r = mwrs(&hub, &["rollout", "status", "app"]).await;
    assert_eq!(r.code, 4, "Aborted: exit 4; {r:?}");
    let r = mwrs(&hub, &["get"]).await;
    assert_eq!(common::rows(&r.out)[0]["STATUS"], "Aborted");
    // history marks the held revision.
    let h = common::rows(&mwrs(&hub, &["rollout", "history", "app"]).await.out);
    let roles: Vec<(&str, &str)> = h
        .iter()
        .map(|r| (r["HASH"].as_str(), r["ROLE"].as_str()))
        .collect();
    assert_eq!(roles, vec![(v1.as_str(), "current"), (v2.as_str(), "held")]);
    // Undo to the held revision changes nothing and points to retry.
    let r = mwrs(&hub, &["rollout", "undo", "app", "--to-revision", "2"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.out.contains("rollout retry app"), "{}", r.out);

    // Retry with the cluster fixed: v2 rolls out again and completes, while the (handled)
    // abort annotation stays: acting on it again would revert and never complete.
    slow.store(false, Ordering::SeqCst);
    let r = mwrs(&hub, &["rollout", "retry", "app"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let r = watch(&hub, "app").await;
    assert_eq!(r.code, 0, "retry completes: {r:?}");
    let m = hub.get_mwrs("app").await.unwrap();
    let s = status(&m);
    assert_eq!(
        s.current_revision.as_deref(),
        Some(v2.as_str()),
        "{}",
        describe(&m)
    );
    assert!(s.aborted_time.is_none());
    assert_eq!(
        s.handled_controls.as_ref().unwrap().abort.as_deref(),
        Some(token.as_str())
    );
    assert!(s.handled_controls.as_ref().unwrap().retry.is_some());
    assert!(
        m.metadata
            .annotations
            .as_ref()
            .unwrap()
            .contains_key(labels::CONTROL_ABORT),
        "the abort request is still there, handled"
    );
    all_on(&hub, &v2, "every cluster on v2").await;
    let events = hub.events_of("app").await;
    assert!(
        events
            .iter()
            .any(|(r, n)| r == "RetryRequested" && n.contains("rolls out again")),
        "{events:?}"
    );
}

/// Retry after an automatic abort (AbortAll, deadline passed): the failed revision is
/// held until the retry, then rolls out again with fresh deadlines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_automatic_abort() {
    let Some(hub) = TestHub::from_env("cli-retry", 3).await else {
        return;
    };
    let _controller = start_controller(&hub);
    let slow = Arc::new(AtomicBool::new(true));
    let _agent = agent(&hub, slow.clone(), Duration::from_millis(200));
    let strategy = json!({"type": "All", "all": {"progressDeadline": "4s"},
        "failureStrategy": "AbortAll"});
    let (v1, v2) = v1_then_v2(&hub, strategy).await;
    // status -w ends with the abort: exit 4.
    let r = watch(&hub, "app").await;
    assert_eq!(r.code, 4, "{r:?}");
    assert!(r.out.contains("mwrs/app: Aborted"), "{}", r.out);
    all_on(&hub, &v1, "every cluster back on v1").await;
    let m = hub.get_mwrs("app").await.unwrap();
    assert_eq!(status(&m).update_revision.as_deref(), Some(v2.as_str()));

    slow.store(false, Ordering::SeqCst);
    let r = mwrs(&hub, &["rollout", "retry", "app"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.out.contains(&format!("revision {v2} rolls out again")),
        "{}",
        r.out
    );
    let r = watch(&hub, "app").await;
    assert_eq!(r.code, 0, "{r:?}");
    let m = hub.get_mwrs("app").await.unwrap();
    assert_eq!(status(&m).current_revision.as_deref(), Some(v2.as_str()));
    all_on(&hub, &v2, "every cluster on v2").await;
    // A second retry with nothing held is recorded and changes nothing.
    let r = mwrs(&hub, &["rollout", "retry", "app"]).await;
    assert!(r.err.contains("no abort holds this rollout"), "{r:?}");
}

/// Pause during a Progressive rollout: the cluster in flight finishes, no other starts;
/// resume completes the rollout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_during_progressive_rollout() {
    let Some(hub) = TestHub::from_env("cli-pause", 4).await else {
        return;
    };
    let _controller = start_controller(&hub);
    // The first cluster takes a while on v2, long enough to pause while it is in flight.
    let _agent = agent_where_first(&hub, Duration::from_millis(100), |v| {
        (v == Some("v2")).then_some(Behaviour::Succeed {
            after: Duration::from_secs(4),
        })
    });
    let strategy = json!({"type": "Progressive", "progressive": {"maxConcurrency": 1}});
    let (_v1, v2) = v1_then_v2(&hub, strategy).await;
    wait_for("the first cluster on v2", WAIT, || async {
        let on = carried(&hub, "app").await;
        (on.get(&hub.clusters[0]) == Some(&v2))
            .then_some(())
            .ok_or(format!("{on:?}"))
    })
    .await;
    let r = mwrs(&hub, &["rollout", "pause", "app"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.out.trim(), "mwrs/app paused");
    // The controller saw the in-flight cluster finish while paused (1 of 4 done) and
    // started no other.
    let m = wait_for(
        "the paused rollout with the first cluster done",
        WAIT,
        || async {
            let m = hub.get_mwrs("app").await.ok_or("no MWRS")?;
            let msg = mwrs_testsupport::conditions(&m)
                .get("Progressing")
                .map(|(_, _, msg)| msg.clone())
                .unwrap_or_default();
            if has_condition(&m, "Progressing", "Unknown", "RolloutPaused")
                && msg.contains("on 1 of 4 clusters")
            {
                Ok(m)
            } else {
                Err(describe(&m))
            }
        },
    )
    .await;
    let on = carried(&hub, "app").await;
    let on_v2: Vec<&String> = on
        .iter()
        .filter(|(_, h)| **h == v2)
        .map(|(c, _)| c)
        .collect();
    assert_eq!(
        on_v2,
        vec![&hub.clusters[0]],
        "only the in-flight cluster: {on:?}"
    );
    assert_ne!(status(&m).current_revision.as_deref(), Some(v2.as_str()));
    let r = mwrs(&hub, &["get"]).await;
    assert_eq!(common::rows(&r.out)[0]["STATUS"], "Paused");
    // `status -w` on a paused rollout returns: it waits for someone to resume it.
    let r = mwrs(
        &hub,
        &["rollout", "status", "app", "-w", "--timeout", "30s"],
    )
    .await;
    assert_eq!(r.code, 10, "paused: {r:?}");
    let events = hub.events_of("app").await;
    assert!(
        events.iter().any(|(r, _)| r == "RolloutPaused"),
        "{events:?}"
    );
    let r = mwrs(&hub, &["rollout", "pause", "app"]).await;
    assert_eq!(r.out.trim(), "mwrs/app is already paused");

    let r = mwrs(&hub, &["rollout", "resume", "app"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.out.trim(), "mwrs/app resumed");
    let r = watch(&hub, "app").await;
    assert_eq!(r.code, 0, "{r:?}");
    all_on(&hub, &v2, "every cluster on v2").await;
}

/// After two automatic aborts in a row, a bare `undo` goes to the stable revision, never to
/// the earlier failed one (found by a newcomer: it rolled out the revision that had hung).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_after_two_aborts_goes_to_the_stable_revision() {
    let Some(hub) = TestHub::from_env("cli-undo2", 2).await else {
        return;
    };
    let _controller = start_controller(&hub);
    let _agent = agent_where_first(&hub, Duration::from_millis(200), |v| {
        (v != Some("v1")).then_some(Behaviour::Hang)
    });
    // Long enough for v1's agent reports on a loaded machine (3 s timed v1 out beside two
    // other test binaries and a build).
    let strategy = json!({"type": "All", "all": {"progressDeadline": "10s"},
        "failureStrategy": "AbortAll"});
    let (v1, v2) = v1_then_v2(&hub, strategy).await;
    assert_eq!(watch(&hub, "app").await.code, 4, "v2 aborted");
    hub.set_template("app", configmap_template("v3")).await;
    let v3 = wait_for("v3 held by an abort", WAIT, || async {
        let m = hub.get_mwrs("app").await.ok_or("no MWRS")?;
        let s = status(&m);
        match (&s.update_revision, &s.aborted_time) {
            (Some(u), Some(_)) if *u != v1 && *u != v2 => Ok(u.clone()),
            _ => Err(describe(&m)),
        }
    })
    .await;

    // Each abort has its own Event naming its own revision (not folded into the first).
    // The controller publishes Events after the status write the wait above saw.
    wait_for(
        "an AbortStarted Event naming each aborted revision",
        WAIT,
        || async {
            let events = hub.events_of("app").await;
            for v in [&v2, &v3] {
                if !events
                    .iter()
                    .any(|(r, n)| r == "AbortStarted" && n.contains(v.as_str()))
                {
                    return Err(format!("no AbortStarted naming {v}: {events:?}"));
                }
            }
            Ok(())
        },
    )
    .await;
    // The cause outlives the revert: `get -o wide` and `rollout status` say it.
    let wide = mwrs(&hub, &["get", "-o", "wide"]).await;
    let row = &common::rows(&wide.out)[0];
    assert!(
        row["LAST-ABORT"].starts_with("ProgressDeadlineExceeded")
            && row["LAST-ABORT"].contains(&format!("revision {v3} went back to {v1}"))
            && row["LAST-ABORT"].contains(&format!("timed out: {}", hub.clusters[0])),
        "{}",
        wide.out
    );
    let r = mwrs(&hub, &["rollout", "status", "app"]).await;
    assert!(
        r.out.contains("last abort: ProgressDeadlineExceeded"),
        "{}",
        r.out
    );

    let r = mwrs(&hub, &["rollout", "undo", "app", "--dry-run"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.out.contains(&format!("would go to revision 1 ({v1})")),
        "{}",
        r.out
    );
    let r = mwrs(&hub, &["rollout", "undo", "app"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(watch(&hub, "app").await.code, 0, "undo to v1 completes");
    let m = hub.get_mwrs("app").await.unwrap();
    assert_eq!(status(&m).current_revision.as_deref(), Some(v1.as_str()));
    all_on(&hub, &v1, "every cluster on v1").await;
    // v1 is now current and the spec's: v2 and v3 were aborted, so nothing is left.
    let r = mwrs(&hub, &["rollout", "undo", "app", "--dry-run"]).await;
    assert_eq!(r.code, 6, "not found: {r:?}");
    assert!(r.err.contains("--to-revision"), "{r:?}");
    assert_ne!(v2, v3);
}

/// rules §10.6: a user's abort of the first rollout (no stable revision) stops it; it goes
/// on only after a retry (found by a newcomer: the rollout carried on to every cluster).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_abort_of_the_first_rollout_stops_it() {
    let Some(hub) = TestHub::from_env("cli-abort1", 3).await else {
        return;
    };
    let _controller = start_controller(&hub);
    // The first cluster takes long enough to abort while it is in flight.
    let _agent = agent_where_first(&hub, Duration::from_millis(200), |_| {
        Some(Behaviour::Succeed {
            after: Duration::from_secs(4),
        })
    });
    hub.publish_all("p").await;
    let strategy = json!({"type": "Progressive", "progressive": {"maxConcurrency": 1}});
    common::create_v1(&hub, "app", strategy).await;
    wait_for("the first cluster written", WAIT, || async {
        let on = carried(&hub, "app").await;
        (on.len() == 1).then_some(()).ok_or(format!("{on:?}"))
    })
    .await;
    let r = mwrs(&hub, &["rollout", "abort", "app"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.err.contains("no stable revision") || r.out.contains("no stable revision"),
        "{r:?}"
    );
    wait_for("AbortFailed", WAIT, || async {
        let m = hub.get_mwrs("app").await.ok_or("no MWRS")?;
        has_condition(&m, "Progressing", "False", "AbortFailed")
            .then_some(())
            .ok_or(describe(&m))
    })
    .await;
    // The first cluster finishes: a rollout that went on would start the next one in the
    // pass that counts it (before the status write that shows it).
    wait_for("the first cluster counted done", WAIT, || async {
        let m = hub.get_mwrs("app").await.ok_or("no MWRS")?;
        (status(&m).summary.updated == 1)
            .then_some(())
            .ok_or(describe(&m))
    })
    .await;
    let on = carried(&hub, "app").await;
    assert_eq!(on.len(), 1, "no cluster started after the abort: {on:?}");
    let m = hub.get_mwrs("app").await.unwrap();
    assert!(
        has_condition(&m, "Progressing", "False", "AbortFailed"),
        "{}",
        describe(&m)
    );
    let r = mwrs(&hub, &["rollout", "retry", "app"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let r = watch(&hub, "app").await;
    assert_eq!(r.code, 0, "the retry completes: {r:?}");
    assert_eq!(carried(&hub, "app").await.len(), 3);
}

/// No silent "in progress" (found by a newcomer): a missing Placement makes the rollout
/// Blocked with the reason, and `status -w` returns (exit 10) instead of waiting for ever;
/// a ManifestWork write the hub refuses (here: the cluster's namespace does not exist)
/// shows the hub's words on that cluster and fails the rollout (exit 3), instead of
/// `ToApply` for ever with the error only in the controller's log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_placement_and_a_refused_write_say_so() {
    let Some(hub) = TestHub::from_env("cli-blocked", 2).await else {
        return;
    };
    let _controller = start_controller(&hub);
    let _agent = agent(
        &hub,
        Arc::new(AtomicBool::new(false)),
        Duration::from_millis(200),
    );
    let strategy = json!({"type": "All"});
    hub.create_mwrs(&mwrs_object(
        "app",
        configmap_template("v1"),
        &[("no-such-placement", strategy.clone())],
    ))
    .await;
    let r = watch(&hub, "app").await;
    assert_eq!(r.code, 10, "blocked: {r:?}");
    assert!(r.out.contains("no-such-placement"), "{}", r.out);
    let row = &common::rows(&mwrs(&hub, &["get"]).await.out)[0];
    assert_eq!(row["STATUS"], "Blocked");

    // A second MWRS on a placement that also decides a cluster without a namespace.
    let ghost = format!("{}-ghost", hub.namespace);
    let mut clusters = hub.clusters.clone();
    clusters.push(ghost.clone());
    hub.publish(
        "p",
        &[mwrs_fleet::placement::DecisionGroup::new("", clusters)],
    )
    .await;
    common::create_v1(&hub, "web", strategy).await;
    let r = watch(&hub, "web").await;
    assert_eq!(r.code, 3, "degraded: {r:?}");
    let r = mwrs(&hub, &["rollout", "status", "web"]).await;
    let line = r
        .out
        .lines()
        .find(|l| l.starts_with(&ghost))
        .unwrap_or_else(|| panic!("no line for {ghost}: {}", r.out));
    assert!(
        line.contains("Failed") && line.contains("the hub refused the ManifestWork write"),
        "{line}"
    );
    let events = hub.events_of("web").await;
    assert!(
        events
            .iter()
            .any(|(r, n)| r == "ManifestWorkWriteRefused" && n.contains(&ghost)),
        "{events:?}"
    );
}

/// rules §12.3: a rollout held by a plugin that does not answer (here one the controller
/// does not know) reaches no cluster; `rollout status` says so and how to get past it;
/// `rollout retry --skip-plugins` rolls the revision out without it, which status and an
/// Event record; `rollout undo --skip-plugins` goes back the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skip_plugins_rolls_out_past_a_plugin_that_holds_the_rollout() {
    let Some(hub) = TestHub::from_env("cli-skip-plugins", 3).await else {
        return;
    };
    let _controller = start_controller(&hub);
    let _agent = agent(
        &hub,
        Arc::new(AtomicBool::new(false)),
        Duration::from_millis(200),
    );
    let (v1, v2) = v1_then_v2(&hub, json!({"type": "All"})).await;
    all_on(&hub, &v2, "v2 without a plugin").await;
    // v3 behind plugin `judge`, which no --work-config registers.
    let body = json!({"spec": {
        "placementRefs": [{"name": "p", "rolloutStrategy": {"type": "All", "plugin": "judge"}}],
        "manifestWorkTemplate": configmap_template("v3")}});
    hub.mwrs_api()
        .patch(
            "app",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&body),
        )
        .await
        .unwrap();
    let hub = &hub;
    let v2 = &v2;
    let v3 = wait_for("v3 held by its plugin", WAIT, || async move {
        let m = hub.get_mwrs("app").await.unwrap();
        let s = status(&m);
        let held = has_condition(&m, "PluginLoaded", "False", "Failed");
        match s.update_revision {
            Some(u) if held && u != *v2 => Ok(u),
            _ => Err(describe(&m)),
        }
    })
    .await;
    all_on(hub, v2, "no cluster given v3").await;
    let r = mwrs(hub, &["rollout", "status", "app"]).await;
    assert!(
        r.out.contains("plugins: judge plugin is not registered"),
        "{r:?}"
    );
    assert!(r.out.contains("--skip-plugins"), "{r:?}");

    let r = mwrs(hub, &["rollout", "retry", "app", "--skip-plugins"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.err
            .contains(&format!("revision {v3} rolls out without asking")),
        "{r:?}"
    );
    let r = watch(hub, "app").await;
    assert_eq!(r.code, 0, "{r:?}");
    all_on(hub, &v3, "every cluster on v3").await;
    let m = hub.get_mwrs("app").await.unwrap();
    assert!(
        has_condition(&m, "PluginLoaded", "True", "Skipped"),
        "{}",
        describe(&m)
    );
    let r = mwrs(hub, &["rollout", "status", "app"]).await;
    assert!(
        r.out.contains("plugins: judge not asked about revision"),
        "{r:?}"
    );
    let events = hub.events_of("app").await;
    assert!(
        events.iter().any(|(reason, _)| reason == "Skipped"),
        "{events:?}"
    );

    // Back to v1 the same way: the skip names v1 in the same write as the template.
    let r = mwrs(
        hub,
        &[
            "rollout",
            "undo",
            "app",
            "--to-revision",
            "1",
            "--skip-plugins",
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let r = watch(hub, "app").await;
    assert_eq!(r.code, 0, "{r:?}");
    all_on(hub, &v1, "every cluster back on v1").await;
    let m = hub.get_mwrs("app").await.unwrap();
    let generation = m.metadata.generation.unwrap();
    let skip = m.metadata.annotations.unwrap_or_default()[labels::SKIP_PLUGINS].clone();
    assert_eq!(skip, format!("{v1}@{generation}"));

    // The skip is spent with its request (security review U1): v3, then v1 again by hand
    // (a GitOps revert), and v1 waits for its plugin like any revision.
    for version in ["v3", "v1"] {
        hub.set_template("app", configmap_template(version)).await;
    }
    let v1 = &v1;
    wait_for("v1 held by its plugin again", WAIT, || async move {
        let m = hub.get_mwrs("app").await.unwrap();
        let held = has_condition(&m, "PluginLoaded", "False", "Failed");
        match status(&m).update_revision {
            Some(u) if held && u == *v1 => Ok(()),
            _ => Err(describe(&m)),
        }
    })
    .await;
}
