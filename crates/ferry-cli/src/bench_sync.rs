//! `ferry bench sync`: the syncer against two hubs, with every figure compared to a
//! baseline measured in the same run.
//!
//! The syncer runs as a child process (`ferry syncer`), as in production, so its RSS is
//! its own. The hubs and the measuring clients run in this process.
//!
//! 1. Raw create throughput: a kube-rs client creating ConfigMaps downstream with
//!    `--workers` concurrent requests (the baseline).
//! 2. Initial sync: `--objects` ConfigMaps exist upstream before the syncer starts; the
//!    time from the SyncerConfig's creation until every copy is visible downstream, and
//!    the syncer's CPU time per object meanwhile. Steps 1 and 2 run `--rounds` times on
//!    fresh hubs; the median ratio is reported with every round's.
//! 3. Steady-state latency: ConfigMaps created upstream at `--rate` per second; upstream
//!    create issued → copy visible through a downstream watch.
//! 4. Status-return latency: Deployments' status written downstream at `--rate` per
//!    second → visible upstream through a watch.
//! 5. Syncer RSS once `--rss-levels` objects (default 10k and 100k) are synced.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::watcher;
use serde_json::{json, Value};
use tokio::sync::Mutex;

use ferry_hub::testing::TestHub;

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
    /// Syncer workers, and the concurrency of the baseline client.
    #[arg(long, default_value_t = 4)]
    pub workers: usize,
    /// Fixed rate (objects per second) of the latency measurements.
    #[arg(long, default_value_t = 200)]
    pub rate: u32,
    /// Objects in each latency measurement.
    #[arg(long, default_value_t = 1000)]
    pub latency_objects: usize,
    /// Synced-object counts at which to read the syncer's RSS (comma-separated; empty: skip).
    #[arg(long, value_delimiter = ',', default_value = "10000,100000")]
    pub rss_levels: Vec<usize>,
}

const NS: &str = "bench";

struct Seen {
    at: Mutex<HashMap<String, Instant>>,
    count: tokio::sync::watch::Sender<usize>,
}

impl Seen {
    fn new() -> Arc<Seen> {
        Arc::new(Seen {
            at: Mutex::new(HashMap::new()),
            count: tokio::sync::watch::channel(0).0,
        })
    }

    async fn wait_for(&self, n: usize, timeout: Duration, what: &str) -> anyhow::Result<()> {
        let mut rx = self.count.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|c| *c >= n))
            .await
            .with_context(|| format!("timed out waiting for {what} ({} of {n})", *self.count.borrow()))??;
        Ok(())
    }
}

/// Records when each object first satisfies `pred`, through a watch.
fn track<K>(api: Api<K>, seen: Arc<Seen>, pred: fn(&K) -> bool) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    tokio::spawn(async move {
        let mut stream = watcher(api, watcher::Config::default()).boxed();
        while let Some(event) = stream.next().await {
            let obj = match event {
                Ok(watcher::Event::Apply(o)) | Ok(watcher::Event::InitApply(o)) => o,
                _ => continue,
            };
            if !pred(&obj) {
                continue;
            }
            let now = Instant::now();
            let name = obj.meta().name.clone().unwrap_or_default();
            let mut at = seen.at.lock().await;
            if let std::collections::hash_map::Entry::Vacant(slot) = at.entry(name) {
                slot.insert(now);
                let n = at.len();
                seen.count.send_replace(n);
            }
        }
    })
}

async fn client_for(kubeconfig: &Path) -> anyhow::Result<kube::Client> {
    crate::kubeconfig::client(Some(kubeconfig), None).await
}

fn configmap(name: String) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": { "name": name, "namespace": NS, "labels": { "app": "bench" } },
        "data": { "payload": "x".repeat(256) }
    }))
    .expect("configmap")
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

/// Creates `names` with `concurrency` requests in flight; returns objects per second.
async fn create_all(api: &Api<ConfigMap>, names: Vec<String>, concurrency: usize) -> anyhow::Result<f64> {
    let start = Instant::now();
    let n = names.len();
    futures::stream::iter(names)
        .map(|name| {
            let api = api.clone();
            async move { api.create(&PostParams::default(), &configmap(name)).await }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<Vec<_>>()
        .await?;
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

async fn ensure_namespace(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({ "metadata": { "name": name } }))?;
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn latencies(sent: &HashMap<String, Instant>, seen: &HashMap<String, Instant>) -> (f64, f64, usize) {
    let mut ms: Vec<f64> = sent
        .iter()
        .filter_map(|(name, t0)| {
            seen.get(name)
                .map(|t1| t1.saturating_duration_since(*t0).as_secs_f64() * 1000.0)
        })
        .collect();
    ms.sort_by(|a, b| a.total_cmp(b));
    (percentile(&ms, 50.0), percentile(&ms, 99.0), ms.len())
}

/// Whether the syncer's `/readyz` answers 200.
async fn readyz(addr: std::net::SocketAddr) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut stream) = tokio::net::TcpStream::connect(addr).await else {
        return false;
    };
    let request = format!("GET /readyz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response).await;
    response.starts_with("HTTP/1.1 200")
}

/// CPU time (user + system) the process has used so far, from `/proc/<pid>/stat`
/// (in USER_HZ ticks, 100 per second on Linux).
fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the parenthesised command name: state is field 3, utime 14, stime 15.
    let rest = stat.rsplit_once(')').context("malformed stat")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks =
        |i: usize| -> anyhow::Result<f64> { Ok(fields.get(i - 3).context("short stat")?.parse::<f64>()?) };
    Ok((ticks(14)? + ticks(15)?) / 100.0)
}

fn rss_mb(pid: u32) -> anyhow::Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kb: f64 = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .context("VmRSS not found")?;
    Ok(kb / 1024.0)
}

/// Runs `--rate` operations per second, each spawned so a slow one does not slow the rate.
async fn at_rate<F, Fut>(rate: u32, n: usize, op: F) -> anyhow::Result<HashMap<String, Instant>>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send + 'static,
{
    let mut ticks = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(rate.max(1))));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut sent = HashMap::new();
    let mut tasks = vec![];
    for i in 0..n {
        ticks.tick().await;
        let name = format!("lat-{i}");
        sent.insert(name.clone(), Instant::now());
        tasks.push(tokio::spawn(op(name)));
    }
    for t in tasks {
        t.await??;
    }
    Ok(sent)
}

/// Two fresh hubs (the upstream one with workspace `root:bench` and Ferry's CRDs) and
/// admin clients for both.
struct Hubs {
    work: tempfile::TempDir,
    up: TestHub,
    down: TestHub,
    up_kubeconfig: std::path::PathBuf,
    upc: kube::Client,
    downc: kube::Client,
}

impl Hubs {
    async fn start() -> anyhow::Result<Hubs> {
        let work = tempfile::tempdir()?;
        let up = TestHub::start().await;
        let down = TestHub::start().await;
        let up_root = client_for(up.kubeconfig()).await?;
        let workspaces = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("tenancy.kcp.io", "v1alpha1", "Workspace"),
            "workspaces",
        );
        let ws: DynamicObject = serde_json::from_value(
            json!({ "apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": { "name": "bench" } }),
        )?;
        Api::<DynamicObject>::all_with(up_root, &workspaces)
            .create(&PostParams::default(), &ws)
            .await?;
        let up_kubeconfig = work.path().join("upstream.kubeconfig");
        std::fs::write(
            &up_kubeconfig,
            ferry_hub::kubeconfig::admin_kubeconfig(
                &up.running.url,
                &up.running.ca_pem,
                &up.running.admin_token,
                "root:bench",
            ),
        )?;
        let upc = client_for(&up_kubeconfig).await?;
        let downc = client_for(down.kubeconfig()).await?;
        let crds: Api<
            k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
        > = Api::all(upc.clone());
        for crd in ferry_api::all_crds() {
            crds.create(&PostParams::default(), &crd).await?;
        }
        Ok(Hubs {
            work,
            up,
            down,
            up_kubeconfig,
            upc,
            downc,
        })
    }

    async fn stop(self) {
        self.up.running.stop().await;
        self.down.running.stop().await;
    }
}

/// One round of the initial-sync measurement, and the syncer it left running.
struct InitialSync {
    raw_rate: f64,
    sync_rate: f64,
    cpu_us_per_object: f64,
    startup: Duration,
    syncer: tokio::process::Child,
    pid: u32,
    down_seen: Arc<Seen>,
    tracker: tokio::task::JoinHandle<()>,
}

impl InitialSync {
    fn ratio(&self) -> f64 {
        self.sync_rate / self.raw_rate
    }
}

/// The baseline (raw creates downstream) and then the initial sync of as many objects,
/// on `hubs`.
async fn initial_sync(
    hubs: &Hubs,
    args: &SyncBenchArgs,
    progress: &impl Fn(&str),
) -> anyhow::Result<InitialSync> {
    let (upc, downc) = (&hubs.upc, &hubs.downc);
    // 1. Baseline.
    progress("baseline: raw creates against the downstream hub");
    ensure_namespace(downc, "baseline").await?;
    let baseline_api: Api<ConfigMap> = Api::namespaced(downc.clone(), "baseline");
    let names: Vec<String> = (0..args.objects).map(|i| format!("raw-{i}")).collect();
    // Measured like the initial sync below: from the first request until a
    // watch on the downstream hub has seen every object, with that watch
    // running throughout — the same observer and end point for both.
    let baseline_seen = Seen::new();
    let baseline_tracker = track(baseline_api.clone(), baseline_seen.clone(), |_| true);
    let raw_rate = {
        let start = Instant::now();
        futures::stream::iter(names)
            .map(|name| {
                let api = baseline_api.clone();
                async move {
                    let mut cm = configmap(name);
                    cm.metadata.namespace = Some("baseline".into());
                    api.create(&PostParams::default(), &cm).await
                }
            })
            .buffer_unordered(args.workers.max(1))
            .try_collect::<Vec<_>>()
            .await?;
        baseline_seen
            .wait_for(args.objects, Duration::from_secs(600), "the baseline's objects")
            .await?;
        args.objects as f64 / start.elapsed().as_secs_f64()
    };
    baseline_tracker.abort();

    // 2. Initial sync.
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
    let tracker = track(
        Api::<ConfigMap>::namespaced(downc.clone(), NS),
        down_seen.clone(),
        |_| true,
    );
    // FERRY_BENCH_SYNCER_LOG=path keeps the syncer's log.
    let log_path = std::env::var_os("FERRY_BENCH_SYNCER_LOG")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| hubs.work.path().join("syncer.log"));
    let log = std::fs::File::create(&log_path)?;
    let metrics_address = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let launched = Instant::now();
    let syncer = tokio::process::Command::new(std::env::current_exe()?)
        .arg("syncer")
        .arg("--from-kubeconfig")
        .arg(&hubs.up_kubeconfig)
        .arg("--to-kubeconfig")
        .arg(hubs.down.kubeconfig())
        .args(["--sync-target-name", "bench", "--qps", "0"])
        .args(["--metrics-address", &metrics_address.to_string()])
        .args(["--workers", &args.workers.to_string()])
        .stdout(std::process::Stdio::null())
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
    let config: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "SyncerConfig", "metadata": { "name": "the-one" },
        "spec": { "namespaceScope": { "namespaces": [NS], "resources": [
            { "group": "", "apiVersion": "v1", "resource": "configmaps" },
            { "group": "apps", "apiVersion": "v1", "resource": "deployments" }
        ]}}
    }))?;
    let configs = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("edge.kubestellar.io", "v2alpha1", "SyncerConfig"),
        "syncerconfigs",
    );
    let cpu_before = cpu_seconds(pid)?;
    let started = Instant::now();
    Api::<DynamicObject>::all_with(upc.clone(), &configs)
        .create(&PostParams::default(), &config)
        .await?;
    down_seen
        .wait_for(args.objects, Duration::from_secs(600), "the initial sync")
        .await?;
    let sync_rate = args.objects as f64 / started.elapsed().as_secs_f64();
    let cpu_us_per_object = (cpu_seconds(pid)? - cpu_before) * 1e6 / args.objects as f64;
    Ok(InitialSync {
        raw_rate,
        sync_rate,
        cpu_us_per_object,
        startup,
        syncer,
        pid,
        down_seen,
        tracker,
    })
}

pub async fn run(args: SyncBenchArgs) -> anyhow::Result<()> {
    let progress = |msg: &str| {
        if !args.json {
            eprintln!("… {msg}");
        }
    };
    // Rounds 1..n-1 measure only the initial sync, each on fresh hubs; the last one
    // goes on to the latency and RSS measurements.
    let rounds = args.rounds.max(1);
    let mut ratios = vec![];
    let mut last = None;
    for round in 1..=rounds {
        if rounds > 1 {
            progress(&format!("initial-sync round {round} of {rounds}"));
        }
        let hubs = Hubs::start().await?;
        let sync = initial_sync(&hubs, &args, &progress).await?;
        ratios.push(sync.ratio());
        if round < rounds {
            let InitialSync {
                mut syncer, tracker, ..
            } = sync;
            tracker.abort();
            let _ = syncer.kill().await;
            hubs.stop().await;
        } else {
            last = Some((hubs, sync));
        }
    }
    let (hubs, sync) = last.expect("at least one round");
    let InitialSync {
        raw_rate,
        sync_rate,
        cpu_us_per_object: sync_cpu_us,
        startup,
        syncer: mut child,
        pid,
        down_seen,
        tracker: _tracker,
    } = sync;
    let (upc, downc) = (hubs.upc.clone(), hubs.downc.clone());
    let up_cms: Api<ConfigMap> = Api::namespaced(upc.clone(), NS);

    // 3. Steady-state latency.
    progress("steady-state latency");
    let sent = at_rate(args.rate, args.latency_objects, |name| {
        let api = up_cms.clone();
        async move {
            api.create(&PostParams::default(), &configmap(name)).await?;
            Ok(())
        }
    })
    .await?;
    down_seen
        .wait_for(
            args.objects + args.latency_objects,
            Duration::from_secs(120),
            "steady-state copies",
        )
        .await?;
    let (lat_p50, lat_p99, lat_n) = latencies(&sent, &*down_seen.at.lock().await);

    // 4. Status return.
    progress("status-return latency");
    let status_n = args.latency_objects.min(500);
    let up_deploys: Api<Deployment> = Api::namespaced(upc.clone(), NS);
    let down_deploys: Api<Deployment> = Api::namespaced(downc.clone(), NS);
    let deploy_seen = Seen::new();
    let _deploy_tracker = track(down_deploys.clone(), deploy_seen.clone(), |_| true);
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
    let status_seen = Seen::new();
    let _status_tracker = track(up_deploys.clone(), status_seen.clone(), |d: &Deployment| {
        d.status.as_ref().and_then(|s| s.ready_replicas) == Some(1)
    });
    let status_sent = at_rate(args.rate, status_n, |name| {
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
    status_seen
        .wait_for(status_n, Duration::from_secs(120), "status upstream")
        .await?;
    let (st_p50, st_p99, st_n) = latencies(&status_sent, &*status_seen.at.lock().await);

    // 5. RSS.
    let mut rss = vec![];
    let mut synced = *down_seen.count.borrow() + status_n;
    let mut next = 0usize;
    for level in args.rss_levels.iter().copied().filter(|l| *l > 0) {
        if level > synced {
            progress(&format!("filling up to {level} synced objects"));
            let more = level - synced;
            let want = *down_seen.count.borrow() + more;
            create_all(
                &up_cms,
                (next..next + more).map(|i| format!("fill-{i}")).collect(),
                16,
            )
            .await?;
            next += more;
            progress(&format!("created {more} more; waiting for their copies"));
            if let Err(e) = down_seen
                .wait_for(want, Duration::from_secs(1800), "fill copies")
                .await
            {
                let listed = up_cms.list(&Default::default()).await?.items.len();
                let down_listed = Api::<ConfigMap>::namespaced(downc.clone(), NS)
                    .list(&Default::default())
                    .await?
                    .items
                    .len();
                anyhow::bail!("{e}: upstream {listed} downstream {down_listed} want {want}");
            }
            synced = level;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        rss.push((level, rss_mb(pid)?));
    }
    let idle_rss = rss_mb(pid)?;
    let _ = child.kill().await;
    for tracker in [_tracker, _deploy_tracker, _status_tracker] {
        tracker.abort();
    }

    let ratio = median(&ratios);
    let report = json!({
        "workers": args.workers,
        "syncer_startup_to_ready_ms": round(startup.as_secs_f64() * 1000.0),
        "initial_sync": {
            "objects": args.objects,
            "syncer_objects_per_sec": round(sync_rate),
            "baseline_raw_create_objects_per_sec": round(raw_rate),
            "ratio": round3(ratio),
            "ratio_of_each_round": ratios.iter().map(|r| round3(*r)).collect::<Vec<f64>>(),
            "target_ratio": 0.8,
            "concurrency": args.workers,
            "syncer_cpu_us_per_object": round(sync_cpu_us),
        },
        "steady_state_latency_ms": {
            "rate_per_sec": args.rate, "objects": lat_n, "p50": round3(lat_p50), "p99": round3(lat_p99), "target_p99": 50.0,
        },
        "status_return_latency_ms": {
            "rate_per_sec": args.rate, "objects": st_n, "p50": round3(st_p50), "p99": round3(st_p99),
        },
        "syncer_rss_mb": rss.iter().map(|(n, mb)| json!({ "synced_objects": n, "rss_mb": round(*mb) })).collect::<Vec<Value>>(),
        "syncer_rss_mb_at_end": round(idle_rss),
        "rss_target_mb_at_10k": 100.0,
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "ferry bench sync (workers {}, baseline measured in this run)",
            args.workers
        );
        println!(
            "  syncer start-up   {:>7.0} ms to ready (no SyncerConfig yet)",
            startup.as_secs_f64() * 1000.0
        );
        println!(
            "  initial sync      ratio {:.2} (median of {} rounds: {}; target >= 0.80)",
            ratio,
            ratios.len(),
            ratios
                .iter()
                .map(|r| format!("{r:.2}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        println!(
            "                    last round: {:.0} objects/s, baseline raw create {:.0} objects/s",
            sync_rate, raw_rate
        );
        println!(
            "                    same concurrency: syncer --workers {0}, baseline {0} creates in flight; syncer CPU {1:.0} µs/object",
            args.workers, sync_cpu_us
        );
        println!(
            "  steady state      p50 {:>7.2} ms   p99 {:>7.2} ms   at {}/s, {} objects (target p99 <= 50 ms)",
            lat_p50, lat_p99, args.rate, lat_n
        );
        println!(
            "  status return     p50 {:>7.2} ms   p99 {:>7.2} ms   at {}/s, {} objects",
            st_p50, st_p99, args.rate, st_n
        );
        for (n, mb) in &rss {
            println!("  syncer RSS        {mb:>7.1} MB with {n} synced objects (target <= 100 MB at 10k)");
        }
    }
    Ok(())
}

/// The middle value (the mean of the two middle ones for an even count).
fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    }
}

fn round(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 50.0);
        assert_eq!(percentile(&v, 99.0), 99.0);
        assert_eq!(percentile(&[3.0], 99.0), 3.0);
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[0.9, 0.7, 0.8]), 0.8);
        assert_eq!(median(&[0.9, 0.7]), 0.8);
        assert_eq!(median(&[0.5]), 0.5);
    }
}
