//! A fan-out's memory (issue #36): the heap of this test's process, which runs the
//! controller, while one MWRS is written to 1,000 clusters and then changed, measured with
//! dhat's heap accounting (bytes, not time). Each write's future holds several KB (its
//! request and its response): the executor keeps only the writes in flight. Built for the
//! whole fan-out at once, they made a fan-out hold 9.0 KB per ManifestWork above the
//! settled heap here (3.2 KB since), and every MWRS changing at once multiplied that: a
//! peak of 4.65× the steady RSS at 30,000 ManifestWorks (`bench/run.sh --ceiling 10`).
//! Of the 3.2 KB, most were each planned write's own label and annotation maps, equal
//! across the fan-out: a pass now shares them (`Pass::shared`), 1.7 KB.
//!
//! No agent runs (its tasks would be counted too): with the `All` strategy every cluster
//! is written at once whatever the clusters answer. The test waits on the controller's own
//! write counter, which allocates nothing.
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`); skipped without it unless CI=true.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::start_controller_sharing;
use mwrs_controller::Shared;
use mwrs_controller::metrics::WriteLabels;
use mwrs_testsupport::{TestHub, configmap_template, mwrs, wait_for};
use serde_json::json;

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

const N: usize = 1_000;

/// ManifestWork writes the controller has made with `op`, all answered.
fn written(shared: &Shared, op: &str) -> u64 {
    shared
        .metrics
        .writes
        .get_or_create(&WriteLabels {
            resource: "manifestwork".into(),
            op: op.into(),
            result: "ok".into(),
        })
        .get()
}

async fn wait_written(shared: &Shared, op: &str) {
    wait_for(
        &format!("{N} ManifestWork {op}s"),
        Duration::from_secs(300),
        || {
            let n = written(shared, op);
            async move { (n >= N as u64).then_some(()).ok_or(format!("{n} so far")) }
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fan_out_holds_only_the_writes_in_flight() {
    let Some(hub) = TestHub::from_env("fanout-memory", N).await else {
        return;
    };
    let _profiler = dhat::Profiler::builder().testing().build();
    let shared = Shared::default();
    let _controller = start_controller_sharing(&hub, shared.clone());
    hub.publish_all("p").await;
    let all = json!({"type": "All"});
    hub.create_mwrs(&mwrs("app", configmap_template("v1"), &[("p", all)]))
        .await;
    wait_written(&shared, "create").await;
    // Settled: the stores hold every ManifestWork; what follows is the change alone.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = dhat::HeapStats::get().curr_bytes;
    hub.set_template("app", configmap_template("v2")).await;
    wait_written(&shared, "update").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let stats = dhat::HeapStats::get();
    // What the fan-outs held for a moment only: their peak above the heap settled before
    // and after them (the stores keep more after the change: a second revision).
    let settled = before.max(stats.curr_bytes);
    let transient_per_work = stats.max_bytes.saturating_sub(settled) / N;
    let mib = |b: usize| b as f64 / 1_048_576.0;
    println!(
        "heap settled {:.1} MiB before the change, {:.1} MiB after, peak {:.1} MiB: \
         {transient_per_work} B per ManifestWork held only during a fan-out",
        mib(before),
        mib(stats.curr_bytes),
        mib(stats.max_bytes)
    );
    assert!(
        transient_per_work < 2_500,
        "a fan-out of {N} held {transient_per_work} B per ManifestWork above the settled heap"
    );
}
