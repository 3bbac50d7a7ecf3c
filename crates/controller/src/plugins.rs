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
//! until an `Initialize` succeeds again ([`Plugins::probe`]). Any other error status is
//! about the one call: its cluster is held, with the error as its note, and asked again. Final
//! verdicts outlive a restart on the ManifestWorks (the planner writes them there); an
//! IN_PROGRESS one is asked again, and a BeginRollout not followed by its write is sent
//! again (the calls are idempotent).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc::UnboundedSender;
use jiff::{SignedDuration, Timestamp};
use kube::runtime::reflector::ObjectRef;
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_api::work::ManifestWorkTemplate;
use mwrs_engine::owner::OwnerKey;
use mwrs_engine::plugin::{
    Begin, Begun, CallTarget, ClusterState, ClusterVerdict, Mutation, PluginCalls, PluginHealth,
    PluginInputs, Progress, Validation, Verdict,
};
use mwrs_engine::rollout::RolloutStatus;
use mwrs_plugin::client::{PluginClient, SetupError};
use mwrs_plugin::config::WorkConfig;
use mwrs_plugin::v1alpha1 as api;

use crate::watch::GuardedMwrs;

/// Questions in flight at once within one pass.
const ASK_CONCURRENCY: usize = 16;

/// How often a cluster still Validating is asked again, and an unreachable plugin probed.
pub const DEFAULT_POLL: Duration = Duration::from_secs(10);

/// What one MWRS's plugins were told and said.
#[derive(Default)]
struct Judged {
    verdicts: BTreeMap<Arc<str>, ClusterVerdict>,
    asked: BTreeMap<Arc<str>, Timestamp>,
    begun: BTreeMap<Arc<str>, Begun>,
    progressed: BTreeMap<String, u64>,
    /// Validations (cluster, revision) and Begins (cluster, revision, aborting) not
    /// answered yet: a slow plugin is not asked the same again meanwhile.
    validating: BTreeSet<(Arc<str>, String)>,
    beginning: BTreeSet<(Arc<str>, String, bool)>,
}

/// Every registered plugin and what it said.
pub struct Plugins {
    clients: BTreeMap<String, PluginClient>,
    health: RwLock<BTreeMap<String, PluginHealth>>,
    /// By MWRS (`namespace/name`).
    judged: Mutex<HashMap<String, Judged>>,
    /// Where answers that change something are announced ([`Plugins::answers_to`]).
    news: Mutex<Option<UnboundedSender<ObjectRef<GuardedMwrs>>>>,
    poll: Duration,
    controller_version: String,
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
            judged: Mutex::default(),
            news: Mutex::default(),
            poll: DEFAULT_POLL,
            controller_version: String::new(),
        }
    }
}

impl Plugins {
    /// The plugins `config` registers, each unreachable until its first `Initialize`.
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
            .map(|n| {
                let why = "not initialized yet".to_string();
                (n.clone(), PluginHealth::Unreachable { why })
            })
            .collect();
        Ok(Self {
            clients,
            health: RwLock::new(health),
            judged: Mutex::new(HashMap::new()),
            news: Mutex::default(),
            poll,
            controller_version: controller_version.to_string(),
        })
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
        let health = self.health.read().map(|h| h.clone()).unwrap_or_default();
        let poll = SignedDuration::try_from(self.poll).unwrap_or(SignedDuration::from_secs(10));
        let Ok(judged) = self.judged.lock() else {
            return PluginInputs {
                health,
                poll,
                ..PluginInputs::default()
            };
        };
        let j = judged.get(owner);
        PluginInputs {
            health,
            verdicts: j.map(|j| j.verdicts.clone()).unwrap_or_default(),
            asked: j.map(|j| j.asked.clone()).unwrap_or_default(),
            begun: j.map(|j| j.begun.clone()).unwrap_or_default(),
            progressed: j.map(|j| j.progressed.clone()).unwrap_or_default(),
            poll,
        }
    }

    /// Forgets what was said about a deleted MWRS.
    pub fn forget(&self, owner: &str) {
        if let Ok(mut j) = self.judged.lock() {
            j.remove(owner);
        }
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
            let health = match client.initialize(request).await {
                Ok(r) => PluginHealth::Available {
                    description: r.description,
                    since: Timestamp::now(),
                },
                Err(s) => PluginHealth::Unreachable {
                    why: format!("Initialize: {}", status_line(&s)),
                },
            };
            changed |= self.set_health(name, health);
        }
        changed
    }

    /// Records `health`; false when it says what was known (a plugin that keeps
    /// answering keeps the time it started to).
    fn set_health(&self, name: &str, health: PluginHealth) -> bool {
        let Ok(mut h) = self.health.write() else {
            return false;
        };
        let same = match (h.get(name), &health) {
            (
                Some(PluginHealth::Available {
                    description: old, ..
                }),
                PluginHealth::Available { description, .. },
            ) => old == description,
            (old, new) => old == Some(new),
        };
        if same {
            return false;
        }
        match &health {
            PluginHealth::Available { description, .. } => {
                tracing::info!(plugin = name, %description, "rollout plugin available")
            }
            PluginHealth::Unreachable { why } => {
                tracing::warn!(plugin = name, %why, "rollout plugin unreachable")
            }
        }
        h.insert(name.to_string(), health);
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
    /// make it again.
    /// `templates` holds the template of every revision a Begin is about (the
    /// MutateManifestWork that follows it carries the spec).
    pub fn call_in_background(
        self: &Arc<Self>,
        mwrs: &ManifestWorkReplicaSet,
        calls: PluginCalls,
        templates: &BTreeMap<String, serde_json::Value>,
    ) {
        let namespace = mwrs.metadata.namespace.clone().unwrap_or_default();
        let name = mwrs.metadata.name.clone().unwrap_or_default();
        let key = ObjectRef::<GuardedMwrs>::new(&name).within(&namespace);
        let owner = OwnerKey::new(namespace, name).slashed();
        let calls = self.mark_sent(&owner, calls, Timestamp::now());
        if calls.is_empty() {
            return;
        }
        let about = MwrsRef::of(mwrs);
        let specs: BTreeMap<String, Arc<[u8]>> = calls
            .begins
            .iter()
            .filter_map(|b| {
                let template = templates.get(&b.revision)?;
                let json = serde_json::to_vec(template).ok()?;
                Some((b.revision.clone(), Arc::from(json)))
            })
            .collect();
        let plugins = self.clone();
        tokio::spawn(async move {
            plugins.call(&owner, &about, calls, &specs, key).await;
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
        calls
            .validations
            .retain(|_| keys.next().is_some_and(|k| j.validating.insert(k)));
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

    /// The call `answer` answers landed: it may be made again.
    fn landed(&self, owner: &str, answer: &Answer) {
        let Ok(mut judged) = self.judged.lock() else {
            return;
        };
        let Some(j) = judged.get_mut(owner) else {
            return;
        };
        match answer {
            Answer::Validated(v, _) => {
                j.validating
                    .remove(&(Arc::from(v.cluster.as_str()), v.revision.clone()));
            }
            Answer::Begun(b, _) => {
                let cluster = Arc::from(b.cluster.as_str());
                j.beginning
                    .remove(&(cluster, b.revision.clone(), b.aborting));
            }
            Answer::Progressed(..) => {}
        }
    }

    /// Makes `calls`, at most [`ASK_CONCURRENCY`] at once, and records each answer as it
    /// comes; MWRS `key` is announced whenever one differs from what was known.
    async fn call(
        &self,
        owner: &str,
        about: &MwrsRef,
        calls: PluginCalls,
        specs: &BTreeMap<String, Arc<[u8]>>,
        key: ObjectRef<GuardedMwrs>,
    ) {
        let client = |plugin: &str| self.clients.get(plugin).cloned();
        let mut jobs: Vec<Job> = Vec::new();
        for v in calls.validations {
            let request = validate_request(about, &v);
            jobs.push(Job::Validate(client(&v.target.plugin), v, request));
        }
        for b in calls.begins {
            let request = rollout_request(about, &b.target, &b.cluster, &[], b.aborting);
            let spec = specs.get(&b.revision).map_or_else(Vec::new, |s| s.to_vec());
            let mutate = mutate_request(about, &b, spec);
            jobs.push(Job::Begin(client(&b.target.plugin), b, request, mutate));
        }
        for p in calls.progress {
            let request = rollout_request(about, &p.target, "", &p.clusters, p.aborting);
            jobs.push(Job::Progress(client(&p.target.plugin), p, request));
        }
        let mut answers = futures::stream::iter(jobs)
            .map(Job::run)
            .buffer_unordered(ASK_CONCURRENCY);
        while let Some(answer) = answers.next().await {
            self.landed(owner, &answer);
            if self.record_answer(owner, answer) {
                self.announce(&key);
            }
        }
    }

    /// Records one answer; true when it differs from what was known.
    fn record_answer(&self, owner: &str, answer: Answer) -> bool {
        match answer {
            Answer::Validated(v, Ok(r)) => self.record(owner, &v, r, Timestamp::now()),
            Answer::Begun(b, Ok(mutation)) => self.record_begun(owner, &b, mutation),
            Answer::Progressed(_, Ok(())) => false,
            Answer::Validated(v, Err(s)) if is_about_the_call(&s) => {
                let message = format!("{}: {}", v.call_name(), status_line(&s));
                self.record_verdict(owner, &v, (Verdict::Erred, message), Timestamp::now())
            }
            Answer::Validated(v, Err(s)) => self.unreachable(&v.target.plugin, v.call_name(), &s),
            Answer::Begun(b, Err((call, s))) if is_about_the_call(&s) => {
                // Left unanswered: sent again after the poll interval, the cluster waits.
                tracing::warn!(plugin = %b.target.plugin, cluster = %b.cluster, call, status = %status_line(&s), "rollout plugin refused a call");
                false
            }
            Answer::Begun(b, Err((call, s))) => self.unreachable(&b.target.plugin, call, &s),
            Answer::Progressed(p, Err(s)) => {
                // Told again once the plugin is back.
                self.forget_progress(owner, &p.target.placement);
                self.unreachable(&p.target.plugin, "ProgressRollout", &s)
            }
        }
    }

    fn unreachable(&self, plugin: &str, call: &str, s: &tonic::Status) -> bool {
        let why = format!("{call}: {}", status_line(s));
        self.set_health(plugin, PluginHealth::Unreachable { why })
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
        sent.mutation = mutation;
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
            message,
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
        api::MutateRequest,
    ),
    Progress(Option<PluginClient>, Progress, api::RolloutRequest),
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
            Job::Begin(client, b, r, mutate) => {
                let answer = match client {
                    Some(c) => begin_and_mutate(&c, &b, r, mutate).await,
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

/// BeginRollout (or BeginAbort) about `b`, then MutateManifestWork: the spec to write
/// instead of the template, if the plugin returns one.
async fn begin_and_mutate(
    c: &PluginClient,
    b: &Begin,
    r: api::RolloutRequest,
    mutate: api::MutateRequest,
) -> Result<Option<Mutation>, (&'static str, tonic::Status)> {
    let begun = match b.aborting {
        true => c.begin_abort(r).await,
        false => c.begin_rollout(r).await,
    };
    begun.map_err(|s| (b.call_name(), s))?;
    const MUTATE: &str = "MutateManifestWork";
    let answer = c
        .mutate_manifest_work(mutate)
        .await
        .map_err(|s| (MUTATE, s))?;
    plugin_spec(&answer.spec_json).map_err(|why| (MUTATE, tonic::Status::invalid_argument(why)))
}

/// The spec a plugin returned (None: empty, the template unchanged), or why it cannot
/// be written.
fn plugin_spec(json: &[u8]) -> Result<Option<Mutation>, String> {
    if json.is_empty() {
        return Ok(None);
    }
    let value: serde_json::Value =
        serde_json::from_slice(json).map_err(|e| format!("spec_json is not JSON: {e}"))?;
    let template = ManifestWorkTemplate::from_value(value.clone())
        .map_err(|e| format!("spec_json is not a JSON object: {e}"))?;
    template
        .typed()
        .map_err(|e| format!("spec_json is not a ManifestWork spec: {e}"))?;
    Ok(Some(Mutation::new(value)))
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
/// it), rather than a sign that the plugin does not work (unreachable, too slow, not
/// implementing the API, refusing us)? The first holds one cluster; the second, every
/// cluster behind the plugin.
fn is_about_the_call(s: &tonic::Status) -> bool {
    use tonic::Code;
    !matches!(
        s.code(),
        Code::Unavailable
            | Code::DeadlineExceeded
            | Code::Cancelled
            | Code::Unknown
            | Code::Unimplemented
            | Code::Unauthenticated
            | Code::PermissionDenied
    )
}

/// `CODE: message` of a gRPC status, in a line.
fn status_line(s: &tonic::Status) -> String {
    let message = s.message().lines().next().unwrap_or_default();
    match message {
        "" => format!("{:?}", s.code()),
        m => format!("{:?}: {m}", s.code()),
    }
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

    #[test]
    fn a_plugin_that_keeps_answering_keeps_the_time_it_started_to() {
        let p = Plugins::default();
        let at = |s| Timestamp::from_second(s).unwrap();
        let available = |since| PluginHealth::Available {
            description: "judge 1.0".into(),
            since,
        };
        assert!(p.set_health("judge", available(at(10))));
        assert!(!p.set_health("judge", available(at(20))), "the same answer");
        assert_eq!(p.inputs("ns/app").health["judge"], available(at(10)));
        let down = PluginHealth::Unreachable { why: "gone".into() };
        assert!(p.set_health("judge", down.clone()));
        assert!(!p.set_health("judge", down));
        assert!(p.set_health("judge", available(at(30))));
        assert_eq!(p.inputs("ns/app").health["judge"], available(at(30)));
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
        p.mark_sent("ns/app", calls, now);
        assert_eq!(p.inputs("ns/app").asked["c1"], now);
        assert!(p.inputs("ns/other").verdicts.is_empty(), "per MWRS");
        p.forget("ns/app");
        assert!(p.inputs("ns/app").verdicts.is_empty());
    }

    #[test]
    fn a_spec_from_a_plugin_is_written_only_when_it_is_a_manifestwork_spec() {
        assert_eq!(plugin_spec(b""), Ok(None), "empty: the template unchanged");
        let spec = br#"{"workload": {"manifests": [{"kind": "ConfigMap"}]}}"#;
        let m = plugin_spec(spec).unwrap().unwrap();
        assert_eq!(m.spec["workload"]["manifests"][0]["kind"], "ConfigMap");
        for (bad, why) in [
            (&b"{not json"[..], "is not JSON"),
            (b"[1, 2]", "is not a JSON object"),
            (
                br#"{"workload": {"manifests": 3}}"#,
                "is not a ManifestWork spec",
            ),
        ] {
            let e = plugin_spec(bad).unwrap_err();
            assert!(e.starts_with("spec_json ") && e.contains(why), "{e}");
        }
    }

    #[test]
    fn an_answer_to_begin_counts_for_what_was_sent_last() {
        let p = Plugins::default();
        let begin = |revision: &str, aborting| Begin {
            target: validation("c1").target,
            cluster: "c1".into(),
            revision: revision.into(),
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
        p.landed("ns/app", &ok);
        p.mark_sent("ns/app", calls(begin("abc", true)), now);
        assert!(!p.record_begun("ns/app", &begin("abc", true), None));
        let m = Mutation::new(serde_json::json!({"workload": {}}));
        assert!(p.record_begun("ns/app", &begin("abc", true), Some(m.clone())));
        assert_eq!(p.inputs("ns/app").begun["c1"].mutation, Some(m));
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
        p.landed("ns/app", &answered);
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
        let up = PluginHealth::Available {
            description: "judge 1.0".into(),
            since: Timestamp::from_second(10).unwrap(),
        };
        p.set_health("judge", up.clone());
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
