//! `mwrs-demo`: the README's demo. Against the hub of the kubeconfig it is given it
//! publishes a simulated fleet (cluster namespaces, a Placement and PlacementDecisions in
//! three decision groups), runs the controller and the fleet's work agent in this process,
//! and plays a scenario a person can follow on the terminal:
//!
//! 1. v1 rolls out group by group (ProgressivePerGroup, AbortAll) and completes;
//! 2. v2 hangs on the second group: the controller aborts back to v1 by itself;
//! 3. undo: the spec is rewritten from v1's ControllerRevision and completes;
//! 4. v3 rolls out and completes.
//!
//! Every change of the MWRS status or of a cluster's revision prints one timeline line;
//! every step waits for its expected state with a deadline and the demo fails (exit 1)
//! with the state it saw when a step does not get there. It deletes what it created.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use clap::Parser;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config as KubeConfig, ResourceExt};
use mwrs_api::labels;
use mwrs_api::mwrs::{LocalPlacementReference, ManifestWorkReplicaSet, ManifestWorkReplicaSetSpec};
use mwrs_api::work::{ManifestWork, ManifestWorkTemplate};
use mwrs_controller::{Config, Shared};
use mwrs_fleet::placement::{self, DecisionGroup};
use mwrs_fleet::{Agent, AgentConfig, Behaviour};
use serde_json::{Value, json};

const MWRS_NAME: &str = "web-config";
const PLACEMENT: &str = "fleet";
const GROUP_NAMES: [&str; 3] = ["canary", "wave-1", "wave-2"];
const POLL: Duration = Duration::from_millis(150);

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
    /// progressDeadline of the rollout strategy, in seconds.
    #[arg(long, default_value_t = 15)]
    deadline: u64,
    /// Leave the MWRS and namespaces on the hub at the end.
    #[arg(long)]
    keep: bool,
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

async fn client_from(path: &std::path::Path) -> anyhow::Result<Client> {
    let kc = Kubeconfig::read_from(path)
        .with_context(|| format!("reading kubeconfig {}", path.display()))?;
    let config = KubeConfig::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(config)?)
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

fn template(version: &str) -> Value {
    json!({"workload": {"manifests": [{
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "web-config", "namespace": "default"},
        "data": {"version": version, "greeting": format!("hello from {version}")},
    }]}})
}

fn version_of(spec: &Value) -> Option<&str> {
    spec.pointer("/workload/manifests/0/data/version")
        .and_then(Value::as_str)
}

/// One cluster's ManifestWork as the timeline shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct WorkView {
    hash: String,
    version: String,
    /// Progressing=False at the current generation: the agent is done with it.
    done: bool,
}

/// One look at the hub.
struct Snapshot {
    mwrs: ManifestWorkReplicaSet,
    /// cluster -> its ManifestWork
    works: BTreeMap<String, WorkView>,
}

impl Snapshot {
    fn status(&self) -> mwrs_api::mwrs::ManifestWorkReplicaSetStatus {
        self.mwrs.status.clone().unwrap_or_default()
    }

    fn condition(&self, type_: &str) -> Option<(String, String, String)> {
        self.mwrs
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == type_))
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
    }

    fn has(&self, type_: &str, status: &str, reason: &str) -> bool {
        self.condition(type_)
            .is_some_and(|(s, r, _)| s == status && r == reason)
    }

    fn progressing_reason(&self) -> String {
        self.condition("Progressing")
            .map(|(_, r, _)| r)
            .unwrap_or_else(|| "-".into())
    }

    /// Every desired cluster has a ManifestWork on `hash` that its agent finished.
    fn all_done_on(&self, hash: &str, clusters: usize) -> bool {
        self.works.len() == clusters && self.works.values().all(|w| w.hash == hash && w.done)
    }

    fn count_on(&self, hash: &str) -> usize {
        self.works.values().filter(|w| w.hash == hash).count()
    }

    fn generation_observed(&self) -> bool {
        self.status().observed_generation == self.mwrs.metadata.generation
    }
}

/// A step of the scenario and how it went.
struct StepResult {
    name: String,
    outcome: String,
    took: Duration,
}

struct Demo {
    client: Client,
    namespace: String,
    groups: Vec<DecisionGroup>,
    clusters: Vec<String>,
    start: Instant,
    last_line: String,
    /// revision hash -> version label (v1, v2, ...), learnt from ManifestWorks and revisions
    names: BTreeMap<String, String>,
    results: Vec<StepResult>,
}

impl Demo {
    fn mwrs_api(&self) -> Api<ManifestWorkReplicaSet> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    fn elapsed(&self) -> String {
        format!("{:>6.1}s", self.start.elapsed().as_secs_f64())
    }

    fn say(&self, text: &str) {
        println!("[{}] {text}", self.elapsed());
    }

    async fn snapshot(&mut self) -> anyhow::Result<Snapshot> {
        let mwrs = self
            .mwrs_api()
            .get(MWRS_NAME)
            .await
            .with_context(|| format!("reading MWRS {}/{MWRS_NAME}", self.namespace))?;
        let owner = format!("{}.{MWRS_NAME}", self.namespace);
        let lp = ListParams::default().labels(&format!("{}={owner}", labels::MWRS_OWNER));
        let list = Api::<ManifestWork>::all(self.client.clone())
            .list(&lp)
            .await
            .context("listing ManifestWorks")?;
        let mut works = BTreeMap::new();
        for w in list.items {
            let Some(ns) = w.namespace() else { continue };
            if !self.clusters.contains(&ns) || w.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let hash = w
                .labels()
                .get(labels::CONTROLLER_HASH)
                .cloned()
                .unwrap_or_default();
            let spec = w.spec.to_value();
            let version = version_of(&spec).unwrap_or("?").to_string();
            if !hash.is_empty() {
                self.names
                    .entry(hash.clone())
                    .or_insert_with(|| version.clone());
            }
            let generation = w.metadata.generation;
            let done = w
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| {
                    cs.iter().any(|c| {
                        c.type_ == "Progressing"
                            && c.status == "False"
                            && c.observed_generation == generation
                    })
                });
            works.insert(
                ns,
                WorkView {
                    hash,
                    version,
                    done,
                },
            );
        }
        Ok(Snapshot { mwrs, works })
    }

    fn name_of(&self, hash: Option<&str>) -> String {
        match hash {
            None => "-".into(),
            Some(h) => self.names.get(h).cloned().unwrap_or_else(|| h.to_string()),
        }
    }

    /// One char per cluster, decision groups split by '|'.
    fn strip(&self, snap: &Snapshot) -> String {
        let mut out = String::from("|");
        for g in &self.groups {
            for c in &g.clusters {
                let ch = match snap.works.get(c) {
                    None => '.',
                    Some(w) => {
                        let digit = w
                            .version
                            .strip_prefix('v')
                            .and_then(|d| d.chars().next())
                            .filter(char::is_ascii_digit)
                            .unwrap_or('?');
                        if w.done {
                            digit
                        } else {
                            // in flight: 1 -> a, 2 -> b, ...
                            digit
                                .to_digit(10)
                                .and_then(|d| char::from_digit(d + 9, 36))
                                .unwrap_or('*')
                        }
                    }
                };
                out.push(ch);
            }
            out.push('|');
        }
        out
    }

    /// Prints a timeline line when anything shown changed.
    fn show(&mut self, snap: &Snapshot) {
        let s = snap.status();
        let (pstatus, preason) = snap
            .condition("Progressing")
            .map(|(st, r, _)| (st, r))
            .unwrap_or_else(|| ("-".into(), "-".into()));
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for w in snap.works.values() {
            *counts.entry(w.version.clone()).or_default() += 1;
        }
        let counts = counts
            .iter()
            .map(|(v, n)| format!("{v}:{n}"))
            .collect::<Vec<_>>()
            .join(" ");
        let line = format!(
            "{:<5} {:<26} {} {:>2}/{:<2} cur={:<3} upd={:<3}{} {} {}",
            pstatus,
            preason,
            progress_bar(s.summary.updated, s.summary.desired_total),
            s.summary.updated,
            s.summary.desired_total,
            self.name_of(s.current_revision.as_deref()),
            self.name_of(s.update_revision.as_deref()),
            if s.aborted_time.is_some() {
                " ABORTED"
            } else {
                "        "
            },
            self.strip(snap),
            counts,
        );
        if line != self.last_line {
            println!("[{}] {line}", self.elapsed());
            self.last_line = line;
        }
    }

    /// Polls until `check` accepts a snapshot; fails after `timeout` with the last reason.
    async fn wait_until(
        &mut self,
        what: &str,
        timeout: Duration,
        mut check: impl FnMut(&Snapshot) -> Result<(), String>,
    ) -> anyhow::Result<Snapshot> {
        let deadline = Instant::now() + timeout;
        loop {
            let snap = self.snapshot().await?;
            self.show(&snap);
            match check(&snap) {
                Ok(()) => return Ok(snap),
                Err(why) if Instant::now() >= deadline => {
                    let s = snap.status();
                    bail!(
                        "{what}: not reached within {timeout:?}: {why}\n  status: current={:?} \
                         update={:?} aborted={:?} summary={:?}\n  conditions: {:?}",
                        s.current_revision,
                        s.update_revision,
                        s.aborted_time.map(|t| t.0.to_string()),
                        s.summary,
                        s.conditions
                            .unwrap_or_default()
                            .iter()
                            .map(|c| format!(
                                "{}={}/{}: {}",
                                c.type_, c.status, c.reason, c.message
                            ))
                            .collect::<Vec<_>>()
                    );
                }
                Err(_) => tokio::time::sleep(POLL).await,
            }
        }
    }

    fn step_header(&self, n: usize, text: &str) {
        println!();
        println!("== step {n}: {text}");
    }

    fn record(&mut self, name: &str, outcome: String, took: Duration) {
        self.say(&format!(
            "OK  {name}: {outcome} ({:.1}s)",
            took.as_secs_f64()
        ));
        self.results.push(StepResult {
            name: name.to_string(),
            outcome,
            took,
        });
    }

    async fn set_template(&self, template: &Value) -> anyhow::Result<()> {
        let patch: json_patch::Patch = serde_json::from_value(json!([
            {"op": "replace", "path": "/spec/manifestWorkTemplate", "value": template}
        ]))?;
        self.mwrs_api()
            .patch(
                MWRS_NAME,
                &PatchParams::default(),
                &Patch::Json::<()>(patch),
            )
            .await
            .context("patching spec.manifestWorkTemplate")?;
        Ok(())
    }

    /// The template stored in the ControllerRevision owned by the MWRS for `hash`.
    async fn revision_template(&self, hash: &str) -> anyhow::Result<(String, i64, Value)> {
        let mwrs = self.mwrs_api().get(MWRS_NAME).await?;
        let uid = mwrs.metadata.uid.clone().unwrap_or_default();
        let crs: Api<ControllerRevision> = Api::namespaced(self.client.clone(), &self.namespace);
        let lp = ListParams::default().labels(&format!("{}={hash}", labels::CONTROLLER_HASH));
        let found = crs
            .list(&lp)
            .await
            .context("listing ControllerRevisions")?
            .items
            .into_iter()
            .find(|cr| {
                cr.owner_references()
                    .iter()
                    .any(|o| o.controller == Some(true) && o.uid == uid)
            });
        let Some(cr) = found else {
            bail!("no ControllerRevision owned by {MWRS_NAME} carries hash {hash}");
        };
        let Some(data) = cr.data.as_ref().map(|d| d.0.clone()) else {
            bail!("ControllerRevision {} has no data", cr.name_any());
        };
        Ok((cr.name_any(), cr.revision, data))
    }

    async fn history(&self) -> anyhow::Result<Vec<(i64, String, String)>> {
        let crs: Api<ControllerRevision> = Api::namespaced(self.client.clone(), &self.namespace);
        let mut out: Vec<_> = crs
            .list(&ListParams::default())
            .await
            .context("listing ControllerRevisions")?
            .items
            .into_iter()
            .map(|cr| {
                let v = cr
                    .data
                    .as_ref()
                    .and_then(|d| version_of(&d.0).map(str::to_string))
                    .unwrap_or_else(|| "?".into());
                (cr.revision, cr.name_any(), v)
            })
            .collect();
        out.sort();
        Ok(out)
    }
}

fn expect_complete(snap: &Snapshot, hash: &str, clusters: usize) -> Result<(), String> {
    let s = snap.status();
    let mut missing = Vec::new();
    if !snap.generation_observed() {
        missing.push("observedGeneration behind".to_string());
    }
    if !snap.has("Progressing", "False", "NewManifestWorkAvailable") {
        missing.push(format!("Progressing={}", snap.progressing_reason()));
    }
    if !snap.has("PlacementRolledOut", "True", "Complete") {
        missing.push("PlacementRolledOut not Complete".into());
    }
    if s.update_revision.as_deref() != Some(hash) || s.current_revision.as_deref() != Some(hash) {
        missing.push(format!(
            "current={:?} update={:?} (want {hash})",
            s.current_revision, s.update_revision
        ));
    }
    if s.aborted_time.is_some() {
        missing.push("abortedTime still set".into());
    }
    let n = clusters as i64;
    if s.summary.updated != n || s.summary.desired_total != n {
        missing.push(format!(
            "updated {}/{} (want {n}/{n})",
            s.summary.updated, s.summary.desired_total
        ));
    }
    if !snap.all_done_on(hash, clusters) {
        missing.push(format!(
            "{} of {clusters} ManifestWorks on {hash}, not all done",
            snap.count_on(hash)
        ));
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(missing.join("; "))
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    if args.clusters < 3 {
        bail!("--clusters must be at least 3 (three decision groups)");
    }
    let client = client_from(&args.kubeconfig).await?;
    let sfx = suffix();
    let namespace = format!("mwrs-demo-{sfx}");
    let clusters: Vec<String> = (0..args.clusters)
        .map(|i| format!("demo-{sfx}-c{i:02}"))
        .collect();
    let canary = (args.clusters * 3 / 20).max(1);
    let wave1 = (args.clusters * 7 / 20).max(1);
    let groups = vec![
        DecisionGroup::new(GROUP_NAMES[0], clusters[..canary].to_vec()),
        DecisionGroup::new(GROUP_NAMES[1], clusters[canary..canary + wave1].to_vec()),
        DecisionGroup::new(GROUP_NAMES[2], clusters[canary + wave1..].to_vec()),
    ];
    let mut demo = Demo {
        client: client.clone(),
        namespace: namespace.clone(),
        groups,
        clusters,
        start: Instant::now(),
        last_line: String::new(),
        names: BTreeMap::new(),
        results: Vec::new(),
    };

    banner(&demo, &args);
    let (outcome, running) = match setup(&mut demo).await {
        Ok(running) => (scenario(&mut demo, &args).await, Some(running)),
        Err(e) => (Err(e), None),
    };
    if args.keep {
        println!("\n--keep: leaving namespace {namespace} and the cluster namespaces");
        return outcome;
    }
    let cleaned = cleanup(&mut demo).await;
    drop(running);
    match (outcome, cleaned) {
        (Err(e), _) => Err(e),
        (Ok(()), Err(e)) => Err(e.context("cleanup")),
        (Ok(()), Ok(())) => Ok(()),
    }
}

/// What the demo is about to do and how to read the timeline.
fn banner(demo: &Demo, args: &Args) {
    let n = demo.clusters.len();
    println!("MWRS demo: rollout, automatic abort, undo, rollout");
    println!(
        "hub: {}   namespace: {}   clusters: {n}",
        args.kubeconfig.display(),
        demo.namespace
    );
    for (i, g) in demo.groups.iter().enumerate() {
        println!(
            "  decision group {i} {:<7} {:>2} clusters  {} .. {}",
            g.name,
            g.clusters.len(),
            g.clusters.first().map(String::as_str).unwrap_or(""),
            g.clusters.last().map(String::as_str).unwrap_or("")
        );
    }
    println!(
        "timeline columns: Progressing status/reason, a progress bar and summary updated/desired, current and \
         update revision,\n  one char per cluster by decision group: 1/2/3 = done on v1/v2/v3, \
         a/b/c = still progressing on v1/v2/v3, . = no ManifestWork; then counts per version"
    );
}

/// The in-process controller and agents; they run until this is dropped.
struct Running {
    _controller: AbortOnDrop,
    _agent: mwrs_fleet::AgentHandle,
}

/// Namespaces, the Placement with its decisions, the controller and the agents.
async fn setup(demo: &mut Demo) -> anyhow::Result<Running> {
    let n = demo.clusters.len();
    // The fleet: namespaces, Placement and its decisions.
    let setup = Instant::now();
    placement::ensure_namespace(&demo.client, &demo.namespace).await?;
    for c in &demo.clusters {
        placement::ensure_namespace(&demo.client, c)
            .await
            .with_context(|| format!("creating namespace {c}"))?;
    }
    placement::publish(&demo.client, &demo.namespace, PLACEMENT, &demo.groups)
        .await
        .context("publishing the placement decisions")?;

    // The controller, scoped to the demo namespace, and the simulated work agents.
    let config = Config {
        namespace: Some(demo.namespace.clone()),
        ..Config::default()
    };
    let shared = Shared::default();
    let controller = tokio::spawn(mwrs_controller::run(
        demo.client.clone(),
        config,
        shared.clone(),
        std::future::pending(),
    ));
    let hang: BTreeSet<String> = demo.groups[1].clusters.iter().cloned().collect();
    let index: BTreeMap<String, u64> = demo
        .clusters
        .iter()
        .enumerate()
        .map(|(i, c)| (c.clone(), i as u64))
        .collect();
    let agent_config = AgentConfig::new(demo.clusters.clone()).behaviour(move |w| {
        if hang.contains(w.cluster) && version_of(w.spec) == Some("v2") {
            return Behaviour::Hang;
        }
        // 300 .. 900 ms, different per cluster, so the waves are visible.
        let i = index.get(w.cluster).copied().unwrap_or(0);
        Behaviour::Succeed {
            after: Duration::from_millis(300 + (i * 7 % 5) * 150),
        }
    });
    let mut agent_config = agent_config;
    agent_config.label_selector = Some(format!(
        "{}={}.{MWRS_NAME}",
        labels::MWRS_OWNER,
        demo.namespace
    ));
    let agent = Agent::start(demo.client.clone(), agent_config);
    let ready_by = Instant::now() + Duration::from_secs(30);
    while !shared.ready.load(std::sync::atomic::Ordering::Acquire) {
        if Instant::now() >= ready_by {
            bail!("the controller's watches did not sync within 30s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    demo.say(&format!(
        "fleet published ({n} cluster namespaces, Placement {PLACEMENT} with 3 decision \
         groups); controller and agents running"
    ));
    demo.record(
        "setup",
        format!("{n} clusters in 3 groups, controller ready"),
        setup.elapsed(),
    );

    Ok(Running {
        _controller: AbortOnDrop(controller),
        _agent: agent,
    })
}

async fn scenario(demo: &mut Demo, args: &Args) -> anyhow::Result<()> {
    let n = demo.clusters.len();
    let deadline = Duration::from_secs(args.deadline);
    let step_timeout = deadline * 2 + Duration::from_secs(45);

    // 1. v1
    demo.step_header(
        1,
        "create the MWRS with v1 (ProgressivePerGroup, progressDeadline, AbortAll)",
    );
    let strategy = json!({
        "type": "ProgressivePerGroup",
        "progressivePerGroup": {"progressDeadline": format!("{}s", args.deadline)},
        "failureStrategy": "AbortAll",
    });
    let mwrs = ManifestWorkReplicaSet::new(
        MWRS_NAME,
        ManifestWorkReplicaSetSpec {
            manifest_work_template: ManifestWorkTemplate::from_value(template("v1"))?,
            placement_refs: vec![LocalPlacementReference {
                name: PLACEMENT.into(),
                rollout_strategy: Some(serde_json::from_value(strategy.clone())?),
            }],
            ..Default::default()
        },
    );
    println!("   rolloutStrategy: {strategy}");
    let t = Instant::now();
    demo.mwrs_api()
        .create(&PostParams::default(), &mwrs)
        .await
        .context("creating the MWRS")?;
    let mut seen_created = false;
    let mut v1 = String::new();
    demo.wait_until("v1 rollout completes", step_timeout, |s| {
        seen_created |= s.has("Progressing", "True", "NewRevisionCreated");
        let Some(update) = s.status().update_revision else {
            return Err("no updateRevision yet".into());
        };
        v1 = update.clone();
        expect_complete(s, &update, n)?;
        if !seen_created {
            return Err("complete, but Progressing NewRevisionCreated was never seen".into());
        }
        Ok(())
    })
    .await?;
    demo.names.insert(v1.clone(), "v1".into());
    demo.record(
        "1 v1 rollout",
        format!("complete, currentRevision=v1 ({v1})"),
        t.elapsed(),
    );

    // 2. v2, hanging on the second group
    demo.step_header(
        2,
        &format!(
            "update to v2; the {} clusters of group 1 ({}) hang on v2 -> automatic abort",
            demo.groups[1].clusters.len(),
            demo.groups[1].name
        ),
    );
    let t = Instant::now();
    demo.set_template(&template("v2")).await?;
    let mut max_v2 = 0usize;
    let mut aborted_at: Option<Duration> = None;
    let mut reasons: Vec<String> = Vec::new();
    let v1c = v1.clone();
    let mut v2 = String::new();
    demo.wait_until("v2 aborts back to v1", step_timeout, |s| {
        let st = s.status();
        let reason = s.progressing_reason();
        if reasons.last() != Some(&reason) {
            reasons.push(reason);
        }
        if let Some(u) = &st.update_revision
            && *u != v1c
        {
            v2 = u.clone();
            max_v2 = max_v2.max(s.count_on(u));
        }
        if st.aborted_time.is_some() && aborted_at.is_none() {
            aborted_at = Some(t.elapsed());
        }
        let mut missing = Vec::new();
        if v2.is_empty() {
            missing.push("updateRevision still v1".to_string());
        }
        if max_v2 == 0 {
            missing.push("no cluster got v2 yet".into());
        }
        if st.aborted_time.is_none() {
            missing.push("abortedTime not set".into());
        }
        if !s.has("Progressing", "False", "RolloutAborted") {
            missing.push(format!("Progressing={}", s.progressing_reason()));
        }
        if !s.has("PlacementRolledOut", "False", "RolloutDegraded") {
            missing.push("PlacementRolledOut not RolloutDegraded".into());
        }
        if st.current_revision.as_deref() != Some(v1c.as_str()) {
            missing.push(format!("currentRevision={:?}", st.current_revision));
        }
        if !s.all_done_on(&v1c, n) {
            missing.push(format!(
                "{} of {n} ManifestWorks back on v1",
                s.count_on(&v1c)
            ));
        }
        if missing.is_empty() {
            Ok(())
        } else {
            Err(missing.join("; "))
        }
    })
    .await?;
    demo.names.insert(v2.clone(), "v2".into());
    demo.say(&format!(
        "Progressing reasons seen: {}",
        reasons.join(" -> ")
    ));
    demo.record(
        "2 v2 auto-abort",
        format!(
            "v2 reached {max_v2} clusters; abortedTime set after {:.1}s; all {n} back on v1",
            aborted_at.map(|d| d.as_secs_f64()).unwrap_or(0.0)
        ),
        t.elapsed(),
    );

    // 3. undo to v1 from its ControllerRevision
    demo.step_header(3, "undo: rewrite the spec from v1's ControllerRevision");
    let t = Instant::now();
    let (cr_name, cr_rev, data) = demo.revision_template(&v1).await?;
    println!("   ControllerRevision {cr_name} (revision {cr_rev}) -> spec.manifestWorkTemplate");
    demo.set_template(&data).await?;
    let mut seen_found = false;
    let before = demo.snapshot().await?;
    let already_on_v1 = before.all_done_on(&v1, n);
    demo.wait_until("undo to v1 completes", step_timeout, |s| {
        seen_found |= s.has("Progressing", "True", "FoundNewRevision");
        expect_complete(s, &v1, n)
    })
    .await?;
    let how = if seen_found {
        "Progressing FoundNewRevision -> complete".to_string()
    } else if already_on_v1 {
        "complete in one pass (every cluster already ran v1 after the abort, so \
         FoundNewRevision had nothing to roll)"
            .to_string()
    } else {
        bail!("undo completed without Progressing FoundNewRevision being seen");
    };
    demo.record(
        "3 undo to v1",
        format!("{how}; currentRevision=updateRevision=v1, hold cleared"),
        t.elapsed(),
    );

    // 4. v3
    demo.step_header(4, "update to v3 (every cluster succeeds)");
    let t = Instant::now();
    demo.set_template(&template("v3")).await?;
    let mut seen_created = false;
    let mut v3 = String::new();
    let v1c = v1.clone();
    let v2c = v2.clone();
    demo.wait_until("v3 rollout completes", step_timeout, |s| {
        seen_created |= s.has("Progressing", "True", "NewRevisionCreated");
        match s.status().update_revision {
            Some(u) if u != v1c && u != v2c => v3 = u,
            _ => return Err("updateRevision not yet the new one".into()),
        }
        expect_complete(s, &v3, n)?;
        if !seen_created {
            return Err("complete, but Progressing NewRevisionCreated was never seen".into());
        }
        Ok(())
    })
    .await?;
    demo.names.insert(v3.clone(), "v3".into());
    demo.record(
        "4 v3 rollout",
        format!("complete, currentRevision=v3 ({v3})"),
        t.elapsed(),
    );

    // Summary
    println!();
    println!("== revision history (ControllerRevisions owned by {MWRS_NAME})");
    for (rev, name, version) in demo.history().await? {
        println!("   revision {rev:>2}  {name:<24} {version}");
    }
    println!();
    println!("== summary");
    println!("   {:<18} {:>8}  result", "step", "duration");
    for r in &demo.results {
        println!(
            "   {:<18} {:>7.1}s  {}",
            r.name,
            r.took.as_secs_f64(),
            r.outcome
        );
    }
    println!(
        "   {:<18} {:>7.1}s",
        "total",
        demo.start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Deletes the MWRS (while the controller still runs, so its finalizer is handled), then
/// the namespaces.
async fn cleanup(demo: &mut Demo) -> anyhow::Result<()> {
    println!();
    let t = Instant::now();
    let api = demo.mwrs_api();
    match api.delete(MWRS_NAME, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => return Err(e).context("deleting the MWRS"),
    }
    let by = Instant::now() + Duration::from_secs(60);
    loop {
        match api.get_opt(MWRS_NAME).await {
            Ok(None) => break,
            Ok(Some(_)) if Instant::now() < by => tokio::time::sleep(POLL).await,
            Ok(Some(_)) => bail!("MWRS {MWRS_NAME} still present 60s after its deletion"),
            Err(e) => return Err(e).context("reading the MWRS"),
        }
    }
    let ns: Api<Namespace> = Api::all(demo.client.clone());
    let mut all = vec![demo.namespace.clone()];
    all.extend(demo.clusters.iter().cloned());
    for n in &all {
        match ns.delete(n, &DeleteParams::background()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e).with_context(|| format!("deleting namespace {n}")),
        }
    }
    demo.say(&format!(
        "cleanup: MWRS deleted, {} namespaces deleting ({:.1}s)",
        all.len(),
        t.elapsed().as_secs_f64()
    ));
    Ok(())
}

/// The in-process controller, stopped when the scenario ends.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// `[######------]`: clusters done on the update revision out of those selected.
fn progress_bar(done: i64, total: i64) -> String {
    const WIDTH: i64 = 12;
    let filled = if total > 0 {
        (done.clamp(0, total) * WIDTH) / total
    } else {
        0
    };
    let filled = usize::try_from(filled).unwrap_or(0);
    let width = usize::try_from(WIDTH).unwrap_or(0);
    format!("[{}{}]", "#".repeat(filled), "-".repeat(width - filled))
}
