//! The kinds Ferry's controllers read from tenants — EdgePlacement,
//! Customizer, TMC Placement, APIExport, APIResourceSchema,
//! PublishedResource — fuzzed with deep, wide and huge specs, written by
//! tenant `mal` in its own workspace, where its own inventory, namespaces
//! and placed ConfigMaps make the translator and the scheduler act on them.
//! Throughout, `/readyz` answers within a second and nothing answers 5xx;
//! afterwards the hub restarts ready on the same data directory.
//!
//! The hub runs in this process: a stack overflow anywhere aborts the test
//! binary, which fails the test as surely as a child process's exit would.
//!
//! Seeded and bounded for CI (`FERRY_FUZZ_KINDS_CASES`, default 400;
//! `FERRY_FUZZ_SEED` to replay or vary a run).

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::tenants::{install_ferry_crds, Tenants};
use common::{admin, call, eventually};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Map, Value};

const BATCH: usize = 40;
/// Objects of each kind the fuzz updates (and the placed ConfigMaps name).
const POOL: usize = 4;
/// Largest body sent: under the hub's 3 MiB request limit, over its 1.5 MiB
/// object limit.
const MAX_SENT: usize = 2 * 1024 * 1024;
/// Stands for a deep value in a body, replaced in the text after serialising.
const DEEP: &str = "@@fuzz-deep@@";

/// One kind under fuzz: where its objects go, and a spec it accepts.
struct Kind {
    name: &'static str,
    collection: &'static str,
    api_version: &'static str,
    kind: &'static str,
    /// The field holding what is fuzzed (`spec`, or a Customizer's `replacements`).
    field: &'static str,
    base: Value,
}

fn kinds() -> Vec<Kind> {
    let schema = json!({"group": "fz.example", "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
        "versions": [{"name": "v1", "served": true, "storage": true,
                      "schema": {"type": "object", "properties": {"spec": {"type": "object",
                          "x-kubernetes-validations": [{"rule": "self.size() >= 0"}]}}}}]});
    vec![
        Kind {
            name: "edgeplacement",
            collection: "/apis/edge.kubestellar.io/v2alpha1/edgeplacements",
            api_version: "edge.kubestellar.io/v2alpha1",
            kind: "EdgePlacement",
            field: "spec",
            base: json!({"locationSelectors": [{"matchLabels": {"env": "prod"}}],
                         "downsync": [{"apiGroup": "", "resources": ["configmaps"], "namespaces": ["commonstuff"]}],
                         "upsync": [{"apiGroup": "", "resources": ["configmaps"], "namespaces": ["up"], "names": ["*"]}]}),
        },
        Kind {
            name: "customizer",
            collection: "/apis/edge.kubestellar.io/v2alpha1/namespaces/commonstuff/customizers",
            api_version: "edge.kubestellar.io/v2alpha1",
            kind: "Customizer",
            field: "replacements",
            base: json!([{"path": "$.data.greeting", "value": "\"%(env)\""}]),
        },
        Kind {
            name: "placement",
            collection: "/apis/scheduling.kcp.io/v1alpha1/placements",
            api_version: "scheduling.kcp.io/v1alpha1",
            kind: "Placement",
            field: "spec",
            base: json!({"locationSelectors": [{"matchExpressions": [{"key": "k", "operator": "NotIn", "values": ["a"]}]}],
                         "namespaceSelector": {"matchLabels": {"fuzz": "yes"}}}),
        },
        Kind {
            name: "apiexport",
            collection: "/apis/apis.kcp.io/v1alpha1/apiexports",
            api_version: "apis.kcp.io/v1alpha1",
            kind: "APIExport",
            field: "spec",
            base: json!({"latestResourceSchemas": ["pool0.widgets.fz.example"]}),
        },
        Kind {
            name: "apiresourceschema",
            collection: "/apis/apis.kcp.io/v1alpha1/apiresourceschemas",
            api_version: "apis.kcp.io/v1alpha1",
            kind: "APIResourceSchema",
            field: "spec",
            base: schema,
        },
        Kind {
            name: "publishedresource",
            collection: "/apis/syncagent.kcp.io/v1alpha1/publishedresources",
            api_version: "syncagent.kcp.io/v1alpha1",
            kind: "PublishedResource",
            field: "spec",
            base: json!({"resource": {"apiGroup": "fz.example", "version": "v1", "kind": "Widget"},
                         "naming": {"name": "{{ .Object.metadata.name }}", "namespace": "{{ .ClusterName }}"},
                         "related": [{"identifier": "creds", "origin": "service", "kind": "Secret",
                                      "object": {"reference": {"path": "spec.secretName"}}}]}),
        },
    ]
}

/// Field names these kinds give meaning to, so shapes reach real code.
const KEYS: &[&str] = &[
    "locationSelectors",
    "namespaceSelector",
    "matchLabels",
    "matchExpressions",
    "key",
    "operator",
    "values",
    "downsync",
    "upsync",
    "apiGroup",
    "resources",
    "namespaces",
    "names",
    "objectNames",
    "labelSelectors",
    "namespaceSelectors",
    "path",
    "value",
    "locationWorkspace",
    "locationResource",
    "latestResourceSchemas",
    "permissionClaims",
    "identity",
    "group",
    "versions",
    "schema",
    "properties",
    "items",
    "x-kubernetes-validations",
    "rule",
    "type",
    "resource",
    "naming",
    "related",
    "object",
    "reference",
    "mutation",
    "projection",
    "filter",
    "a",
    "",
];

/// A random value of up to `depth` levels, `width` items a level.
fn random_value(rng: &mut StdRng, depth: u32, width: usize) -> Value {
    let pick = if depth == 0 {
        rng.random_range(0..4)
    } else {
        rng.random_range(0..7)
    };
    match pick {
        0 => Value::Null,
        1 => json!(rng.random_range(-2..300)),
        2 | 3 => Value::String(random_string(rng)),
        4 => Value::Array(
            (0..rng.random_range(0..=width))
                .map(|_| random_value(rng, depth - 1, width))
                .collect(),
        ),
        _ => {
            let mut m = Map::new();
            for _ in 0..rng.random_range(0..=width) {
                m.insert(
                    KEYS[rng.random_range(0..KEYS.len())].into(),
                    random_value(rng, depth - 1, width),
                );
            }
            Value::Object(m)
        }
    }
}

fn random_string(rng: &mut StdRng) -> String {
    match rng.random_range(0..9) {
        0 => "x".repeat(rng.random_range(0..100_000)),
        1 => format!("$.data{}", ".a".repeat(rng.random_range(0..5_000))),
        2 => format!(
            "{}self.x == 1{}",
            "(".repeat(rng.random_range(0..3_000)),
            ")".repeat(rng.random_range(0..3_000))
        ),
        3 => format!("{{{{ {} }}}}", ".Object".repeat(rng.random_range(0..2_000))),
        4 => "%(".repeat(rng.random_range(0..2_000)),
        5 => [
            "In",
            "NotIn",
            "Exists",
            "DoesNotExist",
            "root:mal",
            "pool1.widgets.fz.example",
            "*",
            "configmaps",
        ][rng.random_range(0..8)]
        .into(),
        6 => "a.".repeat(rng.random_range(0..400)),
        _ => (0..rng.random_range(1..12))
            .map(|_| rng.random_range(b'a'..=b'z') as char)
            .collect(),
    }
}

/// A spec for `kind`: its base, reshaped one of several ways.
fn fuzzed(rng: &mut StdRng, kind: &Kind) -> Value {
    let mut v = kind.base.clone();
    match rng.random_range(0..6) {
        // Random shape in place of a random member.
        0 => {
            let new = random_value(rng, 4, 4);
            set_random_member(rng, &mut v, new)
        }
        // Deep: replaced in the serialised text by `nested` levels.
        1 => set_random_member(rng, &mut v, json!(DEEP)),
        // Wide: one list of many items.
        2 => {
            let n = rng.random_range(100..20_000);
            // Small items: the list is what is wide.
            let item = Some(random_value(rng, 1, 2))
                .filter(|v| v.to_string().len() <= 100)
                .unwrap_or(json!("item"));
            set_random_member(rng, &mut v, Value::Array(vec![item; n]))
        }
        // Huge selectors: many values for one expression.
        3 => {
            let values: Vec<String> = (0..rng.random_range(200..15_000))
                .map(|i| format!("v{i}"))
                .collect();
            let sel = json!({"matchExpressions": [{"key": "k", "operator": "NotIn", "values": values}]});
            let sels = vec![sel; rng.random_range(1..12)];
            set_random_member(rng, &mut v, Value::Array(sels))
        }
        // Long strings wherever a string was.
        4 => {
            let mut strings = Vec::new();
            string_pointers(&v, String::new(), &mut strings);
            if let Some(p) = strings.get(rng.random_range(0..strings.len().max(1))) {
                if let Some(s) = v.pointer_mut(p) {
                    *s = Value::String(random_string(rng));
                }
            }
        }
        // The shapes that once crashed or stalled the hub, scaled at random.
        _ => attack(rng, kind, &mut v),
    }
    v
}

/// What each kind's walkers once choked on: Customizer paths of thousands of
/// steps, CEL rules and schemas nested thousands deep, templates of
/// thousands of steps.
fn attack(rng: &mut StdRng, kind: &Kind, v: &mut Value) {
    let n = [10, 60, 65, 500, 2_000, 10_000, 60_000][rng.random_range(0..7)];
    match kind.name {
        "customizer" => v[0]["path"] = json!(format!("$.data{}", ".a".repeat(n))),
        "apiresourceschema" => {
            let rule = format!("{}self.size() >= 0{}", "(".repeat(n), ")".repeat(n));
            v["versions"][0]["schema"]["properties"]["spec"]["x-kubernetes-validations"][0]["rule"] =
                json!(rule);
            v["versions"][0]["schema"]["properties"]["deep"] = json!(DEEP);
        }
        "publishedresource" => {
            v["naming"]["name"] = json!(format!("{{{{ {} }}}}", "(".repeat(n)));
            v["related"][0]["object"]["reference"]["path"] = json!("spec.a".repeat(n.min(10_000)));
        }
        _ => set_random_member(rng, v, json!(DEEP)),
    }
}

/// Put `new` at a random member of `v` (existing, or a new key of an object).
fn set_random_member(rng: &mut StdRng, v: &mut Value, new: Value) {
    let mut containers = Vec::new();
    container_pointers(v, String::new(), &mut containers);
    let at = containers[rng.random_range(0..containers.len())].clone();
    match v.pointer_mut(&at) {
        Some(Value::Object(m)) => {
            m.insert(KEYS[rng.random_range(0..KEYS.len())].into(), new);
        }
        Some(Value::Array(a)) if !a.is_empty() => {
            let i = rng.random_range(0..a.len());
            a[i] = new;
        }
        Some(Value::Array(a)) => a.push(new),
        _ => {}
    }
}

fn container_pointers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            out.push(at.clone());
            for (k, c) in m {
                container_pointers(
                    c,
                    format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")),
                    out,
                );
            }
        }
        Value::Array(a) => {
            out.push(at.clone());
            for (i, c) in a.iter().enumerate() {
                container_pointers(c, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

fn string_pointers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::String(_) => out.push(at),
        Value::Object(m) => m
            .iter()
            .for_each(|(k, c)| string_pointers(c, format!("{at}/{k}"), out)),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .for_each(|(i, c)| string_pointers(c, format!("{at}/{i}"), out)),
        _ => {}
    }
}

/// `{"a": ... "x" ...}` nested `levels` deep, as text (never a `Value`,
/// whose serialisation and drop recurse).
fn nested(levels: usize, list: bool) -> String {
    let (open, close) = if list { ("[", "]") } else { ("{\"a\":", "}") };
    format!("{}\"x\"{}", open.repeat(levels), close.repeat(levels))
}

/// One request: method, path, content type, body.
type Case = (&'static str, String, &'static str, Vec<u8>);

fn case(rng: &mut StdRng, kind: &Kind, serial: usize) -> Case {
    let spec = fuzzed(rng, kind);
    let levels = [20, 60, 100, 126, 127, 128, 129, 200, 1_000, 10_000, 100_000][rng.random_range(0..11)];
    let deep = nested(levels, rng.random_bool(0.5));
    let (method, path, ct, body) = if rng.random_bool(0.5) {
        let mut obj = new_object(kind, &format!("fz{serial}"));
        obj[kind.field] = spec;
        ("POST", kind.collection.to_string(), "application/json", obj)
    } else {
        // An update of one of the objects the controllers are acting on.
        let name = pool_name(kind, rng.random_range(0..POOL));
        let mut patch = json!({});
        patch[kind.field] = spec;
        (
            "PATCH",
            format!("{}/{name}", kind.collection),
            "application/merge-patch+json",
            patch,
        )
    };
    let mut text = body.to_string().replace(&format!("\"{DEEP}\""), &deep);
    if text.len() > MAX_SENT {
        // Past the hub's request limit only the transport is tested, and
        // that is the HTTP/2 tests' business: cut the value down.
        let mut small = body.clone();
        small[kind.field] = kind.base.clone();
        text = small.to_string();
    }
    (method, path, ct, text.into_bytes())
}

/// The name of object `tag` of `kind` (a schema's says what it defines).
fn object_name(kind: &Kind, tag: &str) -> String {
    if kind.name == "apiresourceschema" {
        format!("{tag}.widgets.fz.example")
    } else {
        format!("{tag}-{}", kind.name)
    }
}

fn pool_name(kind: &Kind, i: usize) -> String {
    object_name(kind, &format!("pool{i}"))
}

/// A new object of `kind` named for `tag`, without the fuzzed field.
fn new_object(kind: &Kind, tag: &str) -> Value {
    let mut obj = json!({"apiVersion": kind.api_version, "kind": kind.kind, "metadata": {"name": object_name(kind, tag)}});
    if kind.collection.contains("/namespaces/") {
        obj["metadata"]["namespace"] = json!("commonstuff");
    }
    obj
}

async fn send(c: &kube::Client, (method, path, ct, body): &Case) -> Result<u16, String> {
    common::send_raw(c, method, path, ct, body.clone()).await
}

/// `/readyz` once: its status and how long it took.
async fn readyz(c: &kube::Client) -> (u16, Duration) {
    let started = Instant::now();
    let code = match tokio::time::timeout(Duration::from_secs(10), call(c, "GET", "/readyz", None)).await {
        Ok((code, _)) => code,
        Err(_) => 0,
    };
    (code, started.elapsed())
}

/// mal's world in `root:mal`: an inventory (an edge SyncTarget and Location,
/// a TMC SyncTarget), namespaces the scheduler places, ConfigMaps the
/// translator places and customizes, and a pool of each kind to update.
async fn stage(t: &Tenants, kinds: &[Kind]) -> kube::Client {
    t.workspace("mal", Some("mal")).await;
    let mal = t.client_as("mal", "root:mal").await;
    install_ferry_crds(&mal).await;
    let ok = |what: &str, (code, body): (u16, Value)| assert!(code == 201, "{what}: {code} {body}");
    for (path, obj) in [
        (
            "/apis/edge.kubestellar.io/v2alpha1/synctargets",
            json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "SyncTarget", "metadata": {"name": "florin", "labels": {"id": "florin"}}}),
        ),
        (
            "/apis/edge.kubestellar.io/v2alpha1/locations",
            json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "Location", "metadata": {"name": "florin", "labels": {"env": "prod"}},
                "spec": {"resource": {"group": "edge.kubestellar.io", "version": "v2alpha1", "resource": "synctargets"},
                         "instanceSelector": {"matchLabels": {"id": "florin"}}}}),
        ),
        (
            "/apis/workload.kcp.io/v1alpha1/synctargets",
            json!({"apiVersion": "workload.kcp.io/v1alpha1", "kind": "SyncTarget", "metadata": {"name": "east"}}),
        ),
        (
            "/api/v1/namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "commonstuff", "labels": {"fuzz": "yes"}}}),
        ),
    ] {
        ok(path, call(&mal, "POST", path, Some(&obj)).await);
    }
    for kind in kinds {
        for i in 0..POOL {
            let mut obj = new_object(kind, &format!("pool{i}"));
            obj[kind.field] = kind.base.clone();
            let (code, body) = call(&mal, "POST", kind.collection, Some(&obj)).await;
            assert!(code == 201, "the pool's {}: {code} {body}", kind.kind);
        }
    }
    for i in 0..POOL {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cm-{i}"), "namespace": "commonstuff",
                         "annotations": {"edge.kubestellar.io/customizer": format!("pool{i}-customizer"),
                                         "edge.kubestellar.io/expand-parameters": "true"}},
            "data": {"greeting": "hello %(env)"}});
        ok(
            "a placed ConfigMap",
            call(
                &mal,
                "POST",
                "/api/v1/namespaces/commonstuff/configmaps",
                Some(&cm),
            )
            .await,
        );
    }
    mal
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deep_wide_and_huge_specs_of_every_controller_kind_never_stall_or_crash_the_hub() {
    let cases: usize = std::env::var("FERRY_FUZZ_KINDS_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400);
    let seed: u64 = std::env::var("FERRY_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    let t = Tenants::start().await;
    let kinds = kinds();
    let mal = stage(&t, &kinds).await;

    // /readyz, polled throughout by a prober of its own.
    let root = admin(&t.hub, "root").await;
    let done = Arc::new(AtomicBool::new(false));
    let slowest_ms = Arc::new(AtomicU64::new(0));
    let prober = {
        let (root, done, slowest_ms) = (root.clone(), done.clone(), slowest_ms.clone());
        tokio::spawn(async move {
            let mut probes = 0u64;
            while !done.load(Ordering::Relaxed) {
                let (code, took) = readyz(&root).await;
                assert_eq!(code, 200, "/readyz during the fuzz");
                slowest_ms.fetch_max(took.as_millis() as u64, Ordering::Relaxed);
                probes += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            probes
        })
    };

    let mut rng = StdRng::seed_from_u64(seed);
    let mut codes = std::collections::BTreeMap::<u16, usize>::new();
    let mut failures = Vec::new();
    let mut sent = 0;
    let mut slow = Vec::new();
    while sent < cases {
        let batch: Vec<Case> = (0..BATCH.min(cases - sent))
            .map(|i| {
                let kind = &kinds[rng.random_range(0..kinds.len())];
                case(&mut rng, kind, sent + i)
            })
            .collect();
        sent += batch.len();
        for case in &batch {
            let started = Instant::now();
            let outcome = send(&mal, case).await;
            slow.push((
                started.elapsed(),
                format!("{} {} ({} bytes) -> {outcome:?}", case.0, case.1, case.3.len()),
            ));
            match outcome {
                Ok(code) => {
                    *codes.entry(code).or_default() += 1;
                    if code >= 500 {
                        failures.push(format!("{} {} -> {code}", case.0, case.1));
                    }
                }
                Err(e) => failures.push(format!("{} {} ({} bytes) -> {e}", case.0, case.1, case.3.len())),
            }
        }
        let (code, took) = readyz(&root).await;
        assert_eq!(code, 200, "/readyz after {sent} cases");
        assert!(
            took < Duration::from_secs(1),
            "/readyz took {took:?} after {sent} cases"
        );
    }
    done.store(true, Ordering::Relaxed);
    let probes = prober
        .await
        .expect("the prober saw /readyz answer 200 throughout");
    let slowest = Duration::from_millis(slowest_ms.load(Ordering::Relaxed));
    eprintln!(
        "fuzz kinds: {sent} cases over {} kinds, seed {seed}, codes {codes:?}, {} failures, \
         {probes} /readyz probes, slowest {slowest:?}",
        kinds.len(),
        failures.len()
    );
    slow.sort_by_key(|(took, _)| std::cmp::Reverse(*took));
    for (took, what) in slow.iter().take(3) {
        eprintln!("slowest: {took:?} {what}");
    }
    assert!(
        failures.is_empty(),
        "5xx or dropped (seed {seed}):\n{}",
        failures.join("\n")
    );
    assert!(
        slowest < Duration::from_secs(1),
        "/readyz took {slowest:?} at its slowest"
    );

    // Whatever was stored, the hub starts on it, ready.
    let (hub, ()) = t.hub.restart_after(async {}).await;
    let root = admin(&hub, "root").await;
    eventually(30, "/readyz after the restart", || {
        let root = root.clone();
        async move { (readyz(&root).await.0 == 200).then_some(()) }
    })
    .await;
    let (code, took) = readyz(&root).await;
    assert_eq!(code, 200);
    assert!(
        took < Duration::from_secs(1),
        "/readyz took {took:?} after the restart"
    );
    // And it still lists every kind in mal's workspace.
    let (_, ws) = call(
        &admin(&hub, "root:mal").await,
        "GET",
        "/apis/edge.kubestellar.io/v2alpha1/edgeplacements",
        None,
    )
    .await;
    assert!(ws["items"].as_array().is_some_and(|i| i.len() >= POOL), "{ws}");
}
