//! Where a kcp object's copy lands on the service cluster: `spec.naming` of its
//! PublishedResource, as the reference evaluates it (`internal/sync/templating/naming.go`).
//!
//! - A template containing `{{` is a Go template over `.Object` (the kcp object),
//!   `.ClusterName` (its logical cluster) and `.ClusterPath` (its workspace path, when
//!   known; empty otherwise).
//! - Anything else uses the deprecated placeholders `$remoteClusterName`,
//!   `$remoteNamespace`, `$remoteNamespaceHash`, `$remoteName` and `$remoteNameHash`
//!   (hashes: the legacy `shortHash`, SHA-1).
//! - Defaults: namespace `{{ .ClusterName }}`, name
//!   `{{ .Object.metadata.namespace | sha3short }}-{{ .Object.metadata.name | sha3short }}`.
//!
//! Unlike the reference, a result that is no valid Kubernetes name is refused here with
//! a message naming the field and the template, instead of failing at the server.

use serde_json::{json, Value};

use ferry_api::syncagent::ResourceNaming;

use super::sha3short;
use super::templating::{render, short_hash};

/// The reference's default namespace template.
pub const DEFAULT_NAMESPACE: &str = "{{ .ClusterName }}";
/// The reference's default name template.
pub const DEFAULT_NAME: &str =
    "{{ .Object.metadata.namespace | sha3short }}-{{ .Object.metadata.name | sha3short }}";

/// Why a naming template gives no usable name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamingError {
    /// `spec.naming.name` or `spec.naming.namespace`.
    pub field: &'static str,
    /// The template.
    pub template: String,
    /// What went wrong.
    pub problem: String,
}

impl std::fmt::Display for NamingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {:?} {}", self.field, self.template, self.problem)
    }
}

/// The local namespace (`None` when the local resource is cluster-scoped) and name of
/// the kcp object `object` of logical cluster `cluster` (workspace path `path`).
pub fn local_name(
    naming: Option<&ResourceNaming>,
    object: &Value,
    cluster: &str,
    path: &str,
    namespaced: bool,
) -> Result<(Option<String>, String), NamingError> {
    let naming = naming.cloned().unwrap_or_default();
    let pick = |t: &str, default: &str| {
        if t.is_empty() {
            default.to_string()
        } else {
            t.to_string()
        }
    };
    let name_template = pick(&naming.name, DEFAULT_NAME);
    let name = identifier(&name_template, object, cluster, path).map_err(|problem| NamingError {
        field: "spec.naming.name",
        template: name_template.clone(),
        problem,
    })?;
    if let Err(why) = check_name(&name, 253, true) {
        return Err(NamingError {
            field: "spec.naming.name",
            template: name_template,
            problem: format!("gives {name:?}, which is no valid object name: {why}"),
        });
    }
    if !namespaced {
        return Ok((None, name));
    }
    let ns_template = pick(&naming.namespace, DEFAULT_NAMESPACE);
    let namespace = identifier(&ns_template, object, cluster, path).map_err(|problem| NamingError {
        field: "spec.naming.namespace",
        template: ns_template.clone(),
        problem,
    })?;
    if let Err(why) = check_name(&namespace, 63, false) {
        return Err(NamingError {
            field: "spec.naming.namespace",
            template: ns_template,
            problem: format!("gives {namespace:?}, which is no valid namespace name: {why}"),
        });
    }
    Ok((Some(namespace), name))
}

fn identifier(template: &str, object: &Value, cluster: &str, path: &str) -> Result<String, String> {
    if let Some(name) = by_default(template, object, cluster) {
        return Ok(name);
    }
    let meta = |key: &str| object["metadata"][key].as_str().unwrap_or_default().to_string();
    if template.contains("{{") {
        let data = json!({ "Object": object, "ClusterName": cluster, "ClusterPath": path });
        return render(template, &data);
    }
    // Longer placeholders first: `$remoteNamespaceHash` before `$remoteNamespace`.
    let (namespace, name) = (meta("namespace"), meta("name"));
    Ok(template
        .replace("$remoteClusterName", cluster)
        .replace("$remoteNamespaceHash", &short_hash(&namespace))
        .replace("$remoteNamespace", &namespace)
        .replace("$remoteNameHash", &short_hash(&name))
        .replace("$remoteName", &name))
}

/// What the default templates give, computed without the template engine; `None`
/// for any other template, or an object whose namespace or name is no string.
/// Rendering copies the whole object into the template's data, for each of the two
/// templates of every object synced: a profile of the agent's initial sync put that
/// at 4% of its CPU. `default_templates_give_what_the_engine_gives` holds the two
/// to the same answers.
fn by_default(template: &str, object: &Value, cluster: &str) -> Option<String> {
    if template == DEFAULT_NAMESPACE {
        return Some(cluster.trim().to_string());
    }
    if template != DEFAULT_NAME {
        return None;
    }
    // A missing key and null are Go's "no value", which `sha3short` reads as "".
    let field = |key: &str| match object.get("metadata").and_then(|m| m.get(key)) {
        None | Some(Value::Null) => Some(""),
        Some(Value::String(s)) => Some(s.as_str()),
        Some(_) => None,
    };
    Some(format!(
        "{}-{}",
        sha3short(field("namespace")?),
        sha3short(field("name")?)
    ))
}

/// A DNS-1123 subdomain (`dots`, at most `max`) or label.
fn check_name(s: &str, max: usize, dots: bool) -> Result<(), String> {
    if s.is_empty() {
        return Err("it is empty".into());
    }
    if s.len() > max {
        return Err(format!("it is longer than {max} characters"));
    }
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || (dots && c == '.');
    if let Some(c) = s.chars().find(|c| !ok(*c)) {
        return Err(format!(
            "{c:?} is not allowed (lower-case letters, digits, '-'{})",
            if dots { " and '.'" } else { "" }
        ));
    }
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !alnum(s.chars().next()) || !alnum(s.chars().last()) {
        return Err("it must start and end with a letter or digit".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj() -> Value {
        json!({ "metadata": { "name": "my-db", "namespace": "default", "labels": { "tier": "Gold" } } })
    }

    #[test]
    fn defaults_are_the_references() {
        let (ns, name) = local_name(None, &obj(), "abc", "", true).unwrap();
        assert_eq!(ns.as_deref(), Some("abc"));
        assert_eq!(name, format!("{}-{}", sha3short("default"), sha3short("my-db")));
        let (ns, _) = local_name(None, &obj(), "abc", "", false).unwrap();
        assert_eq!(ns, None);
    }

    #[test]
    fn default_templates_give_what_the_engine_gives() {
        let objects = [
            obj(),
            json!({"metadata": {"name": "cluster-wide"}}),
            json!({"metadata": {"name": "n", "namespace": null}}),
            json!({"metadata": {}}),
            json!({"metadata": {"name": "Ünïcode name", "namespace": "ns with spaces"}}),
        ];
        for object in &objects {
            for (template, cluster) in [(DEFAULT_NAME, "abc"), (DEFAULT_NAMESPACE, "2x8ow4kbe4u9sp7")] {
                let data = json!({ "Object": object, "ClusterName": cluster, "ClusterPath": "" });
                assert_eq!(
                    by_default(template, object, cluster),
                    Some(render(template, &data).unwrap()),
                    "{template} over {object}"
                );
            }
        }
        let numbered = json!({"metadata": {"name": 7}});
        assert_eq!(
            by_default(DEFAULT_NAME, &numbered, "abc"),
            None,
            "left to the engine"
        );
        assert_eq!(by_default("{{ .ClusterName }}-x", &obj(), "abc"), None);
    }

    #[test]
    fn templates_and_legacy_placeholders() {
        let naming = ResourceNaming {
            name: "{{ .Object.metadata.name }}-{{ .Object.metadata.labels.tier | lower }}".into(),
            namespace: "team-{{ .ClusterPath | replace \":\" \"-\" }}".into(),
        };
        let (ns, name) = local_name(Some(&naming), &obj(), "abc", "root:c1", true).unwrap();
        assert_eq!(
            (ns.as_deref(), name.as_str()),
            (Some("team-root-c1"), "my-db-gold")
        );
        let legacy = ResourceNaming {
            name: "$remoteNamespace-$remoteName-$remoteNameHash".into(),
            namespace: "$remoteClusterName-$remoteNamespaceHash".into(),
        };
        let (ns, name) = local_name(Some(&legacy), &obj(), "abc", "", true).unwrap();
        assert_eq!(ns.unwrap(), format!("abc-{}", short_hash("default")));
        assert_eq!(name, format!("default-my-db-{}", short_hash("my-db")));
    }

    #[test]
    fn invalid_results_name_the_field_and_template() {
        let bad = ResourceNaming {
            name: "{{ .Object.metadata.labels.tier }}".into(),
            namespace: String::new(),
        };
        let e = local_name(Some(&bad), &obj(), "abc", "", true).unwrap_err();
        assert_eq!(e.field, "spec.naming.name");
        assert!(
            e.to_string().contains("Gold") && e.to_string().contains(".Object.metadata.labels.tier"),
            "{e}"
        );
        let unparsable = ResourceNaming {
            name: String::new(),
            namespace: "{{ .ClusterName".into(),
        };
        let e = local_name(Some(&unparsable), &obj(), "abc", "", true).unwrap_err();
        assert_eq!(e.field, "spec.naming.namespace");
        let empty = ResourceNaming {
            name: "{{ .Object.metadata.labels.none }}".into(),
            namespace: String::new(),
        };
        assert!(local_name(Some(&empty), &obj(), "abc", "", true).is_err());
    }
}
