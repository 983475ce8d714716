//! Registration: syncer-gen against a mailbox workspace, its manifest applied
//! with kubectl to a stand-in cluster, a syncer started from the applied
//! Secret's kubeconfig; and the token it minted is confined to that mailbox.

use std::process::Command;
use std::time::Duration;

use ferry_hub::kubeconfig::{kubeconfig, AuthInfo};
use ferry_hub::testing::{eventually, TestHub};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

fn write_kubeconfig(hub: &TestHub, workspace: &str, file: &str) -> std::path::PathBuf {
    let path = hub.data_dir().join(file);
    let text = kubeconfig(
        "hub",
        &format!("{}/clusters/{workspace}", hub.url()),
        &hub.running.ca_pem,
        AuthInfo::Token(hub.running.admin_token.clone()),
        "hub",
        None,
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn ferry(args: &[&str], kubeconfig: &std::path::Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .output()
        .unwrap()
}

/// What registering `florin` left: its mailbox, the manifest, the stand-in
/// cluster it was applied to and the upstream kubeconfig its Secret holds.
struct Registered {
    mailbox: String,
    manifest: std::path::PathBuf,
    florin: TestHub,
    upstream: kube::Config,
    imw_kubeconfig: std::path::PathBuf,
    mailbox_kubeconfig: std::path::PathBuf,
}

/// `ferry ensure location florin` in root:imw1, `ferry syncer-gen florin`
/// in its mailbox, and the manifest applied with kubectl to a stand-in cluster.
async fn register_florin(hub: &TestHub) -> Registered {
    let root = hub.client("root").await;
    let ws_ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("tenancy.kcp.io", "v1alpha1", "Workspace"),
        "workspaces",
    );
    let workspaces: Api<DynamicObject> = Api::all_with(root.clone(), &ws_ar);
    let imw =
        json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": {"name": "imw1"}});
    workspaces
        .patch("imw1", &PatchParams::apply("test"), &Patch::Apply(&imw))
        .await
        .unwrap();
    let imw_kc = write_kubeconfig(hub, "root:imw1", "imw1.kubeconfig");
    let out = ferry(
        &["ensure", "location", "florin", "loc-name=florin", "env=prod"],
        &imw_kc,
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mailbox = eventually(20, "the mailbox workspace", || {
        let workspaces = workspaces.clone();
        async move {
            workspaces
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .find_map(|w| {
                    let ann = w.metadata.annotations.clone().unwrap_or_default();
                    (ann.get("edge.kubestellar.io/sync-target-name")
                        .map(String::as_str)
                        == Some("florin")
                        && w.data["status"]["phase"] == "Ready")
                        .then(|| w.metadata.name.clone().unwrap())
                })
        }
    })
    .await;
    let mb_kc = write_kubeconfig(hub, &format!("root:{mailbox}"), "mailbox.kubeconfig");
    let manifest = hub.data_dir().join("florin-syncer.yaml");
    let out = ferry(
        &[
            "syncer-gen",
            "florin",
            "--syncer-image",
            "ferry:dev",
            "-o",
            manifest.to_str().unwrap(),
        ],
        &mb_kc,
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("kubectl apply -f"),
        "prints the next commands: {said}"
    );

    // The stand-in cluster: kubectl apply -f the manifest.
    let florin = TestHub::start().await;
    let applied = florin.kubectl(&["apply", "-f", manifest.to_str().unwrap()]);
    assert!(
        applied.status.success(),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );
    let secrets = Api::<Secret>::all(florin.client("root").await)
        .list(&ListParams::default())
        .await
        .unwrap();
    let secret = secrets
        .items
        .iter()
        .find(|s| s.data.as_ref().is_some_and(|d| d.contains_key("kubeconfig")))
        .expect("the kubeconfig Secret");
    let upstream_text = String::from_utf8(secret.data.as_ref().unwrap()["kubeconfig"].0.clone()).unwrap();
    let upstream = kube::Config::from_custom_kubeconfig(
        Kubeconfig::from_yaml(&upstream_text).unwrap(),
        &KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    Registered {
        mailbox,
        manifest,
        florin,
        upstream,
        imw_kubeconfig: imw_kc,
        mailbox_kubeconfig: mb_kc,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn syncer_gen_manifest_installs_a_working_confined_syncer() {
    let hub = TestHub::start().await;
    let Registered {
        mailbox,
        manifest,
        florin,
        upstream,
        imw_kubeconfig,
        mailbox_kubeconfig,
    } = register_florin(&hub).await;

    // Outside a mailbox workspace: an immediate, clear failure.
    let out = ferry(
        &["syncer-gen", "florin", "--syncer-image", "ferry:dev", "-o", "-"],
        &imw_kubeconfig,
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("mailbox workspace"), "{err}");
    // Wrong SyncTarget name for this mailbox: says which one it belongs to.
    let out = ferry(
        &["syncer-gen", "guilder", "--syncer-image", "ferry:dev", "-o", "-"],
        &mailbox_kubeconfig,
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("florin"));

    // Two replicas electing a leader, allowed to hold their Lease.
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    let deployment = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
    assert_eq!(deployment["spec"]["replicas"], 2);
    let args = deployment
        .pointer("/spec/template/spec/containers/0/args")
        .unwrap();
    assert!(
        args.as_array()
            .unwrap()
            .iter()
            .any(|a| a == "--enable-leader-election"),
        "{args}"
    );
    let role = docs.iter().find(|d| d["kind"] == "Role").unwrap();
    assert_eq!(role["rules"][0]["resources"], serde_json::json!(["leases"]));
    let rules = florin.kubectl(&["get", "roles", "-A", "-o", "name"]);
    assert!(
        String::from_utf8_lossy(&rules.stdout).contains("-leader-election"),
        "the leader election Role is applied: {}",
        String::from_utf8_lossy(&rules.stderr)
    );

    // The syncer, configured as its pod would be.
    let fc = florin.client("root").await;
    assert!(
        upstream.cluster_url.to_string().contains(&mailbox),
        "the upstream URL includes the workspace path"
    );
    let down_kc = Kubeconfig::read_from(florin.kubeconfig()).unwrap();
    let downstream = kube::Config::from_custom_kubeconfig(down_kc, &KubeConfigOptions::default())
        .await
        .unwrap();

    // That token reaches its mailbox, and nothing else.
    let token_client = kube::Client::try_from(upstream.clone()).unwrap();
    Api::<ConfigMap>::namespaced(token_client.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap();
    for other in ["root", "root:imw1", "*"] {
        let mut c = upstream.clone();
        let base = hub.url().to_string();
        c.cluster_url = format!("{base}/clusters/{other}").parse().unwrap();
        let api: Api<ConfigMap> = Api::all(kube::Client::try_from(c).unwrap());
        match api.list(&ListParams::default()).await {
            Err(kube::Error::Api(e)) => assert_eq!(e.code, 403, "{other}: {}", e.message),
            other_result => panic!("the mailbox token must get 403 in {other}, got {other_result:?}"),
        }
    }

    let mut opts = ferry_syncer::SyncerOptions::new(upstream, downstream, "florin");
    opts.heartbeat_period = Duration::from_secs(1);
    let syncer = ferry_syncer::start(opts).await.unwrap();

    let mb = hub.client(&format!("root:{mailbox}")).await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "hello", "namespace": "default"}, "data": {"k": "v"}});
    Api::<ConfigMap>::namespaced(mb.clone(), "default")
        .patch("hello", &PatchParams::apply("test"), &Patch::Apply(&cm))
        .await
        .unwrap();
    let config = json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "SyncerConfig", "metadata": {"name": "the-one"},
        "spec": {"namespaceScope": {"namespaces": ["default"], "resources": [{"group": "", "resource": "configmaps", "apiVersion": "v1"}, {"group": "apps", "resource": "deployments", "apiVersion": "v1"}]}}});
    apply_the_one(&mb, &config).await;

    let landed = Api::<ConfigMap>::namespaced(fc.clone(), "default");
    eventually(20, "the ConfigMap on florin", || {
        let landed = landed.clone();
        async move { landed.get_opt("hello").await.ok().flatten() }
    })
    .await;

    // A Deployment lands, and the status the cluster reports returns to the mailbox.
    let web = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    let up_deploys = Api::<Deployment>::namespaced(mb.clone(), "default");
    up_deploys
        .patch("web", &PatchParams::apply("test"), &Patch::Apply(&web))
        .await
        .unwrap();
    let down_deploys = Api::<Deployment>::namespaced(fc.clone(), "default");
    eventually(20, "the Deployment on florin", || {
        let down_deploys = down_deploys.clone();
        async move { down_deploys.get_opt("web").await.ok().flatten() }
    })
    .await;
    let status = json!({"status": {"replicas": 2, "availableReplicas": 2, "readyReplicas": 2}});
    down_deploys
        .patch_status("web", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    eventually(20, "the reported status in the mailbox", || {
        let up_deploys = up_deploys.clone();
        async move {
            let d = up_deploys.get("web").await.ok()?;
            (d.status?.available_replicas == Some(2)).then_some(())
        }
    })
    .await;
    syncer.stop().await;
}

/// Server-side apply `config` as the mailbox's SyncerConfig `the-one`.
async fn apply_the_one(mb: &kube::Client, config: &serde_json::Value) {
    let sc_ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("edge.kubestellar.io", "v2alpha1", "SyncerConfig"),
        "syncerconfigs",
    );
    Api::<DynamicObject>::all_with(mb.clone(), &sc_ar)
        .patch("the-one", &PatchParams::apply("test"), &Patch::Apply(config))
        .await
        .unwrap();
}

/// `method path` with a JSON body through `client`; the status code and body.
async fn send(client: &kube::Client, method: &str, path: &str, body: &serde_json::Value) -> (u16, String) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(kube::client::Body::from(serde_json::to_vec(body).unwrap()))
        .unwrap();
    let resp = client.send(req).await.expect("an answer");
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect_bytes().await.unwrap_or_default();
    (code, String::from_utf8_lossy(&bytes).into_owned())
}

/// The token a syncer's manifest carries is what an attacker on the workload
/// cluster gets: it must not mint tokens, make identities or workspaces, or
/// grant itself anything in its mailbox — while the syncer still upsyncs
/// exactly what the mailbox's SyncerConfig asks for.
#[tokio::test(flavor = "multi_thread")]
async fn the_mailbox_token_cannot_mint_tokens_make_workspaces_or_grant_itself() {
    let hub = TestHub::start().await;
    let Registered {
        mailbox,
        florin,
        upstream,
        ..
    } = register_florin(&hub).await;
    let stolen = kube::Client::try_from(upstream.clone()).unwrap();
    let ns = "/api/v1/namespaces/default";
    let attempts = [
        (
            "a ServiceAccount",
            format!("{ns}/serviceaccounts"),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "mint"}}),
        ),
        (
            "a token for the default ServiceAccount",
            format!("{ns}/serviceaccounts/default/token"),
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"audiences": []}}),
        ),
        (
            "a service-account-token Secret",
            format!("{ns}/secrets"),
            json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
                   "metadata": {"name": "mint", "annotations": {"kubernetes.io/service-account.name": "default"}}}),
        ),
        (
            "a child workspace",
            "/apis/tenancy.kcp.io/v1alpha1/workspaces".to_string(),
            json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": {"name": "mine"}}),
        ),
        (
            "a ClusterRoleBinding to cluster-admin",
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings".to_string(),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "mine"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                   "subjects": [{"kind": "Group", "name": "system:serviceaccounts", "apiGroup": "rbac.authorization.k8s.io"}]}),
        ),
    ];
    for (what, path, body) in &attempts {
        let (code, answer) = send(&stolen, "POST", path, body).await;
        assert_eq!(code, 403, "the syncer's token made {what}: {answer}");
    }

    // Positive twin: the syncer upsyncs what the SyncerConfig asks for, and
    // the rights to do so follow the SyncerConfig (Secrets never).
    let mb = hub.client(&format!("root:{mailbox}")).await;
    let config = json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "SyncerConfig", "metadata": {"name": "the-one"},
        "spec": {"upsync": [{"apiGroup": "", "resources": ["configmaps", "secrets"], "namespaces": ["reports"], "names": ["*"]}]}});
    apply_the_one(&mb, &config).await;
    let roles = Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(mb.clone());
    let rules = eventually(20, "the upsync ClusterRole naming configmaps", || {
        let roles = roles.clone();
        async move {
            let role = roles.get_opt("kubestellar-syncer-upsync").await.ok().flatten()?;
            let rules = serde_json::to_string(&role.rules?).ok()?;
            rules.contains("configmaps").then_some(rules)
        }
    })
    .await;
    assert!(
        !rules.contains("secrets"),
        "Secrets are never upsync-writable: {rules}"
    );
    let (code, answer) = send(
        &stolen,
        "POST",
        &format!("{ns}/secrets"),
        &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "plain"}}),
    )
    .await;
    assert_eq!(
        code, 403,
        "a SyncerConfig naming secrets does not let the token write them: {answer}"
    );

    let downstream = kube::Config::from_custom_kubeconfig(
        Kubeconfig::read_from(florin.kubeconfig()).unwrap(),
        &KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    let mut opts = ferry_syncer::SyncerOptions::new(upstream, downstream, "florin");
    opts.heartbeat_period = Duration::from_secs(1);
    let syncer = ferry_syncer::start(opts).await.unwrap();
    let fc = florin.client("root").await;
    let namespaces = Api::<k8s_openapi::api::core::v1::Namespace>::all(fc.clone());
    namespaces
        .patch(
            "reports",
            &PatchParams::apply("test"),
            &Patch::Apply(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "reports"}})),
        )
        .await
        .unwrap();
    let report = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "report", "namespace": "reports"}, "data": {"ok": "yes"}});
    Api::<ConfigMap>::namespaced(fc.clone(), "reports")
        .patch("report", &PatchParams::apply("test"), &Patch::Apply(&report))
        .await
        .unwrap();
    let up = Api::<ConfigMap>::namespaced(mb.clone(), "reports");
    eventually(20, "the upsynced ConfigMap in the mailbox", || {
        let up = up.clone();
        async move { up.get_opt("report").await.ok().flatten() }
    })
    .await;
    syncer.stop().await;
}

/// By default the syncer's identity on the workload cluster is cluster-admin,
/// as KubeStellar's is: applications ship RBAC with `*` rules, and a syncer
/// holding less could not install them.
#[tokio::test(flavor = "multi_thread")]
async fn the_downstream_identity_can_install_rbac_that_grants_everything() {
    let hub = TestHub::start().await;
    let Registered { manifest, florin, .. } = register_florin(&hub).await;
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    let sa = docs.iter().find(|d| d["kind"] == "ServiceAccount").unwrap();
    let (name, namespace) = (
        sa["metadata"]["name"].as_str().unwrap(),
        sa["metadata"]["namespace"].as_str().unwrap(),
    );
    let sas =
        Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(florin.client("root").await, namespace);
    let request: k8s_openapi::api::authentication::v1::TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": []}})).unwrap();
    let token = sas
        .create_token_request(name, &Default::default(), &request)
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    let mut config = kube::Config::from_custom_kubeconfig(
        Kubeconfig::read_from(florin.kubeconfig()).unwrap(),
        &KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    config.auth_info.token = Some(token.into());
    let as_syncer = kube::Client::try_from(config).unwrap();
    let (code, answer) = send(
        &as_syncer,
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "argocd-application-controller"},
               "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, {"nonResourceURLs": ["*"], "verbs": ["*"]}]}),
    )
    .await;
    assert_eq!(code, 201, "the syncer installs a wildcard ClusterRole: {answer}");
}
