//! The cache of owned ManifestWorks (rules §11.7, issue #16): per ManifestWork only what
//! the planner and the executor read, in compact form. Its namespace and name, every
//! label, the annotations this controller owns (and whether the object has any
//! annotations, so a patch never replaces a map it cannot see), generation,
//! resourceVersion, creation and deletion, the spec's content digest, the conditions and
//! the agent's note on a failed apply. Never the manifests, `resourceStatus` or managed
//! fields. Strings that repeat across a fleet (namespaces, the work name, label keys and
//! values, condition types and statuses) are shared, not copied.
//!
//! Derived facts live here too, beside the object they are about, never in the object:
//! when its conditions last changed (a success counts once it has settled, rules §11.3)
//! and what this controller last wrote into it.
//!
//! Fed by the ManifestWork watch, filed by the value of upstream's owner label; a relist
//! replaces what that watch fed, at its end, as a reflector does, so a reconcile never
//! sees half a list. The first list is the exception: nothing reads the cache before it
//! ends (the controller waits for every watcher's first list), so it is filed as it comes
//! and never held twice: the start-up's memory is one copy of the hub's ManifestWorks.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, RwLock};

use jiff::Timestamp;
use kube::runtime::watcher;
use mwrs_api::labels;
use mwrs_engine::hash::Digest;
use mwrs_engine::owner::OwnerKey;
use mwrs_engine::work::{CondView, WorkUid, WorkView};

use mwrs_engine::stored_work::StoredWork;

/// A shared string.
type Sym = Arc<str>;

/// (namespace, name) of a ManifestWork.
type WorkKey = (Sym, Sym);

/// Annotations of a ManifestWork the planner reads; the cache keeps no others.
const KEPT_ANNOTATIONS: [&str; 4] = [
    labels::MWRS_OWNER_ANNOTATION,
    labels::REVISION_APPLIED_AT,
    labels::PLUGIN_VERDICT,
    labels::PLUGIN_SPEC_DIGEST,
];

/// One ManifestWork as the cache holds it.
#[derive(Clone, Debug)]
struct Entry {
    uid: Option<WorkUid>,
    generation: i64,
    /// Shared with the views a pass takes, which copy no string of the cache.
    resource_version: Option<Sym>,
    /// Shared by every entry with the same labels (most of an MWRS's ManifestWorks).
    labels: Map,
    /// Only [`KEPT_ANNOTATIONS`]; shared like `labels`.
    annotations: Map,
    /// The object has an annotations map (with other keys, perhaps).
    has_annotations: bool,
    spec_digest: Option<Digest>,
    created: Option<Timestamp>,
    deleting: bool,
    conditions: Arc<Vec<CondView>>,
    applied_note: Option<Sym>,
    status_error: Option<Sym>,
    /// Of the generation and the conditions: a different one is a change.
    fingerprint: u64,
    /// The number of the list that last brought it ([`Listing::InPlace`]).
    listed: u32,
    /// When the conditions were last seen to change.
    changed: Timestamp,
}

/// What a write needs to know of the object it patches.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PatchBase {
    /// Every label (None: the object has none).
    pub labels: Option<BTreeMap<String, String>>,
    /// This controller's annotations (None: the object has no annotations map).
    pub annotations: Option<BTreeMap<String, String>>,
}

/// A shared label or annotation map.
type Map = Arc<BTreeMap<String, String>>;

/// Values shared by every holder of an equal one.
struct Shared<T: ?Sized> {
    set: HashSet<Arc<T>>,
    /// Insertions since the last sweep.
    since_sweep: usize,
}

impl<T: ?Sized> Default for Shared<T> {
    fn default() -> Self {
        Self {
            set: HashSet::new(),
            since_sweep: 0,
        }
    }
}

impl<T: ?Sized + Hash + Eq> Shared<T> {
    /// The shared value equal to `value`, made by `make` when there is none.
    fn get_or<Q>(&mut self, value: &Q, make: impl FnOnce(&Q) -> Arc<T>) -> Arc<T>
    where
        Q: ?Sized + Hash + Eq,
        Arc<T>: std::borrow::Borrow<Q>,
    {
        if let Some(shared) = self.set.get(value) {
            return shared.clone();
        }
        let shared = make(value);
        self.set.insert(shared.clone());
        self.since_sweep += 1;
        shared
    }

    /// Forgets values no entry holds any more, once in a while (labels change with
    /// every revision, annotations with every write).
    fn sweep_if_due(&mut self, live: usize) {
        if self.since_sweep > 1024.max(live) {
            self.set.retain(|s| Arc::strong_count(s) > 1);
            self.since_sweep = 0;
        }
    }
}

/// Strings and maps shared across entries.
#[derive(Default)]
struct Interner {
    strings: Shared<str>,
    maps: Shared<BTreeMap<String, String>>,
}

impl Interner {
    fn get(&mut self, s: &str) -> Sym {
        self.strings.get_or(s, |s: &str| Arc::from(s))
    }

    fn map(&mut self, map: &BTreeMap<String, String>) -> Map {
        self.maps.get_or(map, |m| Arc::new(m.clone()))
    }

    fn sweep_if_due(&mut self, live: usize) {
        self.strings.sweep_if_due(live);
        self.maps.sweep_if_due(live);
    }
}

#[derive(Default)]
struct Inner {
    strings: Interner,
    /// Owner label value → its ManifestWorks.
    by_owner: HashMap<Sym, HashMap<WorkKey, Entry>>,
    /// ManifestWork → the owner label value it is filed under.
    owner_of: HashMap<WorkKey, Sym>,
    /// A list under way.
    listing: Option<Listing>,
    /// Lists begun, the first included.
    lists_begun: u32,
    /// A list has ended: the cache serves reconciles.
    listed_once: bool,
    /// When the list under way began.
    list_began: Timestamp,
    /// What this controller last wrote into a ManifestWork, by name, then namespace (an
    /// owner's ManifestWorks share one name).
    written: HashMap<Sym, HashMap<Sym, Written>>,
    /// ManifestWorks whose update the hub refused by its resourceVersion guard (the hub
    /// holds a newer version than the cache): the version the update was planned on, by
    /// name, then namespace, as `written`.
    refused: HashMap<Sym, HashMap<Sym, Sym>>,
}

/// A write of this controller into a ManifestWork.
struct Written {
    revision: Sym,
    /// The generation the API server answered with.
    generation: i64,
    at: Timestamp,
    /// The API server's answer to the write, shown to passes in place of what the watch
    /// filed until the watch brings that generation (boxed: most records never hold one
    /// for long).
    answer: Option<Box<Filing>>,
}

impl Written {
    /// The answer, when it is newer than the generation the watch filed (None: nothing).
    fn newer_answer(&self, filed: Option<i64>) -> Option<&Filing> {
        self.answer
            .as_deref()
            .filter(|a| filed.is_none_or(|g| g < a.entry.generation))
    }
}

/// A list under way.
enum Listing {
    /// The first list, numbered: its objects are filed as they come, each marked with the
    /// number, and what an earlier attempt filed that this one did not bring goes at its
    /// end (a list cut short starts over).
    InPlace(u32),
    /// A relist of a cache that serves reconciles: what it has brought so far, filed at
    /// its end.
    Buffered(Vec<Filing>),
}

/// One watched object, ready to be filed.
struct Filing {
    key: WorkKey,
    /// Its owner label value.
    owner: Sym,
    /// Dated when filed.
    entry: Entry,
    /// When the object says it last changed: its latest condition transition.
    since: Option<Timestamp>,
}

/// The cache of the ManifestWorks carrying upstream's owner label
/// ([`labels::MWRS_OWNER`]), filed by its value.
#[derive(Clone, Default)]
pub struct WorkCache {
    inner: Arc<RwLock<Inner>>,
}

impl WorkCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// Files one watch event, seen at `now`.
    pub fn apply(&self, event: &watcher::Event<StoredWork>, now: Timestamp) {
        let Ok(mut inner) = self.inner.write() else {
            return;
        };
        match event {
            watcher::Event::Init => inner.begin_list(now),
            watcher::Event::InitApply(obj) => {
                if let Some(filing) = self.filing(&mut inner, obj) {
                    inner.list(filing, now);
                }
            }
            watcher::Event::InitDone => inner.finish_list(now),
            watcher::Event::Apply(obj) => {
                if let Some(filing) = self.filing(&mut inner, obj) {
                    inner.file(filing, now);
                }
            }
            watcher::Event::Delete(obj) => {
                let key = inner.key_of(obj);
                inner.remove(&key);
            }
        }
        let live = inner.owner_of.len();
        inner.strings.sweep_if_due(live);
    }

    /// `obj` ready to be filed (None: without upstream's owner label).
    fn filing(&self, inner: &mut Inner, obj: &StoredWork) -> Option<Filing> {
        let owner = obj.metadata.labels.as_ref()?.get(labels::MWRS_OWNER)?;
        let owner = inner.strings.get(owner);
        let key = inner.key_of(obj);
        let view = obj.view();
        let since = view.conditions.iter().map(|c| c.last_transition_time).max();
        let has_annotations = obj.metadata.annotations.is_some();
        let entry = Entry::new(
            &mut inner.strings,
            view,
            has_annotations,
            fingerprint_of(obj),
        );
        Some(Filing {
            key,
            owner,
            entry,
            since,
        })
    }

    /// The ManifestWorks filed under `owner`'s value of upstream's owner label
    /// ([`OwnerKey::upstream_label`]), as the planner reads them (the caller checks
    /// ownership: the label alone may be forged).
    pub fn owned(&self, owner: &OwnerKey) -> Vec<WorkView> {
        let (_, value) = owner.upstream_label();
        let Ok(inner) = self.inner.read() else {
            return Vec::new();
        };
        let filed = inner
            .by_owner
            .get(value.as_str())
            .into_iter()
            .flatten()
            .map(|(k, e)| (k, inner.newer_answer(k, Some(e)).unwrap_or(e)));
        let unfiled = inner
            .written
            .get(owner.work_name().as_str())
            .into_iter()
            .flatten()
            .filter_map(|(_, w)| w.answer.as_deref())
            .filter(|f| *f.owner == *value && !inner.owner_of.contains_key(&f.key))
            .map(|f| (&f.key, &f.entry));
        filed
            .chain(unfiled)
            .map(|(k, e)| {
                let mut view = e.view(k);
                view.written_generation = inner.written_generation(k, view.hash());
                view.update_refused = inner.update_refused(k, e);
                view
            })
            .collect()
    }

    /// What a patch of ManifestWork `name` in `namespace` builds on (None: not cached).
    pub fn patch_base(&self, namespace: &str, name: &str) -> Option<PatchBase> {
        let inner = self.inner.read().ok()?;
        let key: WorkKey = (Arc::from(namespace), Arc::from(name));
        inner.shown(&key, inner.entry(&key)).map(Entry::patch_base)
    }

    /// How many ManifestWorks the cache holds.
    pub fn len(&self) -> usize {
        self.inner.read().map_or(0, |i| i.owner_of.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records that this controller wrote `revision` into a ManifestWork at `at`, and
    /// `obj`, the API server's answer (to a create or an update). Passes see the answer
    /// in place of what the watch filed until the watch brings that generation: a watch
    /// lagging behind a fan-out must not make a pass write it again (a create refused as
    /// existing, an update refused by its resourceVersion guard). Forgotten when the
    /// watch deletes the object, or when a list begun after `at` ends without it.
    pub fn record_answer(&self, obj: &StoredWork, revision: &str, at: Timestamp) {
        let Ok(mut inner) = self.inner.write() else {
            return;
        };
        let answer = self.filing(&mut inner, obj).map(|mut f| {
            f.entry.changed = inner.dated(&f, at);
            Box::new(f)
        });
        let meta = &obj.metadata;
        let (namespace, name) = inner.key_of(obj);
        let revision = inner.strings.get(revision);
        inner.written.entry(name).or_default().insert(
            namespace,
            Written {
                revision,
                generation: meta.generation.unwrap_or(0),
                at,
                answer,
            },
        );
    }

    /// Records that the hub refused an update of ManifestWork `name` of `namespace`
    /// planned on `resource_version` (its guard): the hub holds a newer version than the
    /// cache. Views of that version say so (`WorkView::update_refused`), and the planner
    /// does not send the same update again. Forgotten when the watch brings another
    /// version or deletes it, or a list ends without that version.
    pub fn record_refused(&self, namespace: &str, name: &str, resource_version: &str) {
        let Ok(mut inner) = self.inner.write() else {
            return;
        };
        let (namespace, name) = (inner.strings.get(namespace), inner.strings.get(name));
        let version = inner.strings.get(resource_version);
        inner
            .refused
            .entry(name)
            .or_default()
            .insert(namespace, version);
    }
}

impl Inner {
    fn key_of(&mut self, obj: &StoredWork) -> WorkKey {
        let meta = &obj.metadata;
        (
            self.strings
                .get(meta.namespace.as_deref().unwrap_or_default()),
            self.strings.get(meta.name.as_deref().unwrap_or_default()),
        )
    }

    /// Files `filing`, dating a change of its conditions `now`; a recorded answer it
    /// catches up with is no longer shown.
    fn file(&mut self, mut filing: Filing, now: Timestamp) {
        filing.entry.changed = self.dated(&filing, now);
        let Filing {
            key, owner, entry, ..
        } = filing;
        if let Some(old_owner) = self.owner_of.get(&key).filter(|o| **o != owner).cloned() {
            self.unfile(&key, &old_owner);
        }
        if let Some(w) = self.written.get_mut(&key.1).and_then(|w| w.get_mut(&key.0))
            && w.newer_answer(Some(entry.generation)).is_none()
        {
            w.answer = None;
        }
        let refused = self.refused.get(&key.1).and_then(|r| r.get(&key.0));
        if refused.is_some_and(|r| !entry.refused_by(r)) {
            remove_nested(&mut self.refused, &key);
        }
        self.owner_of.insert(key.clone(), owner.clone());
        self.by_owner.entry(owner).or_default().insert(key, entry);
    }

    /// When `filing`, seen at `now`, last changed: as what passes see of it now when its
    /// conditions and generation are the same, else `now`.
    fn dated(&self, filing: &Filing, now: Timestamp) -> Timestamp {
        let previous = self.shown(&filing.key, self.entry(&filing.key));
        match previous.map(|e| (e.fingerprint, e.changed)) {
            Some((print, at)) if print == filing.entry.fingerprint => at,
            Some(_) => now,
            // A first sight is dated by the object, so that a restarted controller does
            // not take every ManifestWork of the fleet for changed just now (which
            // unsettled every settled success and cost status writes).
            None => filing.since.map_or(now, |s| s.min(now)),
        }
    }

    fn entry(&self, key: &WorkKey) -> Option<&Entry> {
        let owner = self.owner_of.get(key)?;
        self.by_owner.get(owner)?.get(key)
    }

    /// What passes see of `key`: the answer to this controller's last write when it is
    /// newer than `filed` (what the watch filed), else `filed`.
    fn shown<'s>(&'s self, key: &WorkKey, filed: Option<&'s Entry>) -> Option<&'s Entry> {
        self.newer_answer(key, filed).or(filed)
    }

    /// The answer to this controller's last write into `key`, when newer than `filed`.
    fn newer_answer(&self, key: &WorkKey, filed: Option<&Entry>) -> Option<&Entry> {
        let written = self.written.get(&key.1).and_then(|w| w.get(&key.0))?;
        let answer = written.newer_answer(filed.map(|e| e.generation))?;
        Some(&answer.entry)
    }

    fn unfile(&mut self, key: &WorkKey, owner: &Sym) {
        if let Some(works) = self.by_owner.get_mut(owner) {
            works.remove(key);
            if works.is_empty() {
                self.by_owner.remove(owner);
            }
        }
    }

    /// The watch saw `key` deleted: it goes, and what this controller wrote into it.
    fn remove(&mut self, key: &WorkKey) {
        if let Some(owner) = self.owner_of.remove(key) {
            self.unfile(key, &owner);
        }
        remove_nested(&mut self.written, key);
        remove_nested(&mut self.refused, key);
    }

    fn begin_list(&mut self, now: Timestamp) {
        self.list_began = now;
        self.lists_begun = self.lists_begun.wrapping_add(1);
        self.listing = Some(if self.listed_once {
            Listing::Buffered(Vec::new())
        } else {
            Listing::InPlace(self.lists_begun)
        });
    }

    /// Files or holds `filing`, brought by the list under way.
    fn list(&mut self, mut filing: Filing, now: Timestamp) {
        match &mut self.listing {
            Some(Listing::InPlace(number)) => {
                filing.entry.listed = *number;
                self.file(filing, now);
            }
            Some(Listing::Buffered(held)) => held.push(filing),
            // Not after an Init: a watcher bug; the object is still the newest seen.
            None => self.file(filing, now),
        }
    }

    /// A list is complete: what it brought replaces what the cache held; entries it did
    /// not bring are gone, the others keep their change times when unchanged.
    fn finish_list(&mut self, now: Timestamp) {
        let Some(listing) = self.listing.take() else {
            return;
        };
        self.listed_once = true;
        let gone: Vec<WorkKey> = match &listing {
            Listing::InPlace(number) => self
                .by_owner
                .values()
                .flatten()
                .filter(|(_, e)| e.listed != *number)
                .map(|(k, _)| k.clone())
                .collect(),
            Listing::Buffered(held) => {
                let keep: HashSet<&WorkKey> = held.iter().map(|f| &f.key).collect();
                self.owner_of
                    .keys()
                    .filter(|k| !keep.contains(k))
                    .cloned()
                    .collect()
            }
        };
        for key in &gone {
            if let Some(owner) = self.owner_of.remove(key) {
                self.unfile(key, &owner);
            }
        }
        if let Listing::Buffered(held) = listing {
            for filing in held {
                self.file(filing, now);
            }
        }
        self.forget_unlisted();
    }

    /// What this controller wrote before the list began into a ManifestWork the list did
    /// not bring is gone with it. A write made while the list ran may be missing from it
    /// and still exist: its record (and a create's answer) stays until the watch says.
    /// A refused update is forgotten once the list brought another version, or nothing.
    fn forget_unlisted(&mut self) {
        let (by_owner, owner_of) = (&self.by_owner, &self.owner_of);
        self.refused.retain(|name, by_namespace| {
            by_namespace.retain(|namespace, r| {
                let key = (namespace.clone(), name.clone());
                let filed = owner_of.get(&key).and_then(|o| by_owner.get(o)?.get(&key));
                filed.is_some_and(|e| e.refused_by(r))
            });
            !by_namespace.is_empty()
        });
        let began = self.list_began;
        self.written.retain(|name, by_namespace| {
            by_namespace.retain(|namespace, w| {
                w.at >= began || owner_of.contains_key(&(namespace.clone(), name.clone()))
            });
            !by_namespace.is_empty()
        });
    }

    /// Did the hub refuse an update planned on `entry`, the version shown of `key`?
    fn update_refused(&self, key: &WorkKey, entry: &Entry) -> bool {
        let refused = self.refused.get(&key.1).and_then(|r| r.get(&key.0));
        refused.is_some_and(|version| entry.refused_by(version))
    }

    fn written_generation(&self, key: &WorkKey, revision: Option<&str>) -> Option<i64> {
        let w = self.written.get(&key.1)?.get(&key.0)?;
        (Some(&*w.revision) == revision).then_some(w.generation)
    }
}

/// Removes `key` from a map by name, then namespace, and the name when it is left empty.
fn remove_nested<T>(map: &mut HashMap<Sym, HashMap<Sym, T>>, (namespace, name): &WorkKey) {
    if let Some(by_namespace) = map.get_mut(name) {
        by_namespace.remove(namespace);
        if by_namespace.is_empty() {
            map.remove(name);
        }
    }
}

/// A ManifestWork's generation and conditions as the agent reports them.
fn fingerprint_of(obj: &StoredWork) -> u64 {
    let mut h = DefaultHasher::new();
    obj.metadata.generation.hash(&mut h);
    for c in obj
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
    {
        (
            &c.type_,
            &c.status,
            &c.reason,
            c.observed_generation,
            c.last_transition_time.0.as_second(),
        )
            .hash(&mut h);
    }
    h.finish()
}

impl Entry {
    /// `view` in compact form; its change time is set when it is filed.
    fn new(
        strings: &mut Interner,
        view: WorkView,
        has_annotations: bool,
        fingerprint: u64,
    ) -> Self {
        let labels = strings.map(&view.labels);
        let kept: BTreeMap<String, String> = KEPT_ANNOTATIONS
            .iter()
            .filter_map(|k| Some((k.to_string(), view.annotation(k)?.to_string())))
            .collect();
        let annotations = strings.map(&kept);
        let conditions = view.conditions;
        Self {
            uid: view.uid,
            generation: view.generation,
            resource_version: view.resource_version,
            labels,
            annotations,
            has_annotations,
            spec_digest: view.spec_digest,
            created: view.created,
            deleting: view.deleting,
            conditions,
            applied_note: view.applied_note,
            status_error: view.status_error,
            fingerprint,
            listed: 0,
            changed: Timestamp::UNIX_EPOCH,
        }
    }

    fn view(&self, (namespace, name): &WorkKey) -> WorkView {
        WorkView {
            cluster: namespace.clone(),
            name: name.clone(),
            uid: self.uid,
            generation: self.generation,
            resource_version: self.resource_version.clone(),
            labels: self.labels.clone(),
            annotations: self.annotations.clone(),
            spec_digest: self.spec_digest,
            created: self.created,
            deleting: self.deleting,
            conditions: self.conditions.clone(),
            status_seen: Some(self.changed),
            applied_note: self.applied_note.clone(),
            written_generation: None,
            status_error: self.status_error.clone(),
            update_refused: false,
        }
    }

    /// Is this the version a refused update was planned on?
    fn refused_by(&self, version: &Sym) -> bool {
        self.resource_version.as_ref() == Some(version)
    }

    fn patch_base(&self) -> PatchBase {
        PatchBase {
            labels: (!self.labels.is_empty()).then(|| (*self.labels).clone()),
            annotations: self.has_annotations.then(|| (*self.annotations).clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use serde_json::{Value, json};

    const OWNER: &str = "ns.app";

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    /// A ManifestWork of `owner` in `cluster` carrying `hash`, Available since `since`.
    fn work(cluster: &str, owner: &str, hash: &str, generation: i64, since: i64) -> StoredWork {
        let v: Value = json!({
            "metadata": {"name": OWNER, "namespace": cluster, "generation": generation,
                "resourceVersion": format!("{generation}0"),
                "labels": {labels::MWRS_OWNER: owner, labels::CONTROLLER_HASH: hash,
                    labels::PLACEMENT_NAME: "p", "team": "a"},
                "annotations": {labels::MWRS_OWNER_ANNOTATION: "ns/app",
                    labels::REVISION_APPLIED_AT: "2026-12-04T00:00:00Z",
                    "kubectl.kubernetes.io/last-applied-configuration": "{\"big\": true}"}},
            "spec": {"workload": {"manifests": [{"kind": "ConfigMap"}]}},
            "status": {"conditions": [{"type": "Available", "status": "True", "reason": "r",
                "message": "", "observedGeneration": generation,
                "lastTransitionTime": Timestamp::from_second(since).unwrap().to_string()}]}
        });
        serde_json::from_value(v).unwrap()
    }

    fn owned(cache: &WorkCache, owner: &str) -> Vec<WorkView> {
        let (namespace, name) = owner.split_once('.').unwrap();
        let mut v = cache.owned(&OwnerKey::new(namespace, name));
        v.sort_by(|a, b| a.cluster.cmp(&b.cluster));
        v
    }

    fn seen(cache: &WorkCache, cluster: &str) -> Option<Timestamp> {
        owned(cache, OWNER)
            .into_iter()
            .find(|w| *w.cluster == *cluster)
            .and_then(|w| w.status_seen)
    }

    #[test]
    fn works_are_filed_by_owner_as_the_planner_reads_them() {
        let cache = WorkCache::new();
        let stored = work("c1", OWNER, "h1", 1, 10);
        cache.apply(&watcher::Event::Apply(stored.clone()), t(100));
        cache.apply(
            &watcher::Event::Apply(work("c2", OWNER, "h1", 1, 10)),
            t(100),
        );
        let mut other = work("c1", "ns.other", "h9", 1, 10);
        other.metadata.name = Some("other".into());
        cache.apply(&watcher::Event::Apply(other), t(100));
        let views = owned(&cache, OWNER);
        assert_eq!(views.len(), 2);
        let mut want = stored.view();
        // Only this controller's annotations are kept.
        Arc::make_mut(&mut want.annotations)
            .remove("kubectl.kubernetes.io/last-applied-configuration");
        want.status_seen = Some(t(10));
        assert_eq!(views[0], want);
        assert_eq!(owned(&cache, "ns.other").len(), 1);
        assert_eq!(cache.len(), 3);
    }

    /// One cache holds every owner's ManifestWorks: a long owner's carry upstream's key
    /// with its hashed value (and the hashed key besides), and are found by that value,
    /// apart from a dotted owner's.
    #[test]
    fn a_long_owners_works_are_found_by_upstreams_label() {
        let cache = WorkCache::new();
        let long = OwnerKey::new("ns", "x".repeat(70));
        let mut stored = work("c1", &long.hashed(), "h1", 1, 10);
        let meta = &mut stored.metadata;
        meta.name = Some(long.work_name());
        meta.labels
            .get_or_insert_default()
            .insert(labels::OWNER_KEY_HASH.into(), long.hashed());
        meta.annotations
            .get_or_insert_default()
            .insert(labels::MWRS_OWNER_ANNOTATION.into(), long.slashed());
        cache.apply(&watcher::Event::Apply(stored), t(100));
        cache.apply(
            &watcher::Event::Apply(work("c1", OWNER, "h1", 1, 10)),
            t(100),
        );
        let views = cache.owned(&long);
        assert_eq!(views.len(), 1);
        assert_eq!(*views[0].name, long.work_name());
        assert!(long.owns(&views[0].labels, &views[0].annotations));
        assert_eq!(owned(&cache, OWNER).len(), 1, "the dotted owner's own");
    }

    #[test]
    fn a_change_is_dated_when_seen_and_a_first_sight_by_the_object() {
        let cache = WorkCache::new();
        cache.apply(
            &watcher::Event::Apply(work("c1", OWNER, "h1", 1, 10)),
            t(100),
        );
        assert_eq!(
            seen(&cache, "c1"),
            Some(t(10)),
            "first sight: the transition"
        );
        // The same conditions again (a resync, a label change): no change.
        cache.apply(
            &watcher::Event::Apply(work("c1", OWNER, "h1", 1, 10)),
            t(200),
        );
        assert_eq!(seen(&cache, "c1"), Some(t(10)));
        // A new generation: changed now, whatever the object claims.
        cache.apply(
            &watcher::Event::Apply(work("c1", OWNER, "h2", 2, 11)),
            t(300),
        );
        assert_eq!(seen(&cache, "c1"), Some(t(300)));
        // A claim from the future counts as now.
        cache.apply(
            &watcher::Event::Apply(work("c2", OWNER, "h1", 1, 999)),
            t(400),
        );
        assert_eq!(seen(&cache, "c2"), Some(t(400)));
    }

    /// Feeds `works` as one whole list, seen at `now`.
    fn list(cache: &WorkCache, works: Vec<StoredWork>, now: Timestamp) {
        cache.apply(&watcher::Event::Init, now);
        for w in works {
            cache.apply(&watcher::Event::InitApply(w), now);
        }
        cache.apply(&watcher::Event::InitDone, now);
    }

    #[test]
    fn a_relist_replaces_what_was_cached_at_its_end() {
        let cache = WorkCache::new();
        let first = vec![
            work("c1", OWNER, "h1", 1, 10),
            work("c2", OWNER, "h1", 1, 10),
        ];
        list(&cache, first, t(100));
        cache.apply(&watcher::Event::Init, t(200));
        cache.apply(
            &watcher::Event::InitApply(work("c1", OWNER, "h1", 1, 10)),
            t(200),
        );
        cache.apply(
            &watcher::Event::InitApply(work("c3", OWNER, "h1", 1, 20)),
            t(200),
        );
        assert_eq!(
            owned(&cache, OWNER).len(),
            2,
            "until the relist ends, the cache serves what it had"
        );
        assert!(seen(&cache, "c2").is_some());
        cache.apply(&watcher::Event::InitDone, t(200));
        let clusters: Vec<String> = owned(&cache, OWNER)
            .into_iter()
            .map(|w| w.cluster.to_string())
            .collect();
        assert_eq!(clusters, ["c1", "c3"]);
        assert_eq!(
            seen(&cache, "c1"),
            Some(t(10)),
            "unchanged: its time is kept"
        );
        assert_eq!(seen(&cache, "c3"), Some(t(20)));
    }

    #[test]
    fn the_first_list_is_filed_as_it_comes_and_a_cut_short_one_starts_over() {
        let cache = WorkCache::new();
        cache.apply(&watcher::Event::Init, t(100));
        for c in ["c1", "c2"] {
            cache.apply(
                &watcher::Event::InitApply(work(c, OWNER, "h1", 1, 10)),
                t(100),
            );
        }
        assert_eq!(owned(&cache, OWNER).len(), 2, "filed before the list ends");
        // The list breaks off; the watcher lists again, and c2 is gone meanwhile.
        list(
            &cache,
            vec![
                work("c1", OWNER, "h1", 2, 30),
                work("c3", OWNER, "h1", 1, 20),
            ],
            t(200),
        );
        let clusters: Vec<(String, i64)> = owned(&cache, OWNER)
            .into_iter()
            .map(|w| (w.cluster.to_string(), w.generation))
            .collect();
        assert_eq!(clusters, [("c1".to_string(), 2), ("c3".to_string(), 1)]);
        assert_eq!(seen(&cache, "c1"), Some(t(200)), "changed: dated when seen");
        assert_eq!(seen(&cache, "c3"), Some(t(20)));
        // Once a list has ended the cache serves reconciles: the next one is held.
        cache.apply(&watcher::Event::Init, t(300));
        cache.apply(
            &watcher::Event::InitApply(work("c4", OWNER, "h1", 1, 10)),
            t(300),
        );
        assert_eq!(owned(&cache, OWNER).len(), 2);
        cache.apply(&watcher::Event::InitDone, t(300));
        assert_eq!(owned(&cache, OWNER).len(), 1);
    }

    #[test]
    fn what_was_written_is_known_until_the_work_goes() {
        let cache = WorkCache::new();
        cache.record_answer(&work("c1", OWNER, "h1", 1, 10), "h1", t(100));
        cache.apply(
            &watcher::Event::Apply(work("c1", OWNER, "h1", 1, 10)),
            t(100),
        );
        assert_eq!(owned(&cache, OWNER)[0].written_generation, Some(1));
        // Another revision on the object than the one written: not known.
        cache.apply(
            &watcher::Event::Apply(work("c1", OWNER, "h2", 2, 10)),
            t(100),
        );
        assert_eq!(owned(&cache, OWNER)[0].written_generation, None);
        cache.record_answer(&work("c1", OWNER, "h2", 2, 10), "h2", t(100));
        assert_eq!(owned(&cache, OWNER)[0].written_generation, Some(2));
        cache.apply(
            &watcher::Event::Delete(work("c1", OWNER, "h2", 2, 10)),
            t(100),
        );
        assert!(owned(&cache, OWNER).is_empty());
        cache.apply(
            &watcher::Event::Apply(work("c1", OWNER, "h2", 2, 10)),
            t(100),
        );
        assert_eq!(
            owned(&cache, OWNER)[0].written_generation,
            None,
            "a ManifestWork made again by someone else"
        );
    }

    /// Created, with no condition yet.
    fn created(cluster: &str) -> StoredWork {
        let mut w = work(cluster, OWNER, "h1", 1, 10);
        w.status = None;
        w
    }

    /// At 300,000 (issue #36) the watch lagged behind the creates by more than a pass
    /// waits for its own writes (10 s): passes then took the ManifestWorks for missing
    /// and created them again, each refused as existing and read back. A create's answer
    /// is what passes see until the watch brings the object.
    #[test]
    fn a_create_is_seen_from_its_answer_until_the_watch_brings_it() {
        let cache = WorkCache::new();
        cache.record_answer(&created("c1"), "h1", t(100));
        let views = owned(&cache, OWNER);
        assert_eq!(views.len(), 1, "seen before the watch brings it");
        assert_eq!(views[0].written_generation, Some(1));
        assert_eq!(views[0].status_seen, Some(t(100)));
        assert!(owned(&cache, "ns.other").is_empty());

        cache.apply(&watcher::Event::Apply(created("c1")), t(101));
        let views = owned(&cache, OWNER);
        assert_eq!(views.len(), 1, "once, as the watch brought it");
        assert_eq!(
            views[0].status_seen,
            Some(t(100)),
            "unchanged since the answer"
        );
        cache.apply(
            &watcher::Event::Apply(work("c1", OWNER, "h1", 1, 10)),
            t(102),
        );
        assert_eq!(seen(&cache, "c1"), Some(t(102)), "the agent's first report");
        cache.apply(
            &watcher::Event::Delete(work("c1", OWNER, "h1", 1, 10)),
            t(102),
        );
        assert!(owned(&cache, OWNER).is_empty(), "deleted: gone");
    }

    /// At 300,000 (issue #36) the watch lagged behind an update of every ManifestWork:
    /// passes planned the updates again on the old resourceVersion, and the hub refused
    /// 71,251 of them by the resourceVersion guard. An update's answer is what passes
    /// see until the watch brings its generation.
    #[test]
    fn an_update_is_seen_from_its_answer_until_the_watch_brings_its_generation() {
        let cache = WorkCache::new();
        cache.apply(
            &watcher::Event::Apply(work("c1", OWNER, "h1", 1, 10)),
            t(100),
        );
        cache.record_answer(&work("c1", OWNER, "h2", 2, 10), "h2", t(101));
        let shown = |cache: &WorkCache| {
            let v = owned(cache, OWNER);
            assert_eq!(v.len(), 1);
            (
                v[0].generation,
                v[0].hash().map(str::to_string),
                v[0].written_generation,
            )
        };
        assert_eq!(shown(&cache), (2, Some("h2".into()), Some(2)));
        let base = cache.patch_base("c1", OWNER).unwrap();
        assert_eq!(
            base.labels
                .unwrap()
                .get(labels::CONTROLLER_HASH)
                .map(String::as_str),
            Some("h2"),
            "a patch builds on the answer"
        );
        // The agent's report on generation 1 comes late: the answer is still newer.
        cache.apply(
            &watcher::Event::Apply(work("c1", OWNER, "h1", 1, 50)),
            t(102),
        );
        assert_eq!(shown(&cache), (2, Some("h2".into()), Some(2)));
        // The watch brings generation 2 (the agent's report on it too): shown from now on.
        cache.apply(
            &watcher::Event::Apply(work("c1", OWNER, "h2", 2, 60)),
            t(103),
        );
        assert_eq!(shown(&cache), (2, Some("h2".into()), Some(2)));
        assert_eq!(seen(&cache, "c1"), Some(t(103)));
    }

    /// The view of a version the hub refused an update on says so
    /// (`no_update_is_sent_again_on_a_version_the_hub_refused_it_on`, in the engine's
    /// tests, is what the planner does with it), until the watch brings another version.
    #[test]
    fn a_version_the_hub_refused_an_update_on_is_marked_until_the_watch_moves_on() {
        let cache = WorkCache::new();
        for c in ["c1", "c2"] {
            cache.apply(&watcher::Event::Apply(work(c, OWNER, "h1", 1, 10)), t(100));
        }
        let refused = |cache: &WorkCache| -> Vec<bool> {
            owned(cache, OWNER)
                .iter()
                .map(|w| w.update_refused)
                .collect()
        };
        assert_eq!(refused(&cache), [false, false]);
        cache.record_refused("c1", OWNER, "10");
        cache.record_refused("c2", OWNER, "9");
        assert_eq!(
            refused(&cache),
            [true, false],
            "c2's refusal was on another version"
        );
        // The agent's report moved c1 on: the hub's version reaches the cache.
        let mut moved = work("c1", OWNER, "h1", 1, 20);
        moved.metadata.resource_version = Some("11".into());
        cache.apply(&watcher::Event::Apply(moved), t(101));
        assert_eq!(refused(&cache), [false, false]);
        // A relist that brings the refused version keeps the mark; one that brings
        // another drops it.
        cache.record_refused("c2", OWNER, "10");
        list(&cache, vec![work("c2", OWNER, "h1", 1, 10)], t(102));
        assert_eq!(refused(&cache), [true]);
        let mut moved = work("c2", OWNER, "h1", 1, 20);
        moved.metadata.resource_version = Some("12".into());
        list(&cache, vec![moved], t(103));
        assert_eq!(refused(&cache), [false]);
    }

    /// A relist that began before a create may not bring it; one that began after it and
    /// does not bring it shows it gone.
    #[test]
    fn a_relist_keeps_the_creates_made_while_it_ran() {
        let cache = WorkCache::new();
        list(&cache, vec![work("c1", OWNER, "h1", 1, 10)], t(100));
        cache.record_answer(&created("c2"), "h1", t(101));
        cache.apply(&watcher::Event::Init, t(105));
        cache.record_answer(&created("c3"), "h1", t(106));
        cache.apply(
            &watcher::Event::InitApply(work("c1", OWNER, "h1", 1, 10)),
            t(107),
        );
        cache.apply(&watcher::Event::InitDone, t(108));
        let clusters: Vec<String> = owned(&cache, OWNER)
            .iter()
            .map(|w| w.cluster.to_string())
            .collect();
        assert_eq!(clusters, ["c1", "c3"], "c2 was gone when the list began");
        let inner = cache.inner.read().unwrap();
        let written = inner
            .written
            .get(OWNER)
            .map(|w| w.keys().collect::<Vec<_>>());
        assert_eq!(
            written.unwrap_or_default(),
            [&Sym::from("c3")],
            "c2's record went too"
        );
    }

    #[test]
    fn a_patch_builds_on_every_label_and_our_annotations() {
        let cache = WorkCache::new();
        cache.apply(
            &watcher::Event::Apply(work("c1", OWNER, "h1", 1, 10)),
            t(100),
        );
        let base = cache.patch_base("c1", OWNER).unwrap();
        assert_eq!(
            base.labels.unwrap().get("team").map(String::as_str),
            Some("a")
        );
        let annotations = base.annotations.unwrap();
        assert_eq!(annotations.len(), 2, "{annotations:?}");
        assert!(cache.patch_base("c1", "other").is_none());
    }
}
