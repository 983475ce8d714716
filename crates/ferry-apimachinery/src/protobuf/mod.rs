//! Decoding Kubernetes protobuf request bodies into JSON objects.
//!
//! kubectl's typed commands (`kubectl create configmap|deployment|...`,
//! `create token`, `auth can-i`, `certificate approve`) send their bodies as
//! `application/vnd.kubernetes.protobuf` and client-go does not retry in JSON
//! after a 415, so the hub turns those bodies into the JSON object a JSON
//! client would have sent and stores that.
//!
//! The wire format is the magic prefix `k8s\0` followed by a
//! `runtime.Unknown` envelope whose `typeMeta` names the apiVersion and kind
//! and whose `raw` bytes are the typed message. The messages come from
//! `k8s-pb` (prost, no reflection), so each supported kind has a hand-written
//! converter, one function per message type, field names and `omitempty`
//! behaviour as in Kubernetes' Go types.
//!
//! Not converted: the `status` of every kind except CertificateSigningRequest
//! (kubectl's typed commands send it empty), plus the rarely used
//! fields listed in each module's documentation. Kinds outside [`decode`]'s
//! table are rejected with [`ProtobufError::UnsupportedKind`].

mod auth;
mod certificates;
mod coordination;
mod core_v1;
mod json;
mod meta;
mod networking;
mod pod;
mod policy;
mod rbac;
mod workloads;

#[cfg(test)]
mod tests;

use k8s_pb::apimachinery::pkg::runtime::Unknown;
use prost::Message;
use serde_json::{Map, Value};

/// The media type of Kubernetes protobuf bodies.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Every Kubernetes protobuf body starts with these four bytes (`"k8s\0"`).
const MAGIC: &[u8] = b"k8s\0";

/// Why a protobuf body could not be turned into JSON.
#[derive(Debug, thiserror::Error)]
pub enum ProtobufError {
    /// The body does not start with the `k8s\0` prefix.
    #[error("the request body is not a Kubernetes protobuf message (it does not start with \"k8s\\0\")")]
    MissingMagic,
    /// The `runtime.Unknown` envelope after the prefix is malformed.
    #[error("the Kubernetes protobuf envelope (runtime.Unknown) is malformed: {0}")]
    Envelope(#[source] prost::DecodeError),
    /// The envelope does not say which apiVersion and kind it carries.
    #[error("the Kubernetes protobuf envelope does not name the object's apiVersion and kind")]
    MissingTypeMeta,
    /// The envelope's payload is compressed or not protobuf.
    #[error(
        "the Kubernetes protobuf envelope holds {api_version} {kind} with content encoding {encoding:?} \
         and content type {content_type:?}; only uncompressed protobuf is supported"
    )]
    UnsupportedPayload {
        api_version: String,
        kind: String,
        encoding: String,
        content_type: String,
    },
    /// The hub has no converter for this kind.
    #[error(
        "the hub cannot decode {kind} ({api_version}) sent as protobuf; send it as JSON or YAML instead, \
         e.g. `kubectl create -f file.yaml` / `kubectl apply -f`"
    )]
    UnsupportedKind { api_version: String, kind: String },
    /// The typed message inside the envelope is malformed.
    #[error("the protobuf body of {kind} ({api_version}) is malformed: {source}")]
    Message {
        api_version: String,
        kind: String,
        #[source]
        source: prost::DecodeError,
    },
}

/// Decode a Kubernetes protobuf request body (the `k8s\0` magic plus a
/// `runtime.Unknown` envelope, whose typeMeta names apiVersion/kind and whose
/// raw bytes are the typed message) into the JSON object a JSON client would
/// send, with `apiVersion` and `kind` set.
pub fn decode(body: &[u8]) -> Result<Value, ProtobufError> {
    let envelope = body.strip_prefix(MAGIC).ok_or(ProtobufError::MissingMagic)?;
    let unknown = Unknown::decode(envelope).map_err(ProtobufError::Envelope)?;
    let type_meta = unknown.type_meta.unwrap_or_default();
    let api_version = type_meta.api_version.unwrap_or_default();
    let kind = type_meta.kind.unwrap_or_default();
    if api_version.is_empty() || kind.is_empty() {
        return Err(ProtobufError::MissingTypeMeta);
    }
    let encoding = unknown.content_encoding.unwrap_or_default();
    let content_type = unknown.content_type.unwrap_or_default();
    if !encoding.is_empty() || !(content_type.is_empty() || content_type == CONTENT_TYPE) {
        return Err(ProtobufError::UnsupportedPayload {
            api_version,
            kind,
            encoding,
            content_type,
        });
    }
    let raw = unknown.raw.unwrap_or_default();
    let fields = match convert(&api_version, &kind, &raw) {
        None => return Err(ProtobufError::UnsupportedKind { api_version, kind }),
        Some(Err(source)) => {
            return Err(ProtobufError::Message {
                api_version,
                kind,
                source,
            })
        }
        Some(Ok(Value::Object(fields))) => fields,
        Some(Ok(_)) => unreachable!("converters build objects"),
    };
    let mut object = Map::with_capacity(fields.len() + 2);
    object.insert("apiVersion".into(), Value::String(api_version));
    object.insert("kind".into(), Value::String(kind));
    object.extend(fields);
    Ok(Value::Object(object))
}

/// Decode `raw` as the message for `api_version`/`kind` and convert it, or
/// `None` when the kind has no converter.
fn convert(api_version: &str, kind: &str, raw: &[u8]) -> Option<Result<Value, prost::DecodeError>> {
    Some(match (api_version, kind) {
        ("v1", "ConfigMap") => typed(raw, core_v1::config_map),
        ("v1", "Secret") => typed(raw, core_v1::secret),
        ("v1", "Namespace") => typed(raw, core_v1::namespace),
        ("v1", "ServiceAccount") => typed(raw, core_v1::service_account),
        ("v1", "Service") => typed(raw, core_v1::service),
        ("v1", "ResourceQuota") => typed(raw, core_v1::resource_quota),
        ("v1", "Pod") => typed(raw, pod::pod),
        ("apps/v1", "Deployment") => typed(raw, workloads::deployment),
        ("batch/v1", "Job") => typed(raw, workloads::job),
        ("batch/v1", "CronJob") => typed(raw, workloads::cron_job),
        ("autoscaling/v1", "HorizontalPodAutoscaler") => typed(raw, workloads::horizontal_pod_autoscaler),
        ("rbac.authorization.k8s.io/v1", "Role") => typed(raw, rbac::role),
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => typed(raw, rbac::cluster_role),
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => typed(raw, rbac::role_binding),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => typed(raw, rbac::cluster_role_binding),
        ("networking.k8s.io/v1", "Ingress") => typed(raw, networking::ingress),
        ("policy/v1", "PodDisruptionBudget") => typed(raw, policy::pod_disruption_budget),
        // policy/v1beta1 Eviction has the same fields and field numbers as v1.
        ("policy/v1" | "policy/v1beta1", "Eviction") => typed(raw, policy::eviction),
        ("scheduling.k8s.io/v1", "PriorityClass") => typed(raw, policy::priority_class),
        ("coordination.k8s.io/v1", "Lease") => typed(raw, coordination::lease),
        ("authentication.k8s.io/v1", "TokenRequest") => typed(raw, auth::token_request),
        ("authentication.k8s.io/v1", "TokenReview") => typed(raw, auth::token_review),
        ("authentication.k8s.io/v1", "SelfSubjectReview") => typed(raw, auth::self_subject_review),
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => {
            typed(raw, auth::self_subject_access_review)
        }
        ("authorization.k8s.io/v1", "SelfSubjectRulesReview") => typed(raw, auth::self_subject_rules_review),
        ("authorization.k8s.io/v1", "SubjectAccessReview") => typed(raw, auth::subject_access_review),
        ("authorization.k8s.io/v1", "LocalSubjectAccessReview") => {
            typed(raw, auth::local_subject_access_review)
        }
        ("certificates.k8s.io/v1", "CertificateSigningRequest") => {
            typed(raw, certificates::certificate_signing_request)
        }
        // client-go sends DeleteOptions under the version of the resource
        // being deleted (`v1`, `apps/v1`, ...) or `meta.k8s.io/v1`.
        (_, "DeleteOptions") => typed(raw, meta::delete_options),
        _ => return None,
    })
}

fn typed<M: Message + Default>(raw: &[u8], convert: fn(&M) -> Value) -> Result<Value, prost::DecodeError> {
    Ok(convert(&M::decode(raw)?))
}
