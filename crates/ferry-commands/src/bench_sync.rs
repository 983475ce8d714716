//! `ferry bench sync`: the syncer against two hubs, with every figure compared to a
//! baseline measured in the same run.
//!
//! Arrangement (reported in the JSON's `method` block): each hub is a `ferry hub` child
//! process; the syncer is a `ferry syncer` child process; the baseline client is a
//! `ferry bench create-load` child process. The syncer and the baseline client both run
//! on a current-thread runtime with the same number of requests in flight, and both are
//! timed the same way: from the bench's start signal (the SyncerConfig's creation, or a
//! line on the client's stdin) until a watch in this process has seen every object
//! downstream.
//!
//! 1. Raw create throughput (the baseline): `--objects` ConfigMaps created downstream.
//! 2. Initial sync: `--objects` ConfigMaps exist upstream before the SyncerConfig that
//!    selects them; the syncer's rate and CPU time per object. Steps 1 and 2 run
//!    `--rounds` times on fresh hubs; medians are reported with every round's value.
//! 3. Steady-state latency: ConfigMaps created upstream at `--rate` per second; upstream
//!    create issued → copy visible through a downstream watch.
//! 4. Status-return latency: Deployments' status written downstream at `--rate` per
//!    second → visible upstream through a watch.
//! 5. Syncer RSS once `--rss-levels` objects (default 10k and 100k) are synced.
//!
//! `--profile syncagent` measures kcp's api-syncagent the same way, with its own
//! arrangement ([`crate::bench_syncagent`]); the rounds, the latency and RSS steps, the
//! report and the table are shared.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::watcher;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::sync::Mutex;

use crate::ar;
use crate::bench_cmd::{client_for, ensure_namespace, BenchHub};
use crate::bench_load::LoadKind;
use crate::bench_stats::{cpu_seconds, round3, rss_mib, Rounds, Summary};

#[derive(clap::Args)]
pub struct SyncBenchArgs {
    /// Objects for the initial-sync throughput measurement.
    #[arg(long, default_value_t = 1000)]
    pub objects: usize,
    /// Print the figures as JSON.
    #[arg(long)]
    pub json: bool,
    /// Initial-sync rounds, each on fresh hubs with its own baseline; the median ratio
    /// is the headline figure (one round is at the mercy of a noisy neighbour).
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// Syncer workers, and the requests in flight of the baseline client.
    #[arg(long, default_value_t = 4)]
    pub workers: usize,
    /// The syncer's --qps. 0 (unthrottled) by default, as the baseline client is;
    /// `default` passes no --qps/--burst, so the syncer runs at its own default (the
    /// server's pace against a hub or a server doing API priority and fairness, 30/s
    /// against any other).
    #[arg(long, default_value = "0")]
    pub qps: String,
    /// The syncer's --burst (ignored with `--qps default`, and by `--profile syncagent`:
    /// `ferry syncagent` has no --burst).
    #[arg(long, default_value_t = 20)]
    pub burst: u32,
    /// Which syncer: kubestellar (a SyncerConfig in a mailbox-like workspace selects the
    /// objects), tmc (kcp's workload syncer: a SyncTarget, and a Placement whose
    /// scheduler labels the namespace and its objects for it; the syncer reads them
    /// through its virtual workspace and writes copies into a `kcp-<hash>` namespace) or
    /// syncagent (kcp's api-syncagent, `ferry syncagent`: Databases made in
    /// `--consumers` workspaces bound to one APIExport, copied to a service cluster,
    /// status back; see `bench_syncagent`).
    #[arg(long, value_enum, default_value = "kubestellar")]
    pub profile: crate::syncer_cmd::ProfileName,
    /// Fixed rate (objects per second) of the latency measurements.
    #[arg(long, default_value_t = 200)]
    pub rate: u32,
    /// Objects in each latency measurement.
    #[arg(long, default_value_t = 1000)]
    pub latency_objects: usize,
    /// Synced-object counts at which to read the syncer's RSS (comma-separated; 0:
    /// skip). Default: 10000,100000; with `--profile syncagent`, 10000.
    #[arg(long, value_delimiter = ',')]
    pub rss_levels: Vec<usize>,
    /// With `--profile syncagent`: consumer workspaces bound to the export, holding the
    /// `--objects` between them.
    #[arg(long, default_value_t = 100)]
    pub consumers: usize,
}

impl SyncBenchArgs {
    /// The syncer's flags besides kubeconfigs and addresses: what the JSON reports.
    fn syncer_flags(&self) -> Vec<String> {
        let mut flags: Vec<String> = [
            "--sync-target-name",
            "bench",
            "--workers",
            &self.workers.to_string(),
        ]
        .map(str::to_owned)
        .to_vec();
        if self.qps != "default" {
            flags.extend([
                "--qps".into(),
                self.qps.clone(),
                "--burst".into(),
                self.burst.to_string(),
            ]);
        }
        if self.tmc() {
            flags.extend([
                "--profile".into(),
                "tmc".into(),
                "--from-cluster".into(),
                "root:bench".into(),
            ]);
        }
        flags
    }

    /// `--rss-levels`, or the profile's default.
    pub(crate) fn rss_levels(&self) -> Vec<usize> {
        match (self.rss_levels.is_empty(), self.profile) {
            (false, _) => self.rss_levels.clone(),
            (true, crate::syncer_cmd::ProfileName::Syncagent) => vec![10_000],
            (true, _) => vec![10_000, 100_000],
        }
    }

    fn tmc(&self) -> bool {
        self.profile == crate::syncer_cmd::ProfileName::Tmc
    }
}

const NS: &str = "bench";

/// When each object was first seen (by a key of the caller's choosing), and how many.
pub(crate) struct Seen {
    pub(crate) at: Mutex<HashMap<String, Instant>>,
    count: tokio::sync::watch::Sender<usize>,
    /// Set once the [`track`]ing watch has listed what exists. A change made
    /// before then is seen only when the list's page holding it arrives, so a
    /// timed phase starts after it: with 10,000 copies the list took long
    /// enough to put its paging into the steady-state p99.
    listed: tokio::sync::watch::Sender<bool>,
}

impl Seen {
    pub(crate) fn new() -> Arc<Seen> {
        Arc::new(Seen {
            at: Mutex::new(HashMap::new()),
            count: tokio::sync::watch::channel(0).0,
            listed: tokio::sync::watch::channel(false).0,
        })
    }

    /// Waits until the tracking watch has listed what exists and is watching.
    pub(crate) async fn wait_listed(&self, what: &str) -> anyhow::Result<()> {
        let mut rx = self.listed.subscribe();
        tokio::time::timeout(Duration::from_secs(120), rx.wait_for(|listed| *listed))
            .await
            .with_context(|| format!("timed out waiting for the watch of {what} to list what exists"))??;
        Ok(())
    }

    pub(crate) async fn wait_for(&self, n: usize, timeout: Duration, what: &str) -> anyhow::Result<()> {
        let mut rx = self.count.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|c| *c >= n))
            .await
            .with_context(|| format!("timed out waiting for {what} ({} of {n})", *self.count.borrow()))??;
        Ok(())
    }

    pub(crate) fn count(&self) -> usize {
        *self.count.borrow()
    }
}

/// Records, through a watch, when each object is first seen with a `key` (`None`: not
/// yet; keys name what is measured, e.g. an object's name once its status shows a mark).
pub(crate) fn track<K>(
    api: Api<K>,
    config: watcher::Config,
    seen: Arc<Seen>,
    key: fn(&K) -> Option<String>,
) -> Tracker
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    Tracker(tokio::spawn(async move {
        let mut stream = watcher(api, config).boxed();
        while let Some(event) = stream.next().await {
            let obj = match event {
                Ok(watcher::Event::Apply(o)) | Ok(watcher::Event::InitApply(o)) => o,
                Ok(watcher::Event::InitDone) => {
                    seen.listed.send_replace(true);
                    continue;
                }
                _ => continue,
            };
            let Some(name) = key(&obj) else {
                continue;
            };
            let now = Instant::now();
            let mut at = seen.at.lock().await;
            if let std::collections::hash_map::Entry::Vacant(slot) = at.entry(name) {
                slot.insert(now);
                let n = at.len();
                seen.count.send_replace(n);
            }
        }
    }))
}

/// The watch of a [`track`], stopped when dropped.
pub(crate) struct Tracker(tokio::task::JoinHandle<()>);

impl Drop for Tracker {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The ConfigMap every part of this bench creates (the baseline client too).
pub fn configmap(name: String, namespace: &str) -> ConfigMap {
    serde_json::from_value(configmap_json(name, namespace)).expect("configmap")
}

/// [`configmap`] as JSON.
pub fn configmap_json(name: String, namespace: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": name, "namespace": namespace, "labels": { "app": "bench" } },
        "data": { "payload": "x".repeat(256) }
    })
}

fn deployment(name: &str) -> Deployment {
    serde_json::from_value(json!({
        "metadata": { "name": name, "namespace": NS },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": { "app": name } },
            "template": { "metadata": { "labels": { "app": name } }, "spec": { "containers": [{ "name": "c", "image": "nginx" }] } }
        }
    }))
    .expect("deployment")
}

/// Creates `names` with `concurrency` requests in flight.
async fn create_all(api: &Api<ConfigMap>, names: Vec<String>, concurrency: usize) -> anyhow::Result<()> {
    futures::stream::iter(names)
        .map(|name| {
            let api = api.clone();
            async move { api.create(&PostParams::default(), &configmap(name, NS)).await }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<Vec<_>>()
        .await?;
    Ok(())
}

/// An object's name: the key of [`track`] when every appearance counts.
pub(crate) fn name_of<K: kube::Resource>(obj: &K) -> Option<String> {
    obj.meta().name.clone()
}

/// Every latency (ms) from `sent` to `seen`, for the objects in both.
pub(crate) fn latencies(sent: &HashMap<String, Instant>, seen: &HashMap<String, Instant>) -> Vec<f64> {
    sent.iter()
        .filter_map(|(name, t0)| {
            seen.get(name)
                .map(|t1| t1.saturating_duration_since(*t0).as_secs_f64() * 1000.0)
        })
        .collect()
}

/// The syncer's answer to `GET path` on its metrics address (`None` if it does not
/// answer).
pub(crate) async fn get(addr: std::net::SocketAddr, path: &str) -> Option<String> {
    use tokio::io::AsyncReadExt;
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response).await;
    Some(response)
}

/// Whether the syncer's `/readyz` answers 200.
pub(crate) async fn readyz(addr: std::net::SocketAddr) -> bool {
    get(addr, "/readyz")
        .await
        .is_some_and(|r| r.starts_with("HTTP/1.1 200"))
}

/// Waits (up to a minute) until the syncer's queue is empty (`syncer_queue_depth` 0 in
/// its `/metrics`), so a latency measurement does not queue behind the reconciles
/// that the writes of a bulk step left (each copy written comes back as an event).
pub(crate) async fn idle(addr: std::net::SocketAddr) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let depth = get(addr, "/metrics").await.and_then(|r| {
            r.lines()
                .find_map(|l| l.strip_prefix("syncer_queue_depth "))
                .and_then(|v| v.trim().parse::<i64>().ok())
        });
        if depth == Some(0) {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the syncer's queue did not empty within a minute (syncer_queue_depth {depth:?})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs `op` on each of `names` at `rate` per second, each spawned so a slow one does
/// not slow the rate; returns when each was issued.
pub(crate) async fn at_rate<F, Fut>(
    rate: u32,
    names: Vec<String>,
    op: F,
) -> anyhow::Result<HashMap<String, Instant>>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send + 'static,
{
    let mut ticks = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(rate.max(1))));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut sent = HashMap::new();
    let mut tasks = vec![];
    for name in names {
        ticks.tick().await;
        sent.insert(name.clone(), Instant::now());
        tasks.push(tokio::spawn(op(name)));
    }
    for t in tasks {
        t.await??;
    }
    Ok(sent)
}

/// A latency measurement: `op` on each of `names` at `rate` per second, then waits
/// until `seen` (a watch keyed by the same names) has seen each; the summary of every
/// latency, named `what`.
pub(crate) async fn latency<F, Fut>(
    what: &str,
    rate: u32,
    names: Vec<String>,
    seen: &Seen,
    op: F,
) -> anyhow::Result<Summary>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send + 'static,
{
    seen.wait_listed(what).await?;
    let want = seen.count() + names.len();
    let sent = at_rate(rate, names, op).await?;
    seen.wait_for(want, Duration::from_secs(120), what).await?;
    Summary::of(what, latencies(&sent, &*seen.at.lock().await))
}

/// Two fresh hubs, each a `ferry hub` process (the upstream one with workspace
/// `root:bench` and Ferry's CRDs), and admin clients for both.
struct Hubs {
    up: BenchHub,
    down: BenchHub,
    up_kubeconfig: PathBuf,
    upc: kube::Client,
    /// With `--profile tmc`: the SyncTarget's uid.
    sync_target_uid: Option<String>,
}

/// The downstream objects the syncer made: for kubestellar in namespace `bench`, for
/// tmc in whichever `kcp-<hash>` namespace, found by the copies' label.
fn copies<K>(client: &kube::Client, tmc: bool) -> (Api<K>, watcher::Config)
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    if tmc {
        (
            Api::all(client.clone()),
            watcher::Config::default().labels(ferry_api::well_known::WORKLOAD_CLUSTER_LABEL),
        )
    } else {
        (Api::namespaced(client.clone(), NS), watcher::Config::default())
    }
}

impl Hubs {
    async fn start(args: &SyncBenchArgs) -> anyhow::Result<Hubs> {
        let mut hubs = Hubs::start_plain().await?;
        if args.tmc() {
            let target: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "workload.kcp.io/v1alpha1", "kind": "SyncTarget",
                "metadata": { "name": "bench" },
                "spec": { "supportedAPIExports": [{ "export": "kubernetes", "path": "root:compute" }] },
            }))?;
            let created = Api::<DynamicObject>::all_with(
                hubs.upc.clone(),
                &ar("workload.kcp.io", "v1alpha1", "SyncTarget", "synctargets"),
            )
            .create(&PostParams::default(), &target)
            .await
            .context("creating SyncTarget bench")?;
            hubs.sync_target_uid = created.metadata.uid;
            let binding: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIBinding", "metadata": { "name": "kubernetes" },
                "spec": { "reference": { "export": { "path": "root:compute", "name": "kubernetes" } } },
            }))?;
            Api::<DynamicObject>::all_with(
                hubs.upc.clone(),
                &ar("apis.kcp.io", "v1alpha1", "APIBinding", "apibindings"),
            )
            .create(&PostParams::default(), &binding)
            .await
            .context("binding root:compute:kubernetes")?;
        }
        Ok(hubs)
    }

    async fn start_plain() -> anyhow::Result<Hubs> {
        let up = BenchHub::start(&[]).await?;
        let down = BenchHub::start(&[]).await?;
        let workspaces = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("tenancy.kcp.io", "v1alpha1", "Workspace"),
            "workspaces",
        );
        let ws: DynamicObject = serde_json::from_value(
            json!({ "apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": { "name": "bench" } }),
        )?;
        Api::<DynamicObject>::all_with(up.client.clone(), &workspaces)
            .create(&PostParams::default(), &ws)
            .await
            .context("creating workspace root:bench")?;
        let up_kubeconfig = up.workspace_kubeconfig("root:bench")?;
        let upc = client_for(&up_kubeconfig).await?;
        let crds: Api<
            k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
        > = Api::all(upc.clone());
        for crd in ferry_api::all_crds() {
            crds.create(&PostParams::default(), &crd).await?;
        }
        Ok(Hubs {
            up,
            down,
            up_kubeconfig,
            upc,
            sync_target_uid: None,
        })
    }

    fn downc(&self) -> &kube::Client {
        &self.down.client
    }
}

/// One round of the initial-sync measurement, and the syncer it left running.
struct InitialSync {
    figures: RoundFigures,
    /// What the initial sync asked of the hubs, per object.
    requests: Value,
    syncer: tokio::process::Child,
    pid: u32,
    down_seen: Arc<Seen>,
    _tracker: Tracker,
}

/// The baseline: `ferry bench create-load` creating as many objects of `kind` on `down`
/// (in namespace `baseline`) as the initial sync copies, with as many requests in
/// flight as the syncer has workers. Returns objects per second and the client's CPU
/// µs per object.
pub(crate) async fn baseline(
    down: &BenchHub,
    kind: LoadKind,
    args: &SyncBenchArgs,
) -> anyhow::Result<(f64, f64)> {
    ensure_namespace(&down.client, "baseline").await?;
    let seen = Seen::new();
    let tracker = track(
        Api::<DynamicObject>::namespaced_with(down.client.clone(), "baseline", &kind.resource()),
        watcher::Config::default(),
        seen.clone(),
        name_of,
    );
    seen.wait_listed("the baseline's objects").await?;
    let mut client = tokio::process::Command::new(std::env::current_exe()?)
        .args(["bench", "create-load", "--kubeconfig"])
        .arg(&down.process.kubeconfig)
        .args(["--namespace", "baseline", "--prefix", "raw"])
        .args(["--objects", &args.objects.to_string()])
        .args(["--concurrency", &args.workers.to_string()])
        .args(["--kind", kind.flag()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("starting `ferry bench create-load`")?;
    let pid = client.id().context("create-load pid")?;
    let mut stdin = client.stdin.take().context("create-load stdin")?;
    let mut lines = tokio::io::BufReader::new(client.stdout.take().context("create-load stdout")?).lines();
    let expect = |line: Option<String>, want: &str| {
        anyhow::ensure!(
            line.as_deref() == Some(want),
            "the baseline client said {line:?} where {want:?} was expected"
        );
        Ok(())
    };
    expect(lines.next_line().await?, "ready")?;
    let cpu_before = cpu_seconds(pid)?;
    let start = Instant::now();
    stdin.write_all(b"go\n").await?;
    stdin.flush().await?;
    seen.wait_for(args.objects, Duration::from_secs(600), "the baseline's objects")
        .await?;
    let rate = args.objects as f64 / start.elapsed().as_secs_f64();
    expect(lines.next_line().await?, "done")?;
    let cpu_us = (cpu_seconds(pid)? - cpu_before) * 1e6 / args.objects as f64;
    drop(stdin);
    let status = client.wait().await?;
    anyhow::ensure!(status.success(), "the baseline client failed: {status}");
    drop(tracker);
    Ok((rate, cpu_us))
}

/// The baseline (raw creates downstream) and then the initial sync of as many objects,
/// on `hubs`.
async fn initial_sync(
    hubs: &Hubs,
    args: &SyncBenchArgs,
    progress: &impl Fn(&str),
) -> anyhow::Result<InitialSync> {
    let (upc, downc) = (&hubs.upc, hubs.downc());
    progress("baseline: raw creates against the downstream hub");
    let raw = baseline(&hubs.down, LoadKind::Configmap, args).await?;

    progress("initial sync");
    ensure_namespace(upc, NS).await?;
    let up_cms: Api<ConfigMap> = Api::namespaced(upc.clone(), NS);
    create_all(
        &up_cms,
        (0..args.objects).map(|i| format!("init-{i}")).collect(),
        16,
    )
    .await?;
    let down_seen = Seen::new();
    let (down_cms, watch_config) = copies::<ConfigMap>(downc, args.tmc());
    let tracker = track(down_cms, watch_config, down_seen.clone(), name_of);
    down_seen.wait_listed("the copies").await?;
    // FERRY_BENCH_SYNCER_LOG=path keeps the syncer's log.
    let log_path = std::env::var_os("FERRY_BENCH_SYNCER_LOG")
        .map(PathBuf::from)
        .unwrap_or_else(|| hubs.down.data_dir.path().join("syncer.log"));
    let log = std::fs::File::create(&log_path)?;
    let metrics_address = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let launched = Instant::now();
    let syncer = tokio::process::Command::new(std::env::current_exe()?)
        .arg("syncer")
        .arg("--from-kubeconfig")
        .arg(&hubs.up_kubeconfig)
        .arg("--to-kubeconfig")
        .arg(&hubs.down.process.kubeconfig)
        .args(args.syncer_flags())
        .args(
            hubs.sync_target_uid
                .iter()
                .flat_map(|uid| ["--sync-target-uid".to_string(), uid.clone()]),
        )
        .args(["--metrics-address", &metrics_address.to_string()])
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .context("starting `ferry syncer`")?;
    let pid = syncer.id().context("syncer pid")?;
    // The syncer starts with no SyncerConfig, so the measurement below is the initial
    // sync of a mailbox's contents, not process start-up (reported separately).
    let ready_deadline = Instant::now() + Duration::from_secs(60);
    while !readyz(metrics_address).await {
        anyhow::ensure!(
            Instant::now() < ready_deadline,
            "the syncer did not become ready; see {}",
            log_path.display()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let startup = launched.elapsed();
    let requests_before = scrape_hubs(hubs).await?;
    let (cpu_before, started) = if args.tmc() {
        // The syncer is connected and has imported the cluster's schemas (Deployments are
        // Accepted, for the status-return step); the clock starts with the Placement that
        // schedules the namespace, and so includes the scheduler labelling its objects.
        accepted(upc, "deployments", &log_path).await?;
        let placement: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "scheduling.kcp.io/v1alpha1", "kind": "Placement", "metadata": { "name": "bench" },
            "spec": { "locationWorkspace": "root:bench", "locationSelectors": [{}], "namespaceSelector": {},
                      "locationResource": { "group": "workload.kcp.io", "version": "v1alpha1", "resource": "synctargets" } },
        }))?;
        let cpu_before = cpu_seconds(pid)?;
        let started = Instant::now();
        Api::<DynamicObject>::all_with(
            upc.clone(),
            &ar("scheduling.kcp.io", "v1alpha1", "Placement", "placements"),
        )
        .create(&PostParams::default(), &placement)
        .await?;
        (cpu_before, started)
    } else {
        let config: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "SyncerConfig", "metadata": { "name": "the-one" },
            "spec": { "namespaceScope": { "namespaces": [NS], "resources": [
                { "group": "", "apiVersion": "v1", "resource": "configmaps" },
                { "group": "apps", "apiVersion": "v1", "resource": "deployments" }
            ]}}
        }))?;
        let configs = ar("edge.kubestellar.io", "v2alpha1", "SyncerConfig", "syncerconfigs");
        let cpu_before = cpu_seconds(pid)?;
        let started = Instant::now();
        Api::<DynamicObject>::all_with(upc.clone(), &configs)
            .create(&PostParams::default(), &config)
            .await?;
        (cpu_before, started)
    };
    down_seen
        .wait_for(args.objects, Duration::from_secs(600), "the initial sync")
        .await?;
    let figures = RoundFigures::of(
        raw,
        args.objects,
        started.elapsed(),
        cpu_seconds(pid)? - cpu_before,
        startup,
    );
    let requests = crate::bench_requests::requests_made(
        &requests_before,
        &scrape_hubs(hubs).await?,
        args.objects,
        &get(metrics_address, "/metrics").await.unwrap_or_default(),
    );
    Ok(InitialSync {
        figures,
        requests,
        syncer,
        pid,
        down_seen,
        _tracker: tracker,
    })
}

/// Waits until the SyncTarget `bench` lists `resource` as Accepted (its syncer imported
/// the cluster's schema).
async fn accepted(upc: &kube::Client, resource: &str, log: &std::path::Path) -> anyhow::Result<()> {
    let targets = Api::<DynamicObject>::all_with(
        upc.clone(),
        &ar("workload.kcp.io", "v1alpha1", "SyncTarget", "synctargets"),
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let target = targets.get("bench").await?;
        let ok = target
            .data
            .pointer("/status/syncedResources")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|r| r["resource"] == resource && r["state"] == "Accepted");
        if ok {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "SyncTarget bench never accepted {resource}; see {}",
            log.display()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// How the figures are summarised (the `method` block's `statistics`).
pub(crate) const STATISTICS: &str =
    "latencies in ms as {p50, p90, p99, max, n}, nearest-rank percentiles over \
every sample; per-round figures as {median, rounds}; ratios are syncer / baseline";

fn sync_method(args: &SyncBenchArgs) -> Value {
    json!({
        "processes": {
            "upstream_hub": "`ferry hub` child process (SQLite in a temporary directory)",
            "downstream_hub": "`ferry hub` child process (SQLite in a temporary directory)",
            "syncer": "`ferry syncer` child process, current-thread runtime",
            "baseline_client": "`ferry bench create-load` child process, current-thread runtime",
            "measuring_watches": "this process: one kube-rs watcher per measured resource",
        },
        "profile": if args.tmc() { "tmc" } else { "kubestellar" },
        "timing": if args.tmc() {
            "the syncer from the Placement's creation (so the hub's scheduler labelling the namespace and \
             its objects is inside the measurement), the baseline client from its start signal, each until \
             a downstream watch in this process has seen every object; both processes are connected and \
             idle when the clock starts, and the syncer has imported the cluster's schemas"
        } else {
            "the syncer from the SyncerConfig's creation, the baseline client from its start signal, each \
             until a downstream watch in this process has seen every object; both processes are connected \
             and idle when the clock starts"
        },
        "concurrency": { "syncer_workers": args.workers, "baseline_requests_in_flight": args.workers },
        "syncer_flags": args.syncer_flags(),
        "objects": {
            "kind": "ConfigMap with a 256-byte value (Deployments for status return)",
            "initial_sync": args.objects, "baseline": args.objects,
            "steady_state": args.latency_objects, "status_return": status_objects(args),
            "rss_levels": args.rss_levels(),
        },
        "rounds": args.rounds.max(1),
        "rate_per_sec": args.rate,
        "statistics": STATISTICS,
    })
}

fn status_objects(args: &SyncBenchArgs) -> usize {
    args.latency_objects.min(500)
}

/// The initial-sync figures of one round.
#[derive(Clone, Copy)]
pub(crate) struct RoundFigures {
    /// Baseline objects per second, and the baseline client's CPU µs per object.
    pub raw_rate: f64,
    pub raw_cpu_us_per_object: f64,
    /// The syncer's objects per second, and its CPU µs per object.
    pub sync_rate: f64,
    pub cpu_us_per_object: f64,
    /// From the syncer's launch until its `/readyz` answered 200 (`--profile syncagent`:
    /// until its first copy appeared).
    pub startup: Duration,
}

impl RoundFigures {
    /// The figures of a syncer that copied `objects` in `elapsed` using `cpu_seconds`,
    /// next to `baseline` (objects/s and CPU µs per object, from [`baseline`]).
    pub(crate) fn of(
        (raw_rate, raw_cpu_us_per_object): (f64, f64),
        objects: usize,
        elapsed: Duration,
        cpu_seconds: f64,
        startup: Duration,
    ) -> RoundFigures {
        RoundFigures {
            raw_rate,
            raw_cpu_us_per_object,
            sync_rate: objects as f64 / elapsed.as_secs_f64(),
            cpu_us_per_object: cpu_seconds * 1e6 / objects as f64,
            startup,
        }
    }
}

/// Every round's initial-sync figures.
#[derive(Default)]
pub(crate) struct AllRounds {
    ratios: Vec<f64>,
    sync_rates: Vec<f64>,
    raw_rates: Vec<f64>,
    sync_cpu: Vec<f64>,
    raw_cpu: Vec<f64>,
    startups: Vec<f64>,
}

impl AllRounds {
    pub(crate) fn push(&mut self, f: &RoundFigures) {
        self.ratios.push(f.sync_rate / f.raw_rate);
        self.sync_rates.push(f.sync_rate);
        self.raw_rates.push(f.raw_rate);
        self.sync_cpu.push(f.cpu_us_per_object);
        self.raw_cpu.push(f.raw_cpu_us_per_object);
        self.startups.push(f.startup.as_secs_f64() * 1000.0);
    }
}

/// `--rounds` initial-sync rounds, each made by `round` (on fresh hubs): every round's
/// figures, and what the last round left running for the measurements after it (the
/// earlier rounds' is dropped, which stops their processes and watches).
pub(crate) async fn initial_rounds<S>(
    args: &SyncBenchArgs,
    progress: &impl Fn(&str),
    mut round: impl AsyncFnMut() -> anyhow::Result<(RoundFigures, S)>,
) -> anyhow::Result<(AllRounds, S)> {
    let rounds = args.rounds.max(1);
    let mut all = AllRounds::default();
    let mut n = 1;
    loop {
        if rounds > 1 {
            progress(&format!("initial-sync round {n} of {rounds}"));
        }
        let (figures, running) = round().await?;
        all.push(&figures);
        if n == rounds {
            return Ok((all, running));
        }
        n += 1;
    }
}

/// What a profile measured after its rounds, for [`report`].
pub(crate) struct Measured {
    pub rounds: AllRounds,
    /// Copies seen downstream at the end of the initial sync.
    pub initial_seen: usize,
    /// The steady-state block (rate, what was changed, `latency_ms`).
    pub steady_state: Value,
    pub status_return: Summary,
    pub statuses_written: usize,
    /// `(synced objects, MiB)` per RSS level.
    pub rss: Vec<(usize, f64)>,
    pub rss_at_end: f64,
}

/// The JSON report every profile prints: `method`, then the figures.
pub(crate) fn report(
    args: &SyncBenchArgs,
    method: Value,
    m: Measured,
    targets: Value,
) -> anyhow::Result<Value> {
    let r = m.rounds;
    Ok(json!({
        "method": method,
        "syncer_startup_to_ready_ms": Rounds::of("syncer start-up", r.startups)?,
        "initial_sync": {
            "objects": args.objects,
            "objects_seen_downstream": m.initial_seen,
            "ratio": Rounds::of("initial-sync ratio", r.ratios)?,
            "syncer_objects_per_sec": Rounds::of("syncer objects/s", r.sync_rates)?,
            "baseline_objects_per_sec": Rounds::of("baseline objects/s", r.raw_rates)?,
            "syncer_cpu_us_per_object": Rounds::of("syncer CPU per object", r.sync_cpu)?,
            "baseline_cpu_us_per_object": Rounds::of("baseline CPU per object", r.raw_cpu)?,
        },
        "steady_state": m.steady_state,
        "status_return": { "rate_per_sec": args.rate, "statuses_written": m.statuses_written, "latency_ms": m.status_return },
        "syncer_rss": m.rss.iter().map(|(n, mib)| json!({ "synced_objects": n, "mib": round3(*mib) })).collect::<Vec<Value>>(),
        "syncer_rss_at_end_mib": round3(m.rss_at_end),
        "targets": targets,
    }))
}

/// Prints `report` as JSON (`--json`) or as the table, under `title`.
pub(crate) fn print(args: &SyncBenchArgs, title: &str, report: &Value) -> anyhow::Result<()> {
    if args.json {
        println!("{}", serde_json::to_string_pretty(report)?);
        return Ok(());
    }
    println!("{title}");
    let initial = &report["initial_sync"];
    let target = report["targets"]["initial_sync_ratio_at_least"]
        .as_f64()
        .map_or(String::new(), |t| format!("; target >= {t:.2}"));
    println!(
        "  initial sync      ratio {:.2} (median of {} rounds: {}{target})",
        initial["ratio"]["median"].as_f64().unwrap_or_default(),
        args.rounds.max(1),
        initial["ratio"]["rounds"]
    );
    println!(
        "                    median {:.0} objects/s, baseline create-load {:.0} objects/s, {} in flight each",
        initial["syncer_objects_per_sec"]["median"]
            .as_f64()
            .unwrap_or_default(),
        initial["baseline_objects_per_sec"]["median"]
            .as_f64()
            .unwrap_or_default(),
        args.workers
    );
    println!(
        "                    CPU per object: syncer {} µs, baseline client {} µs (medians)",
        initial["syncer_cpu_us_per_object"]["median"], initial["baseline_cpu_us_per_object"]["median"]
    );
    for (name, block) in [
        ("steady state", &report["steady_state"]),
        ("status return", &report["status_return"]),
    ] {
        let s: Summary = serde_json::from_value(block["latency_ms"].clone())?;
        println!(
            "  {name:<17} p50 {:>7.2} ms  p90 {:>7.2} ms  p99 {:>7.2} ms  max {:>7.2} ms  n {} at {}/s",
            s.p50, s.p90, s.p99, s.max, s.n, args.rate
        );
    }
    for level in report["syncer_rss"].as_array().into_iter().flatten() {
        println!(
            "  syncer RSS        {:>7.1} MiB with {} synced objects",
            level["mib"].as_f64().unwrap_or_default(),
            level["synced_objects"]
        );
    }
    Ok(())
}

pub async fn run(args: SyncBenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.objects > 0, "--objects must be at least 1");
    anyhow::ensure!(args.latency_objects > 0, "--latency-objects must be at least 1");
    if args.profile == crate::syncer_cmd::ProfileName::Syncagent {
        return crate::bench_syncagent::run(args).await;
    }
    let progress = |msg: &str| {
        if !args.json {
            eprintln!("… {msg}");
        }
    };
    // Every round measures the initial sync on fresh hubs; the last one goes on to the
    // latency and RSS measurements.
    let (all, (hubs, sync)) = initial_rounds(&args, &progress, async || {
        let hubs = Hubs::start(&args).await?;
        let sync = initial_sync(&hubs, &args, &progress).await?;
        Ok((sync.figures, (hubs, sync)))
    })
    .await?;
    let InitialSync {
        syncer: mut child,
        pid,
        down_seen,
        _tracker: tracker,
        requests,
        ..
    } = sync;
    let initial_seen = down_seen.count();
    let (upc, downc) = (hubs.upc.clone(), hubs.downc().clone());
    let up_cms: Api<ConfigMap> = Api::namespaced(upc.clone(), NS);

    // 3. Steady-state latency.
    progress("steady-state latency");
    let names = (0..args.latency_objects).map(|i| format!("lat-{i}")).collect();
    let steady = latency("steady-state latency", args.rate, names, &down_seen, |name| {
        let api = up_cms.clone();
        async move {
            api.create(&PostParams::default(), &configmap(name, NS)).await?;
            Ok(())
        }
    })
    .await?;

    // 4. Status return.
    progress("status-return latency");
    let status_n = status_objects(&args);
    let up_deploys: Api<Deployment> = Api::namespaced(upc.clone(), NS);
    let (all_down_deploys, watch_config) = copies::<Deployment>(&downc, args.tmc());
    let deploy_seen = Seen::new();
    let deploy_tracker = track(all_down_deploys, watch_config, deploy_seen.clone(), name_of);
    futures::stream::iter(0..status_n)
        .map(|i| {
            let api = up_deploys.clone();
            async move {
                api.create(&PostParams::default(), &deployment(&format!("lat-{i}")))
                    .await
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await?;
    deploy_seen
        .wait_for(status_n, Duration::from_secs(120), "deployments downstream")
        .await?;
    // Where the copies are: `bench`, or the tmc syncer's kcp-<hash> namespace.
    let down_ns = if args.tmc() {
        let (api, _) = copies::<Deployment>(&downc, true);
        api.list(&kube::api::ListParams::default().labels(ferry_api::well_known::WORKLOAD_CLUSTER_LABEL))
            .await?
            .items
            .first()
            .and_then(|d| d.metadata.namespace.clone())
            .context("no Deployment copy downstream")?
    } else {
        NS.to_string()
    };
    let down_deploys: Api<Deployment> = Api::namespaced(downc.clone(), &down_ns);
    let status_seen = Seen::new();
    let status_tracker = track(
        up_deploys.clone(),
        watcher::Config::default(),
        status_seen.clone(),
        |d: &Deployment| (d.status.as_ref().and_then(|s| s.ready_replicas) == Some(1)).then(|| name_of(d))?,
    );
    let names = (0..status_n).map(|i| format!("lat-{i}")).collect();
    let status = latency("status-return latency", args.rate, names, &status_seen, |name| {
        let api = down_deploys.clone();
        async move {
            api.patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": { "replicas": 1, "readyReplicas": 1 } })),
            )
            .await?;
            Ok(())
        }
    })
    .await?;

    // 5. RSS.
    let (rss, idle_rss) = rss_at_levels(&args, &progress, &down_seen, pid, status_n, |fill| {
        create_all(&up_cms, fill.map(|i| format!("fill-{i}")).collect(), 16)
    })
    .await?;
    let _ = child.kill().await;
    drop((tracker, deploy_tracker, status_tracker));

    let measured = Measured {
        rounds: all,
        initial_seen,
        steady_state: json!({ "rate_per_sec": args.rate, "objects_created": args.latency_objects, "latency_ms": steady }),
        status_return: status,
        statuses_written: status_n,
        rss,
        rss_at_end: idle_rss,
    };
    let targets = json!({
        "initial_sync_ratio_at_least": 0.8, "steady_state_p99_ms_under": 50.0,
        "rss_mib_at_10k_under": 100.0, "rss_mib_at_100k_under": 120.0,
    });
    let mut report = report(&args, sync_method(&args), measured, targets)?;
    report["initial_sync"]["requests_last_round"] = requests;
    let title = format!(
        "ferry bench sync --profile {} (syncer {}; baseline measured in this run; every process separate)",
        if args.tmc() { "tmc" } else { "kubestellar" },
        args.syncer_flags().join(" ")
    );
    print(&args, &title, &report)?;
    if !args.json {
        crate::bench_requests::print_requests(&report["initial_sync"]["requests_last_round"]);
    }
    Ok(())
}

/// Both hubs' request counters, to tell what a step asked of each.
async fn scrape_hubs(hubs: &Hubs) -> anyhow::Result<crate::bench_requests::Requests> {
    crate::bench_requests::scrape_both(("upstream", &hubs.up.process), ("downstream", &hubs.down.process))
        .await
}

/// The syncer's RSS (process `pid`) at each of `--rss-levels` synced objects, and
/// once they are done. Below a level, `fill(range)` makes objects `fill-<i>` for `i` in
/// `range` upstream, and `seen` (the copies downstream) must grow by as many. The
/// objects synced at the start are those `seen` counts and `others` more.
pub(crate) async fn rss_at_levels<F, Fut>(
    args: &SyncBenchArgs,
    progress: &impl Fn(&str),
    seen: &Seen,
    pid: u32,
    others: usize,
    fill: F,
) -> anyhow::Result<(Vec<(usize, f64)>, f64)>
where
    F: Fn(std::ops::Range<usize>) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let mut rss = vec![];
    let mut synced = seen.count() + others;
    let mut next = 0;
    for level in args.rss_levels().into_iter().filter(|l| *l > 0) {
        if level > synced {
            progress(&format!("filling up to {level} synced objects"));
            let more = level - synced;
            let want = seen.count() + more;
            fill(next..next + more).await?;
            next += more;
            progress(&format!("created {more} more; waiting for their copies"));
            seen.wait_for(want, Duration::from_secs(1800), "fill copies")
                .await?;
            synced = level;
        }
        // Let the syncer finish the reconciles the last copies' events queued.
        tokio::time::sleep(Duration::from_secs(2)).await;
        rss.push((synced, rss_mib(pid)?));
    }
    Ok((rss, rss_mib(pid)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A timed phase starts once its watch says it has listed: by then every object
    /// that existed is counted, across the list's pages, so a change made after it is
    /// seen by the watch as it happens.
    #[tokio::test]
    async fn a_tracked_watch_says_listed_once_every_existing_object_is_seen() {
        let hub = ferry_testkit::TestHub::start().await;
        let client = hub.client("root").await;
        ensure_namespace(&client, NS).await.unwrap();
        let cms: Api<ConfigMap> = Api::namespaced(client, NS);
        let existing = 1_100; // three pages of the watcher's 500
        create_all(&cms, (0..existing).map(|i| format!("cm-{i}")).collect(), 16)
            .await
            .unwrap();
        let seen = Seen::new();
        let _tracker = track(cms, watcher::Config::default(), seen.clone(), name_of);
        seen.wait_listed("the test's ConfigMaps").await.unwrap();
        assert_eq!(seen.count(), existing, "listed before every page was seen");
    }
}
