//! `rollout undo NAME [--to-revision N] [--dry-run]`: rewrites `spec.manifestWorkTemplate`
//! from a stored revision, in one write guarded by the generation read (or by the
//! resourceVersion given), so a concurrent edit of the spec makes it fail whole (nothing is
//! written) instead of overwriting, while the controller's status writes do not.

use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use mwrs_api::labels;
use mwrs_api::mwrs::{ManifestWorkReplicaSet, ManifestWorkReplicaSetStatus};
use mwrs_api::work::ManifestWorkTemplate;
use mwrs_engine::hash;
use mwrs_engine::revision::{self, NoUndoTarget, RevisionView};
use mwrs_engine::validate::{self, DEFAULT_MANIFEST_SIZE_LIMIT};
use serde_json::json;

use crate::args::UndoArgs;
use crate::cmd::control::{Done, UndoPin};
use crate::cmd::diff::{diff_text, label};
use crate::cmd::history::{find, unknown};
use crate::error::{CliError, Exit, Result};
use crate::hub::HubClient;
use crate::output::Out;

/// Why a bare undo of mwrs/`name` has nowhere to go, and what to do instead.
fn no_target(name: &str, why: NoUndoTarget) -> CliError {
    CliError::not_found(match why {
        NoUndoTarget::NoStableRevision => format!(
            "mwrs/{name}: the update revision was aborted and no revision ever completed, so \
             there is no stable revision to go back to; name one with --to-revision \
             (`kubectl mwrs rollout history {name}`)"
        ),
        NoUndoTarget::NoEarlierCompleted => format!(
            "mwrs/{name} has no earlier revision that completed and was not aborted since; \
             name one with --to-revision (`kubectl mwrs rollout history {name}`)"
        ),
    })
}

/// An undo rewrites only the template: if the rest of the spec is invalid (a strategy, a
/// duration), the MWRS stays Invalid and the controller does nothing with it. Say so
/// before writing anything.
fn refuse_invalid(m: &ManifestWorkReplicaSet, target: &RevisionView) -> Result<()> {
    let mut next = m.spec.clone();
    next.manifest_work_template = ManifestWorkTemplate::from_value(target.template.clone())
        .map_err(|e| CliError::error(format!("{}: unreadable template: {e}", label(target))))?;
    match validate::validate(&next, DEFAULT_MANIFEST_SIZE_LIMIT) {
        Ok(_) => Ok(()),
        Err(invalid) => Err(CliError::new(
            Exit::Degraded,
            format!(
                "mwrs/{} would stay Invalid after the undo ({invalid}): a revision holds only \
                 the template; fix the spec first. Nothing was written",
                m.name_any()
            ),
        )),
    }
}

/// Why `key` is not one of this MWRS's revisions: another MWRS's, or unknown.
async fn not_ours(
    hub: &HubClient,
    m: &ManifestWorkReplicaSet,
    history: &[RevisionView],
    key: &str,
) -> CliError {
    let api: Api<ControllerRevision> = Api::namespaced(hub.client.clone(), &hub.namespace);
    let Ok(all) = api.list(&ListParams::default()).await else {
        return unknown(m, history, key);
    };
    let other = all.items.into_iter().find(|cr| {
        cr.metadata.name.as_deref() == Some(key)
            || cr
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(labels::CONTROLLER_HASH))
                .is_some_and(|h| h == key)
    });
    match other {
        Some(cr) => {
            let owner = cr
                .owner_references()
                .iter()
                .find(|o| o.controller == Some(true))
                .map(|o| format!("{} {}", o.kind, o.name))
                .or_else(|| cr.labels().get(labels::MWRS_OWNER).cloned())
                .unwrap_or_else(|| "another object".into());
            CliError::not_found(format!(
                "revision {key} (controllerrevision {}) is not owned by mwrs/{} but by {owner}; \
                 refusing to copy it",
                cr.name_any(),
                m.name_any()
            ))
        }
        None => unknown(m, history, key),
    }
}

pub async fn run(hub: &HubClient, out: &Out, a: &UndoArgs) -> Result<Exit> {
    let done = undo(hub, out, a).await?;
    // A dry run with -o yaml|json prints the template undo would write: what a GitOps
    // user commits, so that the repository's self-heal does not undo the undo.
    if let Some(template) = done.template.as_ref().filter(|_| out.structured()) {
        out.print_structured(template)?;
        return Ok(Exit::Ok);
    }
    Ok(done.print(out))
}

/// Rewrites the template of mwrs/`a.name` from the revision `a` names (or the one a bare
/// undo goes back to); with `a.dry_run`, says what would change and writes nothing.
pub async fn undo(hub: &HubClient, out: &Out, a: &UndoArgs) -> Result<Done> {
    let m = hub.get(&a.name).await?;
    let generation = m
        .metadata
        .generation
        .ok_or_else(|| CliError::error("the MWRS read has no generation"))?;
    if let Some(shown) = a.generation
        && shown != generation
    {
        return Err(Guard::Spec(shown).changed(&a.name));
    }
    let history = hub.history(&m).await?;
    let spec = m.spec.manifest_work_template.to_value();
    let spec_digest = hash::digest(&spec);
    let status = m.status.clone().unwrap_or_default();
    let target = match &a.to_revision {
        Some(key) => match find(&history, key) {
            Some(r) => r,
            None => return Err(not_ours(hub, &m, &history, key).await),
        },
        None => revision::undo_target(&history, &status, spec_digest)
            .map_err(|why| no_target(&a.name, why))?,
    };
    if target.digest == spec_digest {
        return Ok(Done::said(already_there(&a.name, &status, target)));
    }
    refuse_invalid(&m, target)?;
    if a.dry_run {
        return dry_run(out, &a.name, (&spec, target), generation);
    }
    let guard = match &a.resource_version {
        Some(rv) => Guard::ResourceVersion(rv.clone()),
        None => Guard::Spec(generation),
    };
    // The write changes the template (guarded on the generation read), so the generation
    // the skip is honoured at is the next one.
    let skip = a.skip_plugins.then(|| {
        let at = format!("{}@{}", target.hash, generation + 1);
        skip_plugins_op(&m, &at)
    });
    write_template(hub, &a.name, &guard, &target.template, skip).await?;
    let mut done = Done::said(format!("mwrs/{} rolled back to {}", a.name, label(target)));
    if a.skip_plugins {
        done.notes.push(format!(
            "revision {} rolls out without asking its rollout plugins (annotation {})",
            target.hash,
            labels::SKIP_PLUGINS
        ));
    }
    Ok(done)
}

/// What undo says when the template is the target's already: an abort holding that
/// revision (a retry rolls it again), or nothing to do.
fn already_there(
    name: &str,
    status: &ManifestWorkReplicaSetStatus,
    target: &RevisionView,
) -> String {
    let held =
        status.aborted_time.is_some() && status.update_revision.as_deref() == Some(&target.hash);
    if held {
        format!(
            "revision {} is the update revision an abort holds: undo to it changes nothing. \
             To roll it out again run `kubectl mwrs rollout retry {name}`",
            target.revision
        )
    } else {
        format!("mwrs/{name} is already at {}: nothing to do", label(target))
    }
}

/// The dry run: the diff from the template `spec` to `target`'s, and the revision and
/// generation a confirmation sends back to write exactly that.
fn dry_run(
    out: &Out,
    name: &str,
    (spec, target): (&serde_json::Value, &RevisionView),
    generation: i64,
) -> Result<Done> {
    let diff = diff_text(
        out,
        spec,
        "spec.manifestWorkTemplate (now)",
        &target.template,
        &label(target),
    )?;
    Ok(Done {
        undo: Some(UndoPin {
            revision: target.revision,
            generation,
        }),
        template: Some(target.template.clone()),
        ..Done::said(format!(
            "{diff}dry run: mwrs/{name} would go to {}; nothing written",
            label(target)
        ))
    })
}

/// The JSON patch op that sets the skip-plugins annotation of `m` to `value`.
fn skip_plugins_op(m: &ManifestWorkReplicaSet, value: &str) -> serde_json::Value {
    match &m.metadata.annotations {
        Some(_) => {
            let key = labels::SKIP_PLUGINS.replace('~', "~0").replace('/', "~1");
            json!({"op": "add", "path": format!("/metadata/annotations/{key}"), "value": value})
        }
        None => json!({"op": "add", "path": "/metadata/annotations",
            "value": {labels::SKIP_PLUGINS: value}}),
    }
}

/// What must still hold when undo writes: without it, a change made since the read would
/// be overwritten.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Guard {
    /// The spec is unchanged (same generation). Status writes do not count: the controller
    /// reports progress all through a rollout, which is when an undo is wanted.
    Spec(i64),
    /// The whole object is unchanged (`--resource-version`), status included.
    ResourceVersion(String),
}

impl Guard {
    /// The JSON patch op that makes the API server refuse the write unless the guard holds.
    fn op(&self) -> serde_json::Value {
        match self {
            Guard::Spec(generation) => {
                json!({"op": "test", "path": "/metadata/generation", "value": generation})
            }
            Guard::ResourceVersion(rv) => {
                json!({"op": "replace", "path": "/metadata/resourceVersion", "value": rv})
            }
        }
    }

    fn changed(&self, name: &str) -> CliError {
        let what = match self {
            Guard::Spec(generation) => {
                format!("its spec changed since it was read (generation {generation})")
            }
            Guard::ResourceVersion(rv) => {
                format!("it changed since it was read (resourceVersion {rv})")
            }
        };
        CliError::new(
            Exit::Conflict,
            format!(
                "mwrs/{name}: {what}; nothing was written. Check the change and run the \
                 command again"
            ),
        )
    }
}

/// Replaces `spec.manifestWorkTemplate` of mwrs/`name` with `template` (and applies
/// `also`, a JSON patch op) in one patch that the API server applies only while `guard`
/// holds: nothing is written otherwise.
pub async fn write_template(
    hub: &HubClient,
    name: &str,
    guard: &Guard,
    template: &serde_json::Value,
    also: Option<serde_json::Value>,
) -> Result<()> {
    let mut ops = vec![
        guard.op(),
        json!({"op": "replace", "path": "/spec/manifestWorkTemplate", "value": template}),
    ];
    ops.extend(also);
    let ops = serde_json::Value::Array(ops);
    let patch: json_patch::Patch = serde_json::from_value(ops)
        .map_err(|e| CliError::error(format!("cannot build the patch: {e}")))?;
    let pp = PatchParams {
        field_manager: Some("kubectl-mwrs".into()),
        ..Default::default()
    };
    match hub
        .mwrs_api()
        .patch(name, &pp, &Patch::Json::<()>(patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Err(guard.changed(name)),
        // A failed `test` op and a template the schema refuses are both 422: the
        // generation now on the hub says which.
        Err(kube::Error::Api(s)) if s.code == 422 && spec_moved(hub, name, guard).await => {
            Err(guard.changed(name))
        }
        Err(e) => Err(CliError::kube(&format!("writing mwrs/{name}"), e)),
    }
}

/// Whether the spec of mwrs/`name` is no longer at the generation `guard` names.
async fn spec_moved(hub: &HubClient, name: &str, guard: &Guard) -> bool {
    let Guard::Spec(read) = guard else {
        return false;
    };
    match hub.mwrs_api().get(name).await {
        Ok(now) => now.metadata.generation != Some(*read),
        // Deleted meanwhile: not the object read either.
        Err(kube::Error::Api(s)) => s.code == 404,
        // Cannot tell: the write's own error is reported.
        Err(_) => false,
    }
}
