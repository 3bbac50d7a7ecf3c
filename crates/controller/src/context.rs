//! What every reconcile shares: the client, the reflector stores, the event recorder,
//! metrics and configuration, and the bookkeeping passes leave for later passes:
//! per-object failure counts for backoff, the last status resourceVersion written per
//! MWRS (a pass never acts on a cache older than its own last write), and the
//! ManifestWork and revision names a write found held or refused.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::Client;
use kube::runtime::reflector::ObjectRef;
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_engine::PlanConfig;

use crate::crd::{SchemaWatch, TemplateDrift};
use crate::events::EventSink;
use crate::leader::{Leading, WriteGate};
use crate::metrics::Metrics;
use crate::plugins::Plugins;
use crate::queue_delay::QueueClock;
use crate::watch::Stores;
use mwrs_engine::plan::BlockedWrite;

/// Settings of one controller instance.
#[derive(Clone, Debug)]
pub struct Config {
    /// Writes in flight at once within one reconcile.
    pub write_concurrency: usize,
    /// ManifestWork writes in flight at once across every reconcile. The API server
    /// answers this controller's requests in the order they queue, so this bound is what
    /// keeps a Lease renewal, and anyone else's request on a hub without priority and
    /// fairness, from waiting behind a whole fan-out: renewals stay within half the lease
    /// at every size the sizes benchmark runs (its failover row holds it to that).
    pub writes_in_flight: usize,
    /// MWRS reconciled at once.
    pub workers: u16,
    /// Only MWRS (and their Placements and revisions) in this namespace; None: all.
    /// ManifestWorks are always watched cluster-wide (they live in cluster namespaces).
    pub namespace: Option<String>,
    pub plan: PlanConfig,
    /// Longest wait between two passes over one MWRS.
    pub max_requeue: Duration,
    /// Reporting instance in Events (pod name, or hostname-pid).
    pub instance: String,
    /// Every write asks it first (leader election fencing; open without it).
    pub write_gate: WriteGate,
    /// Whether passes act (a standby's keep only its stores warm; always without leader
    /// election).
    pub leading: Leading,
    /// How long the MWRS CRD may go unread (every read refused or failing) before its
    /// state counts as unknown and every write stops (rules §11.6).
    pub crd_stale_after: Duration,
    /// How long a watch may keep failing before the replica is not ready and no deadline
    /// runs ([`crate::watch_health`]).
    pub blind_after: Duration,
    /// How long a connection to the hub may stay silent ([`crate::silence`]); the client
    /// is built with the same bounds.
    pub silence: crate::silence::SilenceBounds,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            write_concurrency: 32,
            writes_in_flight: 64,
            workers: 16,
            namespace: None,
            plan: PlanConfig::default(),
            max_requeue: Duration::from_secs(30 * 60),
            instance: default_identity(),
            write_gate: WriteGate::default(),
            leading: Leading::default(),
            crd_stale_after: Duration::from_secs(30),
            blind_after: crate::watch_health::DEFAULT_BLIND_AFTER,
            silence: crate::silence::SilenceBounds::default(),
        }
    }
}

/// `hostname-pid`, unique enough for lease identities and event reporters.
pub fn default_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_string())
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "mwrs-controller".to_string());
    format!("{host}-{}", std::process::id())
}

/// State shared with the HTTP server.
#[derive(Clone, Default)]
pub struct Shared {
    pub metrics: Arc<Metrics>,
    /// Set once every store has synced.
    pub ready: Arc<AtomicBool>,
    /// Set while a watch keeps failing past its bound: not ready meanwhile.
    pub blind: Arc<AtomicBool>,
}

pub struct Context {
    pub client: Client,
    pub stores: Stores,
    pub events: EventSink,
    pub metrics: Arc<Metrics>,
    pub config: Config,
    /// The rollout plugins `--work-config` registers, running (none by default).
    pub plugins: Arc<Plugins>,
    /// Consecutive failures per MWRS, for exponential backoff.
    pub(crate) failures: Failures,
    /// The resourceVersion of our last status write per MWRS.
    pub(crate) status_writes: StatusWrites,
    /// ManifestWork writes that cannot be made for now, by (cluster, name): the name is
    /// held by another owner, or the hub refused the last write. The planner counts those
    /// clusters as failed, with the reason, and nothing is sent there until the entry
    /// expires ([`TAKEN_RECHECK`], [`REFUSED_RECHECK`]).
    pub(crate) blocked: Mutex<HashMap<(String, String), Blocked>>,
    /// ControllerRevision names (namespace, name) a create found held by another object,
    /// and since when: the planner names no new revision so ([`TAKEN_RECHECK`]).
    pub(crate) taken_revisions: Mutex<HashMap<(String, String), Instant>>,
    /// Whether the installed CRD can hold this controller's state; no write without it.
    pub schema: SchemaWatch,
    /// Fields of the hub's ManifestWork spec the MWRS template schema lacks, read at start.
    pub template_drift: Arc<TemplateDrift>,
    /// When each MWRS was first asked for since its last pass (the queue delay metric).
    pub queue: Arc<QueueClock>,
    /// One per ManifestWork write in flight ([`Config::writes_in_flight`]); handed out
    /// first come, first served, so the passes running at once share them in turn.
    pub(crate) write_permits: tokio::sync::Semaphore,
}

/// How long a name found taken is believed taken before one write tries again (the
/// stores never see the foreign object go away).
pub const TAKEN_RECHECK: Duration = Duration::from_secs(600);
/// How long a write the hub refused (a webhook, a quota, a missing namespace) is not tried
/// again.
pub const REFUSED_RECHECK: Duration = Duration::from_secs(60);

/// Why a write cannot be made, since when, and for how long that is believed.
#[derive(Clone, Debug)]
pub(crate) struct Blocked {
    since: Instant,
    recheck: Duration,
    why: String,
}

impl Context {
    /// The clusters whose write of `work_name` is blocked, with why.
    pub fn blocked_writes(&self, work_name: &str) -> Vec<BlockedWrite> {
        let Ok(mut t) = self.blocked.lock() else {
            return Vec::new();
        };
        t.retain(|_, b| b.since.elapsed() < b.recheck);
        t.iter()
            .filter(|((_, n), _)| n == work_name)
            .map(|((c, _), b)| BlockedWrite {
                cluster: c.clone(),
                why: b.why.clone(),
            })
            .collect()
    }

    /// Records that writing `cluster/name` cannot be done for `recheck`, and why; true
    /// when it was not known.
    pub fn mark_blocked(&self, cluster: &str, name: &str, why: String, recheck: Duration) -> bool {
        self.blocked.lock().is_ok_and(|mut t| {
            let blocked = Blocked {
                since: Instant::now(),
                recheck,
                why,
            };
            t.insert((cluster.to_string(), name.to_string()), blocked)
                .is_none()
        })
    }
}

impl Context {
    /// The revision names of `namespace` found held by other objects.
    pub fn taken_revision_names(&self, namespace: &str) -> Vec<String> {
        let Ok(mut t) = self.taken_revisions.lock() else {
            return Vec::new();
        };
        t.retain(|_, since| since.elapsed() < TAKEN_RECHECK);
        t.keys()
            .filter(|(ns, _)| ns == namespace)
            .map(|(_, name)| name.clone())
            .collect()
    }

    /// Records that revision name `namespace/name` is held by another object.
    pub fn mark_revision_taken(&self, namespace: &str, name: &str) {
        if let Ok(mut t) = self.taken_revisions.lock() {
            t.insert((namespace.to_string(), name.to_string()), Instant::now());
        }
    }
}

/// The log target of every write and refused write: `RUST_LOG=mwrs_controller::execute=debug`
/// logs each write before it is sent (the operations guide says so).
const WRITE_LOG: &str = "mwrs_controller::execute";

impl Context {
    /// Called before every request that changes the hub (a write, an Event, a plugin
    /// call): refuses when this replica cannot prove it still leads (rules §11 leader
    /// fencing) or the CRD cannot hold its state (rules §12.4), saying why in the log, and
    /// logs the write at DEBUG.
    pub fn may_write(&self, verb: &str, what: &str) -> crate::error::Result<()> {
        if !self.config.write_gate.is_open() {
            tracing::warn!(target: WRITE_LOG, verb, what, "write refused: leadership not confirmed");
            return Err(crate::error::Error::NotLeader);
        }
        if let Err(why) = self.schema.state() {
            tracing::warn!(
                target: WRITE_LOG,
                verb,
                what,
                "write refused: the CRD cannot hold this controller's state"
            );
            return Err(crate::error::Error::Crd(why));
        }
        tracing::debug!(target: WRITE_LOG, verb, what, "write");
        Ok(())
    }

    /// [`Context::may_write`] as a yes or no.
    pub fn gate_is_open(&self, verb: &str, what: &str) -> bool {
        self.may_write(verb, what).is_ok()
    }

    /// [`Context::gate_is_open`] without a log line, for what asks on every poll or call
    /// (a standby asks for as long as it stands by).
    pub fn gate_is_open_quietly(&self) -> bool {
        self.config.write_gate.is_open() && self.schema.state().is_ok()
    }
}

impl Context {
    pub fn new(
        client: Client,
        stores: Stores,
        metrics: Arc<Metrics>,
        (config, plugins): (Config, Arc<Plugins>),
        schema: SchemaWatch,
        template_drift: Arc<TemplateDrift>,
    ) -> Self {
        let events = EventSink::new(client.clone(), crate::FIELD_MANAGER, &config.instance);
        let write_permits = tokio::sync::Semaphore::new(config.writes_in_flight.max(1));
        Self {
            client,
            stores,
            events,
            metrics,
            config,
            plugins,
            failures: Failures::default(),
            status_writes: StatusWrites::default(),
            blocked: Mutex::default(),
            taken_revisions: Mutex::default(),
            schema,
            template_drift,
            queue: Arc::default(),
            write_permits,
        }
    }
}

type MwrsKey = ObjectRef<ManifestWorkReplicaSet>;

/// Consecutive failed passes per MWRS (a success forgets them).
#[derive(Default)]
pub struct Failures(Mutex<HashMap<MwrsKey, u32>>);

impl Failures {
    /// Counts one more failure of `key`; returns how many in a row.
    pub fn record(&self, key: &MwrsKey) -> u32 {
        self.0
            .lock()
            .map(|mut f| {
                let n = f.entry(key.clone()).or_insert(0);
                *n = n.saturating_add(1);
                *n
            })
            .unwrap_or(1)
    }

    pub fn forget(&self, key: &MwrsKey) {
        if let Ok(mut f) = self.0.lock() {
            f.remove(key);
        }
    }
}

/// The resourceVersion our last status write of each MWRS produced, so a pass never acts
/// on a cached object older than its own write (the write would undo itself, and fail its
/// resourceVersion guard anyway). resourceVersions are opaque by contract but etcd
/// revisions in practice; an unparsable one counts as fresh.
#[derive(Default)]
pub struct StatusWrites(Mutex<HashMap<MwrsKey, u64>>);

impl StatusWrites {
    pub fn record(&self, key: &MwrsKey, version: &str) {
        if let (Ok(v), Ok(mut w)) = (version.parse(), self.0.lock()) {
            w.insert(key.clone(), v);
        }
    }

    /// Is `seen` (the cached object's resourceVersion) older than our last write? Once
    /// the cache has caught up the entry is dropped.
    pub fn is_stale(&self, key: &MwrsKey, seen: Option<&str>) -> bool {
        let Some(seen) = seen.and_then(|s| s.parse::<u64>().ok()) else {
            return false;
        };
        let Ok(mut w) = self.0.lock() else {
            return false;
        };
        match w.get(key) {
            Some(written) if seen < *written => true,
            Some(_) => {
                w.remove(key);
                false
            }
            None => false,
        }
    }

    pub fn forget(&self, key: &MwrsKey) {
        if let Ok(mut w) = self.0.lock() {
            w.remove(key);
        }
    }
}

#[cfg(test)]
mod bookkeeping_tests {
    use super::*;

    fn key(name: &str) -> MwrsKey {
        ObjectRef::new(name).within("ns")
    }

    #[test]
    fn a_cache_older_than_our_status_write_is_stale_until_it_catches_up() {
        let w = StatusWrites::default();
        assert!(!w.is_stale(&key("a"), Some("5")), "nothing written yet");
        w.record(&key("a"), "10");
        assert!(w.is_stale(&key("a"), Some("9")));
        assert!(!w.is_stale(&key("b"), Some("9")), "per MWRS");
        assert!(
            !w.is_stale(&key("a"), Some("x")),
            "unparsable counts as fresh"
        );
        assert!(!w.is_stale(&key("a"), Some("10")), "caught up");
        assert!(
            !w.is_stale(&key("a"), Some("9")),
            "and forgotten once caught up"
        );
        w.record(&key("a"), "20");
        w.forget(&key("a"));
        assert!(!w.is_stale(&key("a"), Some("1")));
    }

    #[test]
    fn failures_count_in_a_row_until_forgotten() {
        let f = Failures::default();
        assert_eq!((f.record(&key("a")), f.record(&key("a"))), (1, 2));
        assert_eq!(f.record(&key("b")), 1);
        f.forget(&key("a"));
        assert_eq!(f.record(&key("a")), 1);
    }
}
