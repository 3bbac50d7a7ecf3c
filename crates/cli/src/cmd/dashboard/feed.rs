//! The live stream of one MWRS: one set of watches per MWRS shown (shared by every page
//! that follows it), a new view whenever the hub changes (at most every [`BATCH`]) or a
//! soak ends, and Server-Sent Events to each page: the whole view first, then only what
//! changed. A page that reconnects with the id of the last event it got is sent what
//! changed since, without the whole view again, while that frame is recent. When the
//! picture cannot be kept up (the hub is unreachable, access is refused, the MWRS is
//! deleted) a `stale` event says why.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use jiff::Timestamp;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::api::{ApiError, Source};
use crate::cmd::status::View;
use crate::error::{CliError, Exit};
use crate::hub::HubClient;
use crate::state::ClusterLine;
use crate::watch::MwrsWatch;

/// The shortest time between two frames: changes that come closer are sent together.
pub const BATCH: Duration = Duration::from_millis(300);
/// How often a view is computed again without a change on the hub (soaks end, deadlines
/// pass), and how often a feed nobody follows any more looks to stop.
const TICK: Duration = Duration::from_secs(1);
/// How many recent frames a reconnecting page may resume from.
const KEPT: usize = 32;
/// How long to wait before watching again after the hub failed.
const RETRY: Duration = Duration::from_secs(5);

/// What a feed publishes: the newest view, numbered, and the recent ones.
#[derive(Clone, Debug, Default)]
pub struct Frame {
    pub seq: u64,
    pub view: Option<Arc<View>>,
    /// Why the view is not current, when it is not.
    pub stale: Option<String>,
    /// Recent views by number, oldest first (the newest is `view`).
    pub recent: Arc<VecDeque<(u64, Arc<View>)>>,
}

impl Frame {
    fn with_view(&self, view: View) -> Self {
        let view = Arc::new(view);
        let mut recent = (*self.recent).clone();
        recent.push_back((self.seq + 1, view.clone()));
        while recent.len() > KEPT {
            recent.pop_front();
        }
        Self {
            seq: self.seq + 1,
            view: Some(view),
            stale: None,
            recent: Arc::new(recent),
        }
    }

    fn at(&self, seq: u64) -> Option<&Arc<View>> {
        self.recent.iter().find(|(s, _)| *s == seq).map(|(_, v)| v)
    }
}

/// The feeds running, by (namespace, name).
pub struct Feeds {
    source: Arc<Source>,
    running: Mutex<HashMap<(String, String), watch::Receiver<Frame>>>,
}

impl Feeds {
    pub fn new(source: Arc<Source>) -> Self {
        Self {
            source,
            running: Mutex::new(HashMap::new()),
        }
    }

    /// A receiver of MWRS `namespace/name`'s frames, starting its feed if none runs.
    fn subscribe(self: &Arc<Self>, namespace: &str, name: &str) -> watch::Receiver<Frame> {
        let key = (namespace.to_string(), name.to_string());
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
            follow(&feeds.source, &key, &tx).await;
            if let Ok(mut r) = feeds.running.lock() {
                r.remove(&key);
            }
        });
        rx
    }
}

/// Keeps `tx` current with MWRS `key` until nobody follows it.
async fn follow(source: &Source, (namespace, name): &(String, String), tx: &watch::Sender<Frame>) {
    let hub = HubClient {
        client: source.client.clone(),
        namespace: namespace.clone(),
        url: source.url.clone(),
    };
    while tx.receiver_count() > 1 {
        if let Err(e) = watch_one(&hub, name, tx).await {
            tx.send_modify(|f| f.stale = Some(e.message));
            wait_followed(tx, RETRY).await;
        }
    }
}

/// Sleeps `d`, or less once nobody follows.
async fn wait_followed(tx: &watch::Sender<Frame>, d: Duration) {
    let until = tokio::time::Instant::now() + d;
    while tx.receiver_count() > 1 && tokio::time::Instant::now() < until {
        tokio::time::sleep(TICK.min(d)).await;
    }
}

/// Publishes views of MWRS `name` until nobody follows (Ok) or the watches fail.
async fn watch_one(hub: &HubClient, name: &str, tx: &watch::Sender<Frame>) -> Result<(), CliError> {
    let m = hub.get(name).await?;
    let (w, mut changes) = MwrsWatch::start(hub, &m).await?;
    if !w.ready().await {
        return Err(CliError::new(
            Exit::Unreachable,
            "lost the watches on the hub",
        ));
    }
    while tx.receiver_count() > 1 {
        while changes.try_recv().is_ok() {}
        let Some(snap) = w.snapshot() else {
            return Err(CliError::not_found(format!(
                "manifestworkreplicaset {name:?} was deleted"
            )));
        };
        let view = View::of(&snap, w.works_hidden.as_deref(), Timestamp::now());
        tx.send_if_modified(|f| {
            if f.stale.is_none() && f.view.as_deref() == Some(&view) {
                return false;
            }
            *f = f.with_view(view);
            true
        });
        match tokio::time::timeout(TICK, changes.recv()).await {
            Ok(Some(())) => tokio::time::sleep(BATCH).await,
            Ok(None) => {
                return Err(CliError::new(
                    Exit::Unreachable,
                    "lost the watches on the hub",
                ));
            }
            Err(_) => {}
        }
    }
    Ok(())
}

/// The SSE event that brings a page from `from` (None: nothing) to `frame`.
pub fn event(from: Option<&View>, frame: &Frame) -> Option<Event> {
    if let Some(why) = &frame.stale {
        return Event::default()
            .event("stale")
            .json_data(json!({"why": why}))
            .ok();
    }
    let view = frame.view.as_deref()?;
    let (kind, data) = match from {
        Some(old) => ("change", change(old, view)),
        None => ("snapshot", json!({"view": view})),
    };
    let mut data = data;
    data["seq"] = json!(frame.seq);
    Event::default()
        .event(kind)
        .id(frame.seq.to_string())
        .json_data(data)
        .ok()
}

/// The `last` parameter of a query string.
fn last_of(query: &str) -> Option<&str> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == "last")
        .map(|(_, v)| v)
}

/// What changed from `old` to `new`: everything but the clusters whole, and the clusters
/// whose line changed or that went.
pub fn change(old: &View, new: &View) -> Value {
    let before: HashMap<&str, &ClusterLine> = old
        .clusters
        .iter()
        .map(|c| (c.cluster.as_str(), c))
        .collect();
    let changed: Vec<&ClusterLine> = new
        .clusters
        .iter()
        .filter(|c| before.get(c.cluster.as_str()) != Some(c))
        .collect();
    let now: std::collections::HashSet<&str> =
        new.clusters.iter().map(|c| c.cluster.as_str()).collect();
    let removed: Vec<&str> = old
        .clusters
        .iter()
        .map(|c| c.cluster.as_str())
        .filter(|c| !now.contains(c))
        .collect();
    let mut header = serde_json::to_value(new).unwrap_or_default();
    if let Some(o) = header.as_object_mut() {
        o.remove("clusters");
    }
    json!({"header": header, "clusters": changed, "removed": removed})
}

/// `GET /api/mwrs/{namespace}/{name}/events`: the live stream of one MWRS.
pub async fn events(
    State(feeds): State<Arc<Feeds>>,
    Path((namespace, name)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    feeds.source.shows(&namespace)?;
    let rx = feeds.subscribe(&namespace, &name);
    // The browser's own reconnection sends the header; a page shown again after it was
    // hidden opens a new stream with `?last=`.
    let resumed = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .or_else(|| query.as_deref().and_then(|q| last_of(q)))
        .and_then(|v| v.parse::<u64>().ok());
    // State: the receiver, the number of the last frame the page has, and whether to
    // wait for a change before looking (not at first: a resumed page may be behind).
    let stream = futures::stream::unfold((rx, resumed, false), |(mut rx, sent, wait)| async move {
        let mut wait = wait;
        loop {
            if wait {
                rx.changed().await.ok()?;
            }
            wait = true;
            let frame = rx.borrow_and_update().clone();
            if sent == Some(frame.seq) && frame.stale.is_none() {
                continue;
            }
            // From what the page has, while it is recent; else the whole view.
            let from = sent.and_then(|s| frame.at(s).cloned());
            // None: nothing read yet.
            if let Some(e) = event(from.as_deref(), &frame) {
                let sent = if frame.stale.is_some() {
                    sent
                } else {
                    Some(frame.seq)
                };
                return Some((Ok(e), (rx, sent, true)));
            }
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use mwrs_engine::phase::Phase;

    fn line(cluster: &str, state: &str) -> ClusterLine {
        ClusterLine {
            cluster: cluster.into(),
            placement: "p".into(),
            group: None,
            revision: Some("abc".into()),
            state: state.into(),
            since: None,
            soak_until: None,
            note: None,
        }
    }

    fn view(message: &str, clusters: &[(&str, &str)]) -> View {
        View {
            name: "app".into(),
            namespace: "ns".into(),
            state: Phase::Progressing,
            message: message.into(),
            current_revision: None,
            update_revision: Some("abc".into()),
            last_abort: None,
            placements: Vec::new(),
            clusters: clusters.iter().map(|(c, s)| line(c, s)).collect(),
            note: None,
        }
    }

    #[test]
    fn a_change_carries_the_header_and_only_the_clusters_that_changed() {
        let old = view(
            "1 of 3",
            &[
                ("c1", "Succeeded"),
                ("c2", "Progressing"),
                ("c3", "ToApply"),
            ],
        );
        let new = view("2 of 2", &[("c1", "Succeeded"), ("c2", "Succeeded")]);
        let c = change(&old, &new);
        assert_eq!(c["header"]["message"], "2 of 2");
        assert!(c["header"].get("clusters").is_none());
        let changed: Vec<&str> = c["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["cluster"].as_str().unwrap())
            .collect();
        assert_eq!(changed, ["c2"]);
        assert_eq!(c["removed"], json!(["c3"]));
    }

    #[test]
    fn recent_frames_are_kept_for_a_page_that_resumes() {
        let mut f = Frame::default();
        for i in 0..(KEPT + 3) {
            f = f.with_view(view(&i.to_string(), &[]));
        }
        let newest = (KEPT + 3) as u64;
        assert_eq!(f.seq, newest);
        assert_eq!(f.at(newest).unwrap().message, (KEPT + 2).to_string());
        assert!(f.at(newest - KEPT as u64 + 1).is_some());
        assert!(f.at(3).is_none(), "too old: the page gets the whole view");
    }
}
