//! The ManifestWorks: creates, updates, relabels and guarded deletes, at most
//! `write_concurrency` at once, and the writes the hub refused, recorded and reported.

use super::*;

/// ManifestWork writes with bounded concurrency: creates, updates and relabels, then
/// deletes.
pub(super) async fn write_works(on: &On<'_>, works: &[WorkChange], tally: &mut Tally) {
    let (deletes, others): (Vec<&WorkChange>, Vec<&WorkChange>) = works
        .iter()
        .partition(|c| matches!(c, WorkChange::Delete { .. }));
    for batch in [others, deletes] {
        write_bounded(on, batch, tally).await;
    }
}

/// Writes `batch` with at most `write_concurrency` writes of this pass in flight, each
/// holding one of the controller's write permits while it is sent. Each write's future
/// holds its request and its response, so it is built only when it runs: a pass's memory
/// grows with `write_concurrency`, never with the size of its fan-out.
pub(super) async fn write_bounded(on: &On<'_>, batch: Vec<&WorkChange>, tally: &mut Tally) {
    let n = on.ctx.config.write_concurrency.max(1);
    let mut waiting = batch.into_iter();
    let mut running = futures::stream::FuturesUnordered::new();
    loop {
        while running.len() < n {
            let Some(change) = waiting.next() else { break };
            running.push(async move {
                // Never closed: an error would only mean no limit.
                let _permit = on.ctx.write_permits.acquire().await.ok();
                write_work(on.ctx, on.mwrs, change).await
            });
        }
        match running.next().await {
            Some(r) => tally.record(r),
            None => break,
        }
    }
}

/// The hub's message when `e` is a refusal that trying again soon will not change: the
/// request was invalid or forbidden (an admission webhook, RBAC, a quota), the cluster
/// namespace does not exist, or the object is larger than the API server (413) or etcd
/// (a 500 saying the request is too large) takes. Conflicts, throttling and other server
/// errors are not refusals.
pub(super) fn refusal(e: &Error) -> Option<&str> {
    match e {
        Error::Kube {
            source: kube::Error::Api(s),
            ..
        } if matches!(s.code, 400 | 403 | 404 | 413 | 422)
            || (s.code == 500 && s.message.contains("request is too large")) =>
        {
            Some(&s.message)
        }
        _ => None,
    }
}

/// A write of `a` the hub refused: remembered so the next passes report the cluster as
/// failed with the hub's words and send nothing there for [`REFUSED_RECHECK`]; reported
/// once per discovery.
pub(super) async fn refused(
    ctx: &Context,
    mwrs: &ManifestWorkReplicaSet,
    a: &WorkApply,
    e: &Error,
) -> Result<()> {
    let message = refusal(e).unwrap_or_default();
    let why = format!("the hub refused the ManifestWork write: {message}");
    if ctx.mark_blocked(&a.cluster, &a.name, why.clone(), REFUSED_RECHECK) {
        ctx.metrics.refused_writes.inc();
        tracing::warn!(cluster = %a.cluster, work = %a.name, error = %message, "ManifestWork write refused");
        publish(
            ctx,
            mwrs,
            EventType::Warning,
            "ManifestWorkWriteRefused",
            &format!("cluster {}: {why}", a.cluster),
        )
        .await;
    }
    Ok(())
}

pub(super) async fn write_work(
    ctx: &Context,
    mwrs: &ManifestWorkReplicaSet,
    change: &WorkChange,
) -> Result<()> {
    ctx.may_write("write", "manifestwork")?;
    match change {
        WorkChange::Apply(a) => {
            // A rollout plugin's spec replaces the template (MutateManifestWork).
            let template = a.written_spec();
            let r = if a.create {
                create_work(ctx, mwrs, a, template).await
            } else {
                let base = patch_base(ctx, &a.cluster, &a.name).await?;
                update_work(ctx, &base, a, template, a.resource_version.as_deref()).await
            };
            match r {
                Err(e) if refusal(&e).is_some() => refused(ctx, mwrs, a, &e).await,
                other => other,
            }
        }
        WorkChange::Relabel {
            cluster,
            name,
            labels,
            dropped_labels,
            annotations,
            resource_version,
        } => {
            let base = patch_base(ctx, cluster, name).await?;
            let labels = (labels, dropped_labels.as_slice());
            let p = patch::relabel(&base, labels, annotations, resource_version.as_deref())
                .map_err(|source| Error::Serialize {
                    what: "relabel patch",
                    source,
                })?;
            let Some(p) = p else { return Ok(()) };
            let api: Api<ManifestWork> = Api::namespaced(ctx.client.clone(), cluster);
            let r = api
                .patch(name, &patch_params(), &Patch::Json::<()>(p))
                .await
                .map(|_| ())
                .map_err(|e| Error::kube(format!("relabel work {cluster}/{name}"), e));
            ctx.metrics.write(KIND_WORK, "relabel", result_label(&r));
            r
        }
        WorkChange::Delete {
            cluster,
            name,
            resource_version,
        } => {
            let api: Api<ManifestWork> = Api::namespaced(ctx.client.clone(), cluster);
            let params = guarded_delete(resource_version.as_deref());
            let r = match api.delete(name, &params).await {
                Ok(_) => Ok(()),
                Err(e) if is_status(&e, 404) => Ok(()),
                Err(e) => Err(Error::kube(format!("delete work {cluster}/{name}"), e)),
            };
            ctx.metrics.write(KIND_WORK, "delete", result_label(&r));
            r
        }
    }
}

/// What a patch of ManifestWork `name` in `cluster` builds on: the cache's, else the
/// object read from the API.
pub(super) async fn patch_base(ctx: &Context, cluster: &str, name: &str) -> Result<PatchBase> {
    if let Some(base) = ctx.stores.work_patch_base(cluster, name) {
        return Ok(base);
    }
    let meta = get_work(ctx, cluster, name).await?.metadata;
    Ok(PatchBase {
        labels: meta.labels,
        annotations: meta.annotations,
    })
}

pub(super) async fn get_work(ctx: &Context, cluster: &str, name: &str) -> Result<ManifestWork> {
    Api::<ManifestWork>::namespaced(ctx.client.clone(), cluster)
        .get(name)
        .await
        .map_err(|e| Error::kube(format!("read work {cluster}/{name}"), e))
}

pub(super) async fn update_work(
    ctx: &Context,
    base: &PatchBase,
    a: &WorkApply,
    template: &Value,
    resource_version: Option<&str>,
) -> Result<()> {
    let labels = (a.labels.as_ref(), a.dropped_labels.as_slice());
    let p = patch::work_update(base, template, labels, &a.annotations, resource_version).map_err(
        |source| Error::Serialize {
            what: "work patch",
            source,
        },
    )?;
    // The answer is decoded as the cache holds it: no manifests, no resourceStatus.
    let api: Api<StoredWork> = Api::namespaced(ctx.client.clone(), &a.cluster);
    let r = api
        .patch(&a.name, &patch_params(), &Patch::Json::<()>(p))
        .await
        .map(|answer| remember(ctx, a, &answer))
        .map_err(|e| {
            if let Some(version) = resource_version.filter(|_| is_status(&e, 409)) {
                ctx.stores.record_refused_work(&a.cluster, &a.name, version);
            }
            Error::kube(format!("update work {}/{}", a.cluster, a.name), e)
        });
    ctx.metrics.write(KIND_WORK, "update", result_label(&r));
    r
}

/// Records the write and the server's answer: passes see the ManifestWork as answered
/// from now on, before the watch brings it, and know the generation at which its spec is
/// the revision's template as the server stores it.
pub(super) fn remember(ctx: &Context, a: &WorkApply, answer: &StoredWork) {
    let now = jiff::Timestamp::now();
    ctx.stores.record_answer(answer, &a.revision, now);
}

pub(super) async fn create_work(
    ctx: &Context,
    mwrs: &ManifestWorkReplicaSet,
    a: &WorkApply,
    template: &Value,
) -> Result<()> {
    let spec =
        ManifestWorkTemplate::from_value(template.clone()).map_err(|source| Error::Serialize {
            what: "work template",
            source,
        })?;
    let mut mw = ManifestWork::new(&a.name, spec);
    mw.metadata.namespace = Some(a.cluster.clone());
    mw.metadata.labels = Some((*a.labels).clone());
    mw.metadata.annotations = Some((*a.annotations).clone());
    let api: Api<ManifestWork> = Api::namespaced(ctx.client.clone(), &a.cluster);
    let body = serde_json::to_vec(&mw).map_err(|source| Error::Serialize {
        what: "ManifestWork",
        source,
    })?;
    // Sent whole, and the answer decoded as the cache holds it: no manifests, no
    // resourceStatus (as an update's answer is).
    let created = match kube::core::Request::new(api.resource_url()).create(&post_params(), body) {
        Ok(request) => ctx.client.request::<StoredWork>(request).await,
        Err(e) => Err(kube::Error::BuildRequest(e)),
    };
    match created {
        Ok(answer) => {
            ctx.metrics.write(KIND_WORK, "create", "ok");
            remember(ctx, a, &answer);
            Ok(())
        }
        Err(e) if is_status(&e, 409) => {
            ctx.metrics.write(KIND_WORK, "create", "exists");
            // The deterministic name is taken: ours (a stale cache) or someone else's.
            let what = format!("work {}/{}", a.cluster, a.name);
            if let Holder::Other = holder(&api, mwrs, &a.name, &what).await? {
                name_taken(ctx, mwrs, a).await;
                return Ok(());
            }
            // Ours, and the cache did not show it yet: what to write into it is the
            // planner's call, on the next pass, which reads it from a fresh cache.
            Err(Error::Conflict {
                what: format!(
                    "work {}/{} (exists; the cache was behind)",
                    a.cluster, a.name
                ),
            })
        }
        Err(e) => {
            ctx.metrics.write(KIND_WORK, "create", "error");
            Err(Error::kube(
                format!("create work {}/{}", a.cluster, a.name),
                e,
            ))
        }
    }
}

/// ManifestWork `a` exists and belongs to another owner: remembered, so the next passes
/// count the cluster as failed and send nothing there; reported once per discovery.
async fn name_taken(ctx: &Context, mwrs: &ManifestWorkReplicaSet, a: &WorkApply) {
    let why = format!(
        "ManifestWork {}/{} exists and belongs to another owner; it is left untouched",
        a.cluster, a.name
    );
    if !ctx.mark_blocked(&a.cluster, &a.name, why, TAKEN_RECHECK) {
        return;
    }
    ctx.metrics.foreign_works.inc();
    tracing::warn!(cluster = %a.cluster, work = %a.name, "ManifestWork name taken by another owner");
    publish(
        ctx,
        mwrs,
        EventType::Warning,
        "ManifestWorkNameTaken",
        &format!(
            "ManifestWork {}/{} exists and is not owned by this ManifestWorkReplicaSet; \
             it is left untouched and cluster {} counts as failed",
            a.cluster, a.name, a.cluster
        ),
    )
    .await;
}
