//! Lists decoded while the API server is still sending them. A list of thousands of
//! ManifestWorks takes the server most of a second to encode; decoding its body only once
//! the last byte has come (as `Api::list` does) adds the decode to that wait, while a
//! decoder fed chunk by chunk on a blocking thread finishes with the transfer.

use std::io::{BufReader, Read};
use std::sync::mpsc;

use futures::AsyncBufReadExt;
use kube::api::ListParams;
use kube::core::ObjectList;
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

/// Every `K` cluster-wide that `lp` selects.
pub async fn list_all<K>(client: &Client, lp: &ListParams) -> Result<Vec<K>, kube::Error>
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Clone + Send + 'static,
{
    let request = kube::core::Request::new(K::url_path(&(), None))
        .list(lp)
        .map_err(kube::Error::BuildRequest)?;
    let body = client.request_stream(request).await?;
    let mut body = std::pin::pin!(body);
    let (tx, rx) = mpsc::channel();
    let decoder = tokio::task::spawn_blocking(move || {
        serde_json::from_reader::<_, ObjectList<K>>(BufReader::new(Chunks::new(rx)))
    });
    loop {
        let bytes = match body.fill_buf().await {
            Ok([]) => break,
            Ok(bytes) => bytes.to_vec(),
            Err(e) => {
                // The decoder reports it as the transfer breaking off.
                let _ = tx.send(Err(e));
                break;
            }
        };
        let len = bytes.len();
        // A decoder that has stopped (the body is no list of K) says why below.
        if tx.send(Ok(bytes)).is_err() {
            break;
        }
        body.consume_unpin(len);
    }
    drop(tx);
    match decoder.await {
        Ok(Ok(list)) => Ok(list.items),
        Ok(Err(e)) => Err(read_error(e)),
        Err(joined) => Err(kube::Error::Service(Box::new(joined))),
    }
}

/// A transfer that broke off reaches the decoder as an I/O error: report it as one.
fn read_error(e: serde_json::Error) -> kube::Error {
    if e.is_io() {
        kube::Error::ReadEvents(std::io::Error::other(e))
    } else {
        kube::Error::SerdeError(e)
    }
}

/// The chunks of a body as one [`Read`]; ends when the sender is dropped.
struct Chunks {
    rx: mpsc::Receiver<std::io::Result<Vec<u8>>>,
    current: Vec<u8>,
    at: usize,
}

impl Chunks {
    fn new(rx: mpsc::Receiver<std::io::Result<Vec<u8>>>) -> Self {
        Self {
            rx,
            current: Vec::new(),
            at: 0,
        }
    }
}

impl Read for Chunks {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.current.len() {
            match self.rx.recv() {
                Ok(chunk) => {
                    self.current = chunk?;
                    self.at = 0;
                }
                Err(mpsc::RecvError) => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len() - self.at);
        buf[..n].copy_from_slice(&self.current[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(chunks: Vec<std::io::Result<Vec<u8>>>) -> Chunks {
        let (tx, rx) = mpsc::channel();
        for c in chunks {
            tx.send(c).ok();
        }
        Chunks::new(rx)
    }

    #[test]
    fn chunks_read_as_one_stream() {
        let parts = ["{\"a\":", "", "[1,2", ",3]}"];
        let mut r = reader(parts.iter().map(|p| Ok(p.as_bytes().to_vec())).collect());
        let mut all = String::new();
        r.read_to_string(&mut all).ok();
        assert_eq!(all, "{\"a\":[1,2,3]}");
        let v: serde_json::Value = serde_json::from_str(&all).unwrap_or_default();
        assert_eq!(v["a"][2], 3);
    }

    #[test]
    fn a_broken_transfer_is_a_read_error_not_bad_json() {
        let r = reader(vec![
            Ok(b"{\"items\":[".to_vec()),
            Err(std::io::Error::other("connection reset")),
        ]);
        let e = serde_json::from_reader::<_, serde_json::Value>(r).err();
        assert!(
            matches!(e.map(read_error), Some(kube::Error::ReadEvents(_))),
            "an I/O error from the body"
        );
    }

    #[test]
    fn a_body_cut_short_is_bad_json() {
        let r = reader(vec![Ok(b"{\"items\":[".to_vec())]);
        let e = serde_json::from_reader::<_, serde_json::Value>(r).err();
        assert!(matches!(
            e.map(read_error),
            Some(kube::Error::SerdeError(_))
        ));
    }
}
