//! Heap a planner pass takes on top of its input, per cluster, at 1,000, 5,000 and 20,000
//! clusters (the fixture of the `plan` bench): the controller's start-up peak is its first
//! passes over every owned ManifestWork (issue #16). Measured with dhat's heap accounting,
//! so the figures are bytes, not time, and repeat exactly.
//!
//! Run: `cargo bench -p mwrs-engine --bench plan_heap`. Under `cargo test --all-targets` it
//! runs at 200 clusters as a smoke test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use mwrs_engine::plan::{PlanConfig, plan};

use fixture::fixture;

mod fixture;

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

fn heap() -> (usize, usize) {
    let s = dhat::HeapStats::get();
    (s.curr_bytes, s.max_bytes)
}

fn main() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let measuring = std::env::args().any(|a| a == "--bench");
    let sizes: &[usize] = if measuring {
        &[1_000, 5_000, 20_000]
    } else {
        &[200]
    };
    let cfg = PlanConfig::default();
    println!(
        "{:>9} {:>16} {:>20} {:>18} {:>8}",
        "clusters", "input/cluster", "pass peak/cluster", "plan kept/cluster", "writes"
    );
    for &n in sizes {
        let (start, _) = heap();
        let f = fixture(n);
        let (base, peak_before) = heap();
        let observed = f.observed();
        let p = plan(&observed, f.now, &cfg);
        let (kept, peak) = heap();
        // Sizes grow, so an earlier size's peak never hides this pass's; building the
        // fixture can, and then the pass's peak is at most what is printed.
        let bound = if peak > peak_before { "" } else { "≤" };
        println!(
            "{n:>9} {:>14} B {:>17}{:>3} B {:>16} B {:>8}",
            (base - start) / n,
            bound,
            (peak - base) / n,
            kept.saturating_sub(base) / n,
            p.works.len()
        );
    }
}
