//! `mwrs rollout plan` at 5,000 clusters (ten decision groups of 500): the preview of a
//! first rollout for several strategies, skipping ahead with the rollout engine (the
//! default) against the whole planner every pass (the reference, measured in the same
//! run), with the ratio between them; one case names a cluster failing (`--fail`). Both
//! must give the same waves; the bench checks it.
//!
//! Run: `cargo bench -p mwrs-engine --bench preview` (`PREVIEW_BENCH_CLUSTERS=N` for
//! another size). Under `cargo test --all-targets` it runs at 200 clusters as a smoke test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use mwrs_api::mwrs::{LocalPlacementReference, ManifestWorkReplicaSet, ManifestWorkReplicaSetSpec};
use mwrs_api::work::ManifestWorkTemplate;
use mwrs_engine::placement::PlacementView;
use mwrs_engine::preview::{Preview, PreviewConfig, preview};
use mwrs_engine::rollout::{DecisionGroups, GroupKey};
use mwrs_engine::snapshot::Snapshot;
use serde_json::{Value, json};

const GROUPS: usize = 10;

fn snapshot(clusters: usize, strategy: &Value) -> Snapshot {
    let template = json!({"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "web-config", "namespace": "shop"},
        "data": {"LOG_LEVEL": "info", "VERSION": "v2"}}]}});
    let mut mwrs = ManifestWorkReplicaSet::new(
        "web",
        ManifestWorkReplicaSetSpec {
            manifest_work_template: ManifestWorkTemplate::from_value(template).unwrap(),
            placement_refs: vec![LocalPlacementReference {
                name: "fleet".into(),
                rollout_strategy: Some(serde_json::from_value(strategy.clone()).unwrap()),
            }],
            ..Default::default()
        },
    );
    mwrs.metadata.namespace = Some("shop".into());
    mwrs.metadata.generation = Some(1);
    let pairs = (0..clusters).map(|i| {
        let g = i * GROUPS / clusters;
        (
            GroupKey::new(format!("ring-{g}"), g as i32),
            format!("cluster-{i:05}"),
        )
    });
    Snapshot {
        mwrs,
        placements: vec![PlacementView::found(
            "fleet",
            DecisionGroups::from_pairs(pairs),
        )],
        works: Vec::new(),
        revisions: Vec::new(),
        blocked: Vec::new(),
    }
}

fn timed(snap: &Snapshot, every_pass: bool, failing: &BTreeSet<String>) -> (Preview, Duration) {
    let cfg = PreviewConfig {
        every_pass,
        ..Default::default()
    };
    let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let start = Instant::now();
    let p = preview(snap, failing, now, &cfg);
    (p, start.elapsed())
}

fn main() {
    let measuring = std::env::args().any(|a| a == "--bench");
    let clusters: usize = std::env::var("PREVIEW_BENCH_CLUSTERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if measuring { 5_000 } else { 200 });
    // `rollout plan --fail` with one cluster failing at 80% of the fleet.
    let late = format!("cluster-{:05}", clusters * 4 / 5);
    let strategies = [
        (
            "Progressive maxConcurrency 1",
            json!({"type": "Progressive", "progressive": {"maxConcurrency": 1}}),
            BTreeSet::new(),
        ),
        (
            "Progressive maxConcurrency 1, --fail at 80%",
            json!({"type": "Progressive", "progressive": {"maxConcurrency": 1}}),
            BTreeSet::from([late]),
        ),
        (
            "Progressive maxConcurrency 1, soak 1m",
            json!({"type": "Progressive", "progressive": {"maxConcurrency": 1, "minSuccessTime": "1m"}}),
            BTreeSet::new(),
        ),
        (
            "Progressive maxConcurrency 10",
            json!({"type": "Progressive", "progressive": {"maxConcurrency": 10}}),
            BTreeSet::new(),
        ),
        (
            "Progressive maxConcurrency 5%",
            json!({"type": "Progressive", "progressive": {"maxConcurrency": "5%"}}),
            BTreeSet::new(),
        ),
        (
            "Progressive, ring-0 mandatory, 100",
            json!({"type": "Progressive", "progressive": {"maxConcurrency": 100,
            "mandatoryDecisionGroups": [{"groupName": "ring-0"}]}}),
            BTreeSet::new(),
        ),
        (
            "ProgressivePerGroup",
            json!({"type": "ProgressivePerGroup"}),
            BTreeSet::new(),
        ),
        ("All", json!({"type": "All"}), BTreeSet::new()),
    ];
    println!("rollout plan of a first rollout over {clusters} clusters in {GROUPS} groups");
    println!(
        "{:<40} {:>6} {:>10} {:>12} {:>14} {:>7}",
        "strategy", "waves", "skipping", "every pass", "planner passes", "ratio"
    );
    for (name, strategy, failing) in strategies {
        let snap = snapshot(clusters, &strategy);
        let (fast, t_fast) = timed(&snap, false, &failing);
        let (every, t_every) = timed(&snap, true, &failing);
        assert_eq!(fast.waves, every.waves, "{name}: the waves differ");
        assert_eq!(
            (&fast.end, &fast.message, fast.duration),
            (&every.end, &every.message, every.duration),
            "{name}: the ends differ"
        );
        println!(
            "{name:<40} {:>6} {:>8.0}ms {:>10.0}ms {:>6} / {:<6} {:>6.3}x",
            fast.waves.len(),
            t_fast.as_secs_f64() * 1e3,
            t_every.as_secs_f64() * 1e3,
            fast.planner_passes,
            every.planner_passes,
            t_fast.as_secs_f64() / t_every.as_secs_f64(),
        );
    }
}
