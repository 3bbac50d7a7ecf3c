//! Prometheus metrics of the controller (prometheus-client, text exposition). One
//! registry per process; the reconciler, the plan executor and the HTTP server share it.

use std::collections::HashMap;
use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    /// `manifestwork`, `controllerrevision`, `status`, `finalizer`, `event`.
    pub resource: String,
    /// `create`, `update`, `relabel`, `delete`, `renumber`, `patch`.
    pub op: String,
    /// `ok`, `conflict`, `exists`, `not_found`, `error`.
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AbortLabels {
    /// `ProgressDeadlineExceeded`, `MaxFailuresExceeded` or `Requested`.
    pub trigger: String,
    /// `reverted` (back to the stable revision) or `stopped` (none to go back to).
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RolloutLabels {
    pub namespace: String,
    pub name: String,
    /// A cluster rollout status: ToApply, Progressing, Succeeded, Failed, TimeOut, Skip.
    pub status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerbLabels {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`.
    pub verb: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WatchLabels {
    /// What the watch lists, e.g. `ManifestWorks labelled …`.
    pub watch: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginLabels {
    /// The plugin's name in `--work-config`.
    pub plugin: String,
}

/// One series per MWRS, always 1: what it is now (Argo Rollouts' `rollout_info`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct InfoLabels {
    pub namespace: String,
    pub name: String,
    /// [`mwrs_engine::phase::Phase`]: Complete, Progressing, Paused, Blocked, Aborted,
    /// Degraded, Invalid.
    pub phase: String,
    /// Empty when there is none yet.
    pub current_revision: String,
    pub update_revision: String,
}

pub struct Metrics {
    pub registry: Registry,
    pub reconciles: Counter,
    pub reconcile_errors: Family<ErrorLabels, Counter>,
    pub reconcile_duration: Histogram,
    pub plan_duration: Histogram,
    /// From the first event asking for a pass over an MWRS to the pass beginning
    /// ([`crate::queue_delay`]).
    pub queue_delay: Histogram,
    /// Requests sent to the API server, by verb ([`crate::api_requests`]).
    pub api_requests: Family<VerbLabels, Counter>,
    pub writes: Family<WriteLabels, Counter>,
    pub aborts: Family<AbortLabels, Counter>,
    /// Per abort completed: from the abort to the last reverted cluster's agent reporting
    /// the stable revision applied and available.
    pub abort_to_stable: Histogram,
    /// The same per reverted cluster.
    pub abort_cluster_to_stable: Histogram,
    /// ManifestWorks on a deterministic name that another owner holds.
    pub foreign_works: Counter,
    /// ManifestWork writes the hub refused (webhook, RBAC, quota, missing namespace).
    pub refused_writes: Counter,
    pub rollout_clusters: Family<RolloutLabels, Gauge>,
    pub rollout_info: Family<InfoLabels, Gauge>,
    /// The labels of each MWRS's `rollout_info` series, so a change replaces it.
    info_of: Mutex<HashMap<(String, String), InfoLabels>>,
    pub invalid_specs: Counter,
    /// 1 while the installed MWRS CRD can hold this controller's state, else 0.
    pub crd_usable: Gauge,
    /// Fields of the hub's ManifestWork spec the MWRS template schema lacks, at start.
    pub template_fields_missing: Gauge,
    /// 1 while marks are sealed with a key of this process only ([`crate::mark_key`]).
    pub mark_key_own: Gauge,
    /// 1 while a watch has kept failing past its bound ([`crate::watch_health`]).
    pub watch_failing: Family<WatchLabels, Gauge>,
    /// When the client certificate presented to each plugin expires.
    pub plugin_client_cert_expiry: Family<PluginLabels, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut m = Self {
            registry: Registry::with_prefix("mwrs_controller"),
            reconciles: Counter::default(),
            reconcile_errors: Family::default(),
            reconcile_duration: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
            plan_duration: Histogram::new(exponential_buckets(0.000_05, 2.0, 16)),
            queue_delay: Histogram::new(exponential_buckets(0.01, 2.0, 14)),
            api_requests: Family::default(),
            writes: Family::default(),
            aborts: Family::default(),
            abort_to_stable: Histogram::new(exponential_buckets(0.5, 2.0, 15)),
            abort_cluster_to_stable: Histogram::new(exponential_buckets(0.5, 2.0, 15)),
            foreign_works: Counter::default(),
            refused_writes: Counter::default(),
            rollout_clusters: Family::default(),
            rollout_info: Family::default(),
            info_of: Mutex::default(),
            invalid_specs: Counter::default(),
            crd_usable: Gauge::default(),
            template_fields_missing: Gauge::default(),
            mark_key_own: Gauge::default(),
            watch_failing: Family::default(),
            plugin_client_cert_expiry: Family::default(),
        };
        // The order of registration is the order of the text exposition, and of the book's
        // reference.
        m.register_health();
        m.register_passes();
        m.register_actions();
        m.register_rollouts();
        m
    }

    /// The replica's health: watches, the plugins' client certificate, the mark key, the
    /// installed CRDs.
    fn register_health(&mut self) {
        self.registry.register(
            "watch_failing",
            "1 while this watch has kept failing past --watch-blind-after: its store may be stale, the replica is not ready and no deadline runs",
            self.watch_failing.clone(),
        );
        self.registry.register(
            "plugin_client_cert_expiry_timestamp_seconds",
            "When the client certificate this controller presents to each rollout plugin expires (its notAfter, seconds since the epoch); re-read when its files change. Days left: (this - time()) / 86400",
            self.plugin_client_cert_expiry.clone(),
        );
        self.registry.register(
            "mark_key_own",
            "1 while this replica seals its marks with a key of its own (the shared mark key's Secret cannot be read, or is not a mark key): another replica, or this one after a restart, asks the plugins again and writes their specs again",
            self.mark_key_own.clone(),
        );
        self.registry.register(
            "template_fields_missing",
            "Fields of the hub's ManifestWork spec that the MWRS CRD's template schema lacks (checked at start): a template setting one has it pruned silently; regenerate the CRD",
            self.template_fields_missing.clone(),
        );
        self.registry.register(
            "crd_usable",
            "1 while the installed ManifestWorkReplicaSet CRD has the fields this controller stores its state in; 0 stops every write",
            self.crd_usable.clone(),
        );
    }

    /// How the passes over MWRSs run: how many, their failures, how long they take and wait.
    fn register_passes(&mut self) {
        self.registry
            .register("reconciles", "Reconciles started", self.reconciles.clone());
        self.registry.register(
            "reconcile_errors",
            "Reconciles that failed, by error kind",
            self.reconcile_errors.clone(),
        );
        self.registry.register_with_unit(
            "reconcile_duration",
            "Wall time of one reconcile, writes included",
            Unit::Seconds,
            self.reconcile_duration.clone(),
        );
        self.registry.register_with_unit(
            "plan_duration",
            "Time the pure planner took for one MWRS",
            Unit::Seconds,
            self.plan_duration.clone(),
        );
        self.registry.register_with_unit(
            "queue_delay",
            "From the first event that asked for a pass over an MWRS to the pass beginning (debounce and the wait for a worker included); timer requeues are not counted",
            Unit::Seconds,
            self.queue_delay.clone(),
        );
    }

    /// What the passes do on the hub, and what it refuses: requests, writes, aborts and
    /// how long they took to bring the clusters back.
    fn register_actions(&mut self) {
        self.registry.register(
            "api_requests",
            "Requests sent to the API server (every client of this process, the Lease's included), by Kubernetes verb",
            self.api_requests.clone(),
        );
        self.registry.register(
            "writes",
            "Writes to the hub by resource, operation and result",
            self.writes.clone(),
        );
        self.registry.register(
            "aborts",
            "Aborts started, by trigger and outcome (reverted, or stopped: no stable revision)",
            self.aborts.clone(),
        );
        self.registry.register_with_unit(
            "abort_to_stable",
            "Per abort completed: from the abort (the pass that found the breach) to the last reverted cluster's agent reporting the stable revision applied and available",
            Unit::Seconds,
            self.abort_to_stable.clone(),
        );
        self.registry.register_with_unit(
            "abort_cluster_to_stable",
            "Per cluster an abort reverted: from the abort to its agent reporting the stable revision applied and available",
            Unit::Seconds,
            self.abort_cluster_to_stable.clone(),
        );
        self.registry.register(
            "foreign_manifestworks",
            "Creates refused because another owner holds the ManifestWork name",
            self.foreign_works.clone(),
        );
        self.registry.register(
            "refused_manifestwork_writes",
            "ManifestWork writes the hub refused (invalid, forbidden, no such namespace); the cluster counts as failed until a retry",
            self.refused_writes.clone(),
        );
    }

    /// What the passes find: each MWRS's clusters by status, its phase and revisions, invalid
    /// specs.
    fn register_rollouts(&mut self) {
        self.registry.register(
            "rollout_clusters",
            "Clusters of each MWRS by rollout status against its target revision",
            self.rollout_clusters.clone(),
        );
        self.registry.register(
            "rollout_info",
            "1 per MWRS, labelled with its phase and its current and update revisions",
            self.rollout_info.clone(),
        );
        self.registry.register(
            "invalid_specs",
            "Reconciles that found an invalid spec",
            self.invalid_specs.clone(),
        );
    }

    pub fn write(&self, resource: &str, op: &str, result: &str) {
        self.writes
            .get_or_create(&WriteLabels {
                resource: resource.to_string(),
                op: op.to_string(),
                result: result.to_string(),
            })
            .inc();
    }

    pub fn error(&self, kind: &str) {
        self.reconcile_errors
            .get_or_create(&ErrorLabels {
                kind: kind.to_string(),
            })
            .inc();
    }

    /// Sets the per-status cluster counts of one MWRS (all statuses, zeros included, so a
    /// status that empties drops to 0 instead of keeping its last value).
    pub fn set_rollout(&self, namespace: &str, name: &str, counts: &[(&str, i64)]) {
        for (status, n) in counts {
            self.rollout_clusters
                .get_or_create(&RolloutLabels {
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                    status: (*status).to_string(),
                })
                .set(*n);
        }
    }

    /// Sets the MWRS's `rollout_info` series, dropping its previous one when a label
    /// changed.
    pub fn set_info(&self, info: InfoLabels) {
        let key = (info.namespace.clone(), info.name.clone());
        if let Ok(mut known) = self.info_of.lock()
            && let Some(old) = known.insert(key, info.clone())
            && old != info
        {
            self.rollout_info.remove(&old);
        }
        self.rollout_info.get_or_create(&info).set(1);
    }

    /// Forgets a deleted MWRS's gauges.
    pub fn forget_rollout(&self, namespace: &str, name: &str, statuses: &[&str]) {
        if let Ok(mut known) = self.info_of.lock()
            && let Some(old) = known.remove(&(namespace.to_string(), name.to_string()))
        {
            self.rollout_info.remove(&old);
        }
        for status in statuses {
            self.rollout_clusters.remove(&RolloutLabels {
                namespace: namespace.to_string(),
                name: name.to_string(),
                status: (*status).to_string(),
            });
        }
    }

    /// The text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// The book's metric reference (`docs/src/reference/metrics.md`), written from a fresh
/// registry with one series of each family recorded, so that every metric, its type, its
/// help and its label names come from the code; a test keeps the checked-in page equal.
pub fn reference_markdown() -> String {
    let m = Metrics::new();
    let any = || "x".to_string();
    m.write("x", "x", "x");
    m.error("x");
    m.api_requests
        .get_or_create(&VerbLabels { verb: any() })
        .inc();
    m.watch_failing
        .get_or_create(&WatchLabels { watch: any() })
        .set(0);
    m.plugin_client_cert_expiry
        .get_or_create(&PluginLabels { plugin: any() })
        .set(0);
    m.aborts
        .get_or_create(&AbortLabels {
            trigger: any(),
            outcome: any(),
        })
        .inc();
    m.set_rollout("x", "x", &[("x", 0)]);
    m.set_info(InfoLabels {
        namespace: any(),
        name: any(),
        phase: any(),
        current_revision: any(),
        update_revision: any(),
    });
    let mut rows: Vec<(String, String, String, Vec<String>)> = Vec::new();
    for line in m.encode().lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            rows.push((
                name.to_string(),
                String::new(),
                help.to_string(),
                Vec::new(),
            ));
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            if let (Some(row), Some((_, kind))) = (rows.last_mut(), rest.split_once(' ')) {
                row.1 = kind.to_string();
            }
        } else if !line.starts_with('#')
            && let (Some(row), Some((_, labels))) = (rows.last_mut(), line.split_once('{'))
        {
            for pair in labels.split(',') {
                if let Some((key, _)) = pair.split_once('=')
                    && key != "le"
                    && !row.3.iter().any(|k| k == key)
                {
                    row.3.push(key.to_string());
                }
            }
        }
    }
    let mut page = String::from(
        "# Metrics\n\n<!-- Generated from the controller's registry \
         (crates/controller/src/metrics.rs, `reference_markdown`); `MWRS_BLESS=1 cargo test -p \
         mwrs-controller --lib metrics` rewrites it. -->\n\n\
         Served on `/metrics` (see [metrics, endpoints and alerts](../operations/metrics.md)). \
         Counters end in `_total`; histograms have `_bucket`, `_sum` and `_count` series.\n\n\
         | metric | type | labels | meaning |\n|---|---|---|---|\n",
    );
    for (name, kind, help, labels) in rows {
        let shown = if kind == "counter" {
            format!("{name}_total")
        } else {
            name
        };
        let labels = labels
            .iter()
            .map(|l| format!("`{l}`"))
            .collect::<Vec<_>>()
            .join(", ");
        page.push_str(&format!("| `{shown}` | {kind} | {labels} | {help} |\n"));
    }
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The book's metric reference is what [`reference_markdown`] writes; `MWRS_BLESS=1`
    /// rewrites it.
    #[test]
    fn the_metric_reference_is_generated_from_the_registry() {
        mwrs_testsupport::check_generated(
            "docs/src/reference/metrics.md",
            &reference_markdown(),
            "cargo test -p mwrs-controller --lib metrics",
        );
    }

    #[test]
    fn encodes_counters_with_labels() {
        let m = Metrics::new();
        m.reconciles.inc();
        m.write("manifestwork", "create", "ok");
        m.error("conflict");
        m.set_rollout("ns", "app", &[("Succeeded", 3)]);
        let text = m.encode();
        assert!(
            text.contains("mwrs_controller_reconciles_total 1"),
            "{text}"
        );
        assert!(text.contains(
            r#"mwrs_controller_writes_total{resource="manifestwork",op="create",result="ok"} 1"#
        ));
        assert!(text.contains(r#"mwrs_controller_reconcile_errors_total{kind="conflict"} 1"#));
        assert!(text.contains(
            r#"mwrs_controller_rollout_clusters{namespace="ns",name="app",status="Succeeded"} 3"#
        ));
        m.forget_rollout("ns", "app", &["Succeeded"]);
        assert!(!m.encode().contains("status=\"Succeeded\""));
    }

    #[test]
    fn one_info_series_per_mwrs() {
        let m = Metrics::new();
        let info = |phase: &str, update: &str| InfoLabels {
            namespace: "ns".into(),
            name: "app".into(),
            phase: phase.into(),
            current_revision: "a1".into(),
            update_revision: update.into(),
        };
        m.set_info(info("Complete", "a1"));
        m.set_info(info("Progressing", "b2"));
        m.set_info(info("Progressing", "b2"));
        let text = m.encode();
        let series: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("mwrs_controller_rollout_info{"))
            .collect();
        assert_eq!(
            series,
            vec![
                r#"mwrs_controller_rollout_info{namespace="ns",name="app",phase="Progressing",current_revision="a1",update_revision="b2"} 1"#
            ]
        );
        m.forget_rollout("ns", "app", &[]);
        assert!(!m.encode().contains("rollout_info{"));
    }
}
