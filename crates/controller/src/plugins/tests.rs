//! The plugin service without a hub: plugins served in-process.

#![allow(clippy::unwrap_used)]

use super::*;

fn validation(cluster: &str) -> Validation {
    Validation {
        target: CallTarget {
            plugin: "judge".into(),
            placement: "p".into(),
            total_clusters: 1,
            current: None,
            update: "abc".into(),
        },
        cluster: cluster.into(),
        manifest_work: "ns.app".into(),
        revision: "abc".into(),
        generation: 2,
        since: None,
        aborting: false,
    }
}

fn answer(v: api::Verdict, message: &str) -> api::ValidateResponse {
    api::ValidateResponse {
        verdict: v.into(),
        message: message.into(),
    }
}

fn at(s: i64) -> Timestamp {
    Timestamp::from_second(s).unwrap()
}

fn initialized(s: i64) -> Seen {
    Seen::Initialized {
        description: "judge 1.0".into(),
        at: at(s),
    }
}

/// `Initialize` (false) or a call about a cluster (true) found the plugin down.
fn down(s: i64, about_a_cluster: bool) -> Seen {
    Seen::Down {
        why: "gone".into(),
        at: at(s),
        about_a_cluster,
    }
}

fn up_since(s: i64) -> PluginHealth {
    PluginHealth::Available {
        description: "judge 1.0".into(),
        since: at(s),
    }
}

fn down_since(s: i64) -> PluginHealth {
    PluginHealth::Unreachable {
        why: "gone".into(),
        since: at(s),
    }
}

#[test]
fn a_plugin_that_keeps_answering_keeps_the_time_it_started_to() {
    let p = Plugins::default();
    assert!(p.set_health("judge", initialized(10)));
    assert!(!p.set_health("judge", initialized(20)), "the same answer");
    assert!(!p.set_health("judge", Seen::Answered { at: at(22) }));
    assert_eq!(p.inputs("ns/app").health["judge"], up_since(10));
    assert!(p.set_health("judge", down(25, false)));
    assert!(!p.set_health("judge", down(26, false)));
    assert!(p.set_health("judge", initialized(60)));
    assert_eq!(p.inputs("ns/app").health["judge"], up_since(60));
}

#[test]
fn a_flapping_plugin_restarts_neither_its_outage_clock_nor_the_deadlines() {
    // Poll 10 s: a flap is anything under 20 s.
    let p = Plugins::default();
    p.set_health("judge", initialized(0));
    p.set_health("judge", down(100, false));
    // Back for 5 s, down again: the outage still counts from 100.
    assert!(p.set_health("judge", initialized(110)));
    assert_eq!(
        p.inputs("a").health["judge"],
        up_since(0),
        "a short outage keeps deadlines"
    );
    p.set_health("judge", down(115, false));
    assert_eq!(p.inputs("a").health["judge"], down_since(100));
    // Back for long: a new outage starts its own clock.
    p.set_health("judge", initialized(120));
    p.set_health("judge", down(500, false));
    assert_eq!(p.inputs("a").health["judge"], down_since(500));
    // A long outage ends: deadlines count from the recovery.
    p.set_health("judge", initialized(900));
    assert_eq!(p.inputs("a").health["judge"], up_since(900));
}

/// rules §12.6: a plugin whose `Initialize` answers while its calls about clusters
/// fail (its own backend down) stays down from the first failed call until one of
/// those calls succeeds, however often `Initialize` answers meanwhile.
#[test]
fn an_outage_that_calls_took_part_in_ends_only_when_a_call_succeeds() {
    let p = Plugins::default();
    p.set_health("judge", initialized(0));
    assert!(p.set_health("judge", down(100, true)));
    assert_eq!(p.inputs("a").health["judge"], down_since(100));
    let recovering = |why: &str| PluginHealth::Recovering {
        why: why.into(),
        since: at(100),
    };
    assert!(
        p.set_health("judge", initialized(110)),
        "calls are made again"
    );
    assert_eq!(p.inputs("a").health["judge"], recovering("gone"));
    // Calls fail again: still the outage of 100, still asked at each poll.
    let failed = Seen::Down {
        why: "ValidateRolloutCompletion: Unavailable: backend down".into(),
        at: at(115),
        about_a_cluster: true,
    };
    assert!(p.set_health("judge", failed));
    assert!(!p.set_health("judge", initialized(120)));
    assert_eq!(
        p.inputs("a").health["judge"],
        recovering("ValidateRolloutCompletion: Unavailable: backend down")
    );
    // Initialize fails too: down, the same outage.
    p.set_health("judge", down(125, false));
    assert_eq!(p.inputs("a").health["judge"], down_since(100));
    p.set_health("judge", initialized(130));
    assert!(p.set_health("judge", Seen::Answered { at: at(140) }));
    assert_eq!(p.inputs("a").health["judge"], up_since(140));
}

/// One bound on calls in flight per plugin, whichever pass or MWRS makes them.
#[tokio::test]
async fn calls_to_one_plugin_queue_past_its_bound() {
    let p = Plugins::default().with_calls_in_flight(2);
    let first = p.permit("judge").await;
    let second = p.permit("judge").await;
    assert!(first.is_some() && second.is_some());
    let wait = Duration::from_millis(50);
    let third = tokio::time::timeout(wait, p.permit("judge")).await;
    assert!(third.is_err(), "a third call in flight");
    assert!(
        p.permit("other").await.is_some(),
        "another plugin's own bound"
    );
    drop(first);
    assert!(tokio::time::timeout(wait, p.permit("judge")).await.is_ok());
}

/// A replica asked nothing yet knows nothing: only its own calls tell it a plugin is
/// down, and the outage clock starts at the first of them, not at its start.
#[test]
fn a_plugin_is_unknown_until_this_replica_asks_it() {
    let p = Plugins::default();
    assert!(!p.set_health("judge", Seen::Answered { at: at(5) }));
    assert_eq!(p.inputs("a").health["judge"], PluginHealth::Unknown);
    assert!(p.set_health("judge", down(50, false)));
    assert_eq!(p.inputs("a").health["judge"], down_since(50));
}

#[test]
fn errors_in_a_row_are_counted_and_a_usable_answer_ends_them() {
    let p = Plugins::default();
    let v = validation("c1");
    let internal = || tonic::Status::internal("x".repeat(40_000));
    for n in 1..=3u32 {
        assert!(p.record_answer("ns/app", Answer::Validated(v.clone(), Err(internal()))));
        let run = p.inputs("ns/app").errors["c1"].clone();
        assert_eq!((run.count, run.revision.as_str()), (n, "abc"));
        assert!(run.last.len() <= PLUGIN_TEXT_MAX, "cut at intake");
    }
    assert!(p.inputs("ns/app").verdicts["c1"].message.len() <= PLUGIN_TEXT_MAX);
    let ok = answer(api::Verdict::InProgress, &"y".repeat(40_000));
    p.record_answer("ns/app", Answer::Validated(v, Ok(ok)));
    let inputs = p.inputs("ns/app");
    assert!(inputs.errors.is_empty(), "{:?}", inputs.errors);
    assert!(inputs.verdicts["c1"].message.len() <= PLUGIN_TEXT_MAX);
    // A refused MutateManifestWork answer counts too, once per call.
    let b = Begin {
        target: validation("c1").target,
        cluster: "c1".into(),
        revision: "abc".into(),
        template: Arc::new(serde_json::json!({})),
        aborting: false,
    };
    let refused = tonic::Status::invalid_argument(
        "refused: spec_json.workload.manifests: must list at least one manifest",
    );
    let answer = Answer::Begun(b.clone(), Err(("MutateManifestWork", refused.clone())));
    assert!(
        p.refusal_to_report("ns/app", &answer).is_some(),
        "the first of a run"
    );
    p.record_answer("ns/app", answer);
    let again = Answer::Begun(b, Err(("MutateManifestWork", refused)));
    assert_eq!(
        p.refusal_to_report("ns/app", &again),
        None,
        "one Event a run"
    );
    p.record_answer("ns/app", again);
    assert_eq!(p.inputs("ns/app").errors["c1"].count, 2);
}

#[test]
fn an_answer_is_news_only_when_it_differs() {
    let p = Plugins::default();
    let now = Timestamp::from_second(100).unwrap();
    let v = validation("c1");
    let r = |verdict, message| answer(verdict, message);
    assert!(p.record(
        "ns/app",
        &v,
        r(api::Verdict::InProgress, "1 of 3 checks"),
        now
    ));
    assert!(!p.record(
        "ns/app",
        &v,
        r(api::Verdict::InProgress, "1 of 3 checks"),
        now
    ));
    assert!(p.record(
        "ns/app",
        &v,
        r(api::Verdict::InProgress, "2 of 3 checks"),
        now
    ));
    assert!(p.record(
        "ns/app",
        &v,
        r(api::Verdict::Succeeded, "3 of 3 checks"),
        now
    ));
    // An unknown verdict number says nothing final.
    let odd = api::ValidateResponse {
        verdict: 42,
        message: String::new(),
    };
    assert!(p.record("ns/app", &validation("c2"), odd, now));
    let inputs = p.inputs("ns/app");
    assert_eq!(inputs.verdicts["c1"].verdict, Verdict::Succeeded);
    assert_eq!(inputs.verdicts["c2"].verdict, Verdict::InProgress);
    assert!(
        inputs.asked.is_empty(),
        "asked counts from the question, not the answer"
    );
    let calls = PluginCalls {
        validations: vec![v.clone()],
        ..PluginCalls::default()
    };
    p.mark_sent("ns/app", calls.clone(), now);
    assert_eq!(p.inputs("ns/app").asked["c1"], now);
    assert_eq!(p.inputs("ns/app").unanswered["c1"], now, "in flight");
    let later = Timestamp::from_second(130).unwrap();
    p.mark_sent("ns/app", calls, later);
    assert_eq!(p.inputs("ns/app").asked["c1"], later);
    assert_eq!(
        p.inputs("ns/app").unanswered["c1"],
        now,
        "the call in flight was sent first; none was sent again"
    );
    p.landed("ns/app", Sent::Validation(&v));
    assert!(p.inputs("ns/app").unanswered.is_empty(), "answered");
    assert!(p.inputs("ns/other").verdicts.is_empty(), "per MWRS");
    p.forget("ns/app");
    assert!(p.inputs("ns/app").verdicts.is_empty());
}

#[test]
fn an_answer_to_begin_counts_for_what_was_sent_last() {
    let p = Plugins::default();
    let begin = |revision: &str, aborting| Begin {
        target: validation("c1").target,
        cluster: "c1".into(),
        revision: revision.into(),
        template: Arc::new(serde_json::json!({})),
        aborting,
    };
    let now = Timestamp::from_second(100).unwrap();
    let calls = |b: Begin| PluginCalls {
        begins: vec![b],
        ..PluginCalls::default()
    };
    p.mark_sent("ns/app", calls(begin("abc", false)), now);
    assert!(!p.inputs("ns/app").begun["c1"].acked);
    // An answer about what was sent before the last question does not count.
    assert!(!p.record_begun("ns/app", &begin("old", false), None));
    assert!(p.record_begun("ns/app", &begin("abc", false), None));
    assert!(p.inputs("ns/app").begun["c1"].acked);
    // An abort's: news only when it brings a spec to write.
    let ok = Answer::Begun(begin("abc", false), Ok(None));
    p.landed("ns/app", ok.sent());
    p.mark_sent("ns/app", calls(begin("abc", true)), now);
    assert!(!p.record_begun("ns/app", &begin("abc", true), None));
    let m = Mutation::new(serde_json::json!({"workload": {}}));
    assert!(p.record_begun("ns/app", &begin("abc", true), Some(m.clone())));
    assert_eq!(p.inputs("ns/app").begun["c1"].mutation, Some(m));
}

#[test]
fn the_same_spec_for_many_clusters_is_kept_once() {
    let mut specs = HashMap::new();
    let spec = || serde_json::json!({"workload": {"manifests": [{"kind": "ConfigMap"}]}});
    let a = intern(&mut specs, Mutation::new(spec()));
    let b = intern(&mut specs, Mutation::new(spec()));
    assert!(Arc::ptr_eq(&a.spec, &b.spec), "one copy");
    drop((a, b));
    let other = intern(
        &mut specs,
        Mutation::new(serde_json::json!({"workload": {}})),
    );
    assert_eq!(specs.len(), 1, "a spec no cluster holds is dropped");
    assert!(Arc::ptr_eq(&specs[&other.digest], &other.spec));
}

#[test]
fn a_question_in_flight_is_not_sent_again_until_it_lands() {
    let p = Plugins::default();
    let at = |s| Timestamp::from_second(s).unwrap();
    let ask = |clusters: &[&str]| PluginCalls {
        validations: clusters.iter().map(|c| validation(c)).collect(),
        ..PluginCalls::default()
    };
    let sent = p.mark_sent("ns/app", ask(&["c1"]), at(10));
    assert_eq!(sent.validations.len(), 1);
    let again = p.mark_sent("ns/app", ask(&["c1", "c2"]), at(20));
    let clusters: Vec<&str> = again
        .validations
        .iter()
        .map(|v| v.cluster.as_str())
        .collect();
    assert_eq!(clusters, ["c2"], "c1 is still in flight");
    let mut newer = validation("c1");
    newer.revision = "def".into();
    let other = PluginCalls {
        validations: vec![newer],
        ..PluginCalls::default()
    };
    let sent_newer = p.mark_sent("ns/app", other, at(20));
    assert_eq!(
        sent_newer.validations.len(),
        1,
        "another revision is another question"
    );
    assert_eq!(
        p.inputs("ns/app").asked["c1"],
        at(20),
        "counted as asked all the same"
    );
    let answered = Answer::Validated(validation("c1"), Err(tonic::Status::unavailable("")));
    p.landed("ns/app", answered.sent());
    assert_eq!(
        p.mark_sent("ns/app", ask(&["c1"]), at(30))
            .validations
            .len(),
        1
    );
}

#[test]
fn an_error_about_one_cluster_holds_that_cluster_not_the_plugin() {
    let p = Plugins::default();
    let up = up_since(10);
    p.set_health("judge", initialized(10));
    let internal = tonic::Status::internal("no metrics for c1");
    let news = p.record_answer("ns/app", Answer::Validated(validation("c1"), Err(internal)));
    assert!(news);
    let inputs = p.inputs("ns/app");
    assert_eq!(
        inputs.health["judge"], up,
        "the plugin answers: it is not down"
    );
    let v = &inputs.verdicts["c1"];
    assert_eq!(v.verdict, Verdict::Erred);
    assert_eq!(
        v.message,
        "ValidateRolloutCompletion: Internal: no metrics for c1"
    );
    // No answer at all: the plugin is down.
    let gone = tonic::Status::unavailable("connection refused");
    assert!(p.record_answer("ns/app", Answer::Validated(validation("c2"), Err(gone))));
    assert!(matches!(
        p.inputs("ns/app").health["judge"],
        PluginHealth::Unreachable { .. }
    ));
}
