//! KubeStellar's combined status (`control.kubestellar.io/v1alpha1`):
//! `StatusCollector` (cluster-scoped, in a workload management workspace)
//! says how the status returned from every destination of a placed object
//! is combined — a CEL `filter`, then either `groupBy` with `combinedFields`
//! (COUNT, SUM, AVG, MIN, MAX) or `select`, and a row `limit` — and
//! `CombinedStatus` (namespaced, next to the workload object) holds the
//! result, one per (workload object, EdgePlacement). An EdgePlacement names
//! its collectors in a downsync member's `statusCollectors`.
//!
//! Ferry does the same for kcp TMC: one CombinedStatus per (workload object,
//! `scheduling.kcp.io` Placement selecting its namespace), with a row per
//! SyncTarget the object is synced to; kcp's Placement has no field for
//! collectors, so it names them in [`STATUS_COLLECTORS_ANNOTATION`].
//!
//! Kept in KubeStellar's group and shape so its documented StatusCollectors
//! apply as written. Ferry adds to CombinedStatus the built-in summaries
//! (results named `builtin:...`, see [`BUILTIN_PREFIX`]), and the one-line
//! `subject`, `placement` and `summary` fields `kubectl get` shows.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceSubresourceStatus, CustomResourceSubresources,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::control::{GROUP, VERSION};

/// Labels on a CombinedStatus naming its workload object and placement
/// (KubeStellar's names; `binding-policy` holds the EdgePlacement's name).
pub const API_GROUP_LABEL: &str = "status.kubestellar.io/api-group";
pub const RESOURCE_LABEL: &str = "status.kubestellar.io/resource";
pub const NAMESPACE_LABEL: &str = "status.kubestellar.io/namespace";
pub const NAME_LABEL: &str = "status.kubestellar.io/name";
pub const BINDING_POLICY_LABEL: &str = "status.kubestellar.io/binding-policy";
/// Ferry: label on the CombinedStatus of a kcp TMC Placement (holding its
/// name, as [`BINDING_POLICY_LABEL`] does), so the two kinds of placement
/// each keep to their own.
pub const TMC_PLACEMENT_LABEL: &str = "status.ferry.dev/tmc-placement";

/// Ferry: annotation on a kcp TMC Placement naming the StatusCollectors of
/// its workspace that combine the status of what it places, comma-separated
/// (`ferry.dev/status-collectors: lagging,histogram`). kcp's Placement has no
/// field for them, and an annotation keeps its schema as kcp wrote it.
pub const STATUS_COLLECTORS_ANNOTATION: &str = "ferry.dev/status-collectors";

/// Names of the built-in results start with this; a StatusCollector's name
/// cannot contain `:`, so the two never collide.
pub const BUILTIN_PREFIX: &str = "builtin:";

/// The default `limit` (KubeStellar's).
pub const DEFAULT_LIMIT: i64 = 20;

/// One way of combining the status returned from every destination.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct StatusCollector {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: StatusCollectorSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<StatusCollectorStatus>,
}

/// What a StatusCollector computes (an SQL `SELECT` over one row per destination).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StatusCollectorSpec {
    /// Applied first: rows where it is not `true` are left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    /// Groups the rows for `combinedFields`; each is also an output column.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub group_by: Vec<NamedExpression>,
    /// Aggregations over each group.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub combined_fields: Vec<NamedAggregator>,
    /// Columns of each row, when nothing is aggregated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub select: Vec<NamedExpression>,
    /// Most rows in the result; 0 or absent means [`DEFAULT_LIMIT`].
    #[serde(default)]
    pub limit: i64,
}

/// A column: a name and the CEL expression computing it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct NamedExpression {
    pub name: String,
    pub def: String,
}

/// An aggregated column: COUNT (of rows, or of rows where `subject` is not
/// null), or SUM, AVG, MIN, MAX of the numbers `subject` computes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct NamedAggregator {
    pub name: String,
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
}

/// What the hub found reading a StatusCollector.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StatusCollectorStatus {
    #[serde(default)]
    pub observed_generation: i64,
    /// Each problem with the spec: the field, what is wrong, how to fix it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    /// Ferry: `Valid` — False while any expression cannot be used.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Value>,
}

/// The combined status of one workload object under one EdgePlacement.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CombinedStatus {
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Ferry: the workload object, `resource[.group]/name` (for kubectl get).
    #[serde(default)]
    pub subject: String,
    /// Ferry: the EdgePlacement or kcp Placement (for kubectl get).
    #[serde(default)]
    pub placement: String,
    /// Ferry: the built-in summary in one line, e.g. `3/3 available on 3 clusters`.
    #[serde(default)]
    pub summary: String,
    /// One per StatusCollector the placement names for the object, and the built-in ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub results: Vec<NamedStatusCombination>,
    /// Ferry: `Evaluated` — False when some StatusCollectors were left out
    /// because together they would cost more than the CEL budget of one
    /// (object, placement); its message names them and the budget.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Value>,
}

/// The table one StatusCollector (or built-in summary) produced.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NamedStatusCombination {
    pub name: String,
    #[serde(default)]
    pub column_names: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rows: Vec<StatusCombinationRow>,
    /// Expressions that failed on a destination's row (that row is left out
    /// of aggregations); at most a few are listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub row_errors: Vec<RowEvaluationError>,
    /// Aggregations that could not use a value.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aggregation_errors: Vec<ErrorInColumn>,
    /// Ferry: why there are no rows at all (the StatusCollector is missing or invalid).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
}

/// One row of a result.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct StatusCombinationRow {
    pub columns: Vec<ColumnValue>,
}

/// A value in a row: KubeStellar's union of `string`, `float` (a number
/// written as a string), `bool`, `object` and `array`, tagged by `type`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ColumnValue {
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub string: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub float: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bool: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array: Option<Value>,
}

impl ColumnValue {
    /// The column value holding `v`.
    pub fn of(v: &Value) -> ColumnValue {
        let mut out = ColumnValue::default();
        match v {
            Value::Null => out.type_ = "Null".into(),
            Value::Bool(b) => {
                out.type_ = "Bool".into();
                out.bool = Some(*b);
            }
            Value::Number(n) => {
                out.type_ = "Number".into();
                out.float = Some(n.to_string());
            }
            Value::String(s) => {
                out.type_ = "String".into();
                out.string = Some(s.clone());
            }
            Value::Array(_) => {
                out.type_ = "Array".into();
                out.array = Some(v.clone());
            }
            Value::Object(_) => {
                out.type_ = "Object".into();
                out.object = Some(v.clone());
            }
        }
        out
    }

    /// The value held, as JSON (a number as a JSON number when it reads as one).
    pub fn value(&self) -> Value {
        match self.type_.as_str() {
            "Bool" => self.bool.map_or(Value::Null, Value::Bool),
            "Number" => self
                .float
                .as_deref()
                .and_then(|f| serde_json::from_str::<serde_json::Number>(f).ok())
                .map_or(Value::Null, Value::Number),
            "String" => self.string.clone().map_or(Value::Null, Value::String),
            "Array" => self.array.clone().unwrap_or(Value::Null),
            "Object" => self.object.clone().unwrap_or(Value::Null),
            _ => Value::Null,
        }
    }
}

/// An expression that failed on one destination's row.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RowEvaluationError {
    /// The destination (`{"clusterId": <SyncTarget>}`, as KubeStellar names it).
    pub wec: Wec,
    /// The column; empty for `filter`.
    pub column_name: String,
    pub error: String,
}

/// A destination, by its SyncTarget's name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Wec {
    pub cluster_id: String,
}

/// A problem with one column as a whole.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ErrorInColumn {
    pub column_name: String,
    pub error: String,
}

impl StatusCollector {
    pub const KIND: &'static str = "StatusCollector";
    pub const GROUP: &'static str = GROUP;
    pub const VERSION: &'static str = VERSION;
    pub const PLURAL: &'static str = "statuscollectors";

    /// The CRD (cluster-scoped, with a status subresource).
    pub fn crd() -> CustomResourceDefinition {
        let expression =
            |what: &str| json!({"type": "string", "maxLength": MAX_EXPRESSION_BYTES, "description": what});
        let named = json!({
            "type": "object",
            "required": ["name", "def"],
            "properties": {
                "name": {"type": "string", "maxLength": 63, "description": "The column's name."},
                "def": expression("A CEL expression over inventory (name, labels), obj (the workload object without its status), returned.status and propagation.lastReturnedUpdateTimestamp."),
            },
        });
        let aggregator = json!({
            "type": "object",
            "required": ["name", "type"],
            "properties": {
                "name": {"type": "string", "maxLength": 63, "description": "The column's name."},
                "type": {"type": "string", "enum": ["COUNT", "SUM", "AVG", "MIN", "MAX"],
                         "description": "COUNT counts rows (or rows where subject is not null); SUM, AVG, MIN and MAX combine the numbers subject computes."},
                "subject": expression("A CEL expression computing the value to aggregate; required except for COUNT."),
            },
        });
        let spec = json!({
            "type": "object",
            "description": "How the status returned from every destination of an object is combined, like an SQL SELECT over one row per destination.",
            "properties": {
                "filter": expression("Applied first: only rows where this CEL expression is true are kept."),
                "groupBy": {"type": "array", "maxItems": MAX_COLUMNS, "items": named.clone(),
                            "description": "Groups the rows for combinedFields; each is also a column of the result. Needs combinedFields."},
                "combinedFields": {"type": "array", "maxItems": MAX_COLUMNS, "items": aggregator,
                                   "description": "Aggregations over each group (or over all rows). Not together with select."},
                "select": {"type": "array", "maxItems": MAX_COLUMNS, "items": named,
                           "description": "Columns of one row per destination, when nothing is aggregated."},
                "limit": {"type": "integer", "minimum": 0, "maximum": MAX_LIMIT,
                          "description": "Most rows in the result; 0 means 20."},
            },
        });
        let status = json!({
            "type": "object",
            "properties": {
                "observedGeneration": {"type": "integer"},
                "errors": {"type": "array", "items": {"type": "string"},
                           "description": "Each problem with the spec: the field, what is wrong and how to fix it."},
                "conditions": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                               "description": "Valid: False while an expression cannot be used; its message names the field."},
            },
        });
        with_status(crate::crd_builder::hand_written_crd(
            (Self::GROUP, Self::VERSION, Self::KIND, Self::PLURAL),
            "Cluster",
            json!({
                "type": "object",
                "description": "KubeStellar's StatusCollector: how the status returned from the clusters an EdgePlacement (or a kcp Placement) sends an object to is combined into the object's CombinedStatus. An EdgePlacement names it in a downsync member's statusCollectors; a kcp Placement in its ferry.dev/status-collectors annotation.",
                "properties": {
                    "apiVersion": {"type": "string"},
                    "kind": {"type": "string"},
                    "metadata": {"type": "object"},
                    "spec": spec,
                    "status": status,
                },
            }),
            json!([
                {"name": "Valid", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Valid\")].status"},
                {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
            ]),
        ))
    }
}

/// Longest expression a StatusCollector may hold.
pub const MAX_EXPRESSION_BYTES: usize = 10_000;
/// Most `groupBy`, `combinedFields` or `select` entries.
pub const MAX_COLUMNS: usize = 16;
/// Largest `limit`.
pub const MAX_LIMIT: i64 = 1000;

impl CombinedStatus {
    pub const KIND: &'static str = "CombinedStatus";
    pub const GROUP: &'static str = GROUP;
    pub const VERSION: &'static str = VERSION;
    pub const PLURAL: &'static str = "combinedstatuses";

    /// The CRD (namespaced; written by the hub only).
    pub fn crd() -> CustomResourceDefinition {
        let text = |what: &str| json!({"type": "string", "description": what});
        let value = json!({
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
            "description": "A value: type is String, Number, Bool, Null, Object or Array, and the field of that name (string, float, bool, object, array) holds it.",
        });
        let result = json!({
            "type": "object",
            "description": "The table one StatusCollector (or a built-in summary, named builtin:...) produced.",
            "properties": {
                "name": text("The StatusCollector's name, or builtin:<summary>."),
                "columnNames": {"type": "array", "items": {"type": "string"}},
                "rows": {"type": "array", "items": {"type": "object", "properties": {
                    "columns": {"type": "array", "items": value},
                }}},
                "rowErrors": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                              "description": "Expressions that failed on a destination's row (left out of aggregations)."},
                "aggregationErrors": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                                      "description": "Aggregations that could not use a value."},
                "error": text("Why there are no rows at all: the StatusCollector is missing or invalid, or was not evaluated as it would take the object's CEL cost budget past its limit."),
            },
        });
        crate::crd_builder::hand_written_crd(
            (Self::GROUP, Self::VERSION, Self::KIND, Self::PLURAL),
            "Namespaced",
            json!({
                "type": "object",
                "description": "KubeStellar's CombinedStatus: the status returned from every cluster an EdgePlacement (or, for kcp, a Placement) sends one workload object to, combined by the StatusCollectors the placement names and by the hub's built-in summaries. Written by the hub, next to the workload object.",
                "properties": {
                    "apiVersion": {"type": "string"},
                    "kind": {"type": "string"},
                    "metadata": {"type": "object"},
                    "subject": text("The workload object: resource[.group]/name."),
                    "placement": text("The EdgePlacement, or the kcp Placement."),
                    "summary": text("The built-in summary in one line."),
                    "results": {"type": "array", "items": result},
                    "conditions": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                                   "description": "Evaluated: False when some StatusCollectors were not evaluated because together they would cost more than the CEL budget of one object and placement; the message names them and the budget."},
                },
            }),
            json!([
                {"name": "Subject", "type": "string", "jsonPath": ".subject"},
                {"name": "Placement", "type": "string", "jsonPath": ".placement"},
                {"name": "Summary", "type": "string", "jsonPath": ".summary"},
                {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
            ]),
        )
    }

    /// The name of the CombinedStatus of the object with uid `object_uid`
    /// under the placement with uid `placement_uid` (KubeStellar's).
    pub fn name_for(object_uid: &str, placement_uid: &str) -> String {
        format!("{object_uid}.{placement_uid}")
    }
}

fn with_status(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    for v in &mut crd.spec.versions {
        v.subresources = Some(CustomResourceSubresources {
            status: Some(CustomResourceSubresourceStatus(json!({}))),
            scale: None,
        });
    }
    crd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_values_read_back_what_they_hold() {
        for v in [
            json!(null),
            json!(true),
            json!(3),
            json!(2.5),
            json!("x"),
            json!([1]),
            json!({"a": 1}),
        ] {
            assert_eq!(ColumnValue::of(&v).value(), v);
        }
        assert_eq!(ColumnValue::of(&json!(3)).float.as_deref(), Some("3"));
    }

    #[test]
    fn the_collector_reads_kubestellars_yaml() {
        let c: StatusCollector = serde_json::from_value(json!({
            "apiVersion": "control.kubestellar.io/v1alpha1", "kind": "StatusCollector",
            "metadata": {"name": "count-wecs"},
            "spec": {"combinedFields": [{"name": "count", "type": "COUNT"}], "limit": 10}}))
        .unwrap();
        assert_eq!(c.spec.combined_fields[0].type_, "COUNT");
        assert_eq!(c.spec.limit, 10);
    }
}
