//! Typed decoding at the boundary: what a client sends must decode as the
//! Kubernetes type it claims to be before anything else touches it:
//! `metadata` (as k8s-openapi's `ObjectMeta`) for every kind, and the whole
//! object of built-in kinds ([`typed`], [`decode_typed`], with
//! `fieldValidation`). A wrong type is kube-apiserver's 400 BadRequest
//! naming the Go field path, and nothing is stored.

pub mod typed;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use crate::json::type_name;
use crate::registry::ResourceInfo;
use crate::status::ApiError;

/// Check that `obj.metadata` (when present) decodes as `ObjectMeta`.
/// `kind`/`version` name the object in the message, as kube-apiserver does:
/// `ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot
/// unmarshal string into Go struct field ObjectMeta.metadata.finalizers of
/// type []string`.
pub fn check_metadata(obj: &Value, kind: &str, version: &str) -> Result<(), ApiError> {
    let Some(meta) = obj.get("metadata") else {
        return Ok(());
    };
    let prefix = format!("{kind} in version {version:?} cannot be handled as a {kind}");
    if !meta.is_object() && !meta.is_null() {
        return Err(ApiError::bad_request(format!(
            "{prefix}: json: cannot unmarshal {} into Go struct field {kind}.metadata of type v1.ObjectMeta",
            go_name(meta)
        )));
    }
    match serde_path_to_error::deserialize::<_, ObjectMeta>(meta) {
        Ok(_) => Ok(()),
        Err(e) => {
            let path = e.path().to_string();
            let inner = e.into_inner().to_string();
            let field = path.split(['.', '[']).next().unwrap_or_default();
            let found = value_at(meta, &path).map(go_name).unwrap_or("value");
            let message = match go_type(field, path.len() > field.len()) {
                Some(ty) => format!(
                    "json: cannot unmarshal {found} into Go struct field ObjectMeta.metadata.{field} of type {ty}"
                ),
                // Not a type mismatch of a known field (a bad timestamp, ...).
                None => format!("metadata.{path}: {inner}"),
            };
            Err(ApiError::bad_request(format!("{prefix}: {message}")))
        }
    }
}

/// A write's `metadata.managedFields`, set aside while the rest of its metadata
/// is decoded, when they are exactly the stored object's: the hub wrote and
/// checked those. Decoding them again on every patch was a sixth of a kcp TMC
/// hub's time, where an object a hundred syncers patch carries a hundred
/// entries. [`UncheckedManagedFields::put_back`] returns them to where they were.
pub struct UncheckedManagedFields(Option<(usize, Value)>);

impl UncheckedManagedFields {
    pub fn set_aside(new: &mut Value, old: Option<&Value>) -> UncheckedManagedFields {
        const KEY: &str = "managedFields";
        let Some(stored) = old.and_then(|o| o.get("metadata")).and_then(|m| m.get(KEY)) else {
            return UncheckedManagedFields(None);
        };
        let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) else {
            return UncheckedManagedFields(None);
        };
        match meta.keys().position(|k| k == KEY) {
            Some(at) if meta.get(KEY) == Some(stored) => {
                UncheckedManagedFields(meta.shift_remove(KEY).map(|fields| (at, fields)))
            }
            _ => UncheckedManagedFields(None),
        }
    }

    pub fn put_back(self, new: &mut Value) {
        let Some((at, fields)) = self.0 else {
            return;
        };
        if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
            let at = at.min(meta.len());
            meta.shift_insert(at, "managedFields".into(), fields);
        }
    }
}

/// What a write does with fields a built-in kind does not know: the
/// `fieldValidation` query parameter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FieldValidation {
    /// Drop them silently.
    Ignore,
    /// Drop them and warn (`Warning` header) for each; kube-apiserver's default.
    #[default]
    Warn,
    /// Refuse the write (400).
    Strict,
}

impl FieldValidation {
    pub fn parse(v: &str) -> Result<FieldValidation, ApiError> {
        match v {
            "Ignore" => Ok(FieldValidation::Ignore),
            "Warn" | "" => Ok(FieldValidation::Warn),
            "Strict" => Ok(FieldValidation::Strict),
            other => Err(ApiError::bad_request(format!(
                "fieldValidation: invalid value {other:?}; valid values are Ignore, Warn and Strict"
            ))),
        }
    }
}

/// Decode a built-in object as its typed form (a wrong type is kube-apiserver's
/// 400 naming the Go field) and handle the fields the type does not know,
/// and the `duplicates` the body repeated, as `validation` says: refused
/// (Strict, 400 `strict decoding error: unknown field "spec.x", duplicate
/// field "spec.y"`), or dropped from `obj` with (Warn) or without (Ignore)
/// a warning each. Returns the warnings.
pub fn decode_typed(
    obj: &mut Value,
    group: &str,
    kind: &str,
    version: &str,
    validation: FieldValidation,
    duplicates: &[String],
) -> Result<Vec<String>, ApiError> {
    let unknown = typed::decode(obj, group, kind, version).map_err(|e| {
        ApiError::bad_request(format!(
            "{kind} in version {version:?} cannot be handled as a {kind}: {}",
            e.message
        ))
    })?;
    let described: Vec<String> = unknown
        .iter()
        .map(|p| format!("unknown field {:?}", typed::field_path(p)))
        .collect();
    let warnings = field_report(described, duplicates, validation).map_err(ApiError::bad_request)?;
    // Only map keys are removed, so no removal moves another unknown field.
    for path in unknown.iter().rev() {
        typed::remove_at(obj, path);
    }
    Ok(warnings)
}

/// What `validation` makes of unknown fields (`described`) and fields the
/// body repeated: the strict decoding error, or the warnings to send.
pub fn field_report(
    mut described: Vec<String>,
    duplicates: &[String],
    validation: FieldValidation,
) -> Result<Vec<String>, String> {
    described.extend(duplicates.iter().map(|d| format!("duplicate field {d:?}")));
    match validation {
        FieldValidation::Strict if !described.is_empty() => {
            Err(format!("strict decoding error: {}", described.join(", ")))
        }
        FieldValidation::Warn => Ok(described),
        _ => Ok(Vec::new()),
    }
}

/// The fields a JSON body names twice in one object, as paths
/// (`metadata.name`, `spec.containers[0].image`): a parsed `Value` keeps
/// only the last, so this reads the bytes. Not JSON: none.
pub fn duplicate_fields(body: &[u8]) -> Vec<String> {
    use serde::de::DeserializeSeed;
    let found = std::cell::RefCell::new(Vec::new());
    let mut de = serde_json::Deserializer::from_slice(body);
    let _ = Walk {
        path: String::new(),
        found: &found,
    }
    .deserialize(&mut de);
    found.into_inner()
}

/// A walk over a JSON document that records repeated keys.
struct Walk<'a> {
    path: String,
    found: &'a std::cell::RefCell<Vec<String>>,
}

impl<'de> serde::de::DeserializeSeed<'de> for Walk<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        while seq
            .next_element_seed(Walk {
                path: format!("{}[{i}]", self.path),
                found: self.found,
            })?
            .is_some()
        {
            i += 1;
        }
        Ok(())
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = if self.path.is_empty() {
                key.clone()
            } else {
                format!("{}.{key}", self.path)
            };
            if !seen.insert(key) {
                self.found.borrow_mut().push(path.clone());
            }
            map.next_value_seed(Walk {
                path,
                found: self.found,
            })?;
        }
        Ok(())
    }
}

/// Parse a JSON (or, when `yaml`, YAML) body into an object.
pub fn object_from_bytes(body: &[u8], yaml: bool) -> Result<Value, ApiError> {
    if body.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(ApiError::bad_request(
            "the request body is empty; send the object as JSON or YAML",
        ));
    }
    // A YAML body that is JSON (what kube-rs, client-go and kubectl send for a
    // server-side apply) reads the same through the JSON parser, in a fifteenth of
    // the time; a repeated field there is reported by `duplicate_fields`.
    let json = yaml && body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    let value: Value = if let Some(value) = json.then(|| serde_json::from_slice(body).ok()).flatten() {
        value
    } else if yaml {
        let text = std::str::from_utf8(body)
            .map_err(|e| ApiError::bad_request(format!("the request body is not UTF-8: {e}")))?;
        serde_saphyr::from_str(text)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding JSON: {e}")))?
    };
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON or YAML object",
        ));
    }
    Ok(value)
}

/// Check (and fill in, when absent) `apiVersion` and `kind` against the URL.
pub fn check_type(
    obj: &mut Value,
    info: &ResourceInfo,
    kind: &str,
    api_version: &str,
) -> Result<(), ApiError> {
    let map = obj
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("the request body must be a JSON or YAML object"))?;
    match map.get("apiVersion").and_then(Value::as_str) {
        None => {
            map.insert("apiVersion".into(), Value::String(api_version.into()));
        }
        Some(v) if v == api_version => {}
        Some(v) => {
            // Any served version of the same group is accepted; stored as requested.
            let group_of = |av: &str| {
                av.rsplit_once('/')
                    .map(|(g, _)| g.to_string())
                    .unwrap_or_default()
            };
            if group_of(v) != info.group {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({v}) does not match the expected API version ({api_version})"
                )));
            }
            map.insert("apiVersion".into(), Value::String(api_version.into()));
        }
    }
    match map.get("kind").and_then(Value::as_str) {
        None => {
            map.insert("kind".into(), Value::String(kind.into()));
        }
        Some(k) if k == kind => {}
        Some(k) => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({kind}) for {}",
                info.resource
            )))
        }
    }
    if !map.get("metadata").is_none_or(Value::is_object) {
        return Err(ApiError::bad_request("metadata must be an object"));
    }
    if map.get("metadata").is_none() {
        map.insert("metadata".into(), Value::Object(Default::default()));
    }
    Ok(())
}

/// The value at a `serde_path_to_error` path (`labels.a`, `finalizers[0]`).
fn value_at<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = v;
    for part in path.split('.') {
        let (name, indexes) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !name.is_empty() {
            cur = cur.get(name)?;
        }
        for index in indexes.split('[').filter(|s| !s.is_empty()) {
            cur = cur.get(index.trim_end_matches(']').parse::<usize>().ok()?)?;
        }
    }
    Some(cur)
}

/// How Go's encoding/json names the JSON type it found.
fn go_name(v: &Value) -> &'static str {
    match v {
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Bool(_) => "bool",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::Null => type_name(v),
    }
}

/// The Go type of `ObjectMeta.<field>` (or of its elements when `nested`),
/// for the fields whose type a client can get wrong.
fn go_type(field: &str, nested: bool) -> Option<&'static str> {
    Some(match (field, nested) {
        ("labels" | "annotations", false) => "map[string]string",
        ("labels" | "annotations" | "finalizers", true) => "string",
        ("finalizers", false) => "[]string",
        ("ownerReferences", false) => "[]v1.OwnerReference",
        ("managedFields", false) => "[]v1.ManagedFieldsEntry",
        ("generation" | "deletionGracePeriodSeconds", false) => "int64",
        ("name" | "generateName" | "namespace" | "selfLink" | "uid" | "resourceVersion", false) => "string",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A JSON body sent as YAML (a server-side apply) reads as the YAML parser
    /// reads it; YAML that only starts like JSON still goes to the YAML parser.
    #[test]
    fn a_json_body_sent_as_yaml_reads_as_yaml_would() {
        let body = br#" {"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","labels":{"app":"caf\u00e9"}},
            "spec":{"replicas":3,"progressDeadlineSeconds":600,"paused":false,"minReadySeconds":0,
            "template":{"spec":{"containers":[{"name":"c","image":"nginx:1.27","args":["-c","a \"b\""],
            "resources":{"limits":{"cpu":"500m","memory":1.5e3}}}],"nodeSelector":null}}}} "#;
        let via_yaml: Value = serde_saphyr::from_str(std::str::from_utf8(body).unwrap()).unwrap();
        assert_eq!(object_from_bytes(body, true).unwrap(), via_yaml);
        assert_eq!(object_from_bytes(body, false).unwrap(), via_yaml);
        let flow = b"{apiVersion: v1, kind: ConfigMap, metadata: {name: flow}}";
        assert_eq!(object_from_bytes(flow, true).unwrap()["metadata"]["name"], "flow");
        assert!(
            object_from_bytes(br#"{"a":1,"a":2}"#, true).is_ok(),
            "a repeated field is reported elsewhere"
        );
    }

    fn message(obj: Value) -> String {
        check_metadata(&obj, "ConfigMap", "v1").unwrap_err().message
    }

    #[test]
    fn wrong_types_name_the_go_field() {
        assert_eq!(
            message(json!({"metadata": {"name": "e", "finalizers": "x"}})),
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal string \
             into Go struct field ObjectMeta.metadata.finalizers of type []string"
        );
        assert!(message(json!({"metadata": "oops"})).ends_with(
            "cannot unmarshal string into Go struct field ConfigMap.metadata of type v1.ObjectMeta"
        ));
        assert!(message(json!({"metadata": {"labels": {"a": 1}}})).ends_with(
            "cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string"
        ));
        assert!(
            message(json!({"metadata": {"creationTimestamp": "yesterday"}})).contains("creationTimestamp")
        );
    }

    #[test]
    fn well_typed_metadata_passes() {
        let ok = json!({"metadata": {"name": "a", "labels": {"x": "y"}, "finalizers": ["f"],
                        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u"}],
                        "unknownField": 1}});
        assert!(check_metadata(&ok, "ConfigMap", "v1").is_ok());
        assert!(check_metadata(&json!({}), "ConfigMap", "v1").is_ok());
    }

    #[test]
    fn only_the_stored_objects_own_managed_fields_go_unchecked_and_come_back_in_place() {
        let fields = json!([{"manager": "m", "operation": "Update", "fieldsType": "FieldsV1",
                             "fieldsV1": {"f:data": {"f:a": {}}}}]);
        let stored =
            json!({"metadata": {"name": "a", "managedFields": fields, "uid": "u"}, "data": {"a": "1"}});
        // A patch that left them alone: set aside, then back where they stood.
        let mut patched =
            json!({"metadata": {"name": "a", "managedFields": fields, "uid": "u"}, "data": {"a": "2"}});
        let before = serde_json::to_string(&patched).unwrap();
        let aside = UncheckedManagedFields::set_aside(&mut patched, Some(&stored));
        assert_eq!(patched["metadata"].get("managedFields"), None);
        aside.put_back(&mut patched);
        assert_eq!(serde_json::to_string(&patched).unwrap(), before);
        // Changed by the client, or a create: checked as they are.
        for (mut new, old) in [
            (json!({"metadata": {"managedFields": "oops"}}), Some(&stored)),
            (
                json!({"metadata": {"managedFields": [{"manager": 5}]}}),
                Some(&stored),
            ),
            (json!({"metadata": {"managedFields": fields}}), None),
        ] {
            let aside = UncheckedManagedFields::set_aside(&mut new, old);
            assert!(new["metadata"].get("managedFields").is_some(), "{new}");
            aside.put_back(&mut new);
        }
        let mut wrong = json!({"metadata": {"managedFields": "oops"}});
        let aside = UncheckedManagedFields::set_aside(&mut wrong, Some(&stored));
        assert!(check_metadata(&wrong, "ConfigMap", "v1").is_err());
        aside.put_back(&mut wrong);
    }
}

#[cfg(test)]
mod duplicate_tests {
    use super::*;

    #[test]
    fn repeated_keys_are_found_at_every_depth_and_reported_as_validation_says() {
        let body = br#"{"metadata":{"name":"a","name":"b"},"spec":{"containers":[{"image":"x","image":"y"}],"replicas":1},"spec2":{},"kind":"K","kind":"K"}"#;
        assert_eq!(
            duplicate_fields(body),
            vec!["metadata.name", "spec.containers[0].image", "kind"]
        );
        assert!(duplicate_fields(br#"{"a":{"b":1},"c":{"b":2}}"#).is_empty());
        assert!(duplicate_fields(b"not json").is_empty());
        let dups = vec!["spec.replicas".to_string()];
        let strict = field_report(
            vec!["unknown field \"spec.x\"".into()],
            &dups,
            FieldValidation::Strict,
        )
        .unwrap_err();
        assert_eq!(
            strict,
            r#"strict decoding error: unknown field "spec.x", duplicate field "spec.replicas""#
        );
        assert_eq!(
            field_report(Vec::new(), &dups, FieldValidation::Warn).unwrap(),
            vec![r#"duplicate field "spec.replicas""#]
        );
        assert!(field_report(Vec::new(), &dups, FieldValidation::Ignore)
            .unwrap()
            .is_empty());
    }
}
