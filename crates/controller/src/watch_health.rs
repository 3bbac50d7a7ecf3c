//! Whether the controller's watches see the hub (rules §12.6, security review W1). A
//! watch that keeps failing after its first list (RBAC edited, relists refused, one
//! resource's API broken) leaves its store as it was: passes would act on it, and a
//! deadline would run out on an agent's report that never reached the controller. Past a
//! bound the replica turns not ready, the failing watches are a metric and a log line,
//! and the planner is told it is blind ([`Sight::Blind`]): no deadline runs until every
//! watch works again, and then each counts from that moment at the earliest.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use mwrs_engine::plan::Sight;

/// The watchers whose failures are followed (see `watch::Watcher`).
pub const WATCHERS: usize = 6;

/// How long a watch may keep failing before the replica counts itself blind.
pub const DEFAULT_BLIND_AFTER: Duration = Duration::from_secs(120);

/// Errors further apart than this belong to different runs. A watch that works again
/// quietly sends no event to say so, while the watcher retries a failing one at least
/// every 30 s (its backoff's ceiling): a run of failures ends with this much quiet.
const QUIET: Duration = Duration::from_secs(65);

/// One watcher's current run of failures, in milliseconds since [`WatchFailures`]'s
/// epoch plus one (0: no run).
#[derive(Default)]
struct Run {
    first: AtomicU64,
    last: AtomicU64,
}

/// The failures of every watcher, and what the planner is told of them.
pub struct WatchFailures {
    epoch: Instant,
    runs: [Run; WATCHERS],
    sight: Mutex<Sight>,
}

impl Default for WatchFailures {
    fn default() -> Self {
        Self {
            epoch: Instant::now(),
            runs: Default::default(),
            sight: Mutex::new(Sight::Clear),
        }
    }
}

/// What [`WatchFailures::judge`] found.
#[derive(Debug, PartialEq, Eq)]
pub struct Judgement {
    /// The watchers (by index) failing past the bound, with for how long.
    pub failing: Vec<(usize, Duration)>,
    /// The planner's sight changed: blind, or clear again.
    pub changed: bool,
}

impl WatchFailures {
    fn millis(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_millis()).unwrap_or(u64::MAX) + 1
    }

    /// Watcher `i` failed at `at`.
    pub fn failed(&self, i: usize, at: Instant) {
        let Some(run) = self.runs.get(i) else { return };
        let now = self.millis(at);
        let last = run.last.swap(now, Ordering::AcqRel);
        let quiet = u64::try_from(QUIET.as_millis()).unwrap_or(u64::MAX);
        if last == 0 || now.saturating_sub(last) > quiet {
            run.first.store(now, Ordering::Release);
        }
    }

    /// Watcher `i` brought an event: it works.
    pub fn saw(&self, i: usize) {
        let Some(run) = self.runs.get(i) else { return };
        if run.last.load(Ordering::Acquire) != 0 {
            run.first.store(0, Ordering::Release);
            run.last.store(0, Ordering::Release);
        }
    }

    /// The watchers failing for longer than `bound` at `at` and not quiet since.
    fn failing(&self, at: Instant, bound: Duration) -> Vec<(usize, Duration)> {
        let now = self.millis(at);
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        (self.runs.iter().enumerate())
            .filter_map(|(i, run)| {
                let (first, last) = (
                    run.first.load(Ordering::Acquire),
                    run.last.load(Ordering::Acquire),
                );
                let failing_for = now.saturating_sub(first);
                let still = last != 0 && now.saturating_sub(last) <= ms(QUIET);
                (first != 0 && still && failing_for >= ms(bound))
                    .then(|| (i, Duration::from_millis(failing_for)))
            })
            .collect()
    }

    /// Looks at every watcher at `at` (`now` on the wall clock) and sets the planner's
    /// sight: blind while one fails past `bound`, clear since `now` when none does any
    /// more.
    pub fn judge(&self, at: Instant, now: Timestamp, bound: Duration) -> Judgement {
        let failing = self.failing(at, bound);
        let mut sight = match self.sight.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        let next = match (*sight, failing.is_empty()) {
            (_, false) => Sight::Blind,
            (Sight::Blind, true) => Sight::ClearSince(now),
            (clear, true) => clear,
        };
        let changed = next != *sight;
        *sight = next;
        Judgement { failing, changed }
    }

    /// What the planner is told.
    pub fn sight(&self) -> Sight {
        match self.sight.lock() {
            Ok(s) => *s,
            Err(poisoned) => *poisoned.into_inner(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUND: Duration = Duration::from_secs(120);

    fn at(f: &WatchFailures, s: u64) -> Instant {
        f.epoch + Duration::from_secs(s)
    }

    #[test]
    fn a_watch_failing_past_the_bound_blinds_the_planner_until_it_works_again() {
        let f = WatchFailures::default();
        let now = Timestamp::UNIX_EPOCH;
        for s in (0..=150).step_by(30) {
            f.failed(1, at(&f, s));
        }
        let j = f.judge(at(&f, 100), now, BOUND);
        assert_eq!(
            (j.failing, j.changed),
            (vec![], false),
            "not yet past the bound"
        );
        let j = f.judge(at(&f, 150), now, BOUND);
        assert_eq!(j.failing, vec![(1, Duration::from_secs(150))]);
        assert!(j.changed);
        assert_eq!(f.sight(), Sight::Blind);
        f.saw(1);
        let back = Timestamp::from_second(1_000).unwrap_or(now);
        assert!(f.judge(at(&f, 151), back, BOUND).changed);
        assert_eq!(f.sight(), Sight::ClearSince(back));
        assert!(!f.judge(at(&f, 200), now, BOUND).changed, "stays clear");
    }

    /// One error and then a watch that works quietly (no event follows a resumed watch)
    /// is not a failing watch.
    #[test]
    fn an_error_followed_by_quiet_is_no_run() {
        let f = WatchFailures::default();
        f.failed(2, at(&f, 0));
        assert!(
            f.judge(at(&f, 200), Timestamp::UNIX_EPOCH, BOUND)
                .failing
                .is_empty()
        );
        // Errors spaced past the quiet time start a new run each time.
        f.failed(2, at(&f, 300));
        assert!(
            f.judge(at(&f, 330), Timestamp::UNIX_EPOCH, BOUND)
                .failing
                .is_empty()
        );
        assert_eq!(f.sight(), Sight::Clear);
    }
}
