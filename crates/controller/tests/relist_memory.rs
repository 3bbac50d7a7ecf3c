//! The heap a relist of owned ManifestWorks costs above what the cache then keeps (issue
//! #16: the controller's start-up peak at most 1.3x its steady RSS). The objects come one
//! at a time, as the watcher decodes them page by page, so the peak measured is the
//! cache's own: what it buffers while the list is under way and what its maps cost
//! while they grow. Measured with dhat's heap accounting (bytes, not time).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fixture::work;
use jiff::Timestamp;
use kube::runtime::watcher;
use mwrs_controller::work_cache::WorkCache;

mod fixture;

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

const N: usize = 20_000;

/// Feeds a whole list of `n` ManifestWorks to `cache` as one relist.
fn relist(cache: &WorkCache, n: usize, now: Timestamp) {
    cache.apply(&watcher::Event::Init, now);
    for i in 0..n {
        cache.apply(&watcher::Event::InitApply(work(i, 150)), now);
    }
    cache.apply(&watcher::Event::InitDone, now);
}

#[test]
fn a_relist_costs_little_above_what_the_cache_keeps() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let now = Timestamp::from_second(1_800_000_000).unwrap();
    let base = dhat::HeapStats::get().curr_bytes;
    let cache = WorkCache::new();

    relist(&cache, N, now);
    let stats = dhat::HeapStats::get();
    assert_eq!(cache.len(), N);
    let kept = stats.curr_bytes - base;
    let first = stats.max_bytes - base;

    // A relist over a full cache (a watch that fell too far behind): the old entries serve
    // reconciles until the new list is complete, so the list is held beside them.
    relist(&cache, N, now);
    let stats = dhat::HeapStats::get();
    let again = stats.max_bytes - base;
    eprintln!(
        "{N} ManifestWorks: kept {:.1} MiB ({} B each); peak of the first list {:.1} MiB \
         ({:.2}x kept), of a relist over them {:.1} MiB ({:.2}x)",
        kept as f64 / 1048576.0,
        kept / N,
        first as f64 / 1048576.0,
        first as f64 / kept as f64,
        again as f64 / 1048576.0,
        again as f64 / kept as f64,
    );
    assert!(
        first * 10 <= kept * 13,
        "first list peak {first} B, kept {kept} B"
    );
    assert!(
        again * 10 <= kept * 22,
        "relist peak {again} B, kept {kept} B"
    );
}
