//! `ferry bench fleet`: one workload reaching N clusters.
//!
//! Arrangement (reported in the JSON's `method` block): the hub is a `ferry hub` child
//! process; each of the N stand-in clusters is a `ferry hub` child process of its own
//! (its own loopback port, service and node-port ranges), registered on the hub as a
//! user registers a cluster (`syncer-gen` for KubeStellar, `kubectl ferry workload sync`
//! for kcp TMC), its manifest applied to it, and its syncer a `ferry syncer` child
//! process started as the manifest's pod would start it ([`crate::syncer_pod`]).
//!
//! Once every cluster holds the workload's namespace and every syncer's queue is empty,
//! each round measures:
//! 1. copy latency: `--objects` ConfigMaps written into the workload's namespace at
//!    `--rate` per second; from each write to its copy appearing in each cluster (a watch
//!    per cluster in this process timestamps arrivals), over every object × cluster;
//! 2. status return: a Deployment's status written in each cluster (spread at `--rate`)
//!    → visible upstream where that profile reports it (KubeStellar: the cluster's
//!    mailbox workspace; kcp TMC: the workload's own workspace);
//! 3. convergence: one ConfigMap changed upstream → the change in every cluster;
//!
//! and at the end, the hub's and each syncer's RSS and CPU (from /proc), and the requests the hub
//! answered while measured (from its `/metrics`), with the ConfigMap patches it refused.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::{json, Value};

use crate::ar;
use crate::bench_cmd::BenchHub;
use crate::bench_requests::Requests;
use crate::bench_stats::{cpu_seconds, round3, rss_mib, Rounds, Summary};
use crate::bench_sync::{at_rate, idle, latencies, readyz, track, Seen, Tracker};
use crate::syncer_cmd::ProfileName;

#[derive(clap::Args)]
pub struct FleetBenchArgs {
    /// Stand-in clusters, each a `ferry hub` process with its own syncer process.
    #[arg(long, default_value_t = 10)]
    pub clusters: usize,
    /// ConfigMaps written into the workload's namespace per round.
    #[arg(long, default_value_t = 100)]
    pub objects: usize,
    /// Writes per second (load tests of KubeStellar's and kcp's peers write at 10/s).
    #[arg(long, default_value_t = 10)]
    pub rate: u32,
    /// Which syncer: kubestellar (one EdgePlacement selecting every Location; a mailbox
    /// workspace per SyncTarget) or tmc (kcp's workload syncer: a Location per
    /// SyncTarget and a Placement selecting each, as kcp schedules one target per
    /// Placement).
    #[arg(long, value_enum, default_value = "kubestellar")]
    pub profile: ProfileName,
    /// Rounds on the same fleet: each writes `--objects` new ConfigMaps, returns a status
    /// from every cluster and changes one ConfigMap everywhere; per-round figures are
    /// reported as the median with every round.
    #[arg(long, default_value_t = 1)]
    pub rounds: usize,
    /// Clusters set up at once.
    #[arg(long, default_value_t = 4)]
    pub setup_concurrency: usize,
    /// Print the figures as JSON.
    #[arg(long)]
    pub json: bool,
    /// The `ferry` executable that runs the hub, the stand-in clusters and the syncers
    /// (default: this one), to measure another build with the same bench.
    #[arg(long)]
    pub binary: Option<PathBuf>,
}

impl FleetBenchArgs {
    fn tmc(&self) -> bool {
        self.profile == ProfileName::Tmc
    }
}

/// The namespace the workload's ConfigMaps go to.
const NS: &str = "fleet";
/// The label on every object the bench writes, and so on every copy: the watches in
/// each cluster select on it.
const LABEL: &str = "bench.ferry.dev/fleet";
/// The Deployment whose status every cluster returns.
const PROBE: &str = "probe";
/// KubeStellar: the workload management workspace.
const WMW: &str = "fleet-wmw";
/// kcp TMC: the workspace of the SyncTargets and Locations, and the workload's.
const ORG: &str = "fleet-org";
const APP: &str = "fleet-app";
/// kcp TMC: the namespace label the Placements select on (`all`, or one cluster).
const TMC_TO: &str = "bench.ferry.dev/to";

/// One stand-in cluster: its hub, its syncer and what the bench watches there.
struct Member {
    name: String,
    hub: BenchHub,
    syncer: tokio::process::Child,
    pid: u32,
    metrics: SocketAddr,
    log: PathBuf,
    /// KubeStellar: an admin client of the cluster's mailbox workspace.
    mailbox: Option<kube::Client>,
}

/// The hub, the workload's workspace and every cluster.
struct Fleet {
    hub: BenchHub,
    /// Admin client of the workspace the workload is written to.
    workload: kube::Client,
    members: Vec<Member>,
}

pub async fn run(args: FleetBenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.clusters > 0, "--clusters must be at least 1");
    anyhow::ensure!(args.objects > 0, "--objects must be at least 1");
    anyhow::ensure!(args.rate > 0, "--rate must be at least 1");
    anyhow::ensure!(
        args.profile != ProfileName::Syncagent,
        "ferry bench fleet measures syncers that reach clusters: --profile kubestellar or tmc \
         (the api-syncagent has its own: ferry bench sync --profile syncagent)"
    );
    let progress = |msg: &str| {
        if !args.json {
            eprintln!("… {msg}");
        }
    };
    let load_before = loadavg();
    let setup_started = Instant::now();
    progress(&format!("setting up {} clusters", args.clusters));
    let fleet = if args.tmc() {
        setup_tmc(&args, &progress).await?
    } else {
        setup_kubestellar(&args, &progress).await?
    };
    let report = measure(&args, &fleet, &progress, setup_started.elapsed(), load_before).await;
    let report = match report {
        Ok(r) => r,
        Err(e) => {
            // The clusters' directories (with the syncers' logs) outlive the run.
            let logs: Vec<String> = fleet
                .members
                .into_iter()
                .map(|m| {
                    let log = m.log.display().to_string();
                    let _ = m.hub.data_dir.keep();
                    log
                })
                .collect();
            return Err(e.context(format!(
                "ferry bench fleet failed; the syncers' logs are kept: {}",
                logs.join(", ")
            )));
        }
    };
    for mut m in fleet.members {
        let _ = m.syncer.kill().await;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&args, &report);
    }
    Ok(())
}

/// The 1-, 5- and 15-minute load averages (`/proc/loadavg`).
pub(crate) fn loadavg() -> Vec<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .filter_map(|v| v.parse().ok())
        .collect()
}

fn cluster_name(i: usize) -> String {
    format!("cluster-{i:03}")
}

/// A stand-in cluster's hub: a distinct cluster (its own service and node-port ranges),
/// without the hub-side controllers a workload cluster does not run.
async fn cluster_hub(exe: Option<&std::path::Path>, name: &str) -> anyhow::Result<BenchHub> {
    let ranges = ferry_server::strategy::core::service::ServiceRanges::distinct(
        crate::quickstart::stand_in_index(name),
    );
    let (ip, prefix) = ranges.cluster_ip;
    let cidr = format!("{ip}/{prefix}");
    let ports = format!("{}-{}", ranges.node_ports.start(), ranges.node_ports.end());
    BenchHub::start_with(
        exe,
        &[
            "--disable-mailbox-controller",
            "--disable-placement-translator",
            "--disable-compute-workspace",
            "--service-cluster-ip-range",
            &cidr,
            "--service-node-port-range",
            &ports,
        ],
    )
    .await
    .with_context(|| format!("starting the stand-in cluster {name}"))
}

/// Starts the syncer of the manifest applied to `cluster` (Deployment `namespace/id`)
/// as its pod would run, as a `ferry` process.
async fn start_syncer(
    exe: Option<&std::path::Path>,
    name: String,
    cluster: BenchHub,
    namespace: &str,
    id: &str,
    mailbox: Option<kube::Client>,
) -> anyhow::Result<Member> {
    let dir = cluster.data_dir.path().join("pod");
    let ca = std::fs::read_to_string(cluster.data_dir.path().join("pki/ca.crt"))?;
    let pod =
        crate::syncer_pod::from_applied(&cluster.process.url, &ca, &cluster.client, namespace, id, &dir)
            .await?;
    let metrics = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let log = cluster.data_dir.path().join("syncer.log");
    let exe = match exe {
        Some(exe) => exe.to_path_buf(),
        None => std::env::current_exe()?,
    };
    let syncer = tokio::process::Command::new(exe)
        .args(&pod.args)
        .arg(format!("--metrics-address={metrics}"))
        .env("NAMESPACE", &pod.namespace)
        .env("HOSTNAME", format!("{id}-pod"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .kill_on_drop(true)
        .spawn()
        .context("starting `ferry syncer`")?;
    let pid = syncer.id().context("syncer pid")?;
    Ok(Member {
        name,
        hub: cluster,
        syncer,
        pid,
        metrics,
        log,
        mailbox,
    })
}

/// `count` clusters set up by `one(i)`, `concurrency` at a time, in order.
async fn members<F, Fut>(count: usize, concurrency: usize, one: F) -> anyhow::Result<Vec<Member>>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Member>>,
{
    let mut members: Vec<(usize, Member)> = futures::stream::iter(0..count)
        .map(|i| {
            let f = one(i);
            async move { f.await.map(|m| (i, m)) }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect()
        .await?;
    members.sort_by_key(|(i, _)| *i);
    Ok(members.into_iter().map(|(_, m)| m).collect())
}

/// KubeStellar: `kubestellar init`, a WMW, a SyncTarget and Location per cluster in the
/// inventory workspace (labelled `fleet=bench`), `syncer-gen` against each mailbox, and
/// one EdgePlacement selecting every Location.
async fn setup_kubestellar(args: &FleetBenchArgs, progress: &impl Fn(&str)) -> anyhow::Result<Fleet> {
    let hub = BenchHub::start_with(args.binary.as_deref(), &[]).await?;
    let config = crate::kubeconfig::load(Some(&hub.process.kubeconfig), None).await?;
    let at = |ws: &str| ferry_server::kubeconfig::at_workspace(&config, ws);
    let init = crate::kubestellar_cmd::init(&config).await?;
    let root = kube::Client::try_from(at("root")?)?;
    let imw_cluster = crate::quickstart::imw_cluster(&root).await?;
    let imw_config = at(&init.imw)?;
    let wmw = crate::ensure_cmd::ensure_wmw(&at("root")?, WMW).await?;
    let members = members(args.clusters, args.setup_concurrency, |i| {
        let (root, imw_config, imw_cluster, at) = (&root, &imw_config, &imw_cluster, &at);
        async move {
            let name = cluster_name(i);
            let cluster = cluster_hub(args.binary.as_deref(), &name).await?;
            let labels = BTreeMap::from([
                ("fleet".to_string(), "bench".to_string()),
                ("name".to_string(), name.clone()),
            ]);
            let target = crate::ensure_cmd::ensure_location(imw_config, &name, &labels).await?;
            let uid = target.metadata.uid.clone().unwrap_or_default();
            let mailbox = ferry_api::edge::mailbox::mailbox_name(imw_cluster, &uid);
            crate::quickstart::wait_ready_workspaces(root, &[&mailbox]).await?;
            let gen_args = crate::syncer_gen::SyncerGenArgs::stand_in(
                &name,
                cluster.data_dir.path().join("syncer.yaml"),
            );
            let mailbox_config = at(&format!("root:{mailbox}"))?;
            let reg = crate::syncer_gen::generate(&mailbox_config, &gen_args).await?;
            crate::quickstart::apply_manifest(&cluster.client, &reg.manifest).await?;
            let mailbox_client = kube::Client::try_from(mailbox_config)?;
            progress(&format!("{name}: registered; starting its syncer"));
            start_syncer(
                args.binary.as_deref(),
                name,
                cluster,
                &reg.syncer_id,
                &reg.syncer_id,
                Some(mailbox_client),
            )
            .await
        }
    })
    .await?;
    let workload = kube::Client::try_from(at(&wmw)?)?;
    let selected = json!({"matchLabels": {LABEL: "yes"}});
    let placement = json!({
        "apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "EdgePlacement",
        "metadata": {"name": "fleet"},
        "spec": {
            "locationSelectors": [{"matchLabels": {"fleet": "bench"}}],
            "downsync": [
                {"apiGroup": "", "resources": ["configmaps"], "namespaceSelectors": [selected]},
                {"apiGroup": "apps", "resources": ["deployments"], "namespaceSelectors": [selected]},
            ],
            "wantSingletonReportedState": false,
        },
    });
    crate::quickstart::apply_object(&workload, &placement).await?;
    crate::quickstart::apply_object(
        &workload,
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS, "labels": {LABEL: "yes"}}}),
    )
    .await?;
    crate::quickstart::apply_object(&workload, &probe_deployment(NS)).await?;
    Ok(Fleet {
        hub,
        workload,
        members,
    })
}

/// kcp TMC: workspaces `root:fleet-org` (SyncTargets) and `root:fleet-app` (the
/// workload); `kubectl ferry workload sync` per cluster (labelled with its name), a
/// Location per SyncTarget and a Placement per Location from `kubectl ferry bind
/// compute`, each selecting the namespaces labelled `bench.ferry.dev/to` `all` or its
/// cluster.
async fn setup_tmc(args: &FleetBenchArgs, progress: &impl Fn(&str)) -> anyhow::Result<Fleet> {
    let hub = BenchHub::start_with(args.binary.as_deref(), &[]).await?;
    let config = crate::kubeconfig::load(Some(&hub.process.kubeconfig), None).await?;
    let at = |ws: &str| ferry_server::kubeconfig::at_workspace(&config, ws);
    let root = kube::Client::try_from(at("root")?)?;
    crate::quickstart::apply_workspaces(&root, &[ORG, APP]).await?;
    let org_config = at(&format!("root:{ORG}"))?;
    let org = kube::Client::try_from(org_config.clone())?;
    let workload = kube::Client::try_from(at(&format!("root:{APP}"))?)?;
    let mut members = members(args.clusters, args.setup_concurrency, |i| {
        let (org_config, org) = (&org_config, &org);
        async move {
            let name = cluster_name(i);
            let cluster = cluster_hub(args.binary.as_deref(), &name).await?;
            let sync_args = crate::workload_cmd::SyncArgs {
                labels: vec![format!("{TMC_TO}={name}")],
                timeout: Duration::from_secs(60),
                ..crate::workload_cmd::SyncArgs::stand_in(&name, cluster.data_dir.path().join("syncer.yaml"))
            };
            let reg = crate::workload_cmd::sync(org_config, &sync_args).await?;
            crate::quickstart::apply_manifest(&cluster.client, &reg.manifest).await?;
            let location = json!({
                "apiVersion": "scheduling.kcp.io/v1alpha1", "kind": "Location",
                "metadata": {"name": name, "labels": {TMC_TO: name}},
                "spec": {
                    "resource": {"group": "workload.kcp.io", "version": "v1alpha1", "resource": "synctargets"},
                    "instanceSelector": {"matchLabels": {TMC_TO: name}},
                },
            });
            crate::quickstart::apply_object(org, &location).await?;
            progress(&format!("{name}: registered; starting its syncer"));
            start_syncer(args.binary.as_deref(), name, cluster, &reg.syncer_id, &reg.syncer_id, None).await
        }
    })
    .await?;
    progress("waiting for every SyncTarget to be Ready");
    wait_ready_targets(&org, &mut members).await?;
    for m in &members {
        let compute = crate::bind_cmd::ComputeArgs {
            location_workspace: format!("root:{ORG}"),
            apiexports: vec![crate::workload_cmd::DEFAULT_EXPORT.into()],
            location_selectors: vec![format!("{TMC_TO}={}", m.name)],
            namespace_selector: format!("{TMC_TO} in (all,{})", m.name),
            name: Some(m.name.clone()),
            timeout: Duration::from_secs(60),
            kubeconfig: None,
            context: None,
        };
        crate::bind_cmd::bind_compute(&workload, &compute, &|_| {}).await?;
    }
    let namespace = |name: &str, to: &str| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {TMC_TO: to}}});
    crate::quickstart::apply_object(&workload, &namespace(NS, "all")).await?;
    // kcp TMC keeps one status per object, which every target's syncer would write in
    // turn: each cluster's status returns on a Deployment of its own namespace.
    for m in &members {
        let ns = status_namespace(&m.name);
        crate::quickstart::apply_object(&workload, &namespace(&ns, &m.name)).await?;
        crate::quickstart::apply_object(&workload, &probe_deployment(&ns)).await?;
    }
    Ok(Fleet {
        hub,
        workload,
        members,
    })
}

/// kcp TMC: the namespace of cluster `name`'s status probe.
fn status_namespace(name: &str) -> String {
    format!("status-{name}")
}

/// Wait until every member's SyncTarget is Ready; past the deadline, the error names
/// each one that is not, with its Ready condition and how its syncer is doing.
async fn wait_ready_targets(org: &kube::Client, members: &mut [Member]) -> anyhow::Result<()> {
    let targets = Api::<DynamicObject>::all_with(
        org.clone(),
        &ar("workload.kcp.io", "v1alpha1", "SyncTarget", "synctargets"),
    );
    let want = members.len();
    let deadline = Instant::now() + Duration::from_secs(120 + want as u64);
    loop {
        let listed = targets.list(&ListParams::default()).await?.items;
        let ready_condition = |name: &str| {
            listed
                .iter()
                .find(|t| t.metadata.name.as_deref() == Some(name))
                .and_then(|t| {
                    t.data
                        .pointer("/status/conditions")?
                        .as_array()?
                        .iter()
                        .find(|c| c["type"] == "Ready")
                })
                .cloned()
        };
        let waiting: Vec<usize> = (0..want)
            .filter(|i| ready_condition(&members[*i].name).is_none_or(|c| c["status"] != "True"))
            .collect();
        if waiting.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            let why: Vec<String> = waiting
                .into_iter()
                .map(|i| {
                    let m = &mut members[i];
                    let syncer = match m.syncer.try_wait() {
                        Ok(Some(status)) => format!("its syncer exited ({status})"),
                        Ok(None) => "its syncer is running".to_string(),
                        Err(e) => format!("its syncer cannot be asked: {e}"),
                    };
                    let log = std::fs::read_to_string(&m.log).unwrap_or_default();
                    not_ready(&m.name, ready_condition(&m.name).as_ref(), &syncer, &log)
                })
                .collect();
            anyhow::bail!(
                "{} of {want} SyncTargets in root:{ORG} became Ready; not Ready: {}",
                want - why.len(),
                why.join("; ")
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// One SyncTarget that did not become Ready: its name, its Ready condition, how its
/// syncer is doing and the last line of the syncer's log.
fn not_ready(name: &str, ready: Option<&Value>, syncer: &str, log: &str) -> String {
    let condition = match ready {
        Some(c) => format!(
            "Ready {} ({}: {})",
            c["status"].as_str().unwrap_or("?"),
            c["reason"].as_str().unwrap_or(""),
            c["message"].as_str().unwrap_or("")
        ),
        None => "no Ready condition".to_string(),
    };
    let last = log
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("(empty)");
    format!("{name}: {condition}; {syncer}; its log ends: {last}")
}

fn probe_deployment(namespace: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": PROBE, "namespace": namespace, "labels": {LABEL: "probe"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": PROBE}},
            "template": {"metadata": {"labels": {"app": PROBE}},
                         "spec": {"containers": [{"name": "c", "image": "nginx"}]}},
        },
    })
}

fn fleet_configmap(name: &str, version: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS, "labels": {LABEL: "yes"}},
        "data": {"version": version, "payload": "x".repeat(256)},
    }))
    .expect("configmap")
}

/// The key a ConfigMap copy is tracked by when it matters which version it holds.
fn versioned(cm: &ConfigMap) -> Option<String> {
    let version = cm.data.as_ref()?.get("version")?;
    Some(format!("{}#{version}", cm.metadata.name.as_deref()?))
}

/// The key of a Deployment whose status carries a marker (`readyReplicas`).
fn status_marker(d: &Deployment) -> Option<String> {
    let ready = d.status.as_ref()?.ready_replicas?;
    Some(format!(
        "{}#{ready}",
        d.metadata.namespace.as_deref().unwrap_or_default()
    ))
}

/// The marker cluster `i` writes in round `round` of `clusters`: distinct per cluster
/// and round, so an arrival upstream names its cluster.
fn marker(round: usize, clusters: usize, i: usize) -> i32 {
    i32::try_from(round * clusters + i + 1).unwrap_or(i32::MAX)
}

/// What the bench watches in one cluster (and, for KubeStellar, its mailbox).
struct Watches {
    copies: Arc<Seen>,
    versions: Arc<Seen>,
    _trackers: Vec<Tracker>,
}

fn watch_cluster(m: &Member) -> Watches {
    let copies = Seen::new();
    let versions = Seen::new();
    let labels = watcher::Config::default().labels(&format!("{LABEL}=yes"));
    let api = || Api::<ConfigMap>::all(m.hub.client.clone());
    let trackers = vec![
        track(api(), labels.clone(), copies.clone(), crate::bench_sync::name_of),
        track(api(), labels, versions.clone(), versioned),
    ];
    Watches {
        copies,
        versions,
        _trackers: trackers,
    }
}

/// Where the hub's part of each copy's journey ends, per cluster: for KubeStellar the
/// copy in the cluster's mailbox workspace (the placement translator's work), for kcp
/// TMC the object labelled for every cluster (the scheduler's). The rest of the journey
/// is the syncer's.
struct HubStage {
    seen: Vec<Arc<Seen>>,
    /// kcp TMC: the object's key once labelled for every cluster.
    tmc_clusters: Option<usize>,
    _trackers: Vec<Tracker>,
}

impl HubStage {
    fn key(&self, name: &str) -> String {
        match self.tmc_clusters {
            Some(n) => format!("{name}#{n}"),
            None => name.to_string(),
        }
    }
}

/// A ConfigMap's name and how many kcp TMC targets it is labelled to sync to.
fn scheduled(cm: &ConfigMap) -> Option<String> {
    let targets = cm
        .metadata
        .labels
        .iter()
        .flatten()
        .filter(|(k, v)| {
            k.starts_with(ferry_api::well_known::WORKLOAD_STATE_LABEL_PREFIX)
                && *v == ferry_api::well_known::WORKLOAD_STATE_SYNC
        })
        .count();
    Some(format!("{}#{targets}", cm.metadata.name.as_deref()?))
}

fn watch_hub_stage(args: &FleetBenchArgs, fleet: &Fleet) -> HubStage {
    let labels = watcher::Config::default().labels(&format!("{LABEL}=yes"));
    if args.tmc() {
        let seen = Seen::new();
        let tracker = track(
            Api::<ConfigMap>::namespaced(fleet.workload.clone(), NS),
            labels,
            seen.clone(),
            scheduled,
        );
        return HubStage {
            seen: vec![seen; fleet.members.len()],
            tmc_clusters: Some(fleet.members.len()),
            _trackers: vec![tracker],
        };
    }
    let mut seen = vec![];
    let mut trackers = vec![];
    for m in &fleet.members {
        let s = Seen::new();
        let mailbox = m.mailbox.clone().expect("a KubeStellar cluster has a mailbox");
        trackers.push(track(
            Api::<ConfigMap>::namespaced(mailbox, NS),
            labels.clone(),
            s.clone(),
            crate::bench_sync::name_of,
        ));
        seen.push(s);
    }
    HubStage {
        seen,
        tmc_clusters: None,
        _trackers: trackers,
    }
}

/// Where each cluster's returned status shows upstream, one tracker per place.
struct StatusWatches {
    /// Per cluster: the Seen its status marker arrives in, and the key's prefix.
    per_cluster: Vec<(Arc<Seen>, String)>,
    _trackers: Vec<Tracker>,
}

fn watch_status(args: &FleetBenchArgs, fleet: &Fleet) -> StatusWatches {
    let mut trackers = vec![];
    let mut per_cluster = vec![];
    if args.tmc() {
        let seen = Seen::new();
        trackers.push(track(
            Api::<Deployment>::all(fleet.workload.clone()),
            watcher::Config::default().labels(&format!("{LABEL}=probe")),
            seen.clone(),
            status_marker,
        ));
        for m in &fleet.members {
            per_cluster.push((seen.clone(), status_namespace(&m.name)));
        }
    } else {
        for m in &fleet.members {
            let seen = Seen::new();
            let mailbox = m.mailbox.clone().expect("a KubeStellar cluster has a mailbox");
            trackers.push(track(
                Api::<Deployment>::namespaced(mailbox, NS),
                watcher::Config::default(),
                seen.clone(),
                status_marker,
            ));
            per_cluster.push((seen, NS.to_string()));
        }
    }
    StatusWatches {
        per_cluster,
        _trackers: trackers,
    }
}

/// Waits until the probe Deployment is in every cluster and every syncer's queue is
/// empty; returns, per cluster, the namespace its probe copy is in.
async fn wait_idle(args: &FleetBenchArgs, fleet: &Fleet) -> anyhow::Result<Vec<String>> {
    let deadline = Instant::now() + Duration::from_secs(120 + 2 * args.clusters as u64);
    let mut namespaces = vec![];
    for m in &fleet.members {
        let api = Api::<Deployment>::all(m.hub.client.clone());
        let lp = ListParams::default().labels(&format!("{LABEL}=probe"));
        loop {
            let found = api.list(&lp).await?.items.into_iter().next();
            if let Some(ns) = found.and_then(|d| d.metadata.namespace) {
                namespaces.push(ns);
                break;
            }
            if !readyz(m.metrics).await && Instant::now() >= deadline {
                anyhow::bail!(
                    "the syncer of {} never became ready; see {}",
                    m.name,
                    m.log.display()
                );
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "the workload never reached {}; see its syncer's log {}",
                m.name,
                m.log.display()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    for m in &fleet.members {
        idle(m.metrics)
            .await
            .with_context(|| format!("{}'s syncer", m.name))?;
    }
    Ok(namespaces)
}

/// One round's samples.
#[derive(Default)]
struct Samples {
    copy_ms: Vec<f64>,
    hub_stage_ms: Vec<f64>,
    syncer_stage_ms: Vec<f64>,
    copy_p99_per_round: Vec<f64>,
    status_ms: Vec<f64>,
    converge_ms: Vec<f64>,
    converge_per_cluster_ms: Vec<f64>,
}

async fn measure(
    args: &FleetBenchArgs,
    fleet: &Fleet,
    progress: &impl Fn(&str),
    setup: Duration,
    load_before: Vec<f64>,
) -> anyhow::Result<Value> {
    let watches: Vec<Watches> = fleet.members.iter().map(watch_cluster).collect();
    let status = watch_status(args, fleet);
    let hub_stage = watch_hub_stage(args, fleet);
    progress("waiting until the fleet is idle");
    let probe_namespaces = wait_idle(args, fleet).await?;
    let all_seen = watches
        .iter()
        .flat_map(|w| [&w.copies, &w.versions])
        .chain(status.per_cluster.iter().map(|(seen, _)| seen))
        .chain(&hub_stage.seen);
    for seen in all_seen {
        seen.wait_listed("the fleet's objects").await?;
    }
    let hub_pid = fleet.hub.process.child.id();
    let hub_rss_idle = rss_mib(hub_pid)?;
    let hub_cpu_before = cpu_seconds(hub_pid)?;
    let syncer_cpu_before: Vec<f64> = fleet
        .members
        .iter()
        .map(|m| cpu_seconds(m.pid))
        .collect::<anyhow::Result<_>>()?;
    let hub_requests_before = hub_requests(fleet).await?;
    let measured_from = Instant::now();
    let n = fleet.members.len();
    let up_cms: Api<ConfigMap> = Api::namespaced(fleet.workload.clone(), NS);
    let mut s = Samples::default();
    let wait = Duration::from_secs(120) + Duration::from_secs_f64(args.objects as f64 / f64::from(args.rate));
    for round in 0..args.rounds.max(1) {
        let tag = if args.rounds > 1 {
            format!(" (round {} of {})", round + 1, args.rounds)
        } else {
            String::new()
        };
        // 1. Copies.
        progress(&format!(
            "writing {} ConfigMaps at {}/s into {} clusters{tag}",
            args.objects, args.rate, n
        ));
        let before: Vec<usize> = watches.iter().map(|w| w.copies.count()).collect();
        let names: Vec<String> = (0..args.objects).map(|j| format!("obj-r{round}-{j}")).collect();
        let sent = at_rate(args.rate, names, |name| {
            let api = up_cms.clone();
            async move {
                api.create(&PostParams::default(), &fleet_configmap(&name, "v1"))
                    .await?;
                Ok(())
            }
        })
        .await?;
        let mut round_ms = vec![];
        for (i, (w, (m, before))) in watches.iter().zip(fleet.members.iter().zip(before)).enumerate() {
            w.copies
                .wait_for(before + args.objects, wait, &format!("the copies in {}", m.name))
                .await?;
            let copies = w.copies.at.lock().await.clone();
            round_ms.extend(latencies(&sent, &copies));
            // The journey in two: the hub's part, then the syncer's.
            for (name, t0) in &sent {
                let what = format!("{name} at the end of the hub's part for {}", m.name);
                let relayed = wait_key(&hub_stage.seen[i], &hub_stage.key(name), wait, &what).await?;
                let copied = *copies
                    .get(name)
                    .with_context(|| format!("no copy of {name} was seen in {}", m.name))?;
                s.hub_stage_ms
                    .push(relayed.saturating_duration_since(*t0).as_secs_f64() * 1000.0);
                s.syncer_stage_ms
                    .push(copied.saturating_duration_since(relayed).as_secs_f64() * 1000.0);
            }
        }
        anyhow::ensure!(
            round_ms.len() == args.objects * n,
            "{} copy latencies measured where {} objects × {n} clusters were written",
            round_ms.len(),
            args.objects
        );
        s.copy_p99_per_round
            .push(Summary::of("copy latency", round_ms.clone())?.p99);
        s.copy_ms.extend(round_ms);

        // 2. Status return.
        progress(&format!("returning a status from each of {n} clusters{tag}"));
        let indices: Vec<String> = (0..n).map(|i| i.to_string()).collect();
        let written = at_rate(args.rate, indices, |i| {
            let i: usize = i.parse().expect("an index");
            let api =
                Api::<Deployment>::namespaced(fleet.members[i].hub.client.clone(), &probe_namespaces[i]);
            let m = marker(round, n, i);
            async move {
                api.patch_status(
                    PROBE,
                    &PatchParams::default(),
                    &Patch::Merge(
                        json!({"status": {"replicas": m, "readyReplicas": m, "observedGeneration": 1}}),
                    ),
                )
                .await?;
                Ok(())
            }
        })
        .await?;
        for (i, m) in fleet.members.iter().enumerate() {
            let (seen, prefix) = &status.per_cluster[i];
            let key = format!("{prefix}#{}", marker(round, n, i));
            let at = wait_key(seen, &key, wait, &format!("{}'s status upstream", m.name)).await?;
            let t0 = written[&i.to_string()];
            s.status_ms
                .push(at.saturating_duration_since(t0).as_secs_f64() * 1000.0);
        }

        // 3. One change reaching every cluster.
        progress(&format!("changing one ConfigMap everywhere{tag}"));
        let changed = format!("obj-r{round}-0");
        let version = format!("v2-r{round}");
        let t0 = Instant::now();
        // A merge patch of the one key, as `kubectl patch` would: a read-then-replace
        // was refused (409) whenever the hub's own controllers wrote the object in
        // between.
        up_cms
            .patch(
                &changed,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({ "data": { "version": version } })),
            )
            .await
            .with_context(|| format!("changing ConfigMap {NS}/{changed}"))?;
        let key = format!("{changed}#{version}");
        let mut slowest = 0.0f64;
        for (w, m) in watches.iter().zip(&fleet.members) {
            let at = wait_key(&w.versions, &key, wait, &format!("the change in {}", m.name)).await?;
            let ms = at.saturating_duration_since(t0).as_secs_f64() * 1000.0;
            slowest = slowest.max(ms);
            s.converge_per_cluster_ms.push(ms);
        }
        s.converge_ms.push(slowest);
    }
    let elapsed = measured_from.elapsed().as_secs_f64();
    let hub_cpu = cpu_seconds(hub_pid)? - hub_cpu_before;
    let hub_requests = hub_requests(fleet).await?.since(&hub_requests_before);
    let mut syncer_rss = vec![];
    let mut syncer_cpu = vec![];
    let mut cluster_rss = vec![];
    for (m, before) in fleet.members.iter().zip(syncer_cpu_before) {
        syncer_rss.push(rss_mib(m.pid)?);
        syncer_cpu.push(cpu_seconds(m.pid)? - before);
        cluster_rss.push(rss_mib(m.hub.process.child.id())?);
    }
    let copies_seen: usize = watches.iter().map(|w| w.copies.count()).sum();
    let rounds = args.rounds.max(1);
    Ok(json!({
        "method": method(args, n),
        "machine": {
            "cpus": std::thread::available_parallelism().map(|p| p.get()).unwrap_or(0),
            "loadavg_before": load_before, "loadavg_after": loadavg(),
        },
        "setup_secs": round3(setup.as_secs_f64()),
        "copy_latency_ms": Summary::of("copy latency", s.copy_ms)?,
        "copy_p99_ms": Rounds::of("copy latency p99", s.copy_p99_per_round)?,
        "copies_seen": copies_seen,
        "copy_stages_ms": {
            "hub": Summary::of("the hub's part of the copy latency", s.hub_stage_ms)?,
            "syncer": Summary::of("the syncer's part of the copy latency", s.syncer_stage_ms)?,
        },
        "status_return_ms": Summary::of("status return", s.status_ms)?,
        "converge_ms": Rounds::of("convergence of one change", s.converge_ms)?,
        "converge_per_cluster_ms": Summary::of("one change, per cluster", s.converge_per_cluster_ms)?,
        "hub": {
            "rss_mib_idle": round3(hub_rss_idle), "rss_mib_after": round3(rss_mib(hub_pid)?),
            "cpu_seconds": round3(hub_cpu), "cpu_percent_of_one_core": round3(hub_cpu / elapsed * 100.0),
        },
        "syncers": {
            "rss_mib": Summary::of("syncer RSS", syncer_rss)?,
            "cpu_seconds": Summary::of("syncer CPU", syncer_cpu.clone())?,
            "cpu_seconds_total": round3(syncer_cpu.iter().sum()),
        },
        "cluster_hubs": { "rss_mib": Summary::of("stand-in cluster RSS", cluster_rss)? },
        "hub_requests": {
            "configmap_patches_refused": refused_patches(&hub_requests, "configmaps"),
            "by_kind_per_object": hub_requests.per_object(args.objects * rounds),
        },
        "hub_controllers": hub_requests.controllers(),
        "hub_storage": hub_requests.storage(),
        "measured_secs": round3(elapsed),
        "rounds": rounds,
        "targets": { "copy_p99_ms_at_most": 1000.0, "syncer_rss_mib_at_most": 40.0 },
    }))
}

/// The hub's request counters (its `/metrics`).
async fn hub_requests(fleet: &Fleet) -> anyhow::Result<Requests> {
    let hub = &fleet.hub.process;
    let text = crate::bench_requests::scrape(&hub.kubeconfig, &hub.url)
        .await
        .context("reading the hub's /metrics")?;
    Ok(Requests::parse("hub", &text))
}

/// PATCHes of `resource` the hub refused as conflicts (409) or failed tests of a JSON
/// patch (422): in this bench, syncers' finalizer patches that lost a race and are
/// sent again (the bench itself creates and replaces its ConfigMaps).
fn refused_patches(requests: &Requests, resource: &str) -> f64 {
    requests
        .counts
        .iter()
        .filter(|(k, _)| {
            k.verb == "PATCH" && k.resource == resource && matches!(k.code.as_str(), "409" | "422")
        })
        .map(|(_, n)| n)
        .sum()
}

/// Waits until `seen` has `key`; when it was first seen.
async fn wait_key(seen: &Seen, key: &str, timeout: Duration, what: &str) -> anyhow::Result<Instant> {
    let deadline = Instant::now() + timeout;
    loop {
        // Counted before looking, so an arrival in between still wakes the wait below.
        let count = seen.count();
        if let Some(at) = seen.at.lock().await.get(key) {
            return Ok(*at);
        }
        anyhow::ensure!(Instant::now() < deadline, "timed out waiting for {what}");
        // Anything new wakes the wait; the deadline bounds it.
        let _ = seen
            .wait_for(
                count + 1,
                deadline.saturating_duration_since(Instant::now()),
                what,
            )
            .await;
    }
}

fn method(args: &FleetBenchArgs, clusters: usize) -> Value {
    json!({
        "processes": {
            "hub": "`ferry hub` child process (SQLite in a temporary directory)",
            "clusters": "one `ferry hub` child process per stand-in cluster (its own port, service and node-port ranges)",
            "syncers": "one `ferry syncer` child process per cluster, started from its applied manifest as its pod would be",
            "measuring_watches": "this process: per cluster one kube-rs watch of the copies; status watched upstream",
        },
        "binary": args.binary.as_ref().map(|p| p.display().to_string()),
        "profile": if args.tmc() { "tmc" } else { "kubestellar" },
        "placement": if args.tmc() {
            "a Location per SyncTarget and a Placement per Location (kcp schedules one target per Placement), \
             each selecting the namespace `fleet`; each cluster's status probe in a namespace of its own"
        } else {
            "one EdgePlacement selecting every Location (label fleet=bench); a mailbox workspace per SyncTarget"
        },
        "concurrency": { "clusters": clusters, "write_rate_per_sec": args.rate },
        "objects": {
            "kind": "ConfigMap with a 256-byte value, in namespace `fleet` of the workload's workspace",
            "per_round": args.objects, "copies_per_round": args.objects * clusters,
            "status": "a Deployment's status written in each cluster (at the write rate) → upstream",
            "change": "one ConfigMap's data changed upstream → every cluster",
        },
        "copy_stages": if args.tmc() {
            "hub: the write → the object labelled for every SyncTarget (the scheduler), seen by a watch upstream; \
             syncer: from then → the copy in the cluster"
        } else {
            "hub: the write → the copy in the cluster's mailbox workspace (the placement translator), seen by a \
             watch of each mailbox; syncer: from then → the copy in the cluster"
        },
        "hub_controllers": "per controller of the hub while measured: the changes, passes or looks at everything \
                            it handled, one at a time, and the time it spent on them (the hub's /metrics)",
        "hub_storage": "the hub's store while measured: its commits (writes are committed in batches by one \
                        thread), the writes in them, the mean time of a commit and of a write from queued to \
                        visible (the hub's /metrics)",
        "rounds": args.rounds.max(1),
        "timing": "the fleet is idle (the workload in every cluster, every syncer's queue empty) before the first write; \
                   latencies from the write's request being sent to the watch seeing its effect",
        "statistics": crate::bench_sync::STATISTICS,
    })
}

fn print_table(args: &FleetBenchArgs, report: &Value) {
    println!(
        "ferry bench fleet --profile {} --clusters {} --objects {} --rate {} (every process separate; \
         load average {} before, {} after)",
        report["method"]["profile"].as_str().unwrap_or("?"),
        args.clusters,
        args.objects,
        args.rate,
        report["machine"]["loadavg_before"],
        report["machine"]["loadavg_after"],
    );
    for (name, ptr) in [
        ("copy (write → each cluster)", "/copy_latency_ms"),
        ("  of which the hub's part", "/copy_stages_ms/hub"),
        ("  of which the syncer's part", "/copy_stages_ms/syncer"),
        ("status return", "/status_return_ms"),
        ("one change, per cluster", "/converge_per_cluster_ms"),
        ("syncer RSS MiB", "/syncers/rss_mib"),
        ("syncer CPU s", "/syncers/cpu_seconds"),
    ] {
        if let Some(s) = report
            .pointer(ptr)
            .and_then(|v| serde_json::from_value::<Summary>(v.clone()).ok())
        {
            println!(
                "  {name:<28} p50 {:>9.2}  p90 {:>9.2}  p99 {:>9.2}  max {:>9.2}  n {}",
                s.p50, s.p90, s.p99, s.max, s.n
            );
        }
    }
    println!(
        "  converged everywhere in     {} ms (median of rounds {})",
        report["converge_ms"]["median"], report["converge_ms"]["rounds"]
    );
    println!(
        "  hub                         RSS {} MiB idle, {} MiB after; {}% of one core while measured",
        report["hub"]["rss_mib_idle"],
        report["hub"]["rss_mib_after"],
        report["hub"]["cpu_percent_of_one_core"]
    );
    println!(
        "  refused ConfigMap patches   {} (conflicts and failed tests at the hub)",
        report["hub_requests"]["configmap_patches_refused"]
    );
    println!("  set-up                      {} s", report["setup_secs"]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sync_target_not_ready_is_named_with_its_condition_and_its_syncers_last_words() {
        let condition = json!({"type": "Ready", "status": "False", "reason": "HeartbeatMissed",
            "message": "no heartbeat for 60s"});
        assert_eq!(
            not_ready(
                "cluster-7",
                Some(&condition),
                "its syncer is running",
                "started\nlost the hub\n\n"
            ),
            "cluster-7: Ready False (HeartbeatMissed: no heartbeat for 60s); its syncer is running; \
             its log ends: lost the hub"
        );
        assert_eq!(
            not_ready("cluster-8", None, "its syncer exited (exit status: 1)", ""),
            "cluster-8: no Ready condition; its syncer exited (exit status: 1); its log ends: (empty)"
        );
    }

    #[test]
    fn markers_name_one_cluster_and_round() {
        let mut all = std::collections::BTreeSet::new();
        for round in 0..3 {
            for i in 0..5 {
                assert!(all.insert(marker(round, 5, i)));
            }
        }
        assert_eq!(marker(0, 5, 0), 1);
    }

    #[test]
    fn keys_carry_what_is_measured() {
        let cm = fleet_configmap("obj-r0-0", "v2-r0");
        assert_eq!(versioned(&cm).as_deref(), Some("obj-r0-0#v2-r0"));
        let d: Deployment = serde_json::from_value(json!({
            "metadata": {"name": PROBE, "namespace": "status-cluster-001"},
            "status": {"readyReplicas": 7}
        }))
        .unwrap();
        assert_eq!(status_marker(&d).as_deref(), Some("status-cluster-001#7"));
        let pending: Deployment =
            serde_json::from_value(json!({"metadata": {"name": PROBE, "namespace": NS}})).unwrap();
        assert_eq!(status_marker(&pending), None);
        let mut labelled = fleet_configmap("obj-r0-1", "v1");
        let labels = labelled.metadata.labels.get_or_insert_with(Default::default);
        labels.insert("state.workload.kcp.io/abc".into(), "Sync".into());
        labels.insert("state.workload.kcp.io/def".into(), "Sync".into());
        labels.insert("state.workload.kcp.io/ghi".into(), "Upsync".into());
        assert_eq!(scheduled(&labelled).as_deref(), Some("obj-r0-1#2"));
    }
}
