//! The processes the bench starts (controllers, the peer, plugins, dashboards, soak
//! replicas) as [`Proc`]: spawned with their output in a log file, killed on drop, their
//! CPU and memory read from `/proc`. Also the plain HTTP and Prometheus-text reads of
//! their metrics and of the hub's.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context as _;
use kube::Client;
use tokio::process::{Child, Command};

use crate::{cpu, measure};

pub(crate) struct Proc {
    pub(crate) child: Child,
    name: String,
}

impl Proc {
    pub(crate) fn spawn(
        name: &str,
        program: &Path,
        args: &[String],
        log: &Path,
    ) -> anyhow::Result<Self> {
        Self::spawn_with(name, program, args, &[], log)
    }

    /// [`Proc::spawn`] with `env` set for the process.
    pub(crate) fn spawn_with(
        name: &str,
        program: &Path,
        args: &[String],
        env: &[(&str, &str)],
        log: &Path,
    ) -> anyhow::Result<Self> {
        let out = std::fs::File::create(log).with_context(|| format!("{}", log.display()))?;
        let err = out.try_clone()?;
        let child = Command::new(program)
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", program.display()))?;
        Ok(Proc {
            child,
            name: name.to_string(),
        })
    }

    pub(crate) fn pid(&self) -> anyhow::Result<u32> {
        self.child
            .id()
            .ok_or_else(|| anyhow::anyhow!("{} has exited", self.name))
    }

    /// CPU seconds (user + system) of the process tree.
    pub(crate) fn cpu_secs(&self, tck: f64) -> anyhow::Result<f64> {
        Ok(cpu::tree_cpu_secs(self.pid()?, tck).unwrap_or(0.0))
    }

    /// Peak resident set size in bytes, summed over the tree (since the last
    /// [`Proc::reset_peak`]).
    pub(crate) fn peak_rss(&self) -> anyhow::Result<u64> {
        Ok(measure::tree_status_bytes(self.pid()?, "VmHWM:"))
    }

    /// Resident set size now, in bytes, summed over the tree.
    pub(crate) fn rss(&self) -> anyhow::Result<u64> {
        Ok(measure::tree_status_bytes(self.pid()?, "VmRSS:"))
    }

    /// Resolves once the process has exited (gone, or a zombie nobody has waited on),
    /// polled each second: raced against a wait on the process's work, it ends the wait
    /// when that work can no longer happen.
    pub(crate) async fn exited(&self) {
        let Ok(pid) = self.pid() else { return };
        let stat = format!("/proc/{pid}/stat");
        while std::fs::read_to_string(&stat).is_ok_and(|s| !is_zombie(&s)) {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// The peak from now on is the peak of what follows.
    pub(crate) fn reset_peak(&self) -> anyhow::Result<()> {
        measure::reset_peak(self.pid()?);
        Ok(())
    }

    /// SIGTERM, as a rollout or a drain stops a pod (a leader releases its Lease), and
    /// the wait for the exit; SIGKILL after 30 s.
    pub(crate) async fn terminate(mut self) {
        if let Ok(pid) = self.pid() {
            let _ = Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status()
                .await;
        }
        if tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .is_err()
        {
            self.stop().await;
        }
    }

    pub(crate) async fn stop(mut self) {
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
    }
}

/// Whether a `/proc/<pid>/stat` line's state is Z.
fn is_zombie(stat: &str) -> bool {
    cpu::stat_fields(stat).is_some_and(|f| f.first() == Some(&"Z"))
}

pub(crate) fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

pub(crate) fn free_port() -> anyhow::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// The body of a 200 answer to a plain HTTP GET, else None.
pub(crate) async fn http_get(addr: &str, path: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
    let req = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n");
    s.write_all(req.as_bytes()).await.ok()?;
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf).await;
    let text = String::from_utf8_lossy(&buf);
    if !(text.starts_with("HTTP/1.1 200") || text.starts_with("HTTP/1.0 200")) {
        return None;
    }
    text.split_once("\r\n\r\n").map(|(_, b)| b.to_string())
}

/// Sum of the samples of `metric` (any labels) in Prometheus text.
fn metric_sum(text: &str, metric: &str) -> f64 {
    metric_sum_with(text, metric, &[])
}

/// Sum of the samples of `metric` whose labels include every one of `labels`
/// (`name="value"`).
pub(crate) fn metric_sum_with(text: &str, metric: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(metric)
                .is_some_and(|r| r.starts_with('{') || r.starts_with(' '))
        })
        .filter(|l| labels.iter().all(|want| l.contains(want)))
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()))
        // An empty f64 sum is -0.0; print 0.
        .sum::<f64>()
        + 0.0
}

/// The ManifestWork writes (any result) a controller's metrics text counts.
pub(crate) fn manifestwork_writes(text: &str) -> f64 {
    metric_sum_with(
        text,
        "mwrs_controller_writes_total",
        &["resource=\"manifestwork\""],
    )
}

/// ManifestWork writes the hub refused so far, each one a pass that planned on an older
/// ManifestWork than the hub held: creates refused as existing, and updates refused by
/// their resourceVersion guard.
pub(crate) fn refused_writes(text: &str) -> (f64, f64) {
    let refused = |op: &str, result: &str| {
        let (op, result) = (format!("op=\"{op}\""), format!("result=\"{result}\""));
        let labels = ["resource=\"manifestwork\"", &op, &result];
        metric_sum_with(text, "mwrs_controller_writes_total", &labels)
    };
    (refused("create", "exists"), refused("update", "conflict"))
}

/// (reconciles, writes) the controller has counted so far.
pub(crate) async fn controller_counts(addr: &str) -> (f64, f64) {
    match http_get(addr, "/metrics").await {
        Some(t) => (
            metric_sum(&t, "mwrs_controller_reconciles_total"),
            metric_sum(&t, "mwrs_controller_writes_total"),
        ),
        None => (f64::NAN, f64::NAN),
    }
}

/// The hub's live Go heap (`go_gc_heap_live_bytes`: what the last collection marked).
/// Not `go_memstats_heap_alloc_bytes`, which counts garbage not yet collected too: under
/// the ceiling runs' 10 GiB `GOMEMLIMIT` the collector runs seldom, and at 300,000 that
/// read 1,181 MiB with half the MWRS and with all of them.
pub(crate) async fn hub_heap(client: &Client) -> anyhow::Result<u64> {
    Ok(hub_metric(client, "go_gc_heap_live_bytes").await? as u64)
}

/// Requests the hub has completed so far (every verb, every client).
pub(crate) async fn hub_requests(client: &Client) -> anyhow::Result<f64> {
    hub_metric(client, "apiserver_request_total").await
}

/// The sum of the hub's metric `name` now.
async fn hub_metric(client: &Client, name: &str) -> anyhow::Result<f64> {
    Ok(metric_sum(&hub_metrics(client).await?, name))
}

/// The hub's metrics text now.
pub(crate) async fn hub_metrics(client: &Client) -> anyhow::Result<String> {
    let req = http::Request::get("/metrics").body(Vec::new())?;
    Ok(client.request_text(req).await?)
}

#[cfg(test)]
mod tests {
    use super::is_zombie;

    #[test]
    fn the_state_follows_the_last_parenthesis() {
        assert!(is_zombie("42 (mwrs-controller) Z 1 42 42 0"));
        assert!(!is_zombie("42 (mwrs-controller) S 1 42 42 0"));
        assert!(!is_zombie("42 (a) Z (b)) R 1 42"));
        assert!(!is_zombie("no parenthesis"));
    }
}
