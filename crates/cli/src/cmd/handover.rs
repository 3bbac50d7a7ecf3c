//! `handover [NAME]`: gives an MWRS's ManifestWorks the names upstream's controller uses, so
//! that it can take the MWRS back without a second ManifestWork per cluster (rules §12.5).
//!
//! Upstream's controller finds a cluster's ManifestWork by its owner and placement labels
//! but creates, updates and deletes it under the MWRS's own name. A ManifestWork this
//! controller named `<namespace>.<name>` would stay beside the `<name>` upstream creates at
//! the next template change, and the two would fight over the same spoke objects. Handover
//! creates `<name>` beside ours with the same spec, waits until the cluster's agent has
//! applied it (the spoke objects then have both ManifestWorks as owners) and deletes ours:
//! the agent only drops that owner, so no spoke object is deleted or re-created.
//!
//! It runs while no controller writes ManifestWorks (ours stopped, upstream's not yet on or
//! also fine), refuses an MWRS whose rollout is not complete unless told, and can be run
//! again after an interruption: a copy already made is reused.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams, Preconditions};
use mwrs_api::labels;
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_api::work::ManifestWork;
use mwrs_engine::owner::OwnerKey;
use mwrs_engine::phase::{Phase, phase};

use crate::args::{Global, HandoverArgs};
use crate::error::{CliError, Exit, Result};
use crate::hub::{HubClient, parse_timeout};
use crate::output::age;

/// Requests in flight at once while copying or deleting one MWRS's ManifestWorks.
const CONCURRENCY: usize = 16;
/// How often the copies are listed while waiting for their agents.
const POLL: Duration = Duration::from_secs(2);

/// One cluster's part of a handover: our ManifestWork, replaced by one under upstream's
/// name with the same spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Move {
    pub cluster: String,
    /// Our ManifestWork's name; deleted once the copy is applied.
    pub from: String,
    /// Its uid and spec generation as read: it is not deleted if its spec changed since.
    pub uid: String,
    pub generation: Option<i64>,
    /// The ManifestWork under upstream's name exists already (an earlier handover, or a
    /// duplicate): nothing to create.
    pub copied: bool,
}

/// What handing `m` over means, given its ManifestWorks (found by its owner label). Err
/// says why upstream's controller must not take it as it stands.
pub fn plan(
    m: &ManifestWorkReplicaSet,
    works: &[ManifestWork],
    force: bool,
) -> std::result::Result<Vec<Move>, String> {
    let owner = OwnerKey::new(m.namespace().unwrap_or_default(), m.name_any());
    if !owner.fits_label() {
        return Err(format!(
            "upstream's controller labels its ManifestWorks with {:?}, longer than 63 \
             characters: it cannot manage this MWRS (give it a shorter name first)",
            owner.dotted()
        ));
    }
    if !force && let Some(why) = unsettled(m, works) {
        return Err(format!(
            "{why}; upstream's controller would roll the template out to every cluster at \
             once, without groups, deadlines or holds. Wait for Complete, or go back with \
             `mwrs rollout undo` first; --force hands it over as it is"
        ));
    }
    let upstream_name = m.name_any();
    let live: Vec<&ManifestWork> = works
        .iter()
        .filter(|w| w.metadata.deletion_timestamp.is_none())
        .collect();
    let mut copied: BTreeSet<String> = live
        .iter()
        .filter(|w| w.name_any() == upstream_name)
        .filter_map(|w| w.namespace())
        .collect();
    let mut moves = Vec::new();
    for w in live.iter().filter(|w| w.name_any() != upstream_name) {
        let cluster = w.namespace().unwrap_or_default();
        moves.push(Move {
            copied: !copied.insert(cluster.clone()),
            cluster,
            from: w.name_any(),
            uid: w.uid().unwrap_or_default(),
            generation: w.metadata.generation,
        });
    }
    Ok(moves)
}

/// Why `m`'s clusters do not all run its template, if they do not.
fn unsettled(m: &ManifestWorkReplicaSet, works: &[ManifestWork]) -> Option<String> {
    let (p, why) = phase(m);
    if p != Phase::Complete {
        return Some(format!("its rollout is {} ({why})", p.as_str()));
    }
    let update = m.status.as_ref()?.update_revision.clone()?;
    works
        .iter()
        .find(|w| w.labels().get(labels::CONTROLLER_HASH) != Some(&update))
        .map(|w| {
            format!(
                "cluster {} carries revision {}, the template is revision {update}",
                w.namespace().unwrap_or_default(),
                w.labels()
                    .get(labels::CONTROLLER_HASH)
                    .map_or("<none>", String::as_str)
            )
        })
}

/// `w` under upstream's name `name`: the same spec, labels and owner annotation. Rollout
/// plugins' marks are left behind (they are sealed to the ManifestWork they were made for).
pub fn copy_of(w: &ManifestWork, name: &str) -> ManifestWork {
    let annotations = w
        .annotations()
        .iter()
        .filter(|(k, _)| {
            ![labels::PLUGIN_VERDICT, labels::PLUGIN_SPEC_DIGEST].contains(&k.as_str())
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    ManifestWork {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: w.namespace(),
            labels: Some(w.labels().clone()),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec: w.spec.clone(),
        status: None,
    }
}

/// Has the cluster's agent applied `w`'s spec (Applied True at its generation), and is it
/// not being deleted (a copy the agent is cleaning up still says Applied)?
pub fn applied(w: &ManifestWork) -> bool {
    if w.metadata.deletion_timestamp.is_some() {
        return false;
    }
    let conditions = w.status.as_ref().and_then(|s| s.conditions.as_deref());
    conditions
        .and_then(|cs| mwrs_engine::conditions::find(cs, "Applied"))
        .is_some_and(|c| c.status == "True" && c.observed_generation == w.metadata.generation)
}

pub async fn run(hub: &HubClient, g: &Global, a: &HandoverArgs) -> Result<Exit> {
    let timeout = parse_timeout(&a.timeout, "--timeout")?.unwrap_or(Duration::MAX);
    controller_stopped(hub, a).await?;
    let items = hub.list_mwrs(a.name.as_deref(), g.all_namespaces).await?;
    let mut refused = 0;
    for m in &items {
        let key = format!("{}/{}", m.namespace().unwrap_or_default(), m.name_any());
        match hand_over(hub, m, a, timeout).await {
            Ok(said) => println!("mwrs {key}: {said}"),
            Err(e) => {
                eprintln!("error: mwrs {key}: {e}");
                refused += 1;
            }
        }
    }
    match refused {
        0 => Ok(Exit::Ok),
        n => Err(CliError::error(format!(
            "{n} of {} ManifestWorkReplicaSets not handed over (see above); nothing of \
             theirs was deleted (copies made so far apply the same spec and are reused by \
             the next run)",
            items.len()
        ))),
    }
}

/// Refuses unless the controller is known to be stopped: its leader Lease
/// (`--controller-lease`) expired, or (`--controller-stopped`) the user says so and no
/// fresh Lease says otherwise. A running controller would delete the copies as duplicates.
async fn controller_stopped(hub: &HubClient, a: &HandoverArgs) -> Result<()> {
    let lease = a.controller_lease.as_str();
    let Some((ns, name)) = lease.split_once('/') else {
        return Err(CliError::usage(format!(
            "--controller-lease {lease:?}: want NAMESPACE/NAME"
        )));
    };
    let api: Api<Lease> = Api::namespaced(hub.client.clone(), ns);
    let unknown = |why: String| {
        if a.controller_stopped {
            eprintln!("note: {why}; handing over on --controller-stopped");
            return Ok(());
        }
        Err(CliError::new(
            Exit::Conflict,
            format!(
                "cannot tell that the controller is stopped: {why}. Installed in another \
                 namespace? pass --controller-lease NAMESPACE/mwrs-controller. Run without \
                 leader election? stop it (helm uninstall, or scale its Deployment to 0), \
                 then pass --controller-stopped"
            ),
        ))
    };
    let l = match api.get_opt(name).await {
        Ok(Some(l)) => l,
        Ok(None) => return unknown(format!("no Lease {lease}")),
        Err(kube::Error::Api(s)) if s.code == 403 => {
            return unknown(format!("cannot read Lease {lease} ({})", s.message));
        }
        Err(e) => return Err(CliError::kube(&format!("reading Lease {lease}"), e)),
    };
    let now = Timestamp::now();
    let spec = l.spec.unwrap_or_default();
    let holder = spec.holder_identity.unwrap_or_default();
    let renewed = spec.renew_time.map(|t| t.0);
    let lasts = jiff::SignedDuration::from_secs(spec.lease_duration_seconds.unwrap_or(15).into());
    match renewed {
        Some(r) if !holder.is_empty() && r + lasts > now => Err(CliError::new(
            Exit::Conflict,
            format!(
                "the controller still runs: Lease {lease} is held by {holder}, renewed {} \
                 ago. Stop it first (helm uninstall, or scale its Deployment to 0); it would \
                 delete the copies as duplicates",
                age(Some(r), now)
            ),
        )),
        _ => Ok(()),
    }
}

/// Hands one MWRS over; the line that says what was done.
async fn hand_over(
    hub: &HubClient,
    m: &ManifestWorkReplicaSet,
    a: &HandoverArgs,
    timeout: Duration,
) -> std::result::Result<String, String> {
    let owner = OwnerKey::new(m.namespace().unwrap_or_default(), m.name_any());
    let works = owned_works(hub, &owner, None).await?;
    let moves = plan(m, &works, a.force)?;
    let name = m.name_any();
    if moves.is_empty() {
        return Ok(format!(
            "nothing to do: every ManifestWork is named {name:?}"
        ));
    }
    let clusters: Vec<&str> = moves.iter().map(|mv| mv.cluster.as_str()).collect();
    if a.dry_run {
        return Ok(format!(
            "would copy {} ManifestWorks to {name:?} and delete the originals once applied \
             (clusters: {})",
            moves.len(),
            clusters.join(", ")
        ));
    }
    refuse_taken_names(hub, &owner, &name, &moves).await?;
    let by_key: BTreeMap<(&str, &str), &ManifestWork> = works
        .iter()
        .map(|w| {
            (
                (
                    w.metadata.namespace.as_deref().unwrap_or(""),
                    w.metadata.name.as_deref().unwrap_or(""),
                ),
                w,
            )
        })
        .collect();
    let to_copy: Vec<&ManifestWork> = moves
        .iter()
        .filter(|mv| !mv.copied)
        .filter_map(|mv| {
            by_key
                .get(&(mv.cluster.as_str(), mv.from.as_str()))
                .copied()
        })
        .collect();
    futures::stream::iter(
        to_copy
            .into_iter()
            .map(|w| create_copy(hub, w, &owner, &name)),
    )
    .buffer_unordered(CONCURRENCY)
    .try_collect::<Vec<()>>()
    .await?;
    wait_applied(hub, &owner, &name, &clusters, timeout).await?;
    // The controller may have come back meanwhile (a GitOps tool scaling it up).
    controller_stopped(hub, a)
        .await
        .map_err(|e| e.to_string())?;
    futures::stream::iter(moves.iter().map(|mv| delete_original(hub, mv, &name)))
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(format!(
        "{} ManifestWorks now named {name:?} (applied by their agents; the originals deleted)",
        moves.len()
    ))
}

/// Every ManifestWork carrying `owner`'s label in every cluster namespace (only those
/// named `name`, when given).
async fn owned_works(
    hub: &HubClient,
    owner: &OwnerKey,
    name: Option<&str>,
) -> std::result::Result<Vec<ManifestWork>, String> {
    let (k, v) = owner.selector();
    let mut lp = ListParams::default().labels(&format!("{k}={v}"));
    if let Some(name) = name {
        lp = lp.fields(&format!("metadata.name={name}"));
    }
    let listed = Api::<ManifestWork>::all(hub.client.clone())
        .list(&lp)
        .await
        .map_err(|e| format!("listing its ManifestWorks: {e}"))?;
    // The controller's own rule (rules §11.4): the selector label alone proves nothing.
    let (owned, foreign): (Vec<_>, Vec<_>) = listed
        .items
        .into_iter()
        .partition(|w| owner.owns(w.labels(), w.annotations()));
    for w in &foreign {
        eprintln!(
            "note: ManifestWork {}/{} carries {k}={v} but another owner's marks: not {}'s, left alone",
            w.namespace().unwrap_or_default(),
            w.name_any(),
            owner.slashed()
        );
    }
    Ok(owned)
}

/// Refuses, before anything is written, when a ManifestWork not `owner`'s already has
/// upstream's name `name` in a cluster that needs a copy (one list of that name across
/// every namespace).
async fn refuse_taken_names(
    hub: &HubClient,
    owner: &OwnerKey,
    name: &str,
    moves: &[Move],
) -> std::result::Result<(), String> {
    let named = Api::<ManifestWork>::all(hub.client.clone())
        .list(&ListParams::default().fields(&format!("metadata.name={name}")))
        .await
        .map_err(|e| format!("listing ManifestWorks named {name:?}: {e}"))?;
    let needed: BTreeSet<&str> = moves
        .iter()
        .filter(|mv| !mv.copied)
        .map(|mv| mv.cluster.as_str())
        .collect();
    match named.items.iter().find(|w| {
        needed.contains(w.metadata.namespace.as_deref().unwrap_or(""))
            && !owner.owns(w.labels(), w.annotations())
    }) {
        Some(w) => Err(taken(w)),
        None => Ok(()),
    }
}

/// Why the ManifestWork `w`, not this MWRS's, stops a handover.
fn taken(w: &ManifestWork) -> String {
    let whose = w
        .labels()
        .get(labels::MWRS_OWNER)
        .map_or("no MWRS".to_string(), |o| format!("MWRS {o}"));
    format!(
        "ManifestWork {}/{} exists and belongs to {whose}: under upstream's naming, MWRS \
         of one name in two namespaces share one ManifestWork per cluster and overwrite \
         each other; rename one first",
        w.namespace().unwrap_or_default(),
        w.name_any()
    )
}

/// Creates `w`'s copy under `name`; one already there is accepted only when it is
/// `owner`'s.
async fn create_copy(
    hub: &HubClient,
    w: &ManifestWork,
    owner: &OwnerKey,
    name: &str,
) -> std::result::Result<(), String> {
    let cluster = w.namespace().unwrap_or_default();
    let api: Api<ManifestWork> = Api::namespaced(hub.client.clone(), &cluster);
    match api.create(&PostParams::default(), &copy_of(w, name)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let there = api
                .get(name)
                .await
                .map_err(|e| format!("reading {cluster}/{name}: {e}"))?;
            if owner.owns(there.labels(), there.annotations()) {
                Ok(())
            } else {
                Err(taken(&there))
            }
        }
        Err(e) => Err(format!("creating {cluster}/{name}: {e}")),
    }
}

/// Waits until the copy in every one of `clusters` is applied by its agent.
async fn wait_applied(
    hub: &HubClient,
    owner: &OwnerKey,
    name: &str,
    clusters: &[&str],
    timeout: Duration,
) -> std::result::Result<(), String> {
    let start = Instant::now();
    loop {
        // Only the copies: one per cluster, not every ManifestWork of the MWRS.
        let copies = owned_works(hub, owner, Some(name)).await?;
        let waiting: Vec<&str> = clusters
            .iter()
            .copied()
            .filter(|c| {
                !copies
                    .iter()
                    .any(|w| w.metadata.namespace.as_deref() == Some(*c) && applied(w))
            })
            .collect();
        if waiting.is_empty() {
            return Ok(());
        }
        if start.elapsed() >= timeout {
            return Err(format!(
                "the agents of {} clusters have not applied the copy within --timeout ({}); \
                 the originals are kept: both apply the same spec, so run handover again \
                 once they have",
                waiting.len(),
                waiting.join(", ")
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Deletes our ManifestWork of `mv`, only if its spec is unchanged since it was read and
/// its copy `name` is there and applied, read again just before. The agent writes its
/// status meanwhile, so the reads before the delete are repeated when the delete meets a
/// newer resourceVersion.
async fn delete_original(
    hub: &HubClient,
    mv: &Move,
    name: &str,
) -> std::result::Result<(), String> {
    let api: Api<ManifestWork> = Api::namespaced(hub.client.clone(), &mv.cluster);
    let what = format!("{}/{}", mv.cluster, mv.from);
    for _ in 0..5 {
        let copy = api
            .get_opt(name)
            .await
            .map_err(|e| format!("reading {}/{name}: {e}", mv.cluster))?;
        if !copy.as_ref().is_some_and(applied) {
            return Err(format!(
                "{}/{name} is gone or no longer applied (is a controller running?); {what} is \
                 kept: run handover again",
                mv.cluster
            ));
        }
        let Some(w) = api
            .get_opt(&mv.from)
            .await
            .map_err(|e| format!("reading {what}: {e}"))?
        else {
            return Ok(());
        };
        if w.uid().as_deref() != Some(mv.uid.as_str()) || w.metadata.generation != mv.generation {
            return Err(format!(
                "{what} changed since it was read (is a controller running?); it is kept: \
                 run handover again"
            ));
        }
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(mv.uid.clone()),
                resource_version: w.resource_version(),
            }),
            ..DeleteParams::default()
        };
        match api.delete(&mv.from, &dp).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => return Err(format!("deleting {what}: {e}")),
        }
    }
    Err(format!(
        "{what} kept changing; it is kept: run handover again"
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::{Value, json};

    fn mwrs(name: &str, update: &str, complete: bool) -> ManifestWorkReplicaSet {
        let reason = if complete {
            "NewManifestWorkAvailable"
        } else {
            "NewManifestWorkApplied"
        };
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "generation": 1},
            "spec": {"manifestWorkTemplate": {}, "placementRefs": [{"name": "p"}]},
            "status": {"observedGeneration": 1, "currentRevision": update,
                "updateRevision": update,
                "conditions": [{"type": "Progressing", "status": if complete {"False"} else {"True"},
                    "reason": reason, "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
        }))
        .unwrap()
    }

    fn work(cluster: &str, name: &str, revision: &str, extra: Value) -> ManifestWork {
        let mut v = json!({
            "metadata": {"name": name, "namespace": cluster, "uid": format!("uid-{cluster}-{name}"),
                "generation": 3,
                "labels": {labels::MWRS_OWNER: "ns.app", labels::PLACEMENT_NAME: "p",
                    labels::CONTROLLER_HASH: revision},
                "annotations": {labels::MWRS_OWNER_ANNOTATION: "ns/app",
                    labels::PLUGIN_VERDICT: "{}", labels::PLUGIN_SPEC_DIGEST: "x.y"}},
            "spec": {"workload": {"manifests": [{"kind": "ConfigMap"}]}},
        });
        if let (Some(m), Some(e)) = (v["metadata"].as_object_mut(), extra.as_object()) {
            m.extend(e.clone());
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn each_of_our_works_moves_and_a_copy_already_made_is_reused() {
        let works = [
            work("c1", "ns.app", "r2", json!({})),
            work("c2", "ns.app", "r2", json!({})),
            work("c2", "app", "r2", json!({})),
            work("c3", "app", "r2", json!({})),
            work(
                "c4",
                "ns.app",
                "r2",
                json!({"deletionTimestamp": "2026-01-01T00:00:00Z"}),
            ),
        ];
        let moves = plan(&mwrs("app", "r2", true), &works, false).unwrap();
        let got: Vec<(&str, bool)> = moves
            .iter()
            .map(|m| (m.cluster.as_str(), m.copied))
            .collect();
        assert_eq!(got, [("c1", false), ("c2", true)]);
        assert_eq!(moves[0].uid, "uid-c1-ns.app");
        assert_eq!(moves[0].generation, Some(3));
    }

    #[test]
    fn an_unfinished_rollout_is_refused_unless_forced() {
        let works = [work("c1", "ns.app", "r2", json!({}))];
        let why = plan(&mwrs("app", "r2", false), &works, false).unwrap_err();
        assert!(
            why.contains("Progressing") && why.contains("--force"),
            "{why}"
        );
        let stale = [work("c1", "ns.app", "r1", json!({}))];
        let why = plan(&mwrs("app", "r2", true), &stale, false).unwrap_err();
        assert!(why.contains("cluster c1 carries revision r1"), "{why}");
        assert_eq!(
            plan(&mwrs("app", "r2", true), &stale, true).unwrap().len(),
            1
        );
    }

    #[test]
    fn an_owner_too_long_for_upstreams_label_is_refused_even_forced() {
        let name = "a".repeat(70);
        let why = plan(&mwrs(&name, "r", true), &[], true).unwrap_err();
        assert!(why.contains("longer than 63"), "{why}");
    }

    #[test]
    fn a_copy_keeps_spec_labels_and_owner_but_no_plugin_marks() {
        let w = work("c1", "ns.app", "r2", json!({}));
        let c = copy_of(&w, "app");
        assert_eq!(c.name_any(), "app");
        assert_eq!(c.namespace().as_deref(), Some("c1"));
        assert_eq!(c.spec.to_value(), w.spec.to_value());
        assert_eq!(c.labels(), w.labels());
        assert_eq!(
            c.annotations().keys().collect::<Vec<_>>(),
            [labels::MWRS_OWNER_ANNOTATION]
        );
        assert!(c.metadata.uid.is_none() && c.metadata.resource_version.is_none());
    }

    #[test]
    fn applied_means_at_the_works_generation() {
        let cond = |g: i64| {
            json!({"conditions": [{"type": "Applied", "status": "True", "observedGeneration": g,
                "reason": "", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]})
        };
        let mut w = work("c1", "app", "r2", json!({}));
        assert!(!applied(&w));
        w.status = serde_json::from_value(cond(2)).unwrap();
        assert!(!applied(&w), "an older generation");
        w.status = serde_json::from_value(cond(3)).unwrap();
        assert!(applied(&w));
        // Being deleted (the agent cleans up; Applied stays True meanwhile): not applied.
        w.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::UNIX_EPOCH,
        ));
        assert!(!applied(&w), "a copy being deleted");
    }
}
