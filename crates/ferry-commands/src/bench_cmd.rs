//! `ferry bench`: benchmarks that report figures next to a baseline measured
//! in the same run, because the machines here are shared and noisy.
//!
//! `ferry bench hub` starts two hubs, each as its own `ferry hub` child process: the
//! durable hub measured and the same binary keeping nothing on disk (`--ephemeral`) as
//! the baseline. The measuring clients run in this process and treat both hubs alike:
//! the same client code, the same concurrency, alternating which hub goes first from
//! round to round. Every latency is a [`Summary`] (`p50`, `p90`, `p99`, `max`, `n`),
//! every noisy rate a [`Rounds`] (the median and each round's value), and the JSON
//! opens with a `method` block saying how the figures were obtained.
//!
//! The report is a list of blocks, each one `async fn(&HubBench) -> Result<Value>`
//! (see [`bench_hub`]); a new measurement is a new block.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::hub_process::HubProcess;
use anyhow::Context;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use serde_json::{json, Value};

use crate::bench_stats::{Rounds, Summary};

#[derive(clap::Subcommand)]
pub enum BenchCommand {
    /// Hub throughput, LIST latency, watch fan-out and memory.
    Hub(HubBenchArgs),
    /// Syncer throughput, latency and memory against hubs.
    Sync(crate::bench_sync::SyncBenchArgs),
    /// Create, LIST, GET and watch figures against any API servers (a real cluster,
    /// kcp, a hub), side by side in one run.
    Compare(crate::bench_compare::CompareArgs),
    /// One workload reaching N clusters, each a hub process with its own syncer process:
    /// write → copy in every cluster, status return, one change everywhere, memory and CPU.
    Fleet(crate::bench_fleet::FleetBenchArgs),
    /// How fast the hub places one workload on N SyncTargets: KubeStellar's placement
    /// translator (`--profile kubestellar`) or kcp TMC's scheduler (`--profile tmc`).
    Placement(crate::bench_placement::PlacementBenchArgs),
    /// The baseline client of `ferry bench sync`, run as a process of its own.
    #[command(hide = true)]
    CreateLoad(crate::bench_load::CreateLoadArgs),
}

#[derive(clap::Args)]
pub struct HubBenchArgs {
    /// Print the figures as JSON.
    #[arg(long)]
    pub json: bool,
    /// Creates measured per concurrency level and round (a quarter of them with one client).
    #[arg(long, default_value_t = 3000)]
    pub writes: usize,
    /// Rounds of the create measurement; the median ratio is the headline figure.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Objects in the LIST measured.
    #[arg(long, default_value_t = 10_000)]
    pub list_objects: usize,
    /// LISTs (and GETs) timed.
    #[arg(long, default_value_t = 20)]
    pub lists: usize,
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
    /// Empty workspaces created with 32 clients on a hub of their own, over --rounds
    /// rounds: creations/s, and the hub's memory and disk per workspace (0: skip the block).
    #[arg(long, default_value_t = 1000)]
    pub workspaces: usize,
    /// The `ferry` executable whose hubs are measured (default: this one), to compare
    /// two builds with the same bench.
    #[arg(long)]
    pub hub_binary: Option<PathBuf>,
    /// `etcd`: also measure hubs on etcd against the SQLite hub in the same run
    /// (the `etcd` block), as ratios: one hub, and three hubs sharing the load, on a
    /// one-member etcd with its data on disk (fsync on); and three hubs on a
    /// three-member etcd. Both etcds are started locally unless --etcd-servers is
    /// given (then the three-member figure is left out).
    #[arg(long, value_enum, default_value_t = crate::hub_cmd::StorageKind::Sqlite)]
    pub storage: crate::hub_cmd::StorageKind,
    /// etcd members for `--storage etcd` (comma-separated) instead of a local one.
    #[arg(long, value_delimiter = ',')]
    pub etcd_servers: Vec<String>,
}

pub async fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::Hub(args) => bench_hub(args).await,
        BenchCommand::Sync(args) => crate::bench_sync::run(args).await,
        BenchCommand::Compare(args) => crate::bench_compare::run(args).await,
        BenchCommand::Fleet(args) => crate::bench_fleet::run(args).await,
        BenchCommand::Placement(args) => crate::bench_placement::run(args).await,
        BenchCommand::CreateLoad(args) => crate::bench_load::run(args).await,
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

/// Creates namespace `name` unless it exists.
pub async fn ensure_namespace(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    match Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e).with_context(|| format!("creating namespace {name}")),
    }
}

/// Create `count` ConfigMaps named `<prefix>-<i>` with `concurrency` requests
/// in flight; returns creates per second.
pub async fn create_many(
    api: &Api<ConfigMap>,
    prefix: &str,
    count: usize,
    concurrency: usize,
) -> anyhow::Result<f64> {
    create_many_labelled(api, prefix, count, concurrency, &[]).await
}

/// [`create_many`], each ConfigMap carrying `labels` (so a bench can tell its own
/// objects from what a real cluster's controllers put in the same namespace).
pub async fn create_many_labelled(
    api: &Api<ConfigMap>,
    prefix: &str,
    count: usize,
    concurrency: usize,
    labels: &[(&str, &str)],
) -> anyhow::Result<f64> {
    create_round_robin(std::slice::from_ref(api), prefix, count, concurrency, labels).await
}

/// `count` creates of ConfigMaps `<prefix>-<i>` carrying `labels`, with
/// `concurrency` requests in flight, create `i` through `apis[i mod n]`;
/// creates per second overall.
async fn create_round_robin(
    apis: &[Api<ConfigMap>],
    prefix: &str,
    count: usize,
    concurrency: usize,
    labels: &[(&str, &str)],
) -> anyhow::Result<f64> {
    anyhow::ensure!(count > 0 && !apis.is_empty(), "nothing to create for {prefix}-*");
    let start = Instant::now();
    futures::stream::iter(0..count)
        .map(|i| {
            let api = apis[i % apis.len()].clone();
            let mut cm = kib_configmap(&format!("{prefix}-{i}"));
            if !labels.is_empty() {
                cm.metadata.labels = Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                );
            }
            async move { api.create(&PostParams::default(), &cm).await.map(|_| ()) }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<Vec<()>>()
        .await
        .with_context(|| format!("creating {prefix}-*"))?;
    Ok(count as f64 / start.elapsed().as_secs_f64())
}

/// One hub of `ferry bench hub`: its process, data directory and admin client.
pub struct BenchHub {
    pub process: HubProcess,
    pub data_dir: tempfile::TempDir,
    pub client: kube::Client,
}

impl BenchHub {
    pub async fn start(extra_args: &[&str]) -> anyhow::Result<BenchHub> {
        Self::start_with(None, extra_args).await
    }

    /// A hub run by the `ferry` executable `exe` (`None`: this one), to measure
    /// another build with the same bench.
    pub async fn start_with(exe: Option<&std::path::Path>, extra_args: &[&str]) -> anyhow::Result<BenchHub> {
        let exe = match exe {
            Some(exe) => exe.to_path_buf(),
            None => std::env::current_exe()?,
        };
        // Owner-only from the start, as the hub wants its data directory
        // (a default temporary directory follows the umask, and the hub
        // would tighten it with a warning on every start).
        let mut private = tempfile::Builder::new();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            private.permissions(std::fs::Permissions::from_mode(0o700));
        }
        let data_dir = private.tempdir()?;
        let process = HubProcess::spawn(&exe, data_dir.path(), extra_args).context("starting `ferry hub`")?;
        let client = client_for(&process.kubeconfig).await?;
        Ok(BenchHub {
            process,
            data_dir,
            client,
        })
    }
    /// Writes an admin kubeconfig for `workspace` of this hub into its data directory
    /// and returns its path (for a child process such as a syncer).
    pub fn workspace_kubeconfig(&self, workspace: &str) -> anyhow::Result<PathBuf> {
        let dir = self.data_dir.path();
        let path = dir.join(format!("{}.kubeconfig", workspace.replace(':', "_")));
        let ca = std::fs::read_to_string(dir.join("pki/ca.crt"))?;
        let token = std::fs::read_to_string(dir.join("admin.token"))?;
        std::fs::write(
            &path,
            ferry_server::kubeconfig::admin_kubeconfig(&self.process.url, &ca, token.trim(), workspace),
        )?;
        Ok(path)
    }
}

/// Hubs on etcd (`--storage etcd`), and the etcd the bench started: three
/// hubs on one prefix of one etcd (the first also measured alone), and, when
/// the bench starts its own etcd, three hubs on a three-member etcd cluster.
pub struct EtcdHubs {
    pub hubs: Vec<BenchHub>,
    pub servers: String,
    /// Three hubs on a three-member cluster, and its members' URLs.
    pub cluster_hubs: Vec<BenchHub>,
    pub cluster_servers: Option<String>,
    _etcd: Option<ferry_storage::testing::TestEtcd>,
    _cluster: Option<ferry_storage::testing::TestEtcdCluster>,
}

/// Hub replicas behind the same load in the `etcd` block.
pub const ETCD_REPLICAS: usize = 3;

impl EtcdHubs {
    async fn start(args: &HubBenchArgs) -> anyhow::Result<EtcdHubs> {
        let missing = || anyhow::anyhow!("{}", ferry_storage::testing::TestEtcd::MISSING);
        let (etcd, servers) = if args.etcd_servers.is_empty() {
            let etcd = ferry_storage::testing::TestEtcd::start_on_disk().ok_or_else(missing)?;
            let url = etcd.url();
            (Some(etcd), url)
        } else {
            (None, args.etcd_servers.join(","))
        };
        let hubs = Self::replicas(&servers).await?;
        let (cluster, cluster_hubs) = if args.etcd_servers.is_empty() {
            let cluster = ferry_storage::testing::TestEtcdCluster::start_on_disk().ok_or_else(missing)?;
            let hubs = Self::replicas(&cluster.urls()).await?;
            (Some(cluster), hubs)
        } else {
            (None, Vec::new())
        };
        Ok(EtcdHubs {
            hubs,
            servers,
            cluster_servers: cluster.as_ref().map(|c| c.urls()),
            cluster_hubs,
            _etcd: etcd,
            _cluster: cluster,
        })
    }

    /// [`ETCD_REPLICAS`] hubs on one new prefix of `servers`.
    async fn replicas(servers: &str) -> anyhow::Result<Vec<BenchHub>> {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let prefix = format!("/ferry-bench/{}-{stamp}", std::process::id());
        let flags = [
            "--storage",
            "etcd",
            "--etcd-servers",
            servers,
            "--etcd-prefix",
            &prefix,
        ];
        // One after the other: the later ones adopt the identity the first stored.
        let mut hubs = Vec::new();
        for _ in 0..ETCD_REPLICAS {
            hubs.push(BenchHub::start(&flags).await?);
        }
        Ok(hubs)
    }
}

/// `count` creates with `concurrency` requests in flight, the same load as
/// [`create_many`], spread over `apis` as a round-robin load balancer would
/// (create `i` goes to replica `i mod n`); creates per second overall.
async fn create_spread(
    apis: &[Api<ConfigMap>],
    prefix: &str,
    count: usize,
    concurrency: usize,
) -> anyhow::Result<f64> {
    create_round_robin(apis, prefix, count, concurrency, &[]).await
}

/// What every block of `ferry bench hub` measures with: both hubs and the arguments.
pub struct HubBench {
    /// Hubs on etcd, with `--storage etcd`.
    pub etcd: Option<EtcdHubs>,
    pub args: HubBenchArgs,
    /// The hub measured (SQLite, an fsync per batch).
    pub durable: BenchHub,
    /// The same binary keeping nothing on disk.
    pub baseline: BenchHub,
    /// Objects created on the durable hub so far (the memory block reports how many it
    /// held when measured).
    pub durable_objects: AtomicUsize,
    /// The durable hub's RSS (MiB) before anything was created.
    pub empty_rss_mib: f64,
}

impl HubBench {
    fn log(&self, msg: &str) {
        if !self.args.json {
            eprintln!("{msg}");
        }
    }

    /// [`create_many`] on the durable hub, counted.
    async fn create_durable(
        &self,
        ns: &str,
        prefix: &str,
        count: usize,
        concurrency: usize,
    ) -> anyhow::Result<f64> {
        let api = Api::namespaced(self.durable.client.clone(), ns);
        let rate = create_many(&api, prefix, count, concurrency).await?;
        self.durable_objects.fetch_add(count, Ordering::Relaxed);
        Ok(rate)
    }
}

/// A block of the hub bench: a name in the JSON and the measurement filling it.
type Block = for<'a> fn(&'a HubBench) -> futures::future::BoxFuture<'a, anyhow::Result<Value>>;

/// The blocks, in the order they run (memory last: it counts what the others created).
const HUB_BLOCKS: &[(&str, Block)] = &[
    ("creates", |b| Box::pin(creates_block(b))),
    ("list", |b| Box::pin(list_block(b))),
    ("list_during_writes", |b| Box::pin(list_during_writes_block(b))),
    ("watch", |b| Box::pin(watch_block(b))),
    ("rss", |b| Box::pin(rss_block(b))),
    ("apiexport", |b| Box::pin(apiexport_block(b))),
    ("workspaces", |b| Box::pin(workspaces_block(b))),
    ("etcd", |b| Box::pin(etcd_block(b))),
];

async fn bench_hub(args: HubBenchArgs) -> anyhow::Result<()> {
    let exe = args.hub_binary.as_deref();
    let durable = BenchHub::start_with(exe, &[]).await?;
    let baseline = BenchHub::start_with(exe, &["--ephemeral"]).await?;
    let empty_rss_mib = crate::bench_stats::rss_mib(durable.process.child.id())?;
    let etcd = match args.storage {
        crate::hub_cmd::StorageKind::Etcd => Some(EtcdHubs::start(&args).await?),
        crate::hub_cmd::StorageKind::Sqlite => None,
    };
    let bench = HubBench {
        etcd,
        args,
        durable,
        baseline,
        durable_objects: AtomicUsize::new(0),
        empty_rss_mib,
    };
    let mut report = serde_json::Map::new();
    report.insert("method".into(), hub_method(&bench.args));
    for (name, block) in HUB_BLOCKS {
        if *name == "etcd" && bench.etcd.is_none() {
            continue;
        }
        let figures = block(&bench)
            .await
            .with_context(|| format!("bench hub, {name}"))?;
        report.insert((*name).into(), figures);
    }
    report.insert(
        "targets".into(),
        json!({
            "creates_32_clients_per_sec_at_least": 3000, "list_10k_p50_ms_under": 100,
            "watch_p99_ms_under": 20, "rss_100k_mib_under": 300,
            "workspace_created_per_sec_at_least": 500, "workspace_rss_bytes_at_most": 50 * 1024,
            "workspace_disk_bytes_at_most": 50_000
        }),
    );
    if bench.args.json {
        println!("{}", serde_json::to_string_pretty(&Value::Object(report))?);
    }
    Ok(())
}

fn hub_method(args: &HubBenchArgs) -> Value {
    json!({
        "processes": {
            "durable_hub": "`ferry hub` child process, SQLite in a temporary directory",
            "baseline_hub": "`ferry hub --ephemeral` child process (the same binary, nothing on disk)",
            "clients": "this process (multi-threaded runtime): the same kube-rs client code and \
                        concurrency against both hubs; which hub goes first alternates by round",
        },
        "concurrency": { "creates": [1, 32], "writers_during_list": 32, "watchers": args.watchers },
        "objects": {
            "kind": "ConfigMap with a 1 KiB value",
            "creates_per_round": { "clients_1": (args.writes / 4).max(1), "clients_32": args.writes },
            "listed": args.list_objects, "watch_events": args.watch_events, "held_for_rss": args.rss_objects,
            "apiexport": { "bound_workspaces": args.bound_workspaces, "events": args.apiexport_events },
            "workspaces": { "created": args.workspaces, "clients": crate::bench_workspaces::CLIENTS,
                            "hub": "a durable hub of its own, empty before" },
        },
        "rounds": args.rounds.max(1),
        "statistics": "latencies in ms as {p50, p90, p99, max, n}, nearest-rank percentiles over every \
                       sample; noisy rates as {median, rounds}; ratios are measured / baseline",
    })
}

/// Creates per second, durable against in-memory, at 1 and 32 clients, over rounds.
async fn creates_block(b: &HubBench) -> anyhow::Result<Value> {
    let rounds = b.args.rounds.max(1);
    let mut block = serde_json::Map::new();
    for concurrency in [1usize, 32] {
        let count = if concurrency == 1 {
            (b.args.writes / 4).max(1)
        } else {
            b.args.writes.max(1)
        };
        let (mut durable, mut in_memory) = (vec![], vec![]);
        for round in 0..rounds {
            let ns = format!("create-{concurrency}-{round}");
            ensure_namespace(&b.durable.client, &ns).await?;
            ensure_namespace(&b.baseline.client, &ns).await?;
            let baseline_api = Api::namespaced(b.baseline.client.clone(), &ns);
            let (d, m) = if round % 2 == 0 {
                let d = b.create_durable(&ns, "c", count, concurrency).await?;
                (d, create_many(&baseline_api, "c", count, concurrency).await?)
            } else {
                let m = create_many(&baseline_api, "c", count, concurrency).await?;
                (b.create_durable(&ns, "c", count, concurrency).await?, m)
            };
            durable.push(d);
            in_memory.push(m);
        }
        let ratios = durable.iter().zip(&in_memory).map(|(d, m)| d / m).collect();
        let ratio = Rounds::of("durable/in-memory create ratio", ratios)?;
        let (durable, in_memory) = (
            Rounds::of("durable creates/s", durable)?,
            Rounds::of("in-memory creates/s", in_memory)?,
        );
        b.log(&format!(
            "creates/s with {concurrency} clients: durable {:.0}, in-memory baseline {:.0}, ratio {:.2} \
             (median of {rounds} rounds: {:?})",
            durable.median, in_memory.median, ratio.median, ratio.rounds
        ));
        block.insert(
            format!("clients_{concurrency}"),
            json!({"objects": count, "durable_per_sec": durable, "in_memory_per_sec": in_memory,
                   "ratio_durable_to_in_memory": ratio}),
        );
    }
    Ok(Value::Object(block))
}

/// Hubs on etcd against the SQLite hub, in the same run: creates per second
/// at 1 and 32 clients by one hub on a one-member etcd (fsync on), by three
/// hubs on that etcd behind the same load (round-robin), and (with the
/// bench's own etcd) by three hubs on a three-member etcd, each as a ratio
/// to SQLite, over rounds alternating who goes first; and GET latency.
async fn etcd_block(b: &HubBench) -> anyhow::Result<Value> {
    let Some(etcd) = &b.etcd else {
        return Ok(Value::Null);
    };
    let a = &etcd.hubs[0];
    let rounds = b.args.rounds.max(1);
    let mut block = serde_json::Map::new();
    for concurrency in [1usize, 32] {
        let count = if concurrency == 1 {
            (b.args.writes / 4).max(1)
        } else {
            b.args.writes.max(1)
        };
        let (mut sqlite, mut one, mut three, mut cluster) = (vec![], vec![], vec![], vec![]);
        for round in 0..rounds {
            let ns = format!("etcd-{concurrency}-{round}");
            ensure_namespace(&b.durable.client, &ns).await?;
            ensure_namespace(&a.client, &ns).await?;
            let on_sqlite = Api::namespaced(b.durable.client.clone(), &ns);
            let on_etcd = Api::namespaced(a.client.clone(), &ns);
            let sqlite_first = round % 2 == 0;
            if sqlite_first {
                sqlite.push(create_many(&on_sqlite, "s", count, concurrency).await?);
            }
            one.push(create_many(&on_etcd, "e", count, concurrency).await?);
            let replicas: Vec<Api<ConfigMap>> = etcd
                .hubs
                .iter()
                .map(|h| Api::namespaced(h.client.clone(), &ns))
                .collect();
            three.push(create_spread(&replicas, "three-", count, concurrency).await?);
            if let Some(first) = etcd.cluster_hubs.first() {
                ensure_namespace(&first.client, &ns).await?;
                let replicas: Vec<Api<ConfigMap>> = etcd
                    .cluster_hubs
                    .iter()
                    .map(|h| Api::namespaced(h.client.clone(), &ns))
                    .collect();
                cluster.push(create_spread(&replicas, "cluster-", count, concurrency).await?);
            }
            if !sqlite_first {
                sqlite.push(create_many(&on_sqlite, "s", count, concurrency).await?);
            }
        }
        b.durable_objects.fetch_add(count * rounds, Ordering::Relaxed);
        let ratio = |v: &[f64]| -> Vec<f64> { v.iter().zip(&sqlite).map(|(e, s)| e / s).collect() };
        let one_ratio = Rounds::of("etcd/SQLite create ratio", ratio(&one))?;
        let three_ratio = Rounds::of("three etcd hubs/SQLite create ratio", ratio(&three))?;
        let cluster_figures = if cluster.is_empty() {
            None
        } else {
            let r = Rounds::of("three hubs on three members/SQLite create ratio", ratio(&cluster))?;
            Some((Rounds::of("three hubs on three members creates/s", cluster)?, r))
        };
        let (sqlite, one, three) = (
            Rounds::of("SQLite creates/s", sqlite)?,
            Rounds::of("etcd creates/s", one)?,
            Rounds::of("three etcd hubs creates/s", three)?,
        );
        let mut line = format!(
            "creates/s with {concurrency} clients: SQLite {:.0}, one hub on etcd {:.0} (ratio {:.2}), three hubs on etcd {:.0} (ratio {:.2})",
            sqlite.median, one.median, one_ratio.median, three.median, three_ratio.median
        );
        let mut figures = json!({"objects": count, "sqlite_per_sec": sqlite, "etcd_one_hub_per_sec": one,
               "etcd_three_hubs_per_sec": three, "ratio_etcd_to_sqlite": one_ratio,
               "ratio_three_etcd_hubs_to_sqlite": three_ratio});
        if let Some((rate, r)) = cluster_figures {
            line.push_str(&format!(
                ", three hubs on three etcd members {:.0} (ratio {:.2})",
                rate.median, r.median
            ));
            figures["etcd_cluster_three_hubs_per_sec"] = json!(rate);
            figures["ratio_etcd_cluster_three_hubs_to_sqlite"] = json!(r);
        }
        b.log(&line);
        block.insert(format!("clients_{concurrency}"), figures);
    }
    // GETs are served from memory on both: the same figure expected.
    let ns = "etcd-1-0";
    let gets = b.args.lists.max(1) * 10;
    let (mut sqlite_ms, mut etcd_ms) = (vec![], vec![]);
    for (client, name, samples) in [
        (&b.durable.client, "s-0", &mut sqlite_ms),
        (&a.client, "e-0", &mut etcd_ms),
    ] {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        for _ in 0..gets {
            let t = Instant::now();
            api.get(name).await?;
            samples.push(t.elapsed().as_secs_f64() * 1000.0);
        }
    }
    let (sqlite_get, etcd_get) = (
        Summary::of("SQLite GET latency", sqlite_ms)?,
        Summary::of("etcd GET latency", etcd_ms)?,
    );
    b.log(&format!(
        "GET p50: SQLite {:.2} ms, etcd {:.2} ms",
        sqlite_get.p50, etcd_get.p50
    ));
    block.insert("get_ms".into(), json!({"sqlite": sqlite_get, "etcd": etcd_get}));
    block.insert(
        "setup".into(),
        json!({"etcd": etcd.servers, "hubs_on_etcd": etcd.hubs.len(),
               "etcd_data": if b.args.etcd_servers.is_empty() { "one member, temporary directory on disk (fsync on)" } else { "given by --etcd-servers" },
               "etcd_cluster": etcd.cluster_servers, "hubs_on_etcd_cluster": etcd.cluster_hubs.len()}),
    );
    Ok(Value::Object(block))
}

/// The path of the LIST every LIST figure times.
const LIST_PATH: &str = "/clusters/root/api/v1/namespaces/list/configmaps";

/// LIST of N ConfigMaps, against a single GET on the same hub.
async fn list_block(b: &HubBench) -> anyhow::Result<Value> {
    ensure_namespace(&b.durable.client, "list").await?;
    b.create_durable("list", "l", b.args.list_objects, 32).await?;
    let list_api: Api<ConfigMap> = Api::namespaced(b.durable.client.clone(), "list");
    let mut raw = RawClient::connect(&b.durable.process.url, b.durable.data_dir.path()).await?;
    let (mut list_ms, mut get_ms) = (vec![], vec![]);
    for _ in 0..b.args.lists.max(1) {
        let t = Instant::now();
        let body = raw.get(LIST_PATH).await?;
        list_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        let items = count_items(&body, "l-");
        anyhow::ensure!(
            items == b.args.list_objects,
            "listed {items} of {} objects",
            b.args.list_objects
        );
        let t = Instant::now();
        list_api.get("l-0").await?;
        get_ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let t = Instant::now();
    let typed = list_api.list(&ListParams::default()).await?.items.len();
    let typed_ms = t.elapsed().as_secs_f64() * 1000.0;
    anyhow::ensure!(
        typed == b.args.list_objects,
        "typed list returned {typed} objects"
    );
    let list = Summary::of("LIST latency", list_ms)?;
    let get = Summary::of("GET latency", get_ms)?;
    b.log(&format!(
        "LIST {} objects: p50 {:.1} ms, p99 {:.1} ms (GET p50 {:.2} ms)",
        b.args.list_objects, list.p50, list.p99, get.p50
    ));
    Ok(json!({
        "objects": b.args.list_objects, "list_ms": list, "get_ms": get,
        "ratio_list_to_get_p50": list.p50 / get.p50, "typed_kube_rs_list_ms": typed_ms,
    }))
}

/// How many items named `<prefix>...` a LIST body holds.
fn count_items(body: &[u8], prefix: &str) -> usize {
    let needle = format!("\"name\":\"{prefix}");
    body.windows(needle.len())
        .filter(|w| *w == needle.as_bytes())
        .count()
}

/// LIST while 32 writers create: the writers' throughput against the same writers
/// alone (a LIST must not stall writes), and the LIST's latency under that load.
async fn list_during_writes_block(b: &HubBench) -> anyhow::Result<Value> {
    ensure_namespace(&b.durable.client, "list-writes").await?;
    let writes = b.args.writes.max(1);
    let writes_alone = b.create_durable("list-writes", "a", writes, 32).await?;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let lister = {
        let (url, dir, stop) = (
            b.durable.process.url.clone(),
            b.durable.data_dir.path().to_path_buf(),
            stop.clone(),
        );
        tokio::spawn(async move {
            let mut raw = RawClient::connect(&url, &dir).await?;
            let mut ms = Vec::new();
            // At least one LIST, however quick the writers are.
            while ms.is_empty() || !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                raw.get(LIST_PATH).await?;
                ms.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            anyhow::Ok(ms)
        })
    };
    let writes_during = b.create_durable("list-writes", "b", writes, 32).await?;
    stop.store(true, Ordering::Relaxed);
    let busy = Summary::of("LIST latency during writes", lister.await??)?;
    b.log(&format!(
        "32 writers: {writes_alone:.0} creates/s alone, {writes_during:.0} while LISTing {} objects \
         ({} LISTs, p50 {:.1} ms)",
        b.args.list_objects, busy.n, busy.p50
    ));
    Ok(json!({
        "writers": 32, "creates": writes, "objects_listed": b.args.list_objects,
        "creates_per_sec_alone": writes_alone, "creates_per_sec_while_listing": writes_during,
        "ratio_creates_while_listing_to_alone": writes_during / writes_alone,
        "list_ms": busy,
    }))
}

/// Watch fan-out: every event to every watcher; latency from just before the create
/// is sent, against the create's own round trip.
async fn watch_block(b: &HubBench) -> anyhow::Result<Value> {
    let api: Api<ConfigMap> = Api::namespaced(b.durable.client.clone(), "watch");
    ensure_namespace(&b.durable.client, "watch").await?;
    let (delivery, create_rtt) = watch_fanout(&api, b.args.watchers, b.args.watch_events).await?;
    b.durable_objects
        .fetch_add(b.args.watch_events, Ordering::Relaxed);
    let delivery = Summary::of("watch delivery latency", delivery)?;
    let create_rtt = Summary::of("create round trip", create_rtt)?;
    b.log(&format!(
        "watch delivery to {} watchers: p50 {:.2} ms, p99 {:.2} ms (create round trip p50 {:.2} ms)",
        b.args.watchers, delivery.p50, delivery.p99, create_rtt.p50
    ));
    Ok(json!({
        "watchers": b.args.watchers, "events": b.args.watch_events,
        "delivery_ms": delivery, "create_rtt_ms": create_rtt,
    }))
}

/// Memory with N 1-KiB ConfigMaps, against the same hub when it was empty.
async fn rss_block(b: &HubBench) -> anyhow::Result<Value> {
    let rss_empty = b.empty_rss_mib;
    ensure_namespace(&b.durable.client, "rss").await?;
    let held = b.durable_objects.load(Ordering::Relaxed);
    let more = b.args.rss_objects.saturating_sub(held);
    if more > 0 {
        b.create_durable("rss", "r", more, 32).await?;
    }
    let objects = b.durable_objects.load(Ordering::Relaxed);
    let rss_full = crate::bench_stats::rss_mib(b.durable.process.child.id())?;
    b.log(&format!(
        "RSS with {objects} objects: {rss_full:.0} MiB (empty hub {rss_empty:.0} MiB)"
    ));
    Ok(json!({
        "objects": objects, "mib": rss_full, "empty_mib": rss_empty,
        "bytes_per_object": (rss_full - rss_empty).max(0.0) * 1024.0 * 1024.0 / objects.max(1) as f64,
    }))
}

/// An APIExport bound into many workspaces: watch delivery through its virtual
/// workspace against a plain watch on one workspace (see [`crate::bench_apiexport`]),
/// and memory per bound workspace. `null` with `--bound-workspaces 0`.
async fn apiexport_block(b: &HubBench) -> anyhow::Result<Value> {
    if b.args.bound_workspaces == 0 {
        return Ok(Value::Null);
    }
    let hub = &b.durable.process;
    let config = crate::kubeconfig::load(Some(&hub.kubeconfig), None).await?;
    let f = crate::bench_apiexport::measure(
        &config,
        &hub.url,
        b.args.bound_workspaces,
        b.args.apiexport_events,
        || hub.rss_bytes().unwrap_or(0),
    )
    .await?;
    let vw = Summary::of("watch through the virtual workspace", f.virtual_workspace_ms)?;
    let base = Summary::of("watch on one workspace", f.baseline_ms)?;
    let per_ws = f.rss_after.saturating_sub(f.rss_before) as f64 / f.workspaces.max(1) as f64;
    let per_binding = f.rss_after.saturating_sub(f.rss_workspaces) as f64 / f.workspaces.max(1) as f64;
    b.log(&format!(
        "APIExport bound in {} workspaces (set up in {:.1} s): watch through the virtual workspace p99 {:.2} ms, \
         one workspace's watch p99 {:.2} ms; {:.0} KiB per bound workspace",
        f.workspaces,
        f.setup_secs,
        vw.p99,
        base.p99,
        per_ws / 1024.0
    ));
    Ok(json!({
        "bound_workspaces": f.workspaces, "events": f.events, "setup_secs": f.setup_secs,
        "virtual_workspace_ms": vw, "baseline_one_workspace_ms": base,
        "ratio_p99_virtual_workspace_to_baseline": vw.p99 / base.p99,
        "rss_bytes_per_bound_workspace": per_ws,
        "rss_bytes_per_binding_alone": per_binding,
        "rss_mib_before": f.rss_before as f64 / 1048576.0,
        "rss_mib_with_workspaces": f.rss_workspaces as f64 / 1048576.0,
        "rss_mib_after": f.rss_after as f64 / 1048576.0,
    }))
}

/// Empty workspaces on a hub of their own: creations per second with 32 clients
/// (median of rounds), and resident memory and data directory bytes per workspace.
/// `null` with `--workspaces 0`.
async fn workspaces_block(b: &HubBench) -> anyhow::Result<Value> {
    if b.args.workspaces == 0 {
        return Ok(Value::Null);
    }
    let hub = BenchHub::start_with(b.args.hub_binary.as_deref(), &[]).await?;
    let config = crate::kubeconfig::load(Some(&hub.process.kubeconfig), None).await?;
    let f = crate::bench_workspaces::measure(
        &config,
        &hub.process.url,
        hub.data_dir.path(),
        b.args.workspaces,
        b.args.rounds,
        || hub.process.rss_bytes().unwrap_or(0),
    )
    .await?;
    let per_sec = Rounds::of("workspace creations/s", f.per_sec)?;
    let n = f.workspaces as f64;
    let rss_per_ws = f.rss_after.saturating_sub(f.rss_before) as f64 / n;
    let disk_per_ws = f.disk_after.saturating_sub(f.disk_before) as f64 / n;
    b.log(&format!(
        "{} empty workspaces with {} clients: {:.0} created/s (median of {} rounds), \
         {:.0} KiB of memory and {:.0} KB of disk per workspace",
        f.workspaces,
        crate::bench_workspaces::CLIENTS,
        per_sec.median,
        per_sec.rounds.len(),
        rss_per_ws / 1024.0,
        disk_per_ws / 1000.0
    ));
    Ok(json!({
        "workspaces": f.workspaces, "clients": crate::bench_workspaces::CLIENTS,
        "created_per_sec": per_sec,
        "rss_bytes_per_workspace": rss_per_ws, "disk_bytes_per_workspace": disk_per_ws,
        "rss_mib_before": f.rss_before as f64 / 1048576.0, "rss_mib_after": f.rss_after as f64 / 1048576.0,
        "disk_bytes_before": f.disk_before, "disk_bytes_after": f.disk_after,
    }))
}

/// Start `watchers` watches on `api`, create `events` objects at a steady pace, and
/// return every delivery latency (ms) and every create round trip (ms). Fails unless
/// every watcher saw every event.
pub async fn watch_fanout(
    api: &Api<ConfigMap>,
    watchers: usize,
    events: usize,
) -> anyhow::Result<(Vec<f64>, Vec<f64>)> {
    let rv = api
        .list(&ListParams::default().limit(1))
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    let sent: Arc<SendTimes> = Arc::new(SendTimes::default());
    let mut tasks = Vec::new();
    for _ in 0..watchers {
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
