//! kcp's API-export machinery (`apis.kcp.io/v1alpha1`): a provider
//! publishes `APIResourceSchema`s through an `APIExport`; a consumer
//! workspace binds the export with an `APIBinding`, and from then on serves
//! the exported resources (stored in the consumer workspace) as if a CRD
//! defined them. The provider sees every bound workspace at once through the
//! APIExport virtual workspace ([`crate::virtual_workspace`]).
//!
//! An export reaches a consumer's objects only through a custom resource the
//! consumer bound from it, or a permission claim the consumer accepted as it
//! is: a resource every workspace serves as its own is never the export's
//! ([`reserved_resource`] refuses the schemas that would stand for one; the
//! workload kinds kcp's TMC exports describe bind as a no-op).
//!
//! What lives where:
//! - validation and admission of the four kinds: `kinds::apis`;
//! - their status (identity, endpoints, Bound phase and conditions):
//!   `controllers::apis`;
//! - what a Bound binding serves in its workspace, and which workspaces are
//!   bound to which export (this module's [`BindingIndex`]), both rebuilt
//!   from the stored bindings after every binding or CRD write
//!   ([`crate::hub::Hub::refresh_crds`] asks the index, which [`install`]
//!   adds to the hub's extensions as its [`ServedResources`]).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::hub::{Extensions, Hub, ServedResources};
use crate::registry::{resources_from_crd, CrdError, ResourceInfo};
use crate::storage::{ClusterScope, ObjectKey, Store};

pub const GROUP: &str = "apis.kcp.io";
pub const VERSION: &str = "v1alpha1";
/// Storage keys of the four kinds.
pub const SCHEMAS: &str = "apis.kcp.io/apiresourceschemas";
pub const EXPORTS: &str = "apis.kcp.io/apiexports";
pub const SLICES: &str = "apis.kcp.io/apiexportendpointslices";
pub const BINDINGS: &str = "apis.kcp.io/apibindings";

/// The storage key of the cluster-scoped `apis.kcp.io` object `name` of
/// `resource` (one of the storage keys above) in `cluster`.
pub fn key(cluster: &str, resource: &str, name: &str) -> ObjectKey {
    ObjectKey {
        cluster: cluster.into(),
        resource: resource.into(),
        namespace: String::new(),
        name: name.into(),
    }
}

/// An export, named by the logical cluster (name, not path) that holds it
/// and its name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExportKey {
    pub cluster: String,
    pub name: String,
}

impl std::fmt::Display for ExportKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.cluster, self.name)
    }
}

/// An export's identity hash: what kcp derives from the export's identity
/// secret. Ferry derives it from the export's cluster, name and uid, so it
/// is stable for the export's life and differs for a re-created export.
pub fn identity_hash(cluster: &str, name: &str, uid: &str) -> String {
    let mut h = Sha256::new();
    h.update(format!("{cluster}/{name}/{uid}"));
    hex(&h.finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The APIExport virtual workspace's URL for an export.
pub fn virtual_workspace_url(external_url: &str, export: &ExportKey) -> String {
    format!(
        "{external_url}/services/apiexport/{}/{}",
        export.cluster, export.name
    )
}

/// The CustomResourceDefinition an APIResourceSchema stands for: the same
/// spec, with each version's `schema` as `schema.openAPIV3Schema`.
pub fn schema_as_crd(schema: &Value) -> Value {
    let mut spec = schema.get("spec").cloned().unwrap_or_else(|| json!({}));
    if let Some(versions) = spec.get_mut("versions").and_then(Value::as_array_mut) {
        for v in versions {
            if let Some(m) = v.as_object_mut() {
                if let Some(s) = m.remove("schema") {
                    m.insert("schema".into(), json!({"openAPIV3Schema": s}));
                }
            }
        }
    }
    json!({
        "metadata": {"name": schema.pointer("/metadata/name").cloned().unwrap_or(Value::Null)},
        "spec": spec,
    })
}

/// Every served version of an APIResourceSchema, as served through
/// `binding` (the APIBinding's name).
pub fn resources_from_schema(schema: &Value, binding: &str) -> Result<Vec<ResourceInfo>, CrdError> {
    let mut rs = resources_from_crd(&schema_as_crd(schema))
        .map_err(|e| CrdError(e.0.replace("CustomResourceDefinition", "APIResourceSchema")))?;
    for r in &mut rs {
        r.binding = Some(binding.to_string());
        r.terminating = false;
    }
    Ok(rs)
}

/// The names in an export's `spec.latestResourceSchemas`.
pub fn latest_schema_names(export: &Value) -> impl Iterator<Item = &str> {
    export
        .pointer("/spec/latestResourceSchemas")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

/// The APIResourceSchemas `export` (in `cluster`) lists that exist, in its order.
pub fn listed_schemas(store: &Store, cluster: &str, export: &Value) -> Vec<Value> {
    latest_schema_names(export)
        .filter_map(|name| store.get(&key(cluster, SCHEMAS, name)))
        .map(|schema| schema.value())
        .collect()
}

/// `(group, resource)` of each APIResourceSchema `export` (in `cluster`)
/// lists that exists, in its order, without parsing the schemas: each is read
/// once per resourceVersion (a schema carries the OpenAPI of its kind, tens of
/// KB; the SyncTarget and scheduling controllers ask this for every target).
pub fn listed_group_resources(hub: &Hub, cluster: &str, export: &Value) -> Vec<(String, String)> {
    let names = hub.extensions.get::<Arc<SchemaNames>>();
    latest_schema_names(export)
        .filter_map(|name| {
            let key = key(cluster, SCHEMAS, name);
            let stored = hub.store.get(&key)?;
            Some(match names {
                Some(names) => names.of(key, &stored),
                None => schema_group_resource(&stored.value()),
            })
        })
        .collect()
}

/// The `(group, resource)` of each stored APIResourceSchema, by storage key,
/// as of the resourceVersion read (see [`listed_group_resources`]).
#[derive(Default)]
pub struct SchemaNames {
    known: parking_lot::Mutex<HashMap<ObjectKey, (u64, GroupResource)>>,
}

/// A schema's `(group, resource)`.
type GroupResource = (String, String);

impl SchemaNames {
    fn of(&self, key: ObjectKey, stored: &crate::storage::StoredObject) -> GroupResource {
        if let Some((rv, names)) = self.known.lock().get(&key) {
            if *rv == stored.rv {
                return names.clone();
            }
        }
        let names = schema_group_resource(&stored.value());
        let mut known = self.known.lock();
        // A deleted schema's entry would stay: forget them all now and then
        // rather than follow deletions (there are a few per export).
        if known.len() > 100_000 {
            known.clear();
        }
        known.insert(key, (stored.rv, names.clone()));
        names
    }
}

/// `group` and `resource` of a schema's spec.
pub fn schema_group_resource(schema: &Value) -> (String, String) {
    let s = |p: &str| {
        schema
            .pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    (s("/spec/group"), s("/spec/names/plural"))
}

/// Groups the hub serves built in whose resources an APIResourceSchema may
/// still describe: the workload kinds kcp's TMC exports list (kcp's
/// `root:compute:kubernetes` has Deployments, Services and Ingresses), which
/// a kcp workspace does not serve itself. A consumer serves them natively
/// all the same, so such a schema binds as a no-op and the export never
/// reaches the consumer's objects through it.
const WORKLOAD_GROUPS: &[&str] = &[
    "apps",
    "batch",
    "autoscaling",
    "policy",
    "networking.k8s.io",
    "discovery.k8s.io",
    "storage.k8s.io",
];

/// The core-group kinds every kcp workspace serves itself (kcp's built-in
/// APIs): in kcp an export of one would never be reached either.
const KCP_CORE: &[&str] = &[
    "namespaces",
    "configmaps",
    "secrets",
    "events",
    "limitranges",
    "resourcequotas",
    "serviceaccounts",
];

/// Why an APIResourceSchema may not define `resource` in `group`, when it
/// may not: the group is one the hub serves built in (`builtin_group`) and
/// not a workload group, or the resource is one of kcp's own core kinds.
/// An export of such a resource would stand for the consumer's own objects
/// (its Secrets, RBAC, workspaces), which only a permission claim the
/// consumer accepted may reach.
pub fn reserved_resource(group: &str, resource: &str, builtin_group: bool) -> Option<String> {
    let claim = "to reach a consumer's objects of a built-in resource, ask for them in the APIExport's spec.permissionClaims, which the consumer must accept";
    if group.is_empty() {
        return KCP_CORE.contains(&resource).then(|| {
            format!("{resource} in the core group are built into every workspace: an APIExport cannot serve them; {claim}")
        });
    }
    (builtin_group && !WORKLOAD_GROUPS.contains(&group)).then(|| {
        format!(
            "group {group:?} is built into every workspace: an APIExport cannot serve its resources; {claim}"
        )
    })
}

/// `(group, resource)` an APIResourceSchema name (`<prefix>.<plural>.<group>`,
/// `core` for the core group) stands for, when it has that shape.
pub fn schema_name_group_resource(name: &str) -> Option<(String, String)> {
    let mut parts = name.splitn(3, '.');
    let (_prefix, plural, group) = (parts.next()?, parts.next()?, parts.next()?);
    let group = if group == "core" { "" } else { group };
    Some((group.to_string(), plural.to_string()))
}

/// A permission claim as an export asks for it and a binding accepts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub group: String,
    pub resource: String,
    pub identity_hash: String,
    /// `all: true`: every object of the resource.
    pub all: bool,
    /// Otherwise, the objects named here (`name` and/or `namespace`).
    pub selectors: Vec<(String, String)>,
}

impl Claim {
    pub fn from_value(v: &Value) -> Option<Claim> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        let resource = s("resource");
        if resource.is_empty() {
            return None;
        }
        Some(Claim {
            group: s("group"),
            resource,
            identity_hash: s("identityHash"),
            all: v.get("all").and_then(Value::as_bool).unwrap_or(false),
            selectors: v
                .get("resourceSelector")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|sel| {
                    let f = |k: &str| sel.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
                    (f("name"), f("namespace"))
                })
                .collect(),
        })
    }

    /// Same group, resource and identity (what a binding's decision refers to).
    pub fn same_resource(&self, other: &Claim) -> bool {
        self.group == other.group
            && self.resource == other.resource
            && self.identity_hash == other.identity_hash
    }

    /// Whether the claim covers the object at `key`.
    pub fn covers(&self, key: &ObjectKey) -> bool {
        self.all
            || self.selectors.iter().any(|(name, namespace)| {
                (name.is_empty() || *name == key.name)
                    && (namespace.is_empty() || *namespace == key.namespace)
            })
    }
}

/// What one Bound APIBinding gives its export in the binding's workspace.
#[derive(Debug, Clone, Default)]
pub struct Bound {
    /// `(group, resource)` of every bound resource.
    pub resources: HashSet<(String, String)>,
    /// The identity hash of the export each bound resource comes from (what a claim
    /// of another export on it must name).
    pub identities: HashMap<(String, String), String>,
    /// The permission claims the binding accepted (and the export asks for).
    pub claims: Vec<Claim>,
}

/// Which workspaces are bound to which export, for the virtual workspace:
/// rebuilt per workspace from its stored bindings, read on every object a
/// virtual-workspace list or watch passes.
#[derive(Default)]
pub struct BindingIndex {
    inner: parking_lot::RwLock<Index>,
}

#[derive(Default)]
struct Index {
    by_export: HashMap<ExportKey, HashMap<String, Bound>>,
    by_cluster: HashMap<String, Vec<ExportKey>>,
}

impl BindingIndex {
    /// Replace what `cluster`'s bindings give their exports.
    pub fn set_cluster(&self, cluster: &str, bound: Vec<(ExportKey, Bound)>) {
        let mut idx = self.inner.write();
        if let Some(old) = idx.by_cluster.remove(cluster) {
            for export in old {
                if let Some(m) = idx.by_export.get_mut(&export) {
                    m.remove(cluster);
                    if m.is_empty() {
                        idx.by_export.remove(&export);
                    }
                }
            }
        }
        if bound.is_empty() {
            return;
        }
        let exports: Vec<ExportKey> = bound.iter().map(|(e, _)| e.clone()).collect();
        for (export, b) in bound {
            let entry = idx.by_export.entry(export).or_default();
            // Two bindings of one export in one workspace: their union.
            let slot = entry.entry(cluster.to_string()).or_default();
            slot.resources.extend(b.resources);
            slot.identities.extend(b.identities);
            slot.claims.extend(b.claims);
        }
        idx.by_cluster.insert(cluster.to_string(), exports);
    }

    /// Whether `cluster` binds `export`'s `(group, resource)`.
    pub fn binds(&self, export: &ExportKey, cluster: &str, group: &str, resource: &str) -> bool {
        self.inner
            .read()
            .by_export
            .get(export)
            .and_then(|m| m.get(cluster))
            .is_some_and(|b| b.resources.contains(&(group.to_string(), resource.to_string())))
    }

    /// Whether `cluster` accepted a claim of `export` on `(group, resource)`
    /// of the export with identity `identity` (empty: a built-in resource).
    pub fn claimed(
        &self,
        export: &ExportKey,
        cluster: &str,
        group: &str,
        resource: &str,
        identity: &str,
    ) -> bool {
        self.with_claims(export, cluster, group, resource, identity, |_| true)
    }

    /// Whether a claim `cluster` accepted for `export` (on the resource of the
    /// export with identity `identity`) covers the object at `key`.
    pub fn claim_covers(
        &self,
        export: &ExportKey,
        key: &ObjectKey,
        group: &str,
        resource: &str,
        identity: &str,
    ) -> bool {
        self.with_claims(export, &key.cluster, group, resource, identity, |c| c.covers(key))
    }

    /// Whether any accepted claim on `(group, resource)` with `identity`
    /// satisfies `f`, read under the lock without copying (asked for every
    /// watch event).
    fn with_claims(
        &self,
        export: &ExportKey,
        cluster: &str,
        group: &str,
        resource: &str,
        identity: &str,
        f: impl Fn(&Claim) -> bool,
    ) -> bool {
        self.inner
            .read()
            .by_export
            .get(export)
            .and_then(|m| m.get(cluster))
            .is_some_and(|b| {
                b.claims.iter().any(|c| {
                    c.group == group && c.resource == resource && c.identity_hash == identity && f(c)
                })
            })
    }

    /// The identity hash of the export whose Bound binding serves `(group,
    /// resource)` in `cluster`, if one does.
    pub fn bound_identity(&self, cluster: &str, group: &str, resource: &str) -> Option<String> {
        let idx = self.inner.read();
        let gr = (group.to_string(), resource.to_string());
        idx.by_cluster.get(cluster)?.iter().find_map(|export| {
            idx.by_export
                .get(export)?
                .get(cluster)?
                .identities
                .get(&gr)
                .cloned()
        })
    }

    /// Whether `cluster` has a Bound binding to `export`.
    pub fn is_bound(&self, export: &ExportKey, cluster: &str) -> bool {
        self.inner
            .read()
            .by_export
            .get(export)
            .is_some_and(|m| m.contains_key(cluster))
    }

    /// How many workspaces are bound to `export`.
    pub fn bound_count(&self, export: &ExportKey) -> usize {
        self.inner.read().by_export.get(export).map_or(0, HashMap::len)
    }
}

/// Serving what Bound APIBindings bind, for the hub ([`ServedResources`]):
/// each refresh of a workspace adds the resources of its Bound bindings and
/// then records which exports it is bound to.
impl ServedResources for BindingIndex {
    fn source(&self) -> &'static str {
        BINDINGS
    }

    fn refresh<'a>(
        &'a self,
        hub: &Hub,
        cluster: &str,
        served: &mut Vec<ResourceInfo>,
    ) -> Box<dyn FnOnce() + 'a> {
        let scope = ClusterScope::One(cluster.into());
        let (bindings, _) = hub.store.list(&scope, BINDINGS, None, None);
        let mut bound = Vec::new();
        for (key, obj) in bindings {
            let binding = obj.value();
            if let Some((export, b)) = bound_by(hub, &key.name, &binding, served) {
                bound.push((export, b));
            }
        }
        let cluster = cluster.to_string();
        Box::new(move || self.set_cluster(&cluster, bound))
    }
}

/// What a Bound APIBinding named `name` serves (added to `served`) and
/// gives its export.
fn bound_by(
    hub: &Hub,
    name: &str,
    binding: &Value,
    served: &mut Vec<ResourceInfo>,
) -> Option<(ExportKey, Bound)> {
    let str_at = |p: &str| binding.pointer(p).and_then(Value::as_str);
    if str_at("/status/phase") != Some("Bound") {
        return None;
    }
    let export = ExportKey {
        cluster: str_at("/status/apiExportClusterName")?.to_string(),
        name: str_at("/spec/reference/export/name")?.to_string(),
    };
    let mut b = Bound::default();
    for r in binding
        .pointer("/status/boundResources")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let group = r.get("group").and_then(Value::as_str).unwrap_or_default();
        let resource = r.get("resource").and_then(Value::as_str).unwrap_or_default();
        // A built-in resource is the workspace's own, never the export's,
        // even where a binding stored before that rule lists it.
        if hub.registry.is_builtin(group, resource) {
            continue;
        }
        b.resources.insert((group.to_string(), resource.to_string()));
        if let Some(identity) = r.pointer("/schema/identityHash").and_then(Value::as_str) {
            b.identities
                .insert((group.to_string(), resource.to_string()), identity.to_string());
        }
        let Some(schema_name) = r.pointer("/schema/name").and_then(Value::as_str) else {
            continue;
        };
        let key = key(&export.cluster, SCHEMAS, schema_name);
        let Some(schema) = hub.store.get(&key) else {
            tracing::warn!(
                binding = name,
                schema = schema_name,
                "bound APIResourceSchema is gone; not serving {resource}"
            );
            continue;
        };
        match resources_from_schema(&schema.value(), name) {
            Ok(rs) => served.extend(rs),
            Err(e) => tracing::warn!(binding = name, schema = schema_name, "not serving: {e}"),
        }
    }
    b.claims = binding
        .pointer("/status/appliedPermissionClaims")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Claim::from_value)
        .collect();
    Some((export, b))
}

/// Adds to a hub's extensions what serves APIBindings' resources: the
/// index of which workspaces are bound to which export ([`bindings`]).
pub fn install(extensions: &mut Extensions) {
    let index = Arc::new(BindingIndex::default());
    extensions.insert::<Arc<dyn ServedResources>>(index.clone());
    extensions.insert(index);
    extensions.insert(Arc::new(SchemaNames::default()));
}

/// Which workspaces of `hub` are bound to which APIExport (empty for a hub
/// built without [`install`]).
pub fn bindings(hub: &Hub) -> &BindingIndex {
    static NONE: std::sync::LazyLock<BindingIndex> = std::sync::LazyLock::new(BindingIndex::default);
    hub.extensions
        .get::<Arc<BindingIndex>>()
        .map_or(&NONE, |index| index.as_ref())
}

/// A condition as kcp writes them (`conditionsv1alpha1.Condition`).
pub fn condition(type_: &str, ok: bool, reason: &str, message: &str) -> Value {
    let mut c = json!({
        "type": type_,
        "status": if ok { "True" } else { "False" },
        "lastTransitionTime": ferry_api::timestamp::now(),
    });
    if !ok {
        c["severity"] = json!("Error");
    }
    if !reason.is_empty() {
        c["reason"] = json!(reason);
    }
    if !message.is_empty() {
        c["message"] = json!(message);
    }
    c
}

/// `conditions` with each of `new` in place of the one of its type, keeping
/// `lastTransitionTime` where the status did not change.
pub fn merge_conditions(old: Option<&Value>, new: Vec<Value>) -> Vec<Value> {
    let old: Vec<Value> = old.and_then(Value::as_array).cloned().unwrap_or_default();
    let mut out: Vec<Value> = Vec::new();
    for mut c in new {
        if let Some(prev) = old.iter().find(|o| o.get("type") == c.get("type")) {
            if prev.get("status") == c.get("status") {
                if let Some(t) = prev.get("lastTransitionTime") {
                    c["lastTransitionTime"] = t.clone();
                }
            }
        }
        out.push(c);
    }
    out.sort_by(|a, b| {
        let t = |c: &Value| {
            c.get("type")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        t(a).cmp(&t(b))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn widgets_schema() -> Value {
        json!({
            "metadata": {"name": "v1.widgets.example.io"},
            "spec": {
                "group": "example.io", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                              "subresources": {"status": {}},
                              "schema": {"type": "object", "properties": {"spec": {"type": "object"}}}}]
            }
        })
    }

    #[test]
    fn a_schema_serves_as_a_crd_would_marked_with_its_binding() {
        let rs = resources_from_schema(&widgets_schema(), "widgets").unwrap();
        assert_eq!(rs.len(), 1);
        assert_eq!(rs[0].resource, "widgets");
        assert!(rs[0].from_crd && rs[0].status_subresource && rs[0].namespaced);
        assert_eq!(rs[0].binding.as_deref(), Some("widgets"));
        assert_eq!(rs[0].schema.as_deref().unwrap()["type"], "object");
    }

    #[test]
    fn the_index_answers_per_export_cluster_and_resource_and_forgets_on_reset() {
        let idx = BindingIndex::default();
        let e = ExportKey {
            cluster: "p".into(),
            name: "w".into(),
        };
        let mut b = Bound::default();
        b.resources.insert(("example.io".into(), "widgets".into()));
        b.claims
            .push(Claim::from_value(&json!({"resource": "secrets", "all": true})).unwrap());
        idx.set_cluster("c1", vec![(e.clone(), b)]);
        assert!(idx.binds(&e, "c1", "example.io", "widgets"));
        assert!(!idx.binds(&e, "c2", "example.io", "widgets"));
        assert!(idx.claimed(&e, "c1", "", "secrets", ""));
        assert!(!idx.claimed(&e, "c1", "", "configmaps", ""));
        assert!(
            !idx.claimed(&e, "c1", "", "secrets", "abc"),
            "an identity must match"
        );
        idx.set_cluster("c1", Vec::new());
        assert!(!idx.is_bound(&e, "c1"));
        assert_eq!(idx.bound_count(&e), 0);
    }

    #[test]
    fn built_in_resources_other_than_workload_kinds_are_reserved() {
        // kcp's own core kinds and the hub's system groups: never a schema.
        assert!(reserved_resource("", "secrets", true).is_some());
        assert!(reserved_resource("", "serviceaccounts", true).is_some());
        assert!(reserved_resource("rbac.authorization.k8s.io", "roles", true).is_some());
        assert!(reserved_resource("tenancy.kcp.io", "anything", true).is_some());
        // Workload kinds kcp's TMC exports describe, and custom groups.
        assert!(reserved_resource("", "services", true).is_none());
        assert!(reserved_resource("apps", "deployments", true).is_none());
        assert!(reserved_resource("example.io", "widgets", false).is_none());
        let why = reserved_resource("", "secrets", true).unwrap();
        assert!(why.contains("permissionClaims"), "{why}");
    }

    #[test]
    fn a_schema_name_says_what_it_defines() {
        let gr = |g: &str, r: &str| Some((g.to_string(), r.to_string()));
        assert_eq!(schema_name_group_resource("v1.secrets.core"), gr("", "secrets"));
        assert_eq!(
            schema_name_group_resource("v2.roles.rbac.authorization.k8s.io"),
            gr("rbac.authorization.k8s.io", "roles")
        );
        assert_eq!(schema_name_group_resource("widgets.example"), None);
    }

    #[test]
    fn a_claim_with_selectors_covers_only_what_they_name() {
        let c = Claim::from_value(&json!({"resource": "configmaps", "resourceSelector": [{"namespace": "a"}, {"name": "x", "namespace": "b"}]})).unwrap();
        let key = |ns: &str, name: &str| ObjectKey {
            cluster: "c".into(),
            resource: "/configmaps".into(),
            namespace: ns.into(),
            name: name.into(),
        };
        assert!(c.covers(&key("a", "anything")));
        assert!(c.covers(&key("b", "x")));
        assert!(!c.covers(&key("b", "y")));
    }
}
