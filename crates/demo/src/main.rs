//! `mwrs-demo`: the README's demo. Against the hub of the kubeconfig it is given it sets up
//! a fleet ([`fleet`]: simulated clusters, or with `--spokes` real clusters run by upstream
//! OCM's placement controller and work agents), runs the controller in this process, and
//! plays a scenario a person can follow on the terminal ([`scenario`]):
//!
//! 1. v1 rolls out group by group (ProgressivePerGroup, AbortAll) and completes;
//! 2. v2 hangs on one decision group: the controller aborts back to v1 by itself;
//! 3. undo: the spec is rewritten from v1's ControllerRevision and completes;
//! 4. v3 rolls out and completes.
//!
//! Every change of the MWRS status, of a cluster's revision or of a spoke's object prints
//! one timeline line ([`timeline`]); every step waits for its expected state with a
//! deadline and the demo fails (exit 1) with the state it saw when a step does not get
//! there. It deletes what it created.
//!
//! With `--dashboard` the rollout can be watched in a browser as well: `mwrs dashboard`
//! runs in this process ([`watch_in_browser`]).

mod demo;
mod fleet;
mod poll;
mod scenario;
mod timeline;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config as KubeConfig};

use crate::demo::Demo;
use crate::fleet::Fleet;

/// The ManifestWorkReplicaSet demo: rollout, automatic abort, undo, rollout.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Kubeconfig of the hub.
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: PathBuf,
    /// Number of simulated clusters (split 15% / 35% / 50% into three decision groups).
    #[arg(long, default_value_t = 20)]
    clusters: usize,
    /// Real clusters instead of simulated ones, as `name=kubeconfig,...` (the first is the
    /// canary): the hub runs upstream's placement controller and each spoke upstream's work
    /// agent (`e2e/env.sh up` starts them; `scripts/demo.sh --ocm` does it all).
    #[arg(long, conflicts_with = "clusters")]
    spokes: Option<String>,
    /// Roll out behind the reference rollout plugin (`mwrs-feedback-plugin`, in this
    /// process): v2's Deployment never gets a ready replica on the second group, the agent
    /// reports it done all the same, and the plugin's FAILED sets off the abort.
    #[arg(long, conflicts_with = "spokes")]
    plugin: bool,
    /// progressDeadline of the rollout strategy, in seconds (default: 15, and 1 more per
    /// 40 simulated clusters: the simulated agents answer a larger fleet later).
    #[arg(long)]
    deadline: Option<u64>,
    /// Leave the MWRS and namespaces on the hub at the end.
    #[arg(long)]
    keep: bool,
    /// Show the rollout in `mwrs dashboard` too (in this process, on loopback, actions
    /// enabled): prints its URL and, on a terminal, waits for Enter before the first step
    /// and before cleaning up.
    #[arg(long)]
    dashboard: bool,
    /// The dashboard's port (0: any free one).
    #[arg(long, default_value_t = 0, requires = "dashboard")]
    dashboard_port: u16,
}

impl Args {
    /// The progressDeadline: `--deadline`, else one the fleet's agents can meet on one
    /// machine. Each decision group is written at once and one process answers for every
    /// simulated cluster (beside the controller, the dashboard and the browser), so the
    /// last of a group answers later the larger it is: on 2 cores with a browser on the
    /// page, the last of a 2,500-cluster group took about 70 s (debug build), so 5,000
    /// clusters get 140 s.
    fn deadline(&self) -> u64 {
        let simulated = if self.spokes.is_some() {
            0
        } else {
            self.clusters
        };
        self.deadline.unwrap_or(15 + simulated as u64 / 40)
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    // The controller's logs only when asked for (RUST_LOG); the timeline is the output.
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .try_init();
    }
    match run(args).await {
        Ok(()) => {
            println!("\nDEMO PASSED");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("\nDEMO FAILED: {e:#}");
            ExitCode::FAILURE
        }
    }
}

pub(crate) async fn client_from(path: &Path) -> anyhow::Result<Client> {
    Ok(Client::try_from(config_from(path).await?)?)
}

async fn config_from(path: &Path) -> anyhow::Result<KubeConfig> {
    let kc = Kubeconfig::read_from(path)
        .with_context(|| format!("reading kubeconfig {}", path.display()))?;
    Ok(KubeConfig::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?)
}

/// The dashboard, serving until the sender is dropped or fired.
type Watched = Option<tokio::sync::oneshot::Sender<()>>;

/// Starts `mwrs dashboard` on `namespace` in this process and prints the URL of the
/// MWRS's page; on a terminal, waits for Enter so there is time to open it.
async fn watch_in_browser(
    args: &Args,
    client: &Client,
    namespace: &str,
) -> anyhow::Result<Watched> {
    use mwrs_cli::cmd::dashboard::{Dashboard, api::Source};
    if !args.dashboard {
        return Ok(None);
    }
    let localhost = std::net::IpAddr::from([127, 0, 0, 1]);
    let d = Dashboard::bind(localhost, args.dashboard_port, true)
        .await
        .map_err(|e| anyhow::anyhow!("dashboard: {}", e.message))?;
    let url = format!("{}#/{namespace}/{}", d.url(), fleet::MWRS_NAME);
    let source = Source {
        client: client.clone(),
        namespace: Some(namespace.to_string()),
        url: config_from(&args.kubeconfig).await?.cluster_url.to_string(),
        judging: mwrs_cli::settings::Judging::in_process(mwrs_engine::PlanConfig::default()),
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let until = async {
            let _ = stopped.await;
        };
        if let Err(e) = d.serve(source, until).await {
            eprintln!("dashboard: {}", e.message);
        }
    });
    println!("\ndashboard (pause, resume, abort, retry and undo enabled): {url}");
    wait_for_enter("open it, then press Enter to start").await;
    Ok(Some(stop))
}

/// On a terminal, prints `what` and waits for Enter; elsewhere goes straight on.
async fn wait_for_enter(what: &str) {
    use std::io::IsTerminal;
    if !std::io::stdin().is_terminal() {
        return;
    }
    println!("{what}");
    let _ = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line)
    })
    .await;
}

/// A short suffix so runs never meet namespaces an earlier run is still deleting.
fn suffix() -> String {
    const CHARS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
        ^ u128::from(std::process::id());
    let mut s = String::new();
    for _ in 0..5 {
        let i = usize::try_from(n % CHARS.len() as u128).unwrap_or(0);
        s.push(char::from(CHARS[i]));
        n /= CHARS.len() as u128;
    }
    s
}

async fn run(args: Args) -> anyhow::Result<()> {
    let client = client_from(&args.kubeconfig).await?;
    let sfx = suffix();
    let namespace = format!("mwrs-demo-{sfx}");
    let fleet = match &args.spokes {
        Some(spokes) => Fleet::ocm(spokes).await?,
        None => Fleet::simulated(&sfx, args.clusters, args.plugin)?,
    };
    let mut demo = Demo::new(client.clone(), namespace.clone(), fleet);

    banner(&demo, &args);
    let watched = watch_in_browser(&args, &client, &namespace).await?;
    let setup = std::time::Instant::now();
    let (outcome, running) = match demo.fleet.set_up(&client, &namespace).await {
        Ok(running) => {
            demo.record("setup", setup_summary(&demo.fleet), setup.elapsed());
            (
                scenario::play(&mut demo, args.deadline()).await,
                Some(running),
            )
        }
        Err(e) => (Err(e), None),
    };
    if watched.is_some() {
        wait_for_enter("\nthe scenario is over: press Enter to clean up and stop the dashboard")
            .await;
    }
    if args.keep {
        println!("\n--keep: leaving namespace {namespace} and the clusters");
        return outcome;
    }
    println!();
    let t = std::time::Instant::now();
    let cleaned = demo.fleet.tear_down(&client, &namespace).await;
    if let Ok(n) = &cleaned {
        demo.say(&format!(
            "cleanup: MWRS deleted, {n} namespace(s) deleting ({:.1}s)",
            t.elapsed().as_secs_f64()
        ));
    }
    drop(running);
    drop(watched);
    match (outcome, cleaned) {
        (Err(e), _) => Err(e),
        (Ok(()), Err(e)) => Err(e.context("cleanup")),
        (Ok(()), Ok(_)) => Ok(()),
    }
}

fn setup_summary(fleet: &Fleet) -> String {
    let (n, groups) = (fleet.clusters().len(), fleet.groups().len());
    match fleet {
        Fleet::Simulated { .. } => {
            format!("{n} simulated clusters in {groups} groups, controller ready")
        }
        Fleet::Ocm { .. } => format!(
            "{n} clusters registered, upstream's placement controller decided {groups} \
             groups, controller ready"
        ),
    }
}

/// What the demo is about to do and how to read the timeline.
fn banner(demo: &Demo, args: &Args) {
    let n = demo.fleet.clusters().len();
    println!("MWRS demo: rollout, automatic abort, undo, rollout");
    let kind = match demo.fleet {
        Fleet::Simulated { plugin: true, .. } => {
            "simulated clusters behind the rollout plugin mwrs-feedback-plugin"
        }
        Fleet::Simulated { .. } => "simulated clusters",
        Fleet::Ocm { .. } => "clusters with upstream OCM's work agent",
    };
    println!(
        "hub: {}   namespace: {}   {kind}: {n}",
        args.kubeconfig.display(),
        demo.namespace
    );
    for (i, g) in demo.fleet.groups().iter().enumerate() {
        println!(
            "  decision group {i} {:<7} {:>2} clusters  {} .. {}",
            g.name,
            g.clusters.len(),
            g.clusters.first().map(String::as_str).unwrap_or(""),
            g.clusters.last().map(String::as_str).unwrap_or("")
        );
    }
    let spokes = match demo.fleet {
        Fleet::Simulated { .. } => "",
        Fleet::Ocm { .. } => {
            "\n  then `spokes`: the version of the ConfigMap on each cluster's own API server"
        }
    };
    println!(
        "timeline columns: Progressing status/reason, a progress bar and summary updated/desired, current and \
         update revision,\n  one char per cluster by decision group: 1/2/3 = done on v1/v2/v3, \
         a/b/c = still progressing on v1/v2/v3, . = no ManifestWork; then counts per version{spokes}"
    );
}
