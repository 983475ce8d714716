//! A StatusCollector, compiled and run over one row per destination. Pure:
//! a spec and rows in, a result table out.
//!
//! The order is KubeStellar's (an SQL `SELECT`): `filter` keeps the rows
//! where it is `true`; then either `select` makes one output row per kept
//! row, or `groupBy` splits the kept rows into groups (one group when it is
//! empty) and `combinedFields` aggregates each; `limit` cuts the output.
//! An expression failing on a row is listed in `rowErrors` (a few of them)
//! and that row is left out of what the expression feeds; nothing a user
//! writes can make evaluation panic or run unbounded: expressions, columns
//! and the limit are bounded in size, and each evaluation's cost is
//! estimated and refused over kube's per-call limit before it runs.

use std::collections::BTreeMap;
use std::sync::Arc;

use ferry_api::combined_status::{
    ColumnValue, ErrorInColumn, NamedExpression, NamedStatusCombination, RowEvaluationError,
    StatusCollectorSpec, StatusCombinationRow, Wec, DEFAULT_LIMIT, MAX_COLUMNS, MAX_EXPRESSION_BYTES,
    MAX_LIMIT,
};
use ferry_server::validation::cel::{self, Rule};
use serde_json::{json, Value};

/// Row errors listed per result; the rest are counted in the last one.
pub const MAX_ROW_ERRORS: usize = 10;

/// One destination's row: the variables an expression sees.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The destination's SyncTarget name.
    pub destination: String,
    /// `{name, labels}` of the destination.
    pub inventory: Value,
    /// The workload object, without its status.
    pub obj: Value,
    /// `{status}` as the destination returned it (`{}` before it has).
    pub returned: Value,
    /// `{lastReturnedUpdateTimestamp}`.
    pub propagation: Value,
}

impl Row {
    fn vars(&self) -> [(&str, &Value); 4] {
        [
            ("inventory", &self.inventory),
            ("obj", &self.obj),
            ("returned", &self.returned),
            ("propagation", &self.propagation),
        ]
    }
}

/// An aggregation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aggregate {
    Count,
    Sum,
    Avg,
    Min,
    Max,
}

/// A StatusCollector ready to run.
pub struct Collector {
    filter: Option<Arc<Rule>>,
    group_by: Vec<(String, Arc<Rule>)>,
    combined: Vec<(String, Aggregate, Option<Arc<Rule>>)>,
    select: Vec<(String, Arc<Rule>)>,
    limit: usize,
}

/// The compiled expression at `field`, or an error naming it.
fn expression(field: &str, src: &str, errors: &mut Vec<String>) -> Option<Arc<Rule>> {
    if src.trim().is_empty() {
        errors.push(format!(
            "{field}: empty; write a CEL expression over inventory, obj, returned and propagation"
        ));
        return None;
    }
    if src.len() > MAX_EXPRESSION_BYTES {
        errors.push(format!(
            "{field}: the expression is {} bytes, more than the limit of {MAX_EXPRESSION_BYTES}; shorten it",
            src.len()
        ));
        return None;
    }
    match cel::compiled(src) {
        Ok(rule) => Some(rule),
        Err(e) => {
            let first = e.lines().next().unwrap_or_default();
            errors.push(format!(
                "{field}: {src:?} is not a valid CEL expression ({first}); fix its syntax"
            ));
            None
        }
    }
}

/// The compiled columns of `list` (at `field`).
fn named(field: &str, list: &[NamedExpression], errors: &mut Vec<String>) -> Vec<(String, Arc<Rule>)> {
    list.iter()
        .take(MAX_COLUMNS)
        .enumerate()
        .filter_map(|(i, n)| {
            Some((
                n.name.clone(),
                expression(&format!("{field}[{i}].def"), &n.def, errors)?,
            ))
        })
        .collect()
}

/// Compile `spec`; the errors name each field, what is wrong and the fix.
pub fn compile(spec: &StatusCollectorSpec) -> Result<Collector, Vec<String>> {
    let mut errors = Vec::new();
    let filter = spec
        .filter
        .as_deref()
        .and_then(|f| expression("spec.filter", f, &mut errors));
    let group_by = named("spec.groupBy", &spec.group_by, &mut errors);
    let select = named("spec.select", &spec.select, &mut errors);
    let mut combined = Vec::new();
    for (i, a) in spec.combined_fields.iter().take(MAX_COLUMNS).enumerate() {
        let field = format!("spec.combinedFields[{i}]");
        let kind = match a.type_.as_str() {
            "COUNT" => Aggregate::Count,
            "SUM" => Aggregate::Sum,
            "AVG" => Aggregate::Avg,
            "MIN" => Aggregate::Min,
            "MAX" => Aggregate::Max,
            other => {
                errors.push(format!(
                    "{field}.type: {other:?} is not supported; use one of COUNT, SUM, AVG, MIN, MAX"
                ));
                continue;
            }
        };
        let subject = match (&a.subject, kind) {
            (None, Aggregate::Count) => None,
            (None, _) => {
                errors.push(format!(
                    "{field}.subject: required for {}; give the expression whose values are combined",
                    a.type_
                ));
                continue;
            }
            (Some(s), _) => match expression(&format!("{field}.subject"), s, &mut errors) {
                Some(rule) => Some(rule),
                None => continue,
            },
        };
        combined.push((a.name.clone(), kind, subject));
    }

    for (field, len) in [
        ("spec.groupBy", spec.group_by.len()),
        ("spec.combinedFields", spec.combined_fields.len()),
        ("spec.select", spec.select.len()),
    ] {
        if len > MAX_COLUMNS {
            errors.push(format!(
                "{field}: {len} entries, more than the limit of {MAX_COLUMNS}; remove some"
            ));
        }
    }
    if !spec.select.is_empty() && !spec.combined_fields.is_empty() {
        errors.push("spec.select: cannot be used together with spec.combinedFields; keep one of them".into());
    }
    if !spec.group_by.is_empty() && spec.combined_fields.is_empty() {
        errors.push("spec.groupBy: needs spec.combinedFields (what to compute per group); add one, e.g. {name: count, type: COUNT}".into());
    }
    if spec.select.is_empty() && spec.combined_fields.is_empty() {
        errors.push(
            "spec: has neither select nor combinedFields, so it yields nothing; add one of them".into(),
        );
    }
    let mut names: Vec<(&str, String)> = Vec::new();
    for (field, list) in [("spec.groupBy", &spec.group_by), ("spec.select", &spec.select)] {
        for (i, n) in list.iter().enumerate() {
            names.push((&n.name, format!("{field}[{i}].name")));
        }
    }
    for (i, a) in spec.combined_fields.iter().enumerate() {
        names.push((&a.name, format!("spec.combinedFields[{i}].name")));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (name, field) in names {
        if name.is_empty() {
            errors.push(format!("{field}: empty; name the column"));
        } else if !seen.insert(name) {
            errors.push(format!(
                "{field}: the column name {name:?} is used twice; rename one"
            ));
        }
    }
    if spec.limit < 0 || spec.limit > MAX_LIMIT {
        errors.push(format!(
            "spec.limit: {} is out of range; use 0 (meaning {DEFAULT_LIMIT}) to {MAX_LIMIT}",
            spec.limit
        ));
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(Collector {
        filter,
        group_by,
        combined,
        select,
        limit: if spec.limit == 0 {
            DEFAULT_LIMIT
        } else {
            spec.limit
        } as usize,
    })
}

/// Collects row errors, keeping the first few.
struct RowErrors {
    listed: Vec<RowEvaluationError>,
    more: usize,
}

impl RowErrors {
    fn push(&mut self, row: &Row, column: &str, error: String) {
        if self.listed.len() < MAX_ROW_ERRORS {
            self.listed.push(RowEvaluationError {
                wec: Wec {
                    cluster_id: row.destination.clone(),
                },
                column_name: column.to_string(),
                error,
            });
        } else {
            self.more += 1;
        }
    }

    fn into_list(mut self) -> Vec<RowEvaluationError> {
        if self.more > 0 {
            if let Some(last) = self.listed.last_mut() {
                last.error = format!("{} (and {} more errors)", last.error, self.more);
            }
        }
        self.listed
    }
}

/// What all StatusCollectors of one (object, placement) may cost together:
/// kube-apiserver's per-object CEL budget, so naming many collectors cannot
/// multiply the work one object makes, as each is bounded per call.
pub const COST_BUDGET: u64 = cel::PER_OBJECT_BUDGET;

/// The most running `c` over `rows` can cost: every expression on every row
/// (the filter may keep them all), as [`cel::json_cost`] estimates it.
pub fn cost(c: &Collector, rows: &[Row]) -> u64 {
    let rules: Vec<&Rule> = c
        .filter
        .iter()
        .chain(c.group_by.iter().map(|(_, r)| r))
        .chain(c.combined.iter().filter_map(|(_, _, r)| r.as_ref()))
        .chain(c.select.iter().map(|(_, r)| r))
        .map(|r| r.as_ref())
        .collect();
    rows.iter()
        .flat_map(|row| rules.iter().map(move |rule| cel::json_cost(rule, &row.vars())))
        .fold(0u64, u64::saturating_add)
}

fn eval(rule: &Rule, row: &Row) -> Result<Value, String> {
    cel::evaluate_json(rule, &row.vars())
}

/// Run `c` over `rows`, as the result named `name`.
pub fn evaluate(name: &str, c: &Collector, rows: &[Row]) -> NamedStatusCombination {
    let mut errors = RowErrors {
        listed: Vec::new(),
        more: 0,
    };
    let kept: Vec<&Row> = rows
        .iter()
        .filter(|row| match &c.filter {
            None => true,
            Some(f) => match eval(f, row) {
                Ok(Value::Bool(keep)) => keep,
                Ok(Value::Null) => false,
                Ok(other) => {
                    errors.push(
                        row,
                        "",
                        format!("the filter gave {}, not a bool", kind_of(&other)),
                    );
                    false
                }
                Err(e) => {
                    errors.push(row, "", e);
                    false
                }
            },
        })
        .collect();

    let mut out = NamedStatusCombination {
        name: name.to_string(),
        ..Default::default()
    };
    if !c.select.is_empty() {
        out.column_names = c.select.iter().map(|(n, _)| n.clone()).collect();
        for row in kept.iter().take(c.limit) {
            let columns = c
                .select
                .iter()
                .map(|(column, rule)| match eval(rule, row) {
                    Ok(v) => ColumnValue::of(&v),
                    Err(e) => {
                        errors.push(row, column, e);
                        ColumnValue::of(&Value::Null)
                    }
                })
                .collect();
            out.rows.push(StatusCombinationRow { columns });
        }
    } else {
        out.column_names = c
            .group_by
            .iter()
            .map(|(n, _)| n.clone())
            .chain(c.combined.iter().map(|(n, _, _)| n.clone()))
            .collect();
        // Groups by their key (as JSON text, so the order is stable).
        let mut groups: BTreeMap<String, (Vec<Value>, Vec<&Row>)> = BTreeMap::new();
        if c.group_by.is_empty() {
            groups.insert("[]".to_string(), (Vec::new(), Vec::new()));
        }
        'rows: for row in &kept {
            let mut key = Vec::new();
            for (column, rule) in &c.group_by {
                match eval(rule, row) {
                    Ok(v @ (Value::Array(_) | Value::Object(_))) => {
                        errors.push(
                            row,
                            column,
                            format!("groupBy needs a single value, got {}", kind_of(&v)),
                        );
                        continue 'rows;
                    }
                    Ok(v) => key.push(v),
                    Err(e) => {
                        errors.push(row, column, e);
                        continue 'rows;
                    }
                }
            }
            let text = Value::Array(key.clone()).to_string();
            groups
                .entry(text)
                .or_insert_with(|| (key, Vec::new()))
                .1
                .push(row);
        }
        let mut aggregation_errors: BTreeMap<String, String> = BTreeMap::new();
        for (key, members) in groups.into_values().take(c.limit) {
            let mut columns: Vec<ColumnValue> = key.iter().map(ColumnValue::of).collect();
            for (column, kind, subject) in &c.combined {
                let mut values = Vec::new();
                for row in &members {
                    let Some(rule) = subject else {
                        values.push(1.0);
                        continue;
                    };
                    match eval(rule, row) {
                        Ok(Value::Null) => {}
                        Ok(_) if *kind == Aggregate::Count => values.push(1.0),
                        Ok(v) => match number(&v) {
                            Some(n) => values.push(n),
                            None => {
                                aggregation_errors.entry(column.clone()).or_insert_with(|| {
                                    format!(
                                        "{} of {} is not a number (on {})",
                                        kind_of(&v),
                                        v,
                                        row.destination
                                    )
                                });
                            }
                        },
                        Err(e) => errors.push(row, column, e),
                    }
                }
                columns.push(number_value(aggregate(*kind, &values)));
            }
            out.rows.push(StatusCombinationRow { columns });
        }
        out.aggregation_errors = aggregation_errors
            .into_iter()
            .map(|(column_name, error)| ErrorInColumn { column_name, error })
            .collect();
    }
    out.row_errors = errors.into_list();
    out
}

/// A value's number: JSON numbers, and strings that read as one.
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    }
}

/// The aggregate of `values`: an empty AVG is NaN, the others the
/// operation's identity (KubeStellar's convention).
pub fn aggregate(kind: Aggregate, values: &[f64]) -> f64 {
    match kind {
        Aggregate::Count => values.len() as f64,
        Aggregate::Sum => values.iter().sum(),
        Aggregate::Avg => values.iter().sum::<f64>() / values.len() as f64,
        Aggregate::Min => values.iter().copied().fold(f64::INFINITY, f64::min),
        Aggregate::Max => values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    }
}

/// A number as a column value: whole numbers without a fraction, and
/// NaN/infinities spelt out (they have no JSON form).
pub fn number_value(n: f64) -> ColumnValue {
    let text = if n.is_nan() {
        "NaN".to_string()
    } else if n.is_infinite() {
        if n > 0.0 { "+Inf" } else { "-Inf" }.to_string()
    } else if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    };
    ColumnValue {
        type_: "Number".into(),
        float: Some(text),
        ..Default::default()
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a bool",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a map",
    }
}

/// The row for one destination.
pub fn row(
    destination: &str,
    labels: &BTreeMap<String, String>,
    obj: &Value,
    returned_status: Option<&Value>,
    last_returned: &str,
) -> Row {
    let mut obj = obj.clone();
    if let Some(map) = obj.as_object_mut() {
        map.remove("status");
    }
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    Row {
        destination: destination.to_string(),
        inventory: json!({"name": destination, "labels": labels}),
        obj,
        returned: json!({"status": returned_status.cloned().unwrap_or_else(|| json!({}))}),
        propagation: json!({"lastReturnedUpdateTimestamp": last_returned}),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ferry_api::combined_status::NamedAggregator;

    fn rows() -> Vec<Row> {
        let obj = json!({"spec": {"replicas": 2}, "status": {"x": 1}, "metadata": {"name": "web", "managedFields": [{}]}});
        [("florin", "eu", 2), ("guilder", "eu", 1), ("pound", "uk", 0)]
            .iter()
            .map(|(name, region, available)| {
                let labels = BTreeMap::from([("region".to_string(), region.to_string())]);
                row(
                    name,
                    &labels,
                    &obj,
                    Some(&json!({"availableReplicas": available, "phase": "Running"})),
                    "t",
                )
            })
            .collect()
    }

    fn spec(v: Value) -> StatusCollectorSpec {
        serde_json::from_value(v).unwrap()
    }

    /// A result's rows as plain JSON values.
    pub(crate) fn values(r: &NamedStatusCombination) -> Vec<Vec<Value>> {
        r.rows
            .iter()
            .map(|row| row.columns.iter().map(ColumnValue::value).collect())
            .collect()
    }

    #[test]
    fn rows_hide_the_status_and_managed_fields_of_the_object() {
        let r = &rows()[0];
        assert!(r.obj.get("status").is_none());
        assert!(r.obj["metadata"].get("managedFields").is_none());
        assert_eq!(r.inventory, json!({"name": "florin", "labels": {"region": "eu"}}));
    }

    #[test]
    fn count_sum_avg_min_max_over_all_rows() {
        let c = compile(&spec(json!({"combinedFields": [
            {"name": "n", "type": "COUNT"},
            {"name": "sum", "type": "SUM", "subject": "returned.status.availableReplicas"},
            {"name": "avg", "type": "AVG", "subject": "returned.status.availableReplicas"},
            {"name": "min", "type": "MIN", "subject": "returned.status.availableReplicas"},
            {"name": "max", "type": "MAX", "subject": "returned.status.availableReplicas"}]})))
        .unwrap();
        let r = evaluate("avail", &c, &rows());
        assert_eq!(r.column_names, ["n", "sum", "avg", "min", "max"]);
        assert_eq!(
            values(&r),
            vec![vec![json!(3), json!(3), json!(1), json!(0), json!(2)]]
        );
        // No rows: one row of identities, AVG is NaN.
        let empty = evaluate("avail", &c, &[]);
        assert_eq!(empty.rows[0].columns[0].float.as_deref(), Some("0"));
        assert_eq!(empty.rows[0].columns[2].float.as_deref(), Some("NaN"));
    }

    #[test]
    fn group_by_makes_a_histogram_and_filter_and_limit_apply() {
        let c = compile(&spec(json!({
            "filter": "returned.status.availableReplicas < obj.spec.replicas",
            "groupBy": [{"name": "region", "def": "inventory.labels.region"}],
            "combinedFields": [{"name": "count", "type": "COUNT"}]})))
        .unwrap();
        let r = evaluate("lagging-by-region", &c, &rows());
        assert_eq!(r.column_names, ["region", "count"]);
        assert_eq!(
            values(&r),
            vec![vec![json!("eu"), json!(1)], vec![json!("uk"), json!(1)]]
        );
        let one = compile(&spec(
            json!({"groupBy": [{"name": "region", "def": "inventory.labels.region"}],
            "combinedFields": [{"name": "count", "type": "COUNT"}], "limit": 1}),
        ))
        .unwrap();
        assert_eq!(evaluate("x", &one, &rows()).rows.len(), 1);
    }

    #[test]
    fn select_lists_rows_and_reports_failing_ones() {
        let c = compile(&spec(json!({
            "filter": "obj.spec.replicas != returned.status.availableReplicas",
            "select": [{"name": "wec", "def": "inventory.name"}, {"name": "zone", "def": "inventory.labels.zone"}]})))
        .unwrap();
        let r = evaluate("lagging", &c, &rows());
        assert_eq!(
            values(&r),
            vec![
                vec![json!("guilder"), Value::Null],
                vec![json!("pound"), Value::Null]
            ]
        );
        assert_eq!(r.row_errors.len(), 2);
        assert_eq!(r.row_errors[0].column_name, "zone");
        assert_eq!(r.row_errors[0].wec.cluster_id, "guilder");
    }

    #[test]
    fn rows_an_expression_fails_on_are_left_out_of_aggregations() {
        let mut rs = rows();
        rs[2].returned = json!({"status": {}});
        let c = compile(&spec(json!({"combinedFields": [
            {"name": "sum", "type": "SUM", "subject": "returned.status.availableReplicas"},
            {"name": "phases", "type": "SUM", "subject": "returned.status.phase"}]})))
        .unwrap();
        let r = evaluate("x", &c, &rs);
        assert_eq!(r.rows[0].columns[0].value(), json!(3));
        assert_eq!(r.row_errors.len(), 2, "{:?}", r.row_errors);
        assert_eq!(r.aggregation_errors.len(), 1);
        assert_eq!(r.aggregation_errors[0].column_name, "phases");
    }

    #[test]
    fn a_bad_spec_names_each_field_and_the_fix() {
        let errors = compile(&spec(json!({
            "filter": "returned.status.(",
            "select": [{"name": "a", "def": "1"}],
            "combinedFields": [{"name": "a", "type": "MEDIAN"}, {"name": "s", "type": "SUM"}],
            "limit": -1})))
        .err()
        .unwrap();
        let fields: Vec<&str> = errors.iter().map(|e| e.split(':').next().unwrap()).collect();
        assert_eq!(
            fields,
            [
                "spec.filter",
                "spec.combinedFields[0].type",
                "spec.combinedFields[1].subject",
                "spec.select",
                "spec.combinedFields[0].name",
                "spec.limit"
            ],
            "{errors:?}"
        );
        assert!(errors[0].contains("fix its syntax"));
        let nothing = compile(&StatusCollectorSpec::default()).err().unwrap();
        assert!(nothing[0].starts_with("spec: has neither"));
        let long = StatusCollectorSpec {
            select: vec![NamedExpression {
                name: "x".into(),
                def: "1+".repeat(MAX_EXPRESSION_BYTES),
            }],
            combined_fields: vec![],
            ..Default::default()
        };
        assert!(compile(&long).err().unwrap()[0].contains("more than the limit"));
        let _ = NamedAggregator::default();
    }

    #[test]
    fn filters_that_give_no_bool_are_errors_not_rows() {
        let c = compile(&spec(
            json!({"filter": "inventory.name", "combinedFields": [{"name": "n", "type": "COUNT"}]}),
        ))
        .unwrap();
        let r = evaluate("x", &c, &rows());
        assert_eq!(r.rows[0].columns[0].value(), json!(0));
        assert_eq!(r.row_errors.len(), 3);
        assert_eq!(r.row_errors[0].column_name, "");
    }
}
