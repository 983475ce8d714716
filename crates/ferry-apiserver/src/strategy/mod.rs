//! One strategy per resource, as kube-apiserver's registry has: what is
//! special about writing a kind. The object service ([`crate::service`])
//! runs the same sequence for every kind and asks the resource's strategy
//! (looked up once per write by [`for_resource`]) at each step:
//!
//! 1. [`Strategy::merge_subresource`] — what an update of a subresource
//!    (`approval`, `ephemeralcontainers`) changes in the stored object;
//! 2. [`Strategy::prepare_for_create`] / [`Strategy::prepare_for_update`] —
//!    defaults and server-set fields, after the generic metadata;
//! 3. [`Strategy::validate`] / [`Strategy::validate_update`] — the kind's
//!    own rules (immutable fields on update), after metadata and schema;
//! 4. [`Strategy::admit`] — checks that need the caller (RBAC escalation,
//!    CSR approval permission);
//! 5. [`Strategy::canonicalize`] and [`Strategy::warnings`].
//!
//! Where is a Deployment defaulted and validated? `apps/deployment.rs`, with
//! what every workload shares (pod template, selector) in `workload.rs` and
//! the pod spec's defaults and rules in `core/pod_spec.rs`.
//! Kinds without a file here get [`Generic`]: metadata and (for custom
//! resources) schema validation only.
//!
//! As kube-apiserver's strategies are registered by whoever installs an API
//! group, a layer above this one gives the strategies of the kinds it adds
//! in a [`StrategyTable`] among the hub's extensions; they are looked up
//! before Kubernetes' own.

pub mod admission;
pub mod apiextensions;
pub mod apps;
pub mod batch;
pub mod certificates;
pub mod core;
pub mod flowcontrol;
pub mod node;
pub mod rbac;
pub mod scheduling;
pub mod storage;
pub mod workload;

use serde_json::Value;

use crate::hub::Hub;
use crate::propagation::{self, PropagationPolicy};
use crate::registry::ResourceInfo;
use crate::request::Request;
use crate::status::{ApiError, Cause};

/// What is special about writing one resource. Every method has a default
/// that does nothing, so a strategy says only what differs.
pub trait Strategy: Sync {
    /// The stored object an update of `subresource` produces from `old`
    /// and what the client sent; `None` for subresources this kind does not
    /// define (the service handles `status` and `scale` for every kind).
    fn merge_subresource(
        &self,
        _subresource: &str,
        _old: &Value,
        _sent: &Value,
    ) -> Option<Result<Value, ApiError>> {
        None
    }

    /// Defaults and server-set fields of an object about to be created.
    fn prepare_for_create(&self, _r: &Request, _obj: &mut Value) -> Result<(), ApiError> {
        Ok(())
    }

    /// Defaults and server-set fields of an update of `old`.
    fn prepare_for_update(&self, _r: &Request, _old: &Value, _obj: &mut Value) -> Result<(), ApiError> {
        Ok(())
    }

    /// The kind's own rules for a new object.
    fn validate(&self, _r: &Request, _obj: &Value) -> Vec<Cause> {
        Vec::new()
    }

    /// The kind's own rules for an update of `old` (immutable fields).
    fn validate_update(&self, r: &Request, _old: &Value, obj: &Value) -> Vec<Cause> {
        self.validate(r, obj)
    }

    /// Checks that depend on who writes (run after validation, so a
    /// malformed object is told which field is wrong first).
    fn admit(&self, _r: &Request, _old: Option<&Value>, _obj: &Value) -> Result<(), ApiError> {
        Ok(())
    }

    /// Normalise the object about to be stored.
    fn canonicalize(&self, _obj: &mut Value) {}

    /// Warnings for the client (the `Warning` header) about an object that
    /// is stored anyway.
    fn warnings(&self, _r: &Request, _obj: &Value) -> Vec<String> {
        Vec::new()
    }

    /// The finalizers an object gets when a DELETE reaches it, from its
    /// current ones and the request's propagation policy (`None`: not said).
    /// By default, the garbage collector's (`orphan`, `foregroundDeletion`).
    fn finalizers_on_delete(
        &self,
        info: &ResourceInfo,
        current: &[String],
        _deleting: bool,
        propagation: Option<PropagationPolicy>,
    ) -> Vec<String> {
        propagation::finalizers_on_delete(current, propagation, propagation::default_policy(info))
    }

    /// Whether a DELETE always leaves the object marked for the kind's own
    /// controller, even with no finalizer (namespaces).
    fn always_graceful(&self) -> bool {
        false
    }

    /// What else marks an object as being deleted, besides its
    /// `deletionTimestamp` (a namespace's phase, a CRD's condition).
    fn prepare_for_delete(&self, _obj: &mut Value) -> Result<(), ApiError> {
        Ok(())
    }

    /// Whether an object being deleted, with no `metadata.finalizers` left,
    /// is still held (a namespace's `spec.finalizers`).
    fn held_after_finalizers(&self, _obj: &Value) -> bool {
        false
    }

    /// Bring the hub's own indexes up to date after a write of this kind in
    /// `cluster` is stored (what CRDs serve, the RBAC cache), before the
    /// write answers.
    fn after_commit(&self, _hub: &Hub, _cluster: &str) {}
}

/// Size limits on update, as kube ratchets validation: `new`'s causes but
/// those `old` already had, so an object stored before a limit existed (or
/// grew past it another way) can still have its status, finalizers and
/// labels written — and be deleted — while nothing makes it worse.
pub fn ratchet(new: Vec<Cause>, old: &[Cause]) -> Vec<Cause> {
    new.into_iter().filter(|c| !old.contains(c)).collect()
}

/// Kinds with nothing special: the service's generic sequence only.
pub struct Generic;

impl Strategy for Generic {}

/// Kinds whose only special step is kube's defaulting, the same on create
/// and update (CSIDrivers, flow control).
pub struct Defaults(pub fn(&mut Value));

impl Strategy for Defaults {
    fn prepare_for_create(&self, _r: &Request, obj: &mut Value) -> Result<(), ApiError> {
        (self.0)(obj);
        Ok(())
    }

    fn prepare_for_update(&self, _r: &Request, _old: &Value, obj: &mut Value) -> Result<(), ApiError> {
        (self.0)(obj);
        Ok(())
    }
}

/// `old` with the field at `path` replaced by `sent`'s (an empty list when
/// `sent` has none): what a subresource that owns one field of its object
/// writes (`approval`, `finalize`, `ephemeralcontainers`).
pub fn with_field_from(old: &Value, sent: &Value, path: &[&str]) -> Result<Value, ApiError> {
    let pointer: String = path.iter().map(|p| format!("/{p}")).collect();
    let field = sent
        .pointer(&pointer)
        .cloned()
        .unwrap_or(Value::Array(Vec::new()));
    let mut merged = old.clone();
    crate::json::set(&mut merged, path, field)?;
    Ok(merged)
}

/// The strategies of the kinds a layer above adds, by group and resource,
/// put among the hub's extensions ([`crate::hub::Extensions`]) when it is
/// built. An entry applies to a built-in resource or to one served from a
/// CRD (whoever installed it), as registered.
#[derive(Clone, Default)]
pub struct StrategyTable {
    entries: Vec<Registered>,
}

#[derive(Clone)]
struct Registered {
    group: &'static str,
    resource: &'static str,
    from_crd: bool,
    strategy: &'static dyn Strategy,
}

impl StrategyTable {
    /// `strategy` for the built-in resource `group`/`resource`.
    pub fn builtin(
        self,
        group: &'static str,
        resource: &'static str,
        strategy: &'static dyn Strategy,
    ) -> Self {
        self.register(group, resource, false, strategy)
    }

    /// `strategy` for `group`/`resource` wherever a CRD serves it.
    pub fn custom(
        self,
        group: &'static str,
        resource: &'static str,
        strategy: &'static dyn Strategy,
    ) -> Self {
        self.register(group, resource, true, strategy)
    }

    fn register(
        mut self,
        group: &'static str,
        resource: &'static str,
        from_crd: bool,
        strategy: &'static dyn Strategy,
    ) -> Self {
        self.entries.push(Registered {
            group,
            resource,
            from_crd,
            strategy,
        });
        self
    }

    /// The strategy registered for the resource `info` describes.
    pub fn lookup(&self, info: &ResourceInfo) -> Option<&'static dyn Strategy> {
        self.entries
            .iter()
            .find(|e| e.from_crd == info.from_crd && e.group == info.group && e.resource == info.resource)
            .map(|e| e.strategy)
    }
}

/// The strategy of the resource `info` describes in `hub`: the one the
/// layers above registered ([`StrategyTable`]), else Kubernetes' own for a
/// built-in kind, else [`Generic`].
pub fn for_resource(hub: &Hub, info: &ResourceInfo) -> &'static dyn Strategy {
    if let Some(strategy) = hub.extensions.get::<StrategyTable>().and_then(|t| t.lookup(info)) {
        return strategy;
    }
    if info.from_crd {
        return &Generic;
    }
    builtin(info)
}

/// Kubernetes' own strategy of the built-in resource `info` describes.
fn builtin(info: &ResourceInfo) -> &'static dyn Strategy {
    match (info.group.as_str(), info.resource.as_str()) {
        ("", "namespaces") => &core::namespace::NamespaceStrategy,
        ("", "secrets") => &core::secret::SecretStrategy,
        ("", "pods") => &core::pod::PodStrategy,
        ("", "services") => &core::service::ServiceStrategy,
        ("", "replicationcontrollers") => &core::replication_controller::STRATEGY,
        ("apps", "deployments") => &apps::deployment::STRATEGY,
        ("apps", "replicasets") => &apps::replicaset::STRATEGY,
        ("apps", "statefulsets") => &apps::statefulset::STRATEGY,
        ("apps", "daemonsets") => &apps::daemonset::STRATEGY,
        ("batch", "jobs") => &batch::job::STRATEGY,
        ("batch", "cronjobs") => &batch::cronjob::STRATEGY,
        ("apiextensions.k8s.io", "customresourcedefinitions") => &apiextensions::crd::CrdStrategy,
        ("admissionregistration.k8s.io", resource) => match resource {
            "mutatingwebhookconfigurations" => &admission::MUTATING_WEBHOOKS,
            "validatingwebhookconfigurations" => &admission::VALIDATING_WEBHOOKS,
            "validatingadmissionpolicies" => &admission::VALIDATING_POLICY,
            "mutatingadmissionpolicies" => &admission::MUTATING_POLICY,
            _ => &admission::PolicyBindingStrategy,
        },
        ("scheduling.k8s.io", "priorityclasses") => &scheduling::PriorityClassStrategy,
        ("node.k8s.io", "runtimeclasses") => &node::RuntimeClassStrategy,
        ("storage.k8s.io", "csidrivers") => &storage::CSI_DRIVER,
        ("flowcontrol.apiserver.k8s.io", "flowschemas") => &flowcontrol::FLOW_SCHEMA,
        ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations") => &flowcontrol::PRIORITY_LEVEL,
        (crate::auth::rbac::RBAC_GROUP, _) => &rbac::RbacStrategy,
        ("certificates.k8s.io", "certificatesigningrequests") => &certificates::csr::CsrStrategy,
        _ => &Generic,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::tests::resource;
    use crate::hub::{Extensions, HubConfig};
    use crate::storage::Store;

    /// A strategy told apart by one answer.
    struct Graceful;

    impl Strategy for Graceful {
        fn always_graceful(&self) -> bool {
            true
        }
    }

    #[test]
    fn a_registered_strategy_applies_to_its_resource_as_registered_only() {
        let mut extensions = Extensions::default();
        extensions.insert(
            StrategyTable::default()
                .builtin("example.com", "widgets", &Graceful)
                .custom("example.com", "gadgets", &Graceful),
        );
        let hub = Hub::with_extensions(Store::in_memory(), HubConfig::default(), extensions);
        let plain = Hub::new(Store::in_memory(), HubConfig::default());
        let widgets = resource("example.com", "v1", "Widget", false);
        let crd = |mut info: ResourceInfo| {
            info.from_crd = true;
            info
        };
        let gadgets = crd(resource("example.com", "v1", "Gadget", false));
        assert!(for_resource(&hub, &widgets).always_graceful());
        assert!(for_resource(&hub, &gadgets).always_graceful());
        // Registered for the built-in resource only: a CRD of that name is generic.
        assert!(!for_resource(&hub, &crd(widgets.clone())).always_graceful());
        // A hub built without the table has only Kubernetes' own strategies.
        assert!(!for_resource(&plain, &widgets).always_graceful());
        let namespaces = resource("", "v1", "Namespace", false);
        assert!(for_resource(&hub, &namespaces).always_graceful());
        assert!(for_resource(&plain, &namespaces).always_graceful());
    }
}
