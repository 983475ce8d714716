//! What a call on the object service ([`crate::service`]) is about, and on
//! whose behalf: the workspace, resource, namespace, name and subresource
//! addressed, the caller, the verb and the write's options. The service and
//! every kind's strategy ([`crate::strategy`]) read it, so it sits below
//! both, as kube-apiserver's request context sits below its registry.

use std::sync::Arc;

use serde_json::Value;

use crate::auth::rbac::Request as RbacRequest;
use crate::auth::{Attributes, UserInfo};
use crate::hub::Hub;
use crate::registry::ResourceInfo;
use crate::status::ApiError;
use crate::storage::{ClusterScope, ObjectKey, ScopeFilter, StoredObject, WatchEvent};
use crate::workspace::LogicalCluster;

/// Options of a write that are not the object itself.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: everything but storing.
    pub dry_run: bool,
    /// Server-side apply's `force`: take over conflicting fields.
    pub force: bool,
    /// Who managedFields records as having made the change.
    pub field_manager: String,
    /// What to do with fields a built-in kind does not know (`fieldValidation`).
    pub field_validation: crate::decode::FieldValidation,
    /// Fields the request's JSON body named twice in one object (the last
    /// one was kept), reported as `field_validation` says.
    pub duplicate_fields: Vec<String>,
}

/// What a call on the service is about, and on whose behalf.
pub struct Request {
    /// Crate-private: a controller holds a request, never the hub it reaches.
    pub(crate) hub: Arc<Hub>,
    /// `None`: the `/clusters/*` wildcard (reads only).
    pub cluster: Option<LogicalCluster>,
    /// A virtual workspace's view: what of the wildcard is visible.
    pub visibility: Option<Arc<dyn ScopeFilter>>,
    pub info: ResourceInfo,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
    /// Who asked ([`UserInfo::loopback`] for the hub's own writes).
    pub user: UserInfo,
    /// The RBAC verb the request was authorized for (`create`, `patch`, ...).
    pub verb: String,
    pub options: WriteOptions,
    /// Warnings the write collected on its way (unknown fields under
    /// `fieldValidation=Warn`), sent with the strategy's.
    pub warnings: parking_lot::Mutex<Vec<String>>,
}

impl Request {
    /// The hub the call is on, for the strategies of a layer above (they
    /// check what the hub holds, as Kubernetes' own do through the crate's
    /// field). Controllers are handed requests by their handle and never
    /// reach the hub through one.
    pub fn hub(&self) -> &Arc<Hub> {
        &self.hub
    }

    /// A request of the hub's own (controllers): the loopback user, with
    /// `manager` as field manager, on `resource` (group, version, plural) in
    /// `cluster`.
    #[allow(clippy::too_many_arguments)]
    pub fn internal(
        hub: &Arc<Hub>,
        cluster: &str,
        (group, version, resource): (&str, &str, &str),
        namespace: Option<&str>,
        name: Option<&str>,
        verb: &str,
        manager: &str,
    ) -> Result<Request, ApiError> {
        let info = hub
            .registry
            .lookup(Some(cluster), group, version, resource)
            .ok_or_else(|| ApiError::not_found_message(format!("{resource} is not served in {cluster}")))?;
        Self::internal_for(hub, cluster, info, namespace, name, verb, manager)
    }

    /// As [`Request::internal`], for the object at `key` served as `info`.
    pub fn internal_at(
        hub: &Arc<Hub>,
        info: ResourceInfo,
        key: &ObjectKey,
        verb: &str,
        manager: &str,
    ) -> Result<Request, ApiError> {
        let namespace = (!key.namespace.is_empty()).then_some(key.namespace.as_str());
        Self::internal_for(hub, &key.cluster, info, namespace, Some(&key.name), verb, manager)
    }

    fn internal_for(
        hub: &Arc<Hub>,
        cluster: &str,
        info: ResourceInfo,
        namespace: Option<&str>,
        name: Option<&str>,
        verb: &str,
        manager: &str,
    ) -> Result<Request, ApiError> {
        let lc = hub
            .workspaces
            .by_name(cluster)
            .ok_or_else(|| ApiError::not_found_message(format!("workspace {cluster} not found")))?;
        Ok(Request {
            hub: hub.clone(),
            cluster: Some(lc),
            visibility: None,
            info,
            namespace: namespace.map(String::from),
            name: name.map(String::from),
            subresource: None,
            user: UserInfo::loopback(),
            verb: verb.into(),
            options: WriteOptions {
                field_manager: manager.into(),
                ..Default::default()
            },
            warnings: Default::default(),
        })
    }

    /// The same request on a subresource (`status`, ...).
    pub fn on_subresource(mut self, subresource: &str) -> Request {
        self.subresource = Some(subresource.into());
        self
    }

    pub fn scope(&self) -> ClusterScope {
        match (&self.cluster, &self.visibility) {
            (Some(lc), Some(v)) => ClusterScope::Filtered(Arc::new(InCluster {
                cluster: lc.name.clone(),
                visible: v.clone(),
            })),
            (Some(lc), None) => ClusterScope::One(lc.name.clone()),
            (None, Some(v)) => ClusterScope::Filtered(v.clone()),
            (None, None) => ClusterScope::All,
        }
    }

    pub fn cluster(&self) -> Result<&LogicalCluster, ApiError> {
        self.cluster.as_ref().ok_or_else(|| {
            ApiError::method_not_allowed(
                "the /clusters/* wildcard only supports list and watch; name one workspace",
            )
        })
    }

    pub fn key(&self, name: &str) -> Result<ObjectKey, ApiError> {
        Ok(ObjectKey {
            cluster: self.cluster()?.name.clone(),
            resource: self.info.storage_key(),
            namespace: self.namespace.clone().unwrap_or_default(),
            name: name.to_string(),
        })
    }

    /// The request as RBAC sees it: verb, resource, namespace and name as
    /// addressed, in this request's workspace.
    pub fn attributes(&self) -> Attributes {
        Attributes {
            request: RbacRequest::Resource {
                verb: self.verb.clone(),
                group: self.info.group.clone(),
                resource: self.info.resource.clone(),
                subresource: self.subresource.clone().unwrap_or_default(),
                namespace: self.namespace.clone().unwrap_or_default(),
                name: self.name.clone().unwrap_or_default(),
            },
            workspace: self.cluster.clone(),
        }
    }

    pub fn manager(&self) -> String {
        self.options.field_manager.clone()
    }

    /// The name the request addresses; 405 for a verb that needs one.
    pub(crate) fn name(&self) -> Result<String, ApiError> {
        self.name
            .clone()
            .ok_or_else(|| ApiError::method_not_allowed(format!("{} needs a name", self.verb)))
    }
}

/// A view narrowed to one of its workspaces.
struct InCluster {
    cluster: String,
    visible: Arc<dyn ScopeFilter>,
}

impl ScopeFilter for InCluster {
    fn cluster(&self, cluster: &str) -> bool {
        cluster == self.cluster && self.visible.cluster(cluster)
    }

    fn object(&self, key: &ObjectKey) -> bool {
        self.visible.object(key)
    }

    fn stored(&self, key: &ObjectKey, obj: &StoredObject) -> bool {
        self.visible.stored(key, obj)
    }

    fn admit_write(&self, key: &ObjectKey, old: Option<&Value>, new: &Value) -> Result<(), ApiError> {
        self.visible.admit_write(key, old, new)
    }

    fn sync_target_key(&self) -> Option<&str> {
        self.visible.sync_target_key()
    }

    fn hears(&self, key: &ObjectKey, event: &WatchEvent) -> bool {
        self.visible.hears(key, event)
    }
}
