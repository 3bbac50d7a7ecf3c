//! Stage 3 with a rollout plugin (issue #18): a cluster its agent reports done is
//! Validating until the plugin says SUCCEEDED; FAILED is a failure; IN_PROGRESS past the
//! deadline times out; a plugin that does not answer holds the rollout.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use mwrs_api::mwrs::condition as mwrs_condition;
use serde_json::json;

use crate::conditions;
use crate::marks::{MarkKey, MarkPlace, Marks};
use crate::plan::{WorkApply, WorkChange};
use crate::plugin::{
    Begin, Begun, CallTarget, ClusterVerdict, ErrorRun, Mutation, PluginHealth, PluginInputs,
    Validation, Verdict,
};
use crate::rollout::RolloutStatus;
use mwrs_api::labels;

use super::super::plan;
use super::{Fixture, Reported, STABLE, mwrs_with, secs, t0};

fn fixture(strategy: serde_json::Value, clusters: &[&str]) -> (Fixture, String) {
    let mut f = Fixture::new(mwrs_with(strategy, Some(STABLE)), clusters);
    let update = f.store_update();
    (f, update)
}

/// The controller's view: marks count only with its seal.
fn plugins(health: PluginHealth) -> PluginInputs {
    PluginInputs {
        health: BTreeMap::from([("judge".to_string(), health)]),
        poll: secs(10),
        marks: Marks::sealed(MarkKey::new(&[7; 32]).unwrap()),
        ..Default::default()
    }
}

fn available() -> PluginHealth {
    PluginHealth::Available {
        description: "judge 1.0".into(),
        since: t0() - secs(3600),
    }
}

fn unreachable() -> PluginHealth {
    PluginHealth::Unreachable {
        why: "connection refused".into(),
        since: t0() - secs(60),
    }
}

fn said(p: &mut PluginInputs, cluster: &str, revision: &str, verdict: Verdict, at: Timestamp) {
    p.verdicts.insert(
        cluster.into(),
        ClusterVerdict {
            plugin: "judge".into(),
            revision: revision.into(),
            generation: 1,
            verdict,
            message: format!("smoke test {}", verdict.as_str()),
            at,
        },
    );
}

/// The placementRef `p` of four clusters, rolling `update` out from [`STABLE`].
fn target(update: &str) -> CallTarget {
    CallTarget {
        plugin: "judge".into(),
        placement: "p".into(),
        total_clusters: 4,
        current: Some(STABLE.into()),
        update: update.into(),
    }
}

/// A Begin (`aborting`: BeginAbort) about `revision`, sent `ago` and not answered.
fn sent(revision: &str, aborting: bool, ago: i64) -> Begun {
    Begun {
        plugin: "judge".into(),
        revision: revision.into(),
        aborting,
        at: t0() - secs(ago),
        acked: false,
        mutation: None,
    }
}

/// The clusters a plan writes a revision to: (cluster, revision).
/// The template of `revision` as the fixture stores it (the spec's, for the update).
fn template_of(f: &Fixture, revision: &str) -> Arc<serde_json::Value> {
    let stored = f.revisions.iter().find(|r| r.hash == revision);
    Arc::new(stored.map_or_else(
        || f.mwrs.spec.manifest_work_template.to_value(),
        |r| r.template.clone(),
    ))
}

fn applies(p: &crate::Plan) -> Vec<(String, String)> {
    p.works
        .iter()
        .filter_map(|w| match w {
            WorkChange::Apply(a) => Some((a.cluster.clone(), a.revision.clone())),
            _ => None,
        })
        .collect()
}

/// cluster → (status, note) of a plan's reports.
fn statuses(p: &crate::Plan) -> BTreeMap<String, (RolloutStatus, Option<String>)> {
    p.clusters
        .iter()
        .map(|r| (r.cluster.to_string(), (r.status, r.note.clone())))
        .collect()
}

fn plan_with(f: &Fixture, p: &PluginInputs) -> crate::Plan {
    let o = crate::Observed {
        plugins: p,
        ..f.observed()
    };
    plan(&o, t0(), &f.cfg)
}

fn condition(p: &crate::Plan, type_: &str) -> Option<(String, String, String)> {
    let list = p.status.as_ref()?.conditions.as_deref()?;
    conditions::find(list, type_).map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

#[test]
fn a_cluster_its_agent_reports_done_waits_for_the_plugin() {
    let strategy = json!({"type": "All", "plugin": "judge"});
    let (mut f, update) = fixture(strategy, &["c1", "c2", "c3", "c4"]);
    for c in ["c1", "c3", "c4"] {
        f.work(c, &update, secs(60), Reported::Done);
    }
    f.work("c2", &update, secs(60), Reported::Progressing);
    let mut p = plugins(available());
    said(&mut p, "c3", &update, Verdict::Succeeded, t0() - secs(30));
    said(&mut p, "c4", &update, Verdict::Failed, t0() - secs(30));
    let out = plan_with(&f, &p);
    use RolloutStatus::*;
    let got = statuses(&out);
    assert_eq!(got["c1"], (Validating, None));
    assert_eq!(got["c2"].0, Progressing);
    assert_eq!(got["c3"], (Succeeded, None));
    assert_eq!(
        got["c4"],
        (Failed, Some("plugin judge: smoke test FAILED".into()))
    );
    assert_eq!(
        out.plugin_calls.validations,
        [Validation {
            target: target(&update),
            cluster: "c1".into(),
            manifest_work: "ns.app".into(),
            revision: update.clone(),
            generation: 1,
            since: Some(t0() - secs(60)),
            aborting: false,
        }],
        "only the cluster without a verdict is asked about"
    );

    assert_eq!(
        condition(&out, mwrs_condition::PLUGIN_LOADED),
        Some((
            "True".into(),
            "Available".into(),
            "judge plugin is available (judge 1.0).".into()
        ))
    );
}

/// The verdict annotations `out` writes, by cluster.
fn verdict_writes(out: &crate::Plan) -> Vec<(String, Option<String>)> {
    out.works
        .iter()
        .map(|w| match w {
            WorkChange::Relabel {
                cluster,
                annotations,
                ..
            } => (
                cluster.clone(),
                annotations.get(labels::PLUGIN_VERDICT).cloned(),
            ),
            other => panic!("only a verdict is written: {other:?}"),
        })
        .collect()
}

#[test]
fn a_succeeded_verdict_is_kept_in_the_status_not_on_its_manifestwork() {
    let (mut f, update) = fixture(json!({"type": "All", "plugin": "judge"}), &["c1", "c2"]);
    f.work("c1", &update, secs(60), Reported::Done);
    f.work("c2", &update, secs(60), Reported::Done);
    let mut p = plugins(available());
    said(&mut p, "c1", &update, Verdict::Succeeded, t0() - secs(30));
    said(&mut p, "c2", &update, Verdict::InProgress, t0() - secs(30));
    let out = plan_with(&f, &p);
    assert!(
        out.works.is_empty(),
        "no ManifestWork write: {:?}",
        out.works
    );
    let record = out.status.as_ref().and_then(|s| s.plugin_judged.clone());
    let record = record.expect("the status records the judged cluster");
    assert_eq!(
        (record.revision.as_str(), record.count),
        (update.as_str(), 1)
    );
    // A replica that knows nothing (a restart) takes c1 from the status, asks about c2
    // only, and keeps the record as it is.
    *f.status() = out.status.clone().unwrap();
    let restarted = plugins(available());
    let out = plan_with(&f, &restarted);
    assert_eq!(statuses(&out)["c1"].0, RolloutStatus::Succeeded);
    assert_eq!(statuses(&out)["c2"].0, RolloutStatus::Validating);
    let asked: Vec<&str> = out
        .plugin_calls
        .validations
        .iter()
        .map(|v| v.cluster.as_str())
        .collect();
    assert_eq!(asked, ["c2"]);
    assert!(out.works.is_empty(), "{:?}", out.works);
    let judged = |s: Option<&mwrs_api::mwrs::ManifestWorkReplicaSetStatus>| {
        s.and_then(|s| s.plugin_judged.clone())
    };
    assert_eq!(
        judged(out.status.as_ref()),
        judged(f.mwrs.status.as_ref()),
        "the same record"
    );
    // The plugin down meanwhile: c1 stays judged.
    let out = plan_with(&f, &plugins(unreachable()));
    assert_eq!(statuses(&out)["c1"].0, RolloutStatus::Succeeded);
    assert_eq!(statuses(&out)["c2"].0, RolloutStatus::Validating);
}

#[test]
fn a_status_record_counts_only_sealed_and_for_the_generation_judged() {
    let (mut f, update) = fixture(json!({"type": "All", "plugin": "judge"}), &["c1", "c2"]);
    f.work("c1", &update, secs(60), Reported::Done);
    f.work("c2", &update, secs(60), Reported::Done);
    let mut p = plugins(available());
    said(&mut p, "c1", &update, Verdict::Succeeded, t0() - secs(30));
    let sealed = plan_with(&f, &p).status.unwrap();
    let restarted = plugins(available());
    let asked = |f: &Fixture| {
        let out = plan_with(f, &restarted);
        let mut asked: Vec<String> = out
            .plugin_calls
            .validations
            .iter()
            .map(|v| v.cluster.clone())
            .collect();
        asked.sort();
        asked
    };
    // Forged by whoever can write the status: every cluster judged, no seal.
    let mut forged = sealed.clone();
    let record = forged.plugin_judged.as_mut().unwrap();
    record.clusters = "Aw==".into();
    record.count = 2;
    *f.status() = forged;
    assert_eq!(asked(&f), ["c1", "c2"], "a forged record counts for none");
    // The record for another MWRS (same names, another uid).
    *f.status() = sealed.clone();
    let uid = f.mwrs.metadata.uid.replace("another".into());
    assert_eq!(asked(&f), ["c1", "c2"]);
    f.mwrs.metadata.uid = uid;
    assert_eq!(asked(&f), ["c2"], "the sealed record, for this MWRS");
    // c1's ManifestWork edited since it was judged (another generation).
    let w = f.works.iter_mut().find(|w| &*w.cluster == "c1").unwrap();
    w.generation = 2;
    let at = t0() - secs(20);
    for (type_, status) in [("Applied", "True"), ("Available", "True")] {
        w.set_condition(type_, status, 2, at);
    }
    for type_ in ["Progressing", "Degraded"] {
        w.set_condition(type_, "False", 2, at);
    }
    assert_eq!(
        asked(&f),
        ["c1", "c2"],
        "a judged ManifestWork edited since"
    );
}

#[test]
fn a_failed_verdict_is_written_onto_its_manifestwork_once() {
    let (mut f, update) = fixture(json!({"type": "All", "plugin": "judge"}), &["c1", "c2"]);
    f.work("c1", &update, secs(60), Reported::Done);
    f.work("c2", &update, secs(60), Reported::Done);
    let mut p = plugins(available());
    said(&mut p, "c1", &update, Verdict::Failed, t0() - secs(30));
    said(&mut p, "c2", &update, Verdict::InProgress, t0() - secs(30));
    let out = plan_with(&f, &p);
    let w = f.works.iter().find(|w| &*w.cluster == "c1").unwrap();
    let place = MarkPlace {
        mwrs_uid: "",
        cluster: "c1",
        work: &w.name,
        work_uid: w.uid,
        at_creation: w.generation == 1,
    };
    let value = p.verdicts["c1"].to_annotation(&p.marks, place).unwrap();
    assert_eq!(
        verdict_writes(&out),
        [("c1".to_string(), Some(value.clone()))]
    );
    // Once the ManifestWork carries it, nothing more is written, and a controller that
    // knows nothing (a restart, the CLI) reads it from there.
    let w = f.works.iter_mut().find(|w| &*w.cluster == "c1").unwrap();
    let mut annotations = (*w.annotations).clone();
    annotations.insert(labels::PLUGIN_VERDICT.into(), value);
    w.annotations = std::sync::Arc::new(annotations);
    let out = plan_with(&f, &p);
    assert!(
        out.works
            .iter()
            .all(|w| !matches!(w, WorkChange::Relabel { .. }))
    );
    let out = plan_with(&f, &plugins(unreachable()));
    assert_eq!(statuses(&out)["c1"].0, RolloutStatus::Failed);
    assert_eq!(statuses(&out)["c2"].0, RolloutStatus::Validating);
}

#[test]
fn a_verdict_on_another_revision_does_not_count() {
    let (mut f, update) = fixture(json!({"type": "All", "plugin": "judge"}), &["c1"]);
    f.work("c1", &update, secs(60), Reported::Done);
    let mut p = plugins(available());
    said(&mut p, "c1", STABLE, Verdict::Succeeded, t0() - secs(30));
    let out = plan_with(&f, &p);
    assert_eq!(statuses(&out)["c1"].0, RolloutStatus::Validating);
    assert_eq!(out.plugin_calls.validations.len(), 1);
    assert_eq!(
        out.recheck,
        Some(secs(10)),
        "an answer that changes nothing still leaves the next question due"
    );
}

#[test]
fn a_cluster_asked_recently_is_asked_again_after_the_poll_interval() {
    let (mut f, update) = fixture(json!({"type": "All", "plugin": "judge"}), &["c1"]);
    f.work("c1", &update, secs(60), Reported::Done);
    let mut p = plugins(available());
    said(&mut p, "c1", &update, Verdict::InProgress, t0() - secs(4));
    p.asked.insert("c1".into(), t0() - secs(4));
    let out = plan_with(&f, &p);
    assert_eq!(
        statuses(&out)["c1"],
        (
            RolloutStatus::Validating,
            Some("plugin judge: smoke test IN_PROGRESS".into())
        )
    );
    assert!(out.plugin_calls.validations.is_empty());
    assert_eq!(
        out.recheck,
        Some(secs(6)),
        "asked again 10 s after the last time"
    );
    // What the plugin last said is in the status, for the CLI.
    let (_, _, message) = condition(&out, mwrs_condition::PROGRESSING).unwrap();
    assert!(
        message.ends_with("; validating: c1: plugin judge: smoke test IN_PROGRESS"),
        "{message}"
    );
}

#[test]
fn in_progress_past_the_deadline_times_out_and_aborts() {
    let strategy = json!({"type": "All", "plugin": "judge",
        "all": {"progressDeadline": "1m"}});
    let (mut f, update) = fixture(strategy, &["c1", "c2"]);
    f.work("c1", &update, secs(120), Reported::Done);
    f.work("c2", &update, secs(120), Reported::Done);
    let mut p = plugins(available());
    said(&mut p, "c1", &update, Verdict::Succeeded, t0() - secs(100));
    said(&mut p, "c2", &update, Verdict::InProgress, t0() - secs(5));
    let out = plan_with(&f, &p);
    assert_eq!(statuses(&out)["c2"].0, RolloutStatus::TimeOut);
    let status = out.status.as_ref().unwrap();
    assert!(status.aborted_time.is_some(), "AbortAll on the timeout");
}

#[test]
fn a_failed_verdict_aborts_under_abort_all() {
    let (mut f, update) = fixture(json!({"type": "All", "plugin": "judge"}), &["c1", "c2"]);
    f.work("c1", &update, secs(60), Reported::Done);
    f.work("c2", &update, secs(60), Reported::Done);
    let mut p = plugins(available());
    said(&mut p, "c1", &update, Verdict::Succeeded, t0() - secs(30));
    said(&mut p, "c2", &update, Verdict::Failed, t0() - secs(30));
    let out = plan_with(&f, &p);
    let status = out.status.as_ref().unwrap();
    assert!(status.aborted_time.is_some());
    assert_eq!(status.current_revision.as_deref(), Some(STABLE));
}

#[test]
fn a_plugin_that_does_not_answer_holds_the_rollout() {
    let strategy = json!({"type": "All", "plugin": "judge",
        "all": {"progressDeadline": "1m"}});
    let (mut f, update) = fixture(strategy, &["c1", "c2"]);
    f.work("c1", &update, secs(600), Reported::Done);
    f.work("c2", &update, secs(600), Reported::Done);
    let mut p = plugins(unreachable());
    said(&mut p, "c1", &update, Verdict::Succeeded, t0() - secs(500));
    let out = plan_with(&f, &p);
    let got = statuses(&out);
    assert_eq!(got["c1"].0, RolloutStatus::Succeeded, "its verdict stands");
    assert_eq!(
        got["c2"].0,
        RolloutStatus::Validating,
        "held, not timed out"
    );
    let note = got["c2"].1.clone().unwrap_or_default();
    assert!(
        note.starts_with("plugin judge is unreachable: connection refused (counts as failed from "),
        "{note}"
    );
    assert!(
        out.plugin_calls.validations.is_empty(),
        "nothing is asked of a plugin that is down"
    );
    let status = out.status.as_ref().unwrap();
    assert_eq!(
        status.current_revision.as_deref(),
        Some(STABLE),
        "not promoted"
    );
    assert!(status.aborted_time.is_none(), "not aborted");
    assert_eq!(
        out.recheck,
        Some(secs(10)),
        "looked at again after the poll interval"
    );
    let (s, reason, message) = condition(&out, mwrs_condition::PLUGIN_LOADED).unwrap();
    assert_eq!((s.as_str(), reason.as_str()), ("False", "Failed"));
    assert!(
        message.contains("judge plugin is unreachable: connection refused"),
        "{message}"
    );
}

#[test]
fn a_plugin_back_from_an_outage_has_the_whole_deadline_to_answer() {
    let strategy = json!({"type": "All", "plugin": "judge",
        "all": {"progressDeadline": "1m"}});
    let (mut f, update) = fixture(strategy, &["c1"]);
    f.work("c1", &update, secs(600), Reported::Done);
    // Answering again for a second: the outage before does not count.
    let p = plugins(PluginHealth::Available {
        description: "judge 1.0".into(),
        since: t0() - secs(1),
    });
    let out = plan_with(&f, &p);
    let report = &out.clusters[0];
    assert_eq!(report.status, RolloutStatus::Validating);
    assert_eq!(report.since, Some(t0() - secs(1)));
    assert_eq!(out.plugin_calls.validations.len(), 1);
    let status = out.status.as_ref().unwrap();
    assert!(status.aborted_time.is_none());
}

#[test]
fn a_held_cluster_never_times_out_even_at_a_zero_deadline() {
    for kind in ["all", "progressive"] {
        let strategy = json!({"type": if kind == "all" { "All" } else { "Progressive" },
            "plugin": "judge", kind: {"progressDeadline": "0s"}});
        let (mut f, update) = fixture(strategy, &["c1", "c2"]);
        f.work("c1", &update, secs(60), Reported::Done);
        let out = plan_with(&f, &plugins(unreachable()));
        assert_eq!(statuses(&out)["c1"].0, RolloutStatus::Validating, "{kind}");
        let status = out.status.as_ref().unwrap();
        assert!(status.aborted_time.is_none(), "{kind}: {status:?}");
    }
}

#[test]
fn a_plugin_not_registered_holds_and_says_so() {
    let (mut f, update) = fixture(json!({"type": "All", "plugin": "judge"}), &["c1"]);
    f.work("c1", &update, secs(60), Reported::Done);
    let out = plan_with(&f, &PluginInputs::default());
    assert_eq!(
        statuses(&out)["c1"],
        (
            RolloutStatus::Validating,
            Some("plugin judge is not registered".into())
        )
    );
    let (s, _, message) = condition(&out, mwrs_condition::PLUGIN_LOADED).unwrap();
    assert_eq!(s, "False");
    assert!(
        message.contains("not registered in the controller's --work-config"),
        "{message}"
    );
}

#[test]
fn without_a_plugin_nothing_changes_and_the_condition_goes() {
    let (mut f, update) = fixture(json!({"type": "All"}), &["c1"]);
    f.work("c1", &update, secs(60), Reported::Done);
    f.status().conditions = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
            type_: mwrs_condition::PLUGIN_LOADED.into(),
            status: "True".into(),
            reason: "Available".into(),
            message: "judge plugin is available.".into(),
            observed_generation: Some(1),
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t0()),
        },
    ]);
    let out = plan_with(&f, &plugins(unreachable()));
    assert_eq!(statuses(&out)["c1"].0, RolloutStatus::Succeeded);
    assert!(out.plugin_calls.validations.is_empty());
    assert_eq!(condition(&out, mwrs_condition::PLUGIN_LOADED), None);
}

#[test]
fn a_plugin_name_that_cannot_be_one_is_refused_by_field() {
    let m = mwrs_with(json!({"type": "All", "plugin": "Judge_1"}), Some(STABLE));
    let e = crate::validate::validate(&m.spec, usize::MAX).unwrap_err();
    assert_eq!(e.field, "spec.placementRefs[0].rolloutStrategy.plugin");
}

#[test]
fn the_update_revision_is_written_once_the_plugin_answered_begin_rollout() {
    let (mut f, update) = fixture(
        json!({"type": "All", "plugin": "judge"}),
        &["c1", "c2", "c3", "c4"],
    );
    for c in ["c2", "c3", "c4"] {
        f.work(c, &update, secs(60), Reported::Done);
    }
    let mut p = plugins(available());
    let out = plan_with(&f, &p);
    assert_eq!(
        applies(&out),
        [],
        "nothing written before BeginRollout answers"
    );
    let begin = Begin {
        target: target(&update),
        cluster: "c1".into(),
        revision: update.clone(),
        template: template_of(&f, &update),
        aborting: false,
    };
    assert_eq!(out.plugin_calls.begins, [begin]);
    assert_eq!(out.recheck, Some(secs(10)));
    assert_eq!(statuses(&out)["c1"].0, RolloutStatus::ToApply);

    // Sent, not answered yet: not sent again before the poll interval.
    let mut sent = sent(&update, false, 4);
    p.begun.insert("c1".into(), sent.clone());
    let out = plan_with(&f, &p);
    assert_eq!((applies(&out), out.plugin_calls.begins.len()), (vec![], 0));
    assert_eq!(out.recheck, Some(secs(6)));

    sent.acked = true;
    p.begun.insert("c1".into(), sent.clone());
    let out = plan_with(&f, &p);
    assert_eq!(applies(&out), [("c1".to_string(), update.clone())]);
    assert!(out.plugin_calls.begins.is_empty());

    // An answer about another revision, or an abort, does not count.
    for (revision, aborting) in [(STABLE, false), (update.as_str(), true)] {
        let other = Begun {
            revision: revision.into(),
            aborting,
            ..sent.clone()
        };
        p.begun.insert("c1".into(), other);
        let out = plan_with(&f, &p);
        assert_eq!(out.plugin_calls.begins.len(), 1, "{revision} {aborting}");
        assert_eq!(applies(&out), []);
    }
}

#[test]
fn a_plugin_that_does_not_answer_starts_no_cluster() {
    let (f, _) = fixture(json!({"type": "All", "plugin": "judge"}), &["c1", "c2"]);
    for health in [Some(unreachable()), None] {
        let p = match &health {
            Some(h) => plugins(h.clone()),
            None => PluginInputs::default(),
        };
        let out = plan_with(&f, &p);
        assert_eq!(applies(&out), [], "{health:?}");
        assert!(out.plugin_calls.is_empty(), "{health:?}");
    }
}

#[test]
fn an_abort_reverts_at_once_tells_the_plugin_and_validates_each_revert() {
    let (mut f, update) = fixture(
        json!({"type": "All", "plugin": "judge"}),
        &["c1", "c2", "c3", "c4"],
    );
    f.status().aborted_time = Some(mwrs_api::Time(t0() - secs(30)));
    f.work("c1", &update, secs(60), Reported::Done);
    f.work("c2", STABLE, secs(20), Reported::Done);
    f.work("c3", STABLE, secs(20), Reported::Done);
    f.work("c4", STABLE, secs(20), Reported::Done);
    let mut p = plugins(available());
    said(&mut p, "c3", STABLE, Verdict::Succeeded, t0() - secs(5));
    said(&mut p, "c4", STABLE, Verdict::Failed, t0() - secs(5));
    let out = plan_with(&f, &p);
    assert_eq!(applies(&out), [("c1".to_string(), STABLE.to_string())]);
    assert_eq!(
        out.plugin_calls.begins,
        [Begin {
            target: target(&update),
            cluster: "c1".into(),
            revision: STABLE.into(),
            template: template_of(&f, STABLE),
            aborting: true,
        }],
        "BeginAbort about the cluster reverted, not those already back"
    );
    let asked: Vec<(&str, bool)> = out
        .plugin_calls
        .validations
        .iter()
        .map(|v| (v.cluster.as_str(), v.aborting))
        .collect();
    assert_eq!(asked, [("c2", true)], "ValidateAbortCompletion");
    let got = statuses(&out);
    assert_eq!(got["c2"].0, RolloutStatus::Validating);
    assert_eq!(got["c3"].0, RolloutStatus::Succeeded);
    assert_eq!(
        got["c4"],
        (
            RolloutStatus::Failed,
            Some("plugin judge: smoke test FAILED".into())
        ),
        "a revert the plugin fails is reported, and nothing more happens"
    );
    let progress = &out.plugin_calls.progress;
    assert_eq!(progress.len(), 1);
    assert!(progress[0].aborting);

    // Told once; and a plugin that does not answer delays no revert.
    p.begun.insert("c1".into(), sent(STABLE, true, 0));
    let out = plan_with(&f, &p);
    assert!(out.plugin_calls.begins.is_empty());
    let out = plan_with(&f, &plugins(unreachable()));
    assert_eq!(applies(&out), [("c1".to_string(), STABLE.to_string())]);
    assert!(out.plugin_calls.is_empty());
}

#[test]
fn progress_is_sent_when_the_states_change_not_when_they_age() {
    let (mut f, update) = fixture(json!({"type": "All", "plugin": "judge"}), &["c1", "c2"]);
    f.work("c1", &update, secs(60), Reported::Progressing);
    f.work("c2", &update, secs(60), Reported::Progressing);
    let mut p = plugins(available());
    let out = plan_with(&f, &p);
    let progress = &out.plugin_calls.progress;
    assert_eq!(progress.len(), 1);
    let states: Vec<(&str, RolloutStatus)> = progress[0]
        .clusters
        .iter()
        .map(|c| (&*c.cluster, c.status))
        .collect();
    use RolloutStatus::*;
    assert_eq!(states, [("c1", Progressing), ("c2", Progressing)]);
    p.progressed.insert("p".into(), progress[0].fingerprint);
    assert!(plan_with(&f, &p).plugin_calls.progress.is_empty());
    // Later, the same states: nothing to tell.
    f.works.retain(|w| &*w.cluster != "c2");
    f.work("c2", &update, secs(90), Reported::Progressing);
    assert!(plan_with(&f, &p).plugin_calls.progress.is_empty());
    f.works.retain(|w| &*w.cluster != "c2");
    f.work("c2", &update, secs(90), Reported::Done);
    assert_eq!(plan_with(&f, &p).plugin_calls.progress.len(), 1);
    // Nothing is sent to a plugin that does not answer.
    let mut down = plugins(unreachable());
    down.progressed.clear();
    assert!(plan_with(&f, &down).plugin_calls.progress.is_empty());
}

/// The spec a plugin returns: the template with one more annotation on the ConfigMap.
fn mutation_of(f: &Fixture) -> Mutation {
    let mut spec = f.mwrs.spec.manifest_work_template.to_value();
    spec["workload"]["manifests"][0]["metadata"]["annotations"] = json!({"judge": "was here"});
    Mutation::new(spec)
}

/// The spec each applied ManifestWork gets instead of its template: (cluster, digest).
fn specs(p: &crate::Plan) -> Vec<(String, Option<String>)> {
    p.works
        .iter()
        .filter_map(|w| match w {
            WorkChange::Apply(a) => Some((
                a.cluster.clone(),
                a.spec.as_deref().map(|s| crate::hash::digest(s).to_hex()),
            )),
            _ => None,
        })
        .collect()
}

/// An MWRS over `c1` whose plugin answered BeginRollout and MutateManifestWork with
/// [`mutation_of`]: the fixture, the update revision, the mutation, the plugins that know
/// the answer, and the plan's first write.
fn written_with_the_plugins_spec() -> (Fixture, String, Mutation, PluginInputs, WorkApply) {
    let (f, update) = fixture(json!({"type": "All", "plugin": "judge"}), &["c1"]);
    let mutation = mutation_of(&f);
    let mut p = plugins(available());
    p.begun.insert(
        "c1".into(),
        Begun {
            acked: true,
            mutation: Some(mutation.clone()),
            ..sent(&update, false, 1)
        },
    );
    let out = plan_with(&f, &p);
    let Some(WorkChange::Apply(a)) = out.works.first() else {
        panic!("{:?}", out.works)
    };
    let a = a.clone();
    (f, update, mutation, p, a)
}

#[test]
fn the_spec_the_plugin_returns_is_written_and_then_counts_as_the_revision() {
    let (mut f, update, mutation, p, a) = written_with_the_plugins_spec();
    let hex = mutation.digest.to_hex();
    assert_eq!(
        a.spec.as_deref().map(|s| crate::hash::digest(s).to_hex()),
        Some(hex.clone())
    );
    let mark = a.annotations[labels::PLUGIN_SPEC_DIGEST].clone();
    assert!(
        mark.starts_with(&format!("{hex}.")),
        "the digest, sealed: {mark}"
    );
    assert_eq!(a.revision, update);

    // Its ManifestWork with that spec carries the revision, also for a controller that
    // knows nothing of the plugin's answer (a restart): nothing is written again.
    f.work("c1", &update, secs(30), Reported::Done);
    let w = f.works.iter_mut().find(|w| &*w.cluster == "c1").unwrap();
    w.spec_digest = Some(mutation.digest);
    let mut annotations = (*w.annotations).clone();
    annotations.insert(labels::PLUGIN_SPEC_DIGEST.into(), mark);
    w.annotations = std::sync::Arc::new(annotations);
    for p in [p.clone(), plugins(available())] {
        let out = plan_with(&f, &p);
        assert_eq!(applies(&out), [], "{:?}", out.works);
        assert_eq!(statuses(&out)["c1"].0, RolloutStatus::Validating);
    }
    // A spec edited by hand is not the plugin's: written again, after the plugin is
    // asked again.
    let w = f.works.iter_mut().find(|w| &*w.cluster == "c1").unwrap();
    w.spec_digest = Some(crate::hash::digest(&json!({"edited": true})));
    let out = plan_with(&f, &plugins(available()));
    assert_eq!(applies(&out), []);
    assert_eq!(out.plugin_calls.begins.len(), 1);
    let out = plan_with(&f, &p);
    assert_eq!(
        specs(&out),
        [("c1".to_string(), Some(mutation.digest.to_hex()))]
    );
    // The same hand edit with a digest mark written over it (rules §12.2): without the
    // controller's seal it vouches for nothing.
    let edited = crate::hash::digest(&json!({"edited": true}));
    for forged in [
        edited.to_hex(),
        format!("{}.{}", edited.to_hex(), "0".repeat(64)),
    ] {
        let w = f.works.iter_mut().find(|w| &*w.cluster == "c1").unwrap();
        let mut annotations = (*w.annotations).clone();
        annotations.insert(labels::PLUGIN_SPEC_DIGEST.into(), forged);
        w.annotations = std::sync::Arc::new(annotations);
        let out = plan_with(&f, &plugins(available()));
        assert_eq!(
            out.plugin_calls.begins.len(),
            1,
            "asked again, to write again"
        );
        let out = plan_with(&f, &p);
        assert_eq!(
            specs(&out),
            [("c1".to_string(), Some(mutation.digest.to_hex()))]
        );
    }
}

/// Security review G1: the plugin's spec set back by hand to the revision's raw template
/// is an edit too. The sealed mark says the plugin's spec belongs there, so the cluster
/// does not carry the revision until the plugin's spec is written again.
#[test]
fn a_hand_edit_back_to_the_raw_template_is_written_over() {
    let (mut f, update, mutation, p, a) = written_with_the_plugins_spec();
    let mark = a.annotations[labels::PLUGIN_SPEC_DIGEST].clone();
    // The ManifestWork keeps the sealed mark; its spec digest is the raw template's.
    f.work("c1", &update, secs(30), Reported::Done);
    let w = f.works.iter_mut().find(|w| &*w.cluster == "c1").unwrap();
    assert_ne!(w.spec_digest, Some(mutation.digest));
    let mut annotations = (*w.annotations).clone();
    annotations.insert(labels::PLUGIN_SPEC_DIGEST.into(), mark);
    w.annotations = std::sync::Arc::new(annotations);
    let out = plan_with(&f, &p);
    assert_eq!(
        specs(&out),
        [("c1".to_string(), Some(mutation.digest.to_hex()))],
        "the plugin's spec written again"
    );
    let out = plan_with(&f, &plugins(available()));
    assert_eq!(
        out.plugin_calls.begins.len(),
        1,
        "asked again, to write again"
    );
}

#[test]
fn a_forged_succeeded_verdict_does_not_promote() {
    let (mut f, update) = fixture(json!({"type": "All", "plugin": "judge"}), &["c1"]);
    f.work("c1", &update, secs(60), Reported::Done);
    let mut p = plugins(available());
    said(&mut p, "c1", &update, Verdict::InProgress, t0() - secs(5));
    let w = f.works.iter_mut().find(|w| &*w.cluster == "c1").unwrap();
    let place = MarkPlace {
        mwrs_uid: "",
        cluster: "c1",
        work: &w.name,
        work_uid: w.uid,
        at_creation: w.generation == 1,
    };
    let v = ClusterVerdict {
        plugin: "judge".into(),
        revision: update.clone(),
        generation: 1,
        verdict: Verdict::Succeeded,
        message: "certified by the spoke".into(),
        at: t0() - secs(10),
    };
    let forged = v.to_annotation(&Marks::AsWritten, place).unwrap();
    let under_other_key = v
        .to_annotation(&Marks::sealed(MarkKey::new(&[9; 32]).unwrap()), place)
        .unwrap();
    for value in [forged, under_other_key] {
        let w = f.works.iter_mut().find(|w| &*w.cluster == "c1").unwrap();
        let mut annotations = (*w.annotations).clone();
        annotations.insert(labels::PLUGIN_VERDICT.into(), value);
        w.annotations = std::sync::Arc::new(annotations);
        let out = plan_with(&f, &p);
        assert_eq!(statuses(&out)["c1"].0, RolloutStatus::Validating);
        let status = out.status.as_ref().unwrap();
        assert_eq!(
            status.current_revision.as_deref(),
            Some(STABLE),
            "not promoted"
        );
    }
}

/// Security review K3: a sealed SUCCEEDED verdict copied onto a ManifestWork deleted and
/// made again under the same name, brought to the same generation, promotes nothing: the
/// seal names the ManifestWork's uid.
#[test]
fn a_verdict_sealed_for_a_manifestwork_made_again_does_not_promote() {
    use crate::work::WorkUid;
    use mwrs_api::work::condition as work_condition;
    let (mut f, update) = fixture(json!({"type": "All", "plugin": "judge"}), &["c1"]);
    f.work("c1", &update, secs(60), Reported::Done);
    let at_generation_2 = |f: &mut Fixture, uid: u8| {
        let w = f.works.iter_mut().find(|w| &*w.cluster == "c1").unwrap();
        w.uid = Some(WorkUid([uid; 16]));
        w.generation = 2;
        let at = t0() - secs(60);
        w.set_condition(work_condition::APPLIED, "True", 2, at);
        w.set_condition(work_condition::AVAILABLE, "True", 2, at);
        w.set_condition(work_condition::PROGRESSING, "False", 2, at);
        w.set_condition(work_condition::DEGRADED, "False", 2, at);
    };
    at_generation_2(&mut f, 1);
    let p = plugins(available());
    let w = f.works.iter().find(|w| &*w.cluster == "c1").unwrap();
    let place = MarkPlace {
        mwrs_uid: "",
        cluster: "c1",
        work: &w.name,
        work_uid: w.uid,
        at_creation: false,
    };
    let sealed = ClusterVerdict {
        plugin: "judge".into(),
        revision: update.clone(),
        generation: 2,
        verdict: Verdict::Succeeded,
        message: "healthy".into(),
        at: t0() - secs(10),
    }
    .to_annotation(&p.marks, place)
    .unwrap();
    let w = f.works.iter_mut().find(|w| &*w.cluster == "c1").unwrap();
    let mut annotations = (*w.annotations).clone();
    annotations.insert(labels::PLUGIN_VERDICT.into(), sealed);
    w.annotations = Arc::new(annotations);
    let out = plan_with(&f, &p);
    assert_eq!(statuses(&out)["c1"].0, RolloutStatus::Succeeded, "its own");

    at_generation_2(&mut f, 2);
    let out = plan_with(&f, &p);
    assert_eq!(statuses(&out)["c1"].0, RolloutStatus::Validating);
    assert_eq!(out.plugin_calls.validations.len(), 1, "asked again");
    let status = out.status.as_ref().unwrap();
    assert_eq!(status.current_revision.as_deref(), Some(STABLE));
}

#[test]
fn refused_begins_past_the_budget_fail_the_cluster_and_abort_all() {
    let strategy = json!({"type": "All", "plugin": "judge", "failureStrategy": "AbortAll"});
    let (f, update) = fixture(strategy, &["c1", "c2"]);
    let mut p = plugins(available());
    for c in ["c1", "c2"] {
        p.begun.insert(c.into(), sent(&update, false, 30));
    }
    let run = |count| ErrorRun {
        plugin: "judge".into(),
        revision: update.clone(),
        count,
        since: t0() - secs(40),
        last: "MutateManifestWork: refused: spec_json drops manifest v1 ConfigMap default/app"
            .into(),
    };
    p.errors.insert("c1".into(), run(2));
    let out = plan_with(&f, &p);
    assert_eq!(
        applies(&out),
        [],
        "nothing written before the plugin's usable answer"
    );
    let (status, note) = statuses(&out)["c1"].clone();
    assert_eq!(status, RolloutStatus::ToApply);
    assert!(
        note.unwrap_or_default()
            .contains("(2 of 4 errors in a row)")
    );
    p.errors.insert("c1".into(), run(4));
    let out = plan_with(&f, &p);
    let (status, note) = statuses(&out)["c1"].clone();
    assert_eq!(status, RolloutStatus::Failed);
    assert!(
        note.unwrap_or_default()
            .starts_with("PluginFailed: plugin judge went wrong 4 times")
    );
    let status = out.status.as_ref().unwrap();
    assert!(
        status.aborted_time.is_some(),
        "AbortAll: the failure counts"
    );
}

#[test]
fn skip_plugins_rolls_the_named_revision_out_without_asking() {
    let (mut f, update) = fixture(json!({"type": "All", "plugin": "judge"}), &["c1"]);
    let skip = |f: &mut Fixture, revision: &str| {
        f.mwrs
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(labels::SKIP_PLUGINS.into(), revision.into());
    };
    let generation = f.mwrs.metadata.generation.unwrap_or_default();
    skip(&mut f, &format!("another-revision@{generation}"));
    let out = plan_with(&f, &plugins(unreachable()));
    assert_eq!(applies(&out), [], "held: the skip names another revision");
    // Security review U1: a skip asked for at another generation of the MWRS (the
    // revision left and came back since, by an undo or a GitOps revert) is spent.
    for stale in [update.clone(), format!("{update}@{}", generation - 1)] {
        skip(&mut f, &stale);
        let out = plan_with(&f, &plugins(unreachable()));
        assert_eq!(
            applies(&out),
            [],
            "held: the skip {stale} is not this request's"
        );
    }
    skip(&mut f, &format!("{update}@{generation}"));
    let out = plan_with(&f, &plugins(unreachable()));
    assert_eq!(applies(&out), [("c1".to_string(), update.clone())]);
    assert!(out.plugin_calls.is_empty(), "{:?}", out.plugin_calls);
    let (s, reason, message) = condition(&out, mwrs_condition::PLUGIN_LOADED).unwrap();
    assert_eq!((s.as_str(), reason.as_str()), ("True", "Skipped"));
    assert!(message.contains(&update), "{message}");
    f.work("c1", &update, secs(60), Reported::Done);
    let out = plan_with(&f, &plugins(unreachable()));
    assert_eq!(statuses(&out)["c1"].0, RolloutStatus::Succeeded);
    assert_eq!(
        out.status.as_ref().unwrap().current_revision.as_deref(),
        Some(update.as_str()),
        "promoted without a verdict"
    );
}

#[test]
fn a_revert_is_written_at_once_and_again_with_the_plugins_spec() {
    let (mut f, update) = fixture(json!({"type": "All", "plugin": "judge"}), &["c1"]);
    f.status().aborted_time = Some(mwrs_api::Time(t0() - secs(30)));
    f.work("c1", &update, secs(60), Reported::Done);
    let mut p = plugins(available());
    let out = plan_with(&f, &p);
    assert_eq!(specs(&out), [("c1".to_string(), None)], "no waiting");
    assert_eq!(out.plugin_calls.begins.len(), 1);

    // Reverted; BeginAbort unanswered: sent again after the poll interval.
    f.works.clear();
    f.work("c1", STABLE, secs(5), Reported::Done);
    let mut sent = sent(STABLE, true, 4);
    p.begun.insert("c1".into(), sent.clone());
    let out = plan_with(&f, &p);
    assert_eq!((applies(&out), out.plugin_calls.begins.len()), (vec![], 0));
    assert_eq!(out.recheck, Some(secs(6)));
    sent.at = t0() - secs(10);
    p.begun.insert("c1".into(), sent.clone());
    assert_eq!(plan_with(&f, &p).plugin_calls.begins.len(), 1);

    // Answered with a spec: the revert is written again with it.
    let mutation = mutation_of(&f);
    sent.acked = true;
    sent.mutation = Some(mutation.clone());
    p.begun.insert("c1".into(), sent);
    let out = plan_with(&f, &p);
    assert_eq!(
        specs(&out),
        [("c1".to_string(), Some(mutation.digest.to_hex()))]
    );
    assert!(out.plugin_calls.begins.is_empty());
}

#[test]
fn a_call_the_plugin_answers_with_an_error_holds_that_cluster_only() {
    let strategy = json!({"type": "All", "plugin": "judge", "all": {"progressDeadline": "0s"}});
    let (mut f, update) = fixture(strategy, &["c1", "c2"]);
    f.work("c1", &update, secs(60), Reported::Done);
    f.work("c2", &update, secs(60), Reported::Done);
    let mut p = plugins(available());
    said(&mut p, "c1", &update, Verdict::Erred, t0() - secs(4));
    p.verdicts.get_mut("c1").unwrap().message =
        "ValidateRolloutCompletion: Internal: no metrics for c1".into();
    p.asked.insert("c1".into(), t0() - secs(4));
    said(&mut p, "c2", &update, Verdict::Succeeded, t0() - secs(4));
    let out = plan_with(&f, &p);
    assert_eq!(
        statuses(&out)["c1"],
        (
            RolloutStatus::Validating,
            Some("plugin judge: ValidateRolloutCompletion: Internal: no metrics for c1".into())
        ),
        "held, not timed out, even at a zero deadline"
    );
    assert_eq!(statuses(&out)["c2"].0, RolloutStatus::Succeeded);
    let status = out.status.as_ref().unwrap();
    assert!(status.aborted_time.is_none());
    assert_ne!(status.current_revision.as_deref(), Some(update.as_str()));
    assert_eq!(
        out.recheck,
        Some(secs(6)),
        "asked again after the poll interval"
    );
    let (s, _, _) = condition(&out, mwrs_condition::PLUGIN_LOADED).unwrap();
    assert_eq!(s, "True", "the plugin answers: it is not down");
}

#[test]
fn a_failed_verdict_with_a_huge_message_still_aborts_with_writable_conditions() {
    let strategy = json!({"type": "All", "plugin": "judge", "failureStrategy": "AbortAll",
        "all": {"maxFailures": 0}});
    let (mut f, update) = fixture(strategy, &["c1", "c2", "c3", "c4", "c5", "c6"]);
    let mut p = plugins(available());
    for c in ["c1", "c2", "c3", "c4", "c5", "c6"] {
        f.work(c, &update, secs(60), Reported::Done);
        said(&mut p, c, &update, Verdict::Failed, t0() - secs(5));
        p.verdicts.get_mut(c).unwrap().message = "x".repeat(40_000);
    }
    let out = plan_with(&f, &p);
    let status = out.status.as_ref().unwrap();
    assert!(status.aborted_time.is_some(), "AbortAll starts");
    for c in status.conditions.as_deref().unwrap_or_default() {
        assert!(
            c.message.len() <= conditions::MESSAGE_MAX,
            "{}: {} bytes",
            c.type_,
            c.message.len()
        );
    }
}

#[test]
fn a_placement_ref_overrides_its_plugins_failure_budget() {
    let run = |update: &str, count| ErrorRun {
        plugin: "judge".into(),
        revision: update.to_string(),
        count,
        since: t0() - secs(40),
        last: "BeginRollout: Internal: no quota".into(),
    };
    // Two errors spend a budget of 2 (the registration says 4).
    let strategy = json!({"type": "All", "plugin": "judge",
        "pluginFailurePolicy": {"consecutiveErrors": 2}});
    let (f, update) = fixture(strategy, &["c1"]);
    let mut p = plugins(available());
    p.begun.insert("c1".into(), sent(&update, false, 30));
    p.errors.insert("c1".into(), run(&update, 2));
    assert_eq!(statuses(&plan_with(&f, &p))["c1"].0, RolloutStatus::Failed);
    // Hold over a registration's Fail: held however many errors come.
    let strategy = json!({"type": "All", "plugin": "judge",
        "pluginFailurePolicy": {"policy": "Hold"}});
    let (f, update) = fixture(strategy, &["c1"]);
    p.errors.insert("c1".into(), run(&update, 9));
    p.begun.insert("c1".into(), sent(&update, false, 30));
    let (status, note) = statuses(&plan_with(&f, &p))["c1"].clone();
    assert_eq!(status, RolloutStatus::ToApply);
    assert!(note.unwrap_or_default().contains("failurePolicy Hold"));
}

#[test]
fn a_plugin_failure_policy_that_cannot_be_one_is_refused_by_field() {
    for (policy, field) in [
        (json!({"policy": "Retry"}), "pluginFailurePolicy.policy"),
        (
            json!({"consecutiveErrors": 0}),
            "pluginFailurePolicy.consecutiveErrors",
        ),
        (
            json!({"unavailableFor": "soon"}),
            "pluginFailurePolicy.unavailableFor",
        ),
    ] {
        let strategy = json!({"type": "All", "plugin": "judge", "pluginFailurePolicy": policy});
        let m = mwrs_with(strategy, Some(STABLE));
        let limit = crate::validate::DEFAULT_MANIFEST_SIZE_LIMIT;
        let invalid = crate::validate::validate(&m.spec, limit).expect_err("refused");
        assert_eq!(
            invalid.field,
            format!("spec.placementRefs[0].rolloutStrategy.{field}"),
            "{invalid}"
        );
    }
}

#[test]
fn an_abort_s_reverts_are_never_failed_by_a_plugin_that_is_down() {
    let (mut f, update) = fixture(json!({"type": "All", "plugin": "judge"}), &["c1"]);
    f.status().aborted_time = Some(mwrs_api::Time(t0() - secs(3600)));
    f.work("c1", STABLE, secs(600), Reported::Done);
    // Down for an hour: far past the budget's 5 minutes.
    let down = PluginHealth::Unreachable {
        why: "connection refused".into(),
        since: t0() - secs(3600),
    };
    let out = plan_with(&f, &plugins(down.clone()));
    let (status, note) = statuses(&out)["c1"].clone();
    assert_eq!(status, RolloutStatus::Validating, "held, not failed");
    assert!(note.unwrap_or_default().contains("failurePolicy Hold"));
    // Rolling forward, the same outage fails the cluster.
    let (mut f, update2) = fixture(json!({"type": "All", "plugin": "judge"}), &["c1"]);
    assert_eq!(update, update2);
    f.work("c1", &update, secs(600), Reported::Done);
    let out = plan_with(&f, &plugins(down));
    assert_eq!(statuses(&out)["c1"].0, RolloutStatus::Failed);
}

#[test]
fn a_plugin_down_past_its_budget_before_begin_rollout_fails_the_rollout_under_fail() {
    let strategy = json!({"type": "All", "plugin": "judge", "failureStrategy": "AbortAll"});
    let (f, _) = fixture(strategy, &["c1", "c2"]);
    let down = |ago| PluginHealth::Unreachable {
        why: "connection refused".into(),
        since: t0() - secs(ago),
    };
    // Within the budget: nothing written, nothing failed.
    let out = plan_with(&f, &plugins(down(60)));
    assert_eq!(applies(&out), []);
    assert_eq!(statuses(&out)["c1"].0, RolloutStatus::ToApply);
    assert!(out.status.as_ref().unwrap().aborted_time.is_none());
    // Past it: no BeginRollout can reach them; they count as failed and AbortAll aborts.
    let out = plan_with(&f, &plugins(down(3600)));
    assert_eq!(applies(&out), [], "still nothing written");
    let (status, note) = statuses(&out)["c1"].clone();
    assert_eq!(status, RolloutStatus::Failed);
    assert!(
        note.unwrap_or_default()
            .starts_with("PluginFailed: plugin judge is unreachable")
    );
    assert!(out.status.as_ref().unwrap().aborted_time.is_some());
    // Under Hold: held.
    let mut hold = plugins(down(3600));
    hold.policies.insert(
        "judge".into(),
        crate::plugin::FailurePolicy {
            mode: crate::plugin::FailureMode::Hold,
            ..Default::default()
        },
    );
    assert_eq!(
        statuses(&plan_with(&f, &hold))["c1"].0,
        RolloutStatus::ToApply
    );
}

#[test]
fn a_question_sent_before_the_deadline_is_answered_before_the_cluster_times_out() {
    let strategy = json!({"type": "All", "plugin": "judge",
        "all": {"progressDeadline": "1m"}});
    let (mut f, update) = fixture(strategy, &["c1", "c2"]);
    // Done 120 s ago: the minute ran out 60 s ago.
    f.work("c1", &update, secs(120), Reported::Done);
    f.work("c2", &update, secs(120), Reported::Done);
    let mut p = plugins(available());
    said(&mut p, "c1", &update, Verdict::Succeeded, t0() - secs(100));
    said(&mut p, "c2", &update, Verdict::InProgress, t0() - secs(75));
    // Asked again 65 s ago, inside the minute; the call hangs to its bound.
    p.unanswered.insert("c2".into(), t0() - secs(65));
    let out = plan_with(&f, &p);
    assert_eq!(statuses(&out)["c2"].0, RolloutStatus::Validating);
    let status = out.status.as_ref().unwrap();
    assert!(
        status.aborted_time.is_none(),
        "the answer decides, not the wait"
    );

    // Asked only after the minute had run out: the wait does not bring it back.
    p.unanswered.insert("c2".into(), t0() - secs(55));
    let out = plan_with(&f, &p);
    assert_eq!(statuses(&out)["c2"].0, RolloutStatus::TimeOut);
    assert!(out.status.as_ref().unwrap().aborted_time.is_some());
}
