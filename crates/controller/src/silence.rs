//! How long a connection to the hub may stay silent before it counts as dead. A
//! connection can die without a word: the API server instance behind a load balancer is
//! lost, a network path drops every packet, the hub is frozen. Nothing closes it then,
//! so without bounds a watch waits for kube's idle limit (its 290 s watch timeout plus
//! 5 s), seeing no change meanwhile, and a request in flight waits until the kernel
//! gives up on the socket (many minutes).

use std::time::Duration;

/// The two bounds: every watch is made again at least this often, and every response
/// that goes this long without a byte fails (and is retried as any failed request is).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SilenceBounds {
    /// The `timeoutSeconds` of every watch: the API server ends it then (having sent
    /// a bookmark, so it resumes where it was, with no relist), and kube makes it again;
    /// one silent for this plus 5 s counts as dead.
    pub watch: Duration,
    /// The longest a pending response may go without a byte. Above `watch` (a live watch
    /// ends within it) and above the hub's own request timeout (`--request-timeout`, 60 s
    /// by default), so that only a dead connection reaches it.
    pub read: Duration,
}

impl Default for SilenceBounds {
    fn default() -> Self {
        Self {
            watch: Duration::from_secs(60),
            read: Duration::from_secs(90),
        }
    }
}

impl SilenceBounds {
    /// Bounds whose read bound is above the watch bound: a live watch may be silent
    /// until the API server ends it, and must not fail for it.
    pub fn new(watch: Duration, read: Duration) -> Result<Self, String> {
        if read <= watch {
            return Err(format!(
                "the read timeout ({read:?}) must be longer than the watch timeout ({watch:?}): \
                 a live watch may be silent until the API server ends it"
            ));
        }
        Ok(Self { watch, read })
    }

    /// Sets `config`'s read timeout; it counts from each request sent, not from when its
    /// pooled connection went idle.
    pub fn apply(&self, config: &mut kube::Config) {
        config.read_timeout = Some(self.read);
        config.reset_reader_on_write = true;
    }

    /// `timeoutSeconds` for a watch (at least 1: 0 would disable kube's idle limit).
    pub fn watch_timeout_secs(&self) -> u32 {
        u32::try_from(self.watch.as_secs())
            .unwrap_or(u32::MAX)
            .max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_bound_not_above_the_watch_bound_is_refused() {
        let s = Duration::from_secs;
        assert!(SilenceBounds::new(s(60), s(60)).is_err());
        assert!(SilenceBounds::new(s(60), s(30)).is_err());
        assert_eq!(
            SilenceBounds::new(s(60), s(90)),
            Ok(SilenceBounds::default())
        );
    }

    #[test]
    fn a_zero_watch_bound_still_bounds_a_watch() {
        let b = SilenceBounds::new(Duration::ZERO, Duration::from_secs(1)).unwrap();
        assert_eq!(b.watch_timeout_secs(), 1);
    }

    #[test]
    fn the_read_bound_counts_from_each_request() {
        let mut config = kube::Config::new("https://hub.example:6443".parse().unwrap());
        SilenceBounds::default().apply(&mut config);
        assert_eq!(config.read_timeout, Some(Duration::from_secs(90)));
        assert!(config.reset_reader_on_write);
    }
}
