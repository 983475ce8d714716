//! `ferry bench placement`: how fast the hub's placement translator fills
//! mailboxes. One `ferry hub` child process, N SyncTargets (each with its
//! Location and the mailbox workspace the hub makes for it), a WMW holding
//! `--objects` ConfigMaps, then one EdgePlacement selecting every Location:
//!
//! - `place_seconds`: from the EdgePlacement's creation until every mailbox
//!   holds its copies and its SyncerConfig `the-one` lists them;
//! - `update_seconds`: from a change to one WMW object until every mailbox's
//!   copy has it;
//! - the hub's RSS before and after.
//!
//! Mailboxes are observed with one wildcard LIST (`/clusters/*/...`,
//! labelSelector `ferry.dev/placed`) per poll, not N requests.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use serde_json::{json, Value};

use crate::ar;
use crate::bench_cmd::BenchHub;
use crate::bench_stats::round3;

#[derive(clap::Args)]
pub struct PlacementBenchArgs {
    /// Print the figures as JSON.
    #[arg(long)]
    pub json: bool,
    /// SyncTargets (and mailbox workspaces) the EdgePlacement selects.
    #[arg(long, default_value_t = 1000)]
    pub sync_targets: usize,
    /// ConfigMaps (1 KiB each) the EdgePlacement downsyncs.
    #[arg(long, default_value_t = 10)]
    pub objects: usize,
    /// Give up after this long per phase (setup, placement, update).
    #[arg(long, default_value = "900s", value_parser = crate::kubeconfig::parse_duration)]
    pub timeout: Duration,
}

const NS: &str = "bench";
const POLL: Duration = Duration::from_millis(100);

fn edge(kind: &str, plural: &str) -> ApiResource {
    ar("edge.kubestellar.io", "v2alpha1", kind, plural)
}

fn configmap(i: usize, payload: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": format!("cm-{i}"), "namespace": NS},
           "data": {"payload": payload}})
}

async fn wait_until<F, Fut>(what: &str, timeout: Duration, mut done: F) -> anyhow::Result<f64>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let start = Instant::now();
    loop {
        if done().await? {
            return Ok(start.elapsed().as_secs_f64());
        }
        if start.elapsed() > timeout {
            bail!("{what}: not done within {timeout:?}");
        }
        tokio::time::sleep(POLL).await;
    }
}

pub async fn run(args: PlacementBenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.sync_targets > 0, "--sync-targets must be at least 1");
    anyhow::ensure!(args.objects > 0, "--objects must be at least 1");
    let log = |msg: &str| {
        if !args.json {
            eprintln!("{msg}");
        }
    };
    let n = args.sync_targets;
    let hub = BenchHub::start(&[]).await?;
    let config = crate::kubeconfig::load(Some(&hub.process.kubeconfig), None).await?;
    let client_at = |path: &str| -> anyhow::Result<kube::Client> {
        Ok(kube::Client::try_from(ferry_server::kubeconfig::at_workspace(
            &config, path,
        )?)?)
    };
    let empty_rss_mib = bytes_to_mib(hub.process.rss_bytes());

    // Inventory: N SyncTargets and Locations, and their mailboxes.
    log(&format!("setup: {n} SyncTargets and Locations in root:imw1"));
    let setup_start = Instant::now();
    crate::ensure_cmd::ensure_wmw(&config, "imw1").await?;
    let imw = client_at("root:imw1")?;
    let targets: Api<DynamicObject> = Api::all_with(imw.clone(), &edge("SyncTarget", "synctargets"));
    let locations: Api<DynamicObject> = Api::all_with(imw.clone(), &edge("Location", "locations"));
    futures::stream::iter(0..n)
        .map(|i| {
            let (targets, locations) = (targets.clone(), locations.clone());
            async move {
                let name = format!("target-{i}");
                let st: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "SyncTarget",
                    "metadata": {"name": name, "labels": {"id": name, "bench": "yes"}},
                }))?;
                let loc: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "Location",
                    "metadata": {"name": name, "labels": {"bench": "yes"}},
                    "spec": {"resource": {"group": "edge.kubestellar.io", "version": "v2alpha1", "resource": "synctargets"},
                             "instanceSelector": {"matchLabels": {"id": name}}},
                }))?;
                for (api, obj) in [(&targets, st), (&locations, loc)] {
                    match api.create(&PostParams::default(), &obj).await {
                        Ok(_) => {}
                        Err(kube::Error::Api(e)) if e.code == 409 => {}
                        Err(e) => return Err(anyhow::Error::from(e).context(format!("creating {name}"))),
                    }
                }
                anyhow::Ok(())
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await?;
    // A mailbox is ready when it serves SyncerConfigs: the wildcard list of
    // the CRD objects installed in every mailbox counts them.
    let all = client_at("*")?;
    let crds: Api<DynamicObject> = Api::all_with(
        all.clone(),
        &ar(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
        ),
    );
    let root = client_at("root")?;
    let workspaces: Api<DynamicObject> =
        Api::all_with(root, &ar("tenancy.kcp.io", "v1alpha1", "Workspace", "workspaces"));
    let mailboxes_seconds = wait_until("mailbox workspaces", args.timeout, || {
        let (workspaces, crds) = (workspaces.clone(), crds.clone());
        async move {
            let ready = workspaces
                .list(&ListParams::default())
                .await?
                .items
                .iter()
                .filter(|w| {
                    w.metadata.name.as_deref().is_some_and(|n| n.contains("-mb-"))
                        && w.data["status"]["phase"] == "Ready"
                })
                .count();
            if ready < n {
                return Ok(false);
            }
            let serving = crds
                .list(&ListParams::default().fields("metadata.name=syncerconfigs.edge.kubestellar.io"))
                .await?
                .items
                .len();
            Ok(serving > n) // every mailbox, plus imw1
        }
    })
    .await?;
    log(&format!(
        "setup: {n} mailboxes ready after {:.1}s",
        setup_start.elapsed().as_secs_f64()
    ));

    // The workload: namespace `bench` and the ConfigMaps, in a WMW.
    crate::ensure_cmd::ensure_wmw(&config, "bench-wmw").await?;
    let wmw = client_at("root:bench-wmw")?;
    crate::bench_cmd::ensure_namespace(&wmw, NS).await?;
    let payload = "x".repeat(1024);
    let cms: Api<DynamicObject> =
        Api::namespaced_with(wmw.clone(), NS, &ar("", "v1", "ConfigMap", "configmaps"));
    for i in 0..args.objects {
        let cm: DynamicObject = serde_json::from_value(configmap(i, &payload))?;
        match cms.create(&PostParams::default(), &cm).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e).context("creating the workload"),
        }
    }
    let setup_rss_mib = bytes_to_mib(hub.process.rss_bytes());

    // Placement: every mailbox holds the copies and the-one lists them.
    let copies: Api<DynamicObject> = Api::all_with(all.clone(), &ar("", "v1", "ConfigMap", "configmaps"));
    let configs: Api<DynamicObject> = Api::all_with(all.clone(), &edge("SyncerConfig", "syncerconfigs"));
    let placed = ListParams::default().labels(ferry_api::edge::mailbox::PLACED_LABEL);
    let placement: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "EdgePlacement",
        "metadata": {"name": "all"},
        "spec": {"locationSelectors": [{"matchLabels": {"bench": "yes"}}],
                 "downsync": [{"apiGroup": "", "resources": ["configmaps"], "namespaces": [NS]}]},
    }))?;
    log("placing: one EdgePlacement selecting every Location");
    let objects = args.objects;
    let start = Instant::now();
    Api::<DynamicObject>::all_with(wmw.clone(), &edge("EdgePlacement", "edgeplacements"))
        .create(&PostParams::default(), &placement)
        .await
        .context("creating the EdgePlacement")?;
    let copies_done_at = std::cell::Cell::new(None);
    wait_until("every mailbox's copies and the-one", args.timeout, || {
        let (copies, configs, placed) = (copies.clone(), configs.clone(), placed.clone());
        let copies_done_at = &copies_done_at;
        async move {
            let held = copies.list(&placed).await?.items.len();
            if held < n * objects {
                return Ok(false);
            }
            if copies_done_at.get().is_none() {
                copies_done_at.set(Some(start.elapsed().as_secs_f64()));
            }
            let complete = configs
                .list(&placed)
                .await?
                .items
                .iter()
                .filter(|c| listed_names(&c.data) >= objects)
                .count();
            Ok(complete >= n)
        }
    })
    .await?;
    let place_seconds = start.elapsed().as_secs_f64();
    let copies_seconds = copies_done_at.get().unwrap_or(place_seconds);
    log(&format!("placed: {place_seconds:.2}s"));

    // One object changes: every copy follows.
    let changed = "y".repeat(1024);
    let start = Instant::now();
    cms.patch(
        "cm-0",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"payload": changed}})),
    )
    .await
    .context("changing cm-0")?;
    let one = ListParams::default()
        .labels(ferry_api::edge::mailbox::PLACED_LABEL)
        .fields("metadata.name=cm-0");
    wait_until("every copy of cm-0 changed", args.timeout, || {
        let (copies, one, changed) = (copies.clone(), one.clone(), changed.clone());
        async move {
            let updated = copies
                .list(&one)
                .await?
                .items
                .iter()
                .filter(|c| c.data["data"]["payload"] == changed.as_str())
                .count();
            Ok(updated >= n)
        }
    })
    .await?;
    let update_seconds = start.elapsed().as_secs_f64();
    log(&format!("updated: {update_seconds:.2}s"));
    let placed_rss_mib = bytes_to_mib(hub.process.rss_bytes());

    let report = json!({
        "method": {
            "processes": {
                "hub": "`ferry hub` child process, SQLite in a temporary directory, placement translator on",
                "clients": "this process: creates the inventory and workload, then polls with one wildcard \
                            LIST (/clusters/*, labelSelector ferry.dev/placed) every 100 ms",
            },
            "concurrency": {"inventory_creates": 16, "observer": "one LIST at a time"},
            "objects": {
                "sync_targets": n, "mailboxes": n,
                "downsynced": {"kind": "ConfigMap with a 1 KiB value", "count": objects, "namespace": NS},
                "copies": n * objects,
            },
            "rounds": 1,
            "statistics": "wall-clock seconds from the triggering write's response to the first poll \
                           that saw everything; resolution is the 100 ms poll plus one LIST",
        },
        "setup": {"mailboxes_ready_seconds": round3(mailboxes_seconds)},
        "place": {
            "copies_seconds": round3(copies_seconds),
            "copies_and_syncer_configs_seconds": round3(place_seconds),
        },
        "update": {"one_object_everywhere_seconds": round3(update_seconds)},
        "rss_mib": {
            "empty": round3(empty_rss_mib),
            "inventory_and_mailboxes": round3(setup_rss_mib),
            "placed": round3(placed_rss_mib),
        },
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{n} SyncTargets, {objects} objects: placed in {place_seconds:.2}s (copies {copies_seconds:.2}s), \
             one change everywhere in {update_seconds:.2}s, hub RSS {placed_rss_mib:.0} MiB \
             (empty {empty_rss_mib:.0} MiB)"
        );
    }
    Ok(())
}

/// How many objects a SyncerConfig's `namespacedObjects` name.
fn listed_names(config: &Value) -> usize {
    config
        .pointer("/spec/namespacedObjects")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(|o| o["objectsByNamespace"].as_array().cloned().unwrap_or_default())
        .map(|by_ns| by_ns["names"].as_array().map_or(0, Vec::len))
        .sum()
}

fn bytes_to_mib(bytes: Option<u64>) -> f64 {
    bytes.unwrap_or(0) as f64 / (1024.0 * 1024.0)
}
