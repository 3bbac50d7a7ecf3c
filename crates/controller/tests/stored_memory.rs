//! What decoding a page of the initial ManifestWork list costs in heap (issue #12 item 7):
//! as [`StoredWork`] the manifests are never materialized, so the peak while decoding and
//! what stays are small fractions of the page's JSON; decoding the same page as
//! `ManifestWork` (what the stores did before) costs more than the JSON itself. Measured
//! with dhat's heap accounting (bytes, not time).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use kube::core::ObjectList;
use mwrs_api::work::ManifestWork;
use mwrs_engine::stored_work::StoredWork;
use serde_json::{Value, json};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// One ManifestWork as the API server lists it, with about `manifest_bytes` of manifests.
fn work(i: usize, manifest_bytes: usize) -> Value {
    let data: serde_json::Map<String, Value> = (0..manifest_bytes / 100)
        .map(|k| (format!("key-{k:04}"), json!("x".repeat(90))))
        .collect();
    json!({
        "apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
        "metadata": {"name": "ns.app", "namespace": format!("cluster-{i:05}"),
            "generation": 2, "resourceVersion": format!("{}", 1000 + i),
            "labels": {"work.open-cluster-management.io/manifestworkreplicaset": "ns.app"},
            "managedFields": [{"manager": "work-agent", "operation": "Update",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:resourceStatus": {}}}}]},
        "spec": {"workload": {"manifests": [
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "big", "namespace": "default"}, "data": data}]}},
        "status": {
            "conditions": [{"type": "Applied", "status": "True", "reason": "AppliedManifestWorkComplete",
                "message": "", "observedGeneration": 2, "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "resourceStatus": {"manifests": [{"resourceMeta": {"kind": "ConfigMap", "name": "big"},
                "conditions": [{"type": "Available", "status": "True", "reason": "r", "message": "",
                    "lastTransitionTime": "2026-01-01T00:00:00Z"}]}]}
        }
    })
}

/// (peak heap growth while decoding, heap kept by the result) in bytes: heap accounting
/// starts here, after the page was built.
fn decode_cost<T: serde::de::DeserializeOwned + Clone>(page: &[u8]) -> (u64, u64, usize) {
    let _profiler = dhat::Profiler::builder().testing().build();
    let before = dhat::HeapStats::get();
    let list: ObjectList<T> = serde_json::from_slice(page).expect("decodes");
    let after = dhat::HeapStats::get();
    let items = list.items.len();
    let kept = after.curr_bytes.saturating_sub(before.curr_bytes) as u64;
    let peak = after.max_bytes.saturating_sub(before.curr_bytes) as u64;
    drop(list);
    (peak, kept, items)
}

fn page(manifest_bytes: usize) -> Vec<u8> {
    let items: Vec<Value> = (0..500).map(|i| work(i, manifest_bytes)).collect();
    serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "List",
        "metadata": {"resourceVersion": "1"}, "items": items}))
    .unwrap()
}

#[test]
fn a_page_of_manifestworks_is_decoded_without_its_manifests() {
    let big = page(10_000);
    let small = page(1_000);
    let json = big.len() as u64;

    let (peak, kept, n) = decode_cost::<StoredWork>(&big);
    assert_eq!(n, 500);
    eprintln!("page {json} B: StoredWork peak +{peak} B, kept {kept} B");
    assert!(
        peak < json / 4,
        "peak {peak} B while decoding a {json} B page"
    );
    assert!(kept / 500 < 2048, "{} B kept per ManifestWork", kept / 500);
    // What is kept does not grow with the manifests.
    let (_, kept_small, _) = decode_cost::<StoredWork>(&small);
    eprintln!("page {} B: StoredWork kept {kept_small} B", small.len());
    assert!(
        kept.abs_diff(kept_small) < kept / 20,
        "kept {kept} B with 10 kB manifests, {kept_small} B with 1 kB"
    );

    // The measurement can tell: the full type holds the manifests.
    let (full_peak, full_kept, _) = decode_cost::<ManifestWork>(&big);
    eprintln!("page {json} B: ManifestWork peak +{full_peak} B, kept {full_kept} B");
    assert!(full_kept > json, "{full_kept} B kept by ManifestWork");
}
