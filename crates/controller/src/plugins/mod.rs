//! Rollout plugins at the edge (issue #18): a client per plugin `--work-config`
//! registers, whether each one answers, and what they said, per MWRS. A pass plans on a
//! copy of what is known ([`Plugins::inputs`]) and says which calls to make
//! ([`mwrs_engine::Plan::plugin_calls`]); [`Plugins::call_in_background`] makes them in a
//! task of its own (a slow plugin holds no reconcile) and records the answers for the
//! next pass, which an answer that changes something brings at once. Nothing here
//! decides a rollout.
//!
//! No answer within the time bound, or a status saying the plugin does not work
//! (UNAVAILABLE, UNIMPLEMENTED, ...), marks the plugin unreachable: its clusters are held
//! until an `Initialize` succeeds again ([`Plugins::probe`]) or its failure budget is
//! spent. Any other error status is about the one call: its cluster is held, with the
//! error as its note, asked again, and counted. Everything a plugin says is input: its
//! texts are cut as they come in, and a spec it returns is checked as a template is
//! ([`mwrs_engine::validate::plugin_spec`]); a refused one is never written. Final
//! verdicts outlive a restart on the ManifestWorks (the planner writes them there,
//! sealed); an IN_PROGRESS one is asked again, and a BeginRollout not followed by its
//! write is sent again (the calls are idempotent).
//!
//! In four rooms besides this facade: `health` (whether each plugin answers, and its
//! failure budget's clocks), `memory` (what each MWRS's plugins were told and said, and
//! the planner's copy of it), `calls` (making the calls a pass asks for, in a task of
//! their own) and `wire` (the requests, as the gRPC API spells them).

mod calls;
mod health;
mod memory;
#[cfg(test)]
mod tests;
mod wire;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc::UnboundedSender;
use jiff::{SignedDuration, Timestamp};
use kube::runtime::reflector::ObjectRef;
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_api::work::ManifestWorkTemplate;
use mwrs_engine::marks::{MarkKey, Marks};
use mwrs_engine::owner::OwnerKey;
use mwrs_engine::plugin::{
    Begin, Begun, CallTarget, ClusterState, ClusterVerdict, ErrorRun, FailurePolicy, Mutation,
    PLUGIN_TEXT_MAX, PluginCalls, PluginHealth, PluginInputs, Progress, Validation, Verdict,
};
use mwrs_engine::rollout::RolloutStatus;
use mwrs_engine::text::cut;
use mwrs_plugin::client::{PluginClient, SetupError};
use mwrs_plugin::config::WorkConfig;
use mwrs_plugin::v1alpha1 as api;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ObjectReference;

use crate::watch::GuardedMwrs;

use calls::*;
use health::*;
use memory::*;
use wire::*;

/// Questions in flight at once within one pass.
const ASK_CONCURRENCY: usize = 16;

/// Calls in flight at once to one plugin, across every pass and MWRS: many MWRS naming
/// one plugin and changing together queue here instead of overloading it (time queued
/// here is not the plugin's: a call's time bound starts when it is sent).
pub const DEFAULT_CALLS_IN_FLIGHT: usize = 32;

/// How often a cluster still Validating is asked again, and an unreachable plugin probed.
pub const DEFAULT_POLL: Duration = Duration::from_secs(10);

/// What the plugin service may do on the hub besides calling plugins: ask the write gate
/// before a call (rules §12.4) and publish an Event about an answer it refused. The
/// controller's context is one (`crate::announce`); the service holds nothing else of it.
pub trait Outlet: Send + Sync {
    /// Whether calls may be made now (the log says why not).
    fn may_call(&self) -> bool;
    /// [`Outlet::may_call`] without a log line, for what asks before every call.
    fn may_call_quietly(&self) -> bool;
    /// Publishes a Warning Event `reason` about `regarding`; failures are the outlet's.
    fn warn<'a>(
        &'a self,
        regarding: &'a ObjectReference,
        reason: &'a str,
        message: &'a str,
    ) -> BoxFuture<'a, ()>;
}

/// Every registered plugin and what it said.
pub struct Plugins {
    clients: BTreeMap<String, PluginClient>,
    health: RwLock<BTreeMap<String, Tracked>>,
    /// Each plugin's failure budget, as registered.
    policies: BTreeMap<String, FailurePolicy>,
    /// Plugins whose registration lets their spec drop a manifest of the template.
    allow_removal: BTreeSet<String>,
    /// Plugins open only to the MWRS of some namespaces, with those namespaces.
    namespaces: BTreeMap<String, BTreeSet<String>>,
    /// The limit a plugin's spec is held to, as a user's template is.
    manifest_size_limit: usize,
    /// How marks on ManifestWorks are sealed and checked; replaced when the key changes
    /// ([`crate::mark_key::KeyKeeper`]).
    marks: RwLock<Marks>,
    /// By MWRS (`namespace/name`).
    judged: Mutex<HashMap<String, Judged>>,
    /// Where answers that change something are announced ([`Plugins::answers_to`]).
    news: Mutex<Option<UnboundedSender<ObjectRef<GuardedMwrs>>>>,
    poll: Duration,
    controller_version: String,
    /// Per plugin, the permits of calls in flight ([`DEFAULT_CALLS_IN_FLIGHT`]).
    in_flight: Mutex<BTreeMap<String, Arc<tokio::sync::Semaphore>>>,
    calls_in_flight: usize,
}

impl std::fmt::Debug for Plugins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugins")
            .field("plugins", &self.clients.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Default for Plugins {
    /// No plugin registered.
    fn default() -> Self {
        Self {
            clients: BTreeMap::new(),
            health: RwLock::default(),
            policies: BTreeMap::new(),
            allow_removal: BTreeSet::new(),
            namespaces: BTreeMap::new(),
            manifest_size_limit: mwrs_engine::validate::DEFAULT_MANIFEST_SIZE_LIMIT,
            marks: RwLock::new(Marks::sealed(ephemeral_key())),
            judged: Mutex::default(),
            news: Mutex::default(),
            poll: DEFAULT_POLL,
            controller_version: String::new(),
            in_flight: Mutex::default(),
            calls_in_flight: DEFAULT_CALLS_IN_FLIGHT,
        }
    }
}

/// The engine's form of a registered failure policy.
fn failure_policy(c: &mwrs_plugin::config::FailurePolicyConfig) -> FailurePolicy {
    use mwrs_engine::plugin::FailureMode;
    FailurePolicy {
        mode: if c.hold {
            FailureMode::Hold
        } else {
            FailureMode::Fail
        },
        consecutive_errors: c.consecutive_errors,
        unavailable_for: SignedDuration::try_from(c.unavailable_for).unwrap_or(SignedDuration::MAX),
    }
}

/// A key of this process only: marks it seals are not believed by another replica or
/// after a restart (their verdicts are asked again, their specs written again).
pub fn ephemeral_key() -> MarkKey {
    let bytes: [u8; 32] = rand::random();
    MarkKey::new(&bytes).unwrap_or_else(|_| unreachable!("32 bytes is a key"))
}

impl Plugins {
    /// The plugins `config` registers, each unknown until this replica asks it
    /// something.
    pub fn new(
        config: &WorkConfig,
        poll: Duration,
        controller_version: &str,
    ) -> Result<Self, SetupError> {
        let clients = config
            .plugins
            .iter()
            .map(|p| Ok((p.name.clone(), PluginClient::new(p)?)))
            .collect::<Result<BTreeMap<_, _>, SetupError>>()?;
        let health = clients
            .keys()
            .map(|n| (n.clone(), Tracked::unknown()))
            .collect();
        let policies = config
            .plugins
            .iter()
            .map(|p| (p.name.clone(), failure_policy(&p.failure_policy)))
            .collect();
        let allow_removal = config
            .plugins
            .iter()
            .filter(|p| p.allow_manifest_removal)
            .map(|p| p.name.clone())
            .collect();
        let namespaces = config
            .plugins
            .iter()
            .filter_map(|p| Some((p.name.clone(), p.namespaces.clone()?)))
            .collect();
        Ok(Self {
            clients,
            health: RwLock::new(health),
            policies,
            allow_removal,
            namespaces,
            judged: Mutex::new(HashMap::new()),
            poll,
            controller_version: controller_version.to_string(),
            ..Self::default()
        })
    }

    /// Marks sealed with `key` (the controller's, kept in a Secret: [`crate::mark_key`]).
    pub fn with_mark_key(self, key: MarkKey) -> Self {
        self.set_marks(Marks::sealed(key));
        self
    }

    /// Seal and check marks so from the next pass on.
    pub fn set_marks(&self, marks: Marks) {
        match self.marks.write() {
            Ok(mut m) => *m = marks,
            Err(poisoned) => *poisoned.into_inner() = marks,
        }
    }

    /// A plugin's spec is held to `limit`, as a template is (`--manifest-size-limit`).
    pub fn with_manifest_size_limit(mut self, limit: usize) -> Self {
        self.manifest_size_limit = limit;
        self
    }

    /// At most `n` calls in flight at once to each plugin.
    pub fn with_calls_in_flight(mut self, n: usize) -> Self {
        self.calls_in_flight = n.max(1);
        self
    }

    /// A permit to call `plugin`, once fewer than the bound of its calls are in flight.
    async fn permit(&self, plugin: &str) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let limit = {
            let mut limits = self.in_flight.lock().ok()?;
            limits
                .entry(plugin.to_string())
                .or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(self.calls_in_flight)))
                .clone()
        };
        limit.acquire_owned().await.ok()
    }

    /// Shorter time bounds on every call (tests).
    pub fn with_call_timeout(mut self, timeout: Duration) -> Self {
        for c in self.clients.values_mut() {
            *c = c.clone().with_timeout(timeout);
        }
        self
    }

    pub fn is_empty(&self) -> bool {
        self.clients.is_empty()
    }

    pub fn poll(&self) -> Duration {
        self.poll
    }
}
