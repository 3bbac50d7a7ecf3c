//! The README's demo passes: on the test hub with the simulated fleet
//! (`MWRS_TEST_KUBECONFIG`), also behind the reference rollout plugin, and on upstream
//! OCM's placement controller and work agents
//! (the e2e environment, `. "$(e2e/env.sh up)"`). Each is skipped without its hub unless
//! CI=true, where that is a failure.

#![allow(clippy::expect_used)]

use std::process::Command;

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The variables, or None (skipped) when one is unset outside CI.
fn vars<const N: usize>(names: [&str; N]) -> Option<[String; N]> {
    let found = names.map(var);
    if found.iter().all(Option::is_some) {
        return Some(found.map(Option::unwrap_or_default));
    }
    let why = format!("{names:?} not all set");
    assert!(var("CI").as_deref() != Some("true"), "CI=true and {why}");
    eprintln!("SKIPPED: {why}");
    None
}

/// Runs mwrs-demo with `args`; asserts it passed, printing its whole output if not.
/// Returns its output.
fn demo_passes(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_mwrs-demo"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("mwrs-demo runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("DEMO PASSED"),
        "mwrs-demo {args:?}: {}\n{stdout}\n{stderr}",
        out.status
    );
    stdout.into_owned()
}

#[test]
fn the_demo_passes_with_the_simulated_fleet() {
    let Some([hub]) = vars(["MWRS_TEST_KUBECONFIG"]) else {
        return;
    };
    let out = demo_passes(&["--kubeconfig", &hub]);
    // v2 never finishes on one group: its progress deadline aborts it.
    assert!(out.contains("(ProgressDeadlineExceeded)"), "{out}");
}

#[test]
fn the_demo_passes_behind_the_rollout_plugin() {
    let Some([hub]) = vars(["MWRS_TEST_KUBECONFIG"]) else {
        return;
    };
    let out = demo_passes(&["--kubeconfig", &hub, "--plugin"]);
    // v2 is reported done everywhere: only the plugin's FAILED can abort it. The trigger
    // is read from status.lastAbort: the Progressing reason naming it may fall between
    // two of the demo's polls.
    assert!(out.contains("(MaxFailuresExceeded)"), "{out}");
}

#[test]
fn the_demo_passes_on_upstream_ocm_components() {
    let Some([hub, spokes]) = vars(["MWRS_E2E_HUB_KUBECONFIG", "MWRS_E2E_CLUSTERS"]) else {
        return;
    };
    demo_passes(&["--kubeconfig", &hub, "--spokes", &spokes]);
}

/// `GET path` from the dashboard at `addr` with `token`; (status, body).
fn get(addr: &str, path: &str, token: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("the dashboard listens");
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    s.write_all(request.as_bytes()).expect("send");
    let mut raw = String::new();
    s.read_to_string(&mut raw).expect("read");
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, body.to_string())
}

/// The session the dashboard's one-time `code` is exchanged for (its cookie's value).
fn session(addr: &str, code: &str) -> String {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime
        .block_on(mwrs_testsupport::sse::dashboard_session(addr, code))
        .expect("a session for the code")
}

#[test]
fn the_demo_offers_the_dashboard() {
    use std::io::{BufRead, BufReader, Read};
    let Some([hub]) = vars(["MWRS_TEST_KUBECONFIG"]) else {
        return;
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_mwrs-demo"))
        .args(["--kubeconfig", &hub, "--dashboard"])
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("mwrs-demo runs");
    let mut out = BufReader::new(child.stdout.take().expect("its stdout"));
    let mut seen = String::new();
    let url = loop {
        let mut line = String::new();
        assert!(
            out.read_line(&mut line).expect("read") > 0,
            "no URL: {seen}"
        );
        seen.push_str(&line);
        if let Some((_, url)) = line.trim().split_once("enabled): ") {
            break url.to_string();
        }
    };
    // http://127.0.0.1:PORT/?code=C#/NAMESPACE/web-config
    let rest = url.strip_prefix("http://127.0.0.1:").expect(&url);
    let (port, rest) = rest.split_once("/?code=").expect(&url);
    let (code, page) = rest.split_once("#/").expect(&url);
    let addr = format!("127.0.0.1:{port}");
    let (status, body) = get(&addr, &format!("/api/mwrs/{page}"), "not the session");
    assert_eq!(status, 401, "{body}");
    let token = session(&addr, code);
    let token = token.as_str();
    // The page's data while the scenario plays (the MWRS exists from its first step on).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let (status, body) = get(&addr, &format!("/api/mwrs/{page}"), token);
        if status == 200 {
            assert!(body.contains("\"clusters\""), "{body}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{status}: {body}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let mut rest = String::new();
    out.read_to_string(&mut rest).expect("read");
    let status = child.wait().expect("mwrs-demo ends");
    assert!(
        status.success() && rest.contains("DEMO PASSED"),
        "{status}\n{seen}{rest}"
    );
}
