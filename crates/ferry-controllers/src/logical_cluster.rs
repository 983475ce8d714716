//! kcp's `core.kcp.io/v1alpha1 LogicalCluster` named `cluster`: one in every
//! workspace (root included), describing that workspace from the inside —
//! its logical-cluster name (`kcp.io/cluster`), its path (`kcp.io/path`),
//! its type, the Workspace that owns it, its phase and URL. Clients such
//! as the api-syncagent resolve "where am I" from it.
//!
//! It is stored (so get, list, watch, selectors and Table output work as for
//! any object) and kept by the hub: created with the workspace, and brought
//! up to date at start (the hub's address may have changed). Everything in
//! it is fixed for the life of a workspace except that address, so a stored
//! copy cannot drift from the workspace index. Clients may only read it:
//! the resource serves `get`, `list` and `watch`, and other verbs answer 405.

use serde_json::{json, Value};

use ferry_server::controller::ControllerContext;
use ferry_server::service::{self, PatchType};
use ferry_server::status::ApiError;
use ferry_server::storage::ObjectKey;
use ferry_server::workspace::{ROOT, WORKSPACES};

/// The object's name in every workspace (kcp's `LogicalClusterName`).
pub const NAME: &str = "cluster";
/// Where it is stored.
pub const STORAGE_KEY: &str = "core.kcp.io/logicalclusters";
/// kcp's annotation holding the workspace's path (`root:org:team`).
pub const PATH_ANNOTATION: &str = "kcp.io/path";
/// kcp's annotation holding the workspace's type (`root:universal`).
pub const TYPE_ANNOTATION: &str = "internal.tenancy.kcp.io/type";
/// kcp's label mirroring the phase.
pub const PHASE_LABEL: &str = "tenancy.kcp.io/phase";

/// Annotations of a Workspace copied onto its LogicalCluster: KubeStellar's
/// mailbox annotations (`edge.kubestellar.io/sync-target-name`, `-uid`,
/// `inventory-cluster`), so a syncer in a mailbox can tell whose it is.
pub const MAILBOX_ANNOTATION_PREFIX: &str = "edge.kubestellar.io/";

const GVR: (&str, &str, &str) = ("core.kcp.io", "v1alpha1", "logicalclusters");

/// What the hub keeps on `cluster`'s LogicalCluster: the part compared with
/// the stored object, and patched back when it differs. `workspace` is the
/// Workspace object that made the cluster (`None` for root).
fn desired(
    ctx: &ControllerContext,
    cluster: &str,
    parent: Option<&str>,
    workspace: Option<&Value>,
) -> Option<Value> {
    let lc = ctx.logical_cluster(cluster)?;
    let str_at = |v: &Value, p: &str| {
        v.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let mut annotations = json!({PATH_ANNOTATION: lc.path});
    let (type_, owner) = match workspace {
        None => ("root:root".to_string(), Value::Null),
        Some(ws) => {
            let type_path = str_at(ws, "/spec/type/path");
            let type_name = str_at(ws, "/spec/type/name");
            let type_ = match (type_path.as_str(), type_name.as_str()) {
                ("", "") => String::new(),
                ("", name) => name.to_string(),
                (path, name) => format!("{path}:{name}"),
            };
            // A mailbox says whose it is from the inside too: its syncer's
            // token reads this object, never the Workspace in the parent.
            if let Some(Value::Object(ws_annotations)) = ws.pointer("/metadata/annotations") {
                for (key, value) in ws_annotations {
                    if key.starts_with(MAILBOX_ANNOTATION_PREFIX) {
                        annotations[key] = value.clone();
                    }
                }
            }
            let owner = json!({
                "apiVersion": "tenancy.kcp.io/v1alpha1",
                "resource": "workspaces",
                "name": str_at(ws, "/metadata/name"),
                "cluster": parent.unwrap_or_default(),
                "uid": str_at(ws, "/metadata/uid"),
            });
            (type_, owner)
        }
    };
    annotations[TYPE_ANNOTATION] = json!(type_);
    let mut spec = json!({});
    if !owner.is_null() {
        spec["owner"] = owner;
    }
    Some(json!({
        "metadata": {
            "annotations": annotations,
            "labels": {PHASE_LABEL: "Ready"},
        },
        "spec": spec,
        "status": {
            "phase": "Ready",
            "URL": format!("{}/clusters/{}", ctx.external_url().trim_end_matches('/'), lc.name),
        },
    }))
}

/// The Workspace object that made `cluster`, and the cluster it lives in.
fn workspace_of(ctx: &ControllerContext, cluster: &str) -> Option<(String, Value)> {
    let lc = ctx.logical_cluster(cluster)?;
    let parent = lc.parent?;
    let (_, name) = lc.path.rsplit_once(':')?;
    let key = ObjectKey {
        cluster: parent.clone(),
        resource: WORKSPACES.into(),
        namespace: String::new(),
        name: name.into(),
    };
    Some((parent, ctx.get(&key)?.value()))
}

/// Create or bring up to date `cluster`'s LogicalCluster. `workspace` is
/// the Workspace object being created for it, which is not stored yet; for
/// existing workspaces it is looked up.
pub async fn ensure(ctx: &ControllerContext, cluster: &str, workspace: Option<&Value>) {
    let found;
    let (parent, workspace) = match workspace {
        Some(ws) => (ctx.logical_cluster(cluster).and_then(|lc| lc.parent), Some(ws)),
        None if cluster == ROOT => (None, None),
        None => match workspace_of(ctx, cluster) {
            Some(f) => {
                found = f;
                (Some(found.0.clone()), Some(&found.1))
            }
            // Its Workspace is gone: the cluster is being removed.
            None => return,
        },
    };
    let Some(wanted) = desired(ctx, cluster, parent.as_deref(), workspace) else {
        return;
    };
    match ensure_object(ctx, cluster, wanted).await {
        Ok(()) => {}
        // A racing write made it meanwhile.
        Err(e) if e.code == 409 => {}
        Err(e) => tracing::warn!(cluster, "keeping the LogicalCluster \"cluster\" failed: {e}"),
    }
}

async fn ensure_object(ctx: &ControllerContext, cluster: &str, wanted: Value) -> Result<(), ApiError> {
    let key = ObjectKey {
        cluster: cluster.into(),
        resource: STORAGE_KEY.into(),
        namespace: String::new(),
        name: NAME.into(),
    };
    match ctx.get(&key) {
        Some(stored) if covers(&stored.value(), &wanted) => Ok(()),
        Some(_) => {
            let Some(info) = ctx.lookup(Some(cluster), GVR.0, GVR.1, GVR.2) else {
                return Ok(());
            };
            let r = ctx.request_at(info, &key, "patch", service::HUB_MANAGER)?;
            let body = bytes::Bytes::from(serde_json::to_vec(&wanted).unwrap_or_default());
            service::patch(&r, PatchType::Merge, body).await.map(|_| ())
        }
        None => {
            let mut object = wanted;
            object["apiVersion"] = json!("core.kcp.io/v1alpha1");
            object["kind"] = json!("LogicalCluster");
            object["metadata"]["name"] = json!(NAME);
            ctx.create(cluster, GVR, None, object).await.map(|_| ())
        }
    }
}

/// Whether `actual` has every value `wanted` sets.
fn covers(actual: &Value, wanted: &Value) -> bool {
    match (actual, wanted) {
        (Value::Object(a), Value::Object(w)) => {
            w.iter().all(|(k, wv)| a.get(k).is_some_and(|av| covers(av, wv)))
        }
        (a, w) => a == w,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_fields_need_no_repair_but_a_new_address_does() {
        let wanted = json!({"metadata": {"annotations": {PATH_ANNOTATION: "root:a"}},
            "status": {"URL": "https://127.0.0.1:1/clusters/x"}});
        let mut stored = wanted.clone();
        stored["metadata"]["annotations"]["kcp.io/cluster"] = json!("x");
        stored["metadata"]["uid"] = json!("u");
        assert!(covers(&stored, &wanted));
        stored["status"]["URL"] = json!("https://127.0.0.1:2/clusters/x");
        assert!(!covers(&stored, &wanted));
    }
}
