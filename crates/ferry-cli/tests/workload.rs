//! `kubectl ferry workload sync|cordon|uncordon|drain` and `kubectl ferry bind
//! compute`, through kubectl's plugin mechanism against a real hub: the
//! SyncTarget and the syncer's least-privilege identity are made, the manifest
//! carries what the syncer needs, the token can do no more than the syncer's
//! job, and the scheduling switches land in the SyncTarget's spec.

use std::path::Path;
use std::process::Output;

use ferry_testkit::clients::workspace_kubeconfig;
use ferry_testkit::kubectl::AsyncKubectl;
use ferry_testkit::{client_from, eventually, TestHub};
use kube::api::{Api, DynamicObject, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{json, Value};

fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

fn sync_targets() -> ApiResource {
    ar("workload.kcp.io", "v1alpha1", "SyncTarget", "synctargets")
}

async fn create_workspace(root: &kube::Client, name: &str) {
    let obj: DynamicObject = serde_json::from_value(
        json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": {"name": name}}),
    )
    .unwrap();
    Api::<DynamicObject>::all_with(
        root.clone(),
        &ar("tenancy.kcp.io", "v1alpha1", "Workspace", "workspaces"),
    )
    .create(&PostParams::default(), &obj)
    .await
    .expect("workspace created");
}

/// `kubectl ferry ARGS` with the built plugin on PATH, run off the async runtime.
async fn kubectl_ferry(kubeconfig: &Path, args: &[&str]) -> Output {
    let home = kubeconfig.parent().expect("the kubeconfig's directory");
    AsyncKubectl::new(kubeconfig.to_path_buf(), home)
        .run(&[&["ferry"], args].concat())
        .await
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

fn failed(out: &Output) -> String {
    assert!(!out.status.success(), "expected a failure: {out:?}");
    String::from_utf8_lossy(&out.stderr).to_string()
}

/// `kubectl ferry workload sync kind-east --syncer-image ferry:dev ARGS`
/// with the kubeconfig `kc`.
async fn sync_kind_east(kc: &std::path::Path, args: &[&str]) -> std::process::Output {
    let mut all = vec!["workload", "sync", "kind-east", "--syncer-image", "ferry:dev"];
    all.extend_from_slice(args);
    kubectl_ferry(kc, &all).await
}

#[tokio::test(flavor = "multi_thread")]
async fn workload_sync_registers_a_target_with_a_least_privilege_syncer_identity() {
    let hub = TestHub::start().await;
    let root = client_from(hub.kubeconfig(), None).await;
    create_workspace(&root, "my-org").await;
    let kc = workspace_kubeconfig(&hub, "root:my-org");
    let org = client_from(&kc, None).await;
    let manifest_file = hub.data_dir().join("syncer.yaml");

    // Bad input first: nothing is created.
    let err = failed(&sync_kind_east(&kc, &["--labels", "region", "-o", "-"]).await);
    assert!(err.contains("key=value"), "{err}");
    let err = failed(&sync_kind_east(&kc, &["--apiexports", "root:x:imported-apis", "-o", "-"]).await);
    assert!(err.contains("reserved"), "{err}");
    let targets = Api::<DynamicObject>::all_with(org.clone(), &sync_targets());
    assert!(targets.get_opt("kind-east").await.unwrap().is_none());

    let out = sync_kind_east(
        &kc,
        &[
            "--labels",
            "region=east",
            "--timeout",
            "20s",
            "-o",
            manifest_file.to_str().unwrap(),
        ],
    )
    .await;
    ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("kubectl apply -f"), "{stderr}");

    let target = targets.get("kind-east").await.unwrap();
    let uid = target.metadata.uid.clone().unwrap();
    assert_eq!(target.metadata.labels.as_ref().unwrap()["region"], "east");
    assert_eq!(
        target.data["spec"]["supportedAPIExports"],
        json!([{"export": "kubernetes", "path": "root:compute"}])
    );

    // The manifest: the syncer's objects, with the TMC profile's flags.
    let text = std::fs::read_to_string(&manifest_file).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let kinds: Vec<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "Namespace",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "Secret",
            "Deployment"
        ]
    );
    // Cluster-admin downstream by default, so what applications ship (wildcard
    // ClusterRoles and their bindings) installs.
    let role = docs.iter().find(|d| d["kind"] == "ClusterRole").unwrap();
    assert_eq!(
        role["rules"][0],
        json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}),
        "{role}"
    );
    let deployment = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
    let id = deployment["metadata"]["name"].as_str().unwrap().to_string();
    assert!(id.starts_with("kcp-syncer-kind-east-"), "{id}");
    assert_eq!(deployment["spec"]["replicas"], 2, "two replicas, one leading");
    let args: Vec<&str> = deployment
        .pointer("/spec/template/spec/containers/0/args")
        .and_then(Value::as_array)
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for wanted in [
        "--profile=tmc".to_string(),
        format!("--sync-target-uid={uid}"),
        "--sync-target-name=kind-east".to_string(),
        "--from-cluster=root:my-org".to_string(),
        "--qps=20".to_string(),
        "--burst=30".to_string(),
        "--enable-leader-election".to_string(),
    ] {
        assert!(args.contains(&wanted.as_str()), "{wanted} not in {args:?}");
    }

    // The identity made upstream, owned by the SyncTarget.
    let sa = Api::<DynamicObject>::namespaced_with(
        org.clone(),
        "default",
        &ar("", "v1", "ServiceAccount", "serviceaccounts"),
    )
    .get(&id)
    .await
    .unwrap();
    assert_eq!(
        sa.metadata.owner_references.as_ref().unwrap()[0].uid,
        uid,
        "the ServiceAccount is owned by the SyncTarget"
    );

    // The token in the manifest's kubeconfig does the syncer's job and no more.
    let secret = docs.iter().find(|d| d["kind"] == "Secret").unwrap();
    let kubeconfig_text = secret["stringData"]["kubeconfig"].as_str().unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(
        Kubeconfig::from_yaml(kubeconfig_text).unwrap(),
        &KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    assert!(
        !config.cluster_url.to_string().contains("/clusters/"),
        "kcp's syncer kubeconfig points at the server's root: {}",
        config.cluster_url
    );
    let base = config.cluster_url.to_string().trim_end_matches('/').to_string();
    config.cluster_url = format!("{base}/clusters/root:my-org").parse().unwrap();
    let as_syncer = kube::Client::try_from(config.clone()).unwrap();
    let mine = Api::<DynamicObject>::all_with(as_syncer.clone(), &sync_targets());
    assert!(
        mine.get("kind-east").await.is_ok(),
        "the syncer reads its SyncTarget"
    );
    let secrets = Api::<DynamicObject>::namespaced_with(
        as_syncer.clone(),
        "default",
        &ar("", "v1", "Secret", "secrets"),
    );
    match secrets.list(&Default::default()).await {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 403, "{e:?}"),
        other => panic!("the syncer's token must not list secrets in its workspace: {other:?}"),
    }
    let heartbeat = json!({"status": {"lastSyncerHeartbeatTime": ferry_api::timestamp::now()}});
    mine.patch_status(
        "kind-east",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&heartbeat),
    )
    .await
    .expect("the syncer writes its SyncTarget's status (the heartbeat)");
    // Not another workspace's.
    config.cluster_url = format!("{base}/clusters/root").parse().unwrap();
    let elsewhere = Api::<DynamicObject>::all_with(kube::Client::try_from(config).unwrap(), &sync_targets());
    assert!(
        elsewhere.list(&Default::default()).await.is_err(),
        "the token is valid in root:my-org only"
    );

    // Running it again updates in place: same uid, same identity.
    ok(&sync_kind_east(&kc, &["--labels", "region=west", "--timeout", "1s", "-o", "-"]).await);
    let again = targets.get("kind-east").await.unwrap();
    assert_eq!(again.metadata.uid.as_deref(), Some(uid.as_str()));
    assert_eq!(again.metadata.labels.as_ref().unwrap()["region"], "west");
}

#[tokio::test(flavor = "multi_thread")]
async fn cordon_uncordon_and_drain_switch_the_target_scheduling() {
    let hub = TestHub::start().await;
    let root = client_from(hub.kubeconfig(), None).await;
    create_workspace(&root, "my-org").await;
    let kc = workspace_kubeconfig(&hub, "root:my-org");
    let org = client_from(&kc, None).await;
    let targets = Api::<DynamicObject>::all_with(org.clone(), &sync_targets());
    let target: DynamicObject = serde_json::from_value(
        json!({"apiVersion": "workload.kcp.io/v1alpha1", "kind": "SyncTarget", "metadata": {"name": "kind-east"}}),
    )
    .unwrap();
    targets.create(&PostParams::default(), &target).await.unwrap();

    let spec = |t: &DynamicObject| t.data["spec"].clone();
    let out = ok(&kubectl_ferry(&kc, &["workload", "cordon", "kind-east"]).await);
    assert!(
        out.contains("synctarget.workload.kcp.io/kind-east cordoned"),
        "{out}"
    );
    assert_eq!(
        spec(&targets.get("kind-east").await.unwrap())["unschedulable"],
        true
    );

    ok(&kubectl_ferry(&kc, &["workload", "drain", "kind-east"]).await);
    let drained = spec(&targets.get("kind-east").await.unwrap());
    assert_eq!(drained["unschedulable"], true);
    assert!(drained["evictAfter"].is_string(), "{drained}");

    ok(&kubectl_ferry(&kc, &["workload", "uncordon", "kind-east"]).await);
    let back = spec(&targets.get("kind-east").await.unwrap());
    assert_eq!(back["unschedulable"], false);
    assert!(back.get("evictAfter").is_none_or(Value::is_null), "{back}");

    let err = failed(&kubectl_ferry(&kc, &["workload", "cordon", "kind-west"]).await);
    assert!(
        err.contains("SyncTarget kind-west not found in workspace root:my-org"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn bind_compute_binds_the_kubernetes_export_and_creates_a_placement() {
    let hub = TestHub::start_with(|o| o.compute_workspace = true).await;
    let root = client_from(hub.kubeconfig(), None).await;
    create_workspace(&root, "my-org").await;
    create_workspace(&root, "app").await;
    let kc = workspace_kubeconfig(&hub, "root:app");
    let app = client_from(&kc, None).await;

    let err = failed(&kubectl_ferry(&kc, &["bind", "compute", "Root::x"]).await);
    assert!(err.contains("e.g. root:my-org"), "{err}");
    let err = failed(
        &kubectl_ferry(
            &kc,
            &["bind", "compute", "root:my-org", "--namespace-selector", "x>1"],
        )
        .await,
    );
    assert!(err.contains("selector"), "{err}");

    let bind = [
        "bind",
        "compute",
        "root:my-org",
        "--location-selectors",
        "env=test",
        "--namespace-selector",
        "purpose=workload",
    ];
    let out = ok(&kubectl_ferry(&kc, &bind).await);
    assert!(out.contains("placement placement-"), "{out}");
    let bindings = Api::<DynamicObject>::all_with(
        app.clone(),
        &ar("apis.kcp.io", "v1alpha1", "APIBinding", "apibindings"),
    );
    let bound = eventually(10, "the kubernetes binding is Bound", || async {
        bindings
            .list(&Default::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|b| b.data.pointer("/spec/reference/export/path") == Some(&json!("root:compute")))
            .filter(|b| b.data.pointer("/status/phase") == Some(&json!("Bound")))
    })
    .await;
    assert_eq!(bound.data["spec"]["reference"]["export"]["name"], "kubernetes");
    let placements = Api::<DynamicObject>::all_with(
        app.clone(),
        &ar("scheduling.kcp.io", "v1alpha1", "Placement", "placements"),
    );
    let list = placements.list(&Default::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    let spec = &list.items[0].data["spec"];
    assert_eq!(spec["locationWorkspace"], "root:my-org");
    assert_eq!(
        spec["locationSelectors"],
        json!([{"matchLabels": {"env": "test"}}])
    );
    assert_eq!(
        spec["namespaceSelector"],
        json!({"matchLabels": {"purpose": "workload"}})
    );
    assert_eq!(spec["locationResource"]["resource"], "synctargets");

    // Again: the same binding and Placement, nothing added.
    ok(&kubectl_ferry(&kc, &bind).await);
    assert_eq!(placements.list(&Default::default()).await.unwrap().items.len(), 1);
    let kubernetes_bindings = bindings
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|b| b.data.pointer("/spec/reference/export/path") == Some(&json!("root:compute")))
        .count();
    assert_eq!(kubernetes_bindings, 1);
}
