//! Field paths and field sets, the vocabulary of `managedFields`, after
//! `sigs.k8s.io/structured-merge-diff`: which leaf fields and list items an
//! object sets, and how two versions of an object differ.

use std::collections::BTreeSet;
use std::fmt;

use serde_json::{Map, Value};

use super::schema::{ListType, Schema};

/// One step of a field path.
///
/// The variant order is the sort order of `fieldsV1` keys in Kubernetes:
/// fields, then keyed items, then set values.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum PathElement {
    /// A map key: `f:<name>`.
    Field(String),
    /// An item of a keyed list, identified by its key fields as compact JSON
    /// with sorted keys: `k:{"name":"nginx"}`.
    Key(String),
    /// An item of a set of scalars, as JSON: `v:"example.com/finalizer"`.
    Value(String),
}

impl PathElement {
    fn value(item: &Value) -> Self {
        PathElement::Value(item.to_string())
    }

    /// The key element of a keyed-list item, if it is an object holding every
    /// key field.
    pub(super) fn key(item: &Value, keys: &[&str]) -> Option<Self> {
        let item = item.as_object()?;
        let mut sorted: Vec<&str> = keys.to_vec();
        sorted.sort_unstable();
        let mut key = Map::new();
        for field in sorted {
            match item.get(field) {
                None | Some(Value::Null) => return None,
                Some(value) => {
                    key.insert(field.to_owned(), value.clone());
                }
            }
        }
        Some(PathElement::Key(Value::Object(key).to_string()))
    }

    /// Parses a `fieldsV1` key. Index elements (`i:`) are not produced by
    /// Ferry's schemas and are not understood.
    fn parse(text: &str) -> Option<Self> {
        if let Some(name) = text.strip_prefix("f:") {
            return Some(PathElement::Field(name.to_owned()));
        }
        if let Some(key) = text.strip_prefix("k:") {
            // Re-encode so keys written by someone else compare equal to ours.
            let Value::Object(fields) = serde_json::from_str(key).ok()? else {
                return None;
            };
            let mut sorted: Vec<(&String, &Value)> = fields.iter().collect();
            sorted.sort_by(|a, b| a.0.cmp(b.0));
            let key: Map<String, Value> = sorted
                .into_iter()
                .map(|(name, value)| (name.clone(), value.clone()))
                .collect();
            return Some(PathElement::Key(Value::Object(key).to_string()));
        }
        if let Some(value) = text.strip_prefix("v:") {
            let value: Value = serde_json::from_str(value).ok()?;
            return Some(PathElement::value(&value));
        }
        None
    }

    /// Whether list `item` is the one this element names.
    fn matches_item(&self, item: &Value) -> bool {
        match self {
            PathElement::Field(_) => false,
            PathElement::Value(value) => {
                serde_json::from_str::<Value>(value).is_ok_and(|value| value == *item)
            }
            PathElement::Key(key) => match serde_json::from_str::<Map<String, Value>>(key) {
                Ok(fields) => fields.iter().all(|(name, value)| item.get(name) == Some(value)),
                Err(_) => false,
            },
        }
    }

    fn fields_v1_key(&self) -> String {
        match self {
            PathElement::Field(name) => format!("f:{name}"),
            PathElement::Key(key) => format!("k:{key}"),
            PathElement::Value(value) => format!("v:{value}"),
        }
    }
}

/// A path from the root of an object to a field or list item.
pub(super) type Path = Vec<PathElement>;

/// Formats a path the way structured-merge-diff does in conflict messages:
/// `.spec.template.spec.containers[name="nginx"].image`.
pub(super) struct DisplayPath<'a>(pub(super) &'a [PathElement]);

impl fmt::Display for DisplayPath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for element in self.0 {
            match element {
                PathElement::Field(name) => write!(f, ".{name}")?,
                PathElement::Value(value) => write!(f, "[={value}]")?,
                PathElement::Key(key) => {
                    let fields: Map<String, Value> = serde_json::from_str(key).unwrap_or_default();
                    let fields: Vec<String> = fields
                        .iter()
                        .map(|(name, value)| format!("{name}={value}"))
                        .collect();
                    write!(f, "[{}]", fields.join(","))?;
                }
            }
        }
        Ok(())
    }
}

/// A set of paths: the fields one manager owns, or the fields that changed.
///
/// A path is in the set when its value is owned as a whole: a scalar, an
/// atomic list, an empty map, a set value, or a keyed list item itself (the
/// `".": {}` of `fieldsV1`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct FieldSet(BTreeSet<Path>);

impl FieldSet {
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(super) fn insert(&mut self, path: Path) {
        self.0.insert(path);
    }

    pub(super) fn contains(&self, path: &[PathElement]) -> bool {
        self.0.contains(path)
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &Path> {
        self.0.iter()
    }

    pub(super) fn union(&self, other: &FieldSet) -> FieldSet {
        FieldSet(self.0.union(&other.0).cloned().collect())
    }

    pub(super) fn difference(&self, other: &FieldSet) -> FieldSet {
        FieldSet(self.0.difference(&other.0).cloned().collect())
    }

    pub(super) fn intersection(&self, other: &FieldSet) -> FieldSet {
        FieldSet(self.0.intersection(&other.0).cloned().collect())
    }

    /// Whether the set holds `prefix` or any path below it.
    pub(super) fn has_prefix(&self, prefix: &[PathElement]) -> bool {
        self.0
            .range(prefix.to_vec()..)
            .next()
            .is_some_and(|path| path.starts_with(prefix))
    }

    /// Reads a `fieldsV1` tree. Keys that are not understood are skipped.
    pub(super) fn from_fields_v1(tree: &Value) -> FieldSet {
        fn walk(node: &Map<String, Value>, path: &mut Path, out: &mut FieldSet) {
            for (key, child) in node {
                if key == "." {
                    if !path.is_empty() {
                        out.insert(path.clone());
                    }
                    continue;
                }
                let Some(element) = PathElement::parse(key) else {
                    continue;
                };
                path.push(element);
                match child.as_object() {
                    Some(children) if !children.is_empty() => walk(children, path, out),
                    _ => out.insert(path.clone()),
                }
                path.pop();
            }
        }
        let mut set = FieldSet::default();
        if let Some(root) = tree.as_object() {
            walk(root, &mut Vec::new(), &mut set);
        }
        set
    }

    /// Writes the set as a `fieldsV1` tree.
    pub(super) fn to_fields_v1(&self) -> Value {
        #[derive(Default)]
        struct Node {
            member: bool,
            children: std::collections::BTreeMap<PathElement, Node>,
        }
        fn render(node: &Node) -> Value {
            let mut out = Map::new();
            if node.member && !node.children.is_empty() {
                out.insert(".".to_owned(), Value::Object(Map::new()));
            }
            for (element, child) in &node.children {
                out.insert(element.fields_v1_key(), render(child));
            }
            Value::Object(out)
        }
        let mut root = Node::default();
        for path in &self.0 {
            let mut node = &mut root;
            for element in path {
                node = node.children.entry(element.clone()).or_default();
            }
            node.member = true;
        }
        render(&root)
    }
}

/// How an object changed between two versions, at field-set granularity.
#[derive(Debug, Default)]
pub(super) struct Comparison {
    pub(super) added: FieldSet,
    pub(super) modified: FieldSet,
    pub(super) removed: FieldSet,
}

/// Field-set operations that need to know how the kind's lists merge.
#[derive(Clone, Copy)]
pub(super) struct FieldWalker<'a> {
    schema: Schema<'a>,
}

impl<'a> FieldWalker<'a> {
    pub(super) fn new(group: &str, kind: &'a str) -> Self {
        FieldWalker {
            schema: Schema::new(group, kind),
        }
    }

    /// The list type at `path`; list items in the path are skipped.
    pub(super) fn list_type(&self, path: &[PathElement]) -> ListType {
        let fields: Vec<&str> = path
            .iter()
            .filter_map(|element| match element {
                PathElement::Field(name) => Some(name.as_str()),
                _ => None,
            })
            .collect();
        self.schema.list_type(&fields)
    }

    /// The key elements of every item of a keyed list, or `None` when an item
    /// lacks a key field or two items share a key (the list is then treated
    /// as atomic).
    pub(super) fn item_keys(items: &[Value], keys: &[&str]) -> Option<Vec<PathElement>> {
        let mut seen = BTreeSet::new();
        let mut elements = Vec::with_capacity(items.len());
        for item in items {
            let element = PathElement::key(item, keys)?;
            if !seen.insert(element.clone()) {
                return None;
            }
            elements.push(element);
        }
        Some(elements)
    }

    /// Every field `object` sets.
    pub(super) fn field_set(&self, object: &Value) -> FieldSet {
        let mut set = FieldSet::default();
        self.collect(object, &mut Vec::new(), &mut set);
        set
    }

    fn collect(&self, value: &Value, path: &mut Path, out: &mut FieldSet) {
        if matches!(path.last(), Some(PathElement::Key(_))) {
            out.insert(path.clone());
        }
        match value {
            Value::Object(map) if !map.is_empty() => {
                for (name, child) in map {
                    path.push(PathElement::Field(name.clone()));
                    self.collect(child, path, out);
                    path.pop();
                }
            }
            Value::Array(items) if !items.is_empty() => match self.list_type(path) {
                ListType::Set => {
                    for item in items {
                        path.push(PathElement::value(item));
                        out.insert(path.clone());
                        path.pop();
                    }
                }
                ListType::Map(keys) => match Self::item_keys(items, keys) {
                    Some(elements) => {
                        for (element, item) in elements.into_iter().zip(items) {
                            path.push(element);
                            self.collect(item, path, out);
                            path.pop();
                        }
                    }
                    None => out.insert(path.clone()),
                },
                ListType::Atomic => out.insert(path.clone()),
            },
            _ if path.is_empty() || matches!(path.last(), Some(PathElement::Key(_))) => {}
            _ => out.insert(path.clone()),
        }
    }

    /// The fields added, modified and removed going from `old` to `new`.
    pub(super) fn compare(&self, old: &Value, new: &Value) -> Comparison {
        let mut comparison = Comparison::default();
        self.compare_at(Some(old), Some(new), &mut Vec::new(), &mut comparison);
        comparison
    }

    fn compare_at(&self, old: Option<&Value>, new: Option<&Value>, path: &mut Path, out: &mut Comparison) {
        let (old, new) = match (old, new) {
            (None, None) => return,
            (None, Some(new)) => return self.collect(new, path, &mut out.added),
            (Some(old), None) => return self.collect(old, path, &mut out.removed),
            (Some(old), Some(new)) => (old, new),
        };
        match (old, new) {
            (Value::Object(old_map), Value::Object(new_map))
                if path.is_empty() || (!old_map.is_empty() && !new_map.is_empty()) =>
            {
                for (name, old_child) in old_map {
                    path.push(PathElement::Field(name.clone()));
                    self.compare_at(Some(old_child), new_map.get(name), path, out);
                    path.pop();
                }
                for (name, new_child) in new_map {
                    if !old_map.contains_key(name) {
                        path.push(PathElement::Field(name.clone()));
                        self.collect(new_child, path, &mut out.added);
                        path.pop();
                    }
                }
            }
            (Value::Array(old_items), Value::Array(new_items))
                if !old_items.is_empty() && !new_items.is_empty() =>
            {
                match self.list_type(path) {
                    ListType::Set => {
                        // Hashed, so a set of n items costs O(n), not O(n²).
                        let old_set = super::ValueSet::new(old_items);
                        let new_set = super::ValueSet::new(new_items);
                        for item in old_items.iter().filter(|item| !new_set.contains(item)) {
                            path.push(PathElement::value(item));
                            out.removed.insert(path.clone());
                            path.pop();
                        }
                        for item in new_items.iter().filter(|item| !old_set.contains(item)) {
                            path.push(PathElement::value(item));
                            out.added.insert(path.clone());
                            path.pop();
                        }
                    }
                    ListType::Map(keys) => {
                        match (Self::item_keys(old_items, keys), Self::item_keys(new_items, keys)) {
                            (Some(old_keys), Some(new_keys)) => {
                                // Keys are unique (`item_keys`): index them once.
                                let new_index: std::collections::HashMap<&PathElement, usize> =
                                    new_keys.iter().enumerate().map(|(i, k)| (k, i)).collect();
                                let old_index: std::collections::HashSet<PathElement> =
                                    old_keys.iter().cloned().collect();
                                for (key, old_item) in old_keys.iter().zip(old_items) {
                                    let new_item = new_index.get(key).map(|&index| &new_items[index]);
                                    path.push(key.clone());
                                    self.compare_at(Some(old_item), new_item, path, out);
                                    path.pop();
                                }
                                drop(new_index);
                                for (key, new_item) in new_keys.into_iter().zip(new_items) {
                                    if !old_index.contains(&key) {
                                        path.push(key);
                                        self.collect(new_item, path, &mut out.added);
                                        path.pop();
                                    }
                                }
                            }
                            _ => self.replaced(old, new, path, out),
                        }
                    }
                    ListType::Atomic => {
                        if old != new {
                            out.modified.insert(path.clone());
                        }
                    }
                }
            }
            _ if old != new => self.replaced(old, new, path, out),
            _ => {}
        }
    }

    /// `old` replaced by a differently shaped `new`: paths in both are
    /// modified, the rest removed or added.
    fn replaced(&self, old: &Value, new: &Value, path: &mut Path, out: &mut Comparison) {
        let mut old_set = FieldSet::default();
        self.collect(old, path, &mut old_set);
        let mut new_set = FieldSet::default();
        self.collect(new, path, &mut new_set);
        for path in old_set.iter() {
            if new_set.contains(path) {
                out.modified.insert(path.clone());
            } else {
                out.removed.insert(path.clone());
            }
        }
        for path in new_set.difference(&old_set).iter() {
            out.added.insert(path.clone());
        }
    }
}

/// The value at `path`, if there is one.
pub(super) fn value_at_mut<'v>(root: &'v mut Value, path: &[PathElement]) -> Option<&'v mut Value> {
    let mut current = root;
    for element in path {
        current = match element {
            PathElement::Field(name) => current.as_object_mut()?.get_mut(name)?,
            _ => current
                .as_array_mut()?
                .iter_mut()
                .find(|item| element.matches_item(item))?,
        };
    }
    Some(current)
}

/// Removes the value at `path`; false if there was none.
pub(super) fn remove_at(root: &mut Value, path: &[PathElement]) -> bool {
    let Some((last, parent)) = path.split_last() else {
        return false;
    };
    match (last, value_at_mut(root, parent)) {
        (PathElement::Field(name), Some(Value::Object(map))) => map.shift_remove(name).is_some(),
        (element, Some(Value::Array(items))) => {
            match items.iter().position(|item| element.matches_item(item)) {
                Some(index) => {
                    items.remove(index);
                    true
                }
                None => false,
            }
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn field(name: &str) -> PathElement {
        PathElement::Field(name.to_owned())
    }

    fn deployment() -> Value {
        json!({
            "metadata": {"labels": {"app": "web"}, "finalizers": ["a"]},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1", "args": ["-x"]}]}}
            }
        })
    }

    #[test]
    fn field_set_renders_as_kubernetes_fields_v1() {
        let walker = FieldWalker::new("apps", "Deployment");
        let set = walker.field_set(&deployment());
        assert_eq!(
            set.to_fields_v1(),
            json!({
                "f:metadata": {"f:finalizers": {"v:\"a\"": {}}, "f:labels": {"f:app": {}}},
                "f:spec": {
                    "f:replicas": {},
                    "f:selector": {"f:matchLabels": {"f:app": {}}},
                    "f:template": {"f:spec": {"f:containers": {
                        "k:{\"name\":\"nginx\"}": {".": {}, "f:args": {}, "f:image": {}, "f:name": {}}
                    }}}
                }
            })
        );
    }

    #[test]
    fn fields_v1_round_trips() {
        let walker = FieldWalker::new("apps", "Deployment");
        let set = walker.field_set(&deployment());
        assert_eq!(FieldSet::from_fields_v1(&set.to_fields_v1()), set);
    }

    #[test]
    fn multi_field_keys_are_sorted_like_kubernetes() {
        let element = PathElement::key(
            &json!({"whenUnsatisfiable": "DoNotSchedule", "topologyKey": "zone", "maxSkew": 1}),
            &["topologyKey", "whenUnsatisfiable"],
        )
        .unwrap();
        assert_eq!(
            element.fields_v1_key(),
            r#"k:{"topologyKey":"zone","whenUnsatisfiable":"DoNotSchedule"}"#
        );
        assert_eq!(
            PathElement::parse(r#"k:{"whenUnsatisfiable":"DoNotSchedule","topologyKey":"zone"}"#),
            Some(element)
        );
    }

    #[test]
    fn paths_display_like_structured_merge_diff() {
        let path = vec![
            field("spec"),
            field("containers"),
            PathElement::key(&json!({"name": "nginx"}), &["name"]).unwrap(),
            field("image"),
        ];
        assert_eq!(
            DisplayPath(&path).to_string(),
            r#".spec.containers[name="nginx"].image"#
        );
        let path = vec![
            field("metadata"),
            field("finalizers"),
            PathElement::value(&json!("a")),
        ];
        assert_eq!(DisplayPath(&path).to_string(), r#".metadata.finalizers[="a"]"#);
    }

    #[test]
    fn compare_reports_added_modified_and_removed_leaves() {
        let walker = FieldWalker::new("apps", "Deployment");
        let old = deployment();
        let mut new = deployment();
        new["spec"]["replicas"] = json!(2);
        new["metadata"]["labels"] = json!({"tier": "front"});
        new["spec"]["template"]["spec"]["containers"][0]["args"] = json!(["-y"]);
        let cmp = walker.compare(&old, &new);
        let show = |set: &FieldSet| -> Vec<String> {
            set.iter().map(|path| DisplayPath(path).to_string()).collect()
        };
        assert_eq!(show(&cmp.added), [".metadata.labels.tier"]);
        assert_eq!(
            show(&cmp.modified),
            [
                ".spec.replicas",
                r#".spec.template.spec.containers[name="nginx"].args"#
            ]
        );
        assert_eq!(show(&cmp.removed), [".metadata.labels.app"]);
    }

    #[test]
    fn removing_paths_finds_keyed_items_and_set_values() {
        let mut doc = deployment();
        let key = PathElement::key(&json!({"name": "nginx"}), &["name"]).unwrap();
        let containers = vec![
            field("spec"),
            field("template"),
            field("spec"),
            field("containers"),
        ];
        let mut image = containers.clone();
        image.extend([key.clone(), field("image")]);
        assert!(remove_at(&mut doc, &image));
        let mut item = containers.clone();
        item.push(key);
        assert!(remove_at(&mut doc, &item));
        assert!(remove_at(
            &mut doc,
            &[
                field("metadata"),
                field("finalizers"),
                PathElement::value(&json!("a"))
            ]
        ));
        assert!(!remove_at(&mut doc, &[field("nope")]));
        assert_eq!(doc["spec"]["template"]["spec"]["containers"], json!([]));
        assert_eq!(doc["metadata"]["finalizers"], json!([]));
    }
}
