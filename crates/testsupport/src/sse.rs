//! A Server-Sent Events stream read off a raw connection (HTTP/1.1, chunked), as a page
//! of `mwrs dashboard` gets it: for the dashboard's tests and its benchmark.

use anyhow::{Context as _, bail};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// One event: its kind, id and JSON data.
#[derive(Debug)]
pub struct SseEvent {
    pub kind: String,
    pub id: Option<u64>,
    pub data: Value,
}

/// An open stream.
pub struct SseStream {
    r: BufReader<tokio::net::TcpStream>,
    text: String,
    /// Bytes of event data received so far.
    pub bytes: usize,
}

impl SseStream {
    /// GET `path` on `addr` with `headers`; fails unless the answer is 200.
    pub async fn open(addr: &str, path: &str, headers: &[(&str, &str)]) -> anyhow::Result<Self> {
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        let mut request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n");
        for (k, v) in headers {
            request.push_str(&format!("{k}: {v}\r\n"));
        }
        request.push_str("\r\n");
        s.write_all(request.as_bytes()).await?;
        let mut r = BufReader::new(s);
        let mut line = String::new();
        r.read_line(&mut line).await?;
        if !line.starts_with("HTTP/1.1 200") {
            bail!("the stream answered {line}");
        }
        while line != "\r\n" {
            line.clear();
            if r.read_line(&mut line).await? == 0 {
                bail!("the stream closed in its head");
            }
        }
        Ok(Self {
            r,
            text: String::new(),
            bytes: 0,
        })
    }

    /// The next event (keep-alive comments skipped).
    pub async fn next(&mut self) -> anyhow::Result<SseEvent> {
        loop {
            if let Some(end) = self.text.find("\n\n") {
                let block: String = self.text.drain(..end + 2).collect();
                if let Some(e) = self.parse(&block)? {
                    return Ok(e);
                }
                continue;
            }
            let mut size = String::new();
            self.r.read_line(&mut size).await?;
            let n = usize::from_str_radix(size.trim(), 16).context("a chunk size")?;
            let mut chunk = vec![0u8; n + 2];
            self.r.read_exact(&mut chunk).await?;
            self.text.push_str(&String::from_utf8_lossy(&chunk[..n]));
        }
    }

    /// The event of `block` (None: a comment).
    fn parse(&mut self, block: &str) -> anyhow::Result<Option<SseEvent>> {
        let (mut kind, mut id, mut data) = (None, None, String::new());
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("event:") {
                kind = Some(v.trim().to_string());
            } else if let Some(v) = line.strip_prefix("id:") {
                id = v.trim().parse().ok();
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push_str(v.trim_start());
            }
        }
        let Some(kind) = kind else { return Ok(None) };
        self.bytes += data.len();
        let data = serde_json::from_str(&data).with_context(|| format!("{kind} data"))?;
        Ok(Some(SseEvent { kind, id, data }))
    }
}

/// The session `mwrs dashboard` at `addr` exchanges its printed URL's one-time `code` for
/// (the value of the cookie its answer sets), as a browser opening the URL gets it.
pub async fn dashboard_session(addr: &str, code: &str) -> anyhow::Result<String> {
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    let request =
        format!("GET /?code={code} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(request.as_bytes()).await?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).await?;
    raw.lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .and_then(|c| c.split(';').next())
        .and_then(|c| c.split_once('='))
        .map(|(_, v)| v.to_string())
        .with_context(|| format!("no session for the dashboard's code: {raw}"))
}
