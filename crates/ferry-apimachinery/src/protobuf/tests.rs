//! Two kinds of tests: bodies captured from kubectl 1.32 (testdata/, see its
//! README) decoded and compared with the JSON kubectl prints for
//! `--dry-run=client -o json`, and messages built here, wrapped exactly as
//! client-go wraps them.

use std::collections::BTreeMap;

use k8s_pb::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment};
use k8s_pb::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition, CertificateSigningRequestSpec,
    CertificateSigningRequestStatus,
};
use k8s_pb::api::coordination::v1::{Lease, LeaseSpec};
use k8s_pb::api::core::v1::{
    ConfigMap, Container, ContainerPort, EnvVar, EnvVarSource, ObjectFieldSelector, PodSecurityContext,
    PodSpec, PodTemplateSpec, ResourceRequirements, Service, ServicePort, ServiceSpec,
};
use k8s_pb::api::resource::v1::ResourceClaim;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1::{
    DeleteOptions, LabelSelector, LabelSelectorRequirement, MicroTime, ObjectMeta, OwnerReference, Time,
};
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::json;

use super::*;

/// Wrap `message` the way client-go's protobuf serializer does.
fn envelope(api_version: &str, kind: &str, message: &impl Message) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(message.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    [MAGIC, &unknown.encode_to_vec()].concat()
}

fn s(value: &str) -> Option<String> {
    Some(value.to_owned())
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn int(value: i32) -> Option<IntOrString> {
    Some(IntOrString {
        r#type: Some(0),
        int_val: Some(value),
        str_val: None,
    })
}

fn string(value: &str) -> Option<IntOrString> {
    Some(IntOrString {
        r#type: Some(1),
        int_val: None,
        str_val: s(value),
    })
}

fn quantity(value: &str) -> Quantity {
    Quantity { string: s(value) }
}

/// 2024-05-06T07:08:09Z
const SECONDS: i64 = 1_714_979_289;

macro_rules! kubectl_bodies {
    ($($test:ident => $fixture:literal,)*) => {$(
        #[test]
        fn $test() {
            let body = include_bytes!(concat!("testdata/", $fixture, ".bin"));
            let expected: Value =
                serde_json::from_str(include_str!(concat!("testdata/", $fixture, ".json"))).unwrap();
            assert_eq!(decode(body).unwrap(), expected);
        }
    )*};
}

kubectl_bodies! {
    kubectl_create_configmap_with_binary_file => "configmap",
    kubectl_create_secret_generic => "secret",
    kubectl_create_namespace => "namespace",
    kubectl_create_serviceaccount => "serviceaccount",
    kubectl_create_deployment => "deployment",
    kubectl_create_job => "job",
    kubectl_create_job_from_cronjob_copies_the_whole_pod_template => "job_from_cronjob",
    kubectl_create_cronjob => "cronjob",
    kubectl_create_service_clusterip => "service_clusterip",
    kubectl_create_service_clusterip_headless => "service_headless",
    kubectl_create_service_nodeport => "service_nodeport",
    kubectl_create_role => "role",
    kubectl_create_rolebinding => "rolebinding",
    kubectl_create_clusterrole_for_non_resource_urls => "clusterrole",
    kubectl_create_clusterrole_with_aggregation_rule => "clusterrole_aggregated",
    kubectl_create_clusterrolebinding => "clusterrolebinding",
    kubectl_create_quota => "quota",
    kubectl_create_ingress => "ingress",
    kubectl_create_pdb_with_percentage => "pdb_min_available",
    kubectl_create_pdb_with_count => "pdb_max_unavailable",
    kubectl_create_priorityclass => "priorityclass",
    kubectl_create_token => "token",
    kubectl_auth_can_i_for_a_resource => "ssar_resource",
    kubectl_auth_can_i_for_a_url => "ssar_nonresource",
    kubectl_auth_can_i_list => "ssrr",
    kubectl_auth_whoami => "whoami",
    kubectl_certificate_approve => "csr_approve",
    kubectl_autoscale => "autoscale",
}

#[test]
fn object_meta_is_converted_in_full() {
    let config_map = ConfigMap {
        metadata: Some(ObjectMeta {
            generate_name: s("cm-"),
            namespace: s("team-a"),
            uid: s("0b1c"),
            resource_version: s("42"),
            generation: Some(3),
            creation_timestamp: Some(Time {
                seconds: Some(SECONDS),
                nanos: Some(0),
            }),
            deletion_timestamp: Some(Time {
                seconds: Some(SECONDS + 60),
                nanos: Some(0),
            }),
            deletion_grace_period_seconds: Some(0),
            labels: labels(&[("app", "web"), ("empty", "")]),
            annotations: labels(&[("note", "hi")]),
            owner_references: vec![OwnerReference {
                api_version: s("apps/v1"),
                kind: s("Deployment"),
                name: s("web"),
                uid: s("d-1"),
                controller: Some(true),
                block_owner_deletion: Some(false),
            }],
            finalizers: vec!["example.com/keep".into()],
            ..Default::default()
        }),
        immutable: Some(false),
        data: labels(&[("k", "v")]),
        binary_data: [("blob".to_string(), vec![0, 1, 255])].into(),
    };

    let decoded = decode(&envelope("v1", "ConfigMap", &config_map)).unwrap();

    assert_eq!(
        decoded,
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "generateName": "cm-",
                "namespace": "team-a",
                "uid": "0b1c",
                "resourceVersion": "42",
                "generation": 3,
                "creationTimestamp": "2024-05-06T07:08:09Z",
                "deletionTimestamp": "2024-05-06T07:09:09Z",
                "deletionGracePeriodSeconds": 0,
                "labels": {"app": "web", "empty": ""},
                "annotations": {"note": "hi"},
                "ownerReferences": [{
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": "web",
                    "uid": "d-1",
                    "controller": true,
                    "blockOwnerDeletion": false
                }],
                "finalizers": ["example.com/keep"]
            },
            "immutable": false,
            "data": {"k": "v"},
            "binaryData": {"blob": "AAH/"}
        })
    );
}

#[test]
fn zero_values_go_always_encodes_are_left_out() {
    // Go's protobuf encoder writes every value-typed field; JSON's omitempty
    // would have dropped these.
    let config_map = ConfigMap {
        metadata: Some(ObjectMeta {
            name: s("cm"),
            generate_name: s(""),
            namespace: s(""),
            generation: Some(0),
            creation_timestamp: Some(Time::default()),
            ..Default::default()
        }),
        ..Default::default()
    };

    let decoded = decode(&envelope("v1", "ConfigMap", &config_map)).unwrap();

    assert_eq!(
        decoded,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}})
    );
}

#[test]
fn deployment_pod_template_fields_are_converted() {
    let selector = LabelSelector {
        match_labels: labels(&[("app", "web")]),
        match_expressions: vec![LabelSelectorRequirement {
            key: s("tier"),
            operator: s("In"),
            values: vec!["front".into()],
        }],
    };
    let container = Container {
        name: s("web"),
        image: s("nginx:1.27"),
        command: vec!["nginx".into()],
        args: vec!["-g".into(), "daemon off;".into()],
        ports: vec![ContainerPort {
            name: s("http"),
            host_port: Some(0),
            container_port: Some(80),
            protocol: s("TCP"),
            host_ip: s(""),
        }],
        env: vec![
            EnvVar {
                name: s("MODE"),
                value: s("prod"),
                value_from: None,
            },
            EnvVar {
                name: s("POD"),
                value: s(""),
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector {
                        api_version: s("v1"),
                        field_path: s("metadata.name"),
                    }),
                    ..Default::default()
                }),
            },
        ],
        resources: Some(ResourceRequirements {
            limits: [("memory".to_string(), quantity("128Mi"))].into(),
            requests: [("cpu".to_string(), quantity("100m"))].into(),
            claims: vec![],
        }),
        termination_message_path: s("/dev/termination-log"),
        termination_message_policy: s("File"),
        image_pull_policy: s("IfNotPresent"),
        stdin: Some(false),
        tty: Some(true),
        ..Default::default()
    };
    let deployment = Deployment {
        metadata: Some(ObjectMeta {
            name: s("web"),
            ..Default::default()
        }),
        spec: Some(DeploymentSpec {
            replicas: Some(0),
            selector: Some(selector),
            template: Some(PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: labels(&[("app", "web")]),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![container],
                    restart_policy: s("Always"),
                    termination_grace_period_seconds: Some(30),
                    dns_policy: s("ClusterFirst"),
                    scheduler_name: s("default-scheduler"),
                    security_context: Some(PodSecurityContext {
                        run_as_non_root: Some(true),
                        supplemental_groups: vec![1000, 2000],
                        ..Default::default()
                    }),
                    host_network: Some(false),
                    ..Default::default()
                }),
            }),
            strategy: Some(DeploymentStrategy {
                r#type: s("RollingUpdate"),
                rolling_update: Some(RollingUpdateDeployment {
                    max_unavailable: string("25%"),
                    max_surge: int(1),
                }),
            }),
            min_ready_seconds: Some(0),
            revision_history_limit: Some(10),
            paused: Some(false),
            progress_deadline_seconds: Some(600),
        }),
        status: None,
    };

    let decoded = decode(&envelope("apps/v1", "Deployment", &deployment)).unwrap();

    assert_eq!(
        decoded,
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 0,
                "selector": {
                    "matchLabels": {"app": "web"},
                    "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}]
                },
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "containers": [{
                            "name": "web",
                            "image": "nginx:1.27",
                            "command": ["nginx"],
                            "args": ["-g", "daemon off;"],
                            "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}],
                            "env": [
                                {"name": "MODE", "value": "prod"},
                                {"name": "POD", "valueFrom": {
                                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}
                                }}
                            ],
                            "resources": {"limits": {"memory": "128Mi"}, "requests": {"cpu": "100m"}},
                            "terminationMessagePath": "/dev/termination-log",
                            "terminationMessagePolicy": "File",
                            "imagePullPolicy": "IfNotPresent",
                            "tty": true
                        }],
                        "restartPolicy": "Always",
                        "terminationGracePeriodSeconds": 30,
                        "dnsPolicy": "ClusterFirst",
                        "securityContext": {"runAsNonRoot": true, "supplementalGroups": [1000, 2000]},
                        "schedulerName": "default-scheduler"
                    }
                },
                "strategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 1}
                },
                "revisionHistoryLimit": 10,
                "progressDeadlineSeconds": 600
            }
        })
    );
}

#[test]
fn service_target_port_may_be_a_name() {
    let service = Service {
        metadata: Some(ObjectMeta {
            name: s("web"),
            ..Default::default()
        }),
        spec: Some(ServiceSpec {
            ports: vec![ServicePort {
                name: s("http"),
                protocol: s("TCP"),
                port: Some(80),
                target_port: string("http"),
                node_port: Some(0),
                ..Default::default()
            }],
            selector: labels(&[("app", "web")]),
            cluster_ip: s(""),
            r#type: s("ClusterIP"),
            ..Default::default()
        }),
        status: None,
    };

    let decoded = decode(&envelope("v1", "Service", &service)).unwrap();

    assert_eq!(
        decoded["spec"],
        json!({
            "ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": "http"}],
            "selector": {"app": "web"},
            "type": "ClusterIP"
        })
    );
}

#[test]
fn certificate_signing_request_keeps_status_and_encodes_bytes() {
    let csr = CertificateSigningRequest {
        metadata: Some(ObjectMeta {
            name: s("node-csr"),
            ..Default::default()
        }),
        spec: Some(CertificateSigningRequestSpec {
            request: Some(b"-----BEGIN".to_vec()),
            signer_name: s("kubernetes.io/kube-apiserver-client"),
            expiration_seconds: Some(3600),
            usages: vec!["client auth".into()],
            username: s("alice"),
            groups: vec!["devs".into()],
            ..Default::default()
        }),
        status: Some(CertificateSigningRequestStatus {
            conditions: vec![CertificateSigningRequestCondition {
                r#type: s("Approved"),
                status: s("True"),
                reason: s("KubectlApprove"),
                message: s("approved"),
                last_update_time: Some(Time {
                    seconds: Some(SECONDS),
                    nanos: Some(0),
                }),
                last_transition_time: Some(Time::default()),
            }],
            certificate: Some(b"CERT".to_vec()),
        }),
    };

    let decoded = decode(&envelope(
        "certificates.k8s.io/v1",
        "CertificateSigningRequest",
        &csr,
    ))
    .unwrap();

    assert_eq!(
        decoded,
        json!({
            "apiVersion": "certificates.k8s.io/v1",
            "kind": "CertificateSigningRequest",
            "metadata": {"name": "node-csr"},
            "spec": {
                "request": "LS0tLS1CRUdJTg==",
                "signerName": "kubernetes.io/kube-apiserver-client",
                "expirationSeconds": 3600,
                "usages": ["client auth"],
                "username": "alice",
                "groups": ["devs"]
            },
            "status": {
                "conditions": [{
                    "type": "Approved",
                    "status": "True",
                    "reason": "KubectlApprove",
                    "message": "approved",
                    "lastUpdateTime": "2024-05-06T07:08:09Z"
                }],
                "certificate": "Q0VSVA=="
            }
        })
    );
}

#[test]
fn lease_times_keep_microseconds() {
    let lease = Lease {
        metadata: Some(ObjectMeta {
            name: s("leader"),
            ..Default::default()
        }),
        spec: Some(LeaseSpec {
            holder_identity: s("pod-a"),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime {
                seconds: Some(SECONDS),
                nanos: Some(123_456_000),
            }),
            ..Default::default()
        }),
    };

    let decoded = decode(&envelope("coordination.k8s.io/v1", "Lease", &lease)).unwrap();

    assert_eq!(
        decoded["spec"],
        json!({
            "holderIdentity": "pod-a",
            "leaseDurationSeconds": 15,
            "renewTime": "2024-05-06T07:08:09.123456Z"
        })
    );
}

#[test]
fn delete_options_decode_under_any_group_version() {
    let options = DeleteOptions {
        grace_period_seconds: Some(0),
        propagation_policy: s("Foreground"),
        ..Default::default()
    };

    let decoded = decode(&envelope("apps/v1", "DeleteOptions", &options)).unwrap();

    assert_eq!(
        decoded,
        json!({
            "apiVersion": "apps/v1",
            "kind": "DeleteOptions",
            "gracePeriodSeconds": 0,
            "propagationPolicy": "Foreground"
        })
    );
}

#[test]
fn unsupported_kind_names_it_and_suggests_json() {
    let claim = ResourceClaim::default();

    let error = decode(&envelope("resource.k8s.io/v1", "ResourceClaim", &claim)).unwrap_err();

    assert!(matches!(error, ProtobufError::UnsupportedKind { .. }));
    let message = error.to_string();
    assert!(
        message.contains("ResourceClaim (resource.k8s.io/v1)"),
        "{message}"
    );
    assert!(message.contains("send it as JSON or YAML instead"), "{message}");
    assert!(
        message.contains("`kubectl create -f file.yaml` / `kubectl apply -f`"),
        "{message}"
    );
}

#[test]
fn body_without_magic_is_rejected() {
    let error = decode(br#"{"kind":"ConfigMap"}"#).unwrap_err();
    assert!(matches!(error, ProtobufError::MissingMagic), "{error}");
}

#[test]
fn malformed_envelope_is_rejected() {
    let error = decode(b"k8s\0\xff\xff\xff").unwrap_err();
    assert!(matches!(error, ProtobufError::Envelope(_)), "{error}");
}

#[test]
fn envelope_without_type_meta_is_rejected() {
    let body = [
        MAGIC,
        &Unknown {
            raw: Some(vec![]),
            ..Default::default()
        }
        .encode_to_vec(),
    ]
    .concat();
    let error = decode(&body).unwrap_err();
    assert!(matches!(error, ProtobufError::MissingTypeMeta), "{error}");
}

#[test]
fn compressed_payload_is_rejected() {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: s("v1"),
            kind: s("ConfigMap"),
        }),
        raw: Some(vec![]),
        content_encoding: s("gzip"),
        content_type: s(""),
    };
    let error = decode(&[MAGIC, &unknown.encode_to_vec()].concat()).unwrap_err();
    assert!(
        matches!(error, ProtobufError::UnsupportedPayload { .. }),
        "{error}"
    );
}

#[test]
fn malformed_message_names_its_kind() {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: s("v1"),
            kind: s("ConfigMap"),
        }),
        raw: Some(vec![0x0a, 0xff]),
        ..Default::default()
    };
    let error = decode(&[MAGIC, &unknown.encode_to_vec()].concat()).unwrap_err();
    assert!(matches!(error, ProtobufError::Message { .. }), "{error}");
    assert!(error.to_string().contains("ConfigMap (v1)"), "{error}");
}
