//! `ferry bench placement`: how fast the hub places one workload on N
//! SyncTargets, with one `ferry hub` child process (`--hub-binary`: another
//! build's, for a before/after on the same bench) and no syncers.
//!
//! - `--profile kubestellar`: N SyncTargets, each with its Location and the
//!   mailbox workspace the hub makes for it; a WMW holding a namespace of
//!   `--objects` ConfigMaps per round. Round r creates an EdgePlacement
//!   selecting every Location for namespace `bench-r`: `copies` is until
//!   every mailbox holds its copies, `complete` until every SyncerConfig
//!   `the-one` lists them too; `update` is from a change to one WMW object
//!   until every mailbox's copy has it. Mailboxes are observed with one
//!   wildcard LIST (`/clusters/*/...`, labelSelector `ferry.dev/placed`) per
//!   poll, not N requests.
//! - `--profile tmc` (kcp TMC): N SyncTargets with a Location each in
//!   `root:bench-org`, and a Placement per Location in `root:bench-app` (kcp
//!   schedules one target per Placement) selecting namespaces labelled
//!   `bench.ferry.dev/placed`. Round r labels namespace `bench-r`: `copies`
//!   is until every ConfigMap in it is labelled
//!   `state.workload.kcp.io/<key>=Sync` for every target (what each target's
//!   syncer then reads), `complete` until every Placement is `Bound` too;
//!   `update` is from the creation of one more object until it is labelled
//!   for every target. The set-up ends once a warm-up namespace of one
//!   object is labelled for every target: the scheduler has caught up with
//!   the inventory's own events.
//!
//! Each figure is the median of `--rounds`, every round listed; the hub's RSS
//! and the machine's load average before and after are in the report.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use serde_json::{json, Value};

use crate::ar;
use crate::bench_cmd::BenchHub;
use crate::bench_stats::{round3, Rounds};
use crate::syncer_cmd::ProfileName;

#[derive(clap::Args)]
pub struct PlacementBenchArgs {
    /// Print the figures as JSON.
    #[arg(long)]
    pub json: bool,
    /// Which placement: kubestellar (an EdgePlacement selecting every Location; a
    /// mailbox workspace per SyncTarget) or tmc (kcp's scheduler: a Location and a
    /// Placement per SyncTarget).
    #[arg(long, value_enum, default_value = "kubestellar")]
    pub profile: ProfileName,
    /// SyncTargets the workload is placed on.
    #[arg(long, default_value_t = 1000)]
    pub sync_targets: usize,
    /// ConfigMaps (1 KiB each) placed per round.
    #[arg(long, default_value_t = 10)]
    pub objects: usize,
    /// Rounds on the same inventory, each placing a namespace of its own; figures are
    /// the median with every round listed.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// The `ferry` executable that runs the hub (default: this one), to measure
    /// another build with the same bench.
    #[arg(long)]
    pub hub_binary: Option<std::path::PathBuf>,
    /// Give up after this long per phase (setup, placement, update).
    #[arg(long, default_value = "900s", value_parser = crate::kubeconfig::parse_duration)]
    pub timeout: Duration,
}

const POLL: Duration = Duration::from_millis(100);

fn edge(kind: &str, plural: &str) -> ApiResource {
    ar("edge.kubestellar.io", "v2alpha1", kind, plural)
}

/// kcp TMC: the workspace of the SyncTargets and Locations, and the workload's.
const ORG: &str = "bench-org";
const APP: &str = "bench-app";
/// kcp TMC: the SyncTarget and Location label a Placement selects its Location by.
const TMC_TO: &str = "bench.ferry.dev/to";
/// kcp TMC: the namespace label every Placement selects.
const TMC_PLACED: &str = "bench.ferry.dev/placed";

/// The namespace round `r` places.
fn round_namespace(r: usize) -> String {
    format!("bench-{r}")
}

fn configmap(ns: &str, name: &str, payload: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": ns},
           "data": {"payload": payload}})
}

/// Create `obj` with `api`; one that exists already is fine (a rerun).
async fn create(api: &Api<DynamicObject>, obj: Value) -> anyhow::Result<()> {
    let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let obj: DynamicObject = serde_json::from_value(obj)?;
    match api.create(&PostParams::default(), &obj).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(anyhow::Error::from(e).context(format!("creating {name}"))),
    }
}

/// Create every object of `objects` with `api`, 16 at a time.
async fn create_all(api: &Api<DynamicObject>, objects: impl Iterator<Item = Value>) -> anyhow::Result<()> {
    futures::stream::iter(objects)
        .map(|obj| create(api, obj))
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// One round's figures, in seconds.
struct Round {
    copies: f64,
    complete: f64,
    update: f64,
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
    anyhow::ensure!(args.rounds > 0, "--rounds must be at least 1");
    anyhow::ensure!(
        args.profile != ProfileName::Syncagent,
        "ferry bench placement measures placement onto SyncTargets: --profile kubestellar or tmc"
    );
    let log = |msg: &str| {
        if !args.json {
            eprintln!("{msg}");
        }
    };
    let load_before = crate::bench_fleet::loadavg();
    let hub = BenchHub::start_with(args.hub_binary.as_deref(), &[]).await?;
    let config = crate::kubeconfig::load(Some(&hub.process.kubeconfig), None).await?;
    let empty_rss_mib = bytes_to_mib(hub.process.rss_bytes());
    let (setup_seconds, setup_rss_mib, rounds) = match args.profile {
        ProfileName::Tmc => tmc(&args, &hub, &config, &log).await?,
        _ => kubestellar(&args, &hub, &config, &log).await?,
    };
    let placed_rss_mib = bytes_to_mib(hub.process.rss_bytes());
    let load_after = crate::bench_fleet::loadavg();
    let (n, objects) = (args.sync_targets, args.objects);
    let figure = |what: &str, f: fn(&Round) -> f64| Rounds::of(what, rounds.iter().map(f).collect());
    let copies = figure("copies", |r| r.copies)?;
    let complete = figure("complete", |r| r.complete)?;
    let update = figure("update", |r| r.update)?;
    let tmc = args.profile == ProfileName::Tmc;
    let report = json!({
        "method": {
            "profile": if tmc { "tmc" } else { "kubestellar" },
            "processes": {
                "hub": format!("`ferry hub` child process ({}), SQLite in a temporary directory, controllers on, no syncers",
                    args.hub_binary.as_ref().map_or("this binary".to_string(), |p| p.display().to_string())),
                "clients": if tmc {
                    "this process: creates the inventory and workload, then polls the round's namespace with one LIST every 100 ms"
                } else {
                    "this process: creates the inventory and workload, then polls with one wildcard \
                     LIST (/clusters/*, labelSelector ferry.dev/placed) every 100 ms"
                },
            },
            "concurrency": {"inventory_creates": 16, "observer": "one LIST at a time"},
            "objects": {
                "sync_targets": n,
                "placement": if tmc {
                    json!({"locations": n, "placements": n, "mailboxes": 0})
                } else {
                    json!({"locations": n, "edge_placements_per_round": 1, "mailboxes": n})
                },
                "downsynced": {"kind": "ConfigMap with a 1 KiB value", "count": objects, "namespace": "bench-<round>"},
                "copies": n * objects,
            },
            "rounds": args.rounds,
            "statistics": "wall-clock seconds from the triggering write's response to the first poll \
                           that saw everything; resolution is the 100 ms poll plus one LIST; the median \
                           of the rounds, every round listed",
            "copies": if tmc {
                "every ConfigMap of the round's namespace labelled state.workload.kcp.io/<key>=Sync for every SyncTarget"
            } else {
                "every mailbox holds a copy of every ConfigMap of the round's namespace"
            },
            "complete": if tmc { "copies, and every Placement Bound" } else { "copies, and every SyncerConfig the-one lists them" },
            "update": if tmc {
                "one new ConfigMap in the round's namespace until it is labelled for every SyncTarget"
            } else {
                "a change to one ConfigMap until every mailbox's copy has it"
            },
        },
        "machine": {"loadavg_before": load_before, "loadavg_after": load_after},
        "setup": {"inventory_ready_seconds": round3(setup_seconds)},
        "place": {"copies_seconds": copies, "complete_seconds": complete},
        "update": {"one_object_everywhere_seconds": update},
        "rss_mib": {
            "empty": round3(empty_rss_mib),
            "inventory": round3(setup_rss_mib),
            "placed": round3(placed_rss_mib),
        },
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let list = |r: &Rounds| {
            let each: Vec<String> = r.rounds.iter().map(|v| format!("{v:.2}")).collect();
            format!("{:.2}s ({})", r.median, each.join(", "))
        };
        println!(
            "{} profile, {n} SyncTargets, {objects} objects, {} rounds: copies everywhere {}, complete {}, \
             one change everywhere {}; hub RSS {placed_rss_mib:.0} MiB (empty {empty_rss_mib:.0} MiB); \
             load {load_before:?} → {load_after:?}",
            if tmc { "kcp TMC" } else { "KubeStellar" },
            args.rounds,
            list(&copies),
            list(&complete),
            list(&update),
        );
    }
    Ok(())
}

/// A client of `config`'s server at workspace `path`.
fn client_at(config: &kube::Config, path: &str) -> anyhow::Result<kube::Client> {
    Ok(kube::Client::try_from(ferry_server::kubeconfig::at_workspace(
        config, path,
    )?)?)
}

/// Each ConfigMap's 1 KiB value.
fn payload() -> String {
    "x".repeat(1024)
}

/// Through `client` (the workload's workspace): a namespace of
/// `--objects` ConfigMaps for each round.
async fn create_round_namespaces(args: &PlacementBenchArgs, client: &kube::Client) -> anyhow::Result<()> {
    let payload = payload();
    for r in 0..args.rounds {
        let ns = round_namespace(r);
        crate::bench_cmd::ensure_namespace(client, &ns).await?;
        let cms = Api::namespaced_with(client.clone(), &ns, &ar("", "v1", "ConfigMap", "configmaps"));
        create_all(
            &cms,
            (0..args.objects).map(|i| configmap(&ns, &format!("cm-{i}"), &payload)),
        )
        .await?;
    }
    Ok(())
}

/// What a round does in one profile; [`run_rounds`] runs and times the
/// rounds of both alike.
trait RoundSteps {
    /// The wait for the copies, the wait for the rest of the placement, and
    /// the round's further change (`one change`), for logs and errors.
    const COPIES: &'static str;
    const COMPLETE: &'static str;
    const CHANGE: &'static str;

    /// What round `r` places, for the log.
    fn placing(&self, r: usize) -> String;
    /// Place round `r`'s namespace.
    async fn place(&self, r: usize) -> anyhow::Result<()>;
    /// Whether every copy of round `r`'s objects is there.
    async fn copied(&self, r: usize) -> anyhow::Result<bool>;
    /// Whether the rest of round `r`'s placement is done.
    async fn complete(&self, r: usize) -> anyhow::Result<bool>;
    /// Make round `r`'s further change.
    async fn change(&self, r: usize) -> anyhow::Result<()>;
    /// Whether round `r`'s change has reached every copy.
    async fn changed(&self, r: usize) -> anyhow::Result<bool>;
}

/// Every round of `steps`: the seconds from placing until the copies, and
/// until the rest, are there (one poll sees the copies, the next ones the
/// rest); then from the further change until every copy has it.
async fn run_rounds<S: RoundSteps>(
    args: &PlacementBenchArgs,
    log: &impl Fn(&str),
    steps: &S,
) -> anyhow::Result<Vec<Round>> {
    let mut rounds = Vec::new();
    for r in 0..args.rounds {
        log(&format!("round {r}: {}", steps.placing(r)));
        let start = Instant::now();
        steps.place(r).await?;
        wait_until(S::COPIES, args.timeout, || steps.copied(r)).await?;
        let copies = start.elapsed().as_secs_f64();
        wait_until(S::COMPLETE, args.timeout, || steps.complete(r)).await?;
        let complete = start.elapsed().as_secs_f64();
        let start = Instant::now();
        steps.change(r).await?;
        wait_until(S::CHANGE, args.timeout, || steps.changed(r)).await?;
        let update = start.elapsed().as_secs_f64();
        log(&format!(
            "round {r}: copies {copies:.2}s, complete {complete:.2}s, {} everywhere {update:.2}s",
            S::CHANGE
        ));
        rounds.push(Round {
            copies,
            complete,
            update,
        });
    }
    Ok(rounds)
}

/// KubeStellar's rounds: an EdgePlacement per round selecting every
/// Location; mailboxes observed with wildcard LISTs.
struct KubeStellarRounds {
    n: usize,
    objects: usize,
    wmw: kube::Client,
    /// Every ConfigMap in every workspace, and every SyncerConfig.
    copies: Api<DynamicObject>,
    configs: Api<DynamicObject>,
}

impl KubeStellarRounds {
    /// Round `r`'s new value of `cm-0`.
    fn changed_payload(r: usize) -> String {
        format!("{r}").repeat(1024)
    }
}

impl RoundSteps for KubeStellarRounds {
    const COPIES: &'static str = "every mailbox's copies";
    const COMPLETE: &'static str = "every mailbox's the-one listing them";
    const CHANGE: &'static str = "one change";

    fn placing(&self, _r: usize) -> String {
        "one EdgePlacement selecting every Location".into()
    }

    async fn place(&self, r: usize) -> anyhow::Result<()> {
        let placement: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "EdgePlacement",
            "metadata": {"name": format!("round-{r}")},
            "spec": {"locationSelectors": [{"matchLabels": {"bench": "yes"}}],
                     "downsync": [{"apiGroup": "", "resources": ["configmaps"], "namespaces": [round_namespace(r)]}]},
        }))?;
        Api::<DynamicObject>::all_with(self.wmw.clone(), &edge("EdgePlacement", "edgeplacements"))
            .create(&PostParams::default(), &placement)
            .await
            .context("creating the EdgePlacement")?;
        Ok(())
    }

    async fn copied(&self, r: usize) -> anyhow::Result<bool> {
        let placed = ListParams::default()
            .labels(ferry_api::edge::mailbox::PLACED_LABEL)
            .fields(&format!("metadata.namespace={}", round_namespace(r)));
        Ok(self.copies.list(&placed).await?.items.len() >= self.n * self.objects)
    }

    async fn complete(&self, r: usize) -> anyhow::Result<bool> {
        // Every earlier round's names are listed too.
        let listed = self.objects * (r + 1);
        let complete = self
            .configs
            .list(&ListParams::default().labels(ferry_api::edge::mailbox::PLACED_LABEL))
            .await?
            .items
            .iter()
            .filter(|c| listed_names(&c.data) >= listed)
            .count();
        Ok(complete >= self.n)
    }

    async fn change(&self, r: usize) -> anyhow::Result<()> {
        let ns = round_namespace(r);
        let cms: Api<DynamicObject> =
            Api::namespaced_with(self.wmw.clone(), &ns, &ar("", "v1", "ConfigMap", "configmaps"));
        cms.patch(
            "cm-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"payload": Self::changed_payload(r)}})),
        )
        .await
        .context("changing cm-0")?;
        Ok(())
    }

    async fn changed(&self, r: usize) -> anyhow::Result<bool> {
        let one = ListParams::default()
            .labels(ferry_api::edge::mailbox::PLACED_LABEL)
            .fields(&format!(
                "metadata.name=cm-0,metadata.namespace={}",
                round_namespace(r)
            ));
        let changed = Self::changed_payload(r);
        let updated = self
            .copies
            .list(&one)
            .await?
            .items
            .iter()
            .filter(|c| c.data["data"]["payload"] == changed.as_str())
            .count();
        Ok(updated >= self.n)
    }
}

/// kcp TMC's rounds: a label on the round's namespace that every
/// Placement selects.
struct TmcRounds {
    n: usize,
    objects: usize,
    app: kube::Client,
    namespaces: Api<DynamicObject>,
    placements: Api<DynamicObject>,
}

impl TmcRounds {
    fn configmaps(&self, r: usize) -> Api<DynamicObject> {
        Api::namespaced_with(
            self.app.clone(),
            &round_namespace(r),
            &ar("", "v1", "ConfigMap", "configmaps"),
        )
    }
}

impl RoundSteps for TmcRounds {
    const COPIES: &'static str = "every object labelled for every SyncTarget";
    const COMPLETE: &'static str = "every Placement Bound";
    const CHANGE: &'static str = "one new object";

    fn placing(&self, r: usize) -> String {
        format!("namespace {} selected by every Placement", round_namespace(r))
    }

    async fn place(&self, r: usize) -> anyhow::Result<()> {
        let ns = round_namespace(r);
        self.namespaces
            .patch(
                &ns,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {TMC_PLACED: "yes"}}})),
            )
            .await
            .with_context(|| format!("labelling namespace {ns}"))?;
        Ok(())
    }

    async fn copied(&self, r: usize) -> anyhow::Result<bool> {
        let labelled = self
            .configmaps(r)
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .filter(|c| sync_labels(c) >= self.n)
            .count();
        Ok(labelled >= self.objects)
    }

    async fn complete(&self, _r: usize) -> anyhow::Result<bool> {
        let bound = self
            .placements
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .filter(|p| p.data.pointer("/status/phase").and_then(Value::as_str) == Some("Bound"))
            .count();
        Ok(bound >= self.n)
    }

    /// One more object, labelled for every target.
    async fn change(&self, r: usize) -> anyhow::Result<()> {
        create(
            &self.configmaps(r),
            configmap(&round_namespace(r), "new", &payload()),
        )
        .await
    }

    async fn changed(&self, r: usize) -> anyhow::Result<bool> {
        Ok(self
            .configmaps(r)
            .get_opt("new")
            .await?
            .is_some_and(|c| sync_labels(&c) >= self.n))
    }
}

/// KubeStellar: the inventory and its mailboxes, then the rounds. Returns the
/// set-up's seconds, the hub's RSS after it, and each round.
async fn kubestellar(
    args: &PlacementBenchArgs,
    hub: &BenchHub,
    config: &kube::Config,
    log: &impl Fn(&str),
) -> anyhow::Result<(f64, f64, Vec<Round>)> {
    let n = args.sync_targets;
    let client_at = |path: &str| client_at(config, path);
    // Inventory: N SyncTargets and Locations, and their mailboxes.
    log(&format!("setup: {n} SyncTargets and Locations in root:imw1"));
    let setup_start = Instant::now();
    crate::ensure_cmd::ensure_wmw(config, "imw1").await?;
    let imw = client_at("root:imw1")?;
    let targets: Api<DynamicObject> = Api::all_with(imw.clone(), &edge("SyncTarget", "synctargets"));
    let locations: Api<DynamicObject> = Api::all_with(imw.clone(), &edge("Location", "locations"));
    create_all(
        &targets,
        (0..n).map(|i| {
            let name = format!("target-{i}");
            json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "SyncTarget",
                   "metadata": {"name": name, "labels": {"id": name, "bench": "yes"}}})
        }),
    )
    .await?;
    create_all(
        &locations,
        (0..n).map(|i| {
            let name = format!("target-{i}");
            json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "Location",
                   "metadata": {"name": name, "labels": {"bench": "yes"}},
                   "spec": {"resource": {"group": "edge.kubestellar.io", "version": "v2alpha1", "resource": "synctargets"},
                            "instanceSelector": {"matchLabels": {"id": name}}}})
        }),
    )
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
    wait_until("mailbox workspaces", args.timeout, || {
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
    // The workload: a namespace of ConfigMaps per round, in a WMW.
    crate::ensure_cmd::ensure_wmw(config, "bench-wmw").await?;
    let wmw = client_at("root:bench-wmw")?;
    create_round_namespaces(args, &wmw).await?;
    let setup_seconds = setup_start.elapsed().as_secs_f64();
    log(&format!("setup: {n} mailboxes ready after {setup_seconds:.1}s"));
    let setup_rss_mib = bytes_to_mib(hub.process.rss_bytes());

    let profile = KubeStellarRounds {
        n,
        objects: args.objects,
        wmw,
        copies: Api::all_with(all.clone(), &ar("", "v1", "ConfigMap", "configmaps")),
        configs: Api::all_with(all, &edge("SyncerConfig", "syncerconfigs")),
    };
    let rounds = run_rounds(args, log, &profile).await?;
    Ok((setup_seconds, setup_rss_mib, rounds))
}

/// How many `state.workload.kcp.io/<key>=Sync` labels an object carries.
fn sync_labels(obj: &DynamicObject) -> usize {
    obj.metadata
        .labels
        .iter()
        .flatten()
        .filter(|(k, v)| {
            k.starts_with(ferry_api::well_known::WORKLOAD_STATE_LABEL_PREFIX)
                && v.as_str() == ferry_api::well_known::WORKLOAD_STATE_SYNC
        })
        .count()
}

/// kcp TMC: the inventory in `root:bench-org`, the Placements and a namespace
/// of ConfigMaps per round in `root:bench-app`, then the rounds. Returns the
/// set-up's seconds, the hub's RSS after it, and each round.
async fn tmc(
    args: &PlacementBenchArgs,
    hub: &BenchHub,
    config: &kube::Config,
    log: &impl Fn(&str),
) -> anyhow::Result<(f64, f64, Vec<Round>)> {
    let n = args.sync_targets;
    let at = |ws: &str| client_at(config, ws);
    log(&format!("setup: {n} SyncTargets, Locations and Placements"));
    let setup_start = Instant::now();
    let root = at("root")?;
    crate::quickstart::apply_workspaces(&root, &[ORG, APP]).await?;
    let org = at(&format!("root:{ORG}"))?;
    let app = at(&format!("root:{APP}"))?;
    let scheduling = |kind: &str, plural: &str| ar("scheduling.kcp.io", "v1alpha1", kind, plural);
    let targets: Api<DynamicObject> = Api::all_with(
        org.clone(),
        &ar("workload.kcp.io", "v1alpha1", "SyncTarget", "synctargets"),
    );
    create_all(
        &targets,
        (0..n).map(|i| {
            let name = format!("target-{i}");
            json!({"apiVersion": "workload.kcp.io/v1alpha1", "kind": "SyncTarget",
                   "metadata": {"name": name, "labels": {TMC_TO: name}}})
        }),
    )
    .await?;
    let locations: Api<DynamicObject> = Api::all_with(org.clone(), &scheduling("Location", "locations"));
    create_all(
        &locations,
        (0..n).map(|i| {
            let name = format!("target-{i}");
            json!({"apiVersion": "scheduling.kcp.io/v1alpha1", "kind": "Location",
                   "metadata": {"name": name, "labels": {TMC_TO: name}},
                   "spec": {"resource": {"group": "workload.kcp.io", "version": "v1alpha1", "resource": "synctargets"},
                            "instanceSelector": {"matchLabels": {TMC_TO: name}}}})
        }),
    )
    .await?;
    let placements: Api<DynamicObject> = Api::all_with(app.clone(), &scheduling("Placement", "placements"));
    create_all(
        &placements,
        (0..n).map(|i| {
            let name = format!("target-{i}");
            json!({"apiVersion": "scheduling.kcp.io/v1alpha1", "kind": "Placement",
                   "metadata": {"name": name},
                   "spec": {"locationWorkspace": format!("root:{ORG}"),
                            "locationSelectors": [{"matchLabels": {TMC_TO: name}}],
                            "locationResource": {"group": "workload.kcp.io", "version": "v1alpha1", "resource": "synctargets"},
                            "namespaceSelector": {"matchLabels": {TMC_PLACED: "yes"}}}})
        }),
    )
    .await?;
    create_round_namespaces(args, &app).await?;
    // Ready when every Placement has selected its Location.
    wait_until("every Placement's Location", args.timeout, || {
        let placements = placements.clone();
        async move {
            let selected = placements
                .list(&ListParams::default())
                .await?
                .items
                .iter()
                .filter(|p| p.data.pointer("/status/selectedLocation/locationName").is_some())
                .count();
            Ok(selected >= n)
        }
    })
    .await?;
    // Then the scheduler has caught up with the set-up (every Location's
    // status, every SyncTarget's first status) when a namespace of one
    // object, placed now, is labelled for every target: the rounds measure
    // placement, not that backlog.
    let warmup = "bench-warmup";
    crate::quickstart::apply_object(
        &app,
        &json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": warmup, "labels": {TMC_PLACED: "yes"}}}),
    )
    .await?;
    let warm: Api<DynamicObject> =
        Api::namespaced_with(app.clone(), warmup, &ar("", "v1", "ConfigMap", "configmaps"));
    create(&warm, configmap(warmup, "cm-0", &payload())).await?;
    wait_until(
        "the warm-up object labelled for every SyncTarget",
        args.timeout,
        || {
            let warm = warm.clone();
            async move { Ok(warm.get_opt("cm-0").await?.is_some_and(|c| sync_labels(&c) >= n)) }
        },
    )
    .await?;
    let setup_seconds = setup_start.elapsed().as_secs_f64();
    log(&format!(
        "setup: {n} Placements with a Location, the scheduler caught up after {setup_seconds:.1}s"
    ));
    let setup_rss_mib = bytes_to_mib(hub.process.rss_bytes());

    let profile = TmcRounds {
        n,
        objects: args.objects,
        namespaces: Api::all_with(app.clone(), &ar("", "v1", "Namespace", "namespaces")),
        app,
        placements,
    };
    let rounds = run_rounds(args, log, &profile).await?;
    Ok((setup_seconds, setup_rss_mib, rounds))
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
