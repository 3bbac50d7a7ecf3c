//! The dashboard's data, read from the hub as the user on each request: every MWRS of the
//! namespace (or of every namespace) with its state, as `get` shows it, one MWRS as
//! `rollout status` shows it (the same [`View`], computed by the same engine stages), and
//! one cluster's ManifestWork conditions.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use jiff::Timestamp;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use mwrs_api::labels;
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_api::work::ManifestWork;
use mwrs_engine::owner::OwnerKey;
use mwrs_engine::phase::{Phase, phase};
use serde::Serialize;

use crate::cmd::history::{self, Entry};
use crate::cmd::plan::PlanOut;
use crate::error::{CliError, Exit};
use crate::hub::HubClient;
use crate::view::View;

/// Where the dashboard reads from.
#[derive(Clone)]
pub struct Source {
    pub client: Client,
    /// The namespace shown; None: every namespace.
    pub namespace: Option<String>,
    pub url: String,
    /// The settings every view is judged with.
    pub judging: crate::settings::Judging,
}

impl Source {
    /// A client of the hub for `namespace`, if it is one this dashboard shows.
    pub fn hub(&self, namespace: &str) -> Result<HubClient, ApiError> {
        self.shows(namespace)?;
        Ok(HubClient {
            client: self.client.clone(),
            namespace: namespace.to_string(),
            url: self.url.clone(),
        })
    }

    /// Is `namespace` one this dashboard shows? (Not found otherwise.)
    pub fn shows(&self, namespace: &str) -> Result<(), ApiError> {
        match &self.namespace {
            Some(ns) if ns != namespace => {
                let why = format!("namespace {namespace} is not shown (use -n {namespace} or -A)");
                Err(CliError::new(Exit::NotFound, why).into())
            }
            _ => Ok(()),
        }
    }
}

/// The names a request's path holds (`{namespace}`, `{name}`, `{cluster}`, `{action}`),
/// each checked before it is used: the router decodes `%2F` and `..`, and the client would
/// splice them unescaped into the path of its request to the API server. A namespace, a
/// cluster and an action must be DNS labels, a name a DNS subdomain.
pub struct Segments(HashMap<String, String>);

impl Segments {
    /// The segment `key` (empty if the route has none).
    pub fn get(&self, key: &str) -> &str {
        self.0.get(key).map_or("", String::as_str)
    }

    fn check(map: HashMap<String, String>) -> Result<Self, String> {
        for (key, value) in &map {
            let (ok, what) = match key.as_str() {
                "name" => (labels::is_dns_subdomain(value), "a DNS subdomain"),
                _ => (labels::is_dns_label(value), "a DNS label"),
            };
            if !ok {
                return Err(format!("path segment {key} {value:?} is not {what}"));
            }
        }
        Ok(Self(map))
    }
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Segments {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        let Path(map) = Path::<HashMap<String, String>>::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        Self::check(map).map_err(|why| {
            let body = serde_json::json!({ "error": why });
            (StatusCode::BAD_REQUEST, Json(body)).into_response()
        })
    }
}

/// What the page needs to know of this server: `GET /api/settings`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    /// Whether pause, resume, abort, retry and undo are served (`--enable-actions`).
    pub actions: bool,
    /// The namespace shown; None: every namespace.
    pub namespace: Option<String>,
    /// The hub's API server.
    pub hub: String,
}

/// One line of the list: an MWRS and where its rollout stands.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    /// `namespace/name`, what the live overview names a line by.
    #[serde(skip)]
    pub key: String,
    pub namespace: String,
    pub name: String,
    pub state: Phase,
    pub message: String,
    pub desired: i64,
    pub updated: i64,
    pub current_revision: Option<String>,
    pub update_revision: Option<String>,
}

impl Row {
    pub fn of(m: &ManifestWorkReplicaSet) -> Self {
        let (state, message) = phase(m);
        let status = m.status.clone().unwrap_or_default();
        let (namespace, name) = (m.namespace().unwrap_or_default(), m.name_any());
        Self {
            key: format!("{namespace}/{name}"),
            namespace,
            name,
            state,
            message,
            desired: status.summary.desired_total,
            updated: status.summary.updated,
            current_revision: status.current_revision,
            update_revision: status.update_revision,
        }
    }
}

/// A failed read, answered with the status its cause maps to and `{"error": why}`.
pub struct ApiError(CliError);

impl From<CliError> for ApiError {
    fn from(e: CliError) -> Self {
        Self(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match self.0.code {
            Exit::NotFound => StatusCode::NOT_FOUND,
            Exit::Forbidden => StatusCode::FORBIDDEN,
            Exit::Unreachable => StatusCode::BAD_GATEWAY,
            // An undo the spec changed under (nothing written).
            Exit::Conflict => StatusCode::CONFLICT,
            // An undo that would leave the MWRS Invalid, a plan of a spec that is.
            Exit::Degraded | Exit::Usage => StatusCode::UNPROCESSABLE_ENTITY,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let body = serde_json::json!({"error": self.0.message});
        (status, Json(body)).into_response()
    }
}

/// `GET /api/mwrs`: every MWRS shown, by namespace and name.
pub async fn list(State(s): State<Arc<Source>>) -> Result<Json<Vec<Row>>, ApiError> {
    let api: Api<ManifestWorkReplicaSet> = match &s.namespace {
        Some(ns) => Api::namespaced(s.client.clone(), ns),
        None => Api::all(s.client.clone()),
    };
    let items = api
        .list(&ListParams::default())
        .await
        .map_err(|e| CliError::kube("listing manifestworkreplicasets", e))?
        .items;
    let mut rows: Vec<Row> = items.iter().map(Row::of).collect();
    rows.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    Ok(Json(rows))
}

/// `GET /api/mwrs/{namespace}/{name}`: one MWRS as `rollout status -o json` shows it.
pub async fn one(State(s): State<Arc<Source>>, path: Segments) -> Result<Json<View>, ApiError> {
    let (_, read) = s.hub(path.get("namespace"))?.read(path.get("name")).await?;
    let view = View::of(
        &read.snapshot,
        read.works_hidden.as_deref(),
        Timestamp::now(),
        &s.judging,
    );
    Ok(Json(view))
}

/// `GET /api/mwrs/{namespace}/{name}/plan`: the waves `rollout plan -o json` prints.
pub async fn plan(State(s): State<Arc<Source>>, path: Segments) -> Result<Json<PlanOut>, ApiError> {
    let hub = s.hub(path.get("namespace"))?;
    let m = hub.get(path.get("name")).await?;
    Ok(Json(crate::cmd::plan::plan(&hub, &m).await?))
}

/// The revisions an undo may go to, as `rollout history -o json` prints them.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct History {
    pub revisions: Vec<Entry>,
    /// Why the clusters per revision are not counted, when they are not.
    pub hidden: Option<String>,
}

/// `GET /api/mwrs/{namespace}/{name}/history`.
pub async fn history(
    State(s): State<Arc<Source>>,
    path: Segments,
) -> Result<Json<History>, ApiError> {
    let hub = s.hub(path.get("namespace"))?;
    let m = hub.get(path.get("name")).await?;
    let stored = hub.history(&m).await?;
    let (revisions, hidden) = history::entries(&hub, &m, &stored).await?;
    Ok(Json(History { revisions, hidden }))
}

/// One cluster's ManifestWork of an MWRS: its name, the revision it carries and the
/// conditions its agent reports (with their messages).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkDetail {
    pub name: String,
    pub revision: Option<String>,
    pub conditions: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>,
}

/// `GET /api/mwrs/{namespace}/{name}/clusters/{cluster}`: that cluster's ManifestWork.
pub async fn cluster(
    State(s): State<Arc<Source>>,
    path: Segments,
) -> Result<Json<WorkDetail>, ApiError> {
    let (namespace, name, cluster) = (path.get("namespace"), path.get("name"), path.get("cluster"));
    s.shows(namespace)?;
    let (k, v) = OwnerKey::new(namespace, name).selector();
    let api: Api<ManifestWork> = Api::namespaced(s.client.clone(), cluster);
    let list = api
        .list(&ListParams::default().labels(&format!("{k}={v}")))
        .await
        .map_err(|e| CliError::kube(&format!("listing manifestworks in {cluster}"), e))?;
    let Some(w) = list.items.into_iter().next() else {
        let why = format!("mwrs/{name} has no ManifestWork in cluster {cluster}");
        return Err(CliError::new(Exit::NotFound, why).into());
    };
    Ok(Json(WorkDetail {
        name: w.name_any(),
        revision: w.labels().get(labels::CONTROLLER_HASH).cloned(),
        conditions: w.status.and_then(|st| st.conditions).unwrap_or_default(),
    }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use axum::Router;
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    use super::*;
    use crate::cmd::dashboard::{guard::Guard, router};

    /// The router with a token, reading from an API server that refuses connections.
    async fn app() -> (Router, String) {
        let gone = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let dead = gone.local_addr().unwrap();
        drop(gone);
        let config = kube::Config::new(format!("http://{dead}").parse().unwrap());
        let source = Source {
            client: Client::try_from(config).unwrap(),
            namespace: None,
            url: String::new(),
            judging: Default::default(),
        };
        let at: std::net::SocketAddr = "127.0.0.1:8000".parse().unwrap();
        let g = Guard::with_token(at, "t0k3n").with_actions(true);
        (router(source, g), at.to_string())
    }

    async fn status_of(app: &Router, host: &str, method: &str, path: &str) -> (u16, String) {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header("host", host)
            .header("authorization", "Bearer t0k3n")
            .header("content-type", "application/json")
            .body(Body::from("{}"))
            .unwrap();
        let answer = app.clone().oneshot(request).await.unwrap();
        let status = answer.status().as_u16();
        let body = axum::body::to_bytes(answer.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    /// Security review D4: a segment that decodes to `/`, `..` or anything not a name is
    /// refused before any request to the API server, with the segment named.
    #[tokio::test]
    async fn a_path_segment_that_is_not_a_name_never_reaches_the_hub() {
        let (app, host) = app().await;
        for (method, path, segment) in [
            ("GET", "/api/mwrs/ns/a%2Fb", "name"),
            ("GET", "/api/mwrs/ns/%2E%2E", "name"),
            ("GET", "/api/mwrs/..%2F..%2Fapi%2Fv1/app/plan", "namespace"),
            ("GET", "/api/mwrs/NS/app/history", "namespace"),
            (
                "GET",
                "/api/mwrs/ns/app/clusters/..%2Fkube-system",
                "cluster",
            ),
            ("GET", "/api/mwrs/ns/a%2Fb/events", "name"),
            ("POST", "/api/mwrs/ns/app/actions/pa%2Fuse", "action"),
        ] {
            let (status, body) = status_of(&app, &host, method, path).await;
            assert_eq!(status, 400, "{path}: {body}");
            assert!(
                body.contains(&format!("path segment {segment} ")),
                "{path}: {body}"
            );
        }
        let (status, body) = status_of(&app, &host, "GET", "/api/mwrs/ns/app").await;
        assert_eq!(status, 502, "a good name is asked of the hub: {body}");
    }
}
