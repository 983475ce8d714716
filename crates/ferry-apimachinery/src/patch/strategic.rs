//! Kubernetes strategic merge patch, after
//! `k8s.io/apimachinery/pkg/util/strategicpatch` (server side: parallel
//! lists are merged and unmatched nulls ignored).

use serde_json::{Map, Value};

use super::merge::merge_value;
use super::schema::{supports_strategic_merge, ListType, Schema};
use super::{type_name, PatchError, ValueSet};

use std::collections::{HashMap, HashSet};

const PATCH_DIRECTIVE: &str = "$patch";
const RETAIN_KEYS_DIRECTIVE: &str = "$retainKeys";
const SET_ELEMENT_ORDER_PREFIX: &str = "$setElementOrder/";
const DELETE_FROM_PRIMITIVE_LIST_PREFIX: &str = "$deleteFromPrimitiveList/";

/// Applies a strategic merge patch (`application/strategic-merge-patch+json`)
/// to `doc`, an object of kind `group`/`kind`, and returns the patched object.
///
/// Objects merge recursively and `null` deletes a key, as in a merge patch.
/// Lists merge according to the Kubernetes type: by merge key (containers by
/// `name`, container ports by `containerPort`, ...), as sets of scalars
/// (`metadata.finalizers`), or are replaced wholesale. The directives
/// `$patch: replace|delete`, `$retainKeys`, `$setElementOrder/<list>` and
/// `$deleteFromPrimitiveList/<list>` are honoured. As in Kubernetes, patch
/// items not yet in a merged list are placed before the existing ones unless
/// `$setElementOrder` says otherwise.
///
/// For kinds where [`supports_strategic_merge`] is false the patch is applied
/// as a plain merge patch.
pub fn strategic_merge_patch(
    doc: &Value,
    patch_body: &[u8],
    group: &str,
    kind: &str,
) -> Result<Value, PatchError> {
    let patch: Value = serde_json::from_slice(patch_body).map_err(PatchError::Decode)?;
    if !supports_strategic_merge(group, kind) {
        return merge_value(doc, &patch);
    }
    let Value::Object(patch) = &patch else {
        return Err(PatchError::NotAnObject(type_name(&patch)));
    };
    let mut patched = match doc {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    let mut merger = StrategicMerger {
        schema: Schema::new(group, kind),
        path: Vec::new(),
    };
    match merger.merge_map(&mut patched, patch)? {
        MapOutcome::Keep => Ok(Value::Object(patched)),
        MapOutcome::Delete => Ok(Value::Object(Map::new())),
    }
}

/// What the caller should do with a map after merging a patch into it.
enum MapOutcome {
    Keep,
    /// The patch said `$patch: delete`.
    Delete,
}

/// Walks the object and the patch together, tracking the field path so the
/// schema can say how each list merges.
struct StrategicMerger<'a> {
    schema: Schema<'a>,
    /// Field names from the root to the current value; list items add nothing.
    path: Vec<String>,
}

impl StrategicMerger<'_> {
    fn list_type(&self) -> ListType {
        let path: Vec<&str> = self.path.iter().map(String::as_str).collect();
        self.schema.list_type(&path)
    }

    fn merge_map(
        &mut self,
        original: &mut Map<String, Value>,
        patch: &Map<String, Value>,
    ) -> Result<MapOutcome, PatchError> {
        if let Some(directive) = patch.get(PATCH_DIRECTIVE) {
            return match directive.as_str() {
                Some("delete") => Ok(MapOutcome::Delete),
                Some("replace") => {
                    let mut rest = patch.clone();
                    rest.shift_remove(PATCH_DIRECTIVE);
                    let mut replaced = Map::new();
                    self.merge_map(&mut replaced, &rest)?;
                    *original = replaced;
                    Ok(MapOutcome::Keep)
                }
                _ => Err(invalid(format!(
                    "unknown patch type: {directive} in map: {}",
                    Value::Object(patch.clone())
                ))),
            };
        }

        if let Some(retain) = patch.get(RETAIN_KEYS_DIRECTIVE) {
            let retain = string_list(retain).ok_or_else(|| {
                invalid(format!(
                    "invalid patch format for {RETAIN_KEYS_DIRECTIVE}: {retain}"
                ))
            })?;
            let retain: HashSet<&str> = retain.into_iter().collect();
            for (key, value) in patch {
                if !key.starts_with('$') && !value.is_null() && !retain.contains(&key.as_str()) {
                    return Err(invalid(format!(
                        "patch content doesn't match retainKeys list: {key} is not in {RETAIN_KEYS_DIRECTIVE}"
                    )));
                }
            }
            original.retain(|key, _| retain.contains(&key.as_str()));
        }

        // Parallel lists: deletions from primitive lists and element orders.
        let mut orders: Vec<(&str, &[Value])> = Vec::new();
        for (key, value) in patch {
            if let Some(field) = key.strip_prefix(SET_ELEMENT_ORDER_PREFIX) {
                let order = value.as_array().ok_or_else(|| {
                    invalid(format!(
                        "invalid patch format for {key}: must be a list, got {value}"
                    ))
                })?;
                orders.push((field, order));
            } else if let Some(field) = key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST_PREFIX) {
                let doomed = value.as_array().ok_or_else(|| {
                    invalid(format!(
                        "invalid patch format for {key}: must be a list, got {value}"
                    ))
                })?;
                let doomed = ValueSet::new(doomed);
                if let Some(Value::Array(list)) = original.get_mut(field) {
                    list.retain(|item| !doomed.contains(item));
                }
            }
        }

        for (key, value) in patch {
            if is_directive(key) {
                continue;
            }
            let order = orders
                .iter()
                .find(|(field, _)| field == key)
                .map(|(_, order)| *order);
            self.path.push(key.clone());
            let merged = self.merge_field(original, key, value, order);
            self.path.pop();
            merged?;
        }

        // An order without a patch list only reorders what is there.
        for (field, order) in orders {
            if patch.contains_key(field) {
                continue;
            }
            self.path.push(field.to_owned());
            let key = match self.list_type() {
                ListType::Map(keys) => Some(keys[0]),
                ListType::Set => None,
                ListType::Atomic => {
                    self.path.pop();
                    continue;
                }
            };
            self.path.pop();
            if let Some(Value::Array(list)) = original.get_mut(field) {
                let server = list.clone();
                *list = normalize_order(std::mem::take(list), order, &server, key);
            }
        }
        Ok(MapOutcome::Keep)
    }

    /// Merges `patch`, the patch value of `key`, into `original[key]`.
    fn merge_field(
        &mut self,
        original: &mut Map<String, Value>,
        key: &str,
        patch: &Value,
        order: Option<&[Value]>,
    ) -> Result<(), PatchError> {
        match (original.get_mut(key), patch) {
            (_, Value::Null) => {
                original.shift_remove(key);
            }
            (Some(Value::Object(original_map)), Value::Object(patch_map)) => {
                if let MapOutcome::Delete = self.merge_map(original_map, patch_map)? {
                    original.shift_remove(key);
                }
            }
            (Some(Value::Array(original_list)), Value::Array(patch_list)) => {
                self.merge_list(original_list, patch_list, order)?;
            }
            _ => match self.fresh_value(patch, order)? {
                Some(value) => {
                    original.insert(key.to_owned(), value);
                }
                None => {
                    original.shift_remove(key);
                }
            },
        }
        Ok(())
    }

    /// The value a patch value yields where there was nothing to merge into:
    /// the patch with its directives applied to an empty value. `None` when
    /// the patch deletes the value.
    fn fresh_value(&mut self, patch: &Value, order: Option<&[Value]>) -> Result<Option<Value>, PatchError> {
        match patch {
            Value::Object(patch_map) => {
                let mut map = Map::new();
                Ok(match self.merge_map(&mut map, patch_map)? {
                    MapOutcome::Keep => Some(Value::Object(map)),
                    MapOutcome::Delete => None,
                })
            }
            Value::Array(patch_list) => {
                let mut list = Vec::new();
                self.merge_list(&mut list, patch_list, order)?;
                Ok(Some(Value::Array(list)))
            }
            scalar => Ok(Some(scalar.clone())),
        }
    }

    fn merge_list(
        &mut self,
        original: &mut Vec<Value>,
        patch: &[Value],
        order: Option<&[Value]>,
    ) -> Result<(), PatchError> {
        match self.list_type() {
            ListType::Atomic => *original = patch.to_vec(),
            ListType::Set => {
                let server = std::mem::take(original);
                let mut seen = ValueSet::new(std::iter::empty());
                let mut merged: Vec<Value> = Vec::with_capacity(server.len() + patch.len());
                for item in server.iter().chain(patch) {
                    if seen.insert(item) {
                        merged.push(item.clone());
                    }
                }
                *original = normalize_order(merged, order.unwrap_or(patch), &server, None);
            }
            ListType::Map(keys) => self.merge_keyed_list(original, patch, keys[0], order)?,
        }
        Ok(())
    }

    fn merge_keyed_list(
        &mut self,
        original: &mut Vec<Value>,
        patch: &[Value],
        merge_key: &'static str,
        order: Option<&[Value]>,
    ) -> Result<(), PatchError> {
        let mut items = Vec::with_capacity(patch.len());
        let mut doomed = Vec::new();
        let mut replace = false;
        for item in patch {
            let Value::Object(item_map) = item else {
                return Err(invalid(format!(
                    "{}: list items must be objects merged by {merge_key}, got {item}",
                    self.path.join(".")
                )));
            };
            let Some(directive) = item_map.get(PATCH_DIRECTIVE) else {
                items.push(item_map);
                continue;
            };
            match directive.as_str() {
                Some("delete") => doomed.push(merge_key_of(item_map, merge_key)?),
                Some("replace") => replace = true,
                Some("merge") => {
                    return Err(invalid(
                        "merging lists cannot yet be specified in the patch".to_owned(),
                    ))
                }
                _ => return Err(invalid(format!("unknown patch type: {directive} in map: {item}"))),
            }
        }

        if !doomed.is_empty() {
            let doomed = ValueSet::new(doomed);
            original.retain(|existing| !existing.get(merge_key).is_some_and(|k| doomed.contains(k)));
        }

        if replace {
            let mut replaced = Vec::with_capacity(items.len());
            for item in items {
                let mut fresh = Map::new();
                self.merge_map(&mut fresh, item)?;
                replaced.push(Value::Object(fresh));
            }
            *original = replaced;
            return Ok(());
        }

        let server = original.clone();
        // Where each merge key first appears, so n patch items against m
        // existing ones cost O(n + m), not O(n·m).
        let mut index: HashMap<String, usize> = HashMap::new();
        for (i, existing) in original.iter().enumerate() {
            if let Some(k) = existing.get(merge_key).and_then(scalar_text) {
                index.entry(k).or_insert(i);
            }
        }
        for item in &items {
            let key_value = merge_key_of(item, merge_key)?;
            let found = match scalar_text(key_value) {
                Some(k) => index.get(&k).copied(),
                None => original
                    .iter()
                    .position(|existing| existing.get(merge_key) == Some(key_value)),
            };
            match found.map(|i| &mut original[i]) {
                Some(Value::Object(existing)) => {
                    self.merge_map(existing, item)?;
                }
                _ => {
                    let mut fresh = Map::new();
                    self.merge_map(&mut fresh, item)?;
                    if let Some(k) = scalar_text(key_value) {
                        index.entry(k).or_insert(original.len());
                    }
                    original.push(Value::Object(fresh));
                }
            }
        }
        let patch_order: Vec<Value>;
        let order = match order {
            Some(order) => order,
            None => {
                patch_order = items.iter().map(|item| Value::Object((*item).clone())).collect();
                &patch_order
            }
        };
        *original = normalize_order(std::mem::take(original), order, &server, Some(merge_key));
        Ok(())
    }
}

fn is_directive(key: &str) -> bool {
    key == PATCH_DIRECTIVE
        || key == RETAIN_KEYS_DIRECTIVE
        || key.starts_with(SET_ELEMENT_ORDER_PREFIX)
        || key.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX)
}

fn invalid(message: String) -> PatchError {
    PatchError::InvalidStrategicPatch(message)
}

fn string_list(value: &Value) -> Option<Vec<&str>> {
    value.as_array()?.iter().map(Value::as_str).collect()
}

fn merge_key_of<'v>(item: &'v Map<String, Value>, merge_key: &str) -> Result<&'v Value, PatchError> {
    item.get(merge_key).ok_or_else(|| {
        invalid(format!(
            "map: {} does not contain declared merge key: {merge_key}",
            Value::Object(item.clone())
        ))
    })
}

/// Orders a merged list the way strategicpatch does: items named in `order`
/// (the `$setElementOrder` list, or else the patch list) follow that order,
/// the other items keep their order in `server` (the list before the patch),
/// and the two are interleaved by their positions in `server`. Items are
/// identified by `merge_key`, or by value for lists of scalars.
fn normalize_order(
    merged: Vec<Value>,
    order: &[Value],
    server: &[Value],
    merge_key: Option<&str>,
) -> Vec<Value> {
    let identity = |item: &Value| -> Option<Value> {
        match merge_key {
            Some(key) => item.get(key).cloned(),
            None => Some(item.clone()),
        }
    };
    let in_order = Positions::new(order, &identity);
    let in_server = Positions::new(server, &identity);

    // (sort position, position in the server's list, item)
    let mut patched: Vec<(usize, Option<usize>, Value)> = Vec::new();
    let mut server_only: Vec<(usize, Option<usize>, Value)> = Vec::new();
    for item in merged {
        let id = identity(&item);
        let server_at = id.as_ref().and_then(|id| in_server.of(id));
        match id.as_ref().and_then(|id| in_order.of(id)) {
            Some(at) => patched.push((at, server_at, item)),
            None => server_only.push((server_at.unwrap_or(usize::MAX), server_at, item)),
        }
    }
    patched.sort_by_key(|(at, _, _)| *at);
    server_only.sort_by_key(|(at, _, _)| *at);

    // Merge the server-only items into the patch items, taking a server-only
    // item first only when both are known to the server and it came first.
    let mut result = Vec::with_capacity(patched.len() + server_only.len());
    let mut patched = patched.into_iter().peekable();
    let mut server_only = server_only.into_iter().peekable();
    loop {
        let take_server = match (server_only.peek(), patched.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(left), Some(right)) => matches!((left.1, right.1), (Some(l), Some(r)) if l < r),
        };
        let next = if take_server {
            server_only.next()
        } else {
            patched.next()
        };
        result.extend(next.map(|(_, _, item)| item));
    }
    result
}

/// The JSON text of a scalar (equal scalars have equal text); `None` for
/// objects and arrays, whose text depends on key order.
fn scalar_text(value: &Value) -> Option<String> {
    (!value.is_object() && !value.is_array()).then(|| value.to_string())
}

/// Where each identity first appears in a list: hashed for scalars, a scan
/// for the (rare) object and array identities.
struct Positions {
    scalars: HashMap<String, usize>,
    others: Vec<(Value, usize)>,
}

impl Positions {
    fn new(list: &[Value], identity: &impl Fn(&Value) -> Option<Value>) -> Self {
        let mut positions = Positions {
            scalars: HashMap::new(),
            others: Vec::new(),
        };
        for (i, item) in list.iter().enumerate() {
            let Some(id) = identity(item) else { continue };
            match scalar_text(&id) {
                Some(text) => {
                    positions.scalars.entry(text).or_insert(i);
                }
                None if !positions.others.iter().any(|(other, _)| *other == id) => {
                    positions.others.push((id, i))
                }
                None => {}
            }
        }
        positions
    }

    fn of(&self, id: &Value) -> Option<usize> {
        match scalar_text(id) {
            Some(text) => self.scalars.get(&text).copied(),
            None => self.others.iter().find(|(other, _)| other == id).map(|(_, i)| *i),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn smp(doc: &Value, patch: Value, group: &str, kind: &str) -> Result<Value, PatchError> {
        strategic_merge_patch(doc, patch.to_string().as_bytes(), group, kind)
    }

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}, "finalizers": ["a", "b"]},
            "spec": {
                "replicas": 1,
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
                "template": {"spec": {
                    "containers": [
                        {"name": "nginx", "image": "nginx:1", "args": ["-a"],
                         "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                         "ports": [{"containerPort": 80, "name": "http"}]},
                        {"name": "sidecar", "image": "envoy:1"}
                    ],
                    "tolerations": [{"key": "x", "operator": "Exists"}]
                }}
            }
        })
    }

    fn containers(doc: &Value) -> &Vec<Value> {
        doc["spec"]["template"]["spec"]["containers"].as_array().unwrap()
    }

    fn names(list: &[Value]) -> Vec<&str> {
        list.iter().map(|item| item["name"].as_str().unwrap()).collect()
    }

    #[test]
    fn smp_merges_maps_and_null_deletes_keys() {
        let patched = smp(
            &deployment(),
            json!({"metadata": {"labels": {"app": null, "tier": "front"}}, "spec": {"replicas": 3}}),
            "apps",
            "Deployment",
        )
        .unwrap();
        assert_eq!(patched["metadata"]["labels"], json!({"tier": "front"}));
        assert_eq!(patched["spec"]["replicas"], 3);
        assert_eq!(patched["spec"]["strategy"]["type"], "RollingUpdate");
    }

    #[test]
    fn smp_merges_containers_by_name() {
        let patched = smp(
            &deployment(),
            json!({"spec": {"template": {"spec": {"containers": [
                {"name": "sidecar", "image": "envoy:2"}
            ]}}}}),
            "apps",
            "Deployment",
        )
        .unwrap();
        let containers = containers(&patched);
        assert_eq!(names(containers), ["nginx", "sidecar"]);
        assert_eq!(containers[0]["image"], "nginx:1");
        assert_eq!(containers[1]["image"], "envoy:2");
    }

    #[test]
    fn smp_places_new_list_items_before_existing_ones_like_kubernetes() {
        let patched = smp(
            &deployment(),
            json!({"spec": {"template": {"spec": {"containers": [
                {"name": "debug", "image": "busybox"}
            ]}}}}),
            "apps",
            "Deployment",
        )
        .unwrap();
        assert_eq!(names(containers(&patched)), ["debug", "nginx", "sidecar"]);
    }

    #[test]
    fn smp_set_element_order_decides_list_order() {
        let patched = smp(
            &deployment(),
            json!({"spec": {"template": {"spec": {
                "$setElementOrder/containers": [{"name": "nginx"}, {"name": "sidecar"}, {"name": "debug"}],
                "containers": [{"name": "debug", "image": "busybox"}]
            }}}}),
            "apps",
            "Deployment",
        )
        .unwrap();
        assert_eq!(names(containers(&patched)), ["nginx", "sidecar", "debug"]);
        assert!(patched["spec"]["template"]["spec"]
            .get("$setElementOrder/containers")
            .is_none());
    }

    #[test]
    fn smp_set_element_order_alone_reorders_list() {
        let patched = smp(
            &deployment(),
            json!({"spec": {"template": {"spec": {
                "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "nginx"}]
            }}}}),
            "apps",
            "Deployment",
        )
        .unwrap();
        assert_eq!(names(containers(&patched)), ["sidecar", "nginx"]);
    }

    #[test]
    fn smp_merges_env_by_name_and_ports_by_container_port() {
        let patched = smp(
            &deployment(),
            json!({"spec": {"template": {"spec": {"containers": [{
                "name": "nginx",
                "env": [{"name": "B", "value": "3"}],
                "ports": [{"containerPort": 80, "protocol": "TCP"}]
            }]}}}}),
            "apps",
            "Deployment",
        )
        .unwrap();
        let nginx = &containers(&patched)[0];
        assert_eq!(
            nginx["env"],
            json!([{"name": "A", "value": "1"}, {"name": "B", "value": "3"}])
        );
        assert_eq!(
            nginx["ports"],
            json!([{"containerPort": 80, "name": "http", "protocol": "TCP"}])
        );
    }

    #[test]
    fn smp_patch_delete_directive_removes_list_item() {
        let patched = smp(
            &deployment(),
            json!({"spec": {"template": {"spec": {"containers": [
                {"name": "sidecar", "$patch": "delete"},
                {"name": "nginx", "env": [{"name": "A", "$patch": "delete"}]}
            ]}}}}),
            "apps",
            "Deployment",
        )
        .unwrap();
        let containers = containers(&patched);
        assert_eq!(names(containers), ["nginx"]);
        assert_eq!(containers[0]["env"], json!([{"name": "B", "value": "2"}]));
    }

    #[test]
    fn smp_patch_replace_directive_replaces_list() {
        let patched = smp(
            &deployment(),
            json!({"spec": {"template": {"spec": {"containers": [
                {"$patch": "replace"},
                {"name": "only", "image": "busybox"}
            ]}}}}),
            "apps",
            "Deployment",
        )
        .unwrap();
        assert_eq!(
            containers(&patched),
            &vec![json!({"name": "only", "image": "busybox"})]
        );
    }

    #[test]
    fn smp_patch_replace_directive_replaces_map() {
        let patched = smp(
            &deployment(),
            json!({"metadata": {"labels": {"$patch": "replace", "new": "yes"}}}),
            "apps",
            "Deployment",
        )
        .unwrap();
        assert_eq!(patched["metadata"]["labels"], json!({"new": "yes"}));
    }

    #[test]
    fn smp_patch_delete_directive_removes_map() {
        let patched = smp(
            &deployment(),
            json!({"spec": {"strategy": {"rollingUpdate": {"$patch": "delete"}}}}),
            "apps",
            "Deployment",
        )
        .unwrap();
        assert_eq!(patched["spec"]["strategy"], json!({"type": "RollingUpdate"}));
    }

    #[test]
    fn smp_retain_keys_clears_fields_not_listed() {
        let patched = smp(
            &deployment(),
            json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}),
            "apps",
            "Deployment",
        )
        .unwrap();
        assert_eq!(patched["spec"]["strategy"], json!({"type": "Recreate"}));
    }

    #[test]
    fn smp_retain_keys_must_list_every_patched_field() {
        let err = smp(
            &deployment(),
            json!({"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {}}}}),
            "apps",
            "Deployment",
        )
        .unwrap_err();
        assert!(matches!(err, PatchError::InvalidStrategicPatch(_)));
    }

    #[test]
    fn long_lists_merge_in_linear_time() {
        // 20 000 set items and 20 000 keyed items against as many new ones:
        // quadratic merging took minutes here.
        let n = 20_000;
        let mut doc = deployment();
        doc["metadata"]["finalizers"] = json!((0..n).map(|i| format!("f{i}")).collect::<Vec<_>>());
        doc["spec"]["template"]["spec"]["containers"][0]["env"] = json!((0..n)
            .map(|i| json!({"name": format!("E{i}"), "value": "x"}))
            .collect::<Vec<_>>());
        let patch = json!({
            "metadata": {"finalizers": (n / 2..n + n / 2).map(|i| format!("f{i}")).collect::<Vec<_>>()},
            "spec": {"template": {"spec": {"containers": [{
                "name": "nginx",
                "env": (n / 2..n + n / 2).map(|i| json!({"name": format!("E{i}"), "value": "y"})).collect::<Vec<_>>(),
            }]}}},
        });
        let start = std::time::Instant::now();
        let patched = smp(&doc, patch, "apps", "Deployment").unwrap();
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "took {:?}",
            start.elapsed()
        );
        assert_eq!(
            patched["metadata"]["finalizers"].as_array().unwrap().len(),
            n + n / 2
        );
        let env = patched["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array()
            .unwrap();
        assert_eq!(env.len(), n + n / 2);
        assert_eq!(env.iter().filter(|e| e["value"] == "y").count(), n);

        let start = std::time::Instant::now();
        let mut new = patched.clone();
        crate::patch::record_update(Some(&doc), &mut new, "m", "Update", None, "2026-01-01T00:00:00Z");
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "took {:?}",
            start.elapsed()
        );
    }

    #[test]
    fn smp_merges_finalizers_as_a_set() {
        let patched = smp(
            &deployment(),
            json!({"metadata": {"finalizers": ["b", "c"]}}),
            "apps",
            "Deployment",
        )
        .unwrap();
        let mut finalizers: Vec<&str> = patched["metadata"]["finalizers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap())
            .collect();
        finalizers.sort_unstable();
        assert_eq!(finalizers, ["a", "b", "c"]);
    }

    #[test]
    fn smp_set_element_order_orders_primitive_lists() {
        let patched = smp(
            &deployment(),
            json!({"metadata": {
                "$setElementOrder/finalizers": ["a", "b", "c"],
                "finalizers": ["c"]
            }}),
            "apps",
            "Deployment",
        )
        .unwrap();
        assert_eq!(patched["metadata"]["finalizers"], json!(["a", "b", "c"]));
    }

    #[test]
    fn smp_delete_from_primitive_list_removes_values() {
        let patched = smp(
            &deployment(),
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}),
            "apps",
            "Deployment",
        )
        .unwrap();
        assert_eq!(patched["metadata"]["finalizers"], json!(["b"]));
    }

    #[test]
    fn smp_replaces_lists_without_merge_strategy() {
        let patched = smp(
            &deployment(),
            json!({"spec": {"template": {"spec": {
                "tolerations": [{"key": "y", "operator": "Exists"}],
                "containers": [{"name": "nginx", "args": ["-b"]}]
            }}}}),
            "apps",
            "Deployment",
        )
        .unwrap();
        let spec = &patched["spec"]["template"]["spec"];
        assert_eq!(spec["tolerations"], json!([{"key": "y", "operator": "Exists"}]));
        assert_eq!(spec["containers"][0]["args"], json!(["-b"]));
    }

    #[test]
    fn smp_merges_service_ports_by_port() {
        let service = json!({"apiVersion": "v1", "kind": "Service", "spec": {"ports": [
            {"port": 80, "targetPort": 8080}, {"port": 443, "targetPort": 8443}
        ]}});
        let patched = smp(
            &service,
            json!({"spec": {"ports": [{"port": 443, "targetPort": 9443}]}}),
            "",
            "Service",
        )
        .unwrap();
        assert_eq!(
            patched["spec"]["ports"],
            json!([{"port": 80, "targetPort": 8080}, {"port": 443, "targetPort": 9443}])
        );
    }

    #[test]
    fn smp_merges_owner_references_by_uid_and_conditions_by_type() {
        let pod = json!({
            "kind": "Pod",
            "metadata": {"ownerReferences": [{"uid": "1", "name": "a"}]},
            "status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "Scheduled", "status": "True"}]}
        });
        let patched = smp(
            &pod,
            json!({
                "metadata": {"ownerReferences": [{"uid": "1", "controller": true}]},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}
            }),
            "",
            "Pod",
        )
        .unwrap();
        assert_eq!(
            patched["metadata"]["ownerReferences"],
            json!([{"uid": "1", "name": "a", "controller": true}])
        );
        assert_eq!(
            patched["status"]["conditions"],
            json!([{"type": "Ready", "status": "True"}, {"type": "Scheduled", "status": "True"}])
        );
    }

    #[test]
    fn smp_uses_cron_job_pod_spec_path() {
        let cron_job = json!({"kind": "CronJob", "spec": {"jobTemplate": {"spec": {"template": {"spec": {
            "containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}]
        }}}}}});
        let patched = smp(
            &cron_job,
            json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {
                "containers": [{"name": "b", "image": "2"}]
            }}}}}}),
            "batch",
            "CronJob",
        )
        .unwrap();
        assert_eq!(
            patched["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"],
            json!([{"name": "a", "image": "1"}, {"name": "b", "image": "2"}])
        );
    }

    #[test]
    fn smp_strips_directives_from_values_new_to_the_object() {
        let pod = json!({"kind": "Pod", "spec": {}});
        let patched = smp(
            &pod,
            json!({"spec": {
                "$setElementOrder/containers": [{"name": "a"}],
                "containers": [{"name": "a", "env": [{"name": "X", "$patch": "delete"}, {"name": "Y", "value": "1"}]}],
                "nothing": null
            }}),
            "",
            "Pod",
        )
        .unwrap();
        assert_eq!(
            patched["spec"],
            json!({"containers": [{"name": "a", "env": [{"name": "Y", "value": "1"}]}]})
        );
    }

    #[test]
    fn smp_list_item_without_merge_key_is_an_error() {
        let err = smp(
            &deployment(),
            json!({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}}),
            "apps",
            "Deployment",
        )
        .unwrap_err();
        assert!(matches!(err, PatchError::InvalidStrategicPatch(_)));
        assert!(
            err.to_string()
                .ends_with("does not contain declared merge key: name"),
            "{err}"
        );
    }

    #[test]
    fn smp_unknown_patch_directive_is_an_error() {
        let err = smp(
            &deployment(),
            json!({"spec": {"$patch": "explode"}}),
            "apps",
            "Deployment",
        )
        .unwrap_err();
        assert!(matches!(err, PatchError::InvalidStrategicPatch(_)));
    }

    #[test]
    fn smp_on_custom_resource_falls_back_to_merge_patch() {
        let widget = json!({"kind": "Widget", "spec": {"items": [{"name": "a"}, {"name": "b"}]}});
        let patched = smp(
            &widget,
            json!({"spec": {"items": [{"name": "c"}]}}),
            "example.com",
            "Widget",
        )
        .unwrap();
        assert_eq!(patched["spec"]["items"], json!([{"name": "c"}]));
    }

    #[test]
    fn smp_body_must_be_a_json_object() {
        let err = strategic_merge_patch(&deployment(), b"[]", "apps", "Deployment").unwrap_err();
        assert!(matches!(err, PatchError::NotAnObject("array")));
        let err = strategic_merge_patch(&deployment(), b"{", "apps", "Deployment").unwrap_err();
        assert!(matches!(err, PatchError::Decode(_)));
    }
}
