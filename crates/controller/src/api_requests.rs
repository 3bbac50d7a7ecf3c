//! Counts the requests this process sends to the API server, by Kubernetes verb: what the
//! controller costs the hub, in the terms of the API server's own `apiserver_request_total`
//! (an operator compares the two; the benchmarks report it per phase).

use http::{Method, Request, Uri};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tower::util::MapRequestLayer;

use crate::metrics::VerbLabels;

/// The Kubernetes verb of a request: `get`, `list`, `watch`, `create`, `update`, `patch`,
/// `delete`, `deletecollection`; anything else is named by its HTTP method in lower case.
pub fn verb(method: &Method, uri: &Uri) -> &'static str {
    let on_item = names_an_item(uri.path());
    match *method {
        Method::GET if on_item => "get",
        Method::GET if is_watch(uri.query().unwrap_or("")) => "watch",
        Method::GET => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if on_item => "delete",
        Method::DELETE => "deletecollection",
        _ => "other",
    }
}

fn is_watch(query: &str) -> bool {
    query
        .split('&')
        .any(|pair| pair == "watch=true" || pair == "watch=1")
}

/// Whether `path` names one object (or its subresource) rather than a collection:
/// `/api/v1/[namespaces/NS/]RESOURCE[/NAME[/SUB]]` and the same under `/apis/GROUP/VERSION`.
/// Paths outside the resource API (`/version`, `/openapi/v3`) count as items.
fn names_an_item(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let rest = match parts.first() {
        Some(&"api") => parts.get(2..),
        Some(&"apis") => parts.get(3..),
        _ => return true,
    };
    let Some(mut rest) = rest.filter(|r| !r.is_empty()) else {
        // Discovery (`/api/v1`, `/apis/GROUP/VERSION`) is a read of one document.
        return true;
    };
    // `namespaces/NS` is the namespace itself; with more after it, a namespaced resource.
    if rest.first() == Some(&"namespaces") && rest.len() > 2 {
        rest = &rest[2..];
    }
    rest.len() >= 2
}

/// A client layer counting every request into `family`.
pub fn counting<B>(
    family: Family<VerbLabels, Counter>,
) -> MapRequestLayer<impl Fn(Request<B>) -> Request<B> + Clone> {
    MapRequestLayer::new(move |req: Request<B>| {
        family
            .get_or_create(&VerbLabels {
                verb: verb(req.method(), req.uri()).to_string(),
            })
            .inc();
        req
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(method: Method, uri: &str) -> &'static str {
        verb(&method, &uri.parse().expect("a URI"))
    }

    #[test]
    fn verbs_of_the_requests_the_controller_sends() {
        let works = "/apis/work.open-cluster-management.io/v1";
        assert_eq!(
            v(
                Method::GET,
                &format!("{works}/manifestworks?labelSelector=x")
            ),
            "list"
        );
        assert_eq!(
            v(
                Method::GET,
                &format!("{works}/manifestworks?watch=true&resourceVersion=5")
            ),
            "watch"
        );
        assert_eq!(
            v(
                Method::GET,
                &format!("{works}/namespaces/c1/manifestworks/a")
            ),
            "get"
        );
        assert_eq!(
            v(
                Method::POST,
                &format!("{works}/namespaces/c1/manifestworks")
            ),
            "create"
        );
        assert_eq!(
            v(
                Method::PATCH,
                &format!("{works}/namespaces/c1/manifestworks/a?fieldManager=m")
            ),
            "patch"
        );
        assert_eq!(
            v(
                Method::PATCH,
                "/apis/work.open-cluster-management.io/v1alpha1/namespaces/ns/manifestworkreplicasets/app/status"
            ),
            "patch"
        );
        assert_eq!(
            v(
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l"
            ),
            "update"
        );
        assert_eq!(
            v(
                Method::DELETE,
                &format!("{works}/namespaces/c1/manifestworks/a")
            ),
            "delete"
        );
        assert_eq!(
            v(
                Method::DELETE,
                &format!("{works}/namespaces/c1/manifestworks")
            ),
            "deletecollection"
        );
        assert_eq!(v(Method::GET, "/api/v1/namespaces/c1"), "get");
        assert_eq!(v(Method::GET, "/api/v1/namespaces"), "list");
        assert_eq!(v(Method::GET, "/api/v1/namespaces/ns/events"), "list");
        assert_eq!(v(Method::GET, "/version"), "get");
        assert_eq!(
            v(Method::GET, "/apis/work.open-cluster-management.io"),
            "get"
        );
        assert_eq!(v(Method::GET, works), "get");
    }
}
