//! The dashboard's actions, served only with `--enable-actions`: pause, resume, abort,
//! retry and undo. Each is the CLI command's own function, so each writes exactly what
//! the command writes, as the user, and answers with what the command prints. The page
//! asks for a confirmation first; an undo is shown as its dry run, and the confirmation
//! sends back the revision and the spec's generation the dry run read, so that it writes
//! what was shown or nothing.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::Deserialize;

use super::api::{ApiError, Segments, Source};
use crate::args::{Format, UndoArgs};
use crate::cmd::control::{self, Done};
use crate::cmd::undo;
use crate::error::CliError;
use crate::output::Out;

/// The body of `POST .../actions/{action}`: what the page showed, for the action to
/// write that or nothing.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ActionRequest {
    /// The revision an undo goes to (number or hash); none: the one a bare undo takes.
    #[serde(default)]
    pub to_revision: Option<String>,
    /// Say what an undo would change and write nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// The spec's generation the dry run read: the undo writes nothing if it moved.
    #[serde(default)]
    pub generation: Option<i64>,
    /// The update revision the page showed: an abort or a retry of another one is
    /// refused.
    #[serde(default)]
    pub revision: Option<String>,
}

/// `POST /api/mwrs/{namespace}/{name}/actions/{action}`.
pub async fn act(
    State(s): State<Arc<Source>>,
    path: Segments,
    Json(body): Json<ActionRequest>,
) -> Result<Json<Done>, ApiError> {
    let hub = s.hub(path.get("namespace"))?;
    let name = path.get("name").to_string();
    let done = match path.get("action") {
        "pause" => control::pause(&hub, &name, true).await?,
        "resume" => control::pause(&hub, &name, false).await?,
        "abort" => control::abort(&hub, &name, body.revision.as_deref()).await?,
        "retry" => control::retry(&hub, &name, body.revision.as_deref(), false).await?,
        "undo" => {
            let a = UndoArgs {
                name,
                to_revision: body.to_revision,
                dry_run: body.dry_run,
                skip_plugins: false,
                resource_version: None,
                generation: body.generation,
            };
            undo::undo(&hub, &PLAIN, &a).await?
        }
        other => {
            let why = format!(
                "no action {other:?}: the dashboard does pause, resume, abort, retry and undo"
            );
            return Err(CliError::not_found(why).into());
        }
    };
    Ok(Json(done))
}

/// Text without colour, for answers the page shows as they are.
const PLAIN: Out = Out {
    format: Format::Table,
    color: false,
    tty: false,
};
