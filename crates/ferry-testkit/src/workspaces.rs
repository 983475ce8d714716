//! Workspaces under `root`: the one place the kit makes one. The tenants',
//! KubeStellar's, TMC's and the stand-in clusters' set-ups all start from
//! [`ready_workspace`] and add what they need (an owner, Ferry's CRDs).

use serde_json::json;

use crate::clients::{admin, call};
use crate::{eventually, TestHub};

/// Where workspaces under `root` are made.
const WORKSPACES: &str = "/apis/tenancy.kcp.io/v1alpha1/workspaces";

/// Workspace `root:<name>`, created as admin (one that already exists is
/// taken as it is), once it serves; returns its logical cluster name.
pub async fn ready_workspace(hub: &TestHub, name: &str) -> String {
    let root = admin(hub, "root").await;
    let (code, out) = call(
        &root,
        "POST",
        WORKSPACES,
        Some(&json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": {"name": name}})),
    )
    .await;
    assert!(code == 201 || code == 409, "creating workspace {name}: {out}");
    let inside = admin(hub, &format!("root:{name}")).await;
    eventually(10, "workspace ready", || async {
        let (code, _) = call(&inside, "GET", "/api/v1/namespaces/default", None).await;
        (code == 200).then_some(())
    })
    .await;
    let (code, ws) = call(&root, "GET", &format!("{WORKSPACES}/{name}"), None).await;
    assert_eq!(code, 200, "reading workspace {name}: {ws}");
    ws["spec"]["cluster"]
        .as_str()
        .expect("logical cluster")
        .to_string()
}
