//! `mwrs-feedback-plugin`: serves the reference rollout plugin ([`mwrs_feedback_plugin`])
//! with the checks of its config file, on the address it names.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Parser;
use kube::Client;
use mwrs_feedback_plugin::config::Config;

const VERSION: &str = env!("MWRS_VERSION");

#[derive(Parser)]
#[command(version = VERSION, about = "Rollout plugin judging clusters by ManifestWork status feedback")]
struct Args {
    /// The plugin's config file (listen address, TLS, checks).
    #[arg(long)]
    config: PathBuf,
    /// Kubeconfig of the hub (default: in-cluster or $KUBECONFIG).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
}

async fn client(path: Option<&std::path::Path>) -> anyhow::Result<Client> {
    let config = match path {
        Some(p) => {
            let kc = kube::config::Kubeconfig::read_from(p)
                .with_context(|| format!("reading kubeconfig {}", p.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?
        }
        None => kube::Config::infer().await?,
    };
    Ok(Client::try_from(config)?)
}

async fn run(args: Args) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.config)
        .with_context(|| format!("reading --config {}", args.config.display()))?;
    let config = Config::parse(&text)
        .map_err(|e| anyhow::anyhow!("--config {}: {e}", args.config.display()))?;
    let client = client(args.kubeconfig.as_deref()).await?;
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    // The bound address on the first line of stdout (a port of 0 picks one).
    println!("listening on {}", listener.local_addr()?);
    mwrs_feedback_plugin::serve(config, client, listener).await
}
#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    if let Err(e) = run(Args::parse()).await {
        eprintln!("mwrs-feedback-plugin: {e:#}");
        std::process::exit(1);
    }
}
