//! Parsing request paths: the optional `/clusters/<path>` prefix, then what
//! kube-apiserver serves (discovery, OpenAPI, resources).

use crate::status::ApiError;

/// What a request path addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `/`: the paths served (kube-apiserver's `{"paths": [...]}`).
    Root,
    /// `/metrics`, served only outside `/clusters/...` (the hub's, not a workspace's).
    Metrics,
    Version,
    Health(String),
    /// `/api`
    CoreVersions,
    /// `/apis`
    Groups,
    /// `/apis/{group}`
    Group(String),
    /// `/api/v1` or `/apis/{group}/{version}`
    GroupVersion {
        group: String,
        version: String,
    },
    OpenApiV2,
    OpenApiV3Root,
    OpenApiV3 {
        group: String,
        version: String,
    },
    Resource(ResourcePath),
}

/// A request against a resource: collection, object or subresource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePath {
    pub group: String,
    pub version: String,
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

/// A parsed path: which logical cluster (as written by the client: a path,
/// a cluster name, or `*`) and what in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedPath {
    pub cluster: Option<String>,
    pub target: Target,
}

const NAMESPACE_SUBRESOURCES: &[&str] = &["status", "finalize"];

pub fn parse(path: &str) -> Result<ParsedPath, ApiError> {
    let not_found = || {
        ApiError::not_found_message(format!(
            "the server could not find the requested resource ({path})"
        ))
    };
    let mut parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let mut cluster = None;
    if parts.first() == Some(&"clusters") {
        if parts.len() < 2 {
            return Err(not_found());
        }
        // kubectl escapes the wildcard (`/clusters/%2A`).
        cluster = Some(match parts[1] {
            "%2A" | "%2a" => "*".to_string(),
            c => c.to_string(),
        });
        parts.drain(..2);
    }
    let target = match parts.as_slice() {
        [] => Target::Root,
        ["metrics"] if cluster.is_none() => Target::Metrics,
        ["version"] => Target::Version,
        [h] | [h, ..] if matches!(*h, "healthz" | "readyz" | "livez") => Target::Health(h.to_string()),
        ["api"] => Target::CoreVersions,
        ["api", v] => Target::GroupVersion {
            group: String::new(),
            version: v.to_string(),
        },
        ["api", v, rest @ ..] => Target::Resource(resource_path("", v, rest).ok_or_else(not_found)?),
        ["apis"] => Target::Groups,
        ["apis", g] => Target::Group(g.to_string()),
        ["apis", g, v] => Target::GroupVersion {
            group: g.to_string(),
            version: v.to_string(),
        },
        ["apis", g, v, rest @ ..] => Target::Resource(resource_path(g, v, rest).ok_or_else(not_found)?),
        ["openapi", "v2"] => Target::OpenApiV2,
        ["openapi", "v3"] => Target::OpenApiV3Root,
        ["openapi", "v3", "api", v] => Target::OpenApiV3 {
            group: String::new(),
            version: v.to_string(),
        },
        ["openapi", "v3", "apis", g, v] => Target::OpenApiV3 {
            group: g.to_string(),
            version: v.to_string(),
        },
        _ => return Err(not_found()),
    };
    Ok(ParsedPath { cluster, target })
}

fn resource_path(group: &str, version: &str, rest: &[&str]) -> Option<ResourcePath> {
    let mut rest = rest;
    let mut namespace = None;
    if rest.first() == Some(&"namespaces") && rest.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&rest[2]) {
        namespace = Some(rest[1].to_string());
        rest = &rest[2..];
    }
    let (resource, name, subresource) = match rest {
        [r] => (r, None, None),
        [r, n] => (r, Some(n.to_string()), None),
        [r, n, s] => (r, Some(n.to_string()), Some(s.to_string())),
        _ => return None,
    };
    Some(ResourcePath {
        group: group.into(),
        version: version.into(),
        resource: resource.to_string(),
        namespace,
        name,
        subresource,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(p: &str) -> ResourcePath {
        match parse(p).unwrap().target {
            Target::Resource(r) => r,
            other => panic!("{p}: {other:?}"),
        }
    }

    #[test]
    fn the_escaped_wildcard_is_the_wildcard() {
        assert_eq!(
            parse("/clusters/%2A/api/v1/configmaps")
                .unwrap()
                .cluster
                .as_deref(),
            Some("*")
        );
        assert_eq!(
            parse("/clusters/*/api/v1/configmaps").unwrap().cluster.as_deref(),
            Some("*")
        );
    }

    #[test]
    fn workspace_prefix_and_namespaced_objects() {
        let p = parse("/clusters/root:imw1/apis/apps/v1/namespaces/ns1/deployments/web/status").unwrap();
        assert_eq!(p.cluster.as_deref(), Some("root:imw1"));
        let Target::Resource(r) = p.target else { panic!() };
        assert_eq!((r.group.as_str(), r.resource.as_str()), ("apps", "deployments"));
        assert_eq!(r.namespace.as_deref(), Some("ns1"));
        assert_eq!(r.subresource.as_deref(), Some("status"));
    }

    #[test]
    fn namespace_status_is_a_subresource_not_a_resource() {
        let r = res("/api/v1/namespaces/ns1/status");
        assert_eq!(r.resource, "namespaces");
        assert_eq!(r.name.as_deref(), Some("ns1"));
        assert_eq!(r.subresource.as_deref(), Some("status"));
        let r = res("/api/v1/namespaces/ns1/configmaps");
        assert_eq!(
            (r.resource.as_str(), r.namespace.as_deref(), r.name),
            ("configmaps", Some("ns1"), None)
        );
    }

    #[test]
    fn discovery_paths() {
        assert_eq!(
            parse("/apis/apps/v1").unwrap().target,
            Target::GroupVersion {
                group: "apps".into(),
                version: "v1".into()
            }
        );
        assert_eq!(parse("/clusters/*/api").unwrap().cluster.as_deref(), Some("*"));
        assert!(parse("/nope").is_err());
    }
}
