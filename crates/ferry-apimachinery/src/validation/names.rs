//! Object names, label keys and values, annotation keys: the checks and
//! messages of Kubernetes' `apimachinery/pkg/util/validation`, written by hand.

use serde_json::Value;

use super::invalid_value;
use crate::status::Cause;

/// Which naming rule a kind's `metadata.name` follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// DNS-1123 subdomain, at most 253 characters: most kinds.
    Dns1123Subdomain,
    /// DNS-1123 label, at most 63 characters: namespaces.
    Dns1123Label,
    /// DNS-1035 label (a DNS-1123 label starting with a letter): services.
    Dns1035Label,
    /// Anything usable as one URL path segment: RBAC kinds.
    PathSegment,
}

impl NameRule {
    /// The rule kube-apiserver applies to names of `resource` in `group`.
    pub fn for_resource(group: &str, resource: &str) -> NameRule {
        match (group, resource) {
            ("", "namespaces") => NameRule::Dns1123Label,
            ("", "services") => NameRule::Dns1035Label,
            ("rbac.authorization.k8s.io", _) => NameRule::PathSegment,
            // `<version>.<group>`; the core group's is `v1.`.
            ("apiregistration.k8s.io", "apiservices") => NameRule::PathSegment,
            _ => NameRule::Dns1123Subdomain,
        }
    }
}

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric \
     characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
     characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_MSG: &str =
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', \
     start with an alphabetic character, and end with an alphanumeric character";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start \
     and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, \
     '-', '_' or '.', and must start and end with an alphanumeric character";

/// Kubernetes' limit on the summed size of all annotation keys and values.
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// Kubernetes' `RegexError`, including its quirky `',  or '` separator.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let mut out = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push_str(&format!("'{e}', "));
    }
    out.push_str(&format!("regex used for validation is '{fmt}')"));
    out
}

fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

fn is_lower_alnum(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn matches_dns1123_label(s: &str) -> bool {
    let (Some(first), Some(last)) = (s.chars().next(), s.chars().last()) else {
        return false;
    };
    is_lower_alnum(first) && is_lower_alnum(last) && s.chars().all(|c| is_lower_alnum(c) || c == '-')
}

fn matches_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(matches_dns1123_label)
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn matches_qualified_name_part(s: &str) -> bool {
    let (Some(first), Some(last)) = (s.chars().next(), s.chars().last()) else {
        return false;
    };
    first.is_ascii_alphanumeric()
        && last.is_ascii_alphanumeric()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Problems with `value` as a DNS-1123 subdomain (empty when valid).
pub fn dns1123_subdomain_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push(max_len_error(253));
    }
    if !matches_dns1123_subdomain(value) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_MSG,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// Problems with `value` as a DNS-1123 label (empty when valid).
pub fn dns1123_label_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !matches_dns1123_label(value) {
        if matches_dns1123_subdomain(value) {
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(
                DNS1123_LABEL_MSG,
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

/// Problems with `value` as a DNS-1035 label (empty when valid).
pub fn dns1035_label_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    let starts_with_letter = value.chars().next().is_some_and(|c| c.is_ascii_lowercase());
    if !(starts_with_letter && matches_dns1123_label(value)) {
        errs.push(regex_error(
            DNS1035_LABEL_MSG,
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// Problems with `value` as a path segment name (empty when valid).
pub fn path_segment_errors(value: &str) -> Vec<String> {
    if value == "." || value == ".." {
        return vec![format!("may not be '{value}'")];
    }
    ["/", "%"]
        .iter()
        .filter(|bad| value.contains(**bad))
        .map(|bad| format!("may not contain '{bad}'"))
        .collect()
}

/// Problems with `value` as a qualified name (`[prefix/]name`), the format of
/// label and annotation keys (empty when valid).
pub fn qualified_name_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    dns1123_subdomain_errors(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", max_len_error(63)));
    }
    if !matches_qualified_name_part(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_MSG,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// Problems with `value` as a label value (empty when valid; "" is valid).
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !value.is_empty() && !matches_qualified_name_part(value) {
        errs.push(regex_error(
            LABEL_VALUE_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// Problems with `name` under `rule`, worded as kube-apiserver words them
/// (empty when valid). An empty name is reported by [`validate_metadata`], not here.
pub fn validate_object_name(name: &str, rule: NameRule) -> Vec<String> {
    match rule {
        NameRule::Dns1123Subdomain => dns1123_subdomain_errors(name),
        NameRule::Dns1123Label => dns1123_label_errors(name),
        NameRule::Dns1035Label => dns1035_label_errors(name),
        NameRule::PathSegment => path_segment_errors(name),
    }
}

/// A `generateName` is checked as a name prefix: random characters will
/// follow it, so a trailing '-' or '.' (client-go's Event names end in '.')
/// is fine.
fn validate_generate_name(prefix: &str, rule: NameRule) -> Vec<String> {
    let masked = match prefix.strip_suffix(['-', '.']) {
        Some(head) if !head.is_empty() && rule != NameRule::PathSegment => format!("{head}a"),
        _ => prefix.to_string(),
    };
    validate_object_name(&masked, rule)
}

#[cfg(test)]
mod generate_name_tests {
    use super::*;

    #[test]
    fn generate_name_may_end_in_dash_or_dot() {
        assert!(validate_generate_name("web-", NameRule::Dns1123Subdomain).is_empty());
        assert!(validate_generate_name("pod.", NameRule::Dns1123Subdomain).is_empty());
        assert!(!validate_generate_name("Bad_", NameRule::Dns1123Subdomain).is_empty());
    }
}

fn str_field<'a>(meta: &'a Value, key: &str) -> &'a str {
    meta.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// Validate `obj.metadata` as kube-apiserver's `ValidateObjectMeta` does:
/// name (or generateName) under `rule`, namespace presence and format, label
/// keys and values, annotation keys and total annotation size.
///
/// The caller should already have set the namespace from the request path
/// (namespaced kinds) or cleared it (cluster-scoped kinds), as kube-apiserver
/// does before validating; a missing or unexpected namespace is reported.
pub fn validate_metadata(obj: &Value, rule: NameRule, namespaced: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    let Some(meta) = obj.get("metadata").filter(|m| m.is_object()) else {
        causes.push(Cause::required("metadata"));
        return causes;
    };
    let name = str_field(meta, "name");
    let generate_name = str_field(meta, "generateName");
    if !generate_name.is_empty() {
        for msg in validate_generate_name(generate_name, rule) {
            causes.push(Cause::invalid(
                "metadata.generateName",
                invalid_value(&Value::from(generate_name), &msg),
            ));
        }
    }
    if name.is_empty() {
        if generate_name.is_empty() {
            causes.push(Cause {
                message: "Required value: name or generateName is required".into(),
                ..Cause::required("metadata.name")
            });
        }
    } else {
        for msg in validate_object_name(name, rule) {
            causes.push(Cause::invalid(
                "metadata.name",
                invalid_value(&Value::from(name), &msg),
            ));
        }
    }

    let namespace = str_field(meta, "namespace");
    if namespaced {
        if namespace.is_empty() {
            causes.push(Cause::required("metadata.namespace"));
        } else {
            for msg in dns1123_label_errors(namespace) {
                causes.push(Cause::invalid(
                    "metadata.namespace",
                    invalid_value(&Value::from(namespace), &msg),
                ));
            }
        }
    } else if !namespace.is_empty() {
        causes.push(Cause::forbidden(
            "metadata.namespace",
            "Forbidden: not allowed on this type",
        ));
    }

    causes.extend(validate_labels(meta.get("labels"), "metadata.labels"));
    causes.extend(validate_annotations(
        meta.get("annotations"),
        "metadata.annotations",
    ));
    causes
}

/// Map-of-strings fields (`labels`, `annotations`): entries that are not
/// strings are reported, the rest handed to `check`.
fn string_map_entries<'a>(
    v: Option<&'a Value>,
    field: &str,
    causes: &mut Vec<Cause>,
) -> Vec<(&'a String, &'a str)> {
    match v {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(m)) => m
            .iter()
            .filter_map(|(k, v)| match v.as_str() {
                Some(s) => Some((k, s)),
                None => {
                    causes.push(Cause::type_invalid(
                        format!("{field}.{k}"),
                        invalid_value(v, "must be of type string"),
                    ));
                    None
                }
            })
            .collect(),
        Some(other) => {
            causes.push(Cause::type_invalid(
                field,
                invalid_value(other, "must be a map of strings"),
            ));
            Vec::new()
        }
    }
}

/// Label keys must be qualified names and values valid label values.
pub fn validate_labels(labels: Option<&Value>, field: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    for (k, v) in string_map_entries(labels, field, &mut causes) {
        for msg in qualified_name_errors(k) {
            causes.push(Cause::invalid(
                field,
                invalid_value(&Value::from(k.as_str()), &msg),
            ));
        }
        for msg in label_value_errors(v) {
            causes.push(Cause::invalid(field, invalid_value(&Value::from(v), &msg)));
        }
    }
    causes
}

/// Annotation keys must be qualified names (compared lower-cased); keys and
/// values together may not exceed 256 KiB.
pub fn validate_annotations(annotations: Option<&Value>, field: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let mut total = 0usize;
    for (k, v) in string_map_entries(annotations, field, &mut causes) {
        total += k.len() + v.len();
        for msg in qualified_name_errors(&k.to_ascii_lowercase()) {
            causes.push(Cause::invalid(
                field,
                invalid_value(&Value::from(k.as_str()), &msg),
            ));
        }
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        causes.push(Cause::too_long(field, TOTAL_ANNOTATION_SIZE_LIMIT));
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn subdomain_names_get_kubernetes_message() {
        let errs = validate_object_name("Bad_Name", NameRule::Dns1123Subdomain);
        assert_eq!(
            errs,
            vec![
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', \
                 and must start and end with an alphanumeric character (e.g. 'example.com', regex used for \
                 validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
            ]
        );
        assert!(validate_object_name("web.example-1", NameRule::Dns1123Subdomain).is_empty());
        assert!(!validate_object_name("a..b", NameRule::Dns1123Subdomain).is_empty());
        assert!(!validate_object_name("-a", NameRule::Dns1123Subdomain).is_empty());
        let long = "a".repeat(254);
        assert_eq!(
            validate_object_name(&long, NameRule::Dns1123Subdomain),
            vec!["must be no more than 253 characters"]
        );
    }

    #[test]
    fn label_names_reject_dots_and_length() {
        assert_eq!(
            validate_object_name("a.b", NameRule::Dns1123Label),
            vec!["must not contain dots"]
        );
        assert_eq!(
            validate_object_name(&"a".repeat(64), NameRule::Dns1123Label).len(),
            1
        );
        assert!(validate_object_name("kube-system", NameRule::Dns1123Label).is_empty());
        assert!(!validate_object_name("1abc", NameRule::Dns1035Label).is_empty());
        assert!(validate_object_name("abc-1", NameRule::Dns1035Label).is_empty());
    }

    #[test]
    fn path_segment_names_allow_colons_but_not_slashes() {
        assert!(validate_object_name("system:controller:x", NameRule::PathSegment).is_empty());
        assert_eq!(
            validate_object_name("..", NameRule::PathSegment),
            vec!["may not be '..'"]
        );
        assert_eq!(
            validate_object_name("a/b%", NameRule::PathSegment),
            vec!["may not contain '/'", "may not contain '%'"]
        );
    }

    #[test]
    fn qualified_names_check_prefix_and_name() {
        assert!(qualified_name_errors("app.kubernetes.io/name").is_empty());
        assert!(qualified_name_errors("My_Key.1").is_empty());
        assert_eq!(qualified_name_errors("/x"), vec!["prefix part must be non-empty"]);
        assert!(qualified_name_errors("Example.com/x")[0].starts_with("prefix part a lowercase RFC 1123"));
        assert!(qualified_name_errors("a/b/c")[0].starts_with("a qualified name must consist"));
        assert!(qualified_name_errors("x/")[0].starts_with("name part must be non-empty"));
        assert!(qualified_name_errors("-x")[0].contains("(e.g. 'MyName',  or 'my.name',  or '123-abc', "));
    }

    #[test]
    fn metadata_requires_name_or_generate_name() {
        let causes = validate_metadata(
            &json!({"metadata": {"namespace": "default"}}),
            NameRule::Dns1123Subdomain,
            true,
        );
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "metadata.name");
        assert_eq!(
            causes[0].message,
            "Required value: name or generateName is required"
        );
        let ok = validate_metadata(
            &json!({"metadata": {"generateName": "web-", "namespace": "default"}}),
            NameRule::Dns1123Subdomain,
            true,
        );
        assert!(ok.is_empty(), "{ok:?}");
    }

    #[test]
    fn invalid_name_is_reported_with_its_value() {
        let causes = validate_metadata(
            &json!({"metadata": {"name": "Bad_Name"}}),
            NameRule::Dns1123Subdomain,
            false,
        );
        assert_eq!(causes[0].field, "metadata.name");
        assert!(causes[0]
            .message
            .starts_with("Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain"));
    }

    #[test]
    fn bad_labels_and_annotations_name_the_field() {
        let obj = json!({"metadata": {
            "name": "x", "namespace": "ns",
            "labels": {"good": "v", "bad key": "v", "k": "-bad-"},
            "annotations": {"ok/thing": "anything at all", "a b": "v"}
        }});
        let causes = validate_metadata(&obj, NameRule::Dns1123Subdomain, true);
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            vec!["metadata.labels", "metadata.labels", "metadata.annotations"]
        );
        assert!(causes[0]
            .message
            .starts_with("Invalid value: \"bad key\": name part must consist"));
        assert!(causes[1]
            .message
            .starts_with("Invalid value: \"-bad-\": a valid label must be an empty string"));
    }

    #[test]
    fn oversized_annotations_are_too_long() {
        let obj = json!({"metadata": {"name": "x", "annotations": {"big": "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT)}}});
        let causes = validate_metadata(&obj, NameRule::Dns1123Subdomain, false);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].reason, "FieldValueTooLong");
    }

    #[test]
    fn namespace_presence_follows_scope() {
        let cluster = validate_metadata(
            &json!({"metadata": {"name": "x", "namespace": "ns"}}),
            NameRule::PathSegment,
            false,
        );
        assert_eq!(cluster[0].reason, "FieldValueForbidden");
        let namespaced = validate_metadata(&json!({"metadata": {"name": "x"}}), NameRule::PathSegment, true);
        assert_eq!(namespaced[0].field, "metadata.namespace");
    }

    #[test]
    fn name_rule_follows_the_resource() {
        assert_eq!(NameRule::for_resource("", "namespaces"), NameRule::Dns1123Label);
        assert_eq!(
            NameRule::for_resource("rbac.authorization.k8s.io", "clusterroles"),
            NameRule::PathSegment
        );
        assert_eq!(
            NameRule::for_resource("apps", "deployments"),
            NameRule::Dns1123Subdomain
        );
    }
}
