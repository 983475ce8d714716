//! Propagation policies: what a DELETE asks the garbage collector to do with
//! the object's dependents, and the finalizers that record the request on the
//! object (as kube-apiserver's generic registry does).

use serde_json::Value;

use crate::registry::ResourceInfo;
use crate::status::Cause;
use crate::validation::render_value;

/// Held by an owner deleted with `Foreground` until its blocking dependents are gone.
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";
/// Held by an owner deleted with `Orphan` until its dependents no longer point at it.
pub const ORPHAN_FINALIZER: &str = "orphan";

/// `DeleteOptions.propagationPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PropagationPolicy {
    /// Keep the dependents; remove their references to the owner.
    Orphan,
    /// Delete the owner now, its dependents afterwards.
    Background,
    /// Delete the dependents first; the owner waits for the blocking ones.
    Foreground,
}

impl PropagationPolicy {
    pub fn parse(s: &str) -> Option<PropagationPolicy> {
        match s {
            "Orphan" => Some(PropagationPolicy::Orphan),
            "Background" => Some(PropagationPolicy::Background),
            "Foreground" => Some(PropagationPolicy::Foreground),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PropagationPolicy::Orphan => "Orphan",
            PropagationPolicy::Background => "Background",
            PropagationPolicy::Foreground => "Foreground",
        }
    }
}

/// The propagation a delete request asks for: `propagationPolicy` or the
/// deprecated `orphanDependents`, from the DeleteOptions body when it sets
/// either, from the query string otherwise. `None`: the request does not say.
/// Errors are worded as kube-apiserver's DeleteOptions validation words them.
pub fn requested(
    query_policy: Option<&str>,
    query_orphan: Option<bool>,
    body: Option<&Value>,
) -> Result<Option<PropagationPolicy>, Vec<Cause>> {
    let body_policy = body
        .and_then(|b| b.get("propagationPolicy"))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    let body_orphan = body
        .and_then(|b| b.get("orphanDependents"))
        .and_then(Value::as_bool);
    let (policy, orphan) = if body_policy.is_some() || body_orphan.is_some() {
        (body_policy, body_orphan)
    } else {
        (query_policy.filter(|s| !s.is_empty()), query_orphan)
    };
    match (policy, orphan) {
        (Some(p), Some(_)) => Err(vec![Cause::invalid(
            "propagationPolicy",
            crate::validation::invalid_value(
                &Value::from(p),
                "orphanDependents and deletionPropagation cannot be both set",
            ),
        )]),
        (Some(p), None) => match PropagationPolicy::parse(p) {
            Some(policy) => Ok(Some(policy)),
            None => Err(vec![Cause::unsupported(
                "propagationPolicy",
                format!(
                    "Unsupported value: {}: supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"",
                    render_value(&Value::from(p))
                ),
            )]),
        },
        (None, Some(true)) => Ok(Some(PropagationPolicy::Orphan)),
        (None, Some(false)) => Ok(Some(PropagationPolicy::Background)),
        (None, None) => Ok(None),
    }
}

/// What a delete that names no policy does to `info`'s dependents: `Orphan`
/// for core/v1 ReplicationControllers and the pre-`apps/v1` workload
/// versions (kept by Kubernetes for backwards compatibility), `Background`
/// for everything else.
pub fn default_policy(info: &ResourceInfo) -> PropagationPolicy {
    let legacy_workload = matches!(
        (info.group.as_str(), info.version.as_str()),
        ("extensions", "v1beta1") | ("apps", "v1beta1") | ("apps", "v1beta2")
    );
    let legacy_rc =
        info.group.is_empty() && info.version == "v1" && info.resource == "replicationcontrollers";
    if legacy_workload || legacy_rc {
        PropagationPolicy::Orphan
    } else {
        PropagationPolicy::Background
    }
}

/// The finalizers an object being deleted ends up with: `current` without
/// `orphan` and `foregroundDeletion`, plus the one the propagation calls for.
/// An explicit request wins; without one, a garbage-collection finalizer the
/// object already has decides; without that, `default`.
pub fn finalizers_on_delete(
    current: &[String],
    requested: Option<PropagationPolicy>,
    default: PropagationPolicy,
) -> Vec<String> {
    let policy = requested
        .or_else(|| {
            current.iter().find_map(|f| match f.as_str() {
                ORPHAN_FINALIZER => Some(PropagationPolicy::Orphan),
                FOREGROUND_FINALIZER => Some(PropagationPolicy::Foreground),
                _ => None,
            })
        })
        .unwrap_or(default);
    let mut out: Vec<String> = current
        .iter()
        .filter(|f| *f != ORPHAN_FINALIZER && *f != FOREGROUND_FINALIZER)
        .cloned()
        .collect();
    match policy {
        PropagationPolicy::Orphan => out.push(ORPHAN_FINALIZER.into()),
        PropagationPolicy::Foreground => out.push(FOREGROUND_FINALIZER.into()),
        PropagationPolicy::Background => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn body_wins_over_query_and_absent_means_unspecified() {
        assert_eq!(requested(None, None, None), Ok(None));
        assert_eq!(
            requested(Some("Foreground"), None, None),
            Ok(Some(PropagationPolicy::Foreground))
        );
        let body = json!({"kind": "DeleteOptions", "propagationPolicy": "Orphan"});
        assert_eq!(
            requested(Some("Foreground"), None, Some(&body)),
            Ok(Some(PropagationPolicy::Orphan))
        );
        // A body that says nothing about propagation leaves the query in charge.
        let silent = json!({"kind": "DeleteOptions", "dryRun": ["All"]});
        assert_eq!(
            requested(Some("Background"), None, Some(&silent)),
            Ok(Some(PropagationPolicy::Background))
        );
    }

    #[test]
    fn deprecated_orphan_dependents_maps_to_a_policy() {
        let yes = json!({"orphanDependents": true});
        let no = json!({"orphanDependents": false});
        assert_eq!(
            requested(None, None, Some(&yes)),
            Ok(Some(PropagationPolicy::Orphan))
        );
        assert_eq!(
            requested(None, None, Some(&no)),
            Ok(Some(PropagationPolicy::Background))
        );
        assert_eq!(
            requested(None, Some(true), None),
            Ok(Some(PropagationPolicy::Orphan))
        );
    }

    #[test]
    fn invalid_policies_are_reported_like_kube_apiserver() {
        let both = json!({"orphanDependents": true, "propagationPolicy": "Orphan"});
        let causes = requested(None, None, Some(&both)).unwrap_err();
        assert_eq!(causes[0].field, "propagationPolicy");
        assert!(causes[0].message.contains("cannot be both set"), "{causes:?}");
        let causes = requested(Some("Sideways"), None, None).unwrap_err();
        assert_eq!(
            causes[0].message,
            "Unsupported value: \"Sideways\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
        );
    }

    #[test]
    fn finalizers_follow_the_request_then_the_object_then_the_default() {
        use PropagationPolicy::*;
        let none: Vec<String> = Vec::new();
        assert_eq!(finalizers_on_delete(&none, None, Background), none);
        assert_eq!(finalizers_on_delete(&none, None, Orphan), strings(&["orphan"]));
        assert_eq!(
            finalizers_on_delete(&strings(&["example.com/x"]), Some(Foreground), Background),
            strings(&["example.com/x", "foregroundDeletion"])
        );
        // The object's own GC finalizer decides when the request does not.
        assert_eq!(
            finalizers_on_delete(&strings(&["orphan"]), None, Background),
            strings(&["orphan"])
        );
        // An explicit request replaces it.
        assert_eq!(
            finalizers_on_delete(&strings(&["orphan", "example.com/x"]), Some(Background), Orphan),
            strings(&["example.com/x"])
        );
        assert_eq!(
            finalizers_on_delete(&strings(&["foregroundDeletion"]), Some(Orphan), Background),
            strings(&["orphan"])
        );
    }
}
