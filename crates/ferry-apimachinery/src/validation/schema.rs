//! Custom resources against their CRD version's `openAPIV3Schema` (a
//! Kubernetes structural schema): prune unknown fields, apply defaults, then
//! validate — in that order, as kube-apiserver does on create and update.

use serde_json::{Map, Value};

use super::invalid_value;
use super::pattern;
use crate::status::Cause;

/// Fields every object keeps at its root (and embedded resources at theirs).
const OBJECT_ROOT_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Prune fields of `obj` unknown to `schema`, apply `default`s to absent
/// fields, and validate the result. Returns the problems found (empty when
/// valid); `obj` is pruned and defaulted either way.
///
/// `apiVersion`, `kind` and `metadata` at the root are never pruned; metadata
/// is validated separately by [`super::validate_metadata`].
pub fn validate_and_prune(schema: &Value, obj: &mut Value) -> Vec<Cause> {
    validate_and_prune_reporting(schema, obj).0
}

/// As [`validate_and_prune`], also returning the paths of the fields pruned
/// (`spec.extra`, `spec.items[0].x`), which `fieldValidation` reports as
/// unknown fields.
pub fn validate_and_prune_reporting(schema: &Value, obj: &mut Value) -> (Vec<Cause>, Vec<String>) {
    let mut pruned = Vec::new();
    prune(obj, schema, true, "", &mut pruned);
    drop_non_nullable_nulls(obj, schema);
    apply_defaults(obj, schema);
    let mut causes = Vec::new();
    validate(obj, schema, "", &mut causes);
    (causes, pruned)
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool).unwrap_or(false)
}

fn properties(schema: &Value) -> Option<&Map<String, Value>> {
    schema.get("properties").and_then(Value::as_object)
}

/// `additionalProperties` as a schema, if it is one.
fn additional_schema(schema: &Value) -> Option<&Value> {
    schema.get("additionalProperties").filter(|v| v.is_object())
}

/// Remove fields not described by `schema`, recursively, recording each
/// removed field's path (below `at`) in `pruned`.
fn prune(value: &mut Value, schema: &Value, keep_object_root: bool, at: &str, pruned: &mut Vec<String>) {
    let keep_root = keep_object_root || flag(schema, "x-kubernetes-embedded-resource");
    let child_path = |key: &str| {
        if at.is_empty() {
            key.to_string()
        } else {
            format!("{at}.{key}")
        }
    };
    match value {
        Value::Object(map) => {
            let props = properties(schema);
            let additional = additional_schema(schema);
            let keep_unknown = flag(schema, "x-kubernetes-preserve-unknown-fields")
                || schema.get("additionalProperties") == Some(&Value::Bool(true));
            map.retain(|key, child| {
                // Root metadata is ObjectMeta whatever the schema says about it.
                if keep_root && OBJECT_ROOT_FIELDS.contains(&key.as_str()) {
                    true
                } else if let Some(prop) = props.and_then(|p| p.get(key)) {
                    prune(child, prop, false, &child_path(key), pruned);
                    true
                } else if let Some(additional) = additional {
                    prune(child, additional, false, &child_path(key), pruned);
                    true
                } else {
                    if !keep_unknown {
                        pruned.push(child_path(key));
                    }
                    keep_unknown
                }
            });
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
                for (i, item) in items.iter_mut().enumerate() {
                    prune(item, item_schema, false, &format!("{at}[{i}]"), pruned);
                }
            }
        }
        _ => {}
    }
}

fn has_default(schema: &Value) -> bool {
    schema.get("default").is_some_and(|d| !d.is_null())
}

/// `null` in a property that is neither nullable nor defaulted is dropped, as
/// kube-apiserver does before defaulting.
fn drop_non_nullable_nulls(value: &mut Value, schema: &Value) {
    match value {
        Value::Object(map) => {
            let props = properties(schema);
            let additional = additional_schema(schema);
            map.retain(|key, child| {
                let child_schema = props.and_then(|p| p.get(key)).or(additional);
                match child_schema {
                    Some(s) if child.is_null() => flag(s, "nullable") || has_default(s),
                    Some(s) => {
                        drop_non_nullable_nulls(child, s);
                        true
                    }
                    None => true,
                }
            });
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    drop_non_nullable_nulls(item, item_schema);
                }
            }
        }
        _ => {}
    }
}

/// Set `default` on absent (or non-nullable `null`) properties, then recurse,
/// so defaults nested inside a default apply too.
fn apply_defaults(value: &mut Value, schema: &Value) {
    match value {
        Value::Object(map) => {
            if let Some(props) = properties(schema) {
                for (key, prop) in props {
                    let Some(default) = prop.get("default").filter(|d| !d.is_null()) else {
                        continue;
                    };
                    let absent = match map.get(key) {
                        None => true,
                        Some(Value::Null) => !flag(prop, "nullable"),
                        Some(_) => false,
                    };
                    if absent {
                        map.insert(key.clone(), default.clone());
                    }
                }
            }
            let props = properties(schema);
            let additional = additional_schema(schema);
            for (key, child) in map.iter_mut() {
                if let Some(s) = props.and_then(|p| p.get(key)).or(additional) {
                    apply_defaults(child, s);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    apply_defaults(item, item_schema);
                }
            }
        }
        _ => {}
    }
}

fn child_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// go-openapi's `<name> in body`, as kube-apiserver's messages start.
fn subject(path: &str) -> String {
    if path.is_empty() {
        "body".to_string()
    } else {
        format!("{path} in body")
    }
}

fn is_integer(n: &serde_json::Number) -> bool {
    n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
}

/// The JSON type name of `value`, as kube-apiserver reports it.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if is_integer(n) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn has_type(value: &Value, ty: &str) -> bool {
    match ty {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "number" => value.is_number(),
        "integer" => value.as_number().is_some_and(is_integer),
        _ => true,
    }
}

/// A number as Go's `%v` prints a float64: `10`, not `10.0`.
fn go_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

/// JSON equality where `1` and `1.0` are the same number.
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

fn type_error(path: &str, expected: &str, value: &Value) -> Cause {
    let actual = type_name(value);
    Cause::type_invalid(
        path,
        invalid_value(
            &Value::from(actual),
            &format!("{} must be of type {expected}: \"{actual}\"", subject(path)),
        ),
    )
}

fn too_many(path: &str, actual: usize, max: u64) -> Cause {
    Cause::too_many(path, actual, usize::try_from(max).unwrap_or(usize::MAX))
}

/// Validate `value` against `schema` at `path`, appending to `causes`.
fn validate(value: &Value, schema: &Value, path: &str, causes: &mut Vec<Cause>) {
    if !schema.is_object() {
        return;
    }
    if value.is_null() {
        if flag(schema, "nullable") {
            return;
        }
        if let Some(ty) = schema.get("type").and_then(Value::as_str) {
            causes.push(type_error(path, ty, value));
            return;
        }
    }
    if flag(schema, "x-kubernetes-int-or-string") {
        let ok = value.is_string() || value.as_number().is_some_and(is_integer);
        if !ok {
            causes.push(type_error(path, "integer,string", value));
            return;
        }
    } else if let Some(ty) = schema.get("type").and_then(Value::as_str) {
        if !has_type(value, ty) {
            causes.push(type_error(path, ty, value));
            return;
        }
    }

    if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
        if !allowed.iter().any(|a| json_eq(a, value)) {
            let supported: Vec<String> = allowed
                .iter()
                .map(|a| {
                    let text = a.as_str().map(String::from).unwrap_or_else(|| a.to_string());
                    Value::String(text).to_string()
                })
                .collect();
            causes.push(Cause::unsupported(
                path,
                format!(
                    "Unsupported value: {}: supported values: {}",
                    super::render_value(value),
                    supported.join(", ")
                ),
            ));
        }
    }

    match value {
        Value::String(s) => validate_string(s, value, schema, path, causes),
        Value::Number(n) => validate_number(n.as_f64().unwrap_or(0.0), value, schema, path, causes),
        Value::Array(items) => validate_array(items, schema, path, causes),
        Value::Object(map) => validate_object(map, schema, path, causes),
        _ => {}
    }
    validate_combinators(value, schema, path, causes);
}

fn validate_string(s: &str, value: &Value, schema: &Value, path: &str, causes: &mut Vec<Cause>) {
    let len = s.chars().count() as u64;
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64) {
        if len > max {
            causes.push(Cause::too_long(path, usize::try_from(max).unwrap_or(usize::MAX)));
        }
    }
    if let Some(min) = schema.get("minLength").and_then(Value::as_u64) {
        if len < min {
            let detail = format!("{} should be at least {min} chars long", subject(path));
            causes.push(Cause::invalid(path, invalid_value(value, &detail)));
        }
    }
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
        match pattern::compiled(pattern) {
            Ok(p) if p.is_match(s) => {}
            Ok(_) => {
                let detail = format!("{} should match '{pattern}'", subject(path));
                causes.push(Cause::invalid(path, invalid_value(value, &detail)));
            }
            // Refused when the CRD is written; one stored before that is
            // still never passed silently.
            Err(e) => causes.push(Cause::invalid(
                path,
                format!(
                    "the CustomResourceDefinition's pattern {} for this field is not usable ({e}); \
                     fix the pattern in the CustomResourceDefinition",
                    Value::from(pattern)
                ),
            )),
        }
    }
    if let Some(format) = schema.get("format").and_then(Value::as_str) {
        if !string_has_format(s, format) {
            let detail = format!("{} must be of type {format}: {}", subject(path), Value::from(s));
            causes.push(Cause::type_invalid(path, invalid_value(value, &detail)));
        }
    }
}

/// Checks for the string formats CRDs commonly use; unknown formats pass.
fn string_has_format(s: &str, format: &str) -> bool {
    match format {
        "date-time" => {
            chrono::DateTime::parse_from_rfc3339(s).is_ok()
                || chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f").is_ok()
        }
        "date" => chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok(),
        "uuid" => {
            let groups: Vec<&str> = s.split('-').collect();
            groups.len() == 5
                && groups.iter().zip([8, 4, 4, 4, 12]).all(|(g, n)| g.len() == n)
                && groups.iter().all(|g| g.chars().all(|c| c.is_ascii_hexdigit()))
        }
        "byte" => {
            let body = s.trim_end_matches('=');
            s.len().is_multiple_of(4)
                && s.len() - body.len() <= 2
                && body
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '/')
        }
        "ipv4" => s.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<std::net::Ipv6Addr>().is_ok(),
        "cidr" => s.split_once('/').is_some_and(|(ip, bits)| {
            let max = if ip.parse::<std::net::Ipv4Addr>().is_ok() {
                32
            } else if ip.parse::<std::net::Ipv6Addr>().is_ok() {
                128
            } else {
                return false;
            };
            bits.parse::<u8>().is_ok_and(|b| b <= max)
        }),
        _ => true,
    }
}

fn validate_number(n: f64, value: &Value, schema: &Value, path: &str, causes: &mut Vec<Cause>) {
    let mut fail = |detail: String| causes.push(Cause::invalid(path, invalid_value(value, &detail)));
    if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
        if flag(schema, "exclusiveMinimum") {
            if n <= min {
                fail(format!(
                    "{} should be greater than {}",
                    subject(path),
                    go_number(min)
                ));
            }
        } else if n < min {
            fail(format!(
                "{} should be greater than or equal to {}",
                subject(path),
                go_number(min)
            ));
        }
    }
    if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
        if flag(schema, "exclusiveMaximum") {
            if n >= max {
                fail(format!(
                    "{} should be less than {}",
                    subject(path),
                    go_number(max)
                ));
            }
        } else if n > max {
            fail(format!(
                "{} should be less than or equal to {}",
                subject(path),
                go_number(max)
            ));
        }
    }
    if let Some(factor) = schema
        .get("multipleOf")
        .and_then(Value::as_f64)
        .filter(|f| *f > 0.0)
    {
        let q = n / factor;
        if (q - q.round()).abs() > 1e-9 {
            fail(format!(
                "{} should be a multiple of {}",
                subject(path),
                go_number(factor)
            ));
        }
    }
}

fn validate_array(items: &[Value], schema: &Value, path: &str, causes: &mut Vec<Cause>) {
    if let Some(max) = schema.get("maxItems").and_then(Value::as_u64) {
        if items.len() as u64 > max {
            causes.push(too_many(path, items.len(), max));
        }
    }
    if let Some(min) = schema.get("minItems").and_then(Value::as_u64) {
        if (items.len() as u64) < min {
            let detail = format!("{} should have at least {min} items", subject(path));
            causes.push(Cause::invalid(
                path,
                invalid_value(&Value::from(items.len()), &detail),
            ));
        }
    }
    if flag(schema, "uniqueItems") {
        for (j, item) in items.iter().enumerate() {
            if items[..j].iter().any(|earlier| json_eq(earlier, item)) {
                causes.push(Cause {
                    reason: "FieldValueDuplicate".into(),
                    field: format!("{path}[{j}]"),
                    message: format!("Duplicate value: {}", super::render_value(item)),
                });
            }
        }
    }
    if let Some(item_schema) = schema.get("items") {
        for (i, item) in items.iter().enumerate() {
            validate(item, item_schema, &format!("{path}[{i}]"), causes);
        }
    }
}

fn validate_object(map: &Map<String, Value>, schema: &Value, path: &str, causes: &mut Vec<Cause>) {
    if flag(schema, "x-kubernetes-embedded-resource") {
        for key in ["apiVersion", "kind"] {
            if map.get(key).and_then(Value::as_str).is_none_or(str::is_empty) {
                causes.push(Cause {
                    message: "Required value: must not be empty".into(),
                    ..Cause::required(child_path(path, key))
                });
            }
        }
    }
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for key in required.iter().filter_map(Value::as_str) {
            if !map.contains_key(key) {
                causes.push(Cause::required(child_path(path, key)));
            }
        }
    }
    if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64) {
        if map.len() as u64 > max {
            causes.push(too_many(path, map.len(), max));
        }
    }
    if let Some(min) = schema.get("minProperties").and_then(Value::as_u64) {
        if (map.len() as u64) < min {
            let detail = format!("{} should have at least {min} properties", subject(path));
            causes.push(Cause::invalid(
                path,
                invalid_value(&Value::from(map.len()), &detail),
            ));
        }
    }
    let props = properties(schema);
    let additional = additional_schema(schema);
    for (key, child) in map {
        if let Some(child_schema) = props.and_then(|p| p.get(key)).or(additional) {
            validate(child, child_schema, &child_path(path, key), causes);
        }
    }
}

fn causes_of(value: &Value, schema: &Value, path: &str) -> Vec<Cause> {
    let mut out = Vec::new();
    validate(value, schema, path, &mut out);
    out
}

/// `allOf`, `anyOf`, `oneOf`, `not`: evaluated as plain validations at the
/// same path (they never prune or default, as in structural schemas).
fn validate_combinators(value: &Value, schema: &Value, path: &str, causes: &mut Vec<Cause>) {
    if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
        for sub in all {
            validate(value, sub, path, causes);
        }
    }
    if let Some(any) = schema.get("anyOf").and_then(Value::as_array) {
        let results: Vec<Vec<Cause>> = any.iter().map(|s| causes_of(value, s, path)).collect();
        if !results.is_empty() && results.iter().all(|r| !r.is_empty()) {
            causes.extend(results.into_iter().flatten());
            let detail = format!("{} must validate at least one schema (anyOf)", subject(path));
            causes.push(Cause::invalid(path, invalid_value(value, &detail)));
        }
    }
    if let Some(one) = schema.get("oneOf").and_then(Value::as_array) {
        let results: Vec<Vec<Cause>> = one.iter().map(|s| causes_of(value, s, path)).collect();
        let passing = results.iter().filter(|r| r.is_empty()).count();
        if !results.is_empty() && passing != 1 {
            if passing == 0 {
                causes.extend(results.into_iter().flatten());
            }
            let detail = format!("{} must validate one and only one schema (oneOf)", subject(path));
            causes.push(Cause::invalid(path, invalid_value(value, &detail)));
        }
    }
    if let Some(not) = schema.get("not").filter(|s| s.is_object()) {
        if causes_of(value, not, path).is_empty() {
            let detail = format!("{} must not validate the schema (not)", subject(path));
            causes.push(Cause::invalid(path, invalid_value(value, &detail)));
        }
    }
}

#[cfg(test)]
mod root_metadata_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn root_metadata_is_never_pruned_even_when_the_schema_describes_it() {
        let schema = json!({"type": "object", "properties": {"metadata": {"type": "object"}, "spec": {"type": "object"}}});
        let mut obj =
            json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a", "uid": "u"}, "spec": {}});
        assert!(validate_and_prune(&schema, &mut obj).is_empty());
        assert_eq!(obj["metadata"]["name"], "a");
        assert_eq!(obj["metadata"]["uid"], "u");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["image"],
                    "properties": {
                        "image": {"type": "string", "minLength": 1},
                        "replicas": {"type": "integer", "format": "int32", "minimum": 0, "maximum": 10, "default": 1},
                        "mode": {"type": "string", "enum": ["fast", "safe"], "default": "safe"},
                        "port": {"x-kubernetes-int-or-string": true},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                                  "properties": {"known": {"type": "object", "properties": {"a": {"type": "string"}}}}},
                        "containers": {"type": "array", "maxItems": 2, "items": {
                            "type": "object", "required": ["name"],
                            "properties": {"name": {"type": "string"}, "pull": {"type": "string", "default": "IfNotPresent"}}
                        }},
                        "note": {"type": "string", "nullable": true},
                        "when": {"type": "string", "format": "date-time"},
                        "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                                     "x-kubernetes-preserve-unknown-fields": true},
                        "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5}
                    }
                },
                "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
            }
        })
    }

    fn run(mut obj: Value) -> (Value, Vec<Cause>) {
        let causes = validate_and_prune(&schema(), &mut obj);
        (obj, causes)
    }

    fn base() -> Value {
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "uid": "x"},
               "spec": {"image": "nginx"}})
    }

    #[test]
    fn unknown_fields_are_pruned_unless_preserved() {
        let mut obj = base();
        obj["spec"]["bogus"] = json!(1);
        obj["top"] = json!("x");
        obj["spec"]["extra"] = json!({"anything": {"deep": 1}, "known": {"a": "x", "b": "pruned"}});
        obj["spec"]["labels"] = json!({"free": "form"});
        obj["status"] = json!({"ready": true, "junk": 1});
        let (obj, causes) = run(obj);
        assert!(causes.is_empty(), "{causes:?}");
        assert!(obj.get("top").is_none());
        assert!(obj["spec"].get("bogus").is_none());
        assert_eq!(
            obj["spec"]["extra"],
            json!({"anything": {"deep": 1}, "known": {"a": "x"}})
        );
        assert_eq!(obj["spec"]["labels"], json!({"free": "form"}));
        assert_eq!(obj["status"], json!({"ready": true}));
        assert_eq!(
            obj["metadata"],
            json!({"name": "w", "uid": "x"}),
            "root metadata is never pruned"
        );
        assert_eq!(obj["apiVersion"], "example.com/v1");
    }

    #[test]
    fn object_without_properties_prunes_everything() {
        let s = json!({"type": "object", "properties": {"spec": {"type": "object"}}});
        let mut obj = json!({"kind": "X", "spec": {"a": 1}});
        assert!(validate_and_prune(&s, &mut obj).is_empty());
        assert_eq!(obj["spec"], json!({}));
    }

    #[test]
    fn wrong_type_names_the_field_path() {
        let mut obj = base();
        obj["spec"]["replicas"] = json!("string");
        let (_, causes) = run(obj);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "spec.replicas");
        assert_eq!(causes[0].reason, "FieldValueTypeInvalid");
        assert_eq!(
            causes[0].message,
            "Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\""
        );
    }

    #[test]
    fn integers_are_numbers_without_fraction() {
        let mut obj = base();
        obj["spec"]["replicas"] = json!(2.0);
        assert!(run(obj.clone()).1.is_empty());
        obj["spec"]["replicas"] = json!(2.5);
        let (_, causes) = run(obj);
        assert!(causes[0].message.contains("must be of type integer: \"number\""));
    }

    #[test]
    fn missing_required_field_is_reported() {
        let mut obj = base();
        obj["spec"] = json!({"containers": [{"pull": "Always"}]});
        let (_, causes) = run(obj);
        let described: Vec<String> = causes.iter().map(Cause::describe).collect();
        assert_eq!(
            described,
            vec![
                "spec.image: Required value",
                "spec.containers[0].name: Required value"
            ]
        );
    }

    #[test]
    fn defaults_are_applied() {
        let mut obj = base();
        obj["spec"]["containers"] = json!([{"name": "a"}, {"name": "b", "pull": "Always"}]);
        let (obj, causes) = run(obj);
        assert!(causes.is_empty(), "{causes:?}");
        assert_eq!(obj["spec"]["replicas"], 1);
        assert_eq!(obj["spec"]["mode"], "safe");
        assert_eq!(obj["spec"]["containers"][0]["pull"], "IfNotPresent");
        assert_eq!(obj["spec"]["containers"][1]["pull"], "Always");
    }

    #[test]
    fn nested_defaults_apply_inside_defaulted_objects() {
        let s = json!({"type": "object", "properties": {"spec": {
            "type": "object", "default": {},
            "properties": {"size": {"type": "integer", "default": 3}}
        }}});
        let mut obj = json!({});
        assert!(validate_and_prune(&s, &mut obj).is_empty());
        assert_eq!(obj, json!({"spec": {"size": 3}}));
    }

    #[test]
    fn nulls_are_dropped_or_defaulted_unless_nullable() {
        let mut obj = base();
        obj["spec"]["replicas"] = Value::Null;
        obj["spec"]["note"] = Value::Null;
        obj["spec"]["when"] = Value::Null;
        let (obj, causes) = run(obj);
        assert!(causes.is_empty(), "{causes:?}");
        assert_eq!(obj["spec"]["replicas"], 1);
        assert_eq!(obj["spec"]["note"], Value::Null);
        assert!(obj["spec"].get("when").is_none());
    }

    #[test]
    fn enum_violation_lists_supported_values() {
        let mut obj = base();
        obj["spec"]["mode"] = json!("x");
        let (_, causes) = run(obj);
        assert_eq!(causes[0].reason, "FieldValueNotSupported");
        assert_eq!(
            causes[0].describe(),
            "spec.mode: Unsupported value: \"x\": supported values: \"fast\", \"safe\""
        );
    }

    #[test]
    fn bounds_lengths_and_patterns_are_checked() {
        let mut obj = base();
        obj["spec"]["replicas"] = json!(11);
        obj["spec"]["image"] = json!("");
        obj["spec"]["name"] = json!("Abcdef");
        obj["spec"]["containers"] = json!([{"name": "a"}, {"name": "b"}, {"name": "c"}]);
        let (_, causes) = run(obj);
        let described: Vec<String> = causes.iter().map(Cause::describe).collect();
        assert_eq!(
            described,
            vec![
                "spec.image: Invalid value: \"\": spec.image in body should be at least 1 chars long",
                "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10",
                "spec.name: Too long: may not be more than 5 bytes",
                "spec.name: Invalid value: \"Abcdef\": spec.name in body should match '^[a-z]+$'",
                "spec.containers: Too many: 3: must have at most 2 items",
            ]
        );
    }

    #[test]
    fn int_or_string_accepts_both() {
        for port in [json!(80), json!("http")] {
            let mut obj = base();
            obj["spec"]["port"] = port;
            assert!(run(obj).1.is_empty());
        }
        let mut obj = base();
        obj["spec"]["port"] = json!(true);
        let (_, causes) = run(obj);
        assert_eq!(causes[0].field, "spec.port");
    }

    #[test]
    fn date_time_format_is_checked() {
        let mut obj = base();
        obj["spec"]["when"] = json!("2024-01-02T03:04:05Z");
        assert!(run(obj.clone()).1.is_empty());
        obj["spec"]["when"] = json!("yesterday");
        let (_, causes) = run(obj);
        assert_eq!(
            causes[0].message,
            "Invalid value: \"yesterday\": spec.when in body must be of type date-time: \"yesterday\""
        );
    }

    #[test]
    fn embedded_resources_keep_type_and_metadata() {
        let s = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                         "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}
        }}}});
        let mut obj = json!({"spec": {"template": {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"x": 1}, "junk": 1
        }}});
        assert!(validate_and_prune(&s, &mut obj).is_empty());
        assert_eq!(
            obj["spec"]["template"],
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"x": 1}})
        );
        let mut missing_kind = json!({"spec": {"template": {"apiVersion": "v1"}}});
        let causes = validate_and_prune(&s, &mut missing_kind);
        assert_eq!(causes[0].field, "spec.template.kind");
    }

    #[test]
    fn combinators_are_evaluated() {
        let s = json!({"type": "object", "properties": {
            "a": {"type": "object", "properties": {"x": {"type": "string"}, "y": {"type": "string"}},
                  "oneOf": [{"required": ["x"]}, {"required": ["y"]}]},
            "b": {"type": "integer", "not": {"enum": [13]}},
            "c": {"type": "string", "anyOf": [{"enum": ["p"]}, {"pattern": "^q"}]},
            "d": {"type": "integer", "allOf": [{"minimum": 1}, {"maximum": 3}]}
        }});
        let mut ok = json!({"a": {"x": "1"}, "b": 12, "c": "quux", "d": 2});
        assert!(validate_and_prune(&s, &mut ok).is_empty());
        let mut bad = json!({"a": {"x": "1", "y": "2"}, "b": 13, "c": "z", "d": 4});
        let causes = validate_and_prune(&s, &mut bad);
        let messages: Vec<&str> = causes.iter().map(|c| c.message.as_str()).collect();
        assert!(messages
            .iter()
            .any(|m| m.ends_with("a in body must validate one and only one schema (oneOf)")));
        assert!(messages
            .iter()
            .any(|m| m.ends_with("b in body must not validate the schema (not)")));
        assert!(messages
            .iter()
            .any(|m| m.ends_with("c in body must validate at least one schema (anyOf)")));
        assert!(messages
            .iter()
            .any(|m| m.ends_with("d in body should be less than or equal to 3")));
    }

    #[test]
    fn unique_items_reports_duplicates() {
        let s = json!({"type": "object", "properties": {"l": {"type": "array", "uniqueItems": true, "items": {"type": "string"}}}});
        let mut obj = json!({"l": ["a", "b", "a"]});
        let causes = validate_and_prune(&s, &mut obj);
        assert_eq!(causes[0].describe(), "l[2]: Duplicate value: \"a\"");
    }
}

#[cfg(test)]
mod pruned_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pruned_fields_are_reported_with_their_paths() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "items": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            }}
        }});
        let mut obj = json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "n"},
            "spec": {"extra": 1, "items": [{"a": "ok", "b": 2}], "free": {"anything": true}}, "top": 3});
        let (causes, mut pruned) = validate_and_prune_reporting(&schema, &mut obj);
        assert!(causes.is_empty(), "{causes:?}");
        pruned.sort();
        assert_eq!(pruned, vec!["spec.extra", "spec.items[0].b", "top"]);
        assert_eq!(obj["spec"]["free"]["anything"], true);
        assert!(obj["spec"].get("extra").is_none());
    }
}
