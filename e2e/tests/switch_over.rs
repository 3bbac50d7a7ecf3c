//! Leaving is safe (rules §12.5): with upstream's work agents, an MWRS goes from upstream's
//! controller to ours, ours makes a second one, both go back to upstream's controller
//! (after `mwrs handover`), come back to ours, and ours is uninstalled. Every spoke object
//! keeps its UID and is never deleted; upstream's controller ends with one ManifestWork per
//! cluster, under its own name; no MWRS or revision is lost.
//!
//! Needs the e2e environment (`. "$(e2e/env.sh up)"`) and upstream's work manager
//! (`bench/peer/run.sh`, the binary `e2e/env.sh` builds for the agents); skipped without
//! the environment unless CI=true. Own test binary: upstream's controller serves every
//! namespace of the hub.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::watcher;
use mwrs_e2e::{Env, WAIT, configmap_template};
use mwrs_testsupport::{ChildProcess, TaskGuard, mwrs, wait_for, watch_objects};
use serde_json::json;

/// Upstream's hub work manager with its ManifestWorkReplicaSet controller on the hub
/// (killed when dropped).
fn start_upstream(env: &Env) -> ChildProcess {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../bench/peer/run.sh");
    let kubeconfig = env.hub.kubeconfig.to_string_lossy().to_string();
    ChildProcess::spawn(&script, &[&kubeconfig], &[]).expect("upstream's work manager starts")
}

/// Every ConfigMap `names` on every spoke as watched from the start: the first UID seen,
/// and each time one was deleted or came back with another UID.
struct SpokeObjects {
    seen: Arc<Mutex<BTreeMap<(String, String), String>>>,
    broken: Arc<Mutex<Vec<String>>>,
    _watches: Vec<TaskGuard>,
}

impl SpokeObjects {
    async fn watch(env: &Env, names: &[&str]) -> Self {
        let seen = Arc::new(Mutex::new(BTreeMap::new()));
        let broken = Arc::new(Mutex::new(Vec::new()));
        let mut watches = Vec::new();
        let names: BTreeSet<String> = names.iter().map(|n| n.to_string()).collect();
        for s in &env.spokes {
            let (seen, broken, names) = (seen.clone(), broken.clone(), names.clone());
            let cluster = s.name.clone();
            let api: Api<ConfigMap> = Api::namespaced(s.client.clone(), "default");
            let w = watch_objects(api, watcher::Config::default(), move |cm, gone| {
                if !names.contains(&cm.name_any()) {
                    return;
                }
                let key = (cluster.clone(), cm.name_any());
                let uid = cm.uid().unwrap_or_default();
                if gone {
                    broken.lock().unwrap().push(format!("{key:?} deleted"));
                    return;
                }
                let mut seen = seen.lock().unwrap();
                let first = seen.entry(key.clone()).or_insert_with(|| uid.clone());
                if *first != uid {
                    broken
                        .lock()
                        .unwrap()
                        .push(format!("{key:?} re-created: {first} then {uid}"));
                }
            })
            .await;
            watches.push(w);
        }
        Self {
            seen,
            broken,
            _watches: watches,
        }
    }

    fn assert_kept(&self, objects: usize) {
        let broken = self.broken.lock().unwrap().clone();
        assert!(broken.is_empty(), "spoke objects lost: {broken:?}");
        assert_eq!(self.seen.lock().unwrap().len(), objects, "objects seen");
    }
}

/// The names of MWRS `name`'s ManifestWorks, by cluster.
async fn work_names(env: &Env, name: &str) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for w in env.hub.works_of(name).await {
        out.entry(w.namespace().unwrap_or_default())
            .or_default()
            .push(w.name_any());
    }
    out
}

/// Waits until every cluster has exactly one ManifestWork of `mwrs`, named `want`.
async fn wait_named(env: &Env, mwrs: &str, want: &str) {
    wait_for(
        &format!("one ManifestWork per cluster named {want}"),
        WAIT,
        || async {
            let names = work_names(env, mwrs).await;
            let one = names.len() == env.spokes.len()
                && names.values().all(|n| n.len() == 1 && n[0] == want);
            if one {
                Ok(())
            } else {
                Err(format!("{names:?}"))
            }
        },
    )
    .await;
}

/// Waits until our controller has completed a revision of `name` other than `not`.
async fn wait_complete_past(env: &Env, name: &str, not: &str) -> String {
    wait_for(&format!("{name} complete past {not}"), WAIT, || async {
        let m = env.hub.get_mwrs(name).await.ok_or("no MWRS")?;
        let s = m.status.unwrap_or_default();
        match (s.current_revision, s.update_revision) {
            (Some(c), Some(u)) if c == u && c != not => Ok(c),
            other => Err(format!("current/update {other:?}")),
        }
    })
    .await
}

async fn revision_names(env: &Env) -> BTreeSet<String> {
    use k8s_openapi::api::apps::v1::ControllerRevision;
    let api: Api<ControllerRevision> = Api::namespaced(env.hub.client.clone(), &env.hub.namespace);
    api.list(&Default::default())
        .await
        .expect("list revisions")
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switching_to_upstream_and_back_and_uninstalling_keep_every_spoke_object() {
    let Some(env) = Env::from_env("switch").await else {
        return;
    };
    env.canary_placement("p").await;
    let ns = env.hub.namespace.clone();
    // Under upstream's naming two MWRS of one name share a ManifestWork per cluster, across
    // namespaces: names of this run's own, so that no other run's leftovers collide.
    let id = ns.rsplit('-').next().unwrap_or_default();
    let (app_mwrs, web_mwrs) = (format!("app-{id}"), format!("web-{id}"));
    let (app_m, web_m) = (app_mwrs.as_str(), web_mwrs.as_str());
    let (app, web) = (format!("{ns}-app"), format!("{ns}-web"));
    let objects = SpokeObjects::watch(&env, &[&app, &web]).await;
    let all = || json!({"type": "All"});

    // Upstream's controller rolls `app` out (ManifestWorks named `app`).
    let mut upstream = start_upstream(&env);
    let template = configmap_template(&app, "v1");
    env.hub
        .create_mwrs(&mwrs(app_m, template, &[("p", all())]))
        .await;
    env.wait_spokes_on(&app, "v1").await;
    wait_named(&env, app_m, app_m).await;
    upstream.kill();

    // Ours takes it over as it is, and rolls `web` out (`<namespace>.web`).
    let ours = env.start_controller();
    let app_v1 = env.wait_complete(app_m).await;
    let web_v1 = env
        .create_app_named(web_m, configmap_template(&web, "v1"), all())
        .await;
    env.hub
        .set_template(app_m, configmap_template(&app, "v2"))
        .await;
    env.wait_spokes_on(&app, "v2").await;
    wait_complete_past(&env, app_m, &app_v1).await;
    wait_named(&env, web_m, &format!("{ns}.{web_m}")).await;
    let revisions = revision_names(&env).await;
    assert!(revisions.len() >= 3, "{revisions:?}");
    drop(ours);

    // Back to upstream's controller, after a handover.
    // Ours ran without leader election: no Lease can say it stopped, so the test says so.
    let (code, out, err) = env.mwrs(&["handover", "--timeout", "2m", "--controller-stopped"]);
    assert_eq!(code, 0, "handover: {out}{err}");
    wait_named(&env, web_m, web_m).await;
    let mut upstream = start_upstream(&env);
    env.hub
        .set_template(app_m, configmap_template(&app, "v3"))
        .await;
    env.hub
        .set_template(web_m, configmap_template(&web, "v3"))
        .await;
    env.wait_spokes_on(&app, "v3").await;
    env.wait_spokes_on(&web, "v3").await;
    wait_named(&env, app_m, app_m).await;
    wait_named(&env, web_m, web_m).await;
    upstream.kill();

    // Ours once more, then uninstalled: what it leaves keeps running.
    let ours = env.start_controller();
    let web_v3 = wait_complete_past(&env, web_m, &web_v1).await;
    env.hub
        .set_template(app_m, configmap_template(&app, "v4"))
        .await;
    env.wait_spokes_on(&app, "v4").await;
    wait_complete_past(&env, app_m, &app_v1).await;
    drop(ours);
    assert!(web_v3 != web_v1);
    for name in [app_m, web_m] {
        assert!(env.hub.get_mwrs(name).await.is_some(), "{name} is kept");
        assert_eq!(work_names(&env, name).await.len(), env.spokes.len());
    }
    let now = revision_names(&env).await;
    assert!(
        revisions.is_subset(&now),
        "revisions lost: {revisions:?} then {now:?}"
    );
    assert_eq!(env.spoke_versions(&app).await.values().flatten().count(), 3);
    objects.assert_kept(2 * env.spokes.len());

    // A controller again, so that deleting them cleans the spokes.
    let _ours = env.start_controller();
    env.delete_and_wait_gone(app_m, &app).await;
    env.delete_and_wait_gone(web_m, &web).await;
}
