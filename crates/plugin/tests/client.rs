//! The controller's plugin client against a real gRPC server on loopback: UNAVAILABLE is
//! sent again with backoff until the plugin answers, within the call's time bound; any
//! other error comes back at once; a plugin that never answers costs the bound, no more.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use mwrs_plugin::client::PluginClient;
use mwrs_plugin::config::WorkConfig;
use mwrs_plugin::v1alpha1 as api;
use mwrs_plugin::v1alpha1::rollout_plugin_server::{RolloutPlugin, RolloutPluginServer};
use tonic::{Code, Request, Response, Status};

/// Answers Initialize with `fail` for the first `failures` calls, then OK.
struct Flaky {
    calls: Arc<AtomicUsize>,
    failures: usize,
    fail: Code,
}

type Answer<T> = Result<Response<T>, Status>;

#[tonic::async_trait]
impl RolloutPlugin for Flaky {
    async fn initialize(
        &self,
        _: Request<api::InitializeRequest>,
    ) -> Answer<api::InitializeResponse> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        if n < self.failures {
            return Err(Status::new(self.fail, "not now"));
        }
        Ok(Response::new(api::InitializeResponse {
            description: "flaky".into(),
        }))
    }
    async fn begin_rollout(&self, _: Request<api::RolloutRequest>) -> Answer<api::Ack> {
        Ok(Response::new(api::Ack {}))
    }
    async fn progress_rollout(&self, _: Request<api::RolloutRequest>) -> Answer<api::Ack> {
        Ok(Response::new(api::Ack {}))
    }
    async fn validate_rollout_completion(
        &self,
        _: Request<api::ValidateRequest>,
    ) -> Answer<api::ValidateResponse> {
        Err(Status::unimplemented("no"))
    }
    async fn mutate_manifest_work(
        &self,
        _: Request<api::MutateRequest>,
    ) -> Answer<api::MutateResponse> {
        Err(Status::unimplemented("no"))
    }
    async fn begin_abort(&self, _: Request<api::RolloutRequest>) -> Answer<api::Ack> {
        Ok(Response::new(api::Ack {}))
    }
    async fn validate_abort_completion(
        &self,
        _: Request<api::ValidateRequest>,
    ) -> Answer<api::ValidateResponse> {
        Err(Status::unimplemented("no"))
    }
}

/// Serves a [`Flaky`] on loopback; returns a client of it bounded by `timeout`, and the
/// count of calls it received.
async fn serve(failures: usize, fail: Code, timeout: Duration) -> (PluginClient, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let service = RolloutPluginServer::new(Flaky {
        calls: calls.clone(),
        failures,
        fail,
    });
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    let config = WorkConfig::parse(&format!(
        "plugins:\n  - name: flaky\n    endpoint: http://127.0.0.1:{port}\n"
    ))
    .unwrap();
    let client = PluginClient::new(&config.plugins[0])
        .unwrap()
        .with_timeout(timeout);
    (client, calls)
}

fn init() -> api::InitializeRequest {
    api::InitializeRequest {
        plugin: "flaky".into(),
        controller_version: "test".into(),
    }
}

#[tokio::test]
async fn unavailable_is_sent_again_until_the_plugin_answers() {
    let (client, calls) = serve(2, Code::Unavailable, Duration::from_secs(10)).await;
    let r = client.initialize(init()).await.unwrap();
    assert_eq!(r.description, "flaky");
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn another_error_comes_back_at_once() {
    let (client, calls) = serve(1, Code::InvalidArgument, Duration::from_secs(10)).await;
    let e = client.initialize(init()).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_plugin_that_never_answers_costs_the_time_bound() {
    let (client, calls) = serve(usize::MAX, Code::Unavailable, Duration::from_millis(1500)).await;
    let started = tokio::time::Instant::now();
    let e = client.initialize(init()).await.unwrap_err();
    let took = started.elapsed();
    assert!(
        matches!(e.code(), Code::Unavailable | Code::DeadlineExceeded),
        "{e}"
    );
    // Bounded (a loaded machine may add some): not retried for ever.
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert!(calls.load(Ordering::SeqCst) >= 2, "sent again");
}

#[tokio::test]
async fn nothing_listening_is_unavailable_within_the_bound() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let config = WorkConfig::parse(&format!(
        "plugins:\n  - name: gone\n    endpoint: http://127.0.0.1:{port}\n"
    ))
    .unwrap();
    let client = PluginClient::new(&config.plugins[0])
        .unwrap()
        .with_timeout(Duration::from_secs(1));
    let started = tokio::time::Instant::now();
    let e = client.initialize(init()).await.unwrap_err();
    assert!(
        matches!(e.code(), Code::Unavailable | Code::DeadlineExceeded),
        "{e}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// Security review X1: the client certificate is read again when its files change. A
/// plugin that trusts only certificate B refuses the controller while the files hold A,
/// and answers it once B is written there (as the kubelet does when cert-manager renews
/// the Secret), with no new client; the expiry the metric reports is B's.
#[tokio::test]
async fn a_client_certificate_renewed_on_disk_is_presented_without_a_restart() {
    use base64::Engine as _;
    let server = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let (a, b) = (
        rcgen::generate_simple_self_signed(vec!["controller-a".into()]).unwrap(),
        rcgen::generate_simple_self_signed(vec!["controller-b".into()]).unwrap(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let tls = tonic::transport::ServerTlsConfig::new()
        .identity(tonic::transport::Identity::from_pem(
            server.cert.pem(),
            server.signing_key.serialize_pem(),
        ))
        .client_ca_root(tonic::transport::Certificate::from_pem(b.cert.pem()));
    let service = RolloutPluginServer::new(Flaky {
        calls: Arc::default(),
        failures: 0,
        fail: Code::Ok,
    });
    let router = tonic::transport::Server::builder()
        .tls_config(tls)
        .unwrap()
        .add_service(service);
    tokio::spawn(router.serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)));
    let dir = std::env::temp_dir().join(format!("mwrs-client-cert-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |c: &rcgen::CertifiedKey<rcgen::KeyPair>| {
        std::fs::write(dir.join("tls.crt"), c.cert.pem()).unwrap();
        std::fs::write(dir.join("tls.key"), c.signing_key.serialize_pem()).unwrap();
    };
    write(&a);
    let bundle = base64::engine::general_purpose::STANDARD.encode(server.cert.pem());
    let config = WorkConfig::parse(&format!(
        "plugins:\n  - name: flaky\n    endpoint: localhost:{port}\n    caCertificate:\n      caBundle: {bundle}\n    clientCertificate:\n      certFile: {}\n      keyFile: {}\n",
        dir.join("tls.crt").display(),
        dir.join("tls.key").display(),
    ))
    .unwrap();
    let client = PluginClient::new(&config.plugins[0])
        .unwrap()
        .with_timeout(Duration::from_secs(3))
        .with_cert_recheck(Duration::from_millis(100));
    let refused = client.initialize(init()).await;
    assert!(refused.is_err(), "a stranger's certificate: {refused:?}");
    write(&b);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        match client.initialize(init()).await {
            Ok(_) => break,
            Err(e) if tokio::time::Instant::now() < deadline => {
                eprintln!("not yet: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("the renewed certificate was never presented: {e}"),
        }
    }
    let b_expires = mwrs_plugin::client::not_after(b.cert.pem().as_bytes()).unwrap();
    assert_eq!(client.client_cert_not_after(), Some(Ok(b_expires)));
    let _ = std::fs::remove_dir_all(&dir);
}
