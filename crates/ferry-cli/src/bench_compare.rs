//! `ferry bench compare`: the hub bench's create, LIST, GET and watch figures against
//! any API servers a user points it at — a real cluster, kcp, a hub — in one run, so
//! Ferry's numbers can be read next to the user's own cluster's.
//!
//! Every server gets the same client code and the same load; the create rounds
//! alternate which server goes first. Everything is created in a fresh namespace
//! (`ferry-bench-<time>`) that is deleted at the end.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams};
use serde_json::{json, Value};

use crate::bench_cmd::{create_many, ensure_namespace, watch_fanout};
use crate::bench_stats::{Rounds, Summary};

#[derive(clap::Args)]
pub struct CompareArgs {
    /// Kubeconfig of a server to measure (repeat to compare servers side by side).
    #[arg(long = "kubeconfig", required = true)]
    pub kubeconfigs: Vec<PathBuf>,
    /// Print the figures as JSON.
    #[arg(long)]
    pub json: bool,
    /// Creates per round with 32 clients (a quarter of them with one client).
    #[arg(long, default_value_t = 1000)]
    pub objects: usize,
    /// Rounds of the create measurement; medians are reported with every round.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// LISTs (and GETs) timed.
    #[arg(long, default_value_t = 20)]
    pub lists: usize,
    /// Concurrent watchers.
    #[arg(long, default_value_t = 10)]
    pub watchers: usize,
    /// Events delivered to every watcher.
    #[arg(long, default_value_t = 100)]
    pub watch_events: usize,
}

/// One server measured.
struct Target {
    kubeconfig: PathBuf,
    server: String,
    client: kube::Client,
    namespace: String,
    created: usize,
}

pub async fn run(args: CompareArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.objects > 0, "--objects must be at least 1");
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis();
    let mut targets = vec![];
    for (i, kubeconfig) in args.kubeconfigs.iter().enumerate() {
        let config = crate::kubeconfig::load(Some(kubeconfig), None).await?;
        let server = config.cluster_url.to_string();
        let client = kube::Client::try_from(config)?;
        let namespace = format!("ferry-bench-{stamp}-{i}");
        ensure_namespace(&client, &namespace)
            .await
            .with_context(|| format!("on {server} ({})", kubeconfig.display()))?;
        targets.push(Target {
            kubeconfig: kubeconfig.clone(),
            server,
            client,
            namespace,
            created: 0,
        });
    }
    let result = measure(&args, &mut targets).await;
    for t in &targets {
        let deleted = Api::<Namespace>::all(t.client.clone())
            .delete(&t.namespace, &DeleteParams::default())
            .await;
        if let Err(e) = deleted {
            eprintln!("could not delete namespace {} on {}: {e}", t.namespace, t.server);
        }
    }
    let report = result?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report);
    }
    Ok(())
}

async fn measure(args: &CompareArgs, targets: &mut [Target]) -> anyhow::Result<Value> {
    let rounds = args.rounds.max(1);
    let n = targets.len();
    // creates[target][level] = per-round rates
    let mut creates = vec![[vec![], vec![]]; n];
    for round in 0..rounds {
        for k in 0..n {
            // Rotate which server goes first.
            let i = (round + k) % n;
            let t = &mut targets[i];
            let api: Api<ConfigMap> = Api::namespaced(t.client.clone(), &t.namespace);
            for (level, (clients, count)) in [(1usize, (args.objects / 4).max(1)), (32, args.objects)]
                .into_iter()
                .enumerate()
            {
                let prefix = format!("c{clients}-r{round}");
                let rate = create_many(&api, &prefix, count, clients)
                    .await
                    .with_context(|| format!("on {}", t.server))?;
                t.created += count;
                creates[i][level].push(rate);
            }
        }
    }
    let mut out = vec![];
    for (t, [c1, c32]) in targets.iter_mut().zip(creates) {
        let api: Api<ConfigMap> = Api::namespaced(t.client.clone(), &t.namespace);
        let path = format!("/api/v1/namespaces/{}/configmaps", t.namespace);
        let (mut list_ms, mut get_ms) = (vec![], vec![]);
        for _ in 0..args.lists.max(1) {
            let request = http::Request::get(&path).body(vec![])?;
            let started = Instant::now();
            let body = t
                .client
                .request_text(request)
                .await
                .with_context(|| format!("LIST on {}", t.server))?;
            list_ms.push(started.elapsed().as_secs_f64() * 1000.0);
            let items = serde_json::from_str::<Value>(&body)?["items"]
                .as_array()
                .map_or(0, Vec::len);
            anyhow::ensure!(
                items == t.created,
                "{} listed {items} of the {} ConfigMaps created",
                t.server,
                t.created
            );
            let started = Instant::now();
            api.get("c32-r0-0").await?;
            get_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        }
        let (delivery, rtt) = watch_fanout(&api, args.watchers, args.watch_events)
            .await
            .with_context(|| format!("watching on {}", t.server))?;
        t.created += args.watch_events;
        out.push(json!({
            "kubeconfig": t.kubeconfig.display().to_string(),
            "server": t.server,
            "creates_per_sec": {
                "clients_1": Rounds::of("creates/s, 1 client", c1)?,
                "clients_32": Rounds::of("creates/s, 32 clients", c32)?,
            },
            "list": { "objects": t.created - args.watch_events, "latency_ms": Summary::of("LIST latency", list_ms)? },
            "get_ms": Summary::of("GET latency", get_ms)?,
            "watch": {
                "watchers": args.watchers, "events": args.watch_events,
                "delivery_ms": Summary::of("watch delivery", delivery)?,
                "create_rtt_ms": Summary::of("create round trip", rtt)?,
            },
        }));
    }
    Ok(json!({
        "method": {
            "processes": { "servers": "as given (each kubeconfig's current context)", "clients": "this process" },
            "concurrency": { "creates": [1, 32], "watchers": args.watchers },
            "objects": {
                "kind": "ConfigMap with a 1 KiB value",
                "creates_per_round": { "clients_1": (args.objects / 4).max(1), "clients_32": args.objects },
                "watch_events": args.watch_events,
            },
            "rounds": rounds,
            "order": "the create rounds rotate which server goes first",
            "list": "GET of the namespace's ConfigMaps as JSON through kube-rs, body read as text (not decoded)",
            "statistics": "latencies in ms as {p50, p90, p99, max, n}, nearest-rank percentiles over every \
                           sample; rates as {median, rounds}",
        },
        "targets": out,
    }))
}

fn print_table(report: &Value) {
    let targets = report["targets"].as_array().cloned().unwrap_or_default();
    println!(
        "{:<40} {:>12} {:>12} {:>14} {:>12} {:>16}",
        "server", "creates/s 1", "creates/s 32", "LIST p50 ms", "GET p50 ms", "watch p99 ms"
    );
    for t in targets {
        println!(
            "{:<40} {:>12.0} {:>12.0} {:>14.2} {:>12.2} {:>16.2}",
            t["server"].as_str().unwrap_or("?"),
            t["creates_per_sec"]["clients_1"]["median"]
                .as_f64()
                .unwrap_or(f64::NAN),
            t["creates_per_sec"]["clients_32"]["median"]
                .as_f64()
                .unwrap_or(f64::NAN),
            t["list"]["latency_ms"]["p50"].as_f64().unwrap_or(f64::NAN),
            t["get_ms"]["p50"].as_f64().unwrap_or(f64::NAN),
            t["watch"]["delivery_ms"]["p99"].as_f64().unwrap_or(f64::NAN),
        );
    }
}
