//! `rollout diff NAME [A [B]]`: unified diff of two revisions' templates as YAML
//! (default: the current revision against the update revision), coloured on a terminal.

use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_engine::revision::RevisionView;
use serde_json::Value;
use similar::TextDiff;

use crate::args::DiffArgs;
use crate::cmd::history::{find, unknown};
use crate::error::{CliError, Exit, Result};
use crate::hub::HubClient;
use crate::output::{Out, Paint, to_yaml};

/// Unified diff of two templates as YAML; empty when they are equal.
pub fn diff_text(out: &Out, a: &Value, a_name: &str, b: &Value, b_name: &str) -> Result<String> {
    let (ya, yb) = (to_yaml(a)?, to_yaml(b)?);
    let d = TextDiff::from_lines(&ya, &yb);
    let text = d
        .unified_diff()
        .context_radius(3)
        .header(a_name, b_name)
        .to_string();
    Ok(text
        .lines()
        .map(|l| {
            let p = if l.starts_with("+++") || l.starts_with("---") {
                Some(Paint::Bold)
            } else if l.starts_with('+') {
                Some(Paint::Green)
            } else if l.starts_with('-') {
                Some(Paint::Red)
            } else if l.starts_with("@@") {
                Some(Paint::Cyan)
            } else {
                None
            };
            let l = p.map_or_else(|| l.to_string(), |p| out.paint(p, l));
            l + "\n"
        })
        .collect())
}

fn by_hash<'a>(
    m: &ManifestWorkReplicaSet,
    history: &'a [RevisionView],
    hash: Option<&str>,
    what: &str,
) -> Result<&'a RevisionView> {
    let hash = hash.ok_or_else(|| {
        CliError::not_found(format!(
            "mwrs/{} has no {what} revision yet; name two revisions",
            m.metadata.name.as_deref().unwrap_or_default()
        ))
    })?;
    history
        .iter()
        .find(|r| r.hash == hash)
        .ok_or_else(|| unknown(m, history, hash))
}

pub fn label(r: &RevisionView) -> String {
    format!("revision {} ({})", r.revision, r.hash)
}

pub async fn run(hub: &HubClient, out: &Out, a: &DiffArgs) -> Result<Exit> {
    let m = hub.get(&a.name).await?;
    let history = hub.history(&m).await?;
    let status = m.status.clone().unwrap_or_default();
    let pick = |key: &str| find(&history, key).ok_or_else(|| unknown(&m, &history, key));
    let (ra, rb) = match (&a.a, &a.b) {
        (Some(x), Some(y)) => (pick(x)?, pick(y)?),
        (Some(x), None) => (
            pick(x)?,
            by_hash(&m, &history, status.update_revision.as_deref(), "update")?,
        ),
        _ => (
            by_hash(&m, &history, status.current_revision.as_deref(), "current")?,
            by_hash(&m, &history, status.update_revision.as_deref(), "update")?,
        ),
    };
    let text = diff_text(out, &ra.template, &label(ra), &rb.template, &label(rb))?;
    if text.is_empty() {
        println!("{} and {} have the same template", label(ra), label(rb));
    } else {
        print!("{text}");
    }
    Ok(Exit::Ok)
}
