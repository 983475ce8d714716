//! Field paths of user transforms: where a copy loses a field (KubeStellar's
//! `CustomTransform.spec.remove`) and which fields the workload cluster owns
//! (OCM's `ignoreFields.jsonPaths`). Pure, bounded, never panics.
//!
//! The syntax is the JSONPath subset both projects document for these lists:
//! `$` (which may be left out) then steps, each `.name`, `['name']` or
//! `["name"]` (a member; the bracket forms allow dots, as in annotation keys),
//! `[N]` (list element `N`) or `[*]` (every list element). Examples:
//! `$.spec.template.spec.nodeSelector`, `$.spec.replicas`,
//! `$.metadata.annotations['sidecar.istio.io/inject']`,
//! `$.webhooks[*].clientConfig.caBundle`.
//!
//! A path says which object a copy is by nothing: `apiVersion`, `kind` and
//! `metadata` other than one label or annotation (`$.metadata.labels.<key>`,
//! `$.metadata.annotations.<key>`) are refused, as is `status` (never copied
//! down).

use std::fmt;

use serde_json::Value;

/// Longest path, in bytes.
pub const MAX_PATH_BYTES: usize = 512;
/// Most steps in one path.
pub const MAX_PATH_STEPS: usize = 32;
/// Most paths in one list (`remove`, or one `jsonPaths`).
pub const MAX_PATHS: usize = 64;

/// One step of a [`FieldPath`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// An object member.
    Member(String),
    /// One list element.
    Index(usize),
    /// Every list element.
    Every,
}

/// A parsed field path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldPath {
    steps: Vec<Step>,
}

/// Why a path was refused: said in words a user can act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathError(pub String);

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PathError {}

const SYNTAX_HINT: &str =
    "write it as $ followed by .name, ['name'], [N] or [*] steps, e.g. $.spec.template.spec.nodeSelector";

impl FieldPath {
    /// Parses and checks `text` (see the module docs).
    pub fn parse(text: &str) -> Result<FieldPath, PathError> {
        if text.len() > MAX_PATH_BYTES {
            return Err(PathError(format!(
                "path is {} bytes long, the limit is {MAX_PATH_BYTES}",
                text.len()
            )));
        }
        let bad = |why: &str| PathError(format!("{why}: {SYNTAX_HINT}"));
        let rest = text.strip_prefix('$').unwrap_or(text);
        if rest.is_empty() {
            return Err(bad("the path names no field"));
        }
        let bytes = rest.as_bytes();
        let mut steps = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if steps.len() == MAX_PATH_STEPS {
                return Err(PathError(format!("path has more than {MAX_PATH_STEPS} steps")));
            }
            match bytes[i] {
                b'.' => {
                    let start = i + 1;
                    let end = rest[start..].find(['.', '[']).map_or(rest.len(), |n| start + n);
                    let name = &rest[start..end];
                    if name.is_empty() || name.contains(']') {
                        return Err(bad(&format!("empty or malformed member at byte {}", start + 1)));
                    }
                    steps.push(Step::Member(name.to_string()));
                    i = end;
                }
                b'[' => {
                    let inner_start = i + 1;
                    let Some(q) = bytes.get(inner_start).copied() else {
                        return Err(bad("unclosed ["));
                    };
                    if q == b'\'' || q == b'"' {
                        let quote = q as char;
                        let name_start = inner_start + 1;
                        let Some(len) = rest[name_start..].find(quote) else {
                            return Err(bad("unclosed quote"));
                        };
                        let name_end = name_start + len;
                        if rest.as_bytes().get(name_end + 1) != Some(&b']') {
                            return Err(bad("a quoted name must be followed by ]"));
                        }
                        if len == 0 {
                            return Err(bad("empty member name"));
                        }
                        steps.push(Step::Member(rest[name_start..name_end].to_string()));
                        i = name_end + 2;
                    } else {
                        let Some(len) = rest[inner_start..].find(']') else {
                            return Err(bad("unclosed ["));
                        };
                        let inner = &rest[inner_start..inner_start + len];
                        let step = if inner == "*" {
                            Step::Every
                        } else if !inner.is_empty() && inner.bytes().all(|b| b.is_ascii_digit()) {
                            match inner.parse::<usize>() {
                                Ok(n) => Step::Index(n),
                                Err(_) => return Err(bad(&format!("index {inner} is too large"))),
                            }
                        } else {
                            return Err(bad(&format!(
                                "[{inner}] is neither a quoted name, an index nor *"
                            )));
                        };
                        steps.push(step);
                        i = inner_start + len + 1;
                    }
                }
                _ => {
                    return Err(bad(&format!(
                        "unexpected character at byte {}",
                        i + 1 + text.len() - rest.len()
                    )))
                }
            }
        }
        let path = FieldPath { steps };
        path.check_target()?;
        Ok(path)
    }

    /// Refuses paths into the identity of the object and into `status`.
    fn check_target(&self) -> Result<(), PathError> {
        let Some(Step::Member(first)) = self.steps.first() else {
            return Err(PathError(format!(
                "a path starts with a field name, not a list index: {SYNTAX_HINT}"
            )));
        };
        match first.as_str() {
            "apiVersion" | "kind" => Err(PathError(format!(
                "{first} says what the object is and cannot be changed; name a field of its content instead"
            ))),
            "status" => Err(PathError(
                "status is never copied to a workload cluster; name a field of the object's content instead".into(),
            )),
            "metadata" => match (self.steps.get(1), self.steps.get(2), self.steps.len()) {
                (Some(Step::Member(map)), Some(Step::Member(_)), 3)
                    if map == "labels" || map == "annotations" =>
                {
                    Ok(())
                }
                _ => Err(PathError(
                    "in metadata only one label or annotation may be named, e.g. $.metadata.annotations['example.com/key']".into(),
                )),
            },
            _ => Ok(()),
        }
    }

    /// The steps.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// The path of `steps` as found in an object (where a syncer saw a copy
    /// drift), unchecked: for display in the syntax a user writes paths in.
    pub fn from_steps(steps: Vec<Step>) -> FieldPath {
        FieldPath { steps }
    }

    /// Removes what the path names from `obj`; a path that names nothing there
    /// changes nothing. An emptied label or annotation map is removed too.
    pub fn remove(&self, obj: &mut Value) {
        remove_at(obj, &self.steps);
        if let (Some(Step::Member(m)), Some(Step::Member(map))) = (self.steps.first(), self.steps.get(1)) {
            if m == "metadata" {
                if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                    if meta
                        .get(map)
                        .and_then(Value::as_object)
                        .is_some_and(|o| o.is_empty())
                    {
                        meta.remove(map);
                    }
                }
            }
        }
    }

    /// Makes `desired` hold what `actual` holds at this path, wherever both
    /// have the path's parent: the workload cluster's value wins. Where
    /// `actual` lacks the field, `desired` keeps its value when `present_only`
    /// (OnSpokePresent: the field is the cluster's only once it has it), and
    /// loses it otherwise (OnSpokeChange: removing it downstream is a change).
    pub fn keep_actual(&self, desired: &mut Value, actual: &Value, present_only: bool) {
        keep_at(desired, actual, &self.steps, present_only);
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("$")?;
        for step in &self.steps {
            match step {
                Step::Member(m) if m.contains(['.', '[', ']', '\'']) => write!(f, "[\"{m}\"]")?,
                Step::Member(m) => write!(f, ".{m}")?,
                Step::Index(n) => write!(f, "[{n}]")?,
                Step::Every => f.write_str("[*]")?,
            }
        }
        Ok(())
    }
}

/// Recursion depth is bounded by [`MAX_PATH_STEPS`].
fn remove_at(node: &mut Value, steps: &[Step]) {
    let Some((step, rest)) = steps.split_first() else {
        return;
    };
    match (step, node) {
        (Step::Member(m), Value::Object(map)) => {
            if rest.is_empty() {
                map.remove(m);
            } else if let Some(child) = map.get_mut(m) {
                remove_at(child, rest);
            }
        }
        (Step::Index(n), Value::Array(items)) => {
            if rest.is_empty() {
                if *n < items.len() {
                    items.remove(*n);
                }
            } else if let Some(child) = items.get_mut(*n) {
                remove_at(child, rest);
            }
        }
        (Step::Every, Value::Array(items)) => {
            if rest.is_empty() {
                items.clear();
            } else {
                items.iter_mut().for_each(|child| remove_at(child, rest));
            }
        }
        _ => {}
    }
}

/// Recursion depth is bounded by [`MAX_PATH_STEPS`].
fn keep_at(desired: &mut Value, actual: &Value, steps: &[Step], present_only: bool) {
    let Some((step, rest)) = steps.split_first() else {
        return;
    };
    match (step, desired, actual) {
        (Step::Member(m), Value::Object(d), Value::Object(a)) => match (rest.is_empty(), a.get(m)) {
            (true, Some(value)) => {
                d.insert(m.clone(), value.clone());
            }
            (true, None) => {
                if !present_only {
                    d.remove(m);
                }
            }
            (false, Some(a_child)) => {
                if let Some(d_child) = d.get_mut(m) {
                    keep_at(d_child, a_child, rest, present_only);
                }
            }
            (false, None) => {}
        },
        (Step::Index(n), Value::Array(d), Value::Array(a)) => {
            if let (Some(d_child), Some(a_child)) = (d.get_mut(*n), a.get(*n)) {
                if rest.is_empty() {
                    *d_child = a_child.clone();
                } else {
                    keep_at(d_child, a_child, rest, present_only);
                }
            }
        }
        (Step::Every, Value::Array(d), Value::Array(a)) => {
            if rest.is_empty() {
                *d = a.clone();
            } else {
                for (d_child, a_child) in d.iter_mut().zip(a) {
                    keep_at(d_child, a_child, rest, present_only);
                }
            }
        }
        _ => {}
    }
}

/// Parses a list of paths the way a user wrote them under `field`
/// (`spec.remove`, ...): the first error names the entry, its value (as kube
/// says `Invalid value: "..."`) and the fix.
pub fn parse_list(field: &str, paths: &[String]) -> Result<Vec<FieldPath>, (String, PathError)> {
    if paths.len() > MAX_PATHS {
        return Err((
            field.to_string(),
            PathError(format!("{} paths, the limit is {MAX_PATHS}", paths.len())),
        ));
    }
    paths
        .iter()
        .enumerate()
        .map(|(i, p)| {
            FieldPath::parse(p).map_err(|e| {
                (
                    format!("{field}[{i}]"),
                    PathError(format!("Invalid value: {p:?}: {e}")),
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(text: &str) -> FieldPath {
        FieldPath::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn the_documented_forms_parse_and_print_back() {
        assert_eq!(
            p("$.spec.template.spec.nodeSelector").steps(),
            &[
                Step::Member("spec".into()),
                Step::Member("template".into()),
                Step::Member("spec".into()),
                Step::Member("nodeSelector".into())
            ]
        );
        assert_eq!(p(".spec.replicas"), p("$.spec.replicas"), "$ may be left out");
        assert_eq!(p("$['spec'][\"replicas\"]"), p("$.spec.replicas"));
        let key = p("$.metadata.annotations['sidecar.istio.io/inject']");
        assert_eq!(key.steps()[2], Step::Member("sidecar.istio.io/inject".into()));
        assert_eq!(
            key.to_string(),
            "$.metadata.annotations[\"sidecar.istio.io/inject\"]"
        );
        assert_eq!(
            p("$.webhooks[*].clientConfig.caBundle").to_string(),
            "$.webhooks[*].clientConfig.caBundle"
        );
        assert_eq!(p("$.spec.containers[0].image").steps()[2], Step::Index(0));
    }

    #[test]
    fn odd_paths_are_refused_with_the_fix() {
        for bad in [
            "",
            "$",
            "$.",
            "$..spec",
            "$.spec[",
            "$.spec['x",
            "$.spec['x'",
            "$.spec[x]",
            "$.spec[-1]",
            "$.spec[99999999999999999999999]",
            "spec",
            "$[0]",
            "$.kind",
            "$.apiVersion",
            "$.status.replicas",
            "$.metadata.name",
            "$.metadata.labels",
            "$.metadata.annotations.a.b",
            "$.spec]",
            "$.a['']",
        ] {
            let err = FieldPath::parse(bad).expect_err(bad);
            assert!(!err.0.is_empty(), "{bad}");
        }
        let err = FieldPath::parse("$.spec[x]").unwrap_err();
        assert!(err.0.contains("e.g. $.spec.template.spec.nodeSelector"), "{err}");
        assert!(FieldPath::parse(&format!("$.{}", "a".repeat(MAX_PATH_BYTES))).is_err());
        assert!(FieldPath::parse(
            &"$".chars()
                .chain(".a".repeat(MAX_PATH_STEPS + 1).chars())
                .collect::<String>()
        )
        .is_err());
        assert!(FieldPath::parse(
            &"$".chars()
                .chain(".a".repeat(MAX_PATH_STEPS).chars())
                .collect::<String>()
        )
        .is_ok());
        // Multi-byte text never splits a character.
        for odd in ["$.é[", "$.ü['ö", "$[é]", "$.a[ü]", "é"] {
            let _ = FieldPath::parse(odd);
        }
    }

    #[test]
    fn removing_drops_only_what_the_path_names() {
        let mut obj = json!({
            "metadata": {"name": "d", "annotations": {"a.example/x": "1"}, "labels": {"app": "d"}},
            "spec": {"replicas": 2, "template": {"spec": {"nodeSelector": {"disk": "ssd"}, "containers": [{"name": "c", "image": "i", "env": [1]}, {"name": "e", "env": [2]}]}}}
        });
        p("$.spec.template.spec.nodeSelector").remove(&mut obj);
        p("$.metadata.annotations['a.example/x']").remove(&mut obj);
        p("$.spec.template.spec.containers[*].env").remove(&mut obj);
        p("$.spec.nothing.here").remove(&mut obj);
        p("$.spec.replicas.deeper").remove(&mut obj);
        assert_eq!(
            obj,
            json!({
                "metadata": {"name": "d", "labels": {"app": "d"}},
                "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "image": "i"}, {"name": "e"}]}}}
            })
        );
        p("$.spec.template.spec.containers[1]").remove(&mut obj);
        p("$.spec.template.spec.containers[7]").remove(&mut obj);
        assert_eq!(
            obj["spec"]["template"]["spec"]["containers"],
            json!([{"name": "c", "image": "i"}])
        );
    }

    #[test]
    fn the_clusters_value_wins_where_the_condition_holds() {
        let actual = json!({"spec": {"replicas": 7, "list": [{"ca": "injected"}, {"ca": "two"}]},
                            "metadata": {"annotations": {"w": "webhook"}}});
        let mut desired = json!({"spec": {"replicas": 1, "paused": false, "list": [{"ca": ""}]},
                                 "metadata": {"annotations": {"w": "mine", "x": "1"}}});
        p("$.spec.replicas").keep_actual(&mut desired, &actual, true);
        p("$.spec.list[*].ca").keep_actual(&mut desired, &actual, true);
        p("$.metadata.annotations.w").keep_actual(&mut desired, &actual, true);
        assert_eq!(
            desired,
            json!({"spec": {"replicas": 7, "paused": false, "list": [{"ca": "injected"}]},
                   "metadata": {"annotations": {"w": "webhook", "x": "1"}}})
        );
        // Absent downstream: kept when present-only, dropped when a change.
        let mut present = json!({"spec": {"paused": true}});
        p("$.spec.paused").keep_actual(&mut present, &json!({"spec": {}}), true);
        assert_eq!(present, json!({"spec": {"paused": true}}));
        p("$.spec.paused").keep_actual(&mut present, &json!({"spec": {}}), false);
        assert_eq!(present, json!({"spec": {}}));
        // A parent the desired copy lacks is not made up; odd shapes change nothing.
        let mut bare = json!({"data": {}});
        p("$.spec.replicas").keep_actual(&mut bare, &actual, false);
        p("$.data[0]").keep_actual(&mut bare, &json!({"data": [1]}), false);
        assert_eq!(bare, json!({"data": {}}));
    }

    #[test]
    fn lists_over_the_limit_or_with_a_bad_entry_name_the_field() {
        let many: Vec<String> = (0..=MAX_PATHS).map(|i| format!("$.a{i}")).collect();
        assert_eq!(parse_list("spec.remove", &many).unwrap_err().0, "spec.remove");
        let (field, err) = parse_list("spec.remove", &["$.spec.a".into(), "$.kind".into()]).unwrap_err();
        assert_eq!(field, "spec.remove[1]");
        assert!(err.0.contains("kind"), "{err}");
    }
}
