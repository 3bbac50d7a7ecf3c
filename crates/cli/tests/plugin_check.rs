//! `mwrs plugin check`, the conformance kit: the reference plugin passes it; plugins that
//! answer an empty verdict, stall, refuse a call or return a spec the controller refuses
//! fail it, each with the reason the controller would give.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use mwrs_plugin::v1alpha1 as api;
use mwrs_plugin::v1alpha1::rollout_plugin_server::{RolloutPlugin, RolloutPluginServer};
use mwrs_testsupport::{TaskGuard, TestHub};
use serde_json::Value;
use tonic::{Request, Response, Status};

/// How a test plugin goes wrong.
#[derive(Clone, Copy)]
enum Broken {
    /// Every answer `{}`: an empty verdict.
    Empty,
    /// ValidateRolloutCompletion never answers.
    Stalls,
    /// BeginRollout answers UNAVAILABLE (its backend is down).
    BackendDown,
    /// MutateManifestWork drops the template's only manifest.
    DropsManifest,
}

struct Plugin(Broken);

type Answer<T> = Result<Response<T>, Status>;

fn ok<T>(t: T) -> Answer<T> {
    Ok(Response::new(t))
}

#[tonic::async_trait]
impl RolloutPlugin for Plugin {
    async fn initialize(
        &self,
        _: Request<api::InitializeRequest>,
    ) -> Answer<api::InitializeResponse> {
        ok(api::InitializeResponse {
            description: "broken 1.0".into(),
        })
    }
    async fn begin_rollout(&self, _: Request<api::RolloutRequest>) -> Answer<api::Ack> {
        match self.0 {
            Broken::BackendDown => Err(Status::unavailable("metrics backend down")),
            _ => ok(api::Ack {}),
        }
    }
    async fn progress_rollout(&self, _: Request<api::RolloutRequest>) -> Answer<api::Ack> {
        ok(api::Ack {})
    }
    async fn validate_rollout_completion(
        &self,
        _: Request<api::ValidateRequest>,
    ) -> Answer<api::ValidateResponse> {
        match self.0 {
            Broken::Empty => ok(api::ValidateResponse::default()),
            Broken::Stalls => std::future::pending().await,
            _ => ok(api::ValidateResponse {
                verdict: api::Verdict::Succeeded.into(),
                message: "ok".into(),
            }),
        }
    }
    async fn mutate_manifest_work(
        &self,
        r: Request<api::MutateRequest>,
    ) -> Answer<api::MutateResponse> {
        let mut spec: Value = serde_json::from_slice(&r.into_inner().spec_json).unwrap();
        if let Broken::DropsManifest = self.0 {
            spec["workload"]["manifests"] = Value::Array(vec![]);
        }
        ok(api::MutateResponse {
            spec_json: serde_json::to_vec(&spec).unwrap(),
        })
    }
    async fn begin_abort(&self, _: Request<api::RolloutRequest>) -> Answer<api::Ack> {
        ok(api::Ack {})
    }
    async fn validate_abort_completion(
        &self,
        _: Request<api::ValidateRequest>,
    ) -> Answer<api::ValidateResponse> {
        ok(api::ValidateResponse {
            verdict: api::Verdict::Succeeded.into(),
            message: "reverted".into(),
        })
    }
}

async fn serve(broken: Broken) -> (String, TaskGuard) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router =
        tonic::transport::Server::builder().add_service(RolloutPluginServer::new(Plugin(broken)));
    let task = TaskGuard::spawn(async move {
        let incoming = tonic::transport::server::TcpIncoming::from(listener);
        let _ = router.serve_with_incoming(incoming).await;
    });
    (format!("http://{addr}"), task)
}

/// `mwrs plugin check ENDPOINT ARGS -o json`: the exit code and the report.
async fn check(endpoint: &str, args: &[&str]) -> (i32, Value) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_mwrs"))
        .args(["plugin", "check", endpoint, "-o", "json"])
        .args(args)
        .output()
        .await
        .expect("run the mwrs binary");
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap_or(-1), report)
}

/// The step of `call` (the first one of that name) in a report.
fn step<'a>(report: &'a Value, call: &str) -> &'a Value {
    report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["call"] == call)
        .unwrap_or_else(|| panic!("no {call} in {report}"))
}

#[tokio::test]
async fn a_broken_plugin_fails_with_the_controllers_reason() {
    let cases: [(Broken, &str, &str); 4] = [
        (
            Broken::Empty,
            "ValidateRolloutCompletion",
            "VERDICT_UNSPECIFIED",
        ),
        (
            Broken::Stalls,
            "ValidateRolloutCompletion",
            "no answer within the bound",
        ),
        (Broken::BackendDown, "BeginRollout", "counts as down"),
        (Broken::DropsManifest, "MutateManifestWork", "refused"),
    ];
    for (broken, call, why) in cases {
        let (endpoint, _plugin) = serve(broken).await;
        let (code, report) = check(&endpoint, &["--timeout", "2s", "--validate-for", "1s"]).await;
        assert_eq!(code, 1, "{report}");
        assert_eq!(report["passed"], false);
        let s = step(&report, call);
        assert_eq!(s["result"], "Fail", "{report}");
        let said = s["controller"].as_str().unwrap();
        assert!(said.contains(why), "{call}: {said}");
        // The same in the table a person reads.
        let table = tokio::process::Command::new(env!("CARGO_BIN_EXE_mwrs"))
            .args([
                "plugin",
                "check",
                &endpoint,
                "--timeout",
                "2s",
                "--validate-for",
                "1s",
            ])
            .output()
            .await
            .unwrap();
        let table = String::from_utf8_lossy(&table.stdout);
        println!("{table}");
        assert!(table.contains(&format!("FAIL  {call}")), "{table}");
        assert!(table.contains(why), "{table}");
    }
}

/// The reference plugin (`mwrs-feedback-plugin`) passes: it answers every call, and about
/// a cluster whose ManifestWork it cannot find it says IN_PROGRESS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_plugin_passes() {
    let Some(hub) = TestHub::from_env("plugin-check", 1).await else {
        return;
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config = mwrs_feedback_plugin::config::Config::parse(&format!(
        "listen: {addr}\n\
         checks:\n\
         \x20 - resource: {{group: apps, resource: deployments, namespace: default, name: app}}\n\
         \x20   succeedWhen: ReadyReplicas == Replicas\n"
    ))
    .unwrap();
    let client = hub.client.clone();
    let _plugin = TaskGuard::spawn(async move {
        let _ = mwrs_feedback_plugin::serve(config, client, listener).await;
    });
    let endpoint = format!("http://{addr}");
    // The plugin answers once its own hub client is up.
    let mut last = Value::Null;
    for _ in 0..50 {
        let (code, report) = check(&endpoint, &["--validate-for", "2s"]).await;
        if code == 0 {
            let calls: Vec<&str> = report["steps"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["call"].as_str().unwrap())
                .collect();
            assert_eq!(
                calls,
                [
                    "Initialize",
                    "BeginRollout",
                    "MutateManifestWork",
                    "ProgressRollout",
                    "ValidateRolloutCompletion",
                    "BeginAbort",
                    "MutateManifestWork",
                    "ValidateAbortCompletion"
                ]
            );
            let validate = step(&report, "ValidateRolloutCompletion");
            assert!(
                validate["answered"]
                    .as_str()
                    .unwrap()
                    .starts_with("IN_PROGRESS"),
                "{report}"
            );
            return;
        }
        last = report;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("the reference plugin never passed: {last}");
}
