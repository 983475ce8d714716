//! Shared helpers for the end-to-end tests: hubs standing in for the upstream workspace
//! server and the workload clusters, syncers run in-process, dynamic object access, and
//! polling with a deadline.
#![allow(dead_code)]

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use ferry_hub::testing::TestHub;
use ferry_syncer::{RunningSyncer, SyncerOptions};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A kube-rs config for `hub`; `workspace` adds the `/clusters/<path>` prefix.
pub async fn kube_config(hub: &TestHub, workspace: Option<&str>) -> kube::Config {
    let kc = Kubeconfig::read_from(hub.kubeconfig()).expect("kubeconfig parses");
    let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("config");
    if let Some(ws) = workspace {
        config.cluster_url = format!("{}/clusters/{ws}", hub.url()).parse().expect("url");
    }
    config
}

/// Objects on one server (a workspace or a whole hub), addressed dynamically.
#[derive(Clone)]
pub struct Cluster {
    pub client: kube::Client,
}

impl Cluster {
    pub async fn of(hub: &TestHub, workspace: Option<&str>) -> Cluster {
        Cluster {
            client: kube::Client::try_from(kube_config(hub, workspace).await).expect("client"),
        }
    }

    pub fn api(&self, ar: &ApiResource, ns: Option<&str>) -> Api<DynamicObject> {
        match ns {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, ar),
            None => Api::all_with(self.client.clone(), ar),
        }
    }

    /// Creates `obj` (namespace taken from its metadata).
    pub async fn create(&self, ar: &ApiResource, obj: Value) -> Value {
        let ns = obj["metadata"]["namespace"].as_str().map(str::to_owned);
        let dynamic: DynamicObject = serde_json::from_value(obj).expect("object");
        let made = self
            .api(ar, ns.as_deref())
            .create(&PostParams::default(), &dynamic)
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "creating {}: {e}",
                    dynamic.metadata.name.clone().unwrap_or_default()
                )
            });
        serde_json::to_value(made).unwrap()
    }

    pub async fn get(&self, ar: &ApiResource, ns: Option<&str>, name: &str) -> Option<Value> {
        match self.api(ar, ns).get(name).await {
            Ok(o) => Some(serde_json::to_value(o).unwrap()),
            Err(kube::Error::Api(s)) if s.code == 404 => None,
            Err(e) => panic!("getting {name}: {e}"),
        }
    }

    pub async fn list(&self, ar: &ApiResource, ns: Option<&str>) -> Vec<Value> {
        self.api(ar, ns)
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .into_iter()
            .map(|o| serde_json::to_value(o).unwrap())
            .collect()
    }

    pub async fn merge(&self, ar: &ApiResource, ns: Option<&str>, name: &str, patch: Value) -> Value {
        let made = self
            .api(ar, ns)
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap_or_else(|e| panic!("patching {name}: {e}"));
        serde_json::to_value(made).unwrap()
    }

    /// Writes `status` through the `/status` subresource, as a controller would.
    pub async fn set_status(&self, ar: &ApiResource, ns: Option<&str>, name: &str, status: Value) -> Value {
        let made = self
            .api(ar, ns)
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await
            .unwrap_or_else(|e| panic!("writing status of {name}: {e}"));
        serde_json::to_value(made).unwrap()
    }

    pub async fn delete(&self, ar: &ApiResource, ns: Option<&str>, name: &str) {
        match self.api(ar, ns).delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => panic!("deleting {name}: {e}"),
        }
    }
}

pub fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

pub fn namespaces() -> ApiResource {
    ar("", "v1", "Namespace", "namespaces")
}
pub fn configmaps() -> ApiResource {
    ar("", "v1", "ConfigMap", "configmaps")
}
pub fn secrets() -> ApiResource {
    ar("", "v1", "Secret", "secrets")
}
pub fn events() -> ApiResource {
    ar("", "v1", "Event", "events")
}
pub fn deployments() -> ApiResource {
    ar("apps", "v1", "Deployment", "deployments")
}
pub fn crds() -> ApiResource {
    ar(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
    )
}
pub fn syncer_configs() -> ApiResource {
    ar("edge.kubestellar.io", "v2alpha1", "SyncerConfig", "syncerconfigs")
}
pub fn widgets() -> ApiResource {
    ar("example.com", "v1", "Widget", "widgets")
}
pub fn reports() -> ApiResource {
    ar("example.com", "v1", "Report", "reports")
}
pub fn gadgets() -> ApiResource {
    ar("example.com", "v1", "Gadget", "gadgets")
}

/// A namespaced CRD in group `example.com`, version v1, with a status subresource.
pub fn crd(kind: &str, plural: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": format!("{plural}.example.com") },
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": { "kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List") },
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": { "status": {} },
                "schema": { "openAPIV3Schema": { "type": "object", "x-kubernetes-preserve-unknown-fields": true } }
            }]
        }
    })
}

/// Creates workspace `root:<name>` on `hub` with Ferry's CRDs installed (a mailbox
/// workspace), and returns its path.
pub async fn mailbox(hub: &TestHub, name: &str) -> String {
    let root = Cluster::of(hub, Some("root")).await;
    root.create(
        &ar("tenancy.kcp.io", "v1alpha1", "Workspace", "workspaces"),
        json!({ "apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": { "name": name } }),
    )
    .await;
    let path = format!("root:{name}");
    let ws = Cluster::of(hub, Some(&path)).await;
    for crd in ferry_api::all_crds() {
        ws.create(&crds(), serde_json::to_value(crd).unwrap()).await;
    }
    path
}

/// The usual stage: an upstream hub with mailbox workspace `root:mb`, and a hub
/// standing in for the workload cluster.
pub struct Stage {
    pub up: TestHub,
    pub wec: TestHub,
    /// The mailbox's path (`root:mb`).
    pub ws: String,
    /// The mailbox workspace.
    pub mb: Cluster,
    /// The workload cluster.
    pub down: Cluster,
}

impl Stage {
    pub async fn start() -> Stage {
        let up = TestHub::start().await;
        let wec = TestHub::start().await;
        let ws = mailbox(&up, "mb").await;
        let mb = Cluster::of(&up, Some(&ws)).await;
        let down = Cluster::of(&wec, None).await;
        Stage {
            up,
            wec,
            ws,
            mb,
            down,
        }
    }
}

pub fn namespace(name: &str) -> Value {
    json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": name } })
}

pub fn configmap(ns: &str, name: &str, data: Value) -> Value {
    json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": name, "namespace": ns }, "data": data })
}

/// SyncerConfig `the-one` in `mb`, downsyncing every object of each
/// `(group, resource)` (at `v1`) in namespace `default`.
pub async fn sync_in_default(mb: &Cluster, resources: &[(&str, &str)]) {
    let resources: Vec<Value> = resources
        .iter()
        .map(|(group, resource)| json!({ "group": group, "apiVersion": "v1", "resource": resource }))
        .collect();
    mb.create(
        &syncer_configs(),
        syncer_config(
            "the-one",
            json!({ "namespaceScope": { "namespaces": ["default"], "resources": resources } }),
        ),
    )
    .await;
}

pub fn syncer_config(name: &str, spec: Value) -> Value {
    json!({ "apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "SyncerConfig", "metadata": { "name": name }, "spec": spec })
}

/// Options for a syncer from `ws` on `up` to all of `down`, with test-speed timers.
pub async fn syncer_options(up: &TestHub, ws: &str, down: &TestHub, name: &str) -> SyncerOptions {
    let mut opts = SyncerOptions::new(
        kube_config(up, Some(ws)).await,
        kube_config(down, None).await,
        name,
    );
    opts.qps = Some(0.0);
    opts.workers = 4;
    opts.heartbeat_period = Duration::from_millis(500);
    opts.metrics_address = Some("127.0.0.1:0".parse().unwrap());
    opts.discovery_refresh = Duration::from_millis(300);
    opts.probe_period = Duration::from_millis(100);
    opts.min_backoff = Duration::from_millis(20);
    opts.max_backoff = Duration::from_millis(500);
    opts
}

pub async fn start_syncer(up: &TestHub, ws: &str, down: &TestHub, name: &str) -> RunningSyncer {
    init_logs();
    ferry_syncer::start(syncer_options(up, ws, down, name).await)
        .await
        .expect("syncer starts")
}

/// Logs to the test output when `FERRY_TEST_LOG` is set (e.g. `ferry_syncer=debug`).
pub fn init_logs() {
    if let Ok(filter) = std::env::var("FERRY_TEST_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_test_writer()
            .try_init();
    }
}

/// Waits until `/readyz` is true.
pub async fn wait_ready(syncer: &RunningSyncer) {
    eventually(15, "the syncer to be ready", || async {
        syncer.is_ready().then_some(())
    })
    .await;
}

/// Poll `check` every 20 ms until it returns `Some`, or panic after `secs`.
pub async fn eventually<T, F, Fut>(secs: u64, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out after {secs}s waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits for an object to exist and satisfy `pred`; returns it.
pub async fn wait_for(
    cluster: &Cluster,
    ar: &ApiResource,
    ns: Option<&str>,
    name: &str,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    eventually(15, what, || async {
        cluster.get(ar, ns, name).await.filter(|o| pred(o))
    })
    .await
}

/// Waits for an object to be gone.
pub async fn wait_gone(cluster: &Cluster, ar: &ApiResource, ns: Option<&str>, name: &str, what: &str) {
    eventually(15, what, || async {
        cluster.get(ar, ns, name).await.is_none().then_some(())
    })
    .await;
}

/// `GET http://addr/path`: status code and body.
pub async fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let code = response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = response.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (code, body)
}

pub fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj["metadata"]["annotations"][key].as_str()
}

pub fn label<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj["metadata"]["labels"][key].as_str()
}

pub fn resource_version(obj: &Value) -> String {
    obj["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// The condition of `type_` on a SyncerConfig.
pub fn condition(config: &Value, type_: &str) -> Option<Value> {
    config["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .cloned()
}

/// The syncer's log as text, for tests that check what a fault makes it say. Install it
/// on every thread of the test's runtime with [`LogCapture::runtime`].
#[derive(Clone)]
pub struct LogCapture {
    buffer: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    dispatch: tracing::Dispatch,
}

impl LogCapture {
    /// Captures events that `filter` (an `EnvFilter` directive such as
    /// `ferry_syncer=info,kube=warn`) lets through, one line each, without colours.
    pub fn new(filter: &str) -> LogCapture {
        let buffer = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let writer = {
            let buffer = buffer.clone();
            move || CaptureWriter(buffer.clone())
        };
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_ansi(false)
            .with_writer(writer)
            .finish();
        LogCapture {
            buffer,
            dispatch: tracing::Dispatch::new(subscriber),
        }
    }

    /// A multi-threaded runtime (two workers, as CI has two cores) whose threads all log
    /// here, so the hubs and the syncer it runs are captured without a global subscriber.
    pub fn runtime(&self) -> tokio::runtime::Runtime {
        let dispatch = self.dispatch.clone();
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .on_thread_start(move || {
                // The thread ends with the runtime; its default lives as long.
                std::mem::forget(tracing::dispatcher::set_default(&dispatch));
            })
            .build()
            .expect("runtime")
    }

    /// Every line so far.
    pub fn lines(&self) -> Vec<String> {
        let buffer = self.buffer.lock().unwrap();
        String::from_utf8_lossy(&buffer)
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// The WARN and ERROR lines after the first `skip` lines.
    pub fn warnings_after(&self, skip: usize) -> Vec<String> {
        self.lines()
            .into_iter()
            .skip(skip)
            .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
            .collect()
    }
}

struct CaptureWriter(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for CaptureWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        if std::env::var_os("FERRY_TEST_LOG").is_some() {
            eprint!("{}", String::from_utf8_lossy(bytes));
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `<reason>: <message>` of each Event in `namespace` of `ws` about the object `name`.
pub async fn events_about(ws: &Cluster, namespace: &str, name: &str) -> Vec<String> {
    ws.list(&events(), Some(namespace))
        .await
        .into_iter()
        .filter(|e| e["involvedObject"]["name"] == name)
        .map(|e| {
            format!(
                "{}: {}",
                e["reason"].as_str().unwrap_or_default(),
                e["message"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

/// `syncer_drift_corrections_total` of `resource` (`apps/v1/deployments`) in the
/// metrics text `metrics`; 0 before the first.
pub fn drift_corrections(metrics: &str, resource: &str) -> u64 {
    let prefix = format!("syncer_drift_corrections_total{{resource=\"{resource}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}
