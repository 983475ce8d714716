//! Services: kube-apiserver's `SetDefaults_Service` and its allocators —
//! a `clusterIP` from the service range (`--service-cluster-ip-range`) and a
//! `nodePort` from the node-port range (`--service-node-port-range`) — and
//! the validation users hit (ports, immutable `clusterIP`).
//!
//! What is allocated is recorded only in the stored Services: an address or
//! port is free when no live Service in the workspace holds it, so a
//! restart, a delete or a failed write needs no bookkeeping.

use std::collections::HashSet;
use std::net::Ipv4Addr;

use serde_json::{json, Map, Value};

use crate::request::Request;
pub use crate::service_ranges::ServiceRanges;
use crate::service_ranges::{allocate_ip, allocate_port};
use crate::status::{ApiError, Cause};
use crate::strategy::core::pod_spec::{default_field, object_at};
use crate::strategy::workload::immutable;
use crate::strategy::Strategy;
use crate::validation::{invalid_value, render_value};

/// The `kubernetes` Service's cluster IP: the first address of kubeadm's
/// default service range (`10.96.0.0/12`), as kube-apiserver takes the first
/// of its range. Never allocated to another Service.
pub const KUBERNETES_CLUSTER_IP: &str = "10.96.0.1";

pub struct ServiceStrategy;

/// Defaults that need nothing but the object.
pub fn default_service(spec: &mut Map<String, Value>) {
    default_field(spec, "type", json!("ClusterIP"));
    let ty = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    default_field(spec, "sessionAffinity", json!("None"));
    if ty != "ExternalName" {
        default_field(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if matches!(ty.as_str(), "NodePort" | "LoadBalancer") {
        default_field(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if ty == "LoadBalancer" {
        default_field(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            default_field(p, "protocol", json!("TCP"));
            if let Some(port) = p.get("port").cloned() {
                default_field(p, "targetPort", port);
            }
        }
    }
}

fn cluster_ip(spec: &Map<String, Value>) -> Option<String> {
    spec.get("clusterIP")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(String::from)
}

/// The cluster IPs and node ports live Services in the workspace hold,
/// except the one being written.
fn taken(r: &Request, except: &str) -> (HashSet<String>, HashSet<u16>) {
    let mut ips = HashSet::new();
    let mut ports = HashSet::new();
    let Some(cluster) = &r.cluster else {
        return (ips, ports);
    };
    let scope = crate::storage::ClusterScope::One(cluster.name.clone());
    let (objects, _) = r.hub.store.list(&scope, &r.info.storage_key(), None, None);
    for (key, o) in objects {
        if format!("{}/{}", key.namespace, key.name) == except {
            continue;
        }
        let v = o.value();
        if let Some(ip) = v.pointer("/spec/clusterIP").and_then(Value::as_str) {
            ips.insert(ip.to_string());
        }
        for p in v
            .pointer("/spec/ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(n) = p.get("nodePort").and_then(Value::as_u64) {
                ports.insert(n as u16);
            }
        }
    }
    if except != "default/kubernetes" {
        ips.insert(KUBERNETES_CLUSTER_IP.to_string());
    }
    (ips, ports)
}

fn invalid(r: &Request, obj: &Value, field: &str, value: &Value, detail: &str) -> ApiError {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    ApiError::invalid(
        &r.info.group,
        &r.info.kind,
        name,
        vec![Cause::invalid(field, invalid_value(value, detail))],
    )
}

/// Fill in what a Service's type needs from the allocators: a cluster IP
/// (unless `None` or ExternalName), node ports (NodePort, LoadBalancer).
fn allocate(r: &Request, obj: &mut Value) -> Result<(), ApiError> {
    let ranges = r.hub.config.service_ranges.clone();
    let key = format!(
        "{}/{}",
        obj.pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default(),
        obj.pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
    );
    let (ips, ports) = taken(r, &key);
    let snapshot = obj.clone();
    let Some(spec) = object_at(obj, &["spec"]) else {
        return Ok(());
    };
    let ty = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
        .to_string();
    if ty != "ExternalName" {
        match cluster_ip(spec) {
            Some(ip) if ip == "None" => {
                default_field(spec, "clusterIPs", json!(["None"]));
            }
            Some(ip) => {
                let parsed: Option<Ipv4Addr> = ip.parse().ok();
                let value = Value::String(ip.clone());
                match parsed {
                    None => {
                        return Err(invalid(r, &snapshot, "spec.clusterIPs[0]", &value, "must be a valid IP address"))
                    }
                    Some(a) if !ranges.contains_ip(a) => {
                        return Err(invalid(
                            r,
                            &snapshot,
                            "spec.clusterIPs",
                            &json!([ip]),
                            &format!(
                                "failed to allocate IP {ip}: the provided IP ({ip}) is not in the valid range. The range of valid IPs is {}",
                                ranges.cidr()
                            ),
                        ))
                    }
                    Some(_) if ips.contains(&ip) => {
                        return Err(invalid(
                            r,
                            &snapshot,
                            "spec.clusterIPs",
                            &json!([ip]),
                            &format!("failed to allocate IP {ip}: provided IP is already allocated"),
                        ))
                    }
                    Some(_) => {}
                }
                spec.insert("clusterIPs".into(), json!([ip]));
            }
            None => {
                let ip = allocate_ip(&ranges, &ips).ok_or_else(|| {
                    ApiError::internal(format!(
                        "failed to allocate a serviceIP: range {} is full",
                        ranges.cidr()
                    ))
                })?;
                spec.insert("clusterIP".into(), json!(ip));
                spec.insert("clusterIPs".into(), json!([ip]));
            }
        }
        default_field(spec, "ipFamilies", json!(["IPv4"]));
        default_field(spec, "ipFamilyPolicy", json!("SingleStack"));
    }
    if matches!(ty.as_str(), "NodePort" | "LoadBalancer") {
        let mut ports_taken = ports;
        if let Some(list) = spec.get_mut("ports").and_then(Value::as_array_mut) {
            for (i, p) in list.iter_mut().enumerate() {
                let Some(p) = p.as_object_mut() else { continue };
                match p.get("nodePort").and_then(Value::as_i64).filter(|n| *n != 0) {
                    Some(n) => {
                        let in_range = u16::try_from(n).is_ok_and(|n| ranges.node_ports.contains(&n));
                        let field = format!("spec.ports[{i}].nodePort");
                        if !in_range {
                            let (a, b) = (ranges.node_ports.start(), ranges.node_ports.end());
                            return Err(invalid(
                                r,
                                &snapshot,
                                &field,
                                &json!(n),
                                &format!("provided port is not in the valid range. The range of valid ports is {a}-{b}"),
                            ));
                        }
                        if !ports_taken.insert(n as u16) {
                            return Err(invalid(
                                r,
                                &snapshot,
                                &field,
                                &json!(n),
                                "provided port is already allocated",
                            ));
                        }
                    }
                    None => {
                        let n = allocate_port(&ranges, &ports_taken).ok_or_else(|| {
                            ApiError::internal("failed to allocate a nodePort: the range is full".to_string())
                        })?;
                        ports_taken.insert(n);
                        p.insert("nodePort".into(), json!(n));
                    }
                }
            }
        }
    }
    Ok(())
}

/// On update, what the client left out keeps its allocated value (a PUT of
/// a manifest without `clusterIP` does not ask for a new address).
fn keep_allocated(old: &Value, obj: &mut Value) {
    let Some(spec) = object_at(obj, &["spec"]) else {
        return;
    };
    for f in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
        if spec.get(f).is_none_or(|v| v.is_null() || v == "") {
            if let Some(v) = old.pointer(&format!("/spec/{f}")) {
                spec.insert(f.into(), v.clone());
            }
        }
    }
    let same_type = spec.get("type") == old.pointer("/spec/type");
    let old_ports = old
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if let (true, Some(list)) = (same_type, spec.get_mut("ports").and_then(Value::as_array_mut)) {
        for p in list.iter_mut().filter_map(Value::as_object_mut) {
            if p.get("nodePort").is_some_and(|n| !n.is_null()) {
                continue;
            }
            let found = old_ports
                .iter()
                .find(|o| o.get("port") == p.get("port") && o.get("protocol") == p.get("protocol"));
            if let Some(n) = found.and_then(|o| o.get("nodePort")) {
                p.insert("nodePort".into(), n.clone());
            }
        }
    }
}

fn validate_service(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = obj.get("spec");
    let ty = spec
        .and_then(|s| s.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP");
    if !matches!(ty, "ClusterIP" | "NodePort" | "LoadBalancer" | "ExternalName") {
        causes.push(Cause::unsupported(
            "spec.type",
            format!(
                "Unsupported value: {}: supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\"",
                render_value(&json!(ty))
            ),
        ));
    }
    let ports = spec.and_then(|s| s.get("ports")).and_then(Value::as_array);
    if ty != "ExternalName" && ports.is_none_or(Vec::is_empty) {
        causes.push(Cause::required("spec.ports"));
    }
    let many = ports.is_some_and(|p| p.len() > 1);
    for (i, p) in ports.into_iter().flatten().enumerate() {
        let at = format!("spec.ports[{i}]");
        match p.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) {
            None if many => causes.push(Cause::required(format!("{at}.name"))),
            Some(name) => {
                crate::strategy::core::pod_spec::check_dns_label(name, format!("{at}.name"), &mut causes)
            }
            None => {}
        }
        match p.get("port").and_then(Value::as_i64) {
            None => causes.push(Cause::required(format!("{at}.port"))),
            Some(n) if !(1..=65535).contains(&n) => causes.push(Cause::invalid(
                format!("{at}.port"),
                format!("Invalid value: {n}: must be between 1 and 65535, inclusive"),
            )),
            Some(_) => {}
        }
        if let Some(n) = p.get("targetPort").and_then(Value::as_i64) {
            if !(1..=65535).contains(&n) {
                causes.push(Cause::invalid(
                    format!("{at}.targetPort"),
                    format!("Invalid value: {n}: must be between 1 and 65535, inclusive"),
                ));
            }
        }
    }
    causes
}

impl Strategy for ServiceStrategy {
    fn prepare_for_create(&self, r: &Request, obj: &mut Value) -> Result<(), ApiError> {
        if let Some(spec) = object_at(obj, &["spec"]) {
            default_service(spec);
        }
        if validate_service(obj).is_empty() {
            allocate(r, obj)?;
        }
        Ok(())
    }

    fn prepare_for_update(&self, r: &Request, old: &Value, obj: &mut Value) -> Result<(), ApiError> {
        if r.subresource.as_deref() == Some("status") {
            return Ok(());
        }
        if let Some(spec) = object_at(obj, &["spec"]) {
            default_service(spec);
        }
        keep_allocated(old, obj);
        if validate_service(obj).is_empty()
            && immutable(old, obj, "/spec/clusterIP", "spec.clusterIP").is_none()
        {
            allocate(r, obj)?;
        }
        Ok(())
    }

    fn validate(&self, _r: &Request, obj: &Value) -> Vec<Cause> {
        validate_service(obj)
    }

    fn validate_update(&self, r: &Request, old: &Value, obj: &Value) -> Vec<Cause> {
        if r.subresource.as_deref() == Some("status") {
            return Vec::new();
        }
        let mut causes = validate_service(obj);
        let changing_type = old.pointer("/spec/type") != obj.pointer("/spec/type");
        let was_set = old
            .pointer("/spec/clusterIP")
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty());
        if was_set && !changing_type {
            if let Some(mut c) = immutable(old, obj, "/spec/clusterIP", "spec.clusterIPs[0]") {
                c.message = invalid_value(
                    obj.pointer("/spec/clusterIPs").unwrap_or(&Value::Null),
                    "may not change once set",
                );
                c.field = "spec.clusterIPs[0]".into();
                causes.push(c);
            }
        }
        causes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_defaults() {
        let mut spec = json!({"ports": [{"port": 80}]});
        default_service(spec.as_object_mut().unwrap());
        assert_eq!(spec["type"], "ClusterIP");
        assert_eq!(spec["sessionAffinity"], "None");
        assert_eq!(spec["internalTrafficPolicy"], "Cluster");
        assert_eq!(
            spec["ports"][0],
            json!({"port": 80, "protocol": "TCP", "targetPort": 80})
        );
    }

    #[test]
    fn ports_are_required_and_in_range() {
        let fields = |spec: Value| -> Vec<String> {
            validate_service(&json!({"spec": spec}))
                .into_iter()
                .map(|c| c.field)
                .collect()
        };
        assert_eq!(fields(json!({})), vec!["spec.ports"]);
        assert_eq!(
            fields(json!({"ports": [{"port": 0}]})),
            vec!["spec.ports[0].port"]
        );
        assert!(fields(json!({"type": "ExternalName", "externalName": "x.example"})).is_empty());
    }
}
