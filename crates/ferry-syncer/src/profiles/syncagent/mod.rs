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

pub mod publish;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::RwLock;
use serde_json::{json, Value};
use sha3::{Digest, Sha3_256};

use ferry_api::well_known::{
    SYNCAGENT_AGENT_NAME_LABEL, SYNCAGENT_CLEANUP_FINALIZER, SYNCAGENT_REMOTE_CLUSTER_LABEL,
    SYNCAGENT_REMOTE_NAMESPACE_ANNOTATION, SYNCAGENT_REMOTE_NAMESPACE_HASH_LABEL,
    SYNCAGENT_REMOTE_NAME_ANNOTATION, SYNCAGENT_REMOTE_NAME_HASH_LABEL,
};

use crate::engine::{Engine, ObjectRef};
use crate::profile::{Mapping, Marks, Plan, Profile, ResourceType, Selection};
use crate::selection::{
    Direction, DiscoveredResource, Resolution, ResourceId, ResourcePattern, Scope, Unresolved,
    UnresolvedReason, WatchTarget,
};
use crate::side::Side;

pub use publish::{start, EngineTuning, RunningAgent, SyncAgentOptions};

/// The hex SHA3-256 of `input` (the reference's `sha3sum`).
pub fn sha3sum(input: &str) -> String {
    hex::encode(Sha3_256::digest(input.as_bytes()))
}

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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Published {
    /// The PublishedResource's name.
    pub name: String,
    /// The projected resource in kcp (group, version, plural, scope) and its kind.
    pub remote: ResourceType,
    /// The CRD's resource on the service cluster and its kind.
    pub local: ResourceType,
}

/// The profile's state: what is published, and the names copies were given.
pub struct SyncAgent {
    agent_name: String,
    published: RwLock<Vec<Published>>,
    /// `(group, resource, local copy key)` → the kcp object it is the copy of.
    sources: RwLock<HashMap<(String, String, ObjectRef), ObjectRef>>,
    loaded: AtomicBool,
    revision: AtomicU64,
    engine: OnceLock<Weak<Engine>>,
    publisher: OnceLock<Arc<publish::Publisher>>,
}

impl SyncAgent {
    /// The state of agent `agent_name`, nothing published yet.
    pub fn new(agent_name: &str) -> Arc<SyncAgent> {
        Arc::new(SyncAgent {
            agent_name: agent_name.to_string(),
            published: RwLock::default(),
            sources: RwLock::default(),
            loaded: AtomicBool::new(false),
            revision: AtomicU64::new(0),
            engine: OnceLock::new(),
            publisher: OnceLock::new(),
        })
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
        }
    }

    /// Replaces what is published; returns whether it changed.
    pub fn set_published(&self, mut published: Vec<Published>) -> bool {
        published.sort_by(|a, b| a.name.cmp(&b.name));
        let first = !self.loaded.swap(true, Ordering::Relaxed);
        let mut current = self.published.write();
        if *current == published && !first {
            return false;
        }
        *current = published;
        self.revision.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// What is published.
    pub fn published(&self) -> Vec<Published> {
        self.published.read().clone()
    }

    fn find(&self, id: &ResourceId) -> Option<Published> {
        self.published
            .read()
            .iter()
            .find(|p| p.remote.id.group == id.group && p.remote.id.resource == id.resource)
            .cloned()
    }

    /// The kcp object a local copy belongs to, from its labels and annotations.
    fn source_from_copy(&self, target: &WatchTarget, dest: &ObjectRef) -> Option<ObjectRef> {
        let engine = self.engine.get()?.upgrade()?;
        let flow = engine.flows().into_iter().find(|f| f.target == *target)?;
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

    fn wants(&self, target: &WatchTarget, _: &ObjectRef, _: &Value) -> bool {
        target.direction == Direction::Downsync
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

    fn dest_ref(&self, target: &WatchTarget, source: &ObjectRef) -> ObjectRef {
        let local_namespaced = self.find(&target.id).is_none_or(|p| p.local.id.namespaced);
        let name = default_name(source.namespace.as_deref().unwrap_or_default(), &source.name);
        let namespace = local_namespaced.then(|| source.cluster().to_string());
        let dest = ObjectRef::new(namespace.as_deref(), &name);
        let probe = (target.id.group.clone(), target.id.resource.clone(), dest.clone());
        if self.sources.read().get(&probe) != Some(source) {
            self.sources.write().insert(probe, source.clone());
        }
        dest
    }

    fn source_ref(&self, target: &WatchTarget, dest: &ObjectRef) -> Option<ObjectRef> {
        let probe = (target.id.group.clone(), target.id.resource.clone(), dest.clone());
        if let Some(known) = self.sources.read().get(&probe) {
            return Some(known.clone());
        }
        let found = self.source_from_copy(target, dest)?;
        self.sources.write().insert(probe, found.clone());
        Some(found)
    }

    /// Only into a real `/status` subresource, as the reference does (the schema
    /// carries the CRD's subresources, so the upstream has one exactly when the CRD does).
    fn returns_status(&self, _: &WatchTarget, status_subresource: bool) -> bool {
        status_subresource
    }

    fn transform(&self, _: &WatchTarget, source_key: &ObjectRef, _: &Value, copy: &mut Value) {
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
