//! The simulated work agent. One cluster-wide ManifestWork watch serves every simulated
//! cluster (a watch per namespace would not scale to thousands); each new generation of
//! a ManifestWork gets one task that writes its conditions through the status
//! subresource, as the real agent does:
//!
//! - first write: `Applied=True` (and, with condition rules, `Available=True`,
//!   `Progressing=True`, `Degraded=False`), every condition at `observedGeneration =
//!   metadata.generation`;
//! - after the behaviour's delay: done (`Progressing=False`, or `Available=True` without
//!   condition rules) or degraded (`Degraded=True`); a hanging cluster never moves on.
//!
//! A flapping cluster keeps alternating between done and degraded.
//!
//! `lastTransitionTime` moves only when a condition's status flips. A new generation
//! cancels the task of the previous one. With `finalizer` on, the agent also guards its
//! ManifestWorks with the work agent's cleanup finalizer and removes it after
//! `delete_delay` once a ManifestWork is deleted, so Foreground deletion can be observed.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, watcher as watch_fn};
use kube::{Client, ResourceExt};
use mwrs_api::labels;
use mwrs_api::work::{ManifestWork, condition};
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio::task::{AbortHandle, JoinHandle, JoinSet};

use crate::feedback;

/// The work agent's finalizer on ManifestWorks.
pub const AGENT_FINALIZER: &str = "cluster.open-cluster-management.io/manifest-work-cleanup";
const FIELD_MANAGER: &str = "mwrs-fleet-agent";

/// What one cluster does with one ManifestWork generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behaviour {
    /// Applies, progresses for `after`, then is done.
    Succeed { after: Duration },
    /// As [`Behaviour::Succeed`], but its Deployments never get a ready replica: the
    /// status feedback says so, the conditions do not (a bad image, a crash at start),
    /// which only a rollout plugin reading the feedback catches.
    Unready { after: Duration },
    /// Applies, progresses for `after`, then reports Degraded (while still Progressing).
    Degrade { after: Duration },
    /// Applies and stays Progressing forever.
    Hang,
    /// Applies, then every `period` flips between done and Degraded, forever (a
    /// workload that crash-loops): the controller sees it fail, recover and fail again.
    Flap { period: Duration },
    /// Never writes a status (agent stopped, cluster unreachable).
    Silent,
    /// Cannot apply: reports `Applied` False at the generation with [`APPLY_ERROR`].
    Refuse,
    /// Reports success for the new generation at once (evaluated against the old
    /// object, as upstream's agent can), then `Progressing` True `glitch` later, then
    /// success for real `after` that.
    EarlyReport { glitch: Duration, after: Duration },
}

/// The message of [`Behaviour::Refuse`].
pub const APPLY_ERROR: &str = "simulated agent: Failed to apply manifest: admission webhook \
    denied the request";

impl Behaviour {
    pub const fn succeed_now() -> Self {
        Behaviour::Succeed {
            after: Duration::ZERO,
        }
    }
}

/// What the behaviour function sees of a ManifestWork.
#[derive(Debug)]
pub struct WorkInfo<'a> {
    pub cluster: &'a str,
    pub name: &'a str,
    pub generation: i64,
    /// The `controller-hash` label (the revision the ManifestWork carries).
    pub revision: Option<&'a str>,
    pub spec: &'a Value,
}

pub type BehaviourFn = Arc<dyn Fn(&WorkInfo<'_>) -> Behaviour + Send + Sync>;

#[derive(Clone)]
pub struct AgentConfig {
    /// Cluster namespaces served; None: every namespace.
    pub clusters: Option<BTreeSet<String>>,
    /// Label selector narrowing the watch (e.g. the MWRS owner label key).
    pub label_selector: Option<String>,
    pub behaviour: BehaviourFn,
    /// Status writes in flight at once.
    pub concurrency: usize,
    /// Write Progressing/Degraded (the template has condition rules); else only
    /// Applied/Available (and Degraded on failure).
    pub condition_rules: bool,
    /// Guard ManifestWorks with the agent finalizer and remove it on deletion.
    pub finalizer: bool,
    pub delete_delay: Duration,
}

impl AgentConfig {
    /// Every ManifestWork in `clusters` succeeds at once.
    pub fn new(clusters: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self {
            clusters: Some(clusters.into_iter().map(Into::into).collect()),
            label_selector: None,
            behaviour: Arc::new(|_: &WorkInfo<'_>| Behaviour::succeed_now()),
            concurrency: 64,
            condition_rules: true,
            finalizer: false,
            delete_delay: Duration::ZERO,
        }
    }

    pub fn behaviour(
        mut self,
        f: impl Fn(&WorkInfo<'_>) -> Behaviour + Send + Sync + 'static,
    ) -> Self {
        self.behaviour = Arc::new(f);
        self
    }

    pub fn finalizer(mut self, delete_delay: Duration) -> Self {
        self.finalizer = true;
        self.delete_delay = delete_delay;
        self
    }

    pub fn condition_rules(mut self, on: bool) -> Self {
        self.condition_rules = on;
        self
    }
}

/// Counters of what the agent did.
#[derive(Debug, Default)]
pub struct AgentStats {
    pub status_writes: AtomicU64,
    pub errors: AtomicU64,
    pub finalizers_removed: AtomicU64,
}

pub struct Agent;

impl Agent {
    /// Starts the agent; it runs until the handle is stopped or dropped.
    pub fn start(client: Client, config: AgentConfig) -> AgentHandle {
        let stats = Arc::new(AgentStats::default());
        let task = tokio::spawn(run(client, config, stats.clone()));
        AgentHandle { task, stats }
    }
}

/// Stops the agent (and every task it spawned) when dropped.
pub struct AgentHandle {
    task: JoinHandle<()>,
    pub stats: Arc<AgentStats>,
}

impl AgentHandle {
    pub fn stop(self) {
        self.task.abort();
    }
}

impl Drop for AgentHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Per-ManifestWork bookkeeping.
struct Tracked {
    generation: i64,
    task: Option<AbortHandle>,
    deleting: bool,
}

struct Shared {
    client: Client,
    config: AgentConfig,
    permits: Semaphore,
    stats: Arc<AgentStats>,
}

async fn run(client: Client, config: AgentConfig, stats: Arc<AgentStats>) {
    let api: Api<ManifestWork> = Api::all(client.clone());
    let mut watch_config = watcher::Config::default().any_semantic();
    if let Some(sel) = &config.label_selector {
        watch_config = watch_config.labels(sel);
    }
    let shared = Arc::new(Shared {
        client,
        permits: Semaphore::new(config.concurrency.max(1)),
        config,
        stats,
    });
    let mut tracked: HashMap<(String, String), Tracked> = HashMap::new();
    // Owns every task: dropping the set (agent stopped) aborts them all.
    let mut tasks = JoinSet::new();
    let mut events = watch_fn(api, watch_config).default_backoff().boxed();
    loop {
        tokio::select! {
            ev = events.next() => match ev {
                None => return,
                Some(Err(e)) => tracing::debug!(error = %e, "agent watch error"),
                Some(Ok(Event::Apply(mw) | Event::InitApply(mw))) => {
                    on_apply(&shared, &mut tracked, &mut tasks, mw);
                }
                Some(Ok(Event::Delete(mw))) => {
                    let key = (mw.namespace().unwrap_or_default(), mw.name_any());
                    if let Some(t) = tracked.remove(&key)
                        && let Some(h) = t.task
                    {
                        h.abort();
                    }
                }
                Some(Ok(Event::Init | Event::InitDone)) => {}
            },
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
}

fn on_apply(
    shared: &Arc<Shared>,
    tracked: &mut HashMap<(String, String), Tracked>,
    tasks: &mut JoinSet<()>,
    mw: ManifestWork,
) {
    let ns = mw.namespace().unwrap_or_default();
    if let Some(set) = &shared.config.clusters
        && !set.contains(&ns)
    {
        return;
    }
    let key = (ns, mw.name_any());
    let generation = mw.metadata.generation.unwrap_or(0);
    if mw.metadata.deletion_timestamp.is_some() {
        let entry = tracked.entry(key).or_insert(Tracked {
            generation,
            task: None,
            deleting: false,
        });
        if entry.deleting {
            return;
        }
        entry.deleting = true;
        if let Some(h) = entry.task.take() {
            h.abort();
        }
        if shared.config.finalizer && mw.finalizers().iter().any(|f| f == AGENT_FINALIZER) {
            let s = shared.clone();
            tasks.spawn(async move { remove_finalizer(&s, mw).await });
        }
        return;
    }
    match tracked.get(&key) {
        // Our own status writes come back as events of the same generation.
        Some(t) if t.generation >= generation => return,
        Some(t) => {
            if let Some(h) = &t.task {
                h.abort();
            }
        }
        None => {}
    }
    let s = shared.clone();
    // The task holds what it answers with, not the ManifestWork: under a backlog (more
    // generations than write permits) every waiting task holds it, its template included.
    let job = Job::of(shared, &mw);
    let handle = tasks.spawn(async move { answer(&s, job).await });
    tracked.insert(
        key,
        Tracked {
            generation,
            task: Some(handle),
            deleting: false,
        },
    );
}

/// What answering one generation of one ManifestWork needs of it.
struct Job {
    cluster: String,
    name: String,
    generation: i64,
    behaviour: Behaviour,
    /// The resources whose status feedback the answer reports.
    tracked: Vec<feedback::Tracked>,
    /// The conditions it carries now.
    existing: Vec<Condition>,
    /// The merge patch adding the agent's finalizer, when it lacks it and the agent adds it.
    add_finalizer: Option<Value>,
}

impl Job {
    fn of(s: &Shared, mw: &ManifestWork) -> Self {
        let cluster = mw.namespace().unwrap_or_default();
        let name = mw.name_any();
        let generation = mw.metadata.generation.unwrap_or(0);
        let spec = mw.spec.to_value();
        let behaviour = (s.config.behaviour)(&WorkInfo {
            cluster: &cluster,
            name: &name,
            generation,
            revision: mw.labels().get(labels::CONTROLLER_HASH).map(String::as_str),
            spec: &spec,
        });
        let mut tracked = feedback::tracked(&spec);
        if let Behaviour::Unready { .. } = behaviour {
            feedback::never_ready(&mut tracked);
        }
        let add_finalizer = (s.config.finalizer
            && !mw.finalizers().iter().any(|f| f == AGENT_FINALIZER))
        .then(|| {
            let body = json!({"metadata": {"finalizers": finalizers_with(mw)}, });
            with_version(body, mw)
        });
        let existing = mw
            .status
            .as_ref()
            .and_then(|st| st.conditions.clone())
            .unwrap_or_default();
        Self {
            cluster,
            name,
            generation,
            behaviour,
            tracked,
            existing,
            add_finalizer,
        }
    }
}

/// Answers one generation of one ManifestWork.
async fn answer(s: &Shared, job: Job) {
    let Job {
        cluster,
        name,
        generation,
        behaviour,
        tracked,
        existing,
        add_finalizer,
    } = job;
    let api: Api<ManifestWork> = Api::namespaced(s.client.clone(), &cluster);
    let work = Answer {
        s,
        api,
        cluster,
        name,
        generation,
        tracked,
    };
    if let Some(body) = add_finalizer {
        work.add_finalizer(&body).await;
    }
    let rules = s.config.condition_rules;
    match behaviour {
        Behaviour::Silent => {}
        Behaviour::Refuse => {
            let conditions = refused(&existing, generation, Timestamp::now());
            work.write(&conditions).await;
        }
        Behaviour::EarlyReport { glitch, after } => {
            work.early_report(existing, glitch, after, rules).await;
        }
        _ => work.progress(existing, behaviour, rules).await,
    }
}

/// The ManifestWork one answer writes to: one generation, with the resources whose status
/// feedback it reports.
struct Answer<'a> {
    s: &'a Shared,
    api: Api<ManifestWork>,
    cluster: String,
    name: String,
    generation: i64,
    tracked: Vec<feedback::Tracked>,
}

impl Answer<'_> {
    /// Adds the agent's finalizer with the merge patch `body`; a refusal is counted and
    /// the answer goes on.
    async fn add_finalizer(&self, body: &Value) {
        let (s, cluster, name) = (self.s, &self.cluster, &self.name);
        let _permit = s.permits.acquire().await;
        if let Err(e) = self
            .api
            .patch(name, &PatchParams::default(), &Patch::Merge(body))
            .await
        {
            s.stats.errors.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(error = %e, %cluster, %name, "cannot add agent finalizer");
        }
    }

    /// Writes `conditions` (see [`write`]).
    async fn write(&self, conditions: &[Condition]) {
        let at = (self.name.as_str(), self.cluster.as_str());
        write(self.s, &self.api, at, conditions, &self.tracked).await;
    }

    /// Sets `phase` into `conditions` as of now (see [`merge`]) and writes them.
    async fn step(&self, conditions: &mut Vec<Condition>, phase: &[(&'static str, &'static str)]) {
        *conditions = merge(conditions, phase, self.generation, Timestamp::now());
        self.write(conditions).await;
    }

    /// [`Behaviour::EarlyReport`]: success at once, `Progressing` again `glitch` later,
    /// success for real `after` that.
    async fn early_report(
        &self,
        mut conditions: Vec<Condition>,
        glitch: Duration,
        after: Duration,
        rules: bool,
    ) {
        let (first, last) = phases(Behaviour::succeed_now(), rules);
        let last = last.unwrap_or_default();
        self.step(&mut conditions, &last).await;
        tokio::time::sleep(glitch).await;
        self.step(&mut conditions, &first).await;
        tokio::time::sleep(after).await;
        self.step(&mut conditions, &last).await;
    }

    /// The behaviour's first phase, then after its delay its last one, if it has one (an
    /// immediate outcome goes out in one write); a flapping cluster goes on flapping.
    /// Nothing when `existing` already shows the outcome at this generation (the agent
    /// restarted).
    async fn progress(&self, existing: Vec<Condition>, behaviour: Behaviour, rules: bool) {
        let (first, last) = phases(behaviour, rules);
        if done(
            &existing,
            self.generation,
            last.as_deref().unwrap_or(&first),
        ) {
            return;
        }
        let delay = match behaviour {
            Behaviour::Succeed { after }
            | Behaviour::Unready { after }
            | Behaviour::Degrade { after } => after,
            Behaviour::Flap { period } => period,
            _ => Duration::ZERO,
        };
        let mut conditions = existing;
        if !(delay.is_zero() && last.is_some()) {
            self.step(&mut conditions, &first).await;
        }
        let Some(last) = last else { return };
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        self.step(&mut conditions, &last).await;
        if let Behaviour::Flap { period } = behaviour {
            self.flap(conditions, period, rules).await;
        }
    }

    /// [`Behaviour::Flap`] once degraded: healthy and degraded in turn every `period` (at
    /// least 0.1 s), until the task is aborted (a new generation, or the work goes).
    async fn flap(&self, mut conditions: Vec<Condition>, period: Duration, rules: bool) {
        let healthy = phases(Behaviour::succeed_now(), rules)
            .1
            .unwrap_or_default();
        let failing = phases(Behaviour::Degrade { after: period }, rules)
            .1
            .unwrap_or_default();
        let mut degraded = true;
        loop {
            tokio::time::sleep(period.max(Duration::from_millis(100))).await;
            degraded = !degraded;
            let phase = if degraded { &failing } else { &healthy };
            self.step(&mut conditions, phase).await;
        }
    }
}

fn finalizers_with(mw: &ManifestWork) -> Vec<String> {
    let mut f = mw.finalizers().to_vec();
    f.push(AGENT_FINALIZER.to_string());
    f
}

/// A merge patch of the finalizer list replaces it whole: guard it with the version read.
fn with_version(mut body: Value, mw: &ManifestWork) -> Value {
    if let Some(rv) = mw.resource_version() {
        body["metadata"]["resourceVersion"] = json!(rv);
    }
    body
}

async fn remove_finalizer(s: &Shared, mw: ManifestWork) {
    if !s.config.delete_delay.is_zero() {
        tokio::time::sleep(s.config.delete_delay).await;
    }
    let cluster = mw.namespace().unwrap_or_default();
    let name = mw.name_any();
    let api: Api<ManifestWork> = Api::namespaced(s.client.clone(), &cluster);
    let Some(i) = mw.finalizers().iter().position(|f| f == AGENT_FINALIZER) else {
        return;
    };
    let path = format!("/metadata/finalizers/{i}");
    let ops = json!([
        {"op": "test", "path": path, "value": AGENT_FINALIZER},
        {"op": "remove", "path": path},
    ]);
    let Ok(p) = serde_json::from_value::<json_patch::Patch>(ops) else {
        return;
    };
    let _permit = s.permits.acquire().await;
    match api
        .patch(&name, &PatchParams::default(), &Patch::Json::<()>(p))
        .await
    {
        Ok(_) => {
            s.stats.finalizers_removed.fetch_add(1, Ordering::Relaxed);
        }
        Err(e) => {
            s.stats.errors.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(error = %e, %cluster, %name, "cannot remove agent finalizer");
        }
    }
}

/// (type, status) pairs of the first write and of the final one (None: never moves on).
type Phase = Vec<(&'static str, &'static str)>;

fn phases(b: Behaviour, rules: bool) -> (Phase, Option<Phase>) {
    use condition::{APPLIED, AVAILABLE, DEGRADED, PROGRESSING};
    if rules {
        let first = vec![
            (APPLIED, "True"),
            (AVAILABLE, "True"),
            (PROGRESSING, "True"),
            (DEGRADED, "False"),
        ];
        let last = match b {
            Behaviour::Succeed { .. } | Behaviour::Unready { .. } => Some(vec![
                (APPLIED, "True"),
                (AVAILABLE, "True"),
                (PROGRESSING, "False"),
                (DEGRADED, "False"),
            ]),
            Behaviour::Degrade { .. } | Behaviour::Flap { .. } => Some(vec![
                (APPLIED, "True"),
                (AVAILABLE, "True"),
                (PROGRESSING, "True"),
                (DEGRADED, "True"),
            ]),
            _ => None,
        };
        (first, last)
    } else {
        let first = vec![(APPLIED, "True"), (AVAILABLE, "False")];
        let last = match b {
            Behaviour::Succeed { .. } | Behaviour::Unready { .. } => {
                Some(vec![(APPLIED, "True"), (AVAILABLE, "True")])
            }
            Behaviour::Degrade { .. } | Behaviour::Flap { .. } => Some(vec![
                (APPLIED, "True"),
                (AVAILABLE, "False"),
                (DEGRADED, "True"),
            ]),
            _ => None,
        };
        (first, last)
    }
}

/// `Applied` False at `generation` with the agent's error, as upstream's agent reports a
/// manifest it cannot apply.
fn refused(conditions: &[Condition], generation: i64, now: Timestamp) -> Vec<Condition> {
    let mut out = merge(
        conditions,
        &[(condition::APPLIED, "False")],
        generation,
        now,
    );
    if let Some(c) = out.iter_mut().find(|c| c.type_ == condition::APPLIED) {
        c.reason = "AppliedManifestWorkFailed".to_string();
        c.message = APPLY_ERROR.to_string();
    }
    out
}

/// Does `conditions` already show `phase` at `generation`? (restart of the agent)
fn done(conditions: &[Condition], generation: i64, phase: &[(&str, &str)]) -> bool {
    phase.iter().all(|(t, st)| {
        conditions
            .iter()
            .any(|c| c.type_ == *t && c.status == *st && c.observed_generation == Some(generation))
    })
}

/// Sets `phase` into `conditions`; a condition's transition time moves only when its
/// status flips. Other condition types are kept.
pub fn merge(
    conditions: &[Condition],
    phase: &[(&'static str, &'static str)],
    generation: i64,
    now: Timestamp,
) -> Vec<Condition> {
    let mut out = conditions.to_vec();
    for (t, st) in phase {
        let reason = format!("{t}{st}");
        match out.iter_mut().find(|c| c.type_ == *t) {
            Some(c) => {
                if c.status != *st {
                    c.status = (*st).to_string();
                    c.last_transition_time = Time(now);
                }
                c.observed_generation = Some(generation);
                c.reason = reason;
                c.message = format!("simulated agent: {t} is {st}");
            }
            None => out.push(Condition {
                type_: (*t).to_string(),
                status: (*st).to_string(),
                observed_generation: Some(generation),
                last_transition_time: Time(now),
                reason,
                message: format!("simulated agent: {t} is {st}"),
            }),
        }
    }
    out
}

/// Writes `conditions`, and the status feedback of the `tracked` Deployments under them;
/// a write the hub refuses is tried again (after 0.25 s, doubling up to 5 s) until it
/// lands, as upstream's agent requeues it, unless the ManifestWork is gone or the write
/// invalid. A newer generation aborts the task, and with it the retries.
async fn write(
    s: &Shared,
    api: &Api<ManifestWork>,
    (name, cluster): (&str, &str),
    conditions: &[Condition],
    tracked: &[feedback::Tracked],
) {
    let mut body = json!({"status": {"conditions": conditions}});
    if let Some(r) = feedback::resource_status(tracked, conditions) {
        body["status"]["resourceStatus"] = r;
    }
    let pp = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..Default::default()
    };
    let mut pause = Duration::from_millis(250);
    loop {
        let r = {
            let _permit = s.permits.acquire().await;
            api.patch_status(name, &pp, &Patch::Merge(&body)).await
        };
        match r {
            Ok(_) => {
                s.stats.status_writes.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Err(e) => {
                s.stats.errors.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(error = %e, %cluster, %name, "cannot write work status");
                if matches!(&e, kube::Error::Api(a) if matches!(a.code, 404 | 422)) {
                    return;
                }
            }
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_moves_transition_time_only_on_flip() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let t1: Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
        let (first, last) = phases(Behaviour::succeed_now(), true);
        let a = merge(&[], &first, 1, t0);
        let b = merge(&a, &last.unwrap(), 1, t1);
        let get = |l: &[Condition], t: &str| l.iter().find(|c| c.type_ == t).cloned().unwrap();
        assert_eq!(get(&b, "Applied").last_transition_time.0, t0);
        assert_eq!(get(&b, "Progressing").last_transition_time.0, t1);
        assert_eq!(get(&b, "Progressing").status, "False");
        // A new generation keeps unchanged statuses' times but bumps obsGen.
        let (first, _) = phases(Behaviour::Hang, true);
        let c = merge(&b, &first, 2, t1);
        assert_eq!(get(&c, "Applied").last_transition_time.0, t0);
        assert_eq!(get(&c, "Applied").observed_generation, Some(2));
        assert!(done(&c, 2, &first));
        assert!(!done(&c, 3, &first));
    }
}
