//! Watches and stores. Each kind the planner reads has a reflector whose store serves
//! snapshots (no API reads on the hot path) and whose event stream triggers the MWRS it
//! belongs to.
//!
//! ManifestWorks are selected by the existence of upstream's owner label, which every
//! ManifestWork this controller writes carries (a long owner's with its hashed value), and
//! filed by its value; they are watched and stored as [`StoredWork`]: decoded without
//! their manifests, which dominate their size. ControllerRevisions carry either the dotted
//! owner label or (for long owners) the hashed one, and a label selector cannot OR two
//! keys, so they have two watchers and two stores, each with an owner index
//! ([`crate::index`]) fed by the same events, so a reconcile reads only its own objects.
//!
//! PlacementDecisions are indexed by their placement label the same way, and Placements
//! are read by name, so a reconcile never scans every placement of the hub.
//!
//! MWRS are watched through [`DeserializeGuard`]: an object our types cannot read is
//! stored as its metadata and the error, reported by the reconciler, and never stops
//! the watch (and so the other MWRS).

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::api::Api;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use kube::runtime::{WatchStreamExt, watcher as watch_fn};
use kube::{Client, Resource, ResourceExt};
use mwrs_api::labels;
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_api::placement::{Placement, PlacementDecision};
use mwrs_engine::owner::OwnerKey;

use crate::changes::{LastChanges, fingerprint};
use crate::index::{ObjKey, SharedIndex};
use crate::silence::SilenceBounds;
use crate::watch_health::WatchFailures;
use crate::work_cache::{PatchBase, WorkCache};
use mwrs_engine::stored_work::StoredWork;

/// The owner label keys an owned ControllerRevision may carry.
const OWNER_KEYS: [&str; 2] = [labels::MWRS_OWNER, labels::OWNER_KEY_HASH];

/// An MWRS as watched: the object, or the metadata and error of one our types reject.
pub type GuardedMwrs = DeserializeGuard<ManifestWorkReplicaSet>;

/// Readers of every reflector.
#[derive(Clone)]
pub struct Stores {
    pub ready: Readiness,
    pub mwrs: Store<GuardedMwrs>,
    /// Every ManifestWork carrying upstream's owner label, filed by its value.
    pub works: WorkCache,
    /// One store per owner label key, with its index.
    pub revisions: [Store<ControllerRevision>; 2],
    pub revision_index: [SharedIndex; 2],
    pub placements: Store<Placement>,
    pub decisions: Store<PlacementDecision>,
    /// Decisions by the placement label's value (the Placement's name).
    pub decision_index: SharedIndex,
    /// When each placement's decisions last changed, by (namespace, placement name).
    pub placement_changes: LastChanges,
}

/// The objects of `owner` in one of the store/index pairs: the index names them, the
/// store holds them. Only the pair of the owner's selector label can hold them.
fn owned<K>(stores: &[Store<K>; 2], index: &[SharedIndex; 2], owner: &OwnerKey) -> Vec<Arc<K>>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let (key, value) = owner.selector();
    let Some(i) = OWNER_KEYS.iter().position(|k| *k == key) else {
        return Vec::new();
    };
    index[i]
        .owned(&value)
        .into_iter()
        .filter_map(|(ns, name)| stores[i].get(&ObjectRef::new(&name).within(&ns)))
        .collect()
}

impl Stores {
    /// Waits until every store has its initial list.
    pub async fn wait_ready(&self) {
        self.ready.wait().await;
    }

    /// ManifestWorks filed under `owner`'s value of upstream's owner label, as the planner
    /// reads them (the caller proves ownership).
    pub fn owned_works(&self, owner: &OwnerKey) -> Vec<mwrs_engine::work::WorkView> {
        self.works.owned(owner)
    }

    /// What a patch of a cached ManifestWork builds on.
    pub fn work_patch_base(&self, namespace: &str, name: &str) -> Option<PatchBase> {
        self.works.patch_base(namespace, name)
    }

    /// Records a write of this controller with the server's answer (see
    /// [`WorkCache::record_answer`]).
    pub fn record_answer(&self, obj: &StoredWork, revision: &str, at: jiff::Timestamp) {
        self.works.record_answer(obj, revision, at);
    }

    /// Records an update of a ManifestWork the hub refused by its resourceVersion guard
    /// (see [`WorkCache::record_refused`]).
    pub fn record_refused_work(&self, namespace: &str, name: &str, resource_version: &str) {
        self.works.record_refused(namespace, name, resource_version);
    }

    /// ControllerRevisions carrying `owner`'s selector label.
    pub fn owned_revisions(&self, owner: &OwnerKey) -> Vec<Arc<ControllerRevision>> {
        owned(&self.revisions, &self.revision_index, owner)
    }

    /// The Placements of `namespace` named `names` that exist, and their decisions.
    pub fn placements_named<'n>(
        &self,
        namespace: &str,
        names: impl IntoIterator<Item = &'n str>,
    ) -> (Vec<Arc<Placement>>, Vec<Arc<PlacementDecision>>) {
        let mut placements = Vec::new();
        let mut decisions = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for name in names {
            if !seen.insert(name) {
                continue;
            }
            placements.extend(self.placements.get(&ObjectRef::new(name).within(namespace)));
            decisions.extend(
                self.decision_index
                    .owned(name)
                    .into_iter()
                    .filter(|(ns, _)| ns == namespace)
                    .filter_map(|(ns, d)| self.decisions.get(&ObjectRef::new(&d).within(&ns))),
            );
        }
        (placements, decisions)
    }
}

/// Which watchers have delivered their initial list. Tracked from the watch events
/// themselves, because `Store::wait_until_ready` wakes only the last of several
/// concurrent waiters (kube-runtime 5's `DelayedInit` keeps a single waker), and the
/// Controller already waits on the MWRS store.
#[derive(Clone)]
pub struct Readiness {
    tx: Arc<tokio::sync::watch::Sender<u8>>,
    /// Each watcher's errors since its last event ([`crate::watch_health`]).
    pub failures: Arc<WatchFailures>,
}

/// The watchers whose initial lists make the stores ready. Revisions have one watcher
/// per owner label key (by its index in `OWNER_KEYS`).
#[derive(Clone, Copy)]
enum Watcher {
    Mwrs,
    Works,
    Revisions(usize),
    Placements,
    Decisions,
}

impl Watcher {
    const ALL: [Watcher; 6] = [
        Watcher::Mwrs,
        Watcher::Works,
        Watcher::Revisions(0),
        Watcher::Revisions(1),
        Watcher::Placements,
        Watcher::Decisions,
    ];

    /// This watcher's bit in the readiness mask.
    fn bit(self) -> u8 {
        1 << self.index()
    }

    fn index(self) -> usize {
        match self {
            Watcher::Mwrs => 0,
            Watcher::Works => 1,
            Watcher::Revisions(key) => 2 + key,
            Watcher::Placements => 4,
            Watcher::Decisions => 5,
        }
    }
}

/// What the watcher at `index` ([`Readiness::failures`]) watches, as its log lines and
/// metric name it.
pub fn watcher_name(index: usize) -> String {
    Watcher::ALL
        .iter()
        .find(|w| w.index() == index)
        .map_or_else(|| format!("watcher {index}"), ToString::to_string)
}

impl std::fmt::Display for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Watcher::Mwrs => f.write_str("ManifestWorkReplicaSets"),
            Watcher::Works => write!(f, "ManifestWorks labelled {}", labels::MWRS_OWNER),
            Watcher::Revisions(key) => {
                write!(f, "ControllerRevisions labelled {}", OWNER_KEYS[*key])
            }
            Watcher::Placements => f.write_str("Placements"),
            Watcher::Decisions => f.write_str("PlacementDecisions"),
        }
    }
}

/// Every watcher's bit.
const ALL_READY: u8 = (1 << Watcher::ALL.len()) - 1;

/// Objects between two progress lines of a list under way.
const LIST_PROGRESS_EVERY: u64 = 10_000;

/// A watch's (re)list as it arrives, for the log: a start-up over hundreds of thousands
/// of ManifestWorks lasts minutes, and a replica silent until ready looks hung.
#[derive(Default)]
struct ListProgress {
    listed: u64,
    started: Option<std::time::Instant>,
}

/// What a list's progress has to say.
#[derive(Debug, PartialEq)]
enum ListReport {
    UnderWay { listed: u64, seconds: f64 },
    Done { listed: u64, seconds: f64 },
}

impl ListProgress {
    fn see<K>(&mut self, event: &watcher::Event<K>, now: std::time::Instant) -> Option<ListReport> {
        let seconds = |started: Option<std::time::Instant>| {
            started.map_or(0.0, |t| now.saturating_duration_since(t).as_secs_f64())
        };
        match event {
            watcher::Event::Init => {
                *self = Self {
                    listed: 0,
                    started: Some(now),
                };
                None
            }
            watcher::Event::InitApply(_) => {
                self.listed += 1;
                self.listed
                    .is_multiple_of(LIST_PROGRESS_EVERY)
                    .then(|| ListReport::UnderWay {
                        listed: self.listed,
                        seconds: seconds(self.started),
                    })
            }
            watcher::Event::InitDone => Some(ListReport::Done {
                listed: self.listed,
                seconds: seconds(self.started),
            }),
            _ => None,
        }
    }
}

impl Readiness {
    fn new() -> Self {
        Self {
            tx: Arc::new(tokio::sync::watch::channel(0).0),
            failures: Arc::default(),
        }
    }

    fn mark(&self, watcher: Watcher) {
        self.tx.send_if_modified(|m| {
            let before = *m;
            *m |= watcher.bit();
            *m != before
        });
    }

    pub fn is_ready(&self) -> bool {
        *self.tx.borrow() == ALL_READY
    }

    pub async fn wait(&self) {
        let mut rx = self.tx.subscribe();
        // The sender lives as long as any Readiness clone; Err means shutdown.
        let _ = rx.wait_for(|m| *m == ALL_READY).await;
    }

    /// Marks `watcher` ready on the first (and every) InitDone of a watch stream. Placed
    /// after the reflector (and the owner index), so "ready" means the store already holds
    /// the initial list: a reconcile woken by readiness can never see an empty cache and
    /// create a second ManifestWork beside one that exists.
    fn track<K>(
        &self,
        watcher: Watcher,
    ) -> impl FnMut(&Result<watcher::Event<K>, watcher::Error>) + Send + 'static {
        let me = self.clone();
        let mut progress = ListProgress::default();
        move |ev| {
            let Ok(ev) = ev else {
                me.failures
                    .failed(watcher.index(), std::time::Instant::now());
                return;
            };
            me.failures.saw(watcher.index());
            match progress.see(ev, std::time::Instant::now()) {
                Some(ListReport::UnderWay { listed, seconds }) => {
                    tracing::info!(%watcher, listed, seconds, "list under way");
                }
                Some(ListReport::Done { listed, seconds }) => {
                    tracing::info!(%watcher, listed, seconds, "listed");
                    me.mark(watcher);
                }
                None => {}
            }
        }
    }
}

/// A watch's objects, as the Controller takes them. No error ever comes out of one: see
/// [`trigger`].
type Trigger<K> = futures::stream::BoxStream<'static, Result<K, watcher::Error>>;

/// `events` as a trigger: each error is logged here and dropped. The Controller backs off
/// its merged trigger stream on any error that reaches it, which pauses every watch, and
/// with them every store, for up to 30 s; after a hub restart each watch's first resume
/// is refused (410, its resource version is older than the new API server's cache) and
/// one after another they held every store for minutes. Each watch backs off its own
/// retries, from 0.8 s to at most 30 s, and lists again after a 410.
fn trigger<K: Send + 'static>(
    kind: &'static str,
    events: impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static,
) -> Trigger<K> {
    events
        .filter_map(move |event| {
            futures::future::ready(match event {
                Ok(object) => Some(Ok(object)),
                Err(e) => {
                    report_watch_error(kind, &e);
                    None
                }
            })
        })
        .boxed()
}

/// A watch of `kind` failed and is retried: a resume refused as too old (410) is what a
/// restarted API server answers each watch once, the rest are worth a warning.
fn report_watch_error(kind: &str, e: &watcher::Error) {
    match e {
        watcher::Error::WatchError(status) if status.code == 410 => {
            tracing::info!(kind, error = %e, "watch expired; listing again")
        }
        _ => tracing::warn!(kind, error = %e, "watch failed; retrying"),
    }
}

/// The trigger streams; they must be polled (by the Controller) for the stores to fill.
pub struct Triggers {
    pub mwrs: Trigger<GuardedMwrs>,
    pub works: Trigger<StoredWork>,
    pub revisions: Trigger<ControllerRevision>,
    pub placements: Trigger<Placement>,
    pub decisions: Trigger<PlacementDecision>,
}

/// Where and how every watcher watches: the MWRS-side kinds (MWRS, Placements,
/// decisions, revisions) in `namespace` (all when None), ManifestWorks cluster-wide,
/// every watch made again within the silence bound.
#[derive(Clone, Copy)]
pub struct Scope<'a> {
    pub client: &'a Client,
    pub namespace: Option<&'a str>,
    pub silence: SilenceBounds,
}

impl Scope<'_> {
    fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        match self.namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        }
    }

    /// A watcher's settings: every watch is made again within the silence bound.
    fn cfg(&self) -> watcher::Config {
        watcher::Config::default()
            .any_semantic()
            .timeout(self.silence.watch_timeout_secs())
    }
}

/// Builds every reflector.
pub fn build(scope: Scope<'_>) -> (Stores, Triggers) {
    let ready = Readiness::new();
    let placement_changes = LastChanges::default();
    let (mwrs_store, mwrs_events) = watch_mwrs(scope, &ready);
    let (works, work_events) = watch_works(scope, ready.track(Watcher::Works));
    // Index 0 watches the dotted owner label, index 1 the hashed one (`OWNER_KEYS`).
    let [
        (dotted_revisions, dotted_revision_index, dotted_revision_events),
        (hashed_revisions, hashed_revision_index, hashed_revision_events),
    ] = [0, 1].map(|key| {
        let track = ready.track(Watcher::Revisions(key));
        watch_revisions(scope, OWNER_KEYS[key], track)
    });
    let (placement_store, placement_events) = watch_placements(scope, &ready, &placement_changes);
    let (decision_store, decision_index, decision_events) =
        watch_decisions(scope, &ready, &placement_changes);
    let stores = Stores {
        ready,
        mwrs: mwrs_store,
        works,
        revisions: [dotted_revisions, hashed_revisions],
        revision_index: [dotted_revision_index, hashed_revision_index],
        placements: placement_store,
        decisions: decision_store,
        decision_index,
        placement_changes,
    };
    let triggers = Triggers {
        mwrs: mwrs_events,
        works: work_events,
        revisions: futures::stream::select(dotted_revision_events, hashed_revision_events).boxed(),
        placements: placement_events,
        decisions: decision_events,
    };
    (stores, triggers)
}

fn watch_mwrs(scope: Scope<'_>, ready: &Readiness) -> (Store<GuardedMwrs>, Trigger<GuardedMwrs>) {
    let (r, w) = reflector::store();
    let stream = watch_fn(scope.api::<GuardedMwrs>(), scope.cfg())
        .default_backoff()
        .modify(|o| o.managed_fields_mut().clear())
        .reflect(w)
        .inspect(ready.track(Watcher::Mwrs))
        .applied_objects();
    (r, trigger("ManifestWorkReplicaSet", stream))
}

/// ManifestWorks per page of the start-up list (and of every relist), client-go's default.
///
/// A page served from etcd (a hub without a watch cache for ManifestWorks, or one whose
/// API server sends paged consistent lists to etcd) costs etcd a walk over every key after
/// it, which it counts for the answer (etcd 3.6 `treeIndex.Revisions`): a list of `n` in
/// pages of `p` walks about n²/2p keys, so the page must be large enough that a restart
/// on a big hub lists about as fast as a bare client's list of the same (the sizes
/// benchmark holds it to that). A page is held
/// as its JSON until decoded (decoding skips the manifests): its size bounds that moment's
/// memory.
const WORK_LIST_PAGE: u32 = 500;

/// The ManifestWorks carrying upstream's owner label, cluster-wide, filed in a
/// [`WorkCache`] by its value ([`OwnerKey::upstream_label`]).
///
/// One watch, not one per owner label key: on a hub without a watch cache for
/// ManifestWorks (which costs its API server about 39 KB per ManifestWork) every list by
/// label reads every ManifestWork from etcd, and a watch that sees no event (as one of the
/// hashed key alone does on a hub without long-named MWRS) expires at each compaction and
/// lists again: a full read of the hub at start and after every compaction.
fn watch_works(
    scope: Scope<'_>,
    track: impl FnMut(&Result<watcher::Event<StoredWork>, watcher::Error>) + Send + 'static,
) -> (WorkCache, Trigger<StoredWork>) {
    let cache = WorkCache::new();
    // A paged, consistent list: a list at any resource version is served whole from the
    // watch cache (the API server ignores `limit` there), so the start-up's memory would
    // hold every owned ManifestWork's JSON at once; a page bounds it.
    let config = watcher::Config::default()
        .labels(labels::MWRS_OWNER)
        .page_size(WORK_LIST_PAGE)
        .timeout(scope.silence.watch_timeout_secs());
    let filed = cache.clone();
    let stream = watch_fn(Api::<StoredWork>::all(scope.client.clone()), config)
        .default_backoff()
        .inspect(move |ev| {
            if let Ok(ev) = ev {
                filed.apply(ev, jiff::Timestamp::now());
            }
        })
        .inspect(track)
        // Deletions too: Foreground deletion waits for works to disappear.
        .touched_objects();
    (cache, trigger("ManifestWork", stream))
}

/// The ControllerRevisions carrying owner label `key`.
fn watch_revisions(
    scope: Scope<'_>,
    key: &'static str,
    track: impl FnMut(&Result<watcher::Event<ControllerRevision>, watcher::Error>) + Send + 'static,
) -> (
    Store<ControllerRevision>,
    SharedIndex,
    Trigger<ControllerRevision>,
) {
    let (r, w) = reflector::store();
    let index = SharedIndex::new(key);
    let stream = watch_fn(scope.api::<ControllerRevision>(), scope.cfg().labels(key))
        .default_backoff()
        .modify(|o| o.managed_fields_mut().clear())
        .inspect(index_events(&index))
        .reflect(w)
        .inspect(track)
        .touched_objects();
    (r, index, trigger("ControllerRevision", stream))
}

fn watch_placements(
    scope: Scope<'_>,
    ready: &Readiness,
    changes: &LastChanges,
) -> (Store<Placement>, Trigger<Placement>) {
    let (r, w) = reflector::store();
    let stream = watch_fn(scope.api::<Placement>(), scope.cfg())
        .default_backoff()
        .modify(|p: &mut Placement| {
            // Scheduling inputs are the placement controller's business.
            p.spec.fields.clear();
            p.managed_fields_mut().clear();
        })
        .inspect(change_events(changes, placement_change))
        .reflect(w)
        .inspect(ready.track(Watcher::Placements))
        .touched_objects();
    (r, trigger("Placement", stream))
}

/// Decisions, indexed by the placement label's value (the Placement's name).
fn watch_decisions(
    scope: Scope<'_>,
    ready: &Readiness,
    changes: &LastChanges,
) -> (
    Store<PlacementDecision>,
    SharedIndex,
    Trigger<PlacementDecision>,
) {
    let (r, w) = reflector::store();
    let index = SharedIndex::new(labels::PLACEMENT_LABEL);
    let stream = watch_fn(
        scope.api::<PlacementDecision>(),
        scope.cfg().labels(labels::PLACEMENT_LABEL),
    )
    .default_backoff()
    .modify(|o| o.managed_fields_mut().clear())
    .inspect(index_events(&index))
    .inspect(change_events(changes, decision_change))
    .reflect(w)
    .inspect(ready.track(Watcher::Decisions))
    .touched_objects();
    (r, index, trigger("PlacementDecision", stream))
}

/// Feeds a watch stream's events into `index`.
fn index_events<K: Resource>(
    index: &SharedIndex,
) -> impl FnMut(&Result<watcher::Event<K>, watcher::Error>) + Send + 'static {
    let index = index.clone();
    move |ev| {
        if let Ok(ev) = ev {
            index.apply(ev);
        }
    }
}

/// What a watched object contributes to a [`LastChanges`]: its own key, its group and
/// the fingerprint of what matters (None: not tracked).
type ChangeOf<K> = fn(&K) -> Option<Change>;

/// Feeds a watch stream's events into `changes`; deleting a ManifestWork forgets it,
/// deleting a decision page is a change of its placement.
fn change_events<K: Resource + 'static>(
    changes: &LastChanges,
    of: ChangeOf<K>,
) -> impl FnMut(&Result<watcher::Event<K>, watcher::Error>) + Send + 'static {
    let changes = changes.clone();
    move |ev| {
        let now = jiff::Timestamp::now();
        match ev {
            Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                if let Some(c) = of(o) {
                    changes.seen(c.obj, c.group, c.print, now, c.since);
                }
            }
            Ok(watcher::Event::Delete(o)) => {
                if let Some(c) = of(o) {
                    let own_group = c.obj == c.group;
                    changes.gone(&c.obj, c.group, now, own_group);
                }
            }
            _ => {}
        }
    }
}

fn obj_key<K: Resource>(o: &K) -> ObjKey {
    (o.namespace().unwrap_or_default(), o.name_any())
}

/// A watched object as change tracking sees it: itself, the group whose settle time it
/// moves, a fingerprint of what matters, and when it says it last changed.
struct Change {
    obj: ObjKey,
    group: ObjKey,
    print: u64,
    since: Option<jiff::Timestamp>,
}

/// A Placement's count of selected clusters.
fn placement_change(p: &Placement) -> Option<Change> {
    let (ns, name) = obj_key(p);
    let count = p
        .status
        .as_ref()
        .and_then(|s| s.number_of_selected_clusters);
    Some(Change {
        obj: (ns.clone(), format!("placement/{name}")),
        group: (ns, name),
        print: fingerprint(&count),
        since: None,
    })
}

/// A decision page: its group labels and the clusters it lists.
fn decision_change(pd: &PlacementDecision) -> Option<Change> {
    let (ns, name) = obj_key(pd);
    let l = pd.labels();
    let placement = l.get(labels::PLACEMENT_LABEL)?.clone();
    let print = fingerprint(&(
        l.get(labels::DECISION_GROUP_INDEX),
        l.get(labels::DECISION_GROUP_NAME),
        pd.status.is_some(),
        pd.cluster_names().collect::<Vec<_>>(),
    ));
    Some(Change {
        obj: (ns.clone(), format!("decision/{name}")),
        group: (ns, placement),
        print,
        since: None,
    })
}

/// The MWRS an owned object (ManifestWork, ControllerRevision) belongs to.
pub fn owner_ref<K: Resource>(obj: &K) -> Option<ObjectRef<GuardedMwrs>> {
    let meta = obj.meta();
    let empty = Default::default();
    let key = OwnerKey::of_object(
        meta.labels.as_ref().unwrap_or(&empty),
        meta.annotations.as_ref().unwrap_or(&empty),
    )?;
    Some(ObjectRef::new(&key.name).within(&key.namespace))
}

/// MWRS in `namespace` whose placementRefs name `placement` (unreadable ones name none).
pub fn referencing(
    mwrs: &Store<GuardedMwrs>,
    namespace: &str,
    placement: &str,
) -> Vec<ObjectRef<GuardedMwrs>> {
    mwrs.state()
        .iter()
        .filter(|m| m.namespace().as_deref() == Some(namespace))
        .filter(|m| {
            m.0.as_ref()
                .is_ok_and(|m| m.spec.placement_refs.iter().any(|r| r.name == placement))
        })
        .map(|m| ObjectRef::from_obj(m.as_ref()))
        .collect()
}

/// Mapper for Placements.
pub fn placement_mapper(
    mwrs: Store<GuardedMwrs>,
) -> impl Fn(Placement) -> Vec<ObjectRef<GuardedMwrs>> + Send + Sync + 'static {
    move |p| match p.namespace() {
        Some(ns) => referencing(&mwrs, &ns, &p.name_any()),
        None => Vec::new(),
    }
}

/// Mapper for PlacementDecisions (by their placement label).
pub fn decision_mapper(
    mwrs: Store<GuardedMwrs>,
) -> impl Fn(PlacementDecision) -> Vec<ObjectRef<GuardedMwrs>> + Send + Sync + 'static {
    move |pd| {
        let placement = pd.labels().get(labels::PLACEMENT_LABEL).cloned();
        match (pd.namespace(), placement) {
            (Some(ns), Some(p)) => referencing(&mwrs, &ns, &p),
            _ => Vec::new(),
        }
    }
}

/// Mapper for ControllerRevisions: the owner labels, else the controller ownerReference.
pub fn revision_mapper(cr: ControllerRevision) -> Option<ObjectRef<GuardedMwrs>> {
    owner_ref(&cr).or_else(|| {
        let ns = cr.namespace()?;
        cr.owner_references()
            .iter()
            .find(|o| o.kind == "ManifestWorkReplicaSet" && o.controller == Some(true))
            .map(|o| ObjectRef::new(&o.name).within(&ns))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use mwrs_api::work::{ManifestWork, ManifestWorkTemplate};

    /// A list says how far it got every `LIST_PROGRESS_EVERY` objects and when it is
    /// done, counted from its own start: a relist starts the count over.
    #[test]
    fn a_list_reports_its_progress_and_its_end() {
        let t0 = std::time::Instant::now();
        let at = |s: u64| t0 + std::time::Duration::from_secs(s);
        let mut progress = ListProgress::default();
        let mut reports = Vec::new();
        for (event, now) in [(watcher::Event::Init, at(0))]
            .into_iter()
            .chain((0..LIST_PROGRESS_EVERY + 1).map(|_| (watcher::Event::InitApply(()), at(30))))
            .chain([
                (watcher::Event::InitDone, at(40)),
                (watcher::Event::Apply(()), at(41)),
            ])
            .chain([
                (watcher::Event::Init, at(50)),
                (watcher::Event::InitDone, at(52)),
            ])
        {
            reports.extend(progress.see(&event, now));
        }
        assert_eq!(
            reports,
            [
                ListReport::UnderWay {
                    listed: LIST_PROGRESS_EVERY,
                    seconds: 30.0
                },
                ListReport::Done {
                    listed: LIST_PROGRESS_EVERY + 1,
                    seconds: 40.0
                },
                ListReport::Done {
                    listed: 0,
                    seconds: 2.0
                },
            ]
        );
    }

    #[test]
    fn owner_ref_splits_at_first_dot() {
        let mut mw = ManifestWork::new("w", ManifestWorkTemplate::default());
        mw.labels_mut()
            .insert(labels::MWRS_OWNER.into(), "ns.my.app".into());
        let r = owner_ref(&mw).expect("owned");
        assert_eq!(r.name, "my.app");
        assert_eq!(r.namespace.as_deref(), Some("ns"));
    }

    #[test]
    fn every_watcher_has_its_own_bit_and_all_of_them_make_ready() {
        let mut mask = 0u8;
        for watcher in Watcher::ALL {
            assert_eq!(mask & watcher.bit(), 0, "two watchers share a bit");
            mask |= watcher.bit();
        }
        assert_eq!(mask, ALL_READY);
    }
}
