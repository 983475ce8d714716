//! `meta.k8s.io/v1 Table` output for `kubectl get` (built-in columns and CRD
//! `additionalPrinterColumns`). Pure: objects in, Table JSON out.

/// One Table column and where its cells come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrinterColumn {
    pub name: String,
    /// OpenAPI type: `string`, `integer`, `number`, `boolean`, `date`.
    pub type_: String,
    pub format: String,
    pub description: String,
    pub priority: i32,
    /// A JSONPath like `.spec.replicas` (CRD columns), or a built-in cell
    /// computation named `builtin:<name>`.
    pub json_path: String,
}
