//! Rollout by decision group with upstream's placement controller and work agents: the
//! canary group (cluster1) gets a new revision first; the other group only once the
//! canary's agent has reported it Available; every spoke ends on the revision.
//!
//! Needs the e2e environment (`. "$(e2e/env.sh up)"`); skipped without it unless CI=true.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use kube::api::Api;
use kube::runtime::watcher;
use mwrs_api::work::ManifestWork;
use mwrs_e2e::{Env, WAIT, configmap_template, manifest_version};
use mwrs_testsupport::{wait_for, watch_objects};
use serde_json::json;

/// When each cluster's ManifestWork was first seen carrying `version`, and first seen
/// Available at that generation.
#[derive(Default, Debug)]
struct Seen {
    written: BTreeMap<String, Instant>,
    available: BTreeMap<String, Instant>,
}

fn available(mw: &ManifestWork) -> bool {
    mw.reports("Available", "True")
}

/// Success reported for the ManifestWork's generation (Available True, Progressing
/// False) while `Applied` is not yet at that generation.
fn early_report(mw: &ManifestWork) -> bool {
    let g = mw.metadata.generation;
    let cond = |t: &str| {
        mw.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == t))
            .map(|c| (c.status.clone(), c.observed_generation))
    };
    cond("Available") == Some(("True".into(), g))
        && cond("Progressing") == Some(("False".into(), g))
        && cond("Applied").is_some_and(|(_, at)| at != g)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revision_reaches_the_canary_group_first_then_the_rest() {
    let Some(env) = Env::from_env("groups").await else {
        return;
    };
    env.canary_placement("p").await;
    let _controller = env.start_controller();
    let cm = env.hub.namespace.clone();
    let strategy = json!({"type": "ProgressivePerGroup",
        "progressivePerGroup": {"progressDeadline": "90s"}});
    env.create_app(configmap_template(&cm, "v1"), strategy)
        .await;
    env.wait_spokes_on(&cm, "v1").await;

    let seen = Arc::new(Mutex::new(Seen::default()));
    let recorder = seen.clone();
    let works: Api<ManifestWork> = Api::all(env.hub.client.clone());
    let cfg =
        watcher::Config::default().fields(&format!("metadata.name={}.app", env.hub.namespace));
    let _watch = watch_objects(works, cfg, move |mw, gone| {
        if gone || manifest_version(&mw).as_deref() != Some("v2") {
            return;
        }
        let cluster = mw.metadata.namespace.clone().unwrap_or_default();
        let now = Instant::now();
        let mut s = recorder.lock().unwrap();
        s.written.entry(cluster.clone()).or_insert(now);
        if available(&mw) {
            s.available.entry(cluster).or_insert(now);
        }
    })
    .await;

    env.hub
        .set_template("app", configmap_template(&cm, "v2"))
        .await;
    env.wait_spokes_on(&cm, "v2").await;
    let s = wait_for("every ManifestWork seen Available on v2", WAIT, || async {
        let s = seen.lock().unwrap();
        if s.available.len() == 3 {
            Ok(format!("{s:?}"))
        } else {
            Err(format!("{s:?}"))
        }
    })
    .await;
    let s_now = seen.lock().unwrap();
    let canary_done = s_now.available["cluster1"];
    for c in ["cluster2", "cluster3"] {
        assert!(
            s_now.written[c] >= canary_done,
            "{c} got v2 before the canary was Available: {s}"
        );
    }
}

/// A revision that a CEL condition rule keeps Progressing: only the canary group gets it,
/// it times out at `progressDeadline`, `AbortAll` puts the canary's spoke back on the
/// stable revision, and the other clusters' ManifestWorks are never rewritten.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revision_stuck_progressing_on_the_canary_is_aborted_on_its_spoke() {
    use mwrs_e2e::configmap_template_stuck_on;
    let Some(env) = Env::from_env("abort").await else {
        return;
    };
    env.canary_placement("p").await;
    let _controller = env.start_controller();
    let cm = env.hub.namespace.clone();
    let strategy = json!({"type": "ProgressivePerGroup",
        "progressivePerGroup": {"progressDeadline": "10s", "maxFailures": 0},
        "failureStrategy": "AbortAll"});
    let v1 = env
        .create_app(configmap_template_stuck_on(&cm, "v1", "v2"), strategy)
        .await;
    env.wait_spokes_on(&cm, "v1").await;
    let generations = |works: Vec<ManifestWork>| -> BTreeMap<String, Option<i64>> {
        works
            .into_iter()
            .map(|w| {
                (
                    w.metadata.namespace.unwrap_or_default(),
                    w.metadata.generation,
                )
            })
            .collect()
    };
    let before = generations(env.hub.works_of("app").await);

    // The canary's ManifestWork as the agent reports it: upstream's agent (v1.2.x) first
    // writes the new generation's Available/Progressing evaluated against the old object
    // (the rule reads v1: not Progressing) while Applied is still at the old generation —
    // an early success report (rules §11.2–11.3). Usually seen; its timing is the
    // agent's, and a run without it checks the abort alone (and says so).
    let early = Arc::new(Mutex::new(false));
    let flag = early.clone();
    let canary_works: Api<ManifestWork> = Api::namespaced(env.hub.client.clone(), "cluster1");
    let canary_cfg =
        watcher::Config::default().fields(&format!("metadata.name={}.app", env.hub.namespace));
    let _canary = watch_objects(canary_works, canary_cfg, move |mw, gone| {
        if !gone && early_report(&mw) {
            *flag.lock().unwrap() = true;
        }
    })
    .await;
    // Every currentRevision the MWRS shows from here on: the held revision is never
    // promoted, not even for a moment.
    let currents = Arc::new(Mutex::new(Vec::<String>::new()));
    let recorder = currents.clone();
    let mwrs_cfg = watcher::Config::default().fields("metadata.name=app");
    let _watch = watch_objects(env.hub.mwrs_api(), mwrs_cfg, move |m, _| {
        if let Some(c) = m.status.and_then(|s| s.current_revision) {
            recorder.lock().unwrap().push(c);
        }
    })
    .await;
    env.hub
        .set_template("app", configmap_template_stuck_on(&cm, "v2", "v2"))
        .await;
    wait_for("the canary's spoke on v2", WAIT, || async {
        let v = env.spoke_versions(&cm).await;
        match v["cluster1"].as_deref() {
            Some("v2") => Ok(()),
            _ => Err(format!("{v:?}")),
        }
    })
    .await;
    let m = env.wait_aborted("app").await;
    let status = m.status.unwrap_or_default();
    assert_eq!(
        status.current_revision,
        Some(v1.clone()),
        "the stable revision stays current"
    );
    let seen = currents.lock().unwrap().clone();
    assert!(
        seen.iter().all(|c| *c == v1),
        "v2 was current at some point: {seen:?}"
    );
    if !*early.lock().unwrap() {
        eprintln!(
            "NOTE: upstream's agent made no early success report in this run; the abort \
             was checked, the early-report path was not exercised"
        );
    }
    assert_ne!(
        status.update_revision, status.current_revision,
        "v2 is held"
    );
    env.wait_spokes_on(&cm, "v1").await;
    let after = generations(env.hub.works_of("app").await);
    for c in ["cluster2", "cluster3"] {
        assert_eq!(after[c], before[c], "{c}'s ManifestWork was rewritten");
    }
}
