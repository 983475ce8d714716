//! Core (`v1`) kinds other than Pod: ConfigMap, Secret, Namespace,
//! ServiceAccount, Service, ResourceQuota. Status is not converted (kubectl
//! sends it empty).

use k8s_pb::api::core::v1::{
    ClientIpConfig, ConfigMap, Namespace, NamespaceSpec, ObjectReference, ResourceQuota, ResourceQuotaSpec,
    ScopeSelector, ScopedResourceSelectorRequirement, Secret, Service, ServiceAccount, ServicePort,
    ServiceSpec, SessionAffinityConfig,
};
use serde_json::Value;

use super::json::Fields;
use super::meta::object_meta;
use super::pod::local_object_reference;

pub(super) fn config_map(c: &ConfigMap) -> Value {
    Fields::new()
        .message("metadata", &c.metadata, object_meta)
        .opt("immutable", c.immutable)
        .string_map("data", &c.data)
        .bytes_map("binaryData", &c.binary_data)
        .build()
}

pub(super) fn secret(s: &Secret) -> Value {
    Fields::new()
        .message("metadata", &s.metadata, object_meta)
        .opt("immutable", s.immutable)
        .bytes_map("data", &s.data)
        .string_map("stringData", &s.string_data)
        .str("type", &s.r#type)
        .build()
}

pub(super) fn namespace(n: &Namespace) -> Value {
    Fields::new()
        .message("metadata", &n.metadata, object_meta)
        .message("spec", &n.spec, namespace_spec)
        .build()
}

fn namespace_spec(s: &NamespaceSpec) -> Value {
    Fields::new().list("finalizers", &s.finalizers).build()
}

pub(super) fn service_account(a: &ServiceAccount) -> Value {
    Fields::new()
        .message("metadata", &a.metadata, object_meta)
        .messages("secrets", &a.secrets, object_reference)
        .messages("imagePullSecrets", &a.image_pull_secrets, local_object_reference)
        .opt("automountServiceAccountToken", a.automount_service_account_token)
        .build()
}

fn object_reference(r: &ObjectReference) -> Value {
    Fields::new()
        .str("kind", &r.kind)
        .str("namespace", &r.namespace)
        .str("name", &r.name)
        .str("uid", &r.uid)
        .str("apiVersion", &r.api_version)
        .str("resourceVersion", &r.resource_version)
        .str("fieldPath", &r.field_path)
        .build()
}

pub(super) fn service(s: &Service) -> Value {
    Fields::new()
        .message("metadata", &s.metadata, object_meta)
        .message("spec", &s.spec, service_spec)
        .build()
}

fn service_spec(s: &ServiceSpec) -> Value {
    Fields::new()
        .messages("ports", &s.ports, service_port)
        .string_map("selector", &s.selector)
        .str("clusterIP", &s.cluster_ip)
        .list("clusterIPs", &s.cluster_ips)
        .str("type", &s.r#type)
        .list("externalIPs", &s.external_ips)
        .str("sessionAffinity", &s.session_affinity)
        .str("loadBalancerIP", &s.load_balancer_ip)
        .list("loadBalancerSourceRanges", &s.load_balancer_source_ranges)
        .str("externalName", &s.external_name)
        .str("externalTrafficPolicy", &s.external_traffic_policy)
        .nonzero("healthCheckNodePort", s.health_check_node_port)
        .nonzero("publishNotReadyAddresses", s.publish_not_ready_addresses)
        .message(
            "sessionAffinityConfig",
            &s.session_affinity_config,
            session_affinity_config,
        )
        .list("ipFamilies", &s.ip_families)
        .str("ipFamilyPolicy", &s.ip_family_policy)
        .opt(
            "allocateLoadBalancerNodePorts",
            s.allocate_load_balancer_node_ports,
        )
        .str("loadBalancerClass", &s.load_balancer_class)
        .str("internalTrafficPolicy", &s.internal_traffic_policy)
        .str("trafficDistribution", &s.traffic_distribution)
        .build()
}

fn service_port(p: &ServicePort) -> Value {
    Fields::new()
        .str("name", &p.name)
        .str("protocol", &p.protocol)
        .str("appProtocol", &p.app_protocol)
        .opt("port", p.port)
        .int_or_string("targetPort", &p.target_port)
        .nonzero("nodePort", p.node_port)
        .build()
}

fn session_affinity_config(c: &SessionAffinityConfig) -> Value {
    Fields::new()
        .message("clientIP", &c.client_ip, client_ip_config)
        .build()
}

fn client_ip_config(c: &ClientIpConfig) -> Value {
    Fields::new().opt("timeoutSeconds", c.timeout_seconds).build()
}

pub(super) fn resource_quota(q: &ResourceQuota) -> Value {
    Fields::new()
        .message("metadata", &q.metadata, object_meta)
        .message("spec", &q.spec, resource_quota_spec)
        .build()
}

fn resource_quota_spec(s: &ResourceQuotaSpec) -> Value {
    Fields::new()
        .quantities("hard", &s.hard)
        .list("scopes", &s.scopes)
        .message("scopeSelector", &s.scope_selector, scope_selector)
        .build()
}

fn scope_selector(s: &ScopeSelector) -> Value {
    Fields::new()
        .messages(
            "matchExpressions",
            &s.match_expressions,
            scoped_resource_selector_requirement,
        )
        .build()
}

fn scoped_resource_selector_requirement(r: &ScopedResourceSelectorRequirement) -> Value {
    Fields::new()
        .str("scopeName", &r.scope_name)
        .str("operator", &r.operator)
        .list("values", &r.values)
        .build()
}
