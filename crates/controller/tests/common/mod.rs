//! Shared pieces of the hub integration tests: the controller (in process or as the
//! binary) scoped to the test's namespace, work agents, status readers, a timeline of
//! the MWRS status as observed, waits on the MWRS and its ManifestWorks, and a watch
//! that counts clusters in flight on a revision.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod operator;
pub mod rbac;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, watcher as watch_fn};
use mwrs_api::labels;
use mwrs_api::mwrs::{ManifestWorkReplicaSet, ManifestWorkReplicaSetStatus};
use mwrs_api::work::ManifestWork;
use mwrs_controller::{Config, Shared};
use mwrs_engine::owner::OwnerKey;
use mwrs_fleet::{Agent, AgentConfig, AgentHandle, Behaviour, WorkInfo};
use mwrs_testsupport::{ChildProcess, TaskGuard, TestHub, conditions, has_condition, wait_for};
use serde_json::Value;

/// Default deadline of a wait in these tests.
pub const WAIT: Duration = Duration::from_secs(60);

/// A cluster that finishes each revision shortly after it sees it.
pub const QUICK: Behaviour = Behaviour::Succeed {
    after: Duration::from_millis(200),
};

/// Runs a work agent for every cluster of the test that finishes each revision `after`
/// it sees it.
pub fn start_agent_succeeding(hub: &TestHub, after: Duration) -> AgentHandle {
    start_agent(hub, move |_| Behaviour::Succeed { after })
}

/// Runs a work agent for every cluster of the test with a behaviour per ManifestWork.
pub fn start_agent(
    hub: &TestHub,
    behaviour: impl Fn(&WorkInfo<'_>) -> Behaviour + Send + Sync + 'static,
) -> AgentHandle {
    Agent::start(
        hub.client.clone(),
        AgentConfig::new(hub.clusters.clone()).behaviour(behaviour),
    )
}

/// Runs a work agent where `cluster` hangs (stays Progressing) on the template whose
/// ConfigMap has `version`; everything else finishes at once ([`QUICK`]).
pub fn start_agent_hanging(hub: &TestHub, cluster: &str, version: &'static str) -> AgentHandle {
    let cluster = cluster.to_string();
    start_agent(hub, move |w| {
        if w.cluster == cluster && version_of(w.spec) == Some(version) {
            Behaviour::Hang
        } else {
            QUICK
        }
    })
}

/// Runs a work agent where `cluster` reports Degraded shortly after it gets the template
/// whose ConfigMap has `version`; everything else finishes at once ([`QUICK`]).
pub fn start_agent_degrading(hub: &TestHub, cluster: &str, version: &'static str) -> AgentHandle {
    let cluster = cluster.to_string();
    start_agent(hub, move |w| {
        if w.cluster == cluster && version_of(w.spec) == Some(version) {
            Behaviour::Degrade {
                after: Duration::from_millis(300),
            }
        } else {
            QUICK
        }
    })
}

/// Rollout strategy `All` with `progressDeadline` and `failureStrategy: AbortAll`.
pub fn all_aborting(deadline: &str) -> Value {
    serde_json::json!({"type": "All", "all": {"progressDeadline": deadline},
        "failureStrategy": "AbortAll"})
}

/// The `data.version` of the ConfigMap in a `configmap_template` spec.
pub fn version_of(spec: &Value) -> Option<&str> {
    spec.pointer("/workload/manifests/0/data/version")
        .and_then(Value::as_str)
}

/// Runs the controller in this process for the test's namespace (tests run in parallel
/// on one hub; each controller only handles its own test's MWRS). Dropping the guard
/// stops it at once, as a crash would.
pub fn start_controller(hub: &TestHub) -> TaskGuard {
    start_controller_sharing(hub, Shared::default())
}

/// [`start_controller`] reporting readiness and metrics into `shared`, which the test
/// keeps to read them.
pub fn start_controller_sharing(hub: &TestHub, shared: Shared) -> TaskGuard {
    start_controller_configured(hub, Config::default(), shared)
}

/// [`start_controller_sharing`] with `config` (its namespace is the test's).
pub fn start_controller_configured(hub: &TestHub, config: Config, shared: Shared) -> TaskGuard {
    start_controller_judged(hub, (config, Default::default()), shared)
}

/// [`start_controller_configured`] with rollout plugins running.
pub fn start_controller_judged(
    hub: &TestHub,
    (config, plugins): (Config, std::sync::Arc<mwrs_controller::plugins::Plugins>),
    shared: Shared,
) -> TaskGuard {
    // Controller logs show up in a failing test's output (the test writer captures them).
    mwrs_testsupport::init_tracing();
    let config = Config {
        namespace: Some(hub.namespace.clone()),
        ..config
    };
    let site = rbac::Site::of(hub);
    TaskGuard::spawn(async move {
        // Under the shipped ClusterRole, so a verb the code uses and it lacks fails here.
        let client = rbac::shipped_role_client(&site)
            .await
            .unwrap_or_else(|e| panic!("cannot set up the shipped RBAC: {e:#}"));
        mwrs_controller::run(client, config, plugins, shared, std::future::pending()).await
    })
}

/// [`start_controller`] on the client `through` makes of the shipped role's (one that
/// records or holds requests).
pub fn start_controller_through(
    hub: &TestHub,
    through: impl FnOnce(kube::Client) -> kube::Client + Send + 'static,
) -> TaskGuard {
    start_controller_configured_through(hub, Config::default(), through)
}

/// [`start_controller_through`] with `config` (its namespace is the test's).
pub fn start_controller_configured_through(
    hub: &TestHub,
    config: Config,
    through: impl FnOnce(kube::Client) -> kube::Client + Send + 'static,
) -> TaskGuard {
    mwrs_testsupport::init_tracing();
    let config = Config {
        namespace: Some(hub.namespace.clone()),
        ..config
    };
    let site = rbac::Site::of(hub);
    TaskGuard::spawn(async move {
        let client = rbac::shipped_role_client(&site)
            .await
            .unwrap_or_else(|e| panic!("cannot set up the shipped RBAC: {e:#}"));
        mwrs_controller::run(
            through(client),
            config,
            Default::default(),
            Shared::default(),
            std::future::pending(),
        )
        .await
    })
}

/// `inner`, showing `see` every request before sending it: a test's view of the
/// controller's API conversation (with [`start_controller_through`]).
pub fn inspecting(
    inner: kube::Client,
    see: impl Fn(&http::Request<kube::client::Body>) + Clone + Send + Sync + 'static,
) -> kube::Client {
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let (inner, see) = (inner.clone(), see.clone());
        async move {
            see(&req);
            inner
                .send(req)
                .await
                .map_err(Box::<dyn std::error::Error + Send + Sync>::from)
        }
    });
    kube::Client::new(service, "default")
}

/// The common start of a test: its slice of the hub, the in-process controller, and
/// Placement `p` selecting every cluster of the test. None: no hub (test skipped).
pub async fn started(test: &str, clusters: usize) -> Option<(TestHub, TaskGuard)> {
    let hub = TestHub::from_env(test, clusters).await?;
    let controller = start_controller(&hub);
    hub.publish_all("p").await;
    Some((hub, controller))
}

/// Runs the controller binary for the test's namespace, with `extra` flags, under the
/// shipped RBAC.
pub async fn spawn_controller_binary(hub: &TestHub, extra: &[&str]) -> ChildProcess {
    spawn_controller_binary_logging(hub, extra, "info").await
}

/// [`spawn_controller_binary`] with `RUST_LOG` set to `log`.
pub async fn spawn_controller_binary_logging(
    hub: &TestHub,
    extra: &[&str],
    log: &str,
) -> ChildProcess {
    let binary = std::path::Path::new(env!("CARGO_BIN_EXE_mwrs-controller"));
    spawn_controller_at(binary, hub, extra, log).await
}

/// Runs the controller binary at `binary` (another build of it: the image's) for the
/// test's namespace, with `extra` flags and `RUST_LOG` set to `log`, under the shipped RBAC.
pub async fn spawn_controller_at(
    binary: &std::path::Path,
    hub: &TestHub,
    extra: &[&str],
    log: &str,
) -> ChildProcess {
    let kubeconfig = rbac::shipped_role_kubeconfig(&rbac::Site::of(hub))
        .await
        .unwrap_or_else(|e| panic!("cannot set up the shipped RBAC: {e:#}"));
    let kubeconfig = kubeconfig.to_string_lossy().to_string();
    let mut args = vec![
        "--kubeconfig",
        kubeconfig.as_str(),
        "--namespace",
        hub.namespace.as_str(),
        "--metrics-addr",
        "127.0.0.1:0",
    ];
    args.extend_from_slice(extra);
    ChildProcess::spawn(binary, &args, &[("RUST_LOG", log)]).expect("start the controller")
}

pub fn status(m: &ManifestWorkReplicaSet) -> ManifestWorkReplicaSetStatus {
    m.status.clone().unwrap_or_default()
}

pub fn current(m: &ManifestWorkReplicaSet) -> Option<String> {
    m.status.as_ref().and_then(|s| s.current_revision.clone())
}

pub fn update(m: &ManifestWorkReplicaSet) -> Option<String> {
    m.status.as_ref().and_then(|s| s.update_revision.clone())
}

pub fn aborted(m: &ManifestWorkReplicaSet) -> Option<String> {
    m.status
        .as_ref()
        .and_then(|s| s.aborted_time.as_ref())
        .map(|t| t.0.to_string())
}

/// One line describing the MWRS status, for timeout messages.
pub fn describe(m: &ManifestWorkReplicaSet) -> String {
    let s = status(m);
    format!(
        "{}: current={:?} update={:?} aborted={:?} summary={:?} conditions={:?}",
        m.name_any(),
        s.current_revision,
        s.update_revision,
        aborted(m),
        s.summary,
        conditions(m)
    )
}

/// Progressing (status, reason), if any.
pub fn progressing(m: &ManifestWorkReplicaSet) -> Option<(String, String)> {
    conditions(m)
        .get("Progressing")
        .map(|(s, r, _)| (s.clone(), r.clone()))
}

/// Message of condition `type_`, or "".
pub fn message(m: &ManifestWorkReplicaSet, type_: &str) -> String {
    conditions(m)
        .get(type_)
        .map(|(_, _, msg)| msg.clone())
        .unwrap_or_default()
}

/// Is MWRS `m` complete on its update revision (rules §6 end state)?
pub fn is_complete(m: &ManifestWorkReplicaSet) -> bool {
    current(m).is_some()
        && current(m) == update(m)
        && has_condition(m, "Progressing", "False", "NewManifestWorkAvailable")
        && has_condition(m, "PlacementRolledOut", "True", "Complete")
}

/// The Progressing (status, reason) pairs an MWRS went through, in order, without
/// repeats, with the abortedTime seen beside each. Fed by a watch, so a state that lasts
/// a single pass is not missed the way polling would miss it.
pub struct Timeline {
    seen: Arc<Mutex<Vec<Moment>>>,
    _task: TaskGuard,
}

/// One distinct Progressing state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Moment {
    pub status: String,
    pub reason: String,
    pub aborted: Option<String>,
}

impl Timeline {
    /// Starts watching MWRS `name` (it may not exist yet).
    pub async fn watch(hub: &TestHub, name: &str) -> Self {
        let api = hub.mwrs_api();
        let cfg = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let seen: Arc<Mutex<Vec<Moment>>> = Arc::default();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let task = {
            let seen = seen.clone();
            TaskGuard::spawn(async move {
                let mut ready = Some(ready_tx);
                let mut events = watch_fn(api, cfg).default_backoff().boxed();
                while let Some(ev) = events.next().await {
                    match ev {
                        Ok(Event::Apply(m) | Event::InitApply(m)) => {
                            let Some((status, reason)) = progressing(&m) else {
                                continue;
                            };
                            let moment = Moment {
                                status,
                                reason,
                                aborted: aborted(&m),
                            };
                            if let Ok(mut seen) = seen.lock()
                                && seen.last() != Some(&moment)
                            {
                                seen.push(moment);
                            }
                        }
                        Ok(Event::InitDone) => {
                            if let Some(tx) = ready.take() {
                                let _ = tx.send(());
                            }
                        }
                        _ => {}
                    }
                }
            })
        };
        let _ = tokio::time::timeout(WAIT, ready_rx).await;
        Self { seen, _task: task }
    }

    pub fn entries(&self) -> Vec<Moment> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }

    pub fn reasons(&self) -> Vec<String> {
        self.entries().into_iter().map(|m| m.reason).collect()
    }

    /// Do `reasons` appear in this order (others may stand between them)?
    pub fn in_order(&self, reasons: &[&str]) -> bool {
        let seen = self.reasons();
        let mut it = seen.iter();
        reasons.iter().all(|want| it.any(|r| r == want))
    }

    /// Waits until `reasons` have been seen in this order (the watch may deliver a
    /// moment a little after a poll has seen it).
    pub async fn wait_in_order(&self, reasons: &[&str]) {
        wait_for(
            &format!("Progressing reasons {reasons:?} in order"),
            WAIT,
            || async {
                if self.in_order(reasons) {
                    Ok(())
                } else {
                    Err(format!("{:?}", self.entries()))
                }
            },
        )
        .await
    }

    /// The first moment with `reason`.
    pub fn first(&self, reason: &str) -> Option<Moment> {
        self.entries().into_iter().find(|m| m.reason == reason)
    }
}

/// Polls MWRS `name` until `done` holds.
pub async fn wait_mwrs(
    hub: &TestHub,
    name: &str,
    what: &str,
    done: impl Fn(&ManifestWorkReplicaSet) -> bool,
) -> ManifestWorkReplicaSet {
    let done = &done;
    wait_for(&format!("{name}: {what}"), WAIT, || async move {
        let m = hub.get_mwrs(name).await.ok_or("no MWRS")?;
        if done(&m) { Ok(m) } else { Err(describe(&m)) }
    })
    .await
}

/// Placement `p` with every cluster of the test, and MWRS `app` on v1 rolled out to all
/// of them at once.
pub async fn create_app_for_all(hub: &TestHub) {
    hub.publish_all("p").await;
    hub.create_mwrs(&mwrs_testsupport::mwrs(
        "app",
        mwrs_testsupport::configmap_template("v1"),
        &[("p", serde_json::json!({"type": "All"}))],
    ))
    .await;
}

/// Waits until MWRS `name` is complete on a revision other than `not`; returns it.
pub async fn wait_complete(hub: &TestHub, name: &str, not: Option<&str>) -> ManifestWorkReplicaSet {
    wait_mwrs(hub, name, "rollout complete", |m| {
        is_complete(m) && current(m).as_deref() != not
    })
    .await
}

/// ControllerRevisions owned by MWRS `name`.
pub async fn revisions_of(hub: &TestHub, name: &str) -> Vec<ControllerRevision> {
    let api: Api<ControllerRevision> = Api::namespaced(hub.client.clone(), &hub.namespace);
    let (k, v) = OwnerKey::new(hub.namespace.clone(), name).selector();
    match api
        .list(&ListParams::default().labels(&format!("{k}={v}")))
        .await
    {
        Ok(l) => l.items,
        Err(e) => panic!("cannot list ControllerRevisions: {e}"),
    }
}

pub fn hash_label<K: kube::Resource>(o: &K) -> Option<String> {
    o.labels().get(labels::CONTROLLER_HASH).cloned()
}

/// ManifestWorks of this test's clusters that MWRS `name` owns, by cluster, whatever the
/// UIDs of the ManifestWorks MWRS `name` owns, by cluster.
pub async fn work_uids(hub: &TestHub, name: &str) -> BTreeMap<String, String> {
    works_by_cluster(hub, name)
        .await
        .into_iter()
        .map(|(c, w)| (c, w.uid().unwrap_or_default()))
        .collect()
}

/// owner label (dotted or hashed). Panics on two in one cluster.
pub async fn works_by_cluster(hub: &TestHub, name: &str) -> BTreeMap<String, ManifestWork> {
    let owner = OwnerKey::new(hub.namespace.clone(), name);
    let (k, v) = owner.selector();
    let api: Api<ManifestWork> = Api::all(hub.client.clone());
    let items = match api
        .list(&ListParams::default().labels(&format!("{k}={v}")))
        .await
    {
        Ok(l) => l.items,
        Err(e) => panic!("cannot list ManifestWorks: {e}"),
    };
    let mut out = BTreeMap::new();
    for w in items {
        let Some(ns) = w.namespace().filter(|ns| hub.clusters.contains(ns)) else {
            continue;
        };
        if let Some(other) = out.insert(ns.clone(), w) {
            panic!("two ManifestWorks of {name} in {ns}: {}", other.name_any());
        }
    }
    out
}

/// Revision carried by each cluster's ManifestWork of MWRS `name`.
pub async fn revisions_by_cluster(hub: &TestHub, name: &str) -> BTreeMap<String, String> {
    works_by_cluster(hub, name)
        .await
        .into_iter()
        .map(|(c, w)| (c, hash_label(&w).unwrap_or_default()))
        .collect()
}

/// Every cluster in `clusters` (and no other) has one ManifestWork of `name` carrying
/// `hash`.
pub async fn assert_works_on(hub: &TestHub, name: &str, clusters: &[String], hash: &str) {
    let got = revisions_by_cluster(hub, name).await;
    let want: BTreeMap<String, String> = clusters
        .iter()
        .map(|c| (c.clone(), hash.to_string()))
        .collect();
    assert_eq!(got, want, "ManifestWorks of {name} by cluster");
}

/// Waits until the ManifestWorks of `name` carry exactly `want` (cluster → revision).
pub async fn wait_works(hub: &TestHub, name: &str, want: &BTreeMap<String, String>) {
    wait_for(
        &format!("{name}'s ManifestWorks to be {want:?}"),
        WAIT,
        || async move {
            let got = revisions_by_cluster(hub, name).await;
            if got == *want {
                Ok(())
            } else {
                Err(format!("{got:?}"))
            }
        },
    )
    .await
}

/// Deletes MWRS `name` and waits until it, its ManifestWorks and its revisions are
/// gone; `each` sees (MWRS still present, its ManifestWorks) at every poll.
pub async fn delete_and_wait_gone(hub: &TestHub, name: &str, each: impl Fn(bool, &[ManifestWork])) {
    if let Err(e) = hub.mwrs_api().delete(name, &DeleteParams::default()).await {
        panic!("cannot delete MWRS {name}: {e}");
    }
    let each = &each;
    wait_for(
        &format!("{name} and everything it owned to go"),
        WAIT,
        || async move {
            let present = hub.get_mwrs(name).await.is_some();
            let works: Vec<ManifestWork> =
                works_by_cluster(hub, name).await.into_values().collect();
            let revs = revisions_of(hub, name).await.len();
            each(present, &works);
            if !present && works.is_empty() && revs == 0 {
                Ok(())
            } else {
                Err(format!(
                    "mwrs present={present} works={} revisions={revs}",
                    works.len()
                ))
            }
        },
    )
    .await
}

/// Merge-patches MWRS `name` with `body`.
pub async fn patch_mwrs(hub: &TestHub, name: &str, body: &Value) {
    if let Err(e) = hub
        .mwrs_api()
        .patch(name, &PatchParams::default(), &Patch::Merge(body))
        .await
    {
        panic!("cannot patch MWRS {name}: {e}");
    }
}

/// Is `w` done on its current generation (Progressing False at that generation)?
pub fn work_done(w: &ManifestWork) -> bool {
    w.reports("Progressing", "False")
}

/// Watches the ManifestWorks of one MWRS and records, after every event, how many
/// carry a revision and are not done on it yet. The events of one watch come in
/// resourceVersion order, so each count is a state the hub really went through.
pub struct InFlight {
    /// Highest count seen per revision.
    pub max: Arc<Mutex<BTreeMap<String, usize>>>,
    _task: TaskGuard,
}

impl InFlight {
    pub async fn watch(hub: &TestHub, name: &str) -> Self {
        let (k, v) = OwnerKey::new(hub.namespace.clone(), name).selector();
        let api: Api<ManifestWork> = Api::all(hub.client.clone());
        let cfg = watcher::Config::default().labels(&format!("{k}={v}"));
        let max: Arc<Mutex<BTreeMap<String, usize>>> = Arc::default();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let task = {
            let max = max.clone();
            TaskGuard::spawn(async move {
                let mut ready = Some(ready_tx);
                let mut works: BTreeMap<(String, String), (String, bool)> = BTreeMap::new();
                let mut events = watch_fn(api, cfg).default_backoff().boxed();
                while let Some(ev) = events.next().await {
                    match ev {
                        Ok(Event::Apply(w) | Event::InitApply(w)) => {
                            let key = (w.namespace().unwrap_or_default(), w.name_any());
                            works.insert(key, (hash_label(&w).unwrap_or_default(), work_done(&w)));
                        }
                        Ok(Event::Delete(w)) => {
                            works.remove(&(w.namespace().unwrap_or_default(), w.name_any()));
                        }
                        Ok(Event::InitDone) => {
                            if let Some(tx) = ready.take() {
                                let _ = tx.send(());
                            }
                        }
                        Ok(Event::Init) | Err(_) => continue,
                    }
                    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
                    for (rev, done) in works.values() {
                        *counts.entry(rev.clone()).or_default() += usize::from(!done);
                    }
                    if let Ok(mut m) = max.lock() {
                        for (rev, n) in counts {
                            let e = m.entry(rev).or_default();
                            *e = (*e).max(n);
                        }
                    }
                }
            })
        };
        let _ = tokio::time::timeout(WAIT, ready_rx).await;
        Self { max, _task: task }
    }

    /// Highest number of clusters seen in flight on `revision`.
    pub fn max_on(&self, revision: &str) -> usize {
        self.max
            .lock()
            .map(|m| m.get(revision).copied().unwrap_or(0))
            .unwrap_or(0)
    }
}

/// An abort holding v1 against v2 on a hub of two clusters (the first hangs on v2), as the
/// CRD-swap and operator tests need it: the revisions and the hold's start.
pub struct HeldAbort {
    pub v1: String,
    pub v2: String,
    pub since: String,
}

/// Rolls v1 out, then v2 until `AbortAll` holds it. The caller runs the controller and
/// [`start_agent_hanging`]`(hub, &hub.clusters[0], "v2")`.
pub async fn hold_an_abort(hub: &TestHub) -> HeldAbort {
    hub.publish_all("p").await;
    hub.create_mwrs(&mwrs_testsupport::mwrs(
        "app",
        mwrs_testsupport::configmap_template("v1"),
        &[("p", all_aborting("3s"))],
    ))
    .await;
    let v1 = current(&wait_complete(hub, "app", None).await).expect("v1 current");
    hub.set_template("app", mwrs_testsupport::configmap_template("v2"))
        .await;
    let held = wait_mwrs(hub, "app", "the abort holding v1", |m| {
        has_condition(m, "Progressing", "False", "RolloutAborted")
            && message(m, "Progressing").contains("on all 2 clusters")
    })
    .await;
    HeldAbort {
        v1,
        v2: update(&held).expect("v2 update"),
        since: aborted(&held).expect("abortedTime"),
    }
}

/// What this controller writes of MWRS `app`'s ManifestWorks, by cluster: the spec's
/// generation, the labels and annotations (not the resourceVersion: the agent's status
/// reports move it).
pub async fn work_versions(hub: &TestHub) -> Vec<(String, WrittenParts)> {
    let mut out = Vec::new();
    for c in &hub.clusters {
        let api: Api<ManifestWork> = Api::namespaced(hub.client.clone(), c);
        let w = api
            .get(&format!("{}.app", hub.namespace))
            .await
            .expect("the MWRS's ManifestWork");
        out.push((
            c.clone(),
            (
                w.metadata.generation,
                w.metadata.labels.unwrap_or_default(),
                w.metadata.annotations.unwrap_or_default(),
            ),
        ));
    }
    out
}

/// A ManifestWork's generation, labels and annotations.
pub type WrittenParts = (
    Option<i64>,
    std::collections::BTreeMap<String, String>,
    std::collections::BTreeMap<String, String>,
);

/// Every write the controller counted, by its labels (`resource`, `op`, `result`).
pub fn counted_writes(shared: &mwrs_controller::Shared) -> Vec<String> {
    shared
        .metrics
        .encode()
        .lines()
        .filter(|l| l.starts_with("mwrs_controller_writes_total{"))
        .filter(|l| !l.ends_with(" 0"))
        .map(str::to_string)
        .collect()
}

/// Successful ManifestWork writes of `op` (create, update, ...) the controller sharing
/// `shared` made.
pub fn work_writes(shared: &Shared, op: &str) -> u64 {
    shared
        .metrics
        .writes
        .get_or_create(&mwrs_controller::metrics::WriteLabels {
            resource: "manifestwork".into(),
            op: op.into(),
            result: "ok".into(),
        })
        .get()
}

/// `n` more passes of the controller sharing `shared` over MWRS `name`, each brought by
/// an annotation change and waited for.
pub async fn poke_passes(hub: &TestHub, shared: &Shared, name: &str, n: usize) {
    for i in 0..n {
        let before = shared.metrics.reconciles.get();
        let poke = serde_json::json!({"metadata": {"annotations": {"poke": i.to_string()}}});
        patch_mwrs(hub, name, &poke).await;
        wait_for("one more pass", WAIT, || async {
            let n = shared.metrics.reconciles.get();
            if n > before {
                Ok(())
            } else {
                Err(format!("{n} passes"))
            }
        })
        .await;
    }
}

/// The repository's root.
pub fn repo_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `path` inside upstream's `open-cluster-management.io/ocm` module, at the version
/// `bench/peer` builds (its module cache directory, as `go list` names it).
pub fn ocm_module_file(path: &str) -> std::path::PathBuf {
    let out = std::process::Command::new("go")
        .args([
            "list",
            "-m",
            "-f",
            "{{.Dir}}",
            "open-cluster-management.io/ocm",
        ])
        .current_dir(repo_root().join("bench/peer"))
        .output()
        .expect("go runs");
    assert!(
        out.status.success(),
        "go list: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::path::PathBuf::from(String::from_utf8(out.stdout).unwrap().trim()).join(path)
}

/// Runs `command` from the repository's root; its stdout (it must succeed).
pub fn run_in_repo(command: &mut std::process::Command) -> String {
    let out = command.current_dir(repo_root()).output().unwrap();
    assert!(
        out.status.success(),
        "{command:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs helm with `args` from the repository's root; its stdout.
pub fn helm(helm: &str, args: &[&str]) -> String {
    run_in_repo(std::process::Command::new(helm).args(args))
}

/// The first line starting with `start` of the README, else of the book's install and
/// leaving pages, as words.
pub fn readme_line(start: &str) -> Vec<String> {
    let line = [
        "README.md",
        "docs/src/operations/install.md",
        "docs/src/operations/leaving.md",
    ]
    .iter()
    .map(|f| std::fs::read_to_string(repo_root().join(f)).unwrap())
    .find_map(|text| {
        text.lines()
            .map(str::trim_start)
            .find(|l| l.starts_with(start))
            .map(str::to_string)
    })
    .unwrap_or_else(|| panic!("no line starting with {start:?} in the README or the book"));
    line.split_whitespace().map(str::to_string).collect()
}

/// Sends `sig` (e.g. "-KILL", "-STOP") to `child`.
pub fn signal(child: &ChildProcess, sig: &str) {
    let ok = std::process::Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill {sig} {}", child.id());
}

/// Waits until the lease names the replica with process id `pid` (identity `host-pid`).
pub async fn wait_holder(hub: &TestHub, pid: u32, timeout: Duration) {
    use k8s_openapi::api::coordination::v1::Lease;
    let api: kube::Api<Lease> = kube::Api::namespaced(hub.client.clone(), &hub.namespace);
    let suffix = format!("-{pid}");
    wait_for(&format!("the lease held by pid {pid}"), timeout, || async {
        let holder = api
            .get_opt("mwrs-controller")
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity);
        match holder {
            Some(h) if h.ends_with(&suffix) => Ok(()),
            other => Err(format!("holder {other:?}")),
        }
    })
    .await
}

/// What a rendered container runs: its args, and its env entries that carry a value (the
/// downward API's are the caller's to fill in).
pub fn container_args_env(container: &Value) -> (Vec<String>, Vec<(String, String)>) {
    let args = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    let env = container["env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| Some((e["name"].as_str()?.into(), e["value"].as_str()?.into())))
        .collect();
    (args, env)
}

/// Runs `program` with `args` from the repository's root; its stdout (fails on an error).
pub fn run_program(program: &str, args: &[&str]) -> String {
    run_in_repo(std::process::Command::new(program).args(args))
}

/// A TCP port free on loopback now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
