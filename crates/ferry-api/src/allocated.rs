//! What the source cluster allocated or bound for itself, which a copy never
//! carries: another cluster allocates its own, and refuses (or fights) a copy that
//! brings the source's. Each rule follows what kube-apiserver fills in on create (its
//! registry strategies, the Service allocators, its admission plugins) or what a
//! controller of the source cluster writes on the object, and what the destination
//! then refuses or overwrites:
//!
//! | kind | dropped | why |
//! | --- | --- | --- |
//! | Service | `spec.clusterIP`, `spec.clusterIPs` (a headless `None` stays) | allocated from the source's service range; another cluster refuses an address outside its own range, or one it allocated to another Service |
//! | Service | `spec.ports[*].nodePort`, `spec.healthCheckNodePort` | allocated from the source's node-port range, and may collide there; kept when the Service is annotated `control.kubestellar.io/preserve: nodeport` (KubeStellar's annotation) |
//! | Job (unless `spec.manualSelector: true`) | `spec.selector`, and the template labels `controller-uid`, `batch.kubernetes.io/controller-uid`, `job-name`, `batch.kubernetes.io/job-name` | generated from the source Job's uid; kube-apiserver refuses them on a Job with another uid (`must be '<uid>'`) |
//! | PersistentVolumeClaim | `spec.volumeName` once the source bound it (`pv.kubernetes.io/bind-completed`), and the binding annotations | names a volume of the source cluster |
//! | PersistentVolume | `spec.claimRef.uid`, `spec.claimRef.resourceVersion` (the claim's namespace and name stay) | name the source's claim object; the destination's volume controller takes a claim of another uid for a deleted one and releases the volume |
//! | Pod | `spec.nodeName` | bound by the source's scheduler; a node of that name does not exist elsewhere, and the pod garbage collector deletes a pod bound to a missing node |
//! | Pod | `spec.ephemeralContainers` | added through the `ephemeralcontainers` subresource; kube-apiserver refuses them on create (`cannot be set on create`) |
//! | Pod | `spec.priority`, `spec.preemptionPolicy` | computed by the Priority admission plugin from the source's PriorityClass; the destination refuses a value its own class does not give (`must not be provided in pod spec`) |
//! | Pod | `spec.overhead` | set by the RuntimeClass admission plugin from the source's RuntimeClass; the destination refuses one its class does not define (`Pod's Overhead doesn't match RuntimeClass's defined Overhead`) |
//! | Pod | the `kube-api-access-*` volume and its mounts | injected by the ServiceAccount admission plugin; the destination injects its own |
//! | Namespace | `spec.finalizers` | the source's finalizers; kube-apiserver adds `kubernetes` itself, and a finalizer no controller of the destination removes blocks the namespace's deletion |
//! | Deployment | annotation `deployment.kubernetes.io/revision` | the source's rollout count, kept by its Deployment controller; the destination's sets its own, and a copy carrying another one fights it |
//! | ReplicaSet | annotations `deployment.kubernetes.io/revision`, `revision-history`, `desired-replicas`, `max-replicas` | the source's Deployment controller's bookkeeping |
//! | DaemonSet | annotation `deprecated.daemonset.template.generation` | kept by the source's API server (the DaemonSet's template generation) |
//! | StatefulSet | `spec.volumeClaimTemplates[*].status` | a claim template's status means nothing; the claims made from it report their own |
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

/// The annotation the Deployment controller keeps on a Deployment and its
/// ReplicaSets: the rollout's revision.
pub const DEPLOYMENT_REVISION_ANNOTATION: &str = "deployment.kubernetes.io/revision";

/// What the Deployment controller writes on the ReplicaSets it makes.
pub const REPLICA_SET_ANNOTATIONS: &[&str] = &[
    DEPLOYMENT_REVISION_ANNOTATION,
    "deployment.kubernetes.io/revision-history",
    "deployment.kubernetes.io/desired-replicas",
    "deployment.kubernetes.io/max-replicas",
];

/// What kube-apiserver writes on an apps/v1 DaemonSet: its template generation.
pub const DAEMON_SET_TEMPLATE_GENERATION_ANNOTATION: &str = "deprecated.daemonset.template.generation";

/// The name prefix of the projected token volume the ServiceAccount admission
/// plugin adds to a Pod (`kube-api-access-<random>`).
pub const SERVICE_ACCOUNT_VOLUME_PREFIX: &str = "kube-api-access-";

/// Removes from `copy` (an object of `api_version` and `kind`) what its source cluster
/// allocated. The syncer's copies (every profile) and the KubeStellar placement
/// translator's mailbox copies both go through it.
pub fn drop_allocated(copy: &mut Value, api_version: &str, kind: &str) {
    match (api_version, kind) {
        ("v1", "Service") => service(copy),
        ("batch/v1", "Job") => job(copy),
        ("v1", "PersistentVolumeClaim") => claim(copy),
        ("v1", "PersistentVolume") => volume(copy),
        ("v1", "Pod") => pod(copy),
        ("v1", "Namespace") => namespace(copy),
        ("apps/v1", "Deployment") => remove_annotations(copy, &[DEPLOYMENT_REVISION_ANNOTATION]),
        ("apps/v1", "ReplicaSet") => remove_annotations(copy, REPLICA_SET_ANNOTATIONS),
        ("apps/v1", "DaemonSet") => remove_annotations(copy, &[DAEMON_SET_TEMPLATE_GENERATION_ANNOTATION]),
        ("apps/v1", "StatefulSet") => stateful_set(copy),
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
    remove_annotations(obj, PVC_BINDING_ANNOTATIONS);
    if bound {
        if let Some(spec) = spec(obj) {
            spec.remove("volumeName");
        }
    }
}

/// Removes `keys` from the annotations of `obj`, and the annotations when none is left.
fn remove_annotations(obj: &mut Value, keys: &[&str]) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let Some(annotations) = meta.get_mut("annotations").and_then(Value::as_object_mut) else {
        return;
    };
    let before = annotations.len();
    for key in keys {
        annotations.remove(*key);
    }
    if annotations.is_empty() && before > 0 {
        meta.remove("annotations");
    }
}

/// Removes `field` of `map` when it holds an empty list or object (what is left
/// once a rule took out all the source put in it).
fn remove_if_empty(map: &mut Map<String, Value>, field: &str) {
    let empty = match map.get(field) {
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Object(o)) => o.is_empty(),
        _ => false,
    };
    if empty {
        map.remove(field);
    }
}

fn volume(obj: &mut Value) {
    let claim_ref = spec(obj)
        .and_then(|s| s.get_mut("claimRef"))
        .and_then(Value::as_object_mut);
    if let Some(claim_ref) = claim_ref {
        claim_ref.remove("uid");
        claim_ref.remove("resourceVersion");
    }
}

fn pod(obj: &mut Value) {
    let Some(spec) = spec(obj) else {
        return;
    };
    for field in [
        "nodeName",
        "ephemeralContainers",
        "priority",
        "preemptionPolicy",
        "overhead",
    ] {
        spec.remove(field);
    }
    let mut injected = Vec::new();
    if let Some(volumes) = spec.get_mut("volumes").and_then(Value::as_array_mut) {
        volumes.retain(|v| {
            let name = v.get("name").and_then(Value::as_str).unwrap_or_default();
            let token = name.starts_with(SERVICE_ACCOUNT_VOLUME_PREFIX) && v.get("projected").is_some();
            if token {
                injected.push(name.to_string());
            }
            !token
        });
    }
    if injected.is_empty() {
        return;
    }
    remove_if_empty(spec, "volumes");
    for list in ["initContainers", "containers"] {
        let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for container in containers.iter_mut().filter_map(Value::as_object_mut) {
            if let Some(mounts) = container.get_mut("volumeMounts").and_then(Value::as_array_mut) {
                mounts.retain(|m| {
                    let name = m.get("name").and_then(Value::as_str).unwrap_or_default();
                    !injected.iter().any(|i| i == name)
                });
            }
            remove_if_empty(container, "volumeMounts");
        }
    }
}

fn namespace(obj: &mut Value) {
    if let Some(spec) = spec(obj) {
        spec.remove("finalizers");
    }
    if let Some(o) = obj.as_object_mut() {
        remove_if_empty(o, "spec");
    }
}

fn stateful_set(obj: &mut Value) {
    let templates = spec(obj)
        .and_then(|s| s.get_mut("volumeClaimTemplates"))
        .and_then(Value::as_array_mut);
    for template in templates.into_iter().flatten().filter_map(Value::as_object_mut) {
        template.remove("status");
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
    fn a_volume_keeps_its_claim_by_name_but_not_the_source_claims_uid() {
        let pv = json!({"spec": {"capacity": {"storage": "1Gi"}, "claimRef": {"kind": "PersistentVolumeClaim",
            "namespace": "demo", "name": "data", "uid": "7c1e", "resourceVersion": "42"}}});
        let copy = dropped(pv, "v1", "PersistentVolume");
        assert_eq!(
            copy["spec"]["claimRef"],
            json!({"kind": "PersistentVolumeClaim", "namespace": "demo", "name": "data"})
        );
    }

    #[test]
    fn a_pod_loses_its_node_priority_overhead_and_ephemeral_containers() {
        let pod = json!({"spec": {"nodeName": "src-node-1", "priority": 1000, "preemptionPolicy": "Never",
            "priorityClassName": "high", "nodeSelector": {"disk": "ssd"},
            "runtimeClassName": "kata", "overhead": {"cpu": "250m"},
            "ephemeralContainers": [{"name": "debug", "image": "busybox"}],
            "containers": [{"name": "c", "image": "nginx"}]}});
        let copy = dropped(pod, "v1", "Pod");
        assert_eq!(
            copy["spec"],
            json!({"priorityClassName": "high", "nodeSelector": {"disk": "ssd"}, "runtimeClassName": "kata",
                   "containers": [{"name": "c", "image": "nginx"}]})
        );
    }

    #[test]
    fn a_pod_loses_the_token_volume_its_admission_injected_but_not_the_users_volumes() {
        let mount = json!({"name": "kube-api-access-x7k2q", "readOnly": true,
            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"});
        let token = json!({"name": "kube-api-access-x7k2q", "projected": {"sources": [
            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
            {"configMap": {"name": "kube-root-ca.crt"}}]}});
        let data = json!({"name": "data", "emptyDir": {}});
        let pod = json!({"spec": {
            "volumes": [data, token],
            "initContainers": [{"name": "init", "image": "busybox", "volumeMounts": [mount]}],
            "containers": [{"name": "c", "image": "nginx",
                "volumeMounts": [{"name": "data", "mountPath": "/data"}, mount]}]}});
        let copy = dropped(pod, "v1", "Pod");
        assert_eq!(
            copy["spec"],
            json!({"volumes": [{"name": "data", "emptyDir": {}}],
                   "initContainers": [{"name": "init", "image": "busybox"}],
                   "containers": [{"name": "c", "image": "nginx",
                       "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]})
        );

        let only_token = json!({"spec": {"volumes": [{"name": "kube-api-access-x7k2q", "projected": {}}],
            "containers": [{"name": "c", "volumeMounts": [{"name": "kube-api-access-x7k2q"}]}]}});
        assert_eq!(
            dropped(only_token, "v1", "Pod")["spec"],
            json!({"containers": [{"name": "c"}]})
        );
    }

    #[test]
    fn a_namespace_loses_its_finalizers() {
        let ns =
            json!({"metadata": {"name": "demo"}, "spec": {"finalizers": ["kubernetes", "kcp.io/thing"]}});
        assert_eq!(
            dropped(ns, "v1", "Namespace"),
            json!({"metadata": {"name": "demo"}})
        );
    }

    #[test]
    fn workloads_lose_what_their_controllers_and_api_server_wrote() {
        let annotated = |keys: &[&str]| {
            let mut annotations: Map<String, Value> =
                keys.iter().map(|k| (k.to_string(), json!("3"))).collect();
            annotations.insert("team".into(), json!("web"));
            json!({"metadata": {"annotations": annotations}, "spec": {"replicas": 2}})
        };
        let user_only = json!({"metadata": {"annotations": {"team": "web"}}, "spec": {"replicas": 2}});
        assert_eq!(
            dropped(
                annotated(&[DEPLOYMENT_REVISION_ANNOTATION]),
                "apps/v1",
                "Deployment"
            ),
            user_only
        );
        assert_eq!(
            dropped(annotated(REPLICA_SET_ANNOTATIONS), "apps/v1", "ReplicaSet"),
            user_only
        );
        assert_eq!(
            dropped(
                annotated(&[DAEMON_SET_TEMPLATE_GENERATION_ANNOTATION]),
                "apps/v1",
                "DaemonSet"
            ),
            user_only
        );

        let sts = json!({"spec": {"volumeClaimTemplates": [{"metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"]}, "status": {"phase": "Pending"}}]}});
        assert_eq!(
            dropped(sts, "apps/v1", "StatefulSet")["spec"]["volumeClaimTemplates"],
            json!([{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}])
        );
    }

    #[test]
    fn other_kinds_are_left_alone() {
        let cm = json!({"spec": {"clusterIP": "1.2.3.4"}, "data": {"k": "v"}});
        assert_eq!(dropped(cm.clone(), "v1", "ConfigMap"), cm);
    }
}
