//! The kcp api-syncagent profile: a service cluster's CRDs published into kcp as one
//! APIExport, and the objects every bound workspace makes of them synced down.
//!
//! - Upstream: the APIExport virtual workspace (the endpoint slice's
//!   `status.endpoints[0].url`), where `/clusters/*` lists and watches the exported
//!   resources of every bound workspace and writes go to `/clusters/<cluster>/...`.
//! - Selection: one downsync flow per valid PublishedResource (see [`publish`]): the
//!   projected resource upstream, the CRD's storage version on the service cluster.
//! - Mapping: the reference's default naming: namespace `$remoteClusterName` (the
//!   logical cluster), name `<sha3short(namespace)>-<sha3short(name)>`; copies carry the
//!   `syncagent.kcp.io/remote-object-*` labels (cluster and hashes) and annotations
//!   (namespace and name).
//! - Marks: label `syncagent.kcp.io/agent-name=<agent>` on copies, the finalizer
//!   `syncagent.kcp.io/cleanup` on sources (so a source's deletion waits for its copy's),
//!   status back through the upstream `/status` when the resource has one.
//! - Configuration source ([`publish`]): the PublishedResources on the service cluster,
//!   turned into APIResourceSchemas and merged into the APIExport.

pub mod filter;
pub mod mutation;
pub mod naming;
pub mod publish;
pub mod related;
pub mod related_watch;
pub mod state;
pub mod templating;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::RwLock;
use serde_json::{json, Value};

use ferry_api::syncagent::PublishedResourceSpec;
use ferry_api::well_known::{
    SYNCAGENT_AGENT_NAME_LABEL, SYNCAGENT_CLEANUP_FINALIZER, SYNCAGENT_PUBLISHED_RESOURCE_ANNOTATION,
    SYNCAGENT_REMOTE_CLUSTER_LABEL, SYNCAGENT_REMOTE_NAMESPACE_ANNOTATION,
    SYNCAGENT_REMOTE_NAMESPACE_HASH_LABEL, SYNCAGENT_REMOTE_NAME_ANNOTATION,
    SYNCAGENT_REMOTE_NAME_HASH_LABEL, SYNCAGENT_REMOTE_WORKSPACE_PATH_ANNOTATION,
};

use crate::engine::events::{self, EventType};
use crate::engine::{Engine, ObjectRef};
use crate::metrics::RelatedPass;
use crate::profile::{Mapping, Marks, Plan, Profile, ResourceType, Selection};
use crate::selection::{
    Direction, DiscoveredResource, Resolution, ResourceId, ResourcePattern, Scope, Unresolved,
    UnresolvedReason, WatchTarget,
};
use crate::side::Side;

pub use publish::{start, EngineTuning, RunningAgent, SyncAgentOptions};
pub use templating::sha3sum;

/// The first 20 hex characters of [`sha3sum`] (the reference's `sha3short`).
pub fn sha3short(input: &str) -> String {
    sha3sum(input)[..20].to_string()
}

/// The reference's default local name of the kcp object `namespace/name`
/// (`{{ .Object.metadata.namespace | sha3short }}-{{ .Object.metadata.name | sha3short }}`).
pub fn default_name(namespace: &str, name: &str) -> String {
    format!("{}-{}", sha3short(namespace), sha3short(name))
}

/// One PublishedResource as the sync flow needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct Published {
    /// The PublishedResource's name.
    pub name: String,
    /// The projected resource in kcp (group, version, plural, scope) and its kind.
    pub remote: ResourceType,
    /// The CRD's resource on the service cluster and its kind.
    pub local: ResourceType,
    /// Its spec (naming, filters, mutations, related resources).
    pub spec: Arc<PublishedResourceSpec>,
}

/// `(group, resource)` of the kcp resource, and an object key.
type Slot = (String, String, ObjectRef);

/// A kcp object that is not synced because of a problem the user must fix.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Blocked {
    /// The PublishedResource.
    published: String,
    /// CamelCase reason (`InvalidNaming`, `NameCollision`).
    reason: &'static str,
    /// What is wrong and what to do.
    message: String,
}

/// The profile's state: what is published, and the names copies were given.
pub struct SyncAgent {
    agent_name: String,
    published: RwLock<Vec<Published>>,
    /// Local copy key → the kcp object it is (or will be) the copy of: the claim on
    /// that local name.
    sources: RwLock<HashMap<Slot, ObjectRef>>,
    /// kcp object → its local copy key, once named (names are not recomputed, so a
    /// label a template reads may change without moving the copy).
    dests: RwLock<HashMap<Slot, ObjectRef>>,
    /// kcp objects whose copies under an earlier PublishedResource's names are still
    /// there, with those names: deleted once the copy under the current name exists.
    superseded: RwLock<HashMap<Slot, std::collections::BTreeSet<ObjectRef>>>,
    /// The PublishedResource that last published each kcp `(group, resource)`.
    last_publisher: RwLock<HashMap<(String, String), String>>,
    /// kcp objects that are not synced, and why (reported once per message).
    blocked: RwLock<HashMap<Slot, Blocked>>,
    /// The last mutation failure reported per kcp object.
    mutation_errors: RwLock<HashMap<Slot, String>>,
    /// The last related-resource failure reported per kcp object.
    related_errors: RwLock<HashMap<Slot, String>>,
    /// Which origin objects each primary's related resources look for.
    interests: related_watch::InterestIndex,
    /// Primaries whose related objects are to be synced.
    related_queue: related_watch::RelatedQueue,
    /// Workspace paths of logical clusters (`kcp.io/path` of their LogicalCluster),
    /// once read through the virtual workspace.
    paths: RwLock<HashMap<String, String>>,
    /// Clusters whose path is being read.
    path_reads: parking_lot::Mutex<std::collections::HashSet<String>>,
    /// kcp objects whose naming waits for their workspace path.
    waiting: RwLock<std::collections::HashSet<Slot>>,
    /// Labels of the kcp Namespaces, for `spec.filter.namespace`.
    namespaces: Arc<filter::NamespaceLabels>,
    loaded: AtomicBool,
    revision: AtomicU64,
    engine: OnceLock<Weak<Engine>>,
    /// This state itself, for background tasks.
    self_ref: OnceLock<Weak<SyncAgent>>,
    /// Last-known states (set when the agent starts).
    state: OnceLock<Arc<state::StateStore>>,
    publisher: OnceLock<Arc<publish::Publisher>>,
}

impl SyncAgent {
    /// The state of agent `agent_name`, nothing published yet.
    pub fn new(agent_name: &str) -> Arc<SyncAgent> {
        let agent = Arc::new(SyncAgent {
            agent_name: agent_name.to_string(),
            published: RwLock::default(),
            sources: RwLock::default(),
            dests: RwLock::default(),
            superseded: RwLock::default(),
            last_publisher: RwLock::default(),
            blocked: RwLock::default(),
            mutation_errors: RwLock::default(),
            related_errors: RwLock::default(),
            interests: related_watch::InterestIndex::default(),
            related_queue: related_watch::RelatedQueue::default(),
            paths: RwLock::default(),
            path_reads: parking_lot::Mutex::default(),
            waiting: RwLock::default(),
            namespaces: Arc::default(),
            loaded: AtomicBool::new(false),
            revision: AtomicU64::new(0),
            engine: OnceLock::new(),
            self_ref: OnceLock::new(),
            state: OnceLock::new(),
            publisher: OnceLock::new(),
        });
        let _ = agent.self_ref.set(Arc::downgrade(&agent));
        agent
    }

    /// The profile over this state.
    pub fn profile(self: &Arc<Self>) -> Profile {
        Profile {
            name: "syncagent",
            selection: self.clone(),
            mapping: self.clone(),
            marks: self.clone(),
            config: self.clone(),
            upstream_clusters: true,
            namespace_clean_delay: None,
            upstream_takes_events: true,
            objects_per_worker: 2,
        }
    }

    /// Replaces what is published; returns whether it changed. Names already given
    /// are forgotten for PublishedResources whose spec changed.
    pub fn set_published(&self, mut published: Vec<Published>) -> bool {
        published.sort_by(|a, b| a.name.cmp(&b.name));
        let first = !self.loaded.swap(true, Ordering::Relaxed);
        let mut current = self.published.write();
        if *current == published && !first {
            return false;
        }
        let changed: Vec<(String, String)> = published
            .iter()
            .filter(|p| !current.contains(p))
            .map(|p| (p.remote.id.group.clone(), p.remote.id.resource.clone()))
            .collect();
        if !changed.is_empty() {
            let touched = |s: &Slot| changed.iter().any(|(g, r)| *g == s.0 && *r == s.1);
            self.dests.write().retain(|s, _| !touched(s));
            self.blocked.write().retain(|s, _| !touched(s));
        }
        // What primaries of resources no longer related look for is forgotten.
        let related: Vec<(String, String)> = published
            .iter()
            .filter(|p| !p.spec.related.is_empty())
            .map(|p| (p.remote.id.group.clone(), p.remote.id.resource.clone()))
            .collect();
        self.interests
            .retain(|s| related.iter().any(|(g, r)| *g == s.0 && *r == s.1));
        let mut last = self.last_publisher.write();
        for p in &published {
            last.insert(
                (p.remote.id.group.clone(), p.remote.id.resource.clone()),
                p.name.clone(),
            );
        }
        drop(last);
        *current = published;
        self.revision.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// What is published.
    pub fn published(&self) -> Vec<Published> {
        self.published.read().clone()
    }

    /// The problems that keep objects from syncing, by PublishedResource: the
    /// reason of the first, and one message per object (naming collisions
    /// first, then refused copies, each in a stable order).
    pub fn problems(&self) -> BTreeMap<String, (&'static str, Vec<String>)> {
        let mut out: BTreeMap<String, (&'static str, Vec<String>)> = BTreeMap::new();
        let mut blocked: Vec<Blocked> = self.blocked.read().values().cloned().collect();
        blocked.sort_by(|a, b| a.message.cmp(&b.message));
        for b in blocked {
            out.entry(b.published)
                .or_insert((b.reason, Vec::new()))
                .1
                .push(b.message);
        }
        // Copies the service cluster (or kcp, for status) refused, by the
        // PublishedResource of their kcp resource.
        let refused = self.engine().map(|e| e.refusals.all()).unwrap_or_default();
        let published = self.published.read();
        for r in refused {
            let Some(p) = published.iter().find(|p| {
                let group = if p.remote.id.group.is_empty() {
                    "core"
                } else {
                    p.remote.id.group.as_str()
                };
                format!("{group}/{}", p.remote.id.resource) == r.resource
            }) else {
                continue;
            };
            let object = match (&r.cluster, r.namespace.is_empty()) {
                (Some(c), true) => format!("{c}|{}", r.name),
                (Some(c), false) => format!("{c}|{}/{}", r.namespace, r.name),
                (None, true) => r.name.clone(),
                (None, false) => format!("{}/{}", r.namespace, r.name),
            };
            let by = match r.side {
                Side::Downstream => "the service cluster",
                Side::Upstream => "kcp",
            };
            out.entry(p.name.clone())
                .or_insert(("CopyRefused", Vec::new()))
                .1
                .push(format!("{object} was refused by {by}: {}", r.message));
        }
        out
    }

    fn find(&self, id: &ResourceId) -> Option<Published> {
        self.published
            .read()
            .iter()
            .find(|p| p.remote.id.group == id.group && p.remote.id.resource == id.resource)
            .cloned()
    }

    fn engine(&self) -> Option<Arc<Engine>> {
        self.engine.get()?.upgrade()
    }

    fn flow_of(&self, target: &WatchTarget) -> Option<Arc<crate::engine::flow::Flow>> {
        let engine = self.engine()?;
        engine.flows().into_iter().find(|f| f.target == *target)
    }

    /// The kcp object `source` as last seen.
    fn source_object(&self, target: &WatchTarget, source: &ObjectRef) -> Option<Arc<Value>> {
        self.flow_of(target)?.sources.get(source)
    }

    /// The kcp object a local copy belongs to, from its labels and annotations.
    fn source_from_copy(&self, target: &WatchTarget, dest: &ObjectRef) -> Option<ObjectRef> {
        let flow = self.flow_of(target)?;
        let copy = flow.copies.get(dest)?;
        let meta = &copy["metadata"];
        let cluster = meta["labels"][SYNCAGENT_REMOTE_CLUSTER_LABEL].as_str()?;
        let name = meta["annotations"][SYNCAGENT_REMOTE_NAME_ANNOTATION].as_str()?;
        let namespace = meta["annotations"][SYNCAGENT_REMOTE_NAMESPACE_ANNOTATION]
            .as_str()
            .filter(|ns| !ns.is_empty());
        Some(ObjectRef {
            cluster: Some(cluster.into()),
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
        })
    }

    /// The key given to an object that is not synced: in its own cluster's namespace,
    /// a name no naming template of the agent produces (`ferry-unmapped-<hash>`), so it
    /// never meets a real copy.
    fn unmapped(&self, source: &ObjectRef, namespaced: bool) -> ObjectRef {
        let hash = sha3short(&source.to_string());
        let namespace = namespaced.then(|| source.cluster().to_string());
        ObjectRef::new(namespace.as_deref(), &format!("ferry-unmapped-{hash}"))
    }

    /// Records that `source` is not synced (Warning Events on it and on `other`, the
    /// object it collides with, once per message).
    fn block(
        &self,
        target: &WatchTarget,
        source: &ObjectRef,
        published: &str,
        reason: &'static str,
        message: String,
        other: Option<&ObjectRef>,
    ) {
        let slot = (
            target.id.group.clone(),
            target.id.resource.clone(),
            source.clone(),
        );
        let blocked = Blocked {
            published: published.to_string(),
            reason,
            message: message.clone(),
        };
        if self.blocked.read().get(&slot) == Some(&blocked) {
            return;
        }
        tracing::warn!(object = %source, published_resource = published, reason, "{message}");
        self.blocked.write().insert(slot, blocked);
        for obj in std::iter::once(source).chain(other) {
            self.post_event(target, obj, reason, &message);
        }
    }

    /// Posts a Warning Event on the kcp object `obj` (the export claims events).
    fn post_event(&self, target: &WatchTarget, obj: &ObjectRef, reason: &str, message: &str) {
        let (Some(engine), Some(flow)) = (self.engine(), self.flow_of(target)) else {
            return;
        };
        let body = flow
            .sources
            .get(obj)
            .map(|o| (*o).clone())
            .unwrap_or_else(|| json!({ "metadata": { "name": obj.name, "namespace": obj.namespace } }));
        events::post(
            engine.up.client_in(obj.cluster.as_deref()),
            &body,
            flow.object_type(Side::Upstream),
            EventType::Warning,
            reason,
            message.to_string(),
            &engine.name,
        );
    }

    /// Reports a failed mutation step once per message (a Warning Event on the kcp
    /// object); the steps before it are applied, the ones after it are not.
    fn mutation_outcome(
        &self,
        target: &WatchTarget,
        source: &ObjectRef,
        result: Result<(), mutation::MutationError>,
    ) {
        let slot = (
            target.id.group.clone(),
            target.id.resource.clone(),
            source.clone(),
        );
        match result {
            Ok(()) => {
                if !self.mutation_errors.read().is_empty() {
                    self.mutation_errors.write().remove(&slot);
                }
            }
            Err(e) => {
                let message = format!("mutating {source} failed: {e}");
                if self.mutation_errors.read().get(&slot) == Some(&message) {
                    return;
                }
                tracing::warn!(object = %source, "{message}");
                self.mutation_errors.write().insert(slot, message.clone());
                self.post_event(target, source, "MutationFailed", &message);
            }
        }
    }

    /// The downsync flow of `p`, if running.
    fn flow_of_published(&self, p: &Published) -> Option<Arc<crate::engine::flow::Flow>> {
        self.engine()?.flows().into_iter().find(|f| {
            f.target.direction == Direction::Downsync
                && f.target.id.group == p.remote.id.group
                && f.target.id.resource == p.remote.id.resource
        })
    }

    /// Queues every synced primary that has related resources: the safety resync, and
    /// what follows a watch's relist.
    fn queue_all_related(&self, only: Option<&related_watch::OriginResource>) {
        for p in self.published() {
            let names = |r: &related_watch::OriginResource| {
                related_watch::wanted_watches(std::slice::from_ref(&p)).contains(r)
            };
            if p.spec.related.is_empty() || only.is_some_and(|r| !names(r)) {
                continue;
            }
            let Some(flow) = self.flow_of_published(&p) else {
                continue;
            };
            for key in flow.sources.keys() {
                self.related_queue.add_background((
                    p.remote.id.group.clone(),
                    p.remote.id.resource.clone(),
                    key,
                ));
            }
        }
    }

    /// An origin object of `res` changed (or went): queues the primaries it concerns.
    fn related_event(&self, res: &related_watch::OriginResource, obj: &Value) {
        let cluster = obj["metadata"]["annotations"][ferry_api::well_known::KCP_CLUSTER_ANNOTATION]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let origin = if res.service {
            related::Origin::Service
        } else {
            related::Origin::Kcp(cluster.clone())
        };
        let mut slots = self.interests.affected(&origin, &res.group, &res.resource, obj);
        for p in self.published() {
            let watched: Vec<_> = p
                .spec
                .related
                .iter()
                .filter(|spec| {
                    let (g, _, r) = related::origin_resource(spec);
                    (spec.origin == "service") == res.service && g == res.group && r == res.resource
                })
                .filter_map(|spec| spec.watch.clone())
                .collect();
            if watched.is_empty() {
                continue;
            }
            let Some(flow) = self.flow_of_published(&p) else {
                continue;
            };
            let slot = |source: ObjectRef| (p.remote.id.group.clone(), p.remote.id.resource.clone(), source);
            // The primary on the origin side: the kcp object, or its copy.
            let primary = if res.service { &p.local } else { &p.remote };
            let store = if res.service { &flow.copies } else { &flow.sources };
            for watch in watched {
                // Candidates for `bySelector`: the primaries in the event's cluster.
                let candidates = store
                    .keys()
                    .into_iter()
                    .filter(|k| res.service || k.cluster() == cluster)
                    .filter_map(|k| store.get(&k).map(|o| (k, o)));
                let origin_cluster = (!res.service).then_some(cluster.as_str());
                for at in related_watch::watched_primaries(&watch, primary, origin_cluster, obj, candidates) {
                    let source = if res.service {
                        self.source_ref(&flow.target, &at)
                    } else {
                        Some(at)
                    };
                    slots.extend(source.map(slot));
                }
            }
        }
        for slot in slots {
            self.related_queue.add(slot);
        }
    }

    /// Works the related queue, `RELATED_WORKERS` primaries at a time, until the agent
    /// goes.
    async fn related_workers(weak: Weak<SyncAgent>) {
        const RELATED_WORKERS: usize = 4;
        let workers = (0..RELATED_WORKERS).map(|_| Self::related_worker(weak.clone()));
        futures::future::join_all(workers).await;
    }

    async fn related_worker(weak: Weak<SyncAgent>) {
        loop {
            let Some(agent) = weak.upgrade() else { return };
            let slot = tokio::select! {
                slot = agent.related_queue.next() => slot,
                // Let go of the agent now and then, so that it can be dropped.
                _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => continue,
            };
            if agent.sync_related(&slot).await {
                agent.related_queue.succeeded(&slot);
            } else {
                let delay = agent.related_queue.failed(&slot);
                let weak = Arc::downgrade(&agent);
                let again = slot.clone();
                crate::spawn(async move {
                    tokio::time::sleep(delay).await;
                    if let Some(agent) = weak.upgrade() {
                        agent.related_queue.add(again);
                    }
                });
            }
            agent.related_queue.done(&slot);
        }
    }

    /// Syncs the related objects of the primary `slot` (see [`related`]). Returns
    /// `false` when something failed and it should be tried again.
    async fn sync_related(&self, slot: &Slot) -> bool {
        let Some(engine) = self.engine() else {
            return true;
        };
        let (group, resource, key) = slot;
        let Some(p) = self
            .published()
            .into_iter()
            .find(|p| p.remote.id.group == *group && p.remote.id.resource == *resource)
        else {
            self.interests.forget(slot);
            return true;
        };
        if p.spec.related.is_empty() {
            self.interests.forget(slot);
            return true;
        }
        let Some(flow) = self.flow_of_published(&p) else {
            return true;
        };
        let Some(remote) = flow.sources.get(key) else {
            // Gone: its copies went with it (see `before_release`).
            self.interests.forget(slot);
            return true;
        };
        let deleting = !remote["metadata"]["deletionTimestamp"].is_null();
        if deleting || !self.wants(&flow.target, key, &remote) {
            // Its related objects no longer follow it (a change of it queues it again).
            self.interests.forget(slot);
            return true;
        }
        // Not named yet: the engine's reconcile of it queues it again.
        let Some(dest) = self.dests.read().get(slot).cloned() else {
            return true;
        };
        let res = p.local.api_resource();
        let local_api: kube::Api<kube::api::DynamicObject> = match &dest.namespace {
            Some(ns) => kube::Api::namespaced_with(engine.down.client.clone(), ns, &res),
            None => kube::Api::all_with(engine.down.client.clone(), &res),
        };
        let local = match local_api.get_opt(&dest.name).await {
            Ok(Some(local)) => serde_json::to_value(local).unwrap_or_default(),
            // The copy is not made yet: its creation queues this again.
            Ok(None) => return true,
            Err(e) => {
                tracing::debug!(object = %key, "reading the local copy for related objects: {e}");
                return false;
            }
        };
        let sides = related::Sides {
            service: engine.down.client.clone(),
            kcp: engine.up.client_in(key.cluster.as_deref()),
        };
        let primaries = related::Primaries {
            remote: &remote,
            local: &local,
            cluster: key.cluster(),
        };
        let mut annotations = BTreeMap::new();
        let mut failure = None;
        let mut interests = vec![];
        let mut missing = 0;
        for spec in &p.spec.related {
            match related::sync(spec, &primaries, &sides, &mut interests, &mut missing).await {
                Ok(resolved) if spec.origin == "service" => {
                    annotations.extend(related::annotations(spec, &resolved));
                }
                Ok(_) => {}
                Err(e) => {
                    failure.get_or_insert(format!(
                        "related resource {:?} of {key} (PublishedResource {}): {e}",
                        spec.identifier, p.name
                    ));
                }
            }
        }
        self.interests.set(slot, interests);
        if let Some(patch) = related::annotation_patch(&remote, &annotations) {
            let api: kube::Api<kube::api::DynamicObject> = match &key.namespace {
                Some(ns) => kube::Api::namespaced_with(sides.kcp.clone(), ns, &p.remote.api_resource()),
                None => kube::Api::all_with(sides.kcp.clone(), &p.remote.api_resource()),
            };
            let params = kube::api::PatchParams::default();
            if let Err(e) = api
                .patch(&key.name, &params, &kube::api::Patch::Merge(&patch))
                .await
            {
                failure.get_or_insert(format!("recording related objects on {key}: {e}"));
            }
        }
        engine.metrics.related_pass(match (&failure, missing) {
            (Some(_), _) => RelatedPass::Failed,
            (None, 0) => RelatedPass::Synced,
            (None, _) => RelatedPass::Waiting,
        });
        match failure {
            None => {
                if !self.related_errors.read().is_empty() {
                    self.related_errors.write().remove(slot);
                }
                true
            }
            Some(message) => {
                if self.related_errors.read().get(slot) != Some(&message) {
                    tracing::warn!(object = %key, "{message}");
                    self.related_errors.write().insert(slot.clone(), message.clone());
                    self.post_event(&flow.target, key, "RelatedResourceFailed", &message);
                }
                false
            }
        }
    }

    /// The workspace path of `cluster`, if known; otherwise it is read in the
    /// background (the export must claim `core.kcp.io/logicalclusters`, which
    /// `enableWorkspacePaths` adds, and the workspace accept it) and every object is
    /// judged again once it is.
    fn workspace_path(&self, cluster: &str) -> Option<String> {
        if let Some(path) = self.paths.read().get(cluster) {
            return Some(path.clone());
        }
        let engine = self.engine()?;
        if !self.path_reads.lock().insert(cluster.to_string()) {
            return None;
        }
        let client = engine.up.client_in(Some(cluster));
        let (cluster, weak) = (cluster.to_string(), Arc::downgrade(&engine));
        let agent = self.self_ref.get().cloned();
        crate::spawn(async move {
            let res = kube::core::ApiResource {
                group: "core.kcp.io".into(),
                version: "v1alpha1".into(),
                api_version: "core.kcp.io/v1alpha1".into(),
                kind: "LogicalCluster".into(),
                plural: "logicalclusters".into(),
            };
            let api: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(client, &res);
            let found = api.get("cluster").await;
            let Some(agent) = agent.and_then(|a| a.upgrade()) else {
                return;
            };
            // A later ask reads again (after a pause, so a refused claim is not hammered).
            let forget = {
                let agent = agent.clone();
                let cluster = cluster.clone();
                move || {
                    crate::spawn(async move {
                        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
                        agent.path_reads.lock().remove(&cluster);
                    });
                }
            };
            let path = found
                .as_ref()
                .ok()
                .and_then(|lc| lc.metadata.annotations.as_ref()?.get("kcp.io/path").cloned());
            match (path, found) {
                (Some(path), _) => {
                    agent.paths.write().insert(cluster.clone(), path);
                    agent.path_reads.lock().remove(&cluster);
                    if let Some(engine) = weak.upgrade() {
                        engine.reconcile_everything();
                    }
                }
                (None, Err(e)) => {
                    tracing::info!(%cluster, "reading the workspace path failed (does the workspace accept the export's logicalclusters claim?): {e}");
                    forget();
                }
                (None, Ok(_)) => forget(),
            }
        });
        None
    }

    /// Whether a published resource filters by namespace labels.
    fn filters_namespaces(&self) -> bool {
        self.published
            .read()
            .iter()
            .any(|p| p.spec.filter.as_ref().is_some_and(|f| f.namespace.is_some()))
    }

    fn is_blocked(&self, target: &WatchTarget, source: &ObjectRef) -> bool {
        let slot = (
            target.id.group.clone(),
            target.id.resource.clone(),
            source.clone(),
        );
        self.blocked.read().contains_key(&slot)
    }

    /// Queues the blocked objects again (a collision ends when the other object goes;
    /// names are worked out when keys are).
    fn retry_blocked(&self) {
        let Some(engine) = self.engine() else {
            return;
        };
        let mut slots: Vec<Slot> = self.blocked.read().keys().cloned().collect();
        slots.extend(self.waiting.read().iter().cloned());
        if slots.is_empty() {
            return;
        }
        for flow in engine.flows() {
            let mapping = &*engine.profile.mapping;
            for slot in &slots {
                let (g, r, source) = slot;
                if flow.target.id.group != *g || flow.target.id.resource != *r {
                    continue;
                }
                if flow.sources.is_synced() && flow.sources.get(source).is_none() {
                    // The object is gone: so is its problem.
                    self.forget(slot);
                    continue;
                }
                engine.queue_after(
                    flow.source_key(mapping, source.clone()),
                    std::time::Duration::ZERO,
                );
            }
        }
    }

    /// Drops what is known about the kcp object of `slot` (it is gone, or released).
    fn forget(&self, slot: &Slot) {
        self.blocked.write().remove(slot);
        self.superseded.write().remove(slot);
        self.waiting.write().remove(slot);
        self.mutation_errors.write().remove(slot);
        self.related_errors.write().remove(slot);
        self.interests.forget(slot);
        if let Some(dest) = self.dests.write().remove(slot) {
            let claim = (slot.0.clone(), slot.1.clone(), dest);
            let mut sources = self.sources.write();
            if sources.get(&claim) == Some(&slot.2) {
                sources.remove(&claim);
            }
        }
    }
}

impl Selection for SyncAgent {
    fn is_loaded(&self) -> bool {
        self.loaded.load(Ordering::Relaxed)
    }

    fn revision(&self) -> u64 {
        self.revision.load(Ordering::Relaxed)
    }

    fn resolve(&self, upstream: &[DiscoveredResource], _downstream: &[DiscoveredResource]) -> Plan {
        let mut downsync = Resolution::default();
        for p in self.published() {
            let id = &p.remote.id;
            let served = upstream.iter().find(|d| {
                d.group == id.group
                    && d.version == id.version
                    && d.resource == id.resource
                    && d.is_watchable()
            });
            match served {
                Some(d) => downsync.targets.push(WatchTarget {
                    id: ResourceId::new(&d.group, &d.version, &d.resource, d.namespaced),
                    kind: d.kind.clone(),
                    direction: Direction::Downsync,
                }),
                // Not discoverable in the virtual workspace yet (no workspace binds the
                // export, or the export does not list the schema yet): resolved again
                // on the next discovery refresh.
                None => downsync.unresolved.push(Unresolved {
                    pattern: ResourcePattern {
                        group: id.group.clone(),
                        version: Some(id.version.clone()),
                        resource: id.resource.clone(),
                        scope: Scope::Any,
                    },
                    reason: UnresolvedReason::NotServed,
                }),
            }
        }
        downsync.targets.sort();
        Plan {
            downsync,
            upsync: Resolution::default(),
        }
    }

    /// Downsync only, what `spec.filter` lets through, and not an object whose naming
    /// failed or collides. While the labels of an object's kcp Namespace are not
    /// known, an existing copy stays and none is made.
    fn wants(&self, target: &WatchTarget, source: &ObjectRef, obj: &Value) -> bool {
        if target.direction != Direction::Downsync || self.is_blocked(target, source) {
            return false;
        }
        let slot = (
            target.id.group.clone(),
            target.id.resource.clone(),
            source.clone(),
        );
        if self.waiting.read().contains(&slot) {
            return false;
        }
        let Some(p) = self.find(&target.id) else {
            return true;
        };
        let filter = p.spec.filter.as_ref();
        let by_namespace = filter.is_some_and(|f| f.namespace.is_some());
        let ns_labels = match (&source.namespace, by_namespace) {
            (Some(ns), true) => Some(self.namespaces.get(source.cluster(), ns)),
            _ => None,
        };
        match filter::judge(filter, obj, ns_labels.as_ref().map(Option::as_ref)) {
            filter::Verdict::Wanted => true,
            filter::Verdict::Unwanted => false,
            filter::Verdict::Unknown => {
                let slot = (
                    target.id.group.clone(),
                    target.id.resource.clone(),
                    source.clone(),
                );
                let dest = self.dests.read().get(&slot).cloned();
                dest.zip(self.flow_of(target))
                    .is_some_and(|(dest, flow)| flow.copies.get(&dest).is_some())
            }
        }
    }

    fn copies_namespace(&self, _: &str) -> bool {
        false
    }

    fn is_cluster_local(&self, _: &ResourceId, _: &str, _: &Value) -> bool {
        false
    }
}

impl Mapping for SyncAgent {
    fn dest_type(&self, target: &WatchTarget) -> ResourceType {
        self.find(&target.id)
            .map(|p| p.local)
            .unwrap_or_else(|| ResourceType::from(target))
    }

    /// The PublishedResource's naming templates over the kcp object (the first name
    /// given is kept). A template that fails or gives an invalid name, or a name another
    /// kcp object's copy already has, leaves the object unsynced: it is blocked (see
    /// [`Selection::wants`]) under a key no copy has, with Events saying why.
    fn dest_ref(&self, target: &WatchTarget, source: &ObjectRef) -> ObjectRef {
        let slot = (
            target.id.group.clone(),
            target.id.resource.clone(),
            source.clone(),
        );
        if let Some(dest) = self.dests.read().get(&slot) {
            return dest.clone();
        }
        let Some(p) = self.find(&target.id) else {
            let name = default_name(source.namespace.as_deref().unwrap_or_default(), &source.name);
            let dest = ObjectRef::new(Some(source.cluster()), &name);
            let claim = (target.id.group.clone(), target.id.resource.clone(), dest.clone());
            self.sources.write().insert(claim, source.clone());
            return dest;
        };
        let namespaced = p.local.id.namespaced;
        let object = self.source_object(target, source).map_or_else(
            || json!({ "metadata": { "name": source.name, "namespace": source.namespace } }),
            |o| (*o).clone(),
        );
        let needs_path = p
            .spec
            .naming
            .as_ref()
            .is_some_and(|n| n.name.contains("ClusterPath") || n.namespace.contains("ClusterPath"));
        let path = if needs_path {
            match self.workspace_path(source.cluster()) {
                Some(path) => path,
                None => {
                    self.waiting.write().insert(slot);
                    return self.unmapped(source, namespaced);
                }
            }
        } else {
            String::new()
        };
        let (namespace, name) = match naming::local_name(
            p.spec.naming.as_ref(),
            &object,
            source.cluster(),
            &path,
            namespaced,
        ) {
            Ok(found) => found,
            Err(e) => {
                let message = format!(
                    "PublishedResource {}: {e}, so {source} is not synced; fix the template",
                    p.name
                );
                self.block(target, source, &p.name, "InvalidNaming", message, None);
                return self.unmapped(source, namespaced);
            }
        };
        let dest = ObjectRef::new(namespace.as_deref(), &name);
        let claim = (target.id.group.clone(), target.id.resource.clone(), dest.clone());
        let holder = self
            .sources
            .read()
            .get(&claim)
            .cloned()
            .or_else(|| self.source_from_copy(target, &dest));
        if let Some(other) = holder.filter(|o| o != source) {
            let alive = self.source_object(target, &other).is_some()
                || self.flow_of(target).is_none_or(|f| !f.sources.is_synced());
            if alive {
                let message = format!(
                    "{source} and {other} both map to the local name {dest} (PublishedResource {}, spec.naming); {other} keeps it and {source} is not synced until the naming tells them apart or {other} is gone",
                    p.name
                );
                self.block(target, source, &p.name, "NameCollision", message, Some(&other));
                return self.unmapped(source, namespaced);
            }
        }
        self.sources.write().insert(claim, source.clone());
        self.dests.write().insert(slot.clone(), dest.clone());
        if !self.waiting.read().is_empty() {
            self.waiting.write().remove(&slot);
        }
        if self.blocked.write().remove(&slot).is_some() {
            tracing::info!(object = %source, local = %dest, "no longer blocked");
        }
        dest
    }

    /// The kcp object of the copy `dest`; none for a copy made under an earlier
    /// PublishedResource's naming once the copy under the current name exists (so
    /// the old one is deleted: it is moved, never left behind, and the object's
    /// service-side state stays in the new copy until then).
    fn source_ref(&self, target: &WatchTarget, dest: &ObjectRef) -> Option<ObjectRef> {
        let probe = (target.id.group.clone(), target.id.resource.clone(), dest.clone());
        let known = self.sources.read().get(&probe).cloned();
        let found = match known {
            Some(known) => known,
            None => {
                let found = self.source_from_copy(target, dest)?;
                self.sources.write().insert(probe.clone(), found.clone());
                found
            }
        };
        let slot = (target.id.group.clone(), target.id.resource.clone(), found.clone());
        let current = self.dests.read().get(&slot).cloned();
        match current {
            Some(current) if current != *dest => {
                let moved = self
                    .flow_of(target)
                    .is_some_and(|f| f.copies.get(&current).is_some());
                if !moved {
                    self.superseded
                        .write()
                        .entry(slot)
                        .or_default()
                        .insert(dest.clone());
                    return Some(found);
                }
                let mut superseded = self.superseded.write();
                if let Some(old) = superseded.get_mut(&slot) {
                    old.remove(dest);
                    if old.is_empty() {
                        superseded.remove(&slot);
                    }
                }
                let mut sources = self.sources.write();
                if sources.get(&probe) == Some(&found) {
                    sources.remove(&probe);
                }
                tracing::info!(object = %found, old = %dest, new = %current, "the copy under the old PublishedResource's name goes: the object's copy now has the new name");
                None
            }
            _ => Some(found),
        }
    }

    /// Only into a real `/status` subresource, as the reference does (the schema
    /// carries the CRD's subresources, so the upstream has one exactly when the CRD does).
    fn returns_status(&self, _: &WatchTarget, status_subresource: bool) -> bool {
        status_subresource
    }

    /// The status mutations run on (a copy of) the service's object; its status goes back.
    fn returned_status(
        &self,
        target: &WatchTarget,
        source_key: &ObjectRef,
        source: &Value,
        copy: &Value,
    ) -> Option<Value> {
        let steps = self
            .find(&target.id)
            .and_then(|p| p.spec.mutation.clone())
            .map(|m| m.status)
            .unwrap_or_default();
        if steps.is_empty() {
            return crate::transform::status_for_upstream(copy);
        }
        let mut obj = copy.clone();
        let result = mutation::apply(&steps, "spec.mutation.status", &mut obj, Some(source));
        self.mutation_outcome(target, source_key, result);
        crate::transform::status_for_upstream(&obj)
    }

    fn keeps_last_known(&self) -> bool {
        self.state.get().is_some()
    }

    fn last_known(
        &self,
        target: &WatchTarget,
        source_key: &ObjectRef,
    ) -> futures::future::BoxFuture<'static, Option<Value>> {
        let Some(store) = self.state.get().cloned() else {
            return Box::pin(async { None });
        };
        let name = state::StateStore::secret_name(&target.id.group, &target.id.resource, source_key);
        Box::pin(async move { store.get(&name).await })
    }

    fn has_last_known(
        &self,
        target: &WatchTarget,
        source_key: &ObjectRef,
    ) -> futures::future::BoxFuture<'static, bool> {
        let Some(store) = self.state.get().cloned() else {
            return Box::pin(async { false });
        };
        let name = state::StateStore::secret_name(&target.id.group, &target.id.resource, source_key);
        Box::pin(async move { store.has(&name).await })
    }

    fn remember(
        &self,
        target: &WatchTarget,
        source_key: &ObjectRef,
        desired: &Value,
    ) -> futures::future::BoxFuture<'static, ()> {
        let Some(store) = self.state.get().cloned() else {
            return Box::pin(async {});
        };
        let name = state::StateStore::secret_name(&target.id.group, &target.id.resource, source_key);
        let (content, source) = (state::content_of(desired), source_key.clone());
        Box::pin(async move { store.put(&name, &source, content).await })
    }

    /// Deletes the object's last-known state and the copies of related objects the
    /// primary leaves behind (kcp origin: always; service origin: with `cleanup`)
    /// before the primary is released.
    fn before_release(
        &self,
        target: &WatchTarget,
        source_key: &ObjectRef,
        source: &Value,
    ) -> futures::future::BoxFuture<'static, bool> {
        let (Some(p), Some(engine)) = (self.find(&target.id), self.engine()) else {
            return Box::pin(async { true });
        };
        let state = self.state.get().cloned();
        let state_name = state::StateStore::secret_name(&target.id.group, &target.id.resource, source_key);
        let sides = related::Sides {
            service: engine.down.client.clone(),
            kcp: engine.up.client_in(source_key.cluster.as_deref()),
        };
        // The copy is gone: it stands in as the kcp object under the copy's name.
        let slot = (
            target.id.group.clone(),
            target.id.resource.clone(),
            source_key.clone(),
        );
        let dest = self.dests.read().get(&slot).cloned();
        let mut local = source.clone();
        if let Some(dest) = dest {
            local["metadata"]["name"] = json!(dest.name);
            local["metadata"]["namespace"] = json!(dest.namespace);
        }
        let (source, key) = (source.clone(), source_key.clone());
        let agent = self.self_ref.get().cloned();
        Box::pin(async move {
            let mut done = true;
            if let Some(state) = state {
                done &= state.delete(&state_name).await;
            }
            for spec in &p.spec.related {
                match related::clean_up(spec, &source, Some(&local), key.cluster(), &sides).await {
                    Ok(gone) => done &= gone,
                    Err(e) => {
                        tracing::warn!(object = %key, related = %spec.identifier, "cleaning up related objects: {e}");
                        done = false;
                    }
                }
            }
            if let (true, Some(agent)) = (done, agent.and_then(|a| a.upgrade())) {
                agent.forget(&slot);
            }
            done
        })
    }

    /// Queues the related objects of a primary whose copy just changed, and its copies
    /// under an earlier PublishedResource's names once the current one exists.
    fn copy_synced(&self, target: &WatchTarget, source_key: &ObjectRef) {
        let slot = (
            target.id.group.clone(),
            target.id.resource.clone(),
            source_key.clone(),
        );
        let old = self.superseded.read().get(&slot).cloned();
        if let (Some(old), Some(engine), Some(flow)) = (old, self.engine(), self.flow_of(target)) {
            let current = self.dests.read().get(&slot).cloned();
            if current.is_some_and(|c| flow.copies.get(&c).is_some()) {
                for dest in old {
                    let key = flow.copy_key(&*engine.profile.mapping, dest);
                    engine.queue_after(key, std::time::Duration::ZERO);
                }
            }
        }
        let has_related = self.published.read().iter().any(|p| {
            p.remote.id.group == target.id.group
                && p.remote.id.resource == target.id.resource
                && !p.spec.related.is_empty()
        });
        if has_related {
            self.related_queue.add((
                target.id.group.clone(),
                target.id.resource.clone(),
                source_key.clone(),
            ));
        }
    }

    /// Runs the spec mutations, then records where the copy came from.
    fn transform(&self, target: &WatchTarget, source_key: &ObjectRef, _: &Value, copy: &mut Value) {
        let steps = self
            .find(&target.id)
            .and_then(|p| p.spec.mutation.clone())
            .map(|m| m.spec)
            .unwrap_or_default();
        if !steps.is_empty() {
            let slot = (
                target.id.group.clone(),
                target.id.resource.clone(),
                source_key.clone(),
            );
            let dest = self.dests.read().get(&slot).cloned();
            let local = dest.zip(self.flow_of(target)).and_then(|(d, f)| f.copies.get(&d));
            let result = mutation::apply(&steps, "spec.mutation.spec", copy, local.as_deref());
            self.mutation_outcome(target, source_key, result);
        }
        if let Some(annotations) = copy["metadata"]["annotations"].as_object_mut() {
            annotations.retain(|k, _| !k.starts_with(related::RELATED_ANNOTATION_PREFIX));
        }
        let namespace = source_key.namespace.as_deref().unwrap_or_default();
        let labels = &mut copy["metadata"]["labels"];
        labels[SYNCAGENT_REMOTE_CLUSTER_LABEL] = json!(source_key.cluster());
        labels[SYNCAGENT_REMOTE_NAMESPACE_HASH_LABEL] = json!(sha3short(namespace));
        labels[SYNCAGENT_REMOTE_NAME_HASH_LABEL] = json!(sha3short(&source_key.name));
        let annotations = &mut copy["metadata"]["annotations"];
        if !namespace.is_empty() {
            annotations[SYNCAGENT_REMOTE_NAMESPACE_ANNOTATION] = json!(namespace);
        }
        annotations[SYNCAGENT_REMOTE_NAME_ANNOTATION] = json!(source_key.name);
        let published = self.find(&target.id);
        // Between a PublishedResource's deletion and its flow stopping, a copy keeps
        // naming the one that made it.
        let made_by = published.as_ref().map(|p| p.name.clone()).or_else(|| {
            let resource = (target.id.group.clone(), target.id.resource.clone());
            self.last_publisher.read().get(&resource).cloned()
        });
        if let Some(name) = made_by {
            annotations[SYNCAGENT_PUBLISHED_RESOURCE_ANNOTATION] = json!(name);
        }
        let with_path = published.is_some_and(|p| p.spec.enable_workspace_paths);
        if let Some(path) = with_path
            .then(|| self.workspace_path(source_key.cluster()))
            .flatten()
        {
            annotations[SYNCAGENT_REMOTE_WORKSPACE_PATH_ANNOTATION] = json!(path);
        }
    }
}

impl Marks for SyncAgent {
    fn copy_selector(&self, _: Side) -> String {
        format!("{SYNCAGENT_AGENT_NAME_LABEL}={}", self.agent_name)
    }

    fn mark(&self, copy: &mut Value, _: Direction) {
        copy["metadata"]["labels"][SYNCAGENT_AGENT_NAME_LABEL] = json!(self.agent_name);
    }

    fn is_own_copy(&self, obj: &Value) -> bool {
        obj["metadata"]["labels"][SYNCAGENT_AGENT_NAME_LABEL].as_str() == Some(self.agent_name.as_str())
    }

    /// Never: as in the reference, a PublishedResource that goes away leaves its copies
    /// alone, to prevent accidental data loss.
    fn is_orphaned_copy(&self, _: &Value, _: Side) -> bool {
        false
    }

    fn is_create_only(&self, _: &Value, _: Direction) -> bool {
        false
    }

    fn release_patch(&self) -> Value {
        json!({ "metadata": { "labels": { SYNCAGENT_AGENT_NAME_LABEL: null } } })
    }

    fn describe(&self, _: Direction) -> String {
        format!("label {SYNCAGENT_AGENT_NAME_LABEL}={}", self.agent_name)
    }

    fn finalizer(&self) -> Option<String> {
        Some(SYNCAGENT_CLEANUP_FINALIZER.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_names_hash_namespace_and_name() {
        // sha3-256("") is a known value.
        assert_eq!(
            sha3sum(""),
            "a7ffc6f8bf1ed76651c14756a061d662f580ff4de43b49fa82d80a4b80f8434a"
        );
        let name = default_name("default", "my-db");
        assert_eq!(name.len(), 41);
        assert!(name.starts_with(&sha3short("default")));
        assert!(name.ends_with(&sha3short("my-db")));
    }

    #[test]
    fn copies_are_named_and_labelled_by_their_source() {
        let agent = SyncAgent::new("nora");
        let target = WatchTarget {
            id: ResourceId::new("databases.example.io", "v1", "databases", true),
            kind: "Database".into(),
            direction: Direction::Downsync,
        };
        let source = ObjectRef {
            cluster: Some("abc123".into()),
            namespace: Some("default".into()),
            name: "my-db".into(),
        };
        let dest = agent.dest_ref(&target, &source);
        assert_eq!(dest.namespace.as_deref(), Some("abc123"));
        assert_eq!(dest.name, default_name("default", "my-db"));
        assert_eq!(agent.source_ref(&target, &dest), Some(source.clone()));
        let mut copy = json!({ "metadata": {} });
        agent.transform(&target, &source, &json!({}), &mut copy);
        agent.mark(&mut copy, Direction::Downsync);
        assert_eq!(
            copy["metadata"]["labels"][SYNCAGENT_REMOTE_CLUSTER_LABEL],
            "abc123"
        );
        assert_eq!(
            copy["metadata"]["annotations"][SYNCAGENT_REMOTE_NAME_ANNOTATION],
            "my-db"
        );
        assert_eq!(
            copy["metadata"]["annotations"][SYNCAGENT_REMOTE_NAMESPACE_ANNOTATION],
            "default"
        );
        assert!(agent.is_own_copy(&copy));
    }
}
