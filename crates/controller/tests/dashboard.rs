//! The Grafana dashboard (`deploy/grafana/mwrs-controller.json`) queries only what the
//! controller exports: every metric name in its PromQL is one of the registry's, with a
//! suffix its type has (`_total` of a counter, `_bucket` of a histogram, ...), and every
//! label it selects or groups by is one that metric carries. A renamed metric or label
//! fails here instead of leaving an empty panel.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

use mwrs_controller::metrics::{AbortLabels, InfoLabels, Metrics};
use serde_json::Value;

const DASHBOARD: &str = include_str!("../../../deploy/grafana/mwrs-controller.json");

/// Labels PromQL adds or Prometheus attaches to every series (not the controller's).
const NOT_OURS: [&str; 5] = ["le", "job", "instance", "pod", "__name__"];

/// Every sample name of the registry with the labels it carries, from a registry where
/// every family has a series.
fn exported() -> BTreeMap<String, BTreeSet<String>> {
    let m = Metrics::new();
    m.reconciles.inc();
    m.error("conflict");
    m.reconcile_duration.observe(0.01);
    m.plan_duration.observe(0.001);
    m.write("manifestwork", "create", "ok");
    m.aborts
        .get_or_create(&AbortLabels {
            trigger: "Requested".into(),
            outcome: "reverted".into(),
        })
        .inc();
    m.foreign_works.inc();
    m.refused_writes.inc();
    m.invalid_specs.inc();
    m.crd_usable.set(1);
    m.set_rollout("ns", "app", &[("Succeeded", 1)]);
    m.set_info(InfoLabels {
        namespace: "ns".into(),
        name: "app".into(),
        phase: "Complete".into(),
        current_revision: "a".into(),
        update_revision: "a".into(),
    });
    let mut samples: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in m.encode().lines().filter(|l| !l.starts_with('#')) {
        let name_end = line.find(['{', ' ']).unwrap();
        let labels = samples.entry(line[..name_end].to_string()).or_default();
        if let Some(inner) = line[name_end..]
            .strip_prefix('{')
            .and_then(|r| r.split_once('}'))
        {
            labels.extend(
                inner
                    .0
                    .split(',')
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(k, _)| k.to_string()),
            );
        }
    }
    samples
}

/// Every PromQL expression of the dashboard: panel targets and variable queries.
fn expressions(dashboard: &Value) -> Vec<String> {
    let mut exprs = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            exprs.push(target["expr"].as_str().unwrap().to_string());
        }
    }
    for var in dashboard["templating"]["list"].as_array().unwrap() {
        if var["type"] == "query" {
            exprs.push(var["query"]["query"].as_str().unwrap().to_string());
        }
    }
    exprs
}

/// The identifiers of `expr` that start with `prefix`, each with the label names written
/// right after it in braces.
fn selectors<'e>(expr: &'e str, prefix: &str) -> Vec<(&'e str, Vec<&'e str>)> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find(prefix) {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let name = &tail[..end];
        let mut labels = Vec::new();
        if let Some(inner) = tail[end..]
            .strip_prefix('{')
            .and_then(|r| r.split_once('}'))
        {
            labels = inner
                .0
                .split(',')
                .filter_map(|m| m.split(['=', '!']).next())
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect();
        }
        out.push((name, labels));
        rest = &tail[end..];
    }
    out
}

/// The label names of every `by (...)` clause of `expr`.
fn grouped_by(expr: &str) -> Vec<&str> {
    expr.match_indices("by (")
        .filter_map(|(at, _)| expr[at + 4..].split_once(')'))
        .flat_map(|(inner, _)| inner.split(',').map(str::trim))
        .collect()
}

#[test]
fn every_query_of_the_dashboard_is_on_an_exported_metric_and_label() {
    let dashboard: Value = serde_json::from_str(DASHBOARD).unwrap();
    let exported = exported();
    let mut used = BTreeSet::new();
    for expr in expressions(&dashboard) {
        let found = selectors(&expr, "mwrs_controller_");
        assert!(!found.is_empty(), "{expr}: queries no controller metric");
        for (name, labels) in &found {
            let carried = exported
                .get(*name)
                .unwrap_or_else(|| panic!("{expr}: {name} is not exported: {exported:?}"));
            for label in labels.iter().chain(grouped_by(&expr).iter()) {
                assert!(
                    carried.contains(*label) || NOT_OURS.contains(label),
                    "{expr}: {name} has no label {label} (it has {carried:?})"
                );
            }
            used.insert(name.to_string());
        }
    }
    // The five subjects of the first dashboard, and the time back to stable, each have a
    // panel.
    for must in [
        "mwrs_controller_rollout_info",
        "mwrs_controller_aborts_total",
        "mwrs_controller_writes_total",
        "mwrs_controller_reconcile_errors_total",
        "mwrs_controller_reconcile_duration_seconds_bucket",
        "mwrs_controller_abort_to_stable_seconds_bucket",
    ] {
        assert!(used.contains(must), "no panel queries {must}");
    }
}
