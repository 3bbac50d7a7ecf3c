//! A TCP proxy in front of the test hub whose connections can go silent: after
//! [`SilentProxy::silence`], no byte moves on any connection opened before it, in either
//! direction, and none of them is closed, as when an API server instance behind a load
//! balancer is lost without a word or a network path drops every packet. Connections
//! opened afterwards pass, as they would to the instance that took over.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::TaskGuard;

pub struct SilentProxy {
    pub addr: SocketAddr,
    /// Connections numbered below this move no byte.
    silent_below: Arc<AtomicU64>,
    opened: Arc<AtomicU64>,
    _accept: TaskGuard,
}

impl SilentProxy {
    /// A proxy to `target` on a free port of 127.0.0.1.
    pub async fn start(target: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let silent_below = Arc::new(AtomicU64::new(0));
        let opened = Arc::new(AtomicU64::new(0));
        let (silent, count) = (silent_below.clone(), opened.clone());
        let accept = TaskGuard::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let number = count.fetch_add(1, Ordering::AcqRel);
                let silent = silent.clone();
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(target).await {
                        forward(number, silent, client, server).await;
                    }
                });
            }
        });
        Ok(Self {
            addr,
            silent_below,
            opened,
            _accept: accept,
        })
    }

    /// Every connection open now goes silent for good; returns how many there were.
    pub fn silence(&self) -> u64 {
        let open = self.opened.load(Ordering::Acquire);
        self.silent_below.store(open, Ordering::Release);
        open
    }
}

async fn forward(number: u64, silent_below: Arc<AtomicU64>, client: TcpStream, server: TcpStream) {
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = pump(number, silent_below.clone(), client_read, server_write);
    let down = pump(number, silent_below, server_read, client_write);
    let _ = tokio::join!(up, down);
}

/// Copies `from` to `to` until either ends; once the connection is silenced, holds both
/// open and moves nothing more (what was read then is dropped, as a lost packet is).
async fn pump(
    number: u64,
    silent_below: Arc<AtomicU64>,
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if number < silent_below.load(Ordering::Acquire) {
            // Keep both halves alive: the peer must see no close, ever.
            let _held = (from, to);
            std::future::pending::<()>().await;
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
