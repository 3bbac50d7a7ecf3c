//! Property tests of the rollout engine: invariants that must hold for any placement,
//! any mix of existing statuses and any strategy, plus "never panics" for the parsers.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeSet, HashSet};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use mwrs_api::rollout::{
    MandatoryDecisionGroup, RolloutConfig, RolloutProgressive, RolloutStrategy,
};
use mwrs_engine::rollout::{
    ClusterRolloutStatus, Compat, Deadline, DecisionGroups, Determined, GroupKey, MandatoryGroup,
    ParsedStrategy, RolloutResult, RolloutStatus, Size, StrategyKind, determine_rollout_status,
    evaluate, parse_deadline, parse_go_duration, parse_size,
};
use proptest::prelude::*;

fn now() -> Timestamp {
    "2022-01-01T00:00:00Z".parse().expect("valid timestamp")
}

#[derive(Clone, Debug)]
struct Scenario {
    groups: DecisionGroups,
    existing: Vec<ClusterRolloutStatus>,
    strategy: ParsedStrategy,
}

impl Scenario {
    fn run(&self, compat: Compat) -> RolloutResult {
        evaluate(&self.strategy, &self.groups, &self.existing, now(), compat)
    }

    fn mandatory(&self) -> BTreeSet<GroupKey> {
        self.groups.resolve_mandatory(&self.strategy.mandatory)
    }

    fn is_mandatory(&self, cluster: &str) -> bool {
        let m = self.mandatory();
        self.groups.group_of(cluster).is_some_and(|k| m.contains(k))
    }

    fn existing_names(&self) -> HashSet<&str> {
        self.existing.iter().map(|s| &*s.cluster).collect()
    }

    /// How the engine sees one existing status at `now`, on its own.
    fn determine(&self, s: &ClusterRolloutStatus) -> Determined {
        determine_rollout_status(
            s,
            self.strategy.min_success_time,
            self.strategy.deadline,
            now(),
        )
    }

    /// Clusters the result starts: ToApply entries that were not already started.
    fn started<'r>(&self, r: &'r RolloutResult) -> Vec<&'r str> {
        r.to_rollout
            .iter()
            .filter(|c| c.status == RolloutStatus::ToApply)
            .map(|c| &*c.cluster)
            .collect()
    }
}

const STATUSES: [RolloutStatus; 6] = [
    RolloutStatus::ToApply,
    RolloutStatus::Progressing,
    RolloutStatus::Succeeded,
    RolloutStatus::Failed,
    RolloutStatus::TimeOut,
    RolloutStatus::Skip,
];

fn status() -> impl Strategy<Value = (RolloutStatus, Option<i64>)> {
    (
        prop::sample::select(STATUSES.to_vec()),
        prop::option::weighted(0.9, -200i64..50),
    )
}

fn size() -> impl Strategy<Value = Size> {
    prop_oneof![
        (-1i32..6).prop_map(Size::Count),
        (0u32..=120).prop_map(Size::Percent)
    ]
}

fn parsed_strategy() -> impl Strategy<Value = ParsedStrategy> {
    let kind = prop::sample::select(vec![
        StrategyKind::All,
        StrategyKind::Progressive,
        StrategyKind::ProgressivePerGroup,
    ]);
    let soak = prop::sample::select(vec![0i64, 30, 60]);
    let deadline = prop::sample::select(vec![None, Some(0i64), Some(30), Some(90)]);
    let mandatory = prop::sample::select(vec![
        vec![],
        vec![MandatoryGroup::Name("canary".into())],
        vec![MandatoryGroup::Index(0)],
        vec![
            MandatoryGroup::Index(3),
            MandatoryGroup::Name("wave".into()),
        ],
    ]);
    (
        kind,
        soak,
        deadline,
        size(),
        prop::option::of(size()),
        mandatory,
    )
        .prop_map(
            |(kind, soak, deadline, max_failures, max_concurrency, mandatory)| {
                let progressive = kind != StrategyKind::All;
                ParsedStrategy {
                    kind,
                    min_success_time: if progressive {
                        SignedDuration::from_secs(soak)
                    } else {
                        SignedDuration::ZERO
                    },
                    deadline: deadline.map_or(Deadline::None, |s| {
                        Deadline::After(SignedDuration::from_secs(s))
                    }),
                    max_failures,
                    max_concurrency: max_concurrency.filter(|_| kind == StrategyKind::Progressive),
                    mandatory: if progressive { mandatory } else { vec![] },
                    abort_all: false,
                    plugin: None,
                    plugin_failure: Default::default(),
                }
            },
        )
}

const GROUP_NAMES: [&str; 3] = ["", "canary", "wave"];

fn scenario() -> impl Strategy<Value = Scenario> {
    // Per cluster: its group index (gaps happen), the name picked for that index, and
    // maybe an existing status; plus a few clusters that left the placement.
    let cluster = (0i32..5, prop::option::weighted(0.6, status()));
    let names = prop::collection::vec(0usize..GROUP_NAMES.len(), 5);
    let gone = prop::collection::vec(status(), 0..3);
    (
        prop::collection::vec(cluster, 0..14),
        names,
        gone,
        parsed_strategy(),
    )
        .prop_map(|(clusters, names, gone, strategy)| {
            let key = |i: i32| GroupKey::new(GROUP_NAMES[names[i as usize]], i);
            let status =
                |name: String, group: GroupKey, (st, ltt): (RolloutStatus, Option<i64>)| {
                    ClusterRolloutStatus {
                        cluster: name.into(),
                        group,
                        status: st,
                        last_transition_time: ltt.map(|s| now() + SignedDuration::from_secs(s)),
                        recheck_time: None,
                    }
                };
            let mut existing = Vec::new();
            let mut pairs = Vec::new();
            for (i, (g, st)) in clusters.into_iter().enumerate() {
                let name = format!("c{i}");
                pairs.push((key(g), name.clone()));
                if let Some(st) = st {
                    existing.push(status(name, key(g), st));
                }
            }
            for (i, st) in gone.into_iter().enumerate() {
                existing.push(status(format!("gone{i}"), key(0), st));
            }
            // Input order must not matter beyond what upstream defines; reverse it so
            // it is not accidentally sorted.
            existing.reverse();
            Scenario {
                groups: DecisionGroups::from_pairs(pairs),
                existing,
                strategy,
            }
        })
}

/// The fixed mode and upstream's. Upstream's index-gap quirk is left out: it resolves
/// mandatory groups over every group but the rest over the visible ones only, so a
/// mandatory cluster after a gap can be reported both removed and rolled out.
fn modes() -> [Compat; 2] {
    [
        Compat::default(),
        Compat {
            upstream_mandatory_leak: true,
            upstream_group_index_gaps: false,
            upstream_start_in_breached_group: true,
            upstream_group_walk_arithmetic: true,
        },
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 2000,
        max_global_rejects: 100_000,
        // No regression files: a failure prints its minimal input; pin it as a unit test.
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Progressive: when a non-mandatory cluster starts, the clusters holding a slot
    /// (ToApply, Progressing, Failed within the deadline, Succeeded soaking) plus the
    /// ones starting never exceed maxConcurrency.
    #[test]
    fn progressive_never_exceeds_max_concurrency(sc in scenario()) {
        prop_assume!(sc.strategy.kind == StrategyKind::Progressive);
        let r = sc.run(Compat::default());
        let existing = sc.existing_names();
        let new_rest: Vec<&str> = sc
            .started(&r)
            .into_iter()
            .filter(|c| !existing.contains(c) && !sc.is_mandatory(c))
            .collect();
        if !new_rest.is_empty() {
            let rest = sc.groups.clusters().filter(|c| !sc.is_mandatory(c)).count();
            let size = sc.strategy.max_concurrency.unwrap_or_default().resolve(rest, rest);
            let in_flight = sc
                .existing
                .iter()
                .filter(|s| sc.groups.contains(&s.cluster))
                .filter(|s| matches!(sc.determine(s), Determined::Rollout(_)))
                .count();
            prop_assert!(
                in_flight + new_rest.len() <= size,
                "in flight {in_flight} + starting {new_rest:?} > maxConcurrency {size}: {r:#?}"
            );
        }
    }

    /// Once failures breach maxFailures, no new cluster (one without an existing
    /// status) is added.
    #[test]
    fn no_new_cluster_after_a_breach(sc in scenario()) {
        let r = sc.run(Compat::default());
        if r.max_failure_breach {
            let existing = sc.existing_names();
            let new: Vec<&str> = sc.started(&r).into_iter().filter(|c| !existing.contains(c)).collect();
            prop_assert!(new.is_empty(), "{new:?} added after a breach: {r:#?}");
        }
    }

    /// Default mode: no non-mandatory cluster starts before every mandatory-group
    /// cluster is done (Succeeded past its soak, or Skip).
    #[test]
    fn mandatory_groups_roll_first(sc in scenario()) {
        let r = sc.run(Compat::default());
        let non_mandatory_start = sc.started(&r).into_iter().any(|c| !sc.is_mandatory(c));
        if non_mandatory_start && sc.strategy.kind != StrategyKind::All {
            for cluster in sc.groups.clusters().filter(|c| sc.is_mandatory(c)) {
                let st = sc.existing.iter().find(|s| *s.cluster == *cluster);
                let done = st.is_some_and(|s| {
                    let d = sc.determine(s);
                    d == Determined::Dropped && !d.status_after(s.status).is_failure()
                });
                prop_assert!(done, "mandatory {cluster} not done ({st:?}) yet others start: {r:#?}");
            }
        }
    }

    /// Default mode, ProgressivePerGroup never stalls: when nothing is left in flight
    /// but failed clusters (which may never recover: no deadline) and there is no
    /// breach, every cluster has been started. Upstream could wait for ever on a failed
    /// cluster of a later group (`Compat::upstream_group_walk_arithmetic`).
    #[test]
    fn per_group_never_stalls_on_tolerated_failures(sc in scenario()) {
        prop_assume!(sc.strategy.kind == StrategyKind::ProgressivePerGroup);
        let r = sc.run(Compat::default());
        let only_failed = r.to_rollout.iter().all(|c| c.status == RolloutStatus::Failed);
        if !r.max_failure_breach && only_failed {
            for cluster in sc.groups.clusters() {
                let started = sc
                    .existing
                    .iter()
                    .any(|s| *s.cluster == *cluster && s.status != RolloutStatus::ToApply);
                prop_assert!(started, "{cluster} never starts: {r:#?}");
            }
        }
    }

    /// Default mode, ProgressivePerGroup: a group starts only once every cluster of the
    /// groups before it is done or failed (upstream let a tolerated TimeOut offset a
    /// cluster still in flight).
    #[test]
    fn per_group_starts_a_group_only_after_the_earlier_ones_settle(sc in scenario()) {
        prop_assume!(sc.strategy.kind == StrategyKind::ProgressivePerGroup);
        prop_assume!(sc.mandatory().is_empty());
        let r = sc.run(Compat::default());
        let keys: Vec<&GroupKey> = sc.groups.keys().collect();
        let rank = |c: &str| sc.groups.group_of(c).and_then(|k| keys.iter().position(|x| *x == k));
        let Some(first_started) = sc.started(&r).into_iter().filter_map(rank).min() else {
            return Ok(());
        };
        for cluster in sc.groups.clusters().filter(|c| rank(c).is_some_and(|g| g < first_started)) {
            let st = sc.existing.iter().find(|s| *s.cluster == *cluster && s.status != RolloutStatus::ToApply);
            let settled = st.is_some_and(|s| {
                let d = sc.determine(s);
                let after = d.status_after(s.status);
                after.is_failure() || d == Determined::Dropped
            });
            prop_assert!(settled, "{cluster} ({st:?}) not settled, yet group {first_started} starts: {r:#?}");
        }
    }

    /// recheck_after is the smallest positive delay to a recheck time in to_rollout.
    #[test]
    fn recheck_after_is_the_earliest_future_recheck(sc in scenario()) {
        for compat in modes() {
            let r = sc.run(compat);
            let want = r
                .to_rollout
                .iter()
                .filter_map(|c| c.recheck_time)
                .filter(|t| *t > now())
                .min()
                .map(|t| t.duration_since(now()));
            prop_assert_eq!(r.recheck_after, want);
        }
    }

    /// Every cluster is in at most one of the three lists, and only selected clusters
    /// are rolled or timed out.
    #[test]
    fn each_cluster_in_at_most_one_list(sc in scenario()) {
        for compat in modes() {
            let r = sc.run(compat);
            let mut seen = HashSet::new();
            for c in r.to_rollout.iter().chain(&r.timed_out).chain(&r.removed) {
                prop_assert!(seen.insert(c.cluster.clone()), "{} twice: {r:#?}", c.cluster);
            }
            for c in r.to_rollout.iter().chain(&r.timed_out) {
                prop_assert!(sc.groups.contains(&c.cluster));
            }
            prop_assert!(r.timed_out.iter().all(|c| c.status == RolloutStatus::TimeOut));
        }
    }

    /// Type All never reports a breach (the planner computes All's itself).
    #[test]
    fn all_never_breaches(sc in scenario()) {
        prop_assume!(sc.strategy.kind == StrategyKind::All);
        for compat in modes() {
            prop_assert!(!sc.run(compat).max_failure_breach);
        }
    }

    #[test]
    fn parsers_never_panic(s in any::<String>()) {
        let _ = parse_go_duration(&s);
        let _ = parse_deadline(&s);
        let _ = parse_size(&IntOrString::String(s.clone()));
        let _ = ParsedStrategy::parse(&strategy_with(&s));
    }

    #[test]
    fn parsers_never_panic_on_duration_like_strings(s in "[-+]?[0-9.]{0,25}(ns|us|µs|μs|ms|s|m|h|d|None|%)?([0-9.]{0,22}[hms]?){0,3}") {
        let _ = parse_go_duration(&s);
        let _ = parse_deadline(&s);
        let _ = parse_size(&IntOrString::String(s.clone()));
        let _ = ParsedStrategy::parse(&strategy_with(&s));
    }
}

/// A Progressive strategy with `s` in every string field.
fn strategy_with(s: &str) -> RolloutStrategy {
    RolloutStrategy {
        type_: Some("Progressive".into()),
        progressive: Some(RolloutProgressive {
            config: RolloutConfig {
                min_success_time: Some(s.into()),
                progress_deadline: Some(s.into()),
                max_failures: Some(IntOrString::String(s.into())),
            },
            mandatory_decision_groups: Some(vec![MandatoryDecisionGroup {
                group_name: Some(s.into()),
                group_index: Some(-1),
            }]),
            max_concurrency: Some(IntOrString::String(s.into())),
        }),
        failure_strategy: Some(s.into()),
        ..Default::default()
    }
}
