//! Waiting on the hub: a condition checked every [`POLL`] until it holds or a bound passes.

use std::time::{Duration, Instant};

use anyhow::bail;

/// How often a condition on the hub is checked again.
pub const POLL: Duration = Duration::from_millis(150);

/// Calls `check` every [`POLL`] until it gives `Ok(value)`; fails with its last `Err(why)`
/// once `timeout` has passed, or at once with an error of its own.
pub async fn poll<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Result<T, String>>>,
{
    let by = Instant::now() + timeout;
    loop {
        match check().await? {
            Ok(v) => return Ok(v),
            Err(why) if Instant::now() >= by => bail!("{what}: not within {timeout:?}: {why}"),
            Err(_) => tokio::time::sleep(POLL).await,
        }
    }
}
