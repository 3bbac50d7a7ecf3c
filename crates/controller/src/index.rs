//! The owner index: which owned objects (ManifestWorks, ControllerRevisions) each MWRS
//! has, kept from the watch events of one watcher, so a reconcile looks up its own
//! objects (O(own)) instead of scanning a whole store (O(all)).
//!
//! Each watcher selects on one owner label key (the dotted owner or its hash), so its
//! index maps that label's value to the objects carrying it: exactly what the label
//! selector `key=value` would return from the store.
//!
//! It mirrors the reflector's store semantics: `Apply`/`Delete` change one entry; a
//! (re)list (`Init`, `InitApply`…, `InitDone`) builds a fresh index that replaces the
//! old one only when the list is complete, as the store does.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, RwLock};

use kube::Resource;
use kube::runtime::watcher;

/// Identity of an owned object: (namespace, name).
pub type ObjKey = (String, String);

/// Owner → the keys of its objects, plus the reverse map so a relabelled or deleted
/// object leaves its old owner's entry.
#[derive(Debug, Default, Clone)]
pub struct OwnerIndex {
    by_owner: HashMap<String, BTreeSet<ObjKey>>,
    owner_of: HashMap<ObjKey, String>,
}

impl OwnerIndex {
    /// Records that `obj` carries owner label value `owner` (None: no such label).
    pub fn upsert(&mut self, obj: ObjKey, owner: Option<&str>) {
        if self.owner_of.get(&obj).map(String::as_str) == owner {
            return;
        }
        self.remove(&obj);
        if let Some(o) = owner {
            self.by_owner
                .entry(o.to_string())
                .or_default()
                .insert(obj.clone());
            self.owner_of.insert(obj, o.to_string());
        }
    }

    pub fn remove(&mut self, obj: &ObjKey) {
        let Some(o) = self.owner_of.remove(obj) else {
            return;
        };
        if let Some(set) = self.by_owner.get_mut(&o) {
            set.remove(obj);
            if set.is_empty() {
                self.by_owner.remove(&o);
            }
        }
    }

    /// Keys of the objects carrying owner label value `owner`, in (namespace, name) order.
    pub fn owned(&self, owner: &str) -> Vec<ObjKey> {
        self.by_owner
            .get(owner)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Objects indexed.
    pub fn len(&self) -> usize {
        self.owner_of.len()
    }

    pub fn is_empty(&self) -> bool {
        self.owner_of.is_empty()
    }
}

/// The index of one watcher, shared between the watch stream (writer) and reconciles
/// (readers).
#[derive(Clone)]
pub struct SharedIndex {
    /// The owner label key the watcher selects on.
    label: &'static str,
    live: Arc<RwLock<OwnerIndex>>,
    /// The index being built by a (re)list in progress.
    building: Arc<RwLock<Option<OwnerIndex>>>,
}

fn key_of<K: Resource>(obj: &K) -> ObjKey {
    let meta = obj.meta();
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

impl SharedIndex {
    pub fn new(label: &'static str) -> Self {
        Self {
            label,
            live: Arc::default(),
            building: Arc::default(),
        }
    }

    /// The owner label key this index is keyed by.
    pub fn label(&self) -> &'static str {
        self.label
    }

    fn owner_of<'o, K: Resource>(&self, obj: &'o K) -> Option<&'o str> {
        obj.meta()
            .labels
            .as_ref()
            .and_then(|l| l.get(self.label))
            .map(String::as_str)
    }

    /// Applies one watch event (call it before the reflector sees the event, so the
    /// index never lacks an object the store holds).
    pub fn apply<K: Resource>(&self, ev: &watcher::Event<K>) {
        match ev {
            watcher::Event::Apply(o) => {
                if let Ok(mut ix) = self.live.write() {
                    ix.upsert(key_of(o), self.owner_of(o));
                }
            }
            watcher::Event::Delete(o) => {
                if let Ok(mut ix) = self.live.write() {
                    ix.remove(&key_of(o));
                }
            }
            watcher::Event::Init => {
                if let Ok(mut b) = self.building.write() {
                    *b = Some(OwnerIndex::default());
                }
            }
            watcher::Event::InitApply(o) => {
                if let Ok(mut b) = self.building.write()
                    && let Some(ix) = b.as_mut()
                {
                    ix.upsert(key_of(o), self.owner_of(o));
                }
            }
            watcher::Event::InitDone => {
                let built = self.building.write().ok().and_then(|mut b| b.take());
                if let (Some(built), Ok(mut live)) = (built, self.live.write()) {
                    *live = built;
                }
            }
        }
    }

    /// Keys of the objects carrying this index's label with value `owner`.
    pub fn owned(&self, owner: &str) -> Vec<ObjKey> {
        self.live
            .read()
            .map(|ix| ix.owned(owner))
            .unwrap_or_default()
    }

    pub fn len(&self) -> usize {
        self.live.read().map(|ix| ix.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mwrs_api::labels;
    use mwrs_api::work::{ManifestWork, ManifestWorkTemplate};
    use mwrs_engine::owner::OwnerKey;

    fn mw(ns: &str, name: &str, owner: Option<&str>) -> ManifestWork {
        let mut w = ManifestWork::new(name, ManifestWorkTemplate::default());
        w.metadata.namespace = Some(ns.into());
        if let Some(o) = owner {
            w.metadata.labels = Some([(labels::MWRS_OWNER.to_string(), o.to_string())].into());
        }
        w
    }

    fn key(ns: &str, name: &str) -> ObjKey {
        (ns.into(), name.into())
    }

    #[test]
    fn upsert_moves_and_remove_forgets() {
        let mut ix = OwnerIndex::default();
        ix.upsert(key("c1", "w"), Some("ns.a"));
        ix.upsert(key("c2", "w"), Some("ns.a"));
        ix.upsert(key("c1", "x"), Some("ns.b"));
        assert_eq!(ix.owned("ns.a"), vec![key("c1", "w"), key("c2", "w")]);
        // Relabelled to another owner: leaves the first.
        ix.upsert(key("c2", "w"), Some("ns.b"));
        assert_eq!(ix.owned("ns.a"), vec![key("c1", "w")]);
        assert_eq!(ix.owned("ns.b"), vec![key("c1", "x"), key("c2", "w")]);
        // Owner label removed: owned by nobody.
        ix.upsert(key("c1", "w"), None);
        assert!(ix.owned("ns.a").is_empty());
        ix.remove(&key("c1", "x"));
        ix.remove(&key("nope", "nope"));
        assert_eq!(ix.owned("ns.b"), vec![key("c2", "w")]);
        assert_eq!(ix.len(), 1);
        assert!(
            !ix.by_owner.contains_key("ns.a"),
            "no empty sets left behind"
        );
    }

    #[test]
    fn events_follow_the_store_semantics() {
        let s = SharedIndex::new(labels::MWRS_OWNER);
        s.apply(&watcher::Event::Apply(mw("c1", "w", Some("ns.a"))));
        s.apply(&watcher::Event::Apply(mw("c2", "w", Some("ns.a"))));
        s.apply(&watcher::Event::Apply(mw("c2", "other", None)));
        assert_eq!(s.owned("ns.a").len(), 2);
        assert_eq!(s.len(), 2, "objects without the label are not indexed");
        s.apply(&watcher::Event::Delete(mw("c1", "w", Some("ns.a"))));
        assert_eq!(s.owned("ns.a"), vec![key("c2", "w")]);

        // A relist keeps serving the old index until it is complete, then replaces it:
        // c2 vanished while the watch was down, c3 appeared.
        s.apply(&watcher::Event::<ManifestWork>::Init);
        s.apply(&watcher::Event::InitApply(mw("c3", "w", Some("ns.a"))));
        assert_eq!(s.owned("ns.a"), vec![key("c2", "w")]);
        s.apply(&watcher::Event::<ManifestWork>::InitDone);
        assert_eq!(s.owned("ns.a"), vec![key("c3", "w")]);
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn each_index_reads_its_own_label() {
        let dotted = SharedIndex::new(labels::MWRS_OWNER);
        let hashed = SharedIndex::new(labels::OWNER_KEY_HASH);
        let long = OwnerKey::new("ns", "x".repeat(70));
        let (k, v) = long.selector();
        assert_eq!(k, hashed.label());
        let mut w = mw("c1", "long", None);
        w.metadata.labels = Some(long.labels());
        for ix in [&dotted, &hashed] {
            ix.apply(&watcher::Event::Apply(w.clone()));
        }
        assert!(dotted.is_empty());
        assert_eq!(hashed.owned(&v), vec![key("c1", "long")]);
        // A dotted MWRS name is just a label value.
        dotted.apply(&watcher::Event::Apply(mw("c1", "w", Some("ns.my.app"))));
        assert_eq!(dotted.owned("ns.my.app").len(), 1);
    }
}
