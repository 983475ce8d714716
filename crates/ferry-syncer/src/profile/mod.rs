//! The seam between the core loop and a profile.
//!
//! The reference syncers (KubeStellar's, kcp's TMC workload syncer, kcp's api-syncagent)
//! run the same loop: watch both sides per resource type, queue keys, reconcile each key
//! level-based, clean up copies nobody wants. They differ in four things, and a
//! [`Profile`] is exactly those four, each a trait object:
//!
//! - [`Selection`]: which resource types flow each way (given both sides' discovery)
//!   and which objects of them are wanted on the other side. KubeStellar: the merge of
//!   the SyncerConfigs. TMC: objects labelled `state.workload.kcp.io/<key>=Sync`
//!   (`Upsync` for the way up). api-syncagent: PublishedResources.
//! - [`Mapping`]: where a copy lands. Each flow has a resource type on each side
//!   ([`Mapping::dest_type`]: a profile may rename kinds, as TMC's denaturing does) and
//!   each object a key on each side ([`Mapping::dest_ref`] and its inverse
//!   [`Mapping::source_ref`]: TMC maps namespace `ns` to `kcp-<hash>`; api-syncagent
//!   applies naming templates). The queue key ([`crate::engine::Key`]) carries both
//!   references, so the reconciler never has to work one out from the other.
//! - [`Marks`]: how a copy records its owner: labels (the engine watches and lists
//!   copies with [`Marks::copy_selector`], so the server filters them), annotations for
//!   humans and compatibility, and what counts as this syncer's copy when cleaning up.
//! - [`ConfigSource`]: where the selection comes from and where the syncer reports
//!   back (KubeStellar: SyncerConfigs watched upstream, conditions and heartbeats
//!   written onto them). It runs as tasks next to the core loop and tells the engine
//!   when the selection changed ([`crate::engine::Engine::selection_changed`]).
//!
//! What stays in the core, whatever the profile: stripping server-set fields, the
//! content hash that avoids needless writes, objects a cluster makes for itself
//! ([`crate::selection::is_cluster_local`]), returning status, adoption, per-key
//! backoff, waiting for an unreachable side, and the orphan cleaner.
//!
//! To add a profile: implement the four traits (one struct may implement several, as
//! [`crate::profiles::kubestellar`] does, when they share state), build a [`Profile`] and
//! pass it in [`crate::SyncerOptions::profile`]. Keep the mapping a pure function of keys
//! (both ways) so it is unit-tested without a server; the tests at the bottom of this
//! file prove the seam with a namespace-prefixing mapping.

use std::sync::Arc;

use kube::core::ApiResource;
use serde_json::Value;

use crate::engine::raw::RawObject;
use crate::engine::{Engine, ObjectRef};
use crate::selection::{Direction, DiscoveredResource, Resolution, ResourceId, WatchTarget};
use crate::side::Side;
use crate::transform::ObjectType;

/// A resource type on one side: what the engine lists, watches and writes there.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceType {
    /// Group, version, plural and scope.
    pub id: ResourceId,
    /// The kind of its objects.
    pub kind: String,
}

impl ResourceType {
    /// For `kube::Api<..>` over any type.
    pub fn api_resource(&self) -> ApiResource {
        ApiResource {
            group: self.id.group.clone(),
            version: self.id.version.clone(),
            api_version: self.id.api_version(),
            kind: self.kind.clone(),
            plural: self.id.resource.clone(),
        }
    }

    /// `apiVersion` and `kind` of its objects.
    pub fn object_type(&self) -> ObjectType {
        ObjectType::new(&self.id.api_version(), &self.kind)
    }
}

impl From<&WatchTarget> for ResourceType {
    fn from(target: &WatchTarget) -> Self {
        ResourceType {
            id: target.id.clone(),
            kind: target.kind.clone(),
        }
    }
}

/// The source-side resource types of each direction, resolved against discovery.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Upstream types whose objects go down.
    pub downsync: Resolution,
    /// Downstream types whose objects go up.
    pub upsync: Resolution,
}

/// Which objects go where.
pub trait Selection: Send + Sync {
    /// Whether the configuration has been read at least once. Until then nothing is
    /// resolved and the initial sync is not done.
    fn is_loaded(&self) -> bool;

    /// A number that changes whenever the selection does (the resolver then reconciles
    /// every key again).
    fn revision(&self) -> u64;

    /// The resource types to watch, each on its source side: downsync types among
    /// `upstream`'s discovery, upsync types among `downstream`'s.
    fn resolve(&self, upstream: &[DiscoveredResource], downstream: &[DiscoveredResource]) -> Plan;

    /// Whether the source object `obj` (key `source`, of `target`, which names the
    /// direction) is wanted on the other side.
    fn wants(&self, target: &WatchTarget, source: &ObjectRef, obj: &Value) -> bool;

    /// Whether the upstream Namespace object `namespace` is itself downsynced: its own
    /// flow then makes the destination namespace (marked), and a copy waiting for it
    /// does not create a plain one.
    fn copies_namespace(&self, namespace: &str) -> bool;

    /// Whether `obj` (named `name`, of `id`) is one the cluster makes for itself and is
    /// never copied ([`crate::selection::is_cluster_local`] unless a profile renames or
    /// rewrites such objects, as kcp TMC does with `kube-root-ca.crt`).
    fn is_cluster_local(&self, id: &ResourceId, name: &str, obj: &Value) -> bool {
        crate::selection::is_cluster_local(id, name, obj)
    }
}

/// Where copies land: types and keys on the destination side.
pub trait Mapping: Send + Sync {
    /// The destination resource type of the flow whose source type is `target`.
    fn dest_type(&self, target: &WatchTarget) -> ResourceType;

    /// The destination key of the source object `source`. Total: every source has one.
    fn dest_ref(&self, target: &WatchTarget, source: &ObjectRef) -> ObjectRef;

    /// The source key of the destination object `dest`, the inverse of
    /// [`Mapping::dest_ref`]; `None` if `dest` cannot be any source's copy (it is then
    /// reconciled as a copy without a source: deleted if this syncer owns it).
    fn source_ref(&self, target: &WatchTarget, dest: &ObjectRef) -> Option<ObjectRef>;

    /// Changes the copy of `source` (key `source_key`) further, once server fields are
    /// stripped and name and namespace mapped, before it is marked: kcp TMC's
    /// mutators. Nothing by default.
    fn transform(&self, _target: &WatchTarget, _source_key: &ObjectRef, _source: &Value, _copy: &mut Value) {}

    /// The status to write back to the source `source` (key `source_key`) from its copy
    /// `copy`: the copy's non-empty `status` by default; api-syncagent applies its
    /// status mutations first.
    fn returned_status(
        &self,
        _target: &WatchTarget,
        _source_key: &ObjectRef,
        _source: &Value,
        copy: &Value,
    ) -> Option<Value> {
        crate::transform::status_for_upstream(copy)
    }

    /// Work that must be done before the source `source` (key `source_key`), whose copy
    /// is gone, is released (api-syncagent: deleting the copies of its related
    /// objects). Resolves to `true` once done; `false` asks to be called again shortly.
    fn before_release(
        &self,
        _target: &WatchTarget,
        _source_key: &ObjectRef,
        _source: &Value,
    ) -> futures::future::BoxFuture<'static, bool> {
        Box::pin(async { true })
    }

    /// What this syncer last wrote as the copy of `source_key` (its content fields),
    /// when the profile keeps it (api-syncagent's per-object state): updates are then
    /// three-way merges that keep what the destination's controllers set. `None` (the
    /// default): a plain update of the fields the syncer manages.
    fn last_known(
        &self,
        _target: &WatchTarget,
        _source_key: &ObjectRef,
    ) -> futures::future::BoxFuture<'static, Option<Value>> {
        Box::pin(async { None })
    }

    /// Whether a last-known state of `source_key`'s copy is recorded (what
    /// [`Mapping::last_known`] would find, without cloning it). By default, whether
    /// `last_known` finds one.
    fn has_last_known(
        &self,
        target: &WatchTarget,
        source_key: &ObjectRef,
    ) -> futures::future::BoxFuture<'static, bool> {
        let state = self.last_known(target, source_key);
        Box::pin(async move { state.await.is_some() })
    }

    /// Whether this profile keeps a last-known state of its copies (see
    /// [`Mapping::last_known`]). No by default.
    fn keeps_last_known(&self) -> bool {
        false
    }

    /// Records `desired` as what was just written as the copy of `source_key` (see
    /// [`Mapping::last_known`]). Nothing by default.
    fn remember(
        &self,
        _target: &WatchTarget,
        _source_key: &ObjectRef,
        _desired: &Value,
    ) -> futures::future::BoxFuture<'static, ()> {
        Box::pin(async {})
    }

    /// Whether the copy's status goes back to the source of the flow `target` (when
    /// the engine returns status at all); `status_subresource`: the upstream resource
    /// has a `/status` subresource. Always by default; api-syncagent only with one.
    fn returns_status(&self, _target: &WatchTarget, _status_subresource: bool) -> bool {
        true
    }

    /// The annotation of the source `source` that the returned status goes into (as
    /// JSON text) instead of its `status`, if any: kcp TMC's per-SyncTarget
    /// `experimental.status.workload.kcp.io/<key>` while several SyncTargets sync the
    /// source, so their syncers do not overwrite each other's reports (kcp promotes a
    /// status to the object only when one target syncs it). `None` by default.
    fn status_annotation(&self, _target: &WatchTarget, _source: &Value) -> Option<String> {
        None
    }

    /// Whether a downsynced copy whose source is gone (or no longer selected) is
    /// deleted. Always by default; KubeStellar's SyncerConfig can turn it off
    /// (`propagateDeletion: false`), leaving such copies in the cluster.
    fn propagates_deletion(&self) -> bool {
        true
    }

    /// The Namespace a copy of `source_key` must land in when the profile owns its
    /// destination namespaces (kcp TMC: `kcp-<hash>` carrying the namespace locator),
    /// `dest_namespace` being its name: such a namespace is created like this when
    /// missing, and an existing one whose annotations differ from these is a namespace
    /// collision, never written into. `None` (the default): any namespace of that name
    /// will do, and a missing one is created plain.
    fn dest_namespace(
        &self,
        _target: &WatchTarget,
        _source_key: &ObjectRef,
        _dest_namespace: &str,
    ) -> Option<Value> {
        None
    }

    /// For a cluster-scoped copy of `source_key` (not a Namespace): the annotations an
    /// existing destination object of that name must carry to be that copy (kcp TMC: a
    /// PersistentVolume's `kcp.io/namespace-locator`, naming the workspace it belongs
    /// to). An existing object without them is a collision and is never written over.
    /// `None` (the default): no check.
    fn dest_claim(&self, _target: &WatchTarget, _source_key: &ObjectRef) -> Option<Value> {
        None
    }

    /// Sees every object of the flow `target` as it arrives on `side` (key `key`),
    /// before its queue key is worked out: a profile whose keys depend on something only
    /// the object says learns it here (kcp TMC: which workspace a PersistentVolume
    /// belongs to, from its locator annotation). Nothing by default.
    fn learn(&self, _target: &WatchTarget, _side: Side, _key: &ObjectRef, _obj: &RawObject) {}

    /// The copy of the source `source_key` (a downsync) was just brought in line with
    /// it: a profile with work that follows each object (api-syncagent: its related
    /// objects) queues it here. Nothing by default.
    fn copy_synced(&self, _target: &WatchTarget, _source_key: &ObjectRef) {}
}

/// How a copy records that this syncer made it.
pub trait Marks: Send + Sync {
    /// A label selector matching every copy this syncer made on `side`. Copies are
    /// watched and listed with it, so the server does the filtering.
    fn copy_selector(&self, side: Side) -> String;

    /// Marks `copy` (server fields stripped, type and key mapped) as this syncer's copy
    /// travelling in `direction`.
    fn mark(&self, copy: &mut Value, direction: Direction);

    /// Whether `obj` is a copy this syncer made, either way (a copy is never copied
    /// back, and only a copy is updated or deleted without adopting it first).
    fn is_own_copy(&self, obj: &Value) -> bool;

    /// Whether `obj`, listed on `side` with [`Marks::copy_selector`] (metadata only,
    /// `kind` set), is a copy this syncer made *for that side* which may be deleted
    /// once its resource type is no longer synced.
    fn is_orphaned_copy(&self, obj: &Value, side: Side) -> bool;

    /// Whether the copy of `obj` (a source, or a copy that inherited its metadata) may
    /// be created but never updated or deleted.
    fn is_create_only(&self, obj: &Value, direction: Direction) -> bool;

    /// The merge patch that removes every mark, leaving a plain object nobody owns.
    fn release_patch(&self) -> Value;

    /// How a copy in `direction` is marked, for messages (`edge.kubestellar.io/downsynced`).
    fn describe(&self, direction: Direction) -> String;

    /// A finalizer this syncer puts on upstream objects it is responsible for (kcp TMC:
    /// `workload.kcp.io/syncer-<key>`): on a downsynced source before its copy is made,
    /// removed only once the copy is gone; on an upsynced copy, removed when the copy
    /// is deleted. `None` (the default): no finalizers.
    fn finalizer(&self) -> Option<String> {
        None
    }

    /// The merge patch that releases an upstream source whose copy is gone (its
    /// [`Marks::finalizer`] is already left out of `finalizers`): kcp TMC also drops the
    /// deletion annotation and the state label. `remaining` is the finalizer list to keep.
    fn release_source_patch(&self, remaining: Vec<Value>) -> Value {
        serde_json::json!({ "metadata": { "finalizers": remaining } })
    }

    /// The field manager of server-side apply, if downsynced copies are written that
    /// way (kcp TMC: `syncer`, forced); `None` (the default): create and update.
    fn apply_manager(&self) -> Option<&str> {
        None
    }

    /// The merge patch recording `drift` (a copy restored after someone changed it in
    /// the cluster) on its upstream source: kcp TMC's per-SyncTarget annotation. `None`
    /// (the default): the profile reports drifts elsewhere (KubeStellar: on its
    /// SyncerConfigs, from [`crate::engine::Engine::drifts`]).
    fn drift_mark(&self, _drift: &ferry_api::drift::Drift) -> Option<Value> {
        None
    }
}

/// Where the selection comes from, and where the syncer reports back.
pub trait ConfigSource: Send + Sync {
    /// Starts the tasks that read the configuration (and write status back); they run
    /// until aborted.
    fn start(self: Arc<Self>, engine: &Arc<Engine>) -> Vec<tokio::task::JoinHandle<()>>;
}

/// Everything that makes one kind of syncer different from another.
#[derive(Clone)]
pub struct Profile {
    /// The profile's name, for logs (`kubestellar`).
    pub name: &'static str,
    /// Which objects go where.
    pub selection: Arc<dyn Selection>,
    /// Where copies land.
    pub mapping: Arc<dyn Mapping>,
    /// How copies are marked.
    pub marks: Arc<dyn Marks>,
    /// Where the selection comes from.
    pub config: Arc<dyn ConfigSource>,
    /// Whether the upstream spans logical clusters (kcp TMC's syncer virtual workspace):
    /// upstream objects are then watched under `/clusters/*`, keyed with their
    /// `kcp.io/cluster` (see [`ObjectRef::cluster`]) and written under `/clusters/<c>`.
    pub upstream_clusters: bool,
    /// When a destination Namespace this syncer made is no longer wanted, how long it
    /// is kept before it is deleted, and then only if no copy of this syncer is in it
    /// (kcp TMC's `--downstream-namespace-clean-delay`, after kcp#2041). `None`: it is
    /// deleted (or released while it holds wanted copies) at once.
    pub namespace_clean_delay: Option<std::time::Duration>,
    /// Whether Events can be posted on upstream objects (a mailbox workspace; an
    /// APIExport's virtual workspace whose export claims events; Ferry's syncer
    /// virtual workspace, about the objects scheduled to its SyncTarget), so a copy
    /// that fails says so on the object itself (`CopyRefused` for a refusal).
    pub upstream_takes_events: bool,
    /// How many objects each of `--workers` keeps in flight. 1 where an object's sync
    /// is one write; kcp's api-syncagent makes two in a row on two servers (the
    /// finalizer on kcp, then the copy on the service cluster), so with 2 one
    /// object's copy is written while the next one's finalizer is, and neither
    /// server waits for the other.
    pub objects_per_worker: usize,
}

impl std::fmt::Debug for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profile").field("name", &self.name).finish()
    }
}

/// The mapping that keeps every type and key as it is (KubeStellar without conversions).
pub struct Identity;

impl Mapping for Identity {
    fn dest_type(&self, target: &WatchTarget) -> ResourceType {
        ResourceType::from(target)
    }

    fn dest_ref(&self, _: &WatchTarget, source: &ObjectRef) -> ObjectRef {
        source.clone()
    }

    fn source_ref(&self, _: &WatchTarget, dest: &ObjectRef) -> Option<ObjectRef> {
        Some(dest.clone())
    }
}

#[cfg(test)]
mod tests;
