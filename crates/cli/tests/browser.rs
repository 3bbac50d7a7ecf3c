//! The dashboard in a real browser (issue #19): headless Chromium driven over WebDriver
//! (`browser/webdriver.rs`), against the test hub, the simulated fleet (1,000 clusters in
//! three decision groups) and the controller. The grid fills as a rollout progresses; a
//! bad revision shows the abort and the revert counting up, with the clusters that set it
//! off marked; the text alternative agrees with `mwrs get`; a request without the session
//! is refused. It saves a screenshot (`target/dashboard.png`) and prints the page's
//! redraw times (measured, never asserted). Mid-rollout, the page's budget lines are the
//! engine's count.
//!
//! Needs `MWRS_TEST_KUBECONFIG` and Chromium's driver (`chromedriver` on PATH or
//! `MWRS_CHROMEDRIVER`; `scripts/test.sh` installs Debian's `chromium-driver`); skipped
//! without them unless CI=true.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "browser/webdriver.rs"]
mod webdriver;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::{mwrs, rows, start_controller};
use mwrs_fleet::placement::DecisionGroup;
use mwrs_testsupport::{TestHub, configmap_template};
use serde_json::{Value, json};
use webdriver::Browser;

/// The fleet: 1,000 clusters, or `MWRS_BROWSER_CLUSTERS` (to measure the redraws at
/// 5,000), a tenth in the canary group, three tenths in wave-1, the rest in wave-2.
fn fleet_size() -> usize {
    std::env::var("MWRS_BROWSER_CLUSTERS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000)
}
/// Clusters of the second group on which v3 degrades.
const BAD: usize = 5;

fn chromedriver() -> Option<String> {
    let found = std::env::var("MWRS_CHROMEDRIVER")
        .ok()
        .filter(|p| !p.is_empty())
        .or_else(|| {
            let out = std::process::Command::new("sh")
                .args(["-c", "command -v chromedriver"])
                .output()
                .ok()?;
            let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
            (!path.is_empty()).then_some(path)
        });
    if found.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true and no chromedriver (scripts/test.sh installs it)"
        );
        eprintln!("SKIPPED: no chromedriver");
    }
    found
}

/// Waits, up to `limit`, until `probe` (a script run in the page) returns something
/// `done` accepts; returns every distinct value seen on the way.
async fn watch_page(
    b: &Browser,
    probe: &str,
    limit: Duration,
    done: impl Fn(&Value) -> bool,
) -> Vec<Value> {
    let t = Instant::now();
    let mut seen: Vec<Value> = Vec::new();
    loop {
        let v = b.eval(probe).await;
        if seen.last() != Some(&v) {
            seen.push(v.clone());
        }
        if done(&v) {
            return seen;
        }
        assert!(t.elapsed() < limit, "timed out; the page showed {seen:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The text of the element with `id` once `done` accepts it (within 30 s).
async fn text_of(b: &Browser, id: &str, done: impl Fn(&str) -> bool) -> String {
    let probe = format!("return (document.getElementById('{id}') || {{}}).textContent || ''");
    let seen = watch_page(b, &probe, Duration::from_secs(30), |v| {
        v.as_str().is_some_and(&done)
    })
    .await;
    seen.last()
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// Counts of the grid's cells by class, as the page draws them.
const CELLS: &str = "const n = {}; \
    for (const c of document.querySelectorAll('#grid .cell')) { \
      const s = [...c.classList].find((k) => k.startsWith('s-')); n[s] = (n[s] || 0) + 1; } \
    return {cells: n, summary: (document.getElementById('summary') || {}).textContent || '', \
      abort: (document.getElementById('abort') || {}).textContent || '', \
      causes: document.querySelectorAll('#grid .cell.cause').length, \
      revisions: (document.getElementById('revisions') || {}).textContent || '', \
      waves: document.querySelectorAll('#plan tbody tr').length, \
      message: (document.querySelector('#head p') || {}).textContent || '', \
      bands: [...document.querySelectorAll('#grid .band h3')].map((h) => h.textContent.replace(/\\s+/g, ' ')), \
      conn: document.getElementById('conn').textContent, href: location.href};";

fn count(v: &Value, class: &str) -> u64 {
    v["cells"][class].as_u64().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_a_rollout_and_an_abort_live_in_a_browser() {
    let Some(driver) = chromedriver() else {
        return;
    };
    let clusters = fleet_size();
    let Some(hub) = TestHub::from_env("cli-browser", clusters).await else {
        return;
    };
    let c = &hub.clusters;
    let (canary, wave_2) = (clusters / 10, clusters * 4 / 10);
    hub.publish(
        "p",
        &[
            DecisionGroup::new("canary", c[..canary].to_vec()),
            DecisionGroup::new("wave-1", c[canary..wave_2].to_vec()),
            DecisionGroup::new("wave-2", c[wave_2..].to_vec()),
        ],
    )
    .await;
    let bad: BTreeSet<String> = c[canary..canary + BAD].iter().cloned().collect();
    let _agent = mwrs_fleet::Agent::start(
        hub.client.clone(),
        mwrs_fleet::AgentConfig::new(c.clone()).behaviour(move |w| {
            let v3 = w.spec.to_string().contains("\"version\":\"v3\"");
            let after = Duration::from_millis(200);
            if v3 && bad.contains(w.cluster) {
                mwrs_fleet::Behaviour::Degrade { after }
            } else {
                mwrs_fleet::Behaviour::Succeed { after }
            }
        }),
    );
    let _controller = start_controller(&hub);
    let strategy = json!({"type": "ProgressivePerGroup", "failureStrategy": "AbortAll",
        "progressivePerGroup": {"progressDeadline": "60s"}});
    hub.create_mwrs(&mwrs_testsupport::mwrs(
        "app",
        configmap_template("v1"),
        &[("p", strategy)],
    ))
    .await;
    let r = mwrs(
        &hub,
        &["rollout", "status", "app", "-w", "--timeout", "180s"],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");

    let (_dash, url) = common::start_dashboard(&hub, &["--enable-actions"]).await;
    let base = url.split_once("/?code=").unwrap().0.to_string();
    let b = Browser::start(&driver).await;
    // Without the session: refused, and the page says how to get in.
    b.goto(&format!("{base}/")).await;
    let text = b.eval("return document.body.textContent").await;
    assert!(text.as_str().unwrap().contains("no session"), "{text}");

    b.goto(&url).await;
    b.goto(&format!("{base}/#/{}/app", hub.namespace)).await;
    let all_updated = |v: &Value| count(v, "s-updated") == clusters as u64;
    watch_page(&b, CELLS, Duration::from_secs(60), all_updated).await;
    // The header names v1 by its hash, and by its number too once it has read the history.
    let v1 = common::status(&hub.get_mwrs("app").await.unwrap())
        .update_revision
        .unwrap();

    // v2: the grid fills group by group.
    hub.set_template("app", configmap_template("v2")).await;
    let seen = watch_page(&b, CELLS, Duration::from_secs(180), |v| {
        !v["revisions"].as_str().unwrap().contains(&v1)
            && all_updated(v)
            && v["summary"].as_str().unwrap().contains("Complete")
    })
    .await;
    let partway = seen.iter().any(|v| {
        let updated = count(v, "s-updated");
        updated > 0 && updated < clusters as u64 && count(v, "s-stable") > 0
    });
    assert!(
        partway,
        "the grid never showed the rollout partway: {seen:?}"
    );
    // The planned waves while it rolled; each group's bar, full at the end.
    assert!(
        seen.iter().any(|v| v["waves"].as_u64() > Some(0)),
        "no planned wave shown while rolling: {seen:?}"
    );
    let bands = seen.last().unwrap()["bands"].clone();
    assert_eq!(
        bands,
        json!([
            format!("p / canary {canary}/{canary}"),
            format!("p / wave-1 {0}/{0}", wave_2 - canary),
            format!("p / wave-2 {0}/{0}", clusters - wave_2)
        ])
    );

    // The header names the revisions by number once it has read the history.
    watch_page(&b, CELLS, Duration::from_secs(30), |v| {
        let r = v["revisions"].as_str().unwrap();
        r.starts_with("current revision 2 (") && r.contains("; update revision 2 (")
    })
    .await;

    // The budget as the engine counts it, next to the counts: the walk is past the last
    // group.
    let budget = b
        .eval("return document.querySelector('.budget').textContent")
        .await;
    let budget = budget.as_str().unwrap();
    assert_eq!(
        budget,
        "ProgressivePerGroup, group wave-2 (2) · 0 in flight · failures 0 of maxFailures 0 · \
         progressDeadline 60s"
    );

    // v3 degrades on five clusters of wave-1: the abort, and the revert counting up.
    hub.set_template("app", configmap_template("v3")).await;
    let seen = watch_page(&b, CELLS, Duration::from_secs(180), |v| {
        v["abort"]
            .as_str()
            .unwrap()
            .contains(&format!("{clusters} of {clusters} back"))
    })
    .await;
    let reverts: BTreeSet<&str> = seen
        .iter()
        .filter_map(|v| v["abort"].as_str())
        .filter(|a| a.contains("reverting"))
        .collect();
    assert!(
        reverts.len() >= 2,
        "the revert never counted up: {reverts:?}"
    );
    let last = seen.last().unwrap();
    assert!(last["causes"].as_u64().unwrap() >= 1, "{last}");
    assert_eq!(count(last, "s-stable"), clusters as u64, "{last}");

    // The text alternative agrees with `mwrs get`.
    let got = mwrs(&hub, &["get", "app"]).await;
    let row = &rows(&got.out)[0];
    let summary = last["summary"].as_str().unwrap();
    assert!(
        summary.starts_with(&format!(
            "app: {}, {} clusters",
            row["STATUS"], row["DESIRED"]
        )),
        "{summary} vs {row:?}"
    );
    b.eval("document.querySelector('.filters button').click(); return 1")
        .await;
    // A table of every cluster, of which only the rows in view are drawn.
    let table = b
        .eval(
            "const t = document.getElementById('table-rows'); \
             return [Number(t.dataset.rows), t.querySelectorAll('tbody tr:not(.spacer)').length]",
        )
        .await;
    assert_eq!(table[0].as_u64(), Some(clusters as u64), "{table}");
    assert!(
        table[1].as_u64().is_some_and(|n| n > 0 && n < 200),
        "{table}"
    );

    // A click on a cell shows its ManifestWork's conditions.
    b.eval("document.querySelector('#grid .cell.cause').click(); return 1")
        .await;
    let conditions = text_of(&b, "conditions", |t| t.contains("Applied")).await;
    assert!(conditions.contains("Degraded"), "{conditions}");

    // The status message and the planned waves catch up: nothing left to revert.
    watch_page(&b, CELLS, Duration::from_secs(30), |v| {
        v["waves"] == 0
            && v["message"]
                .as_str()
                .unwrap()
                .contains(&format!("on all {clusters} clusters"))
    })
    .await;
    let png = b.screenshot().await;
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/dashboard.png");
    std::fs::write(&out, &png).unwrap();
    let redraw = b.eval("return window.mwrsRedraw").await;
    let kind = |k: &str| {
        let r = &redraw[k];
        let n = r["count"].as_f64().unwrap_or_default();
        let mean = if n > 0.0 {
            r["total"].as_f64().unwrap_or_default() / n
        } else {
            0.0
        };
        format!(
            "{k} {n} (mean {mean:.1} ms, slowest {:.1} ms)",
            r["max"].as_f64().unwrap_or_default()
        )
    };
    eprintln!(
        "dashboard at {clusters} clusters: redraws {}; screenshot {}",
        ["full", "change", "table"].map(kind).join(", "),
        out.display()
    );
    assert!(redraw["count"].as_u64().unwrap_or(0) > 0);

    // A filter kept in the URL: the canary group, in the grid (the rest dimmed) and the
    // table.
    b.eval("location.hash = location.hash.split('?')[0] + '?group=canary'; return 1")
        .await;
    let kept = "return [document.querySelectorAll('#grid .cell:not(.dim)').length, \
        Number(document.getElementById('table-rows').dataset.rows)]";
    watch_page(&b, kept, Duration::from_secs(30), |v| {
        *v == json!([canary, canary])
    })
    .await;

    // Undo from the page: its dry run in the confirmation, then the write `rollout undo`
    // makes, back to v2.
    b.eval("document.querySelector('[data-action=undo]').click(); return 1")
        .await;
    let dry = text_of(&b, "undo-diff", |t| t.contains("dry run")).await;
    assert!(dry.contains("would go to revision 2"), "{dry}");
    b.eval("document.getElementById('confirm-go').click(); return 1")
        .await;
    let acted = text_of(&b, "acted", |t| !t.is_empty()).await;
    assert!(acted.contains("rolled back to revision 2"), "{acted}");
    let m = hub.get_mwrs("app").await.unwrap();
    let spec = serde_json::to_value(&m.spec.manifest_work_template).unwrap();
    assert_eq!(common::version_of(&spec), Some("v2"));
    watch_page(&b, CELLS, Duration::from_secs(60), |v| {
        v["summary"].as_str().unwrap().contains("Complete") && all_updated(v)
    })
    .await;
}

/// How many MWRS the overview test shows: 1,000, or `MWRS_BROWSER_MWRS`.
fn overview_size() -> usize {
    std::env::var("MWRS_BROWSER_MWRS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000)
}

/// What a controller writes into the status of an MWRS whose rollout is complete.
fn complete_status() -> Value {
    json!({"status": {
        "currentRevision": "r1", "updateRevision": "r1", "observedGeneration": 1,
        "summary": {"total": 1, "desiredTotal": 1, "applied": 1, "available": 1, "updated": 1,
            "progressing": 0, "degraded": 0},
        "conditions": [{"type": "Progressing", "status": "False",
            "reason": "NewManifestWorkAvailable", "message": "revision r1 on all 1 clusters",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    }})
}

/// Issue #35 item 5: the list page at hub scale. Every MWRS of the namespace, streamed
/// from one watch (not polled); a batch of status changes reaches the page while it
/// shows 1,000 MWRS, and it keeps drawing in a few ms (the times are printed, never
/// asserted: `bench/README.md` has the figures).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_stays_live_with_a_thousand_mwrs() {
    use futures::StreamExt;
    use kube::api::{Patch, PatchParams};

    let Some(driver) = chromedriver() else {
        return;
    };
    let Some(hub) = TestHub::from_env("cli-browser-overview", 0).await else {
        return;
    };
    let n = overview_size();
    let names: Vec<String> = (0..n).map(|i| format!("app-{i:04}")).collect();
    let t = Instant::now();
    futures::stream::iter(&names)
        .map(|name| {
            let m = mwrs_testsupport::mwrs(
                name,
                configmap_template("v1"),
                &[("p", json!({"type": "All"}))],
            );
            let hub = &hub;
            async move { hub.create_mwrs(&m).await }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
    let created = t.elapsed();

    let (_dash, url) = common::start_dashboard(&hub, &[]).await;
    let base = url.split_once("/?code=").unwrap().0.to_string();
    let b = Browser::start(&driver).await;
    b.goto(&url).await;
    b.goto(&format!("{base}/#/")).await;
    let all = format!("{n} ManifestWorkReplicaSets: {n} Progressing");
    text_of(&b, "list-count", |t| t == all).await;
    let drawn = b
        .eval(
            "const t = document.getElementById('list-rows'); \
               return [Number(t.dataset.rows), t.querySelectorAll('tbody tr:not(.spacer)').length]",
        )
        .await;
    assert_eq!(drawn[0].as_u64(), Some(n as u64), "{drawn}");

    // A tenth of them complete, as a controller would write it: the page follows.
    let changed = n / 10;
    let t = Instant::now();
    let api = hub.mwrs_api();
    futures::stream::iter(&names[..changed])
        .map(|name| {
            let api = &api;
            async move {
                api.patch_status(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(complete_status()),
                )
                .await
                .unwrap()
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
    let written = t.elapsed();
    let done = format!(
        "{n} ManifestWorkReplicaSets: {changed} Complete, {} Progressing",
        n - changed
    );
    text_of(&b, "list-count", |t| t == done).await;
    let followed = t.elapsed();
    let first = b
        .eval("return document.querySelector('#list-rows tbody tr:not(.spacer)').textContent")
        .await;
    assert!(
        first.as_str().unwrap().contains("app-0000Complete"),
        "{first}"
    );

    let redraw = b.eval("return window.mwrsRedraw.list").await;
    let count = redraw["count"].as_f64().unwrap_or_default();
    eprintln!(
        "overview of {n} MWRS (created in {created:.1?}): {count} frames drawn, mean {:.1} ms, \
         slowest {:.1} ms; {changed} status writes took {written:.1?}, the page showed them all \
         {followed:.1?} after the first",
        redraw["total"].as_f64().unwrap_or_default() / count.max(1.0),
        redraw["max"].as_f64().unwrap_or_default(),
    );
}

/// The budget lines of every placement, as the page draws them.
const BUDGETS: &str = "return Object.fromEntries([...document.querySelectorAll('.budget')] \
    .map((b) => [b.dataset.placement, b.textContent]));";

/// The configmap template plus a Deployment whose readiness the agent reports as status
/// feedback, which the reference rollout plugin reads.
fn template_with_deployment(version: &str) -> Value {
    let mut t = configmap_template(version);
    let labels = json!({"app": "app"});
    t["workload"]["manifests"].as_array_mut().unwrap().push(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "app", "namespace": "default"},
        "spec": {"replicas": 2, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels},
                "spec": {"containers": [{"name": "web", "image": format!("example.com/web:{version}")}]}}},
    }));
    t["manifestConfigs"] = json!([{
        "resourceIdentifier": {"group": "apps", "resource": "deployments",
            "namespace": "default", "name": "app"},
        "feedbackRules": [{"type": "WellKnownStatus"}],
    }]);
    t
}

/// The reference rollout plugin in this process, as `feedback`: a cluster passes once its
/// Deployment has had every replica ready for an hour, and fails when it still has not
/// then; until then it holds the cluster. Returns it and the controller's registration.
async fn feedback_plugin(
    hub: &TestHub,
) -> (
    mwrs_testsupport::TaskGuard,
    mwrs_controller::plugins::Plugins,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config = mwrs_feedback_plugin::config::Config::parse(&format!(
        "listen: {addr}\n\
         checks:\n\
         \x20 - resource: {{group: apps, resource: deployments, namespace: default, name: app}}\n\
         \x20   succeedWhen: ReadyReplicas == Replicas\n\
         \x20   failWhen: ReadyReplicas < Replicas\n\
         \x20   soak: 1h\n"
    ))
    .unwrap();
    let client = hub.client.clone();
    let serving = mwrs_testsupport::TaskGuard::spawn(async move {
        let _ = mwrs_feedback_plugin::serve(config, client, listener).await;
    });
    // The controller reaches it through a proxy that dropping the guard shuts, with every
    // connection through it: the plugin is then unreachable (a server task aborted keeps
    // the connections it has).
    let (front, proxy) = proxy_to(addr).await;
    let task = mwrs_testsupport::TaskGuard::spawn(async move {
        let _serving = serving;
        proxy.await;
    });
    let work = mwrs_plugin::config::WorkConfig::parse(&format!(
        "plugins:\n  - name: feedback\n    endpoint: http://{front}\n"
    ))
    .unwrap();
    let plugins =
        mwrs_controller::plugins::Plugins::new(&work, Duration::from_secs(1), "test").unwrap();
    (task, plugins)
}

/// A TCP proxy on loopback to `target`: its address, and the future that runs it (with
/// every connection through it, all closed when it is dropped).
async fn proxy_to(
    target: std::net::SocketAddr,
) -> (std::net::SocketAddr, impl Future<Output = ()> + Send) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let front = listener.local_addr().unwrap();
    let run = async move {
        let mut open = tokio::task::JoinSet::new();
        while let Ok((mut inbound, _)) = listener.accept().await {
            open.spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    };
    (front, run)
}

/// Mid-rollout, with failed clusters inside their deadline, successes still soaking and
/// clusters a rollout plugin holds, the page's budget line says what the engine counts:
/// every cluster holding a slot (not only the progressing ones) against the resolved
/// `maxConcurrency`, failures against the resolved `maxFailures`, per group where the
/// strategy walks groups, and no countdown for a cluster the plugin holds (the engine
/// never times one out). The page draws the view's line; the view's numbers are the
/// engine's, read here from the same hub.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_budget_line_is_the_engines() {
    let Some(driver) = chromedriver() else {
        return;
    };
    let Some(hub) = TestHub::from_env("cli-browser-budget", 18).await else {
        return;
    };
    let c = &hub.clusters;
    hub.publish("p", &[DecisionGroup::new("", c[..10].to_vec())])
        .await;
    hub.publish(
        "q",
        &[
            DecisionGroup::new("canary", c[10..12].to_vec()),
            DecisionGroup::new("rest", c[12..16].to_vec()),
        ],
    )
    .await;
    // r's two clusters wait on the plugin: one ready (soaking for an hour), one never.
    hub.publish("r", &[DecisionGroup::new("", c[16..].to_vec())])
        .await;
    // By name order, p's window of four ("40%" of ten) starts clusters 0-3: two succeed
    // (then soak for an hour), one degrades, one hangs; q's canary group succeeds, its
    // second group has one failure and three still progressing: each holds a slot.
    let failing = [c[2].clone(), c[13].clone()];
    let hanging = [c[3].clone(), c[12].clone(), c[14].clone(), c[15].clone()];
    let unready = c[17].clone();
    let _agent = mwrs_fleet::Agent::start(
        hub.client.clone(),
        mwrs_fleet::AgentConfig::new(c.clone()).behaviour(move |w| {
            let after = Duration::from_millis(100);
            if failing.iter().any(|f| f == w.cluster) {
                mwrs_fleet::Behaviour::Degrade { after }
            } else if hanging.iter().any(|h| h == w.cluster) {
                mwrs_fleet::Behaviour::Hang
            } else if *w.cluster == *unready {
                mwrs_fleet::Behaviour::Unready { after }
            } else {
                mwrs_fleet::Behaviour::Succeed { after }
            }
        }),
    );
    let (plugin, plugins) = feedback_plugin(&hub).await;
    let config = mwrs_controller::Config::default();
    let _controller = common::start_controller_with(&hub, config, std::sync::Arc::new(plugins));
    let p = json!({"type": "Progressive", "progressive": {"maxConcurrency": "40%",
        "maxFailures": "20%", "minSuccessTime": "1h", "progressDeadline": "1h"}});
    let q = json!({"type": "ProgressivePerGroup", "progressivePerGroup": {
        "maxFailures": "50%", "progressDeadline": "1h"}});
    let r = json!({"type": "All", "plugin": "feedback", "all": {"progressDeadline": "10m"}});
    hub.create_mwrs(&mwrs_testsupport::mwrs(
        "app",
        template_with_deployment("v1"),
        &[("p", p), ("q", q), ("r", r)],
    ))
    .await;

    let (_dash, url) = common::start_dashboard(&hub, &[]).await;
    let base = url.split_once("/?code=").unwrap().0.to_string();
    let b = Browser::start(&driver).await;
    b.goto(&url).await;
    b.goto(&format!("{base}/#/{}/app", hub.namespace)).await;
    let want_p = "Progressive · 4 in flight of maxConcurrency 4 · failures 1 of maxFailures 2 · \
        progressDeadline 1h · minSuccessTime 1h (the first passes in ";
    let want_q = "ProgressivePerGroup, group rest (1) · 4 in flight · failures 1 of maxFailures 2 · \
        progressDeadline 1h (the first passes in ";
    // r's clusters are validating: the plugin answers "in progress", their deadline runs.
    let validating = "All · 2 in flight · failures 0 (never stop it) · progressDeadline 10m";
    let counting = format!("{validating} (the first passes in ");
    watch_page(&b, BUDGETS, Duration::from_secs(120), |v| {
        v["p"].as_str().is_some_and(|t| t.starts_with(want_p))
            && v["q"].as_str().is_some_and(|t| t.starts_with(want_q))
            && v["r"].as_str().is_some_and(|t| t.starts_with(&counting))
    })
    .await;
    // The plugin goes away: the controller holds r's clusters for it (failurePolicy Fail
    // counts them failed only after 5 minutes unreachable), and a held cluster's deadline
    // does not run: the line has no countdown.
    drop(plugin);
    let seen = watch_page(&b, BUDGETS, Duration::from_secs(120), |v| {
        v["p"].as_str().is_some_and(|t| t.starts_with(want_p))
            && v["q"].as_str().is_some_and(|t| t.starts_with(want_q))
            && v["r"].as_str() == Some(validating)
    })
    .await;
    let page = seen.last().unwrap().clone();

    // The engine's own count on what the hub holds now.
    let reader = mwrs_cli::hub::HubClient {
        client: hub.client.clone(),
        namespace: hub.namespace.clone(),
        url: String::new(),
    };
    let read = reader.read("app").await.unwrap().1;
    let plugins = mwrs_engine::plugin::PluginInputs::from_status(&read.snapshot.mwrs);
    let observed = mwrs_engine::Observed {
        plugins: &plugins,
        sight: mwrs_engine::plan::Sight::Clear,
        ..read.snapshot.observed()
    };
    let engine = mwrs_engine::plan::progress(
        &observed,
        jiff::Timestamp::now(),
        &mwrs_engine::PlanConfig::default(),
    );
    let counted: Vec<(usize, Option<usize>, usize, Option<usize>)> = engine
        .budgets
        .iter()
        .flatten()
        .map(|b| (b.in_flight, b.max_concurrency, b.failures, b.max_failures))
        .collect();
    assert_eq!(
        counted,
        [
            (4, Some(4), 1, Some(2)),
            (4, None, 1, Some(2)),
            (2, None, 0, None)
        ],
        "{page}"
    );
    let held = engine.budgets[2].as_ref().unwrap();
    assert_eq!(held.next_deadline, None, "{page}");
    // And the view the page was sent says the same as `rollout status -o json`.
    let status = mwrs(&hub, &["rollout", "status", "app", "-o", "json"])
        .await
        .json();
    for (i, name) in ["p", "q", "r"].into_iter().enumerate() {
        let text = status["placements"][i]["budget"]["text"].as_str().unwrap();
        assert!(
            page[name].as_str().unwrap().starts_with(text),
            "{name}: {page} / {text}"
        );
    }
}
