//! Helpers for integration tests on the real test hub (`scripts/hub.sh`):
//!
//! - [`TestHub::from_env`]: a client from `MWRS_TEST_KUBECONFIG`, a unique test namespace
//!   and unique cluster namespaces, all deleted on drop; without the variable the test is
//!   skipped with a printed reason (or fails when `CI=true`);
//! - placement publication (via the simulated fleet) and MWRS builders;
//! - [`wait_for`]: polling with a deadline — tests synchronise on conditions, never on
//!   fixed sleeps;
//! - [`TaskGuard`] (an in-process controller or agent, aborted on drop) and
//!   [`ChildProcess`] (the controller binary, killed on drop, for restart tests);
//! - [`sse`]: a Server-Sent Events stream, as a dashboard page reads it;
//! - [`silent_proxy`]: a TCP proxy whose connections can go silent without closing.

pub mod silent_proxy;
pub mod sse;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::Event;
use kube::{Client, Config, ResourceExt};
use mwrs_api::labels;
use mwrs_api::mwrs::{LocalPlacementReference, ManifestWorkReplicaSet, ManifestWorkReplicaSetSpec};
use mwrs_api::work::{ManifestWork, ManifestWorkTemplate};
use mwrs_fleet::placement::{self, DecisionGroup};
use rand::Rng;
use serde_json::{Value, json};

pub use mwrs_fleet;

/// Environment variable naming the test hub's kubeconfig.
pub const KUBECONFIG_ENV: &str = "MWRS_TEST_KUBECONFIG";
/// Set to keep the namespaces of a test after it ends (debugging).
pub const KEEP_ENV: &str = "MWRS_TEST_KEEP";

/// One test's slice of the hub.
pub struct TestHub {
    pub client: Client,
    pub kubeconfig: PathBuf,
    /// Namespace of the MWRS, Placements and revisions.
    pub namespace: String,
    /// Cluster namespaces (namespace name == cluster name).
    pub clusters: Vec<String>,
    /// Whether the cluster namespaces are this test's own, deleted with it (false when
    /// tests share clusters, as the end-to-end tests do).
    pub owns_clusters: bool,
}

/// Initialises test logging once (RUST_LOG, default `warn,mwrs_controller=info`).
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,mwrs_controller=info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

/// A client for the kubeconfig at `path`.
pub async fn client_from(path: &Path) -> anyhow::Result<Client> {
    let kc = Kubeconfig::read_from(path)?;
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(config)?)
}

/// A token of ServiceAccount `ns/sa` (created if missing), from the TokenRequest API,
/// valid for a day: longer than the longest fault soak (bench/soak/) that runs on it.
pub async fn service_account_token(c: &Client, ns: &str, sa: &str) -> anyhow::Result<String> {
    let api = Api::<ServiceAccount>::namespaced(c.clone(), ns);
    let body = json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": sa, "namespace": ns}});
    api.patch(
        sa,
        &PatchParams::apply("mwrs-tests").force(),
        &Patch::Apply(&body),
    )
    .await?;
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            audiences: None,
            expiration_seconds: Some(24 * 3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    let token: TokenRequest = api
        .create_subresource("token", sa, &PostParams::default(), &request)
        .await?;
    token
        .status
        .and_then(|s| s.token)
        .ok_or_else(|| anyhow::anyhow!("TokenRequest without a token"))
}

/// A kubeconfig that authenticates as ServiceAccount `ns/sa` (see
/// [`service_account_token`]) on the hub of `hub_kubeconfig`, written beside it (gone with
/// the hub's state); its path.
pub async fn service_account_kubeconfig(
    c: &Client,
    hub_kubeconfig: &Path,
    ns: &str,
    sa: &str,
) -> anyhow::Result<PathBuf> {
    let token = service_account_token(c, ns, sa).await?;
    let mut kc = Kubeconfig::read_from(hub_kubeconfig)?;
    for user in &mut kc.auth_infos {
        user.auth_info = Some(kube::config::AuthInfo {
            token: Some(token.clone().into()),
            ..Default::default()
        });
    }
    let path = hub_kubeconfig.with_file_name(format!("kubeconfig-{sa}-{ns}.json"));
    std::fs::write(&path, serde_json::to_vec(&kc)?)?;
    Ok(path)
}

fn random_suffix() -> String {
    const CHARS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..6)
        .map(|_| char::from(CHARS[rng.random_range(0..CHARS.len())]))
        .collect()
}

/// Reports `test` skipped for want of a hub, or fails it when `CI=true`.
fn skip_without_hub(test: &str) {
    let why = format!(
        "{KUBECONFIG_ENV} is not set: start the test hub with `scripts/hub.sh up` and \
         `eval \"$(scripts/hub.sh env)\"`"
    );
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("CI=true and {why}");
    }
    eprintln!("SKIPPED {test}: {why}");
}

/// The raw answer (status line, headers and body) of a plain `GET path` to the HTTP
/// server at `addr`, read until it closes the connection.
pub async fn raw_get(addr: std::net::SocketAddr, path: &str) -> std::io::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .await?;
    let mut out = String::new();
    s.read_to_string(&mut out).await?;
    Ok(out)
}

/// A test hub of one test's own (`scripts/hub.sh` on a state directory of its own), for
/// the tests that crash it. Stopped and removed when dropped.
pub struct PrivateHub {
    dir: PathBuf,
    pub kubeconfig: PathBuf,
}

impl PrivateHub {
    /// Starts a hub for `test`; None (skipped) where the shared hub is not set up either,
    /// since both are built by the same script.
    pub fn start(test: &str) -> Option<Self> {
        if std::env::var_os(KUBECONFIG_ENV).is_none_or(|p| p.is_empty()) {
            skip_without_hub(test);
            return None;
        }
        let dir = std::env::temp_dir().join(format!("mwrs-hub-{test}-{}", random_suffix()));
        let out = Self::script(&dir, "up");
        let kubeconfig = PathBuf::from(out.trim());
        Some(Self { dir, kubeconfig })
    }

    /// Kills the API server and etcd at once, as a crash, and starts them again on their
    /// data, port and credentials (`scripts/hub.sh crash-restart`).
    pub fn crash_restart(&self) {
        Self::script(&self.dir, "crash-restart");
    }

    /// The state directory (the hub's log is `hub.log` in it).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn script(dir: &Path, command: &str) -> String {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let out = std::process::Command::new(root.join("scripts/hub.sh"))
            .arg(command)
            .env("MWRS_HUB_DIR", dir)
            .env_remove("MWRS_HUB_ARGS")
            .output()
            .unwrap_or_else(|e| panic!("scripts/hub.sh {command}: {e}"));
        assert!(
            out.status.success(),
            "scripts/hub.sh {command}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for PrivateHub {
    fn drop(&mut self) {
        let _ = std::process::Command::new(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/hub.sh"),
        )
        .arg("down")
        .env("MWRS_HUB_DIR", &self.dir)
        .output();
        if std::env::var_os(KEEP_ENV).is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

impl TestHub {
    /// The hub of `MWRS_TEST_KUBECONFIG` with a fresh namespace `t-<test>-<suffix>` and
    /// `clusters` cluster namespaces `<test>-<suffix>-<i>`. None (test skipped) when the
    /// variable is unset, unless `CI=true`, where that is a failure.
    pub async fn from_env(test: &str, clusters: usize) -> Option<Self> {
        let Some(path) = std::env::var_os(KUBECONFIG_ENV).filter(|p| !p.is_empty()) else {
            skip_without_hub(test);
            return None;
        };
        Some(Self::at(PathBuf::from(path), test, clusters).await)
    }

    /// [`TestHub::from_env`] on the hub of `kubeconfig`.
    pub async fn at(kubeconfig: PathBuf, test: &str, clusters: usize) -> Self {
        init_tracing();
        let client = match client_from(&kubeconfig).await {
            Ok(c) => c,
            Err(e) => panic!("cannot build a client from {}: {e:#}", kubeconfig.display()),
        };
        let suffix = random_suffix();
        // Namespace names are DNS labels: keep the test part short and lower-case.
        let short: String = test
            .to_ascii_lowercase()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .take(30)
            .collect::<String>()
            .trim_matches('-')
            .to_string();
        let hub = Self {
            client,
            kubeconfig,
            namespace: format!("t-{short}-{suffix}"),
            clusters: (0..clusters)
                .map(|i| format!("{short}-{suffix}-{i:03}"))
                .collect(),
            owns_clusters: true,
        };
        let mut all = vec![hub.namespace.clone()];
        all.extend(hub.clusters.iter().cloned());
        for ns in &all {
            if let Err(e) = placement::ensure_namespace(&hub.client, ns).await {
                panic!("cannot create namespace {ns}: {e}");
            }
        }
        hub
    }

    /// A token of ServiceAccount `sa` of the test's namespace; see [`service_account_token`].
    pub async fn service_account_token(&self, sa: &str) -> anyhow::Result<String> {
        service_account_token(&self.client, &self.namespace, sa).await
    }

    /// Gives ServiceAccount `sa` of the test's namespace cluster-wide `rules` (RBAC rule
    /// objects) through a ClusterRole and ClusterRoleBinding named after the test; called
    /// again, it replaces the rules. [`TestHub::revoke`] removes both.
    pub async fn grant(&self, sa: &str, rules: Value) {
        let name = format!("mwrs-tests-{}", self.namespace);
        let apply = PatchParams::apply("mwrs-tests").force();
        let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name}, "rules": rules});
        let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": self.namespace}]});
        let r = Api::<ClusterRole>::all(self.client.clone())
            .patch(&name, &apply, &Patch::Apply(&role))
            .await;
        let b = Api::<ClusterRoleBinding>::all(self.client.clone())
            .patch(&name, &apply, &Patch::Apply(&binding))
            .await;
        if let Err(e) = r.map(drop).and(b.map(drop)) {
            panic!("cannot grant {sa} its rules: {e}");
        }
    }

    /// Removes what [`TestHub::grant`] made.
    pub async fn revoke(&self) {
        let name = format!("mwrs-tests-{}", self.namespace);
        let _ = Api::<ClusterRoleBinding>::all(self.client.clone())
            .delete(&name, &DeleteParams::default())
            .await;
        let _ = Api::<ClusterRole>::all(self.client.clone())
            .delete(&name, &DeleteParams::default())
            .await;
    }

    /// A kubeconfig as ServiceAccount `sa` of the test's namespace; see
    /// [`service_account_kubeconfig`].
    pub async fn service_account_kubeconfig(&self, sa: &str) -> anyhow::Result<PathBuf> {
        service_account_kubeconfig(&self.client, &self.kubeconfig, &self.namespace, sa).await
    }

    /// Publishes `groups` as the decisions of Placement `name` in the test namespace.
    pub async fn publish(&self, name: &str, groups: &[DecisionGroup]) {
        if let Err(e) = placement::publish(&self.client, &self.namespace, name, groups).await {
            panic!("cannot publish placement {name}: {e}");
        }
    }

    /// Publishes every cluster of this test in one unnamed group.
    pub async fn publish_all(&self, name: &str) {
        self.publish(name, &[DecisionGroup::new("", self.clusters.clone())])
            .await;
    }

    pub fn mwrs_api(&self) -> Api<ManifestWorkReplicaSet> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    pub async fn create_mwrs(&self, mwrs: &ManifestWorkReplicaSet) -> ManifestWorkReplicaSet {
        match self.mwrs_api().create(&PostParams::default(), mwrs).await {
            Ok(m) => m,
            Err(e) => panic!("cannot create MWRS {}: {e}", mwrs.name_any()),
        }
    }

    pub async fn get_mwrs(&self, name: &str) -> Option<ManifestWorkReplicaSet> {
        self.mwrs_api().get_opt(name).await.ok().flatten()
    }

    /// Replaces the template of MWRS `name` (merge patch on the spec).
    pub async fn set_template(&self, name: &str, template: Value) {
        let body = json!({"spec": {"manifestWorkTemplate": template}});
        if let Err(e) = self
            .mwrs_api()
            .patch(name, &PatchParams::default(), &Patch::Merge(&body))
            .await
        {
            panic!("cannot patch MWRS {name}: {e}");
        }
    }

    /// ManifestWorks of this test's clusters that MWRS `name` owns.
    pub async fn works_of(&self, name: &str) -> Vec<ManifestWork> {
        let owner = format!("{}.{name}", self.namespace);
        let lp = ListParams::default().labels(&format!("{}={owner}", labels::MWRS_OWNER));
        let api: Api<ManifestWork> = Api::all(self.client.clone());
        match api.list(&lp).await {
            Ok(l) => l
                .items
                .into_iter()
                .filter(|w| w.namespace().is_some_and(|ns| self.clusters.contains(&ns)))
                .collect(),
            Err(e) => panic!("cannot list ManifestWorks: {e}"),
        }
    }

    /// Events recorded on MWRS `name`: (reason, note).
    pub async fn events_of(&self, name: &str) -> Vec<(String, String)> {
        use k8s_openapi::api::events::v1::Event;
        let api: Api<Event> = Api::namespaced(self.client.clone(), &self.namespace);
        let lp = ListParams::default();
        match api.list(&lp).await {
            Ok(l) => l
                .items
                .into_iter()
                .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
                .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
                .collect(),
            Err(e) => panic!("cannot list events: {e}"),
        }
    }
}

impl Drop for TestHub {
    fn drop(&mut self) {
        if std::env::var_os(KEEP_ENV).is_some() {
            eprintln!(
                "{KEEP_ENV} set: keeping namespace {} and {} cluster namespaces",
                self.namespace,
                self.clusters.len()
            );
            return;
        }
        let kubeconfig = self.kubeconfig.clone();
        let namespace = self.namespace.clone();
        let clusters = if self.owns_clusters {
            self.clusters.clone()
        } else {
            Vec::new()
        };
        // Drop cannot await, and the test's runtime may be shutting down: clean up on a
        // thread with a runtime (and a client) of its own.
        let cleanup = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                let Ok(client) = client_from(&kubeconfig).await else {
                    return;
                };
                cleanup(&client, &namespace, &clusters).await;
            });
        });
        let _ = cleanup.join();
    }
}

/// Removes finalizers that nobody is left to honour (the controller and agents of the
/// test are gone), then deletes the namespaces; the hub's namespace controller does
/// the rest in the background.
async fn cleanup(client: &Client, namespace: &str, clusters: &[String]) {
    let unfinalize = json!({"metadata": {"finalizers": null}});
    let pp = PatchParams::default();
    let mwrs: Api<ManifestWorkReplicaSet> = Api::namespaced(client.clone(), namespace);
    if let Ok(list) = mwrs.list(&ListParams::default()).await {
        for m in list.items {
            let _ = mwrs
                .patch(&m.name_any(), &pp, &Patch::Merge(&unfinalize))
                .await;
        }
    }
    for c in clusters {
        let works: Api<ManifestWork> = Api::namespaced(client.clone(), c);
        if let Ok(list) = works.list(&ListParams::default()).await {
            for w in list
                .items
                .into_iter()
                .filter(|w| !w.finalizers().is_empty())
            {
                let _ = works
                    .patch(&w.name_any(), &pp, &Patch::Merge(&unfinalize))
                    .await;
            }
        }
    }
    let ns: Api<Namespace> = Api::all(client.clone());
    for n in std::iter::once(namespace).chain(clusters.iter().map(String::as_str)) {
        let _ = ns.delete(n, &DeleteParams::background()).await;
    }
}

/// Polls `check` every 100 ms until it returns Ok or `timeout` passes; on timeout panics
/// with `what` and the last Err (which should describe the state seen).
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        match check().await {
            Ok(v) => return v,
            Err(last) => {
                if Instant::now() >= deadline {
                    panic!("timed out after {timeout:?} waiting for {what}; last: {last}");
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A spawned future (an in-process controller, an agent, ...) aborted on drop.
pub struct TaskGuard(tokio::task::JoinHandle<()>);

impl TaskGuard {
    pub fn spawn(f: impl Future<Output = ()> + Send + 'static) -> Self {
        Self(tokio::spawn(f))
    }

    pub fn is_finished(&self) -> bool {
        self.0.is_finished()
    }
}

impl Drop for TaskGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A child process (the controller binary) killed on drop; its output goes to a log file.
pub struct ChildProcess {
    child: std::process::Child,
    pub log: PathBuf,
}

impl ChildProcess {
    /// Starts `binary` with `args`; stdout and stderr go to a temporary log file.
    pub fn spawn(binary: &Path, args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<Self> {
        let log = std::env::temp_dir().join(format!(
            "{}-{}.log",
            binary
                .file_name()
                .map(|f| f.to_string_lossy().to_string())
                .unwrap_or_default(),
            random_suffix()
        ));
        let out = std::fs::File::create(&log)?;
        let err = out.try_clone()?;
        let mut cmd = std::process::Command::new(binary);
        cmd.args(args).stdout(out).stderr(err);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn()?;
        Ok(Self { child, log })
    }

    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Kills the process (SIGKILL: a crash, not a graceful stop) and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Exit status if it has exited.
    pub fn try_wait(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for ChildProcess {
    /// Kills it; its log stays only when the test failed (to read what happened).
    fn drop(&mut self) {
        self.kill();
        if !std::thread::panicking() {
            let _ = std::fs::remove_file(&self.log);
        }
    }
}

/// A ManifestWork template with one ConfigMap `app` in `default` whose data is `version`.
pub fn configmap_template(version: &str) -> Value {
    json!({"workload": {"manifests": [{
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "app", "namespace": "default"},
        "data": {"version": version},
    }]}})
}

/// An MWRS `name` with `template` and one placementRef per (placement, rolloutStrategy).
pub fn mwrs(name: &str, template: Value, refs: &[(&str, Value)]) -> ManifestWorkReplicaSet {
    let placement_refs = refs
        .iter()
        .map(|(p, strategy)| LocalPlacementReference {
            name: (*p).to_string(),
            rollout_strategy: serde_json::from_value(strategy.clone()).ok(),
        })
        .collect();
    ManifestWorkReplicaSet::new(
        name,
        ManifestWorkReplicaSetSpec {
            manifest_work_template: ManifestWorkTemplate::from_value(template).unwrap_or_default(),
            placement_refs,
            ..Default::default()
        },
    )
}

/// Conditions of an MWRS by type: (status, reason, message).
pub fn conditions(m: &ManifestWorkReplicaSet) -> BTreeMap<String, (String, String, String)> {
    m.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    (
                        c.type_.clone(),
                        (c.status.clone(), c.reason.clone(), c.message.clone()),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Does MWRS `m` have condition `type_` with `status` and `reason`?
pub fn has_condition(m: &ManifestWorkReplicaSet, type_: &str, status: &str, reason: &str) -> bool {
    conditions(m)
        .get(type_)
        .is_some_and(|(s, r, _)| s == status && r == reason)
}

/// Watches `api` with `cfg` and hands every applied (`deleted` false) or deleted object
/// to `on`, from the initial list on; returns once that list is in.
pub async fn watch_objects<K>(
    api: Api<K>,
    cfg: kube::runtime::watcher::Config,
    mut on: impl FnMut(K, bool) + Send + 'static,
) -> TaskGuard
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    K::DynamicType: Default,
{
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let task = TaskGuard::spawn(async move {
        let mut ready = Some(ready_tx);
        let mut events = kube::runtime::watcher(api, cfg).default_backoff().boxed();
        while let Some(ev) = events.next().await {
            match ev {
                Ok(Event::Apply(o) | Event::InitApply(o)) => on(o, false),
                Ok(Event::Delete(o)) => on(o, true),
                Ok(Event::InitDone) => {
                    if let Some(tx) = ready.take() {
                        let _ = tx.send(());
                    }
                }
                Ok(Event::Init) | Err(_) => {}
            }
        }
    });
    let _ = tokio::time::timeout(Duration::from_secs(60), ready_rx).await;
    task
}

/// Checks a generated page of the book: `want` must be what `path` (relative to the
/// repository's root) holds; with `MWRS_BLESS` set it writes `want` there instead. `bless`
/// is the command that rewrites it, for the failure message.
pub fn check_generated(path: &str, want: &str, bless: &str) {
    let full = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path);
    if std::env::var_os("MWRS_BLESS").is_some() {
        if let Err(e) = std::fs::write(&full, want) {
            panic!("cannot write {path}: {e}");
        }
        return;
    }
    let have = std::fs::read_to_string(&full).unwrap_or_default();
    assert!(
        have == want,
        "{path} is stale: run `MWRS_BLESS=1 {bless}` and commit it"
    );
}
