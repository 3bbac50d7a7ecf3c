//! Who may talk to the dashboard, and what every answer carries. A request is served only
//! with the one-time token (an `Authorization: Bearer` header, the cookie the first page
//! sets, or `?token=` in the URL the command prints) and, on loopback, only for a `Host`
//! that names this listener, so that a page of another site (DNS rebinding included)
//! can read nothing. It is read-only unless started with `--enable-actions`; then a
//! `POST` is served only from the dashboard's own page: the token in the cookie or header
//! (never the URL), a JSON body (which no other site can send without a preflight this
//! server never grants) and, when the browser names an `Origin`, this server's. Every
//! answer, a refusal included, carries strict security headers: nothing but this server's
//! own assets may run, nothing may frame it, and no cross-origin header is ever sent.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The cookie the first page load sets, so that the page's own requests carry the token.
pub const COOKIE: &str = "mwrs-dashboard-token";

/// The one-time token and where the server listens.
#[derive(Clone, Debug)]
pub struct Guard {
    token: Arc<str>,
    /// The `Host` values a request may carry (empty: any, off loopback).
    hosts: Arc<[String]>,
    /// Whether a `POST` (an action) may be served at all.
    actions: bool,
}

impl Guard {
    /// A new random token for a server bound to `addr`.
    pub fn new(addr: SocketAddr) -> Self {
        let bytes: [u8; 32] = rand::random();
        let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Self::with_token(addr, &token)
    }

    pub fn with_token(addr: SocketAddr, token: &str) -> Self {
        let port = addr.port();
        let hosts = if addr.ip().is_loopback() {
            let mut h = vec![
                format!("localhost:{port}"),
                format!("127.0.0.1:{port}"),
                format!("[::1]:{port}"),
            ];
            h.push(addr.to_string());
            h
        } else {
            Vec::new()
        };
        Self {
            token: Arc::from(token),
            hosts: hosts.into(),
            actions: false,
        }
    }

    /// The same guard, serving actions (`POST`) from the dashboard's page when `on`.
    pub fn with_actions(self, on: bool) -> Self {
        Self {
            actions: on,
            ..self
        }
    }

    pub fn actions(&self) -> bool {
        self.actions
    }

    pub fn token(&self) -> &str {
        &self.token
    }

    /// The token `headers` or `query` carry, if it is this one; and whether it came in
    /// the URL (then the answer sets the cookie).
    fn admits(&self, headers: &HeaderMap, query: Option<&str>) -> Option<bool> {
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let cookie = headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|kv| kv.trim().split_once('='))
            .find(|(k, _)| *k == COOKIE)
            .map(|(_, v)| v);
        let in_url = query
            .into_iter()
            .flat_map(|q| q.split('&'))
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == "token")
            .map(|(_, v)| v);
        if [bearer, cookie].into_iter().flatten().any(|t| self.is(t)) {
            return Some(false);
        }
        in_url.filter(|t| self.is(t)).map(|_| true)
    }

    /// Compares without stopping at the first difference (no timing hint).
    fn is(&self, candidate: &str) -> bool {
        let (a, b) = (self.token.as_bytes(), candidate.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
    }

    /// Why a write with `headers` is refused, if it is: it must come from this
    /// dashboard's page, and the dashboard must serve actions.
    fn write_refused(&self, headers: &HeaderMap, from_url: bool) -> Option<Response> {
        if !self.actions {
            return Some(refuse(
                StatusCode::METHOD_NOT_ALLOWED,
                "the dashboard is read-only: start it with --enable-actions",
            ));
        }
        let json = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
        let same_origin = match headers.get(header::ORIGIN).map(|v| v.to_str()) {
            None => true,
            Some(Ok(origin)) => host.is_some_and(|h| origin == format!("http://{h}")),
            Some(Err(_)) => false,
        };
        (from_url || !json || !same_origin).then(|| {
            refuse(
                StatusCode::FORBIDDEN,
                "an action must come from the dashboard's page (JSON, its own origin, the \
                 token in the cookie or the Authorization header)",
            )
        })
    }

    fn host_allowed(&self, headers: &HeaderMap) -> bool {
        if self.hosts.is_empty() {
            return true;
        }
        let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
        host.is_some_and(|h| self.hosts.iter().any(|a| a == h))
    }
}

/// The middleware: refuses what [`Guard`] does not admit, serves the rest read-only, and
/// adds the security headers to every answer.
pub async fn guard(State(g): State<Guard>, request: Request, next: Next) -> Response {
    let mut response = if !g.host_allowed(request.headers()) {
        refuse(StatusCode::FORBIDDEN, "this Host is not the dashboard's")
    } else {
        match g.admits(request.headers(), request.uri().query()) {
            None => refuse(
                StatusCode::UNAUTHORIZED,
                "no token: open the URL `mwrs dashboard` printed",
            ),
            Some(from_url) => match *request.method() {
                Method::GET | Method::HEAD => {
                    let mut r = next.run(request).await;
                    if from_url {
                        set_cookie(&mut r, &g.token);
                    }
                    r
                }
                Method::POST => match g.write_refused(request.headers(), from_url) {
                    Some(refused) => refused,
                    None => next.run(request).await,
                },
                _ => refuse(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "not a method the dashboard serves",
                ),
            },
        }
    };
    secure(response.headers_mut());
    response
}

fn set_cookie(r: &mut Response, token: &str) {
    let cookie = format!("{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict");
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
}

fn refuse(status: StatusCode, why: &'static str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        Body::from(why),
    )
        .into_response()
}

/// The headers every answer carries.
fn secure(h: &mut HeaderMap) {
    let set = [
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
             connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        ),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-store"),
        (
            header::HeaderName::from_static("cross-origin-opener-policy"),
            "same-origin",
        ),
        (
            header::HeaderName::from_static("cross-origin-resource-policy"),
            "same-origin",
        ),
    ];
    for (name, value) in set {
        h.insert(name, HeaderValue::from_static(value));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use axum::Router;
    use axum::routing::get;
    use tower::ServiceExt;

    const TOKEN: &str = "0123456789abcdef";

    fn app(addr: &str) -> Router {
        app_with(Guard::with_token(addr.parse().unwrap(), TOKEN))
    }

    fn app_with(g: Guard) -> Router {
        Router::new()
            .route("/api/x", get(|| async { "data" }).post(|| async { "done" }))
            .layer(axum::middleware::from_fn_with_state(g, guard))
    }

    async fn send(app: Router, r: Request) -> Response {
        app.oneshot(r).await.unwrap()
    }

    fn request(uri: &str, host: &str) -> axum::http::request::Builder {
        Request::builder().uri(uri).header(header::HOST, host)
    }

    #[tokio::test]
    async fn only_a_request_with_the_token_is_served() {
        let host = "127.0.0.1:3100";
        let without = send(
            app(host),
            request("/api/x", host).body(Body::empty()).unwrap(),
        )
        .await;
        assert_eq!(without.status(), StatusCode::UNAUTHORIZED);
        assert!(
            without
                .headers()
                .contains_key(header::CONTENT_SECURITY_POLICY)
        );
        let wrong = request("/api/x?token=0123456789abcdeX", host);
        let r = send(app(host), wrong.body(Body::empty()).unwrap()).await;
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);

        // In the URL: served, and the cookie is set for the page's own requests.
        let url = request(&format!("/api/x?token={TOKEN}"), host);
        let r = send(app(host), url.body(Body::empty()).unwrap()).await;
        assert_eq!(r.status(), StatusCode::OK);
        let cookie = r.headers()[header::SET_COOKIE]
            .to_str()
            .unwrap()
            .to_string();
        assert!(
            cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
            "{cookie}"
        );
        for (name, value) in [
            (header::COOKIE, format!("other=1; {COOKIE}={TOKEN}")),
            (header::AUTHORIZATION, format!("Bearer {TOKEN}")),
        ] {
            let r = request("/api/x", host).header(name, value);
            let r = send(app(host), r.body(Body::empty()).unwrap()).await;
            assert_eq!(r.status(), StatusCode::OK);
            assert!(!r.headers().contains_key(header::SET_COOKIE));
            assert!(
                !r.headers()
                    .contains_key(header::ACCESS_CONTROL_ALLOW_ORIGIN)
            );
        }
    }

    #[tokio::test]
    async fn another_host_or_a_write_is_refused() {
        let bound = "127.0.0.1:3100";
        let auth = format!("Bearer {TOKEN}");
        // A page of another site resolving its name to 127.0.0.1 (DNS rebinding).
        let r = request("/api/x", "evil.example:3100").header(header::AUTHORIZATION, &auth);
        let r = send(app(bound), r.body(Body::empty()).unwrap()).await;
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
        let r = request("/api/x", "localhost:3100").header(header::AUTHORIZATION, &auth);
        assert_eq!(
            send(app(bound), r.body(Body::empty()).unwrap())
                .await
                .status(),
            StatusCode::OK
        );
        let post = request("/api/x", bound)
            .method(Method::POST)
            .header(header::AUTHORIZATION, &auth);
        let r = send(app(bound), post.body(Body::empty()).unwrap()).await;
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
        // Off loopback the token alone guards.
        let r = request("/api/x", "dash.example:3100").header(header::AUTHORIZATION, &auth);
        let r = send(app("0.0.0.0:3100"), r.body(Body::empty()).unwrap()).await;
        assert_eq!(r.status(), StatusCode::OK);
    }

    #[tokio::test]
    async fn with_actions_a_write_is_served_only_from_the_page() {
        let bound = "127.0.0.1:3100";
        let g = Guard::with_token(bound.parse().unwrap(), TOKEN).with_actions(true);
        let auth = format!("Bearer {TOKEN}");
        let cookie = format!("{COOKIE}={TOKEN}");
        let write = |headers: &[(header::HeaderName, &str)], uri: &str| {
            let mut r = request(uri, bound).method(Method::POST);
            for (k, v) in headers {
                r = r.header(k, *v);
            }
            r.body(Body::empty()).unwrap()
        };
        let json = (header::CONTENT_TYPE, "application/json");
        let served = [
            vec![(header::AUTHORIZATION, auth.as_str()), json.clone()],
            vec![
                (header::COOKIE, cookie.as_str()),
                json.clone(),
                (header::ORIGIN, "http://127.0.0.1:3100"),
            ],
        ];
        for h in &served {
            let r = send(app_with(g.clone()), write(h, "/api/x")).await;
            assert_eq!(r.status(), StatusCode::OK, "{h:?}");
        }
        let in_url = format!("/api/x?token={TOKEN}");
        let refused = [
            (vec![json.clone()], in_url.as_str(), StatusCode::FORBIDDEN),
            (
                vec![
                    (header::COOKIE, cookie.as_str()),
                    (header::CONTENT_TYPE, "text/plain"),
                ],
                "/api/x",
                StatusCode::FORBIDDEN,
            ),
            (
                vec![
                    (header::COOKIE, cookie.as_str()),
                    json.clone(),
                    (header::ORIGIN, "http://localhost.evil.example"),
                ],
                "/api/x",
                StatusCode::FORBIDDEN,
            ),
            (vec![json.clone()], "/api/x", StatusCode::UNAUTHORIZED),
        ];
        for (h, uri, status) in &refused {
            let r = send(app_with(g.clone()), write(h, uri)).await;
            assert_eq!(r.status(), *status, "{h:?} {uri}");
        }
        let put = request("/api/x", bound)
            .method(Method::PUT)
            .header(header::AUTHORIZATION, &auth)
            .body(Body::empty())
            .unwrap();
        let r = send(app_with(g), put).await;
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    }
}
