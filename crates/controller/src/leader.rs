//! Leader election on a `coordination.k8s.io` Lease ([`crate::lease`]), fenced: every
//! replica keeps its stores in sync, only the leader's passes act ([`Leading`]), and every
//! write first asks the [`WriteGate`] whether this replica can still prove it holds the
//! lease. A standby that takes over starts on warm stores: no relist of every ManifestWork
//! between the old leader's last write and its own first. A replica that cannot renew (API
//! unreachable, process frozen) stops writing before another can take the lease over,
//! and the process exits, so its restart rejoins as a follower with fresh caches.
//!
//! Timing: the lease lasts [`LEASE_SECONDS`]; its holder renews every [`RENEW_EVERY`]. A
//! renewal that lands keeps the gate open until [`FENCE_AFTER`] past the moment it was
//! sent, and a watchdog reading the Lease every [`CHECK_EVERY`] does the same from the
//! last renewal it sees, closing the gate at once if the Lease names another holder.
//! [`FENCE_AFTER`] is [`LEASE_SECONDS`] minus a margin for the time a write takes to reach
//! the API server. A contender takes the Lease only after seeing it unchanged for
//! [`LEASE_SECONDS`], and only at the version it saw, so it never holds the Lease while
//! the gate of the last holder is open. On a hub that answers in seconds (bulk writes
//! queue ahead of the Lease's), a leader keeps its lease while each renewal takes under
//! about 4.5 s: one sent [`RENEW_EVERY`] after the last answer then lands within
//! [`FENCE_AFTER`] of the last one sent.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use tokio::sync::{oneshot, watch};

use crate::lease::{LeaseClient, Renewal};

pub const LEASE_NAME: &str = "mwrs-controller";
/// How long a lease stays valid after its holder's last renewal.
pub const LEASE_SECONDS: u64 = 15;
/// How often the holder renews: often enough that, with each request taking seconds on a
/// loaded hub, one renewal still lands within every [`FENCE_AFTER`].
const RENEW_EVERY: Duration = Duration::from_secs(2);
/// How long after the last renewal seen this replica still writes.
pub const FENCE_AFTER: Duration = Duration::from_secs(LEASE_SECONDS - 4);
/// How often the watchdog reads the Lease.
const CHECK_EVERY: Duration = Duration::from_secs(1);
/// How long one read may take. A slow answer is still good news: the gate is extended
/// from the moment the read was sent, so a read that took long opens it for less. Cutting
/// reads off at [`CHECK_EVERY`] made a loaded hub (every GET over a second) close the gate
/// of a leader that was renewing fine, and the leader exit.
const READ_TIMEOUT: Duration = FENCE_AFTER;

/// Whether this replica may write now. Open for ever without leader election.
#[derive(Clone, Debug, Default)]
pub struct WriteGate {
    /// None: no leader election; Some(t): writes allowed until `t`.
    until: Option<Arc<Mutex<Instant>>>,
}

impl WriteGate {
    /// A gate closed until [`WriteGate::extend`] opens it.
    pub fn fenced() -> Self {
        Self {
            until: Some(Arc::new(Mutex::new(Instant::now()))),
        }
    }

    /// May this replica write now?
    pub fn is_open(&self) -> bool {
        match &self.until {
            None => true,
            Some(u) => u.lock().is_ok_and(|u| Instant::now() < *u),
        }
    }

    /// Closes the gate now (a read showed the Lease is not this replica's).
    fn close(&self) {
        if let Some(u) = &self.until
            && let Ok(mut u) = u.lock()
        {
            *u = Instant::now();
        }
    }

    /// Keeps the gate open until `until` (never moves it back).
    fn extend(&self, until: Instant) {
        if let Some(u) = &self.until
            && let Ok(mut u) = u.lock()
            && until > *u
        {
            *u = until;
        }
    }
}

/// Whether this replica's passes act: always without leader election; with it, from the
/// moment it holds the Lease (until then its passes only keep the stores company).
#[derive(Clone, Debug, Default)]
pub struct Leading(Option<watch::Receiver<bool>>);

impl Leading {
    /// A standby, and the sender that makes it lead.
    pub fn standby() -> (watch::Sender<bool>, Self) {
        let (tx, rx) = watch::channel(false);
        (tx, Self(Some(rx)))
    }

    /// Does this replica lead now?
    pub fn now(&self) -> bool {
        self.0.as_ref().is_none_or(|rx| *rx.borrow())
    }

    /// One item when this replica begins to lead (at once if it does), then the end;
    /// nothing without leader election, where every pass acts from the start.
    pub fn began(&self) -> impl futures::Stream<Item = ()> + Send + Sync + 'static {
        let rx = self.0.clone();
        futures::stream::iter(rx)
            .filter_map(|mut rx| async move { rx.wait_for(|leads| *leads).await.ok().map(|_| ()) })
    }
}

/// A held lease: `lost()` resolves when leadership ends or can no longer be proven.
pub struct Leadership {
    /// Turns false when a renewal finds the Lease another's.
    held: watch::Receiver<bool>,
    /// Ends the renewals and releases the Lease.
    stop: oneshot::Sender<()>,
    renewer: tokio::task::JoinHandle<()>,
    gate: WriteGate,
    watchdog: tokio::task::JoinHandle<()>,
}

impl Leadership {
    /// Waits until this replica holds the lease, then keeps `gate` open for as long as it
    /// can prove it does. Errors only when the API server refuses (no such namespace, no
    /// permission); while it cannot be reached, keeps trying.
    pub async fn acquire(
        client: Client,
        namespace: &str,
        identity: &str,
        gate: WriteGate,
    ) -> kube::Result<Self> {
        let lease = LeaseClient {
            api: Api::namespaced(client, namespace),
            name: LEASE_NAME.to_string(),
            identity: identity.to_string(),
            duration: Duration::from_secs(LEASE_SECONDS),
            field_manager: crate::FIELD_MANAGER.to_string(),
        };
        let version = lease.acquire(CHECK_EVERY).await?;
        tracing::info!(identity, namespace, "acquired leadership");
        let watchdog = tokio::spawn(watch_lease(
            lease.api.clone(),
            identity.to_string(),
            gate.clone(),
        ));
        let (held_tx, held) = watch::channel(true);
        let (stop, stopped) = oneshot::channel();
        let renewer = tokio::spawn(renew(lease, version, gate.clone(), held_tx, stopped));
        Ok(Self {
            held,
            stop,
            renewer,
            gate,
            watchdog,
        })
    }

    /// Gives the lease up so a standby takes over at once instead of after expiry.
    pub async fn release(self) {
        let Self {
            stop,
            renewer,
            watchdog,
            ..
        } = self;
        watchdog.abort();
        let _ = stop.send(());
        if tokio::time::timeout(Duration::from_secs(5), renewer)
            .await
            .is_err()
        {
            tracing::warn!("timed out releasing the lease");
        }
    }

    /// Resolves when the lease is lost, its renewals stopped, or the gate closed.
    pub fn lost(&self) -> impl std::future::Future<Output = ()> + Send + Sync + 'static {
        let mut held = self.held.clone();
        let gate = self.gate.clone();
        let renewals_say_lost = async move {
            let _ = held.wait_for(|h| !*h).await;
        };
        let fenced = async move {
            // Give the watchdog its first read before the gate counts.
            tokio::time::sleep(FENCE_AFTER).await;
            while gate.is_open() {
                tokio::time::sleep(CHECK_EVERY).await;
            }
            tracing::warn!("leader lease not confirmed in time; writes stopped");
        };
        async move {
            tokio::select! {
                _ = renewals_say_lost => {}
                _ = fenced => {}
            }
        }
    }
}

/// Renews the lease every [`RENEW_EVERY`] (every [`CHECK_EVERY`] after a failure) until
/// told to stop, then releases it; says on `held` when a renewal finds it another's. A
/// renewal that lands opens `gate` until [`FENCE_AFTER`] past the moment it was sent: its
/// renewTime is no earlier, and it landed on the version this replica held, so no
/// contender can take the Lease before [`LEASE_SECONDS`] past it. A slow answer is still
/// good news: a renewal may take up to [`FENCE_AFTER`].
async fn renew(
    lease: LeaseClient,
    mut version: String,
    gate: WriteGate,
    held: watch::Sender<bool>,
    mut stop: oneshot::Receiver<()>,
) {
    let mut wait = RENEW_EVERY;
    loop {
        tokio::select! {
            _ = &mut stop => break,
            _ = tokio::time::sleep(wait) => {}
        }
        let sent = Instant::now();
        match tokio::time::timeout(FENCE_AFTER, lease.renew(&version)).await {
            Ok(Ok(Renewal::Renewed(v))) => {
                gate.extend(sent + FENCE_AFTER);
                version = v;
                wait = RENEW_EVERY;
                continue;
            }
            Ok(Ok(Renewal::Lost)) => {
                tracing::warn!("the leader lease names another holder");
                let _ = held.send(false);
                return;
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "cannot renew the leader lease"),
            Err(_) => tracing::warn!("renewing the leader lease timed out"),
        }
        wait = CHECK_EVERY;
    }
    match lease.release(&version).await {
        Ok(()) => tracing::info!("released leadership"),
        Err(e) => tracing::warn!(error = %e, "cannot release the lease"),
    }
}

/// Reads the Lease every [`CHECK_EVERY`]; while it names `identity` with a renewal at
/// most [`FENCE_AFTER`] old, keeps `gate` open until that renewal + [`FENCE_AFTER`], and
/// closes it at once when a read shows anything else. The renewal time is written by this
/// replica's own clock, so the age is measured on the same clock; a read that fails or
/// times out leaves the gate to close by itself.
async fn watch_lease(api: Api<Lease>, identity: String, gate: WriteGate) {
    loop {
        let asked = Instant::now();
        let read = tokio::time::timeout(READ_TIMEOUT, api.get(LEASE_NAME)).await;
        match read {
            Ok(Ok(lease)) => apply_read(&gate, &lease, &identity, asked, jiff::Timestamp::now()),
            Ok(Err(e)) => tracing::warn!(error = %e, "cannot read the leader lease"),
            Err(_) => tracing::warn!("reading the leader lease timed out"),
        }
        tokio::time::sleep(CHECK_EVERY.saturating_sub(asked.elapsed())).await;
    }
}

/// What one read of the Lease (sent at `asked`, answered at `now`) does to the gate.
fn apply_read(
    gate: &WriteGate,
    lease: &Lease,
    identity: &str,
    asked: Instant,
    now: jiff::Timestamp,
) {
    match renewal_age(lease, identity, now).and_then(|age| FENCE_AFTER.checked_sub(age)) {
        Some(left) => gate.extend(asked + left),
        // Another holder, none, or a renewal too old: the Lease is not provably ours.
        None => gate.close(),
    }
}

/// How long ago `identity` last renewed `lease` (None: it is not the holder).
fn renewal_age(lease: &Lease, identity: &str, now: jiff::Timestamp) -> Option<Duration> {
    let spec = lease.spec.as_ref()?;
    if spec.holder_identity.as_deref() != Some(identity) {
        return None;
    }
    let renewed = spec.renew_time.as_ref()?.0;
    let age = now.duration_since(renewed);
    Some(Duration::try_from(age).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    fn lease(holder: &str, renewed: jiff::Timestamp) -> Lease {
        Lease {
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                renew_time: Some(MicroTime(renewed)),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn only_our_own_renewal_counts() {
        let now = jiff::Timestamp::from_second(1_000).unwrap_or_default();
        let before = jiff::Timestamp::from_second(997).unwrap_or_default();
        assert_eq!(
            renewal_age(&lease("me", before), "me", now),
            Some(Duration::from_secs(3))
        );
        assert_eq!(renewal_age(&lease("other", before), "me", now), None);
        // A renewal time ahead of our clock counts as just now.
        assert_eq!(
            renewal_age(&lease("me", now), "me", before),
            Some(Duration::ZERO)
        );
    }

    /// A read that shows another holder (or no holder) closes the gate at once: the
    /// Lease is no longer this replica's, whatever the last renewal it saw (security
    /// review M1).
    #[test]
    fn a_read_naming_another_holder_closes_the_gate_at_once() {
        let gate = WriteGate::fenced();
        let now = jiff::Timestamp::from_second(1_000).unwrap_or_default();
        let asked = Instant::now();
        apply_read(&gate, &lease("me", now), "me", asked, now);
        assert!(gate.is_open(), "our own fresh renewal opens it");
        apply_read(&gate, &lease("other", now), "me", asked, now);
        assert!(!gate.is_open(), "another holder closes it");
        apply_read(&gate, &Lease::default(), "me", asked, now);
        assert!(!gate.is_open());
        // An old renewal of ours does not open it either.
        let old = jiff::Timestamp::from_second(980).unwrap_or_default();
        apply_read(&gate, &lease("me", old), "me", asked, now);
        assert!(!gate.is_open());
    }

    #[test]
    fn the_gate_opens_only_as_far_as_extended() {
        let gate = WriteGate::fenced();
        assert!(!gate.is_open());
        gate.extend(Instant::now() + Duration::from_secs(60));
        assert!(gate.is_open());
        // Never moved back.
        gate.extend(Instant::now());
        assert!(gate.is_open());
        assert!(WriteGate::default().is_open());
    }
}
