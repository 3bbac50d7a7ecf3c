//! Headless Chromium for the browser test: a chromedriver on loopback and one session on
//! it, driven with fantoccini (W3C WebDriver), with the few commands the test uses.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

/// A chromedriver process and one browser session on it, in a process group of their
/// own; the whole group is killed on drop (Chromium outlives a driver killed alone).
pub struct Browser {
    driver: tokio::process::Child,
    session: fantoccini::Client,
}

/// Every WebDriver command answers within this, or the test fails saying which.
const COMMAND: Duration = Duration::from_secs(60);

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
        let caps = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {"args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1000"]},
        });
        let Value::Object(caps) = caps else {
            unreachable!()
        };
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let session = fantoccini::ClientBuilder::new(connector)
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .unwrap_or_else(|e| panic!("no WebDriver session: {e}"));
        Self { driver, session }
    }

    pub async fn goto(&self, url: &str) {
        within("goto", self.session.goto(url)).await;
    }

    /// Runs `script` (a function body; `return` gives its value) in the page.
    pub async fn eval(&self, script: &str) -> Value {
        within("execute", self.session.execute(script, Vec::new())).await
    }

    /// The page as PNG.
    pub async fn screenshot(&self) -> Vec<u8> {
        within("screenshot", self.session.screenshot()).await
    }
}

/// `command`'s answer within [`COMMAND`].
async fn within<T>(
    what: &str,
    command: impl Future<Output = Result<T, fantoccini::error::CmdError>>,
) -> T {
    match tokio::time::timeout(COMMAND, command).await {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => panic!("WebDriver {what}: {e}"),
        Err(_) => panic!("WebDriver {what}: no answer within {COMMAND:?}"),
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
