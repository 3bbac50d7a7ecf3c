//! The installed MWRS CRD must carry the fields this controller stores its state in
//! (rules §10.15, §11.6). Upstream's schema would silently prune them (the API server
//! drops unknown fields on every read and write), losing the abort hold and the revision
//! pointers: the controller refuses to start against it, and [`SchemaWatch`] watches the
//! CRD for as long as it runs, so that an operator re-applying upstream's CRD stops every
//! write until the CRD is restored.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::error::{Error, Result};

pub const CRD_NAME: &str = "manifestworkreplicasets.work.open-cluster-management.io";
const VERSION: &str = "v1alpha1";

/// Schema paths (dot-separated; `[]` steps into array items) that must exist.
pub const REQUIRED: &[&str] = &[
    "spec.revisionHistoryLimit",
    "spec.placementRefs[].rolloutStrategy.failureStrategy",
    "status.currentRevision",
    "status.updateRevision",
    "status.collisionCount",
    "status.abortedTime",
    "status.observedGeneration",
    "status.handledControls",
    "status.lastAbort.revertedTo",
    "status.pluginJudged.seal",
];

/// The annotation by which OCM's cluster-manager operator decides whether to re-apply
/// its own copy of a hub CRD: it does unless the installed copy names a version at least
/// its own. `deploy/crds` sets [`OPERATOR_GUARD_VERSION`], above any OCM release.
pub const OPERATOR_VERSION_ANNOTATION: &str = "operator.open-cluster-management.io/version";
pub const OPERATOR_GUARD_VERSION: &str = "999.0.0";

/// A warning when the CRD lacks the operator guard (a hub run by OCM's cluster-manager
/// operator would get upstream's CRD back on the operator's next reconcile).
pub fn operator_guard_warning(crd: &CustomResourceDefinition) -> Option<String> {
    let version = crd
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(OPERATOR_VERSION_ANNOTATION));
    (version.map(String::as_str) != Some(OPERATOR_GUARD_VERSION)).then(|| {
        format!(
            "CRD {CRD_NAME} has {OPERATOR_VERSION_ANNOTATION}={version:?}, not \
             {OPERATOR_GUARD_VERSION}: on a hub run by OCM's cluster-manager operator, its next \
             reconcile replaces this CRD with upstream's (writes would then stop); install \
             deploy/crds from this project"
        )
    })
}

/// Reads the CRD and checks it.
pub async fn check(client: &Client) -> Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = api
        .get_opt(CRD_NAME)
        .await
        .map_err(|e| Error::kube(format!("read CRD {CRD_NAME}"), e))?
        .ok_or_else(|| Error::Crd(format!("CRD {CRD_NAME} is not installed")))?;
    let v = serde_json::to_value(&crd).map_err(|source| Error::Serialize {
        what: "CRD",
        source,
    })?;
    let missing = missing_fields(&v)?;
    if missing.is_empty() {
        if let Some(w) = operator_guard_warning(&crd) {
            tracing::warn!("{w}");
        }
        return Ok(());
    }
    Err(Error::Crd(format!(
        "CRD {CRD_NAME} version {VERSION} lacks {}; install deploy/crds from this project \
         (upstream's schema would silently drop the revision and abort state)",
        missing.join(", ")
    )))
}

/// Why a CRD (as read) cannot hold this controller's state; None when it can.
pub fn unusable(crd: &CustomResourceDefinition) -> Option<String> {
    let v = match serde_json::to_value(crd) {
        Ok(v) => v,
        Err(e) => return Some(format!("CRD {CRD_NAME} cannot be read: {e}")),
    };
    match missing_fields(&v) {
        Ok(m) if m.is_empty() => None,
        Ok(m) => Some(format!(
            "CRD {CRD_NAME} version {VERSION} lacks {} (re-applied by another installer?); \
             install deploy/crds from this project",
            m.join(", ")
        )),
        Err(e) => Some(e.to_string()),
    }
}

/// The CRD as last seen: Ok while it can hold this controller's state, else why not.
/// Fed by a watch of the one CRD for the whole run, and by a read every third of
/// `stale_after`: when no read or watch event has succeeded for `stale_after`, the CRD's
/// state is unknown and counts as unusable (rules §11.6), since another installer may have
/// replaced it meanwhile.
#[derive(Clone)]
pub struct SchemaWatch {
    rx: watch::Receiver<Result<(), String>>,
}

/// Where both feeds of a [`SchemaWatch`] send what they saw.
struct SchemaFeed {
    tx: watch::Sender<Result<(), String>>,
    metrics: std::sync::Arc<crate::metrics::Metrics>,
    /// When a read or a watch event last succeeded.
    last_seen: std::sync::Mutex<std::time::Instant>,
}

impl SchemaFeed {
    /// A successful read or event: the CRD as it is now.
    fn seen(&self, state: Result<(), String>) -> bool {
        if let Ok(mut t) = self.last_seen.lock() {
            *t = std::time::Instant::now();
        }
        self.send(state)
    }

    /// A failed read: unknown once nothing has succeeded for `stale_after`.
    fn failed(&self, error: &str, stale_after: Duration) -> bool {
        let since = self
            .last_seen
            .lock()
            .map(|t| t.elapsed())
            .unwrap_or_default();
        if since < stale_after {
            return true;
        }
        self.send(Err(format!(
            "CRD {CRD_NAME} could not be read for {}s ({error}): another installer may have \
             replaced it",
            since.as_secs()
        )))
    }

    /// Publishes `state`; false once nobody listens.
    fn send(&self, state: Result<(), String>) -> bool {
        self.metrics.crd_usable.set(i64::from(state.is_ok()));
        if *self.tx.borrow() != state {
            match &state {
                Ok(()) => tracing::info!(
                    "the ManifestWorkReplicaSet CRD holds this controller's state; writes resume"
                ),
                Err(why) => {
                    tracing::error!(%why, "the ManifestWorkReplicaSet CRD cannot hold this controller's state; every write stops")
                }
            }
        }
        self.tx.send(state).is_ok()
    }
}

impl SchemaWatch {
    /// Starts watching and reading; until the first read, the schema counts as unusable.
    pub fn start(
        client: Client,
        metrics: std::sync::Arc<crate::metrics::Metrics>,
        stale_after: Duration,
        silence: crate::silence::SilenceBounds,
    ) -> Self {
        let (tx, rx) = watch::channel(Err("the CRD has not been read yet".to_string()));
        let feed = std::sync::Arc::new(SchemaFeed {
            tx,
            metrics,
            last_seen: std::sync::Mutex::new(std::time::Instant::now()),
        });
        let api: Api<CustomResourceDefinition> = Api::all(client);
        tokio::spawn(watch_crd(api.clone(), feed.clone(), silence));
        tokio::spawn(read_crd(api, feed, stale_after));
        Self { rx }
    }
    /// Ok while the CRD can hold this controller's state.
    pub fn state(&self) -> Result<(), String> {
        self.rx.borrow().clone()
    }

    /// Resolves once the CRD can hold the state (at once if it can).
    pub async fn usable(&self) {
        let mut rx = self.rx.clone();
        let _ = rx.wait_for(Result::is_ok).await;
    }

    /// Resolves once the CRD can no longer hold the state.
    pub async fn lost(&self) {
        let mut rx = self.rx.clone();
        let _ = rx.wait_for(Result::is_err).await;
    }
}

/// The watch feed of a [`SchemaWatch`]: every change of the CRD, at once.
async fn watch_crd(
    api: Api<CustomResourceDefinition>,
    feed: std::sync::Arc<SchemaFeed>,
    silence: crate::silence::SilenceBounds,
) {
    let cfg = watcher::Config::default()
        .fields(&format!("metadata.name={CRD_NAME}"))
        .timeout(silence.watch_timeout_secs());
    let mut events = watcher::watcher(api, cfg).default_backoff().boxed();
    while let Some(ev) = events.next().await {
        let state = match ev {
            Ok(watcher::Event::Apply(c) | watcher::Event::InitApply(c)) => {
                unusable(&c).map_or(Ok(()), Err)
            }
            Ok(watcher::Event::Delete(_)) => Err(format!("CRD {CRD_NAME} was deleted")),
            Ok(_) => continue,
            Err(e) => {
                tracing::debug!(error = %e, "CRD watch error");
                continue;
            }
        };
        if !feed.seen(state) {
            return;
        }
    }
}

/// The read feed of a [`SchemaWatch`]: the CRD read every third of `stale_after` (at
/// least every second), so that a watch that keeps failing does not keep the last state.
async fn read_crd(
    api: Api<CustomResourceDefinition>,
    feed: std::sync::Arc<SchemaFeed>,
    stale_after: Duration,
) {
    let every = (stale_after / 3).max(Duration::from_secs(1));
    loop {
        tokio::time::sleep(every).await;
        let alive = match api.get_opt(CRD_NAME).await {
            Ok(Some(c)) => feed.seen(unusable(&c).map_or(Ok(()), Err)),
            Ok(None) => feed.seen(Err(format!("CRD {CRD_NAME} is not installed"))),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the ManifestWorkReplicaSet CRD");
                feed.failed(&e.to_string(), stale_after)
            }
        };
        if !alive {
            return;
        }
    }
}

/// Resolves once the API server serves MWRS through a schema that keeps this
/// controller's fields. A CRD update reaches the API server's handlers a moment after the
/// CRD object changes; a list in that moment still prunes the fields, and an abort hold
/// read so looks like no abort at all (its held revision would roll out). Probed by a
/// dry-run status patch of one MWRS, whose answer is the object as served; with no MWRS
/// in sight there is nothing to misread.
pub async fn until_served(client: &Client, namespace: Option<&str>) {
    let mut delay = Duration::from_millis(50);
    loop {
        match fields_served(client, namespace).await {
            Ok(true) => return,
            Ok(false) => tracing::info!(
                "the API server still serves ManifestWorkReplicaSets without this controller's fields; waiting"
            ),
            // A refusal (no right to patch status, a webhook that cannot dry-run) will
            // not pass by waiting: go on as before the probe.
            Err(kube::Error::Api(e)) if matches!(e.code, 400 | 403 | 422) => {
                tracing::warn!(error = %e, "cannot probe the served schema; going on");
                return;
            }
            Err(e) => tracing::debug!(error = %e, "probing the served schema"),
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(2));
    }
}

/// Does a dry-run status patch of one MWRS answer with `status.collisionCount`? The
/// answer is read untyped: any tenant's MWRS may be the one probed, readable or not.
async fn fields_served(client: &Client, namespace: Option<&str>) -> kube::Result<bool> {
    let resource = ApiResource::erase::<ManifestWorkReplicaSet>(&());
    let list: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let found = list.list_metadata(&ListParams::default().limit(1)).await?;
    let Some(m) = found.items.first() else {
        return Ok(true);
    };
    let namespace = m.namespace().unwrap_or_default();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &resource);
    let params = PatchParams {
        dry_run: true,
        ..Default::default()
    };
    let probe = json!({"status": {"collisionCount": 0}});
    let answer = api
        .patch_status(&m.name_any(), &params, &Patch::Merge(&probe))
        .await?;
    Ok(answer.data["status"]["collisionCount"].is_number())
}

/// The hub's ManifestWork CRD (OCM's work API).
const WORK_CRD_NAME: &str = "manifestworks.work.open-cluster-management.io";

/// Fields of the hub's ManifestWork spec that the MWRS CRD's template schema lacks: a
/// template that sets one has it pruned by the API server, silently (after an OCM upgrade
/// that adds a field, until this project's CRD is regenerated). Empty when either CRD
/// cannot be read (said in the log).
pub async fn template_drift(client: &Client) -> Vec<String> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let read = |name: &'static str| {
        let api = api.clone();
        async move {
            match api.get_opt(name).await {
                Ok(Some(crd)) => serde_json::to_value(crd).map_err(|e| e.to_string()),
                Ok(None) => Err("not installed".to_string()),
                Err(e) => Err(e.to_string()),
            }
        }
    };
    match (read(WORK_CRD_NAME).await, read(CRD_NAME).await) {
        (Ok(work), Ok(ours)) => template_lacks(&work, &ours),
        (work, ours) => {
            let why = [(WORK_CRD_NAME, work), (CRD_NAME, ours)]
                .into_iter()
                .filter_map(|(name, r)| r.err().map(|e| format!("{name}: {e}")))
                .collect::<Vec<_>>()
                .join("; ");
            tracing::warn!(%why, "a CRD cannot be read: the template schema is not compared with the hub's ManifestWork spec");
            Vec::new()
        }
    }
}

/// What [`template_drift`] found at start, and the MWRS already told so in this process:
/// each MWRS gets one Warning Event (`TemplateFieldsMissing`) naming the fields, since
/// which templates meant to set them cannot be known (the API server pruned them).
#[derive(Debug, Default)]
pub struct TemplateDrift {
    lacking: Vec<String>,
    told: std::sync::Mutex<std::collections::HashSet<(String, String)>>,
}

impl TemplateDrift {
    pub fn new(lacking: Vec<String>) -> Self {
        Self {
            lacking,
            told: Default::default(),
        }
    }

    /// The Event's note for MWRS `namespace/name` the first time it is asked for, else
    /// None (and always None when nothing is lacking).
    pub fn first_note(&self, namespace: &str, name: &str) -> Option<String> {
        if self.lacking.is_empty() {
            return None;
        }
        let mut told = self.told.lock().ok()?;
        told.insert((namespace.to_string(), name.to_string()))
            .then(|| {
                format!(
                    "the hub's ManifestWork spec has fields this MWRS's template cannot hold: \
                     {}; a template that sets one loses it when written (the API server \
                     prunes it). Install this project's CRD regenerated for the hub's OCM \
                     version (scripts/gen-crd.py)",
                    self.lacking.join(", ")
                )
            })
    }
}

/// Paths of the ManifestWork spec in `work_crd` (served version `v1`) that the template
/// schema of `ours` (the MWRS CRD, as JSON) does not hold.
pub fn template_lacks(work_crd: &Value, ours: &Value) -> Vec<String> {
    let served = |crd: &Value, version: &str| {
        crd["spec"]["versions"]
            .as_array()
            .and_then(|vs| vs.iter().find(|v| v["name"] == version))
            .map(|v| v["schema"]["openAPIV3Schema"].clone())
            .unwrap_or(Value::Null)
    };
    let work = served(work_crd, "v1");
    let template =
        &served(ours, VERSION)["properties"]["spec"]["properties"]["manifestWorkTemplate"];
    let mut paths = Vec::new();
    property_paths(&work["properties"]["spec"], "", &mut paths);
    paths.retain(|p| !has_path(template, p));
    paths
}

/// Every property path below `schema`, as [`has_path`] spells them (`a.b[].c`).
fn property_paths(schema: &Value, prefix: &str, out: &mut Vec<String>) {
    let Some(props) = schema["properties"].as_object() else {
        return;
    };
    for (name, node) in props {
        let mut path = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        out.push(path.clone());
        let mut node = node;
        if !node["items"].is_null() {
            path.push_str("[]");
            node = &node["items"];
        }
        property_paths(node, &path, out);
    }
}

/// Paths of [`REQUIRED`] the CRD (as JSON) does not define. A schema node that keeps
/// unknown fields accepts everything below it.
pub fn missing_fields(crd: &Value) -> Result<Vec<String>> {
    let version = crd["spec"]["versions"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["name"] == VERSION))
        .ok_or_else(|| Error::Crd(format!("CRD {CRD_NAME} does not serve {VERSION}")))?;
    if version["subresources"]["status"].is_null() {
        return Err(Error::Crd(format!(
            "CRD {CRD_NAME} {VERSION} has no status subresource"
        )));
    }
    let root = &version["schema"]["openAPIV3Schema"];
    Ok(REQUIRED
        .iter()
        .filter(|p| !has_path(root, p))
        .map(|p| (*p).to_string())
        .collect())
}

fn has_path(schema: &Value, path: &str) -> bool {
    let mut node = schema;
    for step in path.split('.') {
        if node["x-kubernetes-preserve-unknown-fields"] == Value::Bool(true)
            && node.get("properties").is_none()
        {
            return true;
        }
        let (name, items) = match step.strip_suffix("[]") {
            Some(n) => (n, true),
            None => (step, false),
        };
        node = &node["properties"][name];
        if node.is_null() {
            return false;
        }
        if items {
            node = &node["items"];
            if node.is_null() {
                return false;
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SHIPPED: &str = include_str!(
        "../../../deploy/crds/0000_00_work.open-cluster-management.io_manifestworkreplicasets.crd.yaml"
    );

    /// The shipped CRD carries the guard; one without it (or with the operator's own
    /// version, as after the operator replaced it) is warned about.
    #[test]
    fn the_shipped_crd_is_guarded_against_the_operator() {
        let shipped: CustomResourceDefinition = serde_saphyr::from_str(include_str!(
            "../../../deploy/crds/0000_00_work.open-cluster-management.io_manifestworkreplicasets.crd.yaml"
        ))
        .expect("the shipped CRD parses");
        assert_eq!(operator_guard_warning(&shipped), None);
        let mut replaced = shipped.clone();
        replaced.metadata.annotations =
            Some([(OPERATOR_VERSION_ANNOTATION.to_string(), "1.2.0".to_string())].into());
        let w = operator_guard_warning(&replaced).expect("warned");
        assert!(w.contains("1.2.0") && w.contains("deploy/crds"), "{w}");
        replaced.metadata.annotations = None;
        assert!(operator_guard_warning(&replaced).is_some());
    }

    fn crd_with(status_props: Value) -> Value {
        json!({"spec": {"versions": [{"name": "v1alpha1", "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {"properties": {
                "spec": {"properties": {
                    "revisionHistoryLimit": {"type": "integer"},
                    "placementRefs": {"items": {"properties": {"rolloutStrategy": {
                        "properties": {"failureStrategy": {"type": "string"}}}}}}}},
                "status": {"properties": status_props}}}}}]}})
    }

    #[test]
    fn a_manifestwork_field_the_template_schema_lacks_is_named() {
        let work = serde_json::json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema":
        {"properties": {"spec": {"properties": {
            "workload": {"properties": {"manifests": {"items": {"x-kubernetes-preserve-unknown-fields": true}}}},
            "manifestConfigs": {"items": {"properties": {"updateStrategy": {}, "newOption": {}}}},
        }}}}}}]}});
        let ours: Value = serde_saphyr::from_str(SHIPPED).expect("yaml");
        assert_eq!(
            template_lacks(&work, &ours),
            ["manifestConfigs[].newOption"]
        );
    }

    #[test]
    fn project_crd_passes() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../deploy/crds/0000_00_work.open-cluster-management.io_manifestworkreplicasets.crd.yaml"
        );
        let text = std::fs::read_to_string(path).expect("project CRD");
        let v: Value = serde_saphyr::from_str(&text).expect("yaml");
        assert_eq!(missing_fields(&v).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn upstream_like_crd_is_refused_with_field_names() {
        let v = crd_with(json!({"conditions": {}}));
        let missing = missing_fields(&v).unwrap();
        assert!(missing.contains(&"status.abortedTime".to_string()));
        assert!(missing.contains(&"status.updateRevision".to_string()));
        assert!(!missing.iter().any(|m| m.starts_with("spec.")));
    }

    #[test]
    fn preserve_unknown_fields_accepts_below() {
        let v = json!({"spec": {"versions": [{"name": "v1alpha1", "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {"x-kubernetes-preserve-unknown-fields": true}}}]}});
        assert!(missing_fields(&v).unwrap().is_empty());
    }
}
