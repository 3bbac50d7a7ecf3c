//! Where the plugin reads ManifestWorks from: a watch of every ManifestWork, kept as the
//! little the checks read (generation and `status.resourceStatus`), so that a question
//! costs the hub nothing; and a GET of the one asked about when the watched copy cannot
//! give a final answer (absent, at another generation, or not SUCCEEDED: a copy a moment
//! old must never fail a cluster).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value as Json, json};
use tonic::Status;

type Key = (String, String);

/// The watched copies by (namespace, name).
type Watched = Arc<RwLock<HashMap<Key, Arc<Json>>>>;

/// Reads ManifestWorks as JSON (the plugin needs their generation and status feedback).
#[derive(Clone)]
pub(crate) struct WorkReader {
    client: Client,
    resource: ApiResource,
    /// The watched copies by (namespace, name); None: no watch (every read is a GET).
    watched: Option<Watched>,
}

impl WorkReader {
    /// A reader that GETs every ManifestWork it is asked about.
    pub(crate) fn new(client: Client) -> Self {
        let gvk = GroupVersionKind::gvk("work.open-cluster-management.io", "v1", "ManifestWork");
        Self {
            client,
            resource: ApiResource::from_gvk(&gvk),
            watched: None,
        }
    }

    /// A reader that also watches every ManifestWork (it needs `list` and `watch`; while
    /// the watch fails, reads are GETs).
    pub(crate) fn watching(client: Client) -> Self {
        let mut reader = Self::new(client);
        let cache: Watched = Arc::default();
        reader.watched = Some(cache.clone());
        let api: Api<DynamicObject> = Api::all_with(reader.client.clone(), &reader.resource);
        tokio::spawn(async move {
            // Retried with a backoff, and said once per streak of failures: a watch this
            // plugin may not make (RBAC with `get` only) is retried for as long as it runs.
            let mut events = watcher(api, watcher::Config::default())
                .default_backoff()
                .boxed();
            let mut relisting = HashMap::new();
            let mut failing = false;
            while let Some(e) = events.next().await {
                match e {
                    Ok(e) => {
                        // Each retry starts with Init: only what follows it is success.
                        let works = !matches!(e, watcher::Event::Init);
                        if works && std::mem::take(&mut failing) {
                            tracing::info!("watching ManifestWorks again");
                        }
                        file(&cache, &mut relisting, e)
                    }
                    Err(e) if !failing => {
                        failing = true;
                        tracing::warn!(error = %e, "watching ManifestWorks fails; reading each with a GET meanwhile, and retrying the watch with a backoff")
                    }
                    Err(e) => tracing::debug!(error = %e, "watching ManifestWorks still fails"),
                }
            }
        });
        reader
    }

    /// The watched copy of `namespace/name`, if there is one.
    pub(crate) fn watched(&self, namespace: &str, name: &str) -> Option<Arc<Json>> {
        let cache = self.watched.as_ref()?.read().ok()?;
        cache
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    /// The ManifestWork as JSON, read now; None when it does not exist (an answer, not an
    /// error).
    pub(crate) async fn get(&self, namespace: &str, name: &str) -> Result<Option<Json>, Status> {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), namespace, &self.resource);
        let o = api
            .get_opt(name)
            .await
            .map_err(|e| read_error(&format!("{namespace}/{name}"), e))?;
        o.map(|o| serde_json::to_value(o).map_err(|e| Status::internal(e.to_string())))
            .transpose()
    }

    /// Whether the hub answers at all.
    pub(crate) async fn hub_answers(&self) -> Result<(), kube::Error> {
        self.client.apiserver_version().await.map(drop)
    }
}

/// Files one watch event into `cache`; a relist is gathered in `relisting` and replaces
/// the cache whole when it ends.
fn file(
    cache: &RwLock<HashMap<Key, Arc<Json>>>,
    relisting: &mut HashMap<Key, Arc<Json>>,
    e: watcher::Event<DynamicObject>,
) {
    let Ok(mut c) = cache.write() else { return };
    match e {
        watcher::Event::Apply(o) => {
            if let Some((k, v)) = compact(&o) {
                c.insert(k, v);
            }
        }
        watcher::Event::Delete(o) => {
            if let Some((k, _)) = compact(&o) {
                c.remove(&k);
            }
        }
        watcher::Event::Init => relisting.clear(),
        watcher::Event::InitApply(o) => {
            if let Some((k, v)) = compact(&o) {
                relisting.insert(k, v);
            }
        }
        watcher::Event::InitDone => *c = std::mem::take(relisting),
    }
}

/// What the checks read of `o`, under its key.
fn compact(o: &DynamicObject) -> Option<(Key, Arc<Json>)> {
    let key = (o.metadata.namespace.clone()?, o.metadata.name.clone()?);
    let kept = json!({
        "metadata": {"generation": o.metadata.generation},
        "status": {"resourceStatus": o.data["status"]["resourceStatus"]},
    });
    Some((key, Arc::new(kept)))
}

/// The answer to a question whose ManifestWork `what` could not be read: about that
/// cluster when the hub answered with an error, about the plugin when it did not answer.
pub(crate) fn read_error(what: &str, e: kube::Error) -> Status {
    let why = format!("reading ManifestWork {what}: {e}");
    match e {
        kube::Error::Api(_) => Status::internal(why),
        _ => Status::unavailable(why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_the_hub_refuses_is_about_that_cluster_only() {
        let refused = kube::Error::Api(
            kube::core::Status::failure("forbidden", "Forbidden")
                .with_code(403)
                .boxed(),
        );
        let s = read_error("c1/ns.app", refused);
        assert_eq!(s.code(), tonic::Code::Internal, "{s:?}");
        assert!(s.message().contains("c1/ns.app"), "{s:?}");
        let silent = kube::Error::LinesCodecMaxLineLengthExceeded;
        assert_eq!(
            read_error("c1/ns.app", silent).code(),
            tonic::Code::Unavailable
        );
    }

    fn work(ns: &str, name: &str, generation: i64, ready: i64) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
            "metadata": {"namespace": ns, "name": name, "generation": generation,
                "annotations": {"big": "x".repeat(1000)}},
            "spec": {"workload": {"manifests": [{"big": "y".repeat(1000)}]}},
            "status": {"resourceStatus": {"manifests": [{"ready": ready}]},
                "conditions": []},
        }))
        .unwrap()
    }

    #[test]
    fn the_watch_keeps_what_the_checks_read_and_a_relist_replaces_it() {
        let cache = RwLock::new(HashMap::new());
        let mut relisting = HashMap::new();
        file(
            &cache,
            &mut relisting,
            watcher::Event::Apply(work("c1", "w", 2, 1)),
        );
        file(
            &cache,
            &mut relisting,
            watcher::Event::Apply(work("c2", "w", 1, 0)),
        );
        let kept = cache.read().unwrap()[&("c1".to_string(), "w".to_string())].clone();
        assert_eq!(kept["metadata"]["generation"], 2);
        assert_eq!(kept["status"]["resourceStatus"]["manifests"][0]["ready"], 1);
        assert!(
            kept.to_string().len() < 200,
            "no spec, no annotations: {kept}"
        );
        // A relist without c2 (deleted while the watch was down) forgets it.
        file(&cache, &mut relisting, watcher::Event::Init);
        file(
            &cache,
            &mut relisting,
            watcher::Event::InitApply(work("c1", "w", 3, 1)),
        );
        assert_eq!(cache.read().unwrap().len(), 2, "kept until the relist ends");
        file(&cache, &mut relisting, watcher::Event::InitDone);
        let c = cache.read().unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(
            c[&("c1".to_string(), "w".to_string())]["metadata"]["generation"],
            3
        );
    }
}
