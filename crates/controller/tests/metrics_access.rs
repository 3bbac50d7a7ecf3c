//! `/metrics` served securely (issue #12 item 6), by the controller binary under the
//! shipped RBAC: TLS with the certificate of `--metrics-cert-dir`; `/metrics` only for a
//! bearer token the API server accepts (TokenReview) whose user may `get /metrics`
//! (SubjectAccessReview: the shipped `mwrs-controller-metrics-reader` ClusterRole); the probes open.
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`); skipped without it unless CI=true.

// run-tests: alone (changes cluster-wide objects of the shared test hub)

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::rbac;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, Patch, PatchParams};
use mwrs_testsupport::{ChildProcess, TestHub, wait_for};
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// The address the controller says it serves on (its JSON log).
async fn served_addr(controller: &ChildProcess) -> SocketAddr {
    wait_for("the controller serving", common::WAIT, || async {
        controller
            .output()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find_map(|l| {
                let f = &l["fields"];
                (f["message"].as_str()?.starts_with("serving /metrics") && f["scheme"] == "https")
                    .then(|| f["addr"].as_str()?.parse::<SocketAddr>().ok())
                    .flatten()
            })
            .ok_or_else(|| controller.output())
    })
    .await
}

fn connector(ca: &CertificateDer<'static>) -> TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    TlsConnector::from(Arc::new(config))
}

/// Status code and body of `GET path` over TLS, verifying the server's certificate.
async fn get(
    tls: &TlsConnector,
    addr: SocketAddr,
    path: &str,
    token: Option<&str>,
) -> (u16, String) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let mut s = tls
        .connect(name, tcp)
        .await
        .expect("TLS handshake with a verified certificate");
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{auth}\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf).await;
    let text = String::from_utf8_lossy(&buf).to_string();
    let code = text.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_need_tls_and_an_allowed_token_while_probes_stay_open() {
    let Some(hub) = TestHub::from_env("metricsauth", 1).await else {
        return;
    };
    // The serving certificate, as a mounted Secret would hold it.
    let made = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let dir = std::env::temp_dir().join(format!("mwrs-metrics-tls-{}", hub.namespace));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("tls.crt"), made.cert.pem()).unwrap();
    std::fs::write(dir.join("tls.key"), made.signing_key.serialize_pem()).unwrap();
    let tls = connector(made.cert.der());

    // A reader bound to the shipped metrics-reader role, and a user without it.
    let ns = hub.namespace.as_str();
    let pp = PatchParams::apply("mwrs-tests").force();
    let reader_role = rbac::shipped("ClusterRole", "mwrs-controller-metrics-reader");
    Api::<ClusterRole>::all(hub.client.clone())
        .patch(
            "mwrs-controller-metrics-reader",
            &pp,
            &Patch::Apply(&reader_role),
        )
        .await
        .unwrap();
    let binding = format!("mwrs-controller-metrics-reader-{ns}");
    Api::<ClusterRoleBinding>::all(hub.client.clone())
        .patch(
            &binding,
            &pp,
            &Patch::Apply(json!({"apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding", "metadata": {"name": binding},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "mwrs-controller-metrics-reader"},
                "subjects": [{"kind": "ServiceAccount", "name": "scraper", "namespace": ns}]})),
        )
        .await
        .unwrap();
    let scraper = hub.service_account_token("scraper").await.unwrap();
    let stranger = hub.service_account_token("stranger").await.unwrap();

    let dir_arg = dir.display().to_string();
    let controller = common::spawn_controller_binary(
        &hub,
        &[
            "--metrics-security",
            "secure",
            "--metrics-cert-dir",
            &dir_arg,
            "--log-format",
            "json",
        ],
    )
    .await;
    let addr = served_addr(&controller).await;

    assert_eq!(get(&tls, addr, "/healthz", None).await.0, 200);
    wait_for("ready, without a token", common::WAIT, || async {
        match get(&tls, addr, "/readyz", None).await {
            (200, _) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert_eq!(get(&tls, addr, "/metrics", None).await.0, 401, "no token");
    assert_eq!(
        get(&tls, addr, "/metrics", Some("not-a-token")).await.0,
        401,
        "a bad token"
    );
    assert_eq!(
        get(&tls, addr, "/metrics", Some(&stranger)).await.0,
        403,
        "a user without the role"
    );
    // RBAC bindings reach the authorizer's cache within a moment.
    let body = wait_for(
        "the scraper reading /metrics",
        Duration::from_secs(30),
        || async {
            match get(&tls, addr, "/metrics", Some(&scraper)).await {
                (200, body) => Ok(body),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    assert!(body.contains("mwrs_controller_reconciles_total"), "{body}");

    // Plain HTTP on the TLS port gets no HTTP answer.
    let mut plain = TcpStream::connect(addr).await.unwrap();
    plain
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), plain.read_to_end(&mut buf)).await;
    assert!(!String::from_utf8_lossy(&buf).starts_with("HTTP/1.1 200"));
}
