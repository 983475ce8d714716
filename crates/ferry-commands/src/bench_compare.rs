//! `ferry bench compare`: the hub bench's create, LIST, GET and watch figures against
//! any API servers a user points it at — a real cluster, kcp, a hub — in one run, so
//! Ferry's numbers can be read next to the user's own cluster's.
//!
//! Every server gets the same client code and the same load; the create rounds
//! alternate which server goes first. Everything is created in a fresh namespace
//! (`ferry-bench-<time>`) that is deleted at the end, and carries the run's label
//! ([`RUN_LABEL`]): a real cluster's controllers put objects of their own in every
//! namespace (kube-controller-manager's `kube-root-ca.crt` ConfigMap), so the bench
//! lists and counts only what it made.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams};
use serde_json::{json, Value};

use crate::bench_cmd::{create_many_labelled, ensure_namespace, watch_fanout};
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

/// The label on every object a run creates; its value names the run.
pub const RUN_LABEL: &str = "bench.ferry.dev/run";

/// One server measured.
struct Target {
    kubeconfig: PathBuf,
    server: String,
    client: kube::Client,
    namespace: String,
    created: usize,
    /// The run's label selector (`RUN_LABEL=<run>`).
    selector: String,
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
            selector: format!("{RUN_LABEL}=run-{stamp}"),
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
    let run = targets
        .first()
        .and_then(|t| t.selector.split_once('=').map(|(_, v)| v.to_string()))
        .unwrap_or_default();
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
                let rate = create_many_labelled(&api, &prefix, count, clients, &[(RUN_LABEL, &run)])
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
        let path = format!(
            "/api/v1/namespaces/{}/configmaps?labelSelector={}",
            t.namespace,
            t.selector.replace('/', "%2F")
        );
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
                "{} listed {items} ConfigMaps labelled {} in namespace {} where this run created {}",
                t.server,
                t.selector,
                t.namespace,
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
    let first = out.first().cloned().unwrap_or(Value::Null);
    for t in &mut out {
        t["relative_to_first"] = relative(&first, t);
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
            "list": "GET of the run's ConfigMaps (label selector) as JSON through kube-rs, body read as text \
                     (not decoded)",
            "labels": format!("every object created carries {RUN_LABEL}=<run>; only those are listed and counted"),
            "relative": "each server's figures divided by the first server's (rates: higher is faster; \
                         latencies: lower is faster)",
            "statistics": "latencies in ms as {p50, p90, p99, max, n}, nearest-rank percentiles over every \
                           sample; rates as {median, rounds}",
        },
        "targets": out,
    }))
}

/// The figures the ratio table compares: a name, where the figure is in a target's
/// block, and whether more is better.
const RATIO_FIGURES: &[(&str, &str, bool)] = &[
    (
        "creates_per_sec_1_client",
        "/creates_per_sec/clients_1/median",
        true,
    ),
    (
        "creates_per_sec_32_clients",
        "/creates_per_sec/clients_32/median",
        true,
    ),
    ("list_p50", "/list/latency_ms/p50", false),
    ("get_p50", "/get_ms/p50", false),
    ("watch_delivery_p99", "/watch/delivery_ms/p99", false),
];

/// `target`'s figures divided by `first`'s, by the names of [`RATIO_FIGURES`]
/// (`null` where either is missing or the first's is zero).
fn relative(first: &Value, target: &Value) -> Value {
    let ratios = RATIO_FIGURES.iter().map(|(name, ptr, _)| {
        let of = |v: &Value| v.pointer(ptr).and_then(Value::as_f64);
        let ratio = match (of(target), of(first)) {
            (Some(a), Some(b)) if b > 0.0 => json!(crate::bench_stats::round3(a / b)),
            _ => Value::Null,
        };
        ((*name).to_string(), ratio)
    });
    Value::Object(ratios.collect())
}

fn print_table(report: &Value) {
    let targets = report["targets"].as_array().cloned().unwrap_or_default();
    println!(
        "{:<40} {:>12} {:>12} {:>14} {:>12} {:>16}",
        "server", "creates/s 1", "creates/s 32", "LIST p50 ms", "GET p50 ms", "watch p99 ms"
    );
    for t in &targets {
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
    if targets.len() < 2 {
        return;
    }
    println!(
        "\nrelative to {} (rates: higher is faster; latencies: lower is faster)",
        targets[0]["server"].as_str().unwrap_or("?")
    );
    println!(
        "{:<40} {:>12} {:>12} {:>14} {:>12} {:>16}",
        "server", "creates/s 1", "creates/s 32", "LIST p50", "GET p50", "watch p99"
    );
    for t in &targets {
        let r = |name: &str| {
            t["relative_to_first"][name]
                .as_f64()
                .map_or("-".to_string(), |v| format!("{v:.2}x"))
        };
        println!(
            "{:<40} {:>12} {:>12} {:>14} {:>12} {:>16}",
            t["server"].as_str().unwrap_or("?"),
            r(RATIO_FIGURES[0].0),
            r(RATIO_FIGURES[1].0),
            r(RATIO_FIGURES[2].0),
            r(RATIO_FIGURES[3].0),
            r(RATIO_FIGURES[4].0),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_divide_by_the_first_server_and_skip_what_is_missing() {
        let first = json!({"creates_per_sec": {"clients_1": {"median": 100.0}, "clients_32": {"median": 0.0}},
                           "list": {"latency_ms": {"p50": 2.0}}});
        let other = json!({"creates_per_sec": {"clients_1": {"median": 50.0}, "clients_32": {"median": 10.0}},
                           "list": {"latency_ms": {"p50": 3.0}}});
        let r = relative(&first, &other);
        assert_eq!(r["creates_per_sec_1_client"], json!(0.5));
        assert_eq!(r["list_p50"], json!(1.5));
        // The first measured zero: no ratio, rather than an infinity.
        assert_eq!(r["creates_per_sec_32_clients"], Value::Null);
        assert_eq!(r["get_p50"], Value::Null);
        assert_eq!(relative(&first, &first)["creates_per_sec_1_client"], json!(1.0));
    }
}
