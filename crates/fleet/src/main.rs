//! `mwrs-fleet`: a simulated fleet of managed clusters on a hub, in one process.
//!
//! `up` creates the clusters (ManagedCluster + namespace) and publishes a Placement with
//! its PlacementDecisions in decision groups; `agent` answers every ManifestWork in those
//! clusters as their work agents would, following behaviour rules; `run` does both and
//! serves until interrupted; `down` removes the fleet.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::{Args as ClapArgs, Parser, Subcommand};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config as KubeConfig};
use mwrs_fleet::cluster::{self, FLEET_LABEL};
use mwrs_fleet::placement::{self, DecisionGroup};
use mwrs_fleet::rules::{Latency, Rule, Rules};
use mwrs_fleet::{Agent, AgentConfig};

const EXAMPLES: &str = "Examples:
  # 5,000 clusters in 10 decision groups, every ManifestWork done after 1-5 s:
  mwrs-fleet run --clusters 5000 --groups 10 --latency 1s..5s

  # group 1 hangs on the template containing \"v2\", 1% of the clusters flap:
  mwrs-fleet run --clusters 20 --groups 3 \\
      --behave 'group=1,manifest=\"v2\"=hang' --behave 'fraction=0.01=flap:10s'

  # tear it down:
  mwrs-fleet down";

#[derive(Parser, Debug)]
#[command(version, about, after_help = EXAMPLES)]
struct Cli {
    /// Kubeconfig of the hub (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, global = true, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Kubeconfig context.
    #[arg(long, global = true)]
    context: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Create the clusters and publish the placement, then exit.
    Up(Fleet),
    /// Act as the work agent of the fleet's clusters until interrupted.
    Agent {
        #[command(flatten)]
        fleet: Fleet,
        #[command(flatten)]
        agent: AgentArgs,
    },
    /// `up`, then `agent`.
    Run {
        #[command(flatten)]
        fleet: Fleet,
        #[command(flatten)]
        agent: AgentArgs,
    },
    /// Delete the fleet's clusters, namespaces and placement decisions.
    Down {
        #[arg(long, default_value = "fleet")]
        name: String,
        #[arg(long, default_value = "default")]
        namespace: String,
        #[arg(long, default_value = "fleet")]
        placement: String,
    },
}

#[derive(ClapArgs, Debug, Clone)]
struct Fleet {
    /// Fleet name (the value of the fleet label on its objects).
    #[arg(long, default_value = "fleet")]
    name: String,
    /// Number of managed clusters.
    #[arg(long, default_value_t = 20)]
    clusters: usize,
    /// Cluster names are PREFIX-000, PREFIX-001, ...
    #[arg(long, default_value = "cluster")]
    prefix: String,
    /// Decision groups (equal split, in name order).
    #[arg(long, default_value_t = 1)]
    groups: usize,
    /// Decision group names, comma-separated (default: unnamed).
    #[arg(long, value_delimiter = ',')]
    group_names: Vec<String>,
    /// Namespace of the Placement (where the MWRS lives).
    #[arg(long, default_value = "default")]
    namespace: String,
    /// Placement name.
    #[arg(long, default_value = "fleet")]
    placement: String,
    /// Hub writes in flight at once.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
}

#[derive(ClapArgs, Debug, Clone)]
struct AgentArgs {
    /// Default time from a new ManifestWork generation to done: `2s` or a range `1s..5s`.
    #[arg(long, default_value = "0s")]
    latency: Latency,
    /// SELECTORS=BEHAVIOUR, first match wins (see the module docs of `rules`), e.g.
    /// `cluster=cluster-00*=degrade:3s`, `group=1,manifest=v2=hang`, `fraction=0.05=flap:10s`.
    #[arg(long = "behave")]
    rules: Vec<Rule>,
    /// Seed of the latency draws and `fraction=` picks.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Only Applied/Available (a template without condition rules).
    #[arg(long)]
    no_condition_rules: bool,
    /// Status writes in flight at once.
    #[arg(long, default_value_t = 64)]
    write_concurrency: usize,
    /// Print a stats line this often (0: never).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    stats_every: Duration,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    mwrs_fleet::rules::duration(s).map_err(|e| e.to_string())
}

async fn client(cli: &Cli) -> anyhow::Result<Client> {
    let options = KubeConfigOptions {
        context: cli.context.clone(),
        ..Default::default()
    };
    let config = match &cli.kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            KubeConfig::from_custom_kubeconfig(kc, &options).await?
        }
        None => KubeConfig::from_kubeconfig(&options).await?,
    };
    Ok(Client::try_from(config)?)
}

fn layout(f: &Fleet) -> (Vec<String>, Vec<DecisionGroup>) {
    let names = cluster::cluster_names(&f.prefix, f.clusters);
    let groups = cluster::split_groups(&names, f.groups)
        .into_iter()
        .enumerate()
        .map(|(i, c)| DecisionGroup::new(f.group_names.get(i).cloned().unwrap_or_default(), c))
        .collect();
    (names, groups)
}

async fn up(client: &Client, f: &Fleet) -> anyhow::Result<()> {
    let (names, groups) = layout(f);
    let t = Instant::now();
    cluster::ensure_clusters(client, &f.name, &names, f.concurrency)
        .await
        .context("creating managed clusters")?;
    let took = t.elapsed();
    placement::ensure_namespace(client, &f.namespace).await?;
    let decisions = placement::publish(client, &f.namespace, &f.placement, &groups)
        .await
        .context("publishing the placement")?;
    eprintln!(
        "fleet {:?}: {} clusters in {:.1}s ({:.0}/s), placement {}/{} with {} decisions in {} groups",
        f.name,
        names.len(),
        took.as_secs_f64(),
        names.len() as f64 / took.as_secs_f64().max(1e-9),
        f.namespace,
        f.placement,
        decisions.len(),
        groups.len(),
    );
    Ok(())
}

/// Resident set size and its peak, from /proc (Linux only; None elsewhere).
fn rss() -> Option<(u64, u64)> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |k: &str| {
        s.lines()
            .find(|l| l.starts_with(k))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
    };
    Some((field("VmRSS:")? * 1024, field("VmHWM:")? * 1024))
}

async fn agent(client: Client, f: &Fleet, a: &AgentArgs) -> anyhow::Result<()> {
    let (names, groups) = layout(f);
    let group_of: HashMap<String, usize> = groups
        .iter()
        .enumerate()
        .flat_map(|(i, g)| g.clusters.iter().map(move |c| (c.clone(), i)))
        .collect();
    let rules = Rules {
        rules: a.rules.clone(),
        default_latency: a.latency,
        seed: a.seed,
        groups: group_of,
    };
    let mut config = AgentConfig::new(names.iter().cloned().collect::<BTreeSet<_>>())
        .behaviour(move |w| rules.behaviour(w))
        .condition_rules(!a.no_condition_rules);
    config.concurrency = a.write_concurrency.max(1);
    let handle = Agent::start(client, config);
    eprintln!(
        "agent serving {} clusters (latency {}, {} rules); Ctrl-C stops",
        names.len(),
        a.latency,
        a.rules.len()
    );
    let start = Instant::now();
    let mut last = 0;
    let mut tick = tokio::time::interval(if a.stats_every.is_zero() {
        Duration::from_secs(3600)
    } else {
        a.stats_every
    });
    tick.tick().await;
    loop {
        tokio::select! {
            _ = shutdown() => break,
            _ = tick.tick(), if !a.stats_every.is_zero() => {
                let writes = handle.stats.status_writes.load(Ordering::Relaxed);
                let (rss, peak) = rss().unwrap_or_default();
                eprintln!(
                    "[{:>6.0}s] status writes {writes} (+{}), errors {}, rss {:.1} MiB (peak {:.1})",
                    start.elapsed().as_secs_f64(),
                    writes - last,
                    handle.stats.errors.load(Ordering::Relaxed),
                    rss as f64 / 1048576.0,
                    peak as f64 / 1048576.0,
                );
                last = writes;
            }
        }
    }
    handle.stop();
    Ok(())
}

async fn shutdown() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

async fn down(
    client: &Client,
    name: &str,
    namespace: &str,
    placement_name: &str,
) -> anyhow::Result<()> {
    placement::clear_decisions(client, namespace, placement_name).await?;
    let n = cluster::delete_fleet(client, name, 32).await?;
    eprintln!("fleet {name:?}: deleted {n} clusters and their namespaces ({FLEET_LABEL}={name})");
    Ok(())
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = async {
        let client = client(&cli).await?;
        match &cli.command {
            Command::Up(f) => up(&client, f).await,
            Command::Agent { fleet, agent: a } => agent(client, fleet, a).await,
            Command::Run { fleet, agent: a } => {
                up(&client, fleet).await?;
                agent(client, fleet, a).await
            }
            Command::Down {
                name,
                namespace,
                placement,
            } => down(&client, name, namespace, placement).await,
        }
    }
    .await;
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mwrs-fleet: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
