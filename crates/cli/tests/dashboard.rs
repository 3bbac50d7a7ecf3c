//! `mwrs dashboard` on the test hub (issue #19, first part): the binary prints its URL with
//! a one-time code on its first line, exchanges it once for a session cookie named after
//! its port, refuses a request without the session, serves the same data
//! `get` and `rollout status -o json` print, and streams a rollout live: the whole view,
//! then what changed, resumed from the last event a page got, and `stale` when the MWRS
//! goes.
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`); skipped without it unless CI=true.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{agent_succeeding, create_v1, mwrs, start_controller, watch};
use kube::ResourceExt;
use mwrs_api::labels;
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_fleet::AgentHandle;
use mwrs_testsupport::sse::{SseEvent, SseStream};
use mwrs_testsupport::{TaskGuard, TestHub};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A running `mwrs dashboard`, killed on drop, and the session its URL's code was
/// exchanged for.
struct Dashboard {
    _child: tokio::process::Child,
    addr: String,
    token: String,
}

async fn start(hub: &TestHub) -> Dashboard {
    start_with(hub, &[]).await
}

async fn start_with(hub: &TestHub, flags: &[&str]) -> Dashboard {
    let (child, first) = common::start_dashboard(hub, flags).await;
    let rest = first.strip_prefix("http://").expect(&first);
    let (addr, code) = rest.split_once("/?code=").expect(&first);
    assert!(
        addr.starts_with("127.0.0.1:"),
        "loopback by default: {first}"
    );
    let token = mwrs_testsupport::sse::dashboard_session(addr, code)
        .await
        .expect("a session for the code");
    Dashboard {
        _child: child,
        addr: addr.to_string(),
        token,
    }
}

/// The session cookie an answer sets: (name, value).
fn session_of(head: &str) -> (String, String) {
    let cookie = head
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .and_then(|c| c.split(';').next())
        .and_then(|c| c.split_once('='))
        .expect(head);
    (cookie.0.to_string(), cookie.1.to_string())
}

/// A hub of three clusters with the controller and an agent, and MWRS `app` complete on
/// v1; None (skipped) without a hub.
async fn app_on_v1(test: &str) -> Option<(TestHub, (TaskGuard, AgentHandle))> {
    let hub = TestHub::from_env(test, 3).await?;
    let controller = start_controller(&hub);
    let agent = agent_succeeding(&hub, Duration::from_millis(200));
    hub.publish_all("p").await;
    create_v1(&hub, "app", json!({"type": "All"})).await;
    assert_eq!(watch(&hub, "app").await.code, 0);
    Some((hub, (controller, agent)))
}

/// GET `path` with `headers`; (status, body).
async fn get(addr: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let (status, _, body) = get_with_head(addr, path, headers).await;
    (status, body)
}

/// GET `path` with `headers`; (status, head, body).
async fn get_with_head(addr: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String, String) {
    send(addr, "GET", path, headers, "").await
}

/// POST `body` to `path` with `headers`; (status, body).
async fn post(addr: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let (status, _, body) = send(addr, "POST", path, headers, body).await;
    (status, body)
}

/// One HTTP/1.1 request; (status, head, body).
async fn send(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
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
    (status, head.to_string(), body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_serves_what_the_cli_prints_and_only_with_its_session() {
    let Some((hub, _running)) = app_on_v1("cli-dashboard").await else {
        return;
    };

    let (child, first) = common::start_dashboard(&hub, &[]).await;
    let (addr, code) = first["http://".len()..]
        .split_once("/?code=")
        .expect(&first);
    let (status, _) = get(addr, "/api/mwrs", &[]).await;
    assert_eq!(status, 401, "no session");
    // The URL printed: its code is exchanged for the session's cookie, named after the
    // port, and the browser goes on to the page without the code.
    let url = format!("/?code={code}");
    let (status, head, _) = get_with_head(addr, &url, &[]).await;
    assert_eq!(status, 303, "{head}");
    let (name, token) = session_of(&head);
    let port = addr.rsplit_once(':').unwrap().1;
    assert_eq!(name, format!("mwrs-dashboard-{port}"));
    let cookie = format!("{name}={token}");
    let (status, head, body) = get_with_head(addr, "/", &[("Cookie", &cookie)]).await;
    assert_eq!(status, 200, "{head}");
    assert!(
        body.contains(r#"<script type="module" src="/app.js">"#),
        "{body}"
    );
    assert!(
        head.to_lowercase()
            .contains("content-security-policy: default-src 'none'"),
        "{head}"
    );
    for asset in ["/app.js", "/view.js", "/app.css"] {
        let (status, _) = get(addr, asset, &[("Cookie", &cookie)]).await;
        assert_eq!(status, 200, "{asset}");
    }
    // Once only.
    let (status, body) = get(addr, &url, &[]).await;
    assert_eq!(status, 401, "{body}");
    let d = Dashboard {
        _child: child,
        addr: addr.to_string(),
        token,
    };
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

    // The planned waves and the revisions, as `rollout plan` and `rollout history` print them.
    for (rest, command, field) in [
        ("plan", "plan", None),
        ("history", "history", Some("revisions")),
    ] {
        let (status, body) = get(&d.addr, &format!("{path}/{rest}"), &bearer).await;
        assert_eq!(status, 200, "{body}");
        let served: Value = serde_json::from_str(&body).unwrap();
        let printed = mwrs(&hub, &["rollout", command, "app", "-o", "json"])
            .await
            .json();
        let served = field.map_or(served.clone(), |f| served[f].clone());
        assert_eq!(served, printed, "{rest}");
    }

    // A cluster's ManifestWork, as its agent reports it.
    let work = format!(
        "/api/mwrs/{}/app/clusters/{}",
        hub.namespace, hub.clusters[0]
    );
    let (status, body) = get(&d.addr, &work, &bearer).await;
    assert_eq!(status, 200, "{body}");
    let work: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(work["revision"], printed["currentRevision"]);
    let types: Vec<&str> = work["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["type"].as_str())
        .collect();
    assert!(
        types.contains(&"Applied") && types.contains(&"Available"),
        "{types:?}"
    );
    let none = format!("/api/mwrs/{}/app/clusters/no-such-cluster", hub.namespace);
    assert_eq!(get(&d.addr, &none, &bearer).await.0, 404);

    let (status, body) = get(&d.addr, "/api/mwrs/elsewhere/app", &bearer).await;
    assert_eq!(status, 404, "{body}");
    let missing = format!("/api/mwrs/{}/nope", hub.namespace);
    let (status, body) = get(&d.addr, &missing, &bearer).await;
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("error"), "{body}");
}

/// A page's live stream.
struct Events(SseStream);

impl Events {
    async fn open(addr: &str, path: &str, headers: &[(&str, &str)]) -> Self {
        Self(SseStream::open(addr, path, headers).await.unwrap())
    }

    /// The next event, within 60 s.
    async fn next(&mut self) -> SseEvent {
        tokio::time::timeout(Duration::from_secs(60), self.0.next())
            .await
            .expect("an event within 60 s")
            .unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_stream_sends_the_view_then_what_changed_and_resumes() {
    let Some(hub) = TestHub::from_env("cli-dashboard-live", 4).await else {
        return;
    };
    let _controller = start_controller(&hub);
    let _agent = agent_succeeding(&hub, Duration::from_millis(300));
    hub.publish_all("p").await;
    create_v1(
        &hub,
        "app",
        json!({"type": "Progressive", "progressive": {"maxConcurrency": 1}}),
    )
    .await;
    assert_eq!(watch(&hub, "app").await.code, 0);

    let d = start(&hub).await;
    let auth = format!("Bearer {}", d.token);
    let path = format!("/api/mwrs/{}/app/events", hub.namespace);
    let mut live = Events::open(&d.addr, &path, &[("Authorization", &auth)]).await;
    let first = live.next().await;
    assert_eq!(first.kind, "snapshot", "{first:?}");
    assert_eq!(first.data["view"]["state"], "Complete");
    assert_eq!(first.data["view"]["clusters"].as_array().unwrap().len(), 4);
    let v1 = first.data["view"]["currentRevision"].clone();

    hub.set_template("app", mwrs_testsupport::configmap_template("v2"))
        .await;
    // One cluster at a time: changes carry a few clusters, never the whole fleet again.
    let mut changes = Vec::new();
    loop {
        let e = live.next().await;
        assert_eq!(e.kind, "change", "{e:?}");
        let done =
            e.data["header"]["state"] == "Complete" && e.data["header"]["currentRevision"] != v1;
        changes.push(e);
        if done {
            break;
        }
    }
    assert!(changes.len() >= 2, "{changes:?}");
    let sizes: Vec<usize> = changes
        .iter()
        .map(|e| e.data["clusters"].as_array().unwrap().len())
        .collect();
    assert!(sizes.iter().any(|n| (1..4).contains(n)), "{sizes:?}");
    let ids: Vec<u64> = changes.iter().filter_map(|e| e.id).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");

    // A page back from a lost connection gets what changed since its last event.
    let before_last = ids[ids.len() - 2].to_string();
    let resume = [
        ("Authorization", auth.as_str()),
        ("Last-Event-ID", before_last.as_str()),
    ];
    let mut again = Events::open(&d.addr, &path, &resume).await;
    let e = again.next().await;
    assert_eq!(
        (e.kind.as_str(), e.id),
        ("change", ids.last().copied()),
        "{e:?}"
    );
    // A page shown again after it was hidden resumes with `?last=`.
    let shown = format!("{path}?last={before_last}");
    let e = Events::open(&d.addr, &shown, &[("Authorization", &auth)])
        .await
        .next()
        .await;
    assert_eq!(
        (e.kind.as_str(), e.id),
        ("change", ids.last().copied()),
        "{e:?}"
    );
    // One too old for the server gets the whole view.
    let old = [("Authorization", auth.as_str()), ("Last-Event-ID", "0")];
    let e = Events::open(&d.addr, &path, &old).await.next().await;
    assert_eq!(e.kind, "snapshot", "{e:?}");

    hub.mwrs_api()
        .delete("app", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    // The deletion's own changes (the finalizer, the ManifestWorks going), then `stale`.
    let mut e = live.next().await;
    while e.kind == "change" {
        e = live.next().await;
    }
    assert_eq!(e.kind, "stale", "{e:?}");
    assert!(e.data["why"].as_str().unwrap().contains("deleted"), "{e:?}");
}

/// Item 5 of issue #35: the list page's overview is streamed from one watch (not
/// polled): every MWRS shown first, then only the rows that changed or went.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_streams_every_mwrs_then_only_what_changed() {
    let Some(hub) = TestHub::from_env("cli-dashboard-overview", 2).await else {
        return;
    };
    hub.publish_all("p").await;
    create_v1(&hub, "app", json!({"type": "All"})).await;
    let d = start(&hub).await;
    let auth = format!("Bearer {}", d.token);
    let mut live = Events::open(&d.addr, "/api/mwrs/events", &[("Authorization", &auth)]).await;
    let first = live.next().await;
    assert_eq!(first.kind, "snapshot", "{first:?}");
    let names = |rows: &Value| -> Vec<String> {
        rows.as_array()
            .unwrap()
            .iter()
            .map(|r| {
                format!(
                    "{}/{}",
                    r["namespace"].as_str().unwrap(),
                    r["name"].as_str().unwrap()
                )
            })
            .collect()
    };
    let app = format!("{}/app", hub.namespace);
    assert_eq!(
        names(&first.data["view"]["rows"]),
        std::slice::from_ref(&app)
    );

    create_v1(&hub, "web", json!({"type": "All"})).await;
    let e = live.next().await;
    assert_eq!(e.kind, "change", "{e:?}");
    assert_eq!(names(&e.data["rows"]), [format!("{}/web", hub.namespace)]);
    assert_eq!(e.data["header"]["count"], 2);

    hub.mwrs_api()
        .delete("app", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    let e = live.next().await;
    assert_eq!(e.kind, "change", "{e:?}");
    assert_eq!(e.data["removed"], json!([app]), "{e:?}");
    assert_eq!(e.data["rows"], json!([]), "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actions_write_what_the_commands_write_and_only_from_the_page_when_enabled() {
    let Some((hub, _running)) = app_on_v1("cli-dashboard-actions").await else {
        return;
    };
    hub.set_template("app", mwrs_testsupport::configmap_template("v2"))
        .await;
    assert_eq!(watch(&hub, "app").await.code, 0);
    let v2 = common::status(&hub.get_mwrs("app").await.unwrap())
        .update_revision
        .unwrap();
    let annotation = |m: &ManifestWorkReplicaSet, key: &str| m.annotations().get(key).cloned();
    let path = |action: &str| format!("/api/mwrs/{}/app/actions/{action}", hub.namespace);

    // Read-only unless asked.
    let ro = start(&hub).await;
    let auth = format!("Bearer {}", ro.token);
    let page = [
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
    ];
    let (status, body) = post(&ro.addr, &path("pause"), &page, "{}").await;
    assert_eq!(status, 405, "{body}");
    let (_, body) = get(&ro.addr, "/api/settings", &page[..1]).await;
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["actions"],
        false
    );

    let d = start_with(&hub, &["--enable-actions"]).await;
    let auth = format!("Bearer {}", d.token);
    let page = [
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
    ];
    let (_, body) = get(&d.addr, "/api/settings", &page[..1]).await;
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["actions"],
        true
    );
    // Only from the dashboard's own page: nothing else may write, nor get written.
    let before = hub.get_mwrs("app").await.unwrap().resource_version();
    let in_url = format!("{}?code={}", path("pause"), d.token);
    let not_the_page: [(&str, Vec<(&str, &str)>); 3] = [
        (
            "a form's body",
            vec![page[0], ("Content-Type", "text/plain")],
        ),
        (
            "another origin",
            vec![page[0], page[1], ("Origin", "http://evil.example")],
        ),
        ("the session in the URL only", vec![page[1]]),
    ];
    for (what, headers) in &not_the_page {
        let (at, refused) = if what.contains("URL") {
            // The session is no credential in a URL.
            (&in_url, 401)
        } else {
            (&path("pause"), 403)
        };
        let (status, body) = post(&d.addr, at, headers, "{}").await;
        assert_eq!(status, refused, "{what}: {body}");
    }
    assert_eq!(post(&d.addr, &path("delete"), &page, "{}").await.0, 404);
    assert_eq!(
        post(&d.addr, &path("undo"), &page, r#"{"to": 1}"#).await.0,
        422
    );
    let m = hub.get_mwrs("app").await.unwrap();
    assert_eq!(m.resource_version(), before, "nothing written");

    // Pause and resume: the annotation `rollout pause` writes, once.
    let (status, body) = post(&d.addr, &path("pause"), &page, "{}").await;
    assert_eq!(status, 200, "{body}");
    let done: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(done["said"], "mwrs/app paused");
    let m = hub.get_mwrs("app").await.unwrap();
    assert_eq!(
        annotation(&m, labels::CONTROL_PAUSE).as_deref(),
        Some("true")
    );
    let (_, body) = post(&d.addr, &path("pause"), &page, "{}").await;
    assert!(body.contains("already paused"), "{body}");
    let (_, body) = post(&d.addr, &path("resume"), &page, "{}").await;
    assert!(body.contains("mwrs/app resumed"), "{body}");
    let m = hub.get_mwrs("app").await.unwrap();
    assert_eq!(annotation(&m, labels::CONTROL_PAUSE), None);

    // Abort: the request `rollout abort` writes, with its note; never for a revision
    // other than the one the page showed.
    let (status, body) = post(&d.addr, &path("abort"), &page, r#"{"revision": "0ld"}"#).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body.contains(&format!("now rolls out revision {v2}, not 0ld")),
        "{body}"
    );
    let m = hub.get_mwrs("app").await.unwrap();
    assert_eq!(
        annotation(&m, labels::CONTROL_ABORT),
        None,
        "nothing written"
    );
    let shown = json!({"revision": v2}).to_string();
    let (_, body) = post(&d.addr, &path("abort"), &page, &shown).await;
    let done: Value = serde_json::from_str(&body).unwrap();
    assert!(
        done["notes"][0]
            .as_str()
            .unwrap()
            .contains("already the stable revision"),
        "{body}"
    );
    let m = hub.get_mwrs("app").await.unwrap();
    let request = annotation(&m, labels::CONTROL_ABORT).expect("abort requested");
    assert!(request.ends_with(&v2), "{request} names revision {v2}");
    let managers: Vec<String> = m
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|f| f.manager)
        .collect();
    assert!(managers.iter().any(|f| f == "kubectl-mwrs"), "{managers:?}");

    // Undo: its dry run writes nothing; then the template of revision 1.
    let generation = m.metadata.generation;
    let (status, body) = post(&d.addr, &path("undo"), &page, r#"{"dryRun": true}"#).await;
    assert_eq!(status, 200, "{body}");
    let said = serde_json::from_str::<Value>(&body).unwrap()["said"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        said.contains("v2") && said.contains("dry run: mwrs/app would go to revision 1"),
        "{said}"
    );
    let m = hub.get_mwrs("app").await.unwrap();
    assert_eq!(m.metadata.generation, generation);
    // What the dry run showed, for the confirmation to send back: refused (and nothing
    // written) once the spec has moved since.
    let pin = serde_json::from_str::<Value>(&body).unwrap()["undo"].clone();
    assert_eq!(pin, json!({"revision": 1, "generation": generation}));
    hub.set_template("app", mwrs_testsupport::configmap_template("v3"))
        .await;
    let confirmed = json!({"toRevision": "1", "generation": pin["generation"]}).to_string();
    let (status, body) = post(&d.addr, &path("undo"), &page, &confirmed).await;
    assert_eq!(status, 409, "{body}");
    let m = hub.get_mwrs("app").await.unwrap();
    let spec = serde_json::to_value(&m.spec.manifest_work_template).unwrap();
    assert_eq!(common::version_of(&spec), Some("v3"), "nothing written");
    let (status, body) = post(&d.addr, &path("undo"), &page, r#"{"toRevision": "9"}"#).await;
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("revision 9 not found"), "{body}");
    let (status, body) = post(&d.addr, &path("undo"), &page, r#"{"toRevision": "1"}"#).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("rolled back to revision 1"), "{body}");
    let m = hub.get_mwrs("app").await.unwrap();
    let spec = serde_json::to_value(&m.spec.manifest_work_template).unwrap();
    assert_eq!(common::version_of(&spec), Some("v1"));
}
