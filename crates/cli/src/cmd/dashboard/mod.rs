//! `dashboard` (issue #19): rollouts in a browser. The server runs as the user, with the
//! user's kubeconfig and rights, and shows what `get`, `rollout status` and `rollout plan`
//! show (the same views, from the same engine stages). It listens on loopback by default
//! and answers only the browser that opened the URL printed on the first line of stdout
//! (its one-time code is exchanged for a session cookie: [`guard`]). It is read-only unless started with `--enable-actions`;
//! then it also pauses, resumes, aborts, retries and undoes, writing exactly what those
//! commands write ([`actions`]).
//!
//! The parts: the guard, the data as JSON ([`api`]), the live streams of one MWRS ([`feed`])
//! and of every MWRS shown ([`overview`]), both in [`frames`], and the
//! page, compiled in (`assets/`: `view.js` is its pure logic, tested with `node --test`).

pub mod actions;
pub mod api;
pub mod feed;
pub mod frames;
pub mod guard;
pub mod overview;

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
    let overview = Arc::new(overview::OverviewFeed::new(source.clone()));
    let live = Router::new()
        .route("/api/mwrs/{namespace}/{name}/events", get(feed::events))
        .with_state(feeds)
        .merge(
            Router::new()
                .route("/api/mwrs/events", get(overview::events))
                .with_state(overview),
        );
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

/// How many connections the dashboard serves at once; a new one evicts the oldest still
/// waiting for its request (the page's live streams are long requests).
const LIMITS: mwrs_serve::Limits = mwrs_serve::Limits {
    max_connections: 64,
    header_timeout: std::time::Duration::from_secs(5),
    connection_timeout: None,
    reserve: 0,
};

/// Why the dashboard may not listen as asked, if it may not: beyond loopback the session
/// travels to the browser and back on every request, so it needs TLS, or an explicit
/// `--insecure-listen` (and never with actions, which write as the user).
pub fn refused_exposure(
    address: std::net::IpAddr,
    tls: bool,
    insecure: bool,
    actions: bool,
) -> Option<String> {
    if address.is_loopback() || tls {
        return None;
    }
    if actions {
        return Some(format!(
            "--enable-actions on {address}, beyond this machine, needs TLS (--tls-cert-file \
             and --tls-key-file): over plain HTTP anyone on the path could take the session \
             and write as you"
        ));
    }
    (!insecure).then(|| {
        format!(
            "--address {address} is beyond this machine: serve it over TLS (--tls-cert-file \
             and --tls-key-file), or pass --insecure-listen to send the session over plain HTTP"
        )
    })
}

/// A dashboard listening on `address`:`port`, not serving yet.
pub struct Dashboard {
    listener: tokio::net::TcpListener,
    bound: SocketAddr,
    guard: guard::Guard,
    tls: Option<tokio_rustls::TlsAcceptor>,
}

impl Dashboard {
    /// Listens on `address`:`port` (0: any free one), with new secrets, over plain HTTP.
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
            tls: None,
        })
    }

    /// The same dashboard, over TLS with `acceptor`.
    pub fn with_tls(self, acceptor: tokio_rustls::TlsAcceptor) -> Self {
        Self {
            guard: self.guard.with_tls(true),
            tls: Some(acceptor),
            ..self
        }
    }

    /// The URL that lets one browser in, once: the one-time code is in it.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!(
            "{scheme}://{}/?{}={}",
            self.bound,
            guard::CODE,
            self.guard.code()
        )
    }

    /// Serves `source` until `stop` completes, within [`LIMITS`].
    pub async fn serve(
        self,
        source: api::Source,
        stop: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<()> {
        let app = router(source, self.guard);
        tokio::select! {
            _ = mwrs_serve::serve(self.listener, app, self.tls, LIMITS) => {}
            _ = stop => {}
        }
        Ok(())
    }
}

/// The TLS acceptor of `--tls-cert-file` and `--tls-key-file`, when given.
fn tls_of(a: &DashboardArgs) -> Result<Option<tokio_rustls::TlsAcceptor>> {
    let (Some(cert), Some(key)) = (&a.tls_cert_file, &a.tls_key_file) else {
        return Ok(None);
    };
    let read = |p: &std::path::Path| {
        std::fs::read(p).map_err(|e| CliError::usage(format!("cannot read {}: {e}", p.display())))
    };
    let acceptor = mwrs_serve::tls_acceptor(&read(cert)?, &read(key)?)
        .map_err(|why| CliError::usage(format!("--tls-cert-file, --tls-key-file: {why}")))?;
    Ok(Some(acceptor))
}

/// Serves until interrupted; the URL with the one-time code is the first line of stdout.
pub async fn run(hub: HubClient, g: &Global, a: &DashboardArgs) -> Result<Exit> {
    let tls = tls_of(a)?;
    if let Some(why) = refused_exposure(
        a.address,
        tls.is_some(),
        a.insecure_listen,
        a.enable_actions,
    ) {
        return Err(CliError::usage(why));
    }
    let mut d = Dashboard::bind(a.address, a.port, a.enable_actions).await?;
    if let Some(tls) = tls {
        d = d.with_tls(tls);
    }
    let source = api::Source {
        client: hub.client.clone(),
        namespace: (!g.all_namespaces).then(|| hub.namespace.clone()),
        url: hub.url.clone(),
        judging: crate::settings::Judging::read(&hub.client, &a.controller).await,
    };
    let url = d.url();
    println!("{url}");
    if a.open {
        open_browser(&url);
    }
    if !d.bound.ip().is_loopback() && d.tls.is_none() {
        eprintln!(
            "warning: listening on {} over plain HTTP (--insecure-listen): anyone on the \
             path can take the session and read the hub as you",
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Security review D1: beyond loopback, plain HTTP only when asked for, and actions
    /// only over TLS.
    #[test]
    fn beyond_loopback_the_session_needs_tls_or_an_explicit_flag() {
        let any: std::net::IpAddr = [0, 0, 0, 0].into();
        let lo: std::net::IpAddr = [127, 0, 0, 1].into();
        // (address, tls, --insecure-listen, --enable-actions) → refused?
        let cases = [
            (lo, false, false, true, false),
            (any, true, false, true, false),
            (any, false, true, false, false),
            (any, false, false, false, true),
            (any, false, true, true, true),
        ];
        for (address, tls, insecure, actions, refused) in cases {
            let why = refused_exposure(address, tls, insecure, actions);
            assert_eq!(
                why.is_some(),
                refused,
                "{address} tls={tls} insecure={insecure} actions={actions}: {why:?}"
            );
        }
        let why = refused_exposure(any, false, false, false).unwrap_or_default();
        assert!(
            why.contains("--tls-cert-file") && why.contains("--insecure-listen"),
            "{why}"
        );
        let why = refused_exposure(any, false, true, true).unwrap_or_default();
        assert!(
            why.contains("--enable-actions") && why.contains("TLS"),
            "{why}"
        );
    }
}
