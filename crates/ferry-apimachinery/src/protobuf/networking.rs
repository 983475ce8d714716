//! networking.k8s.io/v1 Ingress. Status is not converted.

use k8s_pb::api::core::v1::TypedLocalObjectReference;
use k8s_pb::api::networking::v1::{
    HttpIngressPath, HttpIngressRuleValue, Ingress, IngressBackend, IngressRule, IngressRuleValue,
    IngressServiceBackend, IngressSpec, IngressTls, ServiceBackendPort,
};
use serde_json::Value;

use super::json::Fields;
use super::meta::object_meta;

pub(super) fn ingress(i: &Ingress) -> Value {
    Fields::new()
        .message("metadata", &i.metadata, object_meta)
        .message("spec", &i.spec, ingress_spec)
        .build()
}

fn ingress_spec(s: &IngressSpec) -> Value {
    Fields::new()
        .str("ingressClassName", &s.ingress_class_name)
        .message("defaultBackend", &s.default_backend, ingress_backend)
        .messages("tls", &s.tls, ingress_tls)
        .messages("rules", &s.rules, ingress_rule)
        .build()
}

fn ingress_backend(b: &IngressBackend) -> Value {
    Fields::new()
        .message("service", &b.service, ingress_service_backend)
        .message("resource", &b.resource, typed_local_object_reference)
        .build()
}

fn ingress_service_backend(b: &IngressServiceBackend) -> Value {
    Fields::new()
        .str("name", &b.name)
        .message("port", &b.port, service_backend_port)
        .build()
}

fn service_backend_port(p: &ServiceBackendPort) -> Value {
    Fields::new()
        .str("name", &p.name)
        .nonzero("number", p.number)
        .build()
}

fn typed_local_object_reference(r: &TypedLocalObjectReference) -> Value {
    Fields::new()
        .str("apiGroup", &r.api_group)
        .str("kind", &r.kind)
        .str("name", &r.name)
        .build()
}

fn ingress_tls(t: &IngressTls) -> Value {
    Fields::new()
        .list("hosts", &t.hosts)
        .str("secretName", &t.secret_name)
        .build()
}

fn ingress_rule(r: &IngressRule) -> Value {
    Fields::new()
        .str("host", &r.host)
        .inline(&r.ingress_rule_value, ingress_rule_value)
        .build()
}

fn ingress_rule_value(v: &IngressRuleValue) -> Value {
    Fields::new()
        .message("http", &v.http, http_ingress_rule_value)
        .build()
}

fn http_ingress_rule_value(v: &HttpIngressRuleValue) -> Value {
    Fields::new()
        .messages("paths", &v.paths, http_ingress_path)
        .build()
}

fn http_ingress_path(p: &HttpIngressPath) -> Value {
    Fields::new()
        .str("path", &p.path)
        .str("pathType", &p.path_type)
        .message("backend", &p.backend, ingress_backend)
        .build()
}
