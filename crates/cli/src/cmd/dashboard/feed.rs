//! The live stream of one MWRS: one set of watches per MWRS shown (shared by every page
//! that follows it), and a new view ([`frames`]) whenever the hub changes (at most every
//! [`BATCH`]) or a soak ends. When the view cannot be kept up (the hub is unreachable,
//! access is refused, the MWRS is deleted) the frame says why.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, Sse};
use futures::Stream;
use jiff::Timestamp;
use serde_json::Value;
use tokio::sync::watch;

use super::api::{ApiError, Segments, Source};
use super::frames::{self, BATCH, Follower, Frame, Picture, TICK, followed};
use crate::error::{CliError, Exit};
use crate::hub::HubClient;
use crate::view::{ClusterLine, View};
use crate::watch::MwrsWatch;

impl Picture for View {
    type Line = ClusterLine;
    const LINES: &'static str = "clusters";

    fn lines(&self) -> &[ClusterLine] {
        &self.clusters
    }

    fn key(line: &ClusterLine) -> &str {
        &line.cluster
    }

    fn header(&mut self) -> Value {
        // Without serializing the clusters: once per frame, not per page.
        let clusters = std::mem::take(&mut self.clusters);
        let mut header = serde_json::to_value(&*self).unwrap_or_default();
        if let Some(o) = header.as_object_mut() {
            o.remove("clusters");
        }
        self.clusters = clusters;
        header
    }
}

/// The feeds running, by (namespace, name).
pub struct Feeds {
    source: Arc<Source>,
    running: Mutex<HashMap<(String, String), Follower<View>>>,
}

impl Feeds {
    pub fn new(source: Arc<Source>) -> Self {
        Self {
            source,
            running: Mutex::new(HashMap::new()),
        }
    }

    /// A receiver of the frames of MWRS `name` in `hub`'s namespace, starting its feed if
    /// none runs.
    fn subscribe(self: &Arc<Self>, hub: HubClient, name: &str) -> Follower<View> {
        let key = (hub.namespace.clone(), name.to_string());
        let mut running = match self.running.lock() {
            Ok(r) => r,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(rx) = running.get(&key) {
            return rx.clone();
        }
        let (tx, rx) = watch::channel(Frame::default());
        running.insert(key.clone(), rx.clone());
        let feeds = self.clone();
        tokio::spawn(async move {
            let judging = &feeds.source.judging;
            frames::follow(&tx, || watch_one(&hub, &key.1, &tx, judging)).await;
            if let Ok(mut r) = feeds.running.lock() {
                r.remove(&key);
            }
        });
        rx
    }
}

/// Publishes views of MWRS `name` until nobody follows (Ok) or the watches fail; again
/// every [`TICK`] without a change on the hub (soaks end, deadlines pass).
async fn watch_one(
    hub: &HubClient,
    name: &str,
    tx: &watch::Sender<Frame<View>>,
    judging: &crate::settings::Judging,
) -> Result<(), CliError> {
    let m = hub.get(name).await?;
    let (w, mut changes) = MwrsWatch::start(hub, &m).await?;
    let lost = || CliError::new(Exit::Unreachable, "lost the watches on the hub");
    if !w.ready().await {
        return Err(lost());
    }
    while followed(tx) {
        while changes.try_recv().is_ok() {}
        let Some(snap) = w.snapshot() else {
            return Err(CliError::not_found(format!(
                "manifestworkreplicaset {name:?} was deleted"
            )));
        };
        let view = View::of(&snap, w.works_hidden.as_deref(), Timestamp::now(), judging);
        Frame::publish(tx, view);
        match tokio::time::timeout(TICK, changes.recv()).await {
            Ok(Some(())) => tokio::time::sleep(BATCH).await,
            Ok(None) => return Err(lost()),
            Err(_) => {}
        }
    }
    Ok(())
}

/// `GET /api/mwrs/{namespace}/{name}/events`: the live stream of one MWRS.
pub async fn events(
    State(feeds): State<Arc<Feeds>>,
    path: Segments,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, std::convert::Infallible>>>, ApiError> {
    let hub = feeds.source.hub(path.get("namespace"))?;
    let rx = feeds.subscribe(hub, path.get("name"));
    Ok(frames::stream(
        rx,
        frames::resumed(&headers, query.as_deref()),
    ))
}
