//! The corpus: the install manifests of real open-source projects (kept with their
//! licences in `tests/data/corpus/`, see its README) written once upstream and placed
//! through each profile onto hubs standing in for distinct clusters (each with its own
//! service and node-port ranges). Every object lands, and each copy equals its source
//! less exactly what README's "What a copy never carries" lists ([`intent`] encodes
//! that list); no refusal is recorded anywhere.

/// The CLI tests' kit for registering KubeStellar syncers.
#[path = "common/edge_syncer.rs"]
mod edge_syncer;

use std::collections::BTreeMap;
use std::time::Duration;

use ferry_testkit::edge;
use ferry_testkit::{eventually, TestHub};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::Scope;
use serde_json::{json, Map, Value};

/// Where the corpus lives.
const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/corpus");

/// The label the test puts on every corpus object upstream, naming its project: the
/// EdgePlacement selects by it, and it tells the corpus apart from what the hub makes.
const PROJECT_LABEL: &str = "corpus.ferry.dev/project";

/// Each project: its directory, its files in install order, and the namespace its
/// namespaced objects go to when the manifest names none (`kubectl apply -n`).
const PROJECTS: &[(&str, &[&str], &str)] = &[
    ("argo-cd", &["install.yaml"], "argocd"),
    ("ingress-nginx", &["deploy.yaml"], "ingress-nginx"),
    ("kyverno", &["kyverno.io_clusterpolicies.yaml"], "default"),
    (
        "kubernetes-examples",
        &[
            "cassandra-service.yaml",
            "cassandra-statefulset.yaml",
            "redis-master-deployment.yaml",
            "redis-master-service.yaml",
            "frontend-deployment.yaml",
            "frontend-service.yaml",
            "horizontal-pod-autoscaler.yaml",
        ],
        "examples",
    ),
    (
        "descheduler",
        &["rbac.yaml", "configmap.yaml", "cronjob.yaml", "job.yaml"],
        "kube-system",
    ),
    (
        "kube-prometheus",
        &[
            "prometheusAdapter-serviceAccount.yaml",
            "prometheusAdapter-configMap.yaml",
            "prometheusAdapter-deployment.yaml",
            "prometheusAdapter-service.yaml",
            "prometheusAdapter-networkPolicy.yaml",
            "alertmanager-podDisruptionBudget.yaml",
            "prometheus-podDisruptionBudget.yaml",
            "prometheusAdapter-podDisruptionBudget.yaml",
        ],
        "monitoring",
    ),
    (
        "microshift",
        &["priority-class-openshift-user-critical.yaml"],
        "default",
    ),
];

/// Every corpus object, labelled with its project, namespaced objects in their
/// project's namespace unless they name one; the Namespaces they need first (not
/// `default` and `kube-system`, which every cluster has of its own).
fn corpus() -> Vec<Value> {
    let mut namespaces = Vec::new();
    let mut objects = Vec::new();
    for (project, files, namespace) in PROJECTS {
        if !namespaces
            .iter()
            .any(|n: &Value| n["metadata"]["name"] == *namespace)
            && !["default", "kube-system"].contains(namespace)
        {
            namespaces.push(json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": namespace, "labels": {PROJECT_LABEL: project}}}));
        }
        for file in *files {
            let path = format!("{DATA}/{project}/{file}");
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            let docs: Vec<Value> =
                serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
            for mut doc in docs.into_iter().filter(|d| d.is_object()) {
                let cluster_scoped = CLUSTER_SCOPED.contains(&doc["kind"].as_str().unwrap_or_default());
                let meta = doc["metadata"].as_object_mut().expect("metadata");
                if cluster_scoped {
                    meta.remove("namespace");
                } else {
                    meta.entry("namespace").or_insert_with(|| json!(namespace));
                }
                let labels = meta.entry("labels").or_insert_with(|| json!({}));
                labels[PROJECT_LABEL] = json!(project);
                if doc["kind"] == "Namespace" {
                    // The manifest brings its own: it replaces the one made for it.
                    namespaces.retain(|n| n["metadata"]["name"] != doc["metadata"]["name"]);
                    namespaces.push(doc);
                } else {
                    objects.push(doc);
                }
            }
        }
    }
    namespaces.extend(objects);
    namespaces
}

/// The corpus's cluster-scoped kinds (the rest are namespaced).
const CLUSTER_SCOPED: &[&str] = &[
    "Namespace",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "PriorityClass",
    "StorageClass",
    "IngressClass",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
];

/// One corpus object as its upstream API server stored it.
#[derive(Clone)]
struct Placed {
    resource: ApiResource,
    stored: Value,
}

impl Placed {
    fn kind(&self) -> &str {
        self.stored["kind"].as_str().unwrap_or_default()
    }
    fn name(&self) -> &str {
        self.stored["metadata"]["name"].as_str().unwrap_or_default()
    }
    fn namespace(&self) -> Option<&str> {
        self.stored["metadata"]["namespace"].as_str()
    }
    fn describe(&self) -> String {
        match self.namespace() {
            Some(ns) => format!("{} {ns}/{}", self.kind(), self.name()),
            None => format!("{} {}", self.kind(), self.name()),
        }
    }
}

/// Writes `objects` through `client` (as `kubectl create` does: CRDs and Namespaces
/// first, each served before what needs it) and returns them as stored.
async fn write(client: &kube::Client, objects: &[Value]) -> Vec<Placed> {
    let mut out = Vec::new();
    let mut order: Vec<&Value> = objects.iter().collect();
    order.sort_by_key(|o| match o["kind"].as_str() {
        Some("Namespace") => 0,
        Some("CustomResourceDefinition") => 1,
        _ => 2,
    });
    for doc in order {
        let api_version = doc["apiVersion"].as_str().unwrap();
        let kind = doc["kind"].as_str().unwrap();
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (resource, caps) = eventually(20, &format!("{kind} to be served"), || async {
            kube::discovery::pinned_kind(client, &gvk).await.ok()
        })
        .await;
        let namespaced = caps.scope == Scope::Namespaced;
        let api: Api<DynamicObject> = match doc["metadata"]["namespace"].as_str() {
            Some(ns) if namespaced => Api::namespaced_with(client.clone(), ns, &resource),
            _ => Api::all_with(client.clone(), &resource),
        };
        let obj: DynamicObject = serde_json::from_value(doc.clone()).unwrap();
        let name = doc["metadata"]["name"].as_str().unwrap();
        let stored = match api.create(&PostParams::default(), &obj).await {
            Ok(o) => o,
            // A Namespace the server already has (kube-system): label it as ours.
            Err(kube::Error::Api(s)) if s.code == 409 && kind == "Namespace" => api
                .patch(
                    name,
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(json!({"metadata": {"labels": doc["metadata"]["labels"]}})),
                )
                .await
                .unwrap(),
            Err(e) => panic!("writing {kind} {name}: {e}"),
        };
        out.push(Placed {
            resource,
            stored: serde_json::to_value(stored).unwrap(),
        });
    }
    out
}

/// Which profile made a copy: the kcp TMC syncer also changes pod templates and
/// service-account token Secrets (README, "kcp's workload syncer").
#[derive(Clone, Copy, PartialEq)]
enum Profile {
    KubeStellar,
    Tmc,
    SyncAgent,
}

/// Label and annotation prefixes that are marks (what the placement and the copy add,
/// and the source's own server's bookkeeping), not the object's intent.
const MARK_PREFIXES: &[&str] = &[
    "edge.kubestellar.io/",
    "kubestellar.io/",
    "ferry.dev/",
    "edge.ferry.dev/",
    "kcp.io/",
    "internal.workload.kcp.io/",
    "state.workload.kcp.io/",
    "deletion.internal.workload.kcp.io/",
    "finalizers.workload.kcp.io/",
    "syncer.kcp.io/",
    "syncagent.kcp.io/",
    "claimed.internal.apis.kcp.io/",
];

/// What a copy must reproduce of `obj` (a `kind`): every top-level field but
/// `apiVersion`, `kind`, `metadata` and `status`, plus its name, labels and annotations
/// — less what README's "What a copy never carries" lists, which is encoded here on its
/// own (not taken from the code under test):
///
/// - every kind: server-set metadata (not compared at all), `status`,
///   `kubectl.kubernetes.io/last-applied-configuration`, `kcp.io/cluster`;
/// - Service: `spec.clusterIP`/`clusterIPs` unless headless, `spec.ports[*].nodePort`
///   and `spec.healthCheckNodePort` (unless annotated to preserve node ports);
/// - Job without `manualSelector: true`: `spec.selector` and the template labels
///   `controller-uid`, `batch.kubernetes.io/controller-uid`, `job-name`,
///   `batch.kubernetes.io/job-name`;
/// - PersistentVolumeClaim: `spec.volumeName` once bound, and the binding annotations;
/// - kcp TMC only: pod templates (Deployment, StatefulSet, ReplicaSet) without service
///   account, `automountServiceAccountToken: false`, downward-API namespace as a value;
///   service-account token Secrets as `Opaque`.
///
/// Both sides go through it: the destination allocates its own addresses and ports, so
/// those are dropped from the copy too.
fn intent(obj: &Value, kind: &str, profile: Profile) -> Value {
    let mut out: Map<String, Value> = obj
        .as_object()
        .into_iter()
        .flatten()
        // A null field is an absent one (kube prunes them).
        .filter(|(k, v)| !matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status") && !v.is_null())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let meta = &obj["metadata"];
    // The api-syncagent names copies by its naming rules (README, "kcp's api-syncagent").
    if profile != Profile::SyncAgent {
        out.insert("name".into(), meta["name"].clone());
    }
    for map in ["labels", "annotations"] {
        let kept: Map<String, Value> = meta[map]
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| {
                !MARK_PREFIXES.iter().any(|p| k.starts_with(p))
                    && k.as_str() != "kubectl.kubernetes.io/last-applied-configuration"
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !kept.is_empty() {
            out.insert(map.into(), Value::Object(kept));
        }
    }
    let mut out = Value::Object(out);
    match kind {
        "Service" => {
            let preserve = meta["annotations"]["control.kubestellar.io/preserve"]
                .as_str()
                .is_some_and(|v| v.split(',').any(|p| p.trim() == "nodeport"));
            let spec = out["spec"].as_object_mut().expect("a Service has a spec");
            if spec.get("clusterIP").and_then(Value::as_str) != Some("None") {
                spec.remove("clusterIP");
                spec.remove("clusterIPs");
            }
            if !preserve {
                spec.remove("healthCheckNodePort");
                for port in spec
                    .get_mut("ports")
                    .and_then(Value::as_array_mut)
                    .into_iter()
                    .flatten()
                {
                    port.as_object_mut().unwrap().remove("nodePort");
                }
            }
        }
        "Job" if out["spec"]["manualSelector"] != true => {
            let spec = out["spec"].as_object_mut().unwrap();
            spec.remove("selector");
            if let Some(labels) = spec
                .get_mut("template")
                .and_then(|t| t.pointer_mut("/metadata/labels"))
                .and_then(Value::as_object_mut)
            {
                for key in [
                    "controller-uid",
                    "batch.kubernetes.io/controller-uid",
                    "job-name",
                    "batch.kubernetes.io/job-name",
                ] {
                    labels.remove(key);
                }
            }
        }
        "PersistentVolumeClaim" => {
            if meta["annotations"]["pv.kubernetes.io/bind-completed"].is_string() {
                out["spec"].as_object_mut().unwrap().remove("volumeName");
            }
            if let Some(a) = out.get_mut("annotations").and_then(Value::as_object_mut) {
                a.retain(|k, _| !k.starts_with("pv.kubernetes.io/") && !k.starts_with("volume."));
            }
        }
        _ => {}
    }
    if profile == Profile::Tmc {
        if matches!(kind, "Deployment" | "StatefulSet" | "ReplicaSet") {
            if let Some(spec) = out
                .pointer_mut("/spec/template/spec")
                .and_then(Value::as_object_mut)
            {
                spec.remove("serviceAccountName");
                spec.remove("serviceAccount");
                spec.insert("automountServiceAccountToken".into(), json!(false));
                let namespace = meta["namespace"].clone();
                for containers in ["containers", "initContainers"] {
                    for c in spec
                        .get_mut(containers)
                        .and_then(Value::as_array_mut)
                        .into_iter()
                        .flatten()
                    {
                        for var in c
                            .get_mut("env")
                            .and_then(Value::as_array_mut)
                            .into_iter()
                            .flatten()
                        {
                            if var.pointer("/valueFrom/fieldRef/fieldPath")
                                == Some(&json!("metadata.namespace"))
                            {
                                let var = var.as_object_mut().unwrap();
                                var.remove("valueFrom");
                                var.insert("value".into(), namespace.clone());
                            }
                        }
                    }
                }
            }
        }
        if kind == "Secret" && out["type"] == "kubernetes.io/service-account-token" {
            out["type"] = json!("Opaque");
        }
    }
    out
}

/// `Err` naming the first differing paths when `copy` is not `source` less what README
/// lists.
fn same_intent(source: &Placed, copy: &Value, profile: Profile) -> Result<(), String> {
    let want = intent(&source.stored, source.kind(), profile);
    let got = intent(copy, source.kind(), profile);
    if want == got {
        return Ok(());
    }
    let mut diffs = Vec::new();
    diff("", &want, &got, &mut diffs);
    Err(format!("{}: {}", source.describe(), diffs.join("; ")))
}

/// The paths where `a` and `b` differ (at most a few, with both values).
fn diff(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    if out.len() >= 5 || a == b {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                diff(
                    &format!("{path}.{k}"),
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                diff(&format!("{path}[{i}]"), p, q, out);
            }
        }
        _ => {
            let short = |v: &Value| {
                let s = v.to_string();
                if s.len() > 120 {
                    format!("{}...", &s[..120])
                } else {
                    s
                }
            };
            out.push(format!("{path}: source {} copy {}", short(a), short(b)));
        }
    }
}

/// Reads `name` (in `namespace`) of `resource` on `client`, if it exists.
async fn read(
    client: &kube::Client,
    resource: &ApiResource,
    namespace: Option<&str>,
    name: &str,
) -> Option<Value> {
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    };
    api.get_opt(name)
        .await
        .ok()
        .flatten()
        .map(|o| serde_json::to_value(o).unwrap())
}

/// Polls until every object of `placed` has a copy on `cluster` (where `locate` says:
/// the copy's namespace) equal in intent; panics naming what is missing or different.
async fn wait_all_land(
    what: &str,
    cluster: &kube::Client,
    placed: &[Placed],
    profile: Profile,
    tmc_cluster: Option<&str>,
) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let mut problems = Vec::new();
        let namespaces = match tmc_cluster {
            Some(c) => tmc_namespaces(cluster, c).await,
            None => BTreeMap::new(),
        };
        for p in placed {
            let ns = match (p.namespace(), tmc_cluster) {
                (Some(ns), Some(_)) => match namespaces.get(ns) {
                    Some(down) => Some(down.clone()),
                    None => {
                        problems.push(format!("{} missing (no namespace for {ns} yet)", p.describe()));
                        continue;
                    }
                },
                (ns, _) => ns.map(String::from),
            };
            match read(cluster, &p.resource, ns.as_deref(), p.name()).await {
                None => problems.push(format!("{} missing", p.describe())),
                Some(copy) => {
                    if let Err(e) = same_intent(p, &copy, profile) {
                        problems.push(e);
                    }
                }
            }
        }
        if problems.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!(
                "{what}: {} of {} objects did not land as placed:\n{}",
                problems.len(),
                placed.len(),
                problems.join("\n")
            ));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A stand-in cluster: a hub of its own (own service and node-port ranges).
async fn stand_in() -> (TestHub, kube::Client) {
    let hub = TestHub::start_with(|o| o.mailbox_controller = false).await;
    let admin = hub.client("root").await;
    (hub, admin)
}

/// Counts by kind, for the failure messages and the report.
fn census(placed: &[Placed]) -> String {
    let mut by_kind: BTreeMap<&str, usize> = BTreeMap::new();
    for p in placed {
        *by_kind.entry(p.kind()).or_default() += 1;
    }
    by_kind
        .iter()
        .map(|(k, n)| format!("{n} {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// KubeStellar: the corpus written once into a WMW, one EdgePlacement onto florin and
/// guilder, each mailbox's syncer made by `syncer-gen`, its manifest applied to its
/// stand-in and the syncer run with the identity that manifest gives it.
#[tokio::test(flavor = "multi_thread")]
async fn corpus_lands_on_two_clusters_through_one_edge_placement() {
    let hub = TestHub::start().await;
    let (florin_mb, guilder_mb) = edge::example1(&hub).await;
    let wmw = hub.client("root:wmw1").await;
    let placed = write(&wmw, &corpus()).await;
    edge::apply(
        &wmw,
        json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "EdgePlacement",
               "metadata": {"name": "corpus"},
               "spec": {"locationSelectors": [{"matchLabels": {"env": "prod"}}],
                        "downsync": [{"resources": ["*"],
                                      "labelSelectors": [{"matchExpressions": [{"key": PROJECT_LABEL, "operator": "Exists"}]}]}]}}),
    )
    .await;

    let mut running = Vec::new();
    for (name, mailbox) in [("florin", &florin_mb), ("guilder", &guilder_mb)] {
        let (cluster, admin) = stand_in().await;
        let syncer = edge_syncer::generated_syncer(&hub, mailbox, name, &cluster, &admin).await;
        running.push((name, mailbox.clone(), cluster, admin, syncer));
    }
    for (name, mailbox, _cluster, admin, _syncer) in &running {
        let landed = wait_all_land(
            &format!("KubeStellar onto {name} ({})", census(&placed)),
            admin,
            &placed,
            Profile::KubeStellar,
            None,
        )
        .await;
        let the_one = read(
            &hub.client(mailbox).await,
            &edge::edge("SyncerConfig", "syncerconfigs"),
            None,
            "the-one",
        )
        .await
        .expect("the-one");
        if let Err(e) = landed {
            panic!("{e}\nthe-one's status in {name}'s mailbox: {}", the_one["status"]);
        }
        assert!(
            the_one["status"]["refused"].as_array().is_none_or(Vec::is_empty)
                && the_one["status"]["refusedCount"].as_u64().unwrap_or(0) == 0,
            "{name} refused copies: {}",
            the_one["status"]
        );
    }
    eprintln!(
        "KubeStellar: {} objects placed, all landed on florin and guilder: {}",
        placed.len(),
        census(&placed)
    );
    for (_, _, cluster, _, syncer) in running {
        syncer.stop().await;
        cluster.running.stop().await;
    }
}

/// The downstream namespaces the TMC syncer made for logical cluster `cluster`, by
/// upstream namespace (their `kcp.io/namespace-locator`).
async fn tmc_namespaces(admin: &kube::Client, cluster: &str) -> BTreeMap<String, String> {
    let namespaces = Api::<DynamicObject>::all_with(
        admin.clone(),
        &ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&()),
    )
    .list(&Default::default())
    .await
    .map(|l| l.items)
    .unwrap_or_default();
    namespaces
        .into_iter()
        .filter_map(|ns| {
            let locator = ns
                .metadata
                .annotations
                .as_ref()?
                .get("kcp.io/namespace-locator")?;
            let locator: Value = serde_json::from_str(locator).ok()?;
            (locator["cluster"] == cluster).then(|| {
                Some((
                    locator["namespace"].as_str()?.to_string(),
                    ns.metadata.name.clone()?,
                ))
            })?
        })
        .collect()
}

/// Why the TMC profile does not place `p`, if it does not: kcp's scheduler never
/// schedules a namespace every cluster has of its own (`kube-system`, `kube-public`,
/// `kube-node-lease`; and `kcp-system`), so nothing in one reaches a SyncTarget.
fn tmc_never_syncs(p: &Placed) -> Option<&'static str> {
    let blocked = ["kube-system", "kube-public", "kube-node-lease", "kcp-system"];
    p.namespace().is_some_and(|ns| blocked.contains(&ns)).then_some(
        "kcp does not schedule kube-system, kube-public, kube-node-lease or kcp-system onto SyncTargets",
    )
}

/// kcp TMC: `kubectl ferry workload sync east --resources <every namespaced kind of the
/// corpus>` in `root:my-org` (Roles and RoleBindings included: the workspace's own,
/// served to the syncer from `root:app` itself; ServiceAccounts, ConfigMaps and Secrets
/// go without asking), its manifest applied to the stand-in and the syncer run with
/// that identity; `root:app` bound to compute there; the corpus's namespaced objects
/// written into `root:app`. Every one lands but those in `kube-system`, which kcp never
/// schedules: the test asserts that exactly those are left. (TMC syncs namespaced
/// objects only, as kcp's workload syncer does: the cluster-scoped part of the corpus
/// is not placed here.)
#[tokio::test(flavor = "multi_thread")]
async fn corpus_lands_through_a_kcp_sync_target() {
    let hub = TestHub::start_with(|o| o.compute_workspace = true).await;
    edge::workspace(&hub, "my-org").await;
    let app_cluster = edge::workspace(&hub, "app").await;
    let objects: Vec<Value> = corpus()
        .into_iter()
        .filter(|o| o["kind"] == "Namespace" || !CLUSTER_SCOPED.contains(&o["kind"].as_str().unwrap()))
        .collect();
    let (cluster, admin) = stand_in().await;
    // The kinds, resolved by the stand-in's discovery (configmaps, secrets and
    // serviceaccounts always go).
    let mut resources: Vec<String> = Vec::new();
    for o in &objects {
        let (group, version) = o["apiVersion"]
            .as_str()
            .unwrap()
            .rsplit_once('/')
            .unwrap_or(("", "v1"));
        let (ar, caps) = kube::discovery::pinned_kind(
            &admin,
            &GroupVersionKind::gvk(group, version, o["kind"].as_str().unwrap()),
        )
        .await
        .unwrap();
        let r = if group.is_empty() {
            ar.plural.clone()
        } else {
            format!("{}.{group}", ar.plural)
        };
        if caps.scope == Scope::Namespaced
            && !resources.contains(&r)
            && !["configmaps", "secrets", "serviceaccounts"].contains(&r.as_str())
        {
            resources.push(r);
        }
    }
    let args = ferry_cli::workload_cmd::SyncArgs {
        resources: resources.clone(),
        lifetime: Duration::from_secs(3600),
        ..ferry_cli::workload_cmd::SyncArgs::stand_in("east", cluster.data_dir().join("syncer.yaml"))
    };
    let reg = ferry_cli::workload_cmd::sync(&hub.config("root:my-org").await, &args)
        .await
        .expect("workload sync");
    let downstream = edge_syncer::install(&cluster, &admin, &reg.manifest, &reg.syncer_id).await;
    // The manifest runs it with --from-cluster <the SyncTarget's workspace>.
    let upstream = ferry_hub::kubeconfig::at_workspace(
        &edge_syncer::config_of(&reg.upstream_kubeconfig).await,
        &reg.workspace,
    )
    .expect("workspace URL");
    let mut opts = ferry_syncer::SyncerOptions::new(upstream, downstream, "east");
    opts.sync_target_uid = Some(reg.sync_target_uid.clone());
    opts.metrics_address = None;
    let mut tmc = ferry_syncer::profiles::tmc::TmcOptions::new(&reg.sync_target_uid);
    tmc.resources = resources;
    tmc.heartbeat_period = Duration::from_millis(500);
    tmc.sync_target_poll = Duration::from_millis(200);
    tmc.api_import_poll_interval = Duration::from_millis(500);
    opts.tmc = Some(tmc);
    let syncer = ferry_syncer::start(opts).await.expect("syncer starts");

    let app = hub.client("root:app").await;
    ferry_cli::bind_cmd::bind_compute(
        &app,
        &ferry_cli::bind_cmd::ComputeArgs {
            location_workspace: "root:my-org".into(),
            apiexports: vec![ferry_cli::workload_cmd::DEFAULT_EXPORT.into()],
            location_selectors: Vec::new(),
            namespace_selector: String::new(),
            name: None,
            timeout: Duration::from_secs(30),
            kubeconfig: None,
            context: None,
        },
        &|_| {},
    )
    .await
    .expect("bind compute");
    let written = write(&app, &objects).await;
    let (placed, not_placed): (Vec<Placed>, Vec<Placed>) = written
        .into_iter()
        .filter(|p| p.kind() != "Namespace")
        .partition(|p| tmc_never_syncs(p).is_none());
    for p in &not_placed {
        eprintln!(
            "TMC does not place {}: {}",
            p.describe(),
            tmc_never_syncs(p).unwrap()
        );
    }
    // Exactly the descheduler's objects, which its manifest puts in kube-system, are
    // left; every kind lands somewhere.
    let left: Vec<String> = not_placed.iter().map(Placed::describe).collect();
    assert!(
        not_placed.iter().all(|p| p.namespace() == Some("kube-system"))
            && not_placed.len()
                == objects
                    .iter()
                    .filter(|o| o["metadata"]["namespace"] == "kube-system")
                    .count(),
        "left out: {left:?}"
    );
    for kind in ["ServiceAccount", "Role", "RoleBinding"] {
        assert!(
            placed.iter().any(|p| p.kind() == kind),
            "no {kind} placed: {}",
            census(&placed)
        );
    }
    let landed = wait_all_land(
        &format!("TMC onto east ({})", census(&placed)),
        &admin,
        &placed,
        Profile::Tmc,
        Some(&app_cluster),
    )
    .await;
    let target = read(
        &hub.client("root:my-org").await,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("workload.kcp.io", "v1alpha1", "SyncTarget"),
            "synctargets",
        ),
        None,
        "east",
    )
    .await
    .expect("SyncTarget east");
    if let Err(e) = landed {
        panic!("{e}\nSyncTarget east's status: {}", target["status"]);
    }
    let refused = target["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "CopiesAccepted" && c["status"] == "False");
    assert!(refused.is_none(), "east refused copies: {refused:?}");
    eprintln!(
        "TMC: {} objects placed, all landed on east: {}",
        placed.len(),
        census(&placed)
    );
    syncer.stop().await;
    cluster.running.stop().await;
}

/// api-syncagent: the service cluster (a stand-in) installs Argo CD's CRDs from the
/// corpus and publishes them with PublishedResources; a consumer workspace binds the
/// export and writes Argo CD's own example Application and AppProject
/// (`argo-cd/examples/`), which land on the service cluster. The agent syncs objects of
/// the CRDs it publishes, so this profile covers the corpus's CRD-backed objects (the
/// built-in kinds go through the other two profiles).
#[tokio::test(flavor = "multi_thread")]
async fn corpus_custom_resources_land_through_the_api_syncagent() {
    const EXPORT: &str = "argoproj.io";
    let kcp = TestHub::start().await;
    edge::workspace(&kcp, "provider").await;
    edge::workspace(&kcp, "team").await;
    let provider = kcp.client("root:provider").await;
    let (service_hub, service) = stand_in().await;

    // The service cluster: the PublishedResource CRD, Argo CD's CRDs, one
    // PublishedResource each.
    let pr_crd = ferry_api::crds::all_crds()
        .into_iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .filter(|c| c["metadata"]["name"] == "publishedresources.syncagent.kcp.io")
        .collect::<Vec<_>>();
    let argo_crds: Vec<Value> = corpus()
        .into_iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition" && o["spec"]["group"] == EXPORT)
        .collect();
    assert_eq!(argo_crds.len(), 3, "Argo CD's install has three CRDs");
    write(&service, &[pr_crd, argo_crds.clone()].concat()).await;
    let published: Vec<Value> = argo_crds
        .iter()
        .map(|crd| {
            json!({"apiVersion": "syncagent.kcp.io/v1alpha1", "kind": "PublishedResource",
                   "metadata": {"name": crd["spec"]["names"]["plural"]},
                   "spec": {"resource": {"apiGroup": EXPORT, "kind": crd["spec"]["names"]["kind"], "versions": ["v1alpha1"]}}})
        })
        .collect();
    write(&service, &published).await;
    write(
        &provider,
        &[json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport", "metadata": {"name": EXPORT}, "spec": {}})],
    )
    .await;
    let mut opts = ferry_syncer::profiles::syncagent::SyncAgentOptions::new(
        kcp.config("root:provider").await,
        service_hub.config("root").await,
        EXPORT,
        "ferry-system",
    );
    opts.agent_name = "corpus".into();
    opts.poll = Duration::from_millis(200);
    let agent = tokio::time::timeout(
        Duration::from_secs(30),
        ferry_syncer::profiles::syncagent::start(opts),
    )
    .await
    .expect("the agent reads the endpoint slice in time")
    .expect("the agent starts");

    let team = kcp.client("root:team").await;
    write(
        &team,
        &[
            json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIBinding", "metadata": {"name": EXPORT},
                 "spec": {"reference": {"export": {"path": "root:provider", "name": EXPORT}}}}),
        ],
    )
    .await;
    let mut examples = vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "argocd"}})];
    for file in ["project.yaml", "application.yaml"] {
        let path = format!("{DATA}/argo-cd/examples/{file}");
        let docs: Vec<Value> = serde_saphyr::from_multiple(&std::fs::read_to_string(&path).unwrap()).unwrap();
        examples.extend(docs.into_iter().filter(|d| d.is_object()));
    }
    let placed: Vec<Placed> = write(&team, &examples)
        .await
        .into_iter()
        .filter(|p| p.kind() != "Namespace")
        .collect();
    assert_eq!(placed.len(), 2, "{}", census(&placed));

    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let mut problems = Vec::new();
        for p in &placed {
            let copies = Api::<DynamicObject>::all_with(service.clone(), &p.resource)
                .list(&Default::default())
                .await
                .map(|l| l.items)
                .unwrap_or_default();
            let copy = copies.into_iter().find(|c| {
                let a = c.metadata.annotations.clone().unwrap_or_default();
                a.get("syncagent.kcp.io/remote-object-name").map(String::as_str) == Some(p.name())
                    && a.get("syncagent.kcp.io/remote-object-namespace")
                        .map(String::as_str)
                        == p.namespace()
            });
            match copy {
                None => problems.push(format!("{} missing", p.describe())),
                Some(c) => {
                    if let Err(e) = same_intent(p, &serde_json::to_value(c).unwrap(), Profile::SyncAgent) {
                        problems.push(e);
                    }
                }
            }
        }
        if problems.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "api-syncagent: not everything landed as placed:\n{}",
            problems.join("\n")
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // No refusal: every PublishedResource's Synced condition is not CopyRefused.
    for pr in &published {
        let name = pr["metadata"]["name"].as_str().unwrap();
        let got = read(
            &service,
            &ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("syncagent.kcp.io", "v1alpha1", "PublishedResource"),
                "publishedresources",
            ),
            None,
            name,
        )
        .await
        .unwrap();
        let refused = got["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["reason"] == "CopyRefused");
        assert!(refused.is_none(), "PublishedResource {name}: {refused:?}");
    }
    eprintln!(
        "api-syncagent: {} objects placed, all landed: {}",
        placed.len(),
        census(&placed)
    );
    agent.stop().await;
    service_hub.running.stop().await;
}
