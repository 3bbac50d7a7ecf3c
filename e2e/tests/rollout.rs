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
use mwrs_e2e::{Env, WAIT, configmap_template};
use mwrs_testsupport::{mwrs, wait_for};
use serde_json::json;

/// When each cluster's ManifestWork was first seen carrying `version`, and first seen
/// Available at that generation.
#[derive(Default, Debug)]
struct Seen {
    written: BTreeMap<String, Instant>,
    available: BTreeMap<String, Instant>,
}

fn version(mw: &ManifestWork) -> Option<String> {
    mw.spec
        .manifests()
        .first()
        .and_then(|m| m.pointer("/data/version"))
        .and_then(|v| v.as_str())
        .map(str::to_string)
}

fn available(mw: &ManifestWork) -> bool {
    let generation = mw.metadata.generation;
    mw.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.type_ == "Available" && c.status == "True" && c.observed_generation == generation
            })
        })
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
    env.hub
        .create_mwrs(&mwrs(
            "app",
            configmap_template(&cm, "v1"),
            &[("p", strategy)],
        ))
        .await;
    env.wait_spokes_on(&cm, "v1").await;

    let seen = Arc::new(Mutex::new(Seen::default()));
    let work_name = format!("{}.app", env.hub.namespace);
    let recorder = seen.clone();
    let watched = work_name.clone();
    let works: Api<ManifestWork> = Api::all(env.hub.client.clone());
    let cfg = watcher::Config::default().fields(&format!("metadata.name={watched}"));
    let stream = watcher::watcher(works, cfg);
    let _watch = mwrs_testsupport::TaskGuard::spawn(async move {
        use futures::StreamExt;
        let mut stream = std::pin::pin!(stream);
        while let Some(ev) = stream.next().await {
            let Ok(watcher::Event::Apply(mw) | watcher::Event::InitApply(mw)) = ev else {
                continue;
            };
            if version(&mw).as_deref() != Some("v2") {
                continue;
            }
            let cluster = mw.metadata.namespace.clone().unwrap_or_default();
            let now = Instant::now();
            let mut s = recorder.lock().unwrap();
            s.written.entry(cluster.clone()).or_insert(now);
            if available(&mw) {
                s.available.entry(cluster).or_insert(now);
            }
        }
    });

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
