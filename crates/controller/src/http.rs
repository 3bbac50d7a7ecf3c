//! The HTTP side of the process: `/metrics` (Prometheus text), `/healthz` (the process
//! serves) and `/readyz` (every store has synced and, with leader election, this replica
//! leads or stands by ready), served within [`Limits`]: one request per connection, a
//! header timeout, a connection cap that evicts the oldest idle connection, and a share of
//! the connections that requests waiting on the API server (`/metrics` reviews) never
//! take, so that neither a flood of idle connections nor a flood of tokens on a slow hub
//! can exhaust the process or starve the probes.
//!
//! [`Serving`] says how: plain HTTP with `/metrics` open (loopback, or asked for), or
//! TLS with `/metrics` behind [`Access`] while the probes stay open (kubelet probes
//! neither present a token nor verify a certificate).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use hyper::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Semaphore;
use tokio::task::{AbortHandle, JoinSet};
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

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
    if e.shared.ready.load(Ordering::Acquire) {
        (StatusCode::OK, "ready")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "stores not synced")
    }
}

/// What one connection may take from the server.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Connections served at once. At the limit a new connection evicts the oldest one
    /// still waiting for its request, so that probes answer under a flood of idle or
    /// half-open connections.
    pub max_connections: usize,
    /// How long a connection may take to send its request header.
    pub header_timeout: Duration,
    /// How long a whole connection may last.
    pub connection_timeout: Duration,
    /// Connections that requests waiting on the API server never take: they stay for the
    /// probes and for scrapes answered from the cache.
    pub probe_reserve: usize,
}

impl Limits {
    /// How many requests may wait on the API server at once (at least one).
    fn may_wait(&self) -> usize {
        self.max_connections
            .saturating_sub(self.probe_reserve)
            .max(1)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 128,
            header_timeout: Duration::from_secs(5),
            connection_timeout: Duration::from_secs(30),
            probe_reserve: 16,
        }
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
    tokio::spawn(accept(
        listener,
        router(shared, access, limits),
        tls,
        limits,
    ));
    Ok(bound)
}

/// Connections accepted and not yet past their request header, oldest first.
type Waiting = Arc<Mutex<VecDeque<(u64, AbortHandle)>>>;

async fn accept(
    listener: tokio::net::TcpListener,
    app: Router,
    tls: Option<TlsAcceptor>,
    limits: Limits,
) {
    let waiting: Waiting = Arc::default();
    let mut connections = JoinSet::new();
    for id in 0u64.. {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of descriptors, most likely: let some connections end first.
                tracing::warn!(error = %e, "cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        while connections.try_join_next().is_some() {}
        if connections.len() >= limits.max_connections.max(1) && !evict_oldest_waiting(&waiting) {
            // Every connection is busy with a request: this one is refused.
            drop(stream);
            continue;
        }
        let stay = Stay {
            limits,
            id,
            waiting: waiting.clone(),
        };
        let handle = connections.spawn(connection(stream, app.clone(), tls.clone(), stay));
        if let Ok(mut w) = waiting.lock() {
            w.push_back((id, handle));
        }
    }
}

/// Closes the oldest connection still waiting for its request; false when there is none.
fn evict_oldest_waiting(waiting: &Waiting) -> bool {
    let Ok(mut w) = waiting.lock() else {
        return false;
    };
    while let Some((_, handle)) = w.pop_front() {
        if !handle.is_finished() {
            handle.abort();
            return true;
        }
    }
    false
}

/// What a connection is held to, and its place among the waiting ones.
struct Stay {
    limits: Limits,
    id: u64,
    waiting: Waiting,
}

impl Stay {
    /// No longer evictable (its request is in, or it is over).
    fn leave(&self) {
        if let Ok(mut w) = self.waiting.lock() {
            w.retain(|(i, _)| *i != self.id);
        }
    }
}

/// Serves one request on one connection, within the limits; with TLS the handshake
/// counts towards the header timeout.
async fn connection(
    stream: tokio::net::TcpStream,
    app: Router,
    tls: Option<TlsAcceptor>,
    stay: Stay,
) {
    let stay = Arc::new(stay);
    let deadline = stay.limits.connection_timeout;
    let served = async {
        match tls {
            None => serve_one(stream, app, stay.clone()).await,
            Some(tls) => {
                let handshake =
                    tokio::time::timeout(stay.limits.header_timeout, tls.accept(stream));
                if let Ok(Ok(stream)) = handshake.await {
                    serve_one(stream, app, stay.clone()).await;
                }
            }
        }
    };
    let _ = tokio::time::timeout(deadline, served).await;
    stay.leave();
}

async fn serve_one<I>(io: I, app: Router, stay: Arc<Stay>)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let header_timeout = stay.limits.header_timeout;
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        // Its header is in: no longer evictable.
        stay.leave();
        app.clone().oneshot(req)
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .keep_alive(false)
        .serve_connection(TokioIo::new(io), service)
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    /// A server on a free loopback port.
    async fn start(limits: Limits) -> SocketAddr {
        let any = SocketAddr::from(([127, 0, 0, 1], 0));
        serve_with(any, Shared::default(), Serving::Plain, limits)
            .await
            .expect("bind")
    }

    async fn get(addr: SocketAddr, path: &str) -> std::io::Result<String> {
        let mut s = TcpStream::connect(addr).await?;
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .await?;
        let mut out = String::new();
        s.read_to_string(&mut out).await?;
        Ok(out)
    }

    /// 1,000 connections that never finish their request header (reliability review
    /// #11: all were held and liveness stopped answering); a probe still answers in 1 s.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn probes_answer_under_a_flood_of_idle_connections() {
        let limits = Limits {
            max_connections: 64,
            header_timeout: Duration::from_secs(60),
            connection_timeout: Duration::from_secs(60),
            ..Limits::default()
        };
        let addr = start(limits).await;
        let mut idle = Vec::new();
        for _ in 0..1000 {
            let mut s = TcpStream::connect(addr).await.expect("connect");
            s.write_all(b"GET /healthz HTTP/1.1\r\nHost")
                .await
                .expect("write");
            idle.push(s);
        }
        let answer = tokio::time::timeout(Duration::from_secs(1), get(addr, "/healthz"))
            .await
            .expect("answered within 1 s")
            .expect("read");
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        // The server keeps at most its limit of them open: the others see their end.
        let mut closed = 0;
        for s in &mut idle {
            let mut buf = [0u8; 64];
            let read = tokio::time::timeout(Duration::from_millis(20), s.read(&mut buf)).await;
            if let Ok(Ok(0) | Err(_)) = read {
                closed += 1;
            }
        }
        assert!(
            closed >= 1000 - 64,
            "only {closed} of 1,000 idle connections closed"
        );
    }

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
        tokio::spawn(accept(listener, app, None, limits));
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
            connection_timeout: Duration::from_secs(60),
            probe_reserve: 4,
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
            let answer = tokio::time::timeout(Duration::from_secs(1), get(addr, probe))
                .await
                .unwrap_or_else(|_| panic!("{probe} answered within 1 s"))
                .expect("read");
            assert!(answer.starts_with("HTTP/1.1 "), "{probe}: {answer}");
        }
        // At most `max_connections - probe_reserve` of them wait; the others are told to
        // come back later.
        let mut throttled = 0;
        for s in &mut waiting {
            let mut buf = [0u8; 12];
            let read = tokio::time::timeout(Duration::from_millis(50), s.read(&mut buf)).await;
            if let Ok(Ok(12)) = read {
                throttled += usize::from(&buf == b"HTTP/1.1 429");
            }
        }
        assert!(throttled >= 40 - 12, "only {throttled} of 40 throttled");
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

    /// A connection that sends nothing is closed after the header timeout.
    #[tokio::test]
    async fn a_silent_connection_is_closed_after_the_header_timeout() {
        let limits = Limits {
            header_timeout: Duration::from_millis(200),
            ..Limits::default()
        };
        let addr = start(limits).await;
        let mut s = TcpStream::connect(addr).await.expect("connect");
        let mut buf = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf)).await;
        assert!(read.is_ok(), "still open after 5 s");
    }
}
