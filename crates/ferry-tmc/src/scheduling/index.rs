//! What the kcp TMC scheduler knows of SyncTargets, Locations and
//! Placements, indexed so that one change costs what it touches: targets by
//! key, by workspace and by label; Locations by label and by the equality
//! requirement of their `instanceSelector`; Placements by workspace and by
//! the location workspace they name. Kept up to date from the store's watch
//! one object at a time (`apply_*`), rebuilt on a resync ([`SchedulingIndex::reset`]).
//!
//! Every question it answers has a full-pass twin over the same objects
//! ([`targets::members`], [`placement::selects_location`], a Placement's
//! `spec.locationWorkspace` resolved), and gives the same answer (the
//! property test below holds it to that); it only visits fewer objects.
//! Lookups stay inside one workspace, as the full pass does: a label in
//! another workspace is never reached.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use ferry_server::selector::LabelSelector;
use ferry_server::storage::StoredObject;
use serde_json::Value;

use super::placement::{self, Compiled};
use super::targets::{self, Target};
use ferry_multicluster::label_index::{narrowest, remove_from, WorkspaceLabels};

/// `(logical cluster, name)`.
type Id = (String, String);

/// A Location as the scheduler evaluates it: its value, labels and
/// `instanceSelector`, parsed once per change.
#[derive(Debug, Clone)]
pub struct Location {
    pub cluster: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub instance_selector: LabelSelector,
    pub value: Value,
}

impl Location {
    /// The Location `obj` stored in `cluster`.
    pub fn from_object(cluster: &str, obj: &Value) -> Option<Location> {
        let name = obj.pointer("/metadata/name")?.as_str()?.to_string();
        Some(Location {
            cluster: cluster.to_string(),
            name,
            labels: targets::labels_of(obj),
            instance_selector: targets::selector(obj.pointer("/spec/instanceSelector")),
            value: obj.clone(),
        })
    }

    /// The equality requirement (`key`, its values) its `instanceSelector`
    /// is indexed under: the one with the fewest values; `None` when it has
    /// none and every target of its workspace is a candidate.
    fn anchor(&self) -> Option<(&str, &[String])> {
        use ferry_server::selector::Operator;
        self.instance_selector
            .requirements()
            .iter()
            .filter(|r| {
                matches!(
                    r.operator(),
                    Operator::Equals | Operator::DoubleEquals | Operator::In
                )
            })
            .min_by_key(|r| r.values().len())
            .map(|r| (r.key(), r.values()))
    }
}

/// SyncTargets, Locations and Placements, indexed.
#[derive(Default)]
pub struct SchedulingIndex {
    targets: HashMap<Id, Target>,
    /// `sync_target_key` → the target.
    target_ids: HashMap<String, Id>,
    /// SyncTargets' names by workspace and label.
    targets_by_workspace: WorkspaceLabels,
    locations: BTreeMap<Id, Location>,
    /// `(workspace, label key, value)` → Locations there carrying it.
    locations_by_label: HashMap<(String, String, String), BTreeSet<String>>,
    /// `(workspace, key, value)` → Locations whose `instanceSelector`'s
    /// anchor ([`Location::anchor`]) asks for that label.
    locations_by_anchor: HashMap<(String, String, String), BTreeSet<String>>,
    /// Workspace → Locations without an anchor (any target may be theirs).
    unanchored: HashMap<String, BTreeSet<String>>,
    placements: BTreeMap<Id, Arc<Compiled>>,
    /// `spec.locationWorkspace` as written (`""`: the Placement's own
    /// workspace) → the workspaces with Placements naming it, and how many.
    placements_by_path: HashMap<String, BTreeMap<String, usize>>,
    /// `(workspace, status.selectedLocation.locationName)` → the Placements
    /// there on that Location: those a change of its members re-decides.
    placements_by_location: HashMap<(String, String), BTreeSet<String>>,
}

impl SchedulingIndex {
    /// Start over from every stored SyncTarget, Location and Placement (a
    /// resync): nothing a missed deletion left behind survives.
    pub fn reset<'a>(
        &mut self,
        targets: impl IntoIterator<Item = (&'a str, Value)>,
        locations: impl IntoIterator<Item = (&'a str, Value)>,
        placements: impl IntoIterator<Item = (&'a str, &'a Arc<StoredObject>)>,
    ) {
        *self = SchedulingIndex::default();
        for (cluster, t) in targets {
            if let Some(t) = Target::from_object(cluster, &t) {
                self.put_target(t);
            }
        }
        for (cluster, l) in locations {
            if let Some(l) = Location::from_object(cluster, &l) {
                self.put_location(l);
            }
        }
        for (cluster, p) in placements {
            self.apply_placement(cluster, &name_of(&p.value()), Some(p));
        }
    }

    // ------------------------------------------------------------ targets

    /// A SyncTarget stored (`obj`) or deleted (`None`): what it was and
    /// what it is now, as the scheduler sees it.
    pub fn apply_target(
        &mut self,
        cluster: &str,
        name: &str,
        obj: Option<&Value>,
    ) -> (Option<Target>, Option<Target>) {
        let old = self.remove_target(cluster, name);
        let new = obj.and_then(|o| Target::from_object(cluster, o));
        if let Some(t) = &new {
            self.put_target(t.clone());
        }
        (old, new)
    }

    fn put_target(&mut self, t: Target) {
        self.remove_target(&t.cluster, &t.name);
        let id = (t.cluster.clone(), t.name.clone());
        self.targets_by_workspace.insert(&t.cluster, &t.name, &t.labels);
        self.target_ids.insert(t.key.clone(), id.clone());
        self.targets.insert(id, t);
    }

    fn remove_target(&mut self, cluster: &str, name: &str) -> Option<Target> {
        let old = self.targets.remove(&(cluster.to_string(), name.to_string()))?;
        self.target_ids.remove(&old.key);
        self.targets_by_workspace.remove(cluster, name, &old.labels);
        Some(old)
    }

    /// The SyncTarget whose `sync_target_key` is `key`.
    pub fn target_by_key(&self, key: &str) -> Option<&Target> {
        self.target_ids.get(key).and_then(|id| self.targets.get(id))
    }

    /// Whether workspace `cluster` has a SyncTarget.
    pub fn has_targets(&self, cluster: &str) -> bool {
        self.targets_by_workspace.has(cluster)
    }

    /// Every SyncTarget's `spec.evictAfter` that has one.
    pub fn evictions(&self) -> impl Iterator<Item = chrono::DateTime<chrono::Utc>> + '_ {
        self.targets.values().filter_map(|t| t.evict_after)
    }

    /// The SyncTargets of the Location `cluster`/`name` selects (its
    /// workspace's, by `instanceSelector`), by name: [`targets::members`]
    /// over the workspace's targets.
    pub fn members(&self, cluster: &str, name: &str) -> Vec<&Target> {
        let Some(loc) = self.locations.get(&(cluster.to_string(), name.to_string())) else {
            return Vec::new();
        };
        self.targets_by_workspace
            .candidates(cluster, &loc.instance_selector)
            .into_iter()
            .filter_map(|n| self.targets.get(&(cluster.to_string(), n.clone())))
            .filter(|t| loc.instance_selector.matches(&t.labels))
            .collect()
    }

    // ---------------------------------------------------------- locations

    /// A Location stored (`obj`) or deleted (`None`): what it was.
    pub fn apply_location(&mut self, cluster: &str, name: &str, obj: Option<&Value>) -> Option<Location> {
        let old = self.remove_location(cluster, name);
        if let Some(l) = obj.and_then(|o| Location::from_object(cluster, o)) {
            self.put_location(l);
        }
        old
    }

    fn put_location(&mut self, l: Location) {
        self.remove_location(&l.cluster, &l.name);
        for (k, v) in &l.labels {
            self.locations_by_label
                .entry((l.cluster.clone(), k.clone(), v.clone()))
                .or_default()
                .insert(l.name.clone());
        }
        match l.anchor() {
            Some((k, values)) => {
                for v in values {
                    self.locations_by_anchor
                        .entry((l.cluster.clone(), k.to_string(), v.clone()))
                        .or_default()
                        .insert(l.name.clone());
                }
            }
            None => {
                self.unanchored
                    .entry(l.cluster.clone())
                    .or_default()
                    .insert(l.name.clone());
            }
        }
        self.locations.insert((l.cluster.clone(), l.name.clone()), l);
    }

    fn remove_location(&mut self, cluster: &str, name: &str) -> Option<Location> {
        let old = self.locations.remove(&(cluster.to_string(), name.to_string()))?;
        for (k, v) in &old.labels {
            remove_from(
                &mut self.locations_by_label,
                (cluster.to_string(), k.clone(), v.clone()),
                name,
            );
        }
        match old.anchor() {
            Some((k, values)) => {
                for v in values {
                    remove_from(
                        &mut self.locations_by_anchor,
                        (cluster.to_string(), k.to_string(), v.clone()),
                        name,
                    );
                }
            }
            None => remove_from(&mut self.unanchored, cluster.to_string(), name),
        }
        Some(old)
    }

    pub fn location(&self, cluster: &str, name: &str) -> Option<&Location> {
        self.locations.get(&(cluster.to_string(), name.to_string()))
    }

    /// The Locations of workspace `cluster`, by name.
    pub fn locations_in<'a>(&'a self, cluster: &str) -> impl Iterator<Item = &'a Location> + 'a {
        let cluster = cluster.to_string();
        self.locations
            .range((cluster.clone(), String::new())..)
            .take_while(move |((c, _), _)| *c == cluster)
            .map(|(_, l)| l)
    }

    /// The names of the Locations of `cluster` whose `instanceSelector`
    /// selects one of `targets` (of that workspace): whose members a change
    /// of those targets can change.
    pub fn locations_selecting(&self, cluster: &str, targets: &[&Target]) -> BTreeSet<String> {
        let mut candidates: BTreeSet<&String> = self.unanchored.get(cluster).into_iter().flatten().collect();
        for t in targets {
            for (k, v) in &t.labels {
                if let Some(names) =
                    self.locations_by_anchor
                        .get(&(cluster.to_string(), k.clone(), v.clone()))
                {
                    candidates.extend(names);
                }
            }
        }
        candidates
            .into_iter()
            .filter(|n| {
                self.location(cluster, n)
                    .is_some_and(|l| targets.iter().any(|t| l.instance_selector.matches(&t.labels)))
            })
            .cloned()
            .collect()
    }

    /// The Locations of `cluster` the Placement selects
    /// ([`placement::selects_location`]), by name.
    pub fn locations_selected_by<'a>(&'a self, cluster: &str, p: &Compiled) -> Vec<&'a Location> {
        let selectors = p.location_selectors();
        let mut names: BTreeSet<&String> = BTreeSet::new();
        let mut scan = selectors.is_empty();
        for s in selectors {
            match narrowest(s, |k, v| {
                self.locations_by_label
                    .get(&(cluster.to_string(), k.to_string(), v.to_string()))
            }) {
                Some(candidates) => names.extend(candidates),
                None => scan = true,
            }
        }
        let candidates: Vec<&Location> = if scan {
            self.locations_in(cluster).collect()
        } else {
            names
                .into_iter()
                .filter_map(|n| self.location(cluster, n))
                .collect()
        };
        candidates
            .into_iter()
            .filter(|l| placement::selects_location(p, &l.value))
            .collect()
    }

    // --------------------------------------------------------- placements

    /// A Placement stored (`stored`) or deleted (`None`): what it was.
    pub fn apply_placement(
        &mut self,
        cluster: &str,
        name: &str,
        stored: Option<&Arc<StoredObject>>,
    ) -> Option<Arc<Compiled>> {
        let id = (cluster.to_string(), name.to_string());
        let old = self.placements.remove(&id);
        if let Some(old) = &old {
            if let Some(loc) = placement::selected_location(&old.value) {
                remove_from(
                    &mut self.placements_by_location,
                    (cluster.to_string(), loc.to_string()),
                    name,
                );
            }
            let path = path_of(&old.value);
            if let Some(by_ws) = self.placements_by_path.get_mut(&path) {
                if let Some(n) = by_ws.get_mut(cluster) {
                    *n -= 1;
                    if *n == 0 {
                        by_ws.remove(cluster);
                    }
                }
                if by_ws.is_empty() {
                    self.placements_by_path.remove(&path);
                }
            }
        }
        if let Some(stored) = stored {
            let new = placement::compiled(stored);
            *self
                .placements_by_path
                .entry(path_of(&new.value))
                .or_default()
                .entry(cluster.to_string())
                .or_default() += 1;
            if let Some(loc) = placement::selected_location(&new.value) {
                self.placements_by_location
                    .entry((cluster.to_string(), loc.to_string()))
                    .or_default()
                    .insert(name.to_string());
            }
            self.placements.insert(id, new);
        }
        old
    }

    /// The Placements of workspace `ws`, by name.
    pub fn placements_in<'a>(&'a self, ws: &str) -> impl Iterator<Item = &'a Arc<Compiled>> + 'a {
        let ws = ws.to_string();
        self.placements
            .range((ws.clone(), String::new())..)
            .take_while(move |((c, _), _)| *c == ws)
            .map(|(_, p)| p)
    }

    /// The Placements of `ws` whose `status.selectedLocation` names
    /// `location` (of whichever location workspace), by name.
    pub fn placements_on<'a>(
        &'a self,
        ws: &str,
        location: &str,
    ) -> impl Iterator<Item = &'a Arc<Compiled>> + 'a {
        let ws = ws.to_string();
        self.placements_by_location
            .get(&(ws.clone(), location.to_string()))
            .into_iter()
            .flatten()
            .filter_map(move |name| self.placements.get(&(ws.clone(), name.clone())))
    }

    pub fn placement(&self, ws: &str, name: &str) -> Option<&Arc<Compiled>> {
        self.placements.get(&(ws.to_string(), name.to_string()))
    }

    pub fn has_placements(&self, ws: &str) -> bool {
        self.placements_in(ws).next().is_some()
    }

    /// Every workspace with a Placement.
    pub fn placement_workspaces(&self) -> BTreeSet<String> {
        self.placements.keys().map(|(c, _)| c.clone()).collect()
    }

    /// The workspaces with a Placement taking Locations from
    /// `location_cluster`: naming no location workspace and in it, or
    /// naming a path that `resolve` (path → logical cluster) resolves to it.
    /// Each distinct path is resolved once.
    pub fn workspaces_placing_in(
        &self,
        location_cluster: &str,
        resolve: impl Fn(&str) -> Option<String>,
    ) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for (path, by_ws) in &self.placements_by_path {
            if path.is_empty() {
                if by_ws.contains_key(location_cluster) {
                    out.insert(location_cluster.to_string());
                }
            } else if resolve(path).as_deref() == Some(location_cluster) {
                out.extend(by_ws.keys().cloned());
            }
        }
        out
    }
}

/// A target is live while the index holds it.
impl super::assignment::LiveTargets for SchedulingIndex {
    fn is_live(&self, key: &str) -> bool {
        self.target_ids.contains_key(key)
    }
}

/// `spec.locationWorkspace`, `""` when absent or empty.
fn path_of(placement: &Value) -> String {
    placement
        .pointer("/spec/locationWorkspace")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn name_of(obj: &Value) -> String {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use serde_json::json;

    const CLUSTERS: &[&str] = &["org-a", "org-b", "org-c"];
    use ferry_multicluster::random_labels::{labels, selector_json};

    fn resource(rng: &mut StdRng) -> Value {
        if rng.random_ratio(1, 8) {
            json!({"group": "workload.kcp.io", "version": "v1alpha1", "resource": "clusters"})
        } else {
            json!({"group": "workload.kcp.io", "version": "v1alpha1", "resource": "synctargets"})
        }
    }

    fn location(rng: &mut StdRng, name: &str) -> Value {
        let mut obj = json!({"metadata": {"name": name, "labels": labels(rng)},
                             "spec": {"resource": resource(rng)}});
        if !rng.random_ratio(1, 6) {
            obj["spec"]["instanceSelector"] = selector_json(rng);
        }
        obj
    }

    fn target(rng: &mut StdRng, name: &str) -> Value {
        json!({"metadata": {"name": name, "labels": labels(rng)},
               "spec": {"unschedulable": rng.random_ratio(1, 5)}})
    }

    fn placement(rng: &mut StdRng, name: &str) -> Value {
        let mut spec = json!({});
        if rng.random_ratio(2, 3) {
            let selectors: Vec<Value> = (0..rng.random_range(0..3)).map(|_| selector_json(rng)).collect();
            spec["locationSelectors"] = json!(selectors);
        }
        match rng.random_range(0..4) {
            0 => {}
            1 => spec["locationWorkspace"] = json!(""),
            _ => {
                spec["locationWorkspace"] =
                    json!(format!("root:{}", CLUSTERS[rng.random_range(0..CLUSTERS.len())]))
            }
        }
        json!({"metadata": {"name": name}, "spec": spec})
    }

    /// `root:<cluster>` resolves to `<cluster>`; anything else to nothing.
    fn resolve(path: &str) -> Option<String> {
        path.strip_prefix("root:")
            .filter(|c| CLUSTERS.contains(c))
            .map(String::from)
    }

    struct Stored {
        targets: BTreeMap<Id, Value>,
        locations: BTreeMap<Id, Value>,
        placements: BTreeMap<Id, Arc<StoredObject>>,
    }

    impl Stored {
        fn targets_in(&self, cluster: &str) -> Vec<Target> {
            self.targets
                .iter()
                .filter(|((c, _), _)| c == cluster)
                .filter_map(|((c, _), v)| Target::from_object(c, v))
                .collect()
        }

        fn locations_in(&self, cluster: &str) -> Vec<(&String, &Value)> {
            self.locations
                .iter()
                .filter(|((c, _), _)| c == cluster)
                .map(|((_, n), v)| (n, v))
                .collect()
        }
    }

    fn stored_object(v: &Value) -> Arc<StoredObject> {
        Arc::new(StoredObject {
            rv: 1,
            json: v.to_string().into(),
            labels: BTreeMap::new(),
        })
    }

    /// Random creates, updates and deletes of SyncTargets, Locations and
    /// Placements, applied to the index one at a time as the watch delivers
    /// them; after each, every question the scheduler asks gets the same
    /// answer from the index as from the full pass over the stored objects.
    #[test]
    fn the_index_answers_as_the_full_pass_over_random_changes() {
        for seed in 0..12u64 {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut stored = Stored {
                targets: BTreeMap::new(),
                locations: BTreeMap::new(),
                placements: BTreeMap::new(),
            };
            let mut index = SchedulingIndex::default();
            for step in 0..120 {
                let cluster = CLUSTERS[rng.random_range(0..CLUSTERS.len())];
                let name = format!("n{}", rng.random_range(0..8));
                let id = (cluster.to_string(), name.clone());
                let delete = rng.random_ratio(1, 5);
                let what = rng.random_range(0..3);
                let ctx = format!("seed {seed}, step {step}");
                match what {
                    0 => {
                        let obj = (!delete).then(|| target(&mut rng, &name));
                        let before: Vec<Target> = stored.targets_in(cluster);
                        let (old, new) = index.apply_target(cluster, &name, obj.as_ref());
                        match &obj {
                            Some(o) => stored.targets.insert(id.clone(), o.clone()),
                            None => stored.targets.remove(&id),
                        };
                        assert_eq!(old, before.iter().find(|t| t.name == name).cloned(), "{ctx}");
                        assert_eq!(
                            new,
                            obj.as_ref().and_then(|o| Target::from_object(cluster, o)),
                            "{ctx}"
                        );
                        // The Locations whose members changed are among those
                        // the index names for the change, and those are exactly
                        // the ones selecting the target before or after.
                        let after = stored.targets_in(cluster);
                        let changed: Vec<&Target> = old.iter().chain(new.iter()).collect();
                        let affected = index.locations_selecting(cluster, &changed);
                        for (lname, lvalue) in stored.locations_in(cluster) {
                            let selects = changed.iter().any(|t| {
                                targets::selector(lvalue.pointer("/spec/instanceSelector")).matches(&t.labels)
                            });
                            assert_eq!(affected.contains(lname), selects, "{ctx}, location {lname}");
                            let keys = |ts: &[Target]| -> Vec<String> {
                                targets::members(ts, lvalue)
                                    .iter()
                                    .map(|t| t.key.clone())
                                    .collect()
                            };
                            if keys(&before) != keys(&after) {
                                assert!(affected.contains(lname), "{ctx}: {lname}'s members changed");
                            }
                        }
                    }
                    1 => {
                        let obj = (!delete).then(|| location(&mut rng, &name));
                        let old = index.apply_location(cluster, &name, obj.as_ref());
                        assert_eq!(old.map(|l| l.value), stored.locations.get(&id).cloned(), "{ctx}");
                        match obj {
                            Some(o) => stored.locations.insert(id, o),
                            None => stored.locations.remove(&id),
                        };
                    }
                    _ => {
                        let obj = (!delete).then(|| stored_object(&placement(&mut rng, &name)));
                        index.apply_placement(cluster, &name, obj.as_ref());
                        match obj {
                            Some(o) => stored.placements.insert(id, o),
                            None => stored.placements.remove(&id),
                        };
                    }
                }
                let compiled: Vec<Arc<Compiled>> =
                    stored.placements.values().map(placement::compiled).collect();
                for c in CLUSTERS {
                    // Members of every Location.
                    let all = stored.targets_in(c);
                    for (lname, lvalue) in stored.locations_in(c) {
                        let full: Vec<&str> = targets::members(&all, lvalue)
                            .iter()
                            .map(|t| t.key.as_str())
                            .collect();
                        let indexed: Vec<&str> =
                            index.members(c, lname).iter().map(|t| t.key.as_str()).collect();
                        assert_eq!(indexed, full, "{ctx}: members of {c}/{lname}");
                    }
                    assert_eq!(index.has_targets(c), !all.is_empty(), "{ctx}");
                    for t in &all {
                        assert_eq!(index.target_by_key(&t.key), Some(t), "{ctx}");
                    }
                    // The Locations each Placement selects there.
                    for p in &compiled {
                        let full: Vec<&String> = stored
                            .locations_in(c)
                            .into_iter()
                            .filter(|(_, l)| placement::selects_location(p, l))
                            .map(|(n, _)| n)
                            .collect();
                        let indexed: Vec<&String> = index
                            .locations_selected_by(c, p)
                            .iter()
                            .map(|l| &l.name)
                            .collect();
                        assert_eq!(indexed, full, "{ctx}: {} in {c}", p.value);
                    }
                    // The workspaces placing in it.
                    let full: BTreeSet<String> = stored
                        .placements
                        .iter()
                        .filter(|((ws, _), p)| {
                            let path = path_of(&p.value());
                            let lc = if path.is_empty() {
                                Some(ws.clone())
                            } else {
                                resolve(&path)
                            };
                            lc.as_deref() == Some(*c)
                        })
                        .map(|((ws, _), _)| ws.clone())
                        .collect();
                    assert_eq!(
                        index.workspaces_placing_in(c, resolve),
                        full,
                        "{ctx}: placing in {c}"
                    );
                    let names: Vec<String> = index.placements_in(c).map(|p| name_of(&p.value)).collect();
                    let full: Vec<String> = stored
                        .placements
                        .keys()
                        .filter(|(ws, _)| ws == c)
                        .map(|(_, n)| n.clone())
                        .collect();
                    assert_eq!(names, full, "{ctx}: placements in {c}");
                }
            }
            // What the changes left equals a rebuild from the stored objects.
            let mut rebuilt = SchedulingIndex::default();
            rebuilt.reset(
                stored.targets.iter().map(|((c, _), v)| (c.as_str(), v.clone())),
                stored.locations.iter().map(|((c, _), v)| (c.as_str(), v.clone())),
                stored.placements.iter().map(|((c, _), p)| (c.as_str(), p)),
            );
            assert!(
                rebuilt.target_ids == index.target_ids
                    && rebuilt.targets_by_workspace == index.targets_by_workspace
                    && rebuilt.locations_by_label == index.locations_by_label
                    && rebuilt.locations_by_anchor == index.locations_by_anchor
                    && rebuilt.unanchored == index.unanchored
                    && rebuilt.placements_by_path == index.placements_by_path
                    && rebuilt.placements_by_location == index.placements_by_location,
                "seed {seed}: the index kept up by changes holds no stale entries"
            );
        }
    }

    #[test]
    fn a_location_reaches_only_its_own_workspaces_targets() {
        let mut index = SchedulingIndex::default();
        let target = json!({"metadata": {"name": "one", "labels": {"id": "one"}}});
        index.apply_target("org", "one", Some(&target));
        index.apply_target("mal", "one", Some(&target));
        let loc = json!({"metadata": {"name": "edge"}, "spec": {"instanceSelector": {"matchLabels": {"id": "one"}}}});
        index.apply_location("org", "edge", Some(&loc));
        let members = index.members("org", "edge");
        assert_eq!(
            members.len(),
            1,
            "the same label in another workspace is not reached"
        );
        assert_eq!(members[0].cluster, "org");
        let mal_target = index
            .target_by_key(&ferry_api::workload::sync_target_key("mal", "one"))
            .unwrap()
            .clone();
        assert!(
            index.locations_selecting("mal", &[&mal_target]).is_empty(),
            "a target's change reaches no Location of another workspace"
        );
        assert!(index.members("mal", "edge").is_empty());
    }

    #[test]
    fn a_target_change_names_only_the_locations_that_select_it() {
        let mut index = SchedulingIndex::default();
        for i in 0..100 {
            let loc = json!({"metadata": {"name": format!("l{i}")},
                             "spec": {"instanceSelector": {"matchLabels": {"id": format!("t{i}")}}}});
            index.apply_location("org", &format!("l{i}"), Some(&loc));
        }
        let all = json!({"metadata": {"name": "all"}, "spec": {"instanceSelector": {}}});
        index.apply_location("org", "all", Some(&all));
        let (_, new) = index.apply_target(
            "org",
            "t7",
            Some(&json!({"metadata": {"name": "t7", "labels": {"id": "t7"}}})),
        );
        let new = new.unwrap();
        assert_eq!(
            index.locations_selecting("org", &[&new]),
            ["all".to_string(), "l7".to_string()].into_iter().collect()
        );
        assert_eq!(index.members("org", "l7").len(), 1);
        assert_eq!(index.members("org", "all").len(), 1);
        let (old, gone) = index.apply_target("org", "t7", None);
        assert!(gone.is_none() && old.is_some());
        assert!(index.members("org", "l7").is_empty() && !index.has_targets("org"));
    }

    #[test]
    fn placements_are_found_by_the_location_they_selected() {
        let mut index = SchedulingIndex::default();
        let p = |name: &str, location: Option<&str>| {
            let mut v = json!({"metadata": {"name": name}, "spec": {}});
            if let Some(l) = location {
                v["status"] = json!({"selectedLocation": {"path": "root:org", "locationName": l}});
            }
            stored_object(&v)
        };
        index.apply_placement("app", "p1", Some(&p("p1", Some("east"))));
        index.apply_placement("app", "p2", Some(&p("p2", Some("west"))));
        index.apply_placement("app", "p3", Some(&p("p3", None)));
        index.apply_placement("other", "p1", Some(&p("p1", Some("east"))));
        let on = |index: &SchedulingIndex, ws: &str, l: &str| -> Vec<String> {
            index.placements_on(ws, l).map(|p| name_of(&p.value)).collect()
        };
        assert_eq!(on(&index, "app", "east"), ["p1"], "only its own workspace's");
        // A Placement that selects another Location moves with it.
        index.apply_placement("app", "p2", Some(&p("p2", Some("east"))));
        assert_eq!(on(&index, "app", "east"), ["p1", "p2"]);
        assert!(on(&index, "app", "west").is_empty());
        index.apply_placement("app", "p1", None);
        assert_eq!(on(&index, "app", "east"), ["p2"]);
    }

    #[test]
    fn placements_are_found_by_the_workspace_their_locations_come_from() {
        let mut index = SchedulingIndex::default();
        let p = |path: Option<&str>| {
            let mut v = json!({"metadata": {"name": "p"}, "spec": {}});
            if let Some(path) = path {
                v["spec"]["locationWorkspace"] = json!(path);
            }
            stored_object(&v)
        };
        index.apply_placement("org-a", "p", Some(&p(None)));
        index.apply_placement("org-b", "p", Some(&p(Some("root:org-a"))));
        index.apply_placement("org-c", "p", Some(&p(Some("root:nowhere"))));
        let placing = index.workspaces_placing_in("org-a", resolve);
        assert_eq!(
            placing,
            ["org-a".to_string(), "org-b".to_string()].into_iter().collect()
        );
        // Moving a Placement elsewhere takes its workspace off the list.
        index.apply_placement("org-b", "p", Some(&p(Some("root:org-c"))));
        assert_eq!(index.workspaces_placing_in("org-a", resolve).len(), 1);
        index.apply_placement("org-a", "p", None);
        assert!(index.workspaces_placing_in("org-a", resolve).is_empty());
        assert!(!index.has_placements("org-a") && index.has_placements("org-b"));
    }
}
