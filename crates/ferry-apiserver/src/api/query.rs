//! Query parameters of resource requests.

use std::collections::HashSet;

use crate::status::ApiError;

/// The query parameters kube-apiserver understands, parsed once.
#[derive(Debug, Default, Clone)]
pub struct Query {
    pub label_selector: String,
    pub field_selector: String,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
    pub watch: bool,
    pub allow_watch_bookmarks: bool,
    pub timeout_seconds: Option<u64>,
    pub send_initial_events: Option<bool>,
    pub dry_run: bool,
    pub field_manager: Option<String>,
    pub force: bool,
    pub field_validation: crate::decode::FieldValidation,
    pub include_object: Option<String>,
    pub propagation_policy: Option<String>,
    /// The deprecated `orphanDependents` of DeleteOptions.
    pub orphan_dependents: Option<bool>,
    pub pretty: bool,
}

/// Each parameter's first value, in first-seen order.
fn first_values(raw: Option<&str>) -> Vec<(String, String)> {
    let mut seen = HashSet::new();
    form_urlencoded::parse(raw.unwrap_or("").as_bytes())
        .into_owned()
        .filter(|(k, _)| !k.is_empty() && seen.insert(k.clone()))
        .collect()
}

fn boolean(v: &str) -> bool {
    matches!(v, "true" | "1" | "True")
}

impl Query {
    /// Parse a query string. A parameter given more than once counts with
    /// its first value, as kube-apiserver reads it (Go's `url.Values.Get`);
    /// authorization and serving both read this one parse.
    pub fn parse(raw: Option<&str>) -> Result<Query, ApiError> {
        let mut q = Query::default();
        for (k, v) in first_values(raw) {
            match k.as_str() {
                "labelSelector" => q.label_selector = v,
                "fieldSelector" => q.field_selector = v,
                "limit" => {
                    let n: i64 = v
                        .parse()
                        .map_err(|_| ApiError::bad_request(format!("limit: invalid value {v:?}")))?;
                    q.limit = (n > 0).then_some(n as usize);
                }
                "continue" => q.continue_token = Some(v).filter(|s| !s.is_empty()),
                "resourceVersion" => q.resource_version = Some(v).filter(|s| !s.is_empty()),
                "resourceVersionMatch" => q.resource_version_match = Some(v).filter(|s| !s.is_empty()),
                "watch" => q.watch = boolean(&v),
                "allowWatchBookmarks" => q.allow_watch_bookmarks = boolean(&v),
                "timeoutSeconds" => {
                    q.timeout_seconds =
                        Some(v.parse().map_err(|_| {
                            ApiError::bad_request(format!("timeoutSeconds: invalid value {v:?}"))
                        })?)
                }
                "sendInitialEvents" => q.send_initial_events = Some(boolean(&v)),
                "dryRun" => {
                    if v != "All" {
                        return Err(ApiError::bad_request(format!(
                            "dryRun: unsupported value {v:?}; the only supported value is \"All\""
                        )));
                    }
                    q.dry_run = true
                }
                "fieldManager" => q.field_manager = Some(v),
                "force" => q.force = boolean(&v),
                "fieldValidation" => q.field_validation = crate::decode::FieldValidation::parse(&v)?,
                "includeObject" => q.include_object = Some(v),
                "propagationPolicy" => q.propagation_policy = Some(v),
                "orphanDependents" => q.orphan_dependents = Some(boolean(&v)),
                "pretty" => q.pretty = boolean(&v),
                _ => {}
            }
        }
        Ok(q)
    }

    /// The `watch` parameter alone, for authorizing a request whose query
    /// [`Query::parse`] refused (the error is answered after authorization).
    pub fn watch_of(raw: Option<&str>) -> bool {
        first_values(raw)
            .into_iter()
            .any(|(k, v)| k == "watch" && boolean(&v))
    }

    /// Whether the flag `name` is set: given bare (`?verbose`) or true.
    pub fn flag(raw: Option<&str>, name: &str) -> bool {
        first_values(raw)
            .into_iter()
            .any(|(k, v)| k == name && (v.is_empty() || boolean(&v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_kube_rs_leading_ampersand() {
        let q = Query::parse(Some(
            "&limit=500&watch=true&allowWatchBookmarks=true&resourceVersion=12",
        ))
        .unwrap();
        assert_eq!(q.limit, Some(500));
        assert!(q.watch && q.allow_watch_bookmarks);
        assert_eq!(q.resource_version.as_deref(), Some("12"));
    }

    #[test]
    fn repeated_parameters_take_the_first_value() {
        let q = Query::parse(Some("watch=true&watch=false&limit=5&limit=7")).unwrap();
        assert!(q.watch);
        assert_eq!(q.limit, Some(5));
        assert!(!Query::parse(Some("watch=0&watch=1")).unwrap().watch);
        assert!(Query::watch_of(Some("watch=1&limit=x&watch=0")));
        assert!(!Query::watch_of(Some("watch=false&watch=true")));
    }

    #[test]
    fn dry_run_must_be_all() {
        assert!(Query::parse(Some("dryRun=All")).unwrap().dry_run);
        assert_eq!(Query::parse(Some("dryRun=Some")).unwrap_err().code, 400);
    }
}
