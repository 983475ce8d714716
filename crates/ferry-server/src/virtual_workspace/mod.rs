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
//! the API server's own ([`crate::view`], served by `api::virtual_workspace`),
//! so every view gets the same behaviour as a real workspace; [`kinds`] adds
//! these to the hub's extensions. The kinds: the APIExport view
//! ([`apiexport`]) and kcp TMC's syncer and upsyncer views ([`syncer`]),
//! which select objects by their labels ([`ScopeFilter::stored`]).

pub mod apiexport;
pub mod syncer;

pub use crate::view::{View, VirtualWorkspace};

use crate::view::VirtualWorkspaces;

/// Every kind of virtual workspace the hub serves, for its extensions.
pub fn kinds() -> VirtualWorkspaces {
    VirtualWorkspaces(vec![
        &apiexport::ApiExportVirtualWorkspace,
        &syncer::SyncerVirtualWorkspace,
        &syncer::UpsyncerVirtualWorkspace,
    ])
}
