//! Looking objects up by label: what the KubeStellar placement index and
//! the kcp TMC scheduler's index share.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::Hash;

use ferry_server::selector::{LabelSelector, Operator};

/// The candidates of the most selective equality requirement (`=`, `==`,
/// `in`) of `s`, looked up with `by_label`; `None` when `s` has none, and
/// every object in scope is a candidate. A superset of what `s` matches:
/// the caller still checks `s`.
pub fn narrowest<'a, T: Ord + 'a>(
    s: &LabelSelector,
    by_label: impl Fn(&str, &str) -> Option<&'a BTreeSet<T>>,
) -> Option<BTreeSet<&'a T>> {
    s.requirements()
        .iter()
        .filter(|r| {
            matches!(
                r.operator(),
                Operator::Equals | Operator::DoubleEquals | Operator::In
            )
        })
        .map(|r| {
            r.values()
                .iter()
                .filter_map(|v| by_label(r.key(), v))
                .flatten()
                .collect::<BTreeSet<&T>>()
        })
        .min_by_key(BTreeSet::len)
}

/// The names of objects (SyncTargets) per workspace, by workspace and by
/// label: the objects of one workspace a selector may match, found without
/// visiting those of other workspaces or every one of its own.
#[derive(Debug, Default, PartialEq)]
pub struct WorkspaceLabels {
    /// Workspace → its objects' names.
    by_cluster: HashMap<String, BTreeSet<String>>,
    /// `(workspace, label key, value)` → the objects there carrying it.
    by_label: HashMap<(String, String, String), BTreeSet<String>>,
}

impl WorkspaceLabels {
    /// Index object `name` of workspace `cluster`, carrying `labels`.
    pub fn insert(&mut self, cluster: &str, name: &str, labels: &BTreeMap<String, String>) {
        self.by_cluster
            .entry(cluster.to_string())
            .or_default()
            .insert(name.to_string());
        for (k, v) in labels {
            self.by_label
                .entry((cluster.to_string(), k.clone(), v.clone()))
                .or_default()
                .insert(name.to_string());
        }
    }

    /// Forget object `name` of `cluster`, indexed with `labels`.
    pub fn remove(&mut self, cluster: &str, name: &str, labels: &BTreeMap<String, String>) {
        remove_from(&mut self.by_cluster, cluster.to_string(), name);
        for (k, v) in labels {
            remove_from(
                &mut self.by_label,
                (cluster.to_string(), k.clone(), v.clone()),
                name,
            );
        }
    }

    /// Whether workspace `cluster` has an indexed object.
    pub fn has(&self, cluster: &str) -> bool {
        self.by_cluster.contains_key(cluster)
    }

    /// The names in `cluster` that `selector` may match, in name order: its
    /// [`narrowest`] candidates, or all of the workspace's. A superset: the
    /// caller still checks `selector`.
    pub fn candidates(&self, cluster: &str, selector: &LabelSelector) -> Vec<&String> {
        match narrowest(selector, |k, v| {
            self.by_label
                .get(&(cluster.to_string(), k.to_string(), v.to_string()))
        }) {
            Some(candidates) => candidates.into_iter().collect(),
            None => self.by_cluster.get(cluster).into_iter().flatten().collect(),
        }
    }
}

/// Take `name` out of the set at `key`, and the set out of `map` once empty.
pub fn remove_from<K: Hash + Eq>(map: &mut HashMap<K, BTreeSet<String>>, key: K, name: &str) {
    if let Some(set) = map.get_mut(&key) {
        set.remove(name);
        if set.is_empty() {
            map.remove(&key);
        }
    }
}
