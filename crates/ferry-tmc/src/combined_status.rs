//! Combined status for kcp TMC: for each workload object in a namespace a
//! `scheduling.kcp.io` Placement selects, one `CombinedStatus` per such
//! Placement, next to the object, with a row per SyncTarget the object is
//! synced to.
//!
//! - **Which objects**: the namespaced objects of the Placement's
//!   workspace, in the namespaces its `namespaceSelector` selects, whose
//!   kind has a status (a `/status` subresource) — what there is to
//!   combine — and that the scheduler labels (not events, pods, endpoints,
//!   nor the combined-status kinds themselves).
//! - **Which rows**: every SyncTarget whose `state.workload.kcp.io/<key>`
//!   label on the object says `Sync` and that is not being removed
//!   (`deletion.internal.workload.kcp.io/<key>`). kcp's Placement is
//!   any-cast — each one puts a namespace on one SyncTarget of its
//!   Location — so an object runs on several clusters when several
//!   Placements select its namespace; its status is combined over all of
//!   them, and each Placement's CombinedStatus applies that Placement's
//!   collectors. `inventory` is the SyncTarget's name and labels.
//! - **What each row's cluster returned** ([`returned_status`]): while
//!   several SyncTargets sync the object, each syncer keeps its cluster's
//!   status in the object's `experimental.status.workload.kcp.io/<key>`
//!   annotation (kcp's per-target status; only the syncer of that target
//!   may write it), and that is the row's; while one does, the object's
//!   `status` is that one cluster's. Nothing else is taken for a cluster's
//!   status: a row with neither is "not reporting yet". kcp keeps no time
//!   of the last report, so `propagation.lastReturnedUpdateTimestamp` is
//!   empty.
//! - **Collectors**: kcp's Placement has no field for them; it names them
//!   in the annotation `ferry.dev/status-collectors: a,b`, and they are
//!   read from the Placement's own workspace.
//!
//! Follows the store's watch: a change to a placed object (its labels,
//! annotations, spec or status) recomputes that object's CombinedStatuses;
//! a change to a Placement, a namespace, a StatusCollector or a
//! CombinedStatus the whole workspace's; a SyncTarget's labels every
//! workspace with Placements. Everything is read from the workspace the
//! CombinedStatus is in, but for the SyncTargets the object's own labels
//! name (labels only the scheduler, under the location workspace's grant,
//! may set).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use ferry_api::combined_status::{
    CombinedStatus, API_GROUP_LABEL, NAMESPACE_LABEL, NAME_LABEL, RESOURCE_LABEL,
    STATUS_COLLECTORS_ANNOTATION, TMC_PLACEMENT_LABEL,
};
use ferry_api::well_known::{
    status_per_target, workload_deletion_annotation, workload_status_annotation, WORKLOAD_STATE_LABEL_PREFIX,
    WORKLOAD_STATE_SYNC,
};
use futures::future::BoxFuture;
use serde_json::Value;
use tokio::task::JoinHandle;

use crate::follow::{self, Due, Follower, Passes};
use crate::scheduling::{placement, BLOCKED_NAMESPACES, PLACEMENTS, SYNC_TARGETS};
use ferry_multicluster::combined_status::{
    apply, combined, install_crds, read_collectors, Destination, PlacedObject, PlacedObjects, PlacementKind,
    COMBINED_STATUSES, STATUS_COLLECTORS,
};
use ferry_server::controller::{is_deleting, ControllerContext};
use ferry_server::storage::{ClusterScope, EventType, ObjectKey, StoredObject, WatchEvent};

/// Changes arriving within this long are handled by one pass.
const DEBOUNCE: Duration = Duration::from_millis(30);
/// A pass that could not finish (the kinds not served yet, a conflict)
/// runs again after this long.
const RETRY: Duration = Duration::from_millis(500);
/// Most StatusCollectors one Placement names; the rest are not read.
pub const MAX_COLLECTORS: usize = 16;
const NAMESPACES: &str = "/namespaces";
/// Namespaced resources never combined: what the scheduler does not label,
/// and what the hub writes about placed objects.
const NOT_COMBINED: &[&str] = &[
    "/events",
    "events.k8s.io/events",
    "/pods",
    "/endpoints",
    "coordination.k8s.io/leases",
    COMBINED_STATUSES,
];

/// One SyncTarget as a row sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    pub name: String,
    pub labels: BTreeMap<String, String>,
}

/// Every SyncTarget, by its sync target key.
pub type Targets = HashMap<String, Target>;

/// The StatusCollectors Placement `placement` names (its
/// [`STATUS_COLLECTORS_ANNOTATION`]), at most [`MAX_COLLECTORS`], each cut
/// to the longest name an object can have (a longer one names none, and is
/// reported missing without filling the CombinedStatus).
pub fn collectors_of(placement: &Value) -> BTreeSet<String> {
    placement
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(STATUS_COLLECTORS_ANNOTATION))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .take(MAX_COLLECTORS)
        .map(|n| n.chars().take(MAX_NAME).collect())
        .collect()
}

/// The longest object name (a DNS subdomain).
const MAX_NAME: usize = 253;

/// The status the cluster of SyncTarget `key` returned on `obj`, if it has:
/// its `experimental.status.workload.kcp.io/<key>` while several targets
/// sync `obj`, else `obj`'s own status.
pub fn returned_status(obj: &Value, key: &str) -> Option<Value> {
    let labels = obj.pointer("/metadata/labels").and_then(Value::as_object);
    let per_target = status_per_target(
        labels
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?))),
    );
    let status = if per_target {
        let text = obj
            .pointer("/metadata/annotations")?
            .get(workload_status_annotation(key))?
            .as_str()?;
        serde_json::from_str::<Value>(text).ok()?
    } else {
        obj.get("status")?.clone()
    };
    status
        .as_object()
        .is_some_and(|o| !o.is_empty())
        .then_some(status)
}

/// The rows of `obj`: each SyncTarget (known in `targets`) it is synced to
/// and not leaving, with what that target's cluster returned, by name.
pub fn destinations(key: &ObjectKey, obj: &Value, targets: &Targets) -> Vec<Destination> {
    let labels = obj.pointer("/metadata/labels").and_then(Value::as_object);
    let annotations = obj.pointer("/metadata/annotations");
    let mut out: Vec<Destination> = labels
        .into_iter()
        .flatten()
        .filter(|(_, v)| v.as_str() == Some(WORKLOAD_STATE_SYNC))
        .filter_map(|(k, _)| k.strip_prefix(WORKLOAD_STATE_LABEL_PREFIX))
        .filter(|target_key| {
            annotations
                .and_then(|a| a.get(workload_deletion_annotation(target_key)))
                .is_none()
        })
        .filter_map(|target_key| {
            let target = targets.get(target_key)?;
            let returned = returned_status(obj, target_key)
                .map(|s| HashMap::from([(key.clone(), (s, String::new()))]))
                .unwrap_or_default();
            // The last drift this target's syncer restored, as it annotates it.
            let drift = annotations
                .and_then(|a| a.get(ferry_api::drift::drift_annotation(target_key)))
                .and_then(Value::as_str)
                .and_then(ferry_api::drift::Drift::parse)
                .map(|d| HashMap::from([(key.clone(), d)]))
                .unwrap_or_default();
            Some(Destination {
                target: target.name.clone(),
                labels: target.labels.clone(),
                returned,
                drift,
            })
        })
        .collect();
    out.sort_by(|a, b| a.target.cmp(&b.target));
    out
}

/// Run the controller while `ctx`'s lease is held.
pub fn spawn(ctx: ControllerContext) -> JoinHandle<()> {
    follow::spawn(
        ctx,
        TmcCombinedStatus {
            state: State::default(),
            passes: Passes::now(DEBOUNCE, RETRY),
        },
    )
}

/// The controller as it follows the store: what it keeps between passes,
/// and when the next is due.
struct TmcCombinedStatus {
    state: State,
    passes: Passes,
}

impl Follower for TmcCombinedStatus {
    fn follows(&self, _storage_key: &str) -> bool {
        true
    }

    fn resync<'a>(&'a mut self, ctx: &'a ControllerContext) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            self.state = State::load(ctx);
            self.passes.restart();
        })
    }

    fn note(&mut self, ctx: &ControllerContext, event: &WatchEvent) -> bool {
        if self.state.track(ctx, event) {
            self.passes.changed();
        }
        false
    }

    fn wait<'a>(&'a mut self, _ctx: &'a ControllerContext) -> BoxFuture<'a, Due> {
        Box::pin(self.passes.due())
    }

    fn pass<'a>(&'a mut self, ctx: &'a ControllerContext) -> BoxFuture<'a, ()> {
        Box::pin(self.passes.run(self.state.reconcile(ctx)))
    }
}

/// What the controller keeps between passes.
#[derive(Default)]
struct State {
    targets: Targets,
    /// Logical clusters with at least one Placement.
    placing: BTreeSet<String>,
    /// Workspaces to recompute whole.
    workspaces: BTreeSet<String>,
    /// Objects to recompute.
    objects: BTreeSet<ObjectKey>,
}

fn target_of(key: &ObjectKey, obj: &StoredObject) -> (String, Target) {
    (
        ferry_api::workload::sync_target_key(&key.cluster, &key.name),
        Target {
            name: key.name.clone(),
            labels: obj.labels.clone(),
        },
    )
}

fn has_state_label(obj: &StoredObject) -> bool {
    obj.labels
        .keys()
        .any(|k| k.starts_with(WORKLOAD_STATE_LABEL_PREFIX))
}

impl State {
    /// Everything, to be looked at in the first pass.
    fn load(ctx: &ControllerContext) -> State {
        let (targets, _) = ctx.list(&ClusterScope::All, SYNC_TARGETS, None, None);
        let (placements, _) = ctx.list(&ClusterScope::All, PLACEMENTS, None, None);
        let placing: BTreeSet<String> = placements.iter().map(|(k, _)| k.cluster.clone()).collect();
        // Workspaces that lost their last Placement while the hub was down
        // still hold CombinedStatuses to remove.
        let (statuses, _) = ctx.list(&ClusterScope::All, COMBINED_STATUSES, None, None);
        let mut workspaces = placing.clone();
        workspaces.extend(
            statuses
                .iter()
                .filter(|(_, o)| PlacementKind::Placement.owns(o))
                .map(|(k, _)| k.cluster.clone()),
        );
        State {
            targets: targets.iter().map(|(k, o)| target_of(k, o)).collect(),
            placing,
            workspaces,
            objects: BTreeSet::new(),
        }
    }

    /// Note what `event` changes; true when a pass is due.
    fn track(&mut self, ctx: &ControllerContext, event: &WatchEvent) -> bool {
        let key = &event.key;
        match key.resource.as_str() {
            SYNC_TARGETS => {
                let (target_key, target) = target_of(key, &event.object);
                let before = self.targets.get(&target_key).cloned();
                let after = (event.kind != EventType::Deleted).then_some(target);
                if before == after {
                    return false; // a heartbeat or a status change: no row changes
                }
                match after {
                    Some(t) => self.targets.insert(target_key, t),
                    None => self.targets.remove(&target_key),
                };
                self.workspaces.extend(self.placing.iter().cloned());
                true
            }
            PLACEMENTS => {
                let (left, _) = ctx.list(&ClusterScope::One(key.cluster.clone()), PLACEMENTS, None, None);
                if left.is_empty() {
                    self.placing.remove(&key.cluster);
                } else {
                    self.placing.insert(key.cluster.clone());
                }
                self.workspaces.insert(key.cluster.clone());
                true
            }
            NAMESPACES | STATUS_COLLECTORS if self.placing.contains(&key.cluster) => {
                self.workspaces.insert(key.cluster.clone());
                true
            }
            COMBINED_STATUSES => {
                // Someone else's edit or deletion of one is undone; the
                // hub's own writes come back here too and cost a no-op pass.
                if !PlacementKind::Placement.owns(&event.object) {
                    return false;
                }
                let label = |l: &str| event.object.labels.get(l).cloned().unwrap_or_default();
                let (group, resource) = (label(API_GROUP_LABEL), label(RESOURCE_LABEL));
                self.objects.insert(ObjectKey {
                    cluster: key.cluster.clone(),
                    resource: if group.is_empty() {
                        format!("/{resource}")
                    } else {
                        format!("{group}/{resource}")
                    },
                    namespace: label(NAMESPACE_LABEL),
                    name: label(NAME_LABEL),
                });
                true
            }
            resource
                if !key.namespace.is_empty()
                    && !NOT_COMBINED.contains(&resource)
                    && self.placing.contains(&key.cluster) =>
            {
                let mentions =
                    has_state_label(&event.object) || event.previous.as_deref().is_some_and(has_state_label);
                if mentions {
                    self.objects.insert(key.clone());
                }
                mentions
            }
            _ => false,
        }
    }

    /// One pass over what changed; true when something must be retried.
    async fn reconcile(&mut self, ctx: &ControllerContext) -> bool {
        let mut retry = false;
        let workspaces = std::mem::take(&mut self.workspaces);
        let mut objects = std::mem::take(&mut self.objects);
        for ws in &workspaces {
            objects.retain(|o| &o.cluster != ws);
            if !self.workspace(ctx, ws, None).await {
                continue;
            }
            retry = true;
            self.workspaces.insert(ws.clone());
        }
        let mut by_workspace: BTreeMap<String, Vec<ObjectKey>> = BTreeMap::new();
        for o in objects {
            by_workspace.entry(o.cluster.clone()).or_default().push(o);
        }
        for (ws, keys) in by_workspace {
            if self.workspace(ctx, &ws, Some(&keys)).await {
                retry = true;
                self.objects.extend(keys);
            }
        }
        retry
    }

    /// Bring the CombinedStatuses of `ws` up to date: all of them, or only
    /// those of `only`'s objects. True when something must be retried.
    async fn workspace(&self, ctx: &ControllerContext, ws: &str, only: Option<&[ObjectKey]>) -> bool {
        let (placements, _) = ctx.list(&ClusterScope::One(ws.into()), PLACEMENTS, None, None);
        let placements: Vec<_> = placements
            .iter()
            .filter(|(_, p)| !is_deleting(p))
            .map(|(_, p)| placement::compiled(p))
            .collect();
        let served = ctx
            .lookup(
                Some(ws),
                CombinedStatus::GROUP,
                CombinedStatus::VERSION,
                CombinedStatus::PLURAL,
            )
            .is_some();
        let objects = match only {
            Some(keys) => keys
                .iter()
                .filter_map(|k| Some((k.clone(), ctx.get(k)?)))
                .filter(|(_, o)| !is_deleting(o))
                .collect(),
            None if placements.is_empty() => Vec::new(),
            None => placed_objects(ctx, ws),
        };
        let mut namespaces: HashMap<String, Option<BTreeMap<String, String>>> = HashMap::new();
        let mut wanted_pairs = Vec::new();
        for (key, obj) in &objects {
            let ns_labels = namespaces
                .entry(key.namespace.clone())
                .or_insert_with(|| {
                    if BLOCKED_NAMESPACES.contains(&key.namespace.as_str()) {
                        return None;
                    }
                    ctx.get(&ObjectKey {
                        cluster: ws.into(),
                        resource: NAMESPACES.into(),
                        namespace: String::new(),
                        name: key.namespace.clone(),
                    })
                    .map(|ns| ns.labels.clone())
                })
                .clone();
            let Some(ns_labels) = ns_labels else {
                continue;
            };
            let Some(info) = ferry_server::controller::info_for_storage_key(ctx, ws, &key.resource) else {
                continue;
            };
            if !info.status_subresource {
                continue;
            }
            let selecting: Vec<_> = placements
                .iter()
                .filter(|p| placement::selects_namespace(p, &ns_labels))
                .collect();
            if selecting.is_empty() {
                continue;
            }
            let value = obj.value();
            let rows = destinations(key, &value, &self.targets);
            for p in selecting {
                wanted_pairs.push((p.clone(), key.clone(), info.clone(), value.clone(), rows.clone()));
            }
        }
        if !served {
            if wanted_pairs.is_empty() {
                return false;
            }
            // A workspace that never had the kinds: give it the CRDs.
            install_crds(ctx, ws).await;
            return true;
        }
        let mut retry = false;
        let collectors = read_collectors(ctx, ws, &mut retry).await;
        let mut wanted = BTreeMap::new();
        for (p, key, info, value, rows) in wanted_pairs {
            let placed = PlacedObjects {
                cluster: ws.into(),
                name: str_at(&p.value, "/metadata/name"),
                uid: str_at(&p.value, "/metadata/uid"),
                objects: vec![PlacedObject {
                    key,
                    group: info.group.clone(),
                    resource: info.resource.clone(),
                    value,
                    collectors: collectors_of(&p.value),
                }],
                destinations: rows,
            };
            if let Some((ns, name, body)) =
                combined(PlacementKind::Placement, &placed, &placed.objects[0], &collectors)
            {
                wanted.insert((ns, name), body);
            }
        }
        let owned = |cs: &StoredObject| {
            PlacementKind::Placement.owns(cs) && only.is_none_or(|keys| keys.iter().any(|k| describes(cs, k)))
        };
        retry |= apply(ctx, ws, wanted, owned).await;
        retry
    }
}

fn str_at(v: &Value, pointer: &str) -> String {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// Whether the CombinedStatus `cs` is about the object at `key`.
fn describes(cs: &StoredObject, key: &ObjectKey) -> bool {
    let label = |l: &str| cs.labels.get(l).map(String::as_str).unwrap_or_default();
    let (group, resource) = key.resource.split_once('/').unwrap_or_default();
    label(API_GROUP_LABEL) == group
        && label(RESOURCE_LABEL) == resource
        && label(NAMESPACE_LABEL) == key.namespace
        && label(NAME_LABEL) == key.name
        && cs.labels.contains_key(TMC_PLACEMENT_LABEL)
}

/// The namespaced objects of `ws` that may be placed (any resource but
/// [`NOT_COMBINED`]).
fn placed_objects(ctx: &ControllerContext, ws: &str) -> Vec<(ObjectKey, std::sync::Arc<StoredObject>)> {
    let mut out = Vec::new();
    for resource in ctx.resources_in(ws) {
        if NOT_COMBINED.contains(&resource.as_str()) || resource == NAMESPACES {
            continue;
        }
        let (objects, _) = ctx.list(&ClusterScope::One(ws.into()), &resource, None, None);
        out.extend(
            objects
                .into_iter()
                .filter(|(k, o)| !k.namespace.is_empty() && !is_deleting(o)),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key() -> ObjectKey {
        ObjectKey {
            cluster: "app".into(),
            resource: "apps/deployments".into(),
            namespace: "shop".into(),
            name: "web".into(),
        }
    }

    fn targets() -> Targets {
        ["florin", "guilder", "pound"]
            .iter()
            .map(|n| {
                (
                    format!("key-{n}"),
                    Target {
                        name: n.to_string(),
                        labels: BTreeMap::from([("region".to_string(), "eu".to_string())]),
                    },
                )
            })
            .collect()
    }

    #[test]
    fn collectors_are_read_from_the_placements_annotation() {
        let p = json!({"metadata": {"annotations": {STATUS_COLLECTORS_ANNOTATION: " lagging, ,histogram "}}});
        assert_eq!(
            collectors_of(&p),
            BTreeSet::from(["lagging".to_string(), "histogram".to_string()])
        );
        assert!(collectors_of(&json!({"metadata": {}})).is_empty());
        let many = (0..40).map(|i| format!("c{i}")).collect::<Vec<_>>().join(",");
        let p = json!({"metadata": {"annotations": {STATUS_COLLECTORS_ANNOTATION: many}}});
        assert_eq!(collectors_of(&p).len(), MAX_COLLECTORS);
        let long = "x".repeat(100_000);
        let p = json!({"metadata": {"annotations": {STATUS_COLLECTORS_ANNOTATION: long}}});
        assert_eq!(collectors_of(&p).first().map(String::len), Some(MAX_NAME));
    }

    #[test]
    fn with_one_target_the_objects_status_is_that_clusters() {
        let obj = json!({"metadata": {"labels": {"state.workload.kcp.io/key-florin": "Sync"}},
                         "status": {"availableReplicas": 2}});
        let rows = destinations(&key(), &obj, &targets());
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].target, "florin");
        assert_eq!(rows[0].labels["region"], "eu");
        assert_eq!(rows[0].returned[&key()].0, json!({"availableReplicas": 2}));
    }

    #[test]
    fn with_several_targets_each_row_has_its_own_annotation_and_never_the_objects_status() {
        let obj = json!({"metadata": {
            "labels": {"state.workload.kcp.io/key-florin": "Sync", "state.workload.kcp.io/key-guilder": "Sync",
                       "state.workload.kcp.io/key-pound": "Sync", "state.workload.kcp.io/key-gone": "Sync",
                       "state.workload.kcp.io/key-pending": ""},
            "annotations": {
                "experimental.status.workload.kcp.io/key-florin": "{\"availableReplicas\":2}",
                "experimental.status.workload.kcp.io/key-guilder": "not json",
                "deletion.internal.workload.kcp.io/key-pound": "2024-01-01T00:00:00Z"}},
            "status": {"availableReplicas": 9}});
        let rows = destinations(&key(), &obj, &targets());
        let names: Vec<&str> = rows.iter().map(|d| d.target.as_str()).collect();
        assert_eq!(names, ["florin", "guilder"], "pound is leaving, gone is unknown");
        assert_eq!(rows[0].returned[&key()].0, json!({"availableReplicas": 2}));
        assert!(rows[1].returned.is_empty(), "unreadable: not reporting");
    }

    #[test]
    fn a_combined_status_describes_its_object_by_its_labels() {
        let cs = StoredObject {
            rv: 1,
            json: Default::default(),
            labels: BTreeMap::from([
                (API_GROUP_LABEL.to_string(), "apps".to_string()),
                (RESOURCE_LABEL.to_string(), "deployments".to_string()),
                (NAMESPACE_LABEL.to_string(), "shop".to_string()),
                (NAME_LABEL.to_string(), "web".to_string()),
                (TMC_PLACEMENT_LABEL.to_string(), "p".to_string()),
            ]),
        };
        assert!(describes(&cs, &key()));
        let mut other = key();
        other.name = "api".into();
        assert!(!describes(&cs, &other));
    }
}
