//! `mwrs-bench`: fan-out, abort, idle cost and memory of the controller at fleet scale,
//! each against a reference measured on the same hub in the same run.
//!
//! For every size N it brings up N simulated clusters (one in-process work agent answers
//! all of them, for every phase alike) and measures:
//!
//! - bare: a plain client creating, then updating, the same N ManifestWorks (the
//!   controller's size, `mirror.rs`) with the same write concurrency the controller is
//!   given: the hub's own limit;
//! - fan-out: a template change (strategy All) until every ManifestWork carries it;
//! - abort: from the first Degraded status on the new revision (the breach) until every
//!   ManifestWork is back on the stable revision, in rounds that each follow a bare update
//!   of their own, with the CPU of the hub, the controller and this harness split out;
//! - idle: controller CPU seconds and hub API requests per minute with nothing changing
//!   (requests counted by the hub, minus a window with no controller running); then its
//!   reconciles and writes per minute while 1% of the clusters never answer a new
//!   revision (after every ManifestWork carries it: must be 0);
//! - memory: the controller's peak RSS with N ManifestWorks;
//! - optionally the same fan-out and memory for a peer (upstream's controller), started
//!   as `PEER KUBECONFIG`.
//!
//! Every ManifestWork is observed through one watch; "carries version v" means its first
//! manifest's `data.version` is v, so the same check serves the controller and the peer.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::bail;
use clap::Parser;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config as KubeConfig};
use mwrs_fleet::cluster;
use mwrs_fleet::{Agent, AgentConfig, AgentHandle, Behaviour};
use serde_json::Value;

use crate::cpu::Sampler;
use crate::fleet_view::Tracker;
use crate::process::clock_ticks;
use crate::sizes::{Bench, json_row, report, write_json};

mod cpu;
mod dashboard;
mod fleet_view;
mod lease;
mod many;
mod measure;
mod mirror;
mod plugin;
mod process;
mod record;
mod sizes;
mod soak;

#[derive(Parser, Debug)]
#[command(about = "Fleet-scale benchmarks of the MWRS controller against a bare client")]
struct Args {
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: PathBuf,
    /// The controller binary (built with --release).
    #[arg(long)]
    controller: PathBuf,
    /// A command started as `PEER KUBECONFIG` that runs upstream's controller.
    #[arg(long)]
    peer: Option<PathBuf>,
    /// Fleet sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1000,5000")]
    sizes: Vec<usize>,
    /// Write concurrency of the bare client and of the controller (`--concurrency`).
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Length of the idle measurement window, seconds.
    #[arg(long, default_value_t = 60)]
    idle_secs: u64,
    /// Deadline of each wait, seconds.
    #[arg(long, default_value_t = 900)]
    timeout_secs: u64,
    /// Where logs of the started processes go.
    #[arg(long, default_value = "/tmp/mwrs-bench")]
    workdir: PathBuf,
    /// Results as JSON (a record: the results with the run's command, date, commit and
    /// machine; see `record.rs`).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also file the record in this directory as `<UTC time>-<mode>.json` (bench/run.sh
    /// --record: `bench/results/`, which the book's results page is written from).
    #[arg(long, value_name = "DIR")]
    record: Option<PathBuf>,
    /// The CLI binary (built with --release): times `rollout status` and `rollout plan`
    /// over the N ManifestWorks.
    #[arg(long)]
    cli: Option<PathBuf>,
    /// Run the many-MWRS benchmark instead of the sizes: this many MWRS over
    /// `--many-clusters` clusters (see `many.rs`).
    #[arg(long, value_name = "COUNT")]
    many_mwrs: Option<usize>,
    #[arg(long, default_value_t = 3000, value_name = "N")]
    many_clusters: usize,
    /// With `--many-mwrs`: the bare client writes the ManifestWorks of this many names
    /// only (each over every cluster), and its figures for more are scaled from them, so
    /// that the run fits in its time; 0: as many as there are MWRS.
    #[arg(long, default_value_t = 0, value_name = "NAMES")]
    many_bare_sample: usize,
    /// With `--many-mwrs`: measure every MWRS changing at once over this many seconds
    /// from the change (its throughput, peak and queue delay then), not to its end, so
    /// that a run whose every-MWRS phase would outlast it still measures it; 0: to its end.
    #[arg(long, default_value_t = 0, value_name = "SECS")]
    many_all_window: u64,
    /// With `--many-mwrs`: rounds of the one-MWRS comparison, each the bare client's
    /// update of one name then one MWRS's change, back to back on the same hub: the
    /// fan-out's ratio is the median of the rounds' ratios (one pair alone moved by
    /// ±20% between runs at 9,000 ManifestWorks).
    #[arg(long, default_value_t = 3, value_name = "K")]
    many_rounds: usize,
    /// With `--many-mwrs`: how many MWRS change at once in the phase between one and
    /// every (at most all but the two that change and abort alone before it).
    #[arg(long, default_value_t = 10, value_name = "K")]
    many_at_once: usize,
    /// Instead of the sizes: the rollout-plugin run over this many clusters
    /// (bench/src/plugin.rs), with `--feedback-plugin`.
    #[arg(long, value_name = "N", conflicts_with = "many_mwrs")]
    plugin_clusters: Option<usize>,
    /// The `mwrs-feedback-plugin` binary, for `--plugin-clusters`.
    #[arg(long)]
    feedback_plugin: Option<PathBuf>,
    /// With `--plugin-clusters`: pad the template's ConfigMap to about this many KiB (the
    /// memory a plugin's calls cost grows with the template).
    #[arg(
        long,
        default_value_t = 0,
        value_name = "KIB",
        requires = "plugin_clusters"
    )]
    plugin_template_kib: usize,
    /// Instead of the sizes: the dashboard run over this many clusters
    /// (bench/src/dashboard.rs), with `--cli`.
    #[arg(long, value_name = "N", conflicts_with_all = ["many_mwrs", "plugin_clusters"])]
    dashboard_clusters: Option<usize>,
    /// Abort rounds per size, each just after a bare update of its own (alternated): the
    /// abort ratio is the median of the rounds' ratios.
    #[arg(long, default_value_t = 5, value_name = "K")]
    abort_runs: usize,
    /// Agents answer a revision after a latency of their own, spread as a fleet's are
    /// ([`answer_latency`]), instead of at once: the time back to stable then includes
    /// the agents', for the controller and the bare client alike.
    #[arg(long)]
    answer_spread: bool,
    /// The test hub's process (`hub.pid` of its state dir): its CPU is split out of the
    /// measured windows.
    #[arg(long)]
    hub_pid: Option<u32>,
    /// Run the sizes' controller with leader election and report the gaps between its
    /// Lease renewals during the fan-out (its idle request count then includes the
    /// Lease's renewals and the watchdog's reads).
    #[arg(long)]
    leader_elect: bool,
    /// Instead of the sizes: the fault soak for this long (`10m`, `2h`; bench/soak.sh and
    /// `soak/mod.rs`), with `--feedback-plugin` and `--cli`.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration,
        conflicts_with_all = ["many_mwrs", "plugin_clusters", "dashboard_clusters"])]
    soak: Option<Duration>,
    /// With `--soak`: stop after this many rounds if the duration has not passed first.
    #[arg(long, value_name = "N")]
    soak_rounds: Option<u32>,
    /// The soak's seed: the same seed makes the same choices of actions and faults.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The soak's fleet, in that many decision groups.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    soak_clusters: usize,
    #[arg(long, default_value_t = 5, value_name = "N")]
    soak_groups: usize,
    /// The test hub's audit log (bench/soak.sh starts the hub with one): the writes each
    /// replica made, for the soak's checks of who wrote and of idle writes.
    #[arg(long)]
    audit_log: Option<PathBuf>,
    /// How long a soak round may take to settle, seconds.
    #[arg(long, default_value_t = 300)]
    round_timeout_secs: u64,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    mwrs_fleet::rules::duration(s).map_err(|e| e.to_string())
}

/// The fault soak (`soak/`): fails when it finds a violation.
async fn soak(client: Client, args: &Args, duration: Duration) -> anyhow::Result<()> {
    let (Some(plugin), Some(cli)) = (args.feedback_plugin.clone(), args.cli.clone()) else {
        bail!("--soak needs --feedback-plugin and --cli");
    };
    let soak_args = soak::SoakArgs {
        kubeconfig: args.kubeconfig.clone(),
        controller: args.controller.clone(),
        plugin,
        cli,
        workdir: args.workdir.clone(),
        hub_pid: args.hub_pid,
        audit_log: args.audit_log.clone(),
        seed: args.seed,
        duration,
        rounds: args.soak_rounds,
        clusters: args.soak_clusters,
        groups: args.soak_groups,
        idle_secs: args.idle_secs,
        round_timeout: Duration::from_secs(args.round_timeout_secs),
    };
    let (results, violations) = soak::run(client, soak_args).await?;
    record::write(
        &record::record("soak", &results),
        args.json.as_deref(),
        args.record.as_deref(),
    )?;
    if violations > 0 {
        bail!(
            "the soak found {violations} violations (seed {}): see the report above",
            args.seed
        );
    }
    Ok(())
}

async fn client_from(path: &Path) -> anyhow::Result<Client> {
    let kc = Kubeconfig::read_from(path)?;
    let config = KubeConfig::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(config)?)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    std::fs::create_dir_all(&args.workdir)?;
    let client = client_from(&args.kubeconfig).await?;
    if let Some(duration) = args.soak {
        return soak(client, &args, duration).await;
    }
    let max = fleet_size(&args)?;
    let clusters = cluster::cluster_names("bench", max);
    let t = Instant::now();
    cluster::ensure_clusters(&client, "bench", &clusters, args.concurrency).await?;
    eprintln!("{max} clusters ready in {:.1}s", t.elapsed().as_secs_f64());

    let switches = Switches {
        spread: args.answer_spread,
        ..Switches::default()
    };
    let agent = switches.start_agent(&client, &clusters);
    let tracker = Tracker::start(client.clone()).await?;
    let tck = clock_ticks();
    let args_hub_pid = args.hub_pid;
    let bench = Bench {
        args,
        client,
        tracker,
        clusters,
        degrade_after_ms: switches.degrade_after_ms,
        failing: switches.failing,
        silent: switches.silent,
        tck,
        cpu: Sampler::start(args_hub_pid, tck),
    };
    if let Some(count) = bench.args.many_mwrs {
        return run_many(&bench, agent, count, max).await;
    }
    if let Some(n) = bench.args.plugin_clusters {
        return run_plugin(&bench, agent, n).await;
    }
    if let Some(n) = bench.args.dashboard_clusters {
        return run_dashboard(&bench, agent, n).await;
    }
    run_sizes(&bench, agent, max).await
}

/// How many simulated clusters the run needs: the many-MWRS run's, the plugin or
/// dashboard run's, else the largest size.
fn fleet_size(args: &Args) -> anyhow::Result<usize> {
    let max = match (
        args.many_mwrs,
        args.plugin_clusters.or(args.dashboard_clusters),
    ) {
        (Some(_), _) => args.many_clusters,
        (None, Some(n)) => n,
        (None, None) => args.sizes.iter().copied().max().unwrap_or(0),
    };
    if max == 0 {
        bail!("--sizes (or --many-clusters) must name at least one positive size");
    }
    Ok(max)
}

/// What the phases switch in the simulated agent's answers.
#[derive(Default)]
struct Switches {
    /// How long a failing cluster takes to report Degraded, in milliseconds.
    degrade_after_ms: Arc<AtomicU64>,
    /// Clusters that report Degraded on version v3 (aNN-v3 in the many-MWRS run).
    failing: Arc<Mutex<BTreeSet<String>>>,
    /// Clusters whose agent never answers revision v4.
    silent: Arc<Mutex<BTreeSet<String>>>,
    /// Successes come after each cluster's [`answer_latency`].
    spread: bool,
}

/// How long a cluster's agent takes to report a revision applied and available under
/// `--answer-spread`: fixed per cluster, 0.5–3 s for nine clusters in ten, 3–10 s for
/// nine in a hundred, 10–30 s for the last one in a hundred (a slow node, an image pull).
fn answer_latency(cluster: &str) -> Duration {
    let hash = cluster.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let u = (hash % 10_000) as f64 / 10_000.0;
    let secs = if u < 0.90 {
        0.5 + 2.5 * u / 0.90
    } else if u < 0.99 {
        3.0 + 7.0 * (u - 0.90) / 0.09
    } else {
        10.0 + 20.0 * (u - 0.99) / 0.01
    };
    Duration::from_secs_f64(secs)
}

impl Switches {
    /// The work agent of every cluster, answering as the switches say now; any other
    /// ManifestWork succeeds (at once, or after its latency under `--answer-spread`).
    fn start_agent(&self, client: &Client, clusters: &[String]) -> AgentHandle {
        let (d, f, q) = (
            self.degrade_after_ms.clone(),
            self.failing.clone(),
            self.silent.clone(),
        );
        let spread = self.spread;
        Agent::start(
            client.clone(),
            AgentConfig::new(clusters.iter().cloned()).behaviour(move |w| {
                if q.lock().is_ok_and(|s| s.contains(w.cluster))
                    && w.spec.to_string().contains("\"version\":\"v4\"")
                {
                    return Behaviour::Silent;
                }
                // Version v3, or aNN-v3 in the many-MWRS run.
                let fails = f.lock().is_ok_and(|s| s.contains(w.cluster))
                    && w.spec.to_string().contains("v3\"");
                if fails {
                    Behaviour::Degrade {
                        after: Duration::from_millis(d.load(Ordering::Relaxed)),
                    }
                } else if spread {
                    Behaviour::Succeed {
                        after: answer_latency(w.cluster),
                    }
                } else {
                    Behaviour::succeed_now()
                }
            }),
        )
    }
}

/// `--many-mwrs`: `count` MWRSs over `max` clusters.
async fn run_many(
    bench: &Bench,
    agent: AgentHandle,
    count: usize,
    max: usize,
) -> anyhow::Result<()> {
    let sample = match bench.args.many_bare_sample {
        0 => count,
        k => k,
    };
    let row = bench.many(count, max, sample).await?;
    agent.stop();
    many::print(&row);
    write_json(bench, "many", &many::json(&row))
}

/// `--plugin-clusters`: the rollout plugin over `n` clusters.
async fn run_plugin(bench: &Bench, agent: AgentHandle, n: usize) -> anyhow::Result<()> {
    let Some(program) = bench.args.feedback_plugin.clone() else {
        bail!("--plugin-clusters needs --feedback-plugin");
    };
    eprintln!("== the rollout plugin over {n} clusters");
    let row = bench.plugin_run(&program, n).await?;
    agent.stop();
    plugin::print(&row);
    write_json(bench, "plugin", &plugin::json(&row))
}

/// `--dashboard-clusters`: the dashboard over `n` clusters.
async fn run_dashboard(bench: &Bench, agent: AgentHandle, n: usize) -> anyhow::Result<()> {
    let Some(cli) = bench.args.cli.clone() else {
        bail!("--dashboard-clusters needs --cli");
    };
    eprintln!("== the dashboard over {n} clusters");
    let row = bench.dashboard_run(&cli, n).await?;
    agent.stop();
    dashboard::print(&row);
    write_json(bench, "dashboard", &dashboard::json(&row))
}

/// `--sizes`: every size in turn, then the table, and what the simulated fleet of `max`
/// clusters cost this process.
async fn run_sizes(bench: &Bench, agent: AgentHandle, max: usize) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    let sizes = bench.args.sizes.clone();
    for n in sizes {
        rows.push(bench.size(n).await?);
    }
    let agent_writes = agent.stats.status_writes.load(Ordering::Relaxed);
    agent.stop();
    report(&rows);
    // This process holds the simulated fleet's agent for every cluster and a watch cache
    // of every ManifestWork: what `mwrs-fleet` costs at this size.
    println!(
        "fleet: {max} simulated clusters in this process, {agent_writes} status writes, peak RSS {:.1} MiB (agent + a watch cache of every ManifestWork)",
        peak_rss_kib() as f64 / 1024.0
    );
    let v: Vec<Value> = rows.iter().map(json_row).collect();
    write_json(bench, "sizes", &Value::Array(v))
}

/// This process's peak RSS (`VmHWM`), in KiB; 0 when it cannot be read.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_latencies_spread_as_a_fleets_do() {
        let secs: Vec<f64> = (0..10_000)
            .map(|i| answer_latency(&format!("bench-{i:05}")).as_secs_f64())
            .collect();
        let share = |p: &dyn Fn(f64) -> bool| secs.iter().filter(|s| p(**s)).count() as f64 / 1e4;
        assert!(secs.iter().all(|s| (0.5..=30.0).contains(s)));
        assert!(
            (0.86..0.94).contains(&share(&|s| s < 3.0)),
            "{}",
            share(&|s| s < 3.0)
        );
        assert!((0.004..0.02).contains(&share(&|s| s >= 10.0)));
        assert_eq!(
            answer_latency("c1"),
            answer_latency("c1"),
            "fixed per cluster"
        );
    }
}
