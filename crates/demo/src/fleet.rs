//! Where the demo's clusters come from and how they are set up and torn down: a simulated
//! fleet (cluster namespaces, PlacementDecisions the demo publishes, mwrs-fleet's agent in
//! this process), or real clusters run by upstream OCM (ManagedClusters in a cluster set,
//! a Placement whose decisions upstream's placement controller writes, upstream's work
//! agent on each spoke). Each decides how the bad revision v2 gets stuck.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{Context as _, bail};
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, DeleteParams};
use mwrs_api::labels;
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_fleet::placement::{self, DecisionGroup};
use mwrs_fleet::{Agent, AgentConfig, AgentHandle, Behaviour, ocm};

use crate::poll::poll;
use mwrs_controller::plugins::Plugins;
use mwrs_plugin::config::WorkConfig;
use serde_json::{Value, json};
use std::sync::Arc;

/// The name of the MWRS, and of the ConfigMap it puts on every cluster.
pub const MWRS_NAME: &str = "web-config";
/// The Placement the MWRS rolls out on.
pub const PLACEMENT: &str = "fleet";
/// The namespace of the ConfigMap on the clusters.
const CONFIGMAP_NAMESPACE: &str = "default";
const SIMULATED_GROUPS: [&str; 3] = ["canary", "wave-1", "wave-2"];
/// The revision that never finishes on the hanging group.
pub const BAD_VERSION: &str = "v2";
/// The reference rollout plugin's name in the controller's configuration.
const PLUGIN: &str = "feedback";
/// How often the controller asks the plugin again (the demo's pace, not production's).
const PLUGIN_POLL: Duration = Duration::from_secs(1);
const WAIT: Duration = Duration::from_secs(60);

/// A real cluster: its name and its own API.
pub struct Spoke {
    pub name: String,
    pub client: Client,
}

/// The clusters of the demo.
pub enum Fleet {
    /// Simulated clusters: v2 hangs on the second decision group (the agent never reports
    /// it finished there). With `plugin`, the workload has a Deployment, and v2's never
    /// gets a ready replica there instead: the agent reports it done, and the reference
    /// rollout plugin, reading the Deployment's status feedback, says FAILED.
    Simulated {
        groups: Vec<DecisionGroup>,
        plugin: bool,
    },
    /// Upstream's components: v2 carries a CEL condition rule that keeps it Progressing,
    /// so it hangs on the canary group, the first to get it.
    Ocm {
        groups: Vec<DecisionGroup>,
        spokes: Vec<Spoke>,
    },
}

/// What runs until the scenario ends: the controller, and the simulated agent and the
/// rollout plugin if any.
pub struct Running {
    pub _controller: AbortOnDrop,
    pub _agent: Option<AgentHandle>,
    pub _plugin: Option<AbortOnDrop>,
}

/// A spawned task, aborted when this is dropped.
pub struct AbortOnDrop(pub tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Fleet {
    /// `n` simulated clusters named after `suffix`, split 15% / 35% / 50% into three
    /// decision groups; rolled out behind the reference rollout plugin with `plugin`.
    pub fn simulated(suffix: &str, n: usize, plugin: bool) -> anyhow::Result<Self> {
        if n < 3 {
            bail!("--clusters must be at least 3 (three decision groups)");
        }
        let clusters: Vec<String> = (0..n).map(|i| format!("demo-{suffix}-c{i:02}")).collect();
        let canary = (n * 3 / 20).max(1);
        let wave1 = (n * 7 / 20).max(1);
        let groups = vec![
            DecisionGroup::new(SIMULATED_GROUPS[0], clusters[..canary].to_vec()),
            DecisionGroup::new(
                SIMULATED_GROUPS[1],
                clusters[canary..canary + wave1].to_vec(),
            ),
            DecisionGroup::new(SIMULATED_GROUPS[2], clusters[canary + wave1..].to_vec()),
        ];
        Ok(Self::Simulated { groups, plugin })
    }

    /// Real clusters from `name=kubeconfig,...` (the first is the canary), in the two
    /// decision groups of [`ocm::canary_placement`].
    pub async fn ocm(spokes: &str) -> anyhow::Result<Self> {
        let mut out = Vec::new();
        for pair in spokes.split(',').filter(|p| !p.is_empty()) {
            let Some((name, kubeconfig)) = pair.split_once('=') else {
                bail!("--spokes: {pair:?} is not name=kubeconfig");
            };
            let client = crate::client_from(kubeconfig.as_ref())
                .await
                .with_context(|| format!("--spokes: cluster {name}"))?;
            out.push(Spoke {
                name: name.to_string(),
                client,
            });
        }
        if out.len() < 2 {
            bail!("--spokes needs at least two clusters (a canary and the rest)");
        }
        let names: Vec<&str> = out.iter().map(|s| s.name.as_str()).collect();
        let groups = vec![
            DecisionGroup::new(ocm::CANARY_GROUP, names[..1].to_vec()),
            DecisionGroup::new("rest", names[1..].to_vec()),
        ];
        Ok(Self::Ocm {
            groups,
            spokes: out,
        })
    }

    pub fn groups(&self) -> &[DecisionGroup] {
        match self {
            Self::Simulated { groups, .. } | Self::Ocm { groups, .. } => groups,
        }
    }

    pub fn clusters(&self) -> Vec<String> {
        self.groups()
            .iter()
            .flat_map(|g| g.clusters.iter().cloned())
            .collect()
    }

    /// The decision group on which [`BAD_VERSION`] never finishes.
    pub fn hanging_group(&self) -> &DecisionGroup {
        match self {
            Self::Simulated { groups, .. } => &groups[1],
            Self::Ocm { groups, .. } => &groups[0],
        }
    }

    /// How [`BAD_VERSION`] gets stuck, for the step's header.
    pub fn how_it_hangs(&self) -> &'static str {
        match self {
            Self::Simulated { plugin: false, .. } => {
                "its simulated agent never reports v2 finished"
            }
            Self::Simulated { plugin: true, .. } => {
                "its agent reports v2 done, but v2's Deployment never gets a ready replica, \
                 which the rollout plugin reads from the status feedback"
            }
            Self::Ocm { .. } => {
                "v2 carries a CEL condition rule that keeps the ConfigMap Progressing"
            }
        }
    }

    /// The rollout plugin the MWRS names (None: none).
    pub fn plugin(&self) -> Option<&'static str> {
        matches!(self, Self::Simulated { plugin: true, .. }).then_some(PLUGIN)
    }

    /// The MWRS's template for `version`: one ConfigMap; with real clusters, the bad
    /// version also carries the condition rule that keeps it Progressing; with a plugin,
    /// a Deployment too, whose readiness the agent reports as status feedback.
    pub fn template(&self, version: &str) -> Value {
        let mut t = json!({"workload": {"manifests": [{
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": MWRS_NAME, "namespace": CONFIGMAP_NAMESPACE},
            "data": {"version": version, "greeting": format!("hello from {version}")},
        }]}});
        if self.plugin().is_some() {
            if let Some(m) = t["workload"]["manifests"].as_array_mut() {
                m.push(deployment(version));
            }
            t["manifestConfigs"] = json!([{
                "resourceIdentifier": {"group": "apps", "resource": "deployments",
                    "namespace": CONFIGMAP_NAMESPACE, "name": MWRS_NAME},
                "feedbackRules": [{"type": "WellKnownStatus"}],
            }]);
        }
        if matches!(self, Self::Ocm { .. }) && version == BAD_VERSION {
            t["manifestConfigs"] = json!([ocm::configmap_progressing_while(
                CONFIGMAP_NAMESPACE,
                MWRS_NAME,
                BAD_VERSION
            )]);
        }
        t
    }

    /// `data.version` of the demo's ConfigMap on each spoke (empty when simulated).
    pub async fn spoke_versions(&self) -> BTreeMap<String, Option<String>> {
        let Self::Ocm { spokes, .. } = self else {
            return BTreeMap::new();
        };
        let mut out = BTreeMap::new();
        for s in spokes {
            let version = ocm::configmap_version(&s.client, CONFIGMAP_NAMESPACE, MWRS_NAME).await;
            out.insert(s.name.clone(), version);
        }
        out
    }

    /// The namespace, the clusters and the Placement's decisions, the controller scoped to
    /// `namespace`, and the simulated agent if any.
    pub async fn set_up(&self, client: &Client, namespace: &str) -> anyhow::Result<Running> {
        let agent = match self {
            Self::Simulated { groups, plugin } => {
                publish_simulated(client, namespace, groups).await?;
                let bad = match plugin {
                    true => Behaviour::Unready {
                        after: Duration::from_millis(300),
                    },
                    false => Behaviour::Hang,
                };
                Some(start_simulated_agent(
                    client,
                    namespace,
                    (&groups[1], bad),
                    &self.clusters(),
                ))
            }
            Self::Ocm { .. } => {
                self.register(client, namespace).await?;
                None
            }
        };
        let (plugin, plugins) = match self.plugin() {
            Some(_) => {
                let (task, plugins) = start_plugin(client).await?;
                (Some(task), plugins)
            }
            None => (None, Plugins::default()),
        };
        let controller = start_controller(client, namespace, plugins).await?;
        Ok(Running {
            _controller: controller,
            _agent: agent,
            _plugin: plugin,
        })
    }

    async fn register(&self, client: &Client, namespace: &str) -> anyhow::Result<()> {
        let clusters = self.clusters();
        ocm::register_clusters(client, ocm::CLUSTER_SET, &clusters)
            .await
            .context("registering the ManagedClusters")?;
        ocm::bind_namespace(client, namespace, ocm::CLUSTER_SET)
            .await
            .context("binding the demo namespace to the cluster set")?;
        ocm::canary_placement(client, namespace, PLACEMENT, ocm::CLUSTER_SET)
            .await
            .context("creating the Placement")?;
        poll(
            "upstream's placement controller's decisions",
            WAIT,
            || async {
                let decided = ocm::decided_clusters(client, namespace, PLACEMENT).await?;
                if decided == clusters.len() {
                    return Ok(Ok(()));
                }
                Ok(Err(format!(
                    "{decided} of {} clusters decided: is it running on this hub?",
                    clusters.len()
                )))
            },
        )
        .await
    }

    /// Deletes the MWRS (while the controller still runs, so its finalizer is handled);
    /// with real clusters waits until the spokes' ConfigMaps are gone; then deletes the
    /// demo namespace and the simulated clusters' namespaces (real clusters stay
    /// registered). Returns how many namespaces it deleted.
    pub async fn tear_down(&self, client: &Client, namespace: &str) -> anyhow::Result<usize> {
        delete_mwrs(client, namespace).await?;
        if matches!(self, Self::Ocm { .. }) {
            self.wait_spokes_clean().await?;
        }
        let mut all = vec![namespace.to_string()];
        if let Self::Simulated { .. } = self {
            all.extend(self.clusters());
        }
        let api: Api<Namespace> = Api::all(client.clone());
        for n in &all {
            match api.delete(n, &DeleteParams::background()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e).with_context(|| format!("deleting namespace {n}")),
            }
        }
        Ok(all.len())
    }

    async fn wait_spokes_clean(&self) -> anyhow::Result<()> {
        poll(
            "the spokes' ConfigMaps gone after the deletion",
            WAIT,
            || async {
                let left: Vec<String> = self
                    .spoke_versions()
                    .await
                    .into_iter()
                    .filter(|(_, v)| v.is_some())
                    .map(|(c, _)| c)
                    .collect();
                if left.is_empty() {
                    Ok(Ok(()))
                } else {
                    Ok(Err(format!("ConfigMap {MWRS_NAME} still on {left:?}")))
                }
            },
        )
        .await
    }
}

async fn publish_simulated(
    client: &Client,
    namespace: &str,
    groups: &[DecisionGroup],
) -> anyhow::Result<()> {
    placement::ensure_namespace(client, namespace).await?;
    for c in groups.iter().flat_map(|g| &g.clusters) {
        placement::ensure_namespace(client, c)
            .await
            .with_context(|| format!("creating namespace {c}"))?;
    }
    placement::publish(client, namespace, PLACEMENT, groups)
        .await
        .context("publishing the placement decisions")?;
    Ok(())
}

/// The simulated agent: 300 .. 900 ms per cluster (different per cluster, so the waves
/// are visible); [`BAD_VERSION`] behaves as `bad` on `hanging`.
fn start_simulated_agent(
    client: &Client,
    namespace: &str,
    (hanging, bad): (&DecisionGroup, Behaviour),
    clusters: &[String],
) -> AgentHandle {
    let hang: BTreeSet<String> = hanging.clusters.iter().cloned().collect();
    let index: BTreeMap<String, u64> = clusters
        .iter()
        .enumerate()
        .map(|(i, c)| (c.clone(), i as u64))
        .collect();
    let mut config = AgentConfig::new(clusters.to_vec()).behaviour(move |w| {
        let version = w.spec.pointer("/workload/manifests/0/data/version");
        if hang.contains(w.cluster) && version.and_then(Value::as_str) == Some(BAD_VERSION) {
            return bad;
        }
        let i = index.get(w.cluster).copied().unwrap_or(0);
        Behaviour::Succeed {
            after: Duration::from_millis(300 + (i * 7 % 5) * 150),
        }
    });
    config.label_selector = Some(format!("{}={namespace}.{MWRS_NAME}", labels::MWRS_OWNER));
    Agent::start(client.clone(), config)
}

/// Our controller in this process, scoped to `namespace`, knowing `plugins`; returns once
/// its watches synced.
async fn start_controller(
    client: &Client,
    namespace: &str,
    plugins: Plugins,
) -> anyhow::Result<AbortOnDrop> {
    let config = mwrs_controller::Config {
        namespace: Some(namespace.to_string()),
        ..mwrs_controller::Config::default()
    };
    let shared = mwrs_controller::Shared::default();
    let task = AbortOnDrop(tokio::spawn(mwrs_controller::run(
        client.clone(),
        config,
        Arc::new(plugins),
        shared.clone(),
        std::future::pending(),
    )));
    poll(
        "the controller's watches synced",
        Duration::from_secs(30),
        || async {
            let ready = shared.ready.load(std::sync::atomic::Ordering::Acquire);
            Ok(if ready { Ok(()) } else { Err("not yet".into()) })
        },
    )
    .await?;
    Ok(task)
}

/// The demo's Deployment at `version` (two replicas; the simulated agent reports their
/// readiness).
fn deployment(version: &str) -> Value {
    let labels = json!({"app": MWRS_NAME});
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": MWRS_NAME, "namespace": CONFIGMAP_NAMESPACE},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "web", "image": format!("example.com/web:{version}")}]},
            },
        },
    })
}

/// The reference rollout plugin in this process, on loopback (plaintext, as a sidecar
/// would be): a cluster passes once its Deployment has every replica ready for 2 s, and
/// fails when it still has not once that soak is over. Returns it and the controller's
/// registration of it.
async fn start_plugin(client: &Client) -> anyhow::Result<(AbortOnDrop, Plugins)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let config = mwrs_feedback_plugin::config::Config::parse(&format!(
        "listen: {addr}\n\
         checks:\n\
         \x20 - resource: {{group: apps, resource: deployments, namespace: {CONFIGMAP_NAMESPACE}, name: {MWRS_NAME}}}\n\
         \x20   succeedWhen: ReadyReplicas == Replicas\n\
         \x20   failWhen: ReadyReplicas < Replicas\n\
         \x20   soak: 2s\n"
    ))
    .map_err(|e| anyhow::anyhow!("the plugin's config: {e}"))?;
    let client = client.clone();
    let task = AbortOnDrop(tokio::spawn(async move {
        if let Err(e) = mwrs_feedback_plugin::serve(config, client, listener).await {
            tracing::error!(error = %e, "the rollout plugin stopped");
        }
    }));
    let work_config = WorkConfig::parse(&format!(
        "plugins:\n  - name: {PLUGIN}\n    endpoint: http://{addr}\n"
    ))
    .map_err(|e| anyhow::anyhow!("the controller's --work-config: {e}"))?;
    let version = env!("CARGO_PKG_VERSION");
    let plugins = Plugins::new(&work_config, PLUGIN_POLL, version)?;
    Ok((task, plugins))
}

/// Deletes MWRS `namespace/`[`MWRS_NAME`] and waits until it is gone (its finalizer needs
/// the controller running).
pub async fn delete_mwrs(client: &Client, namespace: &str) -> anyhow::Result<()> {
    let api: Api<ManifestWorkReplicaSet> = Api::namespaced(client.clone(), namespace);
    match api.delete(MWRS_NAME, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => return Err(e).context("deleting the MWRS"),
    }
    poll(
        "the MWRS gone after its deletion",
        Duration::from_secs(60),
        || async {
            match api.get_opt(MWRS_NAME).await.context("reading the MWRS")? {
                None => Ok(Ok(())),
                Some(_) => Ok(Err(format!("MWRS {MWRS_NAME} still present"))),
            }
        },
    )
    .await
}
