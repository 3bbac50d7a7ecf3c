//! `dashboard` (issue #19): rollouts in a browser. The server runs as the user, with the
//! user's kubeconfig and rights, and shows what `get` and `rollout status` show (the same
//! views, from the same engine stages), read-only. It listens on loopback by default and
//! answers only requests with the one-time token printed, with the URL, on the first line
//! of stdout ([`guard`]).
//!
//! Built so far: the guard, the data as JSON ([`api`]) and the live stream ([`feed`]).
//! The pages and the actions are not built yet; the command is hidden from `--help`
//! until they are.

pub mod api;
pub mod feed;
pub mod guard;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::routing::get;

use crate::args::{DashboardArgs, Global};
use crate::error::{CliError, Exit, Result};
use crate::hub::HubClient;

/// The dashboard's routes behind `g`, reading from `source`.
pub fn router(source: api::Source, g: guard::Guard) -> Router {
    let source = Arc::new(source);
    let feeds = Arc::new(feed::Feeds::new(source.clone()));
    let live = Router::new()
        .route("/api/mwrs/{namespace}/{name}/events", get(feed::events))
        .with_state(feeds);
    Router::new()
        .route("/api/mwrs", get(api::list))
        .route("/api/mwrs/{namespace}/{name}", get(api::one))
        .with_state(source)
        .merge(live)
        .layer(axum::middleware::from_fn_with_state(g, guard::guard))
}

/// Serves until interrupted; the URL with the token is the first line of stdout.
pub async fn run(hub: HubClient, g: &Global, a: &DashboardArgs) -> Result<Exit> {
    let addr = SocketAddr::new(a.address, a.port);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| CliError::error(format!("cannot listen on {addr}: {e}")))?;
    let bound = listener
        .local_addr()
        .map_err(|e| CliError::error(format!("listening on {addr}: {e}")))?;
    let guard = guard::Guard::new(bound);
    let source = api::Source {
        client: hub.client.clone(),
        namespace: (!g.all_namespaces).then(|| hub.namespace.clone()),
        url: hub.url.clone(),
    };
    println!("http://{bound}/?token={}", guard.token());
    if !bound.ip().is_loopback() {
        eprintln!(
            "warning: listening on {bound}, beyond this machine: anyone with the URL reads the \
             hub as you"
        );
    }
    axum::serve(listener, router(source, guard))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(|e| CliError::error(format!("serving on {bound}: {e}")))?;
    Ok(Exit::Ok)
}
