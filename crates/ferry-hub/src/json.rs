//! Checked edits of JSON objects. Objects come from clients, so any step of a
//! path may hold the wrong type (`"metadata": "oops"`); `serde_json`'s
//! `v["a"]["b"] = x` panics there. These helpers create missing (or null)
//! objects along the way and answer a [`PathError`] naming the step that is
//! not an object.

use serde_json::{Map, Value};

use crate::status::ApiError;

/// A step of a path holds something other than an object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path} must be an object, not {found}")]
pub struct PathError {
    /// The dotted path of the offending value (`metadata`, `spec.template`).
    pub path: String,
    /// What is there instead (`a string`, `an array`, ...).
    pub found: &'static str,
}

impl From<PathError> for ApiError {
    fn from(e: PathError) -> ApiError {
        ApiError::bad_request(e.to_string())
    }
}

/// `a string`, `an array`, ... for messages.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The object at `path` inside `v` (`[]`: `v` itself), created (as are the
/// objects above it) when missing or null.
pub fn object_mut<'a>(v: &'a mut Value, path: &[&str]) -> Result<&'a mut Map<String, Value>, PathError> {
    let mut cur = v;
    for (i, step) in path.iter().enumerate() {
        let map = as_object(cur, &path[..i])?;
        cur = map.entry(step.to_string()).or_insert(Value::Null);
    }
    as_object(cur, path)
}

fn as_object<'a>(v: &'a mut Value, path: &[&str]) -> Result<&'a mut Map<String, Value>, PathError> {
    if v.is_null() {
        *v = Value::Object(Map::new());
    }
    match v {
        Value::Object(m) => Ok(m),
        other => Err(PathError {
            path: if path.is_empty() {
                "the object".into()
            } else {
                path.join(".")
            },
            found: type_name(other),
        }),
    }
}

/// Set `path` (at least one step) inside `v` to `value`.
pub fn set(v: &mut Value, path: &[&str], value: Value) -> Result<(), PathError> {
    let Some((last, parents)) = path.split_last() else {
        *v = value;
        return Ok(());
    };
    object_mut(v, parents)?.insert(last.to_string(), value);
    Ok(())
}

/// Remove `path` inside `v`, if it is there; returns what was removed.
pub fn remove(v: &mut Value, path: &[&str]) -> Option<Value> {
    let (last, parents) = path.split_last()?;
    let mut cur = v;
    for step in parents {
        cur = cur.get_mut(*step)?;
    }
    cur.as_object_mut()?.remove(*last)
}

/// The string at `pointer`, or `""`.
pub fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn set_creates_missing_and_null_objects() {
        let mut v = json!({"metadata": null});
        set(&mut v, &["metadata", "labels", "a"], json!("b")).unwrap();
        set(&mut v, &["spec", "replicas"], json!(1)).unwrap();
        assert_eq!(
            v,
            json!({"metadata": {"labels": {"a": "b"}}, "spec": {"replicas": 1}})
        );
    }

    #[test]
    fn wrong_types_are_errors_naming_the_path() {
        let mut v = json!({"metadata": "oops", "spec": {"template": [1]}});
        let e = set(&mut v, &["metadata", "name"], json!("x")).unwrap_err();
        assert_eq!(e.to_string(), "metadata must be an object, not a string");
        let e = object_mut(&mut v, &["spec", "template", "spec"]).unwrap_err();
        assert_eq!(e.path, "spec.template");
        let e = object_mut(&mut json!(5), &[]).unwrap_err();
        assert_eq!(e.to_string(), "the object must be an object, not a number");
    }

    #[test]
    fn remove_tolerates_anything() {
        let mut v = json!({"metadata": "oops", "a": {"b": 1}});
        assert_eq!(remove(&mut v, &["metadata", "name"]), None);
        assert_eq!(remove(&mut v, &["a", "b"]), Some(json!(1)));
        assert_eq!(v, json!({"metadata": "oops", "a": {}}));
    }
}
