//! `rollout abort|retry|pause|resume NAME`: the manual controls of rules §7, as annotations
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
    annotate_all(hub, name, json!({ key: value })).await
}

/// Sets (or, with null, removes) `annotations` on mwrs/`name` in one write.
async fn annotate_all(hub: &HubClient, name: &str, annotations: Value) -> Result<()> {
    let body = json!({"metadata": {"annotations": annotations}});
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

/// What a control request did: the line that says so and the notes that warn about it.
/// The CLI prints them; the dashboard answers with them.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Done {
    pub said: String,
    pub notes: Vec<String>,
    /// An undo's dry run: the revision it would go to and the spec's generation it read.
    /// An undo given both writes exactly that, or nothing when the spec changed since.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub undo: Option<UndoPin>,
    /// An undo's dry run: the template it would write (what `-o yaml|json` prints, for a
    /// GitOps user to commit).
    #[serde(skip)]
    pub template: Option<serde_json::Value>,
}

/// What an undo's dry run showed: see [`Done::undo`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct UndoPin {
    pub revision: i64,
    pub generation: i64,
}

impl Done {
    pub fn said(said: String) -> Self {
        Self {
            said,
            ..Self::default()
        }
    }

    /// Prints the notes to stderr and the line to stdout.
    pub fn print(&self, out: &Out) -> Exit {
        for n in &self.notes {
            eprintln!("{}", out.paint(Paint::Yellow, &format!("note: {n}")));
        }
        println!("{}", self.said);
        Exit::Ok
    }
}

/// Refuses a request made for update revision `shown` when mwrs/`name` rolls out another
/// one now (the request names the revision, so the controller acts on no other).
fn still_shown(name: &str, shown: Option<&str>, now: Option<&str>) -> Result<()> {
    match shown {
        Some(shown) if Some(shown) != now => Err(CliError::new(
            Exit::Conflict,
            format!(
                "mwrs/{name} now rolls out revision {}, not {shown}; nothing was written",
                now.unwrap_or("<none>")
            ),
        )),
        _ => Ok(()),
    }
}

/// Requests an abort of the update revision mwrs/`name` rolls out (of `shown`, when
/// given: nothing is written if another one rolls out now).
pub async fn abort(hub: &HubClient, name: &str, shown: Option<&str>) -> Result<Done> {
    let m = hub.get(name).await?;
    let s = m.status.clone().unwrap_or_default();
    still_shown(name, shown, s.update_revision.as_deref())?;
    let note = match (&s.current_revision, &s.update_revision) {
        (None, _) => Some(
            "no stable revision yet (the first rollout never completed): nothing to go back \
             to, so the controller stops the rollout where it is (AbortFailed) until a \
             `rollout retry` or a new template"
                .to_string(),
        ),
        (Some(c), Some(u)) if c == u => Some(format!(
            "revision {u} is already the stable revision: there is nothing to abort"
        )),
        _ if s.aborted_time.is_some() => Some("an abort already holds this rollout".into()),
        _ => None,
    };
    let t = token(s.update_revision.as_deref());
    annotate(hub, name, labels::CONTROL_ABORT, Value::String(t.clone())).await?;
    Ok(Done {
        said: format!("mwrs/{name} abort requested (request {t})"),
        notes: note.into_iter().collect(),
        ..Done::default()
    })
}

/// Requests that the update revision an abort holds roll out again (`shown`, when given:
/// nothing is written if another one is the update revision now); `skip_plugins`: without
/// asking its rollout plugins (rules §12.3), in the same write.
pub async fn retry(
    hub: &HubClient,
    name: &str,
    shown: Option<&str>,
    skip_plugins: bool,
) -> Result<Done> {
    let m = hub.get(name).await?;
    let s = m.status.clone().unwrap_or_default();
    still_shown(name, shown, s.update_revision.as_deref())?;
    let update = s.update_revision.as_deref().unwrap_or("<none>");
    let mut notes = Vec::new();
    if !s.update_aborted() && !skip_plugins {
        notes.push(
            "no abort holds this rollout: the controller records the retry and changes nothing"
                .to_string(),
        );
    }
    let t = token(s.update_revision.as_deref());
    let mut annotations = json!({ labels::CONTROL_RETRY: t });
    if skip_plugins {
        let Some(update) = s.update_revision.as_deref() else {
            return Err(CliError::new(
                Exit::Conflict,
                format!("mwrs/{name} has no update revision yet: nothing to skip plugins for"),
            ));
        };
        // Honoured at this generation only (a retry leaves the spec as it is).
        let generation = m.metadata.generation.unwrap_or_default();
        annotations[labels::SKIP_PLUGINS] = json!(format!("{update}@{generation}"));
        notes.push(format!(
            "revision {update} rolls out without asking its rollout plugins (annotation {})",
            labels::SKIP_PLUGINS
        ));
    }
    annotate_all(hub, name, annotations).await?;
    Ok(Done {
        said: format!(
            "mwrs/{name} retry requested (request {t}): revision {update} rolls out again"
        ),
        notes,
        ..Done::default()
    })
}

/// Pauses (`on`) or resumes mwrs/`name`; writes nothing when it already is so.
pub async fn pause(hub: &HubClient, name: &str, on: bool) -> Result<Done> {
    let m = hub.get(name).await?;
    let paused = mwrs_engine::phase::is_paused(&m);
    if paused == on {
        let now = if on { "paused" } else { "not paused" };
        return Ok(Done::said(format!("mwrs/{name} is already {now}")));
    }
    let value = if on {
        Value::String("true".into())
    } else {
        Value::Null
    };
    annotate(hub, name, labels::CONTROL_PAUSE, value).await?;
    let done = if on { "paused" } else { "resumed" };
    Ok(Done::said(format!("mwrs/{name} {done}")))
}
