//! `mwrs plugin check ENDPOINT`: the conformance kit for rollout plugin authors. It
//! drives a plugin through the contract's calls on a simulated rollout of one cluster
//! (Initialize, BeginRollout, MutateManifestWork, ProgressRollout,
//! ValidateRolloutCompletion) and an abort of it (BeginAbort, MutateManifestWork,
//! ValidateAbortCompletion), with the controller's own client and rules, and says call by
//! call what the plugin answered, how long it took, and what the controller makes of it.
//! A plugin passes when the controller could use every answer.

use std::time::{Duration, Instant};

use mwrs_engine::hash;
use mwrs_engine::plugin::PLUGIN_TEXT_MAX;
use mwrs_engine::text::cut;
use mwrs_plugin::client::{Code, PluginClient, Status, is_down, status_text};
use mwrs_plugin::config::WorkConfig;
use mwrs_plugin::v1alpha1 as api;
use serde::Serialize;
use serde_json::{Value, json};

use crate::args::PluginCheckArgs;
use crate::error::{CliError, Exit, Result};
use crate::output::Out;

/// The simulated rollout's MWRS, placement and cluster.
const NAMESPACE: &str = "mwrs-plugin-check";
const NAME: &str = "app";
const PLACEMENT: &str = "check";
const CLUSTER: &str = "cluster-1";

/// One call, as the report shows it.
#[derive(Serialize, Debug)]
pub struct Step {
    pub call: &'static str,
    pub seconds: f64,
    /// What the plugin answered (its words cut as the controller cuts them).
    pub answered: String,
    /// What the controller makes of it.
    pub controller: String,
    pub result: Mark,
}

#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// The controller uses the answer.
    Pass,
    /// Usable, with something the author should know.
    Note,
    /// The controller cannot use it; the reason is in `controller`.
    Fail,
}

#[derive(Serialize, Debug)]
struct Report {
    endpoint: String,
    passed: bool,
    steps: Vec<Step>,
}

/// The two revisions of the simulated rollout: v1 (stable) and v2 (the update).
struct Revisions {
    stable: (String, Value),
    update: (String, Value),
}

fn template(version: &str) -> Value {
    json!({"workload": {"manifests": [{
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "mwrs-plugin-check", "namespace": "default"},
        "data": {"version": version},
    }]}})
}

impl Revisions {
    fn new() -> Self {
        let named = |v: &str| {
            let t = template(v);
            (hash::digest(&t).to_hex()[..10].to_string(), t)
        };
        Self {
            stable: named("v1"),
            update: named("v2"),
        }
    }
}

pub async fn run(out: &Out, a: &PluginCheckArgs) -> Result<Exit> {
    let client = client(a)?;
    let steps = check(&client, a).await;
    let report = Report {
        endpoint: a.endpoint.clone(),
        passed: steps.iter().all(|s| s.result != Mark::Fail),
        steps,
    };
    if out.structured() {
        out.print_structured(&report)?;
    } else {
        print_table(&report);
    }
    Ok(if report.passed { Exit::Ok } else { Exit::Error })
}

/// The plugin's client, registered as the controller's `--work-config` would register it
/// (the same endpoint rules and errors).
fn client(a: &PluginCheckArgs) -> Result<PluginClient> {
    let mut yaml = format!(
        "plugins:\n  - name: {}\n    endpoint: {}\n",
        a.name, a.endpoint
    );
    if let Some(ca) = &a.ca_file {
        let pem = std::fs::read(ca)
            .map_err(|e| CliError::usage(format!("--ca-file {}: {e}", ca.display())))?;
        use base64::Engine as _;
        let bundle = base64::engine::general_purpose::STANDARD.encode(pem);
        yaml.push_str(&format!("    caCertificate:\n      caBundle: {bundle}\n"));
    }
    if let (Some(cert), Some(key)) = (&a.client_cert, &a.client_key) {
        yaml.push_str(&format!(
            "    clientCertificate:\n      certFile: {}\n      keyFile: {}\n",
            cert.display(),
            key.display()
        ));
    }
    let config = WorkConfig::parse(&yaml).map_err(|e| CliError::usage(e.to_string()))?;
    let plugin = config
        .plugin(&a.name)
        .ok_or_else(|| CliError::usage("no plugin registered"))?;
    let timeout =
        Duration::try_from(a.timeout).map_err(|_| CliError::usage("--timeout must be positive"))?;
    Ok(PluginClient::new(plugin)
        .map_err(|e| CliError::usage(e.to_string()))?
        .with_timeout(timeout))
}

/// Every call of the contract, in the order a rollout and an abort make them.
async fn check(client: &PluginClient, a: &PluginCheckArgs) -> Vec<Step> {
    let revs = Revisions::new();
    let bound = client.timeout();
    let mut steps = Vec::new();
    let init = api::InitializeRequest {
        plugin: a.name.clone(),
        controller_version: crate::args::VERSION.to_string(),
    };
    let (took, answer) = timed(client.initialize(init)).await;
    steps.push(initialized((took, bound), answer));
    if steps[0].result == Mark::Fail {
        return steps;
    }
    let rollout = rollout_request(&revs, false);
    let (took, answer) = timed(client.begin_rollout(rollout.clone())).await;
    steps.push(acked("BeginRollout", (took, bound), answer));
    let mutate = mutate_request(&revs, &revs.update, false);
    let (took, answer) = timed(client.mutate_manifest_work(mutate)).await;
    steps.push(mutated(
        (took, bound),
        answer,
        &revs.update.1,
        a.allow_manifest_removal,
    ));
    let (took, answer) = timed(client.progress_rollout(rollout)).await;
    steps.push(acked("ProgressRollout", (took, bound), answer));
    steps.push(validated(client, a, validate_request(&revs, &revs.update.0), false).await);
    let abort = rollout_request(&revs, true);
    let (took, answer) = timed(client.begin_abort(abort)).await;
    steps.push(acked("BeginAbort", (took, bound), answer));
    let mutate = mutate_request(&revs, &revs.stable, true);
    let (took, answer) = timed(client.mutate_manifest_work(mutate)).await;
    steps.push(mutated(
        (took, bound),
        answer,
        &revs.stable.1,
        a.allow_manifest_removal,
    ));
    steps.push(validated(client, a, validate_request(&revs, &revs.stable.0), true).await);
    steps
}

async fn timed<T>(call: impl Future<Output = T>) -> (Duration, T) {
    let start = Instant::now();
    let answer = call.await;
    (start.elapsed(), answer)
}

fn step(
    call: &'static str,
    (took, _): (Duration, Duration),
    answered: String,
    (result, controller): (Mark, String),
) -> Step {
    Step {
        call,
        seconds: (took.as_secs_f64() * 100.0).round() / 100.0,
        answered,
        controller,
        result,
    }
}

/// What the controller makes of an error status from a call that took `took` of `bound`.
fn error_reading(s: &Status, (took, bound): (Duration, Duration)) -> (Mark, String) {
    // The bound ends a call on either side (the client's timer or the gRPC deadline the
    // server enforces), whichever comes first, with one status or another.
    let stalled = s.code() == Code::DeadlineExceeded || took + Duration::from_millis(50) >= bound;
    let reading = if stalled {
        "no answer within the bound: the plugin counts as down (its clusters wait and its outage clock runs; past failurePolicy.unavailableFor they fail under Fail)"
    } else if is_down(s) {
        "a down status: the plugin counts as down (its clusters wait and its outage clock runs; past failurePolicy.unavailableFor they fail under Fail); the call also counts in the cluster's run of errors"
    } else {
        "an error about this call: the cluster waits, and the error counts in its run (past failurePolicy.consecutiveErrors it fails under Fail)"
    };
    (Mark::Fail, reading.to_string())
}

/// The step of a call that answered the error status `s`.
fn failed(call: &'static str, took: (Duration, Duration), s: &Status) -> Step {
    let answered = cut(status_text(s), PLUGIN_TEXT_MAX);
    step(call, took, answered, error_reading(s, took))
}

/// The plugin's words as the controller keeps them, with a note when they were cut.
fn words(text: String) -> (String, bool) {
    let long = text.len() > PLUGIN_TEXT_MAX;
    (cut(text, PLUGIN_TEXT_MAX), long)
}

fn initialized(
    took: (Duration, Duration),
    answer: std::result::Result<api::InitializeResponse, Status>,
) -> Step {
    match answer {
        Ok(r) => {
            let (description, long) = words(r.description);
            let reading = match (description.is_empty(), long) {
                (true, _) => (Mark::Note, "available; an empty description leaves PluginLoaded's message without the plugin's name and version".to_string()),
                (false, true) => (Mark::Note, format!("available; the description is cut to {PLUGIN_TEXT_MAX} bytes")),
                (false, false) => (Mark::Pass, "available: PluginLoaded True with this description".to_string()),
            };
            step("Initialize", took, format!("{description:?}"), reading)
        }
        Err(s) => {
            let (_, why) = error_reading(&s, took);
            step(
                "Initialize",
                took,
                cut(status_text(&s), PLUGIN_TEXT_MAX),
                (
                    Mark::Fail,
                    format!("{why}; no call about a cluster is made until Initialize answers"),
                ),
            )
        }
    }
}

fn acked(
    call: &'static str,
    took: (Duration, Duration),
    answer: std::result::Result<api::Ack, Status>,
) -> Step {
    match answer {
        Ok(_) => step(
            call,
            took,
            "Ack".into(),
            (Mark::Pass, "acknowledged".into()),
        ),
        Err(s) => failed(call, took, &s),
    }
}

fn mutated(
    took: (Duration, Duration),
    answer: std::result::Result<api::MutateResponse, Status>,
    template: &Value,
    allow_removal: bool,
) -> Step {
    const CALL: &str = "MutateManifestWork";
    let r = match answer {
        Ok(r) => r,
        Err(s) => {
            return failed(CALL, took, &s);
        }
    };
    let answered = match r.spec_json.len() {
        0 => "no spec (the template as it is)".to_string(),
        n => format!("a spec of {n} bytes"),
    };
    let typed = mwrs_api::work::ManifestWorkTemplate::from_value(template.clone());
    let Ok(typed) = typed else {
        return step(
            CALL,
            took,
            answered,
            (Mark::Fail, "the kit's own template did not parse".into()),
        );
    };
    let limit = mwrs_engine::validate::DEFAULT_MANIFEST_SIZE_LIMIT;
    let checked = mwrs_engine::validate::plugin_spec(
        &r.spec_json,
        (&typed, hash::digest(template)),
        allow_removal,
        limit,
    );
    let reading = match checked {
        Ok(None) => (Mark::Pass, "no change: the revision's template is written".to_string()),
        Ok(Some(_)) => (Mark::Pass, "a changed spec, accepted: written instead of the template, sealed, and restored if edited".to_string()),
        Err(invalid) => (Mark::Fail, format!("refused: {invalid}; nothing is written, the cluster waits and the refusal counts in its run of errors")),
    };
    step(CALL, took, answered, reading)
}

/// ValidateRolloutCompletion (or ValidateAbortCompletion), asked again every
/// `--interval` while the plugin says IN_PROGRESS, for at most `--validate-for`.
async fn validated(
    client: &PluginClient,
    a: &PluginCheckArgs,
    r: api::ValidateRequest,
    aborting: bool,
) -> Step {
    let call = if aborting {
        "ValidateAbortCompletion"
    } else {
        "ValidateRolloutCompletion"
    };
    let until = Instant::now() + Duration::try_from(a.validate_for).unwrap_or_default();
    let interval = Duration::try_from(a.interval).unwrap_or(Duration::from_secs(1));
    let mut asked = 0;
    loop {
        asked += 1;
        let (took, answer) = if aborting {
            timed(client.validate_abort_completion(r.clone())).await
        } else {
            timed(client.validate_rollout_completion(r.clone())).await
        };
        let took = (took, client.timeout());
        let answer = match answer {
            Ok(v) => v,
            Err(s) => {
                return failed(call, took, &s);
            }
        };
        let (message, long) = words(answer.message);
        let verdict = api::Verdict::try_from(answer.verdict);
        let answered = match verdict {
            Ok(v) => format!(
                "{} {message:?}",
                v.as_str_name().trim_start_matches("VERDICT_")
            ),
            Err(_) => format!("verdict {} {message:?}", answer.verdict),
        };
        let in_progress = verdict == Ok(api::Verdict::InProgress);
        if in_progress && Instant::now() + interval < until {
            tokio::time::sleep(interval).await;
            continue;
        }
        let answered = match asked {
            1 => format!("{answered} (asked once)"),
            n => format!("{answered} (asked {n} times)"),
        };
        return step(
            call,
            took,
            answered,
            verdict_reading(verdict, aborting, long),
        );
    }
}

fn verdict_reading(
    verdict: std::result::Result<api::Verdict, impl std::fmt::Debug>,
    aborting: bool,
    long: bool,
) -> (Mark, String) {
    let what = if aborting { "revert" } else { "cluster" };
    let (mark, reading) = match verdict {
        Ok(api::Verdict::Succeeded) => (Mark::Pass, format!("final: the {what} counts as done")),
        Ok(api::Verdict::Failed) => (Mark::Pass, format!("final: the {what} counts as failed (against maxFailures)")),
        Ok(api::Verdict::InProgress) => (Mark::Pass, "still judging: asked again every --plugin-poll; the progress deadline runs meanwhile".to_string()),
        Ok(_) => (Mark::Fail, "VERDICT_UNSPECIFIED (an empty answer): taken as IN_PROGRESS and asked again for ever; answer IN_PROGRESS while judging and a final verdict when done".to_string()),
        Err(_) => (Mark::Fail, "not a verdict of the API: taken as IN_PROGRESS and asked again for ever".to_string()),
    };
    match (mark, long) {
        (Mark::Pass, true) => (
            Mark::Note,
            format!("{reading}; the message is cut to {PLUGIN_TEXT_MAX} bytes"),
        ),
        (mark, _) => (mark, reading),
    }
}

fn target() -> api::Target {
    api::Target {
        mwrs_namespace: NAMESPACE.into(),
        mwrs_name: NAME.into(),
        mwrs_uid: "00000000-0000-0000-0000-00000000c4ec".into(),
        placement: PLACEMENT.into(),
        total_clusters: 1,
    }
}

fn revisions(revs: &Revisions) -> api::Revisions {
    api::Revisions {
        current: revs.stable.0.clone(),
        update: revs.update.0.clone(),
    }
}

fn rollout_request(revs: &Revisions, aborting: bool) -> api::RolloutRequest {
    let state = if aborting {
        api::ClusterRolloutState::Failed
    } else {
        api::ClusterRolloutState::ToApply
    };
    api::RolloutRequest {
        target: Some(target()),
        revisions: Some(revisions(revs)),
        cluster: CLUSTER.into(),
        clusters: vec![api::ClusterState {
            cluster: CLUSTER.into(),
            state: state.into(),
            revision: revs.stable.0.clone(),
            since: None,
        }],
        aborting,
    }
}

fn mutate_request(
    revs: &Revisions,
    (revision, template): &(String, Value),
    aborting: bool,
) -> api::MutateRequest {
    api::MutateRequest {
        target: Some(target()),
        revisions: Some(revisions(revs)),
        cluster: CLUSTER.into(),
        revision: revision.clone(),
        spec_json: serde_json::to_vec(template).unwrap_or_default(),
        aborting,
    }
}

fn validate_request(revs: &Revisions, revision: &str) -> api::ValidateRequest {
    api::ValidateRequest {
        target: Some(target()),
        revisions: Some(revisions(revs)),
        cluster: CLUSTER.into(),
        revision: revision.into(),
        manifest_work: format!("{NAMESPACE}.{NAME}"),
        generation: 1,
        since: None,
    }
}

fn print_table(r: &Report) {
    println!(
        "plugin check of {}: a simulated rollout of {CLUSTER} and its abort",
        r.endpoint
    );
    for s in &r.steps {
        let mark = match s.result {
            Mark::Pass => "PASS",
            Mark::Note => "NOTE",
            Mark::Fail => "FAIL",
        };
        println!("{mark}  {:<26} {:>6.2}s  {}", s.call, s.seconds, s.answered);
        println!("      the controller: {}", s.controller);
    }
    let failed = r.steps.iter().filter(|s| s.result == Mark::Fail).count();
    match failed {
        0 => println!("passed: the controller can use every answer"),
        n => println!("failed: {n} call(s) the controller cannot use"),
    }
}
