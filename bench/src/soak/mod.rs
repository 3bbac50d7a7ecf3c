//! The fault soak (`bench/soak.sh`, issue #34): on the test hub with the simulated fleet
//! in decision groups, two controller replicas with leader election and the reference
//! rollout plugin, it cycles rollouts, aborts, undos, retries, history-limit changes and
//! templates changed mid-rollout on two MWRS (one judged by the plugin), while injecting
//! faults at random (`cast.rs`). Every change the hub makes is logged from watches and
//! the API server's audit log (`watch.rs`), and the rules of rules §4, §10, §11 and §12 are
//! checked over that log (`invariants.rs`). The report counts faults and violations by
//! kind, with the seed that replays the run's choices.

mod access;
mod cast;
mod front;
mod invariants;
mod log;
mod rng;
mod rounds;
mod watch;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use kube::Client;
use mwrs_fleet::placement::{self, DecisionGroup};
use mwrs_fleet::{Behaviour, WorkInfo, cluster};
use serde_json::{Value, json};

use cast::{Cast, Fault, Kept, Launch};
use invariants::{Kind, Violation};
use log::{Log, Seen, now_ms};
use rng::Rng;
use watch::SharedLog;

/// The namespace of the soak's MWRS, Placement, Lease and replicas' accounts.
pub const NS: &str = "soak";
/// The controllers' leader Lease (the controller's default name).
pub const LEASE: &str = "mwrs-controller";
/// The soak's Placement.
pub const PLACEMENT: &str = "fleet";
/// The plugin's name in the controllers' `--work-config`.
const PLUGIN: &str = "feedback";
/// The plugin's `failurePolicy.unavailableFor`: short, so that a standby is often up
/// longer (the failover of issue #50) and an outage spends a budget within a round.
pub const PLUGIN_UNAVAILABLE_FOR: Duration = Duration::from_secs(20);
/// The mark key's Secret (the controller's default name, in the Lease's namespace).
pub const MARK_KEY_SECRET: &str = "mwrs-controller-marks";

/// What the soak is told.
pub struct SoakArgs {
    pub kubeconfig: PathBuf,
    pub controller: PathBuf,
    pub plugin: PathBuf,
    pub cli: PathBuf,
    pub workdir: PathBuf,
    pub hub_pid: Option<u32>,
    pub audit_log: Option<PathBuf>,
    pub seed: u64,
    /// It stops after this long, or after `rounds` rounds if that comes first.
    pub duration: Duration,
    pub rounds: Option<u32>,
    pub clusters: usize,
    pub groups: usize,
    /// Seconds without action or fault in which the controllers must not write, after
    /// every third round.
    pub idle_secs: u64,
    /// How long a round may take to settle.
    pub round_timeout: Duration,
}

/// Whether a fault of the plugin was injected since a count was taken.
#[derive(Default)]
pub struct PluginFaults {
    started: AtomicU64,
    active: AtomicBool,
}

impl PluginFaults {
    /// A mark to compare with [`PluginFaults::since`].
    pub fn mark(&self) -> u64 {
        self.started.load(Ordering::Acquire) + u64::from(self.active.load(Ordering::Acquire))
    }

    pub fn since(&self, mark: u64) -> bool {
        self.mark() != mark || self.active.load(Ordering::Acquire)
    }
}

/// The injector's controls: `quiet` asks it to stop injecting, `acked` says it has.
#[derive(Default)]
struct Quiet {
    quiet: AtomicBool,
    acked: AtomicBool,
    stop: AtomicBool,
}

/// Runs the soak; the report's JSON and the number of violations.
pub async fn run(client: Client, args: SoakArgs) -> anyhow::Result<(Value, usize)> {
    let started = Instant::now();
    let (names, groups) = fleet(&client, &args, started).await?;
    let log: SharedLog = Arc::new(Mutex::new(Log::default()));
    let fixed: Arc<Mutex<std::collections::BTreeSet<String>>> = Arc::default();
    let behaviour = fleet_behaviour(&groups, fixed.clone(), args.seed);
    let cast = start_cast(&client, &args, &names, &groups, behaviour).await?;
    let watches = watch::start(&client, NS, &log).await;

    // No fault until both MWRS have rolled out once: the soak starts from a settled fleet.
    let quiet = Arc::new(Quiet::default());
    quiet.quiet.store(true, Ordering::Release);
    let plugin_faults = Arc::new(PluginFaults::default());
    let injector = tokio::spawn(inject(
        cast,
        Rng::new(args.seed ^ 0x5eed),
        log.clone(),
        quiet.clone(),
        plugin_faults.clone(),
    ));
    let mut driver = rounds::Driver::new(
        client.clone(),
        &args,
        names.len(),
        log.clone(),
        fixed,
        plugin_faults,
    );
    driver.create().await?;
    quiet.quiet.store(false, Ordering::Release);
    let rounds = drive(&mut driver, &args, started, &log, &quiet).await?;

    quiet.stop.store(true, Ordering::Release);
    let (cast, faults) = injector.await.context("the fault injector")??;
    let restarts = cast.restarts;
    cast.stop().await;
    drop(watches);
    let writes = match &args.audit_log {
        Some(path) => watch::read_audit(path, NS, &log)
            .with_context(|| format!("reading the audit log {}", path.display()))?,
        None => 0,
    };
    let (violations, entries) = check(&log)?;
    let report = Report {
        seed: args.seed,
        seconds: started.elapsed().as_secs_f64(),
        rounds,
        clusters: names.len(),
        groups: groups.len(),
        faults,
        violations,
        restarts,
        writes,
        entries,
        audited: args.audit_log.is_some(),
    };
    report.print();
    Ok((report.json(), report.violations.len()))
}

/// The soak's clusters, in `args.groups` decision groups of the soak's Placement; the
/// cluster names and the groups'.
async fn fleet(
    client: &Client,
    args: &SoakArgs,
    started: Instant,
) -> anyhow::Result<(Vec<String>, Vec<Vec<String>>)> {
    let names = cluster::cluster_names("soak", args.clusters);
    cluster::ensure_clusters(client, "soak", &names, 32).await?;
    placement::ensure_namespace(client, NS).await?;
    let groups: Vec<Vec<String>> = cluster::split_groups(&names, args.groups);
    let decision_groups: Vec<DecisionGroup> = groups
        .iter()
        .enumerate()
        .map(|(i, c)| DecisionGroup::new(format!("g{i}"), c.clone()))
        .collect();
    placement::publish(client, NS, PLACEMENT, &decision_groups).await?;
    eprintln!(
        "soak: {} clusters in {} decision groups ready in {:.1}s",
        names.len(),
        groups.len(),
        started.elapsed().as_secs_f64()
    );
    Ok((names, groups))
}

/// The processes faults are injected into: the plugin behind its front, and the two
/// controller replicas; with the agent's `behaviour` over `groups`.
async fn start_cast(
    client: &Client,
    args: &SoakArgs,
    names: &[String],
    groups: &[Vec<String>],
    behaviour: mwrs_fleet::agent::BehaviourFn,
) -> anyhow::Result<Cast> {
    // One port for the whole run, and one for the front the controllers' --work-config
    // names (it passes every call on, but while the plugin's backend is "down").
    let plugin_addr = format!("127.0.0.1:{}", crate::process::free_port()?);
    let front_addr = format!("127.0.0.1:{}", crate::process::free_port()?);
    let backend = front::serve(&front_addr, &plugin_addr).await?;
    access::grant_plugin(client, names).await?;
    let plugin_kubeconfig =
        access::account_kubeconfig(client, &args.kubeconfig, access::PLUGIN_ACCOUNT).await?;
    let plugin = Kept::start(plugin_launch(args, &plugin_addr, &plugin_kubeconfig)?)?;
    wait_listening(&plugin_addr).await?;
    let mut replicas = Vec::new();
    for name in ["a", "b"] {
        let launch = replica_launch(client, args, name, &front_addr).await?;
        replicas.push(Kept::start(launch)?);
    }
    let mut cast = Cast::new(
        client.clone(),
        NS,
        replicas,
        plugin,
        groups.to_vec(),
        behaviour,
        args.hub_pid,
    );
    cast.backend = backend;
    Ok(cast)
}

/// Rounds until the soak's duration or its `--rounds` is reached, with an idle window
/// after every third; how many ran.
async fn drive(
    driver: &mut rounds::Driver,
    args: &SoakArgs,
    started: Instant,
    log: &SharedLog,
    quiet: &Quiet,
) -> anyhow::Result<u32> {
    let mut rng = Rng::new(args.seed);
    let deadline = started + args.duration;
    let mut round = 0;
    while Instant::now() < deadline && args.rounds.is_none_or(|n| round < n) {
        round += 1;
        driver.round(round, &mut rng).await?;
        if round % 3 == 0 {
            idle(log, quiet, args.idle_secs, driver).await;
        }
    }
    Ok(round)
}

/// The rules checked over the log, and how many entries it holds.
fn check(log: &SharedLog) -> anyhow::Result<(Vec<Violation>, usize)> {
    let l = log.lock().map_err(|_| anyhow::anyhow!("log poisoned"))?;
    let sorted = l.sorted();
    Ok((invariants::check(&sorted), sorted.len()))
}

/// Good versions succeed after 0.5–3 s; a version with `-bad` in it fails on decision
/// group 0 (Degraded, and its Deployment never ready for the plugin to see) unless it is
/// in `fixed` (a retry round fixes it first).
fn fleet_behaviour(
    groups: &[Vec<String>],
    fixed: Arc<Mutex<std::collections::BTreeSet<String>>>,
    seed: u64,
) -> mwrs_fleet::agent::BehaviourFn {
    let first: std::collections::BTreeSet<String> = groups
        .first()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .collect();
    Arc::new(move |w: &WorkInfo<'_>| {
        let version = rounds::version_of(w.spec).unwrap_or_default();
        let bad = version.contains("-bad")
            && first.contains(w.cluster)
            && !fixed.lock().is_ok_and(|f| f.contains(&version));
        if bad {
            return Behaviour::Degrade {
                after: Duration::from_secs(1),
            };
        }
        let draw = rng::Rng::new(seed ^ hash(w.cluster) ^ w.generation as u64).secs(0.5, 3.0);
        Behaviour::Succeed { after: draw }
    })
}

fn hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// The reference plugin, as ServiceAccount [`access::PLUGIN_ACCOUNT`] with `kubeconfig`.
fn plugin_launch(args: &SoakArgs, addr: &str, kubeconfig: &Path) -> anyhow::Result<Launch> {
    // Its account may only `get` ManifestWorks, namespace by namespace.
    let config = crate::plugin::write_plugin_config(&args.workdir, addr, "Get")?;
    Ok(Launch {
        name: "plugin".into(),
        program: args.plugin.clone(),
        args: vec![
            "--config".into(),
            config.display().to_string(),
            "--kubeconfig".into(),
            kubeconfig.display().to_string(),
        ],
        logs: args.workdir.clone(),
    })
}

async fn wait_listening(addr: &str) -> anyhow::Result<()> {
    let t = Instant::now();
    while tokio::net::TcpStream::connect(addr).await.is_err() {
        anyhow::ensure!(
            t.elapsed() < Duration::from_secs(30),
            "nothing listens on {addr} after 30s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Replica `name` of the controller: its own ServiceAccount (so the audit log tells the
/// replicas apart), leader election on, the plugin registered.
async fn replica_launch(
    client: &Client,
    args: &SoakArgs,
    name: &str,
    plugin_addr: &str,
) -> anyhow::Result<Launch> {
    let account = format!("replica-{name}");
    let kubeconfig = access::account_kubeconfig(client, &args.kubeconfig, &account).await?;
    access::bind_cluster_admin(client, &account).await?;
    let work_config = args.workdir.join("work-config.yaml");
    std::fs::write(
        &work_config,
        format!(
            "plugins:\n  - name: {PLUGIN}\n    endpoint: http://{plugin_addr}\n    failurePolicy:\n      unavailableFor: {}s\n",
            PLUGIN_UNAVAILABLE_FOR.as_secs()
        ),
    )?;
    let port = crate::process::free_port()?;
    Ok(Launch {
        name: format!("replica-{name}"),
        program: args.controller.clone(),
        args: [
            "--kubeconfig",
            &kubeconfig.display().to_string(),
            "--namespace",
            NS,
            "--leader-elect",
            "--lease-namespace",
            NS,
            "--metrics-addr",
            &format!("127.0.0.1:{port}"),
            "--log-format",
            "json",
            "--work-config",
            &work_config.display().to_string(),
            "--plugin-poll",
            "2s",
        ]
        .map(String::from)
        .to_vec(),
        logs: args.workdir.clone(),
    })
}

/// Injects faults, one at a time, every kind in turn (a seeded shuffle per cycle), until
/// stopped; hands back the cast and the count of faults by kind.
async fn inject(
    mut cast: Cast,
    mut rng: Rng,
    log: SharedLog,
    quiet: Arc<Quiet>,
    plugin_faults: Arc<PluginFaults>,
) -> anyhow::Result<(Cast, BTreeMap<Fault, u32>)> {
    let mut counts = BTreeMap::new();
    let mut order: Vec<Fault> = Vec::new();
    while !quiet.stop.load(Ordering::Acquire) {
        if quiet.quiet.load(Ordering::Acquire) {
            quiet.acked.store(true, Ordering::Release);
            cast.tend_for(Duration::from_millis(500)).await?;
            continue;
        }
        quiet.acked.store(false, Ordering::Release);
        let gap = rng.secs(2.0, 10.0);
        cast.tend_for(gap).await?;
        if quiet.quiet.load(Ordering::Acquire) || quiet.stop.load(Ordering::Acquire) {
            continue;
        }
        if order.is_empty() {
            order = Fault::ALL.to_vec();
            for i in (1..order.len()).rev() {
                order.swap(i, rng.below(i + 1));
            }
        }
        let fault = order.pop().unwrap_or(Fault::KillLeader);
        file_fault(&log, fault, "", true);
        if fault.is_plugin() {
            plugin_faults.active.store(true, Ordering::Release);
            plugin_faults.started.fetch_add(1, Ordering::AcqRel);
        }
        let target = cast.inject(fault, &mut rng).await?;
        plugin_faults.active.store(false, Ordering::Release);
        eprintln!("soak: fault {}: {target}", fault.name());
        file_fault(&log, fault, &target, false);
        *counts.entry(fault).or_insert(0) += 1;
    }
    Ok((cast, counts))
}

fn file_fault(log: &SharedLog, fault: Fault, target: &str, start: bool) {
    if let Ok(mut l) = log.lock() {
        l.push(
            now_ms(),
            Seen::Fault {
                kind: fault.name().into(),
                target: target.into(),
                start,
            },
        );
    }
}

/// A window of `secs` with no action and no fault, once the injector has stopped, every
/// abort's reverts are done (at most [`REVERTS_WAIT`] later) and the hub has been quiet
/// for a while.
async fn idle(log: &SharedLog, quiet: &Quiet, secs: u64, driver: &rounds::Driver) {
    quiet.quiet.store(true, Ordering::Release);
    while !quiet.acked.load(Ordering::Acquire) {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let until = Instant::now() + REVERTS_WAIT;
    while Instant::now() < until && !driver.reverts_done().await.unwrap_or(false) {
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    // What a fault left behind (a replica starting, a relist) settles first.
    tokio::time::sleep(Duration::from_secs(20)).await;
    if let Ok(mut l) = log.lock() {
        l.push(now_ms(), Seen::Idle { start: true });
    }
    tokio::time::sleep(Duration::from_secs(secs)).await;
    if let Ok(mut l) = log.lock() {
        l.push(now_ms(), Seen::Idle { start: false });
    }
    quiet.quiet.store(false, Ordering::Release);
}

/// How long an idle window waits for the reverts of an abort (a plugin validates each).
const REVERTS_WAIT: Duration = Duration::from_secs(300);

struct Report {
    seed: u64,
    seconds: f64,
    rounds: u32,
    clusters: usize,
    groups: usize,
    faults: BTreeMap<Fault, u32>,
    violations: Vec<Violation>,
    restarts: u32,
    writes: usize,
    entries: usize,
    audited: bool,
}

impl Report {
    fn by_kind(&self) -> BTreeMap<&'static str, usize> {
        let mut m: BTreeMap<&'static str, usize> =
            Kind::ALL.iter().map(|k| (k.name(), 0)).collect();
        for v in &self.violations {
            *m.entry(v.kind.name()).or_insert(0) += 1;
        }
        m
    }

    fn print(&self) {
        println!(
            "\nSoak (seed {}): {} rounds in {:.0}s over {} clusters in {} decision groups; {} replica restarts; {} log entries; {} writes by the replicas audited",
            self.seed,
            self.rounds,
            self.seconds,
            self.clusters,
            self.groups,
            self.restarts,
            self.entries,
            if self.audited {
                self.writes.to_string()
            } else {
                "no".into()
            },
        );
        println!("  faults injected:");
        for f in Fault::ALL {
            println!(
                "    {:<34} {}",
                f.name(),
                self.faults.get(&f).copied().unwrap_or(0)
            );
        }
        println!("  violations:");
        for (k, n) in self.by_kind() {
            println!("    {k:<34} {n}");
        }
        for v in self.violations.iter().take(20) {
            println!("    at {} {}: {}", v.at, v.kind.name(), v.detail);
        }
        if !self.audited {
            println!("  (no audit log: writes by a non-leader and writes when idle not checked)");
        }
        println!("  replay: bench/soak/run.sh --seed {}", self.seed);
    }

    fn json(&self) -> Value {
        json!({
            "seed": self.seed,
            "seconds": self.seconds,
            "rounds": self.rounds,
            "clusters": self.clusters,
            "groups": self.groups,
            "replica_restarts": self.restarts,
            "writes_audited": if self.audited { json!(self.writes) } else { Value::Null },
            "faults": self.faults.iter().map(|(f, n)| (f.name().to_string(), json!(n))).collect::<serde_json::Map<_, _>>(),
            "violations": self.by_kind(),
            "violation_samples": self.violations.iter().take(50).map(|v| json!({
                "kind": v.kind.name(), "at_ms": v.at, "detail": v.detail})).collect::<Vec<_>>(),
        })
    }
}
