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

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;

use crate::view::VirtualWorkspaces;

/// Every kind of virtual workspace the hub serves, for its extensions.
pub fn kinds() -> VirtualWorkspaces {
    VirtualWorkspaces(vec![
        &apiexport::ApiExportVirtualWorkspace,
        &syncer::SyncerVirtualWorkspace,
        &syncer::UpsyncerVirtualWorkspace,
    ])
}

/// What views of one kind serve, kept between requests by what they are of
/// (an export, a SyncTarget) while what they were worked out from stays:
/// working a view out parses the objects it is built of, and every request
/// through a view needs it. At most [`KeptViews::LIMIT`] are kept; past it the
/// cache starts again (a view is worked out again on its next request,
/// nothing else is lost), so a tenant making many exports or targets cannot
/// grow it without bound.
pub struct KeptViews<K, V>(parking_lot::Mutex<HashMap<K, Arc<V>>>);

impl<K, V> Default for KeptViews<K, V> {
    fn default() -> Self {
        KeptViews(Default::default())
    }
}

impl<K: Clone + Eq + Hash, V> KeptViews<K, V> {
    const LIMIT: usize = 4096;

    /// The view kept for `key` if `current` says it still holds, else the one
    /// `make` works out, kept when it says so.
    pub fn get_or_make(
        &self,
        key: &K,
        current: impl Fn(&V) -> bool,
        make: impl FnOnce() -> (V, bool),
    ) -> Arc<V> {
        if let Some(kept) = self.0.lock().get(key).filter(|kept| current(kept)) {
            return kept.clone();
        }
        let (view, keep) = make();
        let view = Arc::new(view);
        if keep {
            let mut kept = self.0.lock();
            if kept.len() >= Self::LIMIT {
                kept.clear();
            }
            kept.insert(key.clone(), view.clone());
        }
        view
    }
}
