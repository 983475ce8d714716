//! Basic validation of a `CustomResourceDefinition` object, the subset of
//! kube-apiserver's checks a hub needs to serve the CRD safely.

use serde_json::Value;

use super::invalid_value;
use super::names::dns1035_label_errors;
use crate::status::Cause;

const COLUMN_TYPES: [&str; 5] = ["integer", "number", "string", "boolean", "date"];

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

fn required_with(field: impl Into<String>, detail: &str) -> Cause {
    Cause {
        message: format!("Required value: {detail}"),
        ..Cause::required(field)
    }
}

/// Validate `crd`: name is `<plural>.<group>`, group is a dotted domain, names
/// are DNS-1035 labels, scope is `Namespaced` or `Cluster`, versions are
/// unique valid names with exactly one storage version, each served version's
/// schema (when given) has `type: object` at the root, and printer columns
/// have a name, a known type and a JSONPath.
pub fn validate_crd(crd: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let group = str_at(crd, "/spec/group");
    let plural = str_at(crd, "/spec/names/plural");

    let name = str_at(crd, "/metadata/name");
    let expected = format!("{plural}.{group}");
    if name != expected {
        causes.push(Cause::invalid(
            "metadata.name",
            invalid_value(&Value::from(name), "must be spec.names.plural+\".\"+spec.group"),
        ));
    }

    if group.is_empty() {
        causes.push(Cause::required("spec.group"));
    } else if !group.contains('.') {
        causes.push(Cause::invalid(
            "spec.group",
            invalid_value(&Value::from(group), "should be a domain with at least one dot"),
        ));
    } else if let Some(msg) = super::names::dns1123_subdomain_errors(group).first() {
        causes.push(Cause::invalid(
            "spec.group",
            invalid_value(&Value::from(group), msg),
        ));
    }

    validate_names(crd, &mut causes);

    match str_at(crd, "/spec/scope") {
        "" => causes.push(Cause::required("spec.scope")),
        "Namespaced" | "Cluster" => {}
        other => causes.push(Cause::unsupported(
            "spec.scope",
            format!(
                "Unsupported value: {}: supported values: \"Cluster\", \"Namespaced\"",
                Value::from(other)
            ),
        )),
    }

    validate_versions(crd, &mut causes);
    causes
}

fn validate_names(crd: &Value, causes: &mut Vec<Cause>) {
    for (key, lower) in [
        ("plural", false),
        ("singular", false),
        ("kind", true),
        ("listKind", true),
    ] {
        let field = format!("spec.names.{key}");
        let value = str_at(crd, &format!("/spec/names/{key}"));
        if value.is_empty() {
            if key == "plural" || key == "kind" {
                causes.push(Cause::required(field));
            }
            continue;
        }
        let checked = if lower {
            value.to_ascii_lowercase()
        } else {
            value.to_string()
        };
        let errs = dns1035_label_errors(&checked);
        if !errs.is_empty() {
            causes.push(Cause::invalid(
                field,
                invalid_value(&Value::from(value), &errs.join(",")),
            ));
        }
    }
}

fn validate_versions(crd: &Value, causes: &mut Vec<Cause>) {
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    if versions.is_empty() {
        causes.push(required_with("spec.versions", "must have at least one version"));
        return;
    }
    let names: Vec<&str> = versions.iter().map(|v| str_at(v, "/name")).collect();
    let summary = Value::from(names.iter().map(|n| Value::from(*n)).collect::<Vec<_>>());

    for (i, version) in versions.iter().enumerate() {
        let at = format!("spec.versions[{i}]");
        let vname = names[i];
        if vname.is_empty() {
            causes.push(Cause::required(format!("{at}.name")));
        } else {
            let errs = dns1035_label_errors(vname);
            if !errs.is_empty() {
                causes.push(Cause::invalid(
                    format!("{at}.name"),
                    invalid_value(&Value::from(vname), &errs.join(",")),
                ));
            }
        }
        let served = version.get("served").and_then(Value::as_bool).unwrap_or(false);
        if let Some(schema) = version.pointer("/schema/openAPIV3Schema").filter(|_| served) {
            let field = format!("{at}.schema.openAPIV3Schema.type");
            match schema.get("type").and_then(Value::as_str) {
                Some("object") => {}
                None => causes.push(required_with(field, "must be object at the root")),
                Some(other) => causes.push(Cause::invalid(
                    field,
                    invalid_value(&Value::from(other), "must be object at the root"),
                )),
            }
        }
        if let Some(schema) = version.pointer("/schema/openAPIV3Schema") {
            validate_patterns(schema, &format!("{at}.schema.openAPIV3Schema"), causes);
        }
        validate_printer_columns(version, &at, causes);
    }

    let unique = names.iter().enumerate().all(|(i, n)| !names[..i].contains(n));
    if !unique {
        causes.push(Cause::invalid(
            "spec.versions",
            invalid_value(&summary, "must contain unique version names"),
        ));
    }
    let storage = versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .count();
    if storage != 1 {
        causes.push(Cause::invalid(
            "spec.versions",
            invalid_value(
                &summary,
                "must have exactly one version marked as storage version",
            ),
        ));
    }
}

/// Every `pattern` in `schema` must compile, as kube-apiserver requires;
/// `at` is the schema's field path, extended as kube-apiserver names nested
/// schemas (`properties[spec].items.pattern`).
fn validate_patterns(schema: &Value, at: &str, causes: &mut Vec<Cause>) {
    let Some(map) = schema.as_object() else {
        return;
    };
    super::cel::rule_errors(map, at, causes);
    if let Some(pattern) = map.get("pattern").and_then(Value::as_str) {
        if let Err(e) = super::pattern::compiled(pattern) {
            causes.push(Cause::invalid(
                format!("{at}.pattern"),
                invalid_value(
                    &Value::from(pattern),
                    &format!("must be a valid regular expression, but isn't: {e}"),
                ),
            ));
        }
    }
    for key in ["properties", "patternProperties", "definitions"] {
        for (name, child) in map.get(key).and_then(Value::as_object).into_iter().flatten() {
            validate_patterns(child, &format!("{at}.{key}[{name}]"), causes);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        for (i, child) in map
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            validate_patterns(child, &format!("{at}.{key}[{i}]"), causes);
        }
    }
    for key in ["items", "additionalProperties", "not"] {
        match map.get(key) {
            Some(Value::Array(items)) => {
                for (i, child) in items.iter().enumerate() {
                    validate_patterns(child, &format!("{at}.{key}[{i}]"), causes);
                }
            }
            Some(child) => validate_patterns(child, &format!("{at}.{key}"), causes),
            None => {}
        }
    }
}

fn validate_printer_columns(version: &Value, at: &str, causes: &mut Vec<Cause>) {
    let Some(columns) = version.get("additionalPrinterColumns").and_then(Value::as_array) else {
        return;
    };
    for (j, column) in columns.iter().enumerate() {
        let at = format!("{at}.additionalPrinterColumns[{j}]");
        if str_at(column, "/name").is_empty() {
            causes.push(Cause::required(format!("{at}.name")));
        }
        match str_at(column, "/type") {
            "" => causes.push(Cause::required(format!("{at}.type"))),
            t if COLUMN_TYPES.contains(&t) => {}
            t => causes.push(Cause::unsupported(
                format!("{at}.type"),
                format!(
                    "Unsupported value: {}: supported values: {}",
                    Value::from(t),
                    COLUMN_TYPES.map(|c| format!("\"{c}\"")).join(", ")
                ),
            )),
        }
        if str_at(column, "/jsonPath").is_empty() {
            causes.push(Cause::required(format!("{at}.jsonPath")));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                "versions": [
                    {"name": "v1", "served": true, "storage": true,
                     "schema": {"openAPIV3Schema": {"type": "object"}},
                     "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}]},
                    {"name": "v1beta1", "served": true, "storage": false}
                ]
            }
        })
    }

    fn described(crd: &Value) -> Vec<String> {
        validate_crd(crd).iter().map(Cause::describe).collect()
    }

    #[test]
    fn invalid_and_oversized_patterns_are_refused_naming_the_field() {
        let mut c = crd();
        c["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {
                "ok": {"type": "string", "pattern": "^(a|a)*$"},
                "x": {"type": "string", "pattern": "^(ab"},
                "list": {"type": "array", "items": {"type": "string", "pattern": "[a-z]{1000}{1000}"}},
            }}},
        });
        assert_eq!(
            described(&c),
            vec![
                "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[x].pattern: \
                 Invalid value: \"^(ab\": must be a valid regular expression, but isn't: \
                 error parsing regexp: unclosed group",
                "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[list].items.pattern: \
                 Invalid value: \"[a-z]{1000}{1000}\": must be a valid regular expression, but isn't: \
                 the compiled regular expression is larger than the limit of 131072 bytes; \
                 simplify it (fewer or smaller repetitions)",
            ]
        );
    }

    #[test]
    fn valid_crd_has_no_causes() {
        assert!(described(&crd()).is_empty(), "{:?}", described(&crd()));
    }

    #[test]
    fn crd_name_must_be_plural_dot_group() {
        let mut c = crd();
        c["metadata"]["name"] = json!("widget.example.com");
        assert_eq!(
            described(&c),
            vec!["metadata.name: Invalid value: \"widget.example.com\": must be spec.names.plural+\".\"+spec.group"]
        );
    }

    #[test]
    fn group_needs_a_dot_and_scope_a_known_value() {
        let mut c = crd();
        c["spec"]["group"] = json!("example");
        c["metadata"]["name"] = json!("widgets.example");
        c["spec"]["scope"] = json!("Global");
        assert_eq!(
            described(&c),
            vec![
                "spec.group: Invalid value: \"example\": should be a domain with at least one dot",
                "spec.scope: Unsupported value: \"Global\": supported values: \"Cluster\", \"Namespaced\"",
            ]
        );
    }

    #[test]
    fn exactly_one_storage_version_is_required() {
        let mut c = crd();
        c["spec"]["versions"][1]["storage"] = json!(true);
        let causes = validate_crd(&c);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "spec.versions");
        assert!(causes[0]
            .message
            .ends_with("must have exactly one version marked as storage version"));
        c["spec"]["versions"] = json!([]);
        assert_eq!(
            described(&c),
            vec!["spec.versions: Required value: must have at least one version"]
        );
    }

    #[test]
    fn served_schema_root_must_be_object() {
        let mut c = crd();
        c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["type"] = json!("string");
        c["spec"]["versions"][1]["name"] = json!("V2");
        let causes = validate_crd(&c);
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            vec![
                "spec.versions[0].schema.openAPIV3Schema.type",
                "spec.versions[1].name"
            ]
        );
    }

    #[test]
    fn names_and_printer_columns_are_required() {
        let mut c = crd();
        c["spec"]["names"] = json!({"plural": "widgets"});
        c["spec"]["versions"][0]["additionalPrinterColumns"] = json!([{"name": "X", "type": "map"}]);
        assert_eq!(
            described(&c),
            vec![
                "spec.names.kind: Required value",
                "spec.versions[0].additionalPrinterColumns[0].type: Unsupported value: \"map\": supported values: \
                 \"integer\", \"number\", \"string\", \"boolean\", \"date\"",
                "spec.versions[0].additionalPrinterColumns[0].jsonPath: Required value",
            ]
        );
    }
}
