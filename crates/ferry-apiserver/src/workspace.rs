//! Logical clusters, kcp style: each has a path (`root:x`) and a short
//! generated name (kcp's `kcp.io/cluster` annotation value); clients may
//! address it by either. A plain server has `root` alone; a layer above
//! makes more from objects it serves ([`LogicalClusterObjects`]: kcp's
//! Workspaces, where a Workspace named `x` in `root` makes `root:x`).

use std::collections::HashMap;

use parking_lot::RwLock;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The root logical cluster's name and path.
pub const ROOT: &str = "root";

/// Where a layer above keeps the logical clusters below root, among the
/// hub's extensions ([`crate::hub::Extensions`]): objects of one resource,
/// each standing for a child logical cluster of the one it is stored in
/// (kcp's Workspaces). The hub rebuilds its [`WorkspaceIndex`] from them
/// when it starts, and a create of one runs the write hooks' `creating`
/// before it is stored, so the new logical cluster is ready when it shows.
#[derive(Clone, Copy)]
pub struct LogicalClusterObjects {
    /// Storage key of those objects (`group/plural`).
    pub resource: &'static str,
    /// The logical cluster `obj`, stored in `parent`, stands for, once it
    /// names one.
    pub cluster_of: fn(parent: &LogicalCluster, obj: &Value) -> Option<LogicalCluster>,
    /// What the 404 of a logical cluster that does not exist tells the
    /// client to do.
    pub how_to_create: &'static str,
    /// The annotation every object written in a logical cluster carries,
    /// naming it (kcp's `kcp.io/cluster`).
    pub annotation: &'static str,
}

/// A known logical cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogicalCluster {
    /// Generated name, e.g. `2x8w2ihb6bt8p3f6`; `root` for the root.
    pub name: String,
    /// Path, e.g. `root:imw1`.
    pub path: String,
    /// The cluster holding the Workspace object (None for root).
    pub parent: Option<String>,
}

/// Path ↔ logical-cluster-name index, rebuilt from Workspace objects at start.
#[derive(Default)]
pub struct WorkspaceIndex {
    inner: RwLock<Index>,
}

#[derive(Default)]
struct Index {
    by_path: HashMap<String, LogicalCluster>,
    by_name: HashMap<String, LogicalCluster>,
}

impl WorkspaceIndex {
    pub fn new() -> Self {
        let index = WorkspaceIndex::default();
        index.insert(LogicalCluster {
            name: ROOT.into(),
            path: ROOT.into(),
            parent: None,
        });
        index
    }

    pub fn insert(&self, lc: LogicalCluster) {
        let mut inner = self.inner.write();
        inner.by_path.insert(lc.path.clone(), lc.clone());
        inner.by_name.insert(lc.name.clone(), lc);
    }

    pub fn remove(&self, name: &str) -> Option<LogicalCluster> {
        let mut inner = self.inner.write();
        let lc = inner.by_name.remove(name)?;
        inner.by_path.remove(&lc.path);
        Some(lc)
    }

    /// Resolve what a client wrote after `/clusters/`: a path or a cluster name.
    pub fn resolve(&self, path_or_name: &str) -> Option<LogicalCluster> {
        let inner = self.inner.read();
        inner
            .by_path
            .get(path_or_name)
            .or_else(|| inner.by_name.get(path_or_name))
            .cloned()
    }

    pub fn by_name(&self, name: &str) -> Option<LogicalCluster> {
        self.inner.read().by_name.get(name).cloned()
    }

    /// The logical clusters whose Workspace object lives in `parent`.
    pub fn children(&self, parent: &str) -> Vec<LogicalCluster> {
        let inner = self.inner.read();
        inner
            .by_name
            .values()
            .filter(|lc| lc.parent.as_deref() == Some(parent))
            .cloned()
            .collect()
    }
}

/// kcp-style logical cluster name: 16 base-36 characters derived from the
/// workspace's path and uid, so it is stable for one Workspace object.
pub fn cluster_name_for(path: &str, uid: &str) -> String {
    let digest = Sha256::digest(format!("{path}/{uid}").as_bytes());
    let n = u128::from_be_bytes(digest[..16].try_into().expect("16 bytes"));
    ferry_api::naming::base36(n, 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_by_path_and_by_name() {
        let idx = WorkspaceIndex::new();
        let name = cluster_name_for("root:imw1", "uid-1");
        assert_eq!(name.len(), 16);
        idx.insert(LogicalCluster {
            name: name.clone(),
            path: "root:imw1".into(),
            parent: Some(ROOT.into()),
        });
        assert_eq!(idx.resolve("root:imw1").unwrap().name, name);
        assert_eq!(idx.resolve(&name).unwrap().path, "root:imw1");
        assert_eq!(idx.children(ROOT).len(), 1);
        assert!(idx.resolve("root:other").is_none());
    }
}
