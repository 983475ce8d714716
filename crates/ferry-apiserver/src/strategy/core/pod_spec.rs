//! The pod spec, wherever it appears (a Pod's `spec`, a workload's
//! `spec.template.spec`): kube-apiserver's defaults (`SetDefaults_PodSpec`,
//! `SetDefaults_Container`, ...) and the validation users hit.
//!
//! Everything here is pure: it runs after the object decoded as its typed
//! form, so every field present has the right JSON type.

use serde_json::{json, Map, Value};

use crate::status::Cause;
use crate::validation::names::dns1123_label_errors;
use crate::validation::render_value;

/// Insert `key: value` into `m` unless it is set (absent or `null` count as unset).
pub(crate) fn default_field(m: &mut Map<String, Value>, key: &str, value: Value) {
    if m.get(key).is_none_or(Value::is_null) {
        m.insert(key.into(), value);
    }
}

/// The object at `path` inside `v`, if it is one.
pub(crate) fn object_at<'a>(v: &'a mut Value, path: &[&str]) -> Option<&'a mut Map<String, Value>> {
    path.iter()
        .try_fold(v, |cur, step| cur.get_mut(*step))?
        .as_object_mut()
}

/// Defaults of a pod spec (`spec` of a Pod, `template.spec` of workloads).
pub fn default_pod_spec(spec: &mut Map<String, Value>) {
    default_field(spec, "restartPolicy", json!("Always"));
    default_field(spec, "dnsPolicy", json!("ClusterFirst"));
    default_field(spec, "schedulerName", json!("default-scheduler"));
    default_field(spec, "terminationGracePeriodSeconds", json!(30));
    default_field(spec, "securityContext", json!({}));
    for list in ["initContainers", "containers"] {
        if let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) {
            for c in containers.iter_mut().filter_map(Value::as_object_mut) {
                default_container(c);
            }
        }
    }
    if let Some(volumes) = spec.get_mut("volumes").and_then(Value::as_array_mut) {
        for v in volumes.iter_mut().filter_map(Value::as_object_mut) {
            for source in ["secret", "configMap", "downwardAPI", "projected"] {
                if let Some(s) = v.get_mut(source).and_then(Value::as_object_mut) {
                    // 0644, as kube-apiserver's `SetDefaults_*VolumeSource`.
                    default_field(s, "defaultMode", json!(420));
                }
            }
        }
    }
}

/// `IfNotPresent`, or `Always` for `:latest` and untagged images.
pub fn default_pull_policy(image: &str) -> &'static str {
    if image.contains('@') {
        return "IfNotPresent";
    }
    // The tag follows the last ':' after the last '/' (a registry port is not a tag).
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.rsplit_once(':') {
        Some((_, "latest")) | None => "Always",
        Some(_) => "IfNotPresent",
    }
}

fn default_container(c: &mut Map<String, Value>) {
    let image = c
        .get("image")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    default_field(c, "imagePullPolicy", json!(default_pull_policy(&image)));
    default_field(c, "terminationMessagePath", json!("/dev/termination-log"));
    default_field(c, "terminationMessagePolicy", json!("File"));
    default_field(c, "resources", json!({}));
    if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            default_field(p, "protocol", json!("TCP"));
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get_mut(probe).and_then(Value::as_object_mut) {
            default_field(p, "timeoutSeconds", json!(1));
            default_field(p, "periodSeconds", json!(10));
            default_field(p, "successThreshold", json!(1));
            default_field(p, "failureThreshold", json!(3));
        }
    }
}

/// A Pod's own defaults (not a template's): requests default to limits.
pub fn default_pod_requests(spec: &mut Map<String, Value>) {
    for list in ["initContainers", "containers"] {
        let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in containers.iter_mut().filter_map(Value::as_object_mut) {
            let Some(resources) = c.get_mut("resources").and_then(Value::as_object_mut) else {
                continue;
            };
            let Some(limits) = resources.get("limits").and_then(Value::as_object).cloned() else {
                continue;
            };
            let requests = resources.entry("requests").or_insert_with(|| json!({}));
            if let Some(requests) = requests.as_object_mut() {
                for (k, v) in limits {
                    requests.entry(k).or_insert(v);
                }
            }
        }
    }
}

/// The pod's QoS class (`status.qosClass`) from its containers' resources.
pub fn qos_class(spec: &Value) -> &'static str {
    let containers: Vec<&Value> = ["initContainers", "containers"]
        .iter()
        .filter_map(|l| spec.get(*l).and_then(Value::as_array))
        .flatten()
        .collect();
    let section = |c: &Value, s: &str| {
        c.pointer(&format!("/resources/{s}"))
            .and_then(Value::as_object)
            .cloned()
    };
    let any = containers.iter().any(|c| {
        ["requests", "limits"]
            .iter()
            .any(|s| section(c, s).is_some_and(|m| !m.is_empty()))
    });
    if !any {
        return "BestEffort";
    }
    let guaranteed = containers.iter().all(|c| {
        let limits = section(c, "limits").unwrap_or_default();
        let requests = section(c, "requests").unwrap_or_default();
        ["cpu", "memory"].iter().all(|r| {
            limits.get(*r).is_some_and(|l| {
                requests
                    .get(*r)
                    .is_none_or(|q| quantity_value(q) == quantity_value(l))
            })
        })
    });
    if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// kube-apiserver's quantity syntax: a signed decimal number and an optional
/// binary (`Ki`..`Ei`), decimal (`n`, `u`, `m`, `k`, `M`..`E`) or exponent suffix.
pub fn parse_quantity(s: &str) -> Option<f64> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(split);
    let unsigned = number.trim_start_matches(['+', '-']);
    if unsigned.is_empty()
        || number.len() - unsigned.len() > 1
        || unsigned.contains(['+', '-'])
        || unsigned.matches('.').count() > 1
        || unsigned == "."
    {
        return None;
    }
    let n: f64 = number.parse().ok()?;
    let factor = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        e if e.starts_with(['e', 'E']) => 10f64.powi(e[1..].parse::<i32>().ok()?),
        _ => return None,
    };
    Some(n * factor)
}

fn quantity_value(v: &Value) -> Option<f64> {
    match v {
        Value::String(s) => parse_quantity(s),
        Value::Number(n) => n.as_f64(),
        _ => None,
    }
}

const QUANTITY_RE: &str = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$";

fn check_port(v: Option<&Value>, field: String, required: bool, causes: &mut Vec<Cause>) {
    match v.and_then(Value::as_i64) {
        None if required => causes.push(Cause::required(field)),
        Some(p) if !(1..=65535).contains(&p) => causes.push(Cause::invalid(
            field,
            format!("Invalid value: {p}: must be between 1 and 65535, inclusive"),
        )),
        _ => {}
    }
}

/// A DNS-1123 label check of `name` at `field`, kube-apiserver's wording.
pub(crate) fn check_dns_label(name: &str, field: String, causes: &mut Vec<Cause>) {
    let errors = dns1123_label_errors(name);
    if !errors.is_empty() {
        causes.push(Cause::invalid(
            field,
            crate::validation::invalid_value(&Value::String(name.into()), &errors.join(", ")),
        ));
    }
}

/// The rules of a pod spec users run into: containers present, named
/// (DNS-1123 labels, unique) and with an image; ports in range; volume
/// names; resource quantities well formed and requests within limits.
pub fn validate_pod_spec(spec: Option<&Value>, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let Some(spec) = spec else {
        causes.push(Cause::required(path));
        return causes;
    };
    let mut names = std::collections::HashSet::new();
    let containers = spec.get("containers").and_then(Value::as_array);
    if containers.is_none_or(Vec::is_empty) {
        causes.push(Cause::required(format!("{path}.containers")));
    }
    for list in ["initContainers", "containers"] {
        let Some(containers) = spec.get(list).and_then(Value::as_array) else {
            continue;
        };
        for (i, c) in containers.iter().enumerate() {
            let at = format!("{path}.{list}[{i}]");
            match c.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) {
                None => causes.push(Cause::required(format!("{at}.name"))),
                Some(name) => {
                    check_dns_label(name, format!("{at}.name"), &mut causes);
                    if !names.insert(name.to_string()) {
                        causes.push(Cause {
                            reason: "FieldValueDuplicate".into(),
                            field: format!("{at}.name"),
                            message: format!(
                                "Duplicate value: {}",
                                render_value(&Value::String(name.into()))
                            ),
                        });
                    }
                }
            }
            if c.get("image")
                .and_then(Value::as_str)
                .is_none_or(|s| s.trim().is_empty())
            {
                causes.push(Cause::required(format!("{at}.image")));
            }
            for (j, p) in c
                .get("ports")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                let pat = format!("{at}.ports[{j}]");
                check_port(
                    p.get("containerPort"),
                    format!("{pat}.containerPort"),
                    true,
                    &mut causes,
                );
                if p.get("hostPort").and_then(Value::as_i64) != Some(0) {
                    check_port(p.get("hostPort"), format!("{pat}.hostPort"), false, &mut causes);
                }
                if let Some(proto) = p.get("protocol").and_then(Value::as_str) {
                    if !matches!(proto, "TCP" | "UDP" | "SCTP") {
                        causes.push(Cause::unsupported(
                            format!("{pat}.protocol"),
                            format!(
                                "Unsupported value: {}: supported values: \"SCTP\", \"TCP\", \"UDP\"",
                                render_value(&Value::String(proto.into()))
                            ),
                        ));
                    }
                }
            }
            causes.extend(validate_resources(c.get("resources"), &format!("{at}.resources")));
        }
    }
    for (i, v) in spec
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let field = format!("{path}.volumes[{i}].name");
        match v.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) {
            None => causes.push(Cause::required(field)),
            Some(name) => check_dns_label(name, field, &mut causes),
        }
    }
    causes
}

fn validate_resources(resources: Option<&Value>, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let Some(resources) = resources else {
        return causes;
    };
    let mut parsed: [Map<String, Value>; 2] = Default::default();
    for (slot, section) in ["limits", "requests"].iter().enumerate() {
        for (name, q) in resources
            .get(*section)
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let field = format!("{path}.{section}.{name}");
            match quantity_value(q) {
                None => causes.push(Cause::invalid(
                    field,
                    crate::validation::invalid_value(
                        q,
                        &format!("quantities must match the regular expression '{QUANTITY_RE}'"),
                    ),
                )),
                Some(n) if n < 0.0 => causes.push(Cause::invalid(
                    field,
                    crate::validation::invalid_value(q, "must be greater than or equal to 0"),
                )),
                Some(n) => {
                    parsed[slot].insert(name.clone(), json!(n));
                }
            }
        }
    }
    let [limits, requests] = &parsed;
    for (name, request) in requests {
        if let (Some(limit), Some(r)) = (limits.get(name).and_then(Value::as_f64), request.as_f64()) {
            if r > limit {
                let shown = resources
                    .pointer(&format!("/requests/{name}"))
                    .cloned()
                    .unwrap_or_default();
                causes.push(Cause::invalid(
                    format!("{path}.requests"),
                    crate::validation::invalid_value(
                        &shown,
                        &format!(
                            "must be less than or equal to {name} limit of {}",
                            render_limit(resources, name)
                        ),
                    ),
                ));
            }
        }
    }
    causes
}

fn render_limit(resources: &Value, name: &str) -> String {
    match resources.pointer(&format!("/limits/{name}")) {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

/// Whether a Pod's spec update changes only what may change on a running
/// pod: container images, `activeDeadlineSeconds`, added tolerations (and
/// ephemeral containers, through their subresource).
pub fn pod_spec_update_forbidden(old: &Value, new: &Value) -> Option<Cause> {
    let (Some(old_spec), Some(new_spec)) = (old.get("spec"), new.get("spec")) else {
        return None;
    };
    let mut relaxed = new_spec.clone();
    if let Some(m) = relaxed.as_object_mut() {
        for field in ["activeDeadlineSeconds", "ephemeralContainers"] {
            match old_spec.get(field) {
                Some(v) => m.insert(field.into(), v.clone()),
                None => m.remove(field),
            };
        }
        // Tolerations may only be added to.
        let old_tol = old_spec
            .get("tolerations")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let new_tol = m
            .get("tolerations")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if old_tol.iter().all(|t| new_tol.contains(t)) {
            match old_spec.get("tolerations") {
                Some(v) => m.insert("tolerations".into(), v.clone()),
                None => m.remove("tolerations"),
            };
        }
        for list in ["initContainers", "containers"] {
            let old_list = old_spec.get(list).and_then(Value::as_array);
            if let (Some(old_list), Some(new_list)) =
                (old_list, m.get_mut(list).and_then(Value::as_array_mut))
            {
                if old_list.len() == new_list.len() {
                    for (n, o) in new_list.iter_mut().zip(old_list) {
                        if let (Some(n), Some(image)) = (n.as_object_mut(), o.get("image")) {
                            n.insert("image".into(), image.clone());
                        }
                    }
                }
            }
        }
    }
    (relaxed != *old_spec).then(|| {
        Cause::forbidden(
            "spec",
            "pod updates may not change fields other than `spec.containers[*].image`,\
             `spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,\
             `spec.tolerations` (only additions to existing tolerations),\
             `spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaulted(spec: Value) -> Value {
        let mut spec = spec;
        default_pod_spec(spec.as_object_mut().unwrap());
        spec
    }

    #[test]
    fn pod_spec_and_containers_get_kube_defaults() {
        let spec = defaulted(
            json!({"containers": [{"name": "web", "image": "nginx", "ports": [{"containerPort": 80}]}]}),
        );
        assert_eq!(spec["restartPolicy"], "Always");
        assert_eq!(spec["dnsPolicy"], "ClusterFirst");
        assert_eq!(spec["schedulerName"], "default-scheduler");
        assert_eq!(spec["terminationGracePeriodSeconds"], 30);
        assert_eq!(spec["securityContext"], json!({}));
        let c = &spec["containers"][0];
        assert_eq!(c["imagePullPolicy"], "Always");
        assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(c["terminationMessagePolicy"], "File");
        assert_eq!(c["ports"][0]["protocol"], "TCP");
        // What the client set stays.
        let spec = defaulted(json!({"restartPolicy": "Never", "containers": []}));
        assert_eq!(spec["restartPolicy"], "Never");
    }

    #[test]
    fn pull_policy_follows_the_tag() {
        assert_eq!(default_pull_policy("nginx"), "Always");
        assert_eq!(default_pull_policy("nginx:latest"), "Always");
        assert_eq!(default_pull_policy("nginx:1.27"), "IfNotPresent");
        assert_eq!(default_pull_policy("registry:5000/nginx"), "Always");
        assert_eq!(default_pull_policy("nginx@sha256:abc"), "IfNotPresent");
    }

    #[test]
    fn qos_class_from_resources() {
        assert_eq!(qos_class(&json!({"containers": [{"name": "a"}]})), "BestEffort");
        let g = json!({"containers": [{"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]});
        assert_eq!(qos_class(&g), "Guaranteed");
        let b = json!({"containers": [{"resources": {"requests": {"cpu": "100m"}}}]});
        assert_eq!(qos_class(&b), "Burstable");
    }

    #[test]
    fn quantities_parse_as_kubernetes_writes_them() {
        assert_eq!(parse_quantity("100m"), Some(0.1));
        assert_eq!(parse_quantity("1Gi"), Some(1073741824.0));
        assert_eq!(parse_quantity("1e3"), Some(1000.0));
        assert_eq!(parse_quantity("lots"), None);
        assert_eq!(parse_quantity("1Gb"), None);
        assert_eq!(parse_quantity("--1"), None);
    }

    #[test]
    fn validation_names_the_fields_users_get_wrong() {
        let spec = json!({"containers": [
            {"name": "Web_1", "ports": [{"containerPort": 70000}]},
            {"image": "x", "resources": {"limits": {"cpu": "lots"}, "requests": {"memory": "2Gi"}}},
            {"name": "ok", "image": "x", "resources": {"limits": {"memory": "1Gi"}, "requests": {"memory": "2Gi"}}},
        ], "volumes": [{"name": "Bad Name"}]});
        let fields: Vec<String> = validate_pod_spec(Some(&spec), "spec")
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(
            fields,
            vec![
                "spec.containers[0].name",
                "spec.containers[0].image",
                "spec.containers[0].ports[0].containerPort",
                "spec.containers[1].name",
                "spec.containers[1].resources.limits.cpu",
                "spec.containers[2].resources.requests",
                "spec.volumes[0].name",
            ]
        );
        let causes = validate_pod_spec(Some(&json!({})), "spec.template.spec");
        assert_eq!(causes[0].field, "spec.template.spec.containers");
    }

    #[test]
    fn only_images_and_deadlines_change_on_a_pod() {
        let old = json!({"spec": {"containers": [{"name": "a", "image": "x:1"}]}});
        let image =
            json!({"spec": {"containers": [{"name": "a", "image": "x:2"}], "activeDeadlineSeconds": 5}});
        assert!(pod_spec_update_forbidden(&old, &image).is_none());
        let env = json!({"spec": {"containers": [{"name": "a", "image": "x:1", "env": []}]}});
        assert_eq!(pod_spec_update_forbidden(&old, &env).unwrap().field, "spec");
    }
}
