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

/// The path this guards, as the SubjectAccessReview names it.
pub const METRICS_PATH: &str = "/metrics";
/// How long an allowed token stays allowed without asking again.
const ALLOWED_FOR: Duration = Duration::from_secs(60);
/// How long a refused token stays refused without asking again.
const REFUSED_FOR: Duration = Duration::from_secs(10);
/// Tokens remembered at most; past it the expired ones go, then all.
const CACHE_SIZE: usize = 1024;

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
}

impl Decision {
    pub fn status(self) -> StatusCode {
        match self {
            Decision::Allowed => StatusCode::OK,
            Decision::Unauthenticated => StatusCode::UNAUTHORIZED,
            Decision::Forbidden => StatusCode::FORBIDDEN,
            Decision::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

/// The checker of `/metrics` requests.
pub struct Access {
    client: Client,
    cache: Mutex<HashMap<[u8; 32], (Decision, Instant)>>,
}

impl Access {
    pub fn new(client: Client) -> Self {
        Self {
            client,
            cache: Mutex::default(),
        }
    }

    /// The decision for a request with `headers`.
    pub async fn check(&self, headers: &HeaderMap) -> Decision {
        let Some(token) = bearer(headers) else {
            return Decision::Unauthenticated;
        };
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let now = Instant::now();
        if let Some(d) = self.cached(&key, now) {
            return d;
        }
        let decision = self.review(token).await;
        if decision != Decision::Unavailable {
            self.remember(key, decision, now);
        }
        decision
    }

    fn cached(&self, key: &[u8; 32], now: Instant) -> Option<Decision> {
        let cache = self.cache.lock().ok()?;
        let (decision, until) = cache.get(key)?;
        (*until > now).then_some(*decision)
    }

    fn remember(&self, key: [u8; 32], decision: Decision, now: Instant) {
        let Ok(mut cache) = self.cache.lock() else {
            return;
        };
        if cache.len() >= CACHE_SIZE {
            cache.retain(|_, (_, until)| *until > now);
            if cache.len() >= CACHE_SIZE {
                cache.clear();
            }
        }
        let ttl = match decision {
            Decision::Allowed => ALLOWED_FOR,
            _ => REFUSED_FOR,
        };
        cache.insert(key, (decision, now + ttl));
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
