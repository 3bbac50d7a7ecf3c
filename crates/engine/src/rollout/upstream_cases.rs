//! Every table case of sdk-go v1.3.0 `pkg/apis/cluster/v1alpha1/rollout_test.go`, one
//! `#[test]` each, named after the upstream case, with the same inputs, the same fake
//! clock (2022-01-01T00:00:00Z) and the same expected results. (The tracker cases of
//! `v1beta1/placement_test.go` live in `groups.rs`.)
//!
//! Each engine case runs twice: in the default (fixed) mode and with every [`Compat`]
//! switch on (upstream behaviour); both must give upstream's expectation unless listed
//! below.
//!
//! # Deviations from upstream
//!
//! Engine cases: none. The two deliberate fixes do not change any upstream case:
//! - mandatory-phase leak (rules §10.3): the fix changes only *what decides* the
//!   mandatory phase (whether it holds, when its walk moves to the next mandatory
//!   group): mandatory-group clusters alone. Statuses of other clusters are still
//!   evaluated and reported while it holds, so "test progressive rollout with mandatory
//!   decision groups Succeed and clusters added after rollout" (held by the new
//!   mandatory cluster7) gives upstream's result in both modes. The `fixes` module at
//!   the end of this file shows where the two modes part.
//! - group-index gaps: every upstream case uses contiguous indices.
//! - no cluster starts in a group that breached: in every upstream case with a breach,
//!   the breaching group has no unstarted cluster left.
//!
//! Adapted, because Rust's types cannot express the Go input (same semantics checked):
//! - TestDetermineRolloutStatus "unknown status outside/within the timeout duration":
//!   `RolloutStatus` has no values beyond Skip; upstream's catch-all branch is the
//!   Progressing/Failed branch, so the cases run with Failed and Progressing inputs.
//! - TestCalculateRolloutSize "…string without percentage": upstream returns the
//!   default *and* the error; here `parse_size` returns the error (same message) and
//!   never reaches `resolve`.
//! - TestParseTimeout error cases: upstream returns `maxTimeDuration` with the error;
//!   here only the error (same message prefix, "invalid timeout format").

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use mwrs_api::rollout::{MandatoryDecisionGroup, RolloutStrategy};
use serde_json::{Value, json};

use super::RolloutStatus::{Failed, Progressing, Skip, Succeeded, TimeOut, ToApply};
use super::*;

// ---------------------------------------------------------------------------------
// Fixture helpers
// ---------------------------------------------------------------------------------

fn fake_time() -> Timestamp {
    "2022-01-01T00:00:00Z".parse().expect("valid timestamp")
}

/// The fake clock plus `secs` (upstream's fakeTime30s, fakeTime_60s, ...).
fn at(secs: i64) -> Timestamp {
    fake_time() + SignedDuration::from_secs(secs)
}

type Key = (&'static str, i32);
const G1: Key = ("group1", 0);
const G2_1: Key = ("group2", 1);
const I1: Key = ("", 1);
const I2: Key = ("", 2);

fn key(k: Key) -> GroupKey {
    GroupKey::new(k.0, k.1)
}

fn groups(spec: &[(Key, &[&str])]) -> DecisionGroups {
    DecisionGroups::from_pairs(
        spec.iter()
            .flat_map(|(k, cs)| cs.iter().map(move |c| (key(*k), c.to_string()))),
    )
}

/// A status as upstream's dummy status func returns it (no recheck time); `ltt` in
/// seconds from the fake clock.
fn w(
    cluster: &str,
    k: Key,
    status: RolloutStatus,
    ltt: impl Into<Option<i64>>,
) -> ClusterRolloutStatus {
    e(cluster, k, status, ltt, None)
}

/// An expected status; times in seconds from the fake clock.
fn e(
    cluster: &str,
    k: Key,
    status: RolloutStatus,
    ltt: impl Into<Option<i64>>,
    recheck: impl Into<Option<i64>>,
) -> ClusterRolloutStatus {
    ClusterRolloutStatus {
        cluster: cluster.into(),
        group: key(k),
        status,
        last_transition_time: ltt.into().map(at),
        recheck_time: recheck.into().map(at),
    }
}

fn new(cluster: &str, k: Key) -> ClusterRolloutStatus {
    e(cluster, k, ToApply, None, None)
}

#[derive(Debug, Default)]
struct Expect {
    to_rollout: Vec<ClusterRolloutStatus>,
    timed_out: Vec<ClusterRolloutStatus>,
    removed: Vec<ClusterRolloutStatus>,
    breach: bool,
    recheck_secs: Option<i64>,
}

fn strategy(v: Value) -> ParsedStrategy {
    let s: RolloutStrategy = serde_json::from_value(v).expect("valid RolloutStrategy JSON");
    ParsedStrategy::parse(&s).expect("valid strategy")
}

const UPSTREAM: Compat = Compat::UPSTREAM;

fn run(
    s: &Value,
    g: &DecisionGroups,
    existing: &[ClusterRolloutStatus],
    compat: Compat,
) -> RolloutResult {
    evaluate(&strategy(s.clone()), g, existing, fake_time(), compat)
}

fn assert_result(got: &RolloutResult, want: &Expect, mode: &str) {
    assert_eq!(got.to_rollout, want.to_rollout, "{mode}: to_rollout");
    assert_eq!(got.timed_out, want.timed_out, "{mode}: timed_out");
    assert_eq!(got.removed, want.removed, "{mode}: removed");
    assert_eq!(
        got.max_failure_breach, want.breach,
        "{mode}: max_failure_breach"
    );
    assert_eq!(
        got.recheck_after,
        want.recheck_secs.map(SignedDuration::from_secs),
        "{mode}: recheck_after"
    );
}

/// Runs a case in both modes against upstream's expectation.
fn case(s: Value, g: DecisionGroups, existing: Vec<ClusterRolloutStatus>, want: Expect) {
    assert_result(&run(&s, &g, &existing, Compat::default()), &want, "fixed");
    assert_result(&run(&s, &g, &existing, UPSTREAM), &want, "upstream");
}

// Cluster layouts shared by many cases.
fn g_2_4() -> DecisionGroups {
    groups(&[
        (G1, &["cluster1", "cluster2"]),
        (I1, &["cluster3", "cluster4", "cluster5", "cluster6"]),
    ])
}
fn g_3_3() -> DecisionGroups {
    groups(&[
        (G1, &["cluster1", "cluster2", "cluster3"]),
        (I1, &["cluster4", "cluster5", "cluster6"]),
    ])
}
fn g_3_3_3() -> DecisionGroups {
    groups(&[
        (G1, &["cluster1", "cluster2", "cluster3"]),
        (I1, &["cluster4", "cluster5", "cluster6"]),
        (I2, &["cluster7", "cluster8", "cluster9"]),
    ])
}
fn g_2_2_2() -> DecisionGroups {
    groups(&[
        (G1, &["cluster1", "cluster2"]),
        (I1, &["cluster3", "cluster4"]),
        (I2, &["cluster5", "cluster6"]),
    ])
}

/// cluster1 done -60s, cluster2 failed -120s, cluster3 applying -60s (group1).
fn done_failed_applying() -> Vec<ClusterRolloutStatus> {
    vec![
        w("cluster1", G1, Succeeded, -60),
        w("cluster2", G1, Failed, -120),
        w("cluster3", G1, Progressing, -60),
    ]
}

/// cluster1 done -60s, cluster2 failed -120s, cluster3 done -60s (group1).
fn done_failed_done() -> Vec<ClusterRolloutStatus> {
    vec![
        w("cluster1", G1, Succeeded, -60),
        w("cluster2", G1, Failed, -120),
        w("cluster3", G1, Succeeded, -60),
    ]
}

/// cluster1 applying -60s, then cluster2..cluster10 waiting over three groups.
fn one_applying_rest_waiting() -> Vec<ClusterRolloutStatus> {
    let mut v = vec![
        w("cluster1", G1, Progressing, -60),
        w("cluster2", G1, ToApply, None),
        w("cluster3", G1, ToApply, None),
    ];
    for c in ["cluster4", "cluster5", "cluster6"] {
        v.push(w(c, I1, ToApply, None));
    }
    for c in ["cluster7", "cluster8", "cluster9", "cluster10"] {
        v.push(w(c, I2, ToApply, None));
    }
    v
}

// ---------------------------------------------------------------------------------
// TestGetRolloutCluster_All
// ---------------------------------------------------------------------------------

mod get_rollout_cluster_all {
    use super::*;

    fn all_90s() -> Value {
        json!({"type": "All", "all": {"progressDeadline": "90s"}})
    }

    #[test]
    fn test_rollout_all_with_timeout_90s_without_workload_created() {
        case(
            all_90s(),
            g_2_4(),
            vec![],
            Expect {
                to_rollout: vec![
                    new("cluster1", G1),
                    new("cluster2", G1),
                    new("cluster3", I1),
                    new("cluster4", I1),
                    new("cluster5", I1),
                    new("cluster6", I1),
                ],
                ..Default::default()
            },
        );
    }

    #[test]
    fn test_rollout_all_with_timeout_90s() {
        case(
            all_90s(),
            g_2_4(),
            vec![
                w("cluster1", G1, Succeeded, -60),
                w("cluster2", G1, Failed, -120),
                w("cluster3", I1, Progressing, -120),
                w("cluster4", I1, Failed, -60),
                w("cluster5", I1, Progressing, -60),
            ],
            Expect {
                to_rollout: vec![
                    e("cluster4", I1, Failed, -60, 30),
                    e("cluster5", I1, Progressing, -60, 30),
                    new("cluster6", I1),
                ],
                timed_out: vec![
                    e("cluster2", G1, TimeOut, -120, -30),
                    e("cluster3", I1, TimeOut, -120, -30),
                ],
                recheck_secs: Some(30),
                ..Default::default()
            },
        );
    }
}

// ---------------------------------------------------------------------------------
// TestGetRolloutCluster_Progressive
// ---------------------------------------------------------------------------------

mod get_rollout_cluster_progressive {
    use super::*;

    fn progressive(p: Value) -> Value {
        json!({"type": "Progressive", "progressive": p})
    }

    #[test]
    fn test_progressive_rollout_deprecated_timeout() {
        case(
            progressive(json!({"progressDeadline": "90s", "maxConcurrency": 2})),
            g_3_3(),
            vec![],
            Expect {
                to_rollout: vec![new("cluster1", G1), new("cluster2", G1)],
                ..Default::default()
            },
        );
    }

    #[test]
    fn test_progressive_rollout_with_timeout_90s_without_workload_created() {
        case(
            progressive(json!({"progressDeadline": "90s", "maxConcurrency": 2})),
            g_3_3(),
            vec![],
            Expect {
                to_rollout: vec![new("cluster1", G1), new("cluster2", G1)],
                ..Default::default()
            },
        );
    }

    #[test]
    fn test_progressive_rollout_with_timeout_90s_and_workload_clusterrolloutstatus_are_in_toapply_status()
     {
        case(
            progressive(json!({"progressDeadline": "90s", "maxConcurrency": 4})),
            g_3_3_3(),
            one_applying_rest_waiting(),
            Expect {
                to_rollout: vec![
                    e("cluster1", G1, Progressing, -60, 30),
                    new("cluster2", G1),
                    new("cluster3", G1),
                    new("cluster4", I1),
                ],
                removed: vec![new("cluster10", I2)],
                recheck_secs: Some(30),
                ..Default::default()
            },
        );
    }

    #[test]
    fn test_progressive_rollout_with_timeout_90s_and_maxconcurrency_not_set() {
        case(
            progressive(json!({"progressDeadline": "90s"})),
            g_3_3_3(),
            one_applying_rest_waiting(),
            Expect {
                to_rollout: vec![
                    e("cluster1", G1, Progressing, -60, 30),
                    new("cluster2", G1),
                    new("cluster3", G1),
                    new("cluster4", I1),
                    new("cluster5", I1),
                    new("cluster6", I1),
                    new("cluster7", I2),
                    new("cluster8", I2),
                    new("cluster9", I2),
                ],
                removed: vec![new("cluster10", I2)],
                recheck_secs: Some(30),
                ..Default::default()
            },
        );
    }

    #[test]
    fn test_progressive_rollout_with_timeout_90s_and_no_maxfailures_set() {
        case(
            progressive(json!({"progressDeadline": "90s", "maxConcurrency": 2})),
            g_3_3(),
            done_failed_applying(),
            Expect {
                to_rollout: vec![e("cluster3", G1, Progressing, -60, 30)],
                timed_out: vec![e("cluster2", G1, TimeOut, -120, -30)],
                breach: true,
                recheck_secs: Some(30),
                ..Default::default()
            },
        );
    }

    #[test]
    fn test_progressive_rollout_with_timeout_90s_100_maxfailures_minsuccesstime_60s() {
        case(
            progressive(json!({
                "progressDeadline": "90s", "maxFailures": "100%", "minSuccessTime": "1m0s",
                "maxConcurrency": 2
            })),
            g_3_3(),
            vec![
                w("cluster1", G1, Succeeded, -30),
                w("cluster2", G1, Failed, -120),
                w("cluster3", G1, Progressing, -30),
            ],
            Expect {
                to_rollout: vec![
                    e("cluster1", G1, Succeeded, -30, 30),
                    e("cluster3", G1, Progressing, -30, 60),
                ],
                timed_out: vec![e("cluster2", G1, TimeOut, -120, -30)],
                recheck_secs: Some(30),
                ..Default::default()
            },
        );
    }

    #[test]
    fn test_progressive_rollout_with_mixed_timeout_and_minsuccesstime_scenarios() {
        case(
            progressive(json!({
                "progressDeadline": "90s", "maxFailures": "100%", "minSuccessTime": "1m0s",
                "maxConcurrency": 4
            })),
            groups(&[(G1, &["cluster1", "cluster2", "cluster3", "cluster4"])]),
            vec![
                w("cluster1", G1, Succeeded, -30),
                w("cluster2", G1, Progressing, -60),
                w("cluster3", G1, Progressing, -30),
                w("cluster4", G1, Succeeded, -120),
            ],
            Expect {
                to_rollout: vec![
                    e("cluster1", G1, Succeeded, -30, 30),
                    e("cluster2", G1, Progressing, -60, 30),
                    e("cluster3", G1, Progressing, -30, 60),
                ],
                recheck_secs: Some(30),
                ..Default::default()
            },
        );
    }

    #[test]
    fn test_progressive_rollout_with_timeout_90s_and_maxfailures_1() {
        case(
            progressive(json!({"progressDeadline": "90s", "maxFailures": 1, "maxConcurrency": 2})),
            g_3_3(),
            done_failed_applying(),
            Expect {
                to_rollout: vec![e("cluster3", G1, Progressing, -60, 30), new("cluster4", I1)],
                timed_out: vec![e("cluster2", G1, TimeOut, -120, -30)],
                recheck_secs: Some(30),
                ..Default::default()
            },
        );
    }

    #[test]
    fn test_progressive_rollout_with_timeout_0s_maxfailures_3() {
        case(
            progressive(json!({"progressDeadline": "0s", "maxFailures": 3, "maxConcurrency": 2})),
            g_3_3(),
            vec![
                w("cluster1", G1, Succeeded, -30),
                w("cluster2", G1, Progressing, -30),
                w("cluster3", G1, Progressing, -30),
            ],
            Expect {
                to_rollout: vec![new("cluster4", I1), new("cluster5", I1)],
                timed_out: vec![
                    e("cluster2", G1, TimeOut, -30, -30),
                    e("cluster3", G1, TimeOut, -30, -30),
                ],
                ..Default::default()
            },
        );
    }

    #[test]
    fn test_progressive_rollout_with_mandatorydecisiongroup_and_timeout_90s() {
        case(
            progressive(json!({
                "mandatoryDecisionGroups": [{"groupName": "group1"}],
                "progressDeadline": "90s", "maxConcurrency": 3
            })),
            g_3_3(),
            done_failed_applying(),
            Expect {
                to_rollout: vec![e("cluster3", G1, Progressing, -60, 30)],
                timed_out: vec![e("cluster2", G1, TimeOut, -120, -30)],
                breach: true,
                recheck_secs: Some(30),
                ..Default::default()
            },
        );
    }

    fn none_50pct(max_failures: &str) -> Value {
        progressive(
            json!({"progressDeadline": "None", "maxFailures": max_failures, "maxConcurrency": "50%"}),
        )
    }

    fn done_failed_g1_applying_i1() -> Vec<ClusterRolloutStatus> {
        vec![
            w("cluster1", G1, Succeeded, -60),
            w("cluster2", G1, Failed, -120),
            w("cluster3", I1, Progressing, -60),
        ]
    }

    #[test]
    fn test_progressive_rollout_with_timeout_none_maxconcurrency_50_maxfailures_100() {
        case(
            none_50pct("100%"),
            g_2_4(),
            done_failed_g1_applying_i1(),
            Expect {
                to_rollout: vec![
                    e("cluster2", G1, Failed, -120, None),
                    e("cluster3", I1, Progressing, -60, None),
                    new("cluster4", I1),
                ],
                ..Default::default()
            },
        );
    }

    #[test]
    fn test_progressive_rollout_with_timeout_none_maxconcurrency_50_maxfailures_0() {
        case(
            none_50pct("0%"),
            g_2_4(),
            done_failed_g1_applying_i1(),
            Expect {
                to_rollout: vec![
                    e("cluster2", G1, Failed, -120, None),
                    e("cluster3", I1, Progressing, -60, None),
                ],
                breach: true,
                ..Default::default()
            },
        );
    }

    #[test]
    fn test_progressive_rollout_with_mandatory_decision_groups_failed() {
        case(
            progressive(json!({
                "mandatoryDecisionGroups": [{"groupName": "group1"}],
                "maxConcurrency": 3, "progressDeadline": "90s"
            })),
            g_2_2_2(),
            vec![
                w("cluster1", G1, Failed, -120),
                w("cluster2", G1, Failed, -60),
            ],
            Expect {
                to_rollout: vec![e("cluster2", G1, Failed, -60, 30)],
                timed_out: vec![e("cluster1", G1, TimeOut, -120, -30)],
                breach: true,
                recheck_secs: Some(30),
                ..Default::default()
            },
        );
    }

    #[test]
    fn test_progressive_rollout_with_mandatory_decision_groups_succeed() {
        case(
            progressive(
                json!({"mandatoryDecisionGroups": [{"groupName": "group1"}], "maxConcurrency": 3}),
            ),
            g_2_2_2(),
            vec![
                w("cluster1", G1, Succeeded, -60),
                w("cluster2", G1, Succeeded, -120),
            ],
            Expect {
                to_rollout: vec![
                    new("cluster3", I1),
                    new("cluster4", I1),
                    new("cluster5", I2),
                ],
                ..Default::default()
            },
        );
    }
}

// ---------------------------------------------------------------------------------
// TestGetRolloutCluster_ProgressivePerGroup
// ---------------------------------------------------------------------------------

mod get_rollout_cluster_progressive_per_group {
    use super::*;

    fn per_group(p: Value) -> Value {
        json!({"type": "ProgressivePerGroup", "progressivePerGroup": p})
    }

    #[test]
    fn test_progressivepergroup_rollout_with_timeout_90s_without_workload_created() {
        case(
            per_group(json!({"progressDeadline": "90s"})),
            g_3_3(),
            vec![],
            Expect {
                to_rollout: vec![
                    new("cluster1", G1),
                    new("cluster2", G1),
                    new("cluster3", G1),
                ],
                ..Default::default()
            },
        );
    }

    #[test]
    fn test_progressivepergroup_rollout_with_timeout_90s_and_all_workload_clusterrolloutstatus_are_in_toapply_status()
     {
        let mut existing = one_applying_rest_waiting();
        existing.truncate(6); // upstream lists cluster1..cluster6 only
        case(
            per_group(json!({"progressDeadline": "90s"})),
            g_3_3(),
            existing,
            Expect {
                to_rollout: vec![
                    e("cluster1", G1, Progressing, -60, 30),
                    new("cluster2", G1),
                    new("cluster3", G1),
                ],
                recheck_secs: Some(30),
                ..Default::default()
            },
        );
    }

    #[test]
    fn test_progressivepergroup_rollout_with_timeout_90s() {
        case(
            per_group(json!({"progressDeadline": "90s"})),
            g_3_3(),
            done_failed_applying(),
            Expect {
                to_rollout: vec![e("cluster3", G1, Progressing, -60, 30)],
                timed_out: vec![e("cluster2", G1, TimeOut, -120, -30)],
                breach: true,
                recheck_secs: Some(30),
                ..Default::default()
            },
        );
    }

    #[test]
    fn test_progressivepergroup_rollout_with_timeout_90s_and_first_group_timeout_maxfailures_2() {
        case(
            per_group(json!({"progressDeadline": "90s", "maxFailures": 2})),
            g_3_3_3(),
            done_failed_done(),
            Expect {
                to_rollout: vec![
                    new("cluster4", I1),
                    new("cluster5", I1),
                    new("cluster6", I1),
                ],
                timed_out: vec![e("cluster2", G1, TimeOut, -120, -30)],
                ..Default::default()
            },
        );
    }

    #[test]
    fn test_progressivepergroup_rollout_with_timeout_90s_and_first_group_timeout_second_group_succeeded()
     {
        let mut existing = done_failed_done();
        for c in ["cluster4", "cluster5", "cluster6"] {
            existing.push(w(c, I1, Succeeded, -60));
        }
        case(
            per_group(json!({"progressDeadline": "90s", "maxFailures": 2})),
            g_3_3_3(),
            existing,
            Expect {
                to_rollout: vec![
                    new("cluster7", I2),
                    new("cluster8", I2),
                    new("cluster9", I2),
                ],
                timed_out: vec![e("cluster2", G1, TimeOut, -120, -30)],
                ..Default::default()
            },
        );
    }

    #[test]
    fn test_progressivepergroup_rollout_with_timeout_none_and_first_group_failing() {
        case(
            per_group(json!({"progressDeadline": "None"})),
            g_3_3_3(),
            done_failed_done(),
            Expect {
                to_rollout: vec![e("cluster2", G1, Failed, -120, None)],
                breach: true,
                ..Default::default()
            },
        );
    }

    #[test]
    fn test_progressivepergroup_rollout_with_timeout_none_first_group_1_cluster_is_failing_and_maxfailures_is_2()
     {
        case(
            per_group(json!({"progressDeadline": "None", "maxFailures": 2})),
            g_3_3_3(),
            done_failed_done(),
            Expect {
                to_rollout: vec![
                    e("cluster2", G1, Failed, -120, None),
                    new("cluster4", I1),
                    new("cluster5", I1),
                    new("cluster6", I1),
                ],
                ..Default::default()
            },
        );
    }

    #[test]
    fn test_progressivepergroup_rollout_with_timeout_none_first_group_2_clusters_are_failing_2_and_maxfailures_is_30()
     {
        case(
            per_group(json!({"progressDeadline": "None", "maxFailures": "30%"})),
            g_3_3_3(),
            vec![
                w("cluster1", G1, Succeeded, -60),
                w("cluster2", G1, Failed, -120),
                w("cluster3", G1, Failed, -120),
            ],
            Expect {
                to_rollout: vec![
                    e("cluster2", G1, Failed, -120, None),
                    e("cluster3", G1, Failed, -120, None),
                ],
                breach: true,
                ..Default::default()
            },
        );
    }

    #[test]
    fn test_progressivepergroup_rollout_with_mandatorydecisiongroup_failing_and_timeout_90s() {
        case(
            per_group(
                json!({"mandatoryDecisionGroups": [{"groupName": "group1"}], "progressDeadline": "90s"}),
            ),
            g_3_3(),
            vec![
                w("cluster1", G1, Succeeded, -60),
                w("cluster2", G1, Failed, -120),
                w("cluster3", G1, Failed, -120),
            ],
            Expect {
                timed_out: vec![
                    e("cluster2", G1, TimeOut, -120, -30),
                    e("cluster3", G1, TimeOut, -120, -30),
                ],
                breach: true,
                ..Default::default()
            },
        );
    }

    #[test]
    fn test_progressivepergroup_rollout_with_mandatorydecisiongroup_failing_1_cluster_timeout_90s_and_with_maxfailures_is_2()
     {
        case(
            per_group(json!({
                "mandatoryDecisionGroups": [{"groupName": "group1"}],
                "progressDeadline": "90s", "maxFailures": 2
            })),
            g_3_3_3(),
            done_failed_done(),
            Expect {
                timed_out: vec![e("cluster2", G1, TimeOut, -120, -30)],
                breach: true,
                ..Default::default()
            },
        );
    }

    #[test]
    fn test_progressivepergroup_rollout_with_mandatorydecisiongroup_succeeded_and_timeout_90s() {
        case(
            per_group(
                json!({"mandatoryDecisionGroups": [{"groupName": "group1"}], "progressDeadline": "90s"}),
            ),
            g_3_3_3(),
            vec![
                w("cluster1", G1, Succeeded, -60),
                w("cluster2", G1, Succeeded, -60),
                w("cluster3", G1, Succeeded, -60),
            ],
            Expect {
                to_rollout: vec![
                    new("cluster4", I1),
                    new("cluster5", I1),
                    new("cluster6", I1),
                ],
                ..Default::default()
            },
        );
    }

    #[test]
    fn test_progressivepergroup_rollout_with_minsuccesstime_and_mixed_cluster_states() {
        case(
            per_group(
                json!({"progressDeadline": "90s", "maxFailures": "50%", "minSuccessTime": "1m0s"}),
            ),
            groups(&[
                (G1, &["cluster1", "cluster2", "cluster3"]),
                (G2_1, &["cluster4", "cluster5"]),
            ]),
            vec![
                w("cluster1", G1, Succeeded, -30),
                w("cluster2", G1, Succeeded, -120),
                w("cluster3", G1, Progressing, -30),
            ],
            Expect {
                to_rollout: vec![
                    e("cluster1", G1, Succeeded, -30, 30),
                    e("cluster3", G1, Progressing, -30, 60),
                ],
                recheck_secs: Some(30),
                ..Default::default()
            },
        );
    }
}

// ---------------------------------------------------------------------------------
// TestGetRolloutCluster_ClusterAdded
// ---------------------------------------------------------------------------------

mod get_rollout_cluster_cluster_added {
    use super::*;

    #[test]
    fn test_rollout_all_with_timeout_90s_and_cluster_added() {
        case(
            json!({"type": "All", "all": {"progressDeadline": "90s"}}),
            groups(&[
                (G1, &["cluster1", "cluster2", "cluster7"]),
                (I1, &["cluster3", "cluster4", "cluster5", "cluster6"]),
            ]),
            vec![
                w("cluster1", G1, Succeeded, -60),
                w("cluster2", G1, Failed, -120),
                w("cluster3", I1, Progressing, -120),
                w("cluster4", I1, Failed, -60),
                w("cluster5", I1, Progressing, -60),
            ],
            Expect {
                to_rollout: vec![
                    e("cluster4", I1, Failed, -60, 30),
                    e("cluster5", I1, Progressing, -60, 30),
                    new("cluster6", I1),
                    new("cluster7", G1),
                ],
                timed_out: vec![
                    e("cluster2", G1, TimeOut, -120, -30),
                    e("cluster3", I1, TimeOut, -120, -30),
                ],
                recheck_secs: Some(30),
                ..Default::default()
            },
        );
    }

    #[test]
    fn test_progressive_rollout_with_mandatory_decision_groups_succeed_and_clusters_added_after_rollout()
     {
        case(
            json!({"type": "Progressive", "progressive": {
                "mandatoryDecisionGroups": [{"groupName": "group1"}],
                "maxConcurrency": 3, "progressDeadline": "90s"
            }}),
            groups(&[
                (G1, &["cluster1", "cluster2", "cluster7"]),
                (I1, &["cluster3", "cluster4", "cluster8"]),
                (I2, &["cluster5", "cluster6", "cluster9"]),
            ]),
            vec![
                w("cluster1", G1, Succeeded, -60),
                w("cluster2", G1, Succeeded, -60),
                w("cluster3", I1, Succeeded, -60),
                w("cluster4", I1, Progressing, -60),
                w("cluster5", I2, Progressing, -60),
            ],
            Expect {
                to_rollout: vec![
                    e("cluster4", I1, Progressing, -60, 30),
                    e("cluster5", I2, Progressing, -60, 30),
                    new("cluster7", G1),
                ],
                recheck_secs: Some(30),
                ..Default::default()
            },
        );
    }

    #[test]
    fn test_progressivepergroup_rollout_with_timeout_90s_and_cluster_added_after_rollout_start() {
        case(
            json!({"type": "ProgressivePerGroup", "progressivePerGroup": {"progressDeadline": "90s"}}),
            g_3_3(),
            vec![
                w("cluster1", G1, Succeeded, -60),
                w("cluster2", G1, Succeeded, -60),
                w("cluster4", I1, Progressing, -60),
                w("cluster5", I1, Progressing, -60),
            ],
            Expect {
                to_rollout: vec![
                    e("cluster4", I1, Progressing, -60, 30),
                    e("cluster5", I1, Progressing, -60, 30),
                    new("cluster3", G1),
                ],
                recheck_secs: Some(30),
                ..Default::default()
            },
        );
    }
}

// ---------------------------------------------------------------------------------
// TestGetRolloutCluster_ClusterRemoved
// ---------------------------------------------------------------------------------

mod get_rollout_cluster_cluster_removed {
    use super::*;

    #[test]
    fn test_rollout_all_with_timeout_90s_and_clusters_removed() {
        case(
            json!({"type": "All", "all": {"progressDeadline": "90s"}}),
            groups(&[(G1, &["cluster1"]), (I1, &["cluster3", "cluster5"])]),
            vec![
                w("cluster1", G1, Succeeded, -60),
                w("cluster2", G1, Failed, -120),
                w("cluster3", I1, Progressing, -120),
                w("cluster4", I1, Failed, -60),
                w("cluster5", I1, Progressing, -60),
            ],
            Expect {
                to_rollout: vec![e("cluster5", I1, Progressing, -60, 30)],
                timed_out: vec![e("cluster3", I1, TimeOut, -120, -30)],
                removed: vec![
                    w("cluster2", G1, Failed, -120),
                    w("cluster4", I1, Failed, -60),
                ],
                recheck_secs: Some(30),
                ..Default::default()
            },
        );
    }

    #[test]
    fn test_progressive_rollout_with_timeout_90s_maxfailures_100_and_cluster_removed() {
        case(
            json!({"type": "Progressive", "progressive": {
                "progressDeadline": "90s", "maxFailures": "100%", "maxConcurrency": 2
            }}),
            groups(&[
                (G1, &["cluster2", "cluster3"]),
                (I1, &["cluster4", "cluster5", "cluster6"]),
            ]),
            done_failed_applying(),
            Expect {
                to_rollout: vec![e("cluster3", G1, Progressing, -60, 30), new("cluster4", I1)],
                timed_out: vec![e("cluster2", G1, TimeOut, -120, -30)],
                removed: vec![w("cluster1", G1, Succeeded, -60)],
                recheck_secs: Some(30),
                ..Default::default()
            },
        );
    }

    #[test]
    fn test_progressive_rollout_with_mandatorydecisiongroup_timeout_90s_and_cluster_removed_from_mandatorydecisiongroup()
     {
        case(
            json!({"type": "Progressive", "progressive": {
                "mandatoryDecisionGroups": [{"groupName": "group1"}],
                "progressDeadline": "90s", "maxConcurrency": 2
            }}),
            groups(&[
                (G1, &["cluster1", "cluster3"]),
                (I1, &["cluster4", "cluster5", "cluster6"]),
            ]),
            done_failed_done(),
            Expect {
                to_rollout: vec![new("cluster4", I1), new("cluster5", I1)],
                removed: vec![w("cluster2", G1, Failed, -120)],
                ..Default::default()
            },
        );
    }

    #[test]
    fn test_progressivepergroup_rollout_with_timeout_90s_and_cluster_removed_after_rollout_start() {
        case(
            json!({"type": "ProgressivePerGroup", "progressivePerGroup": {"progressDeadline": "90s"}}),
            groups(&[
                (G1, &["cluster1", "cluster3"]),
                (I1, &["cluster4", "cluster5", "cluster6"]),
            ]),
            vec![
                w("cluster1", G1, Succeeded, -60),
                w("cluster2", G1, Failed, -60),
                w("cluster3", G1, Progressing, -60),
            ],
            Expect {
                to_rollout: vec![e("cluster3", G1, Progressing, -60, 30)],
                removed: vec![w("cluster2", G1, Failed, -60)],
                recheck_secs: Some(30),
                ..Default::default()
            },
        );
    }

    #[test]
    fn test_progressivepergroup_rollout_with_timeout_90s_and_cluster_removed_after_rollout_start_while_the_group_timeout()
     {
        case(
            json!({"type": "ProgressivePerGroup", "progressivePerGroup": {"progressDeadline": "90s", "maxFailures": 2}}),
            groups(&[
                (G1, &["cluster1", "cluster3"]),
                (I1, &["cluster4", "cluster5", "cluster6"]),
            ]),
            vec![
                w("cluster1", G1, Succeeded, -60),
                w("cluster2", G1, Failed, -60),
                w("cluster3", G1, Progressing, -120),
            ],
            Expect {
                to_rollout: vec![
                    new("cluster4", I1),
                    new("cluster5", I1),
                    new("cluster6", I1),
                ],
                timed_out: vec![e("cluster3", G1, TimeOut, -120, -30)],
                removed: vec![w("cluster2", G1, Failed, -60)],
                ..Default::default()
            },
        );
    }

    #[test]
    fn test_progressivepergroup_rollout_with_mandatorydecisiongroup_timeout_90s_and_cluster_removed_from_mandatorydecisiongroup()
     {
        case(
            json!({"type": "ProgressivePerGroup", "progressivePerGroup": {
                "mandatoryDecisionGroups": [{"groupName": "group1"}], "progressDeadline": "90s"
            }}),
            groups(&[
                (G1, &["cluster1", "cluster3"]),
                (I1, &["cluster4", "cluster5", "cluster6"]),
                (I2, &["cluster7", "cluster8", "cluster9"]),
            ]),
            done_failed_done(),
            Expect {
                to_rollout: vec![
                    new("cluster4", I1),
                    new("cluster5", I1),
                    new("cluster6", I1),
                ],
                removed: vec![w("cluster2", G1, Failed, -120)],
                ..Default::default()
            },
        );
    }
}

// ---------------------------------------------------------------------------------
// TestDetermineRolloutStatus
// ---------------------------------------------------------------------------------

mod determine_rollout_status_cases {
    use super::*;

    fn minute(n: i64) -> SignedDuration {
        SignedDuration::from_mins(n)
    }

    fn status(s: RolloutStatus, ltt: impl Into<Option<i64>>) -> ClusterRolloutStatus {
        ClusterRolloutStatus {
            cluster: "cluster1".into(),
            group: GroupKey::default(),
            status: s,
            last_transition_time: ltt.into().map(at),
            recheck_time: None,
        }
    }

    fn with_recheck(mut s: ClusterRolloutStatus, secs: i64) -> ClusterRolloutStatus {
        s.recheck_time = Some(at(secs));
        s
    }

    /// Upstream passes a duration, where `maxTimeDuration` would mean none; all these
    /// cases use finite ones.
    fn check(
        input: ClusterRolloutStatus,
        min_success: SignedDuration,
        timeout: SignedDuration,
        want: Determined,
    ) {
        let got =
            determine_rollout_status(&input, min_success, Deadline::After(timeout), fake_time());
        assert_eq!(got, want);
    }

    #[test]
    fn toapply_status() {
        let s = status(ToApply, None);
        check(s.clone(), minute(0), minute(1), Determined::Rollout(s));
    }

    #[test]
    fn skip_status() {
        check(
            status(Skip, None),
            minute(0),
            minute(1),
            Determined::Dropped,
        );
    }

    #[test]
    fn succeeded_status() {
        check(
            status(Succeeded, None),
            minute(0),
            minute(1),
            Determined::Dropped,
        );
    }

    #[test]
    fn succeeded_status_within_the_minsuccesstime() {
        let s = status(Succeeded, None);
        let want = Determined::Rollout(with_recheck(s.clone(), 60));
        check(s, minute(1), minute(0), want);
    }

    #[test]
    fn succeeded_status_outside_the_minsuccesstime() {
        check(
            status(Succeeded, -120),
            minute(1),
            minute(0),
            Determined::Dropped,
        );
    }

    #[test]
    fn timeout_status() {
        check(
            status(TimeOut, None),
            minute(0),
            minute(1),
            Determined::Dropped,
        );
    }

    #[test]
    fn progressing_status_within_the_timeout_duration() {
        let s = status(Progressing, -30);
        let want = Determined::Rollout(with_recheck(s.clone(), 30));
        check(s, minute(0), minute(1), want);
    }

    #[test]
    fn failed_status_outside_of_the_timeout_duration() {
        let s = status(Failed, -60);
        let want = Determined::TimedOut(with_recheck(status(TimeOut, -60), 0));
        check(s, minute(0), minute(1), want);
    }

    /// Adapted: upstream's status 8 takes the Progressing/Failed branch.
    #[test]
    fn unknown_status_outside_of_the_timeout_duration() {
        let want = Determined::TimedOut(with_recheck(status(TimeOut, -60), 0));
        check(status(Progressing, -60), minute(0), minute(1), want);
    }

    /// Adapted: upstream's status 9 takes the Progressing/Failed branch and keeps it.
    #[test]
    fn unknown_status_within_the_timeout_duration() {
        let s = status(Failed, -30);
        let want = Determined::Rollout(with_recheck(s.clone(), 30));
        check(s, minute(0), minute(1), want);
    }

    #[test]
    fn succeeded_status_with_nil_lasttransitiontime_and_minsuccesstime() {
        let s = status(Succeeded, None);
        let want = Determined::Rollout(with_recheck(s.clone(), 120));
        check(s, minute(2), minute(0), want);
    }
}

// ---------------------------------------------------------------------------------
// TestMinRecheckAfter
// ---------------------------------------------------------------------------------

mod min_recheck_after_cases {
    use super::*;

    fn c(name: &str, s: RolloutStatus, recheck: impl Into<Option<i64>>) -> ClusterRolloutStatus {
        e(name, ("", 0), s, None, recheck)
    }

    fn check(list: &[ClusterRolloutStatus], want: Option<i64>) {
        assert_eq!(
            min_recheck_after(list, fake_time()),
            want.map(SignedDuration::from_secs)
        );
    }

    #[test]
    fn single_cluster_with_rechecktime_in_30s() {
        check(&[c("cluster1", Progressing, 30)], Some(30));
    }

    #[test]
    fn multiple_clusters_minimum_rechecktime_should_be_selected() {
        check(
            &[
                c("cluster1", Succeeded, 60),
                c("cluster2", Progressing, 30),
                c("cluster3", Progressing, 60),
            ],
            Some(30),
        );
    }

    #[test]
    fn mixed_timeout_and_soak_period_scenarios() {
        check(
            &[
                c("cluster1", Succeeded, 30),
                c("cluster2", Progressing, 30),
                c("cluster3", Progressing, 60),
            ],
            Some(30),
        );
    }

    #[test]
    fn no_rechecktime_set_should_return_nil() {
        check(
            &[c("cluster1", ToApply, None), c("cluster2", ToApply, None)],
            None,
        );
    }

    #[test]
    fn no_clusters_should_return_nil() {
        check(&[], None);
    }

    #[test]
    fn only_clusters_with_rechecktime_are_considered() {
        check(
            &[
                c("cluster1", ToApply, None),
                c("cluster2", Progressing, 60),
                c("cluster3", ToApply, None),
            ],
            Some(60),
        );
    }
}

// ---------------------------------------------------------------------------------
// TestCalculateRolloutSize (total 100, default 100)
// ---------------------------------------------------------------------------------

mod calculate_rollout_size_cases {
    use super::*;

    fn size(v: IntOrString) -> Result<usize, String> {
        parse_size(&v).map(|s| s.resolve(100, 100))
    }

    #[test]
    fn maxconcurrency_type_is_int() {
        assert_eq!(size(IntOrString::Int(50)), Ok(50));
    }

    #[test]
    fn maxconcurrency_type_is_string_with_percentage() {
        assert_eq!(
            size(IntOrString::String("30%".into())),
            Ok((0.3f64 * 100.0).ceil() as usize)
        );
    }

    /// Adapted: the error comes from parsing; upstream also returns the default.
    #[test]
    fn maxconcurrency_type_is_string_without_percentage() {
        assert_eq!(
            size(IntOrString::String("invalid".into())),
            Err(
                "'invalid' is an invalid maximum threshold value: string is not a percentage"
                    .into()
            )
        );
    }

    #[test]
    fn maxconcurrency_type_is_int_0() {
        assert_eq!(size(IntOrString::Int(0)), Ok(100));
    }

    #[test]
    fn maxconcurrency_type_is_int_but_out_of_range() {
        assert_eq!(size(IntOrString::Int(101)), Ok(100));
    }

    #[test]
    fn maxconcurrency_type_is_string_with_percentage_but_out_of_range() {
        assert_eq!(size(IntOrString::String("200%".into())), Ok(100));
    }
}

// ---------------------------------------------------------------------------------
// TestParseTimeout
// ---------------------------------------------------------------------------------

mod parse_timeout_cases {
    use super::*;

    fn invalid(s: &str) {
        let err = parse_deadline(s).expect_err("should be refused");
        assert!(err.starts_with("invalid timeout format"), "{err}");
    }

    #[test]
    fn valid_timeout_with_hours() {
        assert_eq!(
            parse_deadline("2h"),
            Ok(Deadline::After(SignedDuration::from_hours(2)))
        );
    }

    #[test]
    fn valid_timeout_with_minutes() {
        assert_eq!(
            parse_deadline("30m"),
            Ok(Deadline::After(SignedDuration::from_mins(30)))
        );
    }

    #[test]
    fn valid_timeout_with_seconds() {
        assert_eq!(
            parse_deadline("10s"),
            Ok(Deadline::After(SignedDuration::from_secs(10)))
        );
    }

    #[test]
    fn none_timeout() {
        assert_eq!(parse_deadline("None"), Ok(Deadline::None));
    }

    #[test]
    fn empty_string_timeout() {
        assert_eq!(parse_deadline(""), Ok(Deadline::None));
    }

    /// Upstream names two cases "Invalid format" ("2d" and "0").
    #[test]
    fn invalid_format() {
        invalid("2d");
    }

    #[test]
    fn invalid_format_0() {
        invalid("0");
    }

    #[test]
    fn invalid_numeric_value() {
        invalid("2d0s");
    }

    #[test]
    fn invalid_unit() {
        invalid("10g");
    }
}

// ---------------------------------------------------------------------------------
// TestDecisionGroupsToGroupKeys
// ---------------------------------------------------------------------------------

mod decision_groups_to_group_keys_cases {
    use super::*;

    fn mdg(name: Option<&str>, index: Option<i32>) -> MandatoryDecisionGroup {
        MandatoryDecisionGroup {
            group_name: name.map(str::to_string),
            group_index: index,
        }
    }

    fn name(n: &str) -> MandatoryGroup {
        MandatoryGroup::Name(n.into())
    }

    #[test]
    fn both_groupname_and_groupindex_are_set() {
        let got = mandatory_groups(&[mdg(Some("group1"), Some(1)), mdg(Some("group2"), Some(2))]);
        assert_eq!(got, vec![name("group1"), name("group2")]);
    }

    #[test]
    fn only_groupname_is_set() {
        let got = mandatory_groups(&[mdg(Some("group1"), None), mdg(Some("group2"), None)]);
        assert_eq!(got, vec![name("group1"), name("group2")]);
    }

    #[test]
    fn only_groupindex_is_set() {
        let got = mandatory_groups(&[mdg(None, Some(1)), mdg(None, Some(2))]);
        assert_eq!(
            got,
            vec![MandatoryGroup::Index(1), MandatoryGroup::Index(2)]
        );
    }

    #[test]
    fn both_groupname_and_groupindex_are_empty() {
        let got = mandatory_groups(&[mdg(None, None)]);
        assert_eq!(got, vec![MandatoryGroup::Index(0)]);
        // An empty name counts as unset, as Go's zero value does.
        assert_eq!(
            mandatory_groups(&[mdg(Some(""), Some(3))]),
            vec![MandatoryGroup::Index(3)]
        );
    }

    #[test]
    fn empty_mandatorydecisiongroup() {
        assert_eq!(mandatory_groups(&[]), vec![]);
    }
}

// ---------------------------------------------------------------------------------
// Where the fixed mode parts from upstream (not upstream cases).
// ---------------------------------------------------------------------------------

mod fixes {
    use super::*;

    fn both(
        s: &Value,
        g: &DecisionGroups,
        existing: &[ClusterRolloutStatus],
    ) -> (RolloutResult, RolloutResult) {
        (
            run(s, g, existing, Compat::default()),
            run(s, g, existing, UPSTREAM),
        )
    }

    fn canary_then_rest() -> DecisionGroups {
        groups(&[(("canary", 0), &["c0"]), (I1, &["c1", "c2", "c3", "c4"])])
    }

    /// A non-mandatory TimeOut keeps upstream in the mandatory phase forever, without a
    /// breach; fixed, the TimeOut counts against maxFailures in the normal phase.
    #[test]
    fn fix_non_mandatory_timeout_no_longer_blocks_forever() {
        let s = json!({"type": "Progressive", "progressive": {
            "mandatoryDecisionGroups": [{"groupName": "canary"}],
            "progressDeadline": "90s", "maxConcurrency": 2, "maxFailures": 1
        }});
        let existing = vec![
            w("c0", ("canary", 0), Succeeded, -600),
            w("c1", I1, Progressing, -120),
        ];
        let (fixed, upstream) = both(&s, &canary_then_rest(), &existing);

        assert!(upstream.to_rollout.is_empty());
        assert_eq!(upstream.timed_out, vec![e("c1", I1, TimeOut, -120, -30)]);
        assert!(!upstream.max_failure_breach);

        assert_eq!(fixed.to_rollout, vec![new("c2", I1), new("c3", I1)]);
        assert_eq!(fixed.timed_out, upstream.timed_out);
        assert!(!fixed.max_failure_breach);

        // One more failure than tolerated: fixed breaches, upstream still just blocks.
        let mut two = existing.clone();
        two.push(w("c2", I1, Failed, -10));
        let (fixed, upstream) = both(&s, &canary_then_rest(), &two);
        assert!(fixed.max_failure_breach);
        assert!(!upstream.max_failure_breach);
    }

    /// A Failed cluster in a later group (no progressDeadline) held upstream's walk at
    /// the earlier, finished group: its failure was never counted, so the rollout
    /// neither breached nor went on. Fixed: the failure counts in its own group.
    #[test]
    fn fix_failed_cluster_in_a_later_group_is_counted() {
        let g = groups(&[
            (("", 0), &["a1", "a2"]),
            (("", 1), &["b1", "b2"]),
            (("", 2), &["c1"]),
        ]);
        let existing = vec![
            w("a1", ("", 0), Succeeded, -600),
            w("a2", ("", 0), Succeeded, -600),
            w("b1", ("", 1), Failed, -60),
            w("b2", ("", 1), Succeeded, -60),
        ];
        let failed = e("b1", ("", 1), Failed, -60, None);

        // maxFailures 0: fixed breaches and starts nothing; upstream waits for ever.
        let s = json!({"type": "ProgressivePerGroup"});
        let (fixed, upstream) = both(&s, &g, &existing);
        assert!(fixed.max_failure_breach);
        assert_eq!(fixed.to_rollout, vec![failed.clone()]);
        assert!(!upstream.max_failure_breach);
        assert_eq!(upstream.to_rollout, vec![failed.clone()]);

        // maxFailures 1: fixed tolerates it and starts the next group; upstream still waits.
        let s = json!({"type": "ProgressivePerGroup",
            "progressivePerGroup": {"maxFailures": 1}});
        let (fixed, upstream) = both(&s, &g, &existing);
        assert!(!fixed.max_failure_breach);
        assert_eq!(fixed.to_rollout, vec![failed.clone(), new("c1", ("", 2))]);
        assert!(!upstream.max_failure_breach);
        assert_eq!(upstream.to_rollout, vec![failed]);
    }

    /// A tolerated TimeOut offset a cluster still progressing in upstream's walk, so
    /// the next group started early; fixed, the group waits for it.
    #[test]
    fn fix_tolerated_timeout_does_not_start_the_next_group_early() {
        let s = json!({"type": "ProgressivePerGroup",
            "progressivePerGroup": {"maxFailures": 1, "progressDeadline": "60s"}});
        let g = groups(&[(("", 0), &["a", "b"]), (("", 1), &["c"])]);
        let existing = vec![
            w("a", ("", 0), Progressing, -120),
            w("b", ("", 0), Progressing, -10),
        ];
        let (fixed, upstream) = both(&s, &g, &existing);
        let b = e("b", ("", 0), Progressing, -10, 50);
        let a = e("a", ("", 0), TimeOut, -120, -60);
        assert_eq!(upstream.timed_out, vec![a.clone()]);
        assert_eq!(upstream.to_rollout, vec![b.clone(), new("c", ("", 1))]);
        assert_eq!(fixed.timed_out, vec![a]);
        assert_eq!(fixed.to_rollout, vec![b]);
        assert!(!fixed.max_failure_breach && !upstream.max_failure_breach);
    }

    /// An in-flight non-mandatory cluster used to cut the walk over the mandatory
    /// groups short (found by the property tests): fixed, the later mandatory group
    /// still starts, and nothing else does until it is done.
    #[test]
    fn fix_in_flight_cluster_does_not_skip_a_later_mandatory_group() {
        let s = json!({"type": "Progressive", "progressive": {
            "mandatoryDecisionGroups": [{"groupIndex": 1}, {"groupName": "wave"}]
        }});
        let g = groups(&[
            (("", 0), &["c0", "c1", "c2"]),
            (("", 1), &["c3"]),
            (("wave", 2), &["c4"]),
        ]);
        let existing = vec![
            w("c3", ("", 1), Succeeded, -60),
            w("c0", ("", 0), Progressing, -60),
        ];
        let (fixed, upstream) = both(&s, &g, &existing);
        let in_flight = e("c0", ("", 0), Progressing, -60, None);
        assert_eq!(
            fixed.to_rollout,
            vec![in_flight.clone(), new("c4", ("wave", 2))]
        );
        assert_eq!(upstream.to_rollout, vec![in_flight]);
    }

    /// Upstream moves in whole batches once the mandatory groups are done (an in-flight
    /// cluster holds the mandatory phase); fixed, the window slides.
    #[test]
    fn fix_progressive_window_slides_after_mandatory_groups() {
        let s = json!({"type": "Progressive", "progressive": {
            "mandatoryDecisionGroups": [{"groupName": "canary"}], "maxConcurrency": 2
        }});
        let existing = vec![
            w("c0", ("canary", 0), Succeeded, -600),
            w("c1", I1, Succeeded, -60),
            w("c2", I1, Progressing, -60),
        ];
        let (fixed, upstream) = both(&s, &canary_then_rest(), &existing);
        assert_eq!(
            upstream.to_rollout,
            vec![e("c2", I1, Progressing, -60, None)]
        );
        assert_eq!(
            fixed.to_rollout,
            vec![e("c2", I1, Progressing, -60, None), new("c3", I1)]
        );
    }

    /// Upstream never reports a breach for a failing non-mandatory group while it is
    /// held in the mandatory phase; fixed, the group's tolerance applies.
    #[test]
    fn fix_per_group_breach_after_mandatory_groups() {
        let s = json!({"type": "ProgressivePerGroup", "progressivePerGroup": {
            "mandatoryDecisionGroups": [{"groupIndex": 0}]
        }});
        let mut existing = vec![
            w("c0", ("canary", 0), Succeeded, -600),
            w("c1", I1, Failed, -60),
        ];
        for c in ["c2", "c3", "c4"] {
            existing.push(w(c, I1, Succeeded, -60));
        }
        let (fixed, upstream) = both(&s, &canary_then_rest(), &existing);
        assert!(fixed.max_failure_breach);
        assert!(!upstream.max_failure_breach);
        assert_eq!(upstream.to_rollout, vec![e("c1", I1, Failed, -60, None)]);
        assert_eq!(fixed.to_rollout, upstream.to_rollout);
    }

    /// A mandatory cluster that comes in as TimeOut breaches with nothing listed:
    /// upstream then leaves the mandatory phase and starts the next group; fixed, zero
    /// tolerance holds. (Progressive happens to stop either way: its normal phase
    /// counts the TimeOut against maxFailures again.)
    #[test]
    fn fix_mandatory_timeout_input_holds_the_mandatory_phase() {
        let s = json!({"type": "ProgressivePerGroup", "progressivePerGroup": {
            "mandatoryDecisionGroups": [{"groupName": "canary"}]
        }});
        let existing = vec![w("c0", ("canary", 0), TimeOut, -600)];
        let (fixed, upstream) = both(&s, &canary_then_rest(), &existing);
        assert!(fixed.max_failure_breach);
        assert!(fixed.to_rollout.is_empty());
        assert!(!upstream.max_failure_breach);
        let started: Vec<_> = upstream.to_rollout.iter().map(|c| &*c.cluster).collect();
        assert_eq!(started, ["c1", "c2", "c3", "c4"]);
    }

    /// A cluster that joined a group after it breached: upstream starts it anyway.
    #[test]
    fn fix_no_cluster_starts_in_a_breached_group() {
        let s = json!({"type": "ProgressivePerGroup"});
        let g = groups(&[(G1, &["a", "b", "c"]), (I1, &["d"])]);
        let existing = vec![w("a", G1, Succeeded, -60), w("b", G1, Failed, -60)];
        let (fixed, upstream) = both(&s, &g, &existing);
        assert!(fixed.max_failure_breach && upstream.max_failure_breach);
        assert_eq!(fixed.to_rollout, vec![e("b", G1, Failed, -60, None)]);
        assert_eq!(
            upstream.to_rollout,
            vec![e("b", G1, Failed, -60, None), new("c", G1)]
        );
    }

    /// Groups after a gap in the indices: upstream never rolls them out and reports
    /// their clusters as removed.
    #[test]
    fn fix_group_index_gap() {
        let s = json!({"type": "ProgressivePerGroup"});
        let g = groups(&[(G1, &["a"]), (I2, &["b"])]);
        let existing = vec![w("a", G1, Succeeded, -60), w("b", I2, Progressing, -60)];
        let (fixed, upstream) = both(&s, &g, &existing);
        assert_eq!(fixed.to_rollout, vec![e("b", I2, Progressing, -60, None)]);
        assert!(fixed.removed.is_empty());
        assert!(upstream.to_rollout.is_empty());
        assert_eq!(upstream.removed, vec![w("b", I2, Progressing, -60)]);

        let fresh = both(&json!({"type": "All"}), &g, &[]);
        assert_eq!(fresh.0.to_rollout, vec![new("a", G1), new("b", I2)]);
        assert_eq!(fresh.1.to_rollout, vec![new("a", G1)]);
    }
}

// ---------------------------------------------------------------------------------
// Upstream semantics the upstream table leaves uncovered (not upstream cases).
// ---------------------------------------------------------------------------------

mod uncovered {
    use super::*;

    fn progressive(p: Value) -> Value {
        json!({"type": "Progressive", "progressive": p})
    }

    fn abc() -> DecisionGroups {
        groups(&[(G1, &["a", "b", "c", "d"])])
    }

    #[test]
    fn existing_statuses_take_slots_in_cluster_name_order() {
        let existing = vec![
            w("c", G1, Progressing, -10),
            w("b", G1, Progressing, -10),
            w("a", G1, Progressing, -10),
        ];
        case(
            progressive(json!({"maxConcurrency": 2})),
            abc(),
            existing,
            Expect {
                to_rollout: vec![
                    e("a", G1, Progressing, -10, None),
                    e("b", G1, Progressing, -10, None),
                ],
                ..Default::default()
            },
        );
    }

    #[test]
    fn after_a_breach_existing_toapply_clusters_are_not_started() {
        let existing = vec![
            w("c", G1, Progressing, -10),
            w("b", G1, ToApply, None),
            w("a", G1, Failed, -10),
        ];
        case(
            progressive(json!({"maxConcurrency": 3})),
            abc(),
            existing,
            Expect {
                to_rollout: vec![
                    e("a", G1, Failed, -10, None),
                    e("c", G1, Progressing, -10, None),
                ],
                breach: true,
                ..Default::default()
            },
        );
    }

    #[test]
    fn a_cluster_times_out_exactly_at_its_deadline() {
        case(
            progressive(json!({"progressDeadline": "90s", "maxConcurrency": 1, "maxFailures": 1})),
            abc(),
            vec![w("a", G1, Progressing, -90), w("b", G1, Progressing, -89)],
            Expect {
                to_rollout: vec![e("b", G1, Progressing, -89, 1)],
                timed_out: vec![e("a", G1, TimeOut, -90, 0)],
                recheck_secs: Some(1),
                ..Default::default()
            },
        );
    }

    #[test]
    fn all_ignores_min_success_time_and_max_failures() {
        case(
            json!({"type": "All", "all": {"minSuccessTime": "5m", "maxFailures": 0}}),
            abc(),
            vec![
                w("a", G1, Succeeded, -10),
                w("b", G1, Failed, -10),
                w("c", G1, Failed, -10),
            ],
            Expect {
                to_rollout: vec![
                    e("b", G1, Failed, -10, None),
                    e("c", G1, Failed, -10, None),
                    new("d", G1),
                ],
                ..Default::default()
            },
        );
    }

    #[test]
    fn percent_sizes_round_up() {
        let g = groups(&[(G1, &["a", "b", "c", "d", "e"])]);
        case(
            progressive(json!({"maxConcurrency": "50%"})),
            g,
            vec![],
            Expect {
                to_rollout: vec![new("a", G1), new("b", G1), new("c", G1)],
                ..Default::default()
            },
        );
    }

    #[test]
    fn a_status_without_a_cluster_name_is_reported_removed() {
        let nameless = w("", G1, Progressing, -10);
        case(
            progressive(json!({"maxConcurrency": 1})),
            abc(),
            vec![nameless.clone()],
            Expect {
                to_rollout: vec![new("a", G1)],
                removed: vec![nameless],
                ..Default::default()
            },
        );
    }

    #[test]
    fn skip_and_timeout_inputs_are_dropped_but_timeout_counts_as_a_failure() {
        case(
            progressive(json!({"maxConcurrency": 2})),
            abc(),
            vec![w("a", G1, Skip, None), w("b", G1, TimeOut, -10)],
            Expect {
                breach: true,
                ..Default::default()
            },
        );
    }
}
