//! When the controller last saw a placement's decisions change, which the planner must
//! see settle before it trusts them (rules §11.5); a ManifestWork's change time lives in
//! the work cache ([`crate::work_cache`]). Fed by the watch events; a relist that brings
//! back the same content changes nothing.
//!
//! Each watched object has a fingerprint of the fields that matter; when it differs from
//! the last one seen (or the object goes away), the time of its group moves to now. A
//! Placement and all its decision pages share one group.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};

use jiff::Timestamp;

use crate::index::ObjKey;

#[derive(Default)]
struct Inner {
    fingerprints: HashMap<ObjKey, u64>,
    changed: HashMap<ObjKey, Timestamp>,
}

/// Last-change times by group, shared between a watch stream and the reconciles.
#[derive(Clone, Default)]
pub struct LastChanges {
    inner: Arc<Mutex<Inner>>,
}

/// A fingerprint of `value`.
pub fn fingerprint(value: &impl Hash) -> u64 {
    let mut h = DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}

impl LastChanges {
    /// Object `obj` of group `group` now shows `print`, seen at `now`. `since` is when the
    /// object itself says it last changed (a ManifestWork: its latest condition
    /// transition); it dates the first sight of the object, so that a restarted
    /// controller does not take every ManifestWork of the fleet for changed just now
    /// (which made every settled success unsettled again and cost status writes). A later
    /// change is dated `now`, when it was seen.
    pub fn seen(
        &self,
        obj: ObjKey,
        group: ObjKey,
        print: u64,
        now: Timestamp,
        since: Option<Timestamp>,
    ) {
        let Ok(mut m) = self.inner.lock() else { return };
        match m.fingerprints.insert(obj, print) {
            Some(old) if old == print => {}
            Some(_) => {
                m.changed.insert(group, now);
            }
            None => {
                let at = since.map_or(now, |s| s.min(now));
                let t = m.changed.entry(group).or_insert(at);
                *t = (*t).max(at);
            }
        }
    }

    /// Object `obj` of group `group` is gone.
    pub fn gone(&self, obj: &ObjKey, group: ObjKey, now: Timestamp, group_gone: bool) {
        let Ok(mut m) = self.inner.lock() else { return };
        m.fingerprints.remove(obj);
        if group_gone {
            m.changed.remove(&group);
        } else {
            m.changed.insert(group, now);
        }
    }

    /// When group `group` last changed (None: never seen).
    pub fn get(&self, group: &ObjKey) -> Option<Timestamp> {
        self.inner.lock().ok()?.changed.get(group).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(a: &str, b: &str) -> ObjKey {
        (a.to_string(), b.to_string())
    }

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap_or_default()
    }

    #[test]
    fn only_a_different_fingerprint_moves_the_time() {
        let c = LastChanges::default();
        let (pd, group) = (key("ns", "p-decision-1"), key("ns", "p"));
        c.seen(pd.clone(), group.clone(), 1, t(10), None);
        assert_eq!(c.get(&group), Some(t(10)));
        // A relist with the same content.
        c.seen(pd.clone(), group.clone(), 1, t(20), None);
        assert_eq!(c.get(&group), Some(t(10)));
        c.seen(key("ns", "p-decision-2"), group.clone(), 7, t(30), None);
        assert_eq!(c.get(&group), Some(t(30)));
        c.gone(&pd, group.clone(), t(40), false);
        assert_eq!(c.get(&group), Some(t(40)));
        // Coming back with the old content is a change too.
        c.seen(pd, group.clone(), 1, t(50), None);
        assert_eq!(c.get(&group), Some(t(50)));
    }

    #[test]
    fn a_first_sight_is_dated_by_the_object_and_later_changes_by_now() {
        let c = LastChanges::default();
        let w = key("cluster-1", "ns.app");
        // A restart: the ManifestWork last changed at 10, is first seen at 100.
        c.seen(w.clone(), w.clone(), 3, t(100), Some(t(10)));
        assert_eq!(c.get(&w), Some(t(10)));
        // A claim from the future counts as now.
        let v = key("cluster-2", "ns.app");
        c.seen(v.clone(), v.clone(), 3, t(100), Some(t(500)));
        assert_eq!(c.get(&v), Some(t(100)));
        // A change after that is dated when it is seen, whatever the object claims.
        c.seen(w.clone(), w.clone(), 4, t(120), Some(t(11)));
        assert_eq!(c.get(&w), Some(t(120)));
        // A group's time never goes back on a first sight of another member.
        let group = key("ns", "p");
        c.seen(key("ns", "d1"), group.clone(), 1, t(200), None);
        c.seen(key("ns", "d2"), group.clone(), 1, t(210), Some(t(5)));
        assert_eq!(c.get(&group), Some(t(200)));
    }

    #[test]
    fn a_gone_group_is_forgotten() {
        let c = LastChanges::default();
        let w = key("cluster-1", "ns.app");
        c.seen(w.clone(), w.clone(), 3, t(10), None);
        c.gone(&w, w.clone(), t(20), true);
        assert_eq!(c.get(&w), None);
    }
}
