//! certificates.k8s.io/v1 CertificateSigningRequest, including its status:
//! `kubectl certificate approve|deny` sends the whole object with a new
//! condition to the `/approval` subresource.

use k8s_pb::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition, CertificateSigningRequestSpec,
    CertificateSigningRequestStatus, ExtraValue,
};
use serde_json::Value;

use super::json::Fields;
use super::meta::object_meta;

pub(super) fn certificate_signing_request(c: &CertificateSigningRequest) -> Value {
    Fields::new()
        .message("metadata", &c.metadata, object_meta)
        .message("spec", &c.spec, certificate_signing_request_spec)
        .message("status", &c.status, certificate_signing_request_status)
        .build()
}

fn certificate_signing_request_spec(s: &CertificateSigningRequestSpec) -> Value {
    Fields::new()
        .bytes("request", &s.request)
        .str("signerName", &s.signer_name)
        .opt("expirationSeconds", s.expiration_seconds)
        .list("usages", &s.usages)
        .str("username", &s.username)
        .str("uid", &s.uid)
        .list("groups", &s.groups)
        .map("extra", &s.extra, extra_value)
        .build()
}

/// `map[string]ExtraValue`, where ExtraValue is a `[]string`.
fn extra_value(v: &ExtraValue) -> Value {
    Value::from(v.items.clone())
}

fn certificate_signing_request_status(s: &CertificateSigningRequestStatus) -> Value {
    Fields::new()
        .messages("conditions", &s.conditions, certificate_signing_request_condition)
        .bytes("certificate", &s.certificate)
        .build()
}

fn certificate_signing_request_condition(c: &CertificateSigningRequestCondition) -> Value {
    Fields::new()
        .str("type", &c.r#type)
        .str("status", &c.status)
        .str("reason", &c.reason)
        .str("message", &c.message)
        .time("lastUpdateTime", &c.last_update_time)
        .time("lastTransitionTime", &c.last_transition_time)
        .build()
}
