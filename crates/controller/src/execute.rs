//! Carries out one plan: finalizer, revisions, ManifestWorks (bounded concurrency),
//! status (merge patch guarded by the resourceVersion read), the finalizer's removal and
//! Events. The order matters:
//! - the finalizer goes on before anything is created, so nothing can be orphaned;
//! - a revision is stored before any ManifestWork names it, so a restart finds it;
//! - status is written whatever happened to the writes (it describes what was observed);
//! - the finalizer comes off only after every delete it guards succeeded.

use std::collections::BTreeMap;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Resource, ResourceExt};
use mwrs_api::labels;
use mwrs_api::mwrs::{ManifestWorkReplicaSet, ManifestWorkReplicaSetStatus};
use mwrs_api::work::{ManifestWork, ManifestWorkTemplate};
use mwrs_engine::hash;
use mwrs_engine::owner::OwnerKey;
use mwrs_engine::plan::{
    FinalizerAction, Plan, PlannedEvent, RevisionChange, WorkApply, WorkChange,
};
use mwrs_engine::stored_work::StoredWork;
use serde_json::Value;

use crate::announce::publish;
use crate::context::Context;
use crate::context::{REFUSED_RECHECK, TAKEN_RECHECK};
use crate::error::{Error, Result, is_status};
use crate::events::EventType;
use crate::metrics::{AbortLabels, Metrics};
use crate::patch;
use crate::work_cache::PatchBase;
use mwrs_api::mwrs::AbortRecord;

const KIND_WORK: &str = "manifestwork";
const KIND_REVISION: &str = "controllerrevision";

/// What happened to a plan.
#[derive(Debug, Default)]
pub struct Executed {
    pub writes: usize,
    /// resourceVersion our status write produced, when there was one.
    pub status_version: Option<String>,
}

pub(crate) fn patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(crate::FIELD_MANAGER.to_string()),
        ..Default::default()
    }
}

fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(crate::FIELD_MANAGER.to_string()),
        ..Default::default()
    }
}

fn result_label<T>(r: &Result<T>) -> &'static str {
    match r {
        Ok(_) => "ok",
        Err(Error::Conflict { .. }) => "conflict",
        Err(_) => "error",
    }
}

/// Runs `plan` for `mwrs`; fails with the first failure after doing everything that
/// could still be done.
pub async fn execute(
    ctx: &Context,
    mwrs: &ManifestWorkReplicaSet,
    plan: &Plan,
) -> Result<Executed> {
    // Every field by name: one the executor does not carry out says so here.
    let Plan {
        finalizer,
        works,
        revisions,
        status,
        events,
        recheck: _,
        invalid: _,
        clusters: _,
        // Made after the writes, by the reconciler (crate::plugins).
        plugin_calls: _,
    } = plan;
    let on = On::new(ctx, mwrs)?;
    let mut tally = Tally::default();
    let mut status_version = mwrs.resource_version();
    if *finalizer == FinalizerAction::Add {
        status_version = add_finalizer(&on).await?;
        tally.writes += 1;
    }
    let stored = write_revisions(&on, revisions, &mut tally).await;
    // If a revision could not be stored, write no ManifestWork that could name it: the
    // next pass resolves the revision again (e.g. with a bumped collision count).
    if !stored.create_failed {
        write_works(&on, works, &mut tally).await;
    }
    // The planned status names the update revision: not written when it could not be
    // stored (the next pass names it anew, past a name another object holds).
    let new_status = status.as_ref().filter(|_| !stored.create_failed);
    let status_version = write_status(&on, new_status, status_version, &mut tally).await?;
    if *finalizer == FinalizerAction::Remove && tally.failures.is_empty() {
        remove_finalizer(&on, &mut tally).await?;
    }
    let old_abort = mwrs.status.as_ref().and_then(|s| s.last_abort.as_ref());
    count_abort(&ctx.metrics, old_abort, status.as_ref());
    publish_transitions(&on, events).await;
    tally.into_result(status_version)
}

/// The MWRS a plan is carried out for.
struct On<'a> {
    ctx: &'a Context,
    mwrs: &'a ManifestWorkReplicaSet,
    ns: String,
    name: String,
    api: Api<ManifestWorkReplicaSet>,
}

impl<'a> On<'a> {
    fn new(ctx: &'a Context, mwrs: &'a ManifestWorkReplicaSet) -> Result<Self> {
        let ns = mwrs.namespace().ok_or(Error::MissingField("namespace"))?;
        Ok(Self {
            api: Api::namespaced(ctx.client.clone(), &ns),
            ctx,
            mwrs,
            name: mwrs.name_any(),
            ns,
        })
    }

    fn key(&self) -> String {
        format!("{}/{}", self.ns, self.name)
    }
}

/// Writes made and failed so far.
#[derive(Default)]
struct Tally {
    writes: usize,
    total: usize,
    failures: Vec<Error>,
}

impl Tally {
    fn record(&mut self, r: Result<()>) {
        self.total += 1;
        match r {
            Ok(()) => self.writes += 1,
            Err(e) => self.failures.push(e),
        }
    }

    /// Ok with what was done, or the first failure (with the count when several).
    fn into_result(mut self, status_version: Option<String>) -> Result<Executed> {
        if self.failures.is_empty() {
            return Ok(Executed {
                writes: self.writes,
                status_version,
            });
        }
        let failed = self.failures.len();
        let first = self.failures.remove(0);
        if failed == 1 {
            return Err(first);
        }
        Err(Error::Writes {
            failed,
            total: self.total.max(failed),
            first: Box::new(first),
        })
    }
}

/// Adds the finalizer; the resourceVersion of the result guards the status write (the
/// status was computed from the object as read, and the patch changed only finalizers).
async fn add_finalizer(on: &On<'_>) -> Result<Option<String>> {
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

/// How the revision writes went, for what follows them.
struct StoredRevisions {
    create_failed: bool,
}

/// Revisions, in plan order (few; creations first in the planner's order).
async fn write_revisions(
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

/// ManifestWork writes with bounded concurrency: creates, updates and relabels, then
/// deletes.
async fn write_works(on: &On<'_>, works: &[WorkChange], tally: &mut Tally) {
    let (deletes, others): (Vec<&WorkChange>, Vec<&WorkChange>) = works
        .iter()
        .partition(|c| matches!(c, WorkChange::Delete { .. }));
    for batch in [others, deletes] {
        write_bounded(on, batch, tally).await;
    }
}

/// Writes `batch` with at most `write_concurrency` writes of this pass in flight, each
/// holding one of the controller's write permits while it is sent. Each write's future
/// (several KB: it holds the request and the response) exists only while it runs: built
/// for a whole fan-out of 3,000 ManifestWorks up front, they were most of a pass's memory,
/// times every MWRS changing at once.
async fn write_bounded(on: &On<'_>, batch: Vec<&WorkChange>, tally: &mut Tally) {
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

/// Writes `new` when it differs from the status read, guarded by `version` (the version
/// it was computed from); returns the version the write produced, if any.
async fn write_status(
    on: &On<'_>,
    new: Option<&ManifestWorkReplicaSetStatus>,
    version: Option<String>,
    tally: &mut Tally,
) -> Result<Option<String>> {
    let Some(new) = new else { return Ok(None) };
    let ser = |v: &ManifestWorkReplicaSetStatus| {
        serde_json::to_value(v).map_err(|source| Error::Serialize {
            what: "status",
            source,
        })
    };
    let old = ser(&on.mwrs.status.clone().unwrap_or_default())?;
    let Some(body) = patch::status(&old, &ser(new)?, version.as_deref()) else {
        return Ok(None);
    };
    on.ctx.may_write("patch", "status")?;
    let r = on
        .api
        .patch_status(&on.name, &patch_params(), &Patch::Merge(&body))
        .await
        .map_err(|e| Error::kube(format!("status of {}", on.key()), e));
    on.ctx.metrics.write("status", "patch", result_label(&r));
    match r {
        Ok(obj) => {
            tally.record(Ok(()));
            Ok(obj.resource_version())
        }
        Err(e) => {
            tally.record(Err(e));
            Ok(None)
        }
    }
}

/// Removes the finalizer, once every delete it guards succeeded.
async fn remove_finalizer(on: &On<'_>, tally: &mut Tally) -> Result<()> {
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

/// Every transition as an Event and a log line (info, or warn for warnings): the log
/// tells the rollout's story even after its Events expire.
async fn publish_transitions(on: &On<'_>, events: &[PlannedEvent]) {
    let key = on.key();
    for t in events {
        let type_ = if t.warning {
            tracing::warn!(mwrs = %key, reason = %t.reason, "{}", t.message);
            EventType::Warning
        } else {
            tracing::info!(mwrs = %key, reason = %t.reason, "{}", t.message);
            EventType::Normal
        };
        publish(on.ctx, on.mwrs, type_, &t.reason, &t.message).await;
    }
}

fn finalizer_error(name: &str, e: kube::Error) -> Error {
    // A failed `test` op (the list changed since it was read) is a lost race.
    if is_status(&e, 422) {
        return Error::Conflict {
            what: format!("finalizers of {name}"),
        };
    }
    Error::kube(format!("finalizers of {name}"), e)
}

/// Counts an abort when the planned status records a new one (a typed value, not an
/// event reason).
fn count_abort(
    metrics: &Metrics,
    old: Option<&AbortRecord>,
    planned: Option<&ManifestWorkReplicaSetStatus>,
) {
    let Some(new) = planned.and_then(|s| s.last_abort.as_ref()) else {
        return;
    };
    if old == Some(new) {
        return;
    }
    let outcome = if new.reverted_to.is_some() {
        "reverted"
    } else {
        "stopped"
    };
    metrics
        .aborts
        .get_or_create(&AbortLabels {
            trigger: new.trigger.clone(),
            outcome: outcome.into(),
        })
        .inc();
}

/// The hub's message when `e` is a refusal that trying again soon will not change: the
/// request was invalid or forbidden (an admission webhook, RBAC, a quota), the cluster
/// namespace does not exist, or the object is larger than the API server (413) or etcd
/// (a 500 saying the request is too large) takes. Conflicts, throttling and other server
/// errors are not refusals.
fn refusal(e: &Error) -> Option<&str> {
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
async fn refused(
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

/// Carries out `change`, guarded by `version` (the API server refuses it with 409 once
/// the revision is at another version); returns the version the write produced.
async fn write_revision(
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

/// A delete of the object at `version` only (409 otherwise); unguarded when the version
/// is not known.
fn guarded_delete(version: Option<&str>) -> DeleteParams {
    DeleteParams {
        preconditions: version.map(|v| Preconditions {
            resource_version: Some(v.to_string()),
            uid: None,
        }),
        ..DeleteParams::default()
    }
}

/// Who holds a name a create found taken (409).
enum Holder<K> {
    /// This MWRS: the create landed before, or the cache was behind the hub.
    Ours(K),
    /// Another owner, whose object is left untouched.
    Other,
}

/// Reads the object `name` of `api` that a create of this MWRS's found there, and says
/// whose it is: the one rule both creates (revisions, ManifestWorks) accept an existing
/// object by. `what` names it in errors.
async fn holder<K>(
    api: &Api<K>,
    mwrs: &ManifestWorkReplicaSet,
    name: &str,
    what: &str,
) -> Result<Holder<K>>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let existing = api
        .get(name)
        .await
        .map_err(|e| Error::kube(format!("read {what}"), e))?;
    let owner = OwnerKey::new(mwrs.namespace().unwrap_or_default(), mwrs.name_any());
    let empty = Default::default();
    let meta = existing.meta();
    let ours = owner.owns(
        meta.labels.as_ref().unwrap_or(&empty),
        meta.annotations.as_ref().unwrap_or(&empty),
    );
    Ok(if ours {
        Holder::Ours(existing)
    } else {
        Holder::Other
    })
}

/// Stores a new revision. Its name already taken is fine when the object is ours with
/// this very template; anything else is a collision the next pass resolves with a bumped
/// collisionCount.
async fn create_revision(
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

async fn write_work(
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
async fn patch_base(ctx: &Context, cluster: &str, name: &str) -> Result<PatchBase> {
    if let Some(base) = ctx.stores.work_patch_base(cluster, name) {
        return Ok(base);
    }
    let meta = get_work(ctx, cluster, name).await?.metadata;
    Ok(PatchBase {
        labels: meta.labels,
        annotations: meta.annotations,
    })
}

async fn get_work(ctx: &Context, cluster: &str, name: &str) -> Result<ManifestWork> {
    Api::<ManifestWork>::namespaced(ctx.client.clone(), cluster)
        .get(name)
        .await
        .map_err(|e| Error::kube(format!("read work {cluster}/{name}"), e))
}

async fn update_work(
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
fn remember(ctx: &Context, a: &WorkApply, answer: &StoredWork) {
    let now = jiff::Timestamp::now();
    ctx.stores.record_answer(answer, &a.revision, now);
}

async fn create_work(
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
                // Remembered, so the next passes count the cluster as failed and send
                // nothing there; reported once per discovery.
                let why = format!(
                    "ManifestWork {}/{} exists and belongs to another owner; it is left \
                     untouched",
                    a.cluster, a.name
                );
                if !ctx.mark_blocked(&a.cluster, &a.name, why, TAKEN_RECHECK) {
                    return Ok(());
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeMap;

    fn api_error(code: u16, message: &str) -> Error {
        Error::Kube {
            what: "update ManifestWork".into(),
            source: kube::Error::Api(Box::new(kube::core::Status {
                code,
                message: message.into(),
                ..kube::core::Status::default()
            })),
        }
    }

    /// Security review P1: a ManifestWork too large for the API server or etcd is
    /// refused for good (the cluster reported, the write not retried in a loop); a
    /// throttled or failing server is not.
    #[test]
    fn an_object_too_large_is_a_refusal() {
        let too_large = "etcdserver: request is too large";
        assert!(refusal(&api_error(413, "Request entity too large")).is_some());
        assert_eq!(refusal(&api_error(500, too_large)), Some(too_large));
        assert!(refusal(&api_error(500, "etcd leader changed")).is_none());
        assert!(refusal(&api_error(429, "too many requests")).is_none());
        assert!(refusal(&api_error(409, "conflict")).is_none());
    }

    fn with_abort(record: Option<AbortRecord>) -> ManifestWorkReplicaSetStatus {
        ManifestWorkReplicaSetStatus {
            last_abort: record,
            ..Default::default()
        }
    }

    /// Aborts are counted once each, by trigger and outcome, from the plan's record.
    #[test]
    fn a_new_abort_record_counts_once_with_its_trigger() {
        let record = |trigger: &str, to: Option<&str>| AbortRecord {
            trigger: trigger.into(),
            time: mwrs_api::Time(jiff::Timestamp::UNIX_EPOCH),
            revision: "b".into(),
            reverted_to: to.map(str::to_string),
            timed_out_clusters: vec![],
            timed_out_count: 0,
            failed_clusters: vec![],
            failed_count: 0,
        };
        let m = Metrics::new();
        let deadline = record("ProgressDeadlineExceeded", Some("a"));
        count_abort(&m, None, Some(&with_abort(Some(deadline.clone()))));
        count_abort(
            &m,
            Some(&deadline),
            Some(&with_abort(Some(deadline.clone()))),
        );
        count_abort(&m, None, Some(&with_abort(Some(record("Requested", None)))));
        count_abort(&m, None, Some(&with_abort(None)));
        let text = m.encode();
        assert!(
            text.contains(
                "mwrs_controller_aborts_total{trigger=\"ProgressDeadlineExceeded\",outcome=\"reverted\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "mwrs_controller_aborts_total{trigger=\"Requested\",outcome=\"stopped\"} 1"
            ),
            "{text}"
        );
    }

    /// An upstream-written ManifestWork has no annotations; the relabel patch is built
    /// against the stored form and must apply on the server's object (a patch that adds
    /// keys under a missing `/metadata/annotations` is refused with 422).
    #[test]
    fn relabel_of_a_work_without_annotations_applies_on_the_server_form() {
        let spec = json!({"workload": {"manifests": []}});
        let mut mw = ManifestWork::new(
            "app-x7k2p",
            ManifestWorkTemplate::from_value(spec).expect("object"),
        );
        mw.metadata.namespace = Some("c1".into());
        mw.metadata.labels = Some(BTreeMap::from([(
            labels::MWRS_OWNER.to_string(),
            "ns.app".to_string(),
        )]));
        let on_server = serde_json::to_value(&mw).expect("json");
        let stored: mwrs_engine::stored_work::StoredWork =
            serde_json::from_value(on_server.clone()).expect("decodes");
        let cache = crate::work_cache::WorkCache::new();
        cache.apply(
            &kube::runtime::watcher::Event::Apply(stored),
            jiff::Timestamp::UNIX_EPOCH,
        );
        let base = cache.patch_base("c1", "app-x7k2p").expect("cached");
        assert_eq!(base.annotations, None);

        let ann = BTreeMap::from([("o/a".to_string(), "ns/app".to_string())]);
        let labels = BTreeMap::from([("h".to_string(), "x".to_string())]);
        let p = patch::relabel(&base, (&labels, &[]), &ann, None)
            .expect("patch")
            .expect("changes");
        let mut doc = on_server;
        json_patch::patch(&mut doc, &p).expect("applies to the server's object");
        assert_eq!(doc["metadata"]["annotations"], json!({"o/a": "ns/app"}));
        assert_eq!(
            doc["metadata"]["labels"],
            json!({labels::MWRS_OWNER: "ns.app", "h": "x"})
        );
    }
}
