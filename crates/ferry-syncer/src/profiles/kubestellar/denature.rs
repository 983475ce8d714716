//! Denaturing and renaturing: the KubeStellar profile's [`Mapping`].
//!
//! Some objects must not take effect in the control plane (a CRD whose group an
//! APIBinding already serves, an admission webhook, an RBAC binding): they are stored
//! there *denatured*, under another kind or name, and the syncer renatures them on the
//! way to the edge cluster. Each EdgeSyncConfig `conversions[]` entry says that the
//! upstream object `{group, kind, name}` is the downstream object `{group, kind, name}`:
//!
//! - type: when the kinds (or groups) differ, every object of the upstream type lands
//!   as the downstream type ([`Mapping::dest_type`]); one denatured kind converts to
//!   one natural kind only (validation rejects the rest);
//! - name: the named object is renamed both ways ([`Mapping::dest_ref`],
//!   [`Mapping::source_ref`]); objects of a converted type without their own entry keep
//!   their names;
//! - a CustomResourceDefinition gets `spec.group` from its new name minus the first
//!   segment (`policyreports.wgpolicyk8s.io.denatured` ↔ `policyreports.wgpolicyk8s.io`),
//!   so the copy is a valid CRD of the natural group.
//!
//! Upsync maps the other way: a downstream object named by a conversion's `downstream`
//! goes up as its `upstream` form. Conversions apply whenever an EdgeSyncConfig has
//! them (KubeStellar gated them on `ENABLE_DENATURING=true`; see README).

use ferry_api::edge::{EdgeSyncConfig, EdgeSyncConversionObject};
use serde_json::Value;

use crate::engine::ObjectRef;
use crate::profile::ResourceType;
use crate::selection::{validate_edge, Direction, DiscoveredResource, ResourceId, WatchTarget};

/// One object (or kind) named by group, kind and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Named {
    /// API group.
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Object name.
    pub name: String,
}

impl From<&EdgeSyncConversionObject> for Named {
    fn from(o: &EdgeSyncConversionObject) -> Self {
        Named {
            group: o.group.clone(),
            kind: o.kind.clone(),
            name: o.name.clone(),
        }
    }
}

impl Named {
    fn same_type(&self, other: &Named) -> bool {
        self.group == other.group && self.kind == other.kind
    }

    fn is_type(&self, group: &str, kind: &str) -> bool {
        self.group == group && self.kind == kind
    }
}

/// One valid conversion.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Conversion {
    /// The denatured form (in the mailbox workspace).
    pub upstream: Named,
    /// The natural form (in the edge cluster).
    pub downstream: Named,
}

/// Every valid conversion of every EdgeSyncConfig, and both sides' discovery (to find
/// the resource of a renamed kind).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Conversions {
    list: Vec<Conversion>,
}

impl Conversions {
    /// The valid conversions of `configs` (invalid ones are reported as conditions on
    /// their EdgeSyncConfig and skipped). Configs are taken in name order, and the first
    /// to convert an object (or kind) wins over later ones.
    pub fn from_configs(configs: &[EdgeSyncConfig]) -> Self {
        let mut configs: Vec<&EdgeSyncConfig> = configs.iter().collect();
        configs.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let mut list: Vec<Conversion> = vec![];
        for config in configs {
            let errors = validate_edge(config);
            for (i, c) in config.spec.conversions.iter().enumerate() {
                let at = format!("spec.conversions[{i}]");
                if errors
                    .iter()
                    .any(|e| e.field == at || e.field.starts_with(&format!("{at}.")))
                {
                    continue;
                }
                let c = Conversion {
                    upstream: Named::from(&c.upstream),
                    downstream: Named::from(&c.downstream),
                };
                let clashes = list.iter().any(|e| {
                    (e.upstream == c.upstream && e.downstream != c.downstream)
                        || (e.downstream == c.downstream && e.upstream != c.upstream)
                        || (e.upstream.same_type(&c.upstream) && !e.downstream.same_type(&c.downstream))
                });
                if !clashes && !list.contains(&c) {
                    list.push(c);
                }
            }
        }
        Conversions { list }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The type a source type `(group, kind)` travelling in `direction` converts to.
    fn converted_type(&self, direction: Direction, group: &str, kind: &str) -> Option<(String, String)> {
        self.list.iter().find_map(|c| {
            let (from, to) = ends(c, direction);
            (from.is_type(group, kind) && !from.same_type(to)).then(|| (to.group.clone(), to.kind.clone()))
        })
    }

    /// The destination type of the flow `target`, found in `dest_discovery` (the
    /// destination side's); the source type when nothing converts it.
    pub fn dest_type(&self, target: &WatchTarget, dest_discovery: &[DiscoveredResource]) -> ResourceType {
        let Some((group, kind)) = self.converted_type(target.direction, &target.id.group, &target.kind)
        else {
            return ResourceType::from(target);
        };
        let found = dest_discovery
            .iter()
            .filter(|d| d.group == group && d.kind == kind && !d.resource.contains('/'))
            .max_by_key(|d| d.preferred);
        match found {
            Some(d) => ResourceType {
                id: ResourceId::new(&d.group, &d.version, &d.resource, d.namespaced),
                kind: d.kind.clone(),
            },
            // Not served (yet): the usual plural, so the flow waits for it to appear.
            None => ResourceType {
                id: ResourceId::new(
                    &group,
                    &target.id.version,
                    &format!("{}s", kind.to_lowercase()),
                    target.id.namespaced,
                ),
                kind,
            },
        }
    }

    /// The destination key of `source`, of the flow `target`.
    pub fn dest_ref(&self, target: &WatchTarget, source: &ObjectRef) -> ObjectRef {
        let renamed = self.list.iter().find_map(|c| {
            let (from, to) = ends(c, target.direction);
            (from.is_type(&target.id.group, &target.kind) && from.name == source.name)
                .then(|| to.name.clone())
        });
        match renamed {
            Some(name) => ObjectRef {
                name,
                ..source.clone()
            },
            None => source.clone(),
        }
    }

    /// The source key of the destination object `dest` (of type `dest_type`), the
    /// inverse of [`Conversions::dest_ref`]; `None` when no source maps to it (an object
    /// named like a converted source, whose copy has another name).
    pub fn source_ref(
        &self,
        target: &WatchTarget,
        dest_type: &ResourceType,
        dest: &ObjectRef,
    ) -> Option<ObjectRef> {
        let mut by_source_name = false;
        for c in &self.list {
            let (from, to) = ends(c, target.direction);
            if !from.is_type(&target.id.group, &target.kind) {
                continue;
            }
            if to.is_type(&dest_type.id.group, &dest_type.kind) && to.name == dest.name {
                return Some(ObjectRef {
                    name: from.name.clone(),
                    ..dest.clone()
                });
            }
            by_source_name |= from.name == dest.name && to.name != dest.name;
        }
        (!by_source_name).then(|| dest.clone())
    }

    /// Finishes the copy of `source_key` once renamed: a converted
    /// CustomResourceDefinition takes its `spec.group` from its new name.
    pub fn transform(&self, target: &WatchTarget, source_key: &ObjectRef, copy: &mut Value) {
        let converted = self.list.iter().any(|c| {
            let (from, _) = ends(c, target.direction);
            from.is_type(&target.id.group, &target.kind) && from.name == source_key.name
        });
        if !converted || copy["kind"] != "CustomResourceDefinition" {
            return;
        }
        let group = copy["metadata"]["name"]
            .as_str()
            .and_then(|n| n.split_once('.'))
            .map(|(_, group)| group.to_string());
        if let (Some(group), Some(spec)) = (group, copy.get_mut("spec").and_then(Value::as_object_mut)) {
            spec.insert("group".into(), Value::String(group));
        }
    }
}

/// The side a flow reads (`from`) and the side it writes (`to`) of a conversion.
fn ends(c: &Conversion, direction: Direction) -> (&Named, &Named) {
    match direction {
        Direction::Downsync => (&c.upstream, &c.downstream),
        Direction::Upsync => (&c.downstream, &c.upstream),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config(name: &str, conversions: Value) -> EdgeSyncConfig {
        serde_json::from_value(json!({
            "apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "EdgeSyncConfig",
            "metadata": { "name": name },
            "spec": { "conversions": conversions }
        }))
        .unwrap()
    }

    fn crd_conversions() -> Conversions {
        Conversions::from_configs(&[config(
            "kyverno",
            json!([
                { "upstream": { "group": "apiextensions.k8s.io", "kind": "CustomResourceDefinition", "name": "policyreports.wgpolicyk8s.io.denatured" },
                  "downstream": { "group": "apiextensions.k8s.io", "kind": "CustomResourceDefinition", "name": "policyreports.wgpolicyk8s.io" } },
                { "upstream": { "group": "edge.example.io", "kind": "DenaturedClusterRoleBinding", "name": "kyverno" },
                  "downstream": { "group": "rbac.authorization.k8s.io", "kind": "ClusterRoleBinding", "name": "kyverno" } }
            ]),
        )])
    }

    fn target(group: &str, version: &str, resource: &str, kind: &str, direction: Direction) -> WatchTarget {
        WatchTarget {
            id: ResourceId::new(group, version, resource, false),
            kind: kind.into(),
            direction,
        }
    }

    fn key(name: &str) -> ObjectRef {
        ObjectRef {
            cluster: None,
            namespace: None,
            name: name.into(),
        }
    }

    #[test]
    fn a_denatured_crd_is_renamed_both_ways_and_gets_its_group_back() {
        let c = crd_conversions();
        let crds = target(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            Direction::Downsync,
        );
        let ty = c.dest_type(&crds, &[]);
        assert_eq!(ty, ResourceType::from(&crds), "same type, another name");
        let dest = c.dest_ref(&crds, &key("policyreports.wgpolicyk8s.io.denatured"));
        assert_eq!(dest.name, "policyreports.wgpolicyk8s.io");
        assert_eq!(
            c.source_ref(&crds, &ty, &dest).unwrap().name,
            "policyreports.wgpolicyk8s.io.denatured"
        );
        assert_eq!(
            c.dest_ref(&crds, &key("other.example.io")).name,
            "other.example.io"
        );
        assert_eq!(
            c.source_ref(&crds, &ty, &key("other.example.io")).unwrap().name,
            "other.example.io"
        );
        assert_eq!(
            c.source_ref(&crds, &ty, &key("policyreports.wgpolicyk8s.io.denatured")),
            None,
            "a downstream object named like the denatured source is nobody's copy"
        );
        let mut copy = json!({ "kind": "CustomResourceDefinition",
            "metadata": { "name": "policyreports.wgpolicyk8s.io" },
            "spec": { "group": "wgpolicyk8s.io.denatured" } });
        c.transform(&crds, &key("policyreports.wgpolicyk8s.io.denatured"), &mut copy);
        assert_eq!(copy["spec"]["group"], "wgpolicyk8s.io");
    }

    #[test]
    fn a_denatured_kind_lands_as_the_natural_kind_and_upsync_maps_back() {
        let c = crd_conversions();
        let down = target(
            "edge.example.io",
            "v1",
            "denaturedclusterrolebindings",
            "DenaturedClusterRoleBinding",
            Direction::Downsync,
        );
        let served = [DiscoveredResource {
            group: "rbac.authorization.k8s.io".into(),
            version: "v1".into(),
            resource: "clusterrolebindings".into(),
            kind: "ClusterRoleBinding".into(),
            namespaced: false,
            verbs: vec!["list".into(), "watch".into()],
            preferred: true,
        }];
        let ty = c.dest_type(&down, &served);
        assert_eq!(ty.id.resource, "clusterrolebindings");
        assert_eq!(ty.object_type().kind, "ClusterRoleBinding");
        let up = target(
            "rbac.authorization.k8s.io",
            "v1",
            "clusterrolebindings",
            "ClusterRoleBinding",
            Direction::Upsync,
        );
        let back = c.dest_type(&up, &[]);
        assert_eq!(back.kind, "DenaturedClusterRoleBinding");
        assert_eq!(back.id.group, "edge.example.io");
        assert_eq!(c.dest_ref(&up, &key("kyverno")).name, "kyverno");
    }

    #[test]
    fn invalid_and_conflicting_conversions_are_left_out() {
        let c = Conversions::from_configs(&[
            config(
                "a",
                json!([
                    { "upstream": { "group": "x.io", "kind": "A", "name": "" }, "downstream": { "group": "y.io", "kind": "B", "name": "z" } },
                    { "upstream": { "group": "x.io", "kind": "A", "name": "a" }, "downstream": { "group": "y.io", "kind": "B", "name": "b" } }
                ]),
            ),
            config(
                "b",
                json!([{ "upstream": { "group": "x.io", "kind": "A", "name": "c" }, "downstream": { "group": "z.io", "kind": "C", "name": "c" } }]),
            ),
        ]);
        assert_eq!(c.list.len(), 1, "{c:?}");
        assert_eq!(c.list[0].upstream.name, "a");
    }
}
