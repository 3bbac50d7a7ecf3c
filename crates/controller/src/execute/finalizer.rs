//! The finalizer: on before anything is created, off only after every delete it guards.

use super::*;

/// Adds the finalizer; the resourceVersion of the result guards the status write (the
/// status was computed from the object as read, and the patch changed only finalizers).
pub(super) async fn add_finalizer(on: &On<'_>) -> Result<Option<String>> {
    on.ctx.may_write("patch", "finalizers")?;
    let p = patch::finalizer_add(on.mwrs.meta().finalizers.as_ref(), labels::MWRS_FINALIZER)
        .map_err(|source| Error::Serialize {
            what: "finalizer patch",
            source,
        })?;
    let r = on
        .api
        .patch(&on.name, &patch_params(), &Patch::Json::<()>(p))
        .await
        .map_err(|e| finalizer_error(&on.name, e));
    on.ctx.metrics.write("finalizer", "add", result_label(&r));
    Ok(r?.resource_version())
}

/// Removes the finalizer, once every delete it guards succeeded.
pub(super) async fn remove_finalizer(on: &On<'_>, tally: &mut Tally) -> Result<()> {
    let removal =
        patch::finalizer_remove(on.mwrs.meta().finalizers.as_ref(), labels::MWRS_FINALIZER)
            .map_err(|source| Error::Serialize {
                what: "finalizer patch",
                source,
            })?;
    let Some(p) = removal else { return Ok(()) };
    on.ctx.may_write("patch", "finalizers")?;
    let r = on
        .api
        .patch(&on.name, &patch_params(), &Patch::Json::<()>(p))
        .await
        .map(|_| ())
        .or_else(|e| if is_status(&e, 404) { Ok(()) } else { Err(e) })
        .map_err(|e| finalizer_error(&on.name, e));
    on.ctx
        .metrics
        .write("finalizer", "remove", result_label(&r));
    tally.record(r);
    Ok(())
}

pub(super) fn finalizer_error(name: &str, e: kube::Error) -> Error {
    // A failed `test` op (the list changed since it was read) is a lost race.
    if is_status(&e, 422) {
        return Error::Conflict {
            what: format!("finalizers of {name}"),
        };
    }
    Error::kube(format!("finalizers of {name}"), e)
}
