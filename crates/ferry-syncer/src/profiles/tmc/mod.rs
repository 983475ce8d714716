//! The kcp TMC profile: the workload syncer of kcp's Transparent Multi-Cluster.
//!
//! - Upstream: the SyncTarget's syncer virtual workspace (or, before one exists, a hub
//!   root with admin credentials: the same shape), where `/clusters/*` lists and
//!   watches objects of every workspace placed on the target, each annotated with its
//!   `kcp.io/cluster`, and writes go to `/clusters/<cluster>/...`.
//! - Selection: objects of the synced resource types (namespaces, configmaps, secrets,
//!   serviceaccounts (but each namespace's `default`, which every cluster makes itself) and
//!   the SyncTarget's `status.syncedResources` in state `Accepted`, each allowed by a
//!   downstream SelfSubjectAccessReview) labelled `state.workload.kcp.io/<key>=Sync` go
//!   down, unless the per-target deletion annotation is set and no soft finalizer is
//!   left; pods and persistent volumes labelled `...=Upsync` downstream go up.
//! - Persistent volumes, the one cluster-scoped type kcp syncs besides namespaces, keep
//!   their name; which workspace one belongs to is in its `kcp.io/namespace-locator`
//!   (namespace empty) downstream, or, for a volume provisioned downstream, its claim's
//!   `kcp-<hash>` namespace. A downstream volume of that name that is not the copy
//!   (another workspace's, or nobody's) is a collision, never written over.
//! - Mapping: upstream namespace `ns` of workspace `c` lands in `kcp-<hash>` (see
//!   [`locator`]), which carries the `kcp.io/namespace-locator` annotation;
//!   `kube-root-ca.crt` becomes `kcp-root-ca.crt`; the mutators in [`mutate`]; the
//!   object's own workspace's KubeStellar `CustomTransform`s ([`transforms`]).
//! - Marks: label `internal.workload.kcp.io/cluster=<key>` on copies (the state label is
//!   never copied), the upstream finalizer `workload.kcp.io/syncer-<key>`, writes by
//!   server-side apply with field manager `syncer`, and the last drift restored on a
//!   copy as `drift.ferry.dev/<key>` on its upstream object ([`ferry_api::drift`]).
//! - Configuration source ([`config`]): the SyncTarget (its uid checked, its virtual
//!   workspace URLs and synced resources followed), the heartbeat, and the cluster's
//!   schemas imported upstream ([`importer`]).

pub mod config;
pub mod importer;
pub mod locator;
pub mod mutate;
pub mod transforms;

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use serde_json::{json, Value};

use ferry_api::well_known::{
    status_per_target, workload_deletion_annotation, workload_soft_finalizers_annotation,
    workload_state_label, workload_status_annotation, workload_syncer_finalizer,
    NAMESPACE_LOCATOR_ANNOTATION, WORKLOAD_CLUSTER_LABEL, WORKLOAD_RV_ANNOTATION,
};

use crate::engine::raw::RawObject;
use crate::engine::{Engine, ObjectRef};
use crate::profile::{Mapping, Marks, Plan, Profile, ResourceType, Selection};
use crate::selection::{
    Direction, DiscoveredResource, Resolution, ResourceId, ResourcePattern, Scope, Unresolved,
    UnresolvedReason, WatchTarget,
};
use crate::side::Side;

use locator::{NamespaceLocator, SyncTargetLocator};

pub use config::{connect, TmcOptions};

/// The label value that sends an upstream object down.
pub const SYNC: &str = "Sync";
/// The label value that sends a downstream object up.
pub const UPSYNC: &str = "Upsync";
/// kcp's field manager for downstream writes.
pub const FIELD_MANAGER: &str = "syncer";

/// A resource type the syncer may sync down: group, resource, versions in order of
/// preference (empty: the group's preferred one).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SyncedType {
    /// API group.
    pub group: String,
    /// Resource (plural).
    pub resource: String,
    /// Versions in order of preference.
    pub versions: Vec<String>,
}

impl SyncedType {
    fn core(resource: &str) -> SyncedType {
        SyncedType {
            group: String::new(),
            resource: resource.into(),
            versions: vec!["v1".into()],
        }
    }

    /// `group/resource`, `resource` for the core group.
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }
}

/// The types every TMC syncer syncs, whatever the SyncTarget says (kcp's `workload sync`
/// always adds ServiceAccounts to `--resources`).
pub fn always_synced() -> Vec<SyncedType> {
    ferry_api::workload::ALWAYS_SYNCED
        .iter()
        .map(|(group, resource)| {
            debug_assert!(group.is_empty(), "always-synced kinds are core kinds");
            SyncedType::core(resource)
        })
        .collect()
}

/// The TMC profile's state: the SyncTarget's identity, the synced types, and the
/// downstream namespaces seen so far.
pub struct Tmc {
    target: SyncTargetLocator,
    key: String,
    state_label: String,
    finalizer: String,
    deletion_annotation: String,
    soft_finalizers_annotation: String,
    /// Where the status goes while several SyncTargets sync an object.
    status_annotation: String,
    /// Downstream namespace → (logical cluster, upstream namespace).
    upstream_of: RwLock<HashMap<String, (Arc<str>, String)>>,
    /// (logical cluster, upstream namespace) → downstream namespace.
    downstream_of: RwLock<HashMap<(Arc<str>, String), String>>,
    /// Downstream persistent volume → the logical cluster it belongs to.
    volume_cluster: RwLock<HashMap<String, Arc<str>>>,
    /// Types to sync down (before the SSAR gate).
    synced: RwLock<Vec<SyncedType>>,
    /// `group/resource`s the downstream cluster does not allow `*` on.
    denied: RwLock<BTreeSet<String>>,
    loaded: AtomicBool,
    revision: AtomicU64,
    engine: OnceLock<Weak<Engine>>,
    options: TmcOptions,
    /// The SyncTarget's workspace (reads, heartbeats, conditions).
    workspace: kube::Client,
    /// The virtual workspaces the syncer reads and writes through, once [`connect`]ed;
    /// followed as the SyncTarget advertises others.
    views: Mutex<Option<config::Views>>,
    /// Each placed workspace's CustomTransforms.
    transforms: transforms::WorkspaceTransforms,
}

impl Tmc {
    /// The state for the SyncTarget `target` (its logical cluster, name and uid).
    pub fn new(target: SyncTargetLocator, options: TmcOptions, workspace: kube::Client) -> Arc<Tmc> {
        let key = ferry_api::workload::sync_target_key(&target.cluster, &target.name);
        Arc::new(Tmc {
            state_label: workload_state_label(&key),
            finalizer: workload_syncer_finalizer(&key),
            deletion_annotation: workload_deletion_annotation(&key),
            soft_finalizers_annotation: workload_soft_finalizers_annotation(&key),
            status_annotation: workload_status_annotation(&key),
            key,
            target,
            upstream_of: RwLock::default(),
            downstream_of: RwLock::default(),
            volume_cluster: RwLock::default(),
            synced: RwLock::new(always_synced()),
            denied: RwLock::default(),
            loaded: AtomicBool::new(false),
            revision: AtomicU64::new(0),
            engine: OnceLock::new(),
            options,
            workspace,
            views: Mutex::new(None),
            transforms: Default::default(),
        })
    }

    /// The profile over this state.
    pub fn profile(self: &Arc<Self>) -> Profile {
        Profile {
            name: "tmc",
            selection: self.clone(),
            mapping: self.clone(),
            marks: self.clone(),
            config: self.clone(),
            upstream_clusters: true,
            namespace_clean_delay: Some(self.options.namespace_clean_delay),
            // Ferry's syncer virtual workspace takes Events about the objects it
            // serves (kcp's takes none), so a refused copy shows on the object.
            upstream_takes_events: true,
            objects_per_worker: 1,
        }
    }

    /// The sync target key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The SyncTarget.
    pub fn target(&self) -> &SyncTargetLocator {
        &self.target
    }

    /// Replaces the synced types (from `status.syncedResources`); returns whether they
    /// changed.
    pub fn set_synced(&self, types: Vec<SyncedType>) -> bool {
        let mut current = self.synced.write();
        let first = !self.loaded.swap(true, Ordering::Relaxed);
        if *current == types && !first {
            return false;
        }
        *current = types;
        self.revision.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// The synced types.
    pub fn synced(&self) -> Vec<SyncedType> {
        self.synced.read().clone()
    }

    /// Records which types the downstream cluster refuses; returns whether that changed.
    pub fn set_denied(&self, denied: BTreeSet<String>) -> bool {
        let mut current = self.denied.write();
        if *current == denied {
            return false;
        }
        *current = denied;
        self.revision.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// The downstream namespace of upstream namespace `namespace` in `cluster`, learnt
    /// for the way back.
    pub fn downstream_namespace(&self, cluster: &Arc<str>, namespace: &str) -> String {
        let probe = (cluster.clone(), namespace.to_string());
        if let Some(known) = self.downstream_of.read().get(&probe) {
            return known.clone();
        }
        let name = NamespaceLocator::new(&self.target, cluster, namespace).downstream_namespace();
        self.downstream_of.write().insert(probe.clone(), name.clone());
        let new = self.upstream_of.write().insert(name.clone(), probe).is_none();
        if new {
            self.learnt_namespace();
        }
        name
    }

    /// The upstream namespace (and its cluster) of the downstream namespace `namespace`,
    /// if known.
    pub fn upstream_namespace(&self, namespace: &str) -> Option<(Arc<str>, String)> {
        self.upstream_of.read().get(namespace).cloned()
    }

    /// A new downstream namespace is known: objects waiting to go up from it can now.
    fn learnt_namespace(&self) {
        let Some(engine) = self.engine.get().and_then(Weak::upgrade) else {
            return;
        };
        if tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        crate::spawn(async move {
            for flow in engine.flows() {
                if flow.target.direction == Direction::Upsync && flow.is_synced() {
                    engine.queue.add_all(flow.all_keys(&*engine.profile.mapping));
                }
            }
        });
    }

    /// The locator of upstream namespace `namespace` of `cluster`.
    fn locator(&self, cluster: &str, namespace: &str) -> NamespaceLocator {
        NamespaceLocator::new(&self.target, cluster, namespace)
    }

    /// Whether `obj` is marked for deletion from this target with no soft finalizer left.
    fn leaving(&self, obj: &Value) -> bool {
        let annotations = &obj["metadata"]["annotations"];
        if annotations[&self.deletion_annotation].is_null() {
            return false;
        }
        match annotations[&self.soft_finalizers_annotation].as_str() {
            None => true,
            Some(soft) => {
                serde_json::from_str::<Vec<String>>(soft).map_or(soft.trim().is_empty(), |f| f.is_empty())
            }
        }
    }

    fn state<'a>(&self, obj: &'a Value) -> Option<&'a str> {
        obj["metadata"]["labels"][&self.state_label].as_str()
    }

    /// The logical cluster the downstream persistent volume `obj` belongs to: its
    /// locator's, if the locator names this SyncTarget, else that of its claim's
    /// namespace, if that is one of this syncer's.
    fn volume_cluster_of(&self, obj: &Value) -> Option<Arc<str>> {
        let located = obj["metadata"]["annotations"][NAMESPACE_LOCATOR_ANNOTATION]
            .as_str()
            .and_then(NamespaceLocator::parse)
            .filter(|l| l.sync_target.uid == self.target.uid && l.sync_target.name == self.target.name);
        if let Some(locator) = located {
            return (!locator.cluster.is_empty()).then(|| Arc::from(locator.cluster));
        }
        let claim_namespace = obj["spec"]["claimRef"]["namespace"].as_str()?;
        self.upstream_namespace(claim_namespace)
            .map(|(cluster, _)| cluster)
    }

    /// The cluster recorded for downstream persistent volume `name`.
    fn known_volume_cluster(&self, name: &str) -> Option<Arc<str>> {
        self.volume_cluster.read().get(name).cloned()
    }

    fn record_volume_cluster(&self, name: &str, cluster: &Arc<str>) {
        if self.volume_cluster.read().get(name) == Some(cluster) {
            return;
        }
        self.volume_cluster
            .write()
            .insert(name.to_string(), cluster.clone());
    }
}

/// Whether `id` is `v1/persistentvolumes`.
fn is_volumes(id: &ResourceId) -> bool {
    id.group.is_empty() && id.resource == "persistentvolumes"
}

/// Rewrites a persistent volume's `spec.claimRef` for the other side: its namespace
/// mapped by `namespace` (left as it is when `None`), and the claim's uid and
/// resourceVersion, which are the other side's, dropped.
fn map_claim_ref(copy: &mut Value, namespace: impl Fn(&str) -> Option<String>) {
    let Some(claim) = copy.pointer_mut("/spec/claimRef").and_then(Value::as_object_mut) else {
        return;
    };
    claim.remove("uid");
    claim.remove("resourceVersion");
    if let Some(mapped) = claim.get("namespace").and_then(Value::as_str).and_then(namespace) {
        claim.insert("namespace".into(), Value::String(mapped));
    }
}

impl Selection for Tmc {
    fn is_loaded(&self) -> bool {
        self.loaded.load(Ordering::Relaxed)
    }

    fn revision(&self) -> u64 {
        self.revision.load(Ordering::Relaxed)
    }

    fn resolve(&self, upstream: &[DiscoveredResource], downstream: &[DiscoveredResource]) -> Plan {
        let denied = self.denied.read().clone();
        let mut downsync = Resolution::default();
        for synced in self.synced() {
            if denied.contains(&synced.group_resource()) {
                continue;
            }
            let found = |version: Option<&str>| {
                upstream.iter().find(|d| {
                    d.group == synced.group
                        && d.resource == synced.resource
                        && d.is_watchable()
                        && version.map_or(d.preferred, |v| d.version == v)
                })
            };
            let chosen = if synced.versions.is_empty() {
                found(None)
            } else {
                synced.versions.iter().find_map(|v| found(Some(v)))
            };
            match chosen {
                // Only namespaces and persistent volumes are synced cluster-wide.
                Some(d)
                    if d.namespaced
                        || d.group.is_empty()
                            && matches!(d.resource.as_str(), "namespaces" | "persistentvolumes") =>
                {
                    downsync.targets.push(WatchTarget {
                        id: ResourceId::new(&d.group, &d.version, &d.resource, d.namespaced),
                        kind: d.kind.clone(),
                        direction: Direction::Downsync,
                    })
                }
                Some(_) => {}
                None => downsync.unresolved.push(Unresolved {
                    pattern: ResourcePattern {
                        group: synced.group.clone(),
                        version: synced.versions.first().cloned(),
                        resource: synced.resource.clone(),
                        scope: Scope::Any,
                    },
                    reason: UnresolvedReason::NotServed,
                }),
            }
        }
        downsync.targets.sort();
        let mut upsync = Resolution::default();
        for (resource, namespaced) in [("pods", true), ("persistentvolumes", false)] {
            let served = downstream.iter().find(|d| {
                d.group.is_empty() && d.version == "v1" && d.resource == resource && d.is_watchable()
            });
            if let (Some(served), false) = (served, denied.contains(resource)) {
                upsync.targets.push(WatchTarget {
                    id: ResourceId::new("", "v1", resource, namespaced),
                    kind: served.kind.clone(),
                    direction: Direction::Upsync,
                });
            }
        }
        Plan { downsync, upsync }
    }

    fn wants(&self, target: &WatchTarget, source: &ObjectRef, obj: &Value) -> bool {
        match target.direction {
            Direction::Downsync => self.state(obj) == Some(SYNC) && !self.leaving(obj),
            Direction::Upsync => {
                self.state(obj) == Some(UPSYNC)
                    && match source.namespace.as_deref() {
                        Some(ns) => self.upstream_namespace(ns).is_some(),
                        None => is_volumes(&target.id) && self.volume_cluster_of(obj).is_some(),
                    }
            }
        }
    }

    /// Never waits for a Namespace copy: a copy creates its `kcp-<hash>` namespace
    /// itself, with the locator (as kcp's syncer does).
    fn copies_namespace(&self, _: &str) -> bool {
        false
    }

    /// `kube-root-ca.crt` and service-account tokens are synced, renamed or mutated
    /// (the rule the scheduler reads too: `ferry_api::cluster_local::tmc_leaves_to_cluster`).
    fn is_cluster_local(&self, id: &ResourceId, name: &str, obj: &Value) -> bool {
        let namespace = obj.pointer("/metadata/namespace").and_then(Value::as_str);
        ferry_api::cluster_local::tmc_leaves_to_cluster(
            &id.group,
            &id.resource,
            namespace.unwrap_or_default(),
            name,
        )
    }
}

impl Mapping for Tmc {
    /// This target's status annotation while another target syncs the object too.
    fn status_annotation(&self, target: &WatchTarget, source: &Value) -> Option<String> {
        let labels = source.pointer("/metadata/labels").and_then(Value::as_object)?;
        let per_target =
            status_per_target(labels.iter().filter_map(|(k, v)| Some((k.as_str(), v.as_str()?))));
        (target.direction == Direction::Downsync && per_target).then(|| self.status_annotation.clone())
    }

    fn dest_type(&self, target: &WatchTarget) -> ResourceType {
        ResourceType::from(target)
    }

    fn dest_ref(&self, target: &WatchTarget, source: &ObjectRef) -> ObjectRef {
        let id = &target.id;
        match (target.direction, &source.cluster) {
            (Direction::Downsync, Some(cluster)) if id.is_namespaces() => {
                ObjectRef::new(None, &self.downstream_namespace(cluster, &source.name))
            }
            (Direction::Downsync, Some(cluster)) => match &source.namespace {
                Some(ns) => ObjectRef::new(
                    Some(&self.downstream_namespace(cluster, ns)),
                    &mutate::downstream_name(&id.resource, &source.name),
                ),
                None => {
                    self.record_volume_cluster(&source.name, cluster);
                    ObjectRef::new(None, &source.name)
                }
            },
            (Direction::Downsync, None) => source.clone(),
            (Direction::Upsync, _) if source.namespace.is_none() => {
                match self.known_volume_cluster(&source.name) {
                    Some(cluster) => ObjectRef {
                        cluster: Some(cluster),
                        namespace: None,
                        name: source.name.clone(),
                    },
                    None => source.clone(),
                }
            }
            (Direction::Upsync, _) => {
                match source
                    .namespace
                    .as_deref()
                    .and_then(|ns| self.upstream_namespace(ns))
                {
                    Some((cluster, namespace)) => ObjectRef {
                        cluster: Some(cluster),
                        namespace: Some(namespace),
                        name: source.name.clone(),
                    },
                    // Not known (yet): `wants` says no until it is.
                    None => source.clone(),
                }
            }
        }
    }

    fn source_ref(&self, target: &WatchTarget, dest: &ObjectRef) -> Option<ObjectRef> {
        let id = &target.id;
        match target.direction {
            Direction::Downsync if id.is_namespaces() => {
                let (cluster, namespace) = self.upstream_namespace(&dest.name)?;
                Some(ObjectRef {
                    cluster: Some(cluster),
                    namespace: None,
                    name: namespace,
                })
            }
            Direction::Downsync if dest.namespace.is_none() => Some(ObjectRef {
                cluster: Some(self.known_volume_cluster(&dest.name)?),
                namespace: None,
                name: dest.name.clone(),
            }),
            Direction::Downsync => {
                let (cluster, namespace) = self.upstream_namespace(dest.namespace.as_deref()?)?;
                Some(ObjectRef {
                    cluster: Some(cluster),
                    namespace: Some(namespace),
                    name: mutate::upstream_name(&id.resource, &dest.name),
                })
            }
            Direction::Upsync if dest.namespace.is_none() => Some(ObjectRef::new(None, &dest.name)),
            Direction::Upsync => {
                let cluster = dest.cluster.as_ref()?;
                let namespace = self.downstream_namespace(cluster, dest.namespace.as_deref()?);
                Some(ObjectRef::new(Some(&namespace), &dest.name))
            }
        }
    }

    fn transform(&self, target: &WatchTarget, source_key: &ObjectRef, source: &Value, copy: &mut Value) {
        let id = &target.id;
        match target.direction {
            Direction::Downsync => {
                let cluster = source_key.cluster();
                if let Some(annotations) = copy
                    .pointer_mut("/metadata/annotations")
                    .and_then(Value::as_object_mut)
                {
                    annotations.retain(|key, _| {
                        !ferry_api::well_known::WORKLOAD_PER_TARGET_ANNOTATION_PREFIXES
                            .iter()
                            .any(|prefix| key.starts_with(prefix))
                    });
                }
                // The workspace by its path where the syncer knows it (the
                // SyncTarget's own); elsewhere by its logical cluster name.
                let workspace = if cluster == self.target.cluster && !self.options.workspace_path.is_empty() {
                    self.options.workspace_path.as_str()
                } else {
                    cluster
                };
                crate::transform::mark_tracking(
                    copy,
                    &self.target.name,
                    workspace,
                    &ferry_api::timestamp::now(),
                );
                if id.is_namespaces() {
                    let locator = self.locator(cluster, &source_key.name).to_json();
                    copy["metadata"]["annotations"][NAMESPACE_LOCATOR_ANNOTATION] = Value::String(locator);
                } else if is_volumes(id) {
                    let locator = self.locator(cluster, "").to_json();
                    copy["metadata"]["annotations"][NAMESPACE_LOCATOR_ANNOTATION] = Value::String(locator);
                    let cluster: Arc<str> = Arc::from(cluster);
                    map_claim_ref(copy, |ns| Some(self.downstream_namespace(&cluster, ns)));
                } else if id.group.is_empty() && id.resource == "secrets" {
                    mutate::mutate_secret(copy);
                } else if mutate::has_pod_template(&id.group, &id.resource) {
                    mutate::mutate_pod_template(copy, source_key.namespace.as_deref().unwrap_or_default());
                }
                // The object's own workspace's transforms, and no other's.
                if !id.is_namespaces() {
                    let transforms = self.transforms.of(cluster);
                    if let Some(mut shaped) =
                        ferry_api::transform::transformed(copy, &id.group, &id.resource, &transforms)
                    {
                        // What names the copy is the syncer's, whatever a transform says.
                        if !shaped.get("metadata").is_some_and(Value::is_object) {
                            shaped["metadata"] = json!({});
                        }
                        for path in ["/apiVersion", "/kind", "/metadata/name", "/metadata/namespace"] {
                            if let (Some(v), None) = (copy.pointer(path), shaped.pointer(path)) {
                                let v = v.clone();
                                let (parent, field) = path.rsplit_once('/').unwrap_or_default();
                                if let Some(obj) = shaped.pointer_mut(parent).and_then(Value::as_object_mut) {
                                    obj.insert(field.to_string(), v);
                                }
                            }
                        }
                        *copy = shaped;
                    }
                }
            }
            Direction::Upsync => {
                if let Some(meta) = copy.get_mut("metadata").and_then(Value::as_object_mut) {
                    if let Some(labels) = meta.get_mut("labels").and_then(Value::as_object_mut) {
                        labels.remove(WORKLOAD_CLUSTER_LABEL);
                    }
                    if let Some(annotations) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
                        annotations.remove(NAMESPACE_LOCATOR_ANNOTATION);
                    }
                }
                if is_volumes(id) {
                    map_claim_ref(copy, |ns| {
                        self.upstream_namespace(ns).map(|(_, upstream)| upstream)
                    });
                }
                if let Some(rv) = source
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                {
                    copy["metadata"]["annotations"][WORKLOAD_RV_ANNOTATION] = Value::String(rv.to_string());
                }
            }
        }
    }

    fn dest_claim(&self, target: &WatchTarget, source_key: &ObjectRef) -> Option<Value> {
        self.volume_claim(target, source_key)
    }

    fn learn(&self, target: &WatchTarget, side: Side, key: &ObjectRef, obj: &RawObject) {
        self.learn_volume(target, side, key, obj);
    }

    fn dest_namespace(
        &self,
        target: &WatchTarget,
        source_key: &ObjectRef,
        dest_namespace: &str,
    ) -> Option<Value> {
        if target.direction != Direction::Downsync {
            return None;
        }
        let upstream_namespace = if target.id.is_namespaces() {
            &source_key.name
        } else {
            source_key.namespace.as_ref()?
        };
        let locator = self.locator(source_key.cluster(), upstream_namespace);
        Some(json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": dest_namespace,
                "labels": { WORKLOAD_CLUSTER_LABEL: self.key },
                "annotations": { NAMESPACE_LOCATOR_ANNOTATION: locator.to_json() },
            }
        }))
    }
}

impl Tmc {
    /// What [`Mapping::dest_claim`] and [`Mapping::learn`] add to the mapping.
    fn volume_claim(&self, target: &WatchTarget, source_key: &ObjectRef) -> Option<Value> {
        if target.direction != Direction::Downsync || !is_volumes(&target.id) {
            return None;
        }
        let locator = self.locator(source_key.cluster.as_deref()?, "").to_json();
        Some(json!({ "metadata": { "annotations": { NAMESPACE_LOCATOR_ANNOTATION: locator } } }))
    }

    fn learn_volume(&self, target: &WatchTarget, side: Side, key: &ObjectRef, obj: &RawObject) {
        // Downstream volumes only: a downsynced volume's copy, or an upsynced one's
        // source.
        if side != Side::Downstream || !is_volumes(&target.id) {
            return;
        }
        if let Some(cluster) = self.volume_cluster_of(&obj.to_value()) {
            self.record_volume_cluster(&key.name, &cluster);
        }
    }
}

impl Marks for Tmc {
    fn copy_selector(&self, side: Side) -> String {
        match side {
            Side::Downstream => format!("{WORKLOAD_CLUSTER_LABEL}={}", self.key),
            Side::Upstream => format!("{}={UPSYNC}", self.state_label),
        }
    }

    fn mark(&self, copy: &mut Value, direction: Direction) {
        match direction {
            Direction::Downsync => {
                copy["metadata"]["labels"][WORKLOAD_CLUSTER_LABEL] = Value::String(self.key.clone());
            }
            Direction::Upsync => {
                copy["metadata"]["labels"][self.state_label.as_str()] = Value::String(UPSYNC.into());
                copy["metadata"]["finalizers"] = json!([self.finalizer]);
            }
        }
    }

    /// A downsynced copy (labelled with the key), or an upsynced one (labelled
    /// `Upsync` and carrying the resource version of its downstream source); a
    /// downstream object labelled `Upsync` is a source, not a copy.
    fn is_own_copy(&self, obj: &Value) -> bool {
        let meta = &obj["metadata"];
        meta["labels"][WORKLOAD_CLUSTER_LABEL].as_str() == Some(self.key.as_str())
            || (self.state(obj) == Some(UPSYNC) && meta["annotations"][WORKLOAD_RV_ANNOTATION].is_string())
    }

    fn is_orphaned_copy(&self, obj: &Value, side: Side) -> bool {
        let meta = &obj["metadata"];
        side == Side::Downstream
            && meta["labels"][WORKLOAD_CLUSTER_LABEL].as_str() == Some(self.key.as_str())
            && meta["deletionTimestamp"].is_null()
    }

    fn is_create_only(&self, _: &Value, _: Direction) -> bool {
        false
    }

    fn release_patch(&self) -> Value {
        json!({ "metadata": { "labels": { WORKLOAD_CLUSTER_LABEL: null } } })
    }

    fn describe(&self, direction: Direction) -> String {
        match direction {
            Direction::Downsync => format!("label {WORKLOAD_CLUSTER_LABEL}={}", self.key),
            Direction::Upsync => format!("label {}={UPSYNC}", self.state_label),
        }
    }

    fn finalizer(&self) -> Option<String> {
        Some(self.finalizer.clone())
    }

    /// The finalizer, the deletion and status annotations and the state label go
    /// together (kcp's `EnsureUpstreamFinalizerRemoved`).
    fn release_source_patch(&self, remaining: Vec<Value>) -> Value {
        json!({ "metadata": {
            "finalizers": remaining,
            "labels": { self.state_label.as_str(): null },
            "annotations": {
                self.deletion_annotation.as_str(): null,
                self.status_annotation.as_str(): null,
            },
        } })
    }

    fn apply_manager(&self) -> Option<&str> {
        Some(FIELD_MANAGER)
    }

    /// `drift.ferry.dev/<key>` on the upstream object, as kcp keeps its other
    /// per-SyncTarget state there; never copied to a cluster.
    fn drift_mark(&self, drift: &ferry_api::drift::Drift) -> Option<Value> {
        let annotation = ferry_api::drift::drift_annotation(&self.key);
        let value = serde_json::to_string(drift).ok()?;
        Some(json!({ "metadata": { "annotations": { annotation: value } } }))
    }
}

/// Heartbeat and SyncTarget polling periods.
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(20);

#[cfg(test)]
mod tests;
