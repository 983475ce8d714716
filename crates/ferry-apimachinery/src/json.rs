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

/// How deep objects and lists may nest: the depth `serde_json` reads back
/// (its recursion limit), so whatever is stored can be read again, and every
/// recursive walk over a stored object stays this shallow.
pub const MAX_DEPTH: usize = 128;

/// Where `v` nests objects or lists more than `limit` deep (the top-level
/// object is depth 1): the path of the first member that does, as
/// `spec.a[0].b`. Iterative, so any depth is measured without recursion.
pub fn too_deep(v: &Value, limit: usize) -> Option<String> {
    // A first pass without paths: every write pays for it.
    if depth(v) <= limit {
        return None;
    }
    // (a container, how many containers hold it, its path)
    let mut stack: Vec<(&Value, usize, String)> = vec![(v, 0, String::new())];
    while let Some((here, above, path)) = stack.pop() {
        if depth_of_one(here) == 0 {
            continue;
        }
        if above + 1 > limit {
            return Some(path);
        }
        match here {
            Value::Object(m) => stack.extend(m.iter().map(|(k, c)| {
                let step = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                (c, above + 1, step)
            })),
            Value::Array(a) => stack.extend(
                a.iter()
                    .enumerate()
                    .map(|(i, c)| (c, above + 1, format!("{path}[{i}]"))),
            ),
            _ => {}
        }
    }
    None
}

fn depth_of_one(v: &Value) -> usize {
    usize::from(v.is_object() || v.is_array())
}

/// How deep `v` nests objects and lists (a scalar: 0), without recursion.
pub fn depth(v: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(v, 1)];
    while let Some((here, d)) = stack.pop() {
        match here {
            Value::Object(m) => {
                deepest = deepest.max(d);
                stack.extend(m.values().map(|c| (c, d + 1)));
            }
            Value::Array(a) => {
                deepest = deepest.max(d);
                stack.extend(a.iter().map(|c| (c, d + 1)));
            }
            _ => {}
        }
    }
    deepest
}

/// Drop `v` without recursion: serde_json's `Drop` recurses once per level,
/// so a value built deeper than the stack allows (by a walker gone wrong)
/// must be taken apart level by level.
pub fn drop_flat(v: Value) {
    let mut stack = vec![v];
    while let Some(mut here) = stack.pop() {
        match &mut here {
            Value::Object(m) => stack.extend(std::mem::take(m).into_iter().map(|(_, c)| c)),
            Value::Array(a) => stack.append(a),
            _ => {}
        }
    }
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

    #[test]
    fn depth_is_measured_without_recursion_and_names_where() {
        assert_eq!(too_deep(&json!({"a": {"b": [1]}}), 3), None);
        assert_eq!(too_deep(&json!({"a": {"b": [1]}}), 2), Some("a.b".into()));
        assert_eq!(too_deep(&json!({"a": [{"b": 1}]}), 2), Some("a[0]".into()));
        // Built by moves: `json!` would serialise (recursively) what it is given.
        let mut deep = Value::String("x".into());
        for _ in 0..100_000 {
            let mut m = Map::new();
            m.insert("a".into(), Value::Array(vec![deep]));
            deep = Value::Object(m);
        }
        let at = too_deep(&deep, MAX_DEPTH).unwrap();
        assert!(at.starts_with("a[0].a[0]"), "{at}");
        drop_flat(deep);
    }
}
