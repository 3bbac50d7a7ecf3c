//! What every reconcile shares: the client, the reflector stores, the event recorder,
//! metrics and configuration, plus two small pieces of bookkeeping (per-object failure
//! counts for backoff, and the last status resourceVersion written per MWRS so a
//! reconcile never acts on a cache older than its own last write).

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::Client;
use kube::runtime::reflector::ObjectRef;
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_engine::PlanConfig;

use crate::crd::SchemaWatch;
use crate::events::EventSink;
use crate::leader::WriteGate;
use crate::metrics::Metrics;
use crate::watch::Stores;

/// Settings of one controller instance.
#[derive(Clone, Debug)]
pub struct Config {
    /// Writes in flight at once within one reconcile.
    pub write_concurrency: usize,
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
}

impl Default for Config {
    fn default() -> Self {
        Self {
            write_concurrency: 32,
            workers: 16,
            namespace: None,
            plan: PlanConfig::default(),
            max_requeue: Duration::from_secs(30 * 60),
            instance: default_identity(),
            write_gate: WriteGate::default(),
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
}

pub struct Context {
    pub client: Client,
    pub stores: Stores,
    pub events: EventSink,
    pub metrics: Arc<Metrics>,
    pub config: Config,
    /// Consecutive failures per MWRS, for exponential backoff.
    pub(crate) failures: Mutex<HashMap<ObjectRef<ManifestWorkReplicaSet>, u32>>,
    /// resourceVersion returned by our last status write per MWRS.
    pub(crate) written: Mutex<HashMap<ObjectRef<ManifestWorkReplicaSet>, u64>>,
    /// ManifestWork names found held by another owner, by (cluster, name), with when:
    /// the planner counts those clusters as failed and nothing is sent there until the
    /// entry expires ([`TAKEN_RECHECK`]).
    pub(crate) taken: Mutex<HashMap<(String, String), Instant>>,
    /// Whether the installed CRD can hold this controller's state; no write without it.
    pub schema: SchemaWatch,
}

/// How long a name found taken is believed taken before one write tries again (the
/// stores never see the foreign object go away).
pub const TAKEN_RECHECK: Duration = Duration::from_secs(600);

impl Context {
    /// Clusters where `work_name` was found taken within [`TAKEN_RECHECK`].
    pub fn taken_clusters(&self, work_name: &str) -> Vec<String> {
        let Ok(mut t) = self.taken.lock() else {
            return Vec::new();
        };
        t.retain(|_, at| at.elapsed() < TAKEN_RECHECK);
        t.keys()
            .filter(|(_, n)| n == work_name)
            .map(|(c, _)| c.clone())
            .collect()
    }

    /// Records that `cluster/name` is held by another owner; true when it was not known.
    pub fn mark_taken(&self, cluster: &str, name: &str) -> bool {
        self.taken.lock().is_ok_and(|mut t| {
            t.insert((cluster.to_string(), name.to_string()), Instant::now())
                .is_none()
        })
    }
}

impl Context {
    pub fn new(
        client: Client,
        stores: Stores,
        metrics: Arc<Metrics>,
        config: Config,
        schema: SchemaWatch,
    ) -> Self {
        let events = EventSink::new(client.clone(), crate::FIELD_MANAGER, &config.instance);
        Self {
            client,
            stores,
            events,
            metrics,
            config,
            failures: Mutex::default(),
            written: Mutex::default(),
            taken: Mutex::default(),
            schema,
        }
    }
}
