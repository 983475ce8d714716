//! The summaries every placed object gets without any StatusCollector:
//! Deployments — available of desired replicas per cluster and in total;
//! Jobs — succeeded and failed pods per cluster and in total; any other
//! object whose status has a `Ready` condition — that condition per cluster
//! and how many are Ready; and for any object whose copies drifted (someone
//! changed one in its cluster and the syncer restored it), the last drift
//! per cluster. Results are named `builtin:<what>` (a StatusCollector's name
//! cannot hold `:`), and the totals go into the CombinedStatus's one-line
//! `summary`. Pure.

use ferry_api::combined_status::{ColumnValue, NamedStatusCombination, StatusCombinationRow, BUILTIN_PREFIX};
use ferry_api::drift::Drift;
use serde_json::{json, Value};

use super::collect::{number_value, Row};

/// The built-in results for objects of `group`/`resource` over `rows`, and
/// the one-line summary; `None` when the kind has no built-in summary and
/// no destination reports a `Ready` condition.
pub fn summarize(group: &str, resource: &str, rows: &[Row]) -> Option<(Vec<NamedStatusCombination>, String)> {
    match (group, resource) {
        ("apps", "deployments") => Some(deployments(rows)),
        ("batch", "jobs") => Some(jobs(rows)),
        _ => ready(rows),
    }
}

fn status(row: &Row) -> Option<&Value> {
    row.returned
        .get("status")
        .filter(|s| s.as_object().is_some_and(|o| !o.is_empty()))
}

fn int_at(v: Option<&Value>, key: &str) -> Option<i64> {
    v.and_then(|s| s.get(key)).and_then(Value::as_i64)
}

fn table(name: &str, columns: &[&str], rows: Vec<Vec<ColumnValue>>) -> NamedStatusCombination {
    NamedStatusCombination {
        name: format!("{BUILTIN_PREFIX}{name}"),
        column_names: columns.iter().map(|c| c.to_string()).collect(),
        rows: rows
            .into_iter()
            .map(|columns| StatusCombinationRow { columns })
            .collect(),
        ..Default::default()
    }
}

fn text(s: &str) -> ColumnValue {
    ColumnValue::of(&json!(s))
}

fn count(n: i64) -> ColumnValue {
    number_value(n as f64)
}

fn maybe(n: Option<i64>) -> ColumnValue {
    n.map_or_else(|| ColumnValue::of(&Value::Null), count)
}

/// " (N not reporting yet)" when some destinations have returned no status.
fn silent(rows: &[Row]) -> String {
    match rows.iter().filter(|r| status(r).is_none()).count() {
        0 => String::new(),
        n => format!(" ({n} not reporting yet)"),
    }
}

fn clusters(n: usize) -> String {
    format!("{n} cluster{}", if n == 1 { "" } else { "s" })
}

fn deployments(rows: &[Row]) -> (Vec<NamedStatusCombination>, String) {
    let (mut available, mut desired) = (0i64, 0i64);
    let mut per_cluster = Vec::new();
    for row in rows {
        // What the cluster was asked for: the copy's replicas (1 when unset).
        let want = row
            .obj
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        let have = status(row).map(|s| int_at(Some(s), "availableReplicas").unwrap_or(0));
        available = available.saturating_add(have.unwrap_or(0));
        desired = desired.saturating_add(want);
        per_cluster.push(vec![text(&row.destination), maybe(have), count(want)]);
    }
    let summary = format!(
        "{available}/{desired} available on {}{}",
        clusters(rows.len()),
        silent(rows)
    );
    (
        vec![
            table("availability", &["cluster", "available", "desired"], per_cluster),
            table(
                "availability-total",
                &["clusters", "available", "desired"],
                vec![vec![count(rows.len() as i64), count(available), count(desired)]],
            ),
        ],
        summary,
    )
}

fn jobs(rows: &[Row]) -> (Vec<NamedStatusCombination>, String) {
    let (mut succeeded, mut failed) = (0i64, 0i64);
    let mut per_cluster = Vec::new();
    for row in rows {
        let s = status(row);
        let (ok, bad) = (int_at(s, "succeeded"), int_at(s, "failed"));
        succeeded = succeeded.saturating_add(ok.unwrap_or(0));
        failed = failed.saturating_add(bad.unwrap_or(0));
        let (ok, bad) = if s.is_some() {
            (Some(ok.unwrap_or(0)), Some(bad.unwrap_or(0)))
        } else {
            (None, None)
        };
        per_cluster.push(vec![text(&row.destination), maybe(ok), maybe(bad)]);
    }
    let summary = format!(
        "{succeeded} succeeded, {failed} failed on {}{}",
        clusters(rows.len()),
        silent(rows)
    );
    (
        vec![
            table("completions", &["cluster", "succeeded", "failed"], per_cluster),
            table(
                "completions-total",
                &["clusters", "succeeded", "failed"],
                vec![vec![count(rows.len() as i64), count(succeeded), count(failed)]],
            ),
        ],
        summary,
    )
}

/// `builtin:drift` over each destination's last drift — corrections, when
/// the last one was restored, the fields it changed — and the one-line total
/// (`2 drift corrections on florin`); `None` when no copy drifted.
pub fn drift(destinations: &[(&str, Option<&Drift>)]) -> Option<(NamedStatusCombination, String)> {
    let drifted: Vec<&str> = destinations
        .iter()
        .filter(|(_, d)| d.is_some())
        .map(|(target, _)| *target)
        .collect();
    if drifted.is_empty() {
        return None;
    }
    let total = destinations
        .iter()
        .filter_map(|(_, d)| *d)
        .fold(0u64, |sum, d| sum.saturating_add(d.corrections));
    let rows = destinations
        .iter()
        .map(|(target, d)| match d {
            Some(d) => vec![
                text(target),
                count(i64::try_from(d.corrections).unwrap_or(i64::MAX)),
                text(&d.time),
                ColumnValue::of(&json!(d.fields)),
            ],
            None => vec![
                text(target),
                count(0),
                ColumnValue::of(&Value::Null),
                ColumnValue::of(&Value::Null),
            ],
        })
        .collect();
    let corrections = if total == 1 { "correction" } else { "corrections" };
    Some((
        table("drift", &["cluster", "corrections", "lastDrift", "fields"], rows),
        format!("{total} drift {corrections} on {}", drifted.join(", ")),
    ))
}

/// The `Ready` condition of a returned status: `(status, reason)`.
fn ready_condition(row: &Row) -> Option<(String, String)> {
    let conditions = status(row)?.get("conditions")?.as_array()?;
    let c = conditions
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))?;
    let field = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    Some((field("status"), field("reason")))
}

fn ready(rows: &[Row]) -> Option<(Vec<NamedStatusCombination>, String)> {
    let conditions: Vec<Option<(String, String)>> = rows.iter().map(ready_condition).collect();
    if conditions.iter().all(Option::is_none) {
        return None;
    }
    let ready = conditions
        .iter()
        .filter(|c| c.as_ref().is_some_and(|(s, _)| s == "True"))
        .count();
    let per_cluster = rows
        .iter()
        .zip(&conditions)
        .map(|(row, c)| match c {
            Some((s, reason)) => vec![text(&row.destination), text(s), text(reason)],
            None => vec![
                text(&row.destination),
                ColumnValue::of(&Value::Null),
                ColumnValue::of(&Value::Null),
            ],
        })
        .collect();
    Some((
        vec![table("ready", &["cluster", "ready", "reason"], per_cluster)],
        format!("{ready}/{} Ready{}", rows.len(), silent(rows)),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::combined_status::collect::row;
    use crate::combined_status::collect::tests::values;
    use std::collections::BTreeMap;

    #[test]
    fn deployments_show_available_of_desired_per_cluster_and_in_total() {
        let obj = json!({"spec": {"replicas": 2}});
        let none = BTreeMap::new();
        let rows = vec![
            row("florin", &none, &obj, Some(&json!({"availableReplicas": 2})), ""),
            row("guilder", &none, &obj, Some(&json!({"replicas": 2})), ""),
            row("pound", &none, &obj, None, ""),
        ];
        let (results, summary) = summarize("apps", "deployments", &rows).unwrap();
        assert_eq!(summary, "2/6 available on 3 clusters (1 not reporting yet)");
        assert_eq!(results[0].name, "builtin:availability");
        assert_eq!(
            values(&results[0]),
            vec![
                vec![json!("florin"), json!(2), json!(2)],
                vec![json!("guilder"), json!(0), json!(2)],
                vec![json!("pound"), Value::Null, json!(2)],
            ]
        );
        assert_eq!(values(&results[1]), vec![vec![json!(3), json!(2), json!(6)]]);
    }

    #[test]
    fn drift_shows_per_cluster_only_once_a_copy_drifted() {
        let d = Drift {
            time: "2026-11-27T12:00:00Z".into(),
            fields: vec!["$.spec.template.spec.containers[0].image".into()],
            corrections: 2,
        };
        assert!(drift(&[("florin", None), ("guilder", None)]).is_none());
        let (result, line) = drift(&[("florin", Some(&d)), ("guilder", None)]).unwrap();
        assert_eq!(line, "2 drift corrections on florin");
        assert_eq!(result.name, "builtin:drift");
        assert_eq!(
            values(&result),
            vec![
                vec![
                    json!("florin"),
                    json!(2),
                    json!("2026-11-27T12:00:00Z"),
                    json!(["$.spec.template.spec.containers[0].image"])
                ],
                vec![json!("guilder"), json!(0), Value::Null, Value::Null],
            ]
        );
    }

    #[test]
    fn jobs_count_succeeded_and_failed() {
        let none = BTreeMap::new();
        let rows = vec![
            row("florin", &none, &json!({}), Some(&json!({"succeeded": 1})), ""),
            row("guilder", &none, &json!({}), Some(&json!({"failed": 2})), ""),
        ];
        let (results, summary) = summarize("batch", "jobs", &rows).unwrap();
        assert_eq!(summary, "1 succeeded, 2 failed on 2 clusters");
        assert_eq!(values(&results[1]), vec![vec![json!(2), json!(1), json!(2)]]);
    }

    #[test]
    fn other_kinds_summarize_ready_conditions_only_when_they_have_them() {
        let none = BTreeMap::new();
        let ready = |s: &str| json!({"conditions": [{"type": "Ready", "status": s, "reason": "R"}]});
        let rows = vec![
            row("florin", &none, &json!({}), Some(&ready("True")), ""),
            row("guilder", &none, &json!({}), Some(&ready("False")), ""),
        ];
        let (results, summary) = summarize("example.com", "widgets", &rows).unwrap();
        assert_eq!(summary, "1/2 Ready");
        assert_eq!(
            values(&results[0])[1],
            vec![json!("guilder"), json!("False"), json!("R")]
        );
        let plain = vec![row(
            "florin",
            &none,
            &json!({}),
            Some(&json!({"phase": "Active"})),
            "",
        )];
        assert!(summarize("", "configmaps", &plain).is_none());
    }
}
