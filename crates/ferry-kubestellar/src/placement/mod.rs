//! KubeStellar's placement, hub side: the where-resolver and the placement
//! translator, as one hub controller.
//!
//! - **Where** ([`resolve`]): each `EdgePlacement` (in a workload management
//!   workspace, WMW) reaches the SyncTargets of the Locations its
//!   `locationSelectors` match, in the inventory workspaces that grant its
//!   placer `bind` on them ([`grant`]). Recorded in the WMW as a
//!   `SinglePlacementSlice` of the same name (owned by the placement), and
//!   as `status.matchingLocationCount`. Nothing about a Location the
//!   placement is not granted shows anywhere in the WMW.
//! - **What** ([`select`]): the WMW objects its downsync members select
//!   (the older `namespaceSelector` / `nonNamespacedObjects` converted),
//!   plus the Namespaces of the namespaced ones.
//! - **Translation** ([`copy`]): into each destination's mailbox workspace
//!   go copies of those objects, labelled [`PLACED_LABEL`] (the translator
//!   never touches an object without it), and the SyncerConfig `the-one`,
//!   listing exactly the placed objects by name and the union of the
//!   placements' upsync sets. A copy is updated when its WMW object's
//!   content changes — unless that object says
//!   `edge.kubestellar.io/downsync-overwrite: "false"` (create only) — and
//!   deleted when no placement wants it there any more.
//! - **Customization** ([`customize`]): an object opted in with
//!   `edge.kubestellar.io/expand-parameters: "true"` gets its `%(name)`
//!   references replaced per destination (from the Location's, then the
//!   SyncTarget's, labels and annotations), and one naming a `Customizer`
//!   with `edge.kubestellar.io/customizer` gets its replacements. A copy
//!   that cannot be customized for a destination (an undefined parameter, a
//!   missing Customizer, a bad replacement) is not made there, and one
//!   already there is kept as it is; the placement's `CustomizationError`
//!   condition names the object, the destination and the problem. Every
//!   pass recomputes the copies, so a changed label, annotation or
//!   Customizer re-customizes them.
//! - **User transforms** ([`transform`]): the WMW's `CustomTransform`s
//!   (KubeStellar's, `control.kubestellar.io`) remove fields from every copy
//!   of the objects of the resource they name, and list the fields the
//!   workload clusters own, for the syncer to leave alone.
//! - **Conflicts**: two WMWs wanting different objects under one name in
//!   one mailbox: the copy already there stays (else the one from the
//!   first workspace path), and every placement involved gets a
//!   `Conflict` condition naming both sides. Decided the same way every
//!   time, so nothing flaps.
//! - **Reported state**: `kubestellar.io/executing-count` on each selected
//!   WMW object (the number of mailboxes holding its copy whose syncer
//!   acknowledged it: its SyncTarget Ready and `the-one` read at its current
//!   generation, `ferry_server::synctarget::edge::pending`); with
//!   `wantSingletonReportedState` and exactly one destination, that copy's
//!   status is written to the WMW object, and cleared again when the
//!   object stops going to that one destination ([`reported`]); objects the syncer upsynced into
//!   a mailbox (annotated `edge.kubestellar.io/upsynced`) that a placement's
//!   `upsync` names are copied into its WMW as `<syncTarget>-<name>`,
//!   labelled [`RETURNED_LABEL`]`=<syncTarget>`, when the SyncTarget's
//!   upsync allow-list lets them come up ([`grant::UpsyncAllow`]). Every placed object also
//!   gets a `PlacementSummary` ([`summary`]) in its WMW: each destination,
//!   whether it is synced (the mailbox holds the current copy and the
//!   syncer acknowledged it; else `pending: <why>`), and a status digest.
//!
//! Level-based: a pass (debounced) recomputes what every mailbox should hold
//! from the stored objects alone, so a restart (or a missed event)
//! converges on the next pass with nothing duplicated or left behind. What
//! a pass looks at follows what changed ([`changes`]): a change to WMW
//! objects only makes an *object pass*, which writes those objects' copies
//! (in the mailboxes that want them or hold them) and the `the-one`s that
//! list them; anything else, and the reported state after any change,
//! makes a *full pass* over every placement, mailbox and report, as on
//! start. The translator's own writes and the syncers' acknowledgements
//! only bring the next full pass within a settling time. Locations and SyncTargets
//! are read through an index the watch keeps current ([`index`]), so
//! resolving a placement visits only the Locations and SyncTargets its
//! selectors can reach, not every Location against every SyncTarget.

pub mod changes;
mod combined;
pub mod copy;
pub use ferry_server::customize;
mod facts;
pub use ferry_server::grants::edge as grant;
pub mod index;
pub mod reported;
pub mod resolve;
pub mod select;
pub mod summary;
pub mod transform;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use ferry_api::edge::{
    Customizer, DestinationSummary, EdgePlacementSpec, PlacementSummary, SinglePlacement,
    SinglePlacementSlice, SummarizedObject, UpsyncSet,
};
use ferry_api::well_known::{
    CUSTOMIZER_ANNOTATION, DOWNSYNC_OVERWRITE_ANNOTATION, EXECUTING_COUNT_ANNOTATION, UPSYNCED_ANNOTATION,
};
use futures::future::BoxFuture;
use futures::StreamExt;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

use super::mailbox::{mailbox_name, MAILBOX_PARENT, SYNC_TARGETS, SYNC_TARGET_UID_ANNOTATION};
use crate::follow::{self, Due, Follower, Passes};
use changes::{Change, Known, PlacementMark};
use copy::Listed;
use facts::{ContentDigest, CopyMemo};
use ferry_server::auth::UserInfo;
use ferry_server::controller::ControllerContext;
use ferry_server::kinds::edge::{placer_of, PLACED_BY_ANNOTATION};
use ferry_server::registry::ResourceInfo;
use ferry_server::service::{self, DeleteOptions, PatchType};
use ferry_server::status::ApiError;
use ferry_server::storage::{ClusterScope, EventType, ObjectKey, StoredObject, WatchEvent};
use ferry_server::workspace::WORKSPACES;
use index::InventoryIndex;
use select::{ObjectTest, SpecProblem};

/// Field manager of the translator's writes.
pub const MANAGER: &str = "ferry-placement-translator";
/// Label on everything the translator put in a mailbox (value `true`).
pub use ferry_api::edge::mailbox::PLACED_LABEL;
/// Annotation on a mailbox copy: the path of the WMW it came from.
pub const SOURCE_ANNOTATION: &str = "ferry.dev/placed-from";
/// Annotation on a mailbox copy: the WMW object's resourceVersion it was copied at.
pub const SOURCE_RV_ANNOTATION: &str = "ferry.dev/placed-from-resource-version";
/// Label on a WMW copy of an upsynced object: the SyncTarget it came from.
pub const RETURNED_LABEL: &str = "ferry.dev/upsynced-from";
/// Annotation on a WMW copy of an upsynced object: `<mailbox path>/<name>`.
pub const RETURNED_FROM_ANNOTATION: &str = "ferry.dev/upsynced-from-object";
/// The SyncerConfig the translator keeps in each mailbox.
pub const THE_ONE: &str = "the-one";
/// Storage keys read.
pub const EDGE_PLACEMENTS: &str = "edge.kubestellar.io/edgeplacements";
pub use grant::{EDGE_GROUP, LOCATIONS};
const CUSTOMIZERS: &str = "edge.kubestellar.io/customizers";
const CUSTOM_TRANSFORMS: &str = "control.kubestellar.io/customtransforms";
const SYNCER_CONFIGS: &str = "edge.kubestellar.io/syncerconfigs";
const EDGE_VERSION: &str = "v2alpha1";

/// Changes arriving within this long are handled by one pass.
const DEBOUNCE: Duration = Duration::from_millis(30);
/// After an object pass, or news about the reported state only, the full
/// pass that refreshes the reported state runs within this long. Half a
/// second, so that a cluster's new status reaches the CombinedStatus and the
/// summaries within a second including the pass itself (at a whole second
/// it took a second and the pass).
const SETTLE: Duration = Duration::from_millis(500);
/// A pass that could not finish (a mailbox not ready yet, a conflict on
/// write) runs again after this long, even without news.
const RETRY: Duration = Duration::from_millis(500);

/// Customization problems a placement's condition lists by name.
const MAX_CUSTOMIZATION_MESSAGES: usize = 10;

/// Mailboxes written at once in a pass.
const MAILBOX_CONCURRENCY: usize = 16;

/// API groups whose objects are never placed: the hub's own and Ferry's.
const NEVER_PLACED_GROUPS: &[&str] = &[
    "edge.kubestellar.io",
    "edge.ferry.dev",
    "control.kubestellar.io",
    "tenancy.kcp.io",
    "core.kcp.io",
    "apis.kcp.io",
    "workload.kcp.io",
    "scheduling.kcp.io",
    "apiresource.kcp.io",
    "syncagent.kcp.io",
    "events.k8s.io",
    "coordination.k8s.io",
];

/// Run the translator while `ctx`'s lease is held.
pub fn spawn(ctx: ControllerContext) -> JoinHandle<()> {
    follow::spawn(ctx, PlacementTranslator::default())
}

/// The translator as it follows the store: the inventory index the watch
/// keeps current, when the next pass is due and what it must look at, and
/// what the last full pass saw.
struct PlacementTranslator {
    inventory: InventoryIndex,
    passes: Passes,
    /// When the full pass refreshing the reported state is due, if not sooner.
    settle: Option<tokio::time::Instant>,
    /// Whether the next pass must be a full one.
    everything: bool,
    /// WMW objects changed since the last pass.
    objects: BTreeSet<ObjectKey>,
    /// What the last full pass saw; `None` before the first.
    known: Option<Known>,
    /// The objects the last pass selected, reused while unchanged.
    selected: HashMap<ObjectKey, Arc<Selected>>,
    /// What the passes read of the copies in mailboxes.
    copies: CopyMemo,
}

impl Default for PlacementTranslator {
    fn default() -> Self {
        PlacementTranslator {
            inventory: InventoryIndex::default(),
            passes: Passes::now(DEBOUNCE, RETRY),
            settle: None,
            everything: true,
            objects: BTreeSet::new(),
            known: None,
            selected: HashMap::new(),
            copies: CopyMemo::default(),
        }
    }
}

impl PlacementTranslator {
    /// The reported state is refreshed within [`SETTLE`].
    fn settle_soon(&mut self) {
        let at = tokio::time::Instant::now() + SETTLE;
        self.settle = Some(self.settle.map_or(at, |s| s.min(at)));
    }

    /// One pass: a full one when something beyond WMW objects changed (or
    /// the last could not finish, or the settling time is up), else one
    /// over the changed objects' copies only.
    async fn pass(&mut self, ctx: &ControllerContext) {
        let objects = std::mem::take(&mut self.objects);
        let settled = self.settle.is_some_and(|at| at <= tokio::time::Instant::now());
        if self.everything || settled || self.known.is_none() {
            self.everything = false;
            self.settle = None;
            let done = reconcile(ctx, &self.inventory, &self.copies).await;
            self.known = Some(done.known);
            self.selected = done.selected;
            self.everything = done.retry;
            self.passes.passed(done.retry);
        } else if !objects.is_empty() {
            let retry =
                reconcile_objects(ctx, &self.inventory, &mut self.selected, &self.copies, &objects).await;
            self.everything = retry;
            self.passes.passed(retry);
            self.settle_soon();
        } else {
            self.passes.passed(false);
        }
    }
}

impl Follower for PlacementTranslator {
    fn follows(&self, storage_key: &str) -> bool {
        !matches!(
            storage_key,
            "/events" | "events.k8s.io/events" | "coordination.k8s.io/leases"
        )
    }

    fn resync<'a>(&'a mut self, ctx: &'a ControllerContext) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            self.inventory = load_inventory(ctx);
            self.everything = true;
            self.known = None;
            self.passes.restart();
        })
    }

    fn note(&mut self, _ctx: &ControllerContext, event: &WatchEvent) -> bool {
        let target = |i: &InventoryIndex| {
            (event.key.resource == SYNC_TARGETS)
                .then(|| i.target(&event.key.cluster, &event.key.name).cloned())
                .flatten()
        };
        let before = target(&self.inventory);
        track(&mut self.inventory, event);
        let target_changed = before != target(&self.inventory);
        let change = match &self.known {
            Some(known) => changes::classify(known, event, target_changed),
            None => Change::Everything,
        };
        match change {
            Change::Everything => {
                self.everything = true;
                self.passes.changed();
            }
            Change::Object(key) => {
                self.objects.insert(key);
                self.passes.changed();
            }
            Change::Reported => self.settle_soon(),
            Change::Nothing => {}
        }
        false
    }

    fn wait<'a>(&'a mut self, _ctx: &'a ControllerContext) -> BoxFuture<'a, Due> {
        let settle = self.settle;
        let passes = &self.passes;
        Box::pin(async move {
            let settled = async {
                match settle {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                due = passes.due() => due,
                _ = settled => Due::Pass,
            }
        })
    }

    fn pass<'a>(&'a mut self, ctx: &'a ControllerContext) -> BoxFuture<'a, ()> {
        Box::pin(PlacementTranslator::pass(self, ctx))
    }
}

/// One object a placement selected in its WMW.
struct Selected {
    key: ObjectKey,
    info: ResourceInfo,
    rv: u64,
    value: Value,
    /// What goes into a mailbox (before customization).
    copy: Value,
    overwrite: bool,
    /// Whether the object opted in to parameter expansion.
    expand: bool,
    /// The Customizer it names, if any (an error: it does not exist).
    customizer: Option<Result<customize::Customizer, customize::CustomizeError>>,
    /// The digest of `copy`'s content, once asked for.
    content: std::sync::OnceLock<ContentDigest>,
}

impl Selected {
    /// The digest of the content of its copy `want` for one destination;
    /// the plain copy's is computed once.
    fn wanted_digest(&self, want: &DestCopy) -> ContentDigest {
        match want {
            DestCopy::Customized(v) => ContentDigest::of_copy(v),
            // A failed customization makes no copy to compare: only the plain one is at hand.
            DestCopy::Plain | DestCopy::Failed(_) => {
                *self.content.get_or_init(|| ContentDigest::of_copy(&self.copy))
            }
        }
    }

    /// Whether its copies differ from destination to destination.
    fn customized(&self) -> bool {
        self.expand || self.customizer.is_some()
    }

    /// `resource[.group] [namespace/]name`, as kubectl names it.
    fn display(&self) -> String {
        let resource = if self.info.group.is_empty() {
            self.info.resource.clone()
        } else {
            format!("{}.{}", self.info.resource, self.info.group)
        };
        if self.key.namespace.is_empty() {
            format!("{resource} {}", self.key.name)
        } else {
            format!("{resource} {}/{}", self.key.namespace, self.key.name)
        }
    }
}

/// The copy of one selected object for one destination.
enum DestCopy {
    /// The same for every destination: [`Selected::copy`].
    Plain,
    /// Customized for this destination.
    Customized(Value),
    /// Customization failed (the message says why): the mailbox keeps the
    /// copy it has, and none is made.
    Failed(String),
}

/// Inventory objects by `(cluster, name)`, for the parameters of destinations.
struct Inventory<'a> {
    index: &'a InventoryIndex,
}

impl<'a> Inventory<'a> {
    fn new(index: &'a InventoryIndex) -> Inventory<'a> {
        Inventory { index }
    }

    /// The copy of `s` for destination `d`.
    fn copy_for(&self, s: &Selected, d: &SinglePlacement) -> DestCopy {
        if !s.customized() {
            return DestCopy::Plain;
        }
        let empty = BTreeMap::new();
        let loc = self.index.location(&d.cluster, &d.location_name);
        let target = self.index.target(&d.cluster, &d.sync_target_name);
        let params = customize::Parameters {
            sources: [
                loc.map_or(&empty, |l| &l.labels),
                loc.map_or(&empty, |l| &l.annotations),
                target.map_or(&empty, |t| &t.labels),
                target.map_or(&empty, |t| &t.annotations),
            ],
        };
        let mut copy = s.copy.clone();
        let customizer = match &s.customizer {
            Some(Err(e)) => return DestCopy::Failed(self.failure(s, d, e)),
            Some(Ok(c)) => Some(c),
            None => None,
        };
        match customize::customize(&mut copy, s.expand, customizer, &params) {
            Ok(()) => {
                copy::remark(&mut copy, &s.copy);
                DestCopy::Customized(copy)
            }
            Err(e) => DestCopy::Failed(self.failure(s, d, &e)),
        }
    }

    /// What the owner of `d`'s SyncTarget lets come up from its cluster.
    fn upsync_allow(&self, d: &SinglePlacement) -> grant::UpsyncAllow {
        let target = self.index.target(&d.cluster, &d.sync_target_name);
        grant::UpsyncAllow::parse(
            target
                .and_then(|t| t.annotations.get(grant::UPSYNC_ALLOW_ANNOTATION))
                .map(String::as_str),
        )
    }

    fn failure(&self, s: &Selected, d: &SinglePlacement, e: &customize::CustomizeError) -> String {
        format!(
            "{} for SyncTarget {} (Location {}): {e}",
            s.display(),
            d.sync_target_name,
            d.location_name
        )
    }
}

/// One EdgePlacement, evaluated.
struct Placement {
    cluster: String,
    path: String,
    name: String,
    uid: String,
    generation: i64,
    value: Value,
    deleting: bool,
    /// Who the hub recorded as having written the spec; `None`: nobody
    /// (written before placers were recorded), so it reaches nothing.
    placer: Option<UserInfo>,
    spec: EdgePlacementSpec,
    problems: Vec<SpecProblem>,
    conflicts: BTreeSet<String>,
    pending: BTreeSet<String>,
    matching_locations: usize,
    destinations: Vec<SinglePlacement>,
    selected: Vec<Arc<Selected>>,
    executing: usize,
    /// Copies that could not be customized, one message each.
    customization: BTreeSet<String>,
    /// Copies a destination's cluster refused, one message each
    /// (`<object> on <SyncTarget>: <the API server's message>`).
    refused: BTreeSet<String>,
}

fn str_at<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

fn path_of(ctx: &ControllerContext, cluster: &str) -> String {
    ctx.logical_cluster(cluster)
        .map(|lc| lc.path)
        .unwrap_or_else(|| cluster.to_string())
}

/// Whether the object is one the hub or Ferry keeps for itself, or one the
/// translator made (a returned upsync): never placed.
fn never_placed(key: &ObjectKey, obj: &StoredObject) -> bool {
    let group = key.resource.split('/').next().unwrap_or_default();
    if NEVER_PLACED_GROUPS.contains(&group) || key.resource == "/events" {
        return true;
    }
    if obj.labels.contains_key(RETURNED_LABEL) || obj.labels.contains_key(PLACED_LABEL) {
        return true;
    }
    if memchr::memmem::find(&obj.json, UPSYNCED_ANNOTATION.as_bytes()).is_some()
        || memchr::memmem::find(&obj.json, b"deletionTimestamp").is_some()
    {
        return true;
    }
    match (key.resource.as_str(), key.namespace.as_str(), key.name.as_str()) {
        ("/serviceaccounts", _, "default") | ("/configmaps", _, "kube-root-ca.crt") => true,
        ("/services", "default", "kubernetes") => true,
        ("/namespaces", _, n) => n.starts_with("kube-"),
        ("/secrets", _, _) => {
            memchr::memmem::find(&obj.json, b"kubernetes.io/service-account-token").is_some()
        }
        ("apiextensions.k8s.io/customresourcedefinitions", _, n) => {
            NEVER_PLACED_GROUPS.iter().any(|g| n.ends_with(&format!(".{g}")))
        }
        (r, _, n) if r.starts_with("rbac.authorization.k8s.io/") => n.starts_with("system:"),
        _ => false,
    }
}

/// The resources served in `cluster`, one per storage key (at its storage version).
fn served_resources(ctx: &ControllerContext, cluster: &str) -> BTreeMap<String, ResourceInfo> {
    let mut out: BTreeMap<String, ResourceInfo> = BTreeMap::new();
    for info in ctx.served_resources(Some(cluster)) {
        let key = info.storage_key();
        match out.get(&key) {
            Some(existing) if existing.storage_version || !info.storage_version => {}
            _ => {
                out.insert(key, info);
            }
        }
    }
    out
}

/// Evaluate EdgePlacement `key`; `reuse`: objects selected before, taken
/// again while at the same resourceVersion.
fn evaluate(
    ctx: &ControllerContext,
    key: &ObjectKey,
    value: Value,
    inventory: &InventoryIndex,
    reuse: &HashMap<ObjectKey, Arc<Selected>>,
) -> Placement {
    let path = path_of(ctx, &key.cluster);
    let mut problems = Vec::new();
    let spec: EdgePlacementSpec =
        match serde_json::from_value(value.get("spec").cloned().unwrap_or(json!({}))) {
            Ok(s) => s,
            Err(e) => {
                problems.push(SpecProblem {
                    field: "spec".into(),
                    message: format!("cannot be read: {e}"),
                });
                EdgePlacementSpec::default()
            }
        };
    let deleting = value.pointer("/metadata/deletionTimestamp").is_some();
    let selectors =
        select::compile_selectors("spec.locationSelectors", &spec.location_selectors, &mut problems);
    let placer = placer_of(&value);
    let (matching_locations, destinations) = inventory.resolve(&selectors, |l| {
        placer
            .as_ref()
            .is_some_and(|u| ctx.may_place(u, &l.cluster, &l.name))
    });
    let tests = select::compile(&spec, &mut problems);
    let served = served_resources(ctx, &key.cluster);
    let pairs: Vec<(String, String)> = served
        .values()
        .map(|i| (i.group.clone(), i.resource.clone()))
        .collect();
    problems.extend(select::unknown_resources(&tests, &pairs, &path));
    let selected = if deleting {
        Vec::new()
    } else {
        select_objects(ctx, &key.cluster, &path, &tests, &served, reuse)
    };
    Placement {
        cluster: key.cluster.clone(),
        path,
        name: key.name.clone(),
        uid: str_at(&value, "/metadata/uid").to_string(),
        generation: value
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0),
        value,
        deleting,
        placer,
        spec,
        problems,
        conflicts: BTreeSet::new(),
        pending: BTreeSet::new(),
        matching_locations,
        destinations,
        selected,
        executing: 0,
        customization: BTreeSet::new(),
        refused: BTreeSet::new(),
    }
}

/// The WMW objects the members select, and the Namespaces of the namespaced ones.
fn select_objects(
    ctx: &ControllerContext,
    cluster: &str,
    path: &str,
    tests: &[ObjectTest],
    served: &BTreeMap<String, ResourceInfo>,
    reuse: &HashMap<ObjectKey, Arc<Selected>>,
) -> Vec<Arc<Selected>> {
    let scope = ClusterScope::One(cluster.to_string());
    let mut ns_labels: HashMap<String, Option<BTreeMap<String, String>>> = HashMap::new();
    let mut chosen: BTreeMap<ObjectKey, (ResourceInfo, Arc<StoredObject>)> = BTreeMap::new();
    for (storage_key, info) in served {
        if !tests
            .iter()
            .any(|t| t.wants_resource(&info.group, &info.resource))
        {
            continue;
        }
        let (objects, _) = ctx.list(&scope, storage_key, None, None);
        for (key, obj) in objects {
            if never_placed(&key, &obj) {
                continue;
            }
            let labels = if info.namespaced {
                ns_labels
                    .entry(key.namespace.clone())
                    .or_insert_with(|| {
                        ctx.get(&ns_key(cluster, &key.namespace))
                            .map(|ns| ns.labels.clone())
                    })
                    .as_ref()
            } else {
                None
            };
            if tests.iter().any(|t| {
                t.wants_resource(&info.group, &info.resource)
                    && t.matches(info.namespaced, &key.namespace, &key.name, &obj.labels, labels)
            }) {
                chosen.insert(key, (info.clone(), obj));
            }
        }
    }
    let namespaces: BTreeSet<String> = chosen
        .keys()
        .filter(|k| !k.namespace.is_empty())
        .map(|k| k.namespace.clone())
        .collect();
    if let Some(info) = served.get("/namespaces") {
        for ns in namespaces {
            let key = ns_key(cluster, &ns);
            if chosen.contains_key(&key) {
                continue;
            }
            if let Some(obj) = ctx.get(&key) {
                if !never_placed(&key, &obj) {
                    chosen.insert(key, (info.clone(), obj));
                }
            }
        }
    }
    let transforms: Vec<transform::Transform> = ctx
        .list(&scope, CUSTOM_TRANSFORMS, None, None)
        .0
        .iter()
        .map(|(_, t)| transform::Transform::from_object(&t.value(), t.rv))
        .collect();
    chosen
        .into_iter()
        .map(|(key, (info, obj))| {
            if let Some(s) = reuse.get(&key).filter(|s| s.rv == obj.rv) {
                return s.clone();
            }
            let value = obj.value();
            let shaped = transform::transformed(&value, &info.group, &info.resource, &transforms);
            let overwrite = value
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(DOWNSYNC_OVERWRITE_ANNOTATION))
                .and_then(Value::as_str)
                != Some("false");
            let customizer = customizer_of(ctx, &key, &value);
            Arc::new(Selected {
                copy: copy::mailbox_copy(shaped.as_ref().unwrap_or(&value), path, obj.rv),
                expand: customize::opted_in(&value),
                customizer,
                key,
                info,
                rv: obj.rv,
                value,
                overwrite,
                content: Default::default(),
            })
        })
        .collect()
}

/// The Customizer object `value` (at `key`) names: `name` in its namespace,
/// or `namespace/name`.
fn customizer_of(
    ctx: &ControllerContext,
    key: &ObjectKey,
    value: &Value,
) -> Option<Result<customize::Customizer, customize::CustomizeError>> {
    let reference = value
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(CUSTOMIZER_ANNOTATION))
        .and_then(Value::as_str)
        .filter(|r| !r.is_empty())?;
    let (namespace, name) = reference
        .split_once('/')
        .unwrap_or((key.namespace.as_str(), reference));
    let id = format!("{namespace}/{name}");
    let found = ctx.get(&ObjectKey {
        cluster: key.cluster.clone(),
        resource: CUSTOMIZERS.into(),
        namespace: namespace.into(),
        name: name.into(),
    });
    Some(match found {
        Some(c) => Ok(customize::Customizer::from_object(&id, &c.value())),
        None => Err(customize::CustomizeError::MissingCustomizer(id)),
    })
}

fn ns_key(cluster: &str, name: &str) -> ObjectKey {
    ObjectKey {
        cluster: cluster.into(),
        resource: "/namespaces".into(),
        namespace: String::new(),
        name: name.into(),
    }
}

/// `(storage key, namespace, name)` of an object in a mailbox.
type CopyKey = (String, String, String);

/// One WMW object some placements want in a mailbox.
struct Contender {
    selected: Arc<Selected>,
    /// Its copy for this mailbox's destination.
    copy: DestCopy,
    source_path: String,
    placements: BTreeSet<usize>,
}

impl Contender {
    /// What to write, `None` when customization failed.
    fn copy(&self) -> Option<&Value> {
        match &self.copy {
            DestCopy::Plain => Some(&self.selected.copy),
            DestCopy::Customized(v) => Some(v),
            DestCopy::Failed(_) => None,
        }
    }
}

/// What one mailbox should hold.
struct Plan {
    path: String,
    target: String,
    placements: BTreeSet<usize>,
    /// What the placements upsync, narrowed to what the SyncTarget allows.
    upsync: Vec<UpsyncSet>,
    /// What the SyncTarget's owner lets come up.
    allow: grant::UpsyncAllow,
    contenders: BTreeMap<CopyKey, Vec<Contender>>,
}

impl Plan {
    fn offer(
        &mut self,
        placement: usize,
        source_path: &str,
        s: &Arc<Selected>,
        copy: impl FnOnce() -> DestCopy,
    ) {
        let key = (
            s.key.resource.clone(),
            s.key.namespace.clone(),
            s.key.name.clone(),
        );
        let list = self.contenders.entry(key).or_default();
        match list.iter_mut().find(|c| c.selected.key == s.key) {
            Some(c) => {
                c.placements.insert(placement);
            }
            None => {
                list.push(Contender {
                    copy: copy(),
                    selected: s.clone(),
                    source_path: source_path.to_string(),
                    placements: BTreeSet::from([placement]),
                });
                list.sort_by(|a, b| a.source_path.cmp(&b.source_path));
            }
        }
    }
}

/// A mailbox workspace: its logical cluster, path and SyncTarget name.
struct Mailbox {
    cluster: String,
    target: String,
    /// The logical cluster of the SyncTarget's inventory workspace.
    inventory: String,
}

fn mailboxes(ctx: &ControllerContext) -> Vec<Mailbox> {
    let (workspaces, _) = ctx.list(&ClusterScope::One(MAILBOX_PARENT.into()), WORKSPACES, None, None);
    workspaces
        .iter()
        .filter_map(|(_, obj)| {
            let ws = obj.value();
            let annotations = ws.pointer("/metadata/annotations")?;
            annotations.get(SYNC_TARGET_UID_ANNOTATION)?;
            if ws.pointer("/metadata/deletionTimestamp").is_some() {
                return None;
            }
            Some(Mailbox {
                cluster: str_at(&ws, "/spec/cluster").to_string(),
                target: annotations
                    .get(ferry_api::well_known::SYNC_TARGET_NAME_ANNOTATION)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                inventory: annotations
                    .get(super::mailbox::INVENTORY_CLUSTER_ANNOTATION)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            })
        })
        .filter(|m| !m.cluster.is_empty())
        .collect()
}

/// Every stored Location and SyncTarget, indexed; the watch keeps it
/// current from then on ([`track`]).
fn load_inventory(ctx: &ControllerContext) -> InventoryIndex {
    let (locations, _) = ctx.list(&ClusterScope::All, LOCATIONS, None, None);
    let (targets, _) = ctx.list(&ClusterScope::All, SYNC_TARGETS, None, None);
    InventoryIndex::of(
        locations
            .iter()
            .filter_map(|(k, o)| resolve::Location::from_object(&k.cluster, &o.value())),
        targets
            .iter()
            .filter_map(|(k, o)| resolve::Target::from_object(&k.cluster, &o.value())),
    )
}

/// Fold one watch event into the inventory index (other resources: nothing).
fn track(inventory: &mut InventoryIndex, event: &WatchEvent) {
    let key = &event.key;
    // Parsed only for the two kinds the inventory keeps: every write in the hub
    // comes by here, and parsing each was 3% of a busy service hub's time.
    let value = || (event.kind != EventType::Deleted).then(|| event.object.value());
    match key.resource.as_str() {
        LOCATIONS => inventory.apply_location(&key.cluster, &key.name, value().as_ref()),
        SYNC_TARGETS => inventory.apply_target(&key.cluster, &key.name, value().as_ref()),
        _ => {}
    }
}

/// What a full pass leaves for the passes after it.
struct FullPass {
    /// Something must be retried.
    retry: bool,
    known: Known,
    /// What the placements selected.
    selected: HashMap<ObjectKey, Arc<Selected>>,
}

/// Every EdgePlacement (outside mailboxes), evaluated, and every mailbox.
fn evaluate_all(
    ctx: &ControllerContext,
    inventory: &InventoryIndex,
    reuse: &HashMap<ObjectKey, Arc<Selected>>,
) -> (Vec<Placement>, Vec<Mailbox>) {
    let (objs, _) = ctx.list(&ClusterScope::All, EDGE_PLACEMENTS, None, None);
    let all_mailboxes = mailboxes(ctx);
    let mailbox_clusters: BTreeSet<&str> = all_mailboxes.iter().map(|m| m.cluster.as_str()).collect();
    let placements = objs
        .iter()
        .filter(|(k, _)| !mailbox_clusters.contains(k.cluster.as_str()))
        .map(|(k, o)| evaluate(ctx, k, o.value(), inventory, reuse))
        .collect();
    (placements, all_mailboxes)
}

/// The objects `placements` selected, by key.
fn selected_of(placements: &[Placement]) -> HashMap<ObjectKey, Arc<Selected>> {
    placements
        .iter()
        .flat_map(|p| p.selected.iter().map(|s| (s.key.clone(), s.clone())))
        .collect()
}

/// One pass over everything. Locations and SyncTargets come from
/// `inventory`, not the store: the where-resolver visits only what a
/// placement's selectors can reach.
async fn reconcile(ctx: &ControllerContext, inventory: &InventoryIndex, copies: &CopyMemo) -> FullPass {
    let mut retry = false;
    copies.begin_full_pass();
    let (mut placements, all_mailboxes) = evaluate_all(ctx, inventory, &HashMap::new());
    let known = Known {
        mailboxes: all_mailboxes.iter().map(|m| m.cluster.clone()).collect(),
        wmws: placements.iter().map(|p| p.cluster.clone()).collect(),
        placements: placements
            .iter()
            .map(|p| ((p.cluster.clone(), p.name.clone()), PlacementMark::of(&p.value)))
            .collect(),
    };

    for p in &placements {
        retry |= write_slice(ctx, p).await;
        retry |= ensure_customizer_kind(ctx, p).await;
    }

    let inventory = Inventory::new(inventory);
    let (plans, unready) = plan(ctx, &mut placements, &inventory);
    retry |= unready;

    // Mailboxes are independent: write several at once, so the store can
    // commit their writes together.
    let outcomes = apply_mailboxes(ctx, all_mailboxes.iter(), &plans, &placements, copies, None).await;
    // A copy executes only where a syncer acknowledged it: a mailbox alone is
    // not a cluster.
    let mut executing: HashMap<ObjectKey, usize> = HashMap::new();
    for o in outcomes {
        retry |= o.retry;
        for (i, message) in o.conflicts {
            placements[i].conflicts.insert(message);
        }
        for (i, message) in o.customization {
            placements[i].customization.insert(message);
        }
        if !o.acknowledged {
            continue;
        }
        for key in o.executing {
            *executing.entry(key).or_default() += 1;
        }
        for i in o.executing_placements {
            placements[i].executing += 1;
        }
    }

    let mut reports = MailboxReports::default();
    for p in placements.iter_mut() {
        p.refused = refusals(ctx, p, &mut reports, copies);
    }
    retry |= report(
        ctx,
        &placements,
        &plans,
        &executing,
        &inventory,
        &mut reports,
        copies,
    )
    .await;
    for p in &placements {
        write_status(ctx, p).await;
    }
    copies.forget_unseen();
    FullPass {
        retry,
        known,
        selected: selected_of(&placements),
    }
}

/// A pass over the copies of the WMW objects `changed` only (see
/// [`changes`]): every placement is evaluated and every mailbox planned as
/// in a full pass, so conflicts are decided the same way, but only the
/// mailboxes that want or hold one of those objects are written, and in
/// them only those objects' copies, their Namespaces' and `the-one`. The
/// reported state waits for the next full pass. True when something must
/// be retried (by a full pass).
async fn reconcile_objects(
    ctx: &ControllerContext,
    inventory: &InventoryIndex,
    selected: &mut HashMap<ObjectKey, Arc<Selected>>,
    copies: &CopyMemo,
    changed: &BTreeSet<ObjectKey>,
) -> bool {
    let (mut placements, all_mailboxes) = evaluate_all(ctx, inventory, selected);
    *selected = selected_of(&placements);
    let inventory = Inventory::new(inventory);
    let (plans, unready) = plan(ctx, &mut placements, &inventory);
    let mut scope: BTreeSet<CopyKey> = BTreeSet::new();
    for k in changed {
        scope.insert((k.resource.clone(), k.namespace.clone(), k.name.clone()));
        if !k.namespace.is_empty() {
            scope.insert(("/namespaces".into(), String::new(), k.namespace.clone()));
        }
    }
    let touched = all_mailboxes.iter().filter(|mb| {
        let wanted = plans
            .get(&mb.cluster)
            .is_some_and(|p| scope.iter().any(|ck| p.contenders.contains_key(ck)));
        wanted
            || scope
                .iter()
                .any(|ck| ctx.get(&copy_key(&mb.cluster, ck)).is_some())
    });
    let outcomes = apply_mailboxes(ctx, touched, &plans, &placements, copies, Some(&scope)).await;
    unready || outcomes.iter().any(|o| o.retry)
}

/// Apply each mailbox's plan (restricted to `only`, when given), several at once.
async fn apply_mailboxes<'a>(
    ctx: &ControllerContext,
    mailboxes: impl Iterator<Item = &'a Mailbox>,
    plans: &BTreeMap<String, Plan>,
    placements: &[Placement],
    copies: &CopyMemo,
    only: Option<&BTreeSet<CopyKey>>,
) -> Vec<MailboxOutcome> {
    let work: Vec<futures::future::BoxFuture<'_, MailboxOutcome>> = mailboxes
        .map(|mb| {
            Box::pin(apply_mailbox(
                ctx,
                mb,
                plans.get(&mb.cluster),
                placements,
                copies,
                only,
            )) as _
        })
        .collect();
    futures::stream::iter(work)
        .buffer_unordered(MAILBOX_CONCURRENCY)
        .collect()
        .await
}

/// The object at `ck` in logical cluster `cluster`.
fn copy_key(cluster: &str, ck: &CopyKey) -> ObjectKey {
    ObjectKey {
        cluster: cluster.to_string(),
        resource: ck.0.clone(),
        namespace: ck.1.clone(),
        name: ck.2.clone(),
    }
}

/// What each ready mailbox should hold, by its logical cluster; true when
/// a destination's mailbox is not ready yet (its placement says so).
fn plan(
    ctx: &ControllerContext,
    placements: &mut [Placement],
    inventory: &Inventory<'_>,
) -> (BTreeMap<String, Plan>, bool) {
    let mut retry = false;
    let mut plans: BTreeMap<String, Plan> = BTreeMap::new();
    for (i, p) in placements.iter_mut().enumerate() {
        if p.deleting {
            continue;
        }
        for d in &p.destinations {
            let path = mailbox_path(d);
            let ready = ctx.resolve_workspace(&path).filter(|lc| {
                ctx.lookup(Some(&lc.name), EDGE_GROUP, EDGE_VERSION, "syncerconfigs")
                    .is_some()
            });
            let Some(lc) = ready else {
                p.pending.insert(d.sync_target_name.clone());
                retry = true;
                continue;
            };
            let plan = plans.entry(lc.name.clone()).or_insert_with(|| Plan {
                path: path.clone(),
                target: d.sync_target_name.clone(),
                placements: BTreeSet::new(),
                upsync: Vec::new(),
                allow: inventory.upsync_allow(d),
                contenders: BTreeMap::new(),
            });
            plan.placements.insert(i);
            let allowed: Vec<UpsyncSet> = p
                .spec
                .upsync
                .iter()
                .filter_map(|u| plan.allow.narrow(u))
                .collect();
            plan.upsync.extend(allowed);
            for s in &p.selected {
                plan.offer(i, &p.path, s, || inventory.copy_for(s, d));
            }
        }
    }
    (plans, retry)
}

// ---------------------------------------------------------------- writes

async fn create(
    ctx: &ControllerContext,
    cluster: &str,
    info: &ResourceInfo,
    ns: &str,
    obj: Value,
) -> Result<Value, ApiError> {
    let ns = (!ns.is_empty()).then_some(ns);
    let r = ctx.request(
        cluster,
        (&info.group, &info.version, &info.resource),
        ns,
        None,
        "create",
        MANAGER,
    )?;
    service::create(&r, obj).await.map(|w| w.object)
}

fn info_in(ctx: &ControllerContext, cluster: &str, storage_key: &str) -> Result<ResourceInfo, ApiError> {
    ferry_server::controller::info_for_storage_key(ctx, cluster, storage_key)
        .ok_or_else(|| ApiError::not_found_message(format!("{storage_key} is not served in {cluster}")))
}

async fn update(ctx: &ControllerContext, key: &ObjectKey, obj: Value) -> Result<Value, ApiError> {
    let info = info_in(ctx, &key.cluster, &key.resource)?;
    let r = ctx.request_at(info, key, "update", MANAGER)?;
    service::update(&r, obj).await.map(|w| w.object)
}

async fn patch(
    ctx: &ControllerContext,
    key: &ObjectKey,
    subresource: Option<&str>,
    kind: PatchType,
    body: Value,
) -> Result<(), ApiError> {
    let info = info_in(ctx, &key.cluster, &key.resource)?;
    let mut r = ctx.request_at(info, key, "patch", MANAGER)?;
    if let Some(s) = subresource {
        r = r.on_subresource(s);
    }
    service::patch(&r, kind, body.to_string().into())
        .await
        .map(|_| ())
}

async fn delete(ctx: &ControllerContext, key: &ObjectKey) -> Result<(), ApiError> {
    let info = info_in(ctx, &key.cluster, &key.resource)?;
    let r = ctx.request_at(info, key, "delete", MANAGER)?;
    match service::delete(&r, &DeleteOptions::default()).await {
        Ok(_) => Ok(()),
        Err(e) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Log a failed write; true (retry) unless the failure is the caller's to fix.
fn failed(what: &str, key: &ObjectKey, e: &ApiError) -> bool {
    tracing::debug!(cluster = %key.cluster, resource = %key.resource, namespace = %key.namespace,
        name = %key.name, "placement translator: {what} failed: {}", e.message);
    true
}

/// The placement's SinglePlacementSlice (same name, owned by it).
async fn write_slice(ctx: &ControllerContext, p: &Placement) -> bool {
    if p.deleting {
        return false;
    }
    let key = ObjectKey {
        cluster: p.cluster.clone(),
        resource: format!("{EDGE_GROUP}/{}", SinglePlacementSlice::PLURAL),
        namespace: String::new(),
        name: p.name.clone(),
    };
    let destinations = serde_json::to_value(&p.destinations).unwrap_or(json!([]));
    let body = json!({
        "apiVersion": format!("{EDGE_GROUP}/{EDGE_VERSION}"), "kind": SinglePlacementSlice::KIND,
        "metadata": {"name": p.name, "annotations": placed_by(p), "ownerReferences": [{
            "apiVersion": format!("{EDGE_GROUP}/{EDGE_VERSION}"), "kind": "EdgePlacement",
            "name": p.name, "uid": p.uid, "controller": true,
        }]},
        "destinations": destinations,
    });
    if ctx
        .lookup(
            Some(&p.cluster),
            EDGE_GROUP,
            EDGE_VERSION,
            SinglePlacementSlice::PLURAL,
        )
        .is_none()
    {
        // A WMW made before the kind existed: give it the CRD.
        install_crd(ctx, &p.cluster, SinglePlacementSlice::crd()).await;
        return true;
    }
    match ctx.get(&key) {
        None => {
            let info = match info_in(ctx, &p.cluster, &key.resource) {
                Ok(i) => i,
                Err(_) => return true,
            };
            match create(ctx, &p.cluster, &info, "", body).await {
                Ok(_) => false,
                Err(e) if e.code == 409 => true,
                Err(e) => failed("creating the SinglePlacementSlice", &key, &e),
            }
        }
        Some(existing) => {
            let current = existing.value();
            let same_owner = current.pointer("/metadata/ownerReferences/0/uid") == Some(&json!(p.uid));
            let same_placer = current
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(PLACED_BY_ANNOTATION))
                == placed_by(p).get(PLACED_BY_ANNOTATION);
            if current.get("destinations").unwrap_or(&json!([])) == &destinations && same_owner && same_placer
            {
                return false;
            }
            let mut body = body;
            body["metadata"]["resourceVersion"] = json!(existing.rv.to_string());
            match update(ctx, &key, body).await {
                Ok(_) => false,
                Err(e) => failed("updating the SinglePlacementSlice", &key, &e),
            }
        }
    }
}

/// The slice's annotations: whose grants its destinations are.
fn placed_by(p: &Placement) -> Value {
    match &p.placer {
        Some(u) => json!({PLACED_BY_ANNOTATION: ferry_server::kinds::edge::placer_record(u)}),
        None => json!({}),
    }
}

/// A WMW made before the Customizer kind existed gets its CRD once one of
/// its placed objects names a Customizer; true (retry) when just installed.
async fn ensure_customizer_kind(ctx: &ControllerContext, p: &Placement) -> bool {
    let wanted = p.selected.iter().any(|s| {
        matches!(
            &s.customizer,
            Some(Err(customize::CustomizeError::MissingCustomizer(_)))
        )
    });
    if !wanted
        || ctx
            .lookup(Some(&p.cluster), EDGE_GROUP, EDGE_VERSION, Customizer::PLURAL)
            .is_some()
    {
        return false;
    }
    install_crd(ctx, &p.cluster, Customizer::crd()).await
}

/// Install one of Ferry's CRDs in a WMW made before its kind existed;
/// whether it was created.
async fn install_crd(ctx: &ControllerContext, cluster: &str, crd: impl serde::Serialize) -> bool {
    matches!(
        ferry_server::controller::install_crd(ctx, cluster, &crd).await,
        Ok(true)
    )
}

/// Whether namespace `ns` of mailbox `cluster` holds objects the
/// translator did not place (beyond what every namespace has).
fn holds_others(ctx: &ControllerContext, cluster: &str, ns: &str) -> bool {
    let scope = ClusterScope::One(cluster.to_string());
    ctx.resources_in(cluster).iter().any(|resource| {
        if matches!(resource.as_str(), "/events" | "events.k8s.io/events") {
            return false;
        }
        let (objects, _) = ctx.list(&scope, resource, Some(ns), None);
        objects.iter().any(|(key, obj)| {
            let every_namespace_has_it = matches!(
                (key.resource.as_str(), key.name.as_str()),
                ("/serviceaccounts", "default") | ("/configmaps", "kube-root-ca.crt")
            ) || (key.resource == "/secrets"
                && memchr::memmem::find(&obj.json, b"kubernetes.io/service-account-token").is_some());
            !key.namespace.is_empty() && !obj.labels.contains_key(PLACED_LABEL) && !every_namespace_has_it
        })
    })
}

/// Order of writes: CRDs, then Namespaces, then other cluster-scoped
/// objects, then namespaced ones (deletions go the other way).
fn write_rank(key: &CopyKey) -> u8 {
    match key.0.as_str() {
        "apiextensions.k8s.io/customresourcedefinitions" => 0,
        "/namespaces" => 1,
        _ if key.1.is_empty() => 2,
        _ => 3,
    }
}

/// Make one mailbox hold what its plan says (nothing placed, without one);
/// with `only`, only the copies under those names (and `the-one`).
async fn apply_mailbox(
    ctx: &ControllerContext,
    mb: &Mailbox,
    plan: Option<&Plan>,
    placements: &[Placement],
    copies: &CopyMemo,
    only: Option<&BTreeSet<CopyKey>>,
) -> MailboxOutcome {
    let mut out = MailboxOutcome::default();
    let mut retry = false;
    let mut actual: BTreeMap<CopyKey, (ObjectKey, Arc<StoredObject>)> = BTreeMap::new();
    match only {
        None => {
            let scope = ClusterScope::One(mb.cluster.clone());
            for resource in ctx.resources_in(&mb.cluster) {
                if resource == SYNCER_CONFIGS {
                    continue;
                }
                let (objects, _) = ctx.list(&scope, &resource, None, None);
                for (key, obj) in objects {
                    if obj.labels.contains_key(PLACED_LABEL) {
                        actual.insert(
                            (key.resource.clone(), key.namespace.clone(), key.name.clone()),
                            (key, obj),
                        );
                    }
                }
            }
        }
        Some(only) => {
            for ck in only {
                let key = copy_key(&mb.cluster, ck);
                if let Some(obj) = ctx.get(&key).filter(|o| o.labels.contains_key(PLACED_LABEL)) {
                    actual.insert(ck.clone(), (key, obj));
                }
            }
        }
    }

    // Who wins each name.
    let mut winners: BTreeMap<CopyKey, &Contender> = BTreeMap::new();
    // Names outside `only`: what the mailbox holds there is listed as it is.
    let mut listed = Vec::new();
    if let Some(plan) = plan {
        for (ck, list) in &plan.contenders {
            if only.is_some_and(|o| !o.contains(ck)) {
                if let Some(l) = held(ctx, &mb.cluster, ck, list, copies) {
                    listed.push(l);
                }
                continue;
            }
            let holder = actual.get(ck).map(|(key, o)| copies.facts(key, o));
            let winner = holder
                .and_then(|h| list.iter().find(|c| c.source_path == h.source))
                .unwrap_or(&list[0]);
            if list.len() > 1 {
                let contents: Vec<Value> = list.iter().filter_map(|c| c.copy().map(copy::content)).collect();
                if contents.iter().any(|c| Some(c) != contents.first()) {
                    let what = if ck.1.is_empty() {
                        format!("{} {}", ck.0, ck.2)
                    } else {
                        format!("{} {}/{}", ck.0, ck.1, ck.2)
                    };
                    // Each side reads only what it may know: its own
                    // placements, never the other workspace or its objects.
                    for c in list {
                        let names: Vec<&str> = c
                            .placements
                            .iter()
                            .map(|i| placements[*i].name.as_str())
                            .collect();
                        let message = conflict_message(&plan.target, &what, &names, std::ptr::eq(c, winner));
                        for i in &c.placements {
                            out.conflicts.push((*i, message.clone()));
                        }
                    }
                }
            }
            winners.insert(ck.clone(), winner);
        }
    }

    // Remove what no placement wants here any more.
    let mut unwanted: Vec<&(ObjectKey, Arc<StoredObject>)> = actual
        .iter()
        .filter(|(ck, _)| !winners.contains_key(*ck))
        .map(|(_, v)| v)
        .collect();
    unwanted.sort_by_key(|(k, _)| {
        std::cmp::Reverse(write_rank(&(
            k.resource.clone(),
            k.namespace.clone(),
            k.name.clone(),
        )))
    });
    for (key, _) in unwanted {
        if key.resource == "/namespaces" && holds_others(ctx, &mb.cluster, &key.name) {
            // Deleting it would delete what others put there: let it go instead.
            let body = json!({"metadata": {"labels": {PLACED_LABEL: null},
                "annotations": {SOURCE_ANNOTATION: null, SOURCE_RV_ANNOTATION: null}}});
            if let Err(e) = patch(ctx, key, None, PatchType::Merge, body).await {
                retry |= failed("releasing a namespace", key, &e);
            }
            continue;
        }
        if let Err(e) = delete(ctx, key).await {
            retry |= failed("removing an unplaced copy", key, &e);
        }
    }

    // Create and update the rest.
    let mut order: Vec<(&CopyKey, &&Contender)> = winners.iter().collect();
    order.sort_by_key(|(ck, _)| write_rank(ck));
    for (ck, winner) in order {
        let s = &winner.selected;
        let key = ObjectKey {
            cluster: mb.cluster.clone(),
            resource: ck.0.clone(),
            namespace: ck.1.clone(),
            name: ck.2.clone(),
        };
        if let DestCopy::Failed(message) = &winner.copy {
            for i in &winner.placements {
                out.customization.push((*i, message.clone()));
            }
        }
        let present = match (ctx.get(&key), winner.copy()) {
            // Not customizable for this destination: nothing to make.
            (None, None) => false,
            (None, Some(copy)) => match create(ctx, &mb.cluster, &s.info, &ck.1, copy.clone()).await {
                Ok(_) => true,
                Err(e) => {
                    refused(&mut out, s, winner, &mb.target, &e);
                    retry |= failed("placing a copy", &key, &e);
                    false
                }
            },
            (Some(existing), _) if !existing.labels.contains_key(PLACED_LABEL) => {
                if ck.0 != "/namespaces" {
                    let message = format!(
                        "mailbox of SyncTarget {} already holds {} {}{}, which Ferry did not place; it is left alone",
                        mb.target,
                        ck.0,
                        if ck.1.is_empty() { String::new() } else { format!("{}/", ck.1) },
                        ck.2
                    );
                    for i in &winner.placements {
                        out.conflicts.push((*i, message.clone()));
                    }
                }
                ck.0 == "/namespaces"
            }
            // Not customizable for this destination: the copy there stays as it is.
            (Some(_), None) => true,
            (Some(existing), Some(copy)) => {
                let held = copies.facts(&key, &existing);
                let transformed_by = format!(
                    "/metadata/annotations/{}",
                    transform::TRANSFORMED_BY_ANNOTATION.replace('/', "~1")
                );
                // A copy is also stale when the transforms that shaped it changed.
                let stale = held.source_rv != s.rv.to_string()
                    || held.transformed_by != str_at(copy, &transformed_by)
                    || held.source != winner.source_path;
                // A customized copy also changes with its destination's
                // parameters and its Customizer, not only with its source.
                let stale = stale || s.customized();
                if s.overwrite && stale && held.content != s.wanted_digest(&winner.copy) {
                    let mut body = copy.clone();
                    body["metadata"]["resourceVersion"] = json!(existing.rv.to_string());
                    if let Some(status) = existing.value().get("status") {
                        body["status"] = status.clone();
                    }
                    if let Err(e) = update(ctx, &key, body).await {
                        refused(&mut out, s, winner, &mb.target, &e);
                        retry |= failed("updating a copy", &key, &e);
                    }
                }
                true
            }
        };
        if present {
            out.executing.push(s.key.clone());
            out.executing_placements.extend(winner.placements.iter().copied());
            listed.push(listing(s, ck));
        }
    }

    out.retry = retry | write_the_one(ctx, mb, plan, &listed).await;
    out.acknowledged = pending(ctx, &mb.cluster, &mb.inventory, &mb.target).is_none();
    out
}

/// How `the-one` lists the copy of `s` at `ck`.
fn listing(s: &Selected, ck: &CopyKey) -> Listed {
    Listed {
        group: s.info.group.clone(),
        version: s.info.version.clone(),
        resource: s.info.resource.clone(),
        namespace: ck.1.clone(),
        name: ck.2.clone(),
    }
}

/// How `the-one` lists what mailbox `cluster` holds at `ck` (wanted by
/// `contenders`) without writing it: a copy the translator placed (of the
/// contender it came from), or a Namespace of the mailbox's own; `None`
/// when nothing is there that counts as placed (as [`apply_mailbox`]
/// decides when it writes that name).
fn held(
    ctx: &ControllerContext,
    cluster: &str,
    ck: &CopyKey,
    contenders: &[Contender],
    copies: &CopyMemo,
) -> Option<Listed> {
    let key = copy_key(cluster, ck);
    let existing = ctx.get(&key)?;
    let placed = existing.labels.contains_key(PLACED_LABEL);
    if !placed && ck.0 != "/namespaces" {
        return None;
    }
    let holder = (placed && contenders.len() > 1).then(|| copies.facts(&key, &existing));
    let winner = holder
        .and_then(|h| contenders.iter().find(|c| c.source_path == h.source))
        .unwrap_or(&contenders[0]);
    Some(listing(&winner.selected, ck))
}

/// Why the copies in mailbox `mailbox` (of SyncTarget `target` in logical
/// cluster `inventory`) do not count as synced yet; `None`: they do.
fn pending(ctx: &ControllerContext, mailbox: &str, inventory: &str, target: &str) -> Option<String> {
    let get = |cluster: &str, resource: &str, name: &str| {
        ctx.get(&ObjectKey {
            cluster: cluster.into(),
            resource: resource.into(),
            namespace: String::new(),
            name: name.into(),
        })
        .map(|o| o.value())
    };
    ferry_server::synctarget::edge::pending(
        get(inventory, SYNC_TARGETS, target).as_ref(),
        get(mailbox, SYNCER_CONFIGS, THE_ONE).as_ref(),
    )
}

/// A placement's Conflict message about `what` in the mailbox of
/// SyncTarget `target`, wanted differently by another workspace: names the
/// reader's own EdgePlacements and which copy stays, nothing of the other side.
fn conflict_message(target: &str, what: &str, own: &[&str], stays: bool) -> String {
    let outcome = if stays {
        "the copy from this workspace stays"
    } else {
        "the other copy stays (the one already there, else the first by workspace path) and this workspace's is not placed there"
    };
    format!(
        "mailbox of SyncTarget {target}: {what} (EdgePlacement {}) is wanted differently by a placement in another workspace; {outcome}",
        own.join(", ")
    )
}

/// A customized copy the mailbox refused (invalid after customization):
/// the placement says so, as for any customization problem.
fn refused(out: &mut MailboxOutcome, s: &Selected, winner: &Contender, target: &str, e: &ApiError) {
    if matches!(winner.copy, DestCopy::Customized(_)) && (400..500).contains(&e.code) && e.code != 409 {
        let message = format!(
            "{} for SyncTarget {target}: the customized copy was refused: {}",
            s.display(),
            e.message
        );
        for i in &winner.placements {
            out.customization.push((*i, message.clone()));
        }
    }
}

/// What applying one mailbox found, merged into the pass once all are done.
#[derive(Default)]
struct MailboxOutcome {
    retry: bool,
    /// `(placement index, message)`.
    conflicts: Vec<(usize, String)>,
    /// WMW objects whose copy this mailbox holds.
    executing: Vec<ObjectKey>,
    /// Placement indexes, once per copy held on their behalf.
    executing_placements: Vec<usize>,
    /// `(placement index, message)` for copies that could not be customized.
    customization: Vec<(usize, String)>,
    /// Whether the mailbox's syncer acknowledged what it holds ([`pending`]).
    acknowledged: bool,
}

/// The mailbox's SyncerConfig `the-one`: what is placed there and what its
/// placements upsync. Without a plan, one the translator made is emptied;
/// a hand-written one is left alone.
async fn write_the_one(
    ctx: &ControllerContext,
    mb: &Mailbox,
    plan: Option<&Plan>,
    listed: &[Listed],
) -> bool {
    let key = ObjectKey {
        cluster: mb.cluster.clone(),
        resource: SYNCER_CONFIGS.into(),
        namespace: String::new(),
        name: THE_ONE.into(),
    };
    let existing = ctx.get(&key);
    let mine = existing
        .as_ref()
        .is_some_and(|e| e.labels.contains_key(PLACED_LABEL));
    if plan.is_none() && !mine {
        return false;
    }
    let upsync = plan.map(|p| p.upsync.as_slice()).unwrap_or_default();
    let spec = serde_json::to_value(copy::syncer_config_spec(listed, upsync)).unwrap_or(json!({}));
    match existing {
        None => {
            let body = json!({
                "apiVersion": format!("{EDGE_GROUP}/{EDGE_VERSION}"), "kind": "SyncerConfig",
                "metadata": {"name": THE_ONE, "labels": {PLACED_LABEL: "true"}},
                "spec": spec,
            });
            let Ok(info) = info_in(ctx, &mb.cluster, SYNCER_CONFIGS) else {
                return true;
            };
            match create(ctx, &mb.cluster, &info, "", body).await {
                Ok(_) => false,
                Err(e) => failed("creating SyncerConfig the-one", &key, &e),
            }
        }
        Some(existing) => {
            let mut current = existing.value();
            if mine && current.get("spec").unwrap_or(&json!({})) == &spec {
                return false;
            }
            current["spec"] = spec;
            current["metadata"]["labels"][PLACED_LABEL] = json!("true");
            match update(ctx, &key, current).await {
                Ok(_) => false,
                Err(e) => failed("updating SyncerConfig the-one", &key, &e),
            }
        }
    }
}

/// The message with which the cluster behind a mailbox refused the copy of
/// `s`, as its syncer lists it in the mailbox's SyncerConfig `the-one`
/// (`config`, at `status.refused`).
fn refusal_in(config: &Value, s: &Selected) -> Option<String> {
    let group = if s.info.group.is_empty() {
        "core"
    } else {
        s.info.group.as_str()
    };
    let resource = format!("{group}/{}", s.info.resource);
    config
        .pointer("/status/refused")?
        .as_array()?
        .iter()
        .find(|r| {
            str_at(r, "/resource") == resource
                && str_at(r, "/namespace") == s.key.namespace
                && str_at(r, "/name") == s.key.name
        })
        .map(|r| str_at(r, "/message").to_string())
}

/// The last drift the syncer of the cluster behind a mailbox restored on the
/// copy of `s`, as it lists them in the mailbox's SyncerConfig `the-one`
/// (`config`, at `status.drifted`).
fn drift_in(config: &Value, s: &Selected) -> Option<ferry_api::drift::Drift> {
    summary::drift_of(
        config,
        &s.info.group,
        &s.info.resource,
        &s.key.namespace,
        &s.key.name,
    )
}

/// The SyncerConfig `the-one` of mailbox `mb`.
fn the_one_in(ctx: &ControllerContext, mb: &str) -> Option<Value> {
    let key = ObjectKey {
        cluster: mb.to_string(),
        resource: SYNCER_CONFIGS.into(),
        namespace: String::new(),
        name: THE_ONE.into(),
    };
    Some(ctx.get(&key)?.value())
}

/// What the mailboxes' syncers reported on their SyncerConfigs `the-one`, each
/// parsed once per full pass: the refusals and summaries consult it for every
/// selected object at every destination, and it lists every object placed
/// there, so parsing it each time cost a pass objects² × destinations.
#[derive(Default)]
struct MailboxReports {
    configs: HashMap<String, Option<Arc<Value>>>,
    pending: HashMap<(String, String, String), Option<String>>,
}

impl MailboxReports {
    /// Mailbox `mb`'s SyncerConfig `the-one`.
    fn config(&mut self, ctx: &ControllerContext, mb: &str) -> Option<Arc<Value>> {
        self.configs
            .entry(mb.to_string())
            .or_insert_with(|| the_one_in(ctx, mb).map(Arc::new))
            .clone()
    }

    /// [`pending`], for each mailbox and SyncTarget once.
    fn pending(
        &mut self,
        ctx: &ControllerContext,
        mb: &str,
        inventory: &str,
        target: &str,
    ) -> Option<String> {
        self.pending
            .entry((mb.to_string(), inventory.to_string(), target.to_string()))
            .or_insert_with(|| pending(ctx, mb, inventory, target))
            .clone()
    }
}

/// The workspace path of destination `d`'s mailbox.
fn mailbox_path(d: &SinglePlacement) -> String {
    format!(
        "{MAILBOX_PARENT}:{}",
        mailbox_name(&d.cluster, &d.sync_target_uid)
    )
}

/// The copies of `p`'s objects that its destinations' clusters refused, one
/// message each. Only `p`'s own destinations are asked, so a message never
/// names a Location the placer has no grant for, and only about copies placed
/// from `p`'s workspace: where the mailbox holds another workspace's
/// same-named copy, the cluster's message is about that tenant's object.
fn refusals(
    ctx: &ControllerContext,
    p: &Placement,
    reports: &mut MailboxReports,
    copies: &CopyMemo,
) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    if p.deleting {
        return out;
    }
    for d in &p.destinations {
        let path = mailbox_path(d);
        let Some(mb) = ctx.resolve_workspace(&path) else {
            continue;
        };
        let Some(config) = reports.config(ctx, &mb.name) else {
            continue;
        };
        for s in &p.selected {
            let Some(message) = refusal_in(&config, s) else {
                continue;
            };
            let key = ObjectKey {
                cluster: mb.name.clone(),
                ..s.key.clone()
            };
            let copy = ctx.get(&key);
            if copy.is_some_and(|c| {
                c.labels.contains_key(PLACED_LABEL) && copies.facts(&key, &c).source == p.path
            }) {
                out.insert(format!("{} on {}: {message}", s.display(), d.sync_target_name));
            }
        }
    }
    out
}

// ---------------------------------------------------------------- reported state

/// Workload management workspaces: where EdgePlacements are served, but not mailboxes.
fn wmw_clusters(ctx: &ControllerContext, mailboxes: &BTreeSet<String>) -> Vec<String> {
    ctx.clusters()
        .into_iter()
        .filter(|c| !mailboxes.contains(c))
        .filter(|c| {
            ctx.lookup(Some(c), EDGE_GROUP, EDGE_VERSION, "edgeplacements")
                .is_some()
        })
        .collect()
}

/// A singleton placement's one copy reports its status into the WMW object
/// (recorded in [`reported::REPORTED_FROM_ANNOTATION`]); an object that no
/// longer reports from the destination recorded there loses the status that
/// destination reported, unless someone else has written it since.
async fn return_singleton_status(
    ctx: &ControllerContext,
    placements: &[Placement],
    wmws: &[String],
    copies: &CopyMemo,
) -> bool {
    let mut retry = false;
    // The mailbox each WMW object's status comes from now. The first
    // singleton placement (in the order placements are read) decides, so two
    // placements naming different destinations never make it flap.
    let mut reporters: BTreeMap<ObjectKey, String> = BTreeMap::new();
    for p in placements {
        if !p.spec.want_singleton_reported_state || p.destinations.len() != 1 || p.deleting {
            continue;
        }
        let d = &p.destinations[0];
        let path = mailbox_path(d);
        let Some(mb) = ctx.resolve_workspace(&path) else {
            continue;
        };
        for s in &p.selected {
            if matches!(
                s.key.resource.as_str(),
                "/namespaces" | "apiextensions.k8s.io/customresourcedefinitions"
            ) || reporters.contains_key(&s.key)
            {
                continue;
            }
            reporters.insert(s.key.clone(), path.clone());
            let copy_key = ObjectKey {
                cluster: mb.name.clone(),
                ..s.key.clone()
            };
            let Some(copy) = ctx.get(&copy_key) else {
                continue;
            };
            let copy = copies.facts(&copy_key, &copy);
            if copy.source != p.path {
                continue;
            }
            let Some(status) = &copy.reported else {
                continue;
            };
            let note = reported::record(&path, status);
            let noted = s
                .value
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(reported::REPORTED_FROM_ANNOTATION))
                .and_then(Value::as_str);
            // The record first, so the status never shows without it.
            if noted != Some(note.as_str()) {
                let body = json!({"metadata": {"annotations": {reported::REPORTED_FROM_ANNOTATION: note}}});
                if let Err(e) = patch(ctx, &s.key, None, PatchType::Merge, body).await {
                    retry |= failed("recording whose status was returned", &s.key, &e);
                    continue;
                }
            }
            if s.value.get("status") != Some(status) {
                let sub = s.info.status_subresource.then_some("status");
                let body = json!([{"op": "add", "path": "/status", "value": status}]);
                if let Err(e) = patch(ctx, &s.key, sub, PatchType::Json, body).await {
                    retry |= failed("returning reported state", &s.key, &e);
                    continue;
                }
            }
        }
    }

    // Objects whose status came from a destination they no longer report from.
    for cluster in wmws {
        let scope = ClusterScope::One(cluster.clone());
        for resource in ctx.resources_in(cluster) {
            let (objects, _) = ctx.list(&scope, &resource, None, None);
            for (key, obj) in objects {
                if memchr::memmem::find(&obj.json, reported::REPORTED_FROM_ANNOTATION.as_bytes()).is_none() {
                    continue;
                }
                let v = obj.value();
                let Some(note) = v
                    .pointer("/metadata/annotations")
                    .and_then(|a| a.get(reported::REPORTED_FROM_ANNOTATION))
                    .and_then(Value::as_str)
                else {
                    continue;
                };
                let current = reporters.get(&key).map(String::as_str);
                let leaving = reported::on_leaving(note, v.get("status"), current);
                if leaving == reported::Leaving::Stay {
                    continue;
                }
                if leaving == reported::Leaving::ClearStatus {
                    let info = info_in(ctx, &key.cluster, &key.resource).ok();
                    let sub = info.is_some_and(|i| i.status_subresource).then_some("status");
                    // Only while it is still that status: one written
                    // meanwhile (by the new destination or the user) fails
                    // the test and is looked at again, never wiped.
                    let body = json!([{"op": "test", "path": "/status", "value": v["status"]},
                                      {"op": "replace", "path": "/status", "value": {}}]);
                    if let Err(e) = patch(ctx, &key, sub, PatchType::Json, body).await {
                        retry |=
                            e.code != 404 && failed("clearing a moved object's reported state", &key, &e);
                        continue;
                    }
                    tracing::debug!(cluster = %key.cluster, resource = %key.resource, namespace = %key.namespace,
                        name = %key.name, "cleared the status its old destination reported");
                }
                let body = json!({"metadata": {"annotations": {reported::REPORTED_FROM_ANNOTATION: null}}});
                if let Err(e) = patch(ctx, &key, None, PatchType::Merge, body).await {
                    retry |= e.code != 404 && failed("forgetting whose status was returned", &key, &e);
                }
            }
        }
    }
    retry
}

async fn report(
    ctx: &ControllerContext,
    placements: &[Placement],
    plans: &BTreeMap<String, Plan>,
    executing: &HashMap<ObjectKey, usize>,
    inventory: &Inventory<'_>,
    reports: &mut MailboxReports,
    copies: &CopyMemo,
) -> bool {
    let mut retry = false;
    let mailbox_clusters: BTreeSet<String> = mailboxes(ctx).into_iter().map(|m| m.cluster).collect();
    let wmws = wmw_clusters(ctx, &mailbox_clusters);

    // kubestellar.io/executing-count on every selected object; gone from the others.
    let mut counted: BTreeMap<ObjectKey, usize> = BTreeMap::new();
    for p in placements {
        for s in &p.selected {
            counted.insert(s.key.clone(), executing.get(&s.key).copied().unwrap_or(0));
        }
    }
    for cluster in &wmws {
        let scope = ClusterScope::One(cluster.clone());
        for resource in ctx.resources_in(cluster) {
            let (objects, _) = ctx.list(&scope, &resource, None, None);
            for (key, obj) in objects {
                let want = counted.get(&key).map(|n| n.to_string());
                let has = memchr::memmem::find(&obj.json, EXECUTING_COUNT_ANNOTATION.as_bytes()).is_some();
                if want.is_none() && !has {
                    continue;
                }
                let v = obj.value();
                let current = v
                    .pointer("/metadata/annotations")
                    .and_then(|a| a.get(EXECUTING_COUNT_ANNOTATION))
                    .and_then(Value::as_str)
                    .map(String::from);
                if current == want {
                    continue;
                }
                let body = json!({"metadata": {"annotations": {EXECUTING_COUNT_ANNOTATION: want}}});
                if let Err(e) = patch(ctx, &key, None, PatchType::Merge, body).await {
                    retry |= e.code != 404 && failed("annotating the executing count", &key, &e);
                }
            }
        }
    }

    retry |= write_summaries(ctx, placements, executing, &wmws, inventory, reports, copies).await;

    retry |= combined::write(ctx, placements, &wmws, inventory, copies).await;

    retry |= return_singleton_status(ctx, placements, &wmws, copies).await;

    // Upsynced objects come back to the WMWs whose placements upsync them.
    let mut desired: BTreeMap<ObjectKey, Value> = BTreeMap::new();
    for (mb_cluster, plan) in plans {
        if plan.upsync.is_empty() {
            continue;
        }
        let scope = ClusterScope::One(mb_cluster.clone());
        for resource in ctx.resources_in(mb_cluster) {
            let Some((group, plural)) = resource.split_once('/') else {
                continue;
            };
            if NEVER_PLACED_GROUPS.contains(&group) {
                continue;
            }
            let (objects, _) = ctx.list(&scope, &resource, None, None);
            for (key, obj) in objects {
                if obj.labels.contains_key(PLACED_LABEL)
                    || memchr::memmem::find(&obj.json, UPSYNCED_ANNOTATION.as_bytes()).is_none()
                    || !plan.allow.permits(group, plural)
                {
                    continue;
                }
                for i in &plan.placements {
                    let p = &placements[*i];
                    if !p
                        .spec
                        .upsync
                        .iter()
                        .any(|u| copy::upsync_matches(u, group, plural, &key.namespace, &key.name))
                    {
                        continue;
                    }
                    let wmw_key = ObjectKey {
                        cluster: p.cluster.clone(),
                        resource: resource.clone(),
                        namespace: key.namespace.clone(),
                        name: copy::returned_name(&plan.target, &key.name),
                    };
                    desired.insert(
                        wmw_key,
                        copy::returned_copy(&obj.value(), &plan.target, &plan.path),
                    );
                }
            }
        }
    }
    let mut actual: BTreeMap<ObjectKey, Arc<StoredObject>> = BTreeMap::new();
    for cluster in &wmws {
        let scope = ClusterScope::One(cluster.clone());
        for resource in ctx.resources_in(cluster) {
            let (objects, _) = ctx.list(&scope, &resource, None, None);
            for (key, obj) in objects {
                if obj.labels.contains_key(RETURNED_LABEL) {
                    actual.insert(key, obj);
                }
            }
        }
    }
    for (key, _) in actual.iter().filter(|(k, _)| !desired.contains_key(*k)) {
        if let Err(e) = delete(ctx, key).await {
            retry |= failed("removing a returned upsync", key, &e);
        }
    }
    for (key, body) in desired {
        let Ok(info) = info_in(ctx, &key.cluster, &key.resource) else {
            continue; // the WMW does not serve the kind: it stays in the mailboxes
        };
        if !key.namespace.is_empty() && ctx.get(&ns_key(&key.cluster, &key.namespace)).is_none() {
            continue;
        }
        match actual.get(&key) {
            None => match create(ctx, &key.cluster, &info, &key.namespace, body.clone()).await {
                Ok(made) => {
                    if let (true, Some(status)) = (info.status_subresource, body.get("status")) {
                        if made.get("status") != Some(status) {
                            let patch_body = json!([{"op": "add", "path": "/status", "value": status}]);
                            let _ = patch(ctx, &key, Some("status"), PatchType::Json, patch_body).await;
                        }
                    }
                }
                Err(e) => retry |= failed("returning an upsynced object", &key, &e),
            },
            Some(existing) => {
                let current = existing.value();
                if copy::content(&current) != copy::content(&body) {
                    let mut update_body = body.clone();
                    update_body["metadata"]["resourceVersion"] = json!(existing.rv.to_string());
                    if let Err(e) = update(ctx, &key, update_body).await {
                        retry |= failed("updating a returned upsync", &key, &e);
                    }
                }
                if let Some(status) = body.get("status") {
                    if current.get("status") != Some(status) {
                        let sub = info.status_subresource.then_some("status");
                        let patch_body = json!([{"op": "add", "path": "/status", "value": status}]);
                        if let Err(e) = patch(ctx, &key, sub, PatchType::Json, patch_body).await {
                            retry |= failed("updating a returned upsync's status", &key, &e);
                        }
                    }
                }
            }
        }
    }
    retry
}

/// Keep one `PlacementSummary` per placed object in each WMW, and none for
/// objects no placement selects any more.
async fn write_summaries(
    ctx: &ControllerContext,
    placements: &[Placement],
    executing: &HashMap<ObjectKey, usize>,
    wmws: &[String],
    inventory: &Inventory<'_>,
    reports: &mut MailboxReports,
    copies: &CopyMemo,
) -> bool {
    let mut retry = false;
    let resource = format!("{}/{}", PlacementSummary::GROUP, PlacementSummary::PLURAL);
    let mut wanted: BTreeMap<(String, String), PlacementSummary> = BTreeMap::new();
    let mut mailbox_of: HashMap<String, Option<String>> = HashMap::new();
    let mut seen: std::collections::HashSet<(String, ObjectKey, String, String)> = Default::default();
    for p in placements.iter().filter(|p| !p.deleting) {
        for s in &p.selected {
            let name =
                PlacementSummary::name_for(&s.info.group, &s.info.resource, &s.key.namespace, &s.key.name);
            let summary = wanted
                .entry((p.cluster.clone(), name))
                .or_insert_with(|| PlacementSummary {
                    object: SummarizedObject {
                        group: s.info.group.clone(),
                        resource: s.info.resource.clone(),
                        namespace: s.key.namespace.clone(),
                        name: s.key.name.clone(),
                    },
                    executing_count: executing.get(&s.key).copied().unwrap_or(0),
                    ..Default::default()
                });
            for d in &p.destinations {
                if !seen.insert((
                    p.cluster.clone(),
                    s.key.clone(),
                    d.cluster.clone(),
                    d.sync_target_name.clone(),
                )) {
                    continue;
                }
                let path = mailbox_path(d);
                let mb = mailbox_of
                    .entry(path.clone())
                    .or_insert_with(|| ctx.resolve_workspace(&path).map(|lc| lc.name))
                    .clone();
                let want = inventory.copy_for(s, d);
                // `ours`: the mailbox holds this workspace's copy, so what its
                // syncer reports about that copy (its refusal, its drift) is this object's.
                let in_mailbox = mb.map(|mb| ObjectKey {
                    cluster: mb,
                    ..s.key.clone()
                });
                let (synced, digest, ours) = match (in_mailbox, &want) {
                    (_, DestCopy::Failed(message)) => (false, format!("not customized: {message}"), false),
                    (None, _) => (false, "mailbox not ready".to_string(), false),
                    (Some(key), _) => match ctx.get(&key) {
                        None => (false, "not in the mailbox".to_string(), false),
                        Some(c) if !c.labels.contains_key(PLACED_LABEL) => (
                            false,
                            "the mailbox holds another object of this name".to_string(),
                            false,
                        ),
                        Some(c) => {
                            let held = copies.facts(&key, &c);
                            if held.source != p.path {
                                (
                                    false,
                                    "the mailbox holds another workspace's copy".to_string(),
                                    false,
                                )
                            } else {
                                let current = !s.overwrite || held.content == s.wanted_digest(&want);
                                (current, held.status_digest.clone(), true)
                            }
                        }
                    },
                };
                // The cluster's own refusal and the drift its syncer restored,
                // as it reported them on the-one: about this workspace's copy
                // only, never another tenant's same-named one.
                let mailbox_cluster = mailbox_of.get(&path).cloned().flatten();
                let config = mailbox_cluster
                    .as_deref()
                    .filter(|_| ours)
                    .and_then(|mb| reports.config(ctx, mb));
                let drift = config.as_deref().and_then(|c| drift_in(c, s));
                let (synced, digest) = match config.as_deref().and_then(|c| refusal_in(c, s)) {
                    Some(message) => (false, format!("refused: {message}")),
                    None => (synced, digest),
                };
                // In the mailbox is not on the cluster: the syncer must have
                // acknowledged it (`ferry_server::synctarget::edge::pending`).
                let (synced, digest) = match mailbox_cluster
                    .filter(|_| synced)
                    .and_then(|mb| reports.pending(ctx, &mb, &d.cluster, &d.sync_target_name))
                {
                    Some(why) => (false, format!("pending: {why}")),
                    None => (synced, digest),
                };
                summary.destinations.push(DestinationSummary {
                    cluster: d.sync_target_name.clone(),
                    inventory: d.cluster.clone(),
                    mailbox: path,
                    synced,
                    status_digest: digest,
                    last_update: String::new(),
                    drift,
                });
            }
        }
    }

    let now = ferry_api::timestamp::now();
    for cluster in wmws {
        if ctx
            .lookup(
                Some(cluster),
                PlacementSummary::GROUP,
                PlacementSummary::VERSION,
                PlacementSummary::PLURAL,
            )
            .is_none()
        {
            if wanted.keys().any(|(c, _)| c == cluster) {
                // A WMW made before the kind existed: give it the CRD.
                install_crd(ctx, cluster, PlacementSummary::crd()).await;
                retry = true;
            }
            continue;
        }
        let (existing, _) = ctx.list(&ClusterScope::One(cluster.clone()), &resource, None, None);
        for (key, _) in &existing {
            if !wanted.contains_key(&(cluster.clone(), key.name.clone())) {
                if let Err(e) = delete(ctx, key).await {
                    retry |= failed("removing a PlacementSummary", key, &e);
                }
            }
        }
        let existing: HashMap<String, Arc<StoredObject>> =
            existing.into_iter().map(|(k, o)| (k.name, o)).collect();
        for ((c, name), summary) in wanted.range((cluster.clone(), String::new())..) {
            if c != cluster {
                break;
            }
            let key = ObjectKey {
                cluster: cluster.clone(),
                resource: resource.clone(),
                namespace: String::new(),
                name: name.clone(),
            };
            let previous: Option<PlacementSummary> = existing
                .get(name)
                .and_then(|o| serde_json::from_value(o.value()).ok());
            let mut summary = summary.clone();
            summary.destinations = summary::carry_last_update(
                previous
                    .as_ref()
                    .map(|p| p.destinations.as_slice())
                    .unwrap_or_default(),
                std::mem::take(&mut summary.destinations),
                &now,
            );
            summary.fill_columns();
            let body = |rv: Option<u64>| {
                let mut v = json!({
                    "apiVersion": format!("{}/{}", PlacementSummary::GROUP, PlacementSummary::VERSION),
                    "kind": PlacementSummary::KIND,
                    "metadata": {"name": name},
                    "object": summary.object,
                    "executingCount": summary.executing_count,
                    "destinations": summary.destinations,
                    "clusters": summary.clusters,
                    "synced": summary.synced,
                    "statuses": summary.statuses,
                    "driftCorrections": summary.drift_corrections,
                });
                if let Some(rv) = rv {
                    v["metadata"]["resourceVersion"] = json!(rv.to_string());
                }
                v
            };
            match (existing.get(name), previous) {
                (None, _) => {
                    let Ok(info) = info_in(ctx, cluster, &resource) else {
                        retry = true;
                        continue;
                    };
                    if let Err(e) = create(ctx, cluster, &info, "", body(None)).await {
                        retry |= failed("creating a PlacementSummary", &key, &e);
                    }
                }
                (Some(_), Some(p))
                    if p.object == summary.object
                        && p.executing_count == summary.executing_count
                        && p.destinations == summary.destinations
                        && p.statuses == summary.statuses
                        && p.drift_corrections == summary.drift_corrections => {}
                (Some(o), _) => {
                    if let Err(e) = update(ctx, &key, body(Some(o.rv))).await {
                        retry |= failed("updating a PlacementSummary", &key, &e);
                    }
                }
            }
        }
    }
    retry
}

// ---------------------------------------------------------------- status

fn condition(old: &Value, type_: &str, status: bool, reason: &str, message: &str) -> Value {
    let status = if status { "True" } else { "False" };
    let previous = old
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c.get("type") == Some(&json!(type_))));
    let since = match previous {
        Some(c) if c.get("status") == Some(&json!(status)) => c.get("lastTransitionTime").cloned(),
        _ => None,
    }
    .unwrap_or_else(|| json!(ferry_api::timestamp::now()));
    json!({"type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": since})
}

/// One message per object and destination can be many: the condition names
/// the first few, and the PlacementSummaries have the rest.
fn first_messages(messages: &BTreeSet<String>) -> Vec<String> {
    let mut out: Vec<String> = messages
        .iter()
        .take(MAX_CUSTOMIZATION_MESSAGES)
        .cloned()
        .collect();
    if messages.len() > MAX_CUSTOMIZATION_MESSAGES {
        out.push(format!(
            "and {} more (the objects' PlacementSummaries say which)",
            messages.len() - MAX_CUSTOMIZATION_MESSAGES
        ));
    }
    out
}

/// Refused copies the `Ready` condition names; `status.refusedCount` counts
/// them all and the objects' PlacementSummaries say the rest.
const MAX_REFUSALS_NAMED: usize = 3;

/// `Ready`'s message while copies are refused: how many, the first few by
/// object and SyncTarget with the cluster's message, and how many more.
fn refused_message(refused: &BTreeSet<String>) -> String {
    let named: Vec<&str> = refused
        .iter()
        .take(MAX_REFUSALS_NAMED)
        .map(String::as_str)
        .collect();
    let copies = if refused.len() == 1 { "copy" } else { "copies" };
    let mut message = format!(
        "{} {copies} refused by their clusters: {}",
        refused.len(),
        named.join("; ")
    );
    if refused.len() > MAX_REFUSALS_NAMED {
        message.push_str(&format!(
            "; and {} more (the objects' PlacementSummaries say which)",
            refused.len() - MAX_REFUSALS_NAMED
        ));
    }
    message
}

/// How a placement gets a Location, for the messages of one that reaches none.
fn grant_hint() -> String {
    format!(
        "its workspace grants the placer RBAC \"{}\" on locations.{EDGE_GROUP} (that Location, or all)",
        grant::BIND_VERB
    )
}

/// The placement's status: counts and conditions.
fn status_of(p: &Placement) -> Value {
    let invalid = !p.problems.is_empty();
    let conflict = !p.conflicts.is_empty();
    let pending = !p.pending.is_empty();
    let uncustomized = !p.customization.is_empty();
    let refused = !p.refused.is_empty();
    let problems: Vec<String> = p.problems.iter().map(ToString::to_string).collect();
    let conflicts: Vec<String> = p.conflicts.iter().cloned().collect();
    let ready_message = if invalid {
        "the spec has problems; see InvalidSpec".to_string()
    } else if conflict {
        "some objects are wanted differently by another placement; see Conflict".to_string()
    } else if uncustomized {
        "some copies could not be customized; see CustomizationError".to_string()
    } else if pending {
        format!(
            "waiting for the mailbox workspaces of {}",
            p.pending.iter().cloned().collect::<Vec<_>>().join(", ")
        )
    } else if refused {
        refused_message(&p.refused)
    } else if p.placer.is_none() {
        "no placer is recorded (the EdgePlacement was written before Ferry recorded who places): \
         apply it again so the hub records you as its placer; until then it reaches no Location"
            .to_string()
    } else if p.destinations.is_empty() {
        format!(
            "{} objects selected, no Location reached: a Location is used only when it matches a \
             locationSelector and {}",
            p.selected.len(),
            grant_hint()
        )
    } else {
        format!(
            "{} objects placed on {} SyncTargets",
            p.selected.len(),
            p.destinations.len()
        )
    };
    let ready_reason = match (invalid, conflict, uncustomized, pending) {
        (true, ..) => "InvalidSpec",
        (_, true, ..) => "Conflict",
        (_, _, true, _) => "CustomizationError",
        (.., true) => "MailboxNotReady",
        _ if refused => "CopiesRefused",
        _ if p.placer.is_none() => "NoPlacer",
        // Nothing runs anywhere: not Ready (kcp and KubeStellar users read
        // Ready as "my workload is out there").
        _ if p.destinations.is_empty() => "NoLocations",
        _ => "Placed",
    };
    let customization = first_messages(&p.customization);
    json!({
        "specGeneration": p.generation,
        "matchingLocationCount": p.matching_locations,
        "executingCount": p.executing,
        "refusedCount": p.refused.len(),
        "conditions": [
            condition(&p.value, "Ready",
                !(invalid || conflict || uncustomized || pending || refused || p.placer.is_none()
                    || p.destinations.is_empty()),
                ready_reason,
                &ready_message),
            condition(&p.value, "InvalidSpec", invalid, if invalid { "InvalidSpec" } else { "Valid" },
                &problems.join("; ")),
            condition(&p.value, "Conflict", conflict, if conflict { "Conflict" } else { "NoConflict" },
                &conflicts.join("; ")),
            condition(&p.value, "CustomizationError", uncustomized,
                if uncustomized { "CustomizationError" } else { "Customized" }, &customization.join("; ")),
        ],
    })
}

async fn write_status(ctx: &ControllerContext, p: &Placement) {
    if p.deleting {
        return;
    }
    let status = status_of(p);
    if p.value.get("status") == Some(&status) {
        return;
    }
    let key = ObjectKey {
        cluster: p.cluster.clone(),
        resource: EDGE_PLACEMENTS.into(),
        namespace: String::new(),
        name: p.name.clone(),
    };
    let body = json!([{"op": "add", "path": "/status", "value": status}]);
    if let Err(e) = patch(ctx, &key, Some("status"), PatchType::Json, body).await {
        if e.code != 404 {
            failed("writing EdgePlacement status", &key, &e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_customization_problems_are_named_up_to_a_limit() {
        let few: BTreeSet<String> = (0..3).map(|i| format!("m{i}")).collect();
        assert_eq!(first_messages(&few), ["m0", "m1", "m2"]);
        let many: BTreeSet<String> = (0..1000).map(|i| format!("m{i:04}")).collect();
        let listed = first_messages(&many);
        assert_eq!(listed.len(), MAX_CUSTOMIZATION_MESSAGES + 1);
        assert_eq!(listed[0], "m0000");
        assert!(listed[MAX_CUSTOMIZATION_MESSAGES].starts_with("and 990 more"));
    }

    #[test]
    fn a_refusal_message_names_a_few_copies_and_counts_the_rest() {
        let one: BTreeSet<String> =
            ["services default/web on florin: Service \"web\" is invalid".to_string()].into();
        assert_eq!(
            refused_message(&one),
            "1 copy refused by their clusters: services default/web on florin: Service \"web\" is invalid"
        );
        let many: BTreeSet<String> = (0..500)
            .map(|i| format!("services default/w{i:03} on florin: no"))
            .collect();
        let message = refused_message(&many);
        assert!(message
            .starts_with("500 copies refused by their clusters: services default/w000 on florin: no; "));
        assert!(
            message.ends_with("; and 497 more (the objects' PlacementSummaries say which)"),
            "{message}"
        );
        assert!(!message.contains("w003"), "{message}");
    }
}
