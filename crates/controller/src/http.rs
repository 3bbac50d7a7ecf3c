//! The HTTP side of the process: `/metrics` (Prometheus text), `/healthz` (the process
//! serves) and `/readyz` (every store has synced and, with leader election, this replica
//! leads or stands by ready), served within [`Limits`] ([`mwrs_serve`]), with a share of
//! the connections that requests waiting on the API server (`/metrics` reviews) never
//! take, so that neither a flood of idle connections nor a flood of tokens on a slow hub
//! can exhaust the process or starve the probes.
//!
//! [`Serving`] says how: plain HTTP with `/metrics` open (loopback, or asked for), or
//! TLS with `/metrics` behind [`Access`] while the probes stay open (kubelet probes
//! neither present a token nor verify a certificate).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;

pub use mwrs_serve::Limits;

use crate::access::{Access, Decision};
use crate::context::Shared;

/// How the endpoints are served.
#[derive(Clone)]
pub enum Serving {
    /// Plain HTTP; `/metrics` open to anyone who can connect.
    Plain,
    /// TLS; `/metrics` only for a token allowed to `get` it.
    Secure {
        tls: TlsAcceptor,
        access: Arc<Access>,
    },
}

/// The `--metrics-security` choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Security {
    /// Plain HTTP on a loopback address, TLS with authorization on any other.
    Auto,
    /// TLS with authorization.
    Secure,
    /// Plain HTTP, `/metrics` open, on any address (ask for it explicitly).
    Insecure,
}

/// Is the endpoint on `addr` served with TLS and authorization?
pub fn is_secure(addr: &SocketAddr, choice: Security) -> bool {
    match choice {
        Security::Auto => !addr.ip().is_loopback(),
        Security::Secure => true,
        Security::Insecure => false,
    }
}

#[derive(Clone)]
struct Endpoints {
    shared: Shared,
    access: Option<Arc<Access>>,
    /// Requests that may wait on the API server at once.
    waiting: Arc<Semaphore>,
}

fn router(shared: Shared, access: Option<Arc<Access>>, limits: Limits) -> Router {
    let waiting = Arc::new(Semaphore::new(limits.may_wait()));
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(Endpoints {
            shared,
            access,
            waiting,
        })
}

async fn metrics(State(e): State<Endpoints>, headers: HeaderMap) -> axum::response::Response {
    if let Some(access) = &e.access {
        let decision = access.check(&headers, &e.waiting).await;
        if decision != Decision::Allowed {
            return (decision.status(), format!("{decision:?}\n")).into_response();
        }
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        e.shared.metrics.encode(),
    )
        .into_response()
}

async fn readyz(State(e): State<Endpoints>) -> impl IntoResponse {
    if e.shared.ready.load(Ordering::Acquire) && !e.shared.blind.load(Ordering::Acquire) {
        (StatusCode::OK, "ready")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "stores not synced")
    }
}

/// Binds `addr` and serves until the process ends; returns the bound address (useful
/// with port 0).
pub async fn serve(
    addr: SocketAddr,
    shared: Shared,
    serving: Serving,
) -> std::io::Result<SocketAddr> {
    serve_with(addr, shared, serving, Limits::default()).await
}

/// [`serve`] with explicit [`Limits`].
pub async fn serve_with(
    addr: SocketAddr,
    shared: Shared,
    serving: Serving,
    limits: Limits,
) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let (tls, access) = match serving {
        Serving::Plain => (None, None),
        Serving::Secure { tls, access } => (Some(tls), Some(access)),
    };
    tokio::spawn(mwrs_serve::serve(
        listener,
        router(shared, access, limits),
        tls,
        limits,
    ));
    Ok(bound)
}

/// GETs `url` (`/readyz` of a running controller, for `helm test`) and returns its body
/// unless the answer is an error status. Over https the certificate is not verified: the probe checks that a replica
/// answers, as the kubelet's does, not who it is, and sends nothing secret.
pub async fn probe(url: &str) -> Result<String, String> {
    let uri: axum::http::Uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
    let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
    let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
        return Err(format!("{url}: not an absolute URL"));
    };
    let base = format!("{scheme}://{authority}")
        .parse()
        .map_err(|e| format!("{url}: {e}"))?;
    let mut config = kube::Config::new(base);
    config.accept_invalid_certs = true;
    config.read_timeout = Some(std::time::Duration::from_secs(10));
    config.connect_timeout = Some(std::time::Duration::from_secs(10));
    let client = kube::Client::try_from(config).map_err(|e| format!("{url}: {e}"))?;
    let request = axum::http::Request::get(path)
        .body(Vec::new())
        .map_err(|e| format!("{url}: {e}"))?;
    client
        .request_text(request)
        .await
        .map_err(|e| format!("{url}: {e}"))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    /// `/metrics` behind [`Access`] on plain TCP, whose reviews go to an API server that
    /// accepts connections and never answers (a hub stalled or overloaded).
    async fn start_with_stalled_reviews(limits: Limits) -> (SocketAddr, tokio::net::TcpListener) {
        let stalled = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", stalled.local_addr().expect("addr"));
        let config = kube::Config::new(url.parse().expect("url"));
        let client = kube::Client::try_from(config).expect("client");
        let access = Some(Arc::new(Access::new(client)));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let app = router(Shared::default(), access, limits);
        tokio::spawn(mwrs_serve::serve(listener, app, None, limits));
        (addr, stalled)
    }

    /// `/metrics` requests with unknown tokens wait on TokenReviews the hub does not
    /// answer (security review L2): however many, the probes keep connections of their own
    /// and answer within 1 s.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn probes_answer_while_metrics_requests_wait_on_a_stalled_hub() {
        let limits = Limits {
            max_connections: 16,
            header_timeout: Duration::from_secs(60),
            connection_timeout: Some(Duration::from_secs(60)),
            reserve: 4,
        };
        let (addr, _stalled) = start_with_stalled_reviews(limits).await;
        let mut waiting = Vec::new();
        for token in 0..40 {
            let mut s = TcpStream::connect(addr).await.expect("connect");
            let request = format!(
                "GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t{token}\r\n\r\n"
            );
            s.write_all(request.as_bytes()).await.expect("write");
            waiting.push(s);
        }
        for probe in ["/healthz", "/readyz", "/healthz"] {
            let answer = tokio::time::timeout(
                Duration::from_secs(1),
                mwrs_testsupport::raw_get(addr, probe),
            )
            .await
            .unwrap_or_else(|_| panic!("{probe} answered within 1 s"))
            .expect("read");
            assert!(answer.starts_with("HTTP/1.1 "), "{probe}: {answer}");
        }
        // At most `max_connections - reserve` of them wait on the hub; the others were
        // told to come back later (429), or closed unread at the connection cap.
        let (mut waiting_now, mut throttled) = (0, 0);
        for s in &mut waiting {
            let mut buf = [0u8; 12];
            match tokio::time::timeout(Duration::from_millis(200), s.read(&mut buf)).await {
                Err(_) => waiting_now += 1,
                Ok(Ok(12)) => throttled += usize::from(&buf == b"HTTP/1.1 429"),
                Ok(_) => {}
            }
        }
        assert!(
            waiting_now <= 12,
            "{waiting_now} of 40 still wait on the hub"
        );
        assert!(throttled >= 1, "none throttled");
    }

    #[test]
    fn plain_http_only_on_loopback_or_when_asked_for() {
        let lo: SocketAddr = "127.0.0.1:8080".parse().expect("addr");
        let lo6: SocketAddr = "[::1]:8080".parse().expect("addr");
        let any: SocketAddr = "0.0.0.0:8443".parse().expect("addr");
        let pod: SocketAddr = "10.1.2.3:8443".parse().expect("addr");
        assert!(!is_secure(&lo, Security::Auto));
        assert!(!is_secure(&lo6, Security::Auto));
        assert!(is_secure(&any, Security::Auto));
        assert!(is_secure(&pod, Security::Auto));
        assert!(is_secure(&lo, Security::Secure));
        assert!(!is_secure(&any, Security::Insecure));
    }
}
