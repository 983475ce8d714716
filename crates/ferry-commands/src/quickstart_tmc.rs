//! `ferry quickstart --profile tmc`: kcp's Transparent Multi-Cluster on one
//! machine, as seed 002's walkthrough and seed 004's examples run it.
//!
//! A hub (with `root:compute`), two hubs standing in for the clusters
//! `kind-east` and `kind-west`, `kubectl ferry workload sync` for each in
//! `root:my-org`, the manifests applied to the stand-ins and each syncer
//! started from what its pod would get (the kubeconfig in the applied Secret,
//! the Deployment's arguments, an in-cluster token). Then a workspace
//! `root:app` is bound to compute and the user's objects are created there:
//! a Deployment (its status comes back), a Service of type LoadBalancer (the
//! ingress a cloud would set downstream appears upstream), a ConfigMap and a
//! Secret. Finally `kind-east`... or whichever target got the namespace is
//! drained, and the workload moves to the other.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Parser;
use ferry_server::server::RunningHub;
use ferry_server::strategy::core::service::ServiceRanges;
use futures::StreamExt;
use indicatif::ProgressBar;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::ApiResource;
use kube::runtime::{watcher, WatchStreamExt};
use serde_json::{json, Value};

use crate::ar;
use crate::bind_cmd::{bind_compute, ComputeArgs};
use crate::quickstart::{
    admin_config, apply_manifest, apply_object, apply_workspaces, hub_options, progress, simulate_kubelet,
    start_hub, QuickstartArgs, Step,
};
use crate::workload_cmd::{self, SyncArgs};

/// The stand-in clusters and their SyncTargets' labels.
const CLUSTERS: &[(&str, &str)] = &[("kind-east", "region=east"), ("kind-west", "region=west")];

/// The workspace of the SyncTargets (seed 002's organisation).
const ORG: &str = "root:my-org";
/// The user's workspace.
const APP: &str = "root:app";
/// The namespace the user's objects go in.
const NAMESPACE: &str = "default";

/// One stand-in cluster with its syncer.
struct Cluster {
    name: String,
    hub: RunningHub,
    syncer: ferry_syncer::RunningSyncer,
    background: Vec<tokio::task::JoinHandle<()>>,
}

/// One row of the closing table.
#[derive(Debug, Clone)]
pub struct Row {
    pub object: String,
    pub target: String,
    pub downstream: String,
    pub reported: String,
}

impl Row {
    fn landed(&self) -> bool {
        self.target != "-" && self.downstream != "-" && self.reported != "pending"
    }

    /// What the object still waits for, if it has not landed on a target other than
    /// `away_from`: the words after its name in the progress line.
    fn waits_for(&self, away_from: Option<&str>) -> Option<String> {
        let target = &self.target;
        if target == "-" {
            Some("to be scheduled onto a SyncTarget".into())
        } else if Some(target.as_str()) == away_from {
            Some(format!("to leave {target}"))
        } else if self.downstream == "-" {
            Some(format!("its copy on {target}"))
        } else if self.reported == "pending" {
            Some(format!("its status from {target}"))
        } else {
            None
        }
    }
}

/// The progress line of [`wait_landed`]: how many of `rows` landed (on a target
/// other than `away_from`) and, until all have, which object it waits for and what
/// that object lacks, so a timeout names it.
fn landing_progress(rows: &[Row], away_from: Option<&str>) -> (String, bool) {
    let waiting: Vec<(&Row, String)> = rows
        .iter()
        .filter_map(|r| Some((r, r.waits_for(away_from)?)))
        .collect();
    let mut line = format!(
        "syncing: {}/{} objects landed with their reported state{}",
        rows.len() - waiting.len(),
        rows.len(),
        away_from
            .map(|t| format!(" (moving off {t})"))
            .unwrap_or_default()
    );
    if let Some((row, what)) = waiting.first() {
        line.push_str(&format!("; waiting for {} ({what})", row.object));
    }
    (line, waiting.is_empty())
}

/// The user's objects (seed 004's examples 1–3).
pub fn workload() -> Vec<Value> {
    vec![
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "kuard", "namespace": NAMESPACE, "labels": {"app": "kuard"}},
               "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "kuard"}},
                        "template": {"metadata": {"labels": {"app": "kuard"}},
                                     "spec": {"containers": [{"name": "kuard", "image": "gcr.io/kuar-demo/kuard-amd64:blue",
                                                              "ports": [{"containerPort": 8080}]}]}}}}),
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "kuard", "namespace": NAMESPACE},
               "spec": {"type": "LoadBalancer", "selector": {"app": "kuard"},
                        "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}]}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "kuard-config", "namespace": NAMESPACE},
               "data": {"greeting": "hello from root:app"}}),
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "kuard-credentials", "namespace": NAMESPACE},
               "type": "Opaque", "stringData": {"password": "not-a-real-one"}}),
    ]
}

/// The cloud the stand-in clusters do not have: give every Service of type
/// LoadBalancer an ingress address, as a cloud controller would.
pub fn simulate_load_balancer(client: kube::Client, address: &'static str) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let api: Api<Service> = Api::all(client.clone());
        let mut events = watcher(api, watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .boxed();
        while let Some(event) = events.next().await {
            let Ok(s) = event else { continue };
            let (Some(name), Some(ns)) = (s.metadata.name.clone(), s.metadata.namespace.clone()) else {
                continue;
            };
            let is_lb = s.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer");
            let has_ingress = s
                .status
                .as_ref()
                .and_then(|st| st.load_balancer.as_ref())
                .and_then(|lb| lb.ingress.as_ref())
                .is_some_and(|i| !i.is_empty());
            if !is_lb || has_ingress {
                continue;
            }
            let patch = json!({"status": {"loadBalancer": {"ingress": [{"ip": address}]}}});
            let api: Api<Service> = Api::namespaced(client.clone(), &ns);
            tokio::spawn(async move {
                crate::quickstart::patch_status_retrying(&api, &name, &patch, "Service").await
            });
        }
    })
}

pub async fn run(args: QuickstartArgs) -> anyhow::Result<()> {
    let pb = progress(false);
    let result = tokio::time::timeout(args.timeout, quickstart(&args, &pb)).await;
    pb.finish_and_clear();
    let (hub, clusters, before, after, drained) = match result {
        Ok(r) => r?,
        Err(_) => return Err(crate::quickstart::timed_out(args.timeout, &pb)),
    };
    println!("In {APP}, namespace {NAMESPACE}, bound to compute in {ORG}:\n");
    print_table(&before);
    println!("\nAfter `kubectl ferry workload drain {drained}`:\n");
    print_table(&after);
    let all_landed = before.iter().chain(after.iter()).all(Row::landed);
    // With --exit everything is stopped below: nothing is left to look at.
    if !args.exit {
        let dir = args.dir.display();
        println!("\nLook around:");
        println!("  export KUBECONFIG={dir}/hub/admin.kubeconfig");
        println!(
            "  kubectl ferry ws use {ORG}; kubectl get synctargets,locations   # the targets, Ready by heartbeat"
        );
        println!(
            "  kubectl ferry ws use {APP}; kubectl get deployments,services,placements   # the user's side"
        );
        println!("  kubectl rollout status deployment/kuard");
        for c in &clusters {
            println!(
                "  KUBECONFIG={dir}/{}/admin.kubeconfig kubectl get deployments,services -A -l internal.workload.kcp.io/cluster   # {}",
                c.name, c.name
            );
        }
        println!("\nSyncing until Ctrl-C.");
        let _ = tokio::signal::ctrl_c().await;
    }
    for c in clusters {
        for task in c.background {
            task.abort();
        }
        c.syncer.stop().await;
        c.hub.stop().await;
    }
    hub.stop().await;
    if args.exit && !all_landed {
        bail!("not everything landed; see the tables above");
    }
    Ok(())
}

type Outcome = (RunningHub, Vec<Cluster>, Vec<Row>, Vec<Row>, String);

async fn quickstart(args: &QuickstartArgs, pb: &ProgressBar) -> anyhow::Result<Outcome> {
    pb.step("starting the hub (with root:compute) and the stand-in clusters");
    let mut opts = hub_options(args.dir.join("hub"));
    opts.compute_workspace = true;
    opts.sync_target_heartbeat_threshold = Duration::from_secs(20);
    let hub = start_hub(opts).await.context("starting the hub")?;
    let root = kube::Client::try_from(admin_config(&hub, "root").await?)?;
    pb.step("kubectl ferry ws create my-org; kubectl ferry ws create app");
    apply_workspaces(&root, &["my-org", "app"]).await?;

    let mut clusters = Vec::new();
    for (i, (name, labels)) in CLUSTERS.iter().enumerate() {
        clusters.push(register(args, pb, &hub, name, labels, i).await?);
    }
    let org = kube::Client::try_from(admin_config(&hub, ORG).await?)?;
    let targets = Api::<DynamicObject>::all_with(
        org.clone(),
        &ar("workload.kcp.io", "v1alpha1", "SyncTarget", "synctargets"),
    );
    pb.step("kubectl wait --for=condition=Ready synctarget --all");
    loop {
        let list = targets.list(&Default::default()).await?;
        let ready = list
            .items
            .iter()
            .filter(|t| condition(t, "Ready") == Some(true))
            .count();
        if ready == CLUSTERS.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    pb.step(format!(
        "kubectl ferry ws use {APP}; kubectl ferry bind compute {ORG}"
    ));
    let app = kube::Client::try_from(admin_config(&hub, APP).await?)?;
    bind_compute(
        &app,
        &ComputeArgs {
            location_workspace: ORG.into(),
            apiexports: vec![workload_cmd::DEFAULT_EXPORT.into()],
            location_selectors: Vec::new(),
            namespace_selector: String::new(),
            name: None,
            timeout: Duration::from_secs(30),
            kubeconfig: None,
            context: None,
        },
        // The quickstart's own output is its tables; kcp's binding lines belong
        // on its progress line, which names the step.
        &|line| pb.step(format!("kubectl ferry bind compute {ORG}: {line}")),
    )
    .await?;

    pb.step("creating the Deployment, Service, ConfigMap and Secret in root:app");
    for object in workload() {
        apply_object(&app, &object).await?;
    }
    let before = wait_landed(pb, &hub, &clusters, None).await?;

    // Seed 002's last step: drain the target the namespace went to; the
    // workload moves to the other one.
    let drained = before
        .first()
        .map(|r| r.target.clone())
        .context("nothing was scheduled")?;
    pb.step(format!("kubectl ferry workload drain {drained}"));
    let patch = workload_cmd::schedule_patch(
        &workload_cmd::WorkloadCommand::Drain(workload_cmd::TargetArgs {
            name: drained.clone(),
            kubeconfig: None,
            context: None,
        }),
        &ferry_api::timestamp::now(),
    );
    targets
        .patch(&drained, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("draining {drained}"))?;
    let after = wait_landed(pb, &hub, &clusters, Some(&drained)).await?;
    Ok((hub, clusters, before, after, drained))
}

fn condition(obj: &DynamicObject, kind: &str) -> Option<bool> {
    obj.data
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .map(|c| c["status"] == "True")
}

/// `kubectl ferry workload sync`, the manifest applied to a new stand-in
/// cluster, and the syncer started from what its pod would get.
async fn register(
    args: &QuickstartArgs,
    pb: &ProgressBar,
    hub: &RunningHub,
    name: &str,
    labels: &str,
    index: usize,
) -> anyhow::Result<Cluster> {
    let dir = args.dir.join(name);
    let mut opts = hub_options(dir.clone());
    opts.mailbox_controller = false;
    // A distinct cluster, as a real one is: its own service and node-port ranges.
    opts.service_ranges = ServiceRanges::distinct(crate::quickstart::stand_in_index(name));
    let cluster_hub = start_hub(opts)
        .await
        .with_context(|| format!("starting the {name} stand-in cluster"))?;
    let admin = kube::Client::try_from(admin_config(&cluster_hub, "root").await?)?;
    let addresses = ["192.0.2.10", "192.0.2.20"];
    let background = vec![
        simulate_kubelet(admin.clone()),
        simulate_load_balancer(admin.clone(), addresses[index % addresses.len()]),
    ];

    pb.step(format!(
        "kubectl ferry workload sync {name} --labels {labels} in {ORG}"
    ));
    let sync_args = SyncArgs {
        syncer_image: args.syncer_image.clone(),
        labels: vec![labels.to_string()],
        ..SyncArgs::stand_in(name, args.dir.join(format!("{name}-syncer.yaml")))
    };
    let reg = workload_cmd::sync(&admin_config(hub, ORG).await?, &sync_args).await?;
    // The manifest and the kubeconfigs below hold the syncer's tokens.
    ferry_server::server::write_private(&sync_args.output_file, reg.manifest.as_bytes())?;
    // A run before this one in the same directory may have drained this target;
    // the walkthrough starts from two schedulable targets.
    let targets = Api::<DynamicObject>::all_with(
        kube::Client::try_from(admin_config(hub, ORG).await?)?,
        &ar("workload.kcp.io", "v1alpha1", "SyncTarget", "synctargets"),
    );
    let uncordon = workload_cmd::schedule_patch(
        &workload_cmd::WorkloadCommand::Uncordon(workload_cmd::TargetArgs {
            name: name.to_string(),
            kubeconfig: None,
            context: None,
        }),
        &ferry_api::timestamp::now(),
    );
    targets
        .patch(name, &PatchParams::default(), &Patch::Merge(&uncordon))
        .await
        .with_context(|| format!("uncordoning {name}"))?;
    pb.step(format!(
        "{name}: kubectl apply -f {}",
        sync_args.output_file.display()
    ));
    apply_manifest(&admin, &reg.manifest).await?;

    let (syncer, container_args) = start_as_pod(&cluster_hub, &admin, &reg.syncer_id, &dir).await?;
    pb.step(format!(
        "{name}: started its syncer (ferry {})",
        container_args.join(" ")
    ));
    Ok(Cluster {
        name: name.to_string(),
        hub: cluster_hub,
        syncer,
        background,
    })
}

/// Starts the syncer of the applied `kubectl ferry workload sync` manifest
/// whose identity is `id`, from what its pod would get on `cluster`: the
/// Secret mounted at /kcp, its Deployment's arguments, and an in-cluster token
/// for its ServiceAccount (files in `dir` instead of the pod's paths). Returns
/// the running syncer and the Deployment's arguments.
pub async fn start_as_pod(
    cluster: &RunningHub,
    admin: &kube::Client,
    id: &str,
    dir: &Path,
) -> anyhow::Result<(ferry_syncer::RunningSyncer, Vec<String>)> {
    let pod = crate::syncer_pod::from_applied(&cluster.url, &cluster.ca_pem, admin, id, id, dir).await?;
    let parsed = PodCommand::try_parse_from(
        std::iter::once("ferry".to_string()).chain(quickstart_arguments(pod.args)),
    )
    .context("the generated syncer arguments do not parse")?;
    let mut syncer_opts = crate::syncer_cmd::options(parsed.args).await?;
    syncer_opts.metrics_address = None;
    syncer_opts.health_address = None;
    let syncer = ferry_syncer::start(syncer_opts).await?;
    Ok((syncer, pod.container_args))
}

#[derive(clap::Parser)]
struct PodCommand {
    #[command(flatten)]
    args: crate::syncer_cmd::SyncerArgs,
}

/// The pod's arguments (see [`crate::syncer_pod`]) as the quickstart runs them in its
/// own process: a shorter heartbeat so the quickstart is quick.
fn quickstart_arguments(pod_args: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = pod_args.into_iter().skip_while(|a| a == "syncer").collect();
    out.push("--heartbeat-period=2s".into());
    out.push("--metrics-address=127.0.0.1:0".into());
    out
}

/// Polls until every object of [`workload`] is scheduled (onto a target other than
/// `away_from`), copied into its cluster and, for the Deployment and the Service,
/// reported back.
async fn wait_landed(
    pb: &ProgressBar,
    hub: &RunningHub,
    clusters: &[Cluster],
    away_from: Option<&str>,
) -> anyhow::Result<Vec<Row>> {
    loop {
        let rows = table(hub, clusters).await?;
        let (line, all_landed) = landing_progress(&rows, away_from);
        pb.step(line);
        if all_landed {
            return Ok(rows);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Which target each object is scheduled onto (its `state.workload.kcp.io/<key>=Sync`
/// label), its copy on that cluster, and the status that came back.
async fn table(hub: &RunningHub, clusters: &[Cluster]) -> anyhow::Result<Vec<Row>> {
    let root = kube::Client::try_from(admin_config(hub, "root").await?)?;
    let app = kube::Client::try_from(admin_config(hub, APP).await?)?;
    let org_cluster = logical_cluster(&root, "my-org").await?;
    let app_cluster = logical_cluster(&root, "app").await?;
    let mut rows = Vec::new();
    for object in workload() {
        let kind = object["kind"].as_str().unwrap_or_default();
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let resource = resource_of(kind);
        let upstream = Api::<DynamicObject>::namespaced_with(app.clone(), NAMESPACE, &resource)
            .get_opt(name)
            .await?;
        let labels = upstream
            .as_ref()
            .and_then(|o| o.metadata.labels.clone())
            .unwrap_or_default();
        let mut target = "-".to_string();
        let mut downstream = "-".to_string();
        for c in clusters {
            let key = ferry_api::workload::sync_target_key(&org_cluster, &c.name);
            if labels
                .get(&ferry_api::well_known::workload_state_label(&key))
                .map(String::as_str)
                != Some(ferry_api::well_known::WORKLOAD_STATE_SYNC)
            {
                continue;
            }
            target = c.name.clone();
            let admin = kube::Client::try_from(admin_config(&c.hub, "root").await?)?;
            let Some(ns) = downstream_namespace(&admin, &app_cluster, NAMESPACE).await? else {
                continue;
            };
            let copy = Api::<DynamicObject>::namespaced_with(admin, &ns, &resource)
                .get_opt(name)
                .await?;
            let marked = copy
                .as_ref()
                .and_then(|c| c.metadata.labels.as_ref())
                .and_then(|l| l.get(ferry_api::well_known::WORKLOAD_CLUSTER_LABEL))
                == Some(&key);
            if marked {
                downstream = format!("{ns}/{name}");
            }
        }
        let reported = match (kind, &upstream) {
            ("Deployment", Some(d)) => match (
                d.data.pointer("/status/availableReplicas"),
                d.data.pointer("/spec/replicas"),
            ) {
                (Some(a), Some(w)) if a == w => format!("{a}/{w} available"),
                _ => "pending".into(),
            },
            ("Service", Some(s)) => match s.data.pointer("/status/loadBalancer/ingress/0/ip") {
                Some(Value::String(ip)) => format!("ingress {ip}"),
                _ => "pending".into(),
            },
            _ => "-".into(),
        };
        rows.push(Row {
            object: format!("{kind} {name}"),
            target,
            downstream,
            reported,
        });
    }
    Ok(rows)
}

/// The logical cluster of the workspace `root:<name>` (its Workspace's `spec.cluster`).
async fn logical_cluster(root: &kube::Client, name: &str) -> anyhow::Result<String> {
    let ws = Api::<DynamicObject>::all_with(
        root.clone(),
        &ar("tenancy.kcp.io", "v1alpha1", "Workspace", "workspaces"),
    )
    .get(name)
    .await
    .with_context(|| format!("reading Workspace {name}"))?;
    ws.data
        .pointer("/spec/cluster")
        .and_then(Value::as_str)
        .map(String::from)
        .with_context(|| format!("Workspace {name} has no spec.cluster"))
}

/// The downstream namespace whose `kcp.io/namespace-locator` names `namespace` of
/// logical cluster `cluster`.
async fn downstream_namespace(
    admin: &kube::Client,
    cluster: &str,
    namespace: &str,
) -> anyhow::Result<Option<String>> {
    let namespaces = Api::<DynamicObject>::all_with(admin.clone(), &ar("", "v1", "Namespace", "namespaces"))
        .list(&Default::default())
        .await?;
    Ok(namespaces.items.into_iter().find_map(|ns| {
        let locator = ns
            .metadata
            .annotations
            .as_ref()?
            .get(ferry_api::well_known::NAMESPACE_LOCATOR_ANNOTATION)?;
        let locator: Value = serde_json::from_str(locator).ok()?;
        (locator["cluster"] == cluster && locator["namespace"] == namespace)
            .then(|| ns.metadata.name.clone())?
    }))
}

fn resource_of(kind: &str) -> ApiResource {
    match kind {
        "Deployment" => ar("apps", "v1", "Deployment", "deployments"),
        "Service" => ar("", "v1", "Service", "services"),
        "ConfigMap" => ar("", "v1", "ConfigMap", "configmaps"),
        _ => ar("", "v1", "Secret", "secrets"),
    }
}

fn print_table(rows: &[Row]) {
    let w = rows.iter().map(|r| r.object.len()).max().unwrap_or(6).max(6);
    let t = rows.iter().map(|r| r.target.len()).max().unwrap_or(11).max(11);
    let d = rows
        .iter()
        .map(|r| r.downstream.len())
        .max()
        .unwrap_or(10)
        .max(10);
    println!(
        "{:<w$}  {:<t$}  {:<d$}  REPORTED STATUS",
        "OBJECT", "SYNC TARGET", "DOWNSTREAM"
    );
    for r in rows {
        println!(
            "{:<w$}  {:<t$}  {:<d$}  {}",
            r.object, r.target, r.downstream, r.reported
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(object: &str, target: &str, downstream: &str, reported: &str) -> Row {
        Row {
            object: object.into(),
            target: target.into(),
            downstream: downstream.into(),
            reported: reported.into(),
        }
    }

    #[test]
    fn the_progress_line_names_the_object_it_waits_for_and_what_it_lacks() {
        let landed = row("ConfigMap kuard-config", "kind-west", "kcp-x/kuard-config", "-");
        let pending = row("Deployment kuard", "kind-west", "kcp-x/kuard", "pending");
        let (line, done) = landing_progress(&[landed.clone(), pending], Some("kind-east"));
        assert!(!done);
        assert_eq!(
            line,
            "syncing: 1/2 objects landed with their reported state (moving off kind-east); \
             waiting for Deployment kuard (its status from kind-west)"
        );
        let still_there = row("Service kuard", "kind-east", "kcp-y/kuard", "ingress 192.0.2.10");
        let (line, _) = landing_progress(&[still_there], Some("kind-east"));
        assert!(
            line.ends_with("waiting for Service kuard (to leave kind-east)"),
            "{line}"
        );
        let (line, _) = landing_progress(&[row("Secret s", "-", "-", "-")], None);
        assert!(
            line.ends_with("waiting for Secret s (to be scheduled onto a SyncTarget)"),
            "{line}"
        );
        let (line, _) = landing_progress(&[row("Secret s", "kind-west", "-", "-")], None);
        assert!(line.ends_with("(its copy on kind-west)"), "{line}");
        let (line, done) = landing_progress(&[landed], None);
        assert!(done);
        assert_eq!(line, "syncing: 1/1 objects landed with their reported state");
    }
}
