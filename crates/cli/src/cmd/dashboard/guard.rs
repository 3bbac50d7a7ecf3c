//! Who may talk to the dashboard, and what every answer carries. The URL the command
//! prints holds a one-time code: the first request with it is answered with a session
//! cookie (named after the port, so two dashboards on one machine keep theirs) and sent on
//! to the same page without the code; the code is refused from then on, so a copy left in
//! shell history, browser history or a process list lets nobody in. A request is served
//! only with the session (the cookie, or an `Authorization: Bearer` header) and, on
//! loopback, only for a `Host` that names this listener, so that a page of another site
//! (DNS rebinding included) can read nothing. It is read-only unless started with
//! `--enable-actions`; then a `POST` is served only from the dashboard's own page: the
//! session in the cookie or header, a JSON body (which no other site can send without a
//! preflight this server never grants) and, when the browser names an `Origin`, this
//! server's. Every answer, a refusal included, carries strict security headers: nothing
//! but this server's own assets may run, nothing may frame it, and no cross-origin header
//! is ever sent.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The query parameter of the one-time code.
pub const CODE: &str = "code";

/// The secrets and where the server listens.
#[derive(Clone, Debug)]
pub struct Guard {
    /// The session: what the cookie (or an Authorization header) carries.
    token: Arc<str>,
    /// The printed URL's code, exchanged once for the session.
    code: Arc<str>,
    spent: Arc<AtomicBool>,
    /// The cookie's name: `mwrs-dashboard-<port>`.
    cookie: Arc<str>,
    /// Served over TLS: the cookie is `Secure` and an `Origin` is `https://`.
    tls: bool,
    /// The `Host` values a request may carry (empty: any, off loopback).
    hosts: Arc<[String]>,
    /// Whether a `POST` (an action) may be served at all.
    actions: bool,
}

/// What a request's credentials are.
#[derive(Debug, PartialEq)]
enum Credentials {
    /// The session, in the cookie or a header.
    Session,
    /// The code, not used before, on a read: exchange it now.
    Code,
    /// A code used already, and no session.
    SpentCode,
    /// The code on a write: never exchanged there (a write must come from the page).
    CodeOnWrite,
    None,
}

fn random_hex() -> String {
    let bytes: [u8; 32] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Guard {
    /// New random secrets for a server bound to `addr`.
    pub fn new(addr: SocketAddr) -> Self {
        Self::with_secrets(addr, &random_hex(), &random_hex())
    }

    /// A guard whose session is `token` (and whose code is random).
    pub fn with_token(addr: SocketAddr, token: &str) -> Self {
        Self::with_secrets(addr, &random_hex(), token)
    }

    pub fn with_secrets(addr: SocketAddr, code: &str, token: &str) -> Self {
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
            code: Arc::from(code),
            spent: Arc::default(),
            cookie: Arc::from(format!("mwrs-dashboard-{port}")),
            tls: false,
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

    /// The same guard, for a server that speaks TLS.
    pub fn with_tls(self, on: bool) -> Self {
        Self { tls: on, ..self }
    }

    pub fn actions(&self) -> bool {
        self.actions
    }

    /// The one-time code of the URL to print.
    pub fn code(&self) -> &str {
        &self.code
    }

    /// The session's cookie name.
    pub fn cookie(&self) -> &str {
        &self.cookie
    }

    /// What `headers` and `query` carry; the code is spent only on a `read`.
    fn credentials(&self, headers: &HeaderMap, query: Option<&str>, read: bool) -> Credentials {
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
            .find(|(k, _)| *k == &*self.cookie)
            .map(|(_, v)| v);
        if [bearer, cookie]
            .into_iter()
            .flatten()
            .any(|t| same(&self.token, t))
        {
            return Credentials::Session;
        }
        let code = query
            .into_iter()
            .flat_map(|q| q.split('&'))
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == CODE)
            .map(|(_, v)| v);
        match code {
            Some(c) if same(&self.code, c) && !read => Credentials::CodeOnWrite,
            Some(c) if same(&self.code, c) => {
                if self.spent.swap(true, Ordering::AcqRel) {
                    Credentials::SpentCode
                } else {
                    Credentials::Code
                }
            }
            _ => Credentials::None,
        }
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
            Some(Ok(origin)) => {
                let scheme = if self.tls { "https" } else { "http" };
                host.is_some_and(|h| origin == format!("{scheme}://{h}"))
            }
            Some(Err(_)) => false,
        };
        (from_url || !json || !same_origin).then(|| {
            refuse(
                StatusCode::FORBIDDEN,
                "an action must come from the dashboard's page (JSON, its own origin, the \
                 session in the cookie or the Authorization header)",
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

/// The middleware: refuses what [`Guard`] does not admit, exchanges the code for the
/// session, serves the rest read-only, and adds the security headers to every answer.
pub async fn guard(State(g): State<Guard>, request: Request, next: Next) -> Response {
    let read = matches!(*request.method(), Method::GET | Method::HEAD);
    let mut response = if !g.host_allowed(request.headers()) {
        refuse(StatusCode::FORBIDDEN, "this Host is not the dashboard's")
    } else {
        match g.credentials(request.headers(), request.uri().query(), read) {
            Credentials::None => refuse(
                StatusCode::UNAUTHORIZED,
                "no session: open the URL `mwrs dashboard` printed",
            ),
            Credentials::SpentCode => refuse(
                StatusCode::UNAUTHORIZED,
                "this URL's code was used already (it lets one browser in, once): start \
                 `mwrs dashboard` again for a new one",
            ),
            // Into the session, and on to the same page without the code in its address.
            Credentials::Code => g.session_started(request.uri().path()),
            Credentials::CodeOnWrite => g
                .write_refused(request.headers(), true)
                .unwrap_or_else(|| refuse(StatusCode::FORBIDDEN, "")),
            Credentials::Session => match *request.method() {
                Method::GET | Method::HEAD => next.run(request).await,
                Method::POST => match g.write_refused(request.headers(), false) {
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

impl Guard {
    /// The answer to the code: the session's cookie, and `path` again without the code.
    fn session_started(&self, path: &str) -> Response {
        let secure = if self.tls { "; Secure" } else { "" };
        let cookie = format!(
            "{}={}; Path=/; HttpOnly; SameSite=Strict{secure}",
            self.cookie, self.token
        );
        let mut r = StatusCode::SEE_OTHER.into_response();
        let location = if path.starts_with('/') { path } else { "/" };
        for (name, value) in [
            (header::SET_COOKIE, cookie.as_str()),
            (header::LOCATION, location),
        ] {
            if let Ok(v) = HeaderValue::from_str(value) {
                r.headers_mut().insert(name, v);
            }
        }
        r
    }
}

/// Compares without stopping at the first difference (no timing hint).
fn same(secret: &str, candidate: &str) -> bool {
    let (a, b) = (secret.as_bytes(), candidate.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
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

    const CODE_IN_URL: &str = "fedcba9876543210";
    /// The cookie of a guard on port 3100.
    const COOKIE: &str = "mwrs-dashboard-3100";

    fn app_with_code(addr: &str) -> (Router, Guard) {
        let g = Guard::with_secrets(addr.parse().unwrap(), CODE_IN_URL, TOKEN);
        (app_with(g.clone()), g)
    }

    #[tokio::test]
    async fn only_a_request_with_the_session_is_served() {
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
        // The session itself in the URL does not count: only the code does, once.
        let r = request(&format!("/api/x?token={TOKEN}"), host);
        let r = send(app(host), r.body(Body::empty()).unwrap()).await;
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
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

    /// Security review D2 and D3: the printed URL's code lets one browser in, once, with
    /// a cookie named after the port; the page is then shown without the code.
    #[tokio::test]
    async fn the_code_is_exchanged_once_for_a_cookie_of_this_port() {
        let host = "127.0.0.1:3100";
        let (app, g) = app_with_code(host);
        assert_eq!(g.cookie(), COOKIE);
        let wrong = request("/?code=fedcba987654321X", host);
        let r = send(app.clone(), wrong.body(Body::empty()).unwrap()).await;
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        let url = request(&format!("/?code={CODE_IN_URL}"), host);
        let r = send(app.clone(), url.body(Body::empty()).unwrap()).await;
        assert_eq!(r.status(), StatusCode::SEE_OTHER);
        assert_eq!(r.headers()[header::LOCATION], "/");
        let cookie = r.headers()[header::SET_COOKIE]
            .to_str()
            .unwrap()
            .to_string();
        assert!(
            cookie.starts_with(&format!("{COOKIE}={TOKEN};"))
                && cookie.contains("HttpOnly")
                && cookie.contains("SameSite=Strict")
                && !cookie.contains("Secure"),
            "{cookie}"
        );
        // The same URL again (history, another user): refused, and says why.
        let again = request(&format!("/?code={CODE_IN_URL}"), host);
        let r = send(app.clone(), again.body(Body::empty()).unwrap()).await;
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        let body = axum::body::to_bytes(r.into_body(), 1024).await.unwrap();
        assert!(String::from_utf8_lossy(&body).contains("used already"));
        // The browser that has the cookie is still served.
        let r = request("/api/x", host).header(header::COOKIE, format!("{COOKIE}={TOKEN}"));
        let r = send(app, r.body(Body::empty()).unwrap()).await;
        assert_eq!(r.status(), StatusCode::OK);
        // Over TLS the cookie is only ever sent back over TLS.
        let tls = Guard::with_secrets(host.parse().unwrap(), CODE_IN_URL, TOKEN).with_tls(true);
        let url = request(&format!("/?code={CODE_IN_URL}"), host);
        let r = send(app_with(tls), url.body(Body::empty()).unwrap()).await;
        let cookie = r.headers()[header::SET_COOKIE]
            .to_str()
            .unwrap()
            .to_string();
        assert!(cookie.ends_with("; Secure"), "{cookie}");
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
        let g = Guard::with_secrets(bound.parse().unwrap(), CODE_IN_URL, TOKEN).with_actions(true);
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
        let in_url = format!("/api/x?code={CODE_IN_URL}");
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
