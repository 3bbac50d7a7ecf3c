//! The reconciler: snapshot from the stores → `mwrs_engine::plan` → execute → requeue at
//! the plan's recheck; an MWRS our types cannot read goes to [`crate::unreadable`] instead.
//! Also the error policy (per-object exponential backoff) and [`run`], which wires
//! watches, stores and the kube-runtime Controller together.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::StreamExt;
use jiff::Timestamp;
use kube::runtime::Controller;
use kube::runtime::controller::{self, Action};
use kube::runtime::reflector::ObjectRef;
use kube::{Client, ResourceExt};
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_engine::owner::OwnerKey;
use mwrs_engine::phase::phase;
use mwrs_engine::rollout::RolloutStatus;

use crate::context::{Config, Context, Shared};
use crate::error::{Error, Result};
use crate::metrics::{InfoLabels, WatchLabels};
use crate::plugins::Plugins;
use crate::store_view::StoreView;
use crate::watch::{self, GuardedMwrs};
use crate::watch_health::WatchFailures;
use crate::{crd, execute, unreadable};
use kube::Resource as _;

/// Shortest requeue: a plan asking to look again "now" still lets the watch deliver
/// the writes it just made.
const MIN_REQUEUE: Duration = Duration::from_millis(200);

/// Retry delay after a lost optimistic-concurrency race.
const CONFLICT_REQUEUE: Duration = Duration::from_millis(300);
const BACKOFF_START: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(300);

const STATUSES: [(RolloutStatus, &str); 7] = [
    (RolloutStatus::ToApply, "ToApply"),
    (RolloutStatus::Progressing, "Progressing"),
    (RolloutStatus::Validating, "Validating"),
    (RolloutStatus::Succeeded, "Succeeded"),
    (RolloutStatus::Failed, "Failed"),
    (RolloutStatus::TimeOut, "TimeOut"),
    (RolloutStatus::Skip, "Skip"),
];

/// The key of the MWRS a (possibly unreadable) watched object stands for.
fn key_of(obj: &GuardedMwrs) -> ObjectRef<ManifestWorkReplicaSet> {
    let name = obj.name_any();
    match obj.namespace() {
        Some(ns) => ObjectRef::new(&name).within(&ns),
        None => ObjectRef::new(&name),
    }
}

/// One pass over one MWRS; none while this replica is a standby.
pub async fn reconcile(obj: Arc<GuardedMwrs>, ctx: Arc<Context>) -> Result<Action> {
    let waited = ctx
        .queue
        .began(&ObjectRef::from_obj(obj.as_ref()), Instant::now());
    if !ctx.config.leading.now() {
        // Every MWRS gets a pass when this replica begins to lead (`Leading::began`).
        return Ok(Action::await_change());
    }
    if let Some(waited) = waited {
        ctx.metrics.queue_delay.observe(waited.as_secs_f64());
    }
    match &obj.0 {
        Ok(mwrs) => reconcile_readable(mwrs, &ctx).await,
        Err(invalid) => unreadable::report(&ctx, invalid).await,
    }
}

async fn reconcile_readable(mwrs: &ManifestWorkReplicaSet, ctx: &Arc<Context>) -> Result<Action> {
    // A snapshot before every store has synced would look like "nothing exists".
    ctx.stores.wait_ready().await;
    let key = ObjectRef::from_obj(mwrs);
    if ctx
        .status_writes
        .is_stale(&key, mwrs.resource_version().as_deref())
    {
        // Our own last status write has not reached the cache yet: acting now would
        // undo it (and the write would fail its resourceVersion guard anyway).
        return Ok(Action::requeue(MIN_REQUEUE));
    }
    let owner = OwnerKey::new(mwrs.namespace().unwrap_or_default(), mwrs.name_any());
    // Our own ManifestWork writes need no such wait: the cache shows each write's answer
    // until the watch brings it (`WorkCache::record_answer`).
    ctx.metrics.reconciles.inc();
    let started = Instant::now();

    let work_name = owner.work_name();
    let blocked = ctx.blocked_writes(&work_name);
    let blocked_before = blocked.len();
    let taken = ctx.taken_revision_names(&mwrs.namespace().unwrap_or_default());
    let snap = StoreView::gather(&ctx.stores, mwrs, blocked, taken);
    let plugins = ctx.plugins.inputs(&owner.slashed());
    let plan_started = Instant::now();
    let observed = snap.observed(mwrs, &plugins);
    let plan = mwrs_engine::plan(&observed, Timestamp::now(), &ctx.config.plan);
    ctx.metrics
        .plan_duration
        .observe(plan_started.elapsed().as_secs_f64());
    if let Some(invalid) = &plan.invalid {
        ctx.metrics.invalid_specs.inc();
        tracing::info!(mwrs = %key, %invalid, "invalid spec");
    }
    record_rollout(ctx, mwrs, &plan);
    tracing::debug!(
        mwrs = %key,
        works = plan.works.len(),
        revisions = plan.revisions.len(),
        status = plan.status.is_some(),
        recheck = ?plan.recheck,
        "planned"
    );

    let result = execute::execute(ctx, mwrs, &plan).await;
    ctx.metrics
        .reconcile_duration
        .observe(started.elapsed().as_secs_f64());
    let executed = result?;
    tell_template_drift(ctx, mwrs).await;
    if let Some(v) = executed.status_version.as_deref() {
        ctx.status_writes.record(&key, v);
    }
    ctx.failures.forget(&key);
    if mwrs.metadata.deletion_timestamp.is_some() {
        forget(ctx, mwrs);
    }
    // The plugins' answers are the next pass's input: it comes when one of them differs.
    if !plan.plugin_calls.is_empty() {
        let calls = plan.plugin_calls.clone();
        ctx.plugins.call_in_background(ctx.clone(), mwrs, calls);
    }
    if ctx.blocked_writes(&work_name).len() > blocked_before {
        // A write found blocked in this pass: report it without waiting for a change.
        return Ok(Action::requeue(MIN_REQUEUE));
    }
    Ok(Action::requeue(requeue_after(
        &plan,
        ctx.config.max_requeue,
    )))
}

/// When to look again: the plan's recheck, within [MIN_REQUEUE, max].
pub fn requeue_after(plan: &mwrs_engine::Plan, max: Duration) -> Duration {
    match plan.recheck.and_then(|d| Duration::try_from(d).ok()) {
        Some(d) => d.clamp(MIN_REQUEUE, max.max(MIN_REQUEUE)),
        None => max,
    }
}

fn record_rollout(ctx: &Context, mwrs: &ManifestWorkReplicaSet, plan: &mwrs_engine::Plan) {
    let ns = mwrs.namespace().unwrap_or_default();
    let name = mwrs.name_any();
    let counts: Vec<(&str, i64)> = STATUSES
        .iter()
        .map(|(s, label)| {
            let n = plan.clusters.iter().filter(|c| c.status == *s).count();
            (*label, i64::try_from(n).unwrap_or(i64::MAX))
        })
        .collect();
    ctx.metrics.set_rollout(&ns, &name, &counts);
    // The phase as the status this pass wrote (or kept) tells it.
    let mut now = mwrs.clone();
    if let Some(s) = &plan.status {
        now.status = Some(s.clone());
    }
    let status = now.status.clone().unwrap_or_default();
    ctx.metrics.set_info(InfoLabels {
        phase: phase(&now).0.as_str().to_string(),
        current_revision: status.current_revision.unwrap_or_default(),
        update_revision: status.update_revision.unwrap_or_default(),
        namespace: ns,
        name,
    });
}

fn forget(ctx: &Context, mwrs: &ManifestWorkReplicaSet) {
    let labels: Vec<&str> = STATUSES.iter().map(|(_, l)| *l).collect();
    ctx.metrics.forget_rollout(
        &mwrs.namespace().unwrap_or_default(),
        &mwrs.name_any(),
        &labels,
    );
    ctx.status_writes.forget(&ObjectRef::from_obj(mwrs));
    let owner = OwnerKey::new(mwrs.namespace().unwrap_or_default(), mwrs.name_any());
    ctx.plugins.forget(&owner.slashed());
}

/// Every failure backs off per object, 1 s doubling to 5 min, with a warning (rules
/// §11.7); only a first lost race retries at once, since the next pass usually reads
/// the newer object. A conflict that persists is a fault like any other.
pub fn error_policy(obj: Arc<GuardedMwrs>, err: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics.error(err.metric_label());
    let key = key_of(&obj);
    let n = ctx.failures.record(&key);
    let delay = retry_delay(n, err.is_conflict());
    if err.is_conflict() && n == 1 {
        tracing::debug!(mwrs = %key, error = %err, "conflict; retrying");
    } else {
        tracing::warn!(mwrs = %key, error = %err, attempt = n, retry_in = ?delay, "reconcile failed");
    }
    Action::requeue(delay)
}

/// Delay before retrying after the `n`-th consecutive failure (1-based) of one MWRS: a
/// first lost race at once, anything else (a repeated conflict too) [`backoff`].
pub fn retry_delay(n: u32, conflict: bool) -> Duration {
    match (conflict, n) {
        (true, 1) => CONFLICT_REQUEUE,
        (true, n) => backoff(n.saturating_sub(1)),
        (false, n) => backoff(n),
    }
}

/// Delay before retry number `n` (1-based).
pub fn backoff(n: u32) -> Duration {
    let factor = 2u32.saturating_pow(n.saturating_sub(1).min(16));
    BACKOFF_START.saturating_mul(factor).min(BACKOFF_MAX)
}

/// Runs the controller until `shutdown` resolves, for as long as the installed MWRS CRD
/// can hold its state (rules §11.6): when the CRD loses those fields, every write stops,
/// the process turns not ready and each MWRS gets an Event; when the CRD is restored and
/// the API server serves it, the controller starts again on fresh stores (objects read
/// through the pruning schema must not be acted on). Sets `shared.ready` once every store has synced.
pub async fn run(
    client: Client,
    config: Config,
    plugins: Arc<Plugins>,
    shared: Shared,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    use futures::FutureExt;
    let schema = crd::SchemaWatch::start(
        client.clone(),
        shared.metrics.clone(),
        config.crd_stale_after,
        config.silence,
    );
    let drift = Arc::new(template_drift(&client, &shared).await);
    let shutdown = shutdown.boxed().shared();
    loop {
        shared.ready.store(false, Ordering::Release);
        tokio::select! {
            _ = async {
                schema.usable().await;
                crd::until_served(&client, config.namespace.as_deref()).await;
            } => {}
            _ = shutdown.clone() => return,
        }
        let stop = {
            let (schema, shutdown) = (schema.clone(), shutdown.clone());
            async move {
                tokio::select! {
                    _ = schema.lost() => {}
                    _ = shutdown => {}
                }
            }
        };
        run_while(
            client.clone(),
            (config.clone(), plugins.clone()),
            shared.clone(),
            (schema.clone(), drift.clone()),
            stop,
        )
        .await;
        if shutdown.peek().is_some() {
            return;
        }
    }
}

/// On the first pass of each MWRS that a replica may write in, names the template fields
/// the hub's ManifestWork spec has and the CRD lacks (once per MWRS and process).
async fn tell_template_drift(ctx: &Context, mwrs: &ManifestWorkReplicaSet) {
    if !ctx.gate_is_open_quietly() {
        return;
    }
    let ns = mwrs.namespace().unwrap_or_default();
    if let Some(note) = ctx.template_drift.first_note(&ns, &mwrs.name_any()) {
        let warning = crate::events::EventType::Warning;
        crate::announce::publish(ctx, mwrs, warning, "TemplateFieldsMissing", &note).await;
    }
}

/// Compares the hub's ManifestWork spec with the MWRS CRD's template schema once: each
/// field a template would lose is logged, counted in a metric, and named to every MWRS in
/// one Warning Event ([`crd::TemplateDrift`]).
async fn template_drift(client: &Client, shared: &Shared) -> crd::TemplateDrift {
    let lacking = crd::template_drift(client).await;
    shared
        .metrics
        .template_fields_missing
        .set(lacking.len() as i64);
    if !lacking.is_empty() {
        tracing::warn!(
            fields = %lacking.join(", "),
            "the hub's ManifestWork spec has fields the MWRS CRD's template schema lacks: a template setting one has it pruned by the API server; install this project's CRD regenerated for the hub's OCM version (scripts/gen-crd.py)"
        );
    }
    crd::TemplateDrift::new(lacking)
}

/// One run of the controller on fresh stores, until `stop`; when it stops because the
/// CRD lost this controller's fields, every MWRS it knew gets a Warning Event.
async fn run_while(
    client: Client,
    (config, plugins): (Config, Arc<Plugins>),
    shared: Shared,
    (schema, drift): (crd::SchemaWatch, Arc<crd::TemplateDrift>),
    stop: impl Future<Output = ()> + Send + Sync + 'static,
) {
    // Not ready until this instance's own stores have synced.
    shared.ready.store(false, Ordering::Release);
    let (stores, triggers) = watch::build(watch::Scope {
        client: &client,
        namespace: config.namespace.as_deref(),
        silence: config.silence,
    });
    let workers = config.workers.max(1);
    let ctx = Arc::new(Context::new(
        client,
        stores.clone(),
        shared.metrics.clone(),
        (config, plugins),
        schema.clone(),
        drift,
    ));
    tokio::spawn(ready_once_synced(stores.clone(), shared.clone()));
    let sight = tokio::spawn(keep_sight(
        stores.ready.failures.clone(),
        shared.clone(),
        ctx.config.blind_after,
    ));
    let (plugin_health, health_changes) = futures::channel::mpsc::channel(1);
    let prober = tokio::spawn(probe_plugins(ctx.clone(), plugin_health));
    let (plugin_news, answered) = futures::channel::mpsc::unbounded();
    ctx.plugins.answers_to(plugin_news);
    let mwrs_store = stores.mwrs.clone();
    let queue = ctx.queue.clone();
    let (asked, answered_asks) = (queue.clone(), queue.clone());
    let mwrs_events = triggers.mwrs.inspect(move |event| {
        if let Ok(m) = event {
            asked.asked(&ObjectRef::from_obj(m), Instant::now());
        }
    });
    let answered = answered.inspect(move |m| answered_asks.asked(m, Instant::now()));
    let leads = ctx.config.leading.began();
    Controller::for_stream(mwrs_events, stores.mwrs.clone())
        // A standby's passes did nothing: every MWRS gets one when it begins to lead.
        .reconcile_all_on(leads)
        // A plugin coming back (or going away) changes every pass that names it.
        .reconcile_all_on(health_changes)
        // An MWRS whose plugin's answer changed.
        .reconcile_on(answered)
        .watches_stream(triggers.works, queue.noting(|mw| watch::owner_ref(&mw)))
        .watches_stream(triggers.revisions, queue.noting(watch::revision_mapper))
        .watches_stream(
            triggers.placements,
            queue.noting(watch::placement_mapper(mwrs_store.clone())),
        )
        .watches_stream(
            triggers.decisions,
            queue.noting(watch::decision_mapper(mwrs_store)),
        )
        .with_config(
            controller::Config::default()
                .concurrency(workers)
                // Many ManifestWork events arrive together during a rollout; one pass
                // serves them all.
                .debounce(Duration::from_millis(100)),
        )
        .graceful_shutdown_on(stop)
        .run(reconcile, error_policy, ctx.clone())
        .for_each(|r| async move { log_pass(r) })
        .await;
    prober.abort();
    sight.abort();
    shared.blind.store(false, Ordering::Release);
    shared.ready.store(false, Ordering::Release);
    if let Err(why) = schema.state() {
        announce_writes_stopped(&ctx, &stores, &why).await;
    }
}

/// Sets `shared.ready` once every store of this run has synced.
async fn ready_once_synced(stores: watch::Stores, shared: Shared) {
    stores.wait_ready().await;
    shared.ready.store(true, Ordering::Release);
    tracing::info!("stores synced; ready");
}

/// What one pass's outcome says in the log (its errors are already the error policy's).
fn log_pass<T>(
    r: Result<(ObjectRef<GuardedMwrs>, T), controller::Error<Error, kube::runtime::watcher::Error>>,
) {
    match r {
        Ok((obj, _)) => tracing::trace!(mwrs = %obj, "reconciled"),
        Err(controller::Error::ReconcilerFailed(e, obj)) => {
            tracing::debug!(mwrs = %obj, error = %e, "reconcile failed")
        }
        Err(controller::Error::ObjectNotFound(obj)) => {
            tracing::trace!(mwrs = %obj, "object gone")
        }
        Err(e) => tracing::warn!(error = %e, "controller error"),
    }
}

/// One Event on every MWRS known: the CRD lost this controller's fields, so writes stop.
async fn announce_writes_stopped(ctx: &Context, stores: &watch::Stores, why: &str) {
    for m in stores.mwrs.state() {
        let regarding = m.object_ref(&());
        let note = format!("writes stopped until the CRD is restored: {why}");
        crate::announce::publish_crd_state(ctx, &regarding, &note).await;
    }
}

/// Asks every registered plugin `Initialize` once per poll interval, and says so on
/// `changed` when any plugin's health changed.
async fn probe_plugins(ctx: Arc<Context>, mut changed: futures::channel::mpsc::Sender<()>) {
    let plugins = &ctx.plugins;
    if plugins.is_empty() {
        return;
    }
    // Until a replica has asked a plugin, it knows nothing of it (rules §12.6): one that
    // begins to lead asks at once instead of waiting for the next poll.
    let mut began = std::pin::pin!(ctx.config.leading.began());
    loop {
        record_client_certs(&ctx);
        // A replica whose gate is closed (a standby, or the CRD lost) calls no plugin,
        // not even Initialize (rules §12.4).
        if ctx.gate_is_open_quietly() && plugins.probe().await {
            // Full: a pass over every MWRS is already due.
            let _ = changed.try_send(());
        }
        tokio::select! {
            () = tokio::time::sleep(plugins.poll()) => {}
            Some(()) = began.next() => wait_gate_open(&ctx, plugins.poll()).await,
        }
    }
}

/// When each plugin's client certificate expires, as a metric; a warning an hour in its
/// last week (security review X1: a certificate renewed on disk is taken at the next call).
fn record_client_certs(ctx: &Context) {
    use std::sync::atomic::AtomicI64;
    static WARNED_AT: AtomicI64 = AtomicI64::new(0);
    let now = jiff::Timestamp::now().as_second();
    let warned = WARNED_AT.load(Ordering::Relaxed);
    let warn = now - warned >= 3600;
    for (plugin, expiry) in ctx.plugins.client_cert_expiries() {
        let labels = crate::metrics::PluginLabels {
            plugin: plugin.to_string(),
        };
        match expiry {
            Ok(at) => {
                ctx.metrics
                    .plugin_client_cert_expiry
                    .get_or_create(&labels)
                    .set(at);
                let days = (at - now) / 86_400;
                if days < 7 && warn {
                    WARNED_AT.store(now, Ordering::Relaxed);
                    tracing::warn!(
                        plugin,
                        days_left = days,
                        "the client certificate presented to this plugin expires soon"
                    );
                }
            }
            Err(why) if warn => {
                WARNED_AT.store(now, Ordering::Relaxed);
                tracing::warn!(plugin, %why, "the client certificate's expiry cannot be read");
            }
            Err(_) => {}
        }
    }
}

/// Looks at the watches every two seconds: one failing past `bound` makes the replica not
/// ready, sets its metric, says so in the log, and blinds the planner
/// ([`crate::watch_health`]).
async fn keep_sight(failures: Arc<WatchFailures>, shared: Shared, bound: Duration) {
    let mut shown: Vec<usize> = Vec::new();
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let judged = failures.judge(Instant::now(), jiff::Timestamp::now(), bound);
        let now: Vec<usize> = judged.failing.iter().map(|(i, _)| *i).collect();
        for (i, failing_for) in &judged.failing {
            if !shown.contains(i) {
                let watch = watch::watcher_name(*i);
                tracing::error!(%watch, seconds = failing_for.as_secs(), "a watch keeps failing: its store may be stale; not ready, and no deadline runs until it works again");
            }
        }
        for i in shown.iter().filter(|i| !now.contains(i)) {
            tracing::info!(watch = %watch::watcher_name(*i), "the watch works again");
        }
        for i in now.iter().chain(&shown) {
            let labels = WatchLabels {
                watch: watch::watcher_name(*i),
            };
            shared
                .metrics
                .watch_failing
                .get_or_create(&labels)
                .set(i64::from(now.contains(i)));
        }
        shared.blind.store(!now.is_empty(), Ordering::Release);
        if judged.changed {
            tracing::info!(sight = ?failures.sight(), "the planner's sight of the hub changed");
        }
        shown = now;
    }
}

/// Waits until `ctx`'s write gate opens, at most `bound` (a replica's gate opens with its
/// first renewal after it takes the Lease).
async fn wait_gate_open(ctx: &Context, bound: Duration) {
    let until = Instant::now() + bound;
    while !ctx.gate_is_open_quietly() && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A conflict that persists (a squatter, a refused patch) backs off like any error
    /// instead of retrying every 300 ms for ever.
    #[test]
    fn persistent_conflicts_back_off() {
        let delays: Vec<Duration> = (1..=4).map(|n| retry_delay(n, true)).collect();
        assert_eq!(
            delays,
            [300, 1_000, 2_000, 4_000]
                .map(Duration::from_millis)
                .to_vec()
        );
        assert_eq!(retry_delay(40, true), BACKOFF_MAX);
        assert_eq!(retry_delay(1, false), Duration::from_secs(1));
    }

    #[test]
    fn backoff_doubles_to_cap() {
        assert_eq!(backoff(1), Duration::from_secs(1));
        assert_eq!(backoff(2), Duration::from_secs(2));
        assert_eq!(backoff(4), Duration::from_secs(8));
        assert_eq!(backoff(30), Duration::from_secs(300));
    }
}
