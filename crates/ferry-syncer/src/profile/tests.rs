//! The seam proved with a toy profile that renames both kind and namespace: source
//! ConfigMaps in `<ns>` become `ToyConfigMap`s (group `toy.example.com`) in `p-<ns>`.

use serde_json::json;

use super::*;
use crate::engine::raw::RawObject;
use crate::engine::Flow;
use crate::transform::desired_copy;

/// Copies land in namespace `p-<ns>` as `toy.example.com/v1` `ToyConfigMap`s.
struct Prefix;

impl Mapping for Prefix {
    fn dest_type(&self, target: &WatchTarget) -> ResourceType {
        ResourceType {
            id: ResourceId::new(
                "toy.example.com",
                "v1",
                &format!("toy{}", target.id.resource),
                true,
            ),
            kind: format!("Toy{}", target.kind),
        }
    }

    fn dest_ref(&self, _: &WatchTarget, source: &ObjectRef) -> ObjectRef {
        ObjectRef {
            cluster: None,
            namespace: source.namespace.as_ref().map(|ns| format!("p-{ns}")),
            name: source.name.clone(),
        }
    }

    fn source_ref(&self, _: &WatchTarget, dest: &ObjectRef) -> Option<ObjectRef> {
        let namespace = match &dest.namespace {
            Some(ns) => Some(ns.strip_prefix("p-")?.to_string()),
            None => None,
        };
        Some(ObjectRef {
            cluster: None,
            namespace,
            name: dest.name.clone(),
        })
    }
}

/// One label, valued by direction.
struct ToyMarks;

impl Marks for ToyMarks {
    fn copy_selector(&self, _: Side) -> String {
        "toy.example.com/owner".into()
    }

    fn mark(&self, copy: &mut Value, direction: Direction) {
        let value = match direction {
            Direction::Downsync => "down",
            Direction::Upsync => "up",
        };
        copy["metadata"]["labels"]["toy.example.com/owner"] = json!(value);
    }

    fn is_own_copy(&self, obj: &Value) -> bool {
        obj["metadata"]["labels"]["toy.example.com/owner"].is_string()
    }

    fn is_orphaned_copy(&self, obj: &Value, _: Side) -> bool {
        self.is_own_copy(obj)
    }

    fn is_create_only(&self, _: &Value, _: Direction) -> bool {
        false
    }

    fn release_patch(&self) -> Value {
        json!({ "metadata": { "labels": { "toy.example.com/owner": null } } })
    }

    fn describe(&self, _: Direction) -> String {
        "toy.example.com/owner".into()
    }
}

fn configmaps() -> WatchTarget {
    WatchTarget {
        id: ResourceId::new("", "v1", "configmaps", true),
        kind: "ConfigMap".into(),
        direction: Direction::Downsync,
    }
}

fn object_ref(namespace: &str, name: &str) -> ObjectRef {
    ObjectRef {
        cluster: None,
        namespace: Some(namespace.into()),
        name: name.into(),
    }
}

fn toy_flow() -> Arc<Flow> {
    Flow::new(7, configmaps(), Prefix.dest_type(&configmaps()), false, false)
}

fn raw(namespace: &str, name: &str) -> RawObject {
    RawObject::from_value(
        &json!({ "metadata": { "name": name, "namespace": namespace, "resourceVersion": "1" } }),
    )
    .unwrap()
}

#[test]
fn a_source_and_its_copy_share_one_key_carrying_both_references() {
    let flow = toy_flow();
    let from_source = flow.source_key(&Prefix, object_ref("app", "a"));
    let from_copy = flow.copy_key(&Prefix, object_ref("p-app", "a"));
    assert_eq!(from_source, from_copy);
    assert_eq!(from_source.source(), Some(&object_ref("app", "a")));
    assert_eq!(from_source.dest(), &object_ref("p-app", "a"));
    assert_eq!(from_source.to_string(), "app/a (copy p-app/a)");
}

#[test]
fn a_copy_that_maps_to_no_source_is_keyed_without_one() {
    let key = toy_flow().copy_key(&Prefix, object_ref("elsewhere", "a"));
    assert_eq!(
        key.source(),
        None,
        "reconciled as a copy without a source: deleted"
    );
    assert_eq!(key.dest(), &object_ref("elsewhere", "a"));
}

#[test]
fn every_key_of_both_sides_is_queued_once() {
    let flow = toy_flow();
    flow.sources.apply(&raw("app", "a"));
    flow.sources.apply(&raw("app", "new"));
    flow.copies.apply(&raw("p-app", "a"));
    flow.copies.apply(&raw("p-app", "gone"));
    let keys: Vec<String> = flow.all_keys(&Prefix).iter().map(ToString::to_string).collect();
    assert_eq!(
        keys,
        [
            "app/a (copy p-app/a)",
            "app/gone (copy p-app/gone)",
            "app/new (copy p-app/new)"
        ]
    );
}

#[test]
fn each_side_has_its_own_resource_type() {
    let flow = toy_flow();
    assert_eq!(flow.source_side(), Side::Upstream);
    assert_eq!(flow.api_resource(Side::Upstream).kind, "ConfigMap");
    assert_eq!(flow.api_resource(Side::Upstream).api_version, "v1");
    let down = flow.api_resource(Side::Downstream);
    assert_eq!(
        (
            down.api_version.as_str(),
            down.kind.as_str(),
            down.plural.as_str()
        ),
        ("toy.example.com/v1", "ToyConfigMap", "toyconfigmaps")
    );
    assert_eq!(flow.resource_id(Side::Downstream).group, "toy.example.com");
    assert_eq!(flow.object_type(Side::Downstream).kind, "ToyConfigMap");
}

#[test]
fn the_desired_copy_lands_where_the_mapping_says_marked_by_the_profile() {
    let flow = toy_flow();
    let source = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": "a", "namespace": "app", "uid": "u1", "resourceVersion": "9",
                      "labels": { "tier": "web" } },
        "data": { "k": "v" },
    });
    let key = flow.source_key(&Prefix, object_ref("app", "a"));
    let copy = desired_copy(
        &source,
        Direction::Downsync,
        key.dest(),
        flow.object_type(flow.dest_side()),
        &ToyMarks,
    );
    assert_eq!(copy["apiVersion"], "toy.example.com/v1");
    assert_eq!(copy["kind"], "ToyConfigMap");
    assert_eq!(copy["metadata"]["namespace"], "p-app");
    assert_eq!(copy["metadata"]["name"], "a");
    assert_eq!(copy["metadata"]["labels"]["tier"], "web");
    assert_eq!(copy["metadata"]["labels"]["toy.example.com/owner"], "down");
    assert!(copy["metadata"].get("uid").is_none(), "server fields stripped");
    assert_eq!(copy["data"]["k"], "v");
    assert!(ToyMarks.is_own_copy(&copy));
    // The copy, as its watch would deliver it, keys back to its source.
    let dest = ObjectRef::of(&copy).unwrap();
    assert_eq!(flow.copy_key(&Prefix, dest), key);
}

#[test]
fn the_identity_mapping_keeps_type_and_key() {
    let target = configmaps();
    assert_eq!(Identity.dest_type(&target), ResourceType::from(&target));
    let key = object_ref("app", "a");
    assert_eq!(Identity.dest_ref(&target, &key), key);
    assert_eq!(Identity.source_ref(&target, &key), Some(key));
}
