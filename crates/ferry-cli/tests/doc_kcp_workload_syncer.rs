//! kcp's workload syncer document, on Ferry, in its order: its SyncTarget applied
//! with `kubectl apply` (strict) and shown, the syncer run with its flags, the
//! health check (`status.conditions[*].type`, the status it documents), its three
//! examples (a Deployment whose status comes back, a LoadBalancer Service whose
//! ingress comes back, a ConfigMap and a Secret), the copies' `syncer.kcp.io/*`
//! annotations, and its `--v` levels. Substitutions: hubs stand in for the kcp
//! server and the physical cluster, `ferry workload-syncer` for `./workload-syncer`,
//! and the workspace binds compute first (`kubectl ferry bind compute`), as on kcp.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::kubectl_async::Kubectl;
use ferry_testkit::{client_from, eventually, TestHub};
use serde_json::Value;

/// "Creating a SyncTarget", as the document writes it.
const SYNC_TARGET: &str = r#"apiVersion: workload.kcp.io/v1alpha1
kind: SyncTarget
metadata:
  name: my-cluster
  labels:
    location: "us-west-2"
    environment: "production"
spec:
  workloadCluster:
    name: "production-us-west-2"
    endpoint: "https://k8s-cluster.us-west-2.example.com"
  supportedAPIExports:
  - export: "kubernetes"
    resource: "apps/v1/deployments"
  - export: "kubernetes" 
    resource: "v1/services"
  capabilities:
  - type: "compute"
    resource: "cpu"
    capacity: "1000"
  - type: "compute"
    resource: "memory"
    capacity: "4000Gi"
"#;

/// Example 1.
const DEPLOYMENT: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: nginx-app
  namespace: default
spec:
  replicas: 3
  selector:
    matchLabels:
      app: nginx
  template:
    metadata:
      labels:
        app: nginx
    spec:
      containers:
      - name: nginx
        image: nginx:1.20
        ports:
        - containerPort: 80
"#;

/// Example 2.
const SERVICE: &str = r#"apiVersion: v1
kind: Service
metadata:
  name: nginx-service
  namespace: default
spec:
  type: LoadBalancer
  selector:
    app: nginx
  ports:
  - port: 80
    targetPort: 80
"#;

/// Example 3.
const CONFIG: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: app-config
  namespace: default
data:
  database_url: "postgres://db.example.com:5432/myapp"
  log_level: "info"
---
apiVersion: v1
kind: Secret
metadata:
  name: app-secrets
  namespace: default
type: Opaque
data:
  db-password: cGFzc3dvcmQ=  # base64 encoded "password"
"#;

/// An Ingress: in kcp's `kubernetes` export, but not among the resources the
/// document's SyncTarget lists.
const INGRESS: &str = r#"apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
  namespace: default
spec:
  defaultBackend:
    service: {name: nginx-service, port: {number: 80}}
"#;

/// `./workload-syncer` with the document's "Advanced Configuration" flags (the
/// heartbeat every second, so the test is quick) at `-v`, its log in `log`.
fn workload_syncer(kcp: &Path, cluster: &Path, uid: &str, v: u8, log: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args([
            "workload-syncer",
            "--sync-target-name=my-cluster",
            &format!("--sync-target-uid={uid}"),
            "--workspace-cluster=root:my-workspace",
            &format!("--kcp-kubeconfig={}", kcp.display()),
            &format!("--cluster-kubeconfig={}", cluster.display()),
            "--resync-period=30s",
            "--workers=4",
            "--heartbeat-period=1s",
            &format!("--v={v}"),
        ])
        .env_remove("FERRY_LOG")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap()
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The SyncTarget's status, as `kubectl get synctarget my-cluster -o jsonpath='{.status}'` prints it.
async fn status(kcp: &Kubectl) -> Value {
    let text = kcp
        .ok(&["get", "synctarget", "my-cluster", "-o", "jsonpath={.status}"])
        .await;
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

fn condition<'a>(status: &'a Value, type_: &str) -> Option<&'a Value> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// The three names of the heartbeat time say the same.
fn heartbeat_consistent(status: &Value) -> bool {
    let at = &status["lastSyncerHeartbeatTime"];
    at.is_string() && status["lastHeartbeatTime"] == *at && status["heartbeat"]["lastHeartbeat"] == *at
}

#[tokio::test(flavor = "multi_thread")]
async fn the_kcp_workload_syncer_document_works_as_written() {
    // As `ferry hub` runs (with kcp's root:compute), with a short heartbeat
    // threshold so that "after the syncer stops" comes soon.
    let kcp_hub = TestHub::start_with(|o| {
        o.compute_workspace = true;
        o.sync_target_heartbeat_threshold = Duration::from_secs(3);
    })
    .await;
    let physical_hub = TestHub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let kcp = Kubectl::admin_of(&kcp_hub, dir, "kcp.kubeconfig");
    let physical = Kubectl::admin_of(&physical_hub, dir, "physical.kubeconfig");
    let physical_client = client_from(physical_hub.kubeconfig(), None).await;
    let _kubelet = ferry_cli::quickstart::simulate_kubelet(physical_client.clone());
    let _cloud = ferry_cli::quickstart_tmc::simulate_load_balancer(physical_client, "192.0.2.10");
    kcp.ok(&["ferry", "ws", "create", "my-workspace", "--enter"])
        .await;

    // Creating a SyncTarget: the document's YAML, as strict `kubectl apply` takes it.
    let out = kcp.ok_with(&["apply", "-f", "-"], Some(SYNC_TARGET)).await;
    assert!(
        out.contains("synctarget.workload.kcp.io/my-cluster created"),
        "{out}"
    );
    let table = kcp.ok(&["get", "synctarget", "my-cluster"]).await;
    for shown in [
        "CLUSTER",
        "production-us-west-2",
        "apps/v1/deployments v1/services",
        "cpu memory",
    ] {
        assert!(table.contains(shown), "{shown} not in\n{table}");
    }
    let spec: Value = serde_json::from_str(
        &kcp.ok(&["get", "synctarget", "my-cluster", "-o", "jsonpath={.spec}"])
            .await,
    )
    .unwrap();
    assert_eq!(
        spec["workloadCluster"]["endpoint"],
        "https://k8s-cluster.us-west-2.example.com"
    );
    assert_eq!(spec["capabilities"][1]["capacity"], "4000Gi");
    assert_eq!(spec["supportedAPIExports"][1]["resource"], "v1/services");
    kcp.ok(&["ferry", "bind", "compute", "root:my-workspace"]).await;

    // Running the syncer, its uid read as the document does.
    let uid = kcp
        .ok(&[
            "get",
            "synctarget",
            "my-cluster",
            "-o",
            "jsonpath={.metadata.uid}",
        ])
        .await;
    let log2 = dir.join("syncer-v2.log");
    let syncer = workload_syncer(kcp_hub.kubeconfig(), physical_hub.kubeconfig(), &uid, 2, &log2);

    // Health monitoring: the expected conditions, and the status it documents.
    let types = eventually(60, "Ready, SyncerReady and HeartbeatReady", || async {
        let types = kcp
            .ok(&[
                "get",
                "synctarget",
                "my-cluster",
                "-o",
                "jsonpath={.status.conditions[*].type}",
            ])
            .await;
        let s = status(&kcp).await;
        let ready = condition(&s, "Ready").is_some_and(|c| c["status"] == "True");
        (ready
            && ["Ready", "SyncerReady", "HeartbeatReady"]
                .iter()
                .all(|t| types.split(' ').any(|x| x == *t)))
        .then_some(types)
    })
    .await;
    assert!(
        types.contains("HeartbeatHealthy"),
        "kcp's condition stays: {types}"
    );
    kcp.ok(&[
        "wait",
        "--for=condition=Ready",
        "synctarget/my-cluster",
        "--timeout=30s",
    ])
    .await;
    let s = eventually(30, "a second heartbeat", || async {
        let s = status(&kcp).await;
        (s["heartbeat"]["count"].as_i64() >= Some(2)).then_some(s)
    })
    .await;
    assert!(
        s["syncerIdentifier"]
            .as_str()
            .is_some_and(|id| id.starts_with("syncer-")),
        "{s}"
    );
    assert!(heartbeat_consistent(&s), "{s}");
    assert_eq!(s["heartbeat"]["errors"], 0, "{s}");
    let ready = condition(&s, "Ready").unwrap();
    assert_eq!(ready["reason"], "SyncTargetReady", "{s}");
    assert_eq!(ready["message"], "SyncTarget is ready and operational", "{s}");
    let syncer_ready = condition(&s, "SyncerReady").unwrap();
    assert_eq!(syncer_ready["reason"], "SyncerConnected", "{s}");
    assert_eq!(condition(&s, "HeartbeatReady").unwrap()["status"], "True");
    // Only the listed resources of the export are synced, each accepted once
    // the syncer imported the cluster's schema (what the syncer waits for).
    let accepted = |s: &Value| {
        let mut accepted: Vec<String> = s["syncedResources"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| r["state"] == "Accepted")
            .filter_map(|r| r["resource"].as_str().map(String::from))
            .collect();
        accepted.sort();
        accepted
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let s = loop {
        let s = status(&kcp).await;
        if accepted(&s) == ["deployments", "services"] {
            break s;
        }
        if tokio::time::Instant::now() > deadline {
            let imports = kcp.ok(&["get", "apiresourceimports", "-o", "yaml"]).await;
            panic!("deployments and services not both Accepted after 60s:\n{s}\nimports:\n{imports}\nsyncer log:\n{}", read(&log2));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let listed: Vec<&str> = s["syncedResources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["resource"].as_str())
        .collect();
    assert_eq!(listed.len(), 2, "only the listed resources: {s}");

    // Example 1: the Deployment runs on the cluster and its status comes back.
    let out = kcp.ok_with(&["apply", "-f", "-"], Some(DEPLOYMENT)).await;
    assert!(out.contains("deployment.apps/nginx-app created"), "{out}");
    let namespace = eventually(60, "nginx-app on the physical cluster", || async {
        let rows = physical
            .ok(&[
                "get",
                "deployments",
                "-A",
                "--no-headers",
                "-o",
                "custom-columns=NS:.metadata.namespace,NAME:.metadata.name",
            ])
            .await;
        rows.lines()
            .find(|l| l.split_whitespace().nth(1) == Some("nginx-app"))
            .and_then(|l| l.split_whitespace().next())
            .map(String::from)
    })
    .await;
    assert!(namespace.starts_with("kcp-"), "{namespace}");
    eventually(60, "the Deployment's status back in kcp", || async {
        let available = kcp
            .ok(&[
                "get",
                "deployments",
                "nginx-app",
                "-o",
                "jsonpath={.status.availableReplicas}",
            ])
            .await;
        (available == "3").then_some(())
    })
    .await;

    // Example 2: the LoadBalancer's address comes back.
    kcp.ok_with(&["apply", "-f", "-"], Some(SERVICE)).await;
    eventually(60, "the Service's ingress back in kcp", || async {
        let ip = kcp
            .ok(&[
                "get",
                "service",
                "nginx-service",
                "-o",
                "jsonpath={.status.loadBalancer.ingress[0].ip}",
            ])
            .await;
        (ip == "192.0.2.10").then_some(())
    })
    .await;

    // Example 3: the ConfigMap and the Secret land.
    let out = kcp.ok_with(&["apply", "-f", "-"], Some(CONFIG)).await;
    assert!(
        out.contains("configmap/app-config created") && out.contains("secret/app-secrets created"),
        "{out}"
    );
    eventually(60, "app-config and app-secrets on the cluster", || async {
        let cm = physical
            .run(&["get", "configmap", "app-config", "-n", &namespace])
            .await;
        let secret = physical
            .run(&["get", "secret", "app-secrets", "-n", &namespace])
            .await;
        (cm.status.success() && secret.status.success()).then_some(())
    })
    .await;

    // A resource the SyncTarget does not list is not scheduled there: the Ingress
    // stays unlabelled while a ConfigMap created after it is scheduled.
    kcp.ok_with(&["apply", "-f", "-"], Some(INGRESS)).await;
    kcp.ok(&["create", "configmap", "after-ingress"]).await;
    eventually(30, "the later ConfigMap scheduled", || async {
        let labels = kcp
            .ok(&[
                "get",
                "configmap",
                "after-ingress",
                "-o",
                "jsonpath={.metadata.labels}",
            ])
            .await;
        labels.contains("state.workload.kcp.io/").then_some(())
    })
    .await;
    let labels = kcp
        .ok(&["get", "ingress", "web", "-o", "jsonpath={.metadata.labels}"])
        .await;
    assert!(!labels.contains("state.workload.kcp.io/"), "{labels}");
    let ingresses = physical.ok(&["get", "ingresses", "-A"]).await;
    assert!(!ingresses.contains("web"), "{ingresses}");

    // Debug commands: the copy's tracking annotations.
    let yaml = physical
        .ok(&["get", "deployment", "nginx-app", "-n", &namespace, "-o", "yaml"])
        .await;
    let syncer_lines: Vec<&str> = yaml.lines().filter(|l| l.contains("syncer.kcp.io/")).collect();
    let annotation = |key: &str| {
        syncer_lines
            .iter()
            .find_map(|l| l.trim().strip_prefix(&format!("syncer.kcp.io/{key}: ")))
            .map(|v| v.trim_matches(|c| c == '"' || c == '\'').to_string())
    };
    assert_eq!(annotation("sync-target").as_deref(), Some("my-cluster"), "{yaml}");
    assert_eq!(
        annotation("workspace").as_deref(),
        Some("root:my-workspace"),
        "{yaml}"
    );
    let last_sync = annotation("last-sync").expect("syncer.kcp.io/last-sync");
    assert!(
        last_sync.len() == "2024-01-15T10:30:00Z".len()
            && last_sync.ends_with('Z')
            && &last_sync[10..11] == "T",
        "last-sync {last_sync:?} is not an RFC 3339 time"
    );

    // Logs at --v=2: each sync operation (a copy written, a status returned), no
    // per-event lines.
    let text = read(&log2);
    assert!(
        text.lines()
            .any(|l| l.contains("copy") && l.contains("nginx-app")),
        "no sync operation logged at --v=2:\n{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("wrote status back") && l.contains("nginx-service")),
        "no status update logged at --v=2:\n{text}"
    );
    assert!(
        !text.contains("sync event"),
        "sync events logged at --v=2:\n{text}"
    );

    // After the syncer stops: every heartbeat condition says so, consistently.
    stop(syncer);
    let s = eventually(30, "the heartbeat going stale", || async {
        let s = status(&kcp).await;
        condition(&s, "Ready")
            .is_some_and(|c| c["status"] == "False")
            .then_some(s)
    })
    .await;
    for t in ["HeartbeatReady", "HeartbeatHealthy"] {
        let c = condition(&s, t).unwrap();
        assert_eq!(c["status"], "False", "{s}");
        assert_eq!(c["reason"], "ErrorHeartbeat", "{s}");
    }
    assert_eq!(condition(&s, "Ready").unwrap()["reason"], "ErrorHeartbeat", "{s}");
    assert!(heartbeat_consistent(&s), "{s}");

    // Troubleshooting, `--v=3`: every sync event, and a restart that reconciles
    // everything writes nothing: last-sync and the copy's generation stay.
    let log3 = dir.join("syncer-v3.log");
    let syncer = workload_syncer(kcp_hub.kubeconfig(), physical_hub.kubeconfig(), &uid, 3, &log3);
    eventually(60, "nginx-app reconciled again", || async {
        read(&log3)
            .lines()
            .any(|l| l.contains("sync event: reconciled") && l.contains("nginx-app"))
            .then_some(())
    })
    .await;
    let copy: Value = serde_json::from_str(
        &physical
            .ok(&["get", "deployment", "nginx-app", "-n", &namespace, "-o", "json"])
            .await,
    )
    .unwrap();
    assert_eq!(
        copy["metadata"]["annotations"]["syncer.kcp.io/last-sync"],
        last_sync.as_str(),
        "the copy was written again"
    );
    assert_eq!(copy["metadata"]["generation"], 1, "the copy was written again");
    let s = eventually(30, "Ready again, under a new syncer", || async {
        let s = status(&kcp).await;
        condition(&s, "Ready")
            .is_some_and(|c| c["status"] == "True")
            .then_some(s)
    })
    .await;
    assert!(heartbeat_consistent(&s), "{s}");
    stop(syncer);

    // `--v=4`: debug lines beyond the sync events (each heartbeat, for one).
    let log4 = dir.join("syncer-v4.log");
    let syncer = workload_syncer(kcp_hub.kubeconfig(), physical_hub.kubeconfig(), &uid, 4, &log4);
    eventually(60, "debug lines", || async {
        read(&log4)
            .lines()
            .any(|l| l.contains("DEBUG") && l.contains("heartbeat sent"))
            .then_some(())
    })
    .await;
    stop(syncer);
}
