//! `ferry bench sync --profile syncagent`: kcp's api-syncagent (`ferry syncagent`)
//! serving `--consumers` workspaces bound to one APIExport, every figure next to a
//! baseline measured in the same run.
//!
//! Arrangement: a `ferry hub` child process holds the provider workspace (the APIExport
//! `databases.example.io`) and the consumer workspaces `root:consumer-<i>`, each bound
//! to it; a second `ferry hub` stands in for the service cluster, with the `Database`
//! CRD and a PublishedResource for it (default naming, no related resources, no
//! mutations: see [`crate::database_service`]). The agent is a `ferry syncagent` child
//! process; the baseline client is `ferry bench create-load --kind database`. Object
//! `<prefix>-<i>` lives in namespace `default` of consumer `i % consumers`.
//!
//! 1. Baseline: `--objects` Databases created straight into the service cluster, with
//!    as many requests in flight as the agent has workers.
//! 2. Initial sync: `--objects` Databases exist in the consumers before the agent
//!    starts; timed from the agent's launch until a watch here has seen every copy on
//!    the service cluster. `--rounds` rounds, each on fresh hubs.
//! 3. Steady state: one consumer object's spec changed at a time, at `--rate` per
//!    second → the change visible on its copy.
//! 4. Status return: a copy's status written on the service cluster at `--rate` per
//!    second → visible on the consumer's object (watched through the export's virtual
//!    workspace, which shows every consumer's objects).
//! 5. The agent's RSS once `--rss-levels` objects (default 10k) are synced.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::{json, Value};

use ferry_api::well_known::{SYNCAGENT_AGENT_NAME_LABEL, SYNCAGENT_REMOTE_NAME_ANNOTATION};

use crate::bench_cmd::{client_for, ensure_namespace, BenchHub};
use crate::bench_load::LoadKind;
use crate::bench_requests::{self, Requests};
use crate::bench_stats::cpu_seconds;
use crate::bench_sync::{
    baseline, idle, initial_rounds, latency, print, report, rss_at_levels, track, Measured, RoundFigures,
    Seen, SyncBenchArgs, Tracker, STATISTICS,
};
use crate::database_service::{self, local_databases, remote_databases, AGENT_NAMESPACE, EXPORT, PROVIDER};

/// The agent's `--agent-name` (its copies' `syncagent.kcp.io/agent-name` label).
const AGENT: &str = "bench";

/// Requests in flight when the bench itself makes objects (not measured).
const SETUP_CONCURRENCY: usize = 16;

/// The agent's flags besides kubeconfigs and addresses: what the JSON reports.
fn agent_flags(args: &SyncBenchArgs) -> Vec<String> {
    let mut flags: Vec<String> = [
        "--apiexportendpointslice-ref",
        EXPORT,
        "--namespace",
        AGENT_NAMESPACE,
        "--agent-name",
        AGENT,
        "--workers",
        &args.workers.to_string(),
    ]
    .map(str::to_owned)
    .to_vec();
    if args.qps != "default" {
        flags.extend(["--qps".into(), args.qps.clone()]);
    }
    flags
}

/// The hubs, the workspaces bound to the export, and clients for them.
struct Stage {
    kcp: BenchHub,
    service: BenchHub,
    provider_kubeconfig: PathBuf,
    /// `root:consumer-<i>`, in order.
    consumers: Vec<kube::Client>,
    /// The export's virtual workspace at `/clusters/*`: every consumer's Databases.
    virtual_workspace: kube::Client,
}

/// A `ferry syncagent` child process and where it serves `/metrics`.
struct Agent {
    child: tokio::process::Child,
    pid: u32,
    metrics_at: std::net::SocketAddr,
    launched: Instant,
}

impl Stage {
    async fn start(args: &SyncBenchArgs, progress: &impl Fn(&str)) -> anyhow::Result<Stage> {
        progress("starting the kcp hub and the service cluster hub");
        let kcp = BenchHub::start(&[]).await?;
        let service = BenchHub::start(&[]).await?;
        let consumer_names: Vec<String> = (0..args.consumers).map(|i| format!("consumer-{i}")).collect();
        let mut names = vec![PROVIDER];
        names.extend(consumer_names.iter().map(String::as_str));
        progress(&format!(
            "creating root:{PROVIDER} and {} consumer workspaces",
            args.consumers
        ));
        database_service::create_workspaces(&kcp.client, &names, SETUP_CONCURRENCY).await?;
        let provider_kubeconfig = kcp.workspace_kubeconfig(&format!("root:{PROVIDER}"))?;
        let provider = client_for(&provider_kubeconfig).await?;
        database_service::create_export(&provider).await?;
        database_service::install_service(&service.client, &database_service::published_resource(false))
            .await?;
        // As the agent's install does (`ferry syncagent-gen`): its namespace exists.
        ensure_namespace(&service.client, AGENT_NAMESPACE).await?;

        // The schema is published into the export before any consumer binds it, by an
        // agent that does not sync; the measured agent finds it there.
        progress("publishing the Database schema (an agent with --disabled-controllers sync)");
        let mut publisher = launch_agent(args, &kcp_and(&service, &provider_kubeconfig), "publisher", true)?;
        let claims = tokio::time::timeout(
            Duration::from_secs(120),
            database_service::wait_published(&provider, &[]),
        )
        .await
        .context("the agent did not publish the Database schema within 2 minutes")??;
        let _ = publisher.child.kill().await;

        progress(&format!("binding {} consumer workspaces", args.consumers));
        let admin = crate::kubeconfig::load(Some(&kcp.process.kubeconfig), None).await?;
        let consumers: Vec<kube::Client> = consumer_names
            .iter()
            .map(|ws| {
                let config = ferry_server::kubeconfig::at_workspace(&admin, &format!("root:{ws}"))?;
                Ok(kube::Client::try_from(config)?)
            })
            .collect::<anyhow::Result<_>>()?;
        futures::stream::iter(consumers.iter().zip(&consumer_names))
            .map(|(client, ws)| {
                let claims = &claims;
                async move {
                    database_service::bind(client, claims)
                        .await
                        .with_context(|| format!("binding root:{ws}"))
                }
            })
            .buffer_unordered(SETUP_CONCURRENCY)
            .try_collect::<Vec<()>>()
            .await?;

        let slices: Api<DynamicObject> = Api::all_with(
            provider.clone(),
            &crate::ar(
                "apis.kcp.io",
                "v1alpha1",
                "APIExportEndpointSlice",
                "apiexportendpointslices",
            ),
        );
        let slice = slices
            .get(EXPORT)
            .await
            .context("reading the export's endpoint slice")?;
        let url = slice.data["status"]["endpoints"][0]["url"]
            .as_str()
            .context("the export's endpoint slice lists no URL")?;
        let mut vw = admin.clone();
        vw.cluster_url = format!("{}/clusters/*", url.trim_end_matches('/')).parse()?;
        Ok(Stage {
            kcp,
            service,
            provider_kubeconfig,
            consumers,
            virtual_workspace: kube::Client::try_from(vw)?,
        })
    }

    /// The consumer objects `<prefix>-<i>` for `i` in `range`.
    fn databases(&self, prefix: &str, range: std::ops::Range<usize>) -> Vec<(String, Api<DynamicObject>)> {
        range
            .map(|i| {
                let client = self.consumers[i % self.consumers.len()].clone();
                (
                    format!("{prefix}-{i}"),
                    Api::namespaced_with(client, "default", &remote_databases()),
                )
            })
            .collect()
    }

    /// Creates the consumer objects `<prefix>-<i>` for `i` in `range`.
    async fn create(&self, prefix: &str, range: std::ops::Range<usize>) -> anyhow::Result<()> {
        futures::stream::iter(self.databases(prefix, range))
            .map(|(name, api)| async move {
                let db = database_service::database(&remote_databases(), "default", &name);
                api.create(&PostParams::default(), &db)
                    .await
                    .with_context(|| format!("creating Database {name} in a consumer workspace"))
            })
            .buffer_unordered(SETUP_CONCURRENCY)
            .try_collect::<Vec<_>>()
            .await?;
        Ok(())
    }

    /// The agent's copies on the service cluster, and how to watch them.
    fn copies(&self) -> (Api<DynamicObject>, watcher::Config) {
        (
            Api::all_with(self.service.client.clone(), &local_databases()),
            watcher::Config::default().labels(&format!("{SYNCAGENT_AGENT_NAME_LABEL}={AGENT}")),
        )
    }
}

/// The kubeconfigs an agent is given: kcp's (the provider workspace) and the service
/// cluster's.
fn kcp_and(service: &BenchHub, provider_kubeconfig: &std::path::Path) -> [PathBuf; 2] {
    [
        provider_kubeconfig.to_path_buf(),
        service.process.kubeconfig.clone(),
    ]
}

/// Starts `ferry syncagent` (with `--disabled-controllers sync` if `publish_only`),
/// logging to `<name>.log` in a temporary directory (or `FERRY_BENCH_SYNCER_LOG`).
fn launch_agent(
    args: &SyncBenchArgs,
    [kcp, service]: &[PathBuf; 2],
    name: &str,
    publish_only: bool,
) -> anyhow::Result<Agent> {
    let log_path = match (std::env::var_os("FERRY_BENCH_SYNCER_LOG"), publish_only) {
        (Some(path), false) => PathBuf::from(path),
        _ => service
            .parent()
            .context("the service kubeconfig's directory")?
            .join(format!("{name}.log")),
    };
    let log = std::fs::File::create(&log_path)?;
    let metrics_at = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let launched = Instant::now();
    let child = tokio::process::Command::new(std::env::current_exe()?)
        .arg("syncagent")
        .arg("--kcp-kubeconfig")
        .arg(kcp)
        .arg("--kubeconfig")
        .arg(service)
        .args(agent_flags(args))
        .args(
            publish_only
                .then_some(["--disabled-controllers", "sync"])
                .into_iter()
                .flatten(),
        )
        .args(["--metrics-address", &metrics_at.to_string()])
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .context("starting `ferry syncagent`")?;
    let pid = child.id().context("syncagent pid")?;
    Ok(Agent {
        child,
        pid,
        metrics_at,
        launched,
    })
}

/// One round of the initial-sync measurement, and the agent it left running.
struct InitialSync {
    figures: RoundFigures,
    agent: Agent,
    copies_seen: Arc<Seen>,
    tracker: Tracker,
    /// Where the time went: see [`bench_requests::requests_made`].
    requests: Value,
}

/// Both hubs' request counters, to tell what a step asked of each.
async fn scrape_hubs(stage: &Stage) -> anyhow::Result<Requests> {
    bench_requests::scrape_both(("kcp", &stage.kcp.process), ("service", &stage.service.process)).await
}

/// A copy's key: the name of the consumer object it is a copy of.
fn source_name(copy: &DynamicObject) -> Option<String> {
    copy.metadata
        .annotations
        .as_ref()?
        .get(SYNCAGENT_REMOTE_NAME_ANNOTATION)
        .cloned()
}

/// The baseline, then the initial sync of as many consumer objects.
async fn initial_sync(
    stage: &Stage,
    args: &SyncBenchArgs,
    progress: &impl Fn(&str),
) -> anyhow::Result<InitialSync> {
    progress("baseline: raw creates of Databases into the service cluster");
    let raw = baseline(&stage.service, LoadKind::Database, args).await?;

    progress(&format!(
        "creating {} Databases across {} consumer workspaces",
        args.objects, args.consumers
    ));
    stage.create("db", 0..args.objects).await?;
    let copies_seen = Seen::new();
    let (copies, config) = stage.copies();
    let tracker = track(copies, config, copies_seen.clone(), source_name);
    copies_seen.wait_listed("the copies").await?;

    let before = scrape_hubs(stage).await?;
    progress("initial sync: starting the agent");
    let agent = launch_agent(
        args,
        &kcp_and(&stage.service, &stage.provider_kubeconfig),
        "syncagent",
        false,
    )?;
    copies_seen
        .wait_for(args.objects, Duration::from_secs(1800), "the initial sync")
        .await?;
    let elapsed = agent.launched.elapsed();
    // Everything the agent has done since it started.
    let cpu = cpu_seconds(agent.pid)?;
    // The agent's start-up: until its first copy (its /readyz waits for the whole
    // initial sync, so it says nothing about start-up here).
    let first = copies_seen.at.lock().await.values().min().copied();
    let startup = first.map_or(elapsed, |t| t.saturating_duration_since(agent.launched));
    let requests = bench_requests::requests_made(
        &before,
        &scrape_hubs(stage).await?,
        args.objects,
        &crate::bench_sync::get(agent.metrics_at, "/metrics")
            .await
            .unwrap_or_default(),
    );
    Ok(InitialSync {
        figures: RoundFigures::of(raw, args.objects, elapsed, cpu, startup),
        agent,
        copies_seen,
        tracker,
        requests,
    })
}

/// The marks the latency steps write: a spec field on consumer objects, a status
/// field on copies.
const SPEC_MARK: &str = "steady";
const STATUS_MARK: &str = "Ready";

fn spec_marked(copy: &DynamicObject) -> Option<String> {
    (copy.data["spec"]["revision"] == SPEC_MARK)
        .then(|| source_name(copy))
        .flatten()
}

fn status_marked(db: &DynamicObject) -> Option<String> {
    (db.data["status"]["phase"] == STATUS_MARK)
        .then(|| db.metadata.name.clone())
        .flatten()
}

/// How many objects each of the agent's workers keeps in flight, as its profile says.
fn objects_per_worker() -> usize {
    ferry_syncer::profiles::syncagent::SyncAgent::new(AGENT)
        .profile()
        .objects_per_worker
        .max(1)
}

fn method(args: &SyncBenchArgs, samples: usize) -> Value {
    json!({
        "processes": {
            "kcp_hub": "`ferry hub` child process (SQLite in a temporary directory): the provider and consumer workspaces",
            "service_hub": "`ferry hub` child process (SQLite in a temporary directory): the service cluster",
            "syncer": "`ferry syncagent` child process, current-thread runtime",
            "baseline_client": "`ferry bench create-load --kind database` child process, current-thread runtime",
            "measuring_watches": "this process: one kube-rs watcher per measured resource",
        },
        "profile": "syncagent",
        "consumers": args.consumers,
        "published_resource": "Databases (example.com/v1, status subresource) as databases.example.io/v1; default naming, no related resources, no mutations",
        "timing": "the agent from its launch (its start-up — connecting, reading the endpoint slice, \
                   the publishing pass, discovery through the virtual workspace — is inside the measurement; \
                   syncer_startup_to_ready_ms is the part until the first copy appeared: the agent's /readyz \
                   waits for its whole initial sync), the baseline client from its start signal once \
                   connected, each until a watch in this process has seen every object on the service cluster",
        "concurrency": {
            "syncer_workers": args.workers,
            "syncer_objects_in_flight": args.workers * objects_per_worker(),
            "baseline_requests_in_flight": args.workers,
        },
        "syncer_flags": agent_flags(args),
        "objects": {
            "kind": "Database (spec: engine, storageGB), consumer object <prefix>-<i> in namespace default of root:consumer-<i mod consumers>",
            "initial_sync": args.objects, "baseline": args.objects,
            "steady_state": samples, "status_return": samples,
            "rss_levels": args.rss_levels(),
        },
        "steady_state": "once the agent's queue is empty (syncer_queue_depth 0): spec.revision set on one consumer object each time (each object once) → the copy shows it",
        "status_return": "once the agent's queue is empty: status.phase set on one copy each time (through /status) → the consumer object shows it",
        "rounds": args.rounds.max(1),
        "rate_per_sec": args.rate,
        "statistics": STATISTICS,
    })
}

pub async fn run(args: SyncBenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.consumers > 0, "--consumers must be at least 1");
    let progress = |msg: &str| {
        if !args.json {
            eprintln!("… {msg}");
        }
    };
    let (all, (stage, sync)) = initial_rounds(&args, &progress, async || {
        let stage = Stage::start(&args, &progress).await?;
        let sync = initial_sync(&stage, &args, &progress).await?;
        Ok((sync.figures, (stage, sync)))
    })
    .await?;
    let InitialSync {
        mut agent,
        copies_seen,
        tracker,
        requests,
        ..
    } = sync;
    let initial_seen = copies_seen.count();
    // Each latency sample changes an object not changed before, so no change is
    // folded into another.
    let samples = args.latency_objects.min(args.objects);

    // 3. Steady state, once the agent is idle.
    progress("steady-state latency");
    idle(agent.metrics_at).await?;
    let (copies, config) = stage.copies();
    let spec_seen = Seen::new();
    let spec_tracker = track(copies.clone(), config, spec_seen.clone(), spec_marked);
    let targets: HashMap<String, Api<DynamicObject>> =
        stage.databases("db", 0..samples).into_iter().collect();
    let names: Vec<String> = targets.keys().cloned().collect();
    let steady = latency(
        "steady-state latency",
        args.rate,
        names.clone(),
        &spec_seen,
        |name| {
            let api = targets[&name].clone();
            async move {
                let change = json!({ "spec": { "revision": SPEC_MARK } });
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&change))
                    .await?;
                Ok(())
            }
        },
    )
    .await?;

    // 4. Status return.
    progress("status-return latency");
    idle(agent.metrics_at).await?;
    let status_seen = Seen::new();
    let status_tracker = track(
        Api::<DynamicObject>::all_with(stage.virtual_workspace.clone(), &remote_databases()),
        watcher::Config::default(),
        status_seen.clone(),
        status_marked,
    );
    // Each sampled consumer object's copy: its namespace's API and its name.
    let mut local: HashMap<String, (Api<DynamicObject>, String)> = HashMap::new();
    let selector = format!("{SYNCAGENT_AGENT_NAME_LABEL}={AGENT}");
    for copy in copies.list(&ListParams::default().labels(&selector)).await?.items {
        let (Some(source), Some(ns), Some(name)) = (
            source_name(&copy),
            copy.metadata.namespace.clone(),
            copy.metadata.name.clone(),
        ) else {
            continue;
        };
        if targets.contains_key(&source) {
            let api = Api::namespaced_with(stage.service.client.clone(), &ns, &local_databases());
            local.insert(source, (api, name));
        }
    }
    let status = latency("status-return latency", args.rate, names, &status_seen, |name| {
        let copy = local.get(&name).cloned();
        async move {
            let (api, copy) = copy.with_context(|| format!("no copy of {name} on the service cluster"))?;
            let status = json!({ "status": { "phase": STATUS_MARK } });
            api.patch_status(&copy, &PatchParams::default(), &Patch::Merge(&status))
                .await?;
            Ok(())
        }
    })
    .await?;

    // 5. RSS.
    let (rss, rss_at_end) = rss_at_levels(&args, &progress, &copies_seen, agent.pid, 0, |fill| {
        stage.create("fill", fill)
    })
    .await?;
    let _ = agent.child.kill().await;
    drop((tracker, spec_tracker, status_tracker));

    let measured = Measured {
        rounds: all,
        initial_seen,
        steady_state: json!({ "rate_per_sec": args.rate, "objects_updated": samples, "latency_ms": steady }),
        status_return: status,
        statuses_written: samples,
        rss,
        rss_at_end,
    };
    let mut report = report(&args, method(&args, samples), measured, json!({}))?;
    report["initial_sync"]["requests_last_round"] = requests;
    let title = format!(
        "ferry bench sync --profile syncagent ({} consumer workspaces; agent {}; baseline measured in this run; every process separate)",
        args.consumers,
        agent_flags(&args).join(" ")
    );
    print(&args, &title, &report)?;
    if !args.json {
        bench_requests::print_requests(&report["initial_sync"]["requests_last_round"]);
    }
    Ok(())
}
