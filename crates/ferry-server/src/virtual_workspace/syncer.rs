//! kcp TMC's syncer and upsyncer virtual workspaces,
//! `/services/syncer/<cluster>/<synctarget>/<uid>/clusters/<c|*>/...` and
//! `/services/upsyncer/...`: what one SyncTarget's syncer reads and writes
//! upstream, across every workspace at once.
//!
//! - **Who:** as in kcp, verb `sync` on `synctargets` (group
//!   `workload.kcp.io`) with that SyncTarget's name, in its workspace
//!   (`<cluster>`: the logical cluster's name, or its path). The answer is
//!   the same whether or not the target exists. The target's uid must be
//!   `<uid>` (a syncer of a deleted and recreated target is not let in);
//!   otherwise the instance is not found.
//! - **What:** syncer: namespaces, configmaps, secrets, serviceaccounts, and
//!   every version of each `status.syncedResources` entry whose state is
//!   `Accepted` (an export's resource, or a workspace's own built-in such as
//!   Roles, served from each workspace itself), with the verbs a syncer needs
//!   (get, list, watch, update, patch; no create or delete); and, unlike kcp,
//!   `create` of core Events about those objects ([`EventsAbout`]), so a copy
//!   the cluster refuses shows on the object, and read-only KubeStellar
//!   `CustomTransform`s ([`Transforms`]) of the workspaces placed on the
//!   target, which the syncer applies to each workspace's own objects.
//!   Upsyncer: pods, persistentvolumes and endpoints, every verb.
//! - **Which:** objects labelled `state.workload.kcp.io/<key>=Sync`
//!   (upsyncer: `=Upsync`), in the target's own workspace and those whose
//!   Placements may use its workspace (`grants::tmc`),
//!   re-checked at least every second; an object whose label changes
//!   away leaves running watches as a deletion. A write may not touch the
//!   state labels of other targets; through the upsyncer, what is written
//!   must keep the `Upsync` label of this target.
//! - **Heard of:** unlike kcp, a watch is not sent a change that only touches
//!   other targets' bookkeeping (their state labels, per-target annotations
//!   and finalizers): with N targets each object changes N times for it
//!   ([`Labelled::hears`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_api::well_known::{
    status_per_target, workload_annotation_target, workload_finalizer_target, workload_label_target,
    workload_state_label, WORKLOAD_STATE_LABEL_PREFIX, WORKLOAD_STATE_SYNC, WORKLOAD_STATE_UPSYNC,
};
use parking_lot::Mutex;
use serde_json::Value;

use super::{KeptViews, View, VirtualWorkspace};
use crate::auth::authorize::{self, Attributes};
use crate::auth::rbac::Request as RbacRequest;
use crate::auth::UserInfo;
use crate::grants::tmc as grant;
use crate::hub::Hub;
use crate::registry::ResourceInfo;
use crate::status::ApiError;
use crate::storage::{ObjectKey, ScopeFilter, StoredObject, WatchEvent};

/// Storage key of `workload.kcp.io` SyncTargets.
pub const SYNC_TARGETS: &str = "workload.kcp.io/synctargets";
const WORKLOAD_GROUP: &str = "workload.kcp.io";

/// Which of the two views.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Direction {
    /// Down: the syncer reads what is scheduled to its target.
    Sync,
    /// Up: the syncer writes what runs on its cluster.
    Upsync,
}

impl Direction {
    fn state(self) -> &'static str {
        match self {
            Direction::Sync => WORKLOAD_STATE_SYNC,
            Direction::Upsync => WORKLOAD_STATE_UPSYNC,
        }
    }
}

pub struct SyncerVirtualWorkspace;
pub struct UpsyncerVirtualWorkspace;

impl VirtualWorkspace for SyncerVirtualWorkspace {
    fn name(&self) -> &'static str {
        "syncer"
    }

    fn instance_segments(&self) -> usize {
        3
    }

    fn authorize(
        &self,
        hub: &Hub,
        user: &UserInfo,
        instance: &[String],
        _verb: &str,
    ) -> Result<(), ApiError> {
        authorize_sync(hub, user, instance)
    }

    fn view(&self, hub: &Arc<Hub>, instance: &[String]) -> Result<View, ApiError> {
        view(hub, instance, Direction::Sync)
    }
}

impl VirtualWorkspace for UpsyncerVirtualWorkspace {
    fn name(&self) -> &'static str {
        "upsyncer"
    }

    fn instance_segments(&self) -> usize {
        3
    }

    fn authorize(
        &self,
        hub: &Hub,
        user: &UserInfo,
        instance: &[String],
        _verb: &str,
    ) -> Result<(), ApiError> {
        authorize_sync(hub, user, instance)
    }

    fn view(&self, hub: &Arc<Hub>, instance: &[String]) -> Result<View, ApiError> {
        view(hub, instance, Direction::Upsync)
    }
}

/// Whatever the request, the caller needs `sync` on the SyncTarget.
fn authorize_sync(hub: &Hub, user: &UserInfo, instance: &[String]) -> Result<(), ApiError> {
    let (cluster, name) = (&instance[0], &instance[1]);
    let denied = || {
        ApiError::forbidden(format!(
            "User {:?} cannot use the syncer virtual workspace of SyncTarget {name:?} in workspace {cluster:?}: it needs \"sync\" on synctargets {name:?} (group workload.kcp.io) there",
            user.name
        ))
    };
    let Some(lc) = hub.workspaces.resolve(cluster) else {
        return Err(denied());
    };
    let attrs = Attributes {
        request: RbacRequest::Resource {
            verb: "sync".into(),
            group: WORKLOAD_GROUP.into(),
            resource: "synctargets".into(),
            subresource: String::new(),
            namespace: String::new(),
            name: name.clone(),
        },
        workspace: Some(lc),
    };
    if authorize::authorize(hub, user, &attrs).allowed() {
        Ok(())
    } else {
        Err(denied())
    }
}

/// The SyncTarget named by `instance` as stored, and its logical cluster;
/// its uid is checked by the caller ([`not_found`] when it differs).
fn sync_target(hub: &Hub, instance: &[String]) -> Result<(String, Arc<StoredObject>), ApiError> {
    let (cluster, name) = (&instance[0], &instance[1]);
    let lc = hub
        .workspaces
        .resolve(cluster)
        .ok_or_else(|| not_found(instance))?;
    let key = ObjectKey {
        cluster: lc.name.clone(),
        resource: SYNC_TARGETS.into(),
        namespace: String::new(),
        name: name.clone(),
    };
    let target = hub.store.get_committed(&key).ok_or_else(|| not_found(instance))?;
    Ok((lc.name, target))
}

/// One answer for a missing target and a wrong uid.
fn not_found(instance: &[String]) -> ApiError {
    let (cluster, name, uid) = (&instance[0], &instance[1], &instance[2]);
    ApiError::not_found_message(format!(
        "SyncTarget {name:?} with uid {uid:?} not found in workspace {cluster:?}"
    ))
}

/// What a syncer's view serves, kept per SyncTarget (its logical cluster and
/// name) and direction while the target and the hub's resources stay as they
/// were: every request through the view worked it out again — the target
/// parsed, every served resource copied from the registry — a tenth of the
/// hub's time with a hundred syncers writing.
pub type SyncerViews = KeptViews<(String, String, Direction), Served>;

/// What a view serves, and what it was worked out from.
pub struct Served {
    /// The target's resourceVersion and uid, and the registry's generation.
    target_rv: u64,
    uid: String,
    generation: u64,
    resources: Vec<ResourceInfo>,
    /// `(apiVersion, kind, storage key)` of each kind an Event may be about.
    events_about: Vec<(String, String, String)>,
}

/// What the upsyncer serves (kcp v0.11's VW: pods and PVs; endpoints as the syncer's ddsif asks).
const UPSYNCED: &[(&str, &str)] = &[("", "pods"), ("", "persistentvolumes"), ("", "endpoints")];
const SYNCER_VERBS: &[&str] = &["get", "list", "watch", "update", "patch"];
/// What a syncer may do with CustomTransforms: read them.
const TRANSFORM_VERBS: &[&str] = &["get", "list", "watch"];

fn view(hub: &Arc<Hub>, instance: &[String], direction: Direction) -> Result<View, ApiError> {
    let (cluster, target) = sync_target(hub, instance)?;
    let key = ferry_api::workload::sync_target_key(&cluster, &instance[1]);
    let generation = hub.registry.generation(None);
    let cache_key = (cluster.clone(), instance[1].clone(), direction);
    let current = |kept: &Served| kept.target_rv == target.rv && kept.generation == generation;
    let make = || (served(hub, &target, generation, direction), true);
    let served = match hub.extensions.get::<Arc<SyncerViews>>() {
        Some(views) => views.get_or_make(&cache_key, current, make),
        None => Arc::new(make().0),
    };
    if served.uid != instance[2] {
        return Err(not_found(instance));
    }
    let hub = hub.clone();
    let label = workload_state_label(&key);
    let resources = served.resources.clone();
    Ok(View::new(resources, move |info: &ResourceInfo| {
        let labelled = Labelled {
            hub: hub.clone(),
            info: info.clone(),
            key: key.clone(),
            target_cluster: cluster.clone(),
            label: label.clone(),
            direction,
            granted: Default::default(),
        };
        if direction == Direction::Sync
            && info.group == ferry_api::control::GROUP
            && info.resource == ferry_api::control::CustomTransform::PLURAL
        {
            return Arc::new(Transforms { labelled }) as Arc<dyn ScopeFilter>;
        }
        if direction == Direction::Sync && info.group.is_empty() && info.resource == "events" {
            return Arc::new(EventsAbout {
                labelled,
                served: served.events_about.clone(),
            }) as Arc<dyn ScopeFilter>;
        }
        Arc::new(labelled) as Arc<dyn ScopeFilter>
    }))
}

/// What the view of `target` (stored) serves in `direction`, with the
/// registry at `generation`.
fn served(hub: &Hub, target: &StoredObject, generation: u64, direction: Direction) -> Served {
    let target_value = target.value();
    let uid = target_value
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let mut wanted: Vec<(String, String, Option<Vec<String>>)> = Vec::new();
    match direction {
        Direction::Sync => {
            for (g, r) in crate::synctarget::ALWAYS_SYNCED {
                wanted.push((g.to_string(), r.to_string(), None));
            }
            for (g, r, versions) in accepted_resources(&target_value) {
                if !wanted.iter().any(|(wg, wr, _)| *wg == g && *wr == r) {
                    wanted.push((g, r, Some(versions)));
                }
            }
        }
        Direction::Upsync => {
            for (g, r) in UPSYNCED {
                wanted.push((g.to_string(), r.to_string(), None));
            }
        }
    }
    // Read once: the registry hands out a copy of everything it serves.
    let all = hub.registry.resources(None);
    let mut resources = Vec::new();
    for (group, resource, versions) in wanted {
        let served = all
            .iter()
            .filter(|i| i.group == group && i.resource == resource)
            .filter(|i| versions.as_ref().is_none_or(|vs| vs.contains(&i.version)));
        for info in served {
            let mut info = info.clone();
            if direction == Direction::Sync {
                info.verbs = SYNCER_VERBS.iter().map(|v| v.to_string()).collect();
            }
            resources.push(info);
        }
    }
    // What an Event may be about: the kinds served above.
    let events_about: Vec<(String, String, String)> = resources
        .iter()
        .map(|i| (i.api_version(), i.kind.clone(), i.storage_key()))
        .collect();
    if direction == Direction::Sync {
        for mut info in hub.registry.builtin_versions("", "events") {
            info.verbs = vec!["create".to_string()];
            resources.push(info);
        }
        let transforms = all.into_iter().filter(|i| {
            i.group == ferry_api::control::GROUP && i.resource == ferry_api::control::CustomTransform::PLURAL
        });
        for mut info in transforms {
            info.verbs = TRANSFORM_VERBS.iter().map(|v| v.to_string()).collect();
            resources.push(info);
        }
    }
    Served {
        target_rv: target.rv,
        uid,
        generation,
        resources,
        events_about,
    }
}

/// `(group, resource, versions)` of each `Accepted` entry of the target's
/// `status.syncedResources`.
pub fn accepted_resources(target: &Value) -> Vec<(String, String, Vec<String>)> {
    target
        .pointer("/status/syncedResources")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|r| r.get("state").and_then(Value::as_str) == Some("Accepted"))
        .filter_map(|r| {
            let resource = r.get("resource")?.as_str()?.to_string();
            let group = r.get("group").and_then(Value::as_str).unwrap_or("").to_string();
            let versions = r
                .get("versions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect();
            Some((group, resource, versions))
        })
        .collect()
}

/// Objects of one resource carrying this target's state label.
struct Labelled {
    hub: Arc<Hub>,
    info: ResourceInfo,
    /// The SyncTarget's key.
    key: String,
    /// The SyncTarget's logical cluster.
    target_cluster: String,
    /// `state.workload.kcp.io/<key>`.
    label: String,
    direction: Direction,
    /// Workspaces asked about lately, and whether they may use the target
    /// ([`grant::workspace_granted`]), so a list does not ask per object.
    granted: Mutex<HashMap<String, (Instant, bool)>>,
}

/// How long an answer of [`grant::workspace_granted`] is reused.
const GRANT_TTL: Duration = Duration::from_secs(1);

impl Labelled {
    /// Whether `cluster` may have work on this target: a label alone does
    /// not put a workspace in view, only a grant does (the scheduler sets
    /// labels only under one; this is the second lock).
    fn granted(&self, cluster: &str) -> bool {
        let now = Instant::now();
        if let Some((at, ok)) = self.granted.lock().get(cluster) {
            if now.duration_since(*at) < GRANT_TTL {
                return *ok;
            }
        }
        let ok = grant::workspace_granted(&self.hub, cluster, &self.target_cluster);
        self.granted.lock().insert(cluster.to_string(), (now, ok));
        ok
    }
}

impl ScopeFilter for Labelled {
    fn cluster(&self, cluster: &str) -> bool {
        if !self.granted(cluster) {
            return false;
        }
        // A custom resource is visible where it is served.
        !self.info.from_crd
            || self
                .hub
                .registry
                .lookup(
                    Some(cluster),
                    &self.info.group,
                    &self.info.version,
                    &self.info.resource,
                )
                .is_some()
    }

    fn stored(&self, _key: &ObjectKey, obj: &StoredObject) -> bool {
        obj.labels.get(&self.label).map(String::as_str) == Some(self.direction.state())
    }

    fn admit_write(&self, key: &ObjectKey, old: Option<&Value>, new: &Value) -> Result<(), ApiError> {
        if !self.granted(&key.cluster) {
            return Err(ApiError::forbidden(format!(
                "{} in workspace {:?}: no Placement there may use this SyncTarget's workspace, so its syncer writes nothing there",
                self.info.resource, key.cluster
            )));
        }
        check_write(&self.label, self.direction, &self.info, key, old, new)
    }

    fn sync_target_key(&self) -> Option<&str> {
        Some(&self.key)
    }

    /// Not another target's bookkeeping: each syncer of an object puts its finalizer
    /// on it and writes its own status annotation, and the scheduler labels it for
    /// each target, so with a hundred targets every object changes a hundred times
    /// for things only one syncer reads. Such a change reaches a syncer with the next
    /// change it hears of, or as the object's state a second later (meanwhile a write
    /// pinned to the older version is refused and retried, as after any race).
    /// Whether an object keeps its status per target (more than one target syncs it)
    /// is heard of.
    fn hears(&self, _key: &ObjectKey, event: &WatchEvent) -> bool {
        heard_by(&self.key, event)
    }
}

/// Whether the syncer of the SyncTarget with key `target` hears of `event`
/// ([`Labelled::hears`]). Also heard of: an object's first finalizer and its last
/// going, because a syncer adds its finalizer one way to an object with a list (an
/// append every syncer's lands) and another to one without (a write pinned to the
/// version read, as only one syncer may make the list).
fn heard_by(target: &str, event: &WatchEvent) -> bool {
    let changes = event.changes();
    let ours = |of: Option<&str>| of.is_none_or(|t| t == target);
    let per_target =
        |o: &StoredObject| status_per_target(o.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let (had, has) = changes.finalizer_count;
    changes.other
        || changes.labels.iter().any(|l| ours(workload_label_target(l)))
        || changes
            .annotations
            .iter()
            .any(|a| ours(workload_annotation_target(a)))
        || changes
            .finalizers
            .iter()
            .any(|f| ours(workload_finalizer_target(f)))
        || (had == 0) != (has == 0)
        || event.previous.as_deref().map(per_target) != Some(per_target(&event.object))
}

/// Events through the syncer view (Ferry's addition to kcp's): a syncer may
/// create one about an object scheduled to its SyncTarget — a copy its
/// cluster refused, shown where the object's owner looks (`kubectl describe`).
/// Nothing else: no Event is readable or writable through the view, and one
/// about any other object is forbidden with the same answer whether or not
/// that object exists.
struct EventsAbout {
    labelled: Labelled,
    /// `(apiVersion, kind, storage key)` of each resource the view serves.
    served: Vec<(String, String, String)>,
}

impl ScopeFilter for EventsAbout {
    fn cluster(&self, cluster: &str) -> bool {
        self.labelled.granted(cluster)
    }

    fn stored(&self, _key: &ObjectKey, _obj: &StoredObject) -> bool {
        false
    }

    fn admit_write(&self, key: &ObjectKey, old: Option<&Value>, new: &Value) -> Result<(), ApiError> {
        if old.is_some() {
            return Err(ApiError::method_not_allowed(
                "events: the syncer virtual workspace only creates Events".to_string(),
            ));
        }
        let about = |field: &str| {
            new.pointer(&format!("/involvedObject/{field}"))
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        let storage_key = self
            .served
            .iter()
            .find(|(api_version, kind, _)| api_version == about("apiVersion") && kind == about("kind"))
            .map(|(_, _, storage_key)| storage_key.clone());
        // As in kube, an Event about a cluster-scoped object lives in `default`.
        let namespace = about("namespace");
        let in_place = namespace == key.namespace || (namespace.is_empty() && key.namespace == "default");
        let object = storage_key
            .filter(|_| in_place && self.labelled.granted(&key.cluster))
            .and_then(|resource| {
                self.labelled.hub.store.get(&ObjectKey {
                    cluster: key.cluster.clone(),
                    resource,
                    namespace: namespace.to_string(),
                    name: about("name").to_string(),
                })
            });
        let scheduled = object.is_some_and(|o| {
            o.labels.get(&self.labelled.label).map(String::as_str) == Some(WORKLOAD_STATE_SYNC)
        });
        if !scheduled {
            return Err(ApiError::forbidden(format!(
                "events {}/{}: through the syncer virtual workspace, an Event must be about an object \
                 scheduled to this SyncTarget, in the Event's namespace (involvedObject)",
                key.namespace, key.name
            )));
        }
        Ok(())
    }

    fn sync_target_key(&self) -> Option<&str> {
        Some(&self.labelled.key)
    }
}

/// KubeStellar's `CustomTransform`s through the syncer view (Ferry's
/// addition to kcp's): every one in each workspace that may have work on
/// this target, unlabelled (a transform is configuration, not work), read
/// only. The syncer applies a workspace's transforms to that workspace's
/// objects alone, so one tenant's transform never shapes another's copies.
struct Transforms {
    labelled: Labelled,
}

impl ScopeFilter for Transforms {
    fn cluster(&self, cluster: &str) -> bool {
        self.labelled.cluster(cluster)
    }

    fn admit_write(&self, key: &ObjectKey, _old: Option<&Value>, _new: &Value) -> Result<(), ApiError> {
        Err(ApiError::method_not_allowed(format!(
            "customtransforms {:?}: the syncer virtual workspace only reads CustomTransforms; their workspace's owners write them",
            key.name
        )))
    }

    fn sync_target_key(&self) -> Option<&str> {
        Some(&self.labelled.key)
    }
}

fn state_labels(obj: Option<&Value>) -> BTreeMap<String, String> {
    obj.and_then(|o| o.pointer("/metadata/labels"))
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with(WORKLOAD_STATE_LABEL_PREFIX))
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
        .collect()
}

/// The rules of a write through the view (pure): other targets' state
/// labels are not the writer's to change; the syncer may only drop its own
/// label (kcp's syncer does, once the downstream copy is gone); what the
/// upsyncer writes keeps its `Upsync` label.
fn check_write(
    label: &str,
    direction: Direction,
    info: &ResourceInfo,
    key: &ObjectKey,
    old: Option<&Value>,
    new: &Value,
) -> Result<(), ApiError> {
    let before = state_labels(old);
    let after = state_labels(Some(new));
    let what = if key.namespace.is_empty() {
        format!("{} {:?}", info.resource, key.name)
    } else {
        format!("{} {}/{}", info.resource, key.namespace, key.name)
    };
    if direction == Direction::Sync && old.is_none() {
        // A server-side apply to a missing object would create it.
        return Err(ApiError::method_not_allowed(format!(
            "{what}: the syncer virtual workspace does not create objects; they are created in their workspace and scheduled to the SyncTarget"
        )));
    }
    for k in before.keys().chain(after.keys()) {
        if k != label && before.get(k) != after.get(k) {
            return Err(ApiError::forbidden(format!(
                "{what}: label {k:?} belongs to another SyncTarget; a syncer may not change it"
            )));
        }
    }
    match direction {
        Direction::Sync => {
            let own = after.get(label);
            if own.is_some() && own != before.get(label) {
                return Err(ApiError::forbidden(format!(
                    "{what}: a syncer may remove its label {label:?} but not set it; the scheduler assigns objects to SyncTargets"
                )));
            }
        }
        Direction::Upsync => {
            if after.get(label).map(String::as_str) != Some(WORKLOAD_STATE_UPSYNC) {
                return Err(ApiError::bad_request(format!(
                    "{what}: objects written through the upsyncer virtual workspace must carry the label {label}={WORKLOAD_STATE_UPSYNC}; add it to metadata.labels"
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn info() -> ResourceInfo {
        crate::registry::Registry::default()
            .lookup(None, "", "v1", "pods")
            .expect("pods are built in")
    }

    fn key() -> ObjectKey {
        ObjectKey {
            cluster: "c".into(),
            resource: "/pods".into(),
            namespace: "ns".into(),
            name: "p".into(),
        }
    }

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "p", "labels": labels}})
    }

    const OWN: &str = "state.workload.kcp.io/own";
    const OTHER: &str = "state.workload.kcp.io/other";

    /// A modification of a ConfigMap synced to targets `a` and `b`, from `old` to
    /// `new` (metadata members merged into the object's).
    fn modified(old: Value, new: Value) -> WatchEvent {
        let stored = |rv: u64, metadata: Value| {
            let mut obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"},
                                 "metadata": {"name": "x", "resourceVersion": rv.to_string(),
                                              "labels": {"state.workload.kcp.io/a": "Sync", "state.workload.kcp.io/b": "Sync"}}});
            for (k, v) in metadata.as_object().unwrap() {
                obj["metadata"][k] = v.clone();
            }
            let labels = obj["metadata"]["labels"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                .collect();
            Arc::new(StoredObject {
                rv,
                json: serde_json::to_vec(&obj).unwrap().into(),
                labels,
            })
        };
        WatchEvent::new(
            crate::storage::EventType::Modified,
            key(),
            stored(2, new),
            Some(stored(1, old)),
        )
    }

    #[test]
    fn a_syncer_hears_of_everything_but_other_targets_bookkeeping() {
        let both = json!({"state.workload.kcp.io/a": "Sync", "state.workload.kcp.io/b": "Sync"});
        // b's finalizer, status, deletion mark and drift: not a's business.
        let first = json!({"finalizers": ["example.com/first"]});
        for (old, new) in [
            (
                first.clone(),
                json!({"finalizers": ["example.com/first", "workload.kcp.io/syncer-b"]}),
            ),
            (
                json!({"finalizers": ["workload.kcp.io/syncer-a", "workload.kcp.io/syncer-b"]}),
                json!({"finalizers": ["workload.kcp.io/syncer-a"]}),
            ),
            (
                json!({}),
                json!({"annotations": {"experimental.status.workload.kcp.io/b": "{}"}}),
            ),
            (
                json!({}),
                json!({"annotations": {"deletion.internal.workload.kcp.io/b": "2026-01-01T00:00:00Z"}}),
            ),
            (
                json!({}),
                json!({"annotations": {"drift.ferry.dev/b": "data"}, "managedFields": [{"manager": "b"}]}),
            ),
            (
                json!({}),
                json!({"labels": {"state.workload.kcp.io/a": "Sync", "state.workload.kcp.io/b": "Sync", "state.workload.kcp.io/c": "Sync"}}),
            ),
        ] {
            let event = modified(old.clone(), new.clone());
            assert!(!heard_by("a", &event), "{old} -> {new}");
            assert!(
                heard_by("b", &event) || new.to_string().contains("/c\""),
                "b hears its own: {old} -> {new}"
            );
        }
        // Its own bookkeeping, anything else, and a change of whether status is kept per target.
        for (old, new) in [
            (json!({}), json!({"finalizers": ["workload.kcp.io/syncer-a"]})),
            (
                json!({}),
                json!({"annotations": {"experimental.status.workload.kcp.io/a": "{}"}}),
            ),
            (json!({}), json!({"annotations": {"note": "x"}})),
            (
                json!({}),
                json!({"labels": {"state.workload.kcp.io/a": "Sync", "state.workload.kcp.io/b": "Sync", "app": "web"}}),
            ),
            (json!({}), json!({"finalizers": ["example.com/other"]})),
            (json!({}), json!({"deletionTimestamp": "2026-01-01T00:00:00Z"})),
            (
                json!({}),
                json!({"annotations": {"experimental.status.workload.kcp.io/b": "{}", "note": "x"}}),
            ),
            (
                json!({"labels": both.clone()}),
                json!({"labels": {"state.workload.kcp.io/a": "Sync"}}),
            ),
            // b's finalizer as the object's first, and as its last going.
            (json!({}), json!({"finalizers": ["workload.kcp.io/syncer-b"]})),
            (
                json!({"finalizers": ["workload.kcp.io/syncer-b"]}),
                json!({"finalizers": []}),
            ),
        ] {
            assert!(
                heard_by("a", &modified(old.clone(), new.clone())),
                "{old} -> {new}"
            );
        }
    }

    #[test]
    fn the_upsyncer_needs_its_upsync_label_on_every_write() {
        let ok = obj(json!({OWN: "Upsync"}));
        assert!(check_write(OWN, Direction::Upsync, &info(), &key(), None, &ok).is_ok());
        let missing = obj(json!({"app": "x"}));
        let e = check_write(OWN, Direction::Upsync, &info(), &key(), None, &missing).unwrap_err();
        assert_eq!(e.code, 400);
        assert!(
            e.message.contains("pods ns/p") && e.message.contains(OWN),
            "{}",
            e.message
        );
        let sync = obj(json!({OWN: "Sync"}));
        assert!(check_write(OWN, Direction::Upsync, &info(), &key(), Some(&ok), &sync).is_err());
    }

    #[test]
    fn a_syncer_may_drop_its_own_label_but_not_touch_others() {
        let both = obj(json!({OWN: "Sync", OTHER: "Sync"}));
        let dropped = obj(json!({OTHER: "Sync"}));
        assert!(check_write(OWN, Direction::Sync, &info(), &key(), Some(&both), &dropped).is_ok());
        assert!(check_write(OWN, Direction::Sync, &info(), &key(), Some(&both), &both).is_ok());
        let stolen = obj(json!({OWN: "Sync"}));
        assert_eq!(
            check_write(OWN, Direction::Sync, &info(), &key(), Some(&both), &stolen)
                .unwrap_err()
                .code,
            403
        );
        let grabbed = obj(json!({OWN: "Sync", OTHER: "Sync", "state.workload.kcp.io/third": "Sync"}));
        assert!(check_write(OWN, Direction::Sync, &info(), &key(), Some(&both), &grabbed).is_err());
        let relabelled = obj(json!({OWN: "Upsync", OTHER: "Sync"}));
        assert!(check_write(OWN, Direction::Sync, &info(), &key(), Some(&both), &relabelled).is_err());
        // Nothing is created through the syncer's view, not even by an apply patch.
        let e = check_write(OWN, Direction::Sync, &info(), &key(), None, &dropped).unwrap_err();
        assert_eq!(e.code, 405);
    }

    #[test]
    fn only_accepted_synced_resources_are_served() {
        let target = json!({"status": {"syncedResources": [
            {"group": "apps", "resource": "deployments", "versions": ["v1"], "state": "Accepted"},
            {"group": "", "resource": "services", "versions": ["v1"], "state": "Pending"},
            {"group": "example.io", "resource": "widgets", "versions": ["v1"], "state": "Incompatible"},
        ]}});
        assert_eq!(
            accepted_resources(&target),
            vec![(
                "apps".to_string(),
                "deployments".to_string(),
                vec!["v1".to_string()]
            )]
        );
        assert!(accepted_resources(&json!({})).is_empty());
    }
}
