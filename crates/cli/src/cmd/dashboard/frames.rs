//! Frames of a live picture, streamed as Server-Sent Events: a picture is a header and
//! lines by key (one MWRS's view and its clusters, or the overview and its MWRS); a
//! feed publishes numbered frames, and each page is sent the whole picture first, then
//! only the lines that changed. A page that reconnects with the id of the last event it
//! got is sent what changed since, without the whole picture again, while that frame is
//! recent. When the picture cannot be kept up a `stale` event says why.

use std::collections::{HashMap, HashSet, VecDeque};
use std::convert::Infallible;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::error::CliError;

/// The shortest time between two frames: changes that come closer are sent together.
pub const BATCH: Duration = Duration::from_millis(300);
/// How often a feed nobody follows any more looks to stop.
pub const TICK: Duration = Duration::from_secs(1);
/// How many recent frames a reconnecting page may resume from.
const KEPT: usize = 32;
/// How long to wait before watching again after the hub failed.
const RETRY: Duration = Duration::from_secs(5);

/// What a feed streams: a header and lines, each line named by a key unique in it.
pub trait Picture: Serialize + PartialEq + Send + Sync + 'static {
    type Line: Serialize + PartialEq + Send + Sync;
    /// The field of a `change` event that carries the lines.
    const LINES: &'static str;
    fn lines(&self) -> &[Self::Line];
    fn key(line: &Self::Line) -> &str;
    /// The picture without its lines, as JSON: what every `change` carries whole.
    fn header(&mut self) -> Value;
}

/// A page's end of a feed.
pub type Follower<P> = watch::Receiver<Frame<P>>;

/// What a feed publishes: the newest picture, numbered, and what the recent frames
/// changed.
#[derive(Debug)]
pub struct Frame<P> {
    seq: u64,
    picture: Option<Arc<P>>,
    /// Why the picture is not current, when it is not.
    stale: Option<String>,
    header: Arc<Value>,
    /// For each recent frame, oldest first: its number and the keys of the lines it
    /// changed, added or removed against the frame before. Keys only, not whole pictures
    /// (a picture grows with the fleet): a page that resumes is sent those lines as they
    /// are now.
    recent: Arc<VecDeque<(u64, Arc<[String]>)>>,
    /// The `snapshot` event's data, serialized once for every page that needs it.
    snapshot: Arc<OnceLock<Arc<str>>>,
    /// The `change` from the frame before, likewise: what every page that keeps up gets.
    from_previous: Arc<OnceLock<Option<Arc<str>>>>,
}

impl<P> Clone for Frame<P> {
    /// Every part is shared: a clone costs a few reference counts.
    fn clone(&self) -> Self {
        Self {
            seq: self.seq,
            picture: self.picture.clone(),
            stale: self.stale.clone(),
            header: self.header.clone(),
            recent: self.recent.clone(),
            snapshot: self.snapshot.clone(),
            from_previous: self.from_previous.clone(),
        }
    }
}

impl<P> Default for Frame<P> {
    fn default() -> Self {
        Self {
            seq: 0,
            picture: None,
            stale: None,
            header: Arc::default(),
            recent: Arc::default(),
            snapshot: Arc::default(),
            from_previous: Arc::default(),
        }
    }
}

impl<P: Picture> Frame<P> {
    /// The next frame, showing `picture`.
    pub fn with(&self, mut picture: P) -> Self {
        let touched: Arc<[String]> = match &self.picture {
            Some(old) => touched::<P>(old.lines(), picture.lines()).into(),
            None => picture
                .lines()
                .iter()
                .map(|l| P::key(l).to_string())
                .collect(),
        };
        let header = picture.header();
        let mut recent = (*self.recent).clone();
        recent.push_back((self.seq + 1, touched));
        while recent.len() > KEPT {
            recent.pop_front();
        }
        Self {
            seq: self.seq + 1,
            picture: Some(Arc::new(picture)),
            stale: None,
            header: Arc::new(header),
            recent: Arc::new(recent),
            snapshot: Arc::default(),
            from_previous: Arc::default(),
        }
    }

    /// Publishes `picture` on `tx` unless it is what the last frame showed.
    pub fn publish(tx: &watch::Sender<Self>, picture: P) {
        tx.send_if_modified(|f| {
            if f.stale.is_none() && f.picture.as_deref() == Some(&picture) {
                return false;
            }
            *f = f.with(picture);
            true
        });
    }

    /// The data of the event that brings a page holding frame `from` here: the change
    /// since, while that frame is recent, else the whole picture. Serialized once per
    /// frame for the pages at the frame before and for the whole picture; None before
    /// any picture.
    fn data_since(&self, from: Option<u64>) -> Option<(&'static str, Arc<str>)> {
        let picture = self.picture.as_deref()?;
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
            .get_or_init(|| Arc::from(json!({"view": picture, "seq": self.seq}).to_string()));
        Some(("snapshot", whole.clone()))
    }

    /// The `change` that brings a page holding frame `seq` to this one; None when that
    /// frame is no longer recent (the page is sent the whole picture).
    fn change_since(&self, seq: u64) -> Option<Value> {
        let picture = self.picture.as_deref()?;
        let first = self.recent.front().map(|(s, _)| *s)?;
        // Frame numbers start at 1: no page holds frame 0 (nor one past this frame: an
        // id a page made up, up to u64::MAX).
        if seq == 0 || seq > self.seq || seq.saturating_add(1) < first {
            return None;
        }
        let keys: HashSet<&str> = self
            .recent
            .iter()
            .filter(|(s, _)| *s > seq)
            .flat_map(|(_, keys)| keys.iter().map(String::as_str))
            .collect();
        let lines: Vec<&P::Line> = picture
            .lines()
            .iter()
            .filter(|l| keys.contains(P::key(l)))
            .collect();
        let now: HashSet<&str> = picture.lines().iter().map(P::key).collect();
        let mut removed: Vec<&str> = keys.difference(&now).copied().collect();
        removed.sort_unstable();
        Some(json!({"header": *self.header, P::LINES: lines, "removed": removed}))
    }
}

/// The keys of the lines that differ from `old` to `new`: changed, new, or gone.
fn touched<P: Picture>(old: &[P::Line], new: &[P::Line]) -> Vec<String> {
    let before: HashMap<&str, &P::Line> = old.iter().map(|l| (P::key(l), l)).collect();
    let now: HashSet<&str> = new.iter().map(P::key).collect();
    let changed = new
        .iter()
        .filter(|l| before.get(P::key(l)) != Some(l))
        .map(|l| P::key(l).to_string());
    let gone = old
        .iter()
        .map(P::key)
        .filter(|k| !now.contains(k))
        .map(str::to_string);
    changed.chain(gone).collect()
}

/// Keeps `tx` current with what `watch` publishes until nobody follows it; each time
/// `watch` fails, the frame says why (stale) and it is tried again after a while.
pub async fn follow<P, W, Fut>(tx: &watch::Sender<Frame<P>>, mut watch: W)
where
    P: Picture,
    W: FnMut() -> Fut,
    Fut: Future<Output = Result<(), CliError>>,
{
    while followed(tx) {
        if let Err(e) = watch().await {
            tx.send_modify(|f| f.stale = Some(e.message));
            wait_followed(tx, RETRY).await;
        }
    }
}

/// Does any page follow `tx`? (The feed's own receiver, kept to hand out, is not one.)
pub fn followed<T>(tx: &watch::Sender<T>) -> bool {
    tx.receiver_count() > 1
}

/// Sleeps `d`, or less once nobody follows.
async fn wait_followed<T>(tx: &watch::Sender<T>, d: Duration) {
    let until = tokio::time::Instant::now() + d;
    while followed(tx) && tokio::time::Instant::now() < until {
        tokio::time::sleep(TICK.min(d)).await;
    }
}

/// The SSE event that brings a page holding frame `from` (None: nothing, or a frame no
/// longer recent) to `frame`.
fn event<P: Picture>(from: Option<u64>, frame: &Frame<P>) -> Option<Event> {
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

/// The frame a page says it holds: the browser's own reconnection sends the
/// `Last-Event-ID` header; a page shown again after it was hidden opens a new stream
/// with `?last=`.
pub fn resumed(headers: &HeaderMap, query: Option<&str>) -> Option<u64> {
    headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .or_else(|| query.and_then(last_of))
        .and_then(|v| v.parse::<u64>().ok())
}

/// The `last` parameter of a query string.
fn last_of(query: &str) -> Option<&str> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == "last")
        .map(|(_, v)| v)
}

/// The events of `rx` for a page that holds frame `resumed`.
pub fn stream<P: Picture>(
    rx: watch::Receiver<Frame<P>>,
    resumed: Option<u64>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
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
            // From what the page has, while it is recent; else the whole picture. None:
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
    Sse::new(stream).keep_alive(KeepAlive::default())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::view::{ClusterLine, View};
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
            confirmations: Vec::new(),
            note: None,
            plugins: None,
            judged_with: String::new(),
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
        let f = Frame::<View>::default().with(old).with(new);
        let c = f.change_since(1).unwrap();
        assert_eq!(c["header"]["message"], "2 of 2");
        assert!(c["header"].get("clusters").is_none());
        assert_eq!(carried(&c), (vec!["c2"], vec!["c3"]));
    }

    #[test]
    fn a_page_resumes_from_any_recent_frame_with_what_changed_since() {
        let mut f = Frame::<View>::default();
        let states = ["ToApply", "Progressing", "Succeeded"];
        // Frame i+1 moves cluster c{i % 5} to the next state.
        let mut now: Vec<(String, &str)> = (0..5).map(|i| (format!("c{i}"), states[0])).collect();
        for i in 0..(KEPT + 3) {
            let k = i % 5;
            let next = states.iter().position(|s| *s == now[k].1).unwrap_or(0) + 1;
            now[k].1 = states[next % 3];
            let lines: Vec<(&str, &str)> = now.iter().map(|(c, s)| (c.as_str(), *s)).collect();
            f = f.with(view(&i.to_string(), &lines));
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
        let young = Frame::<View>::default().with(view("0", &[("c0", "ToApply")]));
        assert!(young.change_since(0).is_none(), "no page holds frame 0");
    }

    /// Security review D5: every page at the same frame gets one serialization of the
    /// whole view, and of the change from the frame before; a made-up event id past the
    /// newest frame (u64::MAX included) gets the whole view, not a panic.
    #[test]
    fn pages_share_one_serialization_per_frame() {
        let f = Frame::<View>::default()
            .with(view("1", &[("c1", "ToApply")]))
            .with(view("2", &[("c1", "Progressing")]));
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
