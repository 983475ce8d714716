//! The KubeStellar profile: the edge syncer of KubeStellar's mailbox workspaces.
//!
//! - Selection: the merge of every SyncerConfig and EdgeSyncConfig in the upstream
//!   workspace ([`crate::selection::SyncSelection`]), re-merged whenever one changes.
//! - Mapping: a copy has its source's type, namespace and name, except where an
//!   EdgeSyncConfig's `conversions` denature and renature it ([`denature`]).
//! - Marks: the annotation `edge.kubestellar.io/downsynced` (or `.../upsynced`) valued
//!   `<Kind>/<namespace>/<name>`, and the label `ferry.dev/syncer: <name>` for
//!   server-side filtering (see [`crate::transform::is_owned_by`]);
//!   `edge.kubestellar.io/downsync-overwrite: "false"` makes a copy create-only.
//! - Configuration source: the SyncerConfigs ([`config`]), with conditions and
//!   heartbeats written back onto each of them ([`heartbeat`]).

pub mod config;
pub mod denature;
pub mod heartbeat;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use serde_json::Value;

use ferry_api::well_known::{
    owned_value, syncer_label_value, DOWNSYNCED_ANNOTATION, SYNCER_LABEL, UPSYNCED_ANNOTATION,
};

use crate::engine::{Engine, ObjectRef};
use crate::profile::{ConfigSource, Mapping, Marks, Plan, Profile, ResourceType, Selection};
use crate::selection::{Direction, DiscoveredResource, ResourceId, SyncSelection, WatchTarget};
use crate::side::Side;
use crate::transform::{allows_overwrite, is_owned_by, mark, release_patch};

use config::ConfigState;
use denature::Conversions;
use ferry_api::edge::{EdgeSyncConfig, SyncSwitches};

/// Upstream and downstream discovery.
type BothSides = (Arc<Vec<DiscoveredResource>>, Arc<Vec<DiscoveredResource>>);

/// The SyncerConfigs as last seen and their merge: the KubeStellar profile's selection
/// and configuration source.
pub struct KubeStellar {
    syncer_name: String,
    heartbeat_period: Duration,
    /// The SyncerConfigs as last seen.
    pub configs: ConfigState,
    /// The EdgeSyncConfigs as last seen.
    pub edge_configs: ConfigState<EdgeSyncConfig>,
    selection: RwLock<Arc<SyncSelection>>,
    conversions: RwLock<Arc<Conversions>>,
    /// Reported-state return and delete propagation, merged over the configs.
    switches: RwLock<SyncSwitches>,
    /// Both sides' discovery as last resolved (upstream, downstream): where a renamed
    /// kind is served.
    discovery: RwLock<BothSides>,
    revision: AtomicU64,
    /// The False conditions already logged, so each is logged once per change.
    pub logged: heartbeat::LoggedConditions,
    /// Whether the drifts an earlier run listed on the SyncerConfigs were taken over.
    pub drifts_taken_over: std::sync::atomic::AtomicBool,
}

impl KubeStellar {
    /// The profile for syncer `syncer_name`, writing heartbeats every `heartbeat_period`.
    pub fn profile(syncer_name: &str, heartbeat_period: Duration) -> Profile {
        let state = Arc::new(KubeStellar::new(syncer_name, heartbeat_period));
        Profile {
            name: "kubestellar",
            selection: state.clone(),
            mapping: state.clone(),
            marks: Arc::new(KubeStellarMarks::new(syncer_name)),
            config: state,
            upstream_clusters: false,
            namespace_clean_delay: None,
            upstream_takes_events: true,
            objects_per_worker: 1,
        }
    }

    fn new(syncer_name: &str, heartbeat_period: Duration) -> Self {
        KubeStellar {
            syncer_name: syncer_name.to_string(),
            heartbeat_period,
            configs: ConfigState::default(),
            edge_configs: ConfigState::default(),
            selection: RwLock::new(Arc::new(SyncSelection::default())),
            conversions: RwLock::new(Arc::new(Conversions::default())),
            switches: RwLock::new(SyncSwitches::default()),
            discovery: RwLock::default(),
            revision: AtomicU64::new(0),
            logged: heartbeat::LoggedConditions::default(),
            drifts_taken_over: Default::default(),
        }
    }

    /// The current merged selection.
    pub fn current(&self) -> Arc<SyncSelection> {
        self.selection.read().clone()
    }

    /// The current conversions.
    pub fn conversions(&self) -> Arc<Conversions> {
        self.conversions.read().clone()
    }

    /// Replaces the selection and the conversions; returns whether either changed.
    pub fn set_selection(&self, selection: SyncSelection, conversions: Conversions) -> bool {
        let mut current = self.selection.write();
        let mut current_conversions = self.conversions.write();
        if **current == selection && **current_conversions == conversions {
            return false;
        }
        *current = Arc::new(selection);
        *current_conversions = Arc::new(conversions);
        self.revision.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Replaces the merged switches; returns whether they changed (every key is then
    /// reconciled again, so copies kept while deletion was off go once it is on).
    pub fn set_switches(&self, switches: SyncSwitches) -> bool {
        let mut current = self.switches.write();
        if *current == switches {
            return false;
        }
        *current = switches;
        self.revision.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// The current merged switches.
    pub fn switches(&self) -> SyncSwitches {
        *self.switches.read()
    }

    /// The syncer's name.
    pub fn syncer_name(&self) -> &str {
        &self.syncer_name
    }
}

impl Selection for KubeStellar {
    fn is_loaded(&self) -> bool {
        self.configs.is_loaded() && self.edge_configs.is_loaded()
    }

    fn revision(&self) -> u64 {
        self.revision.load(Ordering::Relaxed)
    }

    fn resolve(&self, upstream: &[DiscoveredResource], downstream: &[DiscoveredResource]) -> Plan {
        let selection = self.current();
        *self.discovery.write() = (Arc::new(upstream.to_vec()), Arc::new(downstream.to_vec()));
        Plan {
            downsync: selection.resolve_downsync(upstream),
            upsync: selection.resolve_upsync(downstream),
        }
    }

    fn wants(&self, target: &WatchTarget, source: &ObjectRef, _: &Value) -> bool {
        self.selection
            .read()
            .wants(target, source.namespace.as_deref(), &source.name)
    }

    fn copies_namespace(&self, namespace: &str) -> bool {
        let namespaces = ResourceId::new("", "v1", "namespaces", false);
        self.selection.read().wants_downsync(&namespaces, None, namespace)
    }
}

/// Denaturing: see [`denature`]. Without conversions, the identity.
impl Mapping for KubeStellar {
    fn dest_type(&self, target: &WatchTarget) -> ResourceType {
        let discovery = self.discovery.read();
        let dest_side = match target.direction {
            Direction::Downsync => &discovery.1,
            Direction::Upsync => &discovery.0,
        };
        self.conversions().dest_type(target, dest_side)
    }

    fn dest_ref(&self, target: &WatchTarget, source: &ObjectRef) -> ObjectRef {
        self.conversions.read().dest_ref(target, source)
    }

    fn source_ref(&self, target: &WatchTarget, dest: &ObjectRef) -> Option<ObjectRef> {
        let conversions = self.conversions();
        if conversions.is_empty() {
            return Some(dest.clone());
        }
        conversions.source_ref(target, &self.dest_type(target), dest)
    }

    fn transform(&self, target: &WatchTarget, source_key: &ObjectRef, _source: &Value, copy: &mut Value) {
        self.conversions.read().transform(target, source_key, copy);
    }

    /// `returnReportedState` of the configs (merged: off if any turns it off).
    fn returns_status(&self, _: &WatchTarget, _: bool) -> bool {
        self.switches().return_reported_state
    }

    /// `propagateDeletion` of the configs (merged: off if any turns it off).
    fn propagates_deletion(&self) -> bool {
        self.switches().propagate_deletion
    }
}

impl ConfigSource for KubeStellar {
    fn start(self: Arc<Self>, engine: &Arc<Engine>) -> Vec<tokio::task::JoinHandle<()>> {
        vec![
            crate::spawn(config::watch_configs(engine.clone(), self.clone())),
            crate::spawn(config::watch_edge_configs(engine.clone(), self.clone())),
            crate::spawn(heartbeat::status_loop(
                engine.clone(),
                self.clone(),
                self.heartbeat_period,
            )),
        ]
    }
}

/// KubeStellar's ownership marks (annotation plus the Ferry owner label).
pub struct KubeStellarMarks {
    syncer_name: String,
}

impl KubeStellarMarks {
    /// The marks of syncer `syncer_name`.
    pub fn new(syncer_name: &str) -> Self {
        KubeStellarMarks {
            syncer_name: syncer_name.to_string(),
        }
    }
}

/// The annotation that marks a copy travelling in `direction`.
fn copy_annotation(direction: Direction) -> &'static str {
    match direction {
        Direction::Downsync => DOWNSYNCED_ANNOTATION,
        Direction::Upsync => UPSYNCED_ANNOTATION,
    }
}

/// The direction whose copies live on `side`.
fn copies_on(side: Side) -> Direction {
    match side {
        Side::Downstream => Direction::Downsync,
        Side::Upstream => Direction::Upsync,
    }
}

impl Marks for KubeStellarMarks {
    fn copy_selector(&self, _: Side) -> String {
        format!("{SYNCER_LABEL}={}", syncer_label_value(&self.syncer_name))
    }

    fn mark(&self, copy: &mut Value, direction: Direction) {
        let kind = copy
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        mark(copy, copy_annotation(direction), &kind, &self.syncer_name);
    }

    fn is_own_copy(&self, obj: &Value) -> bool {
        is_owned_by(obj, &self.syncer_name)
    }

    /// Owned by the syncer ([`is_owned_by`]), marked as a copy *for this side*
    /// (`downsynced` downstream, `upsynced` upstream) so that a source which merely
    /// carries the other mark is never taken for a copy, not already being deleted, and
    /// not a create-only downstream copy (`downsync-overwrite: "false"`).
    fn is_orphaned_copy(&self, obj: &Value, side: Side) -> bool {
        let meta = &obj["metadata"];
        let (Some(kind), Some(name)) = (obj["kind"].as_str(), meta["name"].as_str()) else {
            return false;
        };
        let direction = copies_on(side);
        let marked_here = meta["annotations"][copy_annotation(direction)].as_str()
            == Some(owned_value(kind, meta["namespace"].as_str(), name).as_str());
        let deleting = !meta["deletionTimestamp"].is_null();
        marked_here && self.is_own_copy(obj) && !deleting && !self.is_create_only(obj, direction)
    }

    fn is_create_only(&self, obj: &Value, direction: Direction) -> bool {
        direction == Direction::Downsync && !allows_overwrite(obj)
    }

    fn release_patch(&self) -> Value {
        release_patch()
    }

    fn describe(&self, direction: Direction) -> String {
        copy_annotation(direction).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_api::well_known::DOWNSYNC_OVERWRITE_ANNOTATION;
    use serde_json::json;

    fn object(kind: &str, namespace: Option<&str>, name: &str, labels: Value, annotations: Value) -> Value {
        let mut meta = json!({ "name": name, "labels": labels, "annotations": annotations });
        if let Some(ns) = namespace {
            meta["namespace"] = json!(ns);
        }
        json!({ "apiVersion": "v1", "kind": kind, "metadata": meta })
    }

    fn labelled_secret(annotations: Value) -> Value {
        object(
            "Secret",
            Some("app"),
            "drop",
            json!({ SYNCER_LABEL: "florin" }),
            annotations,
        )
    }

    fn marks() -> KubeStellarMarks {
        KubeStellarMarks::new("florin")
    }

    #[test]
    fn an_orphaned_copy_is_owned_and_marked_for_the_side_it_is_on() {
        let down = labelled_secret(json!({ DOWNSYNCED_ANNOTATION: "Secret/app/drop" }));
        assert!(marks().is_orphaned_copy(&down, Side::Downstream));
        assert!(
            !marks().is_orphaned_copy(&down, Side::Upstream),
            "a downsynced mark upstream is a source's, not a copy's"
        );
        let up = labelled_secret(json!({ UPSYNCED_ANNOTATION: "Secret/app/drop" }));
        assert!(marks().is_orphaned_copy(&up, Side::Upstream));
        assert!(!marks().is_orphaned_copy(&up, Side::Downstream));
    }

    #[test]
    fn another_syncers_or_an_inherited_mark_is_not_an_orphan() {
        let other = object(
            "Secret",
            Some("app"),
            "drop",
            json!({ SYNCER_LABEL: "guilder" }),
            json!({ DOWNSYNCED_ANNOTATION: "Secret/app/drop" }),
        );
        assert!(!marks().is_orphaned_copy(&other, Side::Downstream));
        let inherited = labelled_secret(json!({ DOWNSYNCED_ANNOTATION: "Secret/app/other" }));
        assert!(!marks().is_orphaned_copy(&inherited, Side::Downstream));
        let other_kind = labelled_secret(json!({ DOWNSYNCED_ANNOTATION: "ConfigMap/app/drop" }));
        assert!(!marks().is_orphaned_copy(&other_kind, Side::Downstream));
    }

    #[test]
    fn a_cluster_scoped_copy_is_marked_with_an_empty_namespace() {
        let ns = object(
            "Namespace",
            None,
            "app",
            json!({ SYNCER_LABEL: "florin" }),
            json!({ DOWNSYNCED_ANNOTATION: "Namespace//app" }),
        );
        assert!(marks().is_orphaned_copy(&ns, Side::Downstream));
    }

    #[test]
    fn create_only_and_deleting_copies_are_not_orphans_to_delete() {
        let create_only = labelled_secret(json!({
            DOWNSYNCED_ANNOTATION: "Secret/app/drop",
            DOWNSYNC_OVERWRITE_ANNOTATION: "false",
        }));
        assert!(!marks().is_orphaned_copy(&create_only, Side::Downstream));
        assert!(marks().is_create_only(&create_only, Direction::Downsync));
        assert!(!marks().is_create_only(&create_only, Direction::Upsync));
        let mut deleting = labelled_secret(json!({ DOWNSYNCED_ANNOTATION: "Secret/app/drop" }));
        deleting["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        assert!(!marks().is_orphaned_copy(&deleting, Side::Downstream));
    }

    #[test]
    fn copies_are_selected_by_the_owner_label() {
        assert_eq!(marks().copy_selector(Side::Downstream), "ferry.dev/syncer=florin");
        assert_eq!(marks().describe(Direction::Upsync), UPSYNCED_ANNOTATION);
    }

    #[test]
    fn the_selection_is_the_merge_of_the_syncer_configs() {
        let profile = KubeStellar::profile("florin", Duration::from_secs(20));
        let config: ferry_api::edge::SyncerConfig = serde_json::from_value(json!({
            "apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "SyncerConfig",
            "metadata": { "name": "the-one" },
            "spec": { "namespaceScope": { "namespaces": ["app"], "resources": [
                { "group": "", "apiVersion": "v1", "resource": "configmaps" }] } }
        }))
        .unwrap();
        let state = KubeStellar::new("florin", Duration::from_secs(20));
        assert!(state.set_selection(
            SyncSelection::from_configs(std::slice::from_ref(&config)).0,
            Conversions::default()
        ));
        assert!(
            !state.set_selection(SyncSelection::from_configs(&[config]).0, Conversions::default()),
            "unchanged"
        );
        assert_eq!(state.revision(), 1);
        let target = WatchTarget {
            id: ResourceId::new("", "v1", "configmaps", true),
            kind: "ConfigMap".into(),
            direction: Direction::Downsync,
        };
        let key = |ns: &str| ObjectRef {
            cluster: None,
            namespace: Some(ns.into()),
            name: "a".into(),
        };
        assert!(state.wants(&target, &key("app"), &Value::Null));
        assert!(!state.wants(&target, &key("other"), &Value::Null));
        assert!(state.copies_namespace("app"));
        assert!(!profile.selection.is_loaded(), "no configs listed yet");
    }
}
