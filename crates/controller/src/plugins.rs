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

use crate::context::Context;
use crate::events::EventType;
use crate::watch::GuardedMwrs;

/// Questions in flight at once within one pass.
const ASK_CONCURRENCY: usize = 16;

/// Calls in flight at once to one plugin, across every pass and MWRS: many MWRS naming
/// one plugin and changing together queue here instead of overloading it (time queued
/// here is not the plugin's: a call's time bound starts when it is sent).
pub const DEFAULT_CALLS_IN_FLIGHT: usize = 32;

/// How often a cluster still Validating is asked again, and an unreachable plugin probed.
pub const DEFAULT_POLL: Duration = Duration::from_secs(10);

/// What one MWRS's plugins were told and said.
#[derive(Default)]
struct Judged {
    verdicts: BTreeMap<Arc<str>, ClusterVerdict>,
    asked: BTreeMap<Arc<str>, Timestamp>,
    begun: BTreeMap<Arc<str>, Begun>,
    progressed: BTreeMap<String, u64>,
    /// Per cluster, the calls about it that went wrong in a row.
    errors: BTreeMap<Arc<str>, ErrorRun>,
    /// Every distinct spec the plugins returned that a cluster still holds, by digest: a
    /// plugin returning the same spec for 5,000 clusters costs one copy, not 5,000.
    specs: HashMap<mwrs_engine::hash::Digest, Arc<serde_json::Value>>,
    /// Validations (cluster, revision) and Begins (cluster, revision, aborting) not
    /// answered yet: a slow plugin is not asked the same again meanwhile. A validation
    /// keeps the time it was sent (the planner judges the cluster's deadline as of then).
    validating: BTreeMap<(Arc<str>, String), Timestamp>,
    beginning: BTreeSet<(Arc<str>, String, bool)>,
}

/// What a call to a plugin found out about it.
#[derive(Clone, Debug)]
enum Seen {
    /// `Initialize` answered, with this description.
    Initialized { description: String, at: Timestamp },
    /// A call about a cluster was answered (an error status about that call included:
    /// the plugin works).
    Answered { at: Timestamp },
    /// `Initialize`, or a call about a cluster (`about_a_cluster`), timed out or answered
    /// a status saying the plugin does not work.
    Down {
        why: String,
        at: Timestamp,
        about_a_cluster: bool,
    },
}

/// A plugin's health as this replica's own calls found it, with what its last outage and
/// recovery were: a flap shorter than two poll intervals restarts neither the
/// unavailability clock nor the deadlines (rules §12.3), and an outage that a call about a
/// cluster took part in ends only when such a call succeeds (rules §12.6).
#[derive(Clone, Debug)]
struct Tracked {
    health: PluginHealth,
    /// The description its last `Initialize` gave.
    description: String,
    /// When it last became available.
    up_since: Option<Timestamp>,
    /// The last outage that ended: (start, end).
    last_outage: Option<(Timestamp, Timestamp)>,
    /// A call about a cluster failed during the outage it is in.
    calls_failed: bool,
}

impl Tracked {
    /// Nothing asked yet.
    fn unknown() -> Self {
        Self {
            health: PluginHealth::Unknown,
            description: String::new(),
            up_since: None,
            last_outage: None,
            calls_failed: false,
        }
    }

    /// Takes in `seen`; true when the health the planner sees changed.
    fn settle(&mut self, seen: Seen, flap: SignedDuration) -> bool {
        use PluginHealth::{Available, Recovering, Unknown, Unreachable};
        if let Seen::Initialized { description, .. } = &seen {
            self.description.clone_from(description);
        }
        let next = match (&self.health, seen) {
            (Unknown, Seen::Answered { .. }) => None,
            (Unknown | Available { .. }, Seen::Initialized { at, .. }) => {
                let since = self.up_since.unwrap_or(at);
                self.up_since = Some(since);
                Some(Available {
                    description: self.description.clone(),
                    since,
                })
            }
            (Available { .. }, Seen::Answered { .. }) => None,
            (
                Unknown | Available { .. },
                Seen::Down {
                    why,
                    at,
                    about_a_cluster,
                },
            ) => {
                let short = |(_, end): &(Timestamp, Timestamp)| at.duration_since(*end) < flap;
                let since = self
                    .last_outage
                    .filter(short)
                    .map_or(at, |(start, _)| start);
                self.calls_failed = about_a_cluster;
                Some(Unreachable { why, since })
            }
            (Unreachable { since, .. }, Seen::Initialized { at, .. }) if !self.calls_failed => {
                Some(self.recovered(*since, at, flap))
            }
            (Unreachable { why, since }, Seen::Initialized { .. }) => Some(Recovering {
                why: why.clone(),
                since: *since,
            }),
            (Recovering { .. }, Seen::Initialized { .. }) => None,
            (Unreachable { since, .. } | Recovering { since, .. }, Seen::Answered { at }) => {
                Some(self.recovered(*since, at, flap))
            }
            // Its Initialize answers and calls about clusters fail: it stays recovering,
            // asked again at each poll.
            (
                Recovering { since, .. },
                Seen::Down {
                    why,
                    about_a_cluster: true,
                    ..
                },
            ) => Some(Recovering { why, since: *since }),
            (
                Unreachable { since, .. } | Recovering { since, .. },
                Seen::Down {
                    why,
                    about_a_cluster,
                    ..
                },
            ) => {
                self.calls_failed |= about_a_cluster;
                Some(Unreachable { why, since: *since })
            }
        };
        match next {
            Some(health) if health != self.health => {
                self.health = health;
                true
            }
            _ => false,
        }
    }

    /// Available again at `at` after an outage since `down`: the time it has been up
    /// counts from before the outage when the outage was a flap.
    fn recovered(&mut self, down: Timestamp, at: Timestamp, flap: SignedDuration) -> PluginHealth {
        self.last_outage = Some((down, at));
        self.calls_failed = false;
        let since = self
            .up_since
            .filter(|_| at.duration_since(down) < flap)
            .unwrap_or(at);
        self.up_since = Some(since);
        PluginHealth::Available {
            description: self.description.clone(),
            since,
        }
    }
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

/// `m` sharing the copy of its spec `specs` holds, if one is there; else `m`, whose spec
/// `specs` then holds. Specs no cluster holds any more are dropped meanwhile.
fn intern(
    specs: &mut HashMap<mwrs_engine::hash::Digest, Arc<serde_json::Value>>,
    m: Mutation,
) -> Mutation {
    if let Some(spec) = specs.get(&m.digest) {
        return Mutation {
            spec: spec.clone(),
            digest: m.digest,
        };
    }
    specs.retain(|_, spec| Arc::strong_count(spec) > 1);
    specs.insert(m.digest, m.spec.clone());
    m
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

    /// What a pass over MWRS `owner` plans with.
    pub fn inputs(&self, owner: &str) -> PluginInputs {
        let namespace = owner.split_once('/').map_or(owner, |(ns, _)| ns);
        let health = self
            .health
            .read()
            .map(|h| {
                h.iter()
                    .map(|(n, t)| (n.clone(), self.health_for(n, namespace, &t.health)))
                    .collect()
            })
            .unwrap_or_default();
        let poll = SignedDuration::try_from(self.poll).unwrap_or(SignedDuration::from_secs(10));
        let base = PluginInputs {
            health,
            poll,
            policies: self.policies.clone(),
            // Never the default (marks taken as written), even from a poisoned lock.
            marks: match self.marks.read() {
                Ok(m) => m.clone(),
                Err(poisoned) => poisoned.into_inner().clone(),
            },
            ..PluginInputs::default()
        };
        let Ok(judged) = self.judged.lock() else {
            return base;
        };
        let Some(j) = judged.get(owner) else {
            return base;
        };
        PluginInputs {
            verdicts: j.verdicts.clone(),
            asked: j.asked.clone(),
            unanswered: unanswered(&j.validating),
            begun: j.begun.clone(),
            progressed: j.progressed.clone(),
            errors: j.errors.clone(),
            ..base
        }
    }

    /// May an MWRS of `namespace` use `plugin`? (Its registration's `namespaces`.)
    fn serves(&self, plugin: &str, namespace: &str) -> bool {
        self.namespaces
            .get(plugin)
            .is_none_or(|n| n.contains(namespace))
    }

    /// `health` as an MWRS of `namespace` sees `plugin`: a plugin not open to the
    /// namespace holds its clusters for ever (no call is made, no budget runs).
    fn health_for(&self, plugin: &str, namespace: &str, health: &PluginHealth) -> PluginHealth {
        let Some(open) = self
            .namespaces
            .get(plugin)
            .filter(|n| !n.contains(namespace))
        else {
            return health.clone();
        };
        let open: Vec<&str> = open.iter().map(String::as_str).collect();
        PluginHealth::Unreachable {
            why: format!(
                "not open to namespace {namespace}: its registration lists namespaces {}",
                open.join(", ")
            ),
            since: Timestamp::MAX,
        }
    }

    /// Forgets what was said about a deleted MWRS.
    pub fn forget(&self, owner: &str) {
        if let Ok(mut j) = self.judged.lock() {
            j.remove(owner);
        }
    }

    /// Each plugin presenting a client certificate, with when the one in use expires (or
    /// why that cannot be read).
    pub fn client_cert_expiries(&self) -> Vec<(&str, Result<i64, String>)> {
        (self.clients.iter())
            .filter_map(|(name, c)| Some((name.as_str(), c.client_cert_not_after()?)))
            .collect()
    }

    /// `Initialize` on every plugin, to learn which answer; true when any plugin's health
    /// changed.
    pub async fn probe(&self) -> bool {
        let mut changed = false;
        for (name, client) in &self.clients {
            let request = api::InitializeRequest {
                plugin: name.clone(),
                controller_version: self.controller_version.clone(),
            };
            let seen = match client.initialize(request).await {
                Ok(r) => Seen::Initialized {
                    description: cut(r.description, PLUGIN_TEXT_MAX),
                    at: Timestamp::now(),
                },
                Err(s) => Seen::Down {
                    why: format!("Initialize: {}", status_line(&s)),
                    at: Timestamp::now(),
                    about_a_cluster: false,
                },
            };
            changed |= self.set_health(name, seen);
        }
        changed
    }

    /// Takes in what a call to `name` found; false when the planner's view of it stays
    /// the same ([`Tracked::settle`] has the rules).
    fn set_health(&self, name: &str, seen: Seen) -> bool {
        // Every answer says the plugin works; a read settles it without the write lock
        // while that is what is known.
        if matches!(seen, Seen::Answered { .. })
            && self.health.read().is_ok_and(|h| {
                h.get(name).is_some_and(|t| {
                    matches!(
                        t.health,
                        PluginHealth::Available { .. } | PluginHealth::Unknown
                    )
                })
            })
        {
            return false;
        }
        let Ok(mut h) = self.health.write() else {
            return false;
        };
        let flap = SignedDuration::try_from(self.poll * 2).unwrap_or(SignedDuration::MAX);
        let t = h.entry(name.to_string()).or_insert_with(Tracked::unknown);
        if !t.settle(seen, flap) {
            return false;
        }
        match &t.health {
            PluginHealth::Available { description, .. } => {
                tracing::info!(plugin = name, %description, "rollout plugin available")
            }
            PluginHealth::Unreachable { why, .. } => {
                tracing::warn!(plugin = name, %why, "rollout plugin unreachable")
            }
            PluginHealth::Recovering { why, .. } => tracing::warn!(
                plugin = name, %why,
                "rollout plugin's Initialize answers again; down until a call about a cluster succeeds"
            ),
            PluginHealth::Unknown => {}
        }
        true
    }

    /// Where to say which MWRS has news from its plugins (the controller's trigger).
    pub fn answers_to(&self, news: UnboundedSender<ObjectRef<GuardedMwrs>>) {
        if let Ok(mut n) = self.news.lock() {
            *n = Some(news);
        }
    }

    /// Makes `calls` in a task of their own, so that a slow plugin holds no reconcile
    /// (nor another MWRS); when an answer differs from what was known, `mwrs` is
    /// reconciled again. Each call counts as made from now: the passes meanwhile do not
    /// make it again. Each call is made only while `ctx`'s write gate is open (rules
    /// §12.4), and a refused answer is reported as an Event on `mwrs` through it.
    pub fn call_in_background(
        self: &Arc<Self>,
        ctx: &Arc<Context>,
        mwrs: &ManifestWorkReplicaSet,
        calls: PluginCalls,
    ) {
        if !ctx.gate_is_open("call", "rollout plugin") {
            return;
        }
        let namespace = mwrs.metadata.namespace.clone().unwrap_or_default();
        let name = mwrs.metadata.name.clone().unwrap_or_default();
        let key = ObjectRef::<GuardedMwrs>::new(&name).within(&namespace);
        let owner = OwnerKey::new(namespace, name).slashed();
        let calls = self.mark_sent(&owner, calls, Timestamp::now());
        if calls.is_empty() {
            return;
        }
        let about = MwrsRef::of(mwrs);
        // One encoding of each template, shared by every call about its revision (a Begin
        // per cluster, all about one or two revisions); the MutateManifestWork that
        // follows a Begin carries it.
        let mut specs: BTreeMap<String, Template> = BTreeMap::new();
        for b in &calls.begins {
            if !specs.contains_key(&b.revision)
                && let Some(template) = Template::of(&b.template)
            {
                specs.insert(b.revision.clone(), template);
            }
        }
        let plugins = self.clone();
        let ctx = ctx.clone();
        let regarding = kube::Resource::object_ref(mwrs, &());
        tokio::spawn(async move {
            let to = Reporting {
                ctx: &ctx,
                regarding: &regarding,
                key,
            };
            plugins.call(&owner, &about, calls, &specs, to).await;
        });
    }

    /// Says that MWRS `key` has news from its plugins (the controller's trigger merges
    /// news about one MWRS that come before its pass).
    fn announce(&self, key: &ObjectRef<GuardedMwrs>) {
        let news = self.news.lock().ok().and_then(|n| n.clone());
        if let Some(news) = news {
            let _ = news.unbounded_send(key.clone());
        }
    }

    /// Records `calls` as made at `now`, and returns those to make: all but a question
    /// or a Begin that is in flight already (it counts as asked all the same, so that
    /// the planner's schedule goes on).
    fn mark_sent(&self, owner: &str, mut calls: PluginCalls, now: Timestamp) -> PluginCalls {
        let Ok(mut judged) = self.judged.lock() else {
            return PluginCalls::default();
        };
        let j = judged.entry(owner.to_string()).or_default();
        for v in &calls.validations {
            j.asked.insert(Arc::from(v.cluster.as_str()), now);
        }
        let in_flight = InFlight::of(&calls);
        let mut keys = in_flight.validating.into_iter();
        calls.validations.retain(|_| {
            keys.next()
                .is_some_and(|k| sent_first(&mut j.validating, k, now))
        });
        let mut keys = in_flight.beginning.into_iter();
        calls
            .begins
            .retain(|_| keys.next().is_some_and(|k| j.beginning.insert(k)));
        for b in &calls.begins {
            let begun = Begun {
                plugin: b.target.plugin.clone(),
                revision: b.revision.clone(),
                aborting: b.aborting,
                at: now,
                acked: false,
                mutation: None,
            };
            j.begun.insert(Arc::from(b.cluster.as_str()), begun);
        }
        for p in &calls.progress {
            j.progressed
                .insert(p.target.placement.clone(), p.fingerprint);
        }
        calls
    }

    /// The call `sent` landed (or was not made after all): it may be made again.
    fn landed(&self, owner: &str, sent: Sent<'_>) {
        let Ok(mut judged) = self.judged.lock() else {
            return;
        };
        let Some(j) = judged.get_mut(owner) else {
            return;
        };
        match sent {
            Sent::Validation(v) => {
                j.validating
                    .remove(&(Arc::from(v.cluster.as_str()), v.revision.clone()));
            }
            Sent::Begin(b) => {
                let cluster = Arc::from(b.cluster.as_str());
                j.beginning
                    .remove(&(cluster, b.revision.clone(), b.aborting));
            }
            Sent::Progress => {}
        }
    }

    /// Makes `calls`, at most [`ASK_CONCURRENCY`] at once and each only while the write
    /// gate is open, and records each answer as it comes; the MWRS is announced whenever
    /// one differs from what was known.
    async fn call(
        &self,
        owner: &str,
        about: &MwrsRef,
        calls: PluginCalls,
        specs: &BTreeMap<String, Template>,
        to: Reporting<'_>,
    ) {
        let ctx = to.ctx;
        let mut answers = futures::stream::iter(self.jobs(about, calls, specs))
            .map(|job| async move {
                let _permit = self.permit(job.plugin()).await;
                // A replica that lost its lease (or the CRD) since the pass asks nothing.
                if ctx.gate_is_open_quietly() {
                    Ok(job.run().await)
                } else {
                    Err(job)
                }
            })
            .buffer_unordered(ASK_CONCURRENCY);
        while let Some(answer) = answers.next().await {
            let answer = match answer {
                Ok(answer) => answer,
                Err(job) => {
                    self.landed(owner, job.sent());
                    continue;
                }
            };
            self.landed(owner, answer.sent());
            if let Some(refusal) = self.refusal_to_report(owner, &answer) {
                let reason = "PluginAnswerRefused";
                let warning = EventType::Warning;
                crate::announce::publish_on(ctx, to.regarding, warning, reason, &refusal).await;
            }
            if self.record_answer(owner, answer) {
                self.announce(&to.key);
            }
        }
    }

    /// The calls to make for `calls` about the MWRS `about`, with the client of each one's
    /// plugin; `specs` holds the templates Begins are about.
    fn jobs(
        &self,
        about: &MwrsRef,
        calls: PluginCalls,
        specs: &BTreeMap<String, Template>,
    ) -> Vec<Job> {
        // A plugin not open to the MWRS's namespace is never called (the planner plans
        // no call to it: this is the second lock on the door).
        let client = |plugin: &str| {
            self.clients
                .get(plugin)
                .filter(|_| self.serves(plugin, &about.namespace))
                .cloned()
        };
        let mut jobs: Vec<Job> = Vec::new();
        for v in calls.validations {
            let request = validate_request(about, &v);
            jobs.push(Job::Validate(client(&v.target.plugin), v, request));
        }
        for b in calls.begins {
            let request = rollout_request(about, &b.target, &b.cluster, &[], b.aborting);
            let check = SpecCheck {
                template: specs.get(&b.revision).cloned(),
                allow_removal: self.allow_removal.contains(&b.target.plugin),
                limit: self.manifest_size_limit,
            };
            let mutate = mutate_request(about, &b, Vec::new());
            let plugin = client(&b.target.plugin);
            jobs.push(Job::Begin(plugin, b, request, Box::new(mutate), check));
        }
        for p in calls.progress {
            let request = rollout_request(about, &p.target, "", &p.clusters, p.aborting);
            jobs.push(Job::Progress(client(&p.target.plugin), p, request));
        }
        jobs
    }

    /// Records one answer; true when it differs from what was known.
    fn record_answer(&self, owner: &str, answer: Answer) -> bool {
        let now = Timestamp::now();
        let answered = |plugin: &str| self.set_health(plugin, Seen::Answered { at: now });
        match answer {
            Answer::Validated(v, Ok(r)) => {
                self.end_error_run(owner, &v.cluster);
                let back = answered(&v.target.plugin);
                self.record(owner, &v, r, now) || back
            }
            Answer::Begun(b, Ok(mutation)) => {
                self.end_error_run(owner, &b.cluster);
                let back = answered(&b.target.plugin);
                self.record_begun(owner, &b, mutation) || back
            }
            Answer::Progressed(p, Ok(())) => answered(&p.target.plugin),
            Answer::Validated(v, Err(s)) => {
                let message = format!("{}: {}", v.call_name(), status_line(&s));
                let about = (v.target.plugin.as_str(), v.revision.as_str());
                // A down status counts in the cluster's run as any error does (rules §12.6).
                let counted = self.extend_error_run(owner, &v.cluster, about, &message, now);
                let health = self.health_after(&v.target.plugin, &s, &message, now);
                let said = self.record_verdict(owner, &v, (Verdict::Erred, message), now);
                said || counted || health
            }
            Answer::Begun(b, Err((call, s))) => {
                // Left unanswered: sent again after the poll interval; the cluster waits,
                // and its note says why, until the plugin's budget is spent.
                let message = format!("{call}: {}", status_line(&s));
                if is_about_the_call(&s) {
                    tracing::warn!(plugin = %b.target.plugin, cluster = %b.cluster, %message, "rollout plugin's answer refused");
                }
                let about = (b.target.plugin.as_str(), b.revision.as_str());
                let counted =
                    !b.aborting && self.extend_error_run(owner, &b.cluster, about, &message, now);
                self.health_after(&b.target.plugin, &s, &message, now) || counted
            }
            Answer::Progressed(p, Err(s)) => {
                // Told again once the plugin is back.
                self.forget_progress(owner, &p.target.placement);
                let message = format!("ProgressRollout: {}", status_line(&s));
                self.health_after(&p.target.plugin, &s, &message, now)
            }
        }
    }

    /// What a call about a cluster that answered `s` says of `plugin`: it works when the
    /// status is about the call (the call goes wrong, not the plugin), else it is down.
    fn health_after(&self, plugin: &str, s: &tonic::Status, why: &str, at: Timestamp) -> bool {
        let seen = if is_about_the_call(s) {
            Seen::Answered { at }
        } else {
            Seen::Down {
                why: why.to_string(),
                at,
                about_a_cluster: true,
            }
        };
        self.set_health(plugin, seen)
    }

    /// The Event to publish about `answer`: a refused answer about a cluster, once per
    /// run of errors (the cluster's note and status say the rest).
    fn refusal_to_report(&self, owner: &str, answer: &Answer) -> Option<String> {
        let Answer::Begun(b, Err((call, s))) = answer else {
            return None;
        };
        if !is_about_the_call(s) {
            return None;
        }
        let judged = self.judged.lock().ok()?;
        let running = judged
            .get(owner)
            .and_then(|j| j.errors.get(b.cluster.as_str()))
            .is_some_and(|r| r.plugin == b.target.plugin && r.revision == b.revision);
        (!running).then(|| {
            format!(
                "cluster {}: plugin {} {call}: {}; nothing was written, the cluster waits and is asked again",
                b.cluster,
                b.target.plugin,
                status_line(s)
            )
        })
    }

    /// One more call about `cluster` on `(plugin, revision)` went wrong; true (news) when
    /// it changes the run.
    fn extend_error_run(
        &self,
        owner: &str,
        cluster: &str,
        (plugin, revision): (&str, &str),
        message: &str,
        now: Timestamp,
    ) -> bool {
        let Ok(mut judged) = self.judged.lock() else {
            return false;
        };
        let j = judged.entry(owner.to_string()).or_default();
        let last = cut(message.to_string(), PLUGIN_TEXT_MAX);
        match j.errors.get_mut(cluster) {
            Some(run) if run.plugin == plugin && run.revision == revision => {
                run.count = run.count.saturating_add(1);
                run.last = last;
            }
            _ => {
                let run = ErrorRun {
                    plugin: plugin.to_string(),
                    revision: revision.to_string(),
                    count: 1,
                    since: now,
                    last,
                };
                j.errors.insert(Arc::from(cluster), run);
            }
        }
        true
    }

    /// A usable answer about `cluster` ends its run of errors.
    fn end_error_run(&self, owner: &str, cluster: &str) {
        if let Ok(mut judged) = self.judged.lock()
            && let Some(j) = judged.get_mut(owner)
        {
            j.errors.remove(cluster);
        }
    }

    /// Records that the plugin answered `b` and the MutateManifestWork after it; true
    /// when that opens a write (the cluster may now get the revision, or a revert the
    /// plugin's spec).
    fn record_begun(&self, owner: &str, b: &Begin, mutation: Option<Mutation>) -> bool {
        let Ok(mut judged) = self.judged.lock() else {
            return false;
        };
        let j = judged.entry(owner.to_string()).or_default();
        let Some(sent) = j.begun.get_mut(b.cluster.as_str()) else {
            return false;
        };
        if (&sent.plugin, &sent.revision, sent.aborting)
            != (&b.target.plugin, &b.revision, b.aborting)
        {
            return false;
        }
        sent.acked = true;
        let spec_changes = mutation.is_some();
        sent.mutation = mutation.map(|m| intern(&mut j.specs, m));
        !b.aborting || spec_changes
    }

    fn forget_progress(&self, owner: &str, placement: &str) {
        if let Ok(mut judged) = self.judged.lock()
            && let Some(j) = judged.get_mut(owner)
        {
            j.progressed.remove(placement);
        }
    }

    /// Records one answer; true when it differs from the last one.
    fn record(
        &self,
        owner: &str,
        v: &Validation,
        r: api::ValidateResponse,
        now: Timestamp,
    ) -> bool {
        let verdict = match api::Verdict::try_from(r.verdict) {
            Ok(api::Verdict::Succeeded) => Verdict::Succeeded,
            Ok(api::Verdict::Failed) => Verdict::Failed,
            // An unspecified or unknown verdict says nothing final.
            _ => Verdict::InProgress,
        };
        self.record_verdict(owner, v, (verdict, r.message), now)
    }

    /// Records `verdict` with its message about `v`; true when it differs from the last
    /// one.
    fn record_verdict(
        &self,
        owner: &str,
        v: &Validation,
        (verdict, message): (Verdict, String),
        now: Timestamp,
    ) -> bool {
        let Ok(mut judged) = self.judged.lock() else {
            return false;
        };
        let j = judged.entry(owner.to_string()).or_default();
        let cluster: Arc<str> = Arc::from(v.cluster.as_str());
        let new = ClusterVerdict {
            plugin: v.target.plugin.clone(),
            revision: v.revision.clone(),
            generation: v.generation,
            verdict,
            // Cut at intake: nothing a plugin says may make a status write fail.
            message: cut(message, PLUGIN_TEXT_MAX),
            at: now,
        };
        let same = j.verdicts.get(&cluster).is_some_and(|old| {
            (
                &old.plugin,
                &old.revision,
                old.generation,
                old.verdict,
                &old.message,
            ) == (
                &new.plugin,
                &new.revision,
                new.generation,
                new.verdict,
                &new.message,
            )
        });
        if !same {
            j.verdicts.insert(cluster, new);
        }
        !same
    }
}

/// What a batch of calls asks about, one key per call in order.
/// Records `key` as sent at `now` unless it is in flight already; true when it was not.
fn sent_first<K: Ord>(in_flight: &mut BTreeMap<K, Timestamp>, key: K, now: Timestamp) -> bool {
    match in_flight.entry(key) {
        std::collections::btree_map::Entry::Vacant(e) => {
            e.insert(now);
            true
        }
        std::collections::btree_map::Entry::Occupied(_) => false,
    }
}

/// Per cluster, when its oldest unanswered question was sent.
fn unanswered(
    validating: &BTreeMap<(Arc<str>, String), Timestamp>,
) -> BTreeMap<Arc<str>, Timestamp> {
    let mut out: BTreeMap<Arc<str>, Timestamp> = BTreeMap::new();
    for ((cluster, _), at) in validating {
        out.entry(cluster.clone())
            .and_modify(|t| *t = (*t).min(*at))
            .or_insert(*at);
    }
    out
}

struct InFlight {
    validating: Vec<(Arc<str>, String)>,
    beginning: Vec<(Arc<str>, String, bool)>,
}

impl InFlight {
    fn of(calls: &PluginCalls) -> Self {
        Self {
            validating: calls
                .validations
                .iter()
                .map(|v| (Arc::from(v.cluster.as_str()), v.revision.clone()))
                .collect(),
            beginning: calls
                .begins
                .iter()
                .map(|b| {
                    (
                        Arc::from(b.cluster.as_str()),
                        b.revision.clone(),
                        b.aborting,
                    )
                })
                .collect(),
        }
    }
}

/// Where a batch of calls reports: the write gate and Events of `ctx`, about the MWRS
/// `regarding` (`key` in the controller's queue).
struct Reporting<'a> {
    ctx: &'a Context,
    regarding: &'a k8s_openapi::api::core::v1::ObjectReference,
    key: ObjectRef<GuardedMwrs>,
}

/// The MWRS a call is about, as every request names it.
struct MwrsRef {
    namespace: String,
    name: String,
    uid: String,
}

impl MwrsRef {
    fn of(mwrs: &ManifestWorkReplicaSet) -> Self {
        let meta = &mwrs.metadata;
        Self {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
        }
    }
}

/// One call to make, with the client of its plugin (None: not registered). A Begin is
/// two: BeginRollout (or BeginAbort), then MutateManifestWork.
enum Job {
    Validate(Option<PluginClient>, Validation, api::ValidateRequest),
    Begin(
        Option<PluginClient>,
        Begin,
        api::RolloutRequest,
        // Boxed: the variant is the largest by far.
        Box<api::MutateRequest>,
        SpecCheck,
    ),
    Progress(Option<PluginClient>, Progress, api::RolloutRequest),
}

/// What a call was about, as far as calls in flight go.
enum Sent<'a> {
    Validation(&'a Validation),
    Begin(&'a Begin),
    Progress,
}

impl Job {
    /// The plugin it calls.
    fn plugin(&self) -> &str {
        match self {
            Job::Validate(_, v, _) => &v.target.plugin,
            Job::Begin(_, b, ..) => &b.target.plugin,
            Job::Progress(_, p, _) => &p.target.plugin,
        }
    }

    fn sent(&self) -> Sent<'_> {
        match self {
            Job::Validate(_, v, _) => Sent::Validation(v),
            Job::Begin(_, b, ..) => Sent::Begin(b),
            Job::Progress(..) => Sent::Progress,
        }
    }
}

impl Answer {
    fn sent(&self) -> Sent<'_> {
        match self {
            Answer::Validated(v, _) => Sent::Validation(v),
            Answer::Begun(b, _) => Sent::Begin(b),
            Answer::Progressed(..) => Sent::Progress,
        }
    }
}

/// A call and how it went.
enum Answer {
    Validated(Validation, Result<api::ValidateResponse, tonic::Status>),
    /// The spec MutateManifestWork returned, or the call that failed and how.
    Begun(
        Begin,
        Result<Option<Mutation>, (&'static str, tonic::Status)>,
    ),
    Progressed(Progress, Result<(), tonic::Status>),
}

impl Job {
    async fn run(self) -> Answer {
        let missing = || tonic::Status::not_found("not registered");
        match self {
            Job::Validate(client, v, r) => {
                let answer = match client {
                    Some(c) if v.aborting => c.validate_abort_completion(r).await,
                    Some(c) => c.validate_rollout_completion(r).await,
                    None => Err(missing()),
                };
                Answer::Validated(v, answer)
            }
            Job::Begin(client, b, r, mutate, check) => {
                let answer = match client {
                    Some(c) => begin_and_mutate(&c, &b, r, *mutate, &check).await,
                    None => Err((b.call_name(), missing())),
                };
                Answer::Begun(b, answer)
            }
            Job::Progress(client, p, r) => {
                let answer = match client {
                    Some(c) => c.progress_rollout(r).await,
                    None => Err(missing()),
                };
                Answer::Progressed(p, answer.map(drop))
            }
        }
    }
}

/// A revision's template: the bytes every MutateManifestWork about it sends, and the
/// parsed form its answers are checked against.
#[derive(Clone)]
struct Template {
    bytes: Arc<[u8]>,
    typed: Arc<ManifestWorkTemplate>,
    /// Its digest: an answer equal to it is no mutation.
    digest: mwrs_engine::hash::Digest,
}

impl Template {
    fn of(template: &serde_json::Value) -> Option<Self> {
        let bytes = Arc::from(serde_json::to_vec(template).ok()?);
        let typed = ManifestWorkTemplate::from_value(template.clone()).ok()?;
        Some(Self {
            bytes,
            typed: Arc::new(typed),
            digest: mwrs_engine::hash::digest(template),
        })
    }
}

/// What a MutateManifestWork answer is checked against (rules §12.1).
struct SpecCheck {
    template: Option<Template>,
    allow_removal: bool,
    limit: usize,
}

/// BeginRollout (or BeginAbort) about `b`, then MutateManifestWork: the spec to write
/// instead of the template, if the plugin returns one it may (`check`).
async fn begin_and_mutate(
    c: &PluginClient,
    b: &Begin,
    r: api::RolloutRequest,
    mut mutate: api::MutateRequest,
    check: &SpecCheck,
) -> Result<Option<Mutation>, (&'static str, tonic::Status)> {
    let begun = match b.aborting {
        true => c.begin_abort(r).await,
        false => c.begin_rollout(r).await,
    };
    begun.map_err(|s| (b.call_name(), s))?;
    const MUTATE: &str = "MutateManifestWork";
    let Some(template) = &check.template else {
        // No template to send: nothing to mutate (the revision's content is unknown).
        return Ok(None);
    };
    // Copied here, one call at a time, not for every queued call at once.
    mutate.spec_json = template.bytes.to_vec();
    let answer = c
        .mutate_manifest_work(mutate)
        .await
        .map_err(|s| (MUTATE, s))?;
    let spec = mwrs_engine::validate::plugin_spec(
        &answer.spec_json,
        (&template.typed, template.digest),
        check.allow_removal,
        check.limit,
    );
    spec.map_err(|invalid| {
        let why = cut(format!("refused: {invalid}"), PLUGIN_TEXT_MAX);
        (MUTATE, tonic::Status::invalid_argument(why))
    })
}

trait CallName {
    fn call_name(&self) -> &'static str;
}

impl CallName for Validation {
    fn call_name(&self) -> &'static str {
        if self.aborting {
            "ValidateAbortCompletion"
        } else {
            "ValidateRolloutCompletion"
        }
    }
}

impl CallName for Begin {
    fn call_name(&self) -> &'static str {
        if self.aborting {
            "BeginAbort"
        } else {
            "BeginRollout"
        }
    }
}

fn api_target(about: &MwrsRef, t: &CallTarget) -> (api::Target, api::Revisions) {
    let target = api::Target {
        mwrs_namespace: about.namespace.clone(),
        mwrs_name: about.name.clone(),
        mwrs_uid: about.uid.clone(),
        placement: t.placement.clone(),
        total_clusters: i32::try_from(t.total_clusters).unwrap_or(i32::MAX),
    };
    let revisions = api::Revisions {
        current: t.current.clone().unwrap_or_default(),
        update: t.update.clone(),
    };
    (target, revisions)
}

fn timestamp(t: Timestamp) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.as_second(),
        nanos: t.subsec_nanosecond(),
    }
}

/// ValidateRolloutCompletion's (or ValidateAbortCompletion's) request for `v`.
fn validate_request(about: &MwrsRef, v: &Validation) -> api::ValidateRequest {
    let (target, revisions) = api_target(about, &v.target);
    api::ValidateRequest {
        target: Some(target),
        revisions: Some(revisions),
        cluster: v.cluster.clone(),
        revision: v.revision.clone(),
        manifest_work: v.manifest_work.clone(),
        generation: v.generation,
        since: v.since.map(timestamp),
    }
}

/// MutateManifestWork's request after `b`, with the template's `spec_json`.
fn mutate_request(about: &MwrsRef, b: &Begin, spec_json: Vec<u8>) -> api::MutateRequest {
    let (target, revisions) = api_target(about, &b.target);
    api::MutateRequest {
        target: Some(target),
        revisions: Some(revisions),
        cluster: b.cluster.clone(),
        revision: b.revision.clone(),
        spec_json,
        aborting: b.aborting,
    }
}

/// The request of BeginRollout, ProgressRollout or BeginAbort.
fn rollout_request(
    about: &MwrsRef,
    t: &CallTarget,
    cluster: &str,
    clusters: &[ClusterState],
    aborting: bool,
) -> api::RolloutRequest {
    let (target, revisions) = api_target(about, t);
    api::RolloutRequest {
        target: Some(target),
        revisions: Some(revisions),
        cluster: cluster.to_string(),
        clusters: clusters.iter().map(cluster_state).collect(),
        aborting,
    }
}

fn cluster_state(c: &ClusterState) -> api::ClusterState {
    use api::ClusterRolloutState as S;
    let state = match c.status {
        RolloutStatus::ToApply => S::ToApply,
        RolloutStatus::Progressing => S::Progressing,
        RolloutStatus::Validating => S::Validating,
        RolloutStatus::Succeeded => S::Succeeded,
        RolloutStatus::Failed => S::Failed,
        RolloutStatus::TimeOut => S::Timeout,
        RolloutStatus::Skip => S::Skip,
    };
    api::ClusterState {
        cluster: c.cluster.to_string(),
        state: state.into(),
        revision: c.revision.as_deref().unwrap_or_default().to_string(),
        since: c.since.map(timestamp),
    }
}

/// Is `s` the plugin's answer about this one call (it works, but refuses or cannot do
/// it)? Else the plugin does not work ([`mwrs_plugin::client::is_down`]).
fn is_about_the_call(s: &tonic::Status) -> bool {
    !mwrs_plugin::client::is_down(s)
}

/// `CODE: message` of a gRPC status, in a line, cut to [`PLUGIN_TEXT_MAX`].
fn status_line(s: &tonic::Status) -> String {
    cut(mwrs_plugin::client::status_text(s), PLUGIN_TEXT_MAX)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn validation(cluster: &str) -> Validation {
        Validation {
            target: CallTarget {
                plugin: "judge".into(),
                placement: "p".into(),
                total_clusters: 1,
                current: None,
                update: "abc".into(),
            },
            cluster: cluster.into(),
            manifest_work: "ns.app".into(),
            revision: "abc".into(),
            generation: 2,
            since: None,
            aborting: false,
        }
    }

    fn answer(v: api::Verdict, message: &str) -> api::ValidateResponse {
        api::ValidateResponse {
            verdict: v.into(),
            message: message.into(),
        }
    }

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    fn initialized(s: i64) -> Seen {
        Seen::Initialized {
            description: "judge 1.0".into(),
            at: at(s),
        }
    }

    /// `Initialize` (false) or a call about a cluster (true) found the plugin down.
    fn down(s: i64, about_a_cluster: bool) -> Seen {
        Seen::Down {
            why: "gone".into(),
            at: at(s),
            about_a_cluster,
        }
    }

    fn up_since(s: i64) -> PluginHealth {
        PluginHealth::Available {
            description: "judge 1.0".into(),
            since: at(s),
        }
    }

    fn down_since(s: i64) -> PluginHealth {
        PluginHealth::Unreachable {
            why: "gone".into(),
            since: at(s),
        }
    }

    #[test]
    fn a_plugin_that_keeps_answering_keeps_the_time_it_started_to() {
        let p = Plugins::default();
        assert!(p.set_health("judge", initialized(10)));
        assert!(!p.set_health("judge", initialized(20)), "the same answer");
        assert!(!p.set_health("judge", Seen::Answered { at: at(22) }));
        assert_eq!(p.inputs("ns/app").health["judge"], up_since(10));
        assert!(p.set_health("judge", down(25, false)));
        assert!(!p.set_health("judge", down(26, false)));
        assert!(p.set_health("judge", initialized(60)));
        assert_eq!(p.inputs("ns/app").health["judge"], up_since(60));
    }

    #[test]
    fn a_flapping_plugin_restarts_neither_its_outage_clock_nor_the_deadlines() {
        // Poll 10 s: a flap is anything under 20 s.
        let p = Plugins::default();
        p.set_health("judge", initialized(0));
        p.set_health("judge", down(100, false));
        // Back for 5 s, down again: the outage still counts from 100.
        assert!(p.set_health("judge", initialized(110)));
        assert_eq!(
            p.inputs("a").health["judge"],
            up_since(0),
            "a short outage keeps deadlines"
        );
        p.set_health("judge", down(115, false));
        assert_eq!(p.inputs("a").health["judge"], down_since(100));
        // Back for long: a new outage starts its own clock.
        p.set_health("judge", initialized(120));
        p.set_health("judge", down(500, false));
        assert_eq!(p.inputs("a").health["judge"], down_since(500));
        // A long outage ends: deadlines count from the recovery.
        p.set_health("judge", initialized(900));
        assert_eq!(p.inputs("a").health["judge"], up_since(900));
    }

    /// rules §12.6: a plugin whose `Initialize` answers while its calls about clusters
    /// fail (its own backend down) stays down from the first failed call until one of
    /// those calls succeeds, however often `Initialize` answers meanwhile.
    #[test]
    fn an_outage_that_calls_took_part_in_ends_only_when_a_call_succeeds() {
        let p = Plugins::default();
        p.set_health("judge", initialized(0));
        assert!(p.set_health("judge", down(100, true)));
        assert_eq!(p.inputs("a").health["judge"], down_since(100));
        let recovering = |why: &str| PluginHealth::Recovering {
            why: why.into(),
            since: at(100),
        };
        assert!(
            p.set_health("judge", initialized(110)),
            "calls are made again"
        );
        assert_eq!(p.inputs("a").health["judge"], recovering("gone"));
        // Calls fail again: still the outage of 100, still asked at each poll.
        let failed = Seen::Down {
            why: "ValidateRolloutCompletion: Unavailable: backend down".into(),
            at: at(115),
            about_a_cluster: true,
        };
        assert!(p.set_health("judge", failed));
        assert!(!p.set_health("judge", initialized(120)));
        assert_eq!(
            p.inputs("a").health["judge"],
            recovering("ValidateRolloutCompletion: Unavailable: backend down")
        );
        // Initialize fails too: down, the same outage.
        p.set_health("judge", down(125, false));
        assert_eq!(p.inputs("a").health["judge"], down_since(100));
        p.set_health("judge", initialized(130));
        assert!(p.set_health("judge", Seen::Answered { at: at(140) }));
        assert_eq!(p.inputs("a").health["judge"], up_since(140));
    }

    /// One bound on calls in flight per plugin, whichever pass or MWRS makes them.
    #[tokio::test]
    async fn calls_to_one_plugin_queue_past_its_bound() {
        let p = Plugins::default().with_calls_in_flight(2);
        let first = p.permit("judge").await;
        let second = p.permit("judge").await;
        assert!(first.is_some() && second.is_some());
        let wait = Duration::from_millis(50);
        let third = tokio::time::timeout(wait, p.permit("judge")).await;
        assert!(third.is_err(), "a third call in flight");
        assert!(
            p.permit("other").await.is_some(),
            "another plugin's own bound"
        );
        drop(first);
        assert!(tokio::time::timeout(wait, p.permit("judge")).await.is_ok());
    }

    /// A replica asked nothing yet knows nothing: only its own calls tell it a plugin is
    /// down, and the outage clock starts at the first of them, not at its start.
    #[test]
    fn a_plugin_is_unknown_until_this_replica_asks_it() {
        let p = Plugins::default();
        assert!(!p.set_health("judge", Seen::Answered { at: at(5) }));
        assert_eq!(p.inputs("a").health["judge"], PluginHealth::Unknown);
        assert!(p.set_health("judge", down(50, false)));
        assert_eq!(p.inputs("a").health["judge"], down_since(50));
    }

    #[test]
    fn errors_in_a_row_are_counted_and_a_usable_answer_ends_them() {
        let p = Plugins::default();
        let v = validation("c1");
        let internal = || tonic::Status::internal("x".repeat(40_000));
        for n in 1..=3u32 {
            assert!(p.record_answer("ns/app", Answer::Validated(v.clone(), Err(internal()))));
            let run = p.inputs("ns/app").errors["c1"].clone();
            assert_eq!((run.count, run.revision.as_str()), (n, "abc"));
            assert!(run.last.len() <= PLUGIN_TEXT_MAX, "cut at intake");
        }
        assert!(p.inputs("ns/app").verdicts["c1"].message.len() <= PLUGIN_TEXT_MAX);
        let ok = answer(api::Verdict::InProgress, &"y".repeat(40_000));
        p.record_answer("ns/app", Answer::Validated(v, Ok(ok)));
        let inputs = p.inputs("ns/app");
        assert!(inputs.errors.is_empty(), "{:?}", inputs.errors);
        assert!(inputs.verdicts["c1"].message.len() <= PLUGIN_TEXT_MAX);
        // A refused MutateManifestWork answer counts too, once per call.
        let b = Begin {
            target: validation("c1").target,
            cluster: "c1".into(),
            revision: "abc".into(),
            template: Arc::new(serde_json::json!({})),
            aborting: false,
        };
        let refused = tonic::Status::invalid_argument(
            "refused: spec_json.workload.manifests: must list at least one manifest",
        );
        let answer = Answer::Begun(b.clone(), Err(("MutateManifestWork", refused.clone())));
        assert!(
            p.refusal_to_report("ns/app", &answer).is_some(),
            "the first of a run"
        );
        p.record_answer("ns/app", answer);
        let again = Answer::Begun(b, Err(("MutateManifestWork", refused)));
        assert_eq!(
            p.refusal_to_report("ns/app", &again),
            None,
            "one Event a run"
        );
        p.record_answer("ns/app", again);
        assert_eq!(p.inputs("ns/app").errors["c1"].count, 2);
    }

    #[test]
    fn an_answer_is_news_only_when_it_differs() {
        let p = Plugins::default();
        let now = Timestamp::from_second(100).unwrap();
        let v = validation("c1");
        let r = |verdict, message| answer(verdict, message);
        assert!(p.record(
            "ns/app",
            &v,
            r(api::Verdict::InProgress, "1 of 3 checks"),
            now
        ));
        assert!(!p.record(
            "ns/app",
            &v,
            r(api::Verdict::InProgress, "1 of 3 checks"),
            now
        ));
        assert!(p.record(
            "ns/app",
            &v,
            r(api::Verdict::InProgress, "2 of 3 checks"),
            now
        ));
        assert!(p.record(
            "ns/app",
            &v,
            r(api::Verdict::Succeeded, "3 of 3 checks"),
            now
        ));
        // An unknown verdict number says nothing final.
        let odd = api::ValidateResponse {
            verdict: 42,
            message: String::new(),
        };
        assert!(p.record("ns/app", &validation("c2"), odd, now));
        let inputs = p.inputs("ns/app");
        assert_eq!(inputs.verdicts["c1"].verdict, Verdict::Succeeded);
        assert_eq!(inputs.verdicts["c2"].verdict, Verdict::InProgress);
        assert!(
            inputs.asked.is_empty(),
            "asked counts from the question, not the answer"
        );
        let calls = PluginCalls {
            validations: vec![v.clone()],
            ..PluginCalls::default()
        };
        p.mark_sent("ns/app", calls.clone(), now);
        assert_eq!(p.inputs("ns/app").asked["c1"], now);
        assert_eq!(p.inputs("ns/app").unanswered["c1"], now, "in flight");
        let later = Timestamp::from_second(130).unwrap();
        p.mark_sent("ns/app", calls, later);
        assert_eq!(p.inputs("ns/app").asked["c1"], later);
        assert_eq!(
            p.inputs("ns/app").unanswered["c1"],
            now,
            "the call in flight was sent first; none was sent again"
        );
        p.landed("ns/app", Sent::Validation(&v));
        assert!(p.inputs("ns/app").unanswered.is_empty(), "answered");
        assert!(p.inputs("ns/other").verdicts.is_empty(), "per MWRS");
        p.forget("ns/app");
        assert!(p.inputs("ns/app").verdicts.is_empty());
    }

    #[test]
    fn an_answer_to_begin_counts_for_what_was_sent_last() {
        let p = Plugins::default();
        let begin = |revision: &str, aborting| Begin {
            target: validation("c1").target,
            cluster: "c1".into(),
            revision: revision.into(),
            template: Arc::new(serde_json::json!({})),
            aborting,
        };
        let now = Timestamp::from_second(100).unwrap();
        let calls = |b: Begin| PluginCalls {
            begins: vec![b],
            ..PluginCalls::default()
        };
        p.mark_sent("ns/app", calls(begin("abc", false)), now);
        assert!(!p.inputs("ns/app").begun["c1"].acked);
        // An answer about what was sent before the last question does not count.
        assert!(!p.record_begun("ns/app", &begin("old", false), None));
        assert!(p.record_begun("ns/app", &begin("abc", false), None));
        assert!(p.inputs("ns/app").begun["c1"].acked);
        // An abort's: news only when it brings a spec to write.
        let ok = Answer::Begun(begin("abc", false), Ok(None));
        p.landed("ns/app", ok.sent());
        p.mark_sent("ns/app", calls(begin("abc", true)), now);
        assert!(!p.record_begun("ns/app", &begin("abc", true), None));
        let m = Mutation::new(serde_json::json!({"workload": {}}));
        assert!(p.record_begun("ns/app", &begin("abc", true), Some(m.clone())));
        assert_eq!(p.inputs("ns/app").begun["c1"].mutation, Some(m));
    }

    #[test]
    fn the_same_spec_for_many_clusters_is_kept_once() {
        let mut specs = HashMap::new();
        let spec = || serde_json::json!({"workload": {"manifests": [{"kind": "ConfigMap"}]}});
        let a = intern(&mut specs, Mutation::new(spec()));
        let b = intern(&mut specs, Mutation::new(spec()));
        assert!(Arc::ptr_eq(&a.spec, &b.spec), "one copy");
        drop((a, b));
        let other = intern(
            &mut specs,
            Mutation::new(serde_json::json!({"workload": {}})),
        );
        assert_eq!(specs.len(), 1, "a spec no cluster holds is dropped");
        assert!(Arc::ptr_eq(&specs[&other.digest], &other.spec));
    }

    #[test]
    fn a_question_in_flight_is_not_sent_again_until_it_lands() {
        let p = Plugins::default();
        let at = |s| Timestamp::from_second(s).unwrap();
        let ask = |clusters: &[&str]| PluginCalls {
            validations: clusters.iter().map(|c| validation(c)).collect(),
            ..PluginCalls::default()
        };
        let sent = p.mark_sent("ns/app", ask(&["c1"]), at(10));
        assert_eq!(sent.validations.len(), 1);
        let again = p.mark_sent("ns/app", ask(&["c1", "c2"]), at(20));
        let clusters: Vec<&str> = again
            .validations
            .iter()
            .map(|v| v.cluster.as_str())
            .collect();
        assert_eq!(clusters, ["c2"], "c1 is still in flight");
        let mut newer = validation("c1");
        newer.revision = "def".into();
        let other = PluginCalls {
            validations: vec![newer],
            ..PluginCalls::default()
        };
        let sent_newer = p.mark_sent("ns/app", other, at(20));
        assert_eq!(
            sent_newer.validations.len(),
            1,
            "another revision is another question"
        );
        assert_eq!(
            p.inputs("ns/app").asked["c1"],
            at(20),
            "counted as asked all the same"
        );
        let answered = Answer::Validated(validation("c1"), Err(tonic::Status::unavailable("")));
        p.landed("ns/app", answered.sent());
        assert_eq!(
            p.mark_sent("ns/app", ask(&["c1"]), at(30))
                .validations
                .len(),
            1
        );
    }

    #[test]
    fn an_error_about_one_cluster_holds_that_cluster_not_the_plugin() {
        let p = Plugins::default();
        let up = up_since(10);
        p.set_health("judge", initialized(10));
        let internal = tonic::Status::internal("no metrics for c1");
        let news = p.record_answer("ns/app", Answer::Validated(validation("c1"), Err(internal)));
        assert!(news);
        let inputs = p.inputs("ns/app");
        assert_eq!(
            inputs.health["judge"], up,
            "the plugin answers: it is not down"
        );
        let v = &inputs.verdicts["c1"];
        assert_eq!(v.verdict, Verdict::Erred);
        assert_eq!(
            v.message,
            "ValidateRolloutCompletion: Internal: no metrics for c1"
        );
        // No answer at all: the plugin is down.
        let gone = tonic::Status::unavailable("connection refused");
        assert!(p.record_answer("ns/app", Answer::Validated(validation("c2"), Err(gone))));
        assert!(matches!(
            p.inputs("ns/app").health["judge"],
            PluginHealth::Unreachable { .. }
        ));
    }
}
