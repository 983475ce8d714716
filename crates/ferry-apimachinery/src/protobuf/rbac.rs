//! rbac.authorization.k8s.io/v1: Role, ClusterRole, RoleBinding,
//! ClusterRoleBinding.

use k8s_pb::api::rbac::v1::{
    AggregationRule, ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use serde_json::Value;

use super::json::Fields;
use super::meta::{label_selector, object_meta};

pub(super) fn role(r: &Role) -> Value {
    Fields::new()
        .message("metadata", &r.metadata, object_meta)
        .messages("rules", &r.rules, policy_rule)
        .build()
}

pub(super) fn cluster_role(r: &ClusterRole) -> Value {
    Fields::new()
        .message("metadata", &r.metadata, object_meta)
        .messages("rules", &r.rules, policy_rule)
        .message("aggregationRule", &r.aggregation_rule, aggregation_rule)
        .build()
}

fn aggregation_rule(a: &AggregationRule) -> Value {
    Fields::new()
        .messages("clusterRoleSelectors", &a.cluster_role_selectors, label_selector)
        .build()
}

fn policy_rule(r: &PolicyRule) -> Value {
    Fields::new()
        .list("verbs", &r.verbs)
        .list("apiGroups", &r.api_groups)
        .list("resources", &r.resources)
        .list("resourceNames", &r.resource_names)
        .list("nonResourceURLs", &r.non_resource_ur_ls)
        .build()
}

pub(super) fn role_binding(b: &RoleBinding) -> Value {
    Fields::new()
        .message("metadata", &b.metadata, object_meta)
        .messages("subjects", &b.subjects, subject)
        .message("roleRef", &b.role_ref, role_ref)
        .build()
}

pub(super) fn cluster_role_binding(b: &ClusterRoleBinding) -> Value {
    Fields::new()
        .message("metadata", &b.metadata, object_meta)
        .messages("subjects", &b.subjects, subject)
        .message("roleRef", &b.role_ref, role_ref)
        .build()
}

fn subject(s: &Subject) -> Value {
    Fields::new()
        .str("kind", &s.kind)
        .str("apiGroup", &s.api_group)
        .str("name", &s.name)
        .str("namespace", &s.namespace)
        .build()
}

fn role_ref(r: &RoleRef) -> Value {
    Fields::new()
        .str("apiGroup", &r.api_group)
        .str("kind", &r.kind)
        .str("name", &r.name)
        .build()
}
