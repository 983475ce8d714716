//! kcp's APIExports and APIBindings: a provider's export of one schema, and a
//! consumer's binding of it, Bound.

use serde_json::{json, Value};

use crate::clients::{admin, call, create};
use crate::tenants::Tenants;
use crate::{eventually, TestHub};

/// `apis.kcp.io/v1alpha1`'s path.
pub const APIS: &str = "/apis/apis.kcp.io/v1alpha1";

/// An APIResourceSchema `v1.<plural>.<group>` of a namespaced kind with a
/// `spec.size` and a status.
pub fn schema(group: &str, plural: &str, kind: &str) -> Value {
    json!({
        "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIResourceSchema",
        "metadata": {"name": format!("v1.{plural}.{group}")},
        "spec": {
            "group": group, "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind, "listKind": format!("{kind}List")},
            "versions": [{
                "name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                }}
            }]
        }
    })
}

/// In workspace `ws`, `schema` and an APIExport `name` of it, claiming
/// `claims` (kcp's `permissionClaims`), as the hub's admin.
pub async fn export(hub: &TestHub, ws: &str, name: &str, schema: Value, claims: Value) {
    let schema_name = schema["metadata"]["name"].clone();
    create(hub, ws, &format!("{APIS}/apiresourceschemas"), schema).await;
    create(
        hub,
        ws,
        &format!("{APIS}/apiexports"),
        json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport", "metadata": {"name": name},
               "spec": {"latestResourceSchemas": [schema_name], "permissionClaims": claims}}),
    )
    .await;
}

/// In workspace `ws`, an APIBinding `binding` of export `export_ws:export`
/// deciding `claims`, as the hub's admin; returns it once Bound.
pub async fn bind(
    hub: &TestHub,
    ws: &str,
    binding: &str,
    export_ws: &str,
    export: &str,
    claims: Value,
) -> Value {
    create(
        hub,
        ws,
        &format!("{APIS}/apibindings"),
        json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIBinding", "metadata": {"name": binding},
               "spec": {"reference": {"export": {"path": export_ws, "name": export}}, "permissionClaims": claims}}),
    )
    .await;
    let path = format!("{APIS}/apibindings/{binding}");
    eventually(15, &format!("APIBinding {binding} in {ws} Bound"), || async {
        let (code, b) = call(&admin(hub, ws).await, "GET", &path, None).await;
        (code == 200 && b["status"]["phase"] == "Bound").then_some(b)
    })
    .await
}

/// The export of [`bob_binds_alices_widgets`].
pub const WIDGETS: &str = "widgets.example.io";

/// The tenants' usual exporter and consumer: `root:alice` (alice's) exports
/// [`WIDGETS`] claiming ConfigMaps, `root:bob` (bob's) binds it as `widgets`
/// accepting the claim, and `root:mal` is mal's. Returns bob's logical cluster.
pub async fn bob_binds_alices_widgets(t: &Tenants) -> String {
    t.workspace("alice", Some("alice")).await;
    let bob = t.workspace("bob", Some("bob")).await;
    t.workspace("mal", Some("mal")).await;
    let claim = json!({"group": "", "resource": "configmaps", "all": true});
    let schema = schema("example.io", "widgets", "Widget");
    export(&t.hub, "root:alice", WIDGETS, schema, json!([claim])).await;
    let mut accepted = claim;
    accepted["state"] = json!("Accepted");
    bind(
        &t.hub,
        "root:bob",
        "widgets",
        "root:alice",
        WIDGETS,
        json!([accepted]),
    )
    .await;
    bob
}
