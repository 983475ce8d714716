//! Random and mutated bodies, JSON and YAML, through every write verb and
//! the four patch types, to every built-in resource discovery lists and to a
//! CRD with CEL rules: the hub answers each with a 2xx or a 4xx, never a 5xx
//! or a dropped connection, and `/readyz` answers after every batch.
//!
//! Seeded and bounded for CI (`FERRY_FUZZ_CASES`, default 1500;
//! `FERRY_FUZZ_SEED` to replay or vary a run).

mod common;

use common::{call, client, expect_status_because, post_created};
use ferry_testkit::TestHub;
use futures::StreamExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Map, Value};

const BATCH: usize = 250;

/// One request: method, path, content type, body.
type Case = (String, String, &'static str, Vec<u8>);

/// A served resource: its collection path, and a body that creates it.
struct Target {
    collection: String,
    item: String,
    subresources: Vec<String>,
    base: Value,
}

/// Field names the hub gives meaning to, so mutations hit real code paths.
const KEYS: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "namespace",
    "generateName",
    "labels",
    "annotations",
    "finalizers",
    "ownerReferences",
    "uid",
    "resourceVersion",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "creationTimestamp",
    "spec",
    "status",
    "data",
    "stringData",
    "binaryData",
    "type",
    "replicas",
    "minReplicas",
    "class",
    "ports",
    "selector",
    "matchLabels",
    "matchExpressions",
    "template",
    "containers",
    "image",
    "rules",
    "verbs",
    "apiGroups",
    "resources",
    "subjects",
    "roleRef",
    "conditions",
    "request",
    "usages",
    "signerName",
    "versions",
    "schema",
    "openAPIV3Schema",
    "properties",
    "x-kubernetes-validations",
    "rule",
    "served",
    "storage",
    "group",
    "names",
    "plural",
    "scope",
    "items",
    "$patch",
    "$retainKeys",
    "$setElementOrder/containers",
    "$deleteFromPrimitiveList/finalizers",
    "$setElementOrder/finalizers",
    "fieldsV1",
    "manager",
    "operation",
    "clusterIP",
    "clusterIPs",
    "nodePort",
    "port",
    "targetPort",
    "protocol",
    "volumes",
    "env",
    "valueFrom",
    "",
    "~1",
    "a/b",
    "é",
];

fn random_string(rng: &mut StdRng) -> String {
    match rng.random_range(0..8) {
        0 => String::new(),
        1 => KEYS[rng.random_range(0..KEYS.len())].to_string(),
        2 => "x".repeat(rng.random_range(0..400)),
        3 => "\u{0}\u{7f}\u{feff}\u{1F600}\\\"'\n".to_string(),
        4 => format!("{}", rng.random::<i64>()),
        5 => [
            "2024-01-01T00:00:00Z",
            "-1",
            "1e400",
            "NaN",
            "true",
            "null",
            "{}",
            "[",
            "a.b.c",
            "Pending",
        ][rng.random_range(0..10)]
        .to_string(),
        6 => [
            "/",
            "/metadata",
            "/metadata/name",
            "/spec/-",
            "/spec/0",
            "/status",
            "/metadata/labels/a~1b",
        ][rng.random_range(0..7)]
        .to_string(),
        _ => (0..rng.random_range(1..12))
            .map(|_| rng.random_range(b'a'..=b'z') as char)
            .collect(),
    }
}

fn random_value(rng: &mut StdRng, depth: u32) -> Value {
    let top = if depth == 0 { 5 } else { 7 };
    match rng.random_range(0..top) {
        0 => Value::Null,
        1 => Value::Bool(rng.random()),
        2 => match rng.random_range(0..6) {
            0 => json!(rng.random::<i64>()),
            1 => json!(u64::MAX),
            2 => json!(rng.random_range(-3..5)),
            3 => json!(1.5e300),
            4 => json!(-0.5),
            _ => json!(i64::MIN),
        },
        3 | 4 => Value::String(random_string(rng)),
        5 => Value::Array(
            (0..rng.random_range(0..4))
                .map(|_| random_value(rng, depth - 1))
                .collect(),
        ),
        _ => {
            let mut m = Map::new();
            for _ in 0..rng.random_range(0..5) {
                m.insert(
                    KEYS[rng.random_range(0..KEYS.len())].to_string(),
                    random_value(rng, depth - 1),
                );
            }
            Value::Object(m)
        }
    }
}

/// Every JSON pointer in `v`.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                pointers(
                    child,
                    format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")),
                    out,
                );
            }
        }
        Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                pointers(child, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// `base` with one to three random edits: a value replaced, a key added
/// or removed.
fn mutated(rng: &mut StdRng, base: &Value) -> Value {
    let mut v = base.clone();
    for _ in 0..rng.random_range(1..4) {
        let mut all = Vec::new();
        pointers(&v, String::new(), &mut all);
        let at = all[rng.random_range(0..all.len())].clone();
        let new = random_value(rng, 3);
        let Some(slot) = v.pointer_mut(&at) else { continue };
        match slot {
            Value::Object(m) if rng.random_bool(0.5) => {
                if rng.random_bool(0.5) && !m.is_empty() {
                    let k = m
                        .keys()
                        .nth(rng.random_range(0..m.len()))
                        .cloned()
                        .unwrap_or_default();
                    m.remove(&k);
                } else {
                    m.insert(KEYS[rng.random_range(0..KEYS.len())].to_string(), new);
                }
            }
            Value::Array(a) if rng.random_bool(0.5) => a.push(new),
            _ => *slot = new,
        }
    }
    v
}

fn random_json_patch(rng: &mut StdRng, base: &Value) -> Value {
    let mut all = Vec::new();
    pointers(base, String::new(), &mut all);
    let ops = ["add", "remove", "replace", "move", "copy", "test", "nope"];
    let mut patch = Vec::new();
    for _ in 0..rng.random_range(0..4) {
        let path = |rng: &mut StdRng| {
            if rng.random_bool(0.8) {
                Value::String(all[rng.random_range(0..all.len())].clone())
            } else {
                random_value(rng, 1)
            }
        };
        let mut op = Map::new();
        op.insert("op".into(), json!(ops[rng.random_range(0..ops.len())]));
        op.insert("path".into(), path(rng));
        if rng.random_bool(0.4) {
            op.insert("from".into(), path(rng));
        }
        if rng.random_bool(0.7) {
            op.insert("value".into(), random_value(rng, 3));
        }
        patch.push(Value::Object(op));
    }
    if rng.random_bool(0.1) {
        random_value(rng, 2)
    } else {
        Value::Array(patch)
    }
}

/// A body as bytes: JSON, YAML, or (sometimes) damaged bytes.
fn encode(rng: &mut StdRng, v: &Value, yaml: bool) -> Vec<u8> {
    let mut bytes = if yaml {
        serde_saphyr::to_string(v).unwrap_or_default().into_bytes()
    } else {
        serde_json::to_vec(v).expect("json")
    };
    if rng.random_ratio(1, 12) && !bytes.is_empty() {
        let i = rng.random_range(0..bytes.len());
        match rng.random_range(0..3) {
            0 => bytes.truncate(i),
            1 => bytes[i] = rng.random(),
            _ => bytes
                .splice(i..i, b"{[\"\xff:\n- ".iter().copied())
                .for_each(drop),
        }
    }
    bytes
}

fn case(rng: &mut StdRng, t: &Target) -> Case {
    let body = |rng: &mut StdRng| {
        if rng.random_ratio(1, 6) {
            random_value(rng, 4)
        } else {
            mutated(rng, &t.base)
        }
    };
    let yaml = rng.random_bool(0.3);
    let obj_ct: &'static str = if yaml {
        "application/yaml"
    } else {
        "application/json"
    };
    let target = |rng: &mut StdRng| {
        if !t.subresources.is_empty() && rng.random_ratio(1, 4) {
            format!(
                "{}/{}",
                t.item,
                t.subresources[rng.random_range(0..t.subresources.len())]
            )
        } else {
            t.item.clone()
        }
    };
    match rng.random_range(0..8) {
        0 => {
            let b = body(rng);
            ("POST".into(), t.collection.clone(), obj_ct, encode(rng, &b, yaml))
        }
        1 => {
            let path = target(rng);
            let b = body(rng);
            ("PUT".into(), path, obj_ct, encode(rng, &b, yaml))
        }
        2 => {
            let path = target(rng);
            let p = random_json_patch(rng, &t.base);
            (
                "PATCH".into(),
                path,
                "application/json-patch+json",
                encode(rng, &p, false),
            )
        }
        3 => {
            let path = target(rng);
            let b = body(rng);
            (
                "PATCH".into(),
                path,
                "application/merge-patch+json",
                encode(rng, &b, false),
            )
        }
        4 => {
            let path = target(rng);
            let b = body(rng);
            (
                "PATCH".into(),
                path,
                "application/strategic-merge-patch+json",
                encode(rng, &b, false),
            )
        }
        5 | 6 => {
            let path = format!("{}?fieldManager=fuzz&force={}", target(rng), rng.random_bool(0.5));
            let b = body(rng);
            (
                "PATCH".into(),
                path,
                "application/apply-patch+yaml",
                encode(rng, &b, true),
            )
        }
        _ => {
            // Delete options of any shape; dry runs, so the live object stays.
            let mut b = random_value(rng, 2);
            if let Some(m) = b.as_object_mut() {
                m.insert("dryRun".into(), json!(["All"]));
            }
            (
                "DELETE".into(),
                format!("{}?dryRun=All", t.item),
                "application/json",
                encode(rng, &b, false),
            )
        }
    }
}

/// The CRD every run fuzzes besides the built-ins, with CEL rules.
fn fuzz_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "scalers.fuzz.example.com"},
        "spec": {"group": "fuzz.example.com", "scope": "Namespaced",
            "names": {"plural": "scalers", "singular": "scaler", "kind": "Scaler"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object",
                        "x-kubernetes-validations": [
                            {"rule": "self.minReplicas <= self.replicas", "messageExpression": "'min ' + string(self.minReplicas)"},
                            {"rule": "!has(self.ports) || self.ports.all(p, p > 0)", "fieldPath": ".ports"},
                            {"rule": "!has(self.name) || self.name.matches('^[a-z]+$')"},
                        ],
                        "properties": {
                            "replicas": {"type": "integer", "default": 1},
                            "minReplicas": {"type": "integer", "default": 0},
                            "name": {"type": "string", "maxLength": 64},
                            "class": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]},
                            "ports": {"type": "array", "items": {"type": "integer"}},
                            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        }},
                    "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
                }}}}]}
    })
}

/// Hand-written bodies for kinds whose minimal body would not be created.
fn seed_body(group: &str, kind: &str) -> Option<Value> {
    Some(match (group, kind) {
        ("", "ConfigMap") => {
            json!({"data": {"k": "v"}, "metadata": {"labels": {"a": "b"}, "finalizers": ["x.io/y"]}})
        }
        ("", "Secret") => json!({"type": "Opaque", "data": {"a": "YQ=="}}),
        ("", "Pod") => {
            json!({"spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}]}]}})
        }
        ("", "Service") => {
            json!({"spec": {"selector": {"a": "b"}, "ports": [{"port": 80, "targetPort": 8080}]}})
        }
        ("", "Namespace") => json!({"spec": {"finalizers": ["kubernetes"]}}),
        ("", "ServiceAccount") => json!({}),
        ("apps", "Deployment") | ("apps", "ReplicaSet") | ("apps", "StatefulSet") | ("apps", "DaemonSet") => {
            json!({
            "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}},
                "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}})
        }
        ("batch", "Job") => {
            json!({"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}})
        }
        ("rbac.authorization.k8s.io", "ClusterRole") | ("rbac.authorization.k8s.io", "Role") => {
            json!({"rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]})
        }
        ("rbac.authorization.k8s.io", "RoleBinding")
        | ("rbac.authorization.k8s.io", "ClusterRoleBinding") => json!({
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "u", "apiGroup": "rbac.authorization.k8s.io"}]}),
        ("certificates.k8s.io", "CertificateSigningRequest") => json!({
            "spec": {"request": "eA==", "signerName": "kubernetes.io/kube-apiserver-client", "usages": ["client auth"]}}),
        ("fuzz.example.com", "Scaler") => {
            json!({"spec": {"replicas": 3, "minReplicas": 1, "class": "gold", "ports": [80], "name": "abc"}})
        }
        _ => return None,
    })
}

/// Every resource discovery lists that can be created, with its subresources.
async fn targets(c: &kube::Client) -> Vec<Target> {
    let mut versions = vec![("".to_string(), "/api/v1".to_string())];
    let (_, groups) = call(c, "GET", "/apis", None).await;
    for g in groups["groups"].as_array().into_iter().flatten() {
        let name = g["name"].as_str().unwrap_or_default().to_string();
        if let Some(gv) = g["preferredVersion"]["groupVersion"].as_str() {
            versions.push((name, format!("/apis/{gv}")));
        }
    }
    let mut out = Vec::new();
    for (group, prefix) in versions {
        let (_, list) = call(c, "GET", &prefix, None).await;
        let resources = list["resources"].as_array().cloned().unwrap_or_default();
        for r in &resources {
            let name = r["name"].as_str().unwrap_or_default();
            let verbs: Vec<&str> = r["verbs"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            if name.contains('/') || !verbs.contains(&"create") {
                continue;
            }
            let kind = r["kind"].as_str().unwrap_or_default();
            let namespaced = r["namespaced"].as_bool().unwrap_or(false);
            let collection = if namespaced {
                format!("{prefix}/namespaces/default/{name}")
            } else {
                format!("{prefix}/{name}")
            };
            let object_name = format!("fz-{}", name.replace('.', "-"));
            let mut base = seed_body(&group, kind).unwrap_or_else(|| json!({}));
            base["apiVersion"] = json!(list["groupVersion"]);
            base["kind"] = json!(kind);
            base["metadata"]["name"] = json!(object_name);
            let subresources = resources
                .iter()
                .filter_map(|s| {
                    s["name"]
                        .as_str()?
                        .strip_prefix(&format!("{name}/"))
                        .map(String::from)
                })
                .collect();
            out.push(Target {
                item: format!("{collection}/{object_name}"),
                collection,
                subresources,
                base,
            });
        }
    }
    out
}

async fn send(c: &kube::Client, (method, path, ct, body): &Case) -> Result<u16, String> {
    common::send_raw(c, method, path, ct, body.clone()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn random_and_mutated_bodies_never_answer_5xx() {
    let cases: usize = std::env::var("FERRY_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1500);
    let seed: u64 = std::env::var("FERRY_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let hub = TestHub::start().await;
    let c = client(&hub, "root").await;
    post_created(
        &c,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &fuzz_crd(),
    )
    .await;
    common::eventually(20, "the fuzz CRD to be served", || {
        let c = c.clone();
        async move {
            let (_, list) = call(&c, "GET", "/apis/fuzz.example.com/v1", None).await;
            list["resources"]
                .as_array()
                .is_some_and(|r| !r.is_empty())
                .then_some(())
        }
    })
    .await;

    let targets = targets(&c).await;
    assert!(targets.iter().any(|t| t.collection.contains("fuzz.example.com")));
    assert!(targets.iter().any(|t| t.collection.ends_with("deployments")));
    // One live object per resource where its base is accepted: the target of
    // updates, patches and deletes.
    let mut live = 0;
    for t in &targets {
        let (code, _) = call(&c, "POST", &t.collection, Some(&t.base)).await;
        assert!(code < 500, "creating the base {}: {code}", t.collection);
        live += usize::from(code == 201);
    }

    let mut rng = StdRng::seed_from_u64(seed);
    let mut failures = Vec::new();
    let mut codes = std::collections::BTreeMap::<u16, usize>::new();
    let mut sent = 0;
    while sent < cases {
        let batch: Vec<Case> = (0..BATCH.min(cases - sent))
            .map(|_| {
                let t = &targets[rng.random_range(0..targets.len())];
                case(&mut rng, t)
            })
            .collect();
        sent += batch.len();
        let outcomes: Vec<(Option<u16>, Option<String>)> = futures::stream::iter(batch)
            .map(|case| {
                let c = c.clone();
                async move {
                    let outcome = send(&c, &case).await;
                    let failure = match &outcome {
                        Ok(code) if *code < 500 => None,
                        _ => Some(format!(
                            "{} {} ({}) {} -> {outcome:?}",
                            case.0,
                            case.1,
                            case.2,
                            String::from_utf8_lossy(&case.3)
                        )),
                    };
                    (outcome.ok(), failure)
                }
            })
            .buffer_unordered(8)
            .collect()
            .await;
        for (code, failure) in outcomes {
            if let Some(code) = code {
                *codes.entry(code).or_default() += 1;
            }
            failures.extend(failure);
        }
        expect_status_because(
            &c,
            "GET",
            "/readyz",
            None,
            200,
            format!("/readyz after {sent} cases"),
        )
        .await;
    }
    eprintln!(
        "fuzz: {sent} cases over {} resources ({live} live objects), seed {seed}, codes {codes:?}, {} failures",
        targets.len(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {sent} requests answered 5xx or dropped (seed {seed}):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
