//! Rollout plugins on the real test hub (issue #18). The plugin is a gRPC server this test
//! runs over TLS, answering from a script per cluster; the controller reaches it through
//! the same `--work-config` parsing and client it uses in production:
//! - a rollout is promoted only once the plugin says SUCCEEDED for every cluster;
//! - a FAILED verdict aborts the rollout (AbortAll) back to the stable revision;
//! - while the plugin is unreachable the rollout holds: no promotion, no timeout, no
//!   abort, and `PluginLoaded` says why; when it answers again, the rollout completes.
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`); skipped without it unless CI=true.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use common::{aborted, current, start_agent_succeeding, update, wait_complete, wait_mwrs};
use mwrs_api::labels;
use mwrs_controller::plugins::Plugins;
use mwrs_controller::{Config, Shared};
use mwrs_engine::marks::MarkKey;
use mwrs_plugin::config::WorkConfig;
use mwrs_plugin::v1alpha1 as api;
use mwrs_plugin::v1alpha1::rollout_plugin_server::{RolloutPlugin, RolloutPluginServer};
use mwrs_testsupport::{TaskGuard, TestHub, conditions, configmap_template, mwrs, wait_for};
use serde_json::json;
use tonic::{Request, Response, Status};

const CLUSTERS: usize = 3;

/// What the scripted plugin answers.
#[derive(Default)]
struct Script {
    /// By cluster; a cluster not listed is IN_PROGRESS.
    verdicts: Mutex<BTreeMap<String, api::Verdict>>,
    /// Every call answers UNAVAILABLE.
    down: AtomicBool,
    /// Every call but Initialize answers UNAVAILABLE (the plugin's own backend is down).
    calls_down: AtomicBool,
    /// (cluster, revision) of every ValidateRolloutCompletion, in order.
    asked: Mutex<Vec<(String, String)>>,
    /// ValidateRolloutCompletion takes this long to answer.
    slow: Mutex<Duration>,
    /// ValidateRolloutCompletion calls not answered yet, and the most there were.
    in_flight: std::sync::atomic::AtomicUsize,
    most_in_flight: std::sync::atomic::AtomicUsize,
    /// Every other call, in order.
    calls: Mutex<Vec<Call>>,
    /// MutateManifestWork annotates the first manifest (else it returns nothing).
    mutate: AtomicBool,
    /// Clusters ValidateRolloutCompletion answers INTERNAL about.
    erring: Mutex<std::collections::BTreeSet<String>>,
    /// What MutateManifestWork answers, whatever it is asked (a misbehaving plugin).
    mutate_answer: Mutex<Option<Vec<u8>>>,
    /// The message of every verdict (else one naming the verdict).
    message: Mutex<Option<String>>,
    /// Initialize calls answered.
    initialized: std::sync::atomic::AtomicUsize,
}

/// What the scripted plugin's MutateManifestWork adds to the first manifest.
const MUTATED: (&str, &str) = ("judge", "was here");

/// A call the plugin answered: which, about what, and when it answered.
#[derive(Clone, Debug)]
struct Call {
    name: &'static str,
    cluster: String,
    revision: String,
    /// ProgressRollout: (cluster, state) of every cluster.
    states: Vec<(String, api::ClusterRolloutState)>,
    aborting: bool,
    at: jiff::Timestamp,
}

impl Script {
    fn set(&self, cluster: &str, v: api::Verdict) {
        self.verdicts.lock().unwrap().insert(cluster.into(), v);
    }

    fn set_all(&self, clusters: &[String], v: api::Verdict) {
        for c in clusters {
            self.set(c, v);
        }
    }

    fn asked_about(&self, cluster: &str, revision: &str) -> usize {
        let asked = self.asked.lock().unwrap();
        asked
            .iter()
            .filter(|(c, r)| c == cluster && r == revision)
            .count()
    }

    /// Logs `r`, a call `name` about `revision`.
    fn log(&self, name: &'static str, r: &api::RolloutRequest, revision: &str) {
        let states = r
            .clusters
            .iter()
            .map(|c| (c.cluster.clone(), c.state()))
            .collect();
        self.calls.lock().unwrap().push(Call {
            name,
            cluster: r.cluster.clone(),
            revision: revision.to_string(),
            states,
            aborting: r.aborting,
            at: jiff::Timestamp::now(),
        });
    }

    fn calls(&self, name: &str) -> Vec<Call> {
        let calls = self.calls.lock().unwrap();
        calls.iter().filter(|c| c.name == name).cloned().collect()
    }

    fn up(&self) -> Result<(), Status> {
        if self.down.load(Ordering::SeqCst) {
            return Err(Status::unavailable("scripted outage"));
        }
        Ok(())
    }

    /// `up`, for a call about a cluster.
    fn answers(&self) -> Result<(), Status> {
        self.up()?;
        if self.calls_down.load(Ordering::SeqCst) {
            return Err(Status::unavailable("scripted backend outage"));
        }
        Ok(())
    }
}

struct Served(Arc<Script>);

#[tonic::async_trait]
impl RolloutPlugin for Served {
    async fn initialize(
        &self,
        _: Request<api::InitializeRequest>,
    ) -> Result<Response<api::InitializeResponse>, Status> {
        self.0.up()?;
        self.0.initialized.fetch_add(1, Ordering::SeqCst);
        Ok(Response::new(api::InitializeResponse {
            description: "scripted judge".into(),
        }))
    }

    async fn begin_rollout(
        &self,
        r: Request<api::RolloutRequest>,
    ) -> Result<Response<api::Ack>, Status> {
        self.0.answers()?;
        let r = r.into_inner();
        let update = r.revisions.clone().unwrap_or_default().update;
        self.0.log("BeginRollout", &r, &update);
        Ok(Response::new(api::Ack {}))
    }

    async fn progress_rollout(
        &self,
        r: Request<api::RolloutRequest>,
    ) -> Result<Response<api::Ack>, Status> {
        self.0.answers()?;
        let r = r.into_inner();
        let update = r.revisions.clone().unwrap_or_default().update;
        self.0.log("ProgressRollout", &r, &update);
        Ok(Response::new(api::Ack {}))
    }

    async fn validate_rollout_completion(
        &self,
        r: Request<api::ValidateRequest>,
    ) -> Result<Response<api::ValidateResponse>, Status> {
        self.0.answers()?;
        let r = r.into_inner();
        let slow = *self.0.slow.lock().unwrap();
        if !slow.is_zero() {
            let n = self.0.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.0.most_in_flight.fetch_max(n, Ordering::SeqCst);
        }
        // Logged once counted in flight: a reader of the log sees it counted.
        self.0
            .asked
            .lock()
            .unwrap()
            .push((r.cluster.clone(), r.revision.clone()));
        if !slow.is_zero() {
            tokio::time::sleep(slow).await;
            self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
        }
        if self.0.erring.lock().unwrap().contains(&r.cluster) {
            return Err(Status::internal(format!("no metrics for {}", r.cluster)));
        }
        let verdict = self
            .0
            .verdicts
            .lock()
            .unwrap()
            .get(&r.cluster)
            .copied()
            .unwrap_or(api::Verdict::InProgress);
        let message = self.0.message.lock().unwrap().clone();
        Ok(Response::new(api::ValidateResponse {
            verdict: verdict.into(),
            message: message.unwrap_or_else(|| format!("smoke test {}", verdict.as_str_name())),
        }))
    }

    async fn mutate_manifest_work(
        &self,
        r: Request<api::MutateRequest>,
    ) -> Result<Response<api::MutateResponse>, Status> {
        self.0.answers()?;
        if let Some(answer) = self.0.mutate_answer.lock().unwrap().clone() {
            return Ok(Response::new(api::MutateResponse { spec_json: answer }));
        }
        if !self.0.mutate.load(Ordering::SeqCst) {
            return Ok(Response::new(api::MutateResponse::default()));
        }
        let mut spec: serde_json::Value = serde_json::from_slice(&r.into_inner().spec_json)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let (key, value) = MUTATED;
        spec["workload"]["manifests"][0]["metadata"]["annotations"] = json!({ key: value });
        Ok(Response::new(api::MutateResponse {
            spec_json: serde_json::to_vec(&spec).unwrap(),
        }))
    }

    async fn begin_abort(
        &self,
        r: Request<api::RolloutRequest>,
    ) -> Result<Response<api::Ack>, Status> {
        self.0.answers()?;
        let r = r.into_inner();
        let current = r.revisions.clone().unwrap_or_default().current;
        self.0.log("BeginAbort", &r, &current);
        Ok(Response::new(api::Ack {}))
    }

    async fn validate_abort_completion(
        &self,
        r: Request<api::ValidateRequest>,
    ) -> Result<Response<api::ValidateResponse>, Status> {
        self.0.answers()?;
        let r = r.into_inner();
        let as_rollout = api::RolloutRequest {
            cluster: r.cluster.clone(),
            ..Default::default()
        };
        self.0
            .log("ValidateAbortCompletion", &as_rollout, &r.revision);
        Ok(Response::new(api::ValidateResponse {
            verdict: api::Verdict::Succeeded.into(),
            message: String::new(),
        }))
    }
}

/// Serves `script` over TLS on loopback; returns the `--work-config` that registers it
/// as `judge`, and the server task.
async fn serve(script: Arc<Script>) -> (String, TaskGuard) {
    serve_with(script, None).await
}

/// [`serve`], answering only callers with a certificate `client_ca` (PEM) signed.
async fn serve_with(script: Arc<Script>, client_ca: Option<&str>) -> (String, TaskGuard) {
    let made = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let cert = made.cert.pem();
    let key = made.signing_key.serialize_pem();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let mut tls = tonic::transport::ServerTlsConfig::new()
        .identity(tonic::transport::Identity::from_pem(&cert, &key));
    if let Some(ca) = client_ca {
        tls = tls.client_ca_root(tonic::transport::Certificate::from_pem(ca));
    }
    let server = tonic::transport::Server::builder()
        .tls_config(tls)
        .unwrap()
        .add_service(RolloutPluginServer::new(Served(script)));
    let task = TaskGuard::spawn(async move {
        let incoming = tonic::transport::server::TcpIncoming::from(listener);
        server.serve_with_incoming(incoming).await.unwrap();
    });
    let bundle = base64::engine::general_purpose::STANDARD.encode(cert);
    let config = format!(
        "plugins:\n  - name: judge\n    endpoint: localhost:{}\n    caCertificate:\n      caBundle: {bundle}\n",
        addr.port()
    );
    (config, task)
}

/// The test's slice of the hub with Placement `p`, an in-process controller that knows
/// plugin `judge` (asked again every second), the scripted plugin and an agent.
async fn started(test: &str) -> Option<(TestHub, Arc<Script>, Running)> {
    started_with(test, Config::default(), Duration::from_secs(2)).await
}

/// [`started`] with `config` and each plugin call bounded by `call_timeout`.
async fn started_with(
    test: &str,
    config: Config,
    call_timeout: Duration,
) -> Option<(TestHub, Arc<Script>, Running)> {
    started_registering(test, config, call_timeout, "").await
}

/// [`started`], `registration` (YAML lines at the plugin's indent) added to the plugin's
/// entry in the work config.
async fn started_registered(
    test: &str,
    registration: &str,
) -> Option<(TestHub, Arc<Script>, Running)> {
    started_registering(
        test,
        Config::default(),
        Duration::from_secs(2),
        registration,
    )
    .await
}

/// [`started_with`], `registration` (YAML lines at the plugin's indent) added to the
/// plugin's entry in the work config.
async fn started_registering(
    test: &str,
    config: Config,
    call_timeout: Duration,
    registration: &str,
) -> Option<(TestHub, Arc<Script>, Running)> {
    let hub = TestHub::from_env(test, CLUSTERS).await?;
    let script = Arc::new(Script::default());
    let (work_config, server) = serve(script.clone()).await;
    let work_config = format!("{work_config}{registration}");
    let config = knowing_judge(&work_config, config, call_timeout);
    let controller = common::start_controller_judged(&hub, config, Shared::default());
    hub.publish_all("p").await;
    let agent = start_agent_succeeding(&hub, Duration::from_millis(200));
    Some((hub, script, (server, controller, agent)))
}

/// `config` with plugin `judge` registered by `work_config` (asked again every second),
/// each call bounded by `call_timeout`.
fn knowing_judge(
    work_config: &str,
    config: Config,
    call_timeout: Duration,
) -> (Config, Arc<Plugins>) {
    let plugins = Plugins::new(
        &WorkConfig::parse(work_config).unwrap(),
        Duration::from_secs(1),
        "test",
    )
    .unwrap()
    .with_call_timeout(call_timeout)
    .with_mark_key(MarkKey::new(&[42; 32]).unwrap());
    (config, Arc::new(plugins))
}

/// What runs for a test: the plugin, the controller and the agent.
type Running = (TaskGuard, TaskGuard, mwrs_fleet::AgentHandle);

fn judged(strategy: serde_json::Value) -> serde_json::Value {
    let mut s = strategy;
    s["plugin"] = json!("judge");
    s["failureStrategy"] = json!("AbortAll");
    s
}

fn plugin_loaded(m: &mwrs_api::mwrs::ManifestWorkReplicaSet) -> Option<(String, String)> {
    conditions(m)
        .get("PluginLoaded")
        .map(|(status, reason, _)| (status.clone(), reason.clone()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_is_promoted_only_once_the_plugin_says_succeeded() {
    let Some((hub, script, _tasks)) = started("plugin-promote").await else {
        return;
    };
    hub.create_mwrs(&mwrs(
        "app",
        configmap_template("v1"),
        &[("p", judged(json!({"type": "All"})))],
    ))
    .await;
    let m = wait_mwrs(&hub, "app", "every cluster asked about twice", |m| {
        let revision = update(m).unwrap_or_default();
        hub.clusters
            .iter()
            .all(|c| script.asked_about(c, &revision) >= 2)
    })
    .await;
    assert_eq!(current(&m), None, "not promoted while IN_PROGRESS");
    assert_eq!(plugin_loaded(&m), Some(("True".into(), "Available".into())));
    let revision = update(&m).unwrap();
    // Two of three pass: still not promoted.
    script.set(&hub.clusters[0], api::Verdict::Succeeded);
    script.set(&hub.clusters[1], api::Verdict::Succeeded);
    let last = hub.clusters[2].clone();
    let before = script.asked_about(&last, &revision);
    let m = wait_mwrs(&hub, "app", "the last cluster asked again", |_| {
        script.asked_about(&last, &revision) > before + 1
    })
    .await;
    assert_eq!(current(&m), None, "one cluster still Validating");
    script.set(&last, api::Verdict::Succeeded);
    let m = wait_complete(&hub, "app", None).await;
    assert_eq!(current(&m).as_deref(), Some(revision.as_str()));
    // The status records every cluster judged, for a restarted controller and the CLI;
    // no ManifestWork carries a SUCCEEDED verdict (no write per cluster for it).
    let hub = &hub;
    let revision = &revision;
    wait_mwrs(hub, "app", "every cluster judged in the status", |m| {
        common::status(m)
            .plugin_judged
            .as_ref()
            .is_some_and(|j| &j.revision == revision && j.count == CLUSTERS as i64)
    })
    .await;
    let works = common::works_by_cluster(hub, "app").await;
    let verdicts: Vec<&String> = works
        .values()
        .filter_map(|w| w.metadata.annotations.as_ref()?.get(labels::PLUGIN_VERDICT))
        .collect();
    assert!(verdicts.is_empty(), "{verdicts:?}");
    // `kubectl mwrs rollout status` reads them from there: every cluster Succeeded.
    let cli = mwrs_cli::hub::HubClient {
        client: hub.client.clone(),
        namespace: hub.namespace.clone(),
        url: String::new(),
    };
    let (_, read) = cli.read("app").await.unwrap();
    let view = mwrs_cli::view::View::of(
        &read.snapshot,
        None,
        jiff::Timestamp::now(),
        &Default::default(),
    );
    let states: Vec<&str> = view.clusters.iter().map(|c| c.state.as_str()).collect();
    assert_eq!(states, ["Succeeded"; CLUSTERS], "{view:?}");
    // Each cluster got the revision only after the plugin answered BeginRollout.
    let works = common::works_by_cluster(hub, "app").await;
    let begun = script.calls("BeginRollout");
    for (cluster, w) in &works {
        let answered = begun
            .iter()
            .filter(|c| &c.cluster == cluster && &c.revision == revision)
            .map(|c| c.at)
            .min()
            .unwrap_or_else(|| panic!("no BeginRollout about {cluster}: {begun:?}"));
        let applied: jiff::Timestamp = w.metadata.annotations.as_ref().unwrap()
            [labels::REVISION_APPLIED_AT]
            .parse()
            .unwrap();
        assert!(answered <= applied, "{cluster}: {answered} > {applied}");
    }
    // ProgressRollout told the plugin of every cluster's success.
    wait_for(
        "a ProgressRollout with every cluster done",
        common::WAIT,
        || {
            let progress = script.calls("ProgressRollout");
            async move {
                let done = progress.iter().any(|c| {
                    c.states.len() == CLUSTERS
                        && c.states
                            .iter()
                            .all(|(_, s)| *s == api::ClusterRolloutState::Succeeded)
                });
                if done {
                    Ok(())
                } else {
                    Err(format!("{progress:?}"))
                }
            }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_verdict_aborts_to_the_stable_revision() {
    let Some((hub, script, _tasks)) = started("plugin-abort").await else {
        return;
    };
    script.set_all(&hub.clusters, api::Verdict::Succeeded);
    script.mutate.store(true, Ordering::SeqCst);
    hub.create_mwrs(&mwrs(
        "app",
        configmap_template("v1"),
        &[("p", judged(json!({"type": "All"})))],
    ))
    .await;
    let stable = current(&wait_complete(&hub, "app", None).await).unwrap();
    script.set(&hub.clusters[1], api::Verdict::Failed);
    hub.set_template("app", configmap_template("v2")).await;
    let m = wait_mwrs(&hub, "app", "the abort", |m| aborted(m).is_some()).await;
    assert_ne!(update(&m).as_deref(), Some(stable.as_str()));
    // Reverted at once, and given the plugin's spec once it answers.
    let hub = &hub;
    let want = &stable;
    wait_for(
        "every cluster back with the plugin's spec",
        common::WAIT,
        || async move {
            let works = common::works_by_cluster(hub, "app").await;
            let (key, value) = MUTATED;
            let back: Vec<(&String, Option<String>, bool)> = works
                .iter()
                .map(|(c, w)| {
                    let mutated = w.spec.manifests()[0]["metadata"]["annotations"][key] == value;
                    (c, common::hash_label(w), mutated)
                })
                .collect();
            let done = |(_, hash, mutated): &(&String, Option<String>, bool)| {
                hash.as_ref() == Some(want) && *mutated
            };
            if back.len() == CLUSTERS && back.iter().all(done) {
                Ok(())
            } else {
                Err(format!("{back:?}"))
            }
        },
    )
    .await;
    // The plugin heard of each revert, and validated it.
    let script = &script;
    let clusters = &hub.clusters;
    let stable = &stable;
    wait_for(
        "BeginAbort and ValidateAbortCompletion",
        common::WAIT,
        || async move {
            let told = |name| -> std::collections::BTreeSet<String> {
                let calls = script.calls(name);
                calls
                    .into_iter()
                    .filter(|c| &c.revision == stable)
                    .map(|c| c.cluster)
                    .collect()
            };
            let begun = told("BeginAbort");
            let validated = told("ValidateAbortCompletion");
            let all: std::collections::BTreeSet<String> = clusters.iter().cloned().collect();
            // The failed cluster carried the update revision; the others almost surely did.
            if begun.contains(&clusters[1]) && validated == all {
                Ok(())
            } else {
                Err(format!(
                    "BeginAbort {begun:?}, ValidateAbortCompletion {validated:?}"
                ))
            }
        },
    )
    .await;
    let aborting = script.calls("ProgressRollout");
    assert!(aborting.iter().any(|c| c.aborting), "{aborting:?}");
    assert!(
        script.calls("BeginAbort").iter().all(|c| c.aborting),
        "BeginAbort says it is an abort"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_plugin_holds_the_rollout_until_it_answers() {
    let Some((hub, script, _tasks)) = started("plugin-down").await else {
        return;
    };
    // Once the plugin is back, each cluster has its whole deadline to be written, done and
    // judged: 6 s leaves room for a loaded machine.
    let strategy = judged(json!({"type": "All", "all": {"progressDeadline": "6s"}}));
    script.set_all(&hub.clusters, api::Verdict::Succeeded);
    hub.create_mwrs(&mwrs("app", configmap_template("v1"), &[("p", strategy)]))
        .await;
    let stable = current(&wait_complete(&hub, "app", None).await).unwrap();
    script.down.store(true, Ordering::SeqCst);
    hub.set_template("app", configmap_template("v2")).await;
    let held = wait_mwrs(&hub, "app", "PluginLoaded False", |m| {
        plugin_loaded(m) == Some(("False".into(), "Failed".into()))
    })
    .await;
    // Past the deadline more than twice over: still neither promoted nor aborted.
    let until = tokio::time::Instant::now() + Duration::from_secs(15);
    let m = wait_mwrs(&hub, "app", "15 s held", |m| {
        assert_eq!(current(m).as_deref(), Some(stable.as_str()), "promoted");
        assert_eq!(aborted(m), None, "aborted while the plugin was down");
        tokio::time::Instant::now() >= until
    })
    .await;
    assert!(
        common::message(&held, "PluginLoaded").contains("judge plugin is unreachable"),
        "{}",
        common::message(&held, "PluginLoaded")
    );
    let revision = update(&m).unwrap();
    script.down.store(false, Ordering::SeqCst);
    let m = wait_complete(&hub, "app", Some(&stable)).await;
    assert_eq!(current(&m).as_deref(), Some(revision.as_str()));
}

/// An error status about one cluster holds that cluster, not the plugin: under
/// `failurePolicy: Hold` it stays held past its deadline, however many errors come, and
/// completes once the plugin can judge it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_about_one_cluster_holds_that_cluster_only() {
    let hold = "    failurePolicy:\n      policy: Hold\n";
    let started = started_registered("plugin-erring", hold);
    let Some((hub, script, _tasks)) = started.await else {
        return;
    };
    let erring = hub.clusters[0].clone();
    script.erring.lock().unwrap().insert(erring.clone());
    script.set_all(&hub.clusters, api::Verdict::Succeeded);
    let strategy = judged(json!({"type": "All", "all": {"progressDeadline": "2s"}}));
    hub.create_mwrs(&mwrs("app", configmap_template("v1"), &[("p", strategy)]))
        .await;
    let note = format!("ValidateRolloutCompletion: Internal: no metrics for {erring}");
    let m = wait_mwrs(&hub, "app", "the error in Progressing", |m| {
        common::message(m, "Progressing").contains(&note)
    })
    .await;
    let revision = update(&m).unwrap();
    // Asked again past the 2 s deadline: held, not timed out; the plugin is up.
    let before = script.asked_about(&erring, &revision);
    let m = wait_mwrs(&hub, "app", "the erring cluster asked again", |_| {
        script.asked_about(&erring, &revision) > before + 2
    })
    .await;
    assert_eq!(plugin_loaded(&m), Some(("True".into(), "Available".into())));
    assert_eq!(current(&m), None, "not promoted");
    assert_eq!(aborted(&m), None, "not aborted");
    script.erring.lock().unwrap().clear();
    let m = wait_complete(&hub, "app", None).await;
    assert_eq!(current(&m), Some(revision));
}

/// A plugin slow to answer holds only its own clusters: with a single worker, another
/// MWRS without a plugin rolls out while a question is still waiting for its answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_plugin_stalls_no_other_mwrs() {
    let one_worker = Config {
        workers: 1,
        ..Config::default()
    };
    let Some((hub, script, _tasks)) =
        started_with("plugin-slow", one_worker, Duration::from_secs(25)).await
    else {
        return;
    };
    *script.slow.lock().unwrap() = Duration::from_secs(20);
    hub.create_mwrs(&mwrs(
        "judged",
        configmap_template("v1"),
        &[("p", judged(json!({"type": "All"})))],
    ))
    .await;
    let script = &script;
    wait_for(
        "a question waiting for its answer",
        common::WAIT,
        || async move {
            match script.in_flight.load(Ordering::SeqCst) {
                0 => Err("none in flight".to_string()),
                _ => Ok(()),
            }
        },
    )
    .await;
    hub.create_mwrs(&mwrs(
        "plain",
        configmap_template("v1"),
        &[("p", json!({"type": "All"}))],
    ))
    .await;
    wait_complete(&hub, "plain", None).await;
    assert!(
        script.in_flight.load(Ordering::SeqCst) > 0,
        "the other MWRS waited for the slow plugin's answer"
    );
    // The plugin is due to be asked again every second; a cluster is asked again only
    // once its last question was answered.
    wait_for("a cluster asked again", common::WAIT, || async move {
        match script.asked.lock().unwrap().len() {
            n if n > CLUSTERS => Ok(()),
            n => Err(format!("{n} questions")),
        }
    })
    .await;
    let most = script.most_in_flight.load(Ordering::SeqCst);
    assert!(most <= CLUSTERS, "{most} questions in flight at once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plugins_spec_is_what_clusters_get_and_no_pass_writes_it_again() {
    let Some(hub) = TestHub::from_env("plugin-mutate", CLUSTERS).await else {
        return;
    };
    let script = Arc::new(Script::default());
    script.mutate.store(true, Ordering::SeqCst);
    script.set_all(&hub.clusters, api::Verdict::Succeeded);
    let (work_config, _server) = serve(script.clone()).await;
    let shared = Shared::default();
    let config = knowing_judge(&work_config, Config::default(), Duration::from_secs(2));
    let controller = common::start_controller_judged(&hub, config, shared.clone());
    hub.publish_all("p").await;
    let _agent = start_agent_succeeding(&hub, Duration::from_millis(200));
    hub.create_mwrs(&mwrs(
        "app",
        configmap_template("v1"),
        &[("p", judged(json!({"type": "All"})))],
    ))
    .await;
    let revision = current(&wait_complete(&hub, "app", None).await).unwrap();
    let works = common::works_by_cluster(&hub, "app").await;
    assert_eq!(works.len(), CLUSTERS);
    for (cluster, w) in &works {
        let manifest = &w.spec.manifests()[0];
        let (key, value) = MUTATED;
        assert_eq!(manifest["metadata"]["annotations"][key], value, "{cluster}");
        assert!(
            w.metadata
                .annotations
                .as_ref()
                .unwrap()
                .contains_key(labels::PLUGIN_SPEC_DIGEST),
            "{cluster}"
        );
        assert_eq!(common::hash_label(w).as_deref(), Some(revision.as_str()));
    }
    assert_eq!(common::work_writes(&shared, "create"), CLUSTERS as u64);
    common::poke_passes(&hub, &shared, "app", 3).await;
    assert_eq!(
        common::work_writes(&shared, "update"),
        0,
        "a ManifestWork was written again"
    );

    // A controller that knows nothing of the plugin's answers takes the spec for the
    // revision it carries.
    drop(controller);
    let shared = Shared::default();
    let config = knowing_judge(&work_config, Config::default(), Duration::from_secs(2));
    let _controller = common::start_controller_judged(&hub, config, shared.clone());
    common::poke_passes(&hub, &shared, "app", 3).await;
    let written = ["create", "update"].map(|op| common::work_writes(&shared, op));
    assert_eq!(written, [0, 0], "written again after a restart");
    let m = wait_complete(&hub, "app", None).await;
    assert_eq!(current(&m), Some(revision));
}

/// v1 complete with the plugin well behaved, then v2 set: the test's hub, plugin,
/// running parts and v1's revision.
async fn v1_complete_then_v2(
    test: &str,
    strategy: serde_json::Value,
    registration: &str,
) -> Option<(TestHub, Arc<Script>, Running, String)> {
    v1_complete_bounded(test, strategy, registration, Duration::from_secs(2)).await
}

/// [`v1_complete_then_v2`], each plugin call bounded by `call_timeout`.
async fn v1_complete_bounded(
    test: &str,
    strategy: serde_json::Value,
    registration: &str,
    call_timeout: Duration,
) -> Option<(TestHub, Arc<Script>, Running, String)> {
    let (hub, script, tasks) =
        started_registering(test, Config::default(), call_timeout, registration).await?;
    script.set_all(&hub.clusters, api::Verdict::Succeeded);
    hub.create_mwrs(&mwrs("app", configmap_template("v1"), &[("p", strategy)]))
        .await;
    let stable = current(&wait_complete(&hub, "app", None).await).unwrap();
    Some((hub, script, tasks, stable))
}

/// With the plugin answering IN_PROGRESS, sets v2 and waits until every cluster was
/// asked about it; returns its revision.
async fn v2_in_progress_everywhere(hub: &TestHub, script: &Script, stable: &str) -> String {
    script.set_all(&hub.clusters, api::Verdict::InProgress);
    hub.set_template("app", configmap_template("v2")).await;
    let m = wait_mwrs(hub, "app", "every cluster asked about v2", |m| {
        let revision = update(m).unwrap_or_default();
        revision != stable
            && hub
                .clusters
                .iter()
                .all(|c| script.asked_about(c, &revision) >= 1)
    })
    .await;
    update(&m).unwrap()
}

/// Merge-patches ManifestWork `cluster/name` with `body`, as anyone allowed to patch
/// ManifestWorks in a cluster namespace can (the cluster's own work agent is).
async fn patch_work(
    hub: &TestHub,
    (cluster, name): (&str, &str),
    body: &serde_json::Value,
) -> mwrs_api::work::ManifestWork {
    let works = kube::Api::<mwrs_api::work::ManifestWork>::namespaced(hub.client.clone(), cluster);
    let pp = kube::api::PatchParams::default();
    works
        .patch(name, &pp, &kube::api::Patch::Merge(body))
        .await
        .unwrap()
}

/// Waits until every cluster's ManifestWork of `app` carries `revision`.
async fn wait_all_on(hub: &TestHub, revision: &str) {
    let want: BTreeMap<String, String> = hub
        .clusters
        .iter()
        .map(|c| (c.clone(), revision.to_string()))
        .collect();
    common::wait_works(hub, "app", &want).await;
}

/// Every ManifestWork of `app` still lists the manifest the template has.
async fn assert_no_work_emptied(hub: &TestHub) {
    for (cluster, w) in common::works_by_cluster(hub, "app").await {
        let manifests = w.spec.manifests();
        assert!(
            manifests.len() == 1 && manifests[0]["kind"] == "ConfigMap",
            "{cluster}: {:?}",
            w.spec
        );
    }
}

/// rules §12.1: a MutateManifestWork answer that would empty a cluster (`{}`, no
/// manifests, a whole ManifestWork) is never written; the cluster waits with a note and
/// one Event, and past the plugin's budget counts as failed, so AbortAll returns the
/// fleet to v1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugins_spec_that_would_empty_a_cluster_is_never_written() {
    let strategy = judged(json!({"type": "All"}));
    let Some((hub, script, _tasks, stable)) =
        v1_complete_then_v2("plugin-empty-spec", strategy, "").await
    else {
        return;
    };
    *script.mutate_answer.lock().unwrap() = Some(b"{}".to_vec());
    hub.set_template("app", configmap_template("v2")).await;
    let m = wait_mwrs(&hub, "app", "the refusal in ManifestworkApplied", |m| {
        common::message(m, "ManifestworkApplied").contains("refused")
    })
    .await;
    assert_no_work_emptied(&hub).await;
    assert_eq!(
        current(&m).as_deref(),
        Some(stable.as_str()),
        "not promoted"
    );
    let m = wait_mwrs(&hub, "app", "the abort once the budget is spent", |m| {
        aborted(m).is_some()
    })
    .await;
    assert_eq!(current(&m).as_deref(), Some(stable.as_str()));
    assert_no_work_emptied(&hub).await;
    common::assert_works_on(&hub, "app", &hub.clusters, &stable).await;
    let events = hub.events_of("app").await;
    let refused: Vec<_> = events
        .iter()
        .filter(|(reason, _)| reason == "PluginAnswerRefused")
        .collect();
    assert_eq!(refused.len(), CLUSTERS, "one Event per cluster: {events:?}");
    assert!(
        refused[0].1.contains("spec_json.workload.manifests"),
        "{refused:?}"
    );
    let failed = common::status(&m).last_abort.map(|a| a.failed_count);
    assert_eq!(failed, Some(CLUSTERS as i64), "each cluster counted failed");
}

/// rules §12.2: a SUCCEEDED verdict written by hand on each ManifestWork (the cluster's
/// own agent may) promotes nothing while the plugin says IN_PROGRESS; a hand edit with
/// its spec digest written over it is restored all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_verdict_promotes_nothing_and_a_forged_digest_hides_no_edit() {
    let strategy = judged(json!({"type": "All"}));
    let Some((hub, script, _tasks, stable)) =
        v1_complete_then_v2("plugin-forged", strategy, "").await
    else {
        return;
    };
    script.mutate.store(true, Ordering::SeqCst);
    let revision = v2_in_progress_everywhere(&hub, &script, &stable).await;
    for (cluster, w) in common::works_by_cluster(&hub, "app").await {
        let name = w.metadata.name.clone().unwrap();
        let forged = json!({"plugin": "judge", "revision": revision,
            "generation": w.metadata.generation.unwrap(), "verdict": "SUCCEEDED",
            "at": jiff::Timestamp::now().to_string(), "message": "certified by the spoke"});
        let body =
            json!({"metadata": {"annotations": {labels::PLUGIN_VERDICT: forged.to_string()}}});
        patch_work(&hub, (&cluster, &name), &body).await;
    }
    // Many passes and questions later: not promoted.
    let before = script.asked_about(&hub.clusters[0], &revision);
    let m = wait_mwrs(&hub, "app", "three more questions", |_| {
        script.asked_about(&hub.clusters[0], &revision) >= before + 3
    })
    .await;
    assert_eq!(
        current(&m).as_deref(),
        Some(stable.as_str()),
        "a forged verdict promoted v2"
    );
    script.set_all(&hub.clusters, api::Verdict::Succeeded);
    let m = wait_complete(&hub, "app", Some(&stable)).await;
    assert_eq!(current(&m).as_deref(), Some(revision.as_str()));

    // A hand edit of the plugin's spec, with a digest mark over the edited spec.
    let cluster = hub.clusters[0].clone();
    let w = common::works_by_cluster(&hub, "app")
        .await
        .remove(&cluster)
        .unwrap();
    let name = w.metadata.name.clone().unwrap();
    let edit = json!({"spec": {"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "app", "namespace": "default"}, "data": {"version": "hand-edited"}}]}}});
    let edited = patch_work(&hub, (&cluster, &name), &edit).await;
    let digest = mwrs_engine::hash::digest(&edited.spec.to_value()).to_hex();
    let body = json!({"metadata": {"annotations": {labels::PLUGIN_SPEC_DIGEST: digest}}});
    patch_work(&hub, (&cluster, &name), &body).await;
    let hub = &hub;
    let cluster = &cluster;
    wait_for("the hand edit restored", common::WAIT, || async move {
        let w = common::works_by_cluster(hub, "app")
            .await
            .remove(cluster)
            .unwrap();
        let data = &w.spec.manifests()[0]["data"];
        if data["version"] == "hand-edited" {
            Err(format!("{data}"))
        } else {
            Ok(())
        }
    })
    .await;
}

/// rules §12.1: a FAILED verdict with a 40,000-character message, under AbortAll with
/// `maxFailures: 0`, aborts and reverts (the message no longer makes the status write
/// that must come first fail).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_failed_message_still_aborts_and_reverts() {
    let strategy = judged(json!({"type": "All", "all": {"maxFailures": 0}}));
    let Some((hub, script, _tasks, stable)) =
        v1_complete_then_v2("plugin-huge-message", strategy, "").await
    else {
        return;
    };
    *script.message.lock().unwrap() = Some("x".repeat(40_000));
    script.set(&hub.clusters[0], api::Verdict::Failed);
    hub.set_template("app", configmap_template("v2")).await;
    let m = wait_mwrs(&hub, "app", "the abort", |m| aborted(m).is_some()).await;
    for (type_, (_, _, message)) in conditions(&m) {
        assert!(
            message.len() <= 32 * 1024,
            "{type_}: {} bytes",
            message.len()
        );
    }
    wait_all_on(&hub, &stable).await;
}

/// rules §12.3: a plugin unreachable past its `unavailableFor` (here 3 s) under the
/// default policy Fail: its held clusters count as failed (`PluginFailed`), so AbortAll
/// returns the fleet to v1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_down_past_its_budget_fails_its_clusters() {
    let policy = "    failurePolicy:\n      unavailableFor: 3s\n";
    fails_past_the_budget("plugin-budget", policy, |s| &s.down).await;
}

/// v2 judged IN_PROGRESS everywhere, then the outage `outage` of `script` starts: past the
/// budget of `policy` every held cluster counts failed (`PluginFailed`) and AbortAll
/// reverts them all, without waiting for the plugin.
async fn fails_past_the_budget(test: &str, policy: &str, outage: fn(&Script) -> &AtomicBool) {
    let strategy = judged(json!({"type": "All"}));
    let Some((hub, script, _tasks, stable)) = v1_complete_then_v2(test, strategy, policy).await
    else {
        return;
    };
    v2_in_progress_everywhere(&hub, &script, &stable).await;
    assert_eq!(aborted(&hub.get_mwrs("app").await.unwrap()), None);
    outage(&script).store(true, Ordering::SeqCst);
    let m = wait_mwrs(&hub, "app", "the abort", |m| aborted(m).is_some()).await;
    assert_eq!(current(&m).as_deref(), Some(stable.as_str()));
    let failed = common::status(&m).last_abort.map(|a| a.failed_count);
    assert_eq!(
        failed,
        Some(CLUSTERS as i64),
        "each held cluster counted failed"
    );
    let events = hub.events_of("app").await;
    assert!(
        events.iter().any(|(_, note)| note.contains("PluginFailed")),
        "{events:?}"
    );
    // The reverts wait for no plugin.
    wait_all_on(&hub, &stable).await;
}

/// rules §12.2: the key marks are sealed with is made once, in a Secret, and every replica
/// and restart reads the same one; a Secret without a usable key is named, not replaced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mark_key_is_made_once_and_shared() {
    use mwrs_controller::mark_key::{KeyError, load_or_create};
    use mwrs_engine::marks::{MarkPlace, Marks};
    let Some(hub) = TestHub::from_env("plugin-mark-key", 1).await else {
        return;
    };
    let (first, second) = tokio::join!(
        load_or_create(hub.client.clone(), &hub.namespace, "marks"),
        load_or_create(hub.client.clone(), &hub.namespace, "marks"),
    );
    let place = MarkPlace {
        mwrs_uid: "u",
        cluster: "c",
        work: "w",
        work_uid: None,
        at_creation: false,
    };
    let seal = |k| Marks::sealed(k).seal(place, &[b"x"]);
    let (first, second) = (seal(first.unwrap()), seal(second.unwrap()));
    assert_eq!(first, second, "two replicas starting at once share one key");
    let again = load_or_create(hub.client.clone(), &hub.namespace, "marks").await;
    assert_eq!(seal(again.unwrap()), first, "a restart reads the same key");
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(hub.client.clone(), &hub.namespace);
    // Security review K1: under a name the controller reads, only an Opaque Secret with
    // its label and a long enough key counts; none of these is replaced either.
    let b64 = |n: usize| base64::engine::general_purpose::STANDARD.encode(vec![1u8; n]);
    let label = json!({"mwrs.rollout.open-cluster-management.io/mark-key": "true"});
    let refused = [
        (
            "short",
            json!({"metadata": {"name": "short", "labels": label},
            "data": {"key": b64(8)}}),
            "data.key",
        ),
        (
            "unlabelled",
            json!({"metadata": {"name": "unlabelled"},
            "data": {"key": b64(32)}}),
            "no label",
        ),
        (
            "token",
            json!({"metadata": {"name": "token", "labels": label,
            "annotations": {"kubernetes.io/service-account.name": "default"}},
            "type": "kubernetes.io/service-account-token",
            "data": {"key": b64(32), "token": b64(32)}}),
            "not Opaque",
        ),
    ];
    for (name, mut body, why) in refused {
        body["apiVersion"] = json!("v1");
        body["kind"] = json!("Secret");
        secrets
            .create(&Default::default(), &serde_json::from_value(body).unwrap())
            .await
            .unwrap();
        let e = load_or_create(hub.client.clone(), &hub.namespace, name).await;
        assert!(matches!(e, Err(KeyError::Unusable { .. })), "{e:?}");
        let message = e.unwrap_err().to_string();
        assert!(message.contains(name) && message.contains(why), "{message}");
        let kept = secrets.get(name).await.unwrap();
        assert_eq!(
            kept.data.unwrap()["key"].0.len(),
            if name == "short" { 8 } else { 32 }
        );
    }
}

/// Item 7 of #31: a plugin may answer only the controller. The controller presents the
/// client certificate its work config names; without it the plugin's TLS handshake
/// refuses the controller, which holds the rollout and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_requiring_a_client_certificate_answers_only_the_controller() {
    let Some(hub) = TestHub::from_env("plugin-mtls", CLUSTERS).await else {
        return;
    };
    let client = rcgen::generate_simple_self_signed(vec!["mwrs-controller".into()]).unwrap();
    let (cert, key) = (client.cert.pem(), client.signing_key.serialize_pem());
    let dir = std::env::temp_dir().join(format!("mwrs-mtls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("tls.crt"), &cert).unwrap();
    std::fs::write(dir.join("tls.key"), &key).unwrap();
    let script = Arc::new(Script::default());
    script.set_all(&hub.clusters, api::Verdict::Succeeded);
    let (work_config, _server) = serve_with(script.clone(), Some(&cert)).await;
    let anonymous = knowing_judge(&work_config, Config::default(), Duration::from_secs(2));
    let controller = common::start_controller_judged(&hub, anonymous, Shared::default());
    hub.publish_all("p").await;
    let _agent = start_agent_succeeding(&hub, Duration::from_millis(200));
    hub.create_mwrs(&mwrs(
        "app",
        configmap_template("v1"),
        &[("p", judged(json!({"type": "All"})))],
    ))
    .await;
    wait_mwrs(
        &hub,
        "app",
        "PluginLoaded False without a certificate",
        |m| plugin_loaded(m) == Some(("False".into(), "Failed".into())),
    )
    .await;
    assert!(
        script.calls("BeginRollout").is_empty(),
        "answered a stranger"
    );
    drop(controller);
    let identified = format!(
        "{work_config}    clientCertificate:\n      certFile: {}\n      keyFile: {}\n",
        dir.join("tls.crt").display(),
        dir.join("tls.key").display()
    );
    let config = knowing_judge(&identified, Config::default(), Duration::from_secs(2));
    let _controller = common::start_controller_judged(&hub, config, Shared::default());
    let m = wait_complete(&hub, "app", None).await;
    assert_eq!(plugin_loaded(&m), Some(("True".into(), "Available".into())));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Item 7 of #31: a plugin registered for other namespaces is never called about an
/// MWRS of this one; its clusters are held and `PluginLoaded` says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_open_to_other_namespaces_is_never_called_for_this_one() {
    let elsewhere = "    namespaces: [team-elsewhere]\n";
    let started = started_registered("plugin-namespaces", elsewhere);
    let Some((hub, script, _tasks)) = started.await else {
        return;
    };
    script.set_all(&hub.clusters, api::Verdict::Succeeded);
    hub.create_mwrs(&mwrs(
        "app",
        configmap_template("v1"),
        &[("p", judged(json!({"type": "All"})))],
    ))
    .await;
    let m = wait_mwrs(
        &hub,
        "app",
        "PluginLoaded False naming the namespace",
        |m| common::message(m, "PluginLoaded").contains("not open to namespace"),
    )
    .await;
    assert_eq!(current(&m), None);
    assert!(
        common::works_by_cluster(&hub, "app").await.is_empty(),
        "written past the plugin"
    );
    let called: Vec<&str> = ["BeginRollout", "ProgressRollout"]
        .into_iter()
        .filter(|c| !script.calls(c).is_empty())
        .collect();
    assert!(called.is_empty(), "called: {called:?}");
    assert!(script.asked.lock().unwrap().is_empty());
}

/// rules §12.4: a replica whose gate is closed (a standby, or one that lost its lease)
/// calls no plugin, not even Initialize, however many passes it makes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_replica_calls_no_plugin() {
    let Some(hub) = TestHub::from_env("plugin-fenced", CLUSTERS).await else {
        return;
    };
    let script = Arc::new(Script::default());
    let (work_config, _server) = serve(script.clone()).await;
    let fenced = Config {
        write_gate: mwrs_controller::leader::WriteGate::fenced(),
        ..Config::default()
    };
    let config = knowing_judge(&work_config, fenced, Duration::from_secs(2));
    let shared = Shared::default();
    let _controller = common::start_controller_judged(&hub, config, shared.clone());
    hub.publish_all("p").await;
    hub.create_mwrs(&mwrs(
        "app",
        configmap_template("v1"),
        &[("p", judged(json!({"type": "All"})))],
    ))
    .await;
    // Passes come back off at 1, 2 and 4 s: several of the plugin's 1 s polls.
    let shared = &shared;
    wait_for("three passes over the MWRS", common::WAIT, || async move {
        match shared.metrics.reconciles.get() {
            n if n >= 3 => Ok(()),
            n => Err(format!("{n} passes")),
        }
    })
    .await;
    assert_eq!(script.initialized.load(Ordering::SeqCst), 0, "Initialize");
    assert!(script.asked.lock().unwrap().is_empty(), "a question");
    assert!(script.calls.lock().unwrap().is_empty(), "a call");
    assert!(common::works_by_cluster(&hub, "app").await.is_empty());
}

/// rules §12.3: a plugin down before any BeginRollout reaches a cluster, past its
/// `unavailableFor` (here 3 s) under Fail: the rollout cannot go on, so its clusters
/// count as failed and AbortAll ends it; v2 was written nowhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_down_before_the_rollout_begins_fails_it_past_the_budget() {
    let strategy = judged(json!({"type": "All"}));
    let policy = "    failurePolicy:\n      unavailableFor: 3s\n";
    let Some((hub, script, _tasks, stable)) =
        v1_complete_then_v2("plugin-budget-begin", strategy, policy).await
    else {
        return;
    };
    script.down.store(true, Ordering::SeqCst);
    wait_mwrs(&hub, "app", "PluginLoaded False", |m| {
        plugin_loaded(m) == Some(("False".into(), "Failed".into()))
    })
    .await;
    hub.set_template("app", configmap_template("v2")).await;
    let m = wait_mwrs(&hub, "app", "the abort", |m| aborted(m).is_some()).await;
    assert_eq!(current(&m).as_deref(), Some(stable.as_str()));
    common::assert_works_on(&hub, "app", &hub.clusters, &stable).await;
    assert!(
        script
            .calls("BeginRollout")
            .iter()
            .all(|c| c.revision == stable)
    );
}

/// rules §12.6: a failover while a plugin judges a rollout spends no budget. Two replicas
/// of the binary with leader election; the plugin answers every call (IN_PROGRESS about
/// v2) and is registered with `unavailableFor: 3s`; the standby has been up longer than
/// that when the leader is killed. The new leader has asked the plugin nothing yet: it
/// must not count it down since its own start. No `PluginFailed`, no abort: v2 is
/// promoted once the plugin says SUCCEEDED.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_while_the_plugin_judges_spends_no_budget() {
    let Some(hub) = TestHub::from_env("plugin-failover", CLUSTERS).await else {
        return;
    };
    let script = Arc::new(Script::default());
    let (work_config, _server) = serve(script.clone()).await;
    let config_file = std::env::temp_dir().join(format!("{}-work-config.yaml", hub.namespace));
    let policy = "    failurePolicy:\n      unavailableFor: 3s\n";
    std::fs::write(&config_file, format!("{work_config}{policy}")).unwrap();
    let config_file = config_file.to_string_lossy().to_string();
    let ns = hub.namespace.clone();
    let flags = [
        "--leader-elect",
        "--lease-namespace",
        ns.as_str(),
        "--work-config",
        config_file.as_str(),
        // The default poll: a replica that probes only at its next tick after taking
        // over would see the plugin down for up to 10 s.
        "--plugin-poll",
        "10s",
    ];
    let mut leader = common::spawn_controller_binary(&hub, &flags).await;
    common::wait_holder(&hub, leader.id(), common::WAIT).await;
    hub.publish_all("p").await;
    let _agent = start_agent_succeeding(&hub, Duration::from_millis(200));
    script.set_all(&hub.clusters, api::Verdict::Succeeded);
    let strategy = judged(json!({"type": "All"}));
    hub.create_mwrs(&mwrs("app", configmap_template("v1"), &[("p", strategy)]))
        .await;
    let stable = current(&wait_complete(&hub, "app", None).await).unwrap();

    let standby = common::spawn_controller_binary(&hub, &flags).await;
    let standby_started = tokio::time::Instant::now();
    let v2 = v2_in_progress_everywhere(&hub, &script, &stable).await;
    // The standby has been up longer than the plugin's unavailableFor.
    wait_for(
        "the standby up past unavailableFor",
        common::WAIT,
        || async {
            let up = standby_started.elapsed();
            (up > Duration::from_secs(5))
                .then_some(())
                .ok_or(format!("up {up:?}"))
        },
    )
    .await;
    let asked_before = script.asked.lock().unwrap().len();
    leader.kill();
    common::wait_holder(&hub, standby.id(), Duration::from_secs(90)).await;
    // The new leader's passes have run and it has asked the plugin itself.
    wait_for("the new leader asking the plugin", common::WAIT, || async {
        let m = hub.get_mwrs("app").await.unwrap();
        assert_eq!(
            aborted(&m),
            None,
            "the new leader aborted: {}",
            common::describe(&m)
        );
        let asked = script.asked.lock().unwrap().len();
        (asked >= asked_before + CLUSTERS)
            .then_some(())
            .ok_or(format!("{asked} questions, {asked_before} before the kill"))
    })
    .await;
    let m = hub.get_mwrs("app").await.unwrap();
    assert_eq!(aborted(&m), None, "aborted: {}", common::describe(&m));
    assert_eq!(update(&m).as_deref(), Some(v2.as_str()));
    script.set_all(&hub.clusters, api::Verdict::Succeeded);
    let m = wait_complete(&hub, "app", Some(&stable)).await;
    assert_eq!(current(&m).as_deref(), Some(v2.as_str()));
    assert_eq!(aborted(&m), None);
    let events = hub.events_of("app").await;
    assert!(
        !events.iter().any(|(_, note)| note.contains("PluginFailed")),
        "{events:?}"
    );
}

/// rules §12.6: a plugin whose `Initialize` answers while every call about a cluster
/// answers UNAVAILABLE (its own backend is down) is down, not flapping: under
/// `failurePolicy: Hold` its clusters stay held past their progress deadline (8 s here,
/// from the agent's report) however often `Initialize` answers, and complete once it
/// judges again. Calls are bounded at 15 s: a down status must not hide behind retries
/// for that long while the deadline runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_whose_backend_is_down_holds_under_hold() {
    let strategy = judged(json!({"type": "All", "all": {"progressDeadline": "8s"}}));
    let policy = "    failurePolicy:\n      policy: Hold\n";
    let call_timeout = Duration::from_secs(15);
    let Some((hub, script, _tasks, stable)) =
        v1_complete_bounded("plugin-backend-hold", strategy, policy, call_timeout).await
    else {
        return;
    };
    let v2 = v2_in_progress_everywhere(&hub, &script, &stable).await;
    script.calls_down.store(true, Ordering::SeqCst);
    let initialized = script.initialized.load(Ordering::SeqCst);
    let until = tokio::time::Instant::now() + Duration::from_secs(25);
    wait_mwrs(&hub, "app", "25 s with the backend down", |m| {
        assert_eq!(current(m).as_deref(), Some(stable.as_str()), "promoted");
        assert_eq!(aborted(m), None, "{}", common::describe(m));
        tokio::time::Instant::now() >= until
    })
    .await;
    assert!(
        script.initialized.load(Ordering::SeqCst) > initialized + 3,
        "Initialize kept answering meanwhile"
    );
    script.calls_down.store(false, Ordering::SeqCst);
    script.set_all(&hub.clusters, api::Verdict::Succeeded);
    let m = wait_complete(&hub, "app", Some(&stable)).await;
    assert_eq!(current(&m).as_deref(), Some(v2.as_str()));
}

/// rules §12.6: the same outage under `failurePolicy: Fail` spends the budget within
/// `unavailableFor` (3 s) and two polls of the first failed call, though `Initialize`
/// keeps answering: the clusters count as failed and AbortAll reverts them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_whose_backend_is_down_spends_its_budget_under_fail() {
    let policy = "    failurePolicy:\n      unavailableFor: 3s\n      consecutiveErrors: 1000\n";
    fails_past_the_budget("plugin-backend-fail", policy, |s| &s.calls_down).await;
}

/// Security review K2, rules §12.6: the mark key has one life across replicas. The leader
/// reads the key's Secret every second and seals v3's verdicts and specs with a new key
/// written there; the standby read the key at its start and not since (`1h`). When it
/// takes over it reads the Secret before its first pass and believes those marks: no
/// BeginRollout, no question and no ManifestWork write follow. (Holding the old key only,
/// it would distrust every mark the leader made and roll every cluster out again.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_mark_key_survives_a_failover() {
    use k8s_openapi::api::core::v1::Secret;
    let Some(hub) = TestHub::from_env("plugin-mark-rotation", CLUSTERS).await else {
        return;
    };
    let ns = hub.namespace.clone();
    let secrets: kube::Api<Secret> = kube::Api::namespaced(hub.client.clone(), &ns);
    let key_secret = |key: [u8; 32]| -> Secret {
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "mwrs-controller-marks",
                "labels": {labels::MARK_KEY: "true"}},
            "type": "Opaque",
            "data": {"key": base64::engine::general_purpose::STANDARD.encode(key)}}))
        .unwrap()
    };
    // As the chart makes it: the Secret, and `get` on it alone.
    secrets
        .create(&Default::default(), &key_secret([1; 32]))
        .await
        .unwrap();
    grant_mark_key_read(&hub).await;
    let script = Arc::new(Script::default());
    script.mutate.store(true, Ordering::SeqCst);
    let (work_config, _server) = serve(script.clone()).await;
    let config_file = std::env::temp_dir().join(format!("{ns}-work-config.yaml"));
    std::fs::write(&config_file, &work_config).unwrap();
    let config_file = config_file.to_string_lossy().to_string();
    let flags = |reread: &'static str| {
        let mut f = vec!["--leader-elect", "--lease-namespace", ns.as_str()];
        f.extend(["--work-config", config_file.as_str(), "--plugin-poll", "2s"]);
        f.extend(["--mark-key-reread", reread]);
        f
    };
    let mut leader = common::spawn_controller_binary(&hub, &flags("1s")).await;
    common::wait_holder(&hub, leader.id(), common::WAIT).await;
    let standby = common::spawn_controller_binary(&hub, &flags("1h")).await;
    hub.publish_all("p").await;
    let _agent = start_agent_succeeding(&hub, Duration::from_millis(200));
    script.set_all(&hub.clusters, api::Verdict::Succeeded);
    let strategy = judged(json!({"type": "All"}));
    hub.create_mwrs(&mwrs("app", configmap_template("v1"), &[("p", strategy)]))
        .await;
    let stable = current(&wait_complete(&hub, "app", None).await).unwrap();

    let rotated = [2; 32];
    secrets
        .replace("mwrs-controller-marks", &Default::default(), &{
            let mut s = secrets.get("mwrs-controller-marks").await.unwrap();
            s.data = key_secret(rotated).data;
            s
        })
        .await
        .unwrap();
    let new_id = MarkKey::new(&rotated).unwrap().id();
    // v2 may begin before the leader's next read of the Secret; v3 comes seconds after it.
    hub.set_template("app", configmap_template("v2")).await;
    let v2 = current(&wait_complete(&hub, "app", Some(&stable)).await).unwrap();
    hub.set_template("app", configmap_template("v3")).await;
    let v3 = current(&wait_complete(&hub, "app", Some(&v2)).await).unwrap();
    // Every spec of v3, and the status record of its verdicts, sealed by the leader with
    // the new key.
    wait_for(
        "v3's marks sealed with the new key",
        common::WAIT,
        || async {
            let works = common::works_by_cluster(&hub, "app").await;
            let sealed = |w: &mwrs_api::work::ManifestWork, key: &str, sep: &str| {
                w.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(key))
                    .is_some_and(|v| v.contains(&format!("{sep}{new_id}:")))
            };
            let judged = hub
                .get_mwrs("app")
                .await
                .and_then(|m| m.status?.plugin_judged);
            let all = works.len() == CLUSTERS
                && works
                    .values()
                    .all(|w| sealed(w, labels::PLUGIN_SPEC_DIGEST, "."))
                && judged
                    .as_ref()
                    .is_some_and(|j| j.revision == v3 && j.seal.starts_with(&format!("{new_id}:")));
            all.then_some(()).ok_or(format!("{judged:?} {works:?}"))
        },
    )
    .await;
    let before = written(&hub).await;
    let (asked, begun) = (
        script.asked.lock().unwrap().len(),
        script.calls("BeginRollout").len(),
    );

    leader.kill();
    common::wait_holder(&hub, standby.id(), Duration::from_secs(90)).await;
    // A spec change the new leader must pass over (its status names the generation).
    let body = json!({"spec": {"revisionHistoryLimit": 7}});
    let patched =
        kube::Api::<mwrs_api::mwrs::ManifestWorkReplicaSet>::namespaced(hub.client.clone(), &ns)
            .patch("app", &Default::default(), &kube::api::Patch::Merge(&body))
            .await
            .unwrap();
    let generation = patched.metadata.generation.unwrap();
    wait_mwrs(&hub, "app", "the new leader's pass over the change", |m| {
        common::status(m).observed_generation == Some(generation)
    })
    .await;
    assert_eq!(
        current(&hub.get_mwrs("app").await.unwrap()).as_deref(),
        Some(v3.as_str())
    );
    assert_eq!(written(&hub).await, before, "no ManifestWork written again");
    assert_eq!(
        script.asked.lock().unwrap().len(),
        asked,
        "no verdict asked again"
    );
    assert_eq!(
        script.calls("BeginRollout").len(),
        begun,
        "no cluster begun again"
    );
}

/// The chart's Role on the mark key's Secret (`get` on that one name), bound to the
/// shipped ServiceAccount of the test's namespace.
async fn grant_mark_key_read(hub: &TestHub) {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let ns = hub.namespace.as_str();
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "mwrs-marks", "namespace": ns},
        "rules": [{"apiGroups": [""], "resources": ["secrets"],
            "resourceNames": ["mwrs-controller-marks"], "verbs": ["get"]}]}))
    .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "mwrs-marks", "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "mwrs-marks"},
        "subjects": [{"kind": "ServiceAccount", "name": "mwrs-controller", "namespace": ns}]}))
    .unwrap();
    let pp = kube::api::PostParams::default();
    kube::Api::<Role>::namespaced(hub.client.clone(), ns)
        .create(&pp, &role)
        .await
        .unwrap();
    kube::Api::<RoleBinding>::namespaced(hub.client.clone(), ns)
        .create(&pp, &binding)
        .await
        .unwrap();
}

/// Each cluster's ManifestWork of `app` as a write would change it: uid, generation and
/// annotations.
async fn written(hub: &TestHub) -> BTreeMap<String, String> {
    let works = common::works_by_cluster(hub, "app").await;
    works
        .into_iter()
        .map(|(c, w)| {
            let m = &w.metadata;
            (
                c,
                format!("{:?} {:?} {:?}", m.uid, m.generation, m.annotations),
            )
        })
        .collect()
}
