//! Label and field selectors: the one place that parses and evaluates them.
//!
//! Label selectors follow `k8s.io/apimachinery/pkg/labels` (the query-string
//! grammar, its error messages and its matching rules); field selectors follow
//! `k8s.io/apimachinery/pkg/fields` (`=`, `==`, `!=` with `\`-escaping).

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

use crate::status::Cause;
use crate::validation::names::{label_value_errors, qualified_name_errors};

/// Most label selectors in one list of them (a Placement's
/// `locationSelectors`, a downsync member's `labelSelectors`, ...).
pub const MAX_SELECTORS: usize = 16;
/// Most requirements (`matchLabels` entries and `matchExpressions`) in one
/// `metav1.LabelSelector`.
pub const MAX_REQUIREMENTS: usize = 32;
/// Most values in one `In` / `NotIn` expression.
pub const MAX_VALUES: usize = 256;
/// Most values in all the selectors of one object, together.
pub const MAX_VALUES_PER_OBJECT: usize = 1024;

/// Counts what the selectors of one object hold, against the limits: kube
/// bounds each key and value (63 bytes a name) but not how many there are,
/// and a controller evaluates every selector on many events, so the hub
/// bounds the number (Ferry's limits, above), checked when the object is
/// written.
#[derive(Debug, Default)]
pub struct SelectorLimits {
    values: usize,
    /// Where the object first went over [`MAX_VALUES_PER_OBJECT`].
    over_at: Option<String>,
    pub causes: Vec<Cause>,
}

impl SelectorLimits {
    /// A list of selectors at `field` (absent or not a list: nothing to count).
    pub fn list(&mut self, field: &str, v: Option<&Value>) {
        let Some(items) = v.and_then(Value::as_array) else {
            return;
        };
        if items.len() > MAX_SELECTORS {
            self.causes
                .push(Cause::too_many(field, items.len(), MAX_SELECTORS));
            return;
        }
        for (i, s) in items.iter().enumerate() {
            self.one(&format!("{field}[{i}]"), Some(s));
        }
    }

    /// One `metav1.LabelSelector` at `field`.
    pub fn one(&mut self, field: &str, v: Option<&Value>) {
        let Some(v) = v else {
            return;
        };
        let labels = v
            .get("matchLabels")
            .and_then(Value::as_object)
            .map_or(0, |m| m.len());
        let exprs = v.get("matchExpressions").and_then(Value::as_array);
        let requirements = labels + exprs.map_or(0, Vec::len);
        if requirements > MAX_REQUIREMENTS {
            self.causes.push(Cause::too_many(
                format!("{field}.matchExpressions"),
                requirements,
                MAX_REQUIREMENTS,
            ));
            return;
        }
        for (i, e) in exprs.into_iter().flatten().enumerate() {
            let Some(values) = e.get("values").and_then(Value::as_array) else {
                continue;
            };
            let at = format!("{field}.matchExpressions[{i}].values");
            if values.len() > MAX_VALUES {
                self.causes.push(Cause::too_many(&at, values.len(), MAX_VALUES));
            }
            self.values += values.len();
            if self.values > MAX_VALUES_PER_OBJECT && self.over_at.is_none() {
                self.over_at = Some(at);
            }
        }
        self.values += labels;
    }

    /// The causes, with the per-object total if it is over.
    pub fn finish(mut self) -> Vec<Cause> {
        if let Some(at) = self.over_at.take() {
            self.causes.push(Cause {
                reason: "FieldValueTooMany".into(),
                field: at,
                message: format!(
                    "Too many: {}: must have at most {MAX_VALUES_PER_OBJECT} items (values in all label selectors of the object)",
                    self.values
                ),
            });
        }
        self.causes
    }
}

/// A selector that could not be parsed or holds invalid keys or values. The
/// message is worded as kube-apiserver words it and names the bad token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// A label selector (query string or `metav1.LabelSelector`) is invalid.
    #[error("{0}")]
    InvalidLabelSelector(String),
    /// A field selector is invalid.
    #[error("{0}")]
    InvalidFieldSelector(String),
}

/// How one label requirement compares a label's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    /// `key=value`
    Equals,
    /// `key==value`
    DoubleEquals,
    /// `key!=value`: also matches objects without the key.
    NotEquals,
    /// `key in (a,b)`
    In,
    /// `key notin (a,b)`: also matches objects without the key.
    NotIn,
    /// `key`
    Exists,
    /// `!key`
    DoesNotExist,
    /// `key>5`: the label must exist and be an integer greater than 5.
    GreaterThan,
    /// `key<5`: the label must exist and be an integer less than 5.
    LessThan,
}

/// One `key op values` term of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    key: String,
    operator: Operator,
    /// Sorted and de-duplicated, as Kubernetes keeps them.
    values: Vec<String>,
}

impl Requirement {
    /// A validated requirement: key and values must be a valid label key and
    /// label values, and their number must suit the operator.
    pub fn new(key: &str, operator: Operator, values: Vec<String>) -> Result<Self, String> {
        let mut errs = Vec::new();
        let key_errs = qualified_name_errors(key);
        if !key_errs.is_empty() {
            errs.push(format!(
                "key: Invalid value: {}: {}",
                quoted(key),
                key_errs.join("; ")
            ));
        }
        let mut values = values;
        values.sort();
        values.dedup();
        match operator {
            Operator::In | Operator::NotIn if values.is_empty() => errs.push(
                "values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty".into(),
            ),
            Operator::Equals | Operator::DoubleEquals | Operator::NotEquals if values.len() != 1 => errs
                .push(format!(
                    "values: Invalid value: {values:?}: exact-match compatibility requires one single value"
                )),
            Operator::Exists | Operator::DoesNotExist if !values.is_empty() => errs.push(format!(
                "values: Invalid value: {values:?}: values set must be empty for exists and does not exist"
            )),
            Operator::GreaterThan | Operator::LessThan => {
                if values.len() != 1 {
                    errs.push(format!(
                        "values: Invalid value: {values:?}: for 'Gt', 'Lt' operators, exactly one value is required"
                    ));
                }
                for (i, v) in values.iter().enumerate() {
                    if v.parse::<i64>().is_err() {
                        errs.push(format!(
                            "values[{i}]: Invalid value: {}: for 'Gt', 'Lt' operators, the value must be an integer",
                            quoted(v)
                        ));
                    }
                }
            }
            _ => {}
        }
        for (i, v) in values.iter().enumerate() {
            let value_errs = label_value_errors(v);
            if !value_errs.is_empty() {
                errs.push(format!(
                    "values[{i}]: Invalid value: {}: {}",
                    quoted(v),
                    value_errs.join("; ")
                ));
            }
        }
        match errs.len() {
            0 => Ok(Requirement {
                key: key.to_string(),
                operator,
                values,
            }),
            1 => Err(errs.remove(0)),
            _ => Err(format!("[{}]", errs.join(", "))),
        }
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    pub fn operator(&self) -> Operator {
        self.operator
    }

    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Whether `labels` satisfy this requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            Operator::Equals | Operator::DoubleEquals | Operator::In => {
                value.is_some_and(|v| self.values.binary_search(v).is_ok())
            }
            Operator::NotEquals | Operator::NotIn => {
                value.is_none_or(|v| self.values.binary_search(v).is_err())
            }
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let Some(have) = value.and_then(|v| v.parse::<i64>().ok()) else {
                    return false;
                };
                let Some(want) = self.values.first().and_then(|v| v.parse::<i64>().ok()) else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    have > want
                } else {
                    have < want
                }
            }
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let joined = self.values.join(",");
        match self.operator {
            Operator::Exists => write!(f, "{}", self.key),
            Operator::DoesNotExist => write!(f, "!{}", self.key),
            Operator::Equals => write!(f, "{}={joined}", self.key),
            Operator::DoubleEquals => write!(f, "{}=={joined}", self.key),
            Operator::NotEquals => write!(f, "{}!={joined}", self.key),
            Operator::GreaterThan => write!(f, "{}>{joined}", self.key),
            Operator::LessThan => write!(f, "{}<{joined}", self.key),
            Operator::In => write!(f, "{} in ({joined})", self.key),
            Operator::NotIn => write!(f, "{} notin ({joined})", self.key),
        }
    }
}

fn quoted(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

/// A parsed label selector: every requirement must match. The default (and
/// the empty string) selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
    /// A `null` `metav1.LabelSelector` selects nothing, as in Kubernetes.
    nothing: bool,
}

impl LabelSelector {
    /// Parse the query-string form: `a=b,c==d,e!=f,g in (x,y),h notin (z),i,!j`
    /// (also `k>1`, `k<1`). Whitespace between tokens is ignored.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let requirements = LabelParser {
            tokens: lex(s),
            pos: 0,
        }
        .parse()
        .map_err(SelectorError::InvalidLabelSelector)?;
        Ok(LabelSelector::from_requirements(requirements))
    }

    /// A selector that matches no object.
    pub fn nothing() -> Self {
        LabelSelector {
            requirements: Vec::new(),
            nothing: true,
        }
    }

    /// Convert a `metav1.LabelSelector` (`matchLabels`, `matchExpressions`
    /// with `In`, `NotIn`, `Exists`, `DoesNotExist`). An empty selector selects
    /// everything; `null` selects nothing.
    pub fn from_label_selector_json(v: &Value) -> Result<Self, SelectorError> {
        let invalid = SelectorError::InvalidLabelSelector;
        let obj = match v {
            Value::Null => return Ok(LabelSelector::nothing()),
            Value::Object(obj) => obj,
            other => return Err(invalid(format!("label selector must be an object, not {other}"))),
        };
        let mut requirements = Vec::new();
        match obj.get("matchLabels") {
            None | Some(Value::Null) => {}
            Some(Value::Object(labels)) => {
                for (k, v) in labels {
                    let v = v
                        .as_str()
                        .ok_or_else(|| invalid(format!("matchLabels[{k}] must be a string")))?;
                    requirements
                        .push(Requirement::new(k, Operator::Equals, vec![v.to_string()]).map_err(invalid)?);
                }
            }
            Some(_) => return Err(invalid("matchLabels must be a map of strings".into())),
        }
        match obj.get("matchExpressions") {
            None | Some(Value::Null) => {}
            Some(Value::Array(exprs)) => {
                for expr in exprs {
                    requirements.push(requirement_from_expression(expr).map_err(invalid)?);
                }
            }
            Some(_) => return Err(invalid("matchExpressions must be a list".into())),
        }
        Ok(LabelSelector::from_requirements(requirements))
    }

    /// Requirements are kept sorted by key (stable), as Kubernetes keeps
    /// them, so the printed form matches kube-apiserver's.
    fn from_requirements(mut requirements: Vec<Requirement>) -> Self {
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        LabelSelector {
            requirements,
            nothing: false,
        }
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Whether this selector selects everything.
    pub fn is_empty(&self) -> bool {
        !self.nothing && self.requirements.is_empty()
    }

    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }
}

/// The query-string form, parseable by [`LabelSelector::parse`].
impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.requirements.iter().map(Requirement::to_string).collect();
        f.write_str(&parts.join(","))
    }
}

fn requirement_from_expression(expr: &Value) -> Result<Requirement, String> {
    let key = expr.get("key").and_then(Value::as_str).unwrap_or_default();
    let op = expr.get("operator").and_then(Value::as_str).unwrap_or_default();
    let operator = match op {
        "In" => Operator::In,
        "NotIn" => Operator::NotIn,
        "Exists" => Operator::Exists,
        "DoesNotExist" => Operator::DoesNotExist,
        other => {
            return Err(format!(
                "{} is not a valid label selector operator",
                quoted(other)
            ))
        }
    };
    let values = match expr.get("values") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(vs)) => vs
            .iter()
            .map(|v| {
                v.as_str()
                    .map(String::from)
                    .ok_or_else(|| format!("values of {key} must be strings"))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(format!("values of {key} must be a list")),
    };
    Requirement::new(key, operator, values)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Identifier,
    In,
    NotIn,
    DoesNotExist,
    NotEquals,
    Equals,
    DoubleEquals,
    GreaterThan,
    LessThan,
    Comma,
    OpenPar,
    ClosedPar,
    EndOfString,
}

fn is_special(c: char) -> bool {
    matches!(c, '=' | '!' | '(' | ')' | ',' | '>' | '<')
}

/// Kubernetes' selector lexer: identifiers run until whitespace or a special
/// symbol; `in`/`notin` are keywords; symbols are read longest-first.
fn lex(s: &str) -> Vec<(Token, String)> {
    let chars: Vec<char> = s.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    loop {
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        let Some(&c) = chars.get(i) else {
            tokens.push((Token::EndOfString, String::new()));
            return tokens;
        };
        if is_special(c) {
            let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
            let (tok, len) = match two.as_str() {
                "!=" => (Token::NotEquals, 2),
                "==" => (Token::DoubleEquals, 2),
                _ => match c {
                    '!' => (Token::DoesNotExist, 1),
                    '=' => (Token::Equals, 1),
                    '(' => (Token::OpenPar, 1),
                    ')' => (Token::ClosedPar, 1),
                    ',' => (Token::Comma, 1),
                    '>' => (Token::GreaterThan, 1),
                    _ => (Token::LessThan, 1),
                },
            };
            tokens.push((tok, chars[i..i + len].iter().collect()));
            i += len;
        } else {
            let start = i;
            while i < chars.len() && !chars[i].is_whitespace() && !is_special(chars[i]) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let tok = match word.as_str() {
                "in" => Token::In,
                "notin" => Token::NotIn,
                _ => Token::Identifier,
            };
            tokens.push((tok, word));
        }
    }
}

/// Whether `in`/`notin` are read as keywords (after a key) or as plain
/// identifiers (keys and values).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    KeyAndOperator,
    Values,
}

struct LabelParser {
    tokens: Vec<(Token, String)>,
    pos: usize,
}

const BINARY_OPERATORS: &str = "in, notin, =, ==, !=, gt, lt";

impl LabelParser {
    fn lookahead(&self, mode: Mode) -> (Token, String) {
        let (tok, lit) = self
            .tokens
            .get(self.pos)
            .cloned()
            .unwrap_or((Token::EndOfString, String::new()));
        let tok = match tok {
            Token::In | Token::NotIn if mode == Mode::Values => Token::Identifier,
            t => t,
        };
        (tok, lit)
    }

    fn consume(&mut self, mode: Mode) -> (Token, String) {
        let t = self.lookahead(mode);
        if self.pos < self.tokens.len() {
            self.pos += 1;
        }
        t
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut requirements = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(Mode::Values);
            match tok {
                Token::Identifier | Token::DoesNotExist => {
                    let r = self
                        .requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    requirements.push(r);
                    let (tok, lit) = self.consume(Mode::Values);
                    match tok {
                        Token::EndOfString => return Ok(requirements),
                        Token::Comma => {
                            let (next, next_lit) = self.lookahead(Mode::Values);
                            if next != Token::Identifier && next != Token::DoesNotExist {
                                return Err(format!("found '{next_lit}', expected: identifier after ','"));
                            }
                        }
                        _ => return Err(format!("found '{lit}', expected: ',' or 'end of string'")),
                    }
                }
                Token::EndOfString => return Ok(requirements),
                _ => {
                    return Err(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    ))
                }
            }
        }
    }

    fn requirement(&mut self) -> Result<Requirement, String> {
        let (key, inferred) = self.key_and_inferred_operator()?;
        if let Some(op) = inferred {
            return Requirement::new(&key, op, Vec::new());
        }
        let op = self.operator()?;
        let values = match op {
            Operator::In | Operator::NotIn => self.value_set()?,
            _ => self.exact_value()?,
        };
        Requirement::new(&key, op, values)
    }

    fn key_and_inferred_operator(&mut self) -> Result<(String, Option<Operator>), String> {
        let (mut tok, mut lit) = self.consume(Mode::Values);
        let negated = tok == Token::DoesNotExist;
        if negated {
            (tok, lit) = self.consume(Mode::Values);
        }
        if tok != Token::Identifier {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        let key_errs = qualified_name_errors(&lit);
        if !key_errs.is_empty() {
            return Err(format!(
                "key: Invalid value: {}: {}",
                quoted(&lit),
                key_errs.join("; ")
            ));
        }
        if negated {
            return Ok((lit, Some(Operator::DoesNotExist)));
        }
        let (next, _) = self.lookahead(Mode::Values);
        let exists = matches!(next, Token::EndOfString | Token::Comma);
        Ok((lit, exists.then_some(Operator::Exists)))
    }

    fn operator(&mut self) -> Result<Operator, String> {
        let (tok, lit) = self.consume(Mode::KeyAndOperator);
        Ok(match tok {
            Token::In => Operator::In,
            Token::NotIn => Operator::NotIn,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::NotEquals => Operator::NotEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            _ => return Err(format!("found '{lit}', expected: {BINARY_OPERATORS}")),
        })
    }

    /// `(a,b)`; empty entries (`(a,)`, `()`) stand for the empty value.
    fn value_set(&mut self) -> Result<Vec<String>, String> {
        let (tok, lit) = self.consume(Mode::Values);
        if tok != Token::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.lookahead(Mode::Values);
        match tok {
            Token::Identifier | Token::Comma => {
                let values = self.identifier_list()?;
                let (tok, lit) = self.consume(Mode::Values);
                if tok != Token::ClosedPar {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(values)
            }
            Token::ClosedPar => {
                self.consume(Mode::Values);
                Ok(vec![String::new()])
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    fn identifier_list(&mut self) -> Result<Vec<String>, String> {
        let mut values = Vec::new();
        loop {
            let (tok, lit) = self.consume(Mode::Values);
            match tok {
                Token::Identifier => {
                    values.push(lit);
                    let (next, next_lit) = self.lookahead(Mode::Values);
                    match next {
                        Token::Comma => continue,
                        Token::ClosedPar => return Ok(values),
                        _ => return Err(format!("found '{next_lit}', expected: ',' or ')'")),
                    }
                }
                Token::Comma => {
                    if values.is_empty() {
                        values.push(String::new());
                    }
                    match self.lookahead(Mode::Values).0 {
                        Token::ClosedPar => {
                            values.push(String::new());
                            return Ok(values);
                        }
                        Token::Comma => {
                            self.consume(Mode::Values);
                            values.push(String::new());
                        }
                        _ => {}
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    /// The value after `=`, `==`, `!=`, `>`, `<`; nothing means the empty value.
    fn exact_value(&mut self) -> Result<Vec<String>, String> {
        let (tok, _) = self.lookahead(Mode::Values);
        if matches!(tok, Token::EndOfString | Token::Comma) {
            return Ok(vec![String::new()]);
        }
        let (tok, lit) = self.consume(Mode::Values);
        if tok == Token::Identifier {
            Ok(vec![lit])
        } else {
            Err(format!("found '{lit}', expected: identifier"))
        }
    }
}

/// One `field=value` / `field!=value` term.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldTerm {
    field: String,
    value: String,
    negated: bool,
}

/// A parsed field selector: every term must match. The caller supplies the
/// field values and decides which fields it supports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

impl FieldSelector {
    /// Parse `metadata.name=x,metadata.namespace!=y` (`=`, `==`, `!=`). In
    /// values, `\,` `\=` and `\\` escape those characters.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let invalid = SelectorError::InvalidFieldSelector;
        let mut terms = Vec::new();
        for part in split_unescaped_commas(s) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let cant_understand = || invalid(format!("invalid selector: '{s}'; can't understand '{part}'"));
            let (field, op, raw) = split_term(part).ok_or_else(cant_understand)?;
            let field = field.trim();
            if field.is_empty() {
                return Err(cant_understand());
            }
            let value = unescape_field_value(raw.trim()).map_err(invalid)?;
            terms.push(FieldTerm {
                field: field.to_string(),
                value,
                negated: op == "!=",
            });
        }
        Ok(FieldSelector { terms })
    }

    /// Whether the object whose field values `get` returns matches. A field
    /// `get` returns `None` for compares as the empty string.
    pub fn matches(&self, get: impl Fn(&str) -> Option<String>) -> bool {
        self.terms.iter().all(|t| {
            let have = get(&t.field).unwrap_or_default();
            (have == t.value) != t.negated
        })
    }

    /// The fields this selector refers to, in order (possibly repeated).
    pub fn fields(&self) -> Vec<&str> {
        self.terms.iter().map(|t| t.field.as_str()).collect()
    }

    /// Whether this selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The value an equality term (`field=value`) requires of `field`, if any;
    /// useful to narrow a list (e.g. by `metadata.name`) before matching.
    pub fn required_value(&self, field: &str) -> Option<&str> {
        self.terms
            .iter()
            .find(|t| !t.negated && t.field == field)
            .map(|t| t.value.as_str())
    }
}

impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .terms
            .iter()
            .map(|t| {
                let value = t
                    .value
                    .replace('\\', "\\\\")
                    .replace(',', "\\,")
                    .replace('=', "\\=");
                format!("{}{}{value}", t.field, if t.negated { "!=" } else { "=" })
            })
            .collect();
        f.write_str(&parts.join(","))
    }
}

fn split_unescaped_commas(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == ',' {
            parts.push(&s[start..i]);
            start = i + 1;
        }
    }
    parts.push(&s[start..]);
    parts
}

/// Split at the first operator, trying `!=`, `==`, `=` at each position.
fn split_term(term: &str) -> Option<(&str, &'static str, &str)> {
    for (i, _) in term.char_indices() {
        for op in ["!=", "==", "="] {
            if term[i..].starts_with(op) {
                return Some((&term[..i], op, &term[i + op.len()..]));
            }
        }
    }
    None
}

fn unescape_field_value(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e @ ('\\' | ',' | '=')) => out.push(e),
                Some(e) => return Err(format!("invalid field selector: invalid escape sequence: \\{e}")),
                None => return Err("invalid field selector: invalid escape sequence: \\".into()),
            },
            ',' | '=' => {
                return Err(format!(
                    "invalid field selector: unescaped character in value: {c}"
                ))
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn sel(s: &str) -> LabelSelector {
        LabelSelector::parse(s).unwrap_or_else(|e| panic!("{s:?} should parse: {e}"))
    }

    fn parse_err(s: &str) -> String {
        LabelSelector::parse(s).expect_err(s).to_string()
    }

    #[test]
    fn empty_selector_matches_everything() {
        let s = sel("  ");
        assert!(s.is_empty());
        assert!(s.matches(&labels(&[])));
        assert!(s.matches(&labels(&[("a", "b")])));
    }

    #[test]
    fn all_operators_parse_with_whitespace() {
        let s = sel("a=b, c==d,e != f , g in (x, y),h notin(z),i,!j");
        assert_eq!(s.requirements().len(), 7);
        assert_eq!(s.to_string(), "a=b,c==d,e!=f,g in (x,y),h notin (z),i,!j");
        let good = labels(&[
            ("a", "b"),
            ("c", "d"),
            ("e", "e"),
            ("g", "y"),
            ("h", "q"),
            ("i", ""),
        ]);
        assert!(s.matches(&good));
        let mut with_j = good.clone();
        with_j.insert("j".into(), "1".into());
        assert!(!s.matches(&with_j));
        let mut wrong_g = good.clone();
        wrong_g.insert("g".into(), "z".into());
        assert!(!s.matches(&wrong_g));
    }

    #[test]
    fn notin_matches_objects_without_the_key() {
        let s = sel("env notin (prod)");
        assert!(s.matches(&labels(&[])));
        assert!(s.matches(&labels(&[("env", "dev")])));
        assert!(!s.matches(&labels(&[("env", "prod")])));
    }

    #[test]
    fn not_equals_matches_objects_without_the_key() {
        let s = sel("tier!=db");
        assert!(s.matches(&labels(&[])));
        assert!(!s.matches(&labels(&[("tier", "db")])));
    }

    #[test]
    fn equality_requires_the_key() {
        assert!(!sel("a=b").matches(&labels(&[])));
        assert!(sel("a=").matches(&labels(&[("a", "")])));
        assert!(!sel("a in (b)").matches(&labels(&[])));
    }

    #[test]
    fn in_and_notin_can_be_keys_and_values() {
        let s = sel("in=notin,x in (in)");
        assert!(s.matches(&labels(&[("in", "notin"), ("x", "in")])));
    }

    #[test]
    fn numeric_comparisons_need_integer_labels() {
        let s = sel("gen>3");
        assert!(s.matches(&labels(&[("gen", "4")])));
        assert!(!s.matches(&labels(&[("gen", "3")])));
        assert!(!s.matches(&labels(&[("gen", "x")])));
        assert!(!s.matches(&labels(&[])));
        assert!(sel("gen<3").matches(&labels(&[("gen", "-1")])));
        assert!(parse_err("gen>x").ends_with("for 'Gt', 'Lt' operators, the value must be an integer"));
    }

    #[test]
    fn parse_errors_name_the_bad_token() {
        assert_eq!(
            parse_err("!(a)"),
            "unable to parse requirement: found '(', expected: identifier"
        );
        assert_eq!(
            parse_err("(a)"),
            "found '(', expected: !, identifier, or 'end of string'"
        );
        assert_eq!(
            parse_err("a (b)"),
            "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt"
        );
        assert_eq!(
            parse_err("a in b"),
            "unable to parse requirement: found 'b' expected: '('"
        );
        assert_eq!(
            parse_err("a in (b c)"),
            "unable to parse requirement: found 'c', expected: ',' or ')'"
        );
        assert_eq!(parse_err("a=b c"), "found 'c', expected: ',' or 'end of string'");
        assert_eq!(parse_err("a=b,"), "found '', expected: identifier after ','");
        assert_eq!(
            parse_err("a=("),
            "unable to parse requirement: found '(', expected: identifier"
        );
    }

    #[test]
    fn invalid_keys_and_values_are_rejected() {
        let key = parse_err("-a=b");
        assert!(
            key.starts_with(
                "unable to parse requirement: key: Invalid value: \"-a\": name part must consist"
            ),
            "{key}"
        );
        let long = format!("a={}", "v".repeat(64));
        assert!(parse_err(&long).contains("must be no more than 63 characters"));
        let value = parse_err("a=b/c");
        assert!(
            value.contains("values[0]: Invalid value: \"b/c\": a valid label must be"),
            "{value}"
        );
        assert!(LabelSelector::parse("example.com/app=web").is_ok());
    }

    #[test]
    fn empty_value_sets_mean_the_empty_value() {
        let s = sel("a in ()");
        assert_eq!(s.requirements()[0].values(), &[String::new()]);
        let s = sel("a in (,b)");
        assert_eq!(s.requirements()[0].values(), &[String::new(), "b".to_string()]);
    }

    #[test]
    fn label_selector_json_uses_match_labels_and_expressions() {
        let v = serde_json::json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["fe", "be"]},
                {"key": "canary", "operator": "DoesNotExist"},
                {"key": "env", "operator": "NotIn", "values": ["prod"]}
            ]
        });
        let s = LabelSelector::from_label_selector_json(&v).unwrap();
        assert!(s.matches(&labels(&[("app", "web"), ("tier", "fe")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("tier", "fe"), ("canary", "1")])));
        assert!(!s.matches(&labels(&[("app", "web")])));
        assert_eq!(s.to_string(), "app=web,!canary,env notin (prod),tier in (be,fe)");
    }

    #[test]
    fn empty_json_selector_matches_all_and_null_matches_none() {
        let all = LabelSelector::from_label_selector_json(&serde_json::json!({})).unwrap();
        assert!(all.is_empty() && all.matches(&labels(&[])));
        let none = LabelSelector::from_label_selector_json(&Value::Null).unwrap();
        assert!(!none.is_empty() && !none.matches(&labels(&[])));
    }

    #[test]
    fn json_selector_rejects_unknown_operators_and_empty_in() {
        let bad_op =
            serde_json::json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]});
        assert_eq!(
            LabelSelector::from_label_selector_json(&bad_op)
                .unwrap_err()
                .to_string(),
            "\"Gt\" is not a valid label selector operator"
        );
        let empty_in =
            serde_json::json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]});
        assert!(LabelSelector::from_label_selector_json(&empty_in)
            .unwrap_err()
            .to_string()
            .contains("values set can't be empty"));
    }

    #[test]
    fn field_selector_matches_equalities_and_inequalities() {
        let f = FieldSelector::parse("metadata.name=x,metadata.namespace!=y").unwrap();
        assert_eq!(f.fields(), vec!["metadata.name", "metadata.namespace"]);
        let get = |ns: &'static str| {
            move |field: &str| match field {
                "metadata.name" => Some("x".to_string()),
                "metadata.namespace" => Some(ns.to_string()),
                _ => None,
            }
        };
        assert!(f.matches(get("z")));
        assert!(!f.matches(get("y")));
        assert_eq!(f.required_value("metadata.name"), Some("x"));
        assert!(FieldSelector::parse("spec.nodeName==").unwrap().matches(|_| None));
    }

    #[test]
    fn field_selector_values_can_be_escaped() {
        let f = FieldSelector::parse(r"a=x\,y\=z\\,b!=c").unwrap();
        assert!(f.matches(|field| Some(if field == "a" {
            r"x,y=z\".to_string()
        } else {
            "d".to_string()
        })));
        assert_eq!(f.to_string(), r"a=x\,y\=z\\,b!=c");
    }

    #[test]
    fn field_selector_errors_quote_the_term() {
        assert_eq!(
            FieldSelector::parse("metadata.name").unwrap_err().to_string(),
            "invalid selector: 'metadata.name'; can't understand 'metadata.name'"
        );
        assert_eq!(
            FieldSelector::parse("a=b=c").unwrap_err().to_string(),
            "invalid field selector: unescaped character in value: ="
        );
        assert_eq!(
            FieldSelector::parse(r"a=\q").unwrap_err().to_string(),
            r"invalid field selector: invalid escape sequence: \q"
        );
        assert!(FieldSelector::parse("").unwrap().is_empty());
    }

    #[test]
    fn selector_sizes_are_bounded_per_selector_and_per_object() {
        let values = |n: usize| -> Vec<String> { (0..n).map(|i| format!("v{i}")).collect() };
        let expr = |n: usize| json!({"key": "k", "operator": "NotIn", "values": values(n)});
        let mut l = SelectorLimits::default();
        l.list(
            "spec.locationSelectors",
            Some(&json!([{"matchExpressions": [expr(MAX_VALUES)]}])),
        );
        assert!(l.finish().is_empty());
        // The attack: 10 selectors of 12,000 values.
        let attack = json!((0..10)
            .map(|_| json!({"matchExpressions": [expr(12_000)]}))
            .collect::<Vec<_>>());
        let mut l = SelectorLimits::default();
        l.list("spec.locationSelectors", Some(&attack));
        let causes: Vec<String> = l.finish().iter().map(Cause::describe).collect();
        assert_eq!(
            causes[0],
            "spec.locationSelectors[0].matchExpressions[0].values: Too many: 12000: must have at most 256 items"
        );
        assert!(
            causes
                .last()
                .unwrap()
                .contains("at most 1024 items (values in all label selectors"),
            "{causes:?}"
        );
        let mut l = SelectorLimits::default();
        let many: Vec<Value> = (0..=MAX_SELECTORS).map(|_| json!({})).collect();
        l.list("spec.locationSelectors", Some(&json!(many)));
        let wide: serde_json::Map<String, Value> = (0..=MAX_REQUIREMENTS)
            .map(|i| (format!("k{i}"), json!("v")))
            .collect();
        l.one("spec.namespaceSelector", Some(&json!({"matchLabels": wide})));
        let causes: Vec<String> = l.finish().iter().map(Cause::describe).collect();
        assert_eq!(
            causes,
            [
                "spec.locationSelectors: Too many: 17: must have at most 16 items",
                "spec.namespaceSelector.matchExpressions: Too many: 33: must have at most 32 items",
            ]
        );
    }
}
