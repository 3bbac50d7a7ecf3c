//! The revisions: each stored before any ManifestWork names it, and kept in step with the
//! history the plan keeps.

use super::*;

/// How the revision writes went, for what follows them.
pub(super) struct StoredRevisions {
    pub(super) create_failed: bool,
}

/// Revisions, in plan order (few; creations first in the planner's order).
pub(super) async fn write_revisions(
    on: &On<'_>,
    revisions: &[RevisionChange],
    tally: &mut Tally,
) -> StoredRevisions {
    let mut stored = StoredRevisions {
        create_failed: false,
    };
    // The version each revision is at after this pass's own writes to it: a later change
    // to the same revision (a mark after a renumber, or of a revision just created) is
    // guarded by it instead of the version read.
    let mut written: BTreeMap<&str, String> = BTreeMap::new();
    for change in revisions {
        let name = change.name();
        let version = written
            .get(name)
            .map(String::as_str)
            .or_else(|| change.resource_version());
        let r = write_revision(on.ctx, on.mwrs, &on.ns, change, version).await;
        let r = r.map(|now| {
            if let Some(v) = now {
                written.insert(name, v);
            }
        });
        if let (Err(e), RevisionChange::Create { name, .. }) = (&r, change) {
            stored.create_failed = true;
            if matches!(e, Error::RevisionNameTaken { .. }) {
                // Data for the next pass: the planner names the revision past it.
                on.ctx.mark_revision_taken(&on.ns, name);
                tracing::warn!(mwrs = %on.key(), revision = %name,
                    "revision name taken by another object; the next pass names it anew");
            }
        }
        tally.record(r);
    }
    stored
}

/// Carries out `change`, guarded by `version` (the API server refuses it with 409 once
/// the revision is at another version); returns the version the write produced.
pub(super) async fn write_revision(
    ctx: &Context,
    mwrs: &ManifestWorkReplicaSet,
    ns: &str,
    change: &RevisionChange,
    version: Option<&str>,
) -> Result<Option<String>> {
    let api: Api<ControllerRevision> = Api::namespaced(ctx.client.clone(), ns);
    ctx.may_write("write", "controllerrevision")?;
    let (verb, r) = match change {
        RevisionChange::Create { .. } => return create_revision(ctx, mwrs, &api, change).await,
        RevisionChange::Renumber { name, revision, .. } => {
            let p = patch::renumber(*revision, version).map_err(|source| Error::Serialize {
                what: "renumber patch",
                source,
            })?;
            let r = api
                .patch(name, &patch_params(), &Patch::Json::<()>(p))
                .await;
            ("renumber", r.map(|cr| cr.resource_version()))
        }
        RevisionChange::Mark {
            name, annotations, ..
        } => {
            let body = patch::annotate(annotations, version);
            let r = api.patch(name, &patch_params(), &Patch::Merge(&body)).await;
            ("mark", r.map(|cr| cr.resource_version()))
        }
        RevisionChange::Delete { name, .. } => {
            let r = match api.delete(name, &guarded_delete(version)).await {
                Err(e) if is_status(&e, 404) => Ok(None),
                other => other.map(|_| None),
            };
            ("delete", r)
        }
    };
    let r = r.map_err(|e| Error::kube(format!("{verb} revision {ns}/{}", change.name()), e));
    ctx.metrics.write(KIND_REVISION, verb, result_label(&r));
    r
}

/// Stores a new revision. Its name already taken is fine when the object is ours with
/// this very template; anything else is a collision the next pass resolves with a bumped
/// collisionCount.
pub(super) async fn create_revision(
    ctx: &Context,
    mwrs: &ManifestWorkReplicaSet,
    api: &Api<ControllerRevision>,
    change: &RevisionChange,
) -> Result<Option<String>> {
    let RevisionChange::Create {
        name,
        hash: _,
        revision,
        template,
        labels,
        annotations,
    } = change
    else {
        return Ok(None);
    };
    let ns = mwrs.namespace().unwrap_or_default();
    let mut owner = mwrs
        .controller_owner_ref(&())
        .ok_or(Error::MissingField("uid"))?;
    // Foreground deletion of the MWRS waits for its revisions too.
    owner.block_owner_deletion = Some(true);
    let cr = ControllerRevision {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(ns.clone()),
            labels: Some(labels.clone()),
            annotations: Some(annotations.clone()),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        data: Some(RawExtension(template.clone())),
        revision: *revision,
    };
    let r = match api.create(&post_params(), &cr).await {
        Ok(created) => Ok(created.resource_version()),
        Err(e) if is_status(&e, 409) => {
            ctx.metrics.write(KIND_REVISION, "create", "exists");
            // Ours with this very content (a create that landed, answered too late): done.
            match holder(api, mwrs, name, &format!("revision {ns}/{name}")).await? {
                Holder::Ours(existing)
                    if existing
                        .data
                        .as_ref()
                        .is_some_and(|d| hash::digest(&d.0) == hash::digest(template)) =>
                {
                    return Ok(existing.resource_version());
                }
                _ => Err(Error::RevisionNameTaken {
                    what: format!("{ns}/{name}"),
                }),
            }
        }
        Err(e) => Err(Error::kube(format!("create revision {ns}/{name}"), e)),
    };
    ctx.metrics.write(KIND_REVISION, "create", result_label(&r));
    r
}
