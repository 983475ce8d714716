//! Views of the server's logical clusters served as API servers of their
//! own, under `/services/<kind>/<instance...>/clusters/<c>/...` (kcp calls
//! them virtual workspaces): a client points kube-rs or kubectl at the URL
//! up to `clusters/<c>` and uses it as any cluster. `clusters/*` lists and
//! watches every logical cluster the view admits.
//!
//! A kind of view is three decisions ([`VirtualWorkspace`]): who may enter,
//! what it serves ([`View::resources`]) and what of each is visible
//! ([`View::visibility`], a [`ScopeFilter`] the store applies to lists and
//! watch events). A layer above the API server adds its kinds as
//! [`VirtualWorkspaces`] among the hub's extensions; `api::virtual_workspace`
//! serves them with the same authentication, discovery, object service and
//! watch as a real logical cluster.

use std::sync::Arc;

use crate::auth::UserInfo;
use crate::hub::Hub;
use crate::registry::ResourceInfo;
use crate::status::ApiError;
use crate::storage::ScopeFilter;

/// One kind of virtual workspace.
pub trait VirtualWorkspace: Send + Sync {
    /// The path segment after `/services/` (`apiexport`).
    fn name(&self) -> &'static str;

    /// How many path segments after `/services/<name>/` name an instance
    /// (for `apiexport`: the export's logical cluster and its name).
    fn instance_segments(&self) -> usize;

    /// Whether `user` may make a request with `verb` in the instance.
    /// Return the same error whether or not the instance exists.
    fn authorize(&self, hub: &Hub, user: &UserInfo, instance: &[String], verb: &str) -> Result<(), ApiError>;

    /// What the instance serves now.
    fn view(&self, hub: &Arc<Hub>, instance: &[String]) -> Result<View, ApiError>;
}

/// Which workspaces and objects of a resource a view shows.
type VisibilityFn = Box<dyn Fn(&ResourceInfo) -> Arc<dyn ScopeFilter> + Send + Sync>;

/// What one instance of a virtual workspace serves.
pub struct View {
    /// Every resource served (each served version is one entry).
    pub resources: Vec<ResourceInfo>,
    /// Which workspaces and objects of each resource are visible.
    visibility: VisibilityFn,
    /// `(group, resource)` served for reading only (get, list, watch).
    read_only: Vec<(String, String)>,
}

impl View {
    pub fn new(
        resources: Vec<ResourceInfo>,
        visibility: impl Fn(&ResourceInfo) -> Arc<dyn ScopeFilter> + Send + Sync + 'static,
    ) -> View {
        View {
            resources,
            visibility: Box::new(visibility),
            read_only: Vec::new(),
        }
    }

    /// Serve `group`/`resource` for reading only: any other verb is refused.
    pub fn read_only(mut self, group: &str, resource: &str) -> View {
        self.read_only.push((group.to_string(), resource.to_string()));
        self
    }

    /// Whether `info` is served for reading only.
    pub fn is_read_only(&self, info: &ResourceInfo) -> bool {
        self.read_only
            .iter()
            .any(|(g, r)| *g == info.group && *r == info.resource)
    }

    /// The served resource `group/version/resource`.
    pub fn lookup(&self, group: &str, version: &str, resource: &str) -> Option<&ResourceInfo> {
        self.resources
            .iter()
            .find(|r| r.group == group && r.version == version && r.resource == resource)
    }

    /// What of `info` is visible.
    pub fn visibility(&self, info: &ResourceInfo) -> Arc<dyn ScopeFilter> {
        (self.visibility)(info)
    }
}

/// The kinds of view a hub serves under `/services/`, among its extensions
/// ([`crate::hub::Extensions`]); without them, nothing is served there.
#[derive(Clone, Default)]
pub struct VirtualWorkspaces(pub Vec<&'static dyn VirtualWorkspace>);

impl VirtualWorkspaces {
    /// The kind named `name`.
    pub fn kind(&self, name: &str) -> Option<&'static dyn VirtualWorkspace> {
        self.0.iter().copied().find(|k| k.name() == name)
    }
}
