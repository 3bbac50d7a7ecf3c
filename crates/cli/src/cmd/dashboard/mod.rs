//! `dashboard` (issue #19): rollouts in a browser. The server runs as the user, with the
//! user's kubeconfig and rights, and shows what `get`, `rollout status` and `rollout plan`
//! show (the same views, from the same engine stages). It listens on loopback by default
//! and answers only the browser that opened the URL printed on the first line of stdout
//! (its one-time code is exchanged for a session cookie: [`guard`]). It is read-only unless started with `--enable-actions`;
//! then it also pauses, resumes, aborts, retries and undoes, writing exactly what those
//! commands write ([`actions`]).
//!
//! The parts: the guard, the data as JSON ([`api`]), the live stream ([`feed`]), and the
//! page, compiled in (`assets/`: `view.js` is its pure logic, tested with `node --test`).

pub mod actions;
pub mod api;
pub mod feed;
pub mod guard;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::{get, post};

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
    let settings = api::Settings {
        actions: g.actions(),
        namespace: source.namespace.clone(),
        hub: source.url.clone(),
    };
    let mut app = Router::new()
        .route("/", get(|| asset(INDEX, "text/html; charset=utf-8")))
        .route(
            "/app.js",
            get(|| asset(APP_JS, "text/javascript; charset=utf-8")),
        )
        .route(
            "/view.js",
            get(|| asset(VIEW_JS, "text/javascript; charset=utf-8")),
        )
        .route(
            "/app.css",
            get(|| asset(APP_CSS, "text/css; charset=utf-8")),
        )
        .route("/api/settings", get(|| async move { axum::Json(settings) }))
        .route("/api/mwrs", get(api::list))
        .route("/api/mwrs/{namespace}/{name}", get(api::one))
        .route(
            "/api/mwrs/{namespace}/{name}/clusters/{cluster}",
            get(api::cluster),
        )
        .route("/api/mwrs/{namespace}/{name}/plan", get(api::plan))
        .route("/api/mwrs/{namespace}/{name}/history", get(api::history));
    if g.actions() {
        app = app.route(
            "/api/mwrs/{namespace}/{name}/actions/{action}",
            post(actions::act),
        );
    }
    app.with_state(source)
        .merge(live)
        .layer(axum::middleware::from_fn_with_state(g, guard::guard))
}

// The page, compiled in: the binary serves nothing from disk or from the internet.
const INDEX: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const VIEW_JS: &str = include_str!("assets/view.js");
const APP_CSS: &str = include_str!("assets/app.css");

async fn asset(body: &'static str, content_type: &'static str) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, content_type)], body)
}

/// A dashboard listening on `address`:`port`, not serving yet.
pub struct Dashboard {
    listener: tokio::net::TcpListener,
    bound: SocketAddr,
    guard: guard::Guard,
}

impl Dashboard {
    /// Listens on `address`:`port` (0: any free one), with a new token.
    pub async fn bind(address: std::net::IpAddr, port: u16, actions: bool) -> Result<Self> {
        let addr = SocketAddr::new(address, port);
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| CliError::error(format!("cannot listen on {addr}: {e}")))?;
        let bound = listener
            .local_addr()
            .map_err(|e| CliError::error(format!("listening on {addr}: {e}")))?;
        let guard = guard::Guard::new(bound).with_actions(actions);
        Ok(Self {
            listener,
            bound,
            guard,
        })
    }

    /// The URL that lets one browser in, once: the one-time code is in it.
    pub fn url(&self) -> String {
        format!(
            "http://{}/?{}={}",
            self.bound,
            guard::CODE,
            self.guard.code()
        )
    }

    /// Serves `source` until `stop` completes.
    pub async fn serve(
        self,
        source: api::Source,
        stop: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<()> {
        let bound = self.bound;
        axum::serve(self.listener, router(source, self.guard))
            .with_graceful_shutdown(stop)
            .await
            .map_err(|e| CliError::error(format!("serving on {bound}: {e}")))
    }
}

/// Serves until interrupted; the URL with the token is the first line of stdout.
pub async fn run(hub: HubClient, g: &Global, a: &DashboardArgs) -> Result<Exit> {
    let d = Dashboard::bind(a.address, a.port, a.enable_actions).await?;
    let source = api::Source {
        client: hub.client.clone(),
        namespace: (!g.all_namespaces).then(|| hub.namespace.clone()),
        url: hub.url.clone(),
    };
    let url = d.url();
    println!("{url}");
    if a.open {
        open_browser(&url);
    }
    if !d.bound.ip().is_loopback() {
        eprintln!(
            "warning: listening on {}, beyond this machine: anyone with the URL reads the \
             hub as you",
            d.bound
        );
    }
    d.serve(source, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await?;
    Ok(Exit::Ok)
}

/// Opens `url` in the desktop's browser; says so when it cannot (the URL is printed).
fn open_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let started = std::process::Command::new(opener)
        .arg(url)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Err(e) = started {
        eprintln!("cannot open a browser ({opener}: {e}): open the URL above");
    }
}
