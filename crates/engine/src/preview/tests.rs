#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::rollout::{DecisionGroups, GroupKey};
use mwrs_api::labels;
use mwrs_api::mwrs::{LocalPlacementReference, ManifestWorkReplicaSetSpec};
use mwrs_api::work::ManifestWorkTemplate;
use serde_json::{Value, json};

fn template(version: &str) -> Value {
    json!({"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "app", "namespace": "default"},
        "data": {"version": version}}]}})
}

fn t0() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().unwrap()
}

/// A snapshot of MWRS `app` with one placementRef `p` over `groups`.
fn snapshot(strategy: Value, groups: &[&[&str]]) -> Snapshot {
    let mut mwrs = ManifestWorkReplicaSet::new(
        "app",
        ManifestWorkReplicaSetSpec {
            manifest_work_template: ManifestWorkTemplate::from_value(template("v1")).unwrap(),
            placement_refs: vec![LocalPlacementReference {
                name: "p".into(),
                rollout_strategy: Some(serde_json::from_value(strategy).unwrap()),
            }],
            ..Default::default()
        },
    );
    mwrs.metadata.namespace = Some("default".into());
    mwrs.metadata.generation = Some(1);
    let pairs = groups.iter().enumerate().flat_map(|(i, cs)| {
        cs.iter()
            .map(move |c| (GroupKey::new("", i as i32), c.to_string()))
    });
    Snapshot {
        mwrs,
        placements: vec![PlacementView::found("p", DecisionGroups::from_pairs(pairs))],
        works: Vec::new(),
        revisions: Vec::new(),
        blocked: Vec::new(),
    }
}

fn names(w: &Wave) -> Vec<&str> {
    w.clusters.iter().map(|(c, _)| c.as_str()).collect()
}

/// Each wave's kind and clusters.
fn kinds(p: &Preview) -> Vec<(WaveKind, Vec<&str>)> {
    p.waves.iter().map(|w| (w.kind, names(w))).collect()
}

/// c1-c4 rolled two at a time, then all four reverted in one wave.
fn two_waves_then_revert() -> Vec<(WaveKind, Vec<&'static str>)> {
    vec![
        (WaveKind::Rollout, vec!["c1", "c2"]),
        (WaveKind::Rollout, vec!["c3", "c4"]),
        (WaveKind::Revert, vec!["c1", "c2", "c3", "c4"]),
    ]
}

fn none() -> BTreeSet<String> {
    BTreeSet::new()
}

/// Runs a snapshot to completion and returns it as the hub would then show it, with
/// the template changed to `next`.
fn completed_then(snap: &Snapshot, next: &str) -> Snapshot {
    let nobody = BTreeSet::new();
    let mut sim = Sim::new(snap, &nobody, t0());
    for _ in 0..100 {
        sim.agents();
        let plan = sim.plan(&PlanConfig::default());
        if !(sim.execute(&plan) | sim.answer_plugins(&plan)) {
            break;
        }
    }
    let mut out = snap.clone();
    out.mwrs = sim.mwrs.clone();
    out.works = sim.works.as_slice().to_vec();
    out.revisions = sim.revisions.clone();
    out.mwrs.spec.manifest_work_template =
        ManifestWorkTemplate::from_value(template(next)).unwrap();
    out.mwrs.metadata.generation = Some(2);
    out
}

#[test]
fn a_reader_without_the_manifestworks_sees_the_waves_of_a_settled_fleet() {
    let strategy = json!({"type": "Progressive",
        "progressive": {"maxConcurrency": 2, "minSuccessTime": "1m"}});
    let first = snapshot(strategy, &[&["c1", "c2", "c3", "c4", "c5"]]);
    // The hub: v1 completed an hour ago, then the template changed to v2.
    let nobody = none();
    let mut past = Sim::new(&first, &nobody, t0() - SignedDuration::from_hours(1));
    assert_eq!(past.run(&PreviewConfig::default()).1, End::Complete);
    let mut hub = first.clone();
    hub.mwrs = past.mwrs.clone();
    hub.works = past.works.as_slice().to_vec();
    hub.revisions = past.revisions.clone();
    hub.mwrs.spec.manifest_work_template =
        ManifestWorkTemplate::from_value(template("v2")).unwrap();
    hub.mwrs.metadata.generation = Some(2);

    let mut blind = hub.clone();
    blind.works.clear();
    let assumed = assume_settled(&blind, t0());
    assert_eq!(assumed.works.len(), 5);
    let v1 = hub.works[0].hash();
    assert!(assumed.works.iter().all(|w| w.hash() == v1));
    let cfg = PreviewConfig::default();
    let seen = preview(&hub, &none(), t0(), &cfg);
    let guessed = preview(&assumed, &none(), t0(), &cfg);
    assert_eq!(guessed.waves, seen.waves);
    assert_eq!((guessed.end, guessed.duration), (seen.end, seen.duration));
    assert_eq!(seen.waves.len(), 3);

    // Nothing completed yet: nothing is assumed.
    assert!(assume_settled(&first, t0()).works.is_empty());
}

#[test]
fn progressive_waves_follow_max_concurrency() {
    let snap = snapshot(
        json!({"type": "Progressive", "progressive": {"maxConcurrency": 2}}),
        &[&["c1", "c2", "c3", "c4", "c5"]],
    );
    let p = preview(&snap, &none(), t0(), &PreviewConfig::default());
    assert_eq!(p.end, End::Complete);
    let waves: Vec<Vec<&str>> = p.waves.iter().map(names).collect();
    assert_eq!(waves, vec![vec!["c1", "c2"], vec!["c3", "c4"], vec!["c5"]]);
    assert!(p.waves.iter().all(|w| w.kind == WaveKind::Rollout));
    assert_eq!(p.desired, 5);
    assert_eq!(p.update_revision, p.current_revision);
}

#[test]
fn soak_time_spaces_the_waves() {
    let snap = snapshot(
        json!({"type": "Progressive",
            "progressive": {"maxConcurrency": 1, "minSuccessTime": "2m"}}),
        &[&["a", "b", "c"]],
    );
    let p = preview(&snap, &none(), t0(), &PreviewConfig::default());
    assert_eq!(p.end, End::Complete);
    let at: Vec<i64> = p.waves.iter().map(|w| w.at.as_secs()).collect();
    assert_eq!(at, vec![0, 120, 240]);
    assert_eq!(p.duration.as_secs(), 360, "the last soak ends the rollout");
}

#[test]
fn per_group_waves_and_a_failure_stops_the_rollout() {
    let snap = snapshot(
        json!({"type": "ProgressivePerGroup"}),
        &[&["a1", "a2"], &["b1", "b2"], &["c1"]],
    );
    let p = preview(&snap, &none(), t0(), &PreviewConfig::default());
    let waves: Vec<Vec<&str>> = p.waves.iter().map(names).collect();
    assert_eq!(waves, vec![vec!["a1", "a2"], vec!["b1", "b2"], vec!["c1"]]);

    // First rollout, b1 fails and there is no deadline: the failure counts in its own
    // group at once (maxFailures 0) and the rollout stops before group c. Upstream's
    // walk would wait for ever at group a instead (`Compat::upstream_group_walk_arithmetic`).
    let failing = BTreeSet::from(["b1".to_string()]);
    let p = preview(&snap, &failing, t0(), &PreviewConfig::default());
    let waves: Vec<Vec<&str>> = p.waves.iter().map(names).collect();
    assert_eq!(waves, vec![vec!["a1", "a2"], vec!["b1", "b2"]]);
    assert_eq!(
        p.end,
        End::Stopped {
            reason: mwrs_condition::REASON_MAX_FAILURES_EXCEEDED.into()
        }
    );
    assert_eq!(p.failed, vec!["b1".to_string()]);

    // With a deadline the failure times out, the group breaches maxFailures 0 and the
    // rollout stops before group c; with no stable revision there is nothing to
    // abort to.
    let mut snap = snap;
    snap.mwrs.spec.placement_refs[0].rollout_strategy = Some(
        serde_json::from_value(json!({"type": "ProgressivePerGroup",
            "progressivePerGroup": {"progressDeadline": "1m"}}))
        .unwrap(),
    );
    let p = preview(&snap, &failing, t0(), &PreviewConfig::default());
    let waves: Vec<Vec<&str>> = p.waves.iter().map(names).collect();
    assert_eq!(waves, vec![vec!["a1", "a2"], vec!["b1", "b2"]]);
    assert_eq!(
        p.end,
        End::Stopped {
            reason: mwrs_condition::REASON_PROGRESS_DEADLINE_EXCEEDED.into()
        }
    );
    assert_eq!(p.duration.as_secs(), 60);
    assert_eq!(p.failed, vec!["b1".to_string()]);
    assert_ne!(p.current_revision, p.update_revision);
}

#[test]
fn abort_all_reverts_every_cluster_in_one_wave() {
    let base = snapshot(
        json!({"type": "Progressive", "progressive": {"maxConcurrency": 2},
            "failureStrategy": "AbortAll"}),
        &[&["c1", "c2", "c3", "c4"]],
    );
    let snap = completed_then(&base, "v2");
    let v1 = snap.mwrs.status.as_ref().unwrap().current_revision.clone();
    assert!(v1.is_some());
    let failing = BTreeSet::from(["c3".to_string()]);
    let p = preview(&snap, &failing, t0(), &PreviewConfig::default());
    assert_eq!(
        p.end,
        End::Aborted {
            to: v1.clone().unwrap()
        }
    );
    assert_eq!(kinds(&p), two_waves_then_revert());
    assert_eq!(p.waves[2].revision, v1.unwrap());
    assert!(p.message.contains("on all 4 clusters"), "{}", p.message);
    assert_eq!(p.failed, vec!["c3".to_string()]);
}

#[test]
fn a_plugin_judges_each_cluster_and_its_failed_aborts() {
    let base = snapshot(
        json!({"type": "Progressive", "progressive": {"maxConcurrency": 2},
            "failureStrategy": "AbortAll", "plugin": "smoke"}),
        &[&["c1", "c2", "c3", "c4"]],
    );
    let snap = completed_then(&base, "v2");
    let v1 = snap.mwrs.status.as_ref().unwrap().current_revision.clone();
    assert!(
        v1.is_some(),
        "the first rollout completed through the plugin"
    );
    let passed = preview(&snap, &none(), t0(), &PreviewConfig::default());
    assert_eq!(passed.end, End::Complete);
    let waves: Vec<Vec<&str>> = passed.waves.iter().map(names).collect();
    assert_eq!(waves, [vec!["c1", "c2"], vec!["c3", "c4"]]);
    // c3's agent reports it done; the plugin says FAILED.
    let failing = BTreeSet::from(["c3".to_string()]);
    let p = preview(&snap, &failing, t0(), &PreviewConfig::default());
    assert_eq!(p.end, End::Aborted { to: v1.unwrap() });
    assert_eq!(kinds(&p), two_waves_then_revert());
    assert_eq!(p.failed, vec!["c3".to_string()]);
}

#[test]
fn the_hub_state_is_the_starting_point() {
    let base = snapshot(json!({"type": "All"}), &[&["c1", "c2"]]);
    let done = completed_then(&base, "v1");
    let p = preview(&done, &none(), t0(), &PreviewConfig::default());
    assert_eq!(p.end, End::NothingToDo);
    assert!(p.waves.is_empty());
}

#[test]
fn deadline_turns_a_failure_into_a_timeout() {
    let base = snapshot(
        json!({"type": "All", "all": {"progressDeadline": "5m", "maxFailures": 1}}),
        &[&["c1", "c2", "c3"]],
    );
    let snap = completed_then(&base, "v2");
    let failing = BTreeSet::from(["c1".to_string()]);
    let p = preview(&snap, &failing, t0(), &PreviewConfig::default());
    // One failure is tolerated: the rollout settles with it, not promoted, once the
    // deadline turned it into a TimeOut.
    assert_eq!(
        p.end,
        End::Stopped {
            reason: mwrs_condition::REASON_PROGRESS_DEADLINE_EXCEEDED.into()
        }
    );
    assert_eq!(p.duration.as_secs(), 300);
    assert_eq!(p.waves.len(), 1);
}

#[test]
fn paused_rollout_starts_nothing() {
    let mut snap = snapshot(json!({"type": "All"}), &[&["c1"]]);
    snap.mwrs
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(labels::CONTROL_PAUSE.into(), "true".into());
    let p = preview(&snap, &none(), t0(), &PreviewConfig::default());
    assert_eq!(p.end, End::Paused);
    assert!(p.waves.is_empty());
}

#[test]
fn invalid_spec_is_reported() {
    let mut snap = snapshot(json!({"type": "Sideways"}), &[&["c1"]]);
    snap.mwrs.metadata.generation = Some(3);
    let p = preview(&snap, &none(), t0(), &PreviewConfig::default());
    assert_eq!(p.end, End::Invalid);
    assert!(!p.message.is_empty());
}

/// Skipping ahead with the engine alone gives what a planner pass every time gives.
mod skip_ahead {
    use super::*;
    use crate::rollout::Compat;
    use mwrs_api::mwrs::LocalPlacementReference;
    use proptest::prelude::*;

    /// One placementRef: its strategy and, per cluster, the decision group that selects it
    /// (None: not selected).
    #[derive(Clone, Debug)]
    struct Ref {
        strategy: Value,
        groups: Vec<Option<i32>>,
    }

    fn config() -> impl Strategy<Value = Value> {
        let soak = prop_oneof![Just(None), Just(Some("1m")), Just(Some("30s"))];
        let deadline = prop_oneof![Just(None), Just(Some("5m"))];
        let max_failures = prop_oneof![Just(json!(0)), Just(json!(1)), Just(json!("40%"))];
        (soak, deadline, max_failures).prop_map(|(soak, deadline, max_failures)| {
            let mut c = json!({"maxFailures": max_failures});
            if let Some(s) = soak {
                c["minSuccessTime"] = json!(s);
            }
            if let Some(d) = deadline {
                c["progressDeadline"] = json!(d);
            }
            c
        })
    }

    fn rollout_strategy() -> impl Strategy<Value = Value> {
        let concurrency = prop_oneof![
            Just(None),
            (1i64..4).prop_map(|n| Some(json!(n))),
            Just(Some(json!("30%")))
        ];
        let mandatory = prop_oneof![Just(None), (0i32..2).prop_map(Some)];
        (0..3usize, config(), concurrency, mandatory, any::<bool>()).prop_map(
            |(kind, mut c, concurrency, mandatory, abort_all)| {
                if let Some(g) = mandatory {
                    c["mandatoryDecisionGroups"] = json!([{"groupIndex": g}]);
                }
                let mut s = match kind {
                    0 => json!({"type": "All", "all": c}),
                    1 => {
                        if let Some(n) = concurrency {
                            c["maxConcurrency"] = n;
                        }
                        json!({"type": "Progressive", "progressive": c})
                    }
                    _ => json!({"type": "ProgressivePerGroup", "progressivePerGroup": c}),
                };
                if abort_all {
                    s["failureStrategy"] = json!("AbortAll");
                }
                s
            },
        )
    }

    fn placement_ref(clusters: usize) -> impl Strategy<Value = Ref> {
        let group = prop_oneof![3 => (0i32..3).prop_map(Some), 1 => Just(None)];
        (rollout_strategy(), prop::collection::vec(group, clusters))
            .prop_map(|(strategy, groups)| Ref { strategy, groups })
    }

    /// A scenario: the placementRefs, whether the hub already completed another revision,
    /// the failing clusters and the rollout library's upstream quirks.
    fn scenario() -> impl Strategy<Value = (Vec<Ref>, bool, Vec<usize>, bool)> {
        (1usize..9).prop_flat_map(|n| {
            (
                prop::collection::vec(placement_ref(n), 1..3),
                any::<bool>(),
                prop_oneof![3 => Just(Vec::new()), 1 => prop::collection::vec(0..n, 1..3)],
                prop_oneof![3 => Just(false), 1 => Just(true)],
            )
        })
    }

    fn snapshot_of(refs: &[Ref]) -> Snapshot {
        let mut snap = snapshot(json!({"type": "All"}), &[]);
        snap.mwrs.spec.placement_refs = Vec::new();
        snap.placements = Vec::new();
        for (i, r) in refs.iter().enumerate() {
            let name = format!("p{i}");
            snap.mwrs.spec.placement_refs.push(LocalPlacementReference {
                name: name.clone(),
                rollout_strategy: Some(serde_json::from_value(r.strategy.clone()).unwrap()),
            });
            let pairs = r.groups.iter().enumerate().filter_map(|(c, g)| {
                g.map(|g| (GroupKey::new(format!("g{g}"), g), format!("c{c}")))
            });
            snap.placements.push(PlacementView::found(
                &name,
                DecisionGroups::from_pairs(pairs),
            ));
        }
        snap
    }

    fn without_passes(p: Preview) -> Preview {
        Preview {
            planner_passes: 0,
            ..p
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        #[test]
        fn the_waves_are_those_of_a_pass_every_time(
            (refs, completed, failing, upstream) in scenario()
        ) {
            let mut snap = snapshot_of(&refs);
            if completed {
                snap = completed_then(&snap, "v2");
            }
            let failing: BTreeSet<String> = failing.iter().map(|c| format!("c{c}")).collect();
            let mut cfg = PreviewConfig::default();
            if upstream {
                cfg.plan.compat = Compat::UPSTREAM;
            }
            let skipping = preview(&snap, &failing, t0(), &cfg);
            cfg.every_pass = true;
            let every = preview(&snap, &failing, t0(), &cfg);
            prop_assert!(skipping.planner_passes <= every.planner_passes);
            prop_assert_eq!(without_passes(skipping), without_passes(every));
        }
    }

    #[test]
    fn a_long_progressive_rollout_takes_a_few_planner_passes() {
        let names: Vec<String> = (0..200).map(|i| format!("c{i:03}")).collect();
        let clusters: Vec<&str> = names.iter().map(String::as_str).collect();
        let snap = snapshot(
            json!({"type": "Progressive",
                "progressive": {"maxConcurrency": 1, "minSuccessTime": "1m"}}),
            &[&clusters],
        );
        let mut cfg = PreviewConfig::default();
        let skipping = preview(&snap, &none(), t0(), &cfg);
        cfg.every_pass = true;
        let every = preview(&snap, &none(), t0(), &cfg);
        assert_eq!(skipping.waves.len(), 200);
        assert_eq!(skipping.end, End::Complete);
        assert!(every.planner_passes >= 200, "{}", every.planner_passes);
        assert!(skipping.planner_passes < 10, "{}", skipping.planner_passes);
        assert_eq!(without_passes(skipping), without_passes(every));
    }

    #[test]
    fn a_cluster_failing_late_stops_the_skip_just_before_its_wave() {
        let names: Vec<String> = (0..200).map(|i| format!("c{i:03}")).collect();
        let clusters: Vec<&str> = names.iter().map(String::as_str).collect();
        let snap = snapshot(
            json!({"type": "Progressive", "progressive": {"maxConcurrency": 1}}),
            &[&clusters],
        );
        let failing = BTreeSet::from(["c150".to_string()]);
        let mut cfg = PreviewConfig::default();
        let skipping = preview(&snap, &failing, t0(), &cfg);
        cfg.every_pass = true;
        let every = preview(&snap, &failing, t0(), &cfg);
        assert!(every.planner_passes >= 150, "{}", every.planner_passes);
        assert!(skipping.planner_passes < 10, "{}", skipping.planner_passes);
        assert!(
            matches!(skipping.end, End::Aborted { .. } | End::Stopped { .. }),
            "{:?}",
            skipping.end
        );
        assert_eq!(without_passes(skipping), without_passes(every));
    }
}
