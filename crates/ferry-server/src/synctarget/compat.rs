//! Whether a cluster can hold what an APIExport's schema describes: every
//! field the upstream (export) schema declares must exist downstream (in
//! the cluster's imported schema) with the same type, recursively. A
//! downstream node that keeps unknown fields, or has no type, accepts
//! anything below it. Pure: schemas in, differences out.

use serde_json::Value;

/// Deeper than any real schema; a cycle or a hostile import stops here.
const MAX_DEPTH: usize = 64;

/// The differences that make `downstream` unable to hold what `upstream`
/// describes, each naming the field path (`spec.replicas: integer upstream,
/// string downstream`). Empty when compatible. `metadata`, `apiVersion` and
/// `kind` at the top are the server's business and not compared.
pub fn differences(upstream: &Value, downstream: &Value) -> Vec<String> {
    let mut out = Vec::new();
    compare(upstream, downstream, "", 0, &mut out);
    out
}

fn type_of(s: &Value) -> Option<&str> {
    // kube's OpenAPI writes IntOrString either way.
    if s.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true))
        || s.get("format").and_then(Value::as_str) == Some("int-or-string")
    {
        return Some("int-or-string");
    }
    s.get("type").and_then(Value::as_str)
}

fn keeps_unknown_fields(s: &Value) -> bool {
    s.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

fn shown(path: &str) -> &str {
    if path.is_empty() {
        "<root>"
    } else {
        path
    }
}

/// Whether a value of type `up` fits a field of type `down`.
fn fits(up: &str, down: &str) -> bool {
    up == down
        || (up == "integer" && down == "number")
        || (down == "int-or-string" && matches!(up, "integer" | "string"))
}

fn compare(up: &Value, down: &Value, path: &str, depth: usize, out: &mut Vec<String>) {
    if depth > MAX_DEPTH {
        out.push(format!("{}: schema nested too deeply to compare", shown(path)));
        return;
    }
    let Some(down_type) = type_of(down) else {
        return; // untyped downstream (anyOf, x-kubernetes-embedded-resource...) takes anything
    };
    let Some(up_type) = type_of(up) else {
        return; // nothing declared upstream
    };
    if !fits(up_type, down_type) {
        out.push(format!(
            "{}: {up_type} upstream, {down_type} downstream",
            shown(path)
        ));
        return;
    }
    match up_type {
        "object" => compare_object(up, down, path, depth, out),
        "array" => {
            if let (Some(ui), Some(di)) = (up.get("items"), down.get("items")) {
                compare(ui, di, &format!("{path}[*]"), depth + 1, out);
            }
        }
        _ => {}
    }
}

fn compare_object(up: &Value, down: &Value, path: &str, depth: usize, out: &mut Vec<String>) {
    let down_props = down.get("properties").and_then(Value::as_object);
    let down_additional = down.get("additionalProperties").filter(|a| a.is_object());
    if let Some(up_props) = up.get("properties").and_then(Value::as_object) {
        for (field, up_field) in up_props {
            if path.is_empty() && matches!(field.as_str(), "metadata" | "apiVersion" | "kind") {
                continue;
            }
            let at = join(path, field);
            match (down_props.and_then(|p| p.get(field)), down_additional) {
                (Some(d), _) => compare(up_field, d, &at, depth + 1, out),
                (None, Some(d)) => compare(up_field, d, &at, depth + 1, out),
                (None, None) if keeps_unknown_fields(down) => {}
                (None, None)
                    if down_props.is_none()
                        && down.get("additionalProperties") == Some(&Value::Bool(true)) => {}
                (None, None) => out.push(format!("{at}: missing downstream")),
            }
        }
    }
    if let Some(up_additional) = up.get("additionalProperties").filter(|a| a.is_object()) {
        match down_additional {
            Some(d) => compare(up_additional, d, &format!("{path}[*]"), depth + 1, out),
            None if keeps_unknown_fields(down) || down_props.is_none() => {}
            None => out.push(format!(
                "{}: a map upstream, a fixed set of fields downstream",
                shown(path)
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(replicas_type: &str) -> Value {
        json!({"type": "object", "properties": {
            "metadata": {"type": "object"},
            "spec": {"type": "object", "properties": {
                "replicas": {"type": replicas_type},
                "template": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "containers": {"type": "array", "items": {"type": "object", "properties": {
                            "image": {"type": "string"},
                            "ports": {"type": "array", "items": {"type": "object", "properties": {
                                "containerPort": {"type": "integer"}}}}
                        }}}
                    }}
                }},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}
            }}
        }})
    }

    #[test]
    fn the_same_schema_is_compatible() {
        assert!(differences(&deployment("integer"), &deployment("integer")).is_empty());
    }

    #[test]
    fn a_different_type_names_the_field_and_both_types() {
        assert_eq!(
            differences(&deployment("integer"), &deployment("string")),
            ["spec.replicas: integer upstream, string downstream"]
        );
    }

    #[test]
    fn a_field_missing_downstream_is_named_with_its_path_through_lists() {
        let mut down = deployment("integer");
        down["properties"]["spec"]["properties"]["template"]["properties"]["spec"]["properties"]
            ["containers"]["items"]["properties"]["ports"]["items"]["properties"]
            .as_object_mut()
            .unwrap()
            .remove("containerPort");
        assert_eq!(
            differences(&deployment("integer"), &down),
            ["spec.template.spec.containers[*].ports[*].containerPort: missing downstream"]
        );
    }

    #[test]
    fn extra_downstream_fields_and_open_downstream_nodes_are_fine() {
        let up = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}}}});
        let wider = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "a": {"type": "string"}, "b": {"type": "boolean"}}}}});
        assert!(differences(&up, &wider).is_empty());
        let open = json!({"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}});
        assert!(differences(&up, &open).is_empty());
        let untyped = json!({"type": "object", "properties": {"spec": {}}});
        assert!(differences(&up, &untyped).is_empty());
    }

    #[test]
    fn int_or_string_and_numbers_fit_where_they_can() {
        let written_as_format = json!({"type": "string", "format": "int-or-string"});
        assert!(differences(&written_as_format, &json!({"x-kubernetes-int-or-string": true})).is_empty());
        let up = json!({"type": "object", "properties": {"port": {"type": "integer"}, "ratio": {"type": "integer"}}});
        let down = json!({"type": "object", "properties": {
            "port": {"x-kubernetes-int-or-string": true}, "ratio": {"type": "number"}}});
        assert!(differences(&up, &down).is_empty());
        let back = differences(&down, &up);
        assert_eq!(
            back,
            [
                "port: int-or-string upstream, integer downstream",
                "ratio: number upstream, integer downstream"
            ]
        );
    }

    #[test]
    fn a_self_nesting_schema_stops_at_the_depth_limit() {
        let mut s = json!({"type": "string"});
        for _ in 0..100 {
            s = json!({"type": "object", "properties": {"x": s}});
        }
        let mut other = s.clone();
        let mut cur = &mut other;
        for _ in 0..100 {
            cur = cur.pointer_mut("/properties/x").unwrap();
        }
        *cur = json!({"type": "integer"});
        let d = differences(&s, &other);
        assert_eq!(d.len(), 1);
        assert!(d[0].contains("too deeply"), "{d:?}");
    }
}
