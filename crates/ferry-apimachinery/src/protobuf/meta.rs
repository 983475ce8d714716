//! meta.k8s.io/v1 types embedded everywhere: ObjectMeta, LabelSelector,
//! DeleteOptions.

use k8s_pb::apimachinery::pkg::apis::meta::v1::{
    DeleteOptions, LabelSelector, LabelSelectorRequirement, ManagedFieldsEntry, ObjectMeta, OwnerReference,
    Preconditions,
};
use serde_json::Value;

use super::json::Fields;

pub(super) fn object_meta(m: &ObjectMeta) -> Value {
    Fields::new()
        .str("name", &m.name)
        .str("generateName", &m.generate_name)
        .str("namespace", &m.namespace)
        .str("selfLink", &m.self_link)
        .str("uid", &m.uid)
        .str("resourceVersion", &m.resource_version)
        .nonzero("generation", m.generation)
        .time("creationTimestamp", &m.creation_timestamp)
        .time("deletionTimestamp", &m.deletion_timestamp)
        .opt("deletionGracePeriodSeconds", m.deletion_grace_period_seconds)
        .string_map("labels", &m.labels)
        .string_map("annotations", &m.annotations)
        .messages("ownerReferences", &m.owner_references, owner_reference)
        .list("finalizers", &m.finalizers)
        .messages("managedFields", &m.managed_fields, managed_fields_entry)
        .build()
}

fn owner_reference(r: &OwnerReference) -> Value {
    Fields::new()
        .str("apiVersion", &r.api_version)
        .str("kind", &r.kind)
        .str("name", &r.name)
        .str("uid", &r.uid)
        .opt("controller", r.controller)
        .opt("blockOwnerDeletion", r.block_owner_deletion)
        .build()
}

fn managed_fields_entry(e: &ManagedFieldsEntry) -> Value {
    // FieldsV1 carries its JSON verbatim; an unparsable one is dropped.
    let fields_v1 = e
        .fields_v1
        .as_ref()
        .and_then(|f| f.raw.as_deref())
        .and_then(|raw| serde_json::from_slice::<Value>(raw).ok());
    Fields::new()
        .str("manager", &e.manager)
        .str("operation", &e.operation)
        .str("apiVersion", &e.api_version)
        .time("time", &e.time)
        .str("fieldsType", &e.fields_type)
        .opt("fieldsV1", fields_v1)
        .str("subresource", &e.subresource)
        .build()
}

pub(super) fn label_selector(s: &LabelSelector) -> Value {
    Fields::new()
        .string_map("matchLabels", &s.match_labels)
        .messages(
            "matchExpressions",
            &s.match_expressions,
            label_selector_requirement,
        )
        .build()
}

pub(super) fn label_selector_requirement(r: &LabelSelectorRequirement) -> Value {
    Fields::new()
        .str("key", &r.key)
        .str("operator", &r.operator)
        .list("values", &r.values)
        .build()
}

pub(super) fn delete_options(o: &DeleteOptions) -> Value {
    Fields::new()
        .opt("gracePeriodSeconds", o.grace_period_seconds)
        .message("preconditions", &o.preconditions, preconditions)
        .opt("orphanDependents", o.orphan_dependents)
        .str("propagationPolicy", &o.propagation_policy)
        .list("dryRun", &o.dry_run)
        .opt(
            "ignoreStoreReadErrorWithClusterBreakingPotential",
            o.ignore_store_read_error_with_cluster_breaking_potential,
        )
        .build()
}

fn preconditions(p: &Preconditions) -> Value {
    Fields::new()
        .str("uid", &p.uid)
        .str("resourceVersion", &p.resource_version)
        .build()
}
