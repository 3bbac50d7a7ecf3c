//! Who may read `/metrics` when it is served securely: the caller's bearer token is
//! checked by the API server (TokenReview), then the user it names must be allowed `get`
//! on the non-resource URL `/metrics` (SubjectAccessReview), as controller-runtime's
//! secure metrics and kube-rbac-proxy do. Grant it with the `mwrs-controller-metrics-reader`
//! ClusterRole of `deploy/rbac/rbac.yaml`. Decisions are cached by a digest of the token
//! (never the token itself) for a short while, so a scrape every few seconds costs the
//! API server nothing after the first.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode, header};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, PostParams};
use sha2::{Digest as _, Sha256};
use tokio::sync::Semaphore;

/// The path this guards, as the SubjectAccessReview names it.
pub const METRICS_PATH: &str = "/metrics";
/// How long an allowed token stays allowed without asking again.
const ALLOWED_FOR: Duration = Duration::from_secs(60);
/// How long a refused token stays refused without asking again.
const REFUSED_FOR: Duration = Duration::from_secs(10);
/// Tokens remembered at most (see [`Decisions::insert`]).
const CACHE_SIZE: usize = 1024;
/// TokenReviews asked of the API server at most, a second, and in one burst: anyone who
/// reaches the port can send tokens, and each unknown one costs a review on the
/// controller's own priority level.
const REVIEWS_PER_SECOND: f64 = 10.0;
const REVIEW_BURST: f64 = 20.0;

/// What a request to `/metrics` gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Allowed,
    /// No bearer token, or one the API server does not accept: 401.
    Unauthenticated,
    /// A valid token of a user without `get` on `/metrics`: 403.
    Forbidden,
    /// The API server could not be asked: 503, not cached.
    Unavailable,
    /// An unknown token past the review budget, or while as many requests as may wait on
    /// the API server already do: 429, not asked, not cached.
    Throttled,
}

impl Decision {
    pub fn status(self) -> StatusCode {
        match self {
            Decision::Allowed => StatusCode::OK,
            Decision::Unauthenticated => StatusCode::UNAUTHORIZED,
            Decision::Forbidden => StatusCode::FORBIDDEN,
            Decision::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Decision::Throttled => StatusCode::TOO_MANY_REQUESTS,
        }
    }
}

/// The checker of `/metrics` requests.
pub struct Access {
    client: Client,
    cache: Mutex<Decisions>,
    budget: Mutex<ReviewBudget>,
}

/// A token bucket of reviews: [`REVIEW_BURST`] at once, refilled at
/// [`REVIEWS_PER_SECOND`].
struct ReviewBudget {
    left: f64,
    at: Instant,
}

impl ReviewBudget {
    fn new(now: Instant) -> Self {
        Self {
            left: REVIEW_BURST,
            at: now,
        }
    }

    /// May one more review be asked now?
    fn take(&mut self, now: Instant) -> bool {
        let refill = now.saturating_duration_since(self.at).as_secs_f64() * REVIEWS_PER_SECOND;
        self.left = (self.left + refill).min(REVIEW_BURST);
        self.at = now;
        if self.left < 1.0 {
            return false;
        }
        self.left -= 1.0;
        true
    }
}

/// Decisions by token digest, each until it expires.
#[derive(Default)]
struct Decisions {
    map: HashMap<[u8; 32], (Decision, Instant)>,
}

impl Decisions {
    fn get(&self, key: &[u8; 32], now: Instant) -> Option<Decision> {
        let (decision, until) = self.map.get(key)?;
        (*until > now).then_some(*decision)
    }

    /// Remembers `decision`. When full, the expired entries go first, then every refusal,
    /// then the allowed ones that expire soonest: a flood of unknown tokens never pushes
    /// out the scrapers' allowed decisions.
    fn insert(&mut self, key: [u8; 32], decision: Decision, now: Instant) {
        if self.map.len() >= CACHE_SIZE {
            self.map.retain(|_, (_, until)| *until > now);
        }
        if self.map.len() >= CACHE_SIZE {
            self.map.retain(|_, (d, _)| *d == Decision::Allowed);
        }
        if self.map.len() >= CACHE_SIZE {
            let mut left: Vec<Instant> = self.map.values().map(|(_, until)| *until).collect();
            left.sort_unstable();
            let cut = left[left.len() - CACHE_SIZE / 2];
            self.map.retain(|_, (_, until)| *until >= cut);
        }
        let ttl = match decision {
            Decision::Allowed => ALLOWED_FOR,
            _ => REFUSED_FOR,
        };
        self.map.insert(key, (decision, now + ttl));
    }
}

impl Access {
    pub fn new(client: Client) -> Self {
        Self {
            client,
            cache: Mutex::default(),
            budget: Mutex::new(ReviewBudget::new(Instant::now())),
        }
    }

    /// The decision for a request with `headers`. A request that needs a review holds one
    /// of `waiting`'s permits while it waits on the API server; with none left, it is
    /// throttled, so that requests waiting on a slow hub never take every connection.
    pub async fn check(&self, headers: &HeaderMap, waiting: &Semaphore) -> Decision {
        let Some(token) = bearer(headers) else {
            return Decision::Unauthenticated;
        };
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let now = Instant::now();
        if let Some(d) = self.cached(&key, now) {
            return d;
        }
        let Ok(_waiting) = waiting.try_acquire() else {
            return Decision::Throttled;
        };
        if !self.budget.lock().is_ok_and(|mut b| b.take(now)) {
            return Decision::Throttled;
        }
        let decision = self.review(token).await;
        if !matches!(decision, Decision::Unavailable | Decision::Throttled) {
            self.remember(key, decision, now);
        }
        decision
    }

    fn cached(&self, key: &[u8; 32], now: Instant) -> Option<Decision> {
        self.cache.lock().ok()?.get(key, now)
    }

    fn remember(&self, key: [u8; 32], decision: Decision, now: Instant) {
        if let Ok(mut cache) = self.cache.lock() {
            cache.insert(key, decision, now);
        }
    }

    /// TokenReview, then SubjectAccessReview for `get /metrics`.
    async fn review(&self, token: &str) -> Decision {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_string(),
                audiences: None,
            },
            ..Default::default()
        };
        let reviewed = match Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
        {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "metrics: TokenReview failed");
                return Decision::Unavailable;
            }
        };
        let status = reviewed.status.unwrap_or_default();
        let Some(user) = status.user.filter(|_| status.authenticated == Some(true)) else {
            return Decision::Unauthenticated;
        };
        let sar = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username.clone(),
                uid: user.uid,
                groups: user.groups,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(METRICS_PATH.into()),
                    verb: Some("get".into()),
                }),
                resource_attributes: None,
            },
            ..Default::default()
        };
        match Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &sar)
            .await
        {
            Ok(r) if r.status.as_ref().is_some_and(|s| s.allowed) => Decision::Allowed,
            Ok(_) => {
                tracing::debug!(user = ?user.username, "metrics: access refused");
                Decision::Forbidden
            }
            Err(e) => {
                tracing::warn!(error = %e, "metrics: SubjectAccessReview failed");
                Decision::Unavailable
            }
        }
    }
}

/// The token of an `Authorization: Bearer …` header.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn key(i: usize) -> [u8; 32] {
        Sha256::digest(i.to_le_bytes()).into()
    }

    /// Anyone who reaches the port can send random tokens; refusing them must never push
    /// out the scrapers' allowed decisions (security review M1).
    #[test]
    fn a_flood_of_refused_tokens_never_evicts_an_allowed_one() {
        let mut cache = Decisions::default();
        let now = Instant::now();
        cache.insert(key(0), Decision::Allowed, now);
        for i in 1..=2 * CACHE_SIZE {
            cache.insert(key(i), Decision::Unauthenticated, now);
        }
        assert_eq!(cache.get(&key(0), now), Some(Decision::Allowed));
        assert!(cache.map.len() <= CACHE_SIZE);
        // Allowed ones alone past the size: the soonest to expire go, the newest stay.
        for i in 1..=2 * CACHE_SIZE {
            let later = now + Duration::from_millis(i as u64);
            cache.insert(key(i), Decision::Allowed, later);
        }
        assert!(cache.map.len() <= CACHE_SIZE);
        assert_eq!(
            cache.get(&key(2 * CACHE_SIZE), now),
            Some(Decision::Allowed)
        );
    }

    /// At most a burst of reviews at once, then the refill rate: a flood of unknown
    /// tokens costs the API server a bounded number of TokenReviews (security review M1).
    #[test]
    fn reviews_are_asked_within_a_budget() {
        let t0 = Instant::now();
        let mut budget = ReviewBudget::new(t0);
        let burst = (0..100).filter(|_| budget.take(t0)).count();
        assert_eq!(burst as f64, REVIEW_BURST);
        let later = t0 + Duration::from_secs(1);
        let refilled = (0..100).filter(|_| budget.take(later)).count();
        assert_eq!(refilled as f64, REVIEWS_PER_SECOND);
        assert_eq!(Decision::Throttled.status(), StatusCode::TOO_MANY_REQUESTS);
    }

    #[test]
    fn only_a_bearer_header_carries_a_token() {
        let mut h = HeaderMap::new();
        assert_eq!(bearer(&h), None);
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic abc"));
        assert_eq!(bearer(&h), None);
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer "));
        assert_eq!(bearer(&h), None);
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("bearer t0k"),
        );
        assert_eq!(bearer(&h), Some("t0k"));
    }
}
