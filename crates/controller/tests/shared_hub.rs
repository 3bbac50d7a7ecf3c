//! rules §11 on the real test hub: agents that stay silent, refuse to apply or report a
//! new generation early; two tenants on one hub; a placementRef renamed before its
//! Placement exists; OCM's scheduler re-paging decisions; a decision not scheduled yet;
//! a ManifestWork name taken by someone else.
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`); skipped without it unless CI=true.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{
    QUICK, WAIT, current, describe, message, patch_mwrs, start_agent, start_controller, update,
    version_of, wait_complete, wait_mwrs,
};
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use mwrs_api::labels;
use mwrs_api::placement::PlacementDecision;
use mwrs_api::work::{ManifestWork, ManifestWorkTemplate};
use mwrs_fleet::Behaviour;
use mwrs_fleet::agent::APPLY_ERROR;
use mwrs_fleet::placement::{DecisionGroup, decision_name};
use mwrs_testsupport::{
    TaskGuard, TestHub, configmap_template, has_condition, mwrs, wait_for, watch_objects,
};
use serde_json::json;

/// Every event on the ManifestWorks of some cluster namespaces, in order.
#[derive(Clone, Debug)]
struct Seen {
    cluster: String,
    name: String,
    resource_version: String,
    deleted: bool,
    /// When the test saw the event.
    at: Instant,
    /// The agent reports this generation done.
    done: bool,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
}

struct WorkLog {
    seen: Arc<Mutex<Vec<Seen>>>,
    _task: TaskGuard,
}

impl WorkLog {
    /// Watches every ManifestWork in `clusters` from now on.
    async fn watch(hub: &TestHub, clusters: &[String]) -> Self {
        let api: Api<ManifestWork> = Api::all(hub.client.clone());
        let wanted: BTreeSet<String> = clusters.iter().cloned().collect();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let log = seen.clone();
        let task = watch_objects(
            api,
            watcher::Config::default(),
            move |w: ManifestWork, deleted| {
                let cluster = w.namespace().unwrap_or_default();
                if !wanted.contains(&cluster) {
                    return;
                }
                if let Ok(mut s) = log.lock() {
                    s.push(Seen {
                        cluster,
                        name: w.name_any(),
                        resource_version: w.resource_version().unwrap_or_default(),
                        deleted,
                        at: Instant::now(),
                        done: common::work_done(&w),
                        labels: w.labels().clone(),
                        annotations: w.annotations().clone(),
                    });
                }
            },
        )
        .await;
        Self { seen, _task: task }
    }

    fn all(&self) -> Vec<Seen> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// When the ManifestWork in `cluster` was first seen.
    fn first_seen(&self, cluster: &str) -> Option<Instant> {
        self.all()
            .into_iter()
            .find(|s| s.cluster == cluster)
            .map(|s| s.at)
    }

    /// When the ManifestWork in `cluster` turned done, each time.
    fn turned_done(&self, cluster: &str) -> Vec<Instant> {
        let mut was_done = false;
        let mut out = Vec::new();
        for s in self.all().into_iter().filter(|s| s.cluster == cluster) {
            if s.done && !was_done {
                out.push(s.at);
            }
            was_done = s.done;
        }
        out
    }

    fn deletions(&self) -> Vec<Seen> {
        self.all().into_iter().filter(|s| s.deleted).collect()
    }

    /// The distinct resourceVersions seen per (cluster, name).
    fn versions(&self) -> BTreeMap<(String, String), BTreeSet<String>> {
        let mut out: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
        for s in self.all() {
            out.entry((s.cluster, s.name))
                .or_default()
                .insert(s.resource_version);
        }
        out
    }
}

/// With no agent answering, each ManifestWork is written once and then left alone: its
/// resourceVersion does not move while the cluster is in flight (rules §11.1), and it
/// times out at progressDeadline, counted from the write, with "no report" said.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_clusters_get_one_write_and_time_out() {
    let Some(hub) = TestHub::from_env("silent", 3).await else {
        return;
    };
    let _controller = start_controller(&hub);
    hub.publish_all("p").await;
    let log = WorkLog::watch(&hub, &hub.clusters).await;
    let strategy = json!({"type": "All", "all": {"progressDeadline": "20s"}});
    hub.create_mwrs(&mwrs("app", configmap_template("v1"), &[("p", strategy)]))
        .await;
    let m = wait_mwrs(&hub, "app", "in flight with no report", |m| {
        message(m, "ManifestworkApplied").contains("no report from the agent since")
    })
    .await;
    assert!(current(&m).is_none());
    wait_mwrs(&hub, "app", "ProgressDeadlineExceeded", |m| {
        has_condition(m, "Progressing", "False", "ProgressDeadlineExceeded")
    })
    .await;
    // At least 20 s passed since the first write: every ManifestWork kept its version.
    let versions = log.versions();
    assert_eq!(versions.len(), 3, "{versions:?}");
    for (work, seen) in &versions {
        assert_eq!(seen.len(), 1, "{work:?} was written again: {seen:?}");
    }
}

/// An agent that cannot apply: the cluster is in flight with the agent's message, times
/// out at progressDeadline and AbortAll reverts every cluster (rules §11.2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apply_error_is_reported_and_aborts() {
    let Some(hub) = TestHub::from_env("refuse", 3).await else {
        return;
    };
    let _controller = start_controller(&hub);
    hub.publish_all("p").await;
    let refusing = hub.clusters[0].clone();
    let _agent = start_agent(&hub, move |w| {
        if w.cluster == refusing && version_of(w.spec) == Some("v2") {
            Behaviour::Refuse
        } else {
            QUICK
        }
    });
    let strategy = common::all_aborting("8s");
    hub.create_mwrs(&mwrs("app", configmap_template("v1"), &[("p", strategy)]))
        .await;
    let v1 = current(&wait_complete(&hub, "app", None).await).unwrap();
    hub.set_template("app", configmap_template("v2")).await;
    let m = wait_mwrs(&hub, "app", "the agent's message in status", |m| {
        message(m, "ManifestworkApplied").contains(APPLY_ERROR)
    })
    .await;
    assert!(m.status.as_ref().unwrap().aborted_time.is_none());
    let m = wait_mwrs(&hub, "app", "aborted back to v1", |m| {
        has_condition(m, "Progressing", "False", "RolloutAborted")
            && m.status.as_ref().is_some_and(|s| s.summary.updated == 0)
            && message(m, "Progressing").contains("on all 3 clusters")
    })
    .await;
    assert_eq!(
        current(&m).as_deref(),
        Some(v1.as_str()),
        "{}",
        describe(&m)
    );
    common::assert_works_on(&hub, "app", &hub.clusters, &v1).await;
}

/// An agent that reports success for a new generation before it has applied it, then
/// Progressing 500 ms later, then success for real: neither a slot nor the promotion
/// goes on the early report (rules §11.3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_early_success_report_neither_frees_a_slot_nor_promotes() {
    let Some(hub) = TestHub::from_env("early", 2).await else {
        return;
    };
    let c = hub.clusters.clone();
    let _controller = start_controller(&hub);
    hub.publish_all("p").await;
    let _agent = start_agent(&hub, |_| Behaviour::EarlyReport {
        glitch: Duration::from_millis(500),
        after: Duration::from_millis(1500),
    });
    let log = WorkLog::watch(&hub, &c).await;
    let promoted = PromotedAt::watch(&hub, "app").await;
    let strategy = json!({"type": "Progressive", "progressive": {"maxConcurrency": 1}});
    hub.create_mwrs(&mwrs("app", configmap_template("v1"), &[("p", strategy)]))
        .await;
    wait_complete(&hub, "app", None).await;
    // Each agent reports success twice: early, then for real.
    let real = wait_for("both real successes", WAIT, || async {
        let done: Vec<Vec<Instant>> = c.iter().map(|x| log.turned_done(x)).collect();
        if done.iter().all(|d| d.len() >= 2) {
            Ok(done.iter().map(|d| d[1]).collect::<Vec<_>>())
        } else {
            Err(format!("{done:?}"))
        }
    })
    .await;
    let (done0, done1) = (real[0], real[1]);
    let started1 = log.first_seen(&c[1]).unwrap();
    assert!(
        started1 > done0,
        "{} started {:?} before {} really succeeded",
        c[1],
        done0 - started1,
        c[0]
    );
    let at = promoted.at().unwrap();
    assert!(
        at > done1,
        "promoted {:?} before the last real success",
        done1 - at
    );
}

/// When an MWRS first got a `currentRevision`, as seen by a watch.
struct PromotedAt {
    at: Arc<Mutex<Option<Instant>>>,
    _task: TaskGuard,
}

impl PromotedAt {
    async fn watch(hub: &TestHub, name: &str) -> Self {
        let cfg = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let at: Arc<Mutex<Option<Instant>>> = Arc::default();
        let first = at.clone();
        let task = watch_objects(hub.mwrs_api(), cfg, move |m, _| {
            if current(&m).is_some()
                && let Ok(mut a) = first.lock()
            {
                a.get_or_insert_with(Instant::now);
            }
        })
        .await;
        Self { at, _task: task }
    }

    fn at(&self) -> Option<Instant> {
        self.at.lock().ok().and_then(|a| *a)
    }
}

/// Two tenants on one hub. The attacker's MWRS has a name too long for the dotted owner
/// label (so its ManifestWorks carry the hashed one) and carries the victim's dotted
/// owner label among its own labels, with a Placement named like the victim's. Nothing
/// the victim's passes do may touch the attacker's ManifestWorks, nor write into a
/// cluster the victim does not select (rules §11.4).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_cannot_make_another_write_or_delete_its_works() {
    let Some(victim) = TestHub::from_env("victim", 3).await else {
        return;
    };
    let Some(mut attacker) = TestHub::from_env("attacker", 0).await else {
        return;
    };
    let c = victim.clusters.clone();
    // The attacker's MWRS delivers into the same cluster namespaces.
    attacker.clusters = c.clone();
    let _v = start_controller(&victim);
    let _a = start_controller(&attacker);
    // The victim's v2 hangs, so that an abort has something to revert.
    let _agent = start_agent(&victim, |w| {
        if version_of(w.spec) == Some("v2") {
            Behaviour::Hang
        } else {
            QUICK
        }
    });
    let log = WorkLog::watch(&victim, &c).await;
    victim
        .publish("pa", &[DecisionGroup::new("", c[..2].to_vec())])
        .await;
    attacker
        .publish("pa", &[DecisionGroup::new("", c[1..].to_vec())])
        .await;
    let long = format!("attacker-{}", "x".repeat(60));
    let mut evil = mwrs(
        &long,
        configmap_template("evil"),
        &[("pa", json!({"type": "All"}))],
    );
    evil.labels_mut().insert(
        labels::MWRS_OWNER.into(),
        format!("{}.app", victim.namespace),
    );
    evil.labels_mut()
        .insert(labels::PLACEMENT_NAME.into(), "pa".into());
    attacker.create_mwrs(&evil).await;
    let strategy = json!({"type": "All", "all": {"progressDeadline": "30s"},
        "failureStrategy": "AbortAll"});
    victim
        .create_mwrs(&mwrs("app", configmap_template("v1"), &[("pa", strategy)]))
        .await;
    wait_complete(&victim, "app", None).await;
    wait_complete(&attacker, &long, None).await;
    let attacker_uids = common::work_uids(&attacker, &long).await;
    assert_eq!(attacker_uids.len(), 2);
    // The victim rolls out v2 (it hangs), then aborts it by request: the revert writes
    // v1 into every ManifestWork the victim owns, at once.
    victim.set_template("app", configmap_template("v2")).await;
    wait_mwrs(&victim, "app", "v2 in flight", |m| {
        m.status.as_ref().is_some_and(|s| s.summary.applied == 2) && update(m) != current(m)
    })
    .await;
    patch_mwrs(
        &victim,
        "app",
        &json!({"metadata": {"annotations": {labels::CONTROL_ABORT: "t1"}}}),
    )
    .await;
    wait_mwrs(&victim, "app", "aborted back to v1", |m| {
        has_condition(m, "Progressing", "False", "RolloutAborted")
            && message(m, "Progressing").contains("on all 2 clusters")
    })
    .await;
    victim.set_template("app", configmap_template("v3")).await;
    wait_complete(&victim, "app", None).await;

    assert_eq!(
        common::work_uids(&attacker, &long).await,
        attacker_uids,
        "attacker's works kept"
    );
    assert!(log.deletions().is_empty(), "{:?}", log.deletions());
    let victim_slashed = format!("{}/app", victim.namespace);
    for s in log.all() {
        let by_victim = s.annotations.get(labels::MWRS_OWNER_ANNOTATION) == Some(&victim_slashed);
        assert!(
            !(by_victim && s.cluster == c[2]),
            "the victim wrote into a cluster it does not select: {s:?}"
        );
        if s.name != format!("{}.app", victim.namespace) {
            assert!(!by_victim, "the victim wrote the attacker's work: {s:?}");
            assert_ne!(
                s.labels.get(labels::MWRS_OWNER),
                Some(&format!("{}.app", victim.namespace)),
                "a forged owner label reached a work: {s:?}"
            );
        }
    }
}

/// Renaming a placementRef to a Placement that does not exist yet deletes nothing; once
/// it exists with the same clusters, every ManifestWork is kept (same UID).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renaming_a_placement_ref_keeps_every_work() {
    let Some(hub) = TestHub::from_env("rename", 3).await else {
        return;
    };
    let _controller = start_controller(&hub);
    let _agent = start_agent(&hub, |_| QUICK);
    common::create_app_for_all(&hub).await;
    wait_complete(&hub, "app", None).await;
    let before = common::work_uids(&hub, "app").await;
    let log = WorkLog::watch(&hub, &hub.clusters).await;
    patch_mwrs(
        &hub,
        "app",
        &json!({"spec": {"placementRefs": [{"name": "p2", "rolloutStrategy": {"type": "All"}}]}}),
    )
    .await;
    wait_mwrs(&hub, "app", "p2 reported missing", |m| {
        has_condition(m, "PlacementVerified", "False", "PlacementDecisionNotFound")
            && message(m, "PlacementVerified").contains("p2")
    })
    .await;
    hub.publish_all("p2").await;
    hub.set_template("app", configmap_template("v2")).await;
    wait_complete(&hub, "app", None).await;
    assert_eq!(common::work_uids(&hub, "app").await, before);
    assert!(log.deletions().is_empty(), "{:?}", log.deletions());
    let works = common::works_by_cluster(&hub, "app").await;
    assert!(
        works
            .values()
            .all(|w| w.labels().get(labels::PLACEMENT_NAME).map(String::as_str) == Some("p2"))
    );
}

/// OCM's scheduler re-pages: a second page is created before its status, then a cluster
/// leaves the first page, then appears on the second. No ManifestWork is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_re_paged_keep_every_work() {
    let Some(hub) = TestHub::from_env("repage", 3).await else {
        return;
    };
    let c = hub.clusters.clone();
    let _controller = start_controller(&hub);
    let _agent = start_agent(&hub, |_| QUICK);
    common::create_app_for_all(&hub).await;
    wait_complete(&hub, "app", None).await;
    let before = common::work_uids(&hub, "app").await;
    let log = WorkLog::watch(&hub, &c).await;

    let api: Api<PlacementDecision> = Api::namespaced(hub.client.clone(), &hub.namespace);
    let first = decision_name("p", 1);
    let second = decision_name("p", 2);
    // Created the way OCM's scheduler does: the object first, its status in a later write.
    let page = json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta1",
        "kind": "PlacementDecision",
        "metadata": {"name": second, "labels": {labels::PLACEMENT_LABEL: "p",
            labels::DECISION_GROUP_INDEX: "0", labels::DECISION_GROUP_NAME: ""}},
    });
    api.patch(
        &second,
        &PatchParams::apply("ocm-scheduler"),
        &Patch::Apply(&page),
    )
    .await
    .unwrap();
    let status = |cs: &[String]| {
        json!({"status": {"decisions": cs.iter().map(|c| json!({"clusterName": c, "reason": ""}))
            .collect::<Vec<_>>()}})
    };
    let pp = PatchParams::default();
    api.patch_status(&first, &pp, &Patch::Merge(&status(&c[..2])))
        .await
        .unwrap();
    // Long enough for several passes in the gap: the controller sees the page change.
    wait_mwrs(&hub, "app", "the gap reported", |m| {
        message(m, "PlacementVerified").contains("incomplete")
    })
    .await;
    api.patch_status(&second, &pp, &Patch::Merge(&status(&c[2..])))
        .await
        .unwrap();
    hub.set_template("app", configmap_template("v2")).await;
    wait_complete(&hub, "app", None).await;
    assert_eq!(common::work_uids(&hub, "app").await, before);
    assert!(log.deletions().is_empty(), "{:?}", log.deletions());
}

/// OCM writes an empty cluster name for a decision not scheduled yet: it is skipped and
/// reported, and the rollout completes on the others (rules §11.4).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unscheduled_decision_is_skipped() {
    let Some(hub) = TestHub::from_env("unsched", 2).await else {
        return;
    };
    let _controller = start_controller(&hub);
    let _agent = start_agent(&hub, |_| QUICK);
    let mut clusters = hub.clusters.clone();
    clusters.push(String::new());
    hub.publish("p", &[DecisionGroup::new("", clusters)]).await;
    hub.create_mwrs(&mwrs(
        "app",
        configmap_template("v1"),
        &[("p", json!({"type": "All"}))],
    ))
    .await;
    let m = wait_complete(&hub, "app", None).await;
    assert!(
        message(&m, "PlacementVerified").contains("not a valid cluster name"),
        "{}",
        describe(&m)
    );
    assert_eq!(m.status.unwrap().summary.desired_total, 2);
}

/// A ManifestWork on this MWRS's name in a cluster namespace that someone else owns:
/// reported once (one Event), counted as a failed cluster, left untouched, and not
/// asked for again on every pass (rules §10.13, issue #11 item 3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_name_is_a_failed_cluster_reported_once() {
    let Some(hub) = TestHub::from_env("taken", 3).await else {
        return;
    };
    let c = hub.clusters.clone();
    let work_name = format!("{}.app", hub.namespace);
    let api: Api<ManifestWork> = Api::namespaced(hub.client.clone(), &c[0]);
    let mut squatter = ManifestWork::new(
        &work_name,
        ManifestWorkTemplate::from_value(json!({"workload": {"manifests": []}})).unwrap(),
    );
    squatter.metadata.namespace = Some(c[0].clone());
    let squatter = api.create(&PostParams::default(), &squatter).await.unwrap();
    let _controller = start_controller(&hub);
    let _agent = start_agent(&hub, |_| QUICK);
    hub.publish_all("p").await;
    let strategy = json!({"type": "All", "all": {"maxFailures": 1}});
    hub.create_mwrs(&mwrs("app", configmap_template("v1"), &[("p", strategy)]))
        .await;
    let m = wait_mwrs(&hub, "app", "the taken name reported", |m| {
        message(m, "ManifestworkApplied").contains("belongs to another owner")
    })
    .await;
    assert!(
        message(&m, "ManifestworkApplied").contains(&c[0]),
        "{}",
        describe(&m)
    );
    // More passes: two new templates roll out on the others.
    for v in ["v2", "v3"] {
        hub.set_template("app", configmap_template(v)).await;
        wait_mwrs(&hub, "app", "the others done", |m| {
            m.status
                .as_ref()
                .is_some_and(|s| s.summary.updated == 2 && s.update_revision.is_some())
                && message(m, "ManifestworkApplied").contains("1 of 3 clusters failed")
                && update(m) != current(m)
        })
        .await;
    }
    // Left untouched (its agent writes its status; nobody else writes it).
    let now = api.get(&work_name).await.unwrap();
    assert_eq!(now.metadata.generation, squatter.metadata.generation);
    assert_eq!(now.labels(), squatter.labels());
    assert_eq!(now.annotations(), squatter.annotations());
    let count = wait_for("one ManifestWorkNameTaken event", WAIT, || async {
        let n = name_taken_events(&hub).await;
        if n >= 1 {
            Ok(n)
        } else {
            Err(format!("{n} events"))
        }
    })
    .await;
    assert_eq!(count, 1, "reported once, not once per pass");
}

/// How many times the ManifestWorkNameTaken Event was emitted (series counted).
async fn name_taken_events(hub: &TestHub) -> i32 {
    use k8s_openapi::api::events::v1::Event as KEvent;
    let api: Api<KEvent> = Api::namespaced(hub.client.clone(), &hub.namespace);
    let list = api.list(&ListParams::default()).await.unwrap();
    list.items
        .iter()
        .filter(|e| e.reason.as_deref() == Some("ManifestWorkNameTaken"))
        .map(|e| e.series.as_ref().map_or(1, |s| s.count))
        .sum()
}

/// The stable revision that a promotion makes non-live is deleted only after the status
/// write naming its successor is stored (rules §11.6): etcd's revisions order the two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_old_stable_revision_goes_after_the_promotion_is_stored() {
    use k8s_openapi::api::apps::v1::ControllerRevision;
    let Some(hub) = TestHub::from_env("pruneorder", 2).await else {
        return;
    };
    let _controller = start_controller(&hub);
    let _agent = start_agent(&hub, |_| QUICK);
    hub.publish_all("p").await;
    let mut app = mwrs(
        "app",
        configmap_template("v1"),
        &[("p", json!({"type": "All"}))],
    );
    app.spec.revision_history_limit = Some(0);
    hub.create_mwrs(&app).await;
    let v1 = current(&wait_complete(&hub, "app", None).await).unwrap();

    // resourceVersion of the first MWRS state naming another currentRevision, and of
    // the deletion of v1's ControllerRevision, each from its own watch.
    let promoted: Arc<Mutex<Option<u64>>> = Arc::default();
    let deleted: Arc<Mutex<Option<u64>>> = Arc::default();
    let _mwrs_watch = {
        let (promoted, v1) = (promoted.clone(), v1.clone());
        let cfg = watcher::Config::default().fields("metadata.name=app");
        watch_objects(hub.mwrs_api(), cfg, move |m, _| {
            if current(&m).is_some_and(|c| c != v1)
                && let Ok(mut p) = promoted.lock()
            {
                p.get_or_insert(etcd_revision(m.resource_version()).unwrap_or(0));
            }
        })
        .await
    };
    let _cr_watch = {
        let (deleted, v1) = (deleted.clone(), v1.clone());
        let api: Api<ControllerRevision> = Api::namespaced(hub.client.clone(), &hub.namespace);
        watch_objects(api, watcher::Config::default(), move |cr, gone| {
            if gone
                && cr.labels().get(labels::CONTROLLER_HASH) == Some(&v1)
                && let Ok(mut d) = deleted.lock()
            {
                *d = etcd_revision(cr.resource_version());
            }
        })
        .await
    };
    hub.set_template("app", configmap_template("v2")).await;
    wait_complete(&hub, "app", Some(&v1)).await;
    let (p, d) = wait_for("v1's revision deleted", WAIT, || async {
        let p = promoted.lock().ok().and_then(|p| *p);
        let d = deleted.lock().ok().and_then(|d| *d);
        match (p, d) {
            (Some(p), Some(d)) => Ok((p, d)),
            other => Err(format!("promoted/deleted at {other:?}")),
        }
    })
    .await;
    assert!(
        d > p,
        "v1's revision deleted at {d}, before the promotion stored at {p}"
    );
}

/// A resourceVersion as the etcd revision it is on this hub (opaque by contract; etcd's
/// in practice, which orders writes across objects).
fn etcd_revision(rv: Option<String>) -> Option<u64> {
    rv?.parse().ok()
}

/// Issue #51: an MWRS managed by Argo CD or Flux carries its tracking label; copied onto
/// the ManifestWorks (as upstream copies every label), the tool would take them for its
/// own and prune them, and the agents would delete the workloads. They get the MWRS's
/// other labels but not that one, and one put there by an earlier controller is taken off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gitops_tracking_labels_stay_off_the_manifestworks() {
    const TRACKING: &str = "app.kubernetes.io/instance";
    let Some(hub) = TestHub::from_env("gitops-labels", 2).await else {
        return;
    };
    let _controller = start_controller(&hub);
    let _agent = start_agent(&hub, |_| QUICK);
    hub.publish_all("p").await;
    let mut m = mwrs(
        "app",
        configmap_template("v1"),
        &[("p", json!({"type": "All"}))],
    );
    m.metadata.labels = Some(BTreeMap::from([
        (TRACKING.to_string(), "apps".to_string()),
        ("team".to_string(), "a".to_string()),
    ]));
    hub.create_mwrs(&m).await;
    wait_complete(&hub, "app", None).await;
    let works = common::works_by_cluster(&hub, "app").await;
    assert_eq!(works.len(), 2);
    for w in works.values() {
        assert_eq!(w.labels().get("team").map(String::as_str), Some("a"));
        assert!(!w.labels().contains_key(TRACKING), "{:?}", w.labels());
    }

    let (cluster, w) = works.iter().next().unwrap();
    let api: Api<ManifestWork> = Api::namespaced(hub.client.clone(), cluster);
    let body = json!({"metadata": {"labels": {TRACKING: "apps"}}});
    api.patch(&w.name_any(), &PatchParams::default(), &Patch::Merge(&body))
        .await
        .unwrap();
    wait_for("the copied tracking label taken off", WAIT, || async {
        let w = api.get(&w.name_any()).await.map_err(|e| e.to_string())?;
        if w.labels().contains_key(TRACKING) {
            Err(format!("{:?}", w.labels()))
        } else {
            Ok(())
        }
    })
    .await;
}
