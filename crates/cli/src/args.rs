//! The command line: kubectl's global flags (`--kubeconfig`, `--context`, `-n`, `-A`, `-o`),
//! the commands, and the help texts with examples and exit codes.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Exit codes, shown in `--help` and in the book's CLI reference (generated from this text).
pub const EXIT_CODES: &str = "\
Exit codes:
  0  success (rollout status: the rollout is Complete, or still going without -w)
  1  any other error (API error, unreadable file, ...)
  2  wrong usage (unknown flag, missing argument)
  3  the rollout is Degraded or its spec is Invalid (rollout status); the spec would be
     Invalid (rollout plan -f, rollout undo)
  4  the rollout is Aborted (rollout status)
  5  --timeout passed before the rollout ended (rollout status -w)
  6  not found: the MWRS, or the revision (unknown, or not owned by this MWRS)
  7  conflict: the MWRS's spec changed while undo was writing, or the hub refused a write as
     conflicting; nothing was written
  8  the hub cannot be reached (or refuses the credentials)
  9  forbidden: the credentials may not do this (RBAC)
  10 blocked: the rollout waits for someone to act: paused, or a Placement missing or
     without clusters (rollout status)";

const TOP_EXAMPLES: &str = "\
Examples:
  kubectl mwrs get -A
  kubectl mwrs rollout status app -w --timeout 10m
  kubectl mwrs rollout history app
  kubectl mwrs rollout diff app
  kubectl mwrs rollout undo app --to-revision 2
  kubectl mwrs rollout abort app
  kubectl mwrs rollout plan app -f app.yaml --fail cluster-3

Installed as `kubectl-mwrs` on PATH it runs as `kubectl mwrs`.

";

/// `mwrs` / `kubectl mwrs`.
#[derive(Parser, Debug)]
#[command(
    name = "mwrs",
    version = VERSION,
    about = "Status, history, diff, undo, abort, retry, pause and plan of ManifestWorkReplicaSet rollouts, and a dashboard",
    after_help = format!("{TOP_EXAMPLES}{EXIT_CODES}"),
    propagate_version = true
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Args, Debug, Clone)]
pub struct Global {
    /// Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, global = true, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// Namespace of the MWRS (default: the context's namespace).
    #[arg(short = 'n', long, global = true, value_name = "NS")]
    pub namespace: Option<String>,
    /// Every namespace (get, dashboard).
    #[arg(short = 'A', long = "all-namespaces", global = true)]
    pub all_namespaces: bool,
    /// Output format.
    #[arg(short = 'o', long, global = true, value_enum, default_value_t = Format::Table)]
    pub output: Format,
    /// Colour: auto (only on a terminal), always or never.
    #[arg(long, global = true, value_enum, default_value_t = ColorMode::Auto)]
    pub color: ColorMode,
    /// How long to wait for one API request (not for -w).
    #[arg(
        long = "request-timeout",
        global = true,
        default_value = "30s",
        value_name = "D"
    )]
    pub request_timeout: String,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Wide,
    Yaml,
    Json,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColorMode {
    Auto,
    Always,
    Never,
}

#[derive(Args, Debug)]
pub struct RetryArgs {
    /// The ManifestWorkReplicaSet.
    pub name: String,
    /// Roll the update revision out without asking its rollout plugins.
    #[arg(long)]
    pub skip_plugins: bool,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// List ManifestWorkReplicaSets with their rollout state.
    #[command(after_help = "\
Columns: NAME, PLACEMENTS, DESIRED (clusters selected), UPDATED (Succeeded on the update
revision), ON-TARGET (Available on the revision being rolled out: the update revision, or
the stable one while an abort reverts to it), CURRENT (stable revision), UPDATE (revision of
the spec), STATUS (Complete, Progressing, Paused, Blocked, Aborted, Degraded, Invalid), AGE.
-o wide adds REASON and MESSAGE of the Progressing condition and LAST-ABORT.

Examples:
  kubectl mwrs get
  kubectl mwrs get app -o yaml
  kubectl mwrs get -A -o wide")]
    Get(GetArgs),
    /// Manage the rollout of a ManifestWorkReplicaSet.
    Rollout {
        #[command(subcommand)]
        command: Rollout,
    },
    /// Show rollouts live in a browser (loopback, one-time token, read-only by default).
    #[command(after_help = "\
The first line of stdout is the URL to open, with the token every request needs. The page
shows every MWRS of the namespace (or of every namespace with -A); one MWRS as a grid of
its clusters by placement and decision group, with its budgets, the planned waves and an
abort's revert. It reads as you, with your kubeconfig; --enable-actions adds pause, resume,
abort, retry and undo, each after a confirmation, writing what `rollout <action>` writes.
Stop it with Ctrl-C.

Examples:
  kubectl mwrs dashboard
  kubectl mwrs dashboard -A --open
  kubectl mwrs dashboard -n team-a --enable-actions --port 8080")]
    Dashboard(DashboardArgs),
    /// Rename an MWRS's ManifestWorks to what upstream's controller expects, before it takes
    /// the MWRS back (run with this controller stopped).
    #[command(after_help = "\
Upstream's controller names a cluster's ManifestWork after the MWRS (`<name>`); this one
names it `<namespace>.<name>`. Upstream's would leave ours beside the one it creates at the
next template change, and the two would fight over the same objects on the spoke. For each
MWRS, handover creates `<name>` beside ours with the same spec and labels, waits until the
cluster's agent has applied it (the spoke objects are then owned by both), and deletes ours:
the agent only drops that owner, so no spoke object is deleted or re-created.

It refuses while this controller's leader Lease (--controller-lease) is held, or missing or
unreadable unless --controller-stopped says it is stopped, and an MWRS
whose rollout is not Complete (upstream's controller would roll its template out to every
cluster at once) unless --force. Run it again after an interruption: copies already made are
reused. Nothing is deleted before its copy is applied.

The way back to upstream's controller:
  helm uninstall mwrs-controller -n open-cluster-management-hub   # the CRD and MWRS stay
  kubectl mwrs handover -A
  # then turn the ManifestWorkReplicaSet feature gate on again in the ClusterManager

Examples:
  kubectl mwrs handover -A --dry-run
  kubectl mwrs handover app -n team-a
  kubectl mwrs handover -A --timeout 15m")]
    Handover(HandoverArgs),
    /// Turn upstream's MWRS controller off in the ClusterManager and wait until it has
    /// stopped (before installing this controller).
    #[command(after_help = "\
Both controllers would write the same ManifestWorks, so upstream's must stop first. The
cluster-manager operator reads the first entry of a feature in the ClusterManager's
spec.workConfiguration.featureGates and ignores the rest, and ManifestWorkReplicaSet is off
when no entry names it. So only a first entry with mode Enable is changed, to Disable, in
place: every other gate stays as it was (an appended Disable would be ignored, and a merge
patch would replace the whole list). The patch tests the entry first, so an edit made since
it was read fails it (run it again).

It then waits until the operator's <clustermanager>-work-controller Deployment in
--hub-namespace, and every pod of it (label app=<clustermanager>-work-controller), is gone
or no longer passes --feature-gates=ManifestWorkReplicaSet=true (the same Deployment runs
for CleanUpCompletedManifestWork). Exit 0 once stopped, 5 on --timeout.

Examples:
  kubectl mwrs disable-upstream
  kubectl mwrs disable-upstream --dry-run
  kubectl mwrs disable-upstream --cluster-manager cluster-manager --timeout 10m")]
    DisableUpstream(DisableUpstreamArgs),
    /// Rollout plugins: check one against the contract the controller holds it to.
    Plugin {
        #[command(subcommand)]
        command: PluginCommand,
    },
    /// Print a shell completion script.
    #[command(after_help = "\
Examples:
  source <(mwrs completion bash)
  mwrs completion zsh > \"${fpath[1]}/_mwrs\"
  mwrs completion fish > ~/.config/fish/completions/mwrs.fish")]
    Completion {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the version, the commit and the target this binary was built from.
    #[command(after_help = "\
Examples:
  kubectl mwrs version
  kubectl mwrs version -o json")]
    Version,
}

/// `--version` and `mwrs version`: the crate's version, the commit and the target
/// (`scripts/build-info.rs`).
pub const VERSION: &str = env!("MWRS_VERSION");

#[derive(Args, Debug)]
pub struct GetArgs {
    /// One MWRS; all in the namespace when absent.
    pub name: Option<String>,
}

#[derive(Args, Debug)]
pub struct NameArg {
    /// The ManifestWorkReplicaSet.
    pub name: String,
}

#[derive(Subcommand, Debug)]
pub enum Rollout {
    /// Progress per placement and per cluster; -w follows it to the end.
    #[command(after_help = "\
Per placement a progress bar (clusters done on the update revision), per cluster the
revision it carries, its state against the revision being rolled out (ToApply,
Progressing, Succeeded, Failed, TimeOut) and since when. Clusters that are not done are
listed first; --clusters limits the list (the placement lines always count every cluster).

With -w the command watches the hub (no polling) and ends when the rollout is Complete
(exit 0), Aborted with every cluster back on the stable revision (4), Degraded or Invalid
(3), Paused or Blocked (10: it waits for someone to act), or at --timeout (5). On a terminal the
view is redrawn in place; otherwise one line is printed per change.

Examples:
  kubectl mwrs rollout status app
  kubectl mwrs rollout status app -w --timeout 15m
  kubectl mwrs rollout status app --clusters all -o json")]
    Status(StatusArgs),
    /// Stored revisions of the template.
    #[command(after_help = "\
Columns: REVISION, HASH, CREATED, CLUSTERS (ManifestWorks carrying it now), ROLE (current:
the stable revision; update: the spec's revision being rolled out; held: the update
revision after an abort), CHANGE-CAUSE (the kubernetes.io/change-cause annotation of the
MWRS when the revision was created).

Examples:
  kubectl mwrs rollout history app
  kubectl mwrs rollout history app --revision 3
  kubectl mwrs rollout history app --revision 3 -o json")]
    History(HistoryArgs),
    /// Unified diff of two revisions' templates (as YAML).
    #[command(after_help = "\
A and B are revision numbers or hashes. Default: A = the current (stable) revision,
B = the update revision; with only A: A against the update revision.

Examples:
  kubectl mwrs rollout diff app
  kubectl mwrs rollout diff app 1 3")]
    Diff(DiffArgs),
    /// Rewrite the spec's template from a stored revision.
    #[command(after_help = "\
Default revision: while an abort holds the update revision (or aborted it), the stable one
(currentRevision); otherwise the newest revision other than the spec's that completed on
every cluster and was not aborted since. An aborted revision is only ever a target when
named with --to-revision.

The write is guarded by the spec's generation read: if the spec changed meanwhile nothing
is written (exit 7); the controller's status writes do not count. With --resource-version,
any change since that resourceVersion refuses it, status included.

After an abort, undo to the held revision changes nothing: use `rollout retry`.

With --skip-plugins the revision undo goes to rolls out without asking its rollout plugins
(mwrs.rollout.open-cluster-management.io/skip-plugins names it, in the same write).

With --dry-run -o yaml (or json) it prints only the template it would write: where Argo CD
or Flux keep the MWRS in Git, commit that as spec.manifestWorkTemplate instead of running
undo, or their self-heal writes Git's template back and rolls the bad revision out again.

Examples:
  kubectl mwrs rollout undo app
  kubectl mwrs rollout undo app --to-revision 2 --dry-run
  kubectl mwrs rollout undo app --dry-run -o yaml > template.yaml
  kubectl mwrs rollout undo app --skip-plugins")]
    Undo(UndoArgs),
    /// Abort the rollout of the update revision now: every cluster goes back to the stable revision.
    #[command(after_help = "\
Sets the annotation mwrs.rollout.open-cluster-management.io/abort to a new request token;
the controller acts on each token once (the status records it in handledControls).

Examples:
  kubectl mwrs rollout abort app")]
    Abort(NameArg),
    /// After an abort, roll the held update revision out again (fresh deadlines).
    #[command(after_help = "\
Sets the annotation mwrs.rollout.open-cluster-management.io/retry to a new request token.

With --skip-plugins the update revision rolls out without asking its rollout plugins
(mwrs.rollout.open-cluster-management.io/skip-plugins names it): the way past a plugin that
is down or holds a rollout it should not. PluginLoaded says Skipped, and an Event records it.

Examples:
  kubectl mwrs rollout retry app
  kubectl mwrs rollout retry app --skip-plugins")]
    Retry(RetryArgs),
    /// Stop starting clusters on a new revision (clusters in flight finish).
    #[command(after_help = "\
Sets mwrs.rollout.open-cluster-management.io/paused=true. An abort can still happen.

Examples:
  kubectl mwrs rollout pause app")]
    Pause(NameArg),
    /// Undo a pause.
    #[command(after_help = "\
Removes the annotation mwrs.rollout.open-cluster-management.io/paused.

Examples:
  kubectl mwrs rollout resume app")]
    Resume(NameArg),
    /// Preview the waves the strategy takes on today's decisions.
    #[command(after_help = "\
The engine's planner runs pass after pass against a simulated fleet built from the hub's
placement decisions and ManifestWorks: every cluster succeeds at once, except the ones named
with --fail, which report Degraded on the update revision (or, where a placementRef names a
rollout plugin, are reported done by their agents and judged FAILED by the plugin, which
passes every other cluster at once). Times are the strategy's own
waits (minSuccessTime, progressDeadline). With -f the MWRS is read from a file (YAML or
JSON) and need not exist on the hub yet.

Examples:
  kubectl mwrs rollout plan app
  kubectl mwrs rollout plan -f app.yaml
  kubectl mwrs rollout plan -f app.yaml --fail cluster-2 --fail cluster-7")]
    Plan(PlanArgs),
}

#[derive(Args, Debug)]
pub struct DashboardArgs {
    /// The address to listen on. One beyond loopback needs TLS (--tls-cert-file and
    /// --tls-key-file), or --insecure-listen to serve the session over plain HTTP.
    #[arg(long, default_value = "127.0.0.1")]
    pub address: std::net::IpAddr,
    /// Listen beyond loopback over plain HTTP: anyone on the path can take the session
    /// and read the hub as you (never with --enable-actions).
    #[arg(long)]
    pub insecure_listen: bool,
    /// Serve over TLS with this certificate chain (PEM), with --tls-key-file.
    #[arg(long, value_name = "PATH", requires = "tls_key_file")]
    pub tls_cert_file: Option<std::path::PathBuf>,
    /// The private key (PEM) of --tls-cert-file.
    #[arg(long, value_name = "PATH", requires = "tls_cert_file")]
    pub tls_key_file: Option<std::path::PathBuf>,
    /// The port (0: any free one).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Open the URL in a browser (xdg-open, or open on macOS).
    #[arg(long)]
    pub open: bool,
    /// Offer pause, resume, abort, retry and undo on the page (each after a
    /// confirmation, writing what the `rollout` command of the same name writes); beyond
    /// loopback only over TLS.
    #[arg(long)]
    pub enable_actions: bool,
    /// The controller's Deployment, NAMESPACE/NAME: clusters are judged with the
    /// planner settings its arguments set (--settle-time, --upstream-quirk), or with the
    /// defaults when it cannot be read (the output says which).
    #[arg(long, default_value = crate::settings::DEFAULT_CONTROLLER, value_name = "NS/NAME")]
    pub controller: String,
}

#[derive(Args, Debug)]
pub struct HandoverArgs {
    /// One MWRS; every MWRS of the namespace (or of every namespace with -A) when absent.
    pub name: Option<String>,
    /// Print what would be done and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Hand over an MWRS whose rollout is not Complete.
    #[arg(long)]
    pub force: bool,
    /// How long to wait for the agents to apply the copies of one MWRS (Go duration; 0:
    /// no limit).
    #[arg(long, default_value = "5m", value_name = "D")]
    pub timeout: String,
    /// This controller's leader Lease, NAMESPACE/NAME: no handover while it is held.
    #[arg(
        long,
        default_value = "open-cluster-management-hub/mwrs-controller",
        value_name = "NS/NAME"
    )]
    pub controller_lease: String,
    /// The controller is stopped though no Lease can say so (it ran without leader
    /// election, or its Lease cannot be read): hand over anyway. A Lease held and renewed
    /// still refuses.
    #[arg(long)]
    pub controller_stopped: bool,
}

#[derive(Args, Debug)]
pub struct DisableUpstreamArgs {
    /// The ClusterManager (cluster-scoped).
    #[arg(long, default_value = "cluster-manager", value_name = "NAME")]
    pub cluster_manager: String,
    /// Where the operator runs the hub's controllers.
    #[arg(long, default_value = "open-cluster-management-hub", value_name = "NS")]
    pub hub_namespace: String,
    /// How long to wait for upstream's controller to stop (Go duration; 0: no limit).
    #[arg(long, default_value = "5m", value_name = "D")]
    pub timeout: String,
    /// Say what would change and write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Subcommand, Debug)]
pub enum PluginCommand {
    /// Drive a rollout plugin through every call of the contract and say what the
    /// controller makes of each answer (a conformance kit for plugin authors).
    #[command(after_help = "\
The plugin is registered as the controller's --work-config registers it (the same endpoint
and certificate rules) and called with the controller's own client: Initialize, then a
simulated rollout of one cluster from revision v1 to v2 (BeginRollout, MutateManifestWork,
ProgressRollout, ValidateRolloutCompletion asked again while it answers IN_PROGRESS), then
its abort (BeginAbort, MutateManifestWork, ValidateAbortCompletion). Each line gives the
call, how long it took, what the plugin answered (cut as the controller cuts it) and what
the controller makes of it: a spec refused and why, a status that counts as the plugin
being down or as an error of the cluster, an empty verdict asked again for ever, a call
that took the whole time bound. Exit 0 when the controller can use every answer, 1 when
not. The hub is not involved: a plugin that reads it answers about a cluster it may not
know (IN_PROGRESS is a usable answer).

Examples:
  kubectl mwrs plugin check localhost:9443 --ca-file ca.pem
  kubectl mwrs plugin check judge.plugins.svc:443 --ca-file ca.pem --client-cert tls.crt --client-key tls.key
  kubectl mwrs plugin check 127.0.0.1:8080 -o json")]
    Check(PluginCheckArgs),
}

#[derive(Args, Debug)]
pub struct PluginCheckArgs {
    /// host:port, as a --work-config entry's endpoint (plaintext only on loopback).
    pub endpoint: String,
    /// The plugin's name (sent in Initialize).
    #[arg(long, default_value = "check")]
    pub name: String,
    /// PEM of the CA the plugin's certificate chains to (TLS; required off loopback).
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<std::path::PathBuf>,
    /// Client certificate (PEM) to present, as clientCertificate.certFile.
    #[arg(long, value_name = "FILE", requires = "client_key")]
    pub client_cert: Option<std::path::PathBuf>,
    /// Its key (PEM), as clientCertificate.keyFile.
    #[arg(long, value_name = "FILE", requires = "client_cert")]
    pub client_key: Option<std::path::PathBuf>,
    /// Check specs as for a plugin registered with allowManifestRemoval: true.
    #[arg(long)]
    pub allow_manifest_removal: bool,
    /// Bound on each call, retries included (Go duration; the controller's is 30s).
    #[arg(long, default_value = "30s", value_name = "D", value_parser = go_duration)]
    pub timeout: jiff::SignedDuration,
    /// How long to ask a Validate call again while it answers IN_PROGRESS.
    #[arg(long, default_value = "10s", value_name = "D", value_parser = go_duration)]
    pub validate_for: jiff::SignedDuration,
    /// Pause between those questions (the controller's --plugin-poll is 10s).
    #[arg(long, default_value = "1s", value_name = "D", value_parser = go_duration)]
    pub interval: jiff::SignedDuration,
}

fn go_duration(s: &str) -> Result<jiff::SignedDuration, String> {
    let d = mwrs_engine::rollout::parse_go_duration(s)?;
    if d.is_negative() || d.is_zero() {
        return Err("must be positive".into());
    }
    Ok(d)
}

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The ManifestWorkReplicaSet.
    pub name: String,
    /// Watch until the rollout ends.
    #[arg(short = 'w', long)]
    pub watch: bool,
    /// Give up after this long (Go duration: 90s, 10m, 1h); 0: never.
    #[arg(long, default_value = "0", value_name = "D")]
    pub timeout: String,
    /// Most per-cluster lines: a number or `all`.
    #[arg(long, default_value = "20", value_name = "N|all")]
    pub clusters: String,
    /// The controller's Deployment, NAMESPACE/NAME: clusters are judged with the
    /// planner settings its arguments set (--settle-time, --upstream-quirk), or with the
    /// defaults when it cannot be read (the output says which).
    #[arg(long, default_value = crate::settings::DEFAULT_CONTROLLER, value_name = "NS/NAME")]
    pub controller: String,
}

#[derive(Args, Debug)]
pub struct HistoryArgs {
    /// The ManifestWorkReplicaSet.
    pub name: String,
    /// Print this revision's template (number or hash).
    #[arg(long, value_name = "N")]
    pub revision: Option<String>,
}

#[derive(Args, Debug)]
pub struct DiffArgs {
    /// The ManifestWorkReplicaSet.
    pub name: String,
    /// Old revision (number or hash).
    pub a: Option<String>,
    /// New revision (number or hash).
    pub b: Option<String>,
}

#[derive(Args, Debug)]
pub struct UndoArgs {
    /// The ManifestWorkReplicaSet.
    pub name: String,
    /// Revision to go back to (number or hash).
    #[arg(long = "to-revision", value_name = "N")]
    pub to_revision: Option<String>,
    /// Print the change and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Roll the revision out without asking its rollout plugins.
    #[arg(long)]
    pub skip_plugins: bool,
    /// Write only if the MWRS is still exactly at this resourceVersion, status included
    /// (without it, only a change to the spec since the read refuses the write).
    #[arg(long = "resource-version", value_name = "RV")]
    pub resource_version: Option<String>,
    /// Write only if the spec is still at this generation (the dashboard's confirmation
    /// of what a dry run showed); not a flag.
    #[arg(skip)]
    pub generation: Option<i64>,
}

#[derive(Args, Debug)]
pub struct PlanArgs {
    /// The ManifestWorkReplicaSet (optional with -f).
    pub name: Option<String>,
    /// Read the MWRS from this file (YAML or JSON) instead of the hub.
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// A cluster that fails on the update revision (repeatable).
    #[arg(long = "fail", value_name = "CLUSTER", num_args = 1..)]
    pub fail: Vec<String>,
    /// Simulate with an upstream rollout behaviour restored, as the controller's flag of
    /// the same name does (comma-separated or repeated).
    #[arg(long = "upstream-quirk", value_name = "QUIRK", value_delimiter = ',')]
    pub upstream_quirks: Vec<mwrs_engine::rollout::Quirk>,
}

/// The process arguments; as a kubectl plugin the program calls itself `kubectl mwrs`.
pub fn argv() -> Vec<OsString> {
    let mut args: Vec<OsString> = std::env::args_os().collect();
    let plugin = args
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .is_some_and(|f| f.to_string_lossy().starts_with("kubectl-"));
    if plugin && let Some(first) = args.first_mut() {
        *first = OsString::from("kubectl mwrs");
    }
    args
}
