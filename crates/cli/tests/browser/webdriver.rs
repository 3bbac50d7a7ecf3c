//! The few WebDriver commands the browser test needs (W3C WebDriver over HTTP/1.1 with
//! JSON), spoken to a chromedriver on loopback: a session of headless Chromium, navigate,
//! run a script, take a screenshot.

use std::process::Stdio;
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

/// A chromedriver process and one browser session on it, in a process group of their
/// own; the whole group is killed on drop (Chromium outlives a driver killed alone).
pub struct Browser {
    driver: tokio::process::Child,
    port: u16,
    session: String,
}

impl Browser {
    /// Starts `chromedriver` and a headless Chromium session.
    pub async fn start(chromedriver: &str) -> Self {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let driver = tokio::process::Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .process_group(0)
            .spawn()
            .expect("start chromedriver");
        for _ in 0..100 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1000"]},
        }}});
        let created = send(port, "POST", "/session", Some(&caps)).await;
        let session = created["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {created}"))
            .to_string();
        Self {
            driver,
            port,
            session,
        }
    }

    async fn command(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let path = format!("/session/{}{path}", self.session);
        let answer = send(self.port, method, &path, body).await;
        if answer["value"].get("error").is_some() {
            panic!("WebDriver {method} {path}: {answer}");
        }
        answer["value"].clone()
    }

    pub async fn goto(&self, url: &str) {
        self.command("POST", "/url", Some(&json!({"url": url})))
            .await;
    }

    /// Runs `script` (a function body; `return` gives its value) in the page.
    pub async fn eval(&self, script: &str) -> Value {
        let body = json!({"script": script, "args": []});
        self.command("POST", "/execute/sync", Some(&body)).await
    }

    /// The page as PNG.
    pub async fn screenshot(&self) -> Vec<u8> {
        let b64 = self.command("GET", "/screenshot", None).await;
        base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().unwrap_or_default())
            .unwrap_or_default()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(pid) = self.driver.id() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// One WebDriver request; the JSON answer, within a minute.
async fn send(port: u16, method: &str, path: &str, body: Option<&Value>) -> Value {
    tokio::time::timeout(Duration::from_secs(60), exchange(port, method, path, body))
        .await
        .unwrap_or_else(|_| panic!("WebDriver {method} {path}: no answer within 60 s"))
}

async fn exchange(port: u16, method: &str, path: &str, body: Option<&Value>) -> Value {
    let body = body.map(Value::to_string).unwrap_or_default();
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("reach chromedriver");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes()).await.unwrap();
    // The head, then as many bytes as it announces (the driver may keep the connection).
    let mut r = tokio::io::BufReader::new(s);
    let mut length = 0usize;
    let mut line = String::new();
    loop {
        line.clear();
        r.read_line(&mut line).await.unwrap();
        if line == "\r\n" || line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; length];
    r.read_exact(&mut body).await.unwrap();
    serde_json::from_slice(&body)
        .unwrap_or_else(|e| panic!("WebDriver answer ({e}): {}", String::from_utf8_lossy(&body)))
}
