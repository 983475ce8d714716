//! Combined status (KubeStellar's `StatusCollector` / `CombinedStatus`):
//! for each workload object an EdgePlacement sends to clusters, one
//! `CombinedStatus` next to the object in its workload management workspace
//! (WMW), holding the built-in summary of its kind ([`builtin`]) and the
//! result of every StatusCollector the placement's matching downsync
//! members name ([`collect`]), over one row per destination: the
//! destination's name and labels, the object, the status its cluster
//! returned into the mailbox copy, and when that last changed.
//!
//! Run by the placement translator at the end of each pass (so it follows
//! the same watch, and a cluster's status change shows within the pass that
//! copies it back), with what the pass resolved: [`PlacedObjects`]; for kcp
//! TMC Placements, by their own controller (the `ferry-tmc` crate's
//! `combined_status`, on what this module exports). Only
//! the placement's own copies are read — a mailbox copy that came from
//! another workspace is never a row — and StatusCollectors are read from
//! the placement's own workspace only. Each StatusCollector gets a `Valid`
//! condition naming every field that cannot be used and the fix.
//!
//! This module is the one place here that reads and writes through the hub.

pub mod builtin;
pub mod collect;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use ferry_api::combined_status::{
    CombinedStatus, NamedStatusCombination, StatusCollector, StatusCollectorSpec, API_GROUP_LABEL,
    BINDING_POLICY_LABEL, NAMESPACE_LABEL, NAME_LABEL, RESOURCE_LABEL, STATUS_COLLECTORS_ANNOTATION,
    TMC_PLACEMENT_LABEL,
};
use serde_json::{json, Value};

use ferry_server::controller::{info_for_storage_key, install_crd, ControllerContext};
use ferry_server::service::{self, DeleteOptions, PatchType, Request};
use ferry_server::status::ApiError;
use ferry_server::storage::{ClusterScope, ObjectKey, StoredObject};

/// Field manager of the writes.
pub const MANAGER: &str = "ferry-combined-status";
/// The storage key of StatusCollectors.
pub const STATUS_COLLECTORS: &str = "control.kubestellar.io/statuscollectors";
/// The storage key of CombinedStatuses.
pub const COMBINED_STATUSES: &str = "control.kubestellar.io/combinedstatuses";

/// Which kind of placement a CombinedStatus is for: each kind's writer keeps
/// to its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlacementKind {
    /// KubeStellar's EdgePlacement (the placement translator).
    EdgePlacement,
    /// kcp TMC's `scheduling.kcp.io` Placement (the `ferry-tmc` crate's
    /// `combined_status`).
    Placement,
}

impl PlacementKind {
    /// Whether the stored CombinedStatus `obj` is one the hub wrote for this kind.
    pub fn owns(self, obj: &StoredObject) -> bool {
        let tmc = obj.labels.contains_key(TMC_PLACEMENT_LABEL);
        match self {
            PlacementKind::EdgePlacement => obj.labels.contains_key(BINDING_POLICY_LABEL) && !tmc,
            PlacementKind::Placement => tmc,
        }
    }

    /// Where the placement names its StatusCollectors, for messages.
    fn collectors_field(self) -> String {
        match self {
            PlacementKind::EdgePlacement => "the EdgePlacement's statusCollectors".into(),
            PlacementKind::Placement => format!("the Placement's {STATUS_COLLECTORS_ANNOTATION} annotation"),
        }
    }
}

/// One EdgePlacement as the translator resolved it.
pub struct PlacedObjects {
    /// The WMW's logical cluster.
    pub cluster: String,
    pub name: String,
    pub uid: String,
    pub objects: Vec<PlacedObject>,
    pub destinations: Vec<Destination>,
}

/// A workload object the placement selects.
pub struct PlacedObject {
    pub key: ObjectKey,
    pub group: String,
    pub resource: String,
    pub value: Value,
    /// The StatusCollectors its matching downsync members name.
    pub collectors: BTreeSet<String>,
}

/// One destination and what its cluster returned for one object.
#[derive(Clone)]
pub struct Destination {
    /// The SyncTarget's name.
    pub target: String,
    /// The Location's labels, then the SyncTarget's.
    pub labels: BTreeMap<String, String>,
    /// The status each object's copy carries (by the object's key), when
    /// the copy is this placement's and its cluster reported one, and when
    /// it last changed.
    pub returned: HashMap<ObjectKey, (Value, String)>,
    /// The last drift the cluster's syncer restored on each object's copy
    /// (by the object's key), where it restored one.
    pub drift: HashMap<ObjectKey, ferry_api::drift::Drift>,
}

/// A StatusCollector of a WMW, compiled (or why it cannot be).
/// A workspace's StatusCollectors by name, compiled or why they cannot be.
pub type Collectors = HashMap<String, Result<collect::Collector, Vec<String>>>;

/// Bring every CombinedStatus in `wmws` up to date with `placements`;
/// true when something must be retried.
pub async fn write(ctx: &ControllerContext, placements: &[PlacedObjects], wmws: &[String]) -> bool {
    let mut retry = false;
    let kind = PlacementKind::EdgePlacement;
    for cluster in wmws {
        let served = ctx
            .lookup(
                Some(cluster),
                CombinedStatus::GROUP,
                CombinedStatus::VERSION,
                CombinedStatus::PLURAL,
            )
            .is_some();
        let mine: Vec<&PlacedObjects> = placements.iter().filter(|p| &p.cluster == cluster).collect();
        if !served {
            if mine.iter().any(|p| !p.objects.is_empty()) {
                // A WMW made before the kinds existed: give it the CRDs.
                install_crds(ctx, cluster).await;
                retry = true;
            }
            continue;
        }
        let collectors = read_collectors(ctx, cluster, &mut retry).await;
        let mut wanted: BTreeMap<(String, String), Value> = BTreeMap::new();
        for p in mine {
            for o in &p.objects {
                if let Some((ns, name, body)) = combined(kind, p, o, &collectors) {
                    wanted.insert((ns, name), body);
                }
            }
        }
        retry |= apply(ctx, cluster, wanted, |obj| kind.owns(obj)).await;
    }
    retry
}

/// The CombinedStatus of `o` under `p`: `(namespace, name, object)`, or
/// `None` when there is nothing to combine (a cluster-scoped object, or no
/// built-in summary and no StatusCollector).
pub fn combined(
    kind: PlacementKind,
    p: &PlacedObjects,
    o: &PlacedObject,
    collectors: &Collectors,
) -> Option<(String, String, Value)> {
    if o.key.namespace.is_empty() {
        return None;
    }
    let rows: Vec<collect::Row> = p
        .destinations
        .iter()
        .map(|d| {
            let (status, at) = match d.returned.get(&o.key) {
                Some((s, at)) => (Some(s), at.as_str()),
                None => (None, "0001-01-01T00:00:00Z"),
            };
            collect::row(&d.target, &d.labels, &o.value, status, at)
        })
        .collect();
    let mut results: Vec<NamedStatusCombination> = Vec::new();
    let mut summary = String::new();
    if let Some((built_in, line)) = builtin::summarize(&o.group, &o.resource, &rows) {
        results.extend(built_in);
        summary = line;
    }
    let drifts: Vec<(&str, Option<&ferry_api::drift::Drift>)> = p
        .destinations
        .iter()
        .map(|d| (d.target.as_str(), d.drift.get(&o.key)))
        .collect();
    if let Some((drift, line)) = builtin::drift(&drifts) {
        results.push(drift);
        summary = if summary.is_empty() {
            line
        } else {
            format!("{summary}; {line}")
        };
    }
    let mut budget = Budget::new(collect::COST_BUDGET);
    for name in &o.collectors {
        results.push(match collectors.get(name) {
            Some(Ok(c)) => match budget.spend(name, collect::cost(c, &rows)) {
                Ok(()) => collect::evaluate(name, c, &rows),
                Err(error) => NamedStatusCombination {
                    name: name.clone(),
                    error,
                    ..Default::default()
                },
            },
            Some(Err(errors)) => NamedStatusCombination {
                name: name.clone(),
                error: format!(
                    "StatusCollector {name:?} is invalid ({}); fix it, see its Valid condition",
                    errors.first().map(String::as_str).unwrap_or_default()
                ),
                ..Default::default()
            },
            None => NamedStatusCombination {
                name: name.clone(),
                error: format!(
                    "StatusCollector {name:?} does not exist in this workspace; create it, or remove it from {}",
                    kind.collectors_field()
                ),
                ..Default::default()
            },
        });
    }
    if results.is_empty() {
        return None;
    }
    let uid = o
        .value
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let name = CombinedStatus::name_for(uid, &p.uid);
    let subject = if o.group.is_empty() {
        format!("{}/{}", o.resource, o.key.name)
    } else {
        format!("{}.{}/{}", o.resource, o.group, o.key.name)
    };
    let mut body = json!({
        "apiVersion": format!("{}/{}", CombinedStatus::GROUP, CombinedStatus::VERSION),
        "kind": CombinedStatus::KIND,
        "metadata": {
            "name": name,
            "namespace": o.key.namespace,
            "labels": {
                API_GROUP_LABEL: o.group,
                RESOURCE_LABEL: o.resource,
                NAMESPACE_LABEL: o.key.namespace,
                NAME_LABEL: o.key.name,
                BINDING_POLICY_LABEL: p.name,
            },
        },
        "subject": subject,
        "placement": p.name,
        "summary": summary,
        "results": results,
    });
    if kind == PlacementKind::Placement {
        body["metadata"]["labels"][TMC_PLACEMENT_LABEL] = json!(p.name);
    }
    if !o.collectors.is_empty() {
        body["conditions"] = json!([budget.condition(&p.name)]);
    }
    Some((o.key.namespace.clone(), name, body))
}

/// The CEL cost the StatusCollectors of one (object, placement) may still
/// spend, and which of them did not fit.
struct Budget {
    limit: u64,
    spent: u64,
    over: Vec<(String, u64)>,
}

impl Budget {
    fn new(limit: u64) -> Budget {
        Budget {
            limit,
            spent: 0,
            over: Vec::new(),
        }
    }

    /// Take `cost` for collector `name`, or say why it is not evaluated (a
    /// cheaper collector after it may still fit).
    fn spend(&mut self, name: &str, cost: u64) -> Result<(), String> {
        let total = self.spent.saturating_add(cost);
        if total <= self.limit {
            self.spent = total;
            return Ok(());
        }
        self.over.push((name.to_string(), cost));
        Err(format!(
            "not evaluated: it would cost an estimated {cost}, and the StatusCollectors of this object \
             under this placement may cost {} in all ({} is left); name fewer StatusCollectors in the \
             placement, or make their expressions read less",
            self.limit,
            self.limit - self.spent
        ))
    }

    /// The `Evaluated` condition of a CombinedStatus under placement `placement`.
    fn condition(&self, placement: &str) -> Value {
        if self.over.is_empty() {
            return json!({"type": "Evaluated", "status": "True", "reason": "WithinCostBudget",
                          "message": format!("every StatusCollector was evaluated (estimated cost {} of the budget of {})",
                                             self.spent, self.limit)});
        }
        let names: Vec<String> = self.over.iter().map(|(n, _)| format!("{n:?}")).collect();
        let (which, were) = if names.len() == 1 {
            ("StatusCollector", "was")
        } else {
            ("StatusCollectors", "were")
        };
        json!({"type": "Evaluated", "status": "False", "reason": "CostBudgetExceeded",
               "message": format!(
                   "{which} {} {were} not evaluated: the StatusCollectors of this object under placement {placement:?} \
                    may cost {} in all (estimated CEL cost) and the others took {}; name fewer StatusCollectors \
                    in the placement, or make their expressions read less",
                   names.join(", "), self.limit, self.spent)})
    }
}

/// The StatusCollectors of `cluster`, compiled; each one's status says
/// whether it can be used.
pub async fn read_collectors(ctx: &ControllerContext, cluster: &str, retry: &mut bool) -> Collectors {
    let (objects, _) = ctx.list(&ClusterScope::One(cluster.into()), STATUS_COLLECTORS, None, None);
    let mut out = Collectors::new();
    for (key, obj) in objects {
        let value = obj.value();
        let spec: Result<StatusCollectorSpec, _> =
            serde_json::from_value(value.get("spec").cloned().unwrap_or(json!({})));
        let compiled = match spec {
            Ok(spec) => collect::compile(&spec),
            Err(e) => Err(vec![format!("spec: cannot be read ({e}); fix its shape")]),
        };
        let status = collector_status(
            &value,
            compiled.as_ref().err().map(Vec::as_slice).unwrap_or_default(),
        );
        if value.get("status") != Some(&status) {
            let body = json!([{"op": "add", "path": "/status", "value": status}]);
            if let Err(e) = patch_status(ctx, &key, body).await {
                *retry |= failed("writing a StatusCollector's status", &key, &e);
            }
        }
        out.insert(key.name.clone(), compiled);
    }
    out
}

/// The status a StatusCollector (`value`) should have given `errors`,
/// keeping the condition's transition time while it holds.
fn collector_status(value: &Value, errors: &[String]) -> Value {
    let generation = value
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let (status, reason, message) = if errors.is_empty() {
        ("True", "Valid", "every expression compiles".to_string())
    } else {
        ("False", "InvalidSpec", errors.join("; "))
    };
    let since = value
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.get("type") == Some(&json!("Valid")) && c.get("status") == Some(&json!(status)))
        })
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| json!(ferry_api::timestamp::now()));
    let mut out = json!({
        "observedGeneration": generation,
        "conditions": [{"type": "Valid", "status": status, "reason": reason, "message": message,
                        "observedGeneration": generation, "lastTransitionTime": since}],
    });
    if !errors.is_empty() {
        out["errors"] = json!(errors);
    }
    out
}

/// Make the CombinedStatuses of `cluster` that `owned` selects exactly `wanted`.
pub async fn apply(
    ctx: &ControllerContext,
    cluster: &str,
    mut wanted: BTreeMap<(String, String), Value>,
    owned: impl Fn(&StoredObject) -> bool,
) -> bool {
    let mut retry = false;
    let (existing, _) = ctx.list(&ClusterScope::One(cluster.into()), COMBINED_STATUSES, None, None);
    for (key, obj) in existing {
        if !owned(&obj) {
            continue; // not one this writer keeps
        }
        let Some(body) = wanted.remove(&(key.namespace.clone(), key.name.clone())) else {
            if let Err(e) = delete(ctx, &key).await {
                retry |= failed("removing a CombinedStatus", &key, &e);
            }
            continue;
        };
        let current = obj.value();
        // Labels others set stay (kcp TMC's scheduler labels every object in
        // a scheduled namespace, these too): only the hub's own are compared.
        let mut labels = obj.labels.clone();
        let own_labels = body.pointer("/metadata/labels").and_then(Value::as_object);
        for (k, v) in own_labels.into_iter().flatten() {
            labels.insert(k.clone(), v.as_str().unwrap_or_default().to_string());
        }
        let same = ["subject", "placement", "summary", "results"].iter().all(|f| {
            current.get(*f) == body.get(*f) || (body.get(*f) == Some(&json!([])) && current.get(*f).is_none())
        }) && labels == obj.labels;
        if same {
            continue;
        }
        let mut body = body;
        body["metadata"]["labels"] = json!(labels);
        body["metadata"]["resourceVersion"] = json!(obj.rv.to_string());
        if let Err(e) = write_object(ctx, &key, body, false).await {
            retry |= failed("updating a CombinedStatus", &key, &e);
        }
    }
    for ((namespace, name), body) in wanted {
        let key = ObjectKey {
            cluster: cluster.into(),
            resource: COMBINED_STATUSES.into(),
            namespace,
            name,
        };
        if let Err(e) = write_object(ctx, &key, body, true).await {
            // A namespace going away (403) or gone (404) is not worth a retry.
            retry |= !matches!(e.code, 403 | 404) && failed("creating a CombinedStatus", &key, &e);
        }
    }
    retry
}

/// Install the StatusCollector and CombinedStatus CRDs in `cluster` (a
/// workspace made before they existed).
pub async fn install_crds(ctx: &ControllerContext, cluster: &str) {
    for crd in [StatusCollector::crd(), CombinedStatus::crd()] {
        if let Err(e) = install_crd(ctx, cluster, &crd).await {
            tracing::debug!(
                cluster,
                "installing the combined-status CRDs failed: {}",
                e.message
            );
        }
    }
}

fn request(ctx: &ControllerContext, key: &ObjectKey, verb: &str) -> Result<Request, ApiError> {
    let info = info_for_storage_key(ctx, &key.cluster, &key.resource).ok_or_else(|| {
        ApiError::not_found_message(format!("{} is not served in {}", key.resource, key.cluster))
    })?;
    ctx.request_at(info, key, verb, MANAGER)
}

async fn write_object(
    ctx: &ControllerContext,
    key: &ObjectKey,
    body: Value,
    create: bool,
) -> Result<(), ApiError> {
    if create {
        let info = info_for_storage_key(ctx, &key.cluster, &key.resource)
            .ok_or_else(|| ApiError::not_found_message(format!("{} is not served", key.resource)))?;
        let r = ctx.request(
            &key.cluster,
            (&info.group, &info.version, &info.resource),
            Some(&key.namespace),
            None,
            "create",
            MANAGER,
        )?;
        service::create(&r, body).await.map(|_| ())
    } else {
        service::update(&request(ctx, key, "update")?, body)
            .await
            .map(|_| ())
    }
}

async fn patch_status(ctx: &ControllerContext, key: &ObjectKey, body: Value) -> Result<(), ApiError> {
    let r = request(ctx, key, "patch")?.on_subresource("status");
    service::patch(&r, PatchType::Json, body.to_string().into())
        .await
        .map(|_| ())
}

async fn delete(ctx: &ControllerContext, key: &ObjectKey) -> Result<(), ApiError> {
    match service::delete(&request(ctx, key, "delete")?, &DeleteOptions::default()).await {
        Ok(_) => Ok(()),
        Err(e) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Log a failed write; true: retry.
fn failed(what: &str, key: &ObjectKey, e: &ApiError) -> bool {
    tracing::debug!(cluster = %key.cluster, namespace = %key.namespace, name = %key.name,
        "combined status: {what} failed: {}", e.message);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collectors_past_the_budget_are_named_and_cheaper_ones_still_run() {
        let mut budget = Budget::new(100);
        assert!(budget.spend("a", 60).is_ok());
        let refused = budget.spend("b", 50).unwrap_err();
        assert!(
            refused.contains("estimated 50") && refused.contains("40 is left"),
            "{refused}"
        );
        assert!(budget.spend("c", 40).is_ok(), "a cheaper one still fits");
        assert!(budget.spend("d", u64::MAX).is_err());
        let c = budget.condition("shop");
        assert_eq!(
            (c["status"].as_str(), c["reason"].as_str()),
            (Some("False"), Some("CostBudgetExceeded"))
        );
        let message = c["message"].as_str().unwrap();
        assert!(
            message.starts_with("StatusCollectors \"b\", \"d\" were not evaluated")
                && message.contains("placement \"shop\" may cost 100 in all")
                && message.contains("the others took 100"),
            "{message}"
        );
        let mut within = Budget::new(100);
        within.spend("a", 10).unwrap();
        assert_eq!(within.condition("shop")["status"], "True");
    }

    #[test]
    fn a_collectors_condition_names_the_fields_and_keeps_its_time() {
        let bad = collector_status(
            &json!({"metadata": {"generation": 2}}),
            &["spec.filter: bad; fix".to_string()],
        );
        assert_eq!(bad["conditions"][0]["status"], "False");
        assert_eq!(bad["conditions"][0]["message"], "spec.filter: bad; fix");
        assert_eq!(bad["errors"], json!(["spec.filter: bad; fix"]));
        assert_eq!(bad["observedGeneration"], 2);
        let stored = json!({"metadata": {"generation": 2}, "status": bad});
        assert_eq!(
            collector_status(&stored, &["spec.filter: bad; fix".to_string()]),
            stored["status"]
        );
        let good = collector_status(&stored, &[]);
        assert_eq!(good["conditions"][0]["status"], "True");
        assert!(good.get("errors").is_none());
    }
}
