//! Carries out one plan: finalizer, revisions, ManifestWorks (bounded concurrency),
//! status (merge patch guarded by the resourceVersion read), the finalizer's removal and
//! Events. The order matters:
//! - the finalizer goes on before anything is created, so nothing can be orphaned;
//! - a revision is stored before any ManifestWork names it, so a restart finds it;
//! - status is written whatever happened to the writes (it describes what was observed);
//! - the finalizer comes off only after every delete it guards succeeded.
//!
//! The driver is here; each writer has its room: `finalizer`, `revisions`, `works`
//! (with the bookkeeping of writes the hub refused) and `status`.

mod finalizer;
mod revisions;
mod status;
mod works;

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
    BackToStable, FinalizerAction, Plan, PlannedEvent, RevisionChange, WorkApply, WorkChange,
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

use finalizer::*;
use revisions::*;
use status::*;
use works::*;

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
        back_to_stable,
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
    if status_version.is_some() {
        time_back_to_stable(&ctx.metrics, back_to_stable.as_ref());
    }
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
