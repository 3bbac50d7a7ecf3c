//! `mwrs dashboard` on the test hub (issue #19, first part): the binary prints its URL with
//! the token on its first line, refuses a request without the token, and serves the same
//! data `get` and `rollout status -o json` print.
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`); skipped without it unless CI=true.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{agent_succeeding, create_v1, mwrs, start_controller, watch};
use mwrs_testsupport::TestHub;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// A running `mwrs dashboard`, killed on drop; its URL is `http://{addr}/?token={token}`.
struct Dashboard {
    _child: tokio::process::Child,
    addr: String,
    token: String,
}

async fn start(hub: &TestHub) -> Dashboard {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mwrs"))
        .arg("--kubeconfig")
        .arg(&hub.kubeconfig)
        .args(["-n", &hub.namespace, "dashboard"])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run mwrs dashboard");
    let stdout = child.stdout.take().unwrap();
    let mut first = String::new();
    tokio::time::timeout(
        Duration::from_secs(30),
        BufReader::new(stdout).read_line(&mut first),
    )
    .await
    .expect("the URL within 30 s")
    .unwrap();
    let rest = first.trim().strip_prefix("http://").expect(&first);
    let (addr, token) = rest.split_once("/?token=").expect(&first);
    assert!(
        addr.starts_with("127.0.0.1:"),
        "loopback by default: {first}"
    );
    Dashboard {
        _child: child,
        addr: addr.to_string(),
        token: token.to_string(),
    }
}

/// GET `path` with `headers`; (status, body).
async fn get(addr: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    s.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    // Bodies come whole or chunked; a JSON body is read from its first brace on.
    let body = match body.find(['{', '[']) {
        Some(i) if head.contains("chunked") => {
            let end = body.rfind(['}', ']']).map_or(body.len(), |e| e + 1);
            body[i..end].to_string()
        }
        _ => body.to_string(),
    };
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_serves_what_the_cli_prints_and_only_with_its_token() {
    let Some(hub) = TestHub::from_env("cli-dashboard", 3).await else {
        return;
    };
    let _controller = start_controller(&hub);
    let _agent = agent_succeeding(&hub, Duration::from_millis(200));
    hub.publish_all("p").await;
    create_v1(&hub, "app", json!({"type": "All"})).await;
    assert_eq!(watch(&hub, "app").await.code, 0);

    let d = start(&hub).await;
    let (status, _) = get(&d.addr, "/api/mwrs", &[]).await;
    assert_eq!(status, 401, "no token");
    let auth = format!("Bearer {}", d.token);
    let bearer = [("Authorization", auth.as_str())];
    let (status, body) = get(&d.addr, "/api/mwrs", &bearer).await;
    assert_eq!(status, 200, "{body}");
    let list: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(list[0]["name"], "app");
    assert_eq!(list[0]["state"], "Complete");
    assert_eq!(list[0]["updated"], 3);

    // One MWRS: the very view `rollout status -o json` prints.
    let path = format!("/api/mwrs/{}/app", hub.namespace);
    let (status, body) = get(&d.addr, &path, &bearer).await;
    assert_eq!(status, 200, "{body}");
    let served: Value = serde_json::from_str(&body).unwrap();
    let printed = mwrs(&hub, &["rollout", "status", "app", "-o", "json"])
        .await
        .json();
    assert_eq!(served, printed);

    let (status, body) = get(&d.addr, "/api/mwrs/elsewhere/app", &bearer).await;
    assert_eq!(status, 404, "{body}");
    let missing = format!("/api/mwrs/{}/nope", hub.namespace);
    let (status, body) = get(&d.addr, &missing, &bearer).await;
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("error"), "{body}");
}
