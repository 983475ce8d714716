//! `ferry quickstart`: the whole system on one machine. A hub, two hubs
//! standing in for the clusters `florin` and `guilder`, inventory and mailbox
//! workspaces, registration with syncer-gen, a syncer per cluster started
//! from the kubeconfig in the applied Secret (as its pod would be), and the
//! seed's example1 written once into the workload management workspace
//! `root:example-wmw` with two EdgePlacements: the hub's placement translator
//! fills the mailboxes, and reported state and executing counts flow back.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::hubs::start;
use anyhow::{bail, Context};
use ferry_server::server::{HubOptions, RunningHub};
use ferry_server::strategy::core::service::ServiceRanges;
use futures::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::{watcher, WatchStreamExt};
use serde_json::{json, Value};

use crate::kubeconfig::parse_duration;
use crate::syncer_gen::{self, SyncerGenArgs};

#[derive(clap::Args, Debug)]
pub struct QuickstartArgs {
    /// Where the hubs keep their state; re-running reuses it.
    #[arg(long, default_value = "./ferry-quickstart")]
    pub dir: PathBuf,
    /// Run once: exit 0 when everything landed, non-zero if not within --timeout.
    #[arg(long)]
    pub exit: bool,
    /// How long to wait for everything to land.
    #[arg(long, default_value = "180s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Image named in the generated syncer manifests (the syncers here run in-process).
    #[arg(long, default_value = "ferry:dev")]
    pub syncer_image: String,
    /// Which walkthrough: kubestellar (edge placement through mailboxes), tmc (kcp's
    /// Transparent Multi-Cluster: workload sync, bind compute, placement, drain) or
    /// syncagent (kcp's api-syncagent: a provider's CRD published to two consumer
    /// workspaces, objects synced to a service cluster, status and credentials back).
    #[arg(long, value_enum, default_value = "kubestellar")]
    pub profile: crate::syncer_cmd::ProfileName,
}

/// The two workload clusters of the KubeStellar walkthrough and their labels.
const CLUSTERS: &[(&str, &[(&str, &str)])] = &[
    ("florin", &[("loc-name", "florin"), ("env", "prod")]),
    (
        "guilder",
        &[("loc-name", "guilder"), ("env", "prod"), ("extended", "yes")],
    ),
];

const FIELD_MANAGER: &str = "ferry-quickstart";

/// One object the quickstart expects on a cluster.
#[derive(Debug, Clone)]
pub struct Expected {
    pub cluster: String,
    pub kind: &'static str,
    pub namespace: Option<String>,
    pub name: String,
}

impl Expected {
    pub fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}

/// The workload management workspace the example workload is written to.
pub const WMW: &str = "example-wmw";

fn deployment(ns: &str, name: &str, port: i32) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{
                    "name": "httpd", "image": "library/httpd:2.4",
                    "ports": [{"name": "http", "containerPort": 80, "hostPort": port, "protocol": "TCP"}],
                    "volumeMounts": [{"name": "htdocs", "readOnly": true, "mountPath": "/usr/local/apache2/htdocs"}],
                }],
                "volumes": [{"name": "htdocs", "configMap": {"name": "httpd-htdocs", "optional": false}}]},
            },
        },
    })
}

/// The seed's example1 workload, written once into the WMW: `commonstuff`
/// (a Namespace labelled `common=si`, a ConfigMap and a Deployment) and
/// `specialstuff` (the same, labelled `special=yes`).
pub fn workload() -> Vec<Value> {
    let configmap = |ns: &str, text: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "httpd-htdocs", "namespace": ns},
               "data": {"index.html": format!("<!DOCTYPE html><html><body>{text}</body></html>")}})
    };
    let ns = |name: &str, label: &str, value: &str| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {label: value}}});
    vec![
        ns("commonstuff", "common", "si"),
        configmap("commonstuff", "This is a common web site."),
        deployment("commonstuff", "commond", 8081),
        ns("specialstuff", "special", "yes"),
        configmap("specialstuff", "This is a special web site."),
        deployment("specialstuff", "speciald", 8082),
    ]
}

/// Example1's two EdgePlacements: `edge-placement-c` sends the `common=si`
/// namespaces' ConfigMaps and Deployments to every `env=prod` Location;
/// `edge-placement-s` sends the `special=yes` ones to `extended=yes` Locations.
pub fn edge_placements() -> Vec<Value> {
    let placement = |name: &str, location: (&str, &str), namespaces: (&str, &str)| {
        let downsync = |group: &str, resource: &str| {
            json!({"apiGroup": group, "resources": [resource],
                   "namespaceSelectors": [{"matchLabels": {namespaces.0: namespaces.1}}]})
        };
        json!({
            "apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "EdgePlacement",
            "metadata": {"name": name},
            "spec": {
                "locationSelectors": [{"matchLabels": {location.0: location.1}}],
                "downsync": [downsync("", "configmaps"), downsync("apps", "deployments")],
                "wantSingletonReportedState": false,
            },
        })
    };
    vec![
        placement("edge-placement-c", ("env", "prod"), ("common", "si")),
        placement("edge-placement-s", ("extended", "yes"), ("special", "yes")),
    ]
}

/// What lands on `cluster`: commonstuff everywhere, specialstuff on guilder.
pub fn workload_for(cluster: &str) -> Vec<Value> {
    workload()
        .into_iter()
        .filter(|o| {
            let ns = o
                .pointer("/metadata/namespace")
                .or_else(|| o.pointer("/metadata/name"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            ns == "commonstuff" || cluster == "guilder"
        })
        .collect()
}

fn describe(o: &Value) -> Expected {
    Expected {
        cluster: String::new(),
        kind: match o["kind"].as_str() {
            Some("Namespace") => "Namespace",
            Some("ConfigMap") => "ConfigMap",
            _ => "Deployment",
        },
        namespace: o
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .map(String::from),
        name: o["metadata"]["name"].as_str().unwrap_or_default().to_string(),
    }
}

pub fn expected(cluster: &str) -> Vec<Expected> {
    workload_for(cluster)
        .iter()
        .map(|o| Expected {
            cluster: cluster.to_string(),
            ..describe(o)
        })
        .collect()
}

/// The logical cluster of `kubestellar init`'s inventory workspace (the child of the
/// workspace `root` addresses); mailbox workspaces are named after it.
pub async fn imw_cluster(root: &kube::Client) -> anyhow::Result<String> {
    let imw = Api::<DynamicObject>::all_with(
        root.clone(),
        &crate::ar("tenancy.kcp.io", "v1alpha1", "Workspace", "workspaces"),
    )
    .get(ferry_api::edge::espw::DEFAULT_IMW)
    .await
    .with_context(|| format!("reading Workspace {}", ferry_api::edge::espw::DEFAULT_IMW))?;
    Ok(imw.data["spec"]["cluster"]
        .as_str()
        .unwrap_or_default()
        .to_string())
}

/// Apply a Workspace of each of `names` in `root`'s workspace, and wait
/// until every one is Ready.
pub async fn apply_workspaces(root: &kube::Client, names: &[&str]) -> anyhow::Result<()> {
    for ws in names {
        apply_object(
            root,
            &json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": {"name": ws}}),
        )
        .await?;
    }
    wait_ready_workspaces(root, names).await
}

/// Waits until each of the workspaces `names` (children of the workspace `root`
/// addresses) is Ready.
pub async fn wait_ready_workspaces(root: &kube::Client, names: &[&str]) -> anyhow::Result<()> {
    let workspaces = Api::<DynamicObject>::all_with(
        root.clone(),
        &crate::ar("tenancy.kcp.io", "v1alpha1", "Workspace", "workspaces"),
    );
    for name in names {
        while workspaces
            .get_opt(name)
            .await?
            .is_none_or(|w| w.data["status"]["phase"] != "Ready")
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(())
}

fn gvk_resource(kind: &str) -> ApiResource {
    match kind {
        "Namespace" => {
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Namespace"), "namespaces")
        }
        "ConfigMap" => {
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "ConfigMap"), "configmaps")
        }
        _ => ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apps", "v1", "Deployment"),
            "deployments",
        ),
    }
}

pub(crate) async fn admin_config(hub: &RunningHub, workspace: &str) -> anyhow::Result<kube::Config> {
    let config = crate::kubeconfig::load(Some(&hub.kubeconfig_path), None).await?;
    Ok(ferry_server::kubeconfig::at_workspace(&config, workspace)?)
}

/// Server-side apply every object of a multi-document manifest, resolving
/// each kind through discovery, as `kubectl apply --server-side` does.
pub async fn apply_manifest(client: &kube::Client, manifest: &str) -> anyhow::Result<()> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(manifest).context("parsing the manifest")?;
    for doc in docs.into_iter().filter(|d| d.is_object()) {
        apply_object(client, &doc).await?;
    }
    Ok(())
}

pub async fn apply_object(client: &kube::Client, doc: &Value) -> anyhow::Result<DynamicObject> {
    let api_version = doc["apiVersion"].as_str().unwrap_or_default();
    let kind = doc["kind"].as_str().unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (ar, caps) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .with_context(|| format!("{kind} is not served"))?;
    let name = doc["metadata"]["name"].as_str().unwrap_or_default();
    let api: Api<DynamicObject> = match (
        caps.scope,
        doc.pointer("/metadata/namespace").and_then(Value::as_str),
    ) {
        (kube::discovery::Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &ar),
        _ => Api::all_with(client.clone(), &ar),
    };
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(doc),
    )
    .await
    .with_context(|| format!("applying {kind} {name}"))
}

/// The kubelet the stand-in clusters do not have: mark every Deployment's
/// replicas ready and available, as a real cluster would once pods run.
pub fn simulate_kubelet(client: kube::Client) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let api: Api<Deployment> = Api::all(client.clone());
        let mut events = watcher(api, watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .boxed();
        while let Some(event) = events.next().await {
            let Ok(d) = event else { continue };
            let (Some(name), Some(ns)) = (d.metadata.name.clone(), d.metadata.namespace.clone()) else {
                continue;
            };
            let replicas = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            let status = d.status.clone().unwrap_or_default();
            let generation = d.metadata.generation.unwrap_or(0);
            if status.available_replicas == Some(replicas) && status.observed_generation == Some(generation) {
                continue;
            }
            let now = ferry_api::timestamp::now();
            let patch = json!({"status": {
                "observedGeneration": generation, "replicas": replicas, "updatedReplicas": replicas,
                "readyReplicas": replicas, "availableReplicas": replicas,
                "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                                "message": "Deployment has minimum availability.", "lastUpdateTime": now, "lastTransitionTime": now}],
            }});
            let api: Api<Deployment> = Api::namespaced(client.clone(), &ns);
            tokio::spawn(async move { patch_status_retrying(&api, &name, &patch, "Deployment").await });
        }
    })
}

/// Merge `patch` into the status of `kind` `name`, as the stand-in kubelet
/// and cloud do: a refusal a real controller's work queue would retry (the
/// hub's 429, a dropped connection, rights not granted yet) is retried with
/// backoff for about 20 s, since the watch may bring no other event for the
/// object; then it is logged and left to the object's next change.
pub async fn patch_status_retrying<K>(api: &Api<K>, name: &str, patch: &Value, kind: &str)
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    const ATTEMPTS: u32 = 10;
    let mut delay = Duration::from_millis(100);
    for attempt in 1..=ATTEMPTS {
        match api
            .patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => return,
            Err(kube::Error::Api(e)) if e.code == 404 => return, // gone: nothing to mark
            Err(e) if attempt == ATTEMPTS => {
                tracing::warn!("writing the status of {kind} {name} failed {ATTEMPTS} times; the next change of it tries again: {e}");
            }
            Err(e) => {
                tracing::debug!("writing the status of {kind} {name} failed, retrying in {delay:?}: {e}");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// A cluster registered and syncing.
struct Registered {
    name: String,
    mailbox: String,
    cluster_hub: RunningHub,
    syncer: ferry_syncer::RunningSyncer,
    kubelet: tokio::task::JoinHandle<()>,
}

/// One row of the closing table.
#[derive(Debug, Clone)]
pub struct Row {
    pub cluster: String,
    pub object: String,
    pub synced: bool,
    pub reported: String,
}

/// Options for a quickstart's hub over `dir`: it listens where the hub of an earlier
/// run in the same directory listened, when that port is free, so what that run wrote
/// and printed (kubeconfigs, syncer manifests, a SyncTarget's virtual workspace URLs,
/// the "look around" commands) still reaches it; otherwise on a free port.
pub(crate) fn hub_options(dir: PathBuf) -> HubOptions {
    let earlier = earlier_address(&dir).filter(|addr| std::net::TcpListener::bind(addr).is_ok());
    let mut opts = HubOptions::new(dir);
    opts.listen = earlier.unwrap_or_else(|| std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
    opts
}

/// Where the hub that last ran over `dir` listened: the server of the admin
/// kubeconfig it wrote there.
fn earlier_address(dir: &std::path::Path) -> Option<std::net::SocketAddr> {
    let kubeconfig = Kubeconfig::read_from(dir.join("admin.kubeconfig")).ok()?;
    let server = kubeconfig.clusters.first()?.cluster.as_ref()?.server.clone()?;
    let port = server.parse::<http::Uri>().ok()?.port_u16()?;
    Some(std::net::SocketAddr::from(([127, 0, 0, 1], port)))
}

/// Starts a quickstart's hub with `opts` (from [`hub_options`]): on the earlier run's
/// port, or, when another program took it since, on a free one.
pub(crate) async fn start_hub(mut opts: HubOptions) -> anyhow::Result<RunningHub> {
    if opts.listen.port() == 0 {
        return start(opts).await;
    }
    match start(opts.clone()).await {
        Ok(hub) => Ok(hub),
        Err(e) => {
            tracing::info!(target: "ferry::quickstart", "the earlier run's address {} is not usable ({e:#}); starting on a free port", opts.listen);
            opts.listen.set_port(0);
            start(opts).await
        }
    }
}

pub(crate) fn progress(quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new_spinner();
    pb.set_style(ProgressStyle::with_template("{spinner} {msg}").expect("valid template"));
    pb.enable_steady_tick(Duration::from_millis(120));
    pb
}

/// A quickstart's step: the progress line on a terminal and, from `-v 1`
/// on, a log line each time the step changes, so a run whose standard error
/// is not a terminal (a CI log, a file) still says what it waits for.
pub(crate) trait Step {
    fn step(&self, what: impl Into<std::borrow::Cow<'static, str>>);
}

impl Step for ProgressBar {
    fn step(&self, what: impl Into<std::borrow::Cow<'static, str>>) {
        let what = what.into();
        if self.message() != what {
            tracing::info!(target: "ferry::quickstart", "{what}");
        }
        self.set_message(what);
    }
}

/// The error of a quickstart that ran out of time: the step it was at (the progress
/// line, which names what it waits for) and how to see more.
pub(crate) fn timed_out(timeout: Duration, pb: &ProgressBar) -> anyhow::Error {
    anyhow::anyhow!(
        "the quickstart did not finish within {timeout:?}; it was waiting at: {} (-v 1 logs each step, -v 2 the requests the hubs refused, -v 3 every request)",
        pb.message()
    )
}

pub async fn run(args: QuickstartArgs) -> anyhow::Result<()> {
    match args.profile {
        crate::syncer_cmd::ProfileName::Tmc => return crate::quickstart_tmc::run(args).await,
        crate::syncer_cmd::ProfileName::Syncagent => return crate::quickstart_syncagent::run(args).await,
        crate::syncer_cmd::ProfileName::Kubestellar => {}
    }
    let pb = progress(false);
    let result = tokio::time::timeout(args.timeout, quickstart(&args, &pb)).await;
    pb.finish_and_clear();
    let (rows, summary, hub, registered) = match result {
        Ok(r) => r?,
        Err(_) => return Err(crate::quickstart::timed_out(args.timeout, &pb)),
    };
    print_table(&rows);
    println!();
    print_summary(&summary);
    let all_landed =
        rows.iter().all(|r| r.synced && r.reported != "pending") && summary.iter().all(WmwRow::counted);
    // With --exit everything is stopped below: nothing is left to look at.
    if !args.exit {
        let dir = args.dir.display();
        println!("\nLook around:");
        println!("  export KUBECONFIG={dir}/hub/admin.kubeconfig          # the hub (workspaces: kubectl get workspaces)");
        println!(
            "  kubectl --server {}/clusters/root:{WMW} get edgeplacements,placementsummaries   # the WMW",
            hub.url
        );
        for r in &registered {
            println!(
                "  kubectl --server {}/clusters/root:{} get syncerconfigs,deployments -A   # {}'s mailbox",
                hub.url, r.mailbox, r.name
            );
        }
        for r in &registered {
            println!(
                "  KUBECONFIG={dir}/{}/admin.kubeconfig kubectl get deployments -A   # the {} cluster",
                r.name, r.name
            );
        }
        println!("\nSyncing until Ctrl-C.");
        let _ = tokio::signal::ctrl_c().await;
    }
    for r in registered {
        r.kubelet.abort();
        r.syncer.stop().await;
        r.cluster_hub.stop().await;
    }
    hub.stop().await;
    if args.exit && !all_landed {
        bail!("not everything landed; see the table above");
    }
    Ok(())
}

async fn quickstart(
    args: &QuickstartArgs,
    pb: &ProgressBar,
) -> anyhow::Result<(Vec<Row>, Vec<WmwRow>, RunningHub, Vec<Registered>)> {
    pb.step("starting the hub and the stand-in clusters florin and guilder");
    let hub = start_hub(hub_options(args.dir.join("hub")))
        .await
        .context("starting the hub")?;
    let root = kube::Client::try_from(admin_config(&hub, "root").await?)?;

    pb.step("kubestellar init: root:espw and the inventory workspace root:imw1");
    let init = crate::kubestellar_cmd::init(&admin_config(&hub, "root").await?).await?;
    let imw_cluster = imw_cluster(&root).await?;
    let imw_config = admin_config(&hub, &init.imw).await?;

    pb.step(format!("creating the workload management workspace root:{WMW}"));
    crate::ensure_cmd::ensure_wmw(&admin_config(&hub, "root").await?, WMW).await?;

    let mut registered = Vec::new();
    for (name, labels) in CLUSTERS {
        pb.step(format!("{name}: SyncTarget and Location in root:imw1"));
        let labels: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let target = crate::ensure_cmd::ensure_location(&imw_config, name, &labels).await?;
        let uid = target.metadata.uid.clone().unwrap_or_default();
        let mailbox = ferry_api::edge::mailbox::mailbox_name(&imw_cluster, &uid);
        pb.step(format!("{name}: waiting for the mailbox workspace {mailbox}"));
        wait_ready_workspaces(&root, &[&mailbox]).await?;
        registered.push(register(args, pb, &hub, name, &mailbox).await?);
    }

    pb.step(format!(
        "root:{WMW}: the workload and edge-placement-c, edge-placement-s, written once"
    ));
    let wmw_client = kube::Client::try_from(admin_config(&hub, &format!("root:{WMW}")).await?)?;
    for object in workload().iter().chain(&edge_placements()) {
        apply_object(&wmw_client, object).await?;
    }

    loop {
        let rows = table(&hub, &registered).await?;
        let summary = wmw_summary(&wmw_client, &rows).await?;
        let landed = rows
            .iter()
            .filter(|r| r.synced && r.reported != "pending")
            .count();
        let counted = summary.iter().filter(|s| s.counted()).count();
        pb.step(format!(
            "syncing: {landed}/{} objects landed with their reported state, {counted}/{} executing counts in root:{WMW}",
            rows.len(),
            summary.len()
        ));
        if landed == rows.len() && counted == summary.len() {
            return Ok((rows, summary, hub, registered));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// One row of the WMW summary: a workload object, the executing count the
/// hub annotated it with, and the clusters that hold its copy.
#[derive(Debug, Clone)]
pub struct WmwRow {
    pub object: String,
    pub executing: Option<usize>,
    pub clusters: Vec<String>,
}

impl WmwRow {
    /// The annotation agrees with the clusters holding a copy.
    fn counted(&self) -> bool {
        self.executing == Some(self.clusters.len()) && !self.clusters.is_empty()
    }
}

async fn wmw_summary(wmw: &kube::Client, rows: &[Row]) -> anyhow::Result<Vec<WmwRow>> {
    let mut out = Vec::new();
    for o in workload() {
        let e = describe(&o);
        let ar = gvk_resource(e.kind);
        let api = match &e.namespace {
            Some(ns) => Api::<DynamicObject>::namespaced_with(wmw.clone(), ns, &ar),
            None => Api::<DynamicObject>::all_with(wmw.clone(), &ar),
        };
        let executing = api.get_opt(&e.name).await?.and_then(|obj| {
            obj.metadata
                .annotations?
                .get(ferry_api::well_known::EXECUTING_COUNT_ANNOTATION)?
                .parse()
                .ok()
        });
        let object = e.describe();
        let clusters = rows
            .iter()
            .filter(|r| r.synced && r.object == object)
            .map(|r| r.cluster.clone())
            .collect();
        out.push(WmwRow {
            object,
            executing,
            clusters,
        });
    }
    Ok(out)
}

/// syncer-gen against the mailbox, apply its manifest to the stand-in cluster,
/// and start the syncer the way its pod would start.
async fn register(
    args: &QuickstartArgs,
    pb: &ProgressBar,
    hub: &RunningHub,
    name: &str,
    mailbox: &str,
) -> anyhow::Result<Registered> {
    let mut opts = hub_options(args.dir.join(name));
    opts.mailbox_controller = false;
    // A distinct cluster, as a real one is: its own service and node-port ranges.
    opts.service_ranges = ServiceRanges::distinct(stand_in_index(name));
    let cluster_hub = start_hub(opts)
        .await
        .with_context(|| format!("starting the {name} stand-in cluster"))?;
    let cluster_admin = kube::Client::try_from(admin_config(&cluster_hub, "root").await?)?;
    let kubelet = simulate_kubelet(cluster_admin.clone());

    pb.step(format!("{name}: syncer-gen against root:{mailbox}"));
    let gen_args = SyncerGenArgs {
        syncer_image: args.syncer_image.clone(),
        ..SyncerGenArgs::stand_in(name, args.dir.join(format!("{name}-syncer.yaml")))
    };
    let reg = syncer_gen::generate(&admin_config(hub, &format!("root:{mailbox}")).await?, &gen_args).await?;
    // The manifest holds the syncer's token.
    ferry_server::server::write_private(&gen_args.output_file, reg.manifest.as_bytes())?;

    pb.step(format!(
        "{name}: kubectl apply -f {}",
        gen_args.output_file.display()
    ));
    apply_manifest(&cluster_admin, &reg.manifest).await?;

    // What the pod gets: the upstream kubeconfig from the mounted Secret, and
    // an in-cluster token for its ServiceAccount.
    let secret = Api::<Secret>::namespaced(cluster_admin.clone(), &reg.syncer_id)
        .get(&reg.syncer_id)
        .await?;
    let kubeconfig = secret
        .data
        .as_ref()
        .and_then(|d| d.get("kubeconfig"))
        .map(|b| String::from_utf8_lossy(&b.0).to_string())
        .context("the applied Secret has no kubeconfig key")?;
    let upstream = kube::Config::from_custom_kubeconfig(
        Kubeconfig::from_yaml(&kubeconfig)?,
        &KubeConfigOptions::default(),
    )
    .await?;
    let downstream = in_cluster_config(&cluster_hub, &cluster_admin, &reg.syncer_id).await?;

    pb.step(format!("{name}: starting its syncer"));
    let mut syncer_opts = ferry_syncer::SyncerOptions::new(upstream, downstream, name);
    syncer_opts.sync_target_uid = Some(reg.sync_target_uid.clone());
    syncer_opts.heartbeat_period = Duration::from_secs(5);
    let syncer = ferry_syncer::start(syncer_opts).await?;
    Ok(Registered {
        name: name.to_string(),
        mailbox: mailbox.to_string(),
        cluster_hub,
        syncer,
        kubelet,
    })
}

/// The configuration a pod running as ServiceAccount `id` (namespace `id`)
/// would get in-cluster: the cluster's CA and a token for that ServiceAccount.
pub async fn in_cluster_config(
    cluster: &RunningHub,
    admin: &kube::Client,
    id: &str,
) -> anyhow::Result<kube::Config> {
    let text = in_cluster_kubeconfig(cluster, admin, id).await?;
    Ok(
        kube::Config::from_custom_kubeconfig(Kubeconfig::from_yaml(&text)?, &KubeConfigOptions::default())
            .await?,
    )
}

/// [`in_cluster_config`] as kubeconfig text.
pub async fn in_cluster_kubeconfig(
    cluster: &RunningHub,
    admin: &kube::Client,
    id: &str,
) -> anyhow::Result<String> {
    in_cluster_kubeconfig_at(&cluster.url, &cluster.ca_pem, admin, id, id).await
}

/// What a pod running as ServiceAccount `namespace/service_account` gets in-cluster on
/// the cluster at `url` (CA `ca_pem`), as kubeconfig text.
pub async fn in_cluster_kubeconfig_at(
    url: &str,
    ca_pem: &str,
    admin: &kube::Client,
    namespace: &str,
    service_account: &str,
) -> anyhow::Result<String> {
    let request: TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": [], "expirationSeconds": 86400}}))?;
    let token = Api::<ServiceAccount>::namespaced(admin.clone(), namespace)
        .create_token_request(service_account, &PostParams::default(), &request)
        .await
        .with_context(|| {
            format!("requesting an in-cluster token for ServiceAccount {namespace}/{service_account}")
        })?
        .status
        .map(|s| s.token)
        .unwrap_or_default();
    Ok(ferry_server::kubeconfig::kubeconfig(
        "in-cluster",
        &format!("{url}/clusters/root"),
        ca_pem,
        ferry_server::kubeconfig::AuthInfo::Token(token),
        "in-cluster",
        None,
    ))
}

async fn table(hub: &RunningHub, registered: &[Registered]) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    for r in registered {
        let down = kube::Client::try_from(admin_config(&r.cluster_hub, "root").await?)?;
        let up = kube::Client::try_from(admin_config(hub, &format!("root:{}", r.mailbox)).await?)?;
        for e in expected(&r.name) {
            let ar = gvk_resource(e.kind);
            let api = |c: &kube::Client| match &e.namespace {
                Some(ns) => Api::<DynamicObject>::namespaced_with(c.clone(), ns, &ar),
                None => Api::<DynamicObject>::all_with(c.clone(), &ar),
            };
            let synced = api(&down).get_opt(&e.name).await?.is_some();
            let reported = if e.kind == "Deployment" {
                match api(&up).get_opt(&e.name).await? {
                    Some(d) => match (
                        d.data.pointer("/status/availableReplicas"),
                        d.data.pointer("/spec/replicas"),
                    ) {
                        (Some(a), Some(w)) if a == w => format!("{a}/{w} available"),
                        _ => "pending".to_string(),
                    },
                    None => "pending".to_string(),
                }
            } else {
                "-".to_string()
            };
            rows.push(Row {
                cluster: e.cluster.clone(),
                object: e.describe(),
                synced,
                reported,
            });
        }
    }
    Ok(rows)
}

fn print_table(rows: &[Row]) {
    let w = rows.iter().map(|r| r.object.len()).max().unwrap_or(6).max(6);
    println!(
        "{:<8}  {:<w$}  {:<6}  REPORTED STATUS",
        "CLUSTER", "OBJECT", "SYNCED"
    );
    for r in rows {
        println!(
            "{:<8}  {:<w$}  {:<6}  {}",
            r.cluster,
            r.object,
            if r.synced { "yes" } else { "no" },
            r.reported
        );
    }
}

fn print_summary(rows: &[WmwRow]) {
    let w = rows.iter().map(|r| r.object.len()).max().unwrap_or(6).max(6);
    println!("WMW root:{WMW}");
    println!("{:<w$}  {:<9}  CLUSTERS", "OBJECT", "EXECUTING");
    for r in rows {
        println!(
            "{:<w$}  {:<9}  {}",
            r.object,
            r.executing.map_or("-".to_string(), |n| n.to_string()),
            if r.clusters.is_empty() {
                "-".to_string()
            } else {
                r.clusters.join(",")
            }
        );
    }
}

/// A stable number for the stand-in cluster `name` (a hash of the name), so each
/// stand-in keeps its own service ranges across re-runs over the same directory.
pub fn stand_in_index(name: &str) -> u32 {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(name.as_bytes());
    u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory where a hub on `port` ran (its admin kubeconfig).
    fn ran_on(port: u16) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: hub\n  cluster:\n    server: https://127.0.0.1:{port}\n\
             users:\n- name: admin\n  user:\n    token: t\ncontexts:\n- name: root\n  context:\n    cluster: hub\n    user: admin\n\
             current-context: root\n"
        );
        std::fs::write(dir.path().join("admin.kubeconfig"), kubeconfig).unwrap();
        dir
    }

    #[test]
    fn a_hub_listens_where_the_earlier_run_in_its_directory_did_when_that_port_is_free() {
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = free.local_addr().unwrap().port();
        drop(free);
        let dir = ran_on(port);
        assert_eq!(hub_options(dir.path().to_path_buf()).listen.port(), port);

        let taken = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
        assert_eq!(
            hub_options(dir.path().to_path_buf()).listen.port(),
            0,
            "taken since: any free port"
        );
        drop(taken);

        let fresh = tempfile::tempdir().unwrap();
        assert_eq!(
            hub_options(fresh.path().to_path_buf()).listen.port(),
            0,
            "a first run"
        );
    }
}
