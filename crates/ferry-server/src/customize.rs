//! Customization: what makes one workload object's copies differ from
//! destination to destination, as KubeStellar v0.x defined it. Pure.
//!
//! - **Parameter expansion**: an object annotated
//!   `edge.kubestellar.io/expand-parameters: "true"` has every `%(name)` in its
//!   string values replaced by the destination's value for `name`: a label,
//!   then an annotation, of the Location the destination was selected
//!   through (KubeStellar's order), then of its SyncTarget (Ferry's
//!   addition). `%%` stands for a literal `%`; a `%` before anything else is
//!   kept. Values are expanded, never keys; in `metadata` only label and
//!   annotation values are (the name, namespace and kind say which object the
//!   copy is, on every destination alike).
//! - **Customizer**: an object annotated `edge.kubestellar.io/customizer: <name>`
//!   gets that Customizer's replacements (JSON values at paths); a Customizer
//!   that itself opts in to expansion has its paths and values expanded first.
//!   Expansion of the object comes first, then the replacements.
//!
//! Unlike KubeStellar (which leaves an unknown `%(name)` in place and logs),
//! every problem is an error naming where it is, so the translator can say so
//! and keep the copy it had.
//!
//! A Customizer's size is bounded ([`limit_causes`], checked when it is
//! written; KubeStellar has no limits): at most [`MAX_REPLACEMENTS`]
//! replacements, paths of at most [`MAX_PATH_BYTES`] bytes and
//! [`MAX_PATH_STEPS`] steps, values of at most [`MAX_VALUE_BYTES`] bytes.
//! The translator applies the same step limit to paths after expansion and
//! to Customizers an older hub stored, and walks paths without recursion.

use std::collections::BTreeMap;
use std::fmt;

use ferry_api::well_known::{EXPAND_PARAMETERS_ANNOTATION, LAST_APPLIED_CONFIG_ANNOTATION};
use serde_json::Value;

use crate::status::Cause;

/// Most replacements one Customizer holds.
pub const MAX_REPLACEMENTS: usize = 256;
/// Longest replacement path, in bytes.
pub const MAX_PATH_BYTES: usize = 1024;
/// Most steps in a replacement path: a customized copy stays far shallower
/// than what the hub stores ([`crate::json::MAX_DEPTH`]).
pub const MAX_PATH_STEPS: usize = 64;
/// Longest replacement value (JSON text), in bytes.
pub const MAX_VALUE_BYTES: usize = 64 * 1024;

/// What is over the limits in a Customizer about to be stored: kube's
/// `Too many` / `Too long` causes naming the field.
pub fn limit_causes(obj: &Value) -> Vec<Cause> {
    let Some(replacements) = obj.get("replacements").and_then(Value::as_array) else {
        return Vec::new();
    };
    let mut causes = Vec::new();
    if replacements.len() > MAX_REPLACEMENTS {
        causes.push(Cause::too_many(
            "replacements",
            replacements.len(),
            MAX_REPLACEMENTS,
        ));
        return causes;
    }
    for (i, r) in replacements.iter().enumerate() {
        if let Some(path) = r.get("path").and_then(Value::as_str) {
            let field = format!("replacements[{i}].path");
            if path.len() > MAX_PATH_BYTES {
                causes.push(Cause::too_long(field, MAX_PATH_BYTES));
            } else if let Some(message) = too_many_steps(path) {
                causes.push(Cause {
                    reason: "FieldValueTooMany".into(),
                    field,
                    message,
                });
            }
        }
        if r.get("value")
            .and_then(Value::as_str)
            .is_some_and(|v| v.len() > MAX_VALUE_BYTES)
        {
            causes.push(Cause::too_long(
                format!("replacements[{i}].value"),
                MAX_VALUE_BYTES,
            ));
        }
    }
    causes
}

/// kube's `Too many` for a path of more than [`MAX_PATH_STEPS`] steps
/// (counted as the parser counts them; a path that does not parse is the
/// translator's to report).
fn too_many_steps(path: &str) -> Option<String> {
    match parse_steps(path) {
        Ok(steps) if steps.len() > MAX_PATH_STEPS => Some(format!(
            "Too many: {}: must have at most {MAX_PATH_STEPS} items (path steps)",
            steps.len()
        )),
        _ => None,
    }
}

/// `path` as messages show it: long ones cut short.
fn shown(path: &str) -> String {
    const SHOWN: usize = 80;
    match path.char_indices().nth(SHOWN) {
        Some((at, _)) => format!("{}…", &path[..at]),
        None => path.to_string(),
    }
}

/// A destination's parameter values: the Location's and SyncTarget's labels and annotations.
#[derive(Debug, Clone, Copy)]
pub struct Parameters<'a> {
    /// Looked up in this order; the first that has the key wins.
    pub sources: [&'a BTreeMap<String, String>; 4],
}

impl Parameters<'_> {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.sources.iter().find_map(|s| s.get(name)).map(String::as_str)
    }
}

/// Why a string could not be expanded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExpandError {
    /// `%(name)` with no such label or annotation.
    Undefined(String),
    /// `%(` with no `)` after it.
    Unterminated(String),
    /// `%(...)` holding something that is no label or annotation key.
    InvalidName(String),
}

impl fmt::Display for ExpandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExpandError::Undefined(n) => write!(
                f,
                "parameter %({n}) is not defined: give the Location or SyncTarget a label or annotation {n}"
            ),
            ExpandError::Unterminated(rest) => write!(
                f,
                "unterminated parameter reference %({rest}: close it with ')', or write %%( for a literal %("
            ),
            ExpandError::InvalidName(n) => write!(
                f,
                "%({n}) is not a parameter reference (a label or annotation key); write %%( for a literal %("
            ),
        }
    }
}

/// Whether `name` can be a label or annotation key (`prefix/name`, with
/// letters, digits, `-`, `_` and `.`).
fn is_key(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

/// `input` with `%%` made `%` and every `%(name)` made `name`'s value.
pub fn expand_str(input: &str, params: &Parameters) -> Result<String, ExpandError> {
    if !input.contains('%') {
        return Ok(input.to_string());
    }
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('%') {
            out.push('%');
            rest = tail;
        } else if let Some(body) = after.strip_prefix('(') {
            let Some(end) = body.find(')') else {
                return Err(ExpandError::Unterminated(body.to_string()));
            };
            let name = &body[..end];
            if !is_key(name) {
                return Err(ExpandError::InvalidName(name.to_string()));
            }
            let value = params
                .get(name)
                .ok_or_else(|| ExpandError::Undefined(name.to_string()))?;
            out.push_str(value);
            rest = &body[end + 1..];
        } else {
            out.push('%');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// A problem customizing one copy, for the placement's condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CustomizeError {
    /// Expanding the object's string at `at` (a path like `data["index.html"]`).
    Expand { at: String, error: ExpandError },
    /// The object names a Customizer that does not exist (`namespace/name`).
    MissingCustomizer(String),
    /// The Customizer's replacement at `path` cannot be applied.
    Replacement {
        customizer: String,
        path: String,
        message: String,
    },
}

impl fmt::Display for CustomizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CustomizeError::Expand { at, error } => write!(f, "{error} (at {at})"),
            CustomizeError::MissingCustomizer(c) => {
                write!(
                    f,
                    "Customizer {c} does not exist: create it or fix the annotation"
                )
            }
            CustomizeError::Replacement {
                customizer,
                path,
                message,
            } => write!(
                f,
                "Customizer {customizer}, replacement {}: {message}",
                shown(path)
            ),
        }
    }
}

/// A Customizer as the translator applies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Customizer {
    /// `namespace/name`, for messages.
    pub id: String,
    /// Whether its paths and values are expanded first.
    pub expand: bool,
    /// `(path, JSON value)`.
    pub replacements: Vec<(String, String)>,
}

impl Customizer {
    /// From a stored Customizer; a malformed replacement list reads as empty
    /// (the schema keeps it well-formed).
    pub fn from_object(id: &str, obj: &Value) -> Customizer {
        let replacements = obj
            .get("replacements")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|r| {
                Some((
                    r.get("path")?.as_str()?.to_string(),
                    r.get("value")?.as_str()?.to_string(),
                ))
            })
            .collect();
        Customizer {
            id: id.to_string(),
            expand: opted_in(obj),
            replacements,
        }
    }
}

/// Whether `obj` carries `edge.kubestellar.io/expand-parameters: "true"`.
pub fn opted_in(obj: &Value) -> bool {
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get(EXPAND_PARAMETERS_ANNOTATION))
        .and_then(Value::as_str)
        == Some("true")
}

/// Customize `copy` (a mailbox copy, without status) for one destination:
/// expand it when `expand`, then apply `customizer`.
pub fn customize(
    copy: &mut Value,
    expand: bool,
    customizer: Option<&Customizer>,
    params: &Parameters,
) -> Result<(), CustomizeError> {
    if expand {
        expand_object(copy, params)?;
    }
    if let Some(c) = customizer {
        for (path, value) in &c.replacements {
            let fail = |message: String| CustomizeError::Replacement {
                customizer: c.id.clone(),
                path: path.clone(),
                message,
            };
            let (path_x, value_x) = if c.expand {
                (
                    expand_str(path, params).map_err(|e| fail(e.to_string()))?,
                    expand_str(value, params).map_err(|e| fail(e.to_string()))?,
                )
            } else {
                (path.clone(), value.clone())
            };
            let steps = parse_path(&path_x).map_err(fail)?;
            let new: Value = serde_json::from_str(&value_x).map_err(|e| {
                fail(format!(
                    "value {value_x:?} is not JSON ({e}); a string is written with quotes, e.g. '\"text\"'"
                ))
            })?;
            if matches!(steps.first(), Some(Step::Key(k)) if k == "metadata") && !new.is_string() {
                return Err(fail(format!(
                    "label and annotation values are strings; write '\"{value_x}\"'"
                )));
            }
            replace(copy, &steps, new, "$").map_err(fail)?;
        }
    }
    Ok(())
}

/// Expand every string value of the object but those that name it.
fn expand_object(obj: &mut Value, params: &Parameters) -> Result<(), CustomizeError> {
    let Some(o) = obj.as_object_mut() else {
        return Ok(());
    };
    for (key, value) in o.iter_mut() {
        match key.as_str() {
            "apiVersion" | "kind" | "status" => {}
            "metadata" => {
                for part in ["labels", "annotations"] {
                    let Some(m) = value.get_mut(part).and_then(Value::as_object_mut) else {
                        continue;
                    };
                    for (k, v) in m.iter_mut() {
                        // What the user applied in the WMW, kept as applied.
                        if k == LAST_APPLIED_CONFIG_ANNOTATION {
                            continue;
                        }
                        let at = child(&format!("metadata.{part}"), k);
                        expand_value(v, &at, params)?;
                    }
                }
            }
            _ => expand_value(value, &child("", key), params)?,
        }
    }
    Ok(())
}

/// The path of member `key` under `at` (`""`: the object itself), e.g.
/// `spec.template` or `data["index.html"]`.
fn child(at: &str, key: &str) -> String {
    let step = step_name(key);
    match step.strip_prefix('.') {
        Some(bare) if at.is_empty() => bare.to_string(),
        _ => format!("{at}{step}"),
    }
}

fn step_name(key: &str) -> String {
    if !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        format!(".{key}")
    } else {
        format!("[{key:?}]")
    }
}

fn expand_value(v: &mut Value, at: &str, params: &Parameters) -> Result<(), CustomizeError> {
    match v {
        Value::String(s) => {
            *s = expand_str(s, params).map_err(|error| CustomizeError::Expand {
                at: at.to_string(),
                error,
            })?;
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                expand_value(item, &format!("{at}[{i}]"), params)?;
            }
        }
        Value::Object(m) => {
            for (k, item) in m.iter_mut() {
                expand_value(item, &child(at, k), params)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// One step of a replacement path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// `.name` or `['name']`; digits after a dot also index a list.
    Key(String),
    /// `[n]`.
    Index(usize),
}

/// Parse `$.a.b[0]['c.d'].0`: at most [`MAX_PATH_STEPS`] steps, and none
/// that would change which object the copy is.
pub fn parse_path(path: &str) -> Result<Vec<Step>, String> {
    let steps = parse_steps(path)?;
    if steps.len() > MAX_PATH_STEPS {
        return Err(format!(
            "path {:?} has {} steps, more than the limit of {MAX_PATH_STEPS}",
            shown(path),
            steps.len()
        ));
    }
    match steps.first() {
        None => Err(format!(
            "path {:?} names the whole object; write it as $.spec.name, with [0] for list items and ['a.b'] for keys with dots",
            shown(path)
        )),
        Some(Step::Key(k)) if k == "apiVersion" || k == "kind" => {
            Err(format!("path {:?} would change which kind the copy is", shown(path)))
        }
        Some(Step::Key(k)) if k == "metadata" => match (steps.get(1), steps.get(2), steps.len()) {
            (Some(Step::Key(k)), Some(Step::Key(_)), 3) if k == "labels" || k == "annotations" => Ok(steps),
            _ => Err(format!(
                "path {:?}: in metadata a Customizer may set only single labels and annotations, \
                 e.g. $.metadata.labels.tier",
                shown(path)
            )),
        },
        _ => Ok(steps),
    }
}

/// The steps of a path, however many.
fn parse_steps(path: &str) -> Result<Vec<Step>, String> {
    let bad = |why: &str| {
        format!(
            "path {:?} {why}; write it as $.spec.name, with [0] for list items and ['a.b'] for keys with dots",
            shown(path)
        )
    };
    let Some(mut rest) = path.strip_prefix('$') else {
        return Err(bad("does not start with $"));
    };
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let name = &r[..end];
            if name.is_empty() {
                return Err(bad("has an empty step"));
            }
            if name.contains(['*', ']', '\'', '"']) {
                return Err(bad("uses a form Ferry does not support (only names and indexes)"));
            }
            steps.push(Step::Key(name.to_string()));
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']').ok_or_else(|| bad("has a [ without ]"))?;
            let inner = r[..end].trim();
            let quoted = ['\'', '"']
                .iter()
                .find_map(|q| inner.strip_prefix(*q)?.strip_suffix(*q));
            match (quoted, inner.parse::<usize>()) {
                (Some(name), _) => steps.push(Step::Key(name.to_string())),
                (None, Ok(i)) => steps.push(Step::Index(i)),
                (None, Err(_)) => {
                    return Err(bad("uses a form Ferry does not support (only names and indexes)"))
                }
            }
            rest = &r[end + 1..];
        } else {
            return Err(bad("has a step that starts with neither . nor ["));
        }
    }
    Ok(steps)
}

/// Put `new` at `steps` in `here` (the object, path `$`), making missing
/// objects on the way. A loop, not recursion: the path comes from a client.
fn replace(here: &mut Value, steps: &[Step], new: Value, walked: &str) -> Result<(), String> {
    let mut here = here;
    let mut walked = walked.to_string();
    for step in steps {
        let index = match step {
            Step::Index(n) => Some(*n),
            Step::Key(k) if here.is_array() => k.parse().ok(),
            Step::Key(_) => None,
        };
        let next_walked = match step {
            Step::Key(k) => format!("{walked}{}", step_name(k)),
            Step::Index(n) => format!("{walked}[{n}]"),
        };
        here = match (step, index, here) {
            (_, Some(n), Value::Array(items)) => {
                let len = items.len();
                items
                    .get_mut(n)
                    .ok_or_else(|| format!("{walked} has {len} items, so there is no item {n}"))?
            }
            // Indexing null with a key makes it an object; a missing key is added.
            (Step::Key(k), _, v @ (Value::Null | Value::Object(_))) => &mut v[k.as_str()],
            (Step::Index(_), _, Value::Null) => {
                return Err(format!(
                    "{walked} does not exist, and a list is not made to index it"
                ))
            }
            (_, _, other) => {
                let what = match other {
                    Value::Array(_) => "a list (index it with [n])",
                    Value::Object(_) => "an object (name a key)",
                    _ => "a single value",
                };
                return Err(format!("{walked} is {what}"));
            }
        };
        walked = next_walked;
    }
    *here = new;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn with<T>(f: impl FnOnce(&Parameters) -> T) -> T {
        let loc_labels = map(&[("loc-name", "florin"), ("env", "prod")]);
        let loc_annotations = map(&[("env", "not this one"), ("region", "eu-west")]);
        let st_labels = map(&[("id", "florin-1"), ("region", "not this one either")]);
        let st_annotations = map(&[("example.com/rack", "r7")]);
        f(&Parameters {
            sources: [&loc_labels, &loc_annotations, &st_labels, &st_annotations],
        })
    }

    #[test]
    fn parameters_come_from_location_then_sync_target_labels_before_annotations() {
        with(|p| {
            assert_eq!(
                expand_str(
                    "%(loc-name) in %(env)/%(region) on %(id) in %(example.com/rack)",
                    p
                ),
                Ok("florin in prod/eu-west on florin-1 in r7".to_string())
            );
        });
    }

    #[test]
    fn percent_escapes_and_stray_percents() {
        with(|p| {
            assert_eq!(
                expand_str("100%% %%(env) %(env)", p),
                Ok("100% %(env) prod".into())
            );
            assert_eq!(expand_str("50% off, 5%", p), Ok("50% off, 5%".into()));
            assert_eq!(expand_str("no parameters", p), Ok("no parameters".into()));
            assert_eq!(expand_str("%%%(env)", p), Ok("%prod".into()));
        });
    }

    #[test]
    fn bad_references_are_errors_naming_them() {
        with(|p| {
            assert_eq!(
                expand_str("x %(nope) y", p),
                Err(ExpandError::Undefined("nope".into()))
            );
            assert_eq!(
                expand_str("in %(unterminated", p),
                Err(ExpandError::Unterminated("unterminated".into()))
            );
            assert_eq!(expand_str("%()", p), Err(ExpandError::InvalidName("".into())));
            // A nested reference reads as one name up to the first ')'.
            assert_eq!(
                expand_str("%(a%(env))", p),
                Err(ExpandError::InvalidName("a%(env".into()))
            );
            let message = ExpandError::Unterminated("unterminated".into()).to_string();
            assert!(
                message.contains("%(unterminated") && message.contains("%%("),
                "{message}"
            );
        });
    }

    #[test]
    fn an_opted_in_object_has_its_values_expanded_but_not_its_keys_or_identity() {
        let mut obj = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "n-%(env)", "namespace": "ns",
                         "labels": {"where-%(env)": "%(loc-name)"},
                         "annotations": {EXPAND_PARAMETERS_ANNOTATION: "true",
                                         LAST_APPLIED_CONFIG_ANNOTATION: "{\"data\": \"%(nope)\"}"}},
            "data": {"index.html": "Running in %(loc-name).", "list": ["%(env)", 3, {"%(env)": "%(region)"}]},
        });
        with(|p| customize(&mut obj, true, None, p)).unwrap();
        assert_eq!(obj["data"]["index.html"], "Running in florin.");
        assert_eq!(obj["data"]["list"], json!(["prod", 3, {"%(env)": "eu-west"}]));
        assert_eq!(obj["metadata"]["labels"]["where-%(env)"], "florin");
        assert_eq!(obj["metadata"]["name"], "n-%(env)");
        assert!(obj["metadata"]["annotations"][LAST_APPLIED_CONFIG_ANNOTATION]
            .as_str()
            .unwrap()
            .contains("%(nope)"));
    }

    #[test]
    fn expansion_errors_say_where() {
        let mut obj = json!({"kind": "ConfigMap", "data": {"index.html": "in %(zone)"}});
        let e = with(|p| customize(&mut obj, true, None, p)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "parameter %(zone) is not defined: give the Location or SyncTarget a label or annotation zone \
             (at data[\"index.html\"])"
        );
        let mut obj = json!({"spec": {"containers": [{"image": "x:%(tag"}]}});
        let e = with(|p| customize(&mut obj, true, None, p)).unwrap_err();
        assert!(e.to_string().contains("(at spec.containers[0].image)"), "{e}");
    }

    #[test]
    fn not_opted_in_leaves_references_alone() {
        let before = json!({"data": {"a": "%(env) %(nope) %(bad"}});
        let mut obj = before.clone();
        with(|p| customize(&mut obj, false, None, p)).unwrap();
        assert_eq!(obj, before);
    }

    fn deployment() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
               "spec": {"template": {"spec": {"containers": [
                   {"name": "httpd", "env": [{"name": "EXAMPLE_VAR", "value": "example value"}]}]}}}})
    }

    #[test]
    fn customizer_replacements_use_kubestellar_paths_and_json_values() {
        let c = Customizer {
            id: "ns/c".into(),
            expand: true,
            replacements: vec![
                (
                    "$.spec.template.spec.containers.0.env.0.value".into(),
                    "\"env is %(env)\"".into(),
                ),
                ("$.spec.replicas".into(), "3".into()),
                (
                    "$.metadata.annotations['example.com/at']".into(),
                    "\"%(loc-name)\"".into(),
                ),
                ("$.spec.template.spec.nodeSelector.zone".into(), "\"z1\"".into()),
            ],
        };
        let mut obj = deployment();
        with(|p| customize(&mut obj, false, Some(&c), p)).unwrap();
        assert_eq!(
            obj["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"],
            "env is prod"
        );
        assert_eq!(obj["spec"]["replicas"], 3);
        assert_eq!(obj["metadata"]["annotations"]["example.com/at"], "florin");
        assert_eq!(obj["spec"]["template"]["spec"]["nodeSelector"]["zone"], "z1");
        // Without its own opt-in a Customizer's text is used as written.
        let plain = Customizer {
            expand: false,
            ..c.clone()
        };
        let mut obj = deployment();
        with(|p| customize(&mut obj, false, Some(&plain), p)).unwrap();
        assert_eq!(
            obj["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"],
            "env is %(env)"
        );
    }

    #[test]
    fn bad_replacements_are_errors_naming_the_customizer_and_path() {
        let one = |path: &str, value: &str| {
            let c = Customizer {
                id: "ns/c".into(),
                expand: false,
                replacements: vec![(path.into(), value.into())],
            };
            let mut obj = deployment();
            with(|p| customize(&mut obj, false, Some(&c), p))
                .unwrap_err()
                .to_string()
        };
        let e = one("$.spec.replicas", "three");
        assert!(
            e.starts_with("Customizer ns/c, replacement $.spec.replicas: value \"three\" is not JSON"),
            "{e}"
        );
        assert!(one("spec.replicas", "1").contains("does not start with $"));
        assert!(one("$.spec.template.spec.containers[4].image", "\"x\"").contains("has 1 items"));
        assert!(one("$.metadata.name", "\"x\"").contains("only single labels and annotations"));
        assert!(one("$.metadata.labels", "{}").contains("only single labels and annotations"));
        assert!(one("$.metadata.labels.tier", "3").contains("values are strings"));
        assert!(one("$.kind", "\"x\"").contains("which kind"));
        assert!(one("$..image", "\"x\"").contains("empty step"));
        assert!(one("$.spec.template.spec.containers[*].image", "\"x\"").contains("does not support"));
        assert!(one("$.spec.template.spec.containers.name", "\"x\"").contains("is a list"));
    }

    #[test]
    fn paths_parse_to_steps() {
        assert_eq!(
            parse_path("$.a[0]['b.c'][\"d\"].1"),
            Ok(vec![
                Step::Key("a".into()),
                Step::Index(0),
                Step::Key("b.c".into()),
                Step::Key("d".into()),
                Step::Key("1".into()),
            ])
        );
        assert!(parse_path("$").is_err());
        assert!(parse_path("$.a[").is_err());
    }

    #[test]
    fn paths_are_bounded_and_walked_without_recursion() {
        let deep = format!("$.data{}", ".a".repeat(50_000));
        let e = parse_path(&deep).unwrap_err();
        assert!(e.contains("has 50001 steps, more than the limit of 64"), "{e}");
        assert!(e.len() < 300, "the message shows the path cut short: {e}");
        let at_limit = format!("$.data{}", ".a".repeat(MAX_PATH_STEPS - 1));
        let mut obj = json!({"data": {}});
        let steps = parse_path(&at_limit).unwrap();
        replace(&mut obj, &steps, json!("x"), "$").unwrap();
        assert_eq!(crate::json::depth(&obj), MAX_PATH_STEPS);
        // The walk itself has no depth of its own: any number of steps.
        let many: Vec<Step> = (0..10_000).map(|_| Step::Key("a".into())).collect();
        let mut obj = json!({});
        replace(&mut obj, &many, json!(1), "$").unwrap();
        crate::json::drop_flat(obj);
    }

    #[test]
    fn customizers_over_the_limits_are_named_field_by_field() {
        let ok = json!({"replacements": [{"path": "$.spec.replicas", "value": "3"}]});
        assert!(limit_causes(&ok).is_empty());
        let deep = format!("$.data{}", ".a".repeat(50_000));
        let steps = format!("$.data{}", ".a".repeat(MAX_PATH_STEPS));
        let c = json!({"replacements": [
            {"path": deep, "value": "1"},
            {"path": steps, "value": "1"},
            {"path": "$.x", "value": "9".repeat(MAX_VALUE_BYTES + 1)},
        ]});
        let causes: Vec<String> = limit_causes(&c).iter().map(Cause::describe).collect();
        assert_eq!(
            causes,
            [
                "replacements[0].path: Too long: may not be more than 1024 bytes".to_string(),
                "replacements[1].path: Too many: 65: must have at most 64 items (path steps)".to_string(),
                format!("replacements[2].value: Too long: may not be more than {MAX_VALUE_BYTES} bytes"),
            ]
        );
        let many: Vec<Value> = (0..=MAX_REPLACEMENTS)
            .map(|_| json!({"path": "$.a", "value": "1"}))
            .collect();
        let causes = limit_causes(&json!({"replacements": many}));
        assert_eq!(
            causes[0].describe(),
            "replacements: Too many: 257: must have at most 256 items"
        );
    }
}
