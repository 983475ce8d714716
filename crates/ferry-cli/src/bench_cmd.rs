//! `ferry bench`: benchmarks that report figures next to a baseline measured
//! in the same run, because the machines here are shared and noisy.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use ferry_hub::testing::HubProcess;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

#[derive(clap::Subcommand)]
pub enum BenchCommand {
    /// Hub throughput, LIST latency, watch fan-out and memory.
    Hub(HubBenchArgs),
    /// Syncer throughput, latency and memory against hubs.
    Sync(crate::bench_sync::SyncBenchArgs),
}

#[derive(clap::Args)]
pub struct HubBenchArgs {
    /// Print the figures as JSON.
    #[arg(long)]
    pub json: bool,
    /// Creates measured per concurrency level.
    #[arg(long, default_value_t = 3000)]
    pub writes: usize,
    /// Objects in the LIST measured.
    #[arg(long, default_value_t = 10_000)]
    pub list_objects: usize,
    /// Concurrent watchers for the fan-out measurement.
    #[arg(long, default_value_t = 100)]
    pub watchers: usize,
    /// Events delivered to every watcher.
    #[arg(long, default_value_t = 200)]
    pub watch_events: usize,
    /// Objects held when memory is measured.
    #[arg(long, default_value_t = 100_000)]
    pub rss_objects: usize,
    /// Consumer workspaces bound to one APIExport (0: skip the block).
    #[arg(long, default_value_t = 1000)]
    pub bound_workspaces: usize,
    /// Creates watched through the APIExport virtual workspace (and in the baseline).
    #[arg(long, default_value_t = 500)]
    pub apiexport_events: usize,
}

pub async fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::Hub(args) => bench_hub(args).await,
        BenchCommand::Sync(args) => crate::bench_sync::run(args).await,
    }
}

pub async fn client_for(kubeconfig: &Path) -> anyhow::Result<kube::Client> {
    crate::kubeconfig::client(Some(kubeconfig), None).await
}

/// A 1 KiB ConfigMap.
pub fn kib_configmap(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"payload": "x".repeat(1024)}}))
        .expect("valid ConfigMap")
}

async fn ensure_namespace(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    match Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Create `count` ConfigMaps named `<prefix>-<i>` with `concurrency` requests
/// in flight; returns creates per second.
async fn create_many(
    api: &Api<ConfigMap>,
    prefix: &str,
    count: usize,
    concurrency: usize,
) -> anyhow::Result<f64> {
    let start = Instant::now();
    futures::stream::iter(0..count)
        .map(|i| {
            let api = api.clone();
            let name = format!("{prefix}-{i}");
            async move {
                api.create(&PostParams::default(), &kib_configmap(&name))
                    .await
                    .map(|_| ())
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<Vec<()>>()
        .await
        .with_context(|| format!("creating {prefix}-*"))?;
    Ok(count as f64 / start.elapsed().as_secs_f64())
}

pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v
}

async fn bench_hub(args: HubBenchArgs) -> anyhow::Result<()> {
    let exe = std::env::current_exe()?;
    let durable_dir = tempfile::tempdir()?;
    let baseline_dir = tempfile::tempdir()?;
    let durable = HubProcess::spawn(&exe, durable_dir.path(), &[])?;
    let baseline = HubProcess::spawn(&exe, baseline_dir.path(), &["--ephemeral"])?;
    let dc = client_for(&durable.kubeconfig).await?;
    let bc = client_for(&baseline.kubeconfig).await?;
    let rss_empty = durable.rss_bytes().unwrap_or(0);
    let log = |msg: &str| {
        if !args.json {
            eprintln!("{msg}");
        }
    };

    // 1. Creates per second, durable (SQLite, fsync per batch) against the
    //    same hub binary keeping nothing on disk.
    let mut creates = serde_json::Map::new();
    for concurrency in [1usize, 32] {
        let count = if concurrency == 1 {
            (args.writes / 4).max(1)
        } else {
            args.writes
        };
        let ns = format!("create-{concurrency}");
        ensure_namespace(&dc, &ns).await?;
        ensure_namespace(&bc, &ns).await?;
        let d = create_many(&Api::namespaced(dc.clone(), &ns), "c", count, concurrency).await?;
        let b = create_many(&Api::namespaced(bc.clone(), &ns), "c", count, concurrency).await?;
        log(&format!(
            "creates/s with {concurrency} clients: durable {d:.0}, in-memory baseline {b:.0}"
        ));
        creates.insert(
            format!("clients_{concurrency}"),
            json!({"durable_per_sec": d, "in_memory_per_sec": b, "ratio_durable_to_in_memory": d / b}),
        );
    }

    // 2. LIST of N ConfigMaps, against a single GET on the same hub.
    ensure_namespace(&dc, "list").await?;
    let list_api: Api<ConfigMap> = Api::namespaced(dc.clone(), "list");
    create_many(&list_api, "l", args.list_objects, 32).await?;
    let mut raw = RawClient::connect(&durable.url, durable_dir.path()).await?;
    let mut list_ms = Vec::new();
    let mut get_ms = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let body = raw
            .get("/clusters/root/api/v1/namespaces/list/configmaps")
            .await?;
        list_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        let items = body.windows(10).filter(|w| w == b"\"name\":\"l-").count();
        anyhow::ensure!(
            items == args.list_objects,
            "listed {items} of {} objects",
            args.list_objects
        );
        let t = Instant::now();
        list_api.get("l-0").await?;
        get_ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let t = Instant::now();
    let typed = list_api.list(&ListParams::default()).await?.items.len();
    let typed_ms = t.elapsed().as_secs_f64() * 1000.0;
    anyhow::ensure!(typed == args.list_objects, "typed list returned {typed} objects");
    let (list_ms, get_ms) = (sorted(list_ms), sorted(get_ms));
    let list_p50 = percentile(&list_ms, 0.5);
    let get_p50 = percentile(&get_ms, 0.5);
    log(&format!(
        "LIST {} objects: p50 {list_p50:.1} ms (GET p50 {get_p50:.2} ms)",
        args.list_objects
    ));

    // 2b. LIST while 32 writers create: the writers' throughput against the
    //     same writers alone (a LIST must not stall writes), and the LIST's
    //     latency under that load against the quiet LIST above.
    ensure_namespace(&dc, "list-writes").await?;
    let lw_api: Api<ConfigMap> = Api::namespaced(dc.clone(), "list-writes");
    let writes_alone = create_many(&lw_api, "a", args.writes, 32).await?;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let lister = {
        let (url, dir, stop) = (
            durable.url.clone(),
            durable_dir.path().to_path_buf(),
            stop.clone(),
        );
        tokio::spawn(async move {
            let mut raw = RawClient::connect(&url, &dir).await?;
            let mut ms = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let t = Instant::now();
                raw.get("/clusters/root/api/v1/namespaces/list/configmaps")
                    .await?;
                ms.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            anyhow::Ok(ms)
        })
    };
    let writes_during = create_many(&lw_api, "b", args.writes, 32).await?;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let busy_list_ms = sorted(lister.await??);
    anyhow::ensure!(!busy_list_ms.is_empty(), "no LIST finished while the writers ran");
    log(&format!(
        "32 writers: {writes_alone:.0} creates/s alone, {writes_during:.0} while LISTing {} objects \
         ({} LISTs, p50 {:.1} ms)",
        args.list_objects,
        busy_list_ms.len(),
        percentile(&busy_list_ms, 0.5)
    ));

    // 3. Watch fan-out: every event to every watcher; latency from just before
    //    the create is sent, against the create's own round trip.
    let (watch, create_rtt) = watch_fanout(&dc, args.watchers, args.watch_events).await?;
    let (watch, create_rtt) = (sorted(watch), sorted(create_rtt));
    let (w50, w99) = (percentile(&watch, 0.5), percentile(&watch, 0.99));
    log(&format!(
        "watch delivery to {} watchers: p50 {w50:.2} ms, p99 {w99:.2} ms (create round trip p50 {:.2} ms)",
        args.watchers,
        percentile(&create_rtt, 0.5)
    ));

    // 4. Memory with N 1-KiB ConfigMaps, against the empty hub.
    ensure_namespace(&dc, "rss").await?;
    let held = args.list_objects + 3 * args.writes + args.writes / 4 + args.watch_events;
    let more = args.rss_objects.saturating_sub(held);
    create_many(&Api::namespaced(dc.clone(), "rss"), "r", more, 32).await?;
    let rss_full = durable.rss_bytes().unwrap_or(0);
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    log(&format!(
        "RSS with {} objects: {:.0} MiB (empty hub {:.0} MiB)",
        args.rss_objects,
        mib(rss_full),
        mib(rss_empty)
    ));

    // 5. An APIExport bound into many workspaces: watch delivery through its
    //    virtual workspace against a plain watch on one workspace, and
    //    memory per bound workspace.
    let apiexport = if args.bound_workspaces > 0 {
        let config = crate::kubeconfig::load(Some(&durable.kubeconfig), None).await?;
        let f = crate::bench_apiexport::measure(
            &config,
            &durable.url,
            args.bound_workspaces,
            args.apiexport_events,
            || durable.rss_bytes().unwrap_or(0),
        )
        .await?;
        let (vw, base) = (sorted(f.virtual_workspace_ms), sorted(f.baseline_ms));
        let per_ws = f.rss_after.saturating_sub(f.rss_before) as f64 / f.workspaces.max(1) as f64;
        let per_binding = f.rss_after.saturating_sub(f.rss_workspaces) as f64 / f.workspaces.max(1) as f64;
        log(&format!(
            "APIExport bound in {} workspaces (set up in {:.1} s): watch through the virtual workspace p99 {:.2} ms, \
             one workspace's watch p99 {:.2} ms; {:.0} KiB per bound workspace",
            f.workspaces,
            f.setup_secs,
            percentile(&vw, 0.99),
            percentile(&base, 0.99),
            per_ws / 1024.0
        ));
        json!({"bound_workspaces": f.workspaces, "events": f.events, "setup_secs": f.setup_secs,
               "virtual_workspace_p50_ms": percentile(&vw, 0.5), "virtual_workspace_p99_ms": percentile(&vw, 0.99),
               "baseline_one_workspace_p50_ms": percentile(&base, 0.5), "baseline_one_workspace_p99_ms": percentile(&base, 0.99),
               "ratio_p99_virtual_workspace_to_baseline": percentile(&vw, 0.99) / percentile(&base, 0.99),
               "rss_bytes_per_bound_workspace": per_ws,
               "rss_bytes_per_binding_alone": per_binding,
               "rss_mib_before": f.rss_before as f64 / 1048576.0,
               "rss_mib_with_workspaces": f.rss_workspaces as f64 / 1048576.0,
               "rss_mib_after": f.rss_after as f64 / 1048576.0})
    } else {
        serde_json::Value::Null
    };

    let figures = json!({
        "apiexport": apiexport,
        "creates": creates,
        "list": {"objects": args.list_objects, "p50_ms": list_p50, "p99_ms": percentile(&list_ms, 0.99),
                 "get_p50_ms": get_p50, "ratio_list_to_get": list_p50 / get_p50,
                 "typed_kube_rs_list_ms": typed_ms},
        "list_during_writes": {"writers": 32, "creates": args.writes, "objects_listed": args.list_objects,
                 "creates_per_sec_alone": writes_alone, "creates_per_sec_while_listing": writes_during,
                 "ratio_creates_while_listing_to_alone": writes_during / writes_alone,
                 "lists": busy_list_ms.len(), "list_p50_ms": percentile(&busy_list_ms, 0.5),
                 "list_p99_ms": percentile(&busy_list_ms, 0.99),
                 "ratio_list_p50_busy_to_quiet": percentile(&busy_list_ms, 0.5) / list_p50},
        "watch": {"watchers": args.watchers, "events": args.watch_events, "p50_ms": w50, "p99_ms": w99,
                  "create_rtt_p50_ms": percentile(&create_rtt, 0.5)},
        "rss": {"objects": args.rss_objects, "mib": mib(rss_full), "empty_mib": mib(rss_empty),
                "bytes_per_object": (rss_full.saturating_sub(rss_empty)) as f64 / args.rss_objects.max(1) as f64},
        "targets": {
            "creates_32_clients_per_sec_at_least": 3000, "list_10k_p50_ms_under": 100,
            "watch_p99_ms_under": 20, "rss_100k_mib_under": 300
        }
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&figures)?);
    }
    Ok(())
}

/// Start `watchers` watches, create `events` objects at a steady pace, and
/// return every delivery latency (ms) and every create round trip (ms).
async fn watch_fanout(
    client: &kube::Client,
    watchers: usize,
    events: usize,
) -> anyhow::Result<(Vec<f64>, Vec<f64>)> {
    ensure_namespace(client, "watch").await?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "watch");
    let rv = api
        .list(&ListParams::default().limit(1))
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    let sent: Arc<SendTimes> = Arc::new(SendTimes::default());
    let mut tasks = Vec::new();
    for _ in 0..watchers {
        let api = api.clone();
        let rv = rv.clone();
        let sent = sent.clone();
        let stream = api.watch(&WatchParams::default().timeout(290), &rv).await?;
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(events);
            let mut stream = stream.boxed();
            while latencies.len() < events {
                match tokio::time::timeout(Duration::from_secs(30), stream.try_next()).await {
                    Ok(Ok(Some(WatchEvent::Added(cm)))) => {
                        let name = cm.metadata.name.unwrap_or_default();
                        if let Some(t) = sent.get(&name) {
                            latencies.push(t.elapsed().as_secs_f64() * 1000.0);
                        }
                    }
                    Ok(Ok(Some(_))) => {}
                    _ => break,
                }
            }
            latencies
        }));
    }
    let mut rtt = Vec::new();
    let mut pace = tokio::time::interval(Duration::from_millis(5));
    for i in 0..events {
        pace.tick().await;
        let name = format!("w-{i}");
        let t = Instant::now();
        sent.insert(name.clone(), t);
        api.create(&PostParams::default(), &kib_configmap(&name)).await?;
        rtt.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let mut all = Vec::new();
    for t in tasks {
        let l = t.await?;
        anyhow::ensure!(l.len() == events, "a watcher saw {} of {events} events", l.len());
        all.extend(l);
    }
    Ok((all, rtt))
}

/// A bare HTTP/1.1-over-TLS client: the hub's LIST latency measured without
/// a client library's own body handling (kube-rs takes several times longer
/// than the hub to take in a 15 MB body; its typed list is reported apart).
struct RawClient {
    stream: tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
    host: String,
    token: String,
}

impl RawClient {
    async fn connect(url: &str, data_dir: &Path) -> anyhow::Result<RawClient> {
        use tokio::io::AsyncWriteExt as _;
        let host = url.trim_start_matches("https://").to_string();
        let ca = std::fs::read(data_dir.join("pki/ca.crt"))?;
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_pemfile_certs(&ca)? {
            roots.add(cert)?;
        }
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let tcp = tokio::net::TcpStream::connect(&host).await?;
        tcp.set_nodelay(true)?;
        let name = rustls::pki_types::ServerName::try_from(
            host.split(':').next().unwrap_or("127.0.0.1").to_string(),
        )?;
        let mut stream = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
            .connect(name, tcp)
            .await?;
        stream.flush().await?;
        let token = std::fs::read_to_string(data_dir.join("admin.token"))?
            .trim()
            .to_string();
        Ok(RawClient { stream, host, token })
    }

    /// GET `path`; the whole body (the hub always sends Content-Length for lists).
    async fn get(&mut self, path: &str) -> anyhow::Result<Vec<u8>> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nAccept: application/json\r\n\r\n",
            self.host, self.token
        );
        self.stream.write_all(req.as_bytes()).await?;
        let mut buf = Vec::with_capacity(1 << 20);
        let mut chunk = vec![0u8; 1 << 16];
        let (header_end, length) = loop {
            let n = self.stream.read(&mut chunk).await?;
            anyhow::ensure!(n > 0, "the hub closed the connection");
            buf.extend_from_slice(&chunk[..n]);
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                let length = head
                    .lines()
                    .find_map(|l| {
                        l.strip_prefix("content-length:")
                            .map(|v| v.trim().parse::<usize>())
                    })
                    .ok_or_else(|| anyhow::anyhow!("no content-length in {head}"))??;
                break (end + 4, length);
            }
        };
        while buf.len() < header_end + length {
            let n = self.stream.read(&mut chunk).await?;
            anyhow::ensure!(n > 0, "the hub closed the connection mid-body");
            buf.extend_from_slice(&chunk[..n]);
        }
        Ok(buf.split_off(header_end))
    }
}

fn rustls_pemfile_certs(pem: &[u8]) -> anyhow::Result<Vec<rustls::pki_types::CertificateDer<'static>>> {
    use rustls::pki_types::pem::PemObject;
    Ok(rustls::pki_types::CertificateDer::pem_slice_iter(pem).collect::<Result<Vec<_>, _>>()?)
}

/// When each object's create was sent, shared by the writer and the watchers.
#[derive(Default)]
struct SendTimes(std::sync::RwLock<HashMap<String, Instant>>);

impl SendTimes {
    fn insert(&self, name: String, t: Instant) {
        self.0.write().expect("not poisoned").insert(name, t);
    }
    fn get(&self, name: &str) -> Option<Instant> {
        self.0.read().expect("not poisoned").get(name).copied()
    }
}
