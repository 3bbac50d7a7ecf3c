//! HTTP serving within [`Limits`], for servers anyone who reaches the port can talk to
//! (the controller's probes and metrics, the dashboard): one request per connection, a
//! header timeout (a TLS handshake counts towards it), an optional bound on a whole
//! connection, and a connection cap at which a new connection evicts the oldest one still
//! waiting for its request, so that a flood of idle or half-open connections can neither
//! exhaust the process nor starve the requests that matter.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use hyper::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::{AbortHandle, JoinSet};
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

/// What one connection may take from the server.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Connections served at once. At the limit a new connection evicts the oldest one
    /// still waiting for its request.
    pub max_connections: usize,
    /// How long a connection may take to send its request header.
    pub header_timeout: Duration,
    /// How long a whole connection may last (None: as long as its answer streams).
    pub connection_timeout: Option<Duration>,
    /// Connections that requests waiting on something slow (the API server) never take,
    /// for the requests that answer at once; the router decides which requests wait.
    pub reserve: usize,
}

impl Limits {
    /// How many requests may wait on something slow at once (at least one).
    pub fn may_wait(&self) -> usize {
        self.max_connections.saturating_sub(self.reserve).max(1)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 128,
            header_timeout: Duration::from_secs(5),
            connection_timeout: Some(Duration::from_secs(30)),
            reserve: 16,
        }
    }
}

/// A TLS acceptor of the certificate chain and private key in `cert_pem` and `key_pem`
/// (HTTP/1.1 only); the error says which part cannot be used.
pub fn tls_acceptor(cert_pem: &[u8], key_pem: &[u8]) -> Result<TlsAcceptor, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("the certificate: {e}"))?;
    if chain.is_empty() {
        return Err("the certificate file holds no PEM certificate".into());
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| format!("the key: {e}"))?;
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| format!("the certificate and key: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(std::sync::Arc::new(config)))
}

/// Connections accepted and not yet past their request header, oldest first.
type Waiting = Arc<Mutex<VecDeque<(u64, AbortHandle)>>>;

/// Serves `app` on `listener` (over TLS with `tls`) within `limits`, for ever.
pub async fn serve(
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
    match stay.limits.connection_timeout {
        Some(deadline) => {
            let _ = tokio::time::timeout(deadline, served).await;
        }
        None => served.await,
    }
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
    use std::net::SocketAddr;

    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    use super::*;

    /// A server of `/healthz` on a free loopback port.
    async fn start(limits: Limits) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let app = Router::new().route("/healthz", get(|| async { "ok" }));
        tokio::spawn(serve(listener, app, None, limits));
        addr
    }

    /// 1,000 connections that never finish their request header (reliability review
    /// #11: all were held and liveness stopped answering); a request still answers in 1 s.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_request_answers_under_a_flood_of_idle_connections() {
        let limits = Limits {
            max_connections: 64,
            header_timeout: Duration::from_secs(60),
            connection_timeout: Some(Duration::from_secs(60)),
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
        let answer = tokio::time::timeout(
            Duration::from_secs(1),
            mwrs_testsupport::raw_get(addr, "/healthz"),
        )
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

    /// The PEM pair of `--tls-cert-file` and `--tls-key-file` serves HTTPS; a key that is
    /// not one is refused with the part named.
    #[tokio::test]
    async fn a_pem_certificate_and_key_serve_over_tls() {
        let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("cert");
        let (cert, key) = (made.cert.pem(), made.signing_key.serialize_pem());
        let err = tls_acceptor(cert.as_bytes(), b"not a key")
            .err()
            .unwrap_or_default();
        assert!(err.starts_with("the key"), "{err}");
        let acceptor = tls_acceptor(cert.as_bytes(), key.as_bytes()).expect("acceptor");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let app = Router::new().route("/healthz", get(|| async { "ok" }));
        tokio::spawn(serve(listener, app, Some(acceptor), Limits::default()));

        let mut roots = rustls::RootCertStore::empty();
        roots.add(made.cert.der().clone()).expect("root");
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
        let tcp = TcpStream::connect(addr).await.expect("connect");
        let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
        let mut s = connector.connect(name, tcp).await.expect("handshake");
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .await
            .expect("write");
        let mut out = String::new();
        s.read_to_string(&mut out).await.expect("read");
        assert!(
            out.starts_with("HTTP/1.1 200") && out.ends_with("ok"),
            "{out}"
        );
    }
}
