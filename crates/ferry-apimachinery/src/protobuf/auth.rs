//! authentication.k8s.io/v1 (TokenRequest, TokenReview, SelfSubjectReview)
//! and authorization.k8s.io/v1 (SelfSubjectAccessReview,
//! SelfSubjectRulesReview, SubjectAccessReview, LocalSubjectAccessReview).
//! These are requests to the hub, so only their specs are converted.

use k8s_pb::api::authentication::v1::{
    BoundObjectReference, SelfSubjectReview, TokenRequest, TokenRequestSpec, TokenReview, TokenReviewSpec,
};
use k8s_pb::api::authorization::v1::{
    ExtraValue, FieldSelectorAttributes, LabelSelectorAttributes, LocalSubjectAccessReview,
    NonResourceAttributes, ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
    SelfSubjectRulesReview, SelfSubjectRulesReviewSpec, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_pb::apimachinery::pkg::apis::meta::v1::FieldSelectorRequirement;
use serde_json::Value;

use super::json::Fields;
use super::meta::{label_selector_requirement, object_meta};

pub(super) fn token_request(t: &TokenRequest) -> Value {
    Fields::new()
        .message("metadata", &t.metadata, object_meta)
        .message("spec", &t.spec, token_request_spec)
        .build()
}

fn token_request_spec(s: &TokenRequestSpec) -> Value {
    Fields::new()
        .list("audiences", &s.audiences)
        .opt("expirationSeconds", s.expiration_seconds)
        .message("boundObjectRef", &s.bound_object_ref, bound_object_reference)
        .build()
}

fn bound_object_reference(r: &BoundObjectReference) -> Value {
    Fields::new()
        .str("kind", &r.kind)
        .str("apiVersion", &r.api_version)
        .str("name", &r.name)
        .str("uid", &r.u_id)
        .build()
}

pub(super) fn token_review(t: &TokenReview) -> Value {
    Fields::new()
        .message("metadata", &t.metadata, object_meta)
        .message("spec", &t.spec, token_review_spec)
        .build()
}

fn token_review_spec(s: &TokenReviewSpec) -> Value {
    Fields::new()
        .str("token", &s.token)
        .list("audiences", &s.audiences)
        .build()
}

pub(super) fn self_subject_review(r: &SelfSubjectReview) -> Value {
    Fields::new()
        .message("metadata", &r.metadata, object_meta)
        .build()
}

pub(super) fn self_subject_access_review(r: &SelfSubjectAccessReview) -> Value {
    Fields::new()
        .message("metadata", &r.metadata, object_meta)
        .message("spec", &r.spec, self_subject_access_review_spec)
        .build()
}

fn self_subject_access_review_spec(s: &SelfSubjectAccessReviewSpec) -> Value {
    Fields::new()
        .message("resourceAttributes", &s.resource_attributes, resource_attributes)
        .message(
            "nonResourceAttributes",
            &s.non_resource_attributes,
            non_resource_attributes,
        )
        .build()
}

pub(super) fn subject_access_review(r: &SubjectAccessReview) -> Value {
    Fields::new()
        .message("metadata", &r.metadata, object_meta)
        .message("spec", &r.spec, subject_access_review_spec)
        .build()
}

pub(super) fn local_subject_access_review(r: &LocalSubjectAccessReview) -> Value {
    Fields::new()
        .message("metadata", &r.metadata, object_meta)
        .message("spec", &r.spec, subject_access_review_spec)
        .build()
}

fn subject_access_review_spec(s: &SubjectAccessReviewSpec) -> Value {
    Fields::new()
        .message("resourceAttributes", &s.resource_attributes, resource_attributes)
        .message(
            "nonResourceAttributes",
            &s.non_resource_attributes,
            non_resource_attributes,
        )
        .str("user", &s.user)
        .list("groups", &s.groups)
        .map("extra", &s.extra, extra_value)
        .str("uid", &s.uid)
        .build()
}

fn resource_attributes(a: &ResourceAttributes) -> Value {
    Fields::new()
        .str("namespace", &a.namespace)
        .str("verb", &a.verb)
        .str("group", &a.group)
        .str("version", &a.version)
        .str("resource", &a.resource)
        .str("subresource", &a.subresource)
        .str("name", &a.name)
        .message("fieldSelector", &a.field_selector, field_selector_attributes)
        .message("labelSelector", &a.label_selector, label_selector_attributes)
        .build()
}

fn field_selector_attributes(a: &FieldSelectorAttributes) -> Value {
    Fields::new()
        .str("rawSelector", &a.raw_selector)
        .messages("requirements", &a.requirements, field_selector_requirement)
        .build()
}

fn field_selector_requirement(r: &FieldSelectorRequirement) -> Value {
    Fields::new()
        .str("key", &r.key)
        .str("operator", &r.operator)
        .list("values", &r.values)
        .build()
}

fn label_selector_attributes(a: &LabelSelectorAttributes) -> Value {
    Fields::new()
        .str("rawSelector", &a.raw_selector)
        .messages("requirements", &a.requirements, label_selector_requirement)
        .build()
}

fn non_resource_attributes(a: &NonResourceAttributes) -> Value {
    Fields::new().str("path", &a.path).str("verb", &a.verb).build()
}

pub(super) fn self_subject_rules_review(r: &SelfSubjectRulesReview) -> Value {
    Fields::new()
        .message("metadata", &r.metadata, object_meta)
        .message("spec", &r.spec, self_subject_rules_review_spec)
        .build()
}

fn self_subject_rules_review_spec(s: &SelfSubjectRulesReviewSpec) -> Value {
    Fields::new().str("namespace", &s.namespace).build()
}

/// `map[string]ExtraValue`, where ExtraValue is a `[]string`.
fn extra_value(v: &ExtraValue) -> Value {
    Value::from(v.items.clone())
}
