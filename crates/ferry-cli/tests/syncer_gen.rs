//! Registration: syncer-gen against a mailbox workspace or one made by hand,
//! its manifest applied with kubectl to a stand-in cluster, a syncer started
//! from the applied Secret's kubeconfig; and the token it minted is confined
//! to that workspace.

#[path = "common/edge_syncer.rs"]
mod edge_syncer;

use std::time::Duration;

use edge_syncer::{admin_kubeconfig, ferry, kubeconfig_at, manifest_docs, ok, run_as_pod, run_as_pod_for};
use ferry_testkit::clients::{call, expect_status_because};
use ferry_testkit::tmc::{expect_merge_patch, merge_patch};
use ferry_testkit::{eventually, TestHub};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

/// What registering `florin` left: its mailbox, the manifest, the stand-in
/// cluster it was applied to and the upstream kubeconfig its Secret holds.
struct Registered {
    mailbox: String,
    manifest: std::path::PathBuf,
    florin: TestHub,
    upstream: kube::Config,
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
    let imw_kc = admin_kubeconfig(hub, "root:imw1", "imw1.kubeconfig");
    let out = ferry(
        &["ensure", "location", "florin", "loc-name=florin", "env=prod"],
        &imw_kc,
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mailbox = edge_syncer::mailbox_of(hub, "florin").await;
    let mb_kc = admin_kubeconfig(hub, &format!("root:{mailbox}"), "mailbox.kubeconfig");
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
        mailbox_kubeconfig,
        ..
    } = register_florin(&hub).await;

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
/// florin's manifest run as guilder's syncer (`--sync-target-name guilder`
/// against florin's mailbox) stops at once with one error naming both, rather
/// than syncing florin's workloads into guilder's cluster; run as florin's it
/// starts syncing.
#[tokio::test(flavor = "multi_thread")]
async fn the_syncer_refuses_a_mailbox_that_is_not_its_sync_targets() {
    let hub = TestHub::start().await;
    let Registered {
        manifest,
        florin,
        mailbox,
        ..
    } = register_florin(&hub).await;
    let dir = tempfile::tempdir().unwrap();
    let mut wrong = run_as_pod_for(&manifest, &florin, dir.path(), Some("guilder")).await;
    let status = eventually(30, "the syncer run as guilder to stop", || {
        let exited = wrong.exited();
        async move { exited }
    })
    .await;
    assert!(!status.success());
    let log = wrong.log();
    let errors: Vec<&str> = log.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(
        errors,
        [format!(
            "error: workspace root:{mailbox} is the mailbox of SyncTarget florin, not of \
             --sync-target-name guilder: point --from-kubeconfig at guilder's mailbox (`kubectl get \
             workspaces` in root shows whose each is), or run this syncer as --sync-target-name florin"
        )],
        "{log}"
    );

    // Positive twin: as florin's syncer it gets past the check and serves.
    let mut right = run_as_pod(&manifest, &florin, &dir.path().join("right")).await;
    eventually(30, "florin's syncer to start", || {
        let started = right.log().contains("serving /healthz and /readyz");
        assert_eq!(right.exited(), None, "{}", right.log());
        async move { started.then_some(()) }
    })
    .await;
}

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
        let why = format!("the syncer's token made {what}");
        expect_status_because(&stolen, "POST", path, Some(body), 403, why).await;
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
    expect_status_because(
        &stolen,
        "POST",
        &format!("{ns}/secrets"),
        Some(&json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "plain"}})),
        403,
        "a SyncerConfig naming secrets does not let the token write them",
    )
    .await;

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

/// What the syncer's token may not touch in its mailbox, each a merge patch
/// that would widen someone's rights or the syncer's own: its binding's
/// subjects, a ClusterRole's rules, a Secret, an APIBinding, the configs'
/// spec (which decides what it may upsync). `id`: the syncer's ID.
fn widening_patches(id: &str) -> Vec<(&'static str, String, serde_json::Value)> {
    let rbac = "/apis/rbac.authorization.k8s.io/v1";
    let edge = "/apis/edge.kubestellar.io/v2alpha1";
    let everyone = json!([
        {"kind": "ServiceAccount", "name": id, "namespace": "default"},
        {"kind": "Group", "name": "system:authenticated", "apiGroup": "rbac.authorization.k8s.io"},
    ]);
    vec![
        (
            "its own ClusterRoleBinding's subjects",
            format!("{rbac}/clusterrolebindings/{id}"),
            json!({"subjects": everyone}),
        ),
        (
            "its upsync binding's subjects",
            format!("{rbac}/clusterrolebindings/{id}-kubestellar-syncer-upsync"),
            json!({"subjects": everyone}),
        ),
        (
            "another ClusterRole's rules",
            format!("{rbac}/clusterroles/team"),
            json!({"rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}]}),
        ),
        (
            "a Secret",
            "/api/v1/namespaces/default/secrets/db".to_string(),
            json!({"stringData": {"password": "mine"}}),
        ),
        (
            "an APIBinding",
            "/apis/apis.kcp.io/v1alpha1/apibindings/tools".to_string(),
            json!({"spec": {"permissionClaims": [{"group": "", "resource": "secrets", "all": true, "state": "Accepted"}]}}),
        ),
        (
            "the SyncerConfig's spec",
            format!("{edge}/syncerconfigs/the-one"),
            json!({"spec": {"upsync": [{"apiGroup": "*", "resources": ["*"], "namespaces": ["*"], "names": ["*"]}]}}),
        ),
        (
            "the EdgeSyncConfig's spec",
            format!("{edge}/edgesyncconfigs/florin"),
            json!({"spec": {"upSyncedResources": [{"kind": "Deployment", "group": "apps", "name": "*", "namespace": "*"}]}}),
        ),
    ]
}

/// As the admin of `mailbox`: a ClusterRole `team`, a Secret `db`, an
/// APIBinding `tools` (to an export of its own) and the SyncerConfig
/// `the-one` upsyncing ConfigMaps — what [`widening_patches`] aims at.
async fn targets_in(mb: &kube::Client, mailbox: &str) {
    let apis = |kind: &str, plural: &str| {
        Api::<DynamicObject>::all_with(
            mb.clone(),
            &ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("apis.kcp.io", "v1alpha1", kind),
                plural,
            ),
        )
    };
    let export = json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport", "metadata": {"name": "tools"},
        "spec": {"latestResourceSchemas": []}});
    apis("APIExport", "apiexports")
        .patch("tools", &PatchParams::apply("test"), &Patch::Apply(&export))
        .await
        .unwrap();
    let binding = json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIBinding", "metadata": {"name": "tools"},
        "spec": {"reference": {"export": {"path": format!("root:{mailbox}"), "name": "tools"}}}});
    apis("APIBinding", "apibindings")
        .patch("tools", &PatchParams::apply("test"), &Patch::Apply(&binding))
        .await
        .unwrap();
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "team"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]});
    Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(mb.clone())
        .patch("team", &PatchParams::apply("test"), &Patch::Apply(&role))
        .await
        .unwrap();
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "default"},
        "stringData": {"password": "owner's"}});
    Api::<Secret>::namespaced(mb.clone(), "default")
        .patch("db", &PatchParams::apply("test"), &Patch::Apply(&secret))
        .await
        .unwrap();
    let config = json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "SyncerConfig", "metadata": {"name": "the-one"},
        "spec": {"upsync": [{"apiGroup": "", "resources": ["configmaps"], "namespaces": ["*"], "names": ["*"]}]}});
    apply_the_one(mb, &config).await;
}

/// `florin` registered ([`register_florin`]) with [`targets_in`] its mailbox:
/// the registration, the syncer's ID and the mailbox's admin client.
async fn florin_with_targets(hub: &TestHub) -> (Registered, String, kube::Client) {
    let registered = register_florin(hub).await;
    let id = syncer_id_in(&registered.manifest);
    let mb = hub.client(&format!("root:{}", registered.mailbox)).await;
    targets_in(&mb, &registered.mailbox).await;
    (registered, id, mb)
}

/// Each of [`widening_patches`] through `stolen` is refused with 403 (all
/// are tried, and every one that was not is named).
async fn assert_cannot_widen(stolen: &kube::Client, id: &str) {
    let mut allowed = Vec::new();
    for (what, path, body) in widening_patches(id) {
        let (code, answer) = merge_patch(stolen, &path, &body).await;
        if code != 403 {
            allowed.push(format!("{what} ({code}): {answer}"));
        }
    }
    assert!(
        allowed.is_empty(),
        "the syncer's token changed:\n{}",
        allowed.join("\n")
    );
}

/// The token in a syncer's manifest cannot widen rights — its own or anyone's —
/// by rewriting what already exists in its mailbox: bindings, roles, Secrets,
/// APIBindings, the configs' spec. It still writes what syncing needs: the
/// configs' status, the status of a downsynced object, and the objects it upsyncs.
#[tokio::test(flavor = "multi_thread")]
async fn the_mailbox_token_cannot_rewrite_rights_secrets_or_its_configs() {
    let hub = TestHub::start().await;
    let (Registered { upstream, .. }, id, mb) = florin_with_targets(&hub).await;
    let stolen = kube::Client::try_from(upstream).unwrap();
    assert_cannot_widen(&stolen, &id).await;
    expect_merge_patch(
        &stolen,
        "/apis/apps/v1/namespaces/default/deployments/web",
        &json!({"spec": {"replicas": 9}}),
        403,
        "the token changed a downsynced object's spec",
    )
    .await;

    // Positive twins: what the syncer writes upstream.
    let edge = "/apis/edge.kubestellar.io/v2alpha1";
    for config in ["syncerconfigs/the-one", "edgesyncconfigs/florin"] {
        expect_merge_patch(
            &stolen,
            &format!("{edge}/{config}/status"),
            &json!({"status": {"lastSyncerHeartbeatTime": "2026-11-27T00:00:00Z"}}),
            200,
            format!("the syncer reports on {config}"),
        )
        .await;
    }
    let web = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    Api::<Deployment>::namespaced(mb.clone(), "default")
        .patch("web", &PatchParams::apply("test"), &Patch::Apply(&web))
        .await
        .unwrap();
    eventually(20, "the syncer's token writing a Deployment's status", || {
        let stolen = stolen.clone();
        async move {
            let (code, _) = merge_patch(
                &stolen,
                "/apis/apps/v1/namespaces/default/deployments/web/status",
                &json!({"status": {"readyReplicas": 1}}),
            )
            .await;
            (code == 200).then_some(())
        }
    })
    .await;
    expect_status_because(
        &stolen,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "report"}, "data": {"v": "1"}})),
        201,
        "the syncer upsyncs a ConfigMap",
    )
    .await;
    expect_merge_patch(
        &stolen,
        "/api/v1/namespaces/default/configmaps/report",
        &json!({"data": {"v": "2"}}),
        200,
        "the syncer updates what it upsynced",
    )
    .await;

    // An EdgeSyncConfig's upSyncedResources (by kind) grant as a SyncerConfig's do.
    let leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "edge"}, "spec": {}});
    expect_status_because(
        &stolen,
        "POST",
        leases,
        Some(&lease),
        403,
        "no config upsyncs Leases yet",
    )
    .await;
    let esc_ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("edge.kubestellar.io", "v2alpha1", "EdgeSyncConfig"),
        "edgesyncconfigs",
    );
    let up = json!({"spec": {"upSyncedResources": [
        {"kind": "Lease", "group": "coordination.k8s.io", "version": "v1", "name": "*", "namespace": "*"}]}});
    Api::<DynamicObject>::all_with(mb.clone(), &esc_ar)
        .patch("florin", &PatchParams::default(), &Patch::Merge(&up))
        .await
        .unwrap();
    eventually(20, "the syncer's token upsyncing a Lease", || {
        let (stolen, lease) = (stolen.clone(), lease.clone());
        async move { (call(&stolen, "POST", leases, Some(&lease)).await.0 == 201).then_some(()) }
    })
    .await;
}

/// A syncer registered by an earlier release holds update/patch on
/// everything in its workspace; running syncer-gen again replaces those
/// rules, so the same token can no longer widen anything.
#[tokio::test(flavor = "multi_thread")]
async fn re_running_syncer_gen_narrows_an_earlier_wide_role() {
    let hub = TestHub::start().await;
    let (
        Registered {
            upstream,
            mailbox_kubeconfig,
            ..
        },
        id,
        mb,
    ) = florin_with_targets(&hub).await;
    // The rules an earlier syncer-gen wrote, under its field manager.
    let wide = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": id},
    "rules": [
        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch", "update", "patch"]},
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["create"]},
    ]});
    Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(mb.clone())
        .patch(
            &id,
            &PatchParams::apply("ferry-syncer-gen").force(),
            &Patch::Apply(&wide),
        )
        .await
        .unwrap();
    let stolen = kube::Client::try_from(upstream).unwrap();
    expect_merge_patch(
        &stolen,
        "/api/v1/namespaces/default/secrets/db",
        &json!({"stringData": {"password": "mine"}}),
        200,
        "the earlier role let the token rewrite a Secret",
    )
    .await;

    ok(
        run_ferry(
            &syncer_gen("florin", &hub.data_dir().join("again.yaml"), &[]),
            &mailbox_kubeconfig,
        ),
        "syncer-gen again",
    );
    assert_cannot_widen(&stolen, &id).await;
    // The syncer still reports on its config.
    let status = "/apis/edge.kubestellar.io/v2alpha1/syncerconfigs/the-one/status";
    let heartbeat = json!({"status": {"lastSyncerHeartbeatTime": "2026-11-27T00:00:00Z"}});
    eventually(20, "the syncer's token writing the SyncerConfig's status", || {
        let stolen = stolen.clone();
        let heartbeat = heartbeat.clone();
        async move { (merge_patch(&stolen, status, &heartbeat).await.0 == 200).then_some(()) }
    })
    .await;
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
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "argocd-application-controller"},
           "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, {"nonResourceURLs": ["*"], "verbs": ["*"]}]});
    expect_status_because(
        &as_syncer,
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        Some(&role),
        201,
        "the syncer installs a wildcard ClusterRole",
    )
    .await;
}

/// A hub knowing `mal` and `alice` by bearer token (`<name>-token`), with
/// `root:ws1` administered by alice and `root:mal` by mal.
async fn tenants() -> (TestHub, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, "mal-token,mal,u-mal\nalice-token,alice,u-alice\n").unwrap();
    let hub = TestHub::start_with(|o| o.token_auth_file = Some(tokens.clone())).await;
    let workspaces: Api<DynamicObject> = Api::all_with(hub.client("root").await, &edge_syncer::workspaces());
    for (ws, owner) in [("ws1", "alice"), ("mal", "mal")] {
        let doc =
            json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": {"name": ws}});
        workspaces
            .patch(ws, &PatchParams::apply("test"), &Patch::Apply(&doc))
            .await
            .unwrap();
        eventually(20, "the workspace Ready", || {
            let workspaces = workspaces.clone();
            async move { (workspaces.get(ws).await.ok()?.data["status"]["phase"] == "Ready").then_some(()) }
        })
        .await;
        let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": format!("{owner}-admin")},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": owner}]});
        Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(hub.client(&format!("root:{ws}")).await)
            .patch(
                &format!("{owner}-admin"),
                &PatchParams::apply("test"),
                &Patch::Apply(&binding),
            )
            .await
            .unwrap();
    }
    (hub, dir)
}

/// The SyncerConfig CRD as KubeStellar ships it (no status subresource),
/// installed in a workspace made by hand (a mailbox gets KubeStellar's API
/// bound by the mailbox controller).
async fn install_syncer_config_crd(client: &kube::Client) {
    use kube::CustomResourceExt;
    let crds: Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = Api::all(client.clone());
    let mut crd = ferry_api::edge::SyncerConfig::crd();
    crd.spec.versions[0].subresources = None;
    crds.patch(
        "syncerconfigs.edge.kubestellar.io",
        &PatchParams::apply("test"),
        &Patch::Apply(&crd),
    )
    .await
    .unwrap();
}

fn syncer_gen(name: &str, manifest: &std::path::Path, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = ["syncer-gen", name, "--syncer-image", "ferry:dev", "-o"]
        .map(String::from)
        .to_vec();
    args.push(manifest.to_string_lossy().into_owned());
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

fn run_ferry(args: &[String], kubeconfig: &std::path::Path) -> std::process::Output {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ferry(&args, kubeconfig)
}

/// The Deployment's name (the syncer's ID) in a syncer-gen manifest.
fn syncer_id_in(manifest: &std::path::Path) -> String {
    let docs = manifest_docs(manifest);
    let d = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
    d["metadata"]["name"].as_str().unwrap().to_string()
}

/// KubeStellar's route of registering a syncer for a workspace made by hand
/// (`ws1`): the owner runs syncer-gen there, re-running yields the same names,
/// the default EdgeSyncConfig is made, the syncer syncs — and its token, what an
/// attacker on the cluster gets, reaches nothing outside ws1 and cannot mint
/// tokens or grant itself more; a caller who may not write ws1 gets a clear 403.
#[tokio::test(flavor = "multi_thread")]
async fn syncer_gen_registers_a_confined_syncer_in_a_workspace_made_by_hand() {
    let (hub, dir) = tenants().await;
    let alice = kubeconfig_at(&hub, "root:ws1", "alice-token", dir.path(), "alice.kubeconfig");
    let ws1 = hub.client("root:ws1").await;
    install_syncer_config_crd(&ws1).await;
    let manifest = dir.path().join("guilder-syncer.yaml");

    let said = ok(
        run_ferry(&syncer_gen("guilder", &manifest, &[]), &alice),
        "syncer-gen in ws1",
    );
    assert!(said.contains("EdgeSyncConfig guilder"), "{said}");
    // KubeStellar's SyncerConfig CRD gets the status subresource the syncer reports through.
    assert!(
        said.contains("Gave CRD syncerconfigs.edge.kubestellar.io a status subresource"),
        "{said}"
    );
    let crd = Api::<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    >::all(ws1.clone())
    .get("syncerconfigs.edge.kubestellar.io")
    .await
    .unwrap();
    assert!(crd.spec.versions[0]
        .subresources
        .as_ref()
        .is_some_and(|s| s.status.is_some()));
    let id = syncer_id_in(&manifest);
    assert!(
        id.starts_with("kubestellar-syncer-guilder-") && id.len() == "kubestellar-syncer-guilder-".len() + 8,
        "{id}"
    );
    let docs = manifest_docs(&manifest);
    let token_secret = docs
        .iter()
        .find(|d| d["metadata"]["name"] == format!("{id}-token"))
        .expect("the -token Secret");
    assert_eq!(token_secret["type"], "kubernetes.io/service-account-token");
    let container = &docs.iter().find(|d| d["kind"] == "Deployment").unwrap()["spec"]["template"]["spec"]
        ["containers"][0];
    assert_eq!(container["volumeMounts"][0]["mountPath"], "/kcp");
    let args = container["args"].to_string();
    assert!(
        args.contains("--from-kubeconfig=/kcp/kubeconfig") && args.contains("--sync-target-name=guilder"),
        "{args}"
    );
    assert!(
        !args.contains("--sync-target-uid"),
        "no SyncTarget outside a mailbox: {args}"
    );
    let esc_ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("edge.kubestellar.io", "v2alpha1", "EdgeSyncConfig"),
        "edgesyncconfigs",
    );
    let esc = Api::<DynamicObject>::all_with(ws1.clone(), &esc_ar)
        .get("guilder")
        .await
        .unwrap();
    assert!(
        esc.data["spec"].as_object().is_none_or(|s| s.is_empty()),
        "the default EdgeSyncConfig is empty: {:?}",
        esc.data
    );

    // Running it again changes no name.
    ok(
        run_ferry(&syncer_gen("guilder", &manifest, &[]), &alice),
        "syncer-gen again",
    );
    assert_eq!(syncer_id_in(&manifest), id);

    // A caller who may not write ws1: a 403 that says what is needed.
    let mal_at_ws1 = kubeconfig_at(&hub, "root:ws1", "mal-token", dir.path(), "mal.kubeconfig");
    let out = run_ferry(
        &syncer_gen("guilder", &dir.path().join("mal.yaml"), &[]),
        &mal_at_ws1,
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("you may not register a syncer in workspace root:ws1") && err.contains("403"),
        "{err}"
    );

    // The stand-in cluster: kubectl apply -f, as the document does.
    let guilder = TestHub::start().await;
    ok(
        guilder.kubectl(&["apply", "-f", manifest.to_str().unwrap()]),
        "kubectl apply",
    );
    let upstream_text = edge_syncer::mounted_kubeconfig(&guilder, &id, &id).await;
    let upstream = kube::Config::from_custom_kubeconfig(
        Kubeconfig::from_yaml(&upstream_text).unwrap(),
        &KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    assert!(
        upstream.cluster_url.to_string().ends_with("/clusters/root:ws1"),
        "{}",
        upstream.cluster_url
    );

    // Attacker's side: the token reaches nothing outside ws1...
    for other in ["root", "root:mal", "*"] {
        let mut c = upstream.clone();
        c.cluster_url = format!("{}/clusters/{other}", hub.url()).parse().unwrap();
        let api: Api<ConfigMap> = Api::all(kube::Client::try_from(c).unwrap());
        match api.list(&ListParams::default()).await {
            Err(kube::Error::Api(e)) => assert_eq!(e.code, 403, "{other}: {}", e.message),
            result => panic!("the token must get 403 in {other}, got {result:?}"),
        }
    }
    // ...and cannot mint tokens or grant itself anything in ws1.
    let stolen = kube::Client::try_from(upstream.clone()).unwrap();
    let ns = "/api/v1/namespaces/default";
    let rbac = "/apis/rbac.authorization.k8s.io/v1";
    let attempts = [
        (
            "POST",
            "a ServiceAccount",
            format!("{ns}/serviceaccounts"),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "mint"}}),
        ),
        (
            "POST",
            "a token for its own ServiceAccount",
            format!("{ns}/serviceaccounts/{id}/token"),
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"audiences": []}}),
        ),
        (
            "POST",
            "a ClusterRoleBinding to cluster-admin",
            format!("{rbac}/clusterrolebindings"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "mine"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                "subjects": [{"kind": "ServiceAccount", "name": id, "namespace": "default"}]}),
        ),
        (
            "PATCH",
            "every verb in its own ClusterRole",
            format!("{rbac}/clusterroles/{id}"),
            json!({"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}),
        ),
    ];
    for (method, what, path, body) in &attempts {
        let why = format!("the syncer's token made {what}");
        if *method == "PATCH" {
            expect_merge_patch(&stolen, path, body, 403, why).await;
        } else {
            expect_status_because(&stolen, method, path, Some(body), 403, why).await;
        }
    }

    // Positive twin: the syncer, run as its pod would be, syncs what ws1's SyncerConfig selects.
    let _syncer = run_as_pod(&manifest, &guilder, dir.path()).await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "hello", "namespace": "default"}, "data": {"k": "v"}});
    Api::<ConfigMap>::namespaced(ws1.clone(), "default")
        .patch("hello", &PatchParams::apply("test"), &Patch::Apply(&cm))
        .await
        .unwrap();
    let config = json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "SyncerConfig", "metadata": {"name": "the-one"},
        "spec": {"namespaceScope": {"namespaces": ["default"], "resources": [{"group": "", "resource": "configmaps", "apiVersion": "v1"}]}}});
    apply_the_one(&ws1, &config).await;
    let landed = Api::<ConfigMap>::namespaced(guilder.client("root").await, "default");
    eventually(30, "ws1's ConfigMap on guilder", || {
        let landed = landed.clone();
        async move { landed.get_opt("hello").await.ok().flatten() }
    })
    .await;
}

/// Users of an earlier release re-running syncer-gen get the new names; the old
/// identity is removed (its token stops working), so two syncers never serve one
/// workspace, and the output says how to remove the old one from the cluster.
#[tokio::test(flavor = "multi_thread")]
async fn re_running_syncer_gen_revokes_an_earlier_releases_syncer() {
    let hub = TestHub::start().await;
    let workspaces: Api<DynamicObject> = Api::all_with(hub.client("root").await, &edge_syncer::workspaces());
    let doc =
        json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": {"name": "ws1"}});
    workspaces
        .patch("ws1", &PatchParams::apply("test"), &Patch::Apply(&doc))
        .await
        .unwrap();
    let kc = admin_kubeconfig(&hub, "root:ws1", "ws1.kubeconfig");
    let manifest = hub.data_dir().join("guilder-syncer.yaml");
    let without_esc = ["--with-default-esc=false"];
    eventually(20, "syncer-gen in the new workspace", || {
        let out = run_ferry(&syncer_gen("guilder", &manifest, &without_esc), &kc);
        async move { out.status.success().then_some(()) }
    })
    .await;
    let id = syncer_id_in(&manifest);
    let legacy = id.replacen("kubestellar-syncer", "ferry-syncer", 1);

    // What the earlier release left: its ServiceAccount and rights, and a token.
    let ws1 = hub.client("root:ws1").await;
    let sas = Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(ws1.clone(), "default");
    sas.patch(&legacy, &PatchParams::apply("test"),
        &Patch::Apply(&json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": legacy, "namespace": "default"}})))
        .await
        .unwrap();
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": legacy},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "ServiceAccount", "name": legacy, "namespace": "default"}]});
    Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(ws1.clone())
        .patch(&legacy, &PatchParams::apply("test"), &Patch::Apply(&binding))
        .await
        .unwrap();
    let request: k8s_openapi::api::authentication::v1::TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": []}})).unwrap();
    let token = sas
        .create_token_request(&legacy, &Default::default(), &request)
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    let old_kc = kubeconfig_at(&hub, "root:ws1", &token, hub.data_dir(), "old.kubeconfig");
    let old = kube::Client::try_from(
        kube::Config::from_custom_kubeconfig(
            Kubeconfig::read_from(&old_kc).unwrap(),
            &KubeConfigOptions::default(),
        )
        .await
        .unwrap(),
    )
    .unwrap();
    let old_cms = Api::<ConfigMap>::namespaced(old, "default");
    old_cms
        .list(&ListParams::default())
        .await
        .expect("the earlier syncer's token works before");

    let said = ok(
        run_ferry(&syncer_gen("guilder", &manifest, &without_esc), &kc),
        "syncer-gen again",
    );
    assert_eq!(syncer_id_in(&manifest), id);
    assert!(
        said.contains(&format!("kubectl delete namespace {legacy}")),
        "{said}"
    );
    assert!(
        sas.get_opt(&legacy).await.unwrap().is_none(),
        "the earlier ServiceAccount is gone"
    );
    match old_cms.list(&ListParams::default()).await {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 401, "{}", e.message),
        result => panic!("the earlier syncer's token must stop working, got {result:?}"),
    }
}

/// Each heartbeat of a KubeStellar syncer carries its version, on the
/// SyncerConfig in its own mailbox (`status.syncerVersion`); the identity
/// `syncer-gen` minted for florin's mailbox may write it there, and gets 403
/// writing it on guilder's mailbox's SyncerConfig (the kcp TMC twin is in
/// ferry-syncer's `tmc` tests).
#[tokio::test(flavor = "multi_thread")]
async fn the_syncer_reports_its_version_in_its_own_mailbox_and_cannot_in_another() {
    use ferry_testkit::edge;
    let hub = TestHub::start().await;
    let imw = edge::workspace(&hub, "imw1").await;
    let florin = edge::location(&hub, &imw, "florin", json!({"env": "prod"})).await;
    let guilder = edge::location(&hub, &imw, "guilder", json!({"env": "prod"})).await;
    let configs = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("edge.kubestellar.io", "v2alpha1", "SyncerConfig"),
        "syncerconfigs",
    );
    let the_one = json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "SyncerConfig",
                         "metadata": {"name": "the-one"}, "spec": {}});
    for mailbox in [&florin, &guilder] {
        apply_the_one(&hub.client(mailbox).await, &the_one).await;
    }
    let cluster = TestHub::start_with(|o| o.mailbox_controller = false).await;
    let admin = cluster.client("root").await;
    let mut opts = edge_syncer::generated_syncer_options(&hub, &florin, "florin", &cluster, &admin).await;
    opts.version = "0.1.0 (commit 0123456789ab)".into();
    // The identity at florin's mailbox, and the same token at guilder's.
    let identity = kube::Client::try_from(opts.upstream.clone()).unwrap();
    let mut elsewhere = opts.upstream.clone();
    let url = elsewhere.cluster_url.to_string().replace(&florin, &guilder);
    assert!(url.contains(&guilder), "{url}");
    elsewhere.cluster_url = url.parse().unwrap();
    let elsewhere = kube::Client::try_from(elsewhere).unwrap();
    let syncer = ferry_syncer::start(opts).await.expect("syncer starts");
    let own = Api::<DynamicObject>::all_with(hub.client(&florin).await, &configs);
    eventually(20, "florin's syncer's version on its SyncerConfig", || {
        let own = own.clone();
        async move {
            let c = own.get("the-one").await.ok()?;
            (c.data["status"]["syncerVersion"] == "0.1.0 (commit 0123456789ab)").then_some(())
        }
    })
    .await;
    syncer.stop().await;

    // florin's identity, by hand: its own mailbox takes a version, guilder's does not.
    let forged = json!({"status": {"syncerVersion": "6.6.6 (commit forged)"}});
    let path = "/apis/edge.kubestellar.io/v2alpha1/syncerconfigs/the-one/status";
    expect_merge_patch(&identity, path, &forged, 200, "its own mailbox").await;
    expect_merge_patch(&elsewhere, path, &forged, 403, "another mailbox's SyncerConfig").await;
    let theirs = Api::<DynamicObject>::all_with(hub.client(&guilder).await, &configs);
    let config = theirs.get("the-one").await.unwrap();
    assert!(
        config.data["status"]["syncerVersion"].is_null(),
        "guilder's: {:?}",
        config.data
    );
}
