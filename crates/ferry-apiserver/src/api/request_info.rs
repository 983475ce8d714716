//! What a request amounts to for authorization, read from its method and
//! path as kube-apiserver's RequestInfo is: the verb, the resource or the
//! non-resource URL.

use super::path::ResourcePath;
use crate::auth::rbac::Request;

/// The Kubernetes verb of a resource request (kube's RequestInfo rules).
pub fn resource_verb(method: &http::Method, has_name: bool, watch: bool) -> String {
    match method.as_str() {
        "GET" | "HEAD" if watch => "watch",
        "GET" | "HEAD" if has_name => "get",
        "GET" | "HEAD" => "list",
        "POST" => "create",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" if has_name => "delete",
        "DELETE" => "deletecollection",
        other => return other.to_ascii_lowercase(),
    }
    .to_string()
}

/// The RBAC request a method and path amount to (`watch`: the request's
/// `watch` parameter, as the query is parsed once). `resource` is the parsed
/// resource path, if it is one; anything else is a non-resource URL, judged
/// by its path inside the workspace (without `/clusters/<ws>`).
pub fn request_of(
    method: &http::Method,
    uri_path: &str,
    watch: bool,
    resource: Option<&ResourcePath>,
) -> Request {
    match resource {
        Some(rp) => {
            let mut namespace = rp.namespace.clone().unwrap_or_default();
            // A namespace is both a resource and a namespace: reading
            // `namespaces/x` is a request in namespace x (kube does the same).
            if rp.group.is_empty() && rp.resource == "namespaces" {
                if let Some(name) = &rp.name {
                    namespace = name.clone();
                }
            }
            Request::Resource {
                verb: resource_verb(method, rp.name.is_some(), watch),
                group: rp.group.clone(),
                resource: rp.resource.clone(),
                subresource: rp.subresource.clone().unwrap_or_default(),
                namespace,
                name: rp.name.clone().unwrap_or_default(),
            }
        }
        None => {
            let (_, inner) = split_workspace(uri_path);
            let path = if inner.is_empty() { "/" } else { inner };
            Request::NonResource {
                verb: method.as_str().to_ascii_lowercase(),
                path: path.to_string(),
            }
        }
    }
}

/// `/clusters/<ws>/rest` → `(Some(ws), "/rest")`; other paths are unchanged.
pub fn split_workspace(uri_path: &str) -> (Option<&str>, &str) {
    match uri_path.strip_prefix("/clusters/") {
        Some(rest) => match rest.find('/') {
            Some(i) => (Some(&rest[..i]), &rest[i..]),
            None => (Some(rest), ""),
        },
        None => (None, uri_path),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{path, query};
    use super::*;

    fn req(method: &str, p: &str, q: Option<&str>) -> Request {
        let parsed = path::parse(p).unwrap();
        let rp = match &parsed.target {
            path::Target::Resource(rp) => Some(rp),
            _ => None,
        };
        let watch = query::Query::parse(q).unwrap().watch;
        request_of(&method.parse().unwrap(), p, watch, rp)
    }

    #[test]
    fn requests_map_to_kubernetes_verbs_and_scopes() {
        let r = req(
            "GET",
            "/clusters/root:a/api/v1/namespaces/dev/configmaps",
            Some("watch=true"),
        );
        assert_eq!(r.verb(), "watch");
        assert_eq!(r.namespace(), "dev");
        // A repeated parameter is read once, first value wins (as Go's url.Values.Get).
        let path = "/api/v1/namespaces/dev/configmaps";
        assert_eq!(req("GET", path, Some("watch=true&watch=false")).verb(), "watch");
        assert_eq!(req("GET", path, Some("watch=false&watch=true")).verb(), "list");
        assert_eq!(req("GET", "/api/v1/configmaps", None).verb(), "list");
        assert_eq!(
            req("DELETE", "/api/v1/namespaces/d/configmaps", None).verb(),
            "deletecollection"
        );
        let ns = req("GET", "/api/v1/namespaces/dev", None);
        assert_eq!(ns.namespace(), "dev");
        match req("POST", "/api/v1/namespaces/d/serviceaccounts/sa/token", None) {
            Request::Resource {
                verb, subresource, ..
            } => assert_eq!((verb.as_str(), subresource.as_str()), ("create", "token")),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            req("GET", "/clusters/root:a/apis/apps", None),
            Request::NonResource {
                verb: "get".into(),
                path: "/apis/apps".into()
            }
        );
    }
}
