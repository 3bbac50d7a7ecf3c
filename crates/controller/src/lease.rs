//! The leader-election Lease, read and written with optimistic concurrency. A replica
//! takes the Lease only by a write conditional on the version it judged free or expired,
//! and renews or releases it only by a write conditional on the version it last wrote: a
//! holder's renewal that lands first makes a contender's takeover fail (409), instead of
//! the takeover erasing a renewal the holder believes in.
//!
//! A contender judges expiry on its own clock, from when it first saw the current record
//! (holder and renewal time) unchanged, as client-go's leader election does: no other
//! replica's clock is trusted, and the holder's last renewal is always older than the
//! contender's first sight of it.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;

/// The record a contender last read, and since when (its own clock) it has been the same.
#[derive(Clone, Debug, PartialEq)]
pub struct Seen {
    holder: Option<String>,
    renewed: Option<jiff::Timestamp>,
    since: Instant,
}

/// What a contender does after reading the Lease.
#[derive(Debug, PartialEq)]
pub enum Step {
    /// There is no Lease: create it, held by this replica.
    Create,
    /// Take the Lease at this version (free, ours, or expired).
    Take { version: String, transitions: i32 },
    /// Someone else holds it: read again in at most this long.
    Wait(Duration),
}

/// What a renewal found.
#[derive(Debug, PartialEq)]
pub enum Renewal {
    /// Renewed; the Lease's version now.
    Renewed(String),
    /// The Lease names another holder, or none.
    Lost,
}

fn holder(lease: &Lease) -> Option<&str> {
    let h = lease.spec.as_ref()?.holder_identity.as_deref()?;
    (!h.is_empty()).then_some(h)
}

fn renewed(lease: &Lease) -> Option<jiff::Timestamp> {
    Some(lease.spec.as_ref()?.renew_time.as_ref()?.0)
}

/// The contender's view after reading `lease` at `now`: unchanged since the last read
/// keeps its `since`; any change of holder or renewal time starts it again.
pub fn observe(previous: Option<Seen>, lease: &Lease, now: Instant) -> Seen {
    let (holder, renewed) = (holder(lease).map(str::to_string), renewed(lease));
    match previous {
        Some(seen) if seen.holder == holder && seen.renewed == renewed => seen,
        _ => Seen {
            holder,
            renewed,
            since: now,
        },
    }
}

/// What `identity` does with the Lease it read (`None`: there is none), given what it has
/// seen of it. `duration` is how long a record must stay unchanged to count as expired
/// when the Lease does not say.
pub fn decide(
    lease: Option<&Lease>,
    seen: &Seen,
    identity: &str,
    duration: Duration,
    now: Instant,
) -> Step {
    let Some(lease) = lease else {
        return Step::Create;
    };
    let take = || Step::Take {
        version: lease.metadata.resource_version.clone().unwrap_or_default(),
        transitions: lease
            .spec
            .as_ref()
            .and_then(|s| s.lease_transitions)
            .unwrap_or(0),
    };
    match holder(lease) {
        None => take(),
        Some(h) if h == identity => take(),
        Some(_) => {
            let lasts = lease
                .spec
                .as_ref()
                .and_then(|s| s.lease_duration_seconds)
                .and_then(|s| u64::try_from(s).ok())
                .map_or(duration, Duration::from_secs);
            match (seen.since + lasts).checked_duration_since(now) {
                Some(left) if !left.is_zero() => Step::Wait(left),
                _ => take(),
            }
        }
    }
}

/// How long the API server may refuse a replica that has never read the Lease before
/// leader election ends: an API server that just started denies requests until its
/// authorizer has synced; a missing RoleBinding denies them for ever.
pub const REFUSED_FOR: Duration = Duration::from_secs(30);

/// What the errors so far make of the next one.
#[derive(Debug, Default)]
pub struct Refusals {
    /// The Lease was read once: from then on every error is waited out.
    reached: bool,
    /// Since when every answer has been a refusal (before the Lease was first read).
    since: Option<Instant>,
}

impl Refusals {
    /// The Lease was read.
    pub fn reached(&mut self) {
        self.reached = true;
        self.since = None;
    }

    /// Does `e`, at `now`, end leader election? A missing namespace or a request the API
    /// server cannot take, at once; no permission, once it has lasted [`REFUSED_FOR`];
    /// nothing once the Lease has been read, nor what the API server may recover from (down,
    /// slow, overloaded).
    pub fn ends(&mut self, e: &kube::Error, now: Instant) -> bool {
        let kube::Error::Api(s) = e else {
            return false;
        };
        if self.reached {
            return false;
        }
        match s.code {
            400 | 404 | 422 => true,
            401 | 403 => {
                now.saturating_duration_since(*self.since.get_or_insert(now)) >= REFUSED_FOR
            }
            _ => false,
        }
    }
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// One replica's reads and writes of one Lease.
#[derive(Clone)]
pub struct LeaseClient {
    pub api: Api<Lease>,
    pub name: String,
    pub identity: String,
    /// How long the Lease lasts after a renewal (written into it).
    pub duration: Duration,
    pub field_manager: String,
}

impl LeaseClient {
    fn params(&self) -> PatchParams {
        PatchParams {
            field_manager: Some(self.field_manager.clone()),
            ..PatchParams::default()
        }
    }

    fn seconds(&self) -> i32 {
        i32::try_from(self.duration.as_secs()).unwrap_or(i32::MAX)
    }

    /// A merge patch of the Lease that the API server applies only at `version`.
    async fn patch_at(&self, version: &str, spec: serde_json::Value) -> kube::Result<String> {
        let patch = json!({"metadata": {"resourceVersion": version}, "spec": spec});
        let lease = self
            .api
            .patch(&self.name, &self.params(), &Patch::Merge(patch))
            .await?;
        Ok(lease.metadata.resource_version.unwrap_or_default())
    }

    /// Reads the Lease until this replica holds it; returns the version it wrote. Errors
    /// the API server may recover from are logged and retried every `poll` (see
    /// [`Refusals`] for those that end it).
    pub async fn acquire(&self, poll: Duration) -> kube::Result<String> {
        let mut seen: Option<Seen> = None;
        let mut refusals = Refusals::default();
        let mut warned: Option<Instant> = None;
        let mut waiting_logged = false;
        loop {
            let attempt = match self.api.get_opt(&self.name).await {
                Ok(lease) => {
                    let now = Instant::now();
                    if lease.is_some() {
                        refusals.reached();
                    }
                    seen = lease.as_ref().map(|l| observe(seen.take(), l, now));
                    match self.step(lease.as_ref(), seen.as_ref(), now) {
                        Step::Create => self.create().await,
                        Step::Take {
                            version,
                            transitions,
                        } => self.take(&version, transitions, lease.as_ref()).await,
                        Step::Wait(left) => {
                            if !waiting_logged {
                                let holder = seen.as_ref().and_then(|s| s.holder.clone());
                                tracing::info!(identity = %self.identity, ?holder, "waiting for leadership");
                                waiting_logged = true;
                            }
                            tokio::time::sleep(left.min(poll)).await;
                            continue;
                        }
                    }
                }
                Err(e) => Err(e),
            };
            let e = match attempt {
                Ok(version) => return Ok(version),
                Err(e) => e,
            };
            // A conflict: another replica wrote first; read again.
            if is_conflict(&e) {
                continue;
            }
            let now = Instant::now();
            if refusals.ends(&e, now) {
                return Err(e);
            }
            if warned.is_none_or(|w| now.saturating_duration_since(w) >= REFUSED_FOR) {
                tracing::warn!(error = %e, "leader election: cannot reach the lease; retrying");
                warned = Some(now);
            }
            tokio::time::sleep(poll).await;
        }
    }

    /// What to do with `lease` as read at `now`, given what was `seen` of it.
    fn step(&self, lease: Option<&Lease>, seen: Option<&Seen>, now: Instant) -> Step {
        let fresh = Seen {
            holder: None,
            renewed: None,
            since: now,
        };
        decide(
            lease,
            seen.unwrap_or(&fresh),
            &self.identity,
            self.duration,
            now,
        )
    }

    async fn create(&self) -> kube::Result<String> {
        let now = MicroTime(jiff::Timestamp::now());
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.identity.clone()),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_duration_seconds: Some(self.seconds()),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        };
        let params = PostParams {
            field_manager: Some(self.field_manager.clone()),
            ..PostParams::default()
        };
        // Created by another replica since the read: 409, a conflict like any other.
        let created = self.api.create(&params, &lease).await?;
        Ok(created.metadata.resource_version.unwrap_or_default())
    }

    async fn take(
        &self,
        version: &str,
        transitions: i32,
        lease: Option<&Lease>,
    ) -> kube::Result<String> {
        let ours = lease.and_then(holder) == Some(self.identity.as_str());
        let now = MicroTime(jiff::Timestamp::now());
        let mut spec = json!({
            "holderIdentity": self.identity,
            "renewTime": now,
            "leaseDurationSeconds": self.seconds(),
        });
        if !ours {
            spec["acquireTime"] = json!(now);
            spec["leaseTransitions"] = json!(transitions.saturating_add(1));
        }
        self.patch_at(version, spec).await
    }

    /// Renews the Lease this replica wrote at `version`. A conflict is read again: the
    /// Lease changed by someone else but still naming this replica is renewed at its new
    /// version; naming another holder (or none) is lost.
    pub async fn renew(&self, version: &str) -> kube::Result<Renewal> {
        let spec = || json!({"renewTime": MicroTime(jiff::Timestamp::now())});
        match self.patch_at(version, spec()).await {
            Ok(v) => return Ok(Renewal::Renewed(v)),
            Err(e) if is_conflict(&e) => {}
            Err(e) => return Err(e),
        }
        let lease = self.api.get_opt(&self.name).await?;
        match lease {
            Some(l) if holder(&l) == Some(self.identity.as_str()) => {
                let version = l.metadata.resource_version.unwrap_or_default();
                self.patch_at(&version, spec()).await.map(Renewal::Renewed)
            }
            _ => Ok(Renewal::Lost),
        }
    }

    /// Gives the Lease up (at `version`, so never another holder's) for a standby to take
    /// at once instead of after expiry.
    pub async fn release(&self, version: &str) -> kube::Result<()> {
        let spec = json!({"holderIdentity": null, "acquireTime": null, "renewTime": null});
        self.patch_at(version, spec).await.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LASTS: Duration = Duration::from_secs(15);

    fn lease(holder: Option<&str>, renewed_at: i64, version: &str) -> Lease {
        Lease {
            metadata: ObjectMeta {
                resource_version: Some(version.into()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_string),
                renew_time: jiff::Timestamp::from_second(renewed_at).ok().map(MicroTime),
                lease_duration_seconds: Some(15),
                lease_transitions: Some(3),
                ..LeaseSpec::default()
            }),
        }
    }

    fn take(version: &str) -> Step {
        Step::Take {
            version: version.into(),
            transitions: 3,
        }
    }

    #[test]
    fn another_holder_expires_only_after_a_whole_duration_unchanged_on_our_clock() {
        let t0 = Instant::now();
        // A renewal time long past on any clock does not count: only how long we have
        // seen the record unchanged.
        let held = lease(Some("other"), 0, "7");
        let seen = observe(None, &held, t0);
        assert_eq!(
            decide(Some(&held), &seen, "me", LASTS, t0),
            Step::Wait(LASTS)
        );
        let later = t0 + Duration::from_secs(14);
        let seen = observe(Some(seen), &held, later);
        assert_eq!(
            decide(Some(&held), &seen, "me", LASTS, later),
            Step::Wait(Duration::from_secs(1))
        );
        let expired = t0 + LASTS;
        let seen = observe(Some(seen), &held, expired);
        assert_eq!(decide(Some(&held), &seen, "me", LASTS, expired), take("7"));
    }

    #[test]
    fn a_renewal_seen_starts_the_wait_again() {
        let t0 = Instant::now();
        let seen = observe(None, &lease(Some("other"), 100, "7"), t0);
        let renewed = lease(Some("other"), 105, "8");
        let t1 = t0 + Duration::from_secs(20);
        let seen = observe(Some(seen), &renewed, t1);
        assert_eq!(seen.since, t1);
        assert_eq!(
            decide(Some(&renewed), &seen, "me", LASTS, t1),
            Step::Wait(LASTS)
        );
        // A change of the object alone (a label: a new version) is not a renewal.
        let relabelled = lease(Some("other"), 105, "9");
        let t2 = t1 + LASTS;
        let seen = observe(Some(seen), &relabelled, t2);
        assert_eq!(decide(Some(&relabelled), &seen, "me", LASTS, t2), take("9"));
    }

    #[test]
    fn a_free_or_own_lease_is_taken_at_once_and_a_missing_one_created() {
        let t0 = Instant::now();
        for free in [
            lease(None, 100, "4"),
            lease(Some(""), 100, "4"),
            lease(Some("me"), 100, "4"),
        ] {
            let seen = observe(None, &free, t0);
            assert_eq!(decide(Some(&free), &seen, "me", LASTS, t0), take("4"));
        }
        let seen = observe(None, &lease(None, 0, "1"), t0);
        assert_eq!(decide(None, &seen, "me", LASTS, t0), Step::Create);
    }

    #[test]
    fn the_lease_says_how_long_it_lasts() {
        let t0 = Instant::now();
        let mut short = lease(Some("other"), 100, "5");
        if let Some(s) = short.spec.as_mut() {
            s.lease_duration_seconds = Some(2);
        }
        let seen = observe(None, &short, t0);
        let t1 = t0 + Duration::from_secs(2);
        assert_eq!(decide(Some(&short), &seen, "me", LASTS, t1), take("5"));
    }

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            ..kube::core::Status::default()
        }))
    }

    #[test]
    fn a_missing_namespace_ends_the_election_at_once() {
        let t0 = Instant::now();
        for code in [400, 404, 422] {
            assert!(Refusals::default().ends(&api(code), t0), "{code}");
        }
        for code in [409, 429, 500, 503, 504] {
            assert!(!Refusals::default().ends(&api(code), t0), "{code}");
        }
    }

    /// An API server back from a restart answers 403 until its authorizer has synced (the
    /// fault soak saw a replica exit on it): a refusal ends the election only when it has
    /// lasted, and never once the Lease has been read.
    #[test]
    fn no_permission_ends_the_election_only_when_it_lasts_before_the_lease_was_read() {
        let t0 = Instant::now();
        let mut r = Refusals::default();
        assert!(!r.ends(&api(403), t0));
        assert!(!r.ends(&api(503), t0 + Duration::from_secs(10)));
        assert!(!r.ends(&api(403), t0 + Duration::from_secs(29)));
        assert!(
            r.ends(&api(403), t0 + REFUSED_FOR),
            "refused for 30 s: the binding is missing"
        );
        let mut r = Refusals::default();
        r.reached();
        for later in [0, 60, 3600] {
            let at = t0 + Duration::from_secs(later);
            for code in [403, 404] {
                assert!(!r.ends(&api(code), at), "{code} after the lease was read");
            }
        }
    }
}
