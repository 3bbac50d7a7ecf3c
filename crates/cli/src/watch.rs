//! Watches on everything the engine reads about one MWRS (the MWRS, its ManifestWorks,
//! revisions, Placements and decisions), kept in reflector stores: the views that follow a
//! rollout (`rollout status -w`, the dashboard) read a [`Snapshot`] from them on each
//! change instead of polling the hub.

use futures::StreamExt;
use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_api::placement::{Placement, PlacementDecision};
use mwrs_engine::snapshot::{Snapshot, owner_of};
use mwrs_engine::stored_work::StoredWork;
use tokio::sync::mpsc;

use crate::error::Result;
use crate::hub::{HubClient, owned_by, placement_selector};

/// Drives a reflector for `api`/`cfg`; every applied event is signalled on `tx`.
fn reflect<K>(api: Api<K>, cfg: watcher::Config, tx: mpsc::UnboundedSender<()>) -> Store<K>
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let (reader, writer) = reflector::store::<K>();
    let stream = reflector::reflector(writer, watcher(api, cfg)).default_backoff();
    tokio::spawn(async move {
        futures::pin_mut!(stream);
        while stream.next().await.is_some() {
            if tx.send(()).is_err() {
                break;
            }
        }
    });
    reader
}

/// The stores of one MWRS's watches.
pub struct MwrsWatch {
    mwrs: Store<ManifestWorkReplicaSet>,
    /// None when the user may not list ManifestWorks.
    works: Option<Store<StoredWork>>,
    /// Why the ManifestWorks cannot be read, if they cannot.
    pub works_hidden: Option<String>,
    placements: Store<Placement>,
    decisions: Store<PlacementDecision>,
    revisions: Store<ControllerRevision>,
}

impl MwrsWatch {
    /// Waits until every store has its first list; false when a watch failed.
    pub async fn ready(&self) -> bool {
        self.mwrs.wait_until_ready().await.is_ok()
            && match &self.works {
                Some(w) => w.wait_until_ready().await.is_ok(),
                None => true,
            }
            && self.placements.wait_until_ready().await.is_ok()
            && self.decisions.wait_until_ready().await.is_ok()
            && self.revisions.wait_until_ready().await.is_ok()
    }

    /// None once the MWRS is gone.
    pub fn snapshot(&self) -> Option<Snapshot> {
        let m = self.mwrs.state().into_iter().next()?;
        let placements: Vec<Placement> = self
            .placements
            .state()
            .iter()
            .map(|p| (**p).clone())
            .collect();
        let decisions: Vec<PlacementDecision> = self
            .decisions
            .state()
            .iter()
            .map(|p| (**p).clone())
            .collect();
        let works: Vec<StoredWork> = self
            .works
            .iter()
            .flat_map(|w| w.state())
            .map(|p| (*p).clone())
            .collect();
        let revisions: Vec<ControllerRevision> = self
            .revisions
            .state()
            .iter()
            .filter(|cr| owned_by(cr, &m))
            .map(|p| (**p).clone())
            .collect();
        Some(Snapshot::from_objects(
            &m,
            &placements,
            &decisions,
            &works,
            &revisions,
        ))
    }
}

impl MwrsWatch {
    /// Starts the watches on `m` (in `hub`'s namespace); the receiver gets a signal on
    /// every change any of them sees.
    pub async fn start(
        hub: &HubClient,
        m: &ManifestWorkReplicaSet,
    ) -> Result<(Self, mpsc::UnboundedReceiver<()>)> {
        let name = m.name_any();
        let ns = hub.namespace.clone();
        let client = hub.client.clone();
        let (k, v) = owner_of(m).selector();
        let owner = format!("{k}={v}");
        let (tx, rx) = mpsc::unbounded_channel();
        let works_hidden = hub.works_hidden(m).await?;
        let watch = MwrsWatch {
            mwrs: reflect(
                Api::namespaced(client.clone(), &ns),
                watcher::Config::default().fields(&format!("metadata.name={name}")),
                tx.clone(),
            ),
            works: works_hidden.is_none().then(|| {
                reflect(
                    Api::all(client.clone()),
                    watcher::Config::default().labels(&owner),
                    tx.clone(),
                )
            }),
            works_hidden,
            placements: reflect(
                Api::namespaced(client.clone(), &ns),
                watcher::Config::default(),
                tx.clone(),
            ),
            decisions: reflect(
                Api::namespaced(client.clone(), &ns),
                watcher::Config::default().labels(&placement_selector(m)),
                tx.clone(),
            ),
            revisions: reflect(
                Api::namespaced(client, &ns),
                watcher::Config::default().labels(&owner),
                tx,
            ),
        };
        Ok((watch, rx))
    }
}
