//! What the cache keeps per owned ManifestWork (issue #16): heap bytes held by a
//! [`WorkCache`] filled with 5,000 ManifestWorks as upstream's agent and this controller
//! leave them (owner, placement and revision labels, this controller's annotations and a
//! large foreign one, the agent's finalizer, four conditions, `resourceStatus`, managed
//! fields), next to a reflector store of the same objects as [`StoredWork`] (what the
//! controller cached before). Measured with dhat's heap accounting (bytes, not time).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fixture::work;
use jiff::Timestamp;
use kube::runtime::{reflector, watcher};
use mwrs_controller::work_cache::WorkCache;
use mwrs_engine::stored_work::StoredWork;

mod fixture;

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

const N: usize = 5_000;

/// Heap bytes that `fill` leaves allocated, per ManifestWork.
fn kept_per_work<T>(writes_per_second: usize, fill: impl FnOnce(Vec<StoredWork>) -> T) -> (u64, T) {
    let before = dhat::HeapStats::get().curr_bytes;
    let works: Vec<StoredWork> = (0..N).map(|i| work(i, writes_per_second)).collect();
    // `fill` consumes the decoded objects: what stays after it is what it keeps.
    let held = fill(works);
    let after = dhat::HeapStats::get().curr_bytes;
    (after.saturating_sub(before) as u64 / N as u64, held)
}

#[test]
fn the_cache_keeps_a_small_fraction_of_a_stored_manifestwork() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let now = Timestamp::from_second(1_800_000_000).unwrap();

    let fill = |works: Vec<StoredWork>| {
        let cache = WorkCache::new();
        for w in works {
            cache.apply(&watcher::Event::Apply(w), now);
        }
        cache
    };
    // A fan-out at the hub's pace on this machine (about 150 writes a second).
    let (cache_bytes, cache) = kept_per_work(150, fill);
    assert_eq!(cache.len(), N);
    drop(cache);
    // The worst case: every ManifestWork written in a second of its own.
    let (slow_bytes, cache) = kept_per_work(1, fill);
    assert_eq!(cache.len(), N);

    let (store_bytes, store) = kept_per_work(150, |works| {
        let (reader, mut writer) = reflector::store::<StoredWork>();
        for w in works {
            writer.apply_watcher_event(&watcher::Event::Apply(w));
        }
        reader
    });
    assert_eq!(store.state().len(), N);
    eprintln!(
        "per ManifestWork: work cache {cache_bytes} B ({slow_bytes} B when each was \
         written in its own second), reflector store of StoredWork {store_bytes} B ({:.2}x)",
        cache_bytes as f64 / store_bytes as f64
    );
    assert!(cache_bytes < 1024, "{cache_bytes} B per ManifestWork");
    assert!(slow_bytes < 2048, "{slow_bytes} B per ManifestWork");
    assert!(cache_bytes * 3 < store_bytes);
}
