//! `mwrs-controller`: the ManifestWorkReplicaSet hub controller binary. Parses flags,
//! sets up logging, checks the CRD, serves metrics and health, optionally waits for the
//! leader lease, then runs the controller until a signal (or the loss of the lease).

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, ValueEnum};
use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config as KubeConfig};
use mwrs_controller::mark_key::KeyKeeper;
use mwrs_controller::metrics::Metrics;
use mwrs_controller::plugins::Plugins;
use mwrs_controller::silence::SilenceBounds;
use mwrs_controller::{Config, Shared, api_requests, context, crd, http, leader, run};
use mwrs_engine::PlanConfig;
use mwrs_engine::plan::{labels_not_copied, non_negative_duration};
use tracing_subscriber::EnvFilter;

/// jemalloc, purging freed pages from background threads: glibc's per-thread arenas kept
/// a fan-out's transient allocations resident for good (issue #16).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// `--version` and the start-up log: the crate's version, the commit and the target
/// (`scripts/build-info.rs`).
const VERSION: &str = env!("MWRS_VERSION");

/// ManifestWorkReplicaSet hub controller with revision history, abort and undo.
#[derive(Parser, Debug)]
#[command(version = VERSION, about)]
struct Args {
    /// Kubeconfig file (default: in-cluster config or $KUBECONFIG / ~/.kube/config).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<std::path::PathBuf>,
    /// Kubeconfig context to use.
    #[arg(long)]
    context: Option<String>,
    /// Writes in flight at once within one reconcile.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// ManifestWork writes in flight at once across every reconcile: bounds how many of
    /// this controller's requests the API server has queued ahead of its Lease renewals
    /// and of everyone else's requests.
    #[arg(long, default_value_t = 64)]
    writes_in_flight: usize,
    /// ManifestWorkReplicaSets reconciled at once.
    #[arg(long, default_value_t = 16)]
    workers: u16,
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, default_value = "127.0.0.1:8080")]
    metrics_addr: SocketAddr,
    /// How they are served. auto: plain HTTP on a loopback address; on any other, TLS
    /// with /metrics only for callers whose bearer token may `get` the non-resource URL
    /// /metrics (TokenReview + SubjectAccessReview; the probes stay open). secure /
    /// insecure force either (insecure: anyone who can connect reads /metrics).
    #[arg(long, value_enum, default_value = "auto")]
    metrics_security: http::Security,
    /// Directory holding tls.crt and tls.key (PEM) for the secure endpoint, re-read when
    /// they change; without it a self-signed certificate is made at start.
    #[arg(long)]
    metrics_cert_dir: Option<std::path::PathBuf>,
    /// Run only while holding the leader lease.
    #[arg(long)]
    leader_elect: bool,
    /// Namespace of the leader lease, and of the Secret `--mark-key-secret`.
    #[arg(long, default_value = "open-cluster-management-hub")]
    lease_namespace: String,
    /// The Secret holding the key that seals this controller's marks on ManifestWorks
    /// (rollout plugin verdicts and specs): Opaque, labelled
    /// `mwrs.rollout.open-cluster-management.io/mark-key=true`, the key in `data.key`. Made
    /// when missing if this controller may create Secrets (the chart makes it instead);
    /// read again every minute; read only when plugins are registered.
    #[arg(long, default_value = "mwrs-controller-marks")]
    mark_key_secret: String,
    /// How often the Secret `--mark-key-secret` is read again (a Go duration); a replica
    /// also reads it when it begins to lead.
    #[arg(long, default_value = "1m", value_parser = non_negative_duration)]
    mark_key_reread: jiff::SignedDuration,
    /// After the key in `--mark-key-secret` changes, how long marks sealed with the
    /// previous key are still believed (a Go duration).
    #[arg(long, default_value = "24h", value_parser = non_negative_duration)]
    mark_key_grace: jiff::SignedDuration,
    /// Largest total size of a template's manifests, in bytes.
    #[arg(long, default_value_t = mwrs_engine::validate::DEFAULT_MANIFEST_SIZE_LIMIT)]
    manifest_size_limit: usize,
    /// Only handle ManifestWorkReplicaSets of this namespace (default: all).
    #[arg(long)]
    namespace: Option<String>,
    /// Log format.
    #[arg(long, value_enum, default_value = "text")]
    log_format: LogFormat,
    /// Restore an upstream rollout behaviour this controller fixes (comma-separated or
    /// repeated): mandatory-leak, group-index-gaps, start-in-breached-group,
    /// group-walk-arithmetic. See the book's "Deviations from upstream"
    /// (docs/src/reference/deviations.md).
    #[arg(long = "upstream-quirk", value_delimiter = ',')]
    upstream_quirks: Vec<mwrs_engine::rollout::Quirk>,
    /// How long a ManifestWork's reported success, and a placement's decisions, must
    /// stay unchanged before they are trusted (Go duration, e.g. "2s"; rules §11.3, §11.5).
    #[arg(long, default_value = "2s", value_parser = non_negative_duration)]
    settle_time: jiff::SignedDuration,
    /// MWRS label keys never copied onto its ManifestWorks, comma-separated (default: the
    /// tracking labels of Argo CD and Flux, so that a GitOps tool never takes the
    /// ManifestWorks for its own and prunes them; "" copies every label, as upstream).
    #[arg(long, value_delimiter = ',', value_name = "KEYS")]
    labels_not_copied: Option<Vec<String>>,
    /// Skip the start-up check of the CRD's fields (not recommended).
    #[arg(long, hide = true)]
    skip_crd_check: bool,
    /// The file that registers rollout plugins (OCM's work-controller-config shape:
    /// `plugins: [{name, endpoint, caCertificate: {caBundle}}]`).
    #[arg(long, value_name = "FILE")]
    work_config: Option<std::path::PathBuf>,
    /// How often a cluster still Validating is asked again, and each plugin's
    /// Initialize called to see that it answers.
    #[arg(long, default_value = "10s", value_parser = non_negative_duration)]
    plugin_poll: jiff::SignedDuration,
    /// How long a watch may keep failing before this replica turns not ready, exports
    /// mwrs_controller_watch_failing and runs no deadline until every watch works again.
    #[arg(long, default_value = "2m", value_parser = non_negative_duration)]
    watch_blind_after: jiff::SignedDuration,
    /// How often every watch is ended by the API server and made again (it resumes from
    /// a bookmark, with no relist); a watch silent for this plus 5 s counts as dead, as
    /// one on a connection that died without closing does.
    #[arg(long, default_value = "60s", value_parser = non_negative_duration)]
    watch_timeout: jiff::SignedDuration,
    /// How long a pending response may go without a byte before its connection counts
    /// as dead and the request is retried. Keep it above --watch-timeout and the hub's
    /// own --request-timeout (60 s by default).
    #[arg(long, default_value = "90s", value_parser = non_negative_duration)]
    read_timeout: jiff::SignedDuration,
    /// GET this URL (a running replica's /readyz) and exit 0 if it answers without an error
    /// status, 1 if not (or not at all);
    /// nothing else runs. The chart's `helm test` runs it.
    #[arg(long, value_name = "URL")]
    probe: Option<String>,
}

/// The bounds on a silent connection (`--watch-timeout`, `--read-timeout`).
fn silence(args: &Args) -> anyhow::Result<SilenceBounds> {
    let watch = std::time::Duration::try_from(args.watch_timeout)
        .context("--watch-timeout must not be negative")?;
    let read = std::time::Duration::try_from(args.read_timeout)
        .context("--read-timeout must not be negative")?;
    SilenceBounds::new(watch, read)
        .map_err(|e| anyhow::anyhow!("--read-timeout, --watch-timeout: {e}"))
}

/// The rollout plugins `--work-config` registers (none without it).
fn plugins(args: &Args) -> anyhow::Result<Plugins> {
    use mwrs_plugin::config::WorkConfig;
    let config = match &args.work_config {
        None => WorkConfig::default(),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading --work-config {}", path.display()))?;
            WorkConfig::parse(&text).with_context(|| format!("--work-config {}", path.display()))?
        }
    };
    let poll = std::time::Duration::try_from(args.plugin_poll)
        .ok()
        .filter(|d| !d.is_zero())
        .context("--plugin-poll must be positive")?;
    let names: Vec<&str> = config.plugins.iter().map(|p| p.name.as_str()).collect();
    if !names.is_empty() {
        tracing::info!(plugins = %names.join(","), "rollout plugins registered");
    }
    Ok(Plugins::new(&config, poll, VERSION)?)
}

/// `plugins` sealing marks with the key in `--mark-key-secret`, read with retries, and
/// the keeper that reads it again while the process runs (None without plugins). Without
/// a usable key (RBAC, an unusable Secret) marks are sealed with a key of this process
/// meanwhile, which costs a verdict asked again and a spec written again after a restart
/// or failover; the log and `mwrs_controller_mark_key_own` say so.
async fn with_mark_key(
    plugins: Plugins,
    args: &Args,
    client: &kube::Client,
    metrics: Arc<mwrs_controller::metrics::Metrics>,
) -> (Arc<Plugins>, Option<Arc<KeyKeeper>>) {
    use mwrs_controller::mark_key::{self, KeyHolding, KeyKeeper, KeySecret};
    let plugins = plugins.with_manifest_size_limit(args.manifest_size_limit);
    if plugins.is_empty() {
        return (Arc::new(plugins), None);
    }
    let secret = KeySecret::new(client.clone(), &args.lease_namespace, &args.mark_key_secret);
    let holding = match secret.read_with_retries(5).await {
        Ok(key) => KeyHolding::shared(key),
        Err(e) => {
            tracing::error!(error = %e, "no shared mark key: sealing with a key of this process until it can be read; plugin verdicts are asked again and plugin specs written again after a restart or failover");
            KeyHolding::own()
        }
    };
    let plugins = Arc::new(plugins);
    let keeper = KeyKeeper::new(
        secret,
        holding,
        plugins.clone(),
        metrics,
        args.mark_key_grace,
    );
    let keeper = Arc::new(keeper);
    let every = Duration::try_from(args.mark_key_reread).unwrap_or(mark_key::DEFAULT_REREAD);
    tokio::spawn(keeper.clone().keep(every.max(Duration::from_secs(1))));
    (plugins, Some(keeper))
}

fn init_logging(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}

/// A client for `args`'s hub whose every request is counted in `metrics`.
async fn client(args: &Args, metrics: &Metrics) -> anyhow::Result<Client> {
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..Default::default()
    };
    let mut config = match &args.kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            KubeConfig::from_custom_kubeconfig(kc, &options).await?
        }
        None if args.context.is_some() => KubeConfig::from_kubeconfig(&options).await?,
        None => KubeConfig::infer().await?,
    };
    silence(args)?.apply(&mut config);
    let counting = api_requests::counting(metrics.api_requests.clone());
    Ok(ClientBuilder::try_from(config)?
        .with_layer(&counting)
        .build())
}

/// Runs the controller as a standby at once (its stores sync, its passes wait), leads
/// from the moment this replica holds the Lease, and stops when it loses it or on a
/// signal; a held Lease is released so that a standby takes over at once.
async fn lead_while_elected(
    args: &Args,
    client: Client,
    (config, plugins, keeper): (Config, Arc<Plugins>, Option<Arc<KeyKeeper>>),
    shared: Shared,
    identity: &str,
) -> anyhow::Result<()> {
    // The Lease gets a client of its own (its own request buffer and connection pool):
    // renewals and the watchdog's reads share nothing with a fan-out's writes on this
    // side of the API server.
    let lease_client = self::client(args, &shared.metrics).await?;
    let gate = leader::WriteGate::fenced();
    let (lead, leading) = leader::Leading::standby();
    let config = Config {
        write_gate: gate.clone(),
        leading,
        ..config
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let controller = tokio::spawn(run(client, config, plugins, shared, async move {
        let _ = stopped.await;
    }));
    let ns = &args.lease_namespace;
    let lease = tokio::select! {
        l = leader::Leadership::acquire(lease_client, ns, identity, gate) => {
            l.map_err(|e| lease_error(e, ns))?
        }
        _ = shutdown_signal() => {
            let _ = stop.send(());
            let _ = controller.await;
            return Ok(());
        }
    };
    if let Some(keeper) = &keeper {
        // Before the first pass as leader (bounded: a hub that does not answer delays
        // nothing for long, and the keys held stay).
        let _ = tokio::time::timeout(Duration::from_secs(5), keeper.refresh()).await;
    }
    let _ = lead.send(true);
    tokio::select! {
        _ = lease.lost() => tracing::warn!("lost leadership; stopping"),
        _ = shutdown_signal() => tracing::info!("signal received; stopping"),
    }
    let _ = stop.send(());
    let _ = controller.await;
    lease.release().await;
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

fn compat(quirks: &[mwrs_engine::rollout::Quirk]) -> mwrs_engine::rollout::Compat {
    let compat = mwrs_engine::rollout::Compat::with_quirks(quirks);
    if !quirks.is_empty() {
        let names: Vec<&str> = compat.quirks().iter().map(|q| q.name()).collect();
        tracing::warn!(quirks = %names.join(","), "upstream rollout behaviours restored");
    }
    compat
}

/// How the endpoints are served (`--metrics-security`, `--metrics-cert-dir`).
fn serving(args: &Args, client: &kube::Client) -> anyhow::Result<http::Serving> {
    if !http::is_secure(&args.metrics_addr, args.metrics_security) {
        if !args.metrics_addr.ip().is_loopback() {
            tracing::warn!(addr = %args.metrics_addr, "serving /metrics over plain HTTP to anyone who can connect (--metrics-security insecure)");
        }
        return Ok(http::Serving::Plain);
    }
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "mwrs-controller".into());
    let names = vec!["localhost".to_string(), host];
    let tls = mwrs_controller::tls::acceptor(args.metrics_cert_dir.as_deref(), &names)?;
    let access = mwrs_controller::access::Access::new(client.clone());
    Ok(http::Serving::Secure {
        tls,
        access: std::sync::Arc::new(access),
    })
}

async fn main_inner(args: Args) -> anyhow::Result<()> {
    // A broken --work-config stops the start before anything is served.
    let plugins = plugins(&args)?;
    let shared = Shared::default();
    let client = client(&args, &shared.metrics).await?;
    let (plugins, keeper) = with_mark_key(plugins, &args, &client, shared.metrics.clone()).await;
    if !args.skip_crd_check {
        crd::check(&client).await?;
    }
    let serving = serving(&args, &client)?;
    let scheme = match serving {
        http::Serving::Plain => "http",
        http::Serving::Secure { .. } => "https",
    };
    let bound = http::serve(args.metrics_addr, shared.clone(), serving)
        .await
        .with_context(|| format!("binding {}", args.metrics_addr))?;
    tracing::info!(addr = %bound, scheme, "serving /metrics, /healthz, /readyz");

    let identity = context::default_identity();
    let config = Config {
        write_concurrency: args.concurrency.max(1),
        writes_in_flight: args.writes_in_flight.max(1),
        workers: args.workers.max(1),
        namespace: args.namespace.clone(),
        plan: PlanConfig {
            manifest_size_limit: args.manifest_size_limit,
            compat: compat(&args.upstream_quirks),
            settle: args.settle_time,
            labels_not_copied: labels_not_copied(args.labels_not_copied.as_deref()),
        },
        instance: identity.clone(),
        blind_after: std::time::Duration::try_from(args.watch_blind_after)
            .context("--watch-blind-after must not be negative")?,
        silence: silence(&args)?,
        ..Config::default()
    };

    if args.leader_elect {
        let services = (config, plugins, keeper);
        lead_while_elected(&args, client, services, shared, &identity).await?;
    } else {
        run(client, config, plugins, shared, shutdown_signal()).await;
    }
    tracing::info!("controller stopped");
    Ok(())
}

/// Why leader election cannot start, in one line that says what to do.
fn lease_error(e: kube::Error, namespace: &str) -> anyhow::Error {
    let fix = "or pass another --lease-namespace";
    match e {
        kube::Error::Api(s) if s.code == 404 => anyhow::anyhow!(
            "leader election: namespace {namespace:?} does not exist: create it, {fix}"
        ),
        kube::Error::Api(s) if s.code == 403 => anyhow::anyhow!(
            "leader election: forbidden to use Leases in namespace {namespace:?}: bind the \
             leader-election Role of deploy/rbac/rbac.yaml there, {fix}"
        ),
        kube::Error::Api(s) => anyhow::anyhow!(
            "leader election in namespace {namespace:?}: {} (--lease-namespace)",
            s.message
        ),
        e => anyhow::anyhow!("leader election in namespace {namespace:?}: {e} (--lease-namespace)"),
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(url) = &args.probe {
        return match http::probe(url).await {
            Ok(body) => {
                println!("{url}: {}", body.trim());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("mwrs-controller --probe: {e}");
                ExitCode::FAILURE
            }
        };
    }
    init_logging(args.log_format);
    tracing::info!(version = VERSION, "mwrs-controller starting");
    // Freed pages go back to the system within jemalloc's decay time (10 s), also while
    // the controller is idle; without the background threads only a later allocation
    // would purge them.
    if let Err(e) = tikv_jemalloc_ctl::background_thread::write(true) {
        tracing::warn!(error = %e, "jemalloc background threads not started");
    }
    match main_inner(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "mwrs-controller failed");
            eprintln!("mwrs-controller: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use mwrs_engine::rollout::Quirk;

    #[test]
    fn lease_errors_are_one_line_naming_the_namespace() {
        let api = |code: u16| {
            kube::Error::Api(Box::new(kube::core::Status {
                code,
                message: format!("status {code} from the API server"),
                ..Default::default()
            }))
        };
        for (code, says) in [
            (404, "does not exist"),
            (403, "forbidden"),
            (500, "status 500"),
        ] {
            let line = format!("{:#}", lease_error(api(code), "ocm"));
            assert!(line.contains(says) && line.contains("\"ocm\""), "{line}");
            assert!(
                line.contains("--lease-namespace") && !line.contains('\n'),
                "{line}"
            );
        }
    }

    #[test]
    fn upstream_quirks_parse_by_name_and_reject_unknown_ones() {
        let args = Args::try_parse_from([
            "mwrs-controller",
            "--upstream-quirk",
            "mandatory-leak,group-walk-arithmetic",
        ])
        .unwrap();
        assert_eq!(
            args.upstream_quirks,
            vec![Quirk::MandatoryLeak, Quirk::GroupWalkArithmetic]
        );
        let c = compat(&args.upstream_quirks);
        assert!(c.upstream_mandatory_leak && c.upstream_group_walk_arithmetic);
        assert!(!c.upstream_group_index_gaps && !c.upstream_start_in_breached_group);

        let err = Args::try_parse_from(["mwrs-controller", "--upstream-quirk", "leak"])
            .expect_err("unknown quirk");
        assert!(err.to_string().contains("group-index-gaps"), "{err}");

        let none = Args::try_parse_from(["mwrs-controller"]).unwrap();
        assert_eq!(compat(&none.upstream_quirks), Default::default());
    }
}
