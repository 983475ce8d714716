//! Disruption and scheduling policy: policy/v1 PodDisruptionBudget and
//! Eviction, scheduling.k8s.io/v1 PriorityClass.

use k8s_pb::api::policy::v1::{Eviction, PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_pb::api::scheduling::v1::PriorityClass;
use serde_json::Value;

use super::json::Fields;
use super::meta::{delete_options, label_selector, object_meta};

pub(super) fn pod_disruption_budget(p: &PodDisruptionBudget) -> Value {
    Fields::new()
        .message("metadata", &p.metadata, object_meta)
        .message("spec", &p.spec, pod_disruption_budget_spec)
        .build()
}

fn pod_disruption_budget_spec(s: &PodDisruptionBudgetSpec) -> Value {
    Fields::new()
        .int_or_string("minAvailable", &s.min_available)
        .message("selector", &s.selector, label_selector)
        .int_or_string("maxUnavailable", &s.max_unavailable)
        .str("unhealthyPodEvictionPolicy", &s.unhealthy_pod_eviction_policy)
        .build()
}

pub(super) fn eviction(e: &Eviction) -> Value {
    Fields::new()
        .message("metadata", &e.metadata, object_meta)
        .message("deleteOptions", &e.delete_options, delete_options)
        .build()
}

pub(super) fn priority_class(p: &PriorityClass) -> Value {
    Fields::new()
        .message("metadata", &p.metadata, object_meta)
        .opt("value", p.value)
        .nonzero("globalDefault", p.global_default)
        .str("description", &p.description)
        .str("preemptionPolicy", &p.preemption_policy)
        .build()
}
