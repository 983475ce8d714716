//! The inventory the where-resolver reads, indexed: every Location and
//! SyncTarget by `(workspace, name)`, Locations by label, SyncTargets by
//! workspace and label. Kept up to date from the store's watch one object
//! at a time ([`InventoryIndex::apply_location`],
//! [`InventoryIndex::apply_target`]), so a change costs what it touches,
//! and [`InventoryIndex::resolve`] visits only the Locations a placement's
//! selectors can match and the SyncTargets their `instanceSelector`s can
//! select — never every Location against every
//! SyncTarget. Gives exactly what [`resolve::resolve`] gives over the same
//! objects (the property test below holds it to that).
//!
//! A selector narrows through its equality requirements (`matchLabels`,
//! `=`, `==`, `in`): the candidates are the objects carrying one of the
//! values of its most selective such requirement, then every requirement
//! is checked as usual. A selector without one (only `exists`, `!=`,
//! `notin`, …, or empty) scans its whole scope. Lookups stay inside the
//! workspace a Location belongs to, and grants are checked on the matched
//! Locations as before, so no index crosses a workspace boundary the
//! full pass did not.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use ferry_api::edge::SinglePlacement;

use super::resolve::{self, Location, Target};
use ferry_multicluster::label_index::{narrowest, WorkspaceLabels};
use ferry_server::selector::LabelSelector;

/// `(logical cluster, name)`.
type Id = (String, String);

/// Locations and SyncTargets, indexed for [`InventoryIndex::resolve`].
#[derive(Debug, Default)]
pub struct InventoryIndex {
    locations: BTreeMap<Id, Location>,
    targets: BTreeMap<Id, Target>,
    /// `(label key, value)` → Locations carrying it.
    locations_by_label: HashMap<(String, String), BTreeSet<Id>>,
    /// SyncTargets' names by workspace and label.
    targets_by_workspace: WorkspaceLabels,
}

impl InventoryIndex {
    /// An index of these objects.
    pub fn of(
        locations: impl IntoIterator<Item = Location>,
        targets: impl IntoIterator<Item = Target>,
    ) -> Self {
        let mut index = InventoryIndex::default();
        for l in locations {
            index.put_location(l);
        }
        for t in targets {
            index.put_target(t);
        }
        index
    }

    pub fn locations(&self) -> impl Iterator<Item = &Location> {
        self.locations.values()
    }

    pub fn targets(&self) -> impl Iterator<Item = &Target> {
        self.targets.values()
    }

    pub fn location(&self, cluster: &str, name: &str) -> Option<&Location> {
        self.locations.get(&(cluster.to_string(), name.to_string()))
    }

    pub fn target(&self, cluster: &str, name: &str) -> Option<&Target> {
        self.targets.get(&(cluster.to_string(), name.to_string()))
    }

    /// Add or replace a Location.
    pub fn put_location(&mut self, l: Location) {
        self.remove_location(&l.cluster, &l.name);
        let id = (l.cluster.clone(), l.name.clone());
        for (k, v) in &l.labels {
            self.locations_by_label
                .entry((k.clone(), v.clone()))
                .or_default()
                .insert(id.clone());
        }
        self.locations.insert(id, l);
    }

    pub fn remove_location(&mut self, cluster: &str, name: &str) {
        let id = (cluster.to_string(), name.to_string());
        let Some(old) = self.locations.remove(&id) else {
            return;
        };
        for (k, v) in old.labels {
            let key = (k, v);
            if let Some(set) = self.locations_by_label.get_mut(&key) {
                set.remove(&id);
                if set.is_empty() {
                    self.locations_by_label.remove(&key);
                }
            }
        }
    }

    /// Add or replace a SyncTarget.
    pub fn put_target(&mut self, t: Target) {
        self.remove_target(&t.cluster, &t.name);
        self.targets_by_workspace.insert(&t.cluster, &t.name, &t.labels);
        self.targets.insert((t.cluster.clone(), t.name.clone()), t);
    }

    pub fn remove_target(&mut self, cluster: &str, name: &str) {
        let Some(old) = self.targets.remove(&(cluster.to_string(), name.to_string())) else {
            return;
        };
        self.targets_by_workspace.remove(cluster, name, &old.labels);
    }

    /// What [`resolve::resolve`] gives for these selectors over the indexed
    /// objects, visiting only candidates.
    pub fn resolve(
        &self,
        selectors: &[LabelSelector],
        granted: impl Fn(&Location) -> bool,
    ) -> (usize, Vec<SinglePlacement>) {
        let mut matching: BTreeSet<&Id> = BTreeSet::new();
        for s in selectors {
            match narrowest(s, |k, v| {
                self.locations_by_label.get(&(k.to_string(), v.to_string()))
            }) {
                Some(candidates) => matching.extend(
                    candidates
                        .into_iter()
                        .filter(|id| self.locations.get(*id).is_some_and(|l| s.matches(&l.labels))),
                ),
                None => matching.extend(
                    self.locations
                        .iter()
                        .filter(|(_, l)| s.matches(&l.labels))
                        .map(|(id, _)| id),
                ),
            }
        }
        // `matching` is ordered by (workspace, name), as the full pass
        // sorts it: the first Location reaching a SyncTarget names it.
        let matching: Vec<&Location> = matching
            .into_iter()
            .filter_map(|id| self.locations.get(id))
            .filter(|l| granted(l))
            .collect();
        let mut by_target: BTreeMap<Id, SinglePlacement> = BTreeMap::new();
        for loc in &matching {
            let cluster = loc.cluster.as_str();
            for name in self
                .targets_by_workspace
                .candidates(cluster, &loc.instance_selector)
            {
                let id = (cluster.to_string(), name.clone());
                let Some(t) = self.targets.get(&id) else { continue };
                if !loc.instance_selector.matches(&t.labels) {
                    continue;
                }
                by_target.entry(id).or_insert_with(|| SinglePlacement {
                    cluster: t.cluster.clone(),
                    location_name: loc.name.clone(),
                    sync_target_name: t.name.clone(),
                    sync_target_uid: t.uid.clone(),
                });
            }
        }
        (matching.len(), by_target.into_values().collect())
    }
}

/// A full rebuild's twin, for the watch: what a stored Location or
/// SyncTarget (`None`: deleted) is to the index.
impl InventoryIndex {
    pub fn apply_location(&mut self, cluster: &str, name: &str, obj: Option<&serde_json::Value>) {
        match obj.and_then(|o| resolve::Location::from_object(cluster, o)) {
            Some(l) => self.put_location(l),
            None => self.remove_location(cluster, name),
        }
    }

    pub fn apply_target(&mut self, cluster: &str, name: &str, obj: Option<&serde_json::Value>) {
        match obj.and_then(|o| resolve::Target::from_object(cluster, o)) {
            Some(t) => self.put_target(t),
            None => self.remove_target(cluster, name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use serde_json::{json, Value};

    const CLUSTERS: &[&str] = &["imw-a", "imw-b", "imw-c"];
    use ferry_multicluster::random_labels::{labels, selector_json};

    fn location(rng: &mut StdRng, name: &str) -> Value {
        let mut obj = json!({"metadata": {"name": name, "labels": labels(rng)}, "spec": {}});
        if !rng.random_ratio(1, 6) {
            obj["spec"]["instanceSelector"] = selector_json(rng);
        }
        obj
    }

    fn target(rng: &mut StdRng, name: &str) -> Value {
        let mut obj = json!({"metadata": {"name": name, "uid": format!("uid-{name}-{}", rng.random::<u16>()),
                                          "labels": labels(rng)}});
        if rng.random_ratio(1, 10) {
            obj["metadata"]["deletionTimestamp"] = json!("2026-11-27T00:00:00Z");
        }
        obj
    }

    fn full_pass(
        stored_locations: &BTreeMap<Id, Value>,
        stored_targets: &BTreeMap<Id, Value>,
        selectors: &[LabelSelector],
        granted: impl Fn(&Location) -> bool,
    ) -> (usize, Vec<SinglePlacement>) {
        let locations: Vec<Location> = stored_locations
            .iter()
            .filter_map(|((c, _), v)| Location::from_object(c, v))
            .collect();
        let targets: Vec<Target> = stored_targets
            .iter()
            .filter_map(|((c, _), v)| Target::from_object(c, v))
            .collect();
        resolve::resolve(selectors, &locations, &targets, granted)
    }

    /// Random creates, updates and deletes of Locations and SyncTargets,
    /// applied to the index one at a time as the watch delivers them; after
    /// each, random placements resolve the same through the index as
    /// through the full pass over the stored objects.
    #[test]
    fn the_index_resolves_as_the_full_pass_over_random_changes() {
        for seed in 0..20u64 {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut stored_locations: BTreeMap<Id, Value> = BTreeMap::new();
            let mut stored_targets: BTreeMap<Id, Value> = BTreeMap::new();
            let mut index = InventoryIndex::default();
            for step in 0..150 {
                let cluster = CLUSTERS[rng.random_range(0..CLUSTERS.len())];
                let name = format!("n{}", rng.random_range(0..12));
                let id = (cluster.to_string(), name.clone());
                let delete = rng.random_ratio(1, 5);
                if rng.random_bool(0.5) {
                    let obj = (!delete).then(|| location(&mut rng, &name));
                    index.apply_location(cluster, &name, obj.as_ref());
                    match obj {
                        Some(o) => stored_locations.insert(id, o),
                        None => stored_locations.remove(&id),
                    };
                } else {
                    let obj = (!delete).then(|| target(&mut rng, &name));
                    index.apply_target(cluster, &name, obj.as_ref());
                    match obj {
                        Some(o) => stored_targets.insert(id, o),
                        None => stored_targets.remove(&id),
                    };
                }
                for _ in 0..3 {
                    let selectors: Vec<LabelSelector> = (0..rng.random_range(0..3))
                        .map(|_| {
                            LabelSelector::from_label_selector_json(&selector_json(&mut rng))
                                .unwrap_or_else(|_| LabelSelector::nothing())
                        })
                        .collect();
                    let denied = CLUSTERS[rng.random_range(0..CLUSTERS.len())];
                    let granted = |l: &Location| l.cluster != denied && !l.name.ends_with('7');
                    assert_eq!(
                        index.resolve(&selectors, granted),
                        full_pass(&stored_locations, &stored_targets, &selectors, granted),
                        "seed {seed}, step {step}, selectors {selectors:?}"
                    );
                }
            }
            let rebuilt = InventoryIndex::of(
                stored_locations
                    .iter()
                    .filter_map(|((c, _), v)| Location::from_object(c, v)),
                stored_targets
                    .iter()
                    .filter_map(|((c, _), v)| Target::from_object(c, v)),
            );
            assert!(
                rebuilt.locations_by_label == index.locations_by_label
                    && rebuilt.targets_by_workspace == index.targets_by_workspace,
                "seed {seed}: the index kept up by changes holds no stale entries"
            );
        }
    }

    #[test]
    fn a_location_reaches_only_its_own_workspaces_targets_through_the_index() {
        let loc = |cluster: &str| {
            Location::from_object(
                cluster,
                &json!({"metadata": {"name": "edge", "labels": {"env": "prod"}},
                        "spec": {"instanceSelector": {"matchLabels": {"id": "one"}}}}),
            )
            .unwrap()
        };
        let target = |cluster: &str| {
            Target::from_object(
                cluster,
                &json!({"metadata": {"name": "one", "uid": format!("uid-{cluster}"), "labels": {"id": "one"}}}),
            )
            .unwrap()
        };
        let index = InventoryIndex::of([loc("imw-a")], [target("imw-a"), target("mal")]);
        let prod = LabelSelector::parse("env=prod").unwrap();
        let (n, dests) = index.resolve(std::slice::from_ref(&prod), |_| true);
        assert_eq!(n, 1);
        assert_eq!(
            dests.len(),
            1,
            "the same label in another workspace is not reached"
        );
        assert_eq!(dests[0].sync_target_uid, "uid-imw-a");
        assert_eq!(index.resolve(&[prod], |l| l.cluster != "imw-a"), (0, Vec::new()));
    }
}
