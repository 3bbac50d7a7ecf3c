//! The reconcile queue's delay: from the first event that asks for a pass over an MWRS
//! (since its last pass began) to the next pass beginning, the debounce and the wait for a
//! free worker included. A pass a timer requeued is not counted: no event asked for it.
//!
//! The triggers note what they ask for through [`QueueClock::noting`] (mappers) and
//! [`QueueClock::asked`] (streams); `reconcile` reports [`QueueClock::began`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::runtime::reflector::ObjectRef;

use crate::watch::GuardedMwrs;

type Key = ObjectRef<GuardedMwrs>;

/// An ask older than this belongs to an MWRS deleted before its pass: forgotten.
const FORGET_AFTER: Duration = Duration::from_secs(3600);
/// How often the asks are swept for forgotten ones: a sweep reads every MWRS waiting,
/// too much for every ask on a hub with thousands.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// When each MWRS was first asked for since its last pass began.
#[derive(Default)]
pub struct QueueClock {
    asked: Mutex<Asked>,
}

#[derive(Default)]
struct Asked {
    since: HashMap<Key, Instant>,
    swept: Option<Instant>,
}

impl QueueClock {
    /// An event asked for a pass over `mwrs` at `now`; an earlier ask still waiting wins.
    pub fn asked(&self, mwrs: &Key, now: Instant) {
        let Ok(mut asked) = self.asked.lock() else {
            return;
        };
        if asked.since.contains_key(mwrs) {
            return;
        }
        if asked
            .swept
            .is_none_or(|t| now.saturating_duration_since(t) >= SWEEP_EVERY)
        {
            asked
                .since
                .retain(|_, t| now.saturating_duration_since(*t) < FORGET_AFTER);
            asked.swept = Some(now);
        }
        asked.since.insert(mwrs.clone(), now);
    }

    /// A pass over `mwrs` begins at `now`: how long the first ask since the last pass
    /// waited, if an event asked.
    pub fn began(&self, mwrs: &Key, now: Instant) -> Option<Duration> {
        let since = self.asked.lock().ok()?.since.remove(mwrs)?;
        Some(now.saturating_duration_since(since))
    }

    /// `mapper`, noting every MWRS it names as asked for.
    pub fn noting<T, I>(
        self: &Arc<Self>,
        mapper: impl Fn(T) -> I + Send + Sync + 'static,
    ) -> impl Fn(T) -> Vec<Key> + Send + Sync + 'static
    where
        I: IntoIterator<Item = Key>,
    {
        let clock = self.clone();
        move |obj| {
            let named: Vec<Key> = mapper(obj).into_iter().collect();
            let now = Instant::now();
            for m in &named {
                clock.asked(m, now);
            }
            named
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> Key {
        ObjectRef::new(name).within("ns")
    }

    #[test]
    fn the_first_ask_since_the_last_pass_is_what_waited() {
        let clock = QueueClock::default();
        let t0 = Instant::now();
        clock.asked(&key("a"), t0);
        clock.asked(&key("a"), t0 + Duration::from_millis(300));
        assert_eq!(
            clock.began(&key("a"), t0 + Duration::from_millis(500)),
            Some(Duration::from_millis(500))
        );
        // Nothing asked since: a requeued pass is not a wait.
        assert_eq!(clock.began(&key("a"), t0 + Duration::from_secs(1)), None);
        clock.asked(&key("a"), t0 + Duration::from_secs(2));
        assert_eq!(
            clock.began(&key("a"), t0 + Duration::from_millis(2100)),
            Some(Duration::from_millis(100))
        );
    }

    #[test]
    fn asks_for_an_mwrs_that_never_got_its_pass_are_forgotten() {
        let clock = QueueClock::default();
        let t0 = Instant::now();
        clock.asked(&key("gone"), t0);
        clock.asked(&key("b"), t0 + FORGET_AFTER);
        assert_eq!(clock.began(&key("gone"), t0 + FORGET_AFTER), None);
        assert!(clock.began(&key("b"), t0 + FORGET_AFTER).is_some());
    }

    #[test]
    fn a_mapper_notes_each_mwrs_it_names() {
        let clock = Arc::new(QueueClock::default());
        let mapper =
            clock.noting(|names: Vec<&'static str>| names.into_iter().map(key).collect::<Vec<_>>());
        assert_eq!(mapper(vec!["a", "b"]).len(), 2);
        let later = Instant::now() + Duration::from_secs(1);
        assert!(clock.began(&key("a"), later).is_some());
        assert!(clock.began(&key("b"), later).is_some());
        assert!(clock.began(&key("c"), later).is_none());
    }
}
