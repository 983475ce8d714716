//! The `kubectl get` columns of the kinds [`super::builtin`] serves: kcp's
//! and kcp TMC's. Most are CRDs in kcp, so their columns are those CRDs'
//! `additionalPrinterColumns`, as written; where Ferry shows more, the
//! column says why. Each function gives one kind's columns after `Name`
//! (the Table adds that), for [`BuiltinKind::with_columns`](ferry_apiserver::registry::BuiltinKind::with_columns).

use ferry_apiserver::table::{age, PrinterColumn};

const PHASE_DESCRIPTION: &str = "The current phase (e.g. Scheduling, Initializing, Ready, Deleting)";

/// A column as a CRD's `additionalPrinterColumns` entry of type string.
fn text(name: &str, path: &str, description: &str) -> PrinterColumn {
    PrinterColumn::json_path(name, "string", path, description)
}

/// A computed string column (see [`PrinterColumn::builtin`]).
fn computed(name: &str, cell: &str, description: &str) -> PrinterColumn {
    PrinterColumn::builtin(name, "string", cell).described(description)
}

/// `Age` as a CRD prints it.
fn crd_age() -> PrinterColumn {
    PrinterColumn::json_path("Age", "date", ".metadata.creationTimestamp", "")
}

/// kcp's Workspaces.
pub fn workspaces() -> Vec<PrinterColumn> {
    vec![
        text("Type", ".spec.type.name", "Type of the workspace"),
        text(
            "Region",
            ".metadata.labels['region']",
            "The region this workspace is in",
        ),
        text("Phase", ".status.phase", PHASE_DESCRIPTION),
        text("URL", ".spec.URL", "URL to access the workspace"),
        // Ferry's: whose a KubeStellar mailbox workspace is (its name is
        // `<inventory cluster>-mb-<SyncTarget uid>`, which says little).
        text(
            "SyncTarget",
            ".metadata.annotations['edge.kubestellar.io/sync-target-name']",
            "For a KubeStellar mailbox workspace: the SyncTarget it holds the workload of",
        ),
        crd_age(),
    ]
}

/// kcp's LogicalClusters (each workspace's `cluster` object).
pub fn logical_clusters() -> Vec<PrinterColumn> {
    vec![
        text("Phase", ".status.phase", PHASE_DESCRIPTION),
        text("URL", ".status.URL", "URL to access the logical cluster"),
        crd_age(),
    ]
}

/// kcp's APIBindings.
pub fn api_bindings() -> Vec<PrinterColumn> {
    vec![age(), computed("Ready", "condition:Ready", "")]
}

/// kcp's APIExportEndpointSlices.
pub fn api_export_endpoint_slices() -> Vec<PrinterColumn> {
    vec![
        computed("Export", "str:/spec/export/name", ""),
        computed("Partition", "str:/spec/partition", ""),
        age(),
    ]
}

/// kcp TMC's SyncTargets (the CRD's columns as in `ferry_api`, and Ferry's).
pub fn sync_targets() -> Vec<PrinterColumn> {
    vec![
        text("Ready", ".status.conditions[?(@.type==\"Ready\")].status", ""),
        PrinterColumn::json_path("Heartbeat", "date", ".status.lastSyncerHeartbeatTime", ""),
        // Ferry's: Ready says the syncer is well, not that new work lands here.
        computed(
            "Schedulable",
            "true_unless_set:/spec/unschedulable,/spec/evictAfter",
            "False while cordoned (spec.unschedulable) or draining (spec.evictAfter)",
        ),
        text(
            "Cluster",
            ".spec.workloadCluster.name",
            "The physical cluster behind the target",
        ),
        // Every entry, not the first as a CRD's JSONPath column shows.
        computed(
            "Resources",
            "each:/spec/supportedAPIExports:/resource",
            "The only resources of their exports the target takes, when listed",
        ),
        computed(
            "Capabilities",
            "each:/spec/capabilities:/resource",
            "What the cluster offers",
        ),
        crd_age(),
    ]
}

/// kcp TMC's Placements.
pub fn placements() -> Vec<PrinterColumn> {
    vec![
        text("Phase", ".status.phase", "Pending, Unbound or Bound"),
        text(
            "Location",
            ".status.selectedLocation.locationName",
            "The Location the Placement chose",
        ),
        text(
            "Location Workspace",
            ".status.selectedLocation.path",
            "The workspace of that Location",
        )
        .wide(),
        crd_age(),
    ]
}

/// kcp TMC's Locations.
pub fn locations() -> Vec<PrinterColumn> {
    vec![
        text("Resource", ".spec.resource.resource", ""),
        text(
            "Available",
            ".status.availableInstances",
            "Available instances in this location",
        ),
        text("Instances", ".status.instances", "Instances in this location"),
        text(
            "Labels",
            ".metadata.annotations['scheduling\\.kcp\\.io/labels']",
            "The common labels of this location",
        ),
        crd_age(),
    ]
}

/// kcp TMC's APIResourceImports.
pub fn api_resource_imports() -> Vec<PrinterColumn> {
    vec![
        text("Location", ".spec.location", ""),
        text("API Resource", ".spec.plural", ""),
        text(
            "Compatible",
            ".status.conditions[?(@.type==\"Compatible\")].status",
            "",
        ),
        text("Schema update strategy", ".spec.schemaUpdateStrategy", "").wide(),
        crd_age(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_apiserver::table::{render_table, IncludeObject};
    use serde_json::{json, Map, Value};

    fn render(columns: &[PrinterColumn], objects: &[Value]) -> Value {
        let now = chrono::DateTime::parse_from_rfc3339("2024-05-01T12:00:00Z")
            .expect("a time")
            .with_timezone(&chrono::Utc);
        render_table(columns, objects, IncludeObject::default(), Map::new(), now)
    }

    fn column_names(table: &Value) -> Vec<&str> {
        table["columnDefinitions"]
            .as_array()
            .expect("columns")
            .iter()
            .map(|c| c["name"].as_str().expect("a name"))
            .collect()
    }

    #[test]
    fn workspaces_print_kcp_columns() {
        let ws = json!({"metadata": {"name": "imw1", "creationTimestamp": "2024-05-01T11:58:56Z"},
            "spec": {"type": {"name": "organization", "path": "root"}, "URL": "https://h:6443/clusters/root:imw1"},
            "status": {"phase": "Ready"}});
        let table = render(&workspaces(), &[ws]);
        assert_eq!(
            column_names(&table),
            vec!["Name", "Type", "Region", "Phase", "URL", "SyncTarget", "Age"]
        );
        assert_eq!(
            table["rows"][0]["cells"],
            json!([
                "imw1",
                "organization",
                null,
                "Ready",
                "https://h:6443/clusters/root:imw1",
                null,
                "64s"
            ])
        );
        // A mailbox says whose it is.
        let mailbox = json!({"metadata": {"name": "abc-mb-123", "creationTimestamp": "2024-05-01T11:58:56Z",
                "annotations": {"edge.kubestellar.io/sync-target-name": "florin"}},
            "spec": {"type": {"name": "universal", "path": "root"}}, "status": {"phase": "Ready"}});
        let table = render(&workspaces(), &[mailbox]);
        assert_eq!(table["rows"][0]["cells"][5], "florin");
        let lc = json!({"metadata": {"name": "cluster", "creationTimestamp": "2024-05-01T11:00:00Z"},
            "status": {"phase": "Ready", "URL": "https://h:6443/clusters/abc"}});
        let table = render(&logical_clusters(), &[lc]);
        assert_eq!(
            table["rows"][0]["cells"],
            json!(["cluster", "Ready", "https://h:6443/clusters/abc", "60m"])
        );
    }

    #[test]
    fn a_sync_target_is_schedulable_unless_cordoned_or_draining() {
        let schedulable = |spec: Value| {
            let target = json!({"metadata": {"name": "east"}, "spec": spec});
            render(&sync_targets(), &[target])["rows"][0]["cells"][3].clone()
        };
        assert_eq!(schedulable(json!({})), "True");
        assert_eq!(
            schedulable(json!({"unschedulable": false, "evictAfter": ""})),
            "True"
        );
        assert_eq!(schedulable(json!({"unschedulable": true})), "False");
        assert_eq!(
            schedulable(json!({"evictAfter": "2024-05-01T12:00:00Z"})),
            "False"
        );
        let target = json!({"metadata": {"name": "east"},
            "spec": {"supportedAPIExports": [{"resource": "deployments"}, {"resource": "services"}]}});
        assert_eq!(
            render(&sync_targets(), &[target])["rows"][0]["cells"][5],
            "deployments services"
        );
    }
}
