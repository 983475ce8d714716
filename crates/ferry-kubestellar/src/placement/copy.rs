//! What the translator writes: a mailbox copy of a WMW object, the mailbox's
//! SyncerConfig, and a WMW copy of an upsynced object. Pure.

use std::collections::BTreeMap;

use ferry_api::edge::{
    ClusterScopeDownsyncResource, NamespaceAndNames, NamespaceScopeDownsyncObjects, SyncerConfigSpec,
    UpsyncSet,
};
use ferry_api::well_known::{EXECUTING_COUNT_ANNOTATION, KCP_CLUSTER_ANNOTATION};
use serde_json::{json, Map, Value};

use super::{PLACED_LABEL, SOURCE_ANNOTATION, SOURCE_RV_ANNOTATION};

/// Annotations never carried from a WMW object to its copies: kcp's cluster
/// name and what the translator itself writes on the WMW object.
const NOT_COPIED: &[&str] = &[KCP_CLUSTER_ANNOTATION, EXECUTING_COUNT_ANNOTATION];

/// Fields the hub sets on every object; a copy gets its own.
const SERVER_METADATA: &[&str] = &[
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "ownerReferences",
    "finalizers",
    "selfLink",
    "generateName",
];

/// The copy of WMW object `source` for a mailbox: no status, no server
/// fields nor owner references (the owners are not in the mailbox), nothing
/// the WMW allocated for it ([`ferry_api::allocated`]: the mailbox refuses a
/// Job selector generated for another uid), marked as placed, with where it
/// came from (`source_path`) and at which resourceVersion (`source_rv`).
pub fn mailbox_copy(source: &Value, source_path: &str, source_rv: u64) -> Value {
    let mut copy = source.clone();
    let api_version = str_of(source, "apiVersion");
    let kind = str_of(source, "kind");
    ferry_api::allocated::drop_allocated(&mut copy, api_version, kind);
    let Some(obj) = copy.as_object_mut() else {
        return copy;
    };
    obj.remove("status");
    if obj.get("kind").and_then(Value::as_str) == Some("Namespace")
        && obj.get("apiVersion") == Some(&json!("v1"))
    {
        obj.remove("spec"); // its finalizers are the mailbox's own
    }
    let meta = obj.entry("metadata").or_insert_with(|| json!({}));
    if let Some(m) = meta.as_object_mut() {
        for f in SERVER_METADATA {
            m.remove(*f);
        }
        let labels = m.entry("labels").or_insert_with(|| json!({}));
        if let Some(l) = labels.as_object_mut() {
            l.insert(PLACED_LABEL.into(), json!("true"));
        }
        let annotations = m.entry("annotations").or_insert_with(|| json!({}));
        if let Some(a) = annotations.as_object_mut() {
            for n in NOT_COPIED {
                a.remove(*n);
            }
            a.insert(SOURCE_ANNOTATION.into(), json!(source_path));
            a.insert(SOURCE_RV_ANNOTATION.into(), json!(source_rv.to_string()));
        }
    }
    copy
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// Put back on a customized `copy` the translator's marks from `plain` (the
/// copy before customization), which a Customizer may not change.
pub fn remark(copy: &mut Value, plain: &Value) {
    let marks = [
        ("labels", PLACED_LABEL),
        ("annotations", SOURCE_ANNOTATION),
        ("annotations", SOURCE_RV_ANNOTATION),
        ("annotations", super::transform::TRANSFORMED_BY_ANNOTATION),
    ];
    for (part, key) in marks {
        let Some(v) = plain
            .pointer(&format!("/metadata/{part}"))
            .and_then(|m| m.get(key))
        else {
            continue;
        };
        if let Some(m) = copy
            .pointer_mut(&format!("/metadata/{part}"))
            .and_then(Value::as_object_mut)
        {
            m.insert(key.to_string(), v.clone());
        }
    }
}

/// What decides whether two copies are the same object: everything but
/// status, server metadata, what the server allocated (the mailbox allocates
/// its own) and the marks that only say where and when a copy came from.
pub fn content(obj: &Value) -> Value {
    let mut v = obj.clone();
    ferry_api::allocated::drop_allocated(&mut v, str_of(obj, "apiVersion"), str_of(obj, "kind"));
    let Some(o) = v.as_object_mut() else {
        return v;
    };
    o.remove("status");
    if o.get("kind").and_then(Value::as_str) == Some("Namespace") {
        o.remove("spec");
    }
    if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        let keep: Map<String, Value> = ["name", "namespace", "labels", "annotations"]
            .iter()
            .filter_map(|k| m.get(*k).map(|v| (k.to_string(), v.clone())))
            .collect();
        *m = keep;
        if let Some(a) = m.get_mut("annotations").and_then(Value::as_object_mut) {
            a.remove(SOURCE_ANNOTATION);
            a.remove(SOURCE_RV_ANNOTATION);
            for n in NOT_COPIED {
                a.remove(*n);
            }
            if a.is_empty() {
                m.remove("annotations");
            }
        }
        if m.get("labels")
            .and_then(Value::as_object)
            .is_some_and(Map::is_empty)
        {
            m.remove("labels");
        }
    }
    v
}

/// One placed object, as the SyncerConfig lists it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Listed {
    pub group: String,
    pub version: String,
    pub resource: String,
    /// Empty for cluster-scoped objects.
    pub namespace: String,
    pub name: String,
}

/// The SyncerConfig spec for a mailbox holding `objects` (and the
/// namespaces they are in, which are listed as objects too) and wanting
/// `upsync`: exactly these objects, by name.
pub fn syncer_config_spec(objects: &[Listed], upsync: &[UpsyncSet]) -> SyncerConfigSpec {
    let mut cluster: BTreeMap<(String, String, String), Vec<String>> = BTreeMap::new();
    let mut namespaced: BTreeMap<(String, String, String), BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for o in objects {
        let gvr = (o.group.clone(), o.resource.clone(), o.version.clone());
        if o.namespace.is_empty() {
            cluster.entry(gvr).or_default().push(o.name.clone());
        } else {
            namespaced
                .entry(gvr)
                .or_default()
                .entry(o.namespace.clone())
                .or_default()
                .push(o.name.clone());
        }
    }
    let mut spec = SyncerConfigSpec::default();
    for ((group, resource, api_version), mut names) in cluster {
        names.sort();
        names.dedup();
        spec.cluster_scope.push(ClusterScopeDownsyncResource {
            group,
            resource,
            api_version,
            objects: Some(names),
        });
    }
    for ((group, resource, api_version), by_ns) in namespaced {
        spec.namespaced_objects.push(NamespaceScopeDownsyncObjects {
            group,
            resource,
            api_version,
            objects_by_namespace: by_ns
                .into_iter()
                .map(|(namespace, mut names)| {
                    names.sort();
                    names.dedup();
                    NamespaceAndNames { namespace, names }
                })
                .collect(),
        });
    }
    for u in upsync {
        if !spec.upsync.contains(u) {
            spec.upsync.push(u.clone());
        }
    }
    spec
}

/// Whether an upsync set takes an object of `group`/`resource` at
/// `namespace` (empty: cluster-scoped) named `name`.
pub fn upsync_matches(set: &UpsyncSet, group: &str, resource: &str, namespace: &str, name: &str) -> bool {
    let any = |list: &[String], v: &str| list.iter().any(|x| x == "*" || x == v);
    set.api_group == group
        && any(&set.resources, resource)
        && (namespace.is_empty() || any(&set.namespaces, namespace))
        && any(&set.names, name)
}

/// The WMW copy of an object upsynced into the mailbox of SyncTarget
/// `target`: named `<target>-<name>` so copies from several clusters sit
/// side by side, labelled with the cluster it came from.
pub fn returned_copy(upsynced: &Value, target: &str, mailbox_path: &str) -> Value {
    let mut copy = upsynced.clone();
    let name = upsynced
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if let Some(m) = copy.get_mut("metadata").and_then(Value::as_object_mut) {
        for f in SERVER_METADATA {
            m.remove(*f);
        }
        m.insert("name".into(), json!(returned_name(target, &name)));
        let labels = m.entry("labels").or_insert_with(|| json!({}));
        if let Some(l) = labels.as_object_mut() {
            l.insert(super::RETURNED_LABEL.into(), json!(target));
        }
        let annotations = m.entry("annotations").or_insert_with(|| json!({}));
        if let Some(a) = annotations.as_object_mut() {
            a.remove(KCP_CLUSTER_ANNOTATION);
            a.insert(
                super::RETURNED_FROM_ANNOTATION.into(),
                json!(format!("{mailbox_path}/{name}")),
            );
        }
    }
    copy
}

/// `<target>-<name>`.
pub fn returned_name(target: &str, name: &str) -> String {
    format!("{target}-{name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_drops_server_fields_and_status_and_is_marked() {
        let source = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "n", "uid": "u", "resourceVersion": "7",
                         "ownerReferences": [{"uid": "x"}],
                         "annotations": {"kcp.io/cluster": "abc", "kubestellar.io/executing-count": "2", "keep": "me"}},
            "spec": {"replicas": 1}, "status": {"readyReplicas": 1},
        });
        let copy = mailbox_copy(&source, "root:wmw", 7);
        assert_eq!(copy["metadata"]["labels"][PLACED_LABEL], "true");
        assert_eq!(copy["metadata"]["annotations"]["keep"], "me");
        assert!(copy["metadata"]["annotations"].get("kcp.io/cluster").is_none());
        assert!(copy.get("status").is_none() && copy["metadata"].get("uid").is_none());
        assert!(copy["metadata"].get("ownerReferences").is_none());
        // A later copy of the same object at another resourceVersion is the same content.
        assert_eq!(content(&copy), content(&mailbox_copy(&source, "root:other", 9)));
        let mut changed = source.clone();
        changed["spec"]["replicas"] = json!(2);
        assert_ne!(content(&copy), content(&mailbox_copy(&changed, "root:wmw", 8)));
    }

    #[test]
    fn a_copy_leaves_what_the_wmw_allocated_for_the_mailbox_to_allocate() {
        let job = json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "migrate", "namespace": "n", "uid": "u1"},
            "spec": {"selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u1"}},
                     "template": {"metadata": {"labels": {"app": "m", "batch.kubernetes.io/controller-uid": "u1",
                                                          "controller-uid": "u1", "job-name": "migrate",
                                                          "batch.kubernetes.io/job-name": "migrate"}},
                                  "spec": {"restartPolicy": "Never"}}},
        });
        let copy = mailbox_copy(&job, "root:wmw", 3);
        assert!(copy["spec"].get("selector").is_none());
        assert_eq!(
            copy["spec"]["template"]["metadata"]["labels"],
            json!({"app": "m"})
        );
        // The mailbox's Job, with the selector the mailbox generated, is the same content.
        let mut in_mailbox = copy.clone();
        in_mailbox["spec"]["selector"] = json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u2"}});
        in_mailbox["spec"]["template"]["metadata"]["labels"]["controller-uid"] = json!("u2");
        assert_eq!(content(&in_mailbox), content(&copy));

        let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "n"},
                             "spec": {"clusterIP": "10.96.0.7", "clusterIPs": ["10.96.0.7"], "ports": [{"port": 80}]}});
        let copy = mailbox_copy(&service, "root:wmw", 3);
        assert!(copy["spec"].get("clusterIP").is_none());
        let mut in_mailbox = copy.clone();
        in_mailbox["spec"]["clusterIP"] = json!("10.97.0.3");
        in_mailbox["spec"]["clusterIPs"] = json!(["10.97.0.3"]);
        assert_eq!(content(&in_mailbox), content(&copy));
    }

    #[test]
    fn syncer_config_lists_exactly_the_placed_objects() {
        let l = |g: &str, r: &str, ns: &str, n: &str| Listed {
            group: g.into(),
            version: "v1".into(),
            resource: r.into(),
            namespace: ns.into(),
            name: n.into(),
        };
        let spec = syncer_config_spec(
            &[
                l("", "namespaces", "", "commonstuff"),
                l("", "configmaps", "commonstuff", "httpd-htdocs"),
                l("apps", "deployments", "commonstuff", "commond"),
            ],
            &[],
        );
        assert_eq!(
            spec.cluster_scope[0].objects.as_deref(),
            Some(&["commonstuff".to_string()][..])
        );
        assert_eq!(spec.namespaced_objects.len(), 2);
        assert_eq!(
            spec.namespaced_objects[1].objects_by_namespace[0].names,
            ["commond"]
        );
    }
}
