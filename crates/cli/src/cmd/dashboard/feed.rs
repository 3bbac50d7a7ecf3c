//! The live stream of one MWRS: one set of watches per MWRS shown (shared by every page
//! that follows it), a new view whenever the hub changes (at most every [`BATCH`]) or a
//! soak ends, and Server-Sent Events to each page: the whole view first, then only what
//! changed. A page that reconnects with the id of the last event it got is sent what
//! changed since, without the whole view again, while that frame is recent. When the
//! picture cannot be kept up (the hub is unreachable, access is refused, the MWRS is
//! deleted) a `stale` event says why.

use std::collections::{HashMap, HashSet, VecDeque};
use std::convert::Infallible;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use jiff::Timestamp;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::api::{ApiError, Segments, Source};
use crate::error::{CliError, Exit};
use crate::hub::HubClient;
use crate::view::{ClusterLine, View};
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

/// What a feed publishes: the newest view, numbered, and what the recent frames changed.
#[derive(Clone, Debug, Default)]
pub struct Frame {
    pub seq: u64,
    pub view: Option<Arc<View>>,
    /// Why the view is not current, when it is not.
    pub stale: Option<String>,
    /// The view without its clusters, as JSON: what every `change` carries whole.
    pub header: Arc<Value>,
    /// For each recent frame, oldest first: its number and the clusters whose line it
    /// changed, added or removed against the frame before. Names only, not whole views
    /// (a view of 5,000 clusters takes about 1.5 MB): a page that resumes is sent those
    /// clusters' lines as they are now.
    pub recent: Arc<VecDeque<(u64, Arc<[String]>)>>,
    /// The `snapshot` event's data, serialized once for every page that needs it (a view
    /// of 5,000 clusters is about 1.5 MB of JSON).
    snapshot: Arc<OnceLock<Arc<str>>>,
    /// The `change` from the frame before, likewise: what every page that keeps up gets.
    from_previous: Arc<OnceLock<Option<Arc<str>>>>,
}

impl Frame {
    fn with_view(&self, mut view: View) -> Self {
        let touched: Arc<[String]> = match &self.view {
            Some(old) => touched(old, &view).into(),
            None => view.clusters.iter().map(|c| c.cluster.clone()).collect(),
        };
        // Once per frame, not per page, and without serializing the clusters.
        let clusters = std::mem::take(&mut view.clusters);
        let mut header = serde_json::to_value(&view).unwrap_or_default();
        if let Some(o) = header.as_object_mut() {
            o.remove("clusters");
        }
        view.clusters = clusters;
        let mut recent = (*self.recent).clone();
        recent.push_back((self.seq + 1, touched));
        while recent.len() > KEPT {
            recent.pop_front();
        }
        Self {
            seq: self.seq + 1,
            view: Some(Arc::new(view)),
            stale: None,
            header: Arc::new(header),
            recent: Arc::new(recent),
            snapshot: Arc::default(),
            from_previous: Arc::default(),
        }
    }

    /// The data of the event that brings a page holding frame `from` here: the change
    /// since, while that frame is recent, else the whole view. Serialized once per frame
    /// for the pages at the frame before and for the whole view; None before any view.
    fn data_since(&self, from: Option<u64>) -> Option<(&'static str, Arc<str>)> {
        let view = self.view.as_deref()?;
        let change = |seq: u64| {
            self.change_since(seq).map(|mut c| {
                c["seq"] = json!(self.seq);
                Arc::<str>::from(c.to_string())
            })
        };
        let previous = self.seq.checked_sub(1);
        let changed = match from {
            Some(seq) if Some(seq) == previous => {
                self.from_previous.get_or_init(|| change(seq)).clone()
            }
            Some(seq) => change(seq),
            None => None,
        };
        if let Some(c) = changed {
            return Some(("change", c));
        }
        let whole = self
            .snapshot
            .get_or_init(|| Arc::from(json!({"view": view, "seq": self.seq}).to_string()));
        Some(("snapshot", whole.clone()))
    }

    /// The `change` that brings a page holding frame `seq` to this one; None when that
    /// frame is no longer recent (the page is sent the whole view).
    fn change_since(&self, seq: u64) -> Option<Value> {
        let view = self.view.as_deref()?;
        let first = self.recent.front().map(|(s, _)| *s)?;
        // Frame numbers start at 1: no page holds frame 0 (nor one past this frame: an
        // id a page made up, up to u64::MAX).
        if seq == 0 || seq > self.seq || seq.saturating_add(1) < first {
            return None;
        }
        let names: HashSet<&str> = self
            .recent
            .iter()
            .filter(|(s, _)| *s > seq)
            .flat_map(|(_, names)| names.iter().map(String::as_str))
            .collect();
        let clusters: Vec<&ClusterLine> = view
            .clusters
            .iter()
            .filter(|c| names.contains(c.cluster.as_str()))
            .collect();
        let now: HashSet<&str> = view.clusters.iter().map(|c| c.cluster.as_str()).collect();
        let mut removed: Vec<&str> = names.difference(&now).copied().collect();
        removed.sort_unstable();
        Some(json!({"header": *self.header, "clusters": clusters, "removed": removed}))
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

    /// A receiver of the frames of MWRS `name` in `hub`'s namespace, starting its feed if
    /// none runs.
    fn subscribe(self: &Arc<Self>, hub: HubClient, name: &str) -> watch::Receiver<Frame> {
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
            follow(&hub, &key.1, &tx).await;
            if let Ok(mut r) = feeds.running.lock() {
                r.remove(&key);
            }
        });
        rx
    }
}

/// Keeps `tx` current with MWRS `name` until nobody follows it.
async fn follow(hub: &HubClient, name: &str, tx: &watch::Sender<Frame>) {
    while tx.receiver_count() > 1 {
        if let Err(e) = watch_one(hub, name, tx).await {
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

/// The SSE event that brings a page holding frame `from` (None: nothing, or a frame no
/// longer recent) to `frame`.
pub fn event(from: Option<u64>, frame: &Frame) -> Option<Event> {
    if let Some(why) = &frame.stale {
        return Event::default()
            .event("stale")
            .json_data(json!({"why": why}))
            .ok();
    }
    let (kind, data) = frame.data_since(from)?;
    Some(
        Event::default()
            .event(kind)
            .id(frame.seq.to_string())
            .data(&*data),
    )
}

/// The `last` parameter of a query string.
fn last_of(query: &str) -> Option<&str> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == "last")
        .map(|(_, v)| v)
}

/// The clusters whose line differs from `old` to `new`: changed, new, or gone.
pub fn touched(old: &View, new: &View) -> Vec<String> {
    let before: HashMap<&str, &ClusterLine> = old
        .clusters
        .iter()
        .map(|c| (c.cluster.as_str(), c))
        .collect();
    let now: HashSet<&str> = new.clusters.iter().map(|c| c.cluster.as_str()).collect();
    let changed = new
        .clusters
        .iter()
        .filter(|c| before.get(c.cluster.as_str()) != Some(c))
        .map(|c| c.cluster.clone());
    let gone = old
        .clusters
        .iter()
        .filter(|c| !now.contains(c.cluster.as_str()))
        .map(|c| c.cluster.clone());
    changed.chain(gone).collect()
}

/// `GET /api/mwrs/{namespace}/{name}/events`: the live stream of one MWRS.
pub async fn events(
    State(feeds): State<Arc<Feeds>>,
    path: Segments,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let hub = feeds.source.hub(path.get("namespace"))?;
    let rx = feeds.subscribe(hub, path.get("name"));
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
            // From what the page has, while it is recent; else the whole view. None:
            // nothing read yet.
            if let Some(e) = event(sent, &frame) {
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
            deadline: None,
            note: None,
            cell: crate::view::Cell::Progressing,
            attention: false,
            cause: false,
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
            reverting: None,
            placements: Vec::new(),
            bands: Vec::new(),
            clusters: clusters.iter().map(|(c, s)| line(c, s)).collect(),
            actions: Vec::new(),
            note: None,
            plugins: None,
        }
    }

    /// The names of the clusters a change carries, and those it says went.
    fn carried(c: &Value) -> (Vec<&str>, Vec<&str>) {
        let names = |k: &str| -> Vec<&str> {
            c[k].as_array()
                .unwrap()
                .iter()
                .map(|l| l.get("cluster").unwrap_or(l).as_str().unwrap())
                .collect()
        };
        (names("clusters"), names("removed"))
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
        let f = Frame::default().with_view(old).with_view(new);
        let c = f.change_since(1).unwrap();
        assert_eq!(c["header"]["message"], "2 of 2");
        assert!(c["header"].get("clusters").is_none());
        assert_eq!(carried(&c), (vec!["c2"], vec!["c3"]));
    }

    #[test]
    fn a_page_resumes_from_any_recent_frame_with_what_changed_since() {
        let mut f = Frame::default();
        let states = ["ToApply", "Progressing", "Succeeded"];
        // Frame i+1 moves cluster c{i % 5} to the next state.
        let mut now: Vec<(String, &str)> = (0..5).map(|i| (format!("c{i}"), states[0])).collect();
        for i in 0..(KEPT + 3) {
            let k = i % 5;
            let next = states.iter().position(|s| *s == now[k].1).unwrap_or(0) + 1;
            now[k].1 = states[next % 3];
            let lines: Vec<(&str, &str)> = now.iter().map(|(c, s)| (c.as_str(), *s)).collect();
            f = f.with_view(view(&i.to_string(), &lines));
        }
        let newest = (KEPT + 3) as u64;
        assert_eq!(f.seq, newest);
        let since = f.change_since(newest - 2).unwrap();
        let (mut got, _) = carried(&since);
        let last_two = [(KEPT + 1) % 5, (KEPT + 2) % 5].map(|k| format!("c{k}"));
        let mut expected: Vec<&str> = last_two.iter().map(String::as_str).collect();
        expected.sort_unstable();
        got.sort_unstable();
        assert_eq!(got, expected);
        assert!(f.change_since(newest - KEPT as u64).is_some());
        assert!(
            f.change_since(newest - KEPT as u64 - 1).is_none(),
            "too old: the page gets the whole view"
        );
        assert_eq!(f.recent.len(), KEPT);
        let young = Frame::default().with_view(view("0", &[("c0", "ToApply")]));
        assert!(young.change_since(0).is_none(), "no page holds frame 0");
    }

    /// Security review D5: every page at the same frame gets one serialization of the
    /// whole view, and of the change from the frame before; a made-up event id past the
    /// newest frame (u64::MAX included) gets the whole view, not a panic.
    #[test]
    fn pages_share_one_serialization_per_frame() {
        let f = Frame::default()
            .with_view(view("1", &[("c1", "ToApply")]))
            .with_view(view("2", &[("c1", "Progressing")]));
        let (kind, a) = f.data_since(None).unwrap();
        let (_, b) = f.data_since(None).unwrap();
        assert_eq!(kind, "snapshot");
        assert!(Arc::ptr_eq(&a, &b), "one snapshot string for every page");
        let (kind, c1) = f.data_since(Some(1)).unwrap();
        let (_, c2) = f.data_since(Some(1)).unwrap();
        assert_eq!(kind, "change");
        assert!(
            Arc::ptr_eq(&c1, &c2),
            "one change string for the pages that keep up"
        );
        let change: Value = serde_json::from_str(&c1).unwrap();
        assert_eq!(change["seq"], 2);
        for made_up in [3, u64::MAX] {
            assert_eq!(
                f.data_since(Some(made_up)).unwrap().0,
                "snapshot",
                "{made_up}"
            );
        }
    }
}
