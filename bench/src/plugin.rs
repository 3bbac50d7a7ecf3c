//! The rollout-plugin benchmark (issue #18): what it costs to have every cluster judged by
//! the reference plugin, `mwrs-feedback-plugin` (its own process, on loopback, as a
//! sidecar would be). One controller that registers it, one MWRS over `n` clusters whose
//! Deployment's status feedback the simulated agent reports, every cluster at once
//! (`All`), and in the same run:
//!
//! - without: v2 with no plugin named, from the change to the promotion (the reference);
//! - with: v3 naming the plugin, from the change to the promotion: every cluster is
//!   `Validating` until the plugin, reading its ManifestWork from the hub, says SUCCEEDED;
//! - the hub requests of each, the plugin's CPU, and the controller's MWRS status writes.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::bail;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_fleet::placement::{self, DecisionGroup};
use serde_json::{Value, json};

use crate::fleet_view::template;
use crate::process::{Proc, free_port, http_get, hub_requests, metric_sum_with};
use crate::sizes::{Bench, READY_WITHIN};

const NS: &str = "bench-plugin";
const NAME: &str = "judged";
/// The plugin's name in the controller's `--work-config`.
const PLUGIN: &str = "feedback";

/// What one plugin run measured.
#[derive(Debug, Default, Clone)]
pub struct PluginRow {
    pub clusters: usize,
    pub without_s: f64,
    pub with_s: f64,
    pub requests_without: f64,
    pub requests_with: f64,
    pub status_writes_without: f64,
    pub status_writes_with: f64,
    /// The controller's ManifestWork writes during each rollout.
    pub work_writes_without: f64,
    pub work_writes_with: f64,
    pub plugin_cpu_s: f64,
    pub plugin_peak_rss_bytes: u64,
    /// The template's size (KiB of padding).
    pub template_kib: usize,
    /// The controller's largest RSS sampled (every 100 ms) during each rollout.
    pub controller_rss_without: u64,
    pub controller_rss_with: u64,
}

impl PluginRow {
    pub fn ratio(&self) -> f64 {
        self.with_s / self.without_s.max(f64::EPSILON)
    }

    pub fn rss_ratio(&self) -> f64 {
        self.controller_rss_with as f64 / (self.controller_rss_without as f64).max(1.0)
    }
}

/// What one rollout measured: seconds, hub requests, MWRS status writes, the
/// controller's largest sampled RSS.
/// A rollout's time, the hub requests, the controller's status and ManifestWork writes
/// meanwhile, and its largest RSS.
type Rollout = (f64, f64, f64, f64, u64);

/// The bench's template with a feedback rule on its Deployment (the agent then reports
/// `ReadyReplicas`, `Replicas` and `AvailableReplicas`), its ConfigMap padded to about
/// `kib` KiB.
pub(crate) fn judged_template(version: &str, kib: usize) -> Value {
    let mut t = template(version);
    if kib > 0 {
        t["workload"]["manifests"][0]["data"]["padding"] = json!("x".repeat(kib * 1024));
    }
    t["manifestConfigs"] = json!([{
        "resourceIdentifier": {"group": "apps", "resource": "deployments",
            "namespace": "web", "name": "web"},
        "feedbackRules": [{"type": "WellKnownStatus"}],
    }]);
    t
}

fn strategy(plugin: bool) -> Value {
    let mut s = json!({"type": "All", "all": {"progressDeadline": "10m"}});
    if plugin {
        s["plugin"] = json!(PLUGIN);
    }
    s
}

impl Bench {
    /// The plugin run over the first `n` clusters, with the plugin binary `program`.
    pub async fn plugin_run(&self, program: &Path, n: usize) -> anyhow::Result<PluginRow> {
        placement::ensure_namespace(&self.client, NS).await?;
        let groups = [DecisionGroup::new("", self.clusters[..n].to_vec())];
        placement::publish(&self.client, NS, "fleet", &groups).await?;
        let plugin = self.start_plugin(program).await?;
        let work_config = self.args.workdir.join("work-config.yaml");
        std::fs::write(
            &work_config,
            format!(
                "plugins:\n  - name: {PLUGIN}\n    endpoint: http://{}\n",
                plugin.1
            ),
        )?;
        let extra = [
            "--work-config".to_string(),
            work_config.display().to_string(),
            "--plugin-poll".to_string(),
            "2s".to_string(),
        ];
        let (controller, addr) = self
            .start_controller_with(NS, "controller-plugin.log", &extra, READY_WITHIN)
            .await?;
        let mut row = PluginRow {
            clusters: n,
            template_kib: self.args.plugin_template_kib,
            ..PluginRow::default()
        };
        let pid = controller.pid()?;
        let mwrs: ManifestWorkReplicaSet = serde_json::from_value(json!({
            "apiVersion": "work.open-cluster-management.io/v1alpha1",
            "kind": "ManifestWorkReplicaSet",
            "metadata": {"name": NAME},
            "spec": {
                "manifestWorkTemplate": judged_template("v1", self.args.plugin_template_kib),
                "placementRefs": [{"name": "fleet", "rolloutStrategy": strategy(false)}],
            },
        }))?;
        self.mwrs_api(NS)
            .create(&PostParams::default(), &mwrs)
            .await?;
        self.promoted(n, None).await?;

        eprintln!("   without the plugin: v2");
        (
            row.without_s,
            row.requests_without,
            row.status_writes_without,
            row.work_writes_without,
            row.controller_rss_without,
        ) = self.judged_rollout("v2", false, n, (&addr, pid)).await?;
        eprintln!("   with the plugin: v3");
        (
            row.with_s,
            row.requests_with,
            row.status_writes_with,
            row.work_writes_with,
            row.controller_rss_with,
        ) = self.judged_rollout("v3", true, n, (&addr, pid)).await?;
        row.plugin_cpu_s = plugin.0.cpu_secs(self.tck)?;
        row.plugin_peak_rss_bytes = plugin.0.peak_rss()?;

        self.mwrs_api(NS)
            .delete(NAME, &DeleteParams::default())
            .await?;
        self.wait_no_works().await?;
        self.wait_gone(NS, NAME).await?;
        controller.stop().await;
        plugin.0.stop().await;
        Ok(row)
    }

    /// Starts the plugin on a free loopback port; returns it and its address once it
    /// accepts connections.
    async fn start_plugin(&self, program: &Path) -> anyhow::Result<(Proc, String)> {
        let addr = format!("127.0.0.1:{}", free_port()?);
        let config = write_plugin_config(&self.args.workdir, &addr, "Watch")?;
        let args = vec![
            "--config".to_string(),
            config.display().to_string(),
            "--kubeconfig".to_string(),
            self.args.kubeconfig.display().to_string(),
        ];
        let log = self.args.workdir.join("feedback-plugin.log");
        let p = Proc::spawn("feedback-plugin", program, &args, &log)?;
        let t = Instant::now();
        while tokio::net::TcpStream::connect(&addr).await.is_err() {
            if t.elapsed() > Duration::from_secs(30) {
                bail!(
                    "the plugin does not listen after 30s; see {}",
                    log.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok((p, addr))
    }

    /// Changes the template to `version` (and names the plugin, with `plugin`), and waits
    /// until it is promoted on all `n` clusters. Returns the time it took, the hub
    /// requests and MWRS status writes meanwhile, and the largest RSS of the controller
    /// (`pid`, serving metrics on `addr`) sampled meanwhile.
    async fn judged_rollout(
        &self,
        version: &str,
        plugin: bool,
        n: usize,
        (addr, pid): (&str, u32),
    ) -> anyhow::Result<Rollout> {
        let api = self.mwrs_api(NS);
        let before = api.get(NAME).await?;
        let old = before.status.and_then(|s| s.current_revision);
        let writes = || async {
            let m = http_get(addr, "/metrics").await.unwrap_or_default();
            let of = |r: &str| metric_sum_with(&m, "mwrs_controller_writes_total", &[r]);
            (of("resource=\"status\""), of("resource=\"manifestwork\""))
        };
        let (r0, w0) = (hub_requests(&self.client).await?, writes().await);
        let t0 = Instant::now();
        let body = json!({"spec": {
            "manifestWorkTemplate": judged_template(version, self.args.plugin_template_kib),
            "placementRefs": [{"name": "fleet", "rolloutStrategy": strategy(plugin)}],
        }});
        api.patch(NAME, &PatchParams::default(), &Patch::Merge(&body))
            .await?;
        let mut most = rss_of(pid);
        let promoted = self.promoted(n, old);
        tokio::pin!(promoted);
        loop {
            tokio::select! {
                r = &mut promoted => { r?; break; }
                _ = tokio::time::sleep(Duration::from_millis(100)) => most = most.max(rss_of(pid)),
            }
        }
        let took = t0.elapsed().as_secs_f64();
        let (r1, w1) = (hub_requests(&self.client).await?, writes().await);
        eprintln!(
            "   {took:.2}s, {:.0} hub requests, {:.0} ManifestWork writes, controller RSS up to {:.1} MiB",
            r1 - r0,
            w1.1 - w0.1,
            most as f64 / 1048576.0
        );
        Ok((took, r1 - r0, w1.0 - w0.0, w1.1 - w0.1, most))
    }

    /// Waits until a revision other than `old` is promoted on all `n` clusters.
    async fn promoted(&self, n: usize, old: Option<String>) -> anyhow::Result<()> {
        self.wait_mwrs(NS, NAME, "promoted", |m| {
            m.status.as_ref().is_some_and(|s| {
                s.current_revision.is_some()
                    && s.current_revision == s.update_revision
                    && s.current_revision != old
                    && s.summary.updated == n as i64
            })
        })
        .await
    }
}

/// The reference plugin's configuration in `dir`: listening on `addr`, reading
/// ManifestWorks by `read` (`Watch`, or `Get` with `get` access only), judging the
/// template's Deployment `web/web` by its status feedback. Returns its path.
pub(crate) fn write_plugin_config(
    dir: &Path,
    addr: &str,
    read: &str,
) -> anyhow::Result<std::path::PathBuf> {
    let config = dir.join("feedback-plugin.yaml");
    std::fs::write(
        &config,
        format!(
            "listen: {addr}\nread: {read}\nchecks:\n  - resource: {{group: apps, resource: deployments, \
             namespace: web, name: web}}\n    succeedWhen: ReadyReplicas == Replicas\n    \
             failWhen: ReadyReplicas < Replicas\n"
        ),
    )?;
    Ok(config)
}

/// The resident set of process `pid`, in bytes (0 when it cannot be read).
fn rss_of(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

pub fn print(r: &PluginRow) {
    println!(
        "\nRollout plugin, {} clusters (All, every cluster judged by mwrs-feedback-plugin):",
        r.clusters
    );
    println!(
        "  change → promoted: {:.2}s with the plugin, {:.2}s without: {:.2}x",
        r.with_s,
        r.without_s,
        r.ratio()
    );
    println!(
        "  hub requests: {:.0} with, {:.0} without; MWRS status writes: {:.0} with, {:.0} without; \
         ManifestWork writes: {:.0} with, {:.0} without",
        r.requests_with,
        r.requests_without,
        r.status_writes_with,
        r.status_writes_without,
        r.work_writes_with,
        r.work_writes_without
    );
    println!(
        "  the plugin: {:.2} cpu-s in all, peak RSS {:.1} MiB",
        r.plugin_cpu_s,
        r.plugin_peak_rss_bytes as f64 / 1048576.0
    );
    println!(
        "  the controller's RSS (template {} KiB of padding): up to {:.1} MiB with, {:.1} MiB without: {:.2}x",
        r.template_kib,
        r.controller_rss_with as f64 / 1048576.0,
        r.controller_rss_without as f64 / 1048576.0,
        r.rss_ratio()
    );
}

pub fn json(r: &PluginRow) -> Value {
    json!({
        "plugin_clusters": r.clusters,
        "without_s": r.without_s,
        "with_s": r.with_s,
        "ratio": r.ratio(),
        "hub_requests_without": r.requests_without,
        "hub_requests_with": r.requests_with,
        "status_writes_without": r.status_writes_without,
        "status_writes_with": r.status_writes_with,
        "work_writes_without": r.work_writes_without,
        "work_writes_with": r.work_writes_with,
        "plugin_cpu_s": r.plugin_cpu_s,
        "plugin_peak_rss_bytes": r.plugin_peak_rss_bytes,
        "template_kib": r.template_kib,
        "controller_rss_without_bytes": r.controller_rss_without,
        "controller_rss_with_bytes": r.controller_rss_with,
        "rss_ratio": r.rss_ratio(),
    })
}
