//! A Placement's status, as kcp's placement controller keeps it: the
//! Location it selected (`status.selectedLocation`), its phase (`Pending`
//! without one, `Bound` while a namespace uses it, else `Unbound`) and its
//! `Ready` condition. Pure, but for the cache of parsed Placements
//! ([`compiled`]).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use parking_lot::Mutex;
use serde_json::{json, Value};

use super::targets::selector;
use ferry_server::apis::{condition, merge_conditions};
use ferry_server::auth::UserInfo;
use ferry_server::grants::tmc::requester;
use ferry_server::selector::{LabelSelector, SelectorLimits};
use ferry_server::storage::StoredObject;

/// A Placement as the scheduler evaluates it: its value and its selectors,
/// parsed once per stored version of it ([`compiled`]) rather than on every
/// event that asks whether it selects a namespace or a Location.
pub struct Compiled {
    pub value: Value,
    /// `spec.locationSelectors`; empty: every Location.
    location_selectors: Vec<LabelSelector>,
    namespace_selector: LabelSelector,
    /// Why its selectors are not evaluated: over the size limits the hub
    /// enforces when a Placement is written (one an older hub stored).
    over_limits: Option<String>,
    /// Whether namespaces may be scheduled by it ([`usable`]).
    pub usable: bool,
    /// Whose grant lets it use another workspace's Locations, as recorded
    /// when its spec was written (`grant::requester`).
    pub requester: Option<UserInfo>,
}

impl Compiled {
    pub fn new(value: Value) -> Compiled {
        let mut limits = SelectorLimits::default();
        limits.list("spec.locationSelectors", value.pointer("/spec/locationSelectors"));
        limits.one("spec.namespaceSelector", value.pointer("/spec/namespaceSelector"));
        let usable = usable(&value);
        let requester = requester(&value);
        if let Some(over) = limits.finish().first() {
            return Compiled {
                value,
                location_selectors: vec![LabelSelector::nothing()],
                namespace_selector: LabelSelector::nothing(),
                over_limits: Some(over.describe()),
                usable,
                requester,
            };
        }
        let location_selectors = value
            .pointer("/spec/locationSelectors")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|s| selector(Some(s)))
            .collect();
        let namespace_selector = selector(value.pointer("/spec/namespaceSelector"));
        Compiled {
            value,
            location_selectors,
            namespace_selector,
            over_limits: None,
            usable,
            requester,
        }
    }

    /// `spec.locationSelectors`, parsed; empty: every Location.
    pub fn location_selectors(&self) -> &[LabelSelector] {
        &self.location_selectors
    }
}

/// Parsed Placements by the stored version they were parsed from. Each entry
/// holds its version, so no other object reuses its address while cached.
struct Cache {
    entries: HashMap<usize, (Arc<StoredObject>, Arc<Compiled>)>,
    bytes: usize,
}

/// What the cache may hold before it starts over: versions replaced or
/// deleted are dropped then.
const CACHE_BYTES: usize = 64 * 1024 * 1024;

static CACHE: LazyLock<Mutex<Cache>> = LazyLock::new(|| {
    Mutex::new(Cache {
        entries: HashMap::new(),
        bytes: 0,
    })
});

/// The stored Placement `stored`, decoded and parsed: once per stored version.
pub fn compiled(stored: &Arc<StoredObject>) -> Arc<Compiled> {
    let id = Arc::as_ptr(stored) as usize;
    if let Some((_, c)) = CACHE.lock().entries.get(&id) {
        return c.clone();
    }
    let c = Arc::new(Compiled::new(stored.value()));
    let mut cache = CACHE.lock();
    if cache.bytes + stored.json.len() > CACHE_BYTES {
        cache.entries.clear();
        cache.bytes = 0;
    }
    cache.bytes += stored.json.len();
    cache.entries.insert(id, (stored.clone(), c.clone()));
    c
}

/// The name of the Location the Placement `placement` selected
/// (`status.selectedLocation.locationName`), if any.
pub fn selected_location(placement: &Value) -> Option<&str> {
    placement
        .pointer("/status/selectedLocation/locationName")
        .and_then(Value::as_str)
}

/// `spec.locationResource`, defaulting to SyncTargets.
pub fn location_resource(placement: &Value) -> (String, String, String) {
    let r = placement.pointer("/spec/locationResource");
    let field = |f: &str, default: &str| {
        r.and_then(|r| r.get(f))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .unwrap_or(default)
            .to_string()
    };
    (
        field("group", "workload.kcp.io"),
        field("version", "v1alpha1"),
        field("resource", "synctargets"),
    )
}

/// Whether the Location `location` serves the Placement's resource and one
/// of its `spec.locationSelectors` (ORed; none: every Location) selects it.
pub fn selects_location(placement: &Compiled, location: &Value) -> bool {
    let (g, v, r) = location_resource(&placement.value);
    let res = location.pointer("/spec/resource");
    let same = |f: &str, want: &str| res.and_then(|x| x.get(f)).and_then(Value::as_str).unwrap_or("") == want;
    if !(same("group", &g) && same("version", &v) && same("resource", &r)) {
        return false;
    }
    let labels = super::targets::labels_of(location);
    placement.location_selectors.is_empty() || placement.location_selectors.iter().any(|s| s.matches(&labels))
}

/// The Placement's status, given the Locations of its location workspace
/// it may use (`Err`: why it may use none — the workspace does not exist,
/// or grants nothing; [`super::grant::not_usable`]), the workspace's path,
/// and whether a namespace uses the Placement.
pub fn status(
    placement: &Compiled,
    location_path: &str,
    locations: Result<&[Value], &str>,
    used: bool,
) -> Value {
    let old = placement.value.get("status").cloned().unwrap_or(json!({}));
    let old_conditions = old.get("conditions");
    if let Some(over) = &placement.over_limits {
        let message = format!("{over}: make the selector smaller; it selects nothing until then");
        return json!({
            "phase": "Pending",
            "conditions": merge_conditions(old_conditions, vec![condition("Ready", false, "SelectorTooLarge", &message)]),
        });
    }
    let locations = match locations {
        Ok(l) => l,
        Err(message) => {
            return json!({
                "phase": "Pending",
                "conditions": merge_conditions(old_conditions, vec![condition("Ready", false, "LocationNotFound", message)]),
            })
        }
    };
    let mut valid: Vec<&str> = locations
        .iter()
        .filter(|l| selects_location(placement, l))
        .filter_map(|l| l.pointer("/metadata/name").and_then(Value::as_str))
        .collect();
    valid.sort();
    let kept = old
        .pointer("/selectedLocation")
        .filter(|s| s.get("path").and_then(Value::as_str) == Some(location_path))
        .and_then(|s| s.get("locationName").and_then(Value::as_str))
        .filter(|name| valid.contains(name));
    let Some(chosen) = kept.or_else(|| valid.first().copied()) else {
        return json!({
            "phase": "Pending",
            "conditions": merge_conditions(old_conditions, vec![condition(
                "Ready",
                false,
                "LocationNoMatch",
                &format!("no Location in {location_path:?} matches spec.locationSelectors and spec.locationResource"),
            )]),
        });
    };
    json!({
        "phase": if used { "Bound" } else { "Unbound" },
        "selectedLocation": {"path": location_path, "locationName": chosen},
        "conditions": merge_conditions(old_conditions, vec![condition("Ready", true, "", "")]),
    })
}

/// Whether namespaces may use the Placement (kcp: not `Pending`, `Ready` not false).
pub fn usable(placement: &Value) -> bool {
    let phase = placement.pointer("/status/phase").and_then(Value::as_str);
    let not_ready = placement
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| {
            c.get("type").and_then(Value::as_str) == Some("Ready")
                && c.get("status").and_then(Value::as_str) == Some("False")
        });
    matches!(phase, Some("Bound") | Some("Unbound")) && !not_ready
}

/// Whether the Placement's `spec.namespaceSelector` (absent: every
/// namespace) selects a namespace with `labels`.
pub fn selects_namespace(placement: &Compiled, labels: &std::collections::BTreeMap<String, String>) -> bool {
    placement.namespace_selector.matches(labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn location(name: &str, labels: Value) -> Value {
        json!({"metadata": {"name": name, "labels": labels},
               "spec": {"resource": {"group": "workload.kcp.io", "version": "v1alpha1", "resource": "synctargets"}}})
    }

    #[test]
    fn a_placement_selects_a_matching_location_and_keeps_it() {
        let locs = vec![
            location("b", json!({"env": "test"})),
            location("a", json!({"env": "prod"})),
        ];
        let mut p = json!({"spec": {"locationSelectors": [{"matchLabels": {"env": "test"}}]}});
        let s = status(&Compiled::new(p.clone()), "root:loc", Ok(&locs), false);
        assert_eq!(s["phase"], "Unbound");
        assert_eq!(
            s["selectedLocation"],
            json!({"path": "root:loc", "locationName": "b"})
        );
        assert!(usable(&json!({"status": s})));
        // Bound while a namespace uses it.
        p["status"] = s;
        let s = status(&Compiled::new(p), "root:loc", Ok(&locs), true);
        assert_eq!(s["phase"], "Bound");
        // No selector: every location; the first by name.
        let s = status(&Compiled::new(json!({"spec": {}})), "root:loc", Ok(&locs), false);
        assert_eq!(s["selectedLocation"]["locationName"], "a");
    }

    #[test]
    fn without_a_location_a_placement_is_pending_and_says_why() {
        let p = Compiled::new(json!({"spec": {"locationSelectors": [{"matchLabels": {"env": "nope"}}]}}));
        let s = status(&p, "root:loc", Ok(&[location("a", json!({}))]), true);
        assert_eq!(s["phase"], "Pending");
        assert_eq!(s["conditions"][0]["reason"], "LocationNoMatch");
        assert!(!usable(&json!({"status": s})));
        let why = super::super::grant::not_usable("root:nowhere", "mal");
        let s = status(&p, "root:nowhere", Err(&why), false);
        assert_eq!(s["phase"], "Pending");
        assert_eq!(s["conditions"][0]["message"], why.as_str());
        // A Location of another resource does not count.
        let mut other = location("x", json!({}));
        other["spec"]["resource"]["resource"] = json!("clusters");
        assert!(!selects_location(&Compiled::new(json!({"spec": {}})), &other));
    }

    #[test]
    fn the_namespace_selector_defaults_to_every_namespace() {
        let labels = [("purpose".to_string(), "workload".to_string())]
            .into_iter()
            .collect();
        assert!(selects_namespace(&Compiled::new(json!({"spec": {}})), &labels));
        assert!(selects_namespace(
            &Compiled::new(json!({"spec": {"namespaceSelector": {"matchLabels": {"purpose": "workload"}}}})),
            &labels
        ));
        assert!(!selects_namespace(
            &Compiled::new(json!({"spec": {"namespaceSelector": {"matchLabels": {"purpose": "other"}}}})),
            &labels
        ));
    }

    #[test]
    fn a_placement_over_the_selector_limits_selects_nothing_and_says_which_field() {
        let values: Vec<String> = (0..12_000).map(|i| format!("v{i}")).collect();
        let p = Compiled::new(json!({"spec": {"locationSelectors": [
            {"matchExpressions": [{"key": "k", "operator": "NotIn", "values": values}]}]}}));
        let s = status(&p, "root:loc", Ok(&[location("a", json!({}))]), false);
        assert_eq!(s["phase"], "Pending");
        assert_eq!(s["conditions"][0]["reason"], "SelectorTooLarge");
        let message = s["conditions"][0]["message"].as_str().unwrap();
        assert!(
            message.starts_with("spec.locationSelectors[0].matchExpressions[0].values: Too many: 12000: must have at most 256 items"),
            "{message}"
        );
        assert!(!selects_namespace(&p, &Default::default()));
    }
}
