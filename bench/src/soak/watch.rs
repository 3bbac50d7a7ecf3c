//! The soak's eyes: watches of the MWRS, their ManifestWorks and revisions and the
//! Lease, each change filed in the log as it arrives; and the API server's audit log,
//! read for the writes each replica made.

use std::path::Path;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use mwrs_api::labels;
use mwrs_api::mwrs::{ABORT_TRIGGER_REQUESTED, ManifestWorkReplicaSet};
use mwrs_api::work::ManifestWork;
use mwrs_testsupport::{TaskGuard, watch_objects};

use super::log::{Log, Ms, Seen, now_ms, parse_ms};

pub type SharedLog = Arc<Mutex<Log>>;

fn file(log: &SharedLog, at: Ms, seen: Seen) {
    if let Ok(mut l) = log.lock() {
        l.push(at, seen);
    }
}

/// Starts every watch of MWRS namespace `ns`; they file into `log` until dropped.
pub async fn start(client: &Client, ns: &str, log: &SharedLog) -> Vec<TaskGuard> {
    vec![
        watch_works(client, ns, log).await,
        watch_revisions(client, ns, log).await,
        watch_statuses(client, ns, log).await,
        watch_leases(client, ns, log).await,
    ]
}

/// Every ManifestWork an MWRS owns (in any cluster namespace), as it changes.
async fn watch_works(client: &Client, ns: &str, log: &SharedLog) -> TaskGuard {
    let owner_prefix = format!("{ns}.");
    let log = log.clone();
    let selector = watcher::Config::default().labels(labels::MWRS_OWNER);
    watch_objects(
        Api::<ManifestWork>::all(client.clone()),
        selector,
        move |w, deleted| {
            file(&log, now_ms(), work_of(&w, &owner_prefix, deleted));
        },
    )
    .await
}

/// What a ManifestWork says for the log; its MWRS is the name in its owner label after
/// `owner_prefix` (the MWRS namespace and a dot).
fn work_of(w: &ManifestWork, owner_prefix: &str, deleted: bool) -> Seen {
    let mwrs = w
        .labels()
        .get(labels::MWRS_OWNER)
        .and_then(|o| o.strip_prefix(owner_prefix))
        .unwrap_or_default()
        .to_string();
    Seen::Work {
        mwrs,
        cluster: w.namespace().unwrap_or_default(),
        uid: w.uid().unwrap_or_default(),
        generation: w.metadata.generation.unwrap_or(0),
        revision: w.labels().get(labels::CONTROLLER_HASH).cloned(),
        applied_at: w
            .annotations()
            .get(labels::REVISION_APPLIED_AT)
            .and_then(|t| parse_ms(t)),
        deleted,
    }
}

/// The ControllerRevisions of namespace `ns` that name their MWRS and hash.
async fn watch_revisions(client: &Client, ns: &str, log: &SharedLog) -> TaskGuard {
    let log = log.clone();
    let api = Api::<ControllerRevision>::namespaced(client.clone(), ns);
    watch_objects(api, watcher::Config::default(), move |r, deleted| {
        let owner = r.owner_references().first().map(|o| o.name.clone());
        let hash = r.labels().get(labels::CONTROLLER_HASH).cloned();
        if let (Some(mwrs), Some(hash)) = (owner, hash) {
            file(
                &log,
                now_ms(),
                Seen::Revision {
                    mwrs,
                    hash,
                    deleted,
                },
            );
        }
    })
    .await
}

/// The status of every MWRS of namespace `ns`.
async fn watch_statuses(client: &Client, ns: &str, log: &SharedLog) -> TaskGuard {
    let log = log.clone();
    let api = Api::<ManifestWorkReplicaSet>::namespaced(client.clone(), ns);
    watch_objects(api, watcher::Config::default(), move |m, _| {
        file(&log, now_ms(), status_of(&m));
    })
    .await
}

/// The holder of the controllers' Lease in namespace `ns`, each time it changes.
async fn watch_leases(client: &Client, ns: &str, log: &SharedLog) -> TaskGuard {
    let log = log.clone();
    let api = Api::<Lease>::namespaced(client.clone(), ns);
    let config = watcher::Config::default().fields(&format!("metadata.name={}", super::LEASE));
    let mut last: Option<String> = None;
    watch_objects(api, config, move |l, _| {
        let spec = l.spec.as_ref();
        let holder = spec.and_then(|s| s.holder_identity.clone());
        if holder == last {
            return;
        }
        last = holder.clone();
        // `HOST-PID`, and each replica's host name is its name (see `cast::Launch`).
        let replica = holder
            .as_deref()
            .and_then(|h| h.rsplit_once('-'))
            .map(|(host, _)| host.to_string());
        // From when the new holder says it took the lease (this machine's clock).
        let at = spec
            .and_then(|s| s.acquire_time.as_ref())
            .map_or_else(now_ms, |t| t.0.as_millisecond());
        file(&log, at, Seen::Leader { replica });
    })
    .await
}

/// What an MWRS's status says for the log.
fn status_of(m: &ManifestWorkReplicaSet) -> Seen {
    let status = m.status.clone().unwrap_or_default();
    let abort = status.last_abort.as_ref();
    let named = [
        status.current_revision.clone(),
        status.update_revision.clone(),
        abort.map(|a| a.revision.clone()),
        abort.and_then(|a| a.reverted_to.clone()),
    ]
    .into_iter()
    .flatten()
    .collect();
    // Held: an abort that went back to a stable revision, or a user's abort with none to go
    // back to (rules §10.6). A breach of a first rollout holds nothing: it stops starting
    // clusters while breached, as without AbortAll.
    let held = abort
        .filter(|a| {
            status.update_aborted()
                && (a.reverted_to.is_some() || a.trigger == ABORT_TRIGGER_REQUESTED)
        })
        .map(|a| (a.revision.clone(), a.time.0.as_millisecond()));
    Seen::Status {
        mwrs: m.name_any(),
        named,
        held,
    }
}

/// The writes the audit log at `path` attributes to replicas (users
/// `system:serviceaccount:<ns>:replica-<name>`, named `replica-<name>` as their processes
/// are), filed into `log`; returns how many.
pub fn read_audit(path: &Path, ns: &str, log: &SharedLog) -> anyhow::Result<usize> {
    let text = std::fs::read_to_string(path)?;
    let prefix = format!("system:serviceaccount:{ns}:");
    let mut n = 0;
    for line in text.lines() {
        let Ok(e) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if let Some((at, seen)) = audited_write(&e, &prefix) {
            file(log, at, seen);
            n += 1;
        }
    }
    Ok(n)
}

/// One audit event as a replica's write, when it is one: by a user `<prefix>replica-…`,
/// and not a dry run (the probe of the served schema, `crd::until_served`, is a dry-run
/// status patch that any replica sends before it leads: it changes nothing).
fn audited_write(e: &serde_json::Value, prefix: &str) -> Option<(Ms, Seen)> {
    let replica = e["user"]["username"]
        .as_str()
        .and_then(|u| u.strip_prefix(prefix))
        .filter(|r| r.starts_with("replica-"))?;
    let dry_run = e["requestURI"]
        .as_str()
        .and_then(|uri| uri.split_once('?'))
        .is_some_and(|(_, query)| query.split('&').any(|q| q.starts_with("dryRun=")));
    if dry_run {
        return None;
    }
    let at = e["requestReceivedTimestamp"].as_str().and_then(parse_ms)?;
    let object = &e["objectRef"];
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
    let seen = Seen::Write {
        replica: replica.to_string(),
        verb: text(&e["verb"]),
        resource: text(&object["resource"]),
        namespace: text(&object["namespace"]),
        name: text(&object["name"]),
        code: e["responseStatus"]["code"].as_u64().unwrap_or(0) as u16,
    };
    Some((at, seen))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(user: &str, uri: &str) -> serde_json::Value {
        serde_json::json!({
            "user": {"username": user},
            "verb": "patch",
            "requestURI": uri,
            "requestReceivedTimestamp": "2026-12-06T05:00:00.000000Z",
            "objectRef": {"resource": "manifestworkreplicasets", "namespace": "soak", "name": "api"},
            "responseStatus": {"code": 200},
        })
    }

    #[test]
    fn a_replicas_write_is_filed_and_its_dry_run_is_not() {
        let prefix = "system:serviceaccount:soak:";
        let uri = "/apis/work.open-cluster-management.io/v1alpha1/namespaces/soak/manifestworkreplicasets/api/status";
        let user = "system:serviceaccount:soak:replica-b";
        let Some((_, Seen::Write { replica, verb, .. })) = audited_write(&event(user, uri), prefix)
        else {
            panic!("a replica's patch is a write");
        };
        assert_eq!((replica.as_str(), verb.as_str()), ("replica-b", "patch"));
        // As kube-rs sends it.
        let dry = format!("{uri}?&dryRun=All");
        assert!(audited_write(&event(user, &dry), prefix).is_none());
        let other = "system:serviceaccount:soak:plugin";
        assert!(audited_write(&event(other, uri), prefix).is_none());
    }
}
