//! KubeStellar's `CustomTransform`s in the kcp TMC profile: each workload
//! workspace's own transforms, read through the SyncTarget's syncer virtual
//! workspace (which serves them read-only from every workspace placed on the
//! target) and applied by [`super::Tmc`]'s mapping to that workspace's
//! objects only, as the KubeStellar placement translator applies a WMW's.
//!
//! Re-read every SyncTarget poll period; a change re-judges every object, so
//! a new, changed or deleted transform rewrites the copies it shapes.

use std::collections::HashMap;
use std::sync::Arc;

use ferry_api::transform::Transform;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::ApiResource;
use parking_lot::RwLock;
use serde_json::Value;

use crate::engine::Engine;

use super::Tmc;

/// The transforms of each logical cluster.
#[derive(Default)]
pub struct WorkspaceTransforms {
    /// Logical cluster → its transforms.
    by_cluster: RwLock<HashMap<String, Vec<Transform>>>,
    /// `(cluster, name, resourceVersion)` of each, sorted: whether anything changed.
    seen: RwLock<Vec<(String, String, String)>>,
}

impl WorkspaceTransforms {
    /// The transforms of logical cluster `cluster` (none when it has none).
    pub fn of(&self, cluster: &str) -> Vec<Transform> {
        self.by_cluster.read().get(cluster).cloned().unwrap_or_default()
    }

    /// Replaces what is known with `items` (listed across every workspace, each with
    /// its `kcp.io/cluster`); returns whether anything changed.
    pub fn replace(&self, items: &[Value]) -> bool {
        let mut seen: Vec<(String, String, String)> = items
            .iter()
            .map(|i| {
                let s = |p: &str| {
                    i.pointer(p)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string()
                };
                (
                    s("/metadata/annotations/kcp.io~1cluster"),
                    s("/metadata/name"),
                    s("/metadata/resourceVersion"),
                )
            })
            .collect();
        seen.sort();
        if *self.seen.read() == seen {
            return false;
        }
        *self.by_cluster.write() = by_cluster(items);
        *self.seen.write() = seen;
        true
    }
}

/// `items` grouped by the logical cluster each names in `kcp.io/cluster` (one with no
/// cluster is nobody's and shapes nothing).
pub fn by_cluster(items: &[Value]) -> HashMap<String, Vec<Transform>> {
    let mut out: HashMap<String, Vec<Transform>> = HashMap::new();
    for item in items {
        let Some(cluster) = item
            .pointer("/metadata/annotations/kcp.io~1cluster")
            .and_then(Value::as_str)
            .filter(|c| !c.is_empty())
        else {
            continue;
        };
        let rv = item
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .and_then(|rv| rv.parse().ok())
            .unwrap_or(0);
        out.entry(cluster.to_string())
            .or_default()
            .push(Transform::from_object(item, rv));
    }
    out
}

fn custom_transforms() -> ApiResource {
    ApiResource {
        group: ferry_api::control::GROUP.into(),
        version: ferry_api::control::VERSION.into(),
        api_version: format!("{}/{}", ferry_api::control::GROUP, ferry_api::control::VERSION),
        kind: ferry_api::control::CustomTransform::KIND.into(),
        plural: ferry_api::control::CustomTransform::PLURAL.into(),
    }
}

/// Follows the transforms of every workspace placed on the target, until aborted. A
/// view that does not serve them (no placed workspace has the CRD) means none.
pub async fn follow(engine: Arc<Engine>, tmc: Arc<Tmc>) {
    let api: Api<DynamicObject> = Api::all_with(engine.up.client_in(Some("*")), &custom_transforms());
    loop {
        let items = match api.list(&ListParams::default()).await {
            Ok(list) => Some(
                list.items
                    .into_iter()
                    .filter_map(|o| serde_json::to_value(o).ok())
                    .collect::<Vec<_>>(),
            ),
            Err(kube::Error::Api(e)) if e.code == 404 => Some(Vec::new()),
            Err(e) => {
                tracing::debug!("listing CustomTransforms through the syncer virtual workspace failed: {e}");
                None
            }
        };
        if let Some(items) = items {
            if tmc.transforms.replace(&items) {
                tracing::info!(
                    transforms = items.len(),
                    "the placed workspaces' CustomTransforms changed"
                );
                engine.reconcile_everything();
            }
        }
        tokio::time::sleep(tmc.options.sync_target_poll).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn transform(cluster: &str, name: &str, rv: &str) -> Value {
        json!({"metadata": {"name": name, "resourceVersion": rv,
                            "annotations": {"kcp.io/cluster": cluster}},
               "spec": {"apiGroup": "apps", "resource": "deployments", "remove": ["$.spec.paused"]}})
    }

    #[test]
    fn each_workspace_gets_only_its_own_transforms() {
        let known = WorkspaceTransforms::default();
        let items = [
            transform("alice", "drop-paused", "5"),
            transform("mal", "evil", "7"),
            json!({"metadata": {"name": "nobodys"}, "spec": {"resource": "configmaps", "remove": ["$.data"]}}),
        ];
        assert!(known.replace(&items));
        let deployment = json!({"spec": {"paused": true, "replicas": 1}});
        let alice = ferry_api::transform::transformed(&deployment, "apps", "deployments", &known.of("alice"))
            .expect("alice's transform applies");
        assert!(alice["spec"].get("paused").is_none());
        assert_eq!(known.of("mal").len(), 1);
        assert!(known.of("bob").is_empty(), "no cluster: shapes nothing");
        assert!(!known.replace(&items), "same versions: no change");
        assert!(known.replace(&items[..1]), "one deleted");
        assert!(known.of("mal").is_empty());
    }
}
