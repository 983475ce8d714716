//! Server-side apply: merging an applied configuration into the live object
//! while tracking which manager owns which field, after
//! `sigs.k8s.io/structured-merge-diff` as used by kube-apiserver.

use std::fmt;

use serde_json::{Map, Value};

use super::fieldpath::{remove_at, value_at_mut, DisplayPath, FieldSet, FieldWalker, PathElement};
use super::managed_fields::{decode, encode, group_of, strip, tracked, ManagedFieldsEntry, Scope, APPLY};
use super::schema::ListType;
use super::type_name;

/// The manager Kubernetes assigns to everything in an object that has no
/// managedFields at all when it is first applied to.
const BEFORE_FIRST_APPLY: &str = "before-first-apply";

/// Why a server-side apply was refused.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The applied configuration changes fields owned by other managers and
    /// `force` was not set (kube-apiserver answers 409 Conflict, one
    /// `FieldManagerConflict` cause per conflict). The message is
    /// kube-apiserver's, for example `Apply failed with 1 conflict: conflict
    /// with "kubectl-client-side-apply" using apps/v1: .spec.replicas`.
    #[error("{}", conflict_message(.0))]
    Conflict(Vec<ApplyConflict>),
    /// The applied configuration is not a valid object for the resource: not
    /// a JSON object, without `apiVersion` or `kind`, of another group or
    /// kind, or with list items lacking their key fields (kube-apiserver
    /// answers 400 Bad Request or 422 Unprocessable Entity).
    #[error("{0}")]
    Invalid(String),
}

/// One field an apply would take from another manager.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApplyConflict {
    /// The other manager's name, e.g. `kubectl-client-side-apply`.
    pub manager: String,
    /// The other manager's operation, `Apply` or `Update`.
    pub operation: String,
    /// The apiVersion the other manager wrote with.
    pub api_version: String,
    /// The subresource the other manager wrote through, if any.
    pub subresource: Option<String>,
    /// The contested field, e.g. `.spec.replicas` or
    /// `.spec.template.spec.containers[name="nginx"].image`.
    pub field: String,
}

impl ApplyConflict {
    /// The message of this conflict's `FieldManagerConflict` status cause:
    /// `conflict with "kubectl-edit" using apps/v1`.
    pub fn cause_message(&self) -> String {
        format!("conflict with {}", ManagerName(self))
    }
}

/// How kube-apiserver names a manager in conflict messages.
struct ManagerName<'a>(&'a ApplyConflict);

impl fmt::Display for ManagerName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let conflict = self.0;
        write!(f, "{:?}", conflict.manager)?;
        if let Some(subresource) = &conflict.subresource {
            write!(f, " with subresource {subresource:?}")?;
        }
        if conflict.operation != APPLY {
            write!(f, " using {}", conflict.api_version)?;
        }
        Ok(())
    }
}

fn conflict_message(conflicts: &[ApplyConflict]) -> String {
    if let [conflict] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            ManagerName(conflict),
            conflict.field
        );
    }
    let mut lines = Vec::new();
    let mut current: Option<&ApplyConflict> = None;
    for conflict in conflicts {
        let same_manager = current.is_some_and(|current| {
            (
                &current.manager,
                &current.operation,
                &current.api_version,
                &current.subresource,
            ) == (
                &conflict.manager,
                &conflict.operation,
                &conflict.api_version,
                &conflict.subresource,
            )
        });
        if !same_manager {
            lines.push(format!("conflicts with {}:", ManagerName(conflict)));
            current = Some(conflict);
        }
        lines.push(format!("- {}", conflict.field));
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

/// Server-side applies `applied`, the configuration `manager` wants, to
/// `live` (`None` when the object does not exist yet) and returns the new
/// object with its `metadata.managedFields`.
///
/// `applied` must carry `apiVersion` and `kind` matching `group`/`kind`.
/// Its `metadata.managedFields` and `status` are ignored (status is written
/// through the status subresource), and so are `null` values. Maps merge
/// field by field; lists merge by key or as sets for built-in kinds (the
/// same table as strategic merge patch) and are atomic otherwise.
///
/// Ownership follows Kubernetes: `manager` owns exactly the fields of
/// `applied`; fields it owned before but no longer applies are removed
/// unless another manager owns them too; changing a field another manager
/// owns is an [`ApplyError::Conflict`] unless `force`, which transfers the
/// field. Setting a field to the value it already has shares ownership.
/// Applying an unchanged configuration returns `live` unchanged (times
/// included); otherwise the manager's entry is stamped with `now` (RFC 3339).
pub fn server_side_apply(
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    group: &str,
    kind: &str,
    now: &str,
) -> Result<Value, ApplyError> {
    let config = applied_config(applied, group, kind)?;
    let walker = FieldWalker::new(group, kind);
    validate_lists(&walker, &config, &mut Vec::new())?;
    let api_version = config["apiVersion"].as_str().unwrap_or_default().to_owned();
    let applied_fields = walker.field_set(&tracked(&config, Scope::Main));
    let mut own_entry = ManagedFieldsEntry {
        manager: manager.to_owned(),
        operation: APPLY.to_owned(),
        api_version,
        time: Some(now.to_owned()),
        subresource: None,
        fields: applied_fields.clone(),
    };

    let Some(live) = live else {
        let mut created = config;
        encode(&mut created, vec![own_entry]);
        return Ok(created);
    };

    let recorded = decode(live);
    let mut entries = match &recorded {
        Some(entries) => entries.clone(),
        None => vec![before_first_apply(&walker, live, now)],
    };
    let mut current = live.clone();
    strip(&mut current);

    let mut merged = current.clone();
    merge_applied(&walker, &mut merged, &config, &mut Vec::new());

    let own = entries
        .iter()
        .position(|entry| entry.is_for(manager, APPLY, "", None));
    let previous = own.map(|index| entries[index].fields.clone()).unwrap_or_default();
    let still_owned = entries
        .iter()
        .enumerate()
        .filter(|(index, _)| Some(*index) != own)
        .fold(applied_fields, |owned, (_, entry)| owned.union(&entry.fields));
    prune(&mut merged, &previous, &still_owned);

    let comparison = walker.compare(&tracked(&current, Scope::Main), &tracked(&merged, Scope::Main));
    let changed = comparison.added.union(&comparison.modified);

    if !force {
        let conflicts = conflicts(&entries, own, &changed);
        if !conflicts.is_empty() {
            return Err(ApplyError::Conflict(conflicts));
        }
    }
    for (index, entry) in entries.iter_mut().enumerate() {
        if Some(index) != own {
            entry.fields = entry.fields.difference(&changed).difference(&comparison.removed);
        }
    }
    match own {
        Some(index) => {
            own_entry.time = entries[index].time.clone();
            entries[index] = own_entry;
        }
        None => entries.push(own_entry),
    }

    let unchanged = recorded.is_some_and(|recorded| same_ownership(&recorded, &entries));
    if unchanged && merged == current {
        return Ok(live.clone());
    }
    if let Some(entry) = entries
        .iter_mut()
        .find(|entry| entry.is_for(manager, APPLY, "", None))
    {
        entry.time = Some(now.to_owned());
    }
    encode(&mut merged, entries);
    Ok(merged)
}

/// Checks `applied` and returns the part of it that is applied: without
/// managedFields, status and null values.
fn applied_config(applied: &Value, group: &str, kind: &str) -> Result<Value, ApplyError> {
    let Value::Object(object) = applied else {
        return Err(ApplyError::Invalid(format!(
            "the applied configuration must be an object, got {}",
            type_name(applied)
        )));
    };
    let text = |name: &str| {
        object
            .get(name)
            .and_then(Value::as_str)
            .filter(|text| !text.is_empty())
    };
    let api_version = text("apiVersion").ok_or_else(|| {
        ApplyError::Invalid("apiVersion must be set in the applied configuration".to_owned())
    })?;
    let applied_kind = text("kind")
        .ok_or_else(|| ApplyError::Invalid("kind must be set in the applied configuration".to_owned()))?;
    if group_of(api_version) != group {
        return Err(ApplyError::Invalid(format!(
            "apiVersion {api_version} of the applied configuration does not belong to group {group:?}"
        )));
    }
    if !kind.is_empty() && applied_kind != kind {
        return Err(ApplyError::Invalid(format!(
            "kind {applied_kind} of the applied configuration does not match the resource's kind {kind}"
        )));
    }
    if object
        .get("metadata")
        .is_some_and(|metadata| !metadata.is_object())
    {
        return Err(ApplyError::Invalid(
            "metadata of the applied configuration must be an object".to_owned(),
        ));
    }
    let mut config = applied.clone();
    strip(&mut config);
    if let Value::Object(object) = &mut config {
        object.shift_remove("status");
    }
    drop_nulls(&mut config);
    Ok(config)
}

fn drop_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, child| !child.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// Rejects keyed lists whose items lack key fields or repeat a key, since
/// their items could not be owned one by one.
fn validate_lists(
    walker: &FieldWalker<'_>,
    value: &Value,
    path: &mut Vec<PathElement>,
) -> Result<(), ApplyError> {
    match value {
        Value::Object(map) => {
            for (name, child) in map {
                path.push(PathElement::Field(name.clone()));
                validate_lists(walker, child, path)?;
                path.pop();
            }
        }
        Value::Array(items) => {
            let ListType::Map(keys) = walker.list_type(path) else {
                return Ok(());
            };
            let mut seen = std::collections::HashSet::with_capacity(items.len());
            for (index, item) in items.iter().enumerate() {
                let Some(key) = PathElement::key(item, keys) else {
                    return Err(ApplyError::Invalid(format!(
                        "{}: element {index} is missing key field(s) {}",
                        DisplayPath(path),
                        keys.join(", ")
                    )));
                };
                if seen.contains(&key) {
                    path.push(key);
                    let message = format!("duplicate entries for key {}", DisplayPath(path));
                    return Err(ApplyError::Invalid(message));
                }
                path.push(key.clone());
                validate_lists(walker, item, path)?;
                path.pop();
                seen.insert(key);
            }
        }
        _ => {}
    }
    Ok(())
}

/// The entry Kubernetes invents for objects without managedFields: an
/// updater owning everything.
fn before_first_apply(walker: &FieldWalker<'_>, live: &Value, now: &str) -> ManagedFieldsEntry {
    ManagedFieldsEntry {
        manager: BEFORE_FIRST_APPLY.to_owned(),
        operation: "Update".to_owned(),
        api_version: live
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        time: Some(now.to_owned()),
        subresource: None,
        fields: walker.field_set(&tracked(live, Scope::Main)),
    }
}

/// Merges the applied configuration into `target`: maps field by field,
/// keyed lists item by item, sets by value, anything else replaced.
fn merge_applied(walker: &FieldWalker<'_>, target: &mut Value, applied: &Value, path: &mut Vec<PathElement>) {
    match (&mut *target, applied) {
        (Value::Object(target), Value::Object(applied)) => {
            for (name, value) in applied {
                match target.get_mut(name) {
                    Some(existing) => {
                        path.push(PathElement::Field(name.clone()));
                        merge_applied(walker, existing, value, path);
                        path.pop();
                    }
                    None => {
                        target.insert(name.clone(), value.clone());
                    }
                }
            }
        }
        (Value::Array(items), Value::Array(applied_items)) => match walker.list_type(path) {
            ListType::Map(keys) => {
                match (
                    FieldWalker::item_keys(items, keys),
                    FieldWalker::item_keys(applied_items, keys),
                ) {
                    (Some(_), Some(applied_keys)) => {
                        // Applied keys are unique (`item_keys`): hashed lookups.
                        let identify = |item: &Value| PathElement::key(item, keys);
                        merge_unique_list_items(
                            items,
                            applied_items,
                            &applied_keys,
                            identify,
                            |item, applied, key| {
                                path.push(key.clone());
                                merge_applied(walker, item, applied, path);
                                path.pop();
                            },
                        );
                    }
                    _ => *target = applied.clone(),
                }
            }
            ListType::Set => {
                let scalar_text =
                    |item: &Value| (!item.is_object() && !item.is_array()).then(|| item.to_string());
                let texts: Option<Vec<String>> = applied_items.iter().map(scalar_text).collect();
                let unique = texts
                    .as_ref()
                    .is_some_and(|t| t.iter().collect::<std::collections::HashSet<_>>().len() == t.len());
                match texts {
                    // The common set, of distinct scalars: hashed lookups.
                    Some(texts) if unique => {
                        merge_unique_list_items(items, applied_items, &texts, scalar_text, |_, _, _| {})
                    }
                    _ => {
                        let applied_values: Vec<Value> = applied_items.clone();
                        merge_list_items(
                            items,
                            applied_items,
                            &applied_values,
                            |item| Some(item.clone()),
                            |_, _, _| {},
                        );
                    }
                }
            }
            ListType::Atomic => *target = applied.clone(),
        },
        _ => *target = applied.clone(),
    }
}

/// Merges the items of an applied list into a live list. Items are matched
/// by identity (`identities` holds those of `applied`); matched items are
/// merged in place with `merge`, new ones are inserted after the previous
/// applied item, or before the next one that already exists, so the applied
/// order is kept where the live list allows.
fn merge_list_items<I: PartialEq>(
    items: &mut Vec<Value>,
    applied: &[Value],
    identities: &[I],
    identify: impl Fn(&Value) -> Option<I>,
    mut merge: impl FnMut(&mut Value, &Value, &I),
) {
    let position =
        |items: &[Value], id: &I| items.iter().position(|item| identify(item).as_ref() == Some(id));
    let mut previous: Option<usize> = None;
    for (index, (id, applied_item)) in identities.iter().zip(applied).enumerate() {
        match position(items, id) {
            Some(found) => {
                merge(&mut items[found], applied_item, id);
                previous = Some(found);
            }
            None => {
                let at = match previous {
                    Some(previous) => previous + 1,
                    None => identities[index + 1..]
                        .iter()
                        .filter_map(|later| position(items, later))
                        .min()
                        .unwrap_or(items.len()),
                };
                items.insert(at, applied_item.clone());
                previous = Some(at);
            }
        }
    }
}

/// [`merge_list_items`] for `identities` that are distinct, in time linear
/// in the lists rather than their product: each new item is placed in the
/// gap before a live item (or at the end) it would have been inserted into.
fn merge_unique_list_items<I: Eq + std::hash::Hash>(
    items: &mut Vec<Value>,
    applied: &[Value],
    identities: &[I],
    identify: impl Fn(&Value) -> Option<I>,
    mut merge: impl FnMut(&mut Value, &Value, &I),
) {
    let live = items.len();
    let mut first = std::collections::HashMap::with_capacity(live);
    for (i, item) in items.iter().enumerate() {
        if let Some(id) = identify(item) {
            first.entry(id).or_insert(i);
        }
    }
    // gaps[g]: new items placed just before live item g (g == live: the end).
    let mut gaps: Vec<Vec<Value>> = std::iter::repeat_with(Vec::new).take(live + 1).collect();
    // Where the next new item goes: (gap, offset in it).
    let mut cursor: Option<(usize, usize)> = None;
    for (index, (id, applied_item)) in identities.iter().zip(applied).enumerate() {
        match first.get(id) {
            Some(&found) => {
                merge(&mut items[found], applied_item, id);
                cursor = Some((found + 1, 0));
            }
            None => {
                let (gap, offset) = cursor.unwrap_or_else(|| {
                    let next_live = identities[index + 1..]
                        .iter()
                        .filter_map(|later| first.get(later).copied())
                        .min()
                        .unwrap_or(live);
                    (next_live, gaps[next_live].len())
                });
                gaps[gap].insert(offset, applied_item.clone());
                cursor = Some((gap, offset + 1));
            }
        }
    }
    if gaps.iter().all(Vec::is_empty) {
        return;
    }
    let mut merged = Vec::with_capacity(live + gaps.iter().map(Vec::len).sum::<usize>());
    for (item, gap) in std::mem::take(items).into_iter().zip(gaps.iter_mut()) {
        merged.append(gap);
        merged.push(item);
    }
    merged.append(&mut gaps[live]);
    *items = merged;
}

/// Removes from `object` what the applier owned before (`previous`) but
/// nobody owns now (`owned`), then the maps and lists that removal emptied.
fn prune(object: &mut Value, previous: &FieldSet, owned: &FieldSet) {
    let mut removed = Vec::new();
    for path in previous.iter() {
        if owned.has_prefix(path) || is_key_field(path) {
            continue;
        }
        if remove_at(object, path) {
            removed.push(path);
        }
    }
    for path in removed {
        for depth in (1..path.len()).rev() {
            let ancestor = &path[..depth];
            if !matches!(ancestor.last(), Some(PathElement::Field(_))) || owned.contains(ancestor) {
                break;
            }
            let emptied = match value_at_mut(object, ancestor) {
                Some(Value::Object(map)) => map.is_empty(),
                Some(Value::Array(items)) => items.is_empty(),
                _ => false,
            };
            if !emptied {
                break;
            }
            remove_at(object, ancestor);
        }
    }
}

/// Whether `path` is a key field of a keyed-list item, which stays as long
/// as the item does.
fn is_key_field(path: &[PathElement]) -> bool {
    match path {
        [.., PathElement::Key(key), PathElement::Field(name)] => {
            serde_json::from_str::<Map<String, Value>>(key).is_ok_and(|fields| fields.contains_key(name))
        }
        _ => false,
    }
}

/// The fields in `changed` that other managers own, sorted by manager.
fn conflicts(entries: &[ManagedFieldsEntry], own: Option<usize>, changed: &FieldSet) -> Vec<ApplyConflict> {
    let mut conflicts: Vec<ApplyConflict> = entries
        .iter()
        .enumerate()
        .filter(|(index, _)| Some(*index) != own)
        .flat_map(|(_, entry)| {
            entry
                .fields
                .intersection(changed)
                .iter()
                .map(|path| ApplyConflict {
                    manager: entry.manager.clone(),
                    operation: entry.operation.clone(),
                    api_version: entry.api_version.clone(),
                    subresource: entry.subresource.clone(),
                    field: DisplayPath(path).to_string(),
                })
                .collect::<Vec<_>>()
        })
        .collect();
    conflicts.sort_by(|a, b| {
        (&a.manager, &a.operation, &a.api_version, &a.subresource).cmp(&(
            &b.manager,
            &b.operation,
            &b.api_version,
            &b.subresource,
        ))
    });
    conflicts
}

/// Whether two lists of entries give the same fields to the same managers,
/// ignoring times and empty entries.
fn same_ownership(before: &[ManagedFieldsEntry], after: &[ManagedFieldsEntry]) -> bool {
    let key = |entries: &[ManagedFieldsEntry]| {
        let mut owners: Vec<String> = entries
            .iter()
            .filter(|entry| !entry.fields.is_empty())
            .map(|entry| {
                let owner = (
                    &entry.manager,
                    &entry.operation,
                    &entry.api_version,
                    &entry.subresource,
                    &entry.fields,
                );
                format!("{owner:?}")
            })
            .collect();
        owners.sort();
        owners
    };
    key(before) == key(after)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::record_update;
    use super::*;

    #[test]
    fn unique_list_merge_places_items_as_the_scanning_merge_does() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(9);
        let keys = ["name"];
        let identify = |item: &Value| PathElement::key(item, &keys);
        for _ in 0..2000 {
            let live: Vec<Value> = (0..rng.random_range(0..8))
                .map(|i| match rng.random_range(0..6) {
                    0 => json!({"other": i}),
                    k => json!({"name": format!("k{k}"), "v": i}),
                })
                .collect();
            let mut names: Vec<usize> = (1..9).collect();
            for i in (1..names.len()).rev() {
                names.swap(i, rng.random_range(0..=i));
            }
            let applied: Vec<Value> = names[..rng.random_range(0..8)]
                .iter()
                .map(|k| json!({"name": format!("k{k}"), "applied": true}))
                .collect();
            let ids: Vec<PathElement> = applied.iter().map(|a| identify(a).unwrap()).collect();
            let merge = |item: &mut Value, applied: &Value, _: &PathElement| {
                item["applied"] = applied["applied"].clone()
            };
            let mut scanned = live.clone();
            merge_list_items(&mut scanned, &applied, &ids, identify, merge);
            let mut hashed = live.clone();
            merge_unique_list_items(&mut hashed, &applied, &ids, identify, merge);
            assert_eq!(hashed, scanned, "live {live:?} applied {applied:?}");
        }
    }

    #[test]
    fn long_applied_lists_merge_in_linear_time() {
        let n = 20_000;
        let live = json!((0..n).map(|i| format!("f{i}")).collect::<Vec<_>>());
        let applied = json!((n / 2..n + n / 2).map(|i| format!("f{i}")).collect::<Vec<_>>());
        let texts: Vec<String> = applied
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.to_string())
            .collect();
        let mut items = live.as_array().unwrap().clone();
        let start = std::time::Instant::now();
        merge_unique_list_items(
            &mut items,
            applied.as_array().unwrap(),
            &texts,
            |v| Some(v.to_string()),
            |_, _, _| {},
        );
        assert!(
            start.elapsed() < std::time::Duration::from_secs(5),
            "took {:?}",
            start.elapsed()
        );
        assert_eq!(items.len(), n + n / 2);
    }

    const T1: &str = "2024-01-01T00:00:00Z";
    const T2: &str = "2024-01-02T00:00:00Z";
    const T3: &str = "2024-01-03T00:00:00Z";

    fn deployment(replicas: i64, image: &str) -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "nginx", "image": image}]}
                }
            }
        })
    }

    fn apply(
        live: Option<&Value>,
        config: &Value,
        manager: &str,
        force: bool,
        now: &str,
    ) -> Result<Value, ApplyError> {
        server_side_apply(live, config, manager, force, "apps", "Deployment", now)
    }

    fn entry<'v>(object: &'v Value, manager: &str) -> Option<&'v Value> {
        object["metadata"]["managedFields"]
            .as_array()?
            .iter()
            .find(|entry| entry["manager"] == manager)
    }

    fn without_managed_fields(object: &Value) -> Value {
        let mut object = object.clone();
        strip(&mut object);
        object
    }

    #[test]
    fn apply_creates_object_with_one_apply_entry() {
        let created = apply(None, &deployment(1, "nginx:1"), "kubectl", false, T1).unwrap();
        assert_eq!(without_managed_fields(&created), deployment(1, "nginx:1"));
        assert_eq!(
            created["metadata"]["managedFields"],
            json!([{
                "manager": "kubectl",
                "operation": "Apply",
                "apiVersion": "apps/v1",
                "time": T1,
                "fieldsType": "FieldsV1",
                "fieldsV1": {
                    "f:metadata": {"f:labels": {"f:app": {}}},
                    "f:spec": {
                        "f:replicas": {},
                        "f:selector": {"f:matchLabels": {"f:app": {}}},
                        "f:template": {
                            "f:metadata": {"f:labels": {"f:app": {}}},
                            "f:spec": {"f:containers": {"k:{\"name\":\"nginx\"}": {
                                ".": {}, "f:image": {}, "f:name": {}
                            }}}
                        }
                    }
                }
            }])
        );
    }

    #[test]
    fn applying_same_config_twice_changes_nothing() {
        let config = deployment(1, "nginx:1");
        let first = apply(None, &config, "kubectl", false, T1).unwrap();
        let second = apply(Some(&first), &config, "kubectl", false, T2).unwrap();
        assert_eq!(second, first);
    }

    #[test]
    fn applying_a_change_updates_the_object_and_the_time() {
        let first = apply(None, &deployment(1, "nginx:1"), "kubectl", false, T1).unwrap();
        let second = apply(Some(&first), &deployment(1, "nginx:2"), "kubectl", false, T2).unwrap();
        assert_eq!(
            second["spec"]["template"]["spec"]["containers"][0]["image"],
            "nginx:2"
        );
        assert_eq!(entry(&second, "kubectl").unwrap()["time"], T2);
    }

    #[test]
    fn apply_conflicts_with_other_managers_field_unless_forced() {
        let mut live = deployment(1, "nginx:1");
        record_update(None, &mut live, "kubectl-client-side-apply", "Update", None, T1);

        let err = apply(Some(&live), &deployment(3, "nginx:1"), "kubectl", false, T2).unwrap_err();
        let ApplyError::Conflict(conflicts) = &err else {
            panic!("expected a conflict, got {err}");
        };
        assert_eq!(
            conflicts,
            &[ApplyConflict {
                manager: "kubectl-client-side-apply".into(),
                operation: "Update".into(),
                api_version: "apps/v1".into(),
                subresource: None,
                field: ".spec.replicas".into(),
            }]
        );
        assert_eq!(
            err.to_string(),
            r#"Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using apps/v1: .spec.replicas"#
        );
        assert_eq!(
            conflicts[0].cause_message(),
            r#"conflict with "kubectl-client-side-apply" using apps/v1"#
        );

        let forced = apply(Some(&live), &deployment(3, "nginx:1"), "kubectl", true, T2).unwrap();
        assert_eq!(forced["spec"]["replicas"], 3);
        let previous = entry(&forced, "kubectl-client-side-apply").unwrap();
        assert!(previous["fieldsV1"]["f:spec"].get("f:replicas").is_none());
        assert!(previous["fieldsV1"]["f:spec"].get("f:selector").is_some());
        let applier = entry(&forced, "kubectl").unwrap();
        assert_eq!(applier["operation"], "Apply");
        assert!(applier["fieldsV1"]["f:spec"].get("f:replicas").is_some());
    }

    #[test]
    fn conflicts_with_several_fields_are_listed_per_manager() {
        let first = apply(None, &deployment(1, "nginx:1"), "alice", false, T1).unwrap();
        let err = apply(Some(&first), &deployment(2, "nginx:2"), "bob", false, T2).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Apply failed with 2 conflicts: conflicts with \"alice\":\n\
             - .spec.replicas\n\
             - .spec.template.spec.containers[name=\"nginx\"].image"
        );
    }

    #[test]
    fn apply_with_equal_value_shares_ownership_without_conflict() {
        let first = apply(None, &deployment(1, "nginx:1"), "alice", false, T1).unwrap();
        let shared = apply(Some(&first), &deployment(1, "nginx:1"), "bob", false, T2).unwrap();
        assert_eq!(without_managed_fields(&shared), deployment(1, "nginx:1"));
        let alice = entry(&shared, "alice").unwrap();
        let bob = entry(&shared, "bob").unwrap();
        assert_eq!(alice["fieldsV1"], bob["fieldsV1"]);
    }

    #[test]
    fn apply_removes_fields_dropped_from_the_config() {
        let mut config = deployment(1, "nginx:1");
        config["metadata"]["labels"]["tier"] = json!("front");
        config["spec"]["template"]["spec"]["containers"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "sidecar", "image": "envoy", "args": ["-v"]}));
        let first = apply(None, &config, "kubectl", false, T1).unwrap();

        let mut smaller = deployment(1, "nginx:1");
        smaller["metadata"]
            .as_object_mut()
            .unwrap()
            .shift_remove("labels");
        let second = apply(Some(&first), &smaller, "kubectl", false, T2).unwrap();
        assert_eq!(without_managed_fields(&second), smaller);
    }

    #[test]
    fn apply_keeps_dropped_fields_another_manager_also_owns() {
        let first = apply(None, &deployment(1, "nginx:1"), "alice", false, T1).unwrap();
        let shared = apply(Some(&first), &deployment(1, "nginx:1"), "bob", false, T2).unwrap();
        let mut without_replicas = deployment(1, "nginx:1");
        without_replicas["spec"]
            .as_object_mut()
            .unwrap()
            .shift_remove("replicas");
        let after = apply(Some(&shared), &without_replicas, "alice", false, T3).unwrap();
        assert_eq!(after["spec"]["replicas"], 1);
        assert!(entry(&after, "alice").unwrap()["fieldsV1"]["f:spec"]
            .get("f:replicas")
            .is_none());
        assert!(entry(&after, "bob").unwrap()["fieldsV1"]["f:spec"]
            .get("f:replicas")
            .is_some());
    }

    #[test]
    fn apply_merges_containers_by_name_and_keeps_other_managers_items() {
        let first = apply(None, &deployment(1, "nginx:1"), "alice", false, T1).unwrap();
        let sidecar = json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {"template": {"spec": {"containers": [
                {"name": "sidecar", "image": "envoy", "env": [{"name": "LEVEL", "value": "debug"}]}
            ]}}}
        });
        let both = apply(Some(&first), &sidecar, "mesh", false, T2).unwrap();
        let containers = &both["spec"]["template"]["spec"]["containers"];
        assert_eq!(
            containers,
            &json!([
                {"name": "nginx", "image": "nginx:1"},
                {"name": "sidecar", "image": "envoy", "env": [{"name": "LEVEL", "value": "debug"}]}
            ])
        );
        assert_eq!(
            entry(&both, "mesh").unwrap()["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"],
            json!({"k:{\"name\":\"sidecar\"}": {
                ".": {},
                "f:env": {"k:{\"name\":\"LEVEL\"}": {".": {}, "f:name": {}, "f:value": {}}},
                "f:image": {},
                "f:name": {}
            }})
        );

        // alice re-applying her config neither conflicts nor drops the sidecar.
        let again = apply(Some(&both), &deployment(1, "nginx:2"), "alice", false, T3).unwrap();
        assert_eq!(
            again["spec"]["template"]["spec"]["containers"][1]["name"],
            "sidecar"
        );
        assert_eq!(
            again["spec"]["template"]["spec"]["containers"][0]["image"],
            "nginx:2"
        );
    }

    #[test]
    fn apply_inserts_new_items_where_the_config_puts_them() {
        let first = apply(None, &deployment(1, "nginx:1"), "alice", false, T1).unwrap();
        let mut config = deployment(1, "nginx:1");
        config["spec"]["template"]["spec"]["containers"] = json!([
            {"name": "init", "image": "busybox"},
            {"name": "nginx", "image": "nginx:1"}
        ]);
        let second = apply(Some(&first), &config, "alice", false, T2).unwrap();
        assert_eq!(
            second["spec"]["template"]["spec"]["containers"],
            config["spec"]["template"]["spec"]["containers"]
        );
    }

    #[test]
    fn apply_on_custom_resource_treats_lists_atomically_and_maps_granularly() {
        let widget = |items: Value, size: Option<i64>| {
            let mut widget = json!({
                "apiVersion": "example.com/v1",
                "kind": "Widget",
                "metadata": {"name": "w"},
                "spec": {"items": items, "finalizers": ["x"]}
            });
            if let Some(size) = size {
                widget["spec"]["size"] = json!(size);
            }
            widget
        };
        let apply_widget = |live: Option<&Value>, config: &Value, manager: &str| {
            server_side_apply(live, config, manager, false, "example.com", "Widget", T1)
        };
        let first = apply_widget(None, &widget(json!([{"name": "a"}]), Some(1)), "alice").unwrap();
        assert_eq!(
            entry(&first, "alice").unwrap()["fieldsV1"],
            json!({"f:spec": {"f:finalizers": {}, "f:items": {}, "f:size": {}}})
        );
        let mut bob = json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w"}, "spec": {"color": "red"}});
        let second = apply_widget(Some(&first), &bob, "bob").unwrap();
        assert_eq!(second["spec"]["color"], "red");
        assert_eq!(second["spec"]["size"], 1);

        bob["spec"]["items"] = json!([{"name": "b"}]);
        let err = apply_widget(Some(&second), &bob, "bob").unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"Apply failed with 1 conflict: conflict with "alice": .spec.items"#
        );
    }

    #[test]
    fn apply_tracks_finalizers_as_a_set() {
        let mut config = deployment(1, "nginx:1");
        config["metadata"]["finalizers"] = json!(["example.com/a"]);
        let first = apply(None, &config, "alice", false, T1).unwrap();
        let mut other = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}});
        other["metadata"]["finalizers"] = json!(["example.com/b"]);
        let second = apply(Some(&first), &other, "bob", false, T2).unwrap();
        assert_eq!(
            second["metadata"]["finalizers"],
            json!(["example.com/a", "example.com/b"])
        );
        assert_eq!(
            entry(&second, "bob").unwrap()["fieldsV1"],
            json!({"f:metadata": {"f:finalizers": {"v:\"example.com/b\"": {}}}})
        );
    }

    #[test]
    fn apply_ignores_managed_fields_status_and_nulls_in_the_config() {
        let mut config = deployment(1, "nginx:1");
        config["metadata"]["managedFields"] =
            json!([{"manager": "liar", "operation": "Apply", "fieldsV1": {"f:spec": {}}}]);
        config["status"] = json!({"replicas": 99});
        config["spec"]["paused"] = Value::Null;
        let created = apply(None, &config, "kubectl", false, T1).unwrap();
        assert!(created.get("status").is_none());
        assert!(created["spec"].get("paused").is_none());
        let managed = created["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(managed.len(), 1);
        assert_eq!(managed[0]["manager"], "kubectl");
    }

    #[test]
    fn apply_after_updates_keeps_server_metadata_and_status() {
        let mut live = deployment(1, "nginx:1");
        live["metadata"]["uid"] = json!("u-1");
        live["metadata"]["resourceVersion"] = json!("5");
        record_update(None, &mut live, "kube-controller-manager", "Update", None, T1);
        let mut with_status = live.clone();
        with_status["status"] = json!({"replicas": 1});
        record_update(
            Some(&live),
            &mut with_status,
            "kube-controller-manager",
            "Update",
            Some("status"),
            T1,
        );

        let mut config = deployment(1, "nginx:1");
        config["metadata"]["annotations"] = json!({"note": "hi"});
        let applied = apply(Some(&with_status), &config, "kubectl", false, T2).unwrap();
        assert_eq!(applied["metadata"]["uid"], "u-1");
        assert_eq!(applied["status"], json!({"replicas": 1}));
        assert_eq!(applied["metadata"]["annotations"], json!({"note": "hi"}));
        assert_eq!(applied["metadata"]["managedFields"].as_array().unwrap().len(), 3);
    }

    #[test]
    fn apply_to_object_without_managed_fields_conflicts_with_before_first_apply() {
        let live = deployment(1, "nginx:1");
        let err = apply(Some(&live), &deployment(2, "nginx:1"), "kubectl", false, T1).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"Apply failed with 1 conflict: conflict with "before-first-apply" using apps/v1: .spec.replicas"#
        );
        let applied = apply(Some(&live), &deployment(1, "nginx:1"), "kubectl", false, T1).unwrap();
        assert!(entry(&applied, "before-first-apply").is_some());
        assert!(entry(&applied, "kubectl").is_some());
    }

    #[test]
    fn update_by_another_manager_takes_the_field_and_the_next_apply_conflicts() {
        let first = apply(None, &deployment(1, "nginx:1"), "kubectl", false, T1).unwrap();
        let mut scaled = first.clone();
        scaled["spec"]["replicas"] = json!(5);
        record_update(
            Some(&first),
            &mut scaled,
            "kubectl-scale",
            "Update",
            Some("scale"),
            T2,
        );
        let scaler = entry(&scaled, "kubectl-scale").unwrap();
        assert_eq!(scaler["subresource"], "scale");
        assert_eq!(scaler["fieldsV1"], json!({"f:spec": {"f:replicas": {}}}));
        assert!(entry(&scaled, "kubectl").unwrap()["fieldsV1"]["f:spec"]
            .get("f:replicas")
            .is_none());

        let err = apply(Some(&scaled), &deployment(1, "nginx:1"), "kubectl", false, T3).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"Apply failed with 1 conflict: conflict with "kubectl-scale" with subresource "scale" using apps/v1: .spec.replicas"#
        );

        // Dropping replicas from the config leaves the scaler's value alone.
        let mut config = deployment(1, "nginx:1");
        config["spec"].as_object_mut().unwrap().shift_remove("replicas");
        let applied = apply(Some(&scaled), &config, "kubectl", false, T3).unwrap();
        assert_eq!(applied["spec"]["replicas"], 5);
    }

    #[test]
    fn apply_rejects_invalid_bodies() {
        let invalid = |config: Value| match apply(None, &config, "kubectl", false, T1) {
            Err(ApplyError::Invalid(message)) => message,
            other => panic!("expected Invalid, got {other:?}"),
        };
        assert!(invalid(json!([1])).contains("must be an object"));
        assert!(invalid(json!({"kind": "Deployment"})).contains("apiVersion must be set"));
        assert!(invalid(json!({"apiVersion": "apps/v1"})).contains("kind must be set"));
        assert!(invalid(json!({"apiVersion": "v1", "kind": "Deployment"})).contains("group"));
        assert!(invalid(json!({"apiVersion": "apps/v1", "kind": "StatefulSet"})).contains("kind"));
        let mut unkeyed = deployment(1, "nginx:1");
        unkeyed["spec"]["template"]["spec"]["containers"] = json!([{"image": "x"}]);
        assert_eq!(
            invalid(unkeyed),
            ".spec.template.spec.containers: element 0 is missing key field(s) name"
        );
        let mut duplicated = deployment(1, "nginx:1");
        duplicated["spec"]["template"]["spec"]["containers"] = json!([{"name": "a"}, {"name": "a"}]);
        assert_eq!(
            invalid(duplicated),
            r#"duplicate entries for key .spec.template.spec.containers[name="a"]"#
        );
    }
}
