//! KubeStellar's "KubeStellar-Syncer" docs-ecutable document (release-0.14),
//! run in its order with real kubectl: `kubestellar init`, the inventory in
//! `root:imw1`, the mailbox workspaces (bound to `root:espw` as `bind-edge`),
//! syncer-gen in each mailbox, the manifests applied to the two clusters, the
//! syncers running, the manual route's `bind-espw`, and the teardown.
//!
//! Substitutions: `kubectl ferry` for `kubectl kubestellar` (and for the
//! `kubectl-kubestellar-syncer_gen` binary), `kubectl ferry kubestellar init`
//! for `kubestellar init`, `kubectl ferry ws` for kcp's `kubectl ws`, hubs for
//! the kind clusters florin and guilder (each its own cluster), `jq` done in
//! Rust, and each syncer pod run as its kubelet would run it: the Deployment's
//! container arguments, its Secret volumes as files, its ServiceAccount's
//! token, and its readiness probe deciding the Deployment's ready replicas.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use common::kubectl::{admin_copy, Kubectl};
use ferry_testkit::net::free_port;
use ferry_testkit::{eventually, TestHub};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{json, Value};

/// A cluster standing in for a kind cluster: a hub of its own, with no
/// KubeStellar controllers.
async fn kind_cluster() -> TestHub {
    TestHub::start_with(|o| {
        o.mailbox_controller = false;
        o.placement_translator = false;
    })
    .await
}

/// The namespace and Deployment a syncer-gen run's printed hint names:
/// KubeStellar's `kubectl get deployment -n "NS" NAME`, or
/// `kubectl -n NS rollout status deployment/NAME`.
fn hinted_deployment(said: &str) -> Option<(String, String)> {
    said.lines()
        .filter(|l| l.contains("deployment"))
        .find_map(|line| {
            let words: Vec<&str> = line.split_whitespace().map(|w| w.trim_matches('"')).collect();
            let ns = words
                .iter()
                .position(|w| *w == "-n" || *w == "--namespace")
                .and_then(|i| words.get(i + 1))?;
            let name = words
                .iter()
                .find_map(|w| w.strip_prefix("deployment/"))
                .or_else(|| {
                    let at = words.iter().position(|w| *w == "deployment")?;
                    let mut rest = words[at + 1..].iter();
                    while let Some(w) = rest.next() {
                        if *w == "-n" || *w == "--namespace" {
                            rest.next();
                        } else if !w.starts_with('-') {
                            return Some(*w);
                        }
                    }
                    None
                })?;
            Some((ns.to_string(), name.to_string()))
        })
}

#[test]
fn both_hint_forms_name_the_deployment() {
    let ks = "to apply it. Use\n\n  KUBECONFIG=<workload-execution-cluster-config> kubectl get deployment -n \"kubestellar-syncer-guilder-wfeig2lv\" kubestellar-syncer-guilder-wfeig2lv\n";
    assert_eq!(
        hinted_deployment(ks),
        Some((
            "kubestellar-syncer-guilder-wfeig2lv".into(),
            "kubestellar-syncer-guilder-wfeig2lv".into()
        ))
    );
    let ferry = "  kubectl apply -f x.yaml\n  kubectl -n ns-a rollout status deployment/dep-a\n";
    assert_eq!(hinted_deployment(ferry), Some(("ns-a".into(), "dep-a".into())));
}

/// A syncer pod's process; stopped (killed) when dropped.
struct Pod {
    child: Child,
    health: String,
}

impl Drop for Pod {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the pods of Deployment `ns`/`name` on `cluster` as a kubelet would:
/// every replica is `ferry syncer` with the container's arguments, its
/// Secret volumes as files under `dir` (mount paths rewritten to them), the
/// `NAMESPACE` its env takes from the pod, and its ServiceAccount's token
/// as the in-cluster identity; once a replica's readiness probe answers, the
/// Deployment reports it ready.
async fn run_pods(cluster: &TestHub, ns: &str, name: &str, dir: &Path) -> Vec<Pod> {
    let admin = cluster.client("root").await;
    let deployment = Api::<Deployment>::namespaced(admin.clone(), ns)
        .get(name)
        .await
        .unwrap();
    let spec = deployment.spec.clone().unwrap();
    let pod = spec.template.spec.clone().unwrap();
    let container = &pod.containers[0];
    let root = dir.join(format!("{ns}-pod"));
    let mut mounts: Vec<(String, PathBuf)> = Vec::new();
    for mount in container.volume_mounts.clone().unwrap_or_default() {
        let volume = pod
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == mount.name)
            .unwrap();
        let secret_name = volume.secret.as_ref().unwrap().secret_name.clone().unwrap();
        let secret = Api::<Secret>::namespaced(admin.clone(), ns)
            .get(&secret_name)
            .await
            .unwrap();
        let local = root.join(mount.mount_path.trim_start_matches('/'));
        std::fs::create_dir_all(&local).unwrap();
        for (key, value) in secret.data.unwrap_or_default() {
            std::fs::write(local.join(key), value.0).unwrap();
        }
        mounts.push((mount.mount_path.clone(), local));
    }
    // The in-cluster identity: a token for the pod's ServiceAccount.
    let sa = pod.service_account_name.clone().unwrap();
    let request: TokenRequest = serde_json::from_value(json!({"spec": {"audiences": []}})).unwrap();
    let token = Api::<ServiceAccount>::namespaced(admin.clone(), ns)
        .create_token_request(&sa, &PostParams::default(), &request)
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    let in_cluster = root.join("in-cluster.kubeconfig");
    std::fs::write(
        &in_cluster,
        ferry_hub::kubeconfig::kubeconfig(
            "in-cluster",
            &format!("{}/clusters/root", cluster.url()),
            &cluster.running.ca_pem,
            ferry_hub::kubeconfig::AuthInfo::Token(token),
            "in-cluster",
            None,
        ),
    )
    .unwrap();
    let replicas = spec.replicas.unwrap_or(1);
    let mut pods = Vec::new();
    for i in 0..replicas {
        let port = free_port();
        // The image's entrypoint is `ferry`: the command after it, then the args.
        let command = container.command.clone().unwrap_or_default();
        let args: Vec<String> = command
            .into_iter()
            .skip(1)
            .chain(container.args.clone().unwrap_or_default())
            .map(|a| {
                if a.starts_with("--health-address") {
                    return format!("--health-address=127.0.0.1:{port}");
                }
                mounts.iter().fold(a, |a, (path, local)| {
                    a.replace(path.as_str(), local.to_str().unwrap())
                })
            })
            .collect();
        let log = std::fs::File::create(root.join(format!("replica-{i}.log"))).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_ferry"))
            .args(&args)
            .arg("--to-kubeconfig")
            .arg(&in_cluster)
            .env("NAMESPACE", ns)
            .env("HOSTNAME", format!("{name}-{i}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        pods.push(Pod {
            child,
            health: format!("http://127.0.0.1:{port}/readyz"),
        });
    }
    // The kubelet: ready replicas are those whose readiness probe answers.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    for (i, pod) in pods.iter().enumerate() {
        while !http_get_ok(&pod.health).await {
            if std::time::Instant::now() > deadline {
                let log = std::fs::read_to_string(root.join(format!("replica-{i}.log"))).unwrap_or_default();
                panic!("replica {i} of {ns}/{name} never became ready; its log:\n{log}");
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
    let status = json!({"status": {"replicas": replicas, "readyReplicas": replicas,
        "availableReplicas": replicas, "updatedReplicas": replicas,
        "observedGeneration": deployment.metadata.generation}});
    Api::<Deployment>::namespaced(admin, ns)
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    pods
}

/// Whether a plain-HTTP GET of `url` answers 200.
async fn http_get_ok(url: &str) -> bool {
    let url = url.to_string();
    tokio::task::spawn_blocking(move || {
        let Some(rest) = url.strip_prefix("http://") else {
            return false;
        };
        let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
        use std::io::{Read, Write};
        let Ok(mut s) = std::net::TcpStream::connect(host) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(2)));
        if write!(s, "GET /{path} HTTP/1.0\r\nHost: {host}\r\n\r\n").is_err() {
            return false;
        }
        let mut buf = String::new();
        let _ = s.read_to_string(&mut buf);
        buf.starts_with("HTTP/1.1 200") || buf.starts_with("HTTP/1.0 200")
    })
    .await
    .unwrap_or(false)
}

/// The document's "Register KubeStellar-Syncer on the target clusters" for
/// `name`: find the mailbox from root:imw1, syncer-gen there, apply the
/// manifest to the cluster, and check the syncer is running.
async fn register(
    k: &Kubectl,
    hub: &TestHub,
    cluster: &TestHub,
    name: &str,
    mailbox: &str,
    dir: &Path,
) -> Vec<Pod> {
    assert!(k
        .ok(&["ferry", "ws", "root:imw1"])
        .contains("Current workspace is \"root:imw1\""));
    let listed = k.ok(&["get", "synctargets.edge.kubestellar.io"]);
    assert!(
        listed.contains("florin") && listed.contains("guilder"),
        "{listed}"
    );
    let described = k.ok(&["describe", "synctargets.edge.kubestellar.io", name]);
    assert!(described.contains(&format!("id={name}")), "{described}");
    let mbws = k.ok(&[
        "get",
        "synctargets.edge.kubestellar.io",
        name,
        "-o",
        r"jsonpath={.metadata.annotations['kcp\.io/cluster']}-mb-{.metadata.uid}",
    ]);
    assert_eq!(
        mbws, mailbox,
        "the mailbox name from the SyncTarget, as the document builds it"
    );

    // kubectl ws root:$mbws; syncer-gen there.
    k.ok(&["ferry", "ws", &format!("root:{mbws}")]);
    assert_eq!(
        k.ok(&[
            "get",
            "apibindings",
            "bind-edge",
            "-o",
            "jsonpath={.status.phase}"
        ]),
        "Bound",
        "the mailbox controller bound root:espw's export as bind-edge"
    );
    let manifest = format!("{name}-syncer.yaml");
    let out = k.run(&[
        "ferry",
        "syncer-gen",
        name,
        "--syncer-image",
        "quay.io/kubestellar/syncer:v0.2.2",
        "-o",
        &manifest,
    ]);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    let (ns, deployment) =
        hinted_deployment(&said).unwrap_or_else(|| panic!("no deployment hint in: {said}"));

    // KUBECONFIG=~/.kube/config kubectl --context kind-<name> apply -f <name>-syncer.yaml
    let on_cluster = Kubectl::new(cluster.kubeconfig(), dir);
    let applied = on_cluster.ok(&["apply", "-f", &manifest]);
    for line in [
        format!("namespace/{ns} created"),
        format!("deployment.apps/{deployment} created"),
    ] {
        assert!(applied.contains(&line), "{line} in:\n{applied}");
    }
    assert!(
        applied.contains("serviceaccount/") && applied.contains("secret/"),
        "{applied}"
    );
    let pods = run_pods(cluster, &ns, &deployment, dir).await;

    // kubectl get deploy -A: the syncer's Deployment, all replicas ready.
    let deploys = on_cluster.ok(&["get", "deploy", "-A"]);
    let row: Vec<&str> = deploys
        .lines()
        .find(|l| l.starts_with(&format!("{ns} ")))
        .unwrap_or_else(|| panic!("no row for {ns} in:\n{deploys}"))
        .split_whitespace()
        .collect();
    assert_eq!(row[1], deployment, "{deploys}");
    let (ready, want) = row[2].split_once('/').unwrap();
    assert_eq!(ready, want, "READY {} in:\n{deploys}", row[2]);

    // The syncer consumes the mailbox's SyncerConfigs: what one selects lands.
    let mb = hub.client(&format!("root:{mbws}")).await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "docs-ecutable", "namespace": "default"}, "data": {"cluster": name}});
    Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(mb.clone(), "default")
        .patch("docs-ecutable", &PatchParams::apply("doc"), &Patch::Apply(&cm))
        .await
        .unwrap();
    let sc = json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "SyncerConfig",
        "metadata": {"name": "docs-ecutable"},
        "spec": {"namespaceScope": {"namespaces": ["default"],
            "resources": [{"group": "", "resource": "configmaps", "apiVersion": "v1"}]}}});
    Api::<kube::api::DynamicObject>::all_with(
        mb,
        &ferry_cli::ar("edge.kubestellar.io", "v2alpha1", "SyncerConfig", "syncerconfigs"),
    )
    .patch("docs-ecutable", &PatchParams::apply("doc"), &Patch::Apply(&sc))
    .await
    .unwrap();
    let landed =
        Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(cluster.client("root").await, "default");
    eventually(30, &format!("the mailbox's ConfigMap on {name}"), || {
        let landed = landed.clone();
        async move { landed.get_opt("docs-ecutable").await.ok().flatten() }
    })
    .await;
    pods
}

#[tokio::test(flavor = "multi_thread")]
async fn kubestellar_syncer_document_runs_as_written() {
    // "Create two kind clusters."
    let florin = kind_cluster().await;
    let guilder = kind_cluster().await;

    // "Deploy kcp and KubeStellar as bare processes": the hub; wait until
    // `kubectl ws tree` answers.
    let hub = TestHub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = admin_copy(&hub, dir.path());
    let k = Kubectl::new(&kubeconfig, dir.path());
    eventually(10, "kubectl ws tree", || {
        let k = &k;
        async move { k.run(&["ferry", "ws", "tree"]).status.success().then_some(()) }
    })
    .await;

    // "kubestellar init": the ESPW exporting the KubeStellar API, and root:imw1.
    let init = k.ok(&["ferry", "kubestellar", "init"]);
    assert!(init.contains("root:espw") && init.contains("root:imw1"), "{init}");

    // "Create SyncTarget and Location objects to represent the florin and guilder clusters"
    k.ok(&["ferry", "ws", "root:imw1"]);
    k.ok(&[
        "ferry",
        "ensure",
        "location",
        "florin",
        "loc-name=florin",
        "env=prod",
    ]);
    k.ok(&[
        "ferry",
        "ensure",
        "location",
        "guilder",
        "loc-name=guilder",
        "env=prod",
        "extended=yes",
    ]);
    let described = k.ok(&["describe", "location.edge.kubestellar.io", "florin"]);
    for text in ["florin", "env=prod", "loc-name=florin"] {
        assert!(described.contains(text), "{text} in:\n{described}");
    }
    // "equivalent to creating the following four objects plus the kcp
    // APIBinding objects that import the definition of the KubeStellar API"
    let target: Value =
        serde_json::from_str(&k.ok(&["get", "synctargets.edge.kubestellar.io", "guilder", "-o", "json"]))
            .unwrap();
    assert_eq!(
        target["metadata"]["labels"],
        json!({"id": "guilder", "loc-name": "guilder", "env": "prod", "extended": "yes"})
    );
    let location: Value =
        serde_json::from_str(&k.ok(&["get", "location.edge.kubestellar.io", "guilder", "-o", "json"]))
            .unwrap();
    assert_eq!(
        location["spec"]["resource"],
        json!({"group": "edge.kubestellar.io", "version": "v2alpha1", "resource": "synctargets"})
    );
    assert_eq!(
        location["spec"]["instanceSelector"],
        json!({"matchLabels": {"id": "guilder"}})
    );
    let bindings = k.ok(&["get", "apibindings", "-o", "jsonpath={.items[*].metadata.name}"]);
    assert!(bindings.split(' ').any(|b| b == "bind-espw"), "{bindings}");
    // "That script also deletes the Location named default"
    let names = k.ok(&[
        "get",
        "locations.edge.kubestellar.io",
        "-o",
        "jsonpath={.items[*].metadata.name}",
    ]);
    assert_eq!(names, "florin guilder");

    // "The mailbox controller": already running in the hub.
    k.ok(&["ferry", "ws", "root:espw"]);
    k.ok(&["ferry", "ws", "root"]);
    eventually(30, "two mailbox workspaces in `kubectl ws tree`", || {
        let k = &k;
        async move {
            let tree = k.ok(&["ferry", "ws", "tree"]);
            (tree.lines().filter(|l| l.contains("-mb-")).count() == 2).then_some(())
        }
    })
    .await;
    eventually(30, "every workspace Ready", || {
        let k = &k;
        async move {
            let listed = k.ok(&["get", "Workspaces"]);
            let rows: Vec<&str> = listed.lines().skip(1).collect();
            (rows.len() >= 4 && rows.iter().all(|r| r.contains("Ready"))).then_some(listed)
        }
    })
    .await;
    let listed = k.ok(&["get", "Workspaces"]);
    for ws in ["espw", "imw1"] {
        let row = listed
            .lines()
            .find(|l| l.starts_with(&format!("{ws} ")))
            .unwrap_or_else(|| panic!("{ws} in:\n{listed}"));
        assert!(row.contains("organization"), "{row}");
    }
    let columns = k.ok(&[
        "get",
        "Workspace",
        "-o",
        r"custom-columns=NAME:.metadata.name,SYNCTARGET:.metadata.annotations['edge\.kubestellar\.io/sync-target-name'],CLUSTER:.spec.cluster",
    ]);
    let synctarget_of = |ws: &str| -> String {
        columns
            .lines()
            .find(|l| l.starts_with(&format!("{ws} ")))
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(synctarget_of("espw"), "<none>", "{columns}");
    // GUILDER_WS / FLORIN_WS, found by the sync-target-name annotation (the document's jq).
    let all: Value = serde_json::from_str(&k.ok(&["get", "Workspace", "-o", "json"])).unwrap();
    let mailbox_of = |target: &str| -> String {
        all["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["metadata"]["annotations"]["edge.kubestellar.io/sync-target-name"] == target)
            .and_then(|w| w["metadata"]["name"].as_str())
            .unwrap_or_else(|| panic!("no mailbox for {target}"))
            .to_string()
    };
    let (guilder_ws, florin_ws) = (mailbox_of("guilder"), mailbox_of("florin"));
    assert!(guilder_ws.contains("-mb-") && florin_ws.contains("-mb-"));
    assert_eq!(synctarget_of(&guilder_ws), "guilder", "{columns}");
    assert_eq!(synctarget_of(&florin_ws), "florin", "{columns}");

    // "Register KubeStellar-Syncer on the target clusters": guilder, then florin.
    let guilder_pods = register(&k, &hub, &guilder, "guilder", &guilder_ws, dir.path()).await;
    let florin_pods = register(&k, &hub, &florin, "florin", &florin_ws, dir.path()).await;

    // The manual route's APIBinding to root:espw, in a fresh workspace.
    k.ok(&["ferry", "ws", "root"]);
    k.ok(&["ferry", "ws", "create", "ws1", "--enter"]);
    let binding = "apiVersion: apis.kcp.io/v1alpha1\nkind: APIBinding\nmetadata:\n  name: bind-espw\nspec:\n  reference:\n    export:\n      path: root:espw\n      name: edge.kubestellar.io\n";
    let file = dir.path().join("bind-espw.yaml");
    std::fs::write(&file, binding).unwrap();
    k.ok(&["apply", "-f", file.to_str().unwrap()]);
    eventually(20, "bind-espw Bound in root:ws1", || {
        let k = &k;
        async move {
            (k.ok(&[
                "get",
                "apibindings",
                "bind-espw",
                "-o",
                "jsonpath={.status.phase}",
            ]) == "Bound")
                .then_some(())
        }
    })
    .await;
    eventually(20, "EdgePlacements served in root:ws1", || {
        let k = &k;
        async move { k.run(&["get", "edgeplacements"]).status.success().then_some(()) }
    })
    .await;

    // "Teardown the environment"
    for f in ["florin-syncer.yaml", "guilder-syncer.yaml"] {
        std::fs::remove_file(dir.path().join(f)).unwrap();
    }
    k.ok(&["ferry", "ws", "root"]);
    let gone = k.run(&["delete", "workspace", "example-imw"]);
    assert!(
        String::from_utf8_lossy(&gone.stderr).contains("NotFound"),
        "this document made no example-imw"
    );
    let removed = k.ok(&["ferry", "kubestellar", "remove", "wmw", "example-wmw"]);
    assert!(removed.contains("does not exist"), "{removed}");
    drop((guilder_pods, florin_pods));
    drop((florin, guilder));
}
