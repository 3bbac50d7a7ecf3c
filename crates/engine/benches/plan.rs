//! One planner pass at 1,000, 10,000 and 100,000 clusters (100 clusters per
//! PlacementDecision, ten decision groups, a realistic three-manifest template, a
//! Progressive rollout half done). Prints the median time per pass and the ratio between
//! sizes: the cost should grow linearly (a ratio near 10 per 10× clusters).
//!
//! Run: `cargo bench -p mwrs-engine --bench plan` (set `PLAN_BENCH_MAX=10000` to skip the
//! largest size).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use mwrs_api::labels;
use mwrs_api::mwrs::{LocalPlacementReference, ManifestWorkReplicaSet, ManifestWorkReplicaSetSpec};
use mwrs_api::placement::{ClusterDecision, Placement, PlacementDecision, PlacementDecisionStatus};
use mwrs_api::work::ManifestWorkTemplate;
use mwrs_engine::hash;
use mwrs_engine::placement::PlacementView;
use mwrs_engine::plan::{Observed, PlanConfig, plan};
use mwrs_engine::revision::RevisionView;
use mwrs_engine::work::{CondView, WorkView};
use serde_json::{Value, json};

fn template(version: &str) -> Value {
    json!({
        "workload": {"manifests": [
            {"apiVersion": "apps/v1", "kind": "Deployment",
             "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}},
             "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                  "spec": {"containers": [{"name": "web", "image": format!("registry.example.com/shop/web:{version}"),
                    "ports": [{"containerPort": 8080}],
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                    "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 5}}]}}}},
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "shop"},
             "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web-config", "namespace": "shop"},
             "data": {"LOG_LEVEL": "info", "FEATURE_X": "on", "VERSION": version}}
        ]},
        "manifestConfigs": [{"resourceIdentifier": {"group": "apps", "resource": "deployments", "name": "web", "namespace": "shop"},
            "conditionRules": [{"condition": "Progressing", "type": "CEL", "celExpressions": ["object.status.updatedReplicas != object.spec.replicas"]}]}]
    })
}

struct Fixture {
    mwrs: ManifestWorkReplicaSet,
    placements: Vec<PlacementView>,
    works: Vec<WorkView>,
    revisions: Vec<RevisionView>,
    now: Timestamp,
}

fn fixture(n: usize) -> Fixture {
    let now: Timestamp = "2026-01-01T01:00:00Z".parse().unwrap();
    let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let (v1, v2) = (template("1.0"), template("2.0"));
    let mut mwrs = ManifestWorkReplicaSet::new(
        "shop",
        ManifestWorkReplicaSetSpec {
            manifest_work_template: ManifestWorkTemplate::from_value(v2.clone()).unwrap(),
            placement_refs: vec![LocalPlacementReference {
                name: "fleet".into(),
                rollout_strategy: Some(serde_json::from_value(json!({"type": "Progressive",
                    "progressive": {"maxConcurrency": "10%", "progressDeadline": "10m", "maxFailures": "5%"}})).unwrap()),
            }],
            ..Default::default()
        },
    );
    mwrs.metadata.namespace = Some("default".into());
    mwrs.metadata.generation = Some(2);
    mwrs.metadata.finalizers = Some(vec![labels::MWRS_FINALIZER.into()]);
    let (h1, h2) = (hash::revision_hash(&v1, 0), hash::revision_hash(&v2, 0));
    let revision = |t: &Value, h: &str, r: i64| RevisionView {
        marks: Default::default(),
        name: format!("shop-{h}"),
        hash: h.into(),
        revision: r,
        digest: hash::digest(t),
        template: t.clone(),
        created: Some(t0),
        change_cause: None,
        generation: Some(r),
    };
    let revisions = vec![revision(&v1, &h1, 1), revision(&v2, &h2, 2)];
    mwrs.status = Some(
        serde_json::from_value(json!({"currentRevision": h1, "updateRevision": h2,
        "summary": {}, "placementSummary": []}))
        .unwrap(),
    );

    let clusters: Vec<String> = (0..n).map(|i| format!("cluster-{i:06}")).collect();
    let decisions: Vec<PlacementDecision> = clusters
        .chunks(100)
        .enumerate()
        .map(|(i, chunk)| PlacementDecision {
            metadata: ObjectMeta {
                name: Some(format!("fleet-decision-{i}")),
                namespace: Some("default".into()),
                labels: Some(BTreeMap::from([
                    (labels::PLACEMENT_LABEL.to_string(), "fleet".to_string()),
                    (
                        labels::DECISION_GROUP_INDEX.to_string(),
                        (i * 10 / clusters.len().div_ceil(100).max(1)).to_string(),
                    ),
                    (labels::DECISION_GROUP_NAME.to_string(), String::new()),
                ])),
                ..Default::default()
            },
            status: Some(PlacementDecisionStatus {
                decisions: chunk
                    .iter()
                    .map(|c| ClusterDecision {
                        cluster_name: c.clone(),
                        reason: String::new(),
                        score: None,
                    })
                    .collect(),
            }),
        })
        .collect();
    let placement = Placement::new("fleet", Default::default());
    let placements = vec![PlacementView::from_objects(
        "fleet",
        Some(&placement),
        &decisions,
    )];

    let (d1, d2) = (hash::digest(&v1), hash::digest(&v2));
    let works = clusters
        .iter()
        .enumerate()
        .map(|(i, c)| {
            // Half the fleet already runs 2.0 (done), the next 5% are rolling, the rest 1.0.
            let (h, d, progressing) = if i < n / 2 {
                (&h2, d2, "False")
            } else if i < n / 2 + n / 20 {
                (&h2, d2, "True")
            } else {
                (&h1, d1, "False")
            };
            let cond = |t: &str, s: &str| CondView {
                type_: t.into(),
                status: s.into(),
                observed_generation: Some(2),
                last_transition_time: t0,
            };
            WorkView {
                cluster: c.clone(),
                name: "default.shop".into(),
                generation: 2,
                resource_version: Some("1".into()),
                labels: Arc::new(BTreeMap::from([
                    (labels::MWRS_OWNER.to_string(), "default.shop".to_string()),
                    (labels::PLACEMENT_NAME.to_string(), "fleet".to_string()),
                    (labels::CONTROLLER_HASH.to_string(), h.clone()),
                ])),
                // What the controller writes on every ManifestWork it applies.
                annotations: Arc::new(BTreeMap::from([
                    (
                        labels::MWRS_OWNER_ANNOTATION.to_string(),
                        "default/shop".to_string(),
                    ),
                    (labels::REVISION_APPLIED_AT.to_string(), t0.to_string()),
                ])),
                spec_digest: Some(d),
                created: Some(t0),
                deleting: false,
                conditions: Arc::new(vec![
                    cond("Applied", "True"),
                    cond("Available", "True"),
                    cond("Progressing", progressing),
                    cond("Degraded", "False"),
                ]),
                status_seen: None,
                applied_note: None,
                written_generation: None,
                status_error: None,
            }
        })
        .collect();
    Fixture {
        mwrs,
        placements,
        works,
        revisions,
        now,
    }
}

/// Median pass time of each fixture. The sizes are measured in interleaved rounds (one
/// pass of each per round) so that background load on a shared machine weighs on every
/// size alike and the ratios between sizes compare like with like.
fn median_passes(fixtures: &[Fixture], cfg: &PlanConfig) -> Vec<(Duration, usize)> {
    let observed: Vec<Observed<'_>> = fixtures
        .iter()
        .map(|f| Observed {
            mwrs: &f.mwrs,
            placements: &f.placements,
            works: &f.works,
            revisions: &f.revisions,
            blocked: &[],
            taken_revision_names: &[],
        })
        .collect();
    // Also the warm-up pass.
    let writes: Vec<usize> = observed
        .iter()
        .zip(fixtures)
        .map(|(o, f)| plan(o, f.now, cfg).works.len())
        .collect();
    let budget = Duration::from_secs(10);
    let started = Instant::now();
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); fixtures.len()];
    while samples[0].len() < 5 || (started.elapsed() < budget && samples[0].len() < 500) {
        for ((o, f), s) in observed.iter().zip(fixtures).zip(&mut samples) {
            let t = Instant::now();
            black_box(plan(black_box(o), f.now, cfg));
            s.push(t.elapsed());
        }
    }
    samples
        .into_iter()
        .zip(writes)
        .map(|(mut s, w)| {
            s.sort();
            (s[s.len() / 2], w)
        })
        .collect()
}

fn main() {
    // `cargo bench` passes --bench; under `cargo test --all-targets` this runs as a quick
    // smoke test of the fixture instead of a measurement.
    let measuring = std::env::args().any(|a| a == "--bench");
    let max: usize = std::env::var("PLAN_BENCH_MAX")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if measuring { 100_000 } else { 1_000 });
    let cfg = PlanConfig::default();
    let sizes: Vec<usize> = [1_000usize, 10_000, 100_000]
        .into_iter()
        .filter(|n| *n <= max)
        .collect();
    let fixtures: Vec<Fixture> = sizes.iter().map(|n| fixture(*n)).collect();
    let passes = median_passes(&fixtures, &cfg);
    println!(
        "{:>9} {:>12} {:>12} {:>8} {:>14}",
        "clusters", "per pass", "per cluster", "writes", "ratio vs prev"
    );
    let mut previous: Option<Duration> = None;
    for (n, (t, writes)) in sizes.into_iter().zip(passes) {
        let ratio = previous.map(|p| t.as_secs_f64() / p.as_secs_f64());
        println!(
            "{n:>9} {:>10.2}ms {:>10.2}µs {writes:>8} {:>14}",
            t.as_secs_f64() * 1e3,
            t.as_secs_f64() * 1e6 / n as f64,
            ratio.map_or("-".to_string(), |r| format!("{r:.2}x"))
        );
        previous = Some(t);
    }
}
