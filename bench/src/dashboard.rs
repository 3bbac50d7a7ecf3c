//! The dashboard at fleet scale (issue #19 item 3): `mwrs dashboard` (its own process)
//! follows one MWRS over `n` clusters while its template changes (`All`) and fans out.
//! Measured in the same run: the snapshot a page gets first, the live stream's bytes per
//! second during the fan-out against what sending the whole view at every frame would
//! have cost (the reference: a stream without diffs), and the dashboard process's CPU and
//! peak RSS.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use kube::api::{DeleteParams, PostParams};
use mwrs_fleet::placement::{self, DecisionGroup};
use mwrs_testsupport::sse::{SseEvent, SseStream, dashboard_session};
use serde_json::{Value, json};

use crate::process::Proc;
use crate::sizes::Bench;

const NS: &str = "bench-dashboard";

/// What one dashboard run measured.
#[derive(Debug, Default, Clone)]
pub struct DashboardRow {
    pub clusters: usize,
    pub snapshot_bytes: usize,
    pub fanout_s: f64,
    pub events: usize,
    pub stream_bytes: usize,
    /// What the same frames would have cost as whole views.
    pub snapshots_bytes: usize,
    pub cpu_s: f64,
    pub peak_rss_bytes: u64,
}

impl Bench {
    /// The dashboard run over the first `n` clusters, with the CLI binary `cli`.
    pub async fn dashboard_run(&self, cli: &Path, n: usize) -> anyhow::Result<DashboardRow> {
        placement::ensure_namespace(&self.client, NS).await?;
        let groups = [DecisionGroup::new("", self.clusters[..n].to_vec())];
        placement::publish(&self.client, NS, "fleet", &groups).await?;
        let (controller, _) = self
            .start_controller(NS, "controller-dashboard.log")
            .await?;
        let api = self.mwrs_api(NS);
        api.create(&PostParams::default(), &self.mwrs("app", "v1", false)?)
            .await?;
        self.wait_version("v1", n).await?;
        self.wait_mwrs(NS, "app", "complete on v1", |m| {
            m.status.as_ref().is_some_and(|s| {
                s.current_revision.is_some() && s.current_revision == s.update_revision
            })
        })
        .await?;
        let (dashboard, addr, token) = self.start_dashboard(cli).await?;

        let mut row = DashboardRow {
            clusters: n,
            ..DashboardRow::default()
        };
        let auth = format!("Bearer {token}");
        let path = format!("/api/mwrs/{NS}/app/events");
        let mut page = SseStream::open(&addr, &path, &[("Authorization", &auth)]).await?;
        let first = page.next().await?.data;
        row.snapshot_bytes = page.bytes;
        let mut view = first["view"].clone();
        let old = view["currentRevision"].clone();
        let cpu0 = dashboard.cpu_secs(self.tck)?;
        let (bytes0, t0) = (page.bytes, Instant::now());
        self.set_version(NS, "app", "v2").await?;
        let deadline = t0 + self.timeout();
        loop {
            let SseEvent { kind, data, .. } = tokio::time::timeout_at(deadline.into(), page.next())
                .await
                .context("the fan-out never showed complete on the stream")??;
            if kind != "change" {
                continue;
            }
            row.events += 1;
            apply(&mut view, &data);
            row.snapshots_bytes += serde_json::to_string(&view)?.len();
            let done = view["state"] == "Complete" && view["currentRevision"] != old;
            if done {
                break;
            }
        }
        row.fanout_s = t0.elapsed().as_secs_f64();
        row.stream_bytes = page.bytes - bytes0;
        row.cpu_s = dashboard.cpu_secs(self.tck)? - cpu0;
        row.peak_rss_bytes = dashboard.peak_rss()?;
        drop(page);
        dashboard.stop().await;
        api.delete("app", &DeleteParams::default()).await?;
        self.wait_no_works().await?;
        self.wait_gone(NS, "app").await?;
        controller.stop().await;
        Ok(row)
    }

    /// `mwrs dashboard` on the namespace; the process, its address and the session its
    /// URL's code was exchanged for.
    async fn start_dashboard(&self, cli: &Path) -> anyhow::Result<(Proc, String, String)> {
        let log = self.args.workdir.join("dashboard.log");
        let args: Vec<String> = vec![
            "--kubeconfig".into(),
            self.args.kubeconfig.display().to_string(),
            "-n".into(),
            NS.into(),
            "dashboard".into(),
        ];
        let p = Proc::spawn("dashboard", cli, &args, &log)?;
        let t = Instant::now();
        loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(rest) = text.lines().next().and_then(|l| l.strip_prefix("http://"))
                && let Some((addr, code)) = rest.split_once("/?code=")
            {
                let token = dashboard_session(addr, code).await?;
                return Ok((p, addr.to_string(), token));
            }
            if t.elapsed() > Duration::from_secs(30) {
                bail!("no URL from mwrs dashboard; see {}", log.display());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// A page's view after a `change` event.
fn apply(view: &mut Value, change: &Value) {
    let mut clusters: Vec<Value> = view["clusters"].as_array().cloned().unwrap_or_default();
    let removed: Vec<&str> = change["removed"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    clusters.retain(|c| !removed.contains(&c["cluster"].as_str().unwrap_or_default()));
    for c in change["clusters"].as_array().into_iter().flatten() {
        match clusters.iter_mut().find(|x| x["cluster"] == c["cluster"]) {
            Some(x) => *x = c.clone(),
            None => clusters.push(c.clone()),
        }
    }
    *view = change["header"].clone();
    view["clusters"] = json!(clusters);
}

pub fn print(r: &DashboardRow) {
    let mib = |b: f64| b / 1048576.0;
    println!(
        "\nDashboard, {} clusters (All; one page following the MWRS):",
        r.clusters
    );
    println!(
        "  snapshot: {:.1} KiB; the fan-out: {:.2}s, {} change events, {:.1} KiB ({:.1} KiB/s)",
        r.snapshot_bytes as f64 / 1024.0,
        r.fanout_s,
        r.events,
        r.stream_bytes as f64 / 1024.0,
        r.stream_bytes as f64 / 1024.0 / r.fanout_s.max(f64::EPSILON)
    );
    println!(
        "  against the whole view at every frame: {:.1} KiB, {:.3}x",
        r.snapshots_bytes as f64 / 1024.0,
        r.stream_bytes as f64 / r.snapshots_bytes.max(1) as f64
    );
    println!(
        "  the dashboard process: {:.2} cpu-s during the fan-out, peak RSS {:.1} MiB",
        r.cpu_s,
        mib(r.peak_rss_bytes as f64)
    );
}

pub fn json(r: &DashboardRow) -> Value {
    json!({
        "dashboard_clusters": r.clusters,
        "snapshot_bytes": r.snapshot_bytes,
        "fanout_s": r.fanout_s,
        "events": r.events,
        "stream_bytes": r.stream_bytes,
        "snapshots_bytes": r.snapshots_bytes,
        "cpu_s": r.cpu_s,
        "peak_rss_bytes": r.peak_rss_bytes,
    })
}
