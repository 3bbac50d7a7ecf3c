//! What read-only views get besides the clusters ([`super::super::progress`]): each
//! placementRef's budget as the rollout engine counts it (slots against the resolved
//! `maxConcurrency`, failures against the resolved `maxFailures`, per group where the
//! strategy walks groups, the next deadline), and each cluster's deadline.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde_json::json;

use crate::plan::{Observed, Progress, progress};
use crate::plugin::{PluginHealth, PluginInputs};
use crate::rollout::{Budget, DecisionGroups, GroupKey};

use super::{Fixture, Reported, STABLE, mwrs_with, secs, t0};

fn progress_of(f: &Fixture, plugins: &PluginInputs) -> Progress {
    let observed = Observed {
        plugins,
        ..f.observed()
    };
    progress(&observed, t0(), &f.cfg)
}

fn deadlines(p: &Progress) -> BTreeMap<String, Option<Timestamp>> {
    p.clusters
        .iter()
        .map(|c| (c.cluster.to_string(), c.deadline))
        .collect()
}

fn group(name: &str, index: i32) -> GroupKey {
    GroupKey {
        name: name.into(),
        index,
    }
}

#[test]
fn the_window_counts_every_cluster_holding_a_slot_against_the_resolved_limits() {
    let strategy = json!({"type": "Progressive", "progressive": {
        "maxConcurrency": "50%", "maxFailures": 1,
        "minSuccessTime": "5m", "progressDeadline": "10m"}});
    let clusters = ["c1", "c2", "c3", "c4", "c5", "c6"];
    let mut f = Fixture::new(mwrs_with(strategy, Some(STABLE)), &clusters);
    let update = f.store_update();
    // Done a minute ago and still soaking, progressing, failed within its deadline: three
    // slots of three ("50%" of six), so nothing else starts.
    f.work("c1", &update, secs(60), Reported::Done);
    f.work("c2", &update, secs(120), Reported::Progressing);
    f.work("c3", &update, secs(30), Reported::Degraded);
    let p = progress_of(&f, &crate::plugin::NO_PLUGINS);
    assert_eq!(
        p.budgets,
        [Some(Budget {
            group: None,
            in_flight: 3,
            max_concurrency: Some(3),
            failures: 1,
            max_failures: Some(1),
            next_deadline: Some(t0() + secs(480)),
        })]
    );
    let at = |s| Some(t0() + secs(s));
    let want = BTreeMap::from(
        [
            ("c1", None),
            ("c2", at(480)),
            ("c3", at(570)),
            ("c4", None),
            ("c5", None),
            ("c6", None),
        ]
        .map(|(c, d)| (c.to_string(), d)),
    );
    assert_eq!(deadlines(&p), want);
}

#[test]
fn a_group_walk_counts_in_the_group_it_stopped_at() {
    let strategy = json!({"type": "ProgressivePerGroup",
        "progressivePerGroup": {"maxFailures": "50%"}});
    let mut f = Fixture::new(mwrs_with(strategy, Some(STABLE)), &[]);
    let pairs = [
        (group("canary", 0), "a1"),
        (group("canary", 0), "a2"),
        (group("", 1), "b1"),
        (group("", 1), "b2"),
        (group("", 1), "b3"),
        (group("", 1), "b4"),
    ];
    f.placements = vec![crate::placement::PlacementView::found(
        "p",
        DecisionGroups::from_pairs(pairs.map(|(g, c)| (g, c.to_string()))),
    )];
    let update = f.store_update();
    f.work("a1", &update, secs(600), Reported::Done);
    f.work("a2", &update, secs(600), Reported::Done);
    f.work("b1", &update, secs(30), Reported::Degraded);
    f.work("b2", &update, secs(30), Reported::Progressing);
    let p = progress_of(&f, &crate::plugin::NO_PLUGINS);
    assert_eq!(
        p.budgets,
        [Some(Budget {
            group: Some(group("", 1)),
            in_flight: 2,
            max_concurrency: None,
            failures: 1,
            // "50%" of the group's four clusters, not of the placement's six.
            max_failures: Some(2),
            next_deadline: None,
        })]
    );
}

#[test]
fn a_cluster_a_plugin_holds_has_no_deadline() {
    let strategy = json!({"type": "Progressive", "plugin": "judge",
        "progressive": {"maxConcurrency": 2, "progressDeadline": "1m"}});
    let mut f = Fixture::new(mwrs_with(strategy, Some(STABLE)), &["c1", "c2", "c3"]);
    let update = f.store_update();
    f.work("c1", &update, secs(600), Reported::Done);
    f.work("c2", &update, secs(30), Reported::Progressing);
    let plugins = PluginInputs {
        health: BTreeMap::from([(
            "judge".to_string(),
            PluginHealth::Unreachable {
                why: "connection refused".into(),
                since: t0() - secs(60),
            },
        )]),
        ..PluginInputs::default()
    };
    let p = progress_of(&f, &plugins);
    let d = deadlines(&p);
    assert_eq!(
        d["c1"], None,
        "validating, held by the plugin: no deadline runs"
    );
    assert_eq!(d["c2"], Some(t0() + secs(30)));
    let budget = p.budgets[0].clone().unwrap();
    assert_eq!((budget.in_flight, budget.max_concurrency), (2, Some(2)));
    assert_eq!(budget.next_deadline, Some(t0() + secs(30)));
}

#[test]
fn no_limit_and_no_deadline_while_an_abort_goes_back() {
    let strategy = json!({"type": "Progressive",
        "progressive": {"maxConcurrency": 1, "progressDeadline": "10s"}});
    let mut f = Fixture::new(mwrs_with(strategy, Some(STABLE)), &["c1", "c2"]);
    let update = f.store_update();
    f.status().aborted_time = Some(mwrs_api::Time(t0() - secs(30)));
    f.work("c1", &update, secs(60), Reported::Progressing);
    f.work("c2", STABLE, secs(5), Reported::Progressing);
    let p = progress_of(&f, &crate::plugin::NO_PLUGINS);
    assert_eq!(p.budgets, [None], "every cluster goes back at once");
    assert!(
        p.clusters.iter().all(|c| c.deadline.is_none()),
        "{:?}",
        deadlines(&p)
    );
}

#[test]
fn type_all_has_no_limits_but_its_deadlines() {
    let strategy = json!({"type": "All", "all": {"progressDeadline": "2m"}});
    let mut f = Fixture::new(mwrs_with(strategy, Some(STABLE)), &["c1", "c2"]);
    let update = f.store_update();
    f.work("c1", &update, secs(30), Reported::Degraded);
    let p = progress_of(&f, &crate::plugin::NO_PLUGINS);
    let budget = p.budgets[0].clone().unwrap();
    assert_eq!(
        (budget.max_concurrency, budget.max_failures, budget.failures),
        (None, None, 1)
    );
    assert_eq!(budget.next_deadline, Some(t0() + secs(90)));
}
