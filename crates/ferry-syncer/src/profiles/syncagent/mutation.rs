//! `spec.mutation` of a PublishedResource: steps that rewrite an object on its way
//! (`spec`: the kcp object going to the service cluster; `status`: the service's
//! object whose status goes back), as the reference's transformers do
//! (`internal/mutation/transformer`). Each step has exactly one of:
//!
//! - `delete{path}`: removes the value;
//! - `regex{path,pattern,replacement}`: replaces matches in the value read as a string
//!   (`\N`/`$N` group references; an empty pattern sets the replacement as is);
//! - `template{path,template}`: a Go template over `.Value` (the current value),
//!   `.LocalObject` (the object being mutated) and `.RemoteObject` (the other side's);
//! - `cel{path,expression}`: a CEL expression over `value`, `self` and `other`.
//!
//! Paths are gjson paths of the simple kind: dot-separated keys (`\.` escapes a dot)
//! and array indexes. Setting creates missing objects on the way.

use std::sync::{Arc, LazyLock};

use serde_json::{json, Map, Value};

use ferry_api::syncagent::ResourceMutation;

use super::templating::render;

/// What a failed step says: the field (`spec.mutation.spec[1].regex`) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MutationError {
    /// The step's field.
    pub field: String,
    /// What went wrong.
    pub problem: String,
}

impl std::fmt::Display for MutationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.field, self.problem)
    }
}

/// Checks every step of `steps` (under `field`, e.g. `spec.mutation.spec`) without an
/// object: exactly one kind each, a path, and patterns, templates and expressions that
/// compile.
pub fn validate(steps: &[ResourceMutation], field: &str) -> Result<(), MutationError> {
    for (i, step) in steps.iter().enumerate() {
        let at = |kind: &str| format!("{field}[{i}]{kind}");
        let kinds = [
            step.delete.is_some(),
            step.regex.is_some(),
            step.template.is_some(),
            step.cel.is_some(),
        ];
        if kinds.iter().filter(|k| **k).count() != 1 {
            return Err(MutationError {
                field: at(""),
                problem: "must have exactly one of delete, regex, template or cel".into(),
            });
        }
        let (kind, path) = if let Some(d) = &step.delete {
            (".delete", &d.path)
        } else if let Some(r) = &step.regex {
            if !r.pattern.is_empty() {
                regex::Regex::new(&r.pattern).map_err(|e| MutationError {
                    field: at(".regex.pattern"),
                    problem: format!("{:?} does not compile: {e}", r.pattern),
                })?;
            }
            (".regex", &r.path)
        } else if let Some(t) = &step.template {
            let mut tpl = gtmpl::Template::default();
            tpl.parse(&t.template).map_err(|e| MutationError {
                field: at(".template.template"),
                problem: format!("{:?} does not parse: {e}", t.template),
            })?;
            (".template", &t.path)
        } else if let Some(c) = &step.cel {
            ENV.compile(&c.expression).map_err(|e| MutationError {
                field: at(".cel.expression"),
                problem: format!("{:?} does not compile: {e}", c.expression),
            })?;
            (".cel", &c.path)
        } else {
            unreachable!("exactly one kind was checked above")
        };
        if path.is_empty() {
            return Err(MutationError {
                field: format!("{}.path", at(kind)),
                problem: "must not be empty".into(),
            });
        }
    }
    Ok(())
}

static ENV: LazyLock<Arc<cel::Env>> = LazyLock::new(|| Arc::new(cel::Env::stdlib()));

/// Applies `steps` to `obj` in order; `other` is the other side's object, if any.
pub fn apply(
    steps: &[ResourceMutation],
    field: &str,
    obj: &mut Value,
    other: Option<&Value>,
) -> Result<(), MutationError> {
    for (i, step) in steps.iter().enumerate() {
        let fail = |kind: &str, problem: String| MutationError {
            field: format!("{field}[{i}].{kind}"),
            problem,
        };
        if let Some(d) = &step.delete {
            remove(obj, &segments(&d.path));
        } else if let Some(r) = &step.regex {
            let path = segments(&r.path);
            let replaced = if r.pattern.is_empty() {
                r.replacement.clone()
            } else {
                let re = regex::Regex::new(&r.pattern)
                    .map_err(|e| fail("regex", format!("pattern {:?} does not compile: {e}", r.pattern)))?;
                let current = get(obj, &path).map(as_text).unwrap_or_default();
                re.replace_all(&current, go_replacement(&r.replacement).as_str())
                    .into_owned()
            };
            set(obj, &path, Value::String(replaced));
        } else if let Some(t) = &step.template {
            let path = segments(&t.path);
            let value = get(obj, &path).map(as_text).unwrap_or_default();
            let data = json!({ "Value": value, "LocalObject": obj.clone(), "RemoteObject": other.cloned() });
            let out = render(&t.template, &data).map_err(|e| fail("template", e))?;
            set(obj, &path, Value::String(out));
        } else if let Some(c) = &step.cel {
            let path = segments(&c.path);
            let out =
                evaluate(&c.expression, get(obj, &path).cloned(), obj, other).map_err(|e| fail("cel", e))?;
            set(obj, &path, out);
        }
    }
    Ok(())
}

fn evaluate(
    expression: &str,
    value: Option<Value>,
    obj: &Value,
    other: Option<&Value>,
) -> Result<Value, String> {
    let program = ENV
        .compile(expression)
        .map_err(|e| format!("{expression:?} does not compile: {e}"))?;
    let mut ctx = cel::Context::with_env(ENV.clone());
    ctx.add_variable_from_value("value", to_cel(&value.unwrap_or(Value::Null)));
    ctx.add_variable_from_value("self", to_cel(obj));
    ctx.add_variable_from_value("other", to_cel(other.unwrap_or(&Value::Null)));
    let out = program
        .execute(&ctx)
        .map_err(|e| format!("{expression:?} fails: {e}"))?;
    out.json()
        .map_err(|e| format!("{expression:?} gives a value that is no JSON: {e}"))
}

/// JSON as CEL sees it: whole numbers are `int` (as in Kubernetes' CEL), so
/// `value * 2` works on a JSON `3`.
fn to_cel(v: &Value) -> cel::Value {
    match v {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => cel::Value::Int(i),
            (_, Some(u)) => cel::Value::UInt(u),
            _ => cel::Value::Float(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        Value::Array(items) => cel::Value::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(map) => {
            let entries: std::collections::HashMap<cel::objects::Key, cel::Value> = map
                .iter()
                .map(|(k, v)| (cel::objects::Key::String(Arc::new(k.clone())), to_cel(v)))
                .collect();
            cel::Value::Map(entries.into())
        }
    }
}

/// Go's `$1`/`${1}` are Rust's too; the reference's docs also write `\1`.
fn go_replacement(replacement: &str) -> String {
    let mut out = String::with_capacity(replacement.len());
    let mut chars = replacement.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push_str("${");
            while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()).copied() {
                out.push(d);
                chars.next();
            }
            out.push('}');
        } else {
            out.push(c);
        }
    }
    out
}

/// gjson's string form of a value: strings as they are, the rest as JSON.
fn as_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// `a.b\.c.0` → `["a", "b.c", "0"]`.
fn segments(path: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut chars = path.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next() {
                    out.last_mut().expect("never empty").push(next);
                }
            }
            '.' => out.push(String::new()),
            c => out.last_mut().expect("never empty").push(c),
        }
    }
    out
}

fn get<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(obj, |v, seg| match v {
        Value::Object(m) => m.get(seg),
        Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => None,
    })
}

fn set(obj: &mut Value, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        *obj = value;
        return;
    };
    let mut cur = obj;
    for seg in parents {
        if let Value::Array(a) = cur {
            match seg.parse::<usize>().ok().filter(|i| *i < a.len()) {
                Some(i) => {
                    cur = &mut a[i];
                    continue;
                }
                None => return,
            }
        }
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
        cur = cur
            .as_object_mut()
            .expect("made an object above")
            .entry(seg.clone())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    match cur {
        Value::Array(a) => {
            if let Some(slot) = last.parse::<usize>().ok().and_then(|i| a.get_mut(i)) {
                *slot = value;
            }
        }
        Value::Object(m) => {
            m.insert(last.clone(), value);
        }
        other => *other = json!({ last.clone(): value }),
    }
}

fn remove(obj: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = obj;
    for seg in parents {
        let next = match cur {
            Value::Object(m) => m.get_mut(seg),
            Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
            _ => None,
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    match cur {
        Value::Object(m) => {
            m.remove(last);
        }
        Value::Array(a) => {
            if let Some(i) = last.parse::<usize>().ok().filter(|i| *i < a.len()) {
                a.remove(i);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(v: Value) -> Vec<ResourceMutation> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn each_kind_of_step() {
        let mut obj = json!({ "spec": { "secret": "db-creds", "drop": 1, "host": "a.example.com", "size": 3,
                                       "list": [ { "x": 1 }, { "x": 2 } ] } });
        let other = json!({ "metadata": { "name": "other" } });
        let s = steps(json!([
            { "delete": { "path": "spec.drop" } },
            { "delete": { "path": "spec.list.0" } },
            { "regex": { "path": "spec.host", "pattern": "^([a-z]+)\\.example\\.com$", "replacement": "\\1.internal" } },
            { "regex": { "path": "spec.fixed", "replacement": "set" } },
            { "template": { "path": "spec.secret", "template": "{{ .Value }}-{{ .RemoteObject.metadata.name }}" } },
            { "cel": { "path": "spec.size", "expression": "value * 2 + size(self.spec.list)" } },
            { "template": { "path": "spec.new\\.key.deep", "template": "x" } },
        ]));
        apply(&s, "spec.mutation.spec", &mut obj, Some(&other)).unwrap();
        assert_eq!(
            obj,
            json!({ "spec": { "secret": "db-creds-other", "host": "a.internal", "fixed": "set", "size": 7,
                              "list": [ { "x": 2 } ], "new.key": { "deep": "x" } } })
        );
    }

    #[test]
    fn bad_steps_name_their_field() {
        let e = validate(
            &steps(json!([{ "delete": { "path": "a" } }, { "regex": { "path": "a", "pattern": "(" } }])),
            "spec.mutation.spec",
        )
        .unwrap_err();
        assert_eq!(e.field, "spec.mutation.spec[1].regex.pattern");
        let e = validate(
            &steps(json!([{ "cel": { "path": "a", "expression": "1 +" } }])),
            "spec.mutation.status",
        )
        .unwrap_err();
        assert_eq!(e.field, "spec.mutation.status[0].cel.expression");
        let e = validate(&steps(json!([{}])), "x").unwrap_err();
        assert!(e.problem.contains("exactly one"), "{e}");
        let e = validate(&steps(json!([{ "delete": { "path": "" } }])), "x").unwrap_err();
        assert_eq!(e.field, "x[0].delete.path");
        let e = validate(
            &steps(json!([{ "template": { "path": "a", "template": "{{ .Value" } }])),
            "x",
        )
        .unwrap_err();
        assert_eq!(e.field, "x[0].template.template");
    }
}
