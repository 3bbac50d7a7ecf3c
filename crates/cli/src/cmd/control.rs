//! `rollout abort|retry|pause|resume NAME`: the manual controls of SPEC §7, as annotations
//! on the MWRS (the spec is untouched). Abort and retry carry a fresh request token each
//! time, so the controller acts on every request exactly once (it records the last token
//! it handled in `status.handledControls`).

use jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use mwrs_api::labels;
use serde_json::{Value, json};

use crate::error::{CliError, Exit, Result};
use crate::hub::HubClient;
use crate::output::{Out, Paint};

const FIELD_MANAGER: &str = "kubectl-mwrs";

async fn annotate(hub: &HubClient, name: &str, key: &str, value: Value) -> Result<()> {
    let body = json!({"metadata": {"annotations": {key: value}}});
    let pp = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    hub.mwrs_api()
        .patch(name, &pp, &Patch::Merge(&body))
        .await
        .map(|_| ())
        .map_err(|e| CliError::kube(&format!("annotating manifestworkreplicaset {name}"), e))
}

/// A request token: the time of the request (unique enough for one user at a time), for
/// the update revision the user saw, so it never acts on a newer one.
fn token(update: Option<&str>) -> String {
    let now = Timestamp::now().to_string();
    match update {
        Some(u) => labels::control_request(&now, u),
        None => now,
    }
}

fn note(out: &Out, s: &str) {
    eprintln!("{}", out.paint(Paint::Yellow, &format!("note: {s}")));
}

pub async fn abort(hub: &HubClient, out: &Out, name: &str) -> Result<Exit> {
    let m = hub.get(name).await?;
    let s = m.status.clone().unwrap_or_default();
    match (&s.current_revision, &s.update_revision) {
        (None, _) => note(
            out,
            "no stable revision yet (the first rollout never completed): nothing to go back \
             to, so the controller stops the rollout where it is (AbortFailed) until a \
             `rollout retry` or a new template",
        ),
        (Some(c), Some(u)) if c == u => note(
            out,
            &format!("revision {u} is already the stable revision: there is nothing to abort"),
        ),
        _ if s.aborted_time.is_some() => note(out, "an abort already holds this rollout"),
        _ => {}
    }
    let t = token(s.update_revision.as_deref());
    annotate(hub, name, labels::CONTROL_ABORT, Value::String(t.clone())).await?;
    println!("mwrs/{name} abort requested (request {t})");
    Ok(Exit::Ok)
}

pub async fn retry(hub: &HubClient, out: &Out, name: &str) -> Result<Exit> {
    let m = hub.get(name).await?;
    let s = m.status.clone().unwrap_or_default();
    if !s.update_aborted() {
        note(
            out,
            "no abort holds this rollout: the controller records the retry and changes nothing",
        );
    }
    let t = token(s.update_revision.as_deref());
    annotate(hub, name, labels::CONTROL_RETRY, Value::String(t.clone())).await?;
    println!(
        "mwrs/{name} retry requested (request {t}): revision {} rolls out again",
        s.update_revision.as_deref().unwrap_or("<none>")
    );
    Ok(Exit::Ok)
}

pub async fn pause(hub: &HubClient, _out: &Out, name: &str, on: bool) -> Result<Exit> {
    let m = hub.get(name).await?;
    let paused = mwrs_engine::phase::is_paused(&m);
    if paused == on {
        println!(
            "mwrs/{name} is already {}",
            if on { "paused" } else { "not paused" }
        );
        return Ok(Exit::Ok);
    }
    let value = if on {
        Value::String("true".into())
    } else {
        Value::Null
    };
    annotate(hub, name, labels::CONTROL_PAUSE, value).await?;
    println!("mwrs/{name} {}", if on { "paused" } else { "resumed" });
    Ok(Exit::Ok)
}
