//! What the source's API server allocated for its own cluster, which a copy never
//! carries: another cluster allocates its own, and refuses a copy that brings the
//! source's. Each rule follows what kube-apiserver fills in on create (its registry
//! strategies and the Service allocators) and what it then refuses when a client
//! sends it:
//!
//! | kind | dropped | why |
//! | --- | --- | --- |
//! | Service | `spec.clusterIP`, `spec.clusterIPs` (a headless `None` stays) | allocated from the source's service range; another cluster refuses an address outside its own range, or one it allocated to another Service |
//! | Service | `spec.ports[*].nodePort`, `spec.healthCheckNodePort` | allocated from the source's node-port range, and may collide there; kept when the Service is annotated `control.kubestellar.io/preserve: nodeport` (KubeStellar's annotation) |
//! | Job (unless `spec.manualSelector: true`) | `spec.selector`, and the template labels `controller-uid`, `batch.kubernetes.io/controller-uid`, `job-name`, `batch.kubernetes.io/job-name` | generated from the source Job's uid; kube-apiserver refuses them on a Job with another uid (`must be '<uid>'`) |
//! | PersistentVolumeClaim | `spec.volumeName` once the source bound it (`pv.kubernetes.io/bind-completed`), and the binding annotations | names a volume of the source cluster |
//!
//! On an update the destination keeps what it allocated itself: kube-apiserver (and
//! the hub) fill an omitted cluster IP or node port in from the stored object.
//!
//! README's "What a copy never carries" lists the same; change both together.

use serde_json::{Map, Value};

/// The annotation that keeps a Service's node ports in its copies (KubeStellar's).
pub const PRESERVE_ANNOTATION: &str = "control.kubestellar.io/preserve";
/// The value of [`PRESERVE_ANNOTATION`] that keeps node ports.
pub const PRESERVE_NODE_PORT: &str = "nodeport";

/// Template labels kube-apiserver generates for a Job without a manual selector.
pub const JOB_GENERATED_LABELS: &[&str] = &[
    "controller-uid",
    "batch.kubernetes.io/controller-uid",
    "job-name",
    "batch.kubernetes.io/job-name",
];

/// Annotations the PersistentVolume controller sets on a claim it bound or provisioned.
pub const PVC_BINDING_ANNOTATIONS: &[&str] = &[
    "pv.kubernetes.io/bind-completed",
    "pv.kubernetes.io/bound-by-controller",
    "volume.beta.kubernetes.io/storage-provisioner",
    "volume.kubernetes.io/storage-provisioner",
    "volume.kubernetes.io/selected-node",
];

/// Removes from `copy` (an object of `api_version` and `kind`) what its source cluster
/// allocated. The syncer's copies (every profile) and the KubeStellar placement
/// translator's mailbox copies both go through it.
pub fn drop_allocated(copy: &mut Value, api_version: &str, kind: &str) {
    match (api_version, kind) {
        ("v1", "Service") => service(copy),
        ("batch/v1", "Job") => job(copy),
        ("v1", "PersistentVolumeClaim") => claim(copy),
        _ => {}
    }
}

fn spec(obj: &mut Value) -> Option<&mut Map<String, Value>> {
    obj.get_mut("spec").and_then(Value::as_object_mut)
}

fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

fn service(obj: &mut Value) {
    let preserve_ports = annotation(obj, PRESERVE_ANNOTATION).is_some_and(|v| {
        v.split(',')
            .any(|p| p.trim().eq_ignore_ascii_case(PRESERVE_NODE_PORT))
    });
    let Some(spec) = spec(obj) else {
        return;
    };
    let headless = spec.get("clusterIP").and_then(Value::as_str) == Some("None");
    if !headless {
        spec.remove("clusterIP");
        spec.remove("clusterIPs");
    }
    if preserve_ports {
        return;
    }
    spec.remove("healthCheckNodePort");
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for port in ports.iter_mut().filter_map(Value::as_object_mut) {
            port.remove("nodePort");
        }
    }
}

fn job(obj: &mut Value) {
    let Some(spec) = spec(obj) else {
        return;
    };
    if spec.get("manualSelector").and_then(Value::as_bool) == Some(true) {
        return;
    }
    spec.remove("selector");
    let labels = spec
        .get_mut("template")
        .and_then(|t| t.get_mut("metadata"))
        .and_then(|m| m.get_mut("labels"))
        .and_then(Value::as_object_mut);
    if let Some(labels) = labels {
        for key in JOB_GENERATED_LABELS {
            labels.remove(*key);
        }
    }
}

fn claim(obj: &mut Value) {
    let bound = annotation(obj, "pv.kubernetes.io/bind-completed").is_some();
    if let Some(annotations) = obj
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        for key in PVC_BINDING_ANNOTATIONS {
            annotations.remove(*key);
        }
        if annotations.is_empty() {
            if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("annotations");
            }
        }
    }
    if bound {
        if let Some(spec) = spec(obj) {
            spec.remove("volumeName");
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn dropped(obj: Value, api_version: &str, kind: &str) -> Value {
        let mut copy = obj;
        drop_allocated(&mut copy, api_version, kind);
        copy
    }

    #[test]
    fn a_service_loses_its_address_and_node_ports_but_not_what_the_user_chose() {
        let svc = json!({"metadata": {"name": "web"}, "spec": {
            "type": "LoadBalancer", "clusterIP": "10.96.4.7", "clusterIPs": ["10.96.4.7"],
            "externalTrafficPolicy": "Local", "healthCheckNodePort": 31999,
            "ipFamilies": ["IPv4"], "selector": {"app": "web"},
            "ports": [{"name": "http", "port": 80, "targetPort": 8080, "nodePort": 30080}]}});
        let copy = dropped(svc, "v1", "Service");
        assert_eq!(
            copy["spec"],
            json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local", "ipFamilies": ["IPv4"],
                   "selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]})
        );
    }

    #[test]
    fn a_headless_service_stays_headless() {
        let svc = json!({"spec": {"clusterIP": "None", "clusterIPs": ["None"], "ports": [{"port": 80}]}});
        let copy = dropped(svc.clone(), "v1", "Service");
        assert_eq!(copy, svc);
    }

    #[test]
    fn node_ports_stay_when_the_service_asks_to_preserve_them() {
        let svc = json!({"metadata": {"annotations": {PRESERVE_ANNOTATION: "nodeport"}},
            "spec": {"type": "NodePort", "clusterIP": "10.96.0.9", "ports": [{"port": 80, "nodePort": 30080}]}});
        let copy = dropped(svc, "v1", "Service");
        assert_eq!(copy["spec"]["ports"][0]["nodePort"], 30080);
        assert!(copy["spec"].get("clusterIP").is_none());
    }

    #[test]
    fn a_job_loses_its_generated_selector_and_labels_unless_manual() {
        let job = json!({"spec": {
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u1"}},
            "template": {"metadata": {"labels": {"app": "migrate", "controller-uid": "u1",
                "batch.kubernetes.io/controller-uid": "u1", "job-name": "migrate",
                "batch.kubernetes.io/job-name": "migrate"}},
                "spec": {"restartPolicy": "Never"}}}});
        let copy = dropped(job.clone(), "batch/v1", "Job");
        assert!(copy["spec"].get("selector").is_none());
        assert_eq!(
            copy["spec"]["template"]["metadata"]["labels"],
            json!({"app": "migrate"})
        );

        let mut manual = job;
        manual["spec"]["manualSelector"] = json!(true);
        assert_eq!(dropped(manual.clone(), "batch/v1", "Job"), manual);
    }

    #[test]
    fn a_bound_claim_loses_its_volume_and_binding_annotations() {
        let pvc = json!({"metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes",
            "volume.kubernetes.io/storage-provisioner": "rancher.io/local-path"}},
            "spec": {"volumeName": "pvc-123", "resources": {"requests": {"storage": "1Gi"}}}});
        let copy = dropped(pvc, "v1", "PersistentVolumeClaim");
        assert_eq!(
            copy,
            json!({"metadata": {}, "spec": {"resources": {"requests": {"storage": "1Gi"}}}})
        );

        let static_binding = json!({"spec": {"volumeName": "my-nfs"}});
        assert_eq!(
            dropped(static_binding.clone(), "v1", "PersistentVolumeClaim"),
            static_binding
        );
    }

    #[test]
    fn other_kinds_are_left_alone() {
        let cm = json!({"spec": {"clusterIP": "1.2.3.4"}, "data": {"k": "v"}});
        assert_eq!(dropped(cm.clone(), "v1", "ConfigMap"), cm);
    }
}
