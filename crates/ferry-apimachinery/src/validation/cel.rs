//! `x-kubernetes-validations`: CEL rules on CRD schema nodes, evaluated with
//! the `cel` crate (cel-rust) the way kube-apiserver evaluates them.
//!
//! - A rule sees its node as `self`; a *transition rule* (one that names
//!   `oldSelf`) runs only on update when the node has an old value, unless
//!   `optionalOldSelf` is set, in which case it always runs and `oldSelf` is
//!   an `optional`.
//! - A failing rule is kube-apiserver's field error: `Invalid value:
//!   "object": <message>` at the node's path (or the rule's `fieldPath`),
//!   with the rule's `reason`. The message is `messageExpression`'s result,
//!   else `message`, else `failed rule: <rule>`.
//! - Rules are compiled when their CRD is written ([`rule_errors`]): one that
//!   does not parse is refused with a 422 naming the field. Compiled programs
//!   are cached by their text ([`compiled`]), so a CRD version's rules are
//!   compiled once, and an edited rule is a new entry (the old one ages out of
//!   the bounded cache).
//! - Work is bounded before evaluation: cel-rust has no cost tracker, so each
//!   evaluation's cost is estimated from the size of `self`/`oldSelf` raised
//!   to the rule's comprehension nesting depth (times the size of what a
//!   loop body reads from `self`), and refused over kube's per-call limit;
//!   one object's rules share kube's per-object budget.
//!
//! Kubernetes libraries available: the CEL standard library (`size`, `has`,
//! `all`, `exists`, `exists_one`, `map`, `filter`, `startsWith`, `endsWith`,
//! `contains`, `optional`), `matches` with the hub's Go-compatible regular
//! expressions, cel-go's strings (`lowerAscii`, `upperAscii`, `indexOf`,
//! `replace`, `split`, `substring`, `trim`, `join`, ...) and math
//! (`math.greatest`, `math.least`) extensions, and kube's list library
//! (`isSorted`, `sum`, `min`, `max`, `indexOf`, `lastIndexOf`). Missing: a
//! type checker (a rule naming an unknown field fails when evaluated, not
//! when compiled), `url`, `quantity`, `ip`/`cidr`, `format`, `authz`,
//! `duration`/`timestamp`, and the escaping of property names that are not
//! CEL identifiers.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use cel::common::types::{CelBool, CelOptional as Optional, CelString, LIST_TYPE};
use cel::common::value::{CowVal, Val};
use cel::objects::Key;
use cel::{Context, Env, ExecutionError, Program, Value as CelValue};
use parking_lot::Mutex;
use serde_json::Value;

use super::invalid_value;
use crate::status::Cause;

/// kube-apiserver's `PerCallLimit`: the most one evaluation of a rule may cost.
pub const PER_CALL_LIMIT: u64 = 1_000_000;
/// kube-apiserver's `RuntimeCELCostBudget`: what all rules of one object may cost.
pub const PER_OBJECT_BUDGET: u64 = 10_000_000;
/// Reasons a rule may give its failures.
const REASONS: [&str; 4] = [
    "FieldValueInvalid",
    "FieldValueForbidden",
    "FieldValueRequired",
    "FieldValueDuplicate",
];
/// Cache bounds: entries, and the bytes of rule text they are keyed by.
const CACHE_ENTRIES: usize = 4096;
const CACHE_TEXT_BYTES: usize = 16 * 1024 * 1024;

/// The environment every rule is compiled and evaluated in.
static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| {
    let mut env = Env::stdlib();
    cel::extensions::strings(&mut env).expect("cel strings extension");
    cel::extensions::math(&mut env).expect("cel math extension");
    kubernetes_library(&mut env).expect("kubernetes CEL library");
    register_matches(&mut env).expect("cel matches");
    Arc::new(env)
});

/// A compiled rule or message expression.
#[derive(Debug)]
pub struct Rule {
    program: Program,
    /// Deepest nesting of comprehensions (`all`, `map`, ...): evaluation cost
    /// grows with the size of the input to this power.
    depth: u32,
    /// Nodes in the expression: the cost of one pass over it.
    nodes: u64,
    /// Whether the expression names `oldSelf` (a transition rule).
    uses_old_self: bool,
    /// Fields of `self`/`oldSelf` read inside a comprehension's body
    /// (`self.items.map(x, self.items)`): each pass of the loop may copy
    /// them, so their size multiplies the cost.
    read_in_loops: Vec<(bool, Vec<String>)>,
}

/// Compiled rules by their text, and the bytes of text held.
type RuleCache = (HashMap<String, Arc<Rule>>, usize);

/// How deeply a rule may nest brackets (`(`, `[`, `{`) and conditionals
/// (`?`): cel-rust's parser recurses many frames per level before its own
/// recursion limit (96) applies, and a rule nested thousands deep overflowed
/// the stack. kube (cel-go) refuses past 250 levels of its recursion count.
pub const MAX_NESTING: usize = 32;
/// The stack rules are parsed on: a dozen nested lists take 2 MiB (a tokio
/// worker's whole stack) in a debug build, so parsing gets its own thread
/// with room for [`MAX_NESTING`] levels many times over. Evaluation
/// recurses far less and stays on the caller's thread.
const PARSE_STACK_BYTES: usize = 64 * 1024 * 1024;
/// Longest rule text: cel-go's `ExpressionSizeCodePointLimit` as kube sets it.
pub const MAX_RULE_BYTES: usize = 100_000;

/// Why `src` is too large or too deeply nested to parse safely, if it is:
/// counted on the text, outside string literals, before the parser sees it.
fn nesting_error(src: &str) -> Option<String> {
    if src.len() > MAX_RULE_BYTES {
        return Some(format!(
            "the expression is {} bytes, more than the limit of {MAX_RULE_BYTES}",
            src.len()
        ));
    }
    let (mut depth, mut deepest, mut conditionals) = (0usize, 0usize, 0usize);
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in src.chars() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '"' | '\'' => quote = Some(c),
            '(' | '[' | '{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            '?' => conditionals += 1,
            _ => {}
        }
    }
    (deepest + conditionals > MAX_NESTING).then(|| {
        format!(
            "the expression nests {} levels of brackets and conditionals, more than the limit of {MAX_NESTING}",
            deepest + conditionals
        )
    })
}

/// Compile `src` (cached by its text). The error is the parser's message.
pub fn compiled(src: &str) -> Result<Arc<Rule>, String> {
    static CACHE: LazyLock<Mutex<RuleCache>> = LazyLock::new(|| Mutex::new((HashMap::new(), 0)));
    if let Some(rule) = CACHE.lock().0.get(src) {
        return Ok(rule.clone());
    }
    if let Some(e) = nesting_error(src) {
        return Err(e);
    }
    let parse = || -> Result<_, String> {
        let expr = ENV.parser().parse(src).map_err(|e| e.to_string())?;
        let program = ENV.compile(src).map_err(|e| e.to_string())?;
        Ok((expr, program))
    };
    let (expr, program) = std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("cel-parse".into())
            .stack_size(PARSE_STACK_BYTES)
            .spawn_scoped(scope, parse)
            .map_err(|e| format!("cannot start the rule parser: {e}"))?
            .join()
            .map_err(|_| "the rule parser failed".to_string())?
    })?;
    let mut shape = Shape::default();
    shape.walk(&expr, 0);
    let rule = Arc::new(Rule {
        program,
        depth: shape.depth,
        nodes: shape.nodes.max(1),
        uses_old_self: shape.old_self,
        read_in_loops: shape.read_in_loops,
    });
    let mut cache = CACHE.lock();
    if cache.0.len() >= CACHE_ENTRIES || cache.1 + src.len() > CACHE_TEXT_BYTES {
        cache.0.clear();
        cache.1 = 0;
    }
    cache.1 += src.len();
    cache.0.insert(src.to_string(), rule.clone());
    Ok(rule)
}

#[derive(Default)]
struct Shape {
    depth: u32,
    nodes: u64,
    old_self: bool,
    read_in_loops: Vec<(bool, Vec<String>)>,
}

/// `self.a.b` as (`false`, [a, b]); `oldSelf.a` as (`true`, [a]).
fn root_path(e: &IdedExpr) -> Option<(bool, Vec<String>)> {
    match &e.expr {
        Expr::Ident(name) if name == "self" || name == "oldSelf" => Some((name == "oldSelf", Vec::new())),
        Expr::Select(s) if !s.test => {
            let (old, mut path) = root_path(&s.operand)?;
            path.push(s.field.clone());
            Some((old, path))
        }
        _ => None,
    }
}

impl Shape {
    fn walk(&mut self, e: &IdedExpr, depth: u32) {
        self.nodes += 1;
        self.depth = self.depth.max(depth);
        if depth > 0 {
            if let Some(read) = root_path(e) {
                self.old_self |= read.0;
                self.nodes += read.1.len() as u64;
                self.read_in_loops.push(read);
                return;
            }
        }
        match &e.expr {
            Expr::Ident(name) => self.old_self |= name == "oldSelf",
            Expr::Call(c) => {
                if let Some(t) = &c.target {
                    self.walk(t, depth);
                }
                for a in &c.args {
                    self.walk(a, depth);
                }
            }
            Expr::Comprehension(c) => {
                self.walk(&c.iter_range, depth);
                self.walk(&c.accu_init, depth);
                for body in [&c.loop_cond, &c.loop_step, &c.result] {
                    self.walk(body, depth + 1);
                }
            }
            Expr::Select(s) => self.walk(&s.operand, depth),
            Expr::List(l) => l.elements.iter().for_each(|x| self.walk(x, depth)),
            Expr::Map(m) => m.entries.iter().for_each(|x| match &x.expr {
                EntryExpr::MapEntry(m) => {
                    self.walk(&m.key, depth);
                    self.walk(&m.value, depth);
                }
                EntryExpr::StructField(f) => self.walk(&f.value, depth),
            }),
            Expr::Struct(s) => s.entries.iter().for_each(|x| match &x.expr {
                EntryExpr::MapEntry(m) => {
                    self.walk(&m.key, depth);
                    self.walk(&m.value, depth);
                }
                EntryExpr::StructField(f) => self.walk(&f.value, depth),
            }),
            Expr::Literal(_) | Expr::Unspecified => {}
        }
    }
}

// ---- the Kubernetes list library and `matches` ----

fn kubernetes_library(env: &mut Env) -> Result<(), cel::DeclarationError> {
    env.add_member_overload("isSorted", "list_is_sorted", LIST_TYPE, vec![], is_sorted)?;
    env.add_member_overload("sum", "list_sum", LIST_TYPE, vec![], sum)?;
    env.add_member_overload("min", "list_min", LIST_TYPE, vec![], min)?;
    env.add_member_overload("max", "list_max", LIST_TYPE, vec![], max)?;
    env.add_member_overload(
        "indexOf",
        "list_index_of",
        LIST_TYPE,
        vec![cel::common::types::DYN_TYPE],
        index_of,
    )?;
    env.add_member_overload(
        "lastIndexOf",
        "list_last_index_of",
        LIST_TYPE,
        vec![cel::common::types::DYN_TYPE],
        last_index_of,
    )?;
    Ok(())
}

fn list_arg(args: &[CowVal<'_, '_>], function: &str) -> Result<Vec<CelValue>, ExecutionError> {
    let first = args
        .first()
        .ok_or_else(ExecutionError::missing_argument_or_target)?;
    match CelValue::try_from(first.as_ref())? {
        CelValue::List(items) => Ok(items.as_ref().clone()),
        other => Err(ExecutionError::function_error(
            function,
            format!("expected a list, got {:?}", other.type_of()),
        )),
    }
}

fn owned<'b, 'v>(value: CelValue) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let boxed: Box<dyn Val> = value.try_into()?;
    Ok(CowVal::Owned(boxed))
}

fn compare(a: &CelValue, b: &CelValue, function: &str) -> Result<std::cmp::Ordering, ExecutionError> {
    let same_kind = std::mem::discriminant(a) == std::mem::discriminant(b);
    match a.partial_cmp(b) {
        Some(o) if same_kind => Ok(o),
        _ => Err(ExecutionError::function_error(
            function,
            "list elements must be comparable values of one type",
        )),
    }
}

fn is_sorted<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let items = list_arg(&args, "isSorted")?;
    for pair in items.windows(2) {
        if compare(&pair[0], &pair[1], "isSorted")? == std::cmp::Ordering::Greater {
            return owned(CelValue::Bool(false));
        }
    }
    owned(CelValue::Bool(true))
}

fn sum<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let items = list_arg(&args, "sum")?;
    let overflow = || ExecutionError::function_error("sum", "integer overflow");
    let total = match items.first() {
        None | Some(CelValue::Int(_)) => {
            let mut t: i64 = 0;
            for v in &items {
                let CelValue::Int(i) = v else {
                    return Err(ExecutionError::function_error("sum", "mixed element types"));
                };
                t = t.checked_add(*i).ok_or_else(overflow)?;
            }
            CelValue::Int(t)
        }
        Some(CelValue::UInt(_)) => {
            let mut t: u64 = 0;
            for v in &items {
                let CelValue::UInt(i) = v else {
                    return Err(ExecutionError::function_error("sum", "mixed element types"));
                };
                t = t.checked_add(*i).ok_or_else(overflow)?;
            }
            CelValue::UInt(t)
        }
        Some(CelValue::Float(_)) => {
            let mut t = 0.0;
            for v in &items {
                let CelValue::Float(f) = v else {
                    return Err(ExecutionError::function_error("sum", "mixed element types"));
                };
                t += f;
            }
            CelValue::Float(t)
        }
        Some(_) => return Err(ExecutionError::function_error("sum", "elements are not numbers")),
    };
    owned(total)
}

fn extreme<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    function: &str,
    want: std::cmp::Ordering,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let items = list_arg(&args, function)?;
    let mut best: Option<CelValue> = None;
    for v in items {
        best = match best {
            Some(b) if compare(&v, &b, function)? != want => Some(b),
            _ => Some(v),
        };
    }
    owned(best.ok_or_else(|| {
        ExecutionError::function_error(function, format!("{function} called on empty list"))
    })?)
}

fn min<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme(args, "min", std::cmp::Ordering::Less)
}

fn max<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme(args, "max", std::cmp::Ordering::Greater)
}

fn position<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    function: &str,
    last: bool,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let items = list_arg(&args, function)?;
    let wanted = CelValue::try_from(
        args.get(1)
            .ok_or_else(ExecutionError::missing_argument_or_target)?
            .as_ref(),
    )?;
    let found = if last {
        items.iter().rposition(|v| *v == wanted)
    } else {
        items.iter().position(|v| *v == wanted)
    };
    owned(CelValue::Int(found.map_or(-1, |i| i as i64)))
}

fn index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    position(args, "indexOf", false)
}

fn last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    position(args, "lastIndexOf", true)
}

/// `matches` with the hub's Go-compatible (RE2) reading of the pattern,
/// instead of the `regex` crate's own.
fn matches(this: &CelString<'_>, re: &CelString<'_>) -> Result<CelBool, ExecutionError> {
    match super::pattern::compiled(re.inner()) {
        Ok(p) => Ok(CelBool::from(p.is_match(this.inner()))),
        Err(e) => Err(ExecutionError::function_error("matches", e)),
    }
}

/// Registers `matches` (the crate's own needs its `regex` feature, off here).
fn register_matches(env: &mut Env) -> Result<(), cel::DeclarationError> {
    cel::add_overload!(env, fn matches: (CelString, CelString) -> Result<CelBool>, id = "matches")?;
    cel::add_member_overload!(env, fn matches: (CelString, CelString) -> Result<CelBool>)
}

// ---- evaluation ----

/// JSON to CEL, typed by the schema: `number` fields are doubles even when
/// written without a fraction, as kube-apiserver reads them.
fn to_cel(value: &Value, schema: Option<&Value>) -> CelValue {
    let ty = schema.and_then(|s| s.get("type")).and_then(Value::as_str);
    match value {
        Value::Null => CelValue::Null,
        Value::Bool(b) => CelValue::Bool(*b),
        Value::Number(n) => {
            if ty == Some("number") {
                CelValue::Float(n.as_f64().unwrap_or(0.0))
            } else if let Some(i) = n.as_i64() {
                CelValue::Int(i)
            } else if let Some(u) = n.as_u64() {
                CelValue::UInt(u)
            } else {
                CelValue::Float(n.as_f64().unwrap_or(0.0))
            }
        }
        Value::String(s) => CelValue::String(Arc::new(s.clone())),
        Value::Array(items) => {
            let item_schema = schema.and_then(|s| s.get("items"));
            CelValue::List(Arc::new(items.iter().map(|v| to_cel(v, item_schema)).collect()))
        }
        Value::Object(map) => {
            let mut out: HashMap<Key, CelValue> = HashMap::with_capacity(map.len());
            for (k, v) in map {
                let child = schema.and_then(|s| {
                    s.get("properties")
                        .and_then(|p| p.get(k))
                        .or_else(|| s.get("additionalProperties").filter(|a| a.is_object()))
                });
                out.insert(Key::String(Arc::new(k.clone())), to_cel(v, child));
            }
            CelValue::Map(out.into())
        }
    }
}

/// Work `value` stands for: its nodes, and its strings by 16-byte chunks
/// (string functions are linear in the string).
fn weight(value: &Value) -> u64 {
    match value {
        Value::String(s) => 1 + s.len() as u64 / 16,
        Value::Array(items) => 1 + items.iter().map(weight).sum::<u64>(),
        Value::Object(map) => 1 + map.values().map(weight).sum::<u64>(),
        _ => 1,
    }
}

/// Cost estimate of one evaluation of `rule` over `value` (and `old`):
/// the expression's size, times the input's weight per level of
/// comprehension nesting, times the weight of what loops read from
/// `self`/`oldSelf`.
fn estimated_cost(rule: &Rule, value: &Value, old: Option<&Value>) -> u64 {
    let total = weight(value) + old.map(weight).unwrap_or(0);
    let mut cost = rule.nodes;
    for _ in 0..rule.depth.max(1) {
        cost = cost.saturating_mul(total.max(1));
    }
    let in_loops = rule
        .read_in_loops
        .iter()
        .map(|(is_old, path)| {
            let root = if *is_old { old } else { Some(value) };
            path.iter().try_fold(root?, |v, key| v.get(key)).map(weight)
        })
        .map(|w| w.unwrap_or(1))
        .max()
        .unwrap_or(1);
    cost.saturating_mul(in_loops)
}

/// The type name kube-apiserver prints as the invalid value of a rule's node.
fn type_of(schema: &Value) -> &str {
    schema.get("type").and_then(Value::as_str).unwrap_or("object")
}

fn child_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Evaluate every rule in `schema` against `obj` (after pruning and
/// defaulting), with `old` the stored object on update.
pub fn validate(schema: &Value, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut run = Run {
        causes: Vec::new(),
        budget: PER_OBJECT_BUDGET,
        out_of_budget: false,
    };
    // At the root, rules see only metadata's name and generateName.
    let root = root_view(obj);
    let old_root = old.map(root_view);
    run.node(schema, &root, old_root.as_ref(), "");
    run.causes
}

fn root_view(obj: &Value) -> Value {
    let mut obj = obj.clone();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.retain(|k, _| k == "name" || k == "generateName");
    }
    obj
}

struct Run {
    causes: Vec<Cause>,
    budget: u64,
    out_of_budget: bool,
}

impl Run {
    fn node(&mut self, schema: &Value, value: &Value, old: Option<&Value>, path: &str) {
        if self.out_of_budget || !schema.is_object() || value.is_null() {
            return;
        }
        if let Some(rules) = schema.get("x-kubernetes-validations").and_then(Value::as_array) {
            for rule in rules {
                self.rule(rule, schema, value, old, path);
                if self.out_of_budget {
                    return;
                }
            }
        }
        match value {
            Value::Object(map) => {
                let props = schema.get("properties").and_then(Value::as_object);
                let additional = schema.get("additionalProperties").filter(|a| a.is_object());
                for (key, child) in map {
                    let child_old = old.and_then(|o| o.get(key));
                    if let Some(s) = props.and_then(|p| p.get(key)) {
                        self.node(s, child, child_old, &child_path(path, key));
                    } else if let Some(s) = additional {
                        self.node(s, child, child_old, &format!("{path}[{key}]"));
                    }
                }
            }
            Value::Array(items) => {
                let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) else {
                    return;
                };
                let keys: Vec<&str> = schema
                    .get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|k| k.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let is_map = schema.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("map")
                    && !keys.is_empty();
                let old_items = old.and_then(Value::as_array);
                for (i, item) in items.iter().enumerate() {
                    // Old items correlate only through list-map keys, as in kube.
                    let item_old = old_items
                        .filter(|_| is_map)
                        .and_then(|olds| olds.iter().find(|o| keys.iter().all(|k| o.get(k) == item.get(k))));
                    self.node(item_schema, item, item_old, &format!("{path}[{i}]"));
                }
            }
            _ => {}
        }
    }

    fn rule(&mut self, rule: &Value, schema: &Value, value: &Value, old: Option<&Value>, path: &str) {
        let text = rule.get("rule").and_then(Value::as_str).unwrap_or_default();
        let type_name = type_of(schema);
        let field = match rule.get("fieldPath").and_then(Value::as_str) {
            Some(fp) if !fp.is_empty() => {
                let rel = fp.trim_start_matches('.');
                if path.is_empty() {
                    rel.to_string()
                } else if rel.starts_with('[') {
                    format!("{path}{rel}")
                } else {
                    format!("{path}.{rel}")
                }
            }
            _ => path.to_string(),
        };
        let invalid =
            |detail: &str| Cause::invalid(field.clone(), invalid_value(&Value::from(type_name), detail));
        let compiled = match compiled(text) {
            Ok(c) => c,
            // Refused when the CRD is written; one stored before is never passed silently.
            Err(e) => {
                self.causes
                    .push(invalid(&format!("rule compile error: compilation failed: {e}")));
                return;
            }
        };
        let optional_old = rule.get("optionalOldSelf").and_then(Value::as_bool) == Some(true);
        if compiled.uses_old_self && old.is_none() && !optional_old {
            return;
        }
        let cost = estimated_cost(&compiled, value, old);
        if cost > PER_CALL_LIMIT {
            self.causes.push(invalid(&format!(
                "call cost exceeds limit for rule: {text} (estimated {cost}, limit {PER_CALL_LIMIT}); \
                 bound the lists and strings it reads with maxItems/maxLength or simplify the rule"
            )));
            return;
        }
        if cost > self.budget {
            self.out_of_budget = true;
            self.causes.push(invalid(
                "validation failed due to running out of cost budget, no further validation rules will be run",
            ));
            return;
        }
        self.budget -= cost;

        let self_value = to_cel(value, Some(schema));
        let old_value = old.map(|o| to_cel(o, Some(schema)));
        let outcome = evaluate(
            &compiled,
            self_value.clone(),
            old_value.clone(),
            compiled.uses_old_self && optional_old,
        );
        match outcome {
            Ok(CelValue::Bool(true)) => {}
            Ok(CelValue::Bool(false)) => {
                let message = self
                    .message_expression(rule, self_value, old_value, optional_old, (value, old))
                    .or_else(|| {
                        rule.get("message")
                            .and_then(Value::as_str)
                            .filter(|m| !m.is_empty())
                            .map(String::from)
                    })
                    .unwrap_or_else(|| format!("failed rule: {text}"));
                let reason = rule
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("FieldValueInvalid");
                self.causes.push(match reason {
                    "FieldValueForbidden" => Cause::forbidden(field.clone(), format!("Forbidden: {message}")),
                    "FieldValueRequired" => Cause {
                        message: format!("Required value: {message}"),
                        ..Cause::required(field.clone())
                    },
                    "FieldValueDuplicate" => Cause {
                        reason: "FieldValueDuplicate".into(),
                        field: field.clone(),
                        message: format!("Duplicate value: {}", Value::from(type_name)),
                    },
                    _ => invalid(&message),
                });
            }
            Ok(_) => self
                .causes
                .push(invalid(&format!("rule did not evaluate to a bool: {text}"))),
            Err(e) => self.causes.push(invalid(&format!("{e} evaluating rule: {text}"))),
        }
    }

    /// `messageExpression`'s result, when it yields a usable message.
    fn message_expression(
        &mut self,
        rule: &Value,
        self_value: CelValue,
        old_value: Option<CelValue>,
        optional_old: bool,
        (value, old): (&Value, Option<&Value>),
    ) -> Option<String> {
        let src = rule.get("messageExpression").and_then(Value::as_str)?;
        let compiled = compiled(src).ok()?;
        let cost = estimated_cost(&compiled, value, old);
        if cost > PER_CALL_LIMIT || cost > self.budget {
            return None;
        }
        self.budget -= cost;
        match evaluate(
            &compiled,
            self_value,
            old_value,
            compiled.uses_old_self && optional_old,
        ) {
            Ok(CelValue::String(s)) if !s.trim().is_empty() && !s.contains('\n') => Some(s.to_string()),
            _ => None,
        }
    }
}

/// Run `rule` with `self` (and `oldSelf`, an `optional` when `optional_old`).
fn evaluate(
    rule: &Rule,
    self_value: CelValue,
    old_value: Option<CelValue>,
    optional_old: bool,
) -> Result<CelValue, ExecutionError> {
    let mut ctx = Context::with_env(ENV.clone());
    let self_val: Box<dyn Val> = self_value.try_into()?;
    ctx.add_variable_as_val("self", self_val);
    if optional_old {
        let opt = match old_value {
            Some(v) => Optional::of(v.try_into()?),
            None => Optional::none(),
        };
        ctx.add_variable_as_val("oldSelf", Box::new(opt));
    } else if let Some(v) = old_value {
        let old_val: Box<dyn Val> = v.try_into()?;
        ctx.add_variable_as_val("oldSelf", old_val);
    }
    rule.program.execute(&ctx)
}

/// The estimated cost of one [`evaluate_json`] of `rule` over `vars`: the
/// expression's size times the variables' weight per level of loop nesting.
/// Callers that evaluate many expressions add these up against a budget.
pub fn json_cost(rule: &Rule, vars: &[(&str, &Value)]) -> u64 {
    let total: u64 = vars.iter().map(|(_, v)| weight(v)).sum::<u64>().max(1);
    let mut cost = rule.nodes;
    for _ in 0..rule.depth.max(1) {
        cost = cost.saturating_mul(total);
    }
    cost
}

/// Evaluate `rule` (from [`compiled`]) over named JSON variables, for CEL
/// expressions that are not schema rules (KubeStellar's StatusCollectors).
/// Bounded like a rule: refused when the estimated cost is over
/// [`PER_CALL_LIMIT`]: the expression's size times the variables' weight
/// per level of loop nesting.
pub fn evaluate_json(rule: &Rule, vars: &[(&str, &Value)]) -> Result<Value, String> {
    let cost = json_cost(rule, vars);
    if cost > PER_CALL_LIMIT {
        return Err(format!(
            "the expression would cost too much to evaluate (estimated {cost}, limit {PER_CALL_LIMIT}); \
             read less, or loop over smaller lists"
        ));
    }
    let mut ctx = Context::with_env(ENV.clone());
    for (name, value) in vars {
        let val: Box<dyn Val> = to_cel(value, None)
            .try_into()
            .map_err(|e: ExecutionError| e.to_string())?;
        ctx.add_variable_as_val(*name, val);
    }
    let out = rule.program.execute(&ctx).map_err(|e| e.to_string())?;
    out.json().map_err(|e| format!("the result is not JSON: {e}"))
}

// ---- CRD-time checks ----

/// Problems with the `x-kubernetes-validations` of one schema node at `at`
/// (`...openAPIV3Schema.properties[spec]`): rules that do not compile,
/// message expressions that do not compile, unknown reasons.
pub fn rule_errors(node: &serde_json::Map<String, Value>, at: &str, causes: &mut Vec<Cause>) {
    let Some(rules) = node.get("x-kubernetes-validations") else {
        return;
    };
    let Some(rules) = rules.as_array() else {
        causes.push(Cause::type_invalid(
            format!("{at}.x-kubernetes-validations"),
            invalid_value(rules, "must be a list of validation rules"),
        ));
        return;
    };
    for (i, rule) in rules.iter().enumerate() {
        let at = format!("{at}.x-kubernetes-validations[{i}]");
        match rule.get("rule").and_then(Value::as_str) {
            None | Some("") => causes.push(Cause::required(format!("{at}.rule"))),
            Some(text) => {
                if let Err(e) = compiled(text) {
                    causes.push(Cause::invalid(
                        format!("{at}.rule"),
                        invalid_value(&Value::from(text), &format!("compilation failed: {e}")),
                    ));
                }
            }
        }
        if let Some(text) = rule.get("messageExpression").and_then(Value::as_str) {
            if let Err(e) = compiled(text) {
                causes.push(Cause::invalid(
                    format!("{at}.messageExpression"),
                    invalid_value(
                        &Value::from(text),
                        &format!("messageExpression compilation failed: {e}"),
                    ),
                ));
            }
        }
        if let Some(reason) = rule.get("reason").and_then(Value::as_str) {
            if !REASONS.contains(&reason) {
                causes.push(Cause::unsupported(
                    format!("{at}.reason"),
                    format!(
                        "Unsupported value: {}: supported values: {}",
                        Value::from(reason),
                        REASONS.map(|r| format!("\"{r}\"")).join(", ")
                    ),
                ));
            }
        }
        if let Some(fp) = rule.get("fieldPath").and_then(Value::as_str) {
            if !fp.is_empty() && !fp.starts_with('.') {
                causes.push(Cause::invalid(
                    format!("{at}.fieldPath"),
                    invalid_value(&Value::from(fp), "must be a valid path: must start with '.'"),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(rules: Value) -> Value {
        json!({
            "type": "object",
            "properties": {"spec": {
                "type": "object",
                "x-kubernetes-validations": rules,
                "properties": {
                    "replicas": {"type": "integer"},
                    "minReplicas": {"type": "integer"},
                    "name": {"type": "string"},
                    "ratio": {"type": "number"},
                    "items": {"type": "array", "items": {"type": "integer"}},
                    "tags": {"type": "array", "items": {"type": "string"}},
                }
            }}
        })
    }

    fn described(causes: &[Cause]) -> Vec<String> {
        causes.iter().map(Cause::describe).collect()
    }

    fn check(rule: &str, spec: Value) -> Vec<String> {
        described(&validate(
            &schema(json!([{"rule": rule}])),
            &json!({"spec": spec}),
            None,
        ))
    }

    #[test]
    fn a_passing_rule_gives_no_cause_and_a_failing_one_kubes_shape() {
        let s = schema(json!([{"rule": "self.minReplicas <= self.replicas"}]));
        assert!(validate(&s, &json!({"spec": {"replicas": 3, "minReplicas": 1}}), None).is_empty());
        let causes = validate(&s, &json!({"spec": {"replicas": 1, "minReplicas": 3}}), None);
        assert_eq!(
            described(&causes),
            ["spec: Invalid value: \"object\": failed rule: self.minReplicas <= self.replicas"]
        );
        assert_eq!(causes[0].reason, "FieldValueInvalid");
    }

    #[test]
    fn message_message_expression_reason_and_field_path() {
        let s = schema(json!([{
            "rule": "self.replicas < 10",
            "message": "too many",
            "messageExpression": "'replicas ' + string(self.replicas) + ' is over 9'",
            "reason": "FieldValueForbidden",
            "fieldPath": ".replicas",
        }]));
        let causes = validate(&s, &json!({"spec": {"replicas": 12}}), None);
        assert_eq!(
            described(&causes),
            ["spec.replicas: Forbidden: replicas 12 is over 9"]
        );
        assert_eq!(causes[0].reason, "FieldValueForbidden");
        // A message expression that fails falls back to the message.
        let s = schema(json!([{"rule": "false", "message": "plain", "messageExpression": "self.nope"}]));
        assert_eq!(
            described(&validate(&s, &json!({"spec": {}}), None)),
            ["spec: Invalid value: \"object\": plain"]
        );
    }

    #[test]
    fn transition_rules_run_only_with_an_old_value() {
        let s = schema(json!([{"rule": "self == oldSelf", "message": "spec is immutable"}]));
        let new = json!({"spec": {"name": "b"}});
        assert!(validate(&s, &new, None).is_empty());
        assert!(validate(&s, &new, Some(&json!({"spec": {"name": "b"}}))).is_empty());
        assert_eq!(
            described(&validate(&s, &new, Some(&json!({"spec": {"name": "a"}})))),
            ["spec: Invalid value: \"object\": spec is immutable"]
        );
        let optional = schema(json!([{
            "rule": "!oldSelf.hasValue() || oldSelf.value().name == self.name",
            "optionalOldSelf": true,
        }]));
        assert!(validate(&optional, &new, None).is_empty());
        assert_eq!(
            validate(&optional, &new, Some(&json!({"spec": {"name": "a"}}))).len(),
            1
        );
    }

    #[test]
    fn kubernetes_libraries() {
        for rule in [
            "has(self.name) && size(self.name) == 3",
            "!has(self.replicas)",
            "self.name.matches('^[a-z]+$') && !self.name.matches('\\\\d')",
            "self.name.startsWith('ab') && self.name.endsWith('c') && self.name.contains('b')",
            "self.name.upperAscii() == 'ABC' && 'ABC'.lowerAscii() == self.name",
            "self.items.all(x, x > 0) && self.items.exists(x, x == 2) && self.items.exists_one(x, x == 3)",
            "self.items.map(x, x * 2) == [2, 4, 6] && self.items.filter(x, x > 1) == [2, 3]",
            "self.items.isSorted() && self.items.sum() == 6 && self.items.min() == 1 && self.items.max() == 3",
            "self.tags.indexOf('b') == 1 && self.tags.lastIndexOf('z') == -1 && !['b', 'a'].isSorted()",
            "self.ratio == 2.0 && math.greatest(1, 5) == 5",
        ] {
            let spec = json!({"name": "abc", "items": [1, 2, 3], "tags": ["a", "b"], "ratio": 2});
            assert_eq!(check(rule, spec), Vec::<String>::new(), "{rule}");
        }
    }

    #[test]
    fn evaluation_errors_name_the_rule() {
        assert_eq!(
            check("self.minReplicas > 0", json!({})),
            ["spec: Invalid value: \"object\": No such key: minReplicas evaluating rule: self.minReplicas > 0"]
        );
        assert_eq!(
            check("self.replicas", json!({"replicas": 1})),
            ["spec: Invalid value: \"object\": rule did not evaluate to a bool: self.replicas"]
        );
    }

    #[test]
    fn a_rule_over_a_huge_list_is_refused_before_it_runs() {
        let items: Vec<i64> = (0..5000).collect();
        let causes = check(
            "self.items.all(x, self.items.all(y, x <= y || x > y))",
            json!({"items": items}),
        );
        assert_eq!(causes.len(), 1);
        assert!(causes[0].contains("call cost exceeds limit"), "{causes:?}");
        // A loop that copies the list it walks is quadratic too.
        let causes = check(
            "self.items.map(x, self.items).size() > 0",
            json!({"items": items}),
        );
        assert!(causes[0].contains("call cost exceeds limit"), "{causes:?}");
        // Linear rules over the same list are fine, scalars read in loops too.
        let linear = json!({"items": items, "replicas": 10});
        assert!(check("self.items.all(x, x >= 0)", linear.clone()).is_empty());
        assert!(check("self.items.all(x, x < 5000 || self.replicas > 0)", linear).is_empty());
    }

    #[test]
    fn rules_in_items_and_additional_properties_get_their_paths() {
        let s = json!({
            "type": "object",
            "properties": {
                "list": {"type": "array", "items": {"type": "string", "x-kubernetes-validations": [{"rule": "self != 'x'"}]}},
                "labels": {"type": "object", "additionalProperties": {"type": "string", "x-kubernetes-validations": [{"rule": "size(self) < 3"}]}},
            }
        });
        let causes = validate(&s, &json!({"list": ["a", "x"], "labels": {"k": "long"}}), None);
        assert_eq!(
            described(&causes),
            [
                "list[1]: Invalid value: \"string\": failed rule: self != 'x'",
                "labels[k]: Invalid value: \"string\": failed rule: size(self) < 3",
            ]
        );
    }

    #[test]
    fn crd_time_errors_name_the_field() {
        let node = json!({"x-kubernetes-validations": [
            {"rule": "self.a <"},
            {"rule": "true", "messageExpression": "'x' +", "reason": "Nope", "fieldPath": "a"},
            {"rule": ""},
        ]});
        let mut causes = Vec::new();
        rule_errors(node.as_object().unwrap(), "spec.x", &mut causes);
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.x.x-kubernetes-validations[0].rule",
                "spec.x.x-kubernetes-validations[1].messageExpression",
                "spec.x.x-kubernetes-validations[1].reason",
                "spec.x.x-kubernetes-validations[1].fieldPath",
                "spec.x.x-kubernetes-validations[2].rule",
            ]
        );
        assert!(
            causes[0]
                .message
                .starts_with("Invalid value: \"self.a <\": compilation failed: "),
            "{}",
            causes[0].message
        );
    }
}

#[cfg(test)]
mod expressions {
    use super::*;
    use serde_json::json;

    #[test]
    fn expressions_read_named_variables_and_give_json() {
        let obj = json!({"spec": {"replicas": 3}});
        let returned =
            json!({"status": {"availableReplicas": 2, "conditions": [{"type": "Ready", "status": "True"}]}});
        let eval =
            |src: &str| evaluate_json(&compiled(src).unwrap(), &[("obj", &obj), ("returned", &returned)]);
        assert_eq!(
            eval("obj.spec.replicas - returned.status.availableReplicas"),
            Ok(json!(1))
        );
        assert_eq!(
            eval("returned.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')"),
            Ok(json!(true))
        );
        assert_eq!(eval("{'a': [1, 'x']}"), Ok(json!({"a": [1, "x"]})));
        assert!(eval("returned.status.nope").is_err());
    }

    #[test]
    fn costly_expressions_are_refused_before_they_run() {
        let big = json!({"items": (0..2000).collect::<Vec<_>>()});
        let rule = compiled("obj.items.all(a, obj.items.all(b, obj.items.all(c, a + b + c >= 0)))").unwrap();
        let e = evaluate_json(&rule, &[("obj", &big)]).unwrap_err();
        assert!(e.contains("cost too much"), "{e}");
    }
}

/// Random rules from a small grammar over the functions the environment
/// offers, against one object: compiling and evaluating them must give a
/// result or an error, never a panic (a panic in a write would be a 500).
#[cfg(test)]
mod fuzz {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use serde_json::json;

    const ATOMS: &[&str] = &[
        "self",
        "self.items",
        "self.name",
        "self.n",
        "self.m",
        "self.f",
        "oldSelf",
        "1",
        "-1",
        "0",
        "9223372036854775807",
        "-9223372036854775808",
        "18446744073709551615u",
        "1.5",
        "-0.0",
        "1e308",
        "'abc'",
        "''",
        "'\\u00e9'",
        "b'x'",
        "true",
        "null",
        "[]",
        "[1, 2]",
        "['b', 'a']",
        "{}",
        "{'a': 1}",
        "[1, 'a']",
        "[[1]]",
        "optional.none()",
        "optional.of(1)",
        "x",
    ];
    const UNARY: &[&str] = &[
        "size({})",
        "has({}.a)",
        "!{}",
        "-{}",
        "int({})",
        "uint({})",
        "double({})",
        "string({})",
        "bytes({})",
        "type({})",
        "dyn({})",
        "{}.lowerAscii()",
        "{}.upperAscii()",
        "{}.isSorted()",
        "{}.sum()",
        "{}.min()",
        "{}.max()",
        "{}.size()",
        "{}.trim()",
        "{}.reverse()",
        "{}.all(x, {})",
        "{}.exists(x, x)",
        "{}.exists_one(x, x > 0)",
        "{}.map(x, x + x)",
        "{}.filter(x, x)",
        "{}.hasValue()",
        "{}.value()",
        "{}.orValue(1)",
        "{}[0]",
        "{}[-1]",
        "{}['a']",
        "{}.a",
        "{}.?a",
        "math.greatest({})",
        "math.least({})",
        "{}.charAt(-1)",
        "{}.charAt(99)",
        "{}.substring(2, 1)",
        "{}.substring(-1)",
        "{}.split('')",
        "{}.join(',')",
        "{}.indexOf('')",
        "{}.indexOf(1)",
        "{}.lastIndexOf(1)",
        "{}.replace('', 'x')",
        "{}.matches('[')",
        "{}.matches('(a+)+$')",
        "{}.quote()",
        "{}.format([{}])",
        "strings.quote({})",
        "math.abs({})",
        "math.ceil({})",
        "math.sign({})",
        "math.bitShiftLeft({}, 64)",
        "math.bitShiftRight({}, -1)",
        "math.round({})",
        "math.sqrt({})",
        "math.isNaN({})",
        "{}.startsWith('a')",
        "{}.endsWith({})",
        "{}.contains({})",
        "({})",
    ];
    const BINARY: &[&str] = &[
        "+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "&&", "||", "in",
    ];

    fn expr(rng: &mut StdRng, depth: u32) -> String {
        if depth == 0 || rng.random_ratio(1, 4) {
            return ATOMS[rng.random_range(0..ATOMS.len())].to_string();
        }
        match rng.random_range(0..3) {
            0 => {
                let a = expr(rng, depth - 1);
                let b = expr(rng, depth - 1);
                format!("{a} {} {b}", BINARY[rng.random_range(0..BINARY.len())])
            }
            1 => {
                let c = expr(rng, depth - 1);
                let a = expr(rng, depth - 1);
                let b = expr(rng, depth - 1);
                format!("{c} ? {a} : {b}")
            }
            _ => {
                let template = UNARY[rng.random_range(0..UNARY.len())];
                let mut out = template.to_string();
                while out.contains("{}") {
                    out = out.replacen("{}", &expr(rng, depth - 1), 1);
                }
                out
            }
        }
    }

    #[test]
    fn random_rules_never_panic() {
        let cases: usize = std::env::var("FERRY_FUZZ_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1000);
        let mut rng = StdRng::seed_from_u64(7);
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "items": {"type": "array", "items": {"type": "integer"}},
            "name": {"type": "string"}, "n": {"type": "integer"},
            "m": {"type": "object", "additionalProperties": {"type": "string"}},
            "f": {"type": "number"},
        }}}});
        let obj =
            json!({"spec": {"items": [3, 1, 2], "name": "Ab", "n": i64::MAX, "m": {"a": "b"}, "f": 0.5}});
        let old = json!({"spec": {"items": [], "name": "", "n": 0, "m": {}, "f": 1}});
        for _ in 0..cases {
            let rule = expr(&mut rng, 4);
            let mut s = schema.clone();
            s["properties"]["spec"]["x-kubernetes-validations"] = json!([
                {"rule": rule, "messageExpression": rule, "optionalOldSelf": rng.random_bool(0.3)}
            ]);
            let outcome = std::panic::catch_unwind(|| {
                let _ = compiled(&rule);
                let _ = validate(&s, &obj, Some(&old));
                let _ = validate(&s, &obj, None);
            });
            assert!(outcome.is_ok(), "rule panicked: {rule}");
        }
    }

    #[test]
    fn deeply_nested_rules_are_refused_before_parsing_and_the_limit_compiles_on_a_small_stack() {
        let nested = |n: usize| format!("{}self.x == 1{}", "(".repeat(n), ")".repeat(n));
        let e = compiled(&nested(5000)).err().unwrap();
        assert!(e.contains("nests 5000 levels"), "{e}");
        let ternaries = format!("{}1", "true ? 1 : ".repeat(MAX_NESTING + 1));
        assert!(compiled(&ternaries).is_err());
        // Brackets inside strings do not count.
        assert!(compiled(&format!("self.x == '{}'", "(".repeat(100))).is_ok());
        // What the limit lets through parses on a 2 MiB stack (a tokio worker's).
        let mixed = format!(
            "{}[{{'a': self.x}}]{}.size() == 1",
            "(".repeat(MAX_NESTING - 2),
            ")".repeat(MAX_NESTING - 2)
        );
        std::thread::Builder::new()
            .stack_size(2 * 1024 * 1024)
            .spawn(move || {
                assert!(compiled(&nested(MAX_NESTING)).is_ok());
                assert!(compiled(&mixed).is_ok(), "{mixed}");
                let t = format!("{}1", "true ? 1 : ".repeat(MAX_NESTING));
                assert!(compiled(&t).is_ok());
            })
            .unwrap()
            .join()
            .unwrap();
    }
}
