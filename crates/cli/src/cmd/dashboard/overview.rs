//! The live overview of every MWRS shown: one watch of the MWRS of the namespace (or of
//! every namespace), shared by every list page, kept as one [`Row`] per MWRS (phase,
//! revisions, progress: nothing of its template), and streamed in frames ([`frames`])
//! at most every [`BATCH`]. An MWRS our types cannot read is a row in the Invalid phase
//! that says why; it never stops the watch, and so the others.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, Sse};
use futures::{Stream, StreamExt};
use kube::api::Api;
use kube::core::DeserializeGuard;
use kube::runtime::watcher;
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_engine::phase::Phase;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::api::{Row, Source};
use super::frames::{self, BATCH, Follower, Frame, Picture, TICK, followed};
use crate::error::{CliError, Exit};

type Guarded = DeserializeGuard<ManifestWorkReplicaSet>;

/// Every MWRS shown, by namespace and name.
#[derive(Debug, Default, Serialize, PartialEq)]
pub struct Overview {
    pub rows: Vec<Row>,
}

impl Picture for Overview {
    type Line = Row;
    const LINES: &'static str = "rows";

    fn lines(&self) -> &[Row] {
        &self.rows
    }

    fn key(line: &Row) -> &str {
        &line.key
    }

    fn header(&mut self) -> Value {
        json!({"count": self.rows.len()})
    }
}

/// The overview's one feed, while any page follows it.
pub struct OverviewFeed {
    source: Arc<Source>,
    running: Mutex<Option<Follower<Overview>>>,
}

impl OverviewFeed {
    pub fn new(source: Arc<Source>) -> Self {
        Self {
            source,
            running: Mutex::new(None),
        }
    }

    /// A receiver of the overview's frames, starting its feed if none runs.
    fn subscribe(self: &Arc<Self>) -> Follower<Overview> {
        let mut running = match self.running.lock() {
            Ok(r) => r,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(rx) = running.as_ref() {
            return rx.clone();
        }
        let (tx, rx) = watch::channel(Frame::default());
        *running = Some(rx.clone());
        let feed = self.clone();
        tokio::spawn(async move {
            frames::follow(&tx, || watch_all(&feed.source, &tx)).await;
            if let Ok(mut r) = feed.running.lock() {
                *r = None;
            }
        });
        rx
    }
}

/// A row for every MWRS the watch has listed, and the list in progress, if one is.
#[derive(Default)]
struct Rows {
    rows: BTreeMap<String, Row>,
    listing: Option<BTreeMap<String, Row>>,
    listed: bool,
}

impl Rows {
    /// Takes in one watch event; an error ends the watch (it is started anew, and the
    /// page says the overview is stale meanwhile).
    fn apply(
        &mut self,
        event: Option<Result<watcher::Event<Guarded>, watcher::Error>>,
    ) -> Result<(), CliError> {
        let event = match event {
            Some(Ok(e)) => e,
            Some(Err(e)) => return Err(watch_error(&e)),
            None => {
                return Err(CliError::new(
                    Exit::Unreachable,
                    "lost the watch on the hub",
                ));
            }
        };
        match event {
            watcher::Event::Init => self.listing = Some(BTreeMap::new()),
            watcher::Event::InitApply(m) => {
                let row = row_of(&m);
                if let Some(l) = self.listing.as_mut() {
                    l.insert(row.key.clone(), row);
                }
            }
            watcher::Event::InitDone => {
                self.rows = self.listing.take().unwrap_or_default();
                self.listed = true;
            }
            watcher::Event::Apply(m) => {
                let row = row_of(&m);
                self.rows.insert(row.key.clone(), row);
            }
            watcher::Event::Delete(m) => {
                self.rows.remove(&row_of(&m).key);
            }
        }
        Ok(())
    }

    fn overview(&self) -> Overview {
        Overview {
            rows: self.rows.values().cloned().collect(),
        }
    }
}

/// The row of an MWRS as watched; one our types reject is Invalid, with the reason.
fn row_of(m: &Guarded) -> Row {
    match &m.0 {
        Ok(m) => Row::of(m),
        Err(invalid) => {
            let namespace = invalid.metadata.namespace.clone().unwrap_or_default();
            let name = invalid.metadata.name.clone().unwrap_or_default();
            Row {
                key: format!("{namespace}/{name}"),
                namespace,
                name,
                state: Phase::Invalid,
                message: format!("cannot be read: {}", invalid.error),
                desired: 0,
                updated: 0,
                current_revision: None,
                update_revision: None,
            }
        }
    }
}

fn watch_error(e: &watcher::Error) -> CliError {
    let forbidden = matches!(
        e,
        watcher::Error::InitialListFailed(kube::Error::Api(s))
            | watcher::Error::WatchStartFailed(kube::Error::Api(s))
            if s.code == 403
    );
    let code = if forbidden {
        Exit::Forbidden
    } else {
        Exit::Unreachable
    };
    CliError::new(code, format!("watching manifestworkreplicasets: {e}"))
}

/// Publishes the overview until nobody follows (Ok) or the watch fails. Events that come
/// within [`BATCH`] of each other make one frame.
async fn watch_all(source: &Source, tx: &watch::Sender<Frame<Overview>>) -> Result<(), CliError> {
    let api: Api<Guarded> = match &source.namespace {
        Some(ns) => Api::namespaced(source.client.clone(), ns),
        None => Api::all(source.client.clone()),
    };
    let mut events = watcher::watcher(api, watcher::Config::default().any_semantic()).boxed();
    let mut rows = Rows::default();
    while followed(tx) {
        let Ok(event) = tokio::time::timeout(TICK, events.next()).await else {
            continue;
        };
        rows.apply(event)?;
        let batch = tokio::time::Instant::now() + BATCH;
        while let Ok(event) = tokio::time::timeout_at(batch, events.next()).await {
            rows.apply(event)?;
        }
        if rows.listed {
            Frame::publish(tx, rows.overview());
        }
    }
    Ok(())
}

/// `GET /api/mwrs/events`: the live overview.
pub async fn events(
    State(feed): State<Arc<OverviewFeed>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Sse<impl Stream<Item = Result<Event, std::convert::Infallible>>> {
    let rx = feed.subscribe();
    frames::stream(rx, frames::resumed(&headers, query.as_deref()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kube::core::error_boundary::InvalidObject;

    use super::*;

    fn mwrs(ns: &str, name: &str) -> Guarded {
        let mut m: ManifestWorkReplicaSet = serde_json::from_value(json!({
            "apiVersion": "work.open-cluster-management.io/v1alpha1",
            "kind": "ManifestWorkReplicaSet",
            "metadata": {"namespace": ns, "name": name},
            "spec": {"placementRefs": [], "manifestWorkTemplate": {}},
        }))
        .unwrap();
        m.metadata.generation = Some(1);
        DeserializeGuard(Ok(m))
    }

    fn keys(rows: &Rows) -> Vec<&str> {
        rows.rows.keys().map(String::as_str).collect()
    }

    #[test]
    fn a_relist_replaces_the_rows_once_it_is_done_and_events_keep_them_current() {
        let mut rows = Rows::default();
        for e in [
            watcher::Event::Init,
            watcher::Event::InitApply(mwrs("b", "app")),
            watcher::Event::InitApply(mwrs("a", "web")),
        ] {
            rows.apply(Some(Ok(e))).unwrap();
        }
        assert!(!rows.listed, "nothing to show before the list is whole");
        rows.apply(Some(Ok(watcher::Event::InitDone))).unwrap();
        assert_eq!(keys(&rows), ["a/web", "b/app"]);
        rows.apply(Some(Ok(watcher::Event::Delete(mwrs("a", "web")))))
            .unwrap();
        rows.apply(Some(Ok(watcher::Event::Apply(mwrs("c", "api")))))
            .unwrap();
        // A relist: the old rows stand until it is done, then only what it listed.
        rows.apply(Some(Ok(watcher::Event::Init))).unwrap();
        rows.apply(Some(Ok(watcher::Event::InitApply(mwrs("c", "api")))))
            .unwrap();
        assert_eq!(keys(&rows), ["b/app", "c/api"]);
        rows.apply(Some(Ok(watcher::Event::InitDone))).unwrap();
        assert_eq!(keys(&rows), ["c/api"]);
        assert!(rows.apply(None).is_err(), "a watch that ends is a failure");
    }

    #[test]
    fn an_mwrs_our_types_cannot_read_is_an_invalid_row_that_says_why() {
        let unreadable = DeserializeGuard(Err(InvalidObject {
            error: "spec.placementRefs: invalid type: string".into(),
            metadata: ObjectMeta {
                namespace: Some("ns".into()),
                name: Some("odd".into()),
                ..ObjectMeta::default()
            },
        }));
        let row = row_of(&unreadable);
        assert_eq!((row.key.as_str(), row.state), ("ns/odd", Phase::Invalid));
        assert!(
            row.message.contains("spec.placementRefs"),
            "{}",
            row.message
        );
    }
}
