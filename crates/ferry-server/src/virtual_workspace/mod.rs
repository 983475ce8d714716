//! Virtual workspaces: API servers that exist only as a view of the hub's
//! real workspaces, under `https://HOST/services/<kind>/<instance...>/clusters/<c>/...`
//! (kcp's URL shape). A client points kube-rs or kubectl at the URL up to
//! `clusters/<c>` and uses it as any cluster: discovery, list, watch, and
//! writes in one workspace. `clusters/*` lists and watches every workspace
//! the view admits, each object carrying its `kcp.io/cluster` annotation.
//!
//! A kind of virtual workspace is three decisions ([`VirtualWorkspace`]):
//! 1. **who may enter** ([`VirtualWorkspace::authorize`]): asked before
//!    anything about the instance is looked up, so a caller without access
//!    learns nothing (not even whether the instance exists);
//! 2. **what it serves** ([`View::resources`]): the resources discovery
//!    lists and requests may address;
//! 3. **what of each is visible** ([`View::visibility`]): which workspaces
//!    and objects, as a [`ScopeFilter`] the store applies to lists and to
//!    every watch event, so a workspace that becomes visible later shows up
//!    in running watches.
//!
//! The HTTP side (authentication, discovery, the object service, watch) is
//! the hub's own (`api::virtual_workspace`), so every view gets the same
//! behaviour as a real workspace. The kinds: the APIExport view
//! ([`apiexport`]) and kcp TMC's syncer and upsyncer views ([`syncer`]),
//! which select objects by their labels ([`ScopeFilter::stored`]).

pub mod apiexport;
pub mod syncer;

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

/// Every kind of virtual workspace the hub serves.
pub fn kinds() -> &'static [&'static dyn VirtualWorkspace] {
    &[
        &apiexport::ApiExportVirtualWorkspace,
        &syncer::SyncerVirtualWorkspace,
        &syncer::UpsyncerVirtualWorkspace,
    ]
}

/// The kind named `name`.
pub fn kind(name: &str) -> Option<&'static dyn VirtualWorkspace> {
    kinds().iter().copied().find(|k| k.name() == name)
}
