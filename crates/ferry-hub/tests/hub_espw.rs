//! KubeStellar's edge service provider workspace on the hub: `root:espw`
//! exports the KubeStellar API as `edge.kubestellar.io`; any workspace owner
//! binds it, nobody but the ESPW's owner reads tenants' objects through the
//! export; mailboxes bind it as `bind-edge`, and a mailbox or inventory that
//! had the CRDs installed directly keeps its objects when it moves to the
//! binding.

mod common;

use common::edge::{api, apply, bind_espw, edge, kubestellar_init, location};
use common::tenants::Tenants;
use common::{call, client, eventually, expect_status_because, get_ok, post_created};
use ferry_testkit::TestHub;
use kube::api::ListParams;
use serde_json::json;

const PLACEMENTS: &str = "/apis/edge.kubestellar.io/v2alpha1/edgeplacements";

/// A client of the ESPW export's virtual workspace, for workspace `cluster`
/// (`*` for all), with bearer token `token`.
async fn through_export(hub: &TestHub, cluster: &str, token: &str) -> kube::Client {
    let mut config = hub.config("root").await;
    config.cluster_url = format!(
        "{}/services/apiexport/root:espw/edge.kubestellar.io/clusters/{cluster}",
        hub.url()
    )
    .parse()
    .unwrap();
    config.auth_info.token = Some(token.to_string().into());
    config.default_retry = false;
    kube::Client::try_from(config).unwrap()
}

fn placement(name: &str) -> serde_json::Value {
    json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "EdgePlacement",
           "metadata": {"name": name}, "spec": {"locationSelectors": [{"matchLabels": {"env": "prod"}}]}})
}

#[tokio::test(flavor = "multi_thread")]
async fn any_owner_binds_the_kubestellar_api_but_reads_no_other_tenants_objects_through_it() {
    let t = Tenants::start().await;
    kubestellar_init(&t.hub).await;
    t.workspace("alice", Some("alice")).await;
    t.workspace("mal", Some("mal")).await;
    let alice = t.client_as("alice", "root:alice").await;
    let mal = t.client_as("mal", "root:mal").await;

    // Positive: each owner binds the ESPW's export in its own workspace and
    // uses the API there; reading the export itself is part of the grant.
    bind_espw(&alice, "bind-espw").await;
    bind_espw(&mal, "bind-espw").await;
    post_created(&alice, PLACEMENTS, &placement("alices-plan")).await;
    post_created(&mal, PLACEMENTS, &placement("mals-plan")).await;
    let mal_in_espw = t.client_as("mal", "root:espw").await;
    get_ok(
        &mal_in_espw,
        "/apis/apis.kcp.io/v1alpha1/apiexports/edge.kubestellar.io",
    )
    .await;

    // The ESPW's owner sees every bound workspace through the export.
    let admin = through_export(&t.hub, "*", &t.hub.running.admin_token).await;
    let out = get_ok(&admin, PLACEMENTS).await;
    let names: Vec<&str> = out["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["metadata"]["name"].as_str())
        .collect();
    assert!(
        names.contains(&"alices-plan") && names.contains(&"mals-plan"),
        "{out}"
    );

    // Attacker: mal's grant is bind (and get) on the export, nothing more —
    // not the export's content, not alice's workspace, not the ESPW's objects.
    for cluster in ["*", "root:alice", "root:mal"] {
        let c = through_export(&t.hub, cluster, "mal-token").await;
        let out = expect_status_because(
            &c,
            "GET",
            PLACEMENTS,
            None,
            403,
            format!("mal reads {cluster} through the export"),
        )
        .await;
        assert!(!out.to_string().contains("alices-plan"));
    }
    let mal_in_alice = t.client_as("mal", "root:alice").await;
    expect_status_because(
        &mal_in_alice,
        "GET",
        PLACEMENTS,
        None,
        403,
        "mal reads alice's placements in her workspace",
    )
    .await;
    for (method, path, what) in [
        (
            "DELETE",
            "/apis/apis.kcp.io/v1alpha1/apiexports/edge.kubestellar.io",
            "deletes the ESPW's export",
        ),
        (
            "GET",
            "/apis/apis.kcp.io/v1alpha1/apiexports/other",
            "reads another export (the grant names one)",
        ),
        (
            "GET",
            "/apis/apis.kcp.io/v1alpha1/apiresourceschemas",
            "lists the ESPW's schemas",
        ),
        (
            "GET",
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            "lists the ESPW's RBAC",
        ),
    ] {
        expect_status_because(&mal_in_espw, method, path, None, 403, format!("mal {what}")).await;
    }
    // And alice's placement is untouched by all of it.
    get_ok(&alice, &format!("{PLACEMENTS}/alices-plan")).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_mailbox_and_an_inventory_with_the_crds_move_to_the_binding_keeping_their_objects() {
    let hub = TestHub::start().await;
    // An older hub's shape: the CRDs installed directly in root:imw1 and in
    // the mailbox the controller made for florin.
    let imw_cluster = common::edge::workspace(&hub, "imw1").await;
    let mailbox = location(&hub, &imw_cluster, "florin", json!({"env": "prod"})).await;
    let mb = client(&hub, &mailbox).await;
    let imw = client(&hub, "root:imw1").await;
    let kept = apply(
        &mb,
        json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "SyncerConfig",
               "metadata": {"name": "kept"}, "spec": {"namespaceScope": {"namespaces": ["default"]}}}),
    )
    .await;
    let target_uid = api(&imw, &edge("SyncTarget", "synctargets"), None)
        .get("florin")
        .await
        .unwrap()
        .metadata
        .uid;

    kubestellar_init(&hub).await;

    // The mailbox controller binds the mailbox as bind-edge; the binding
    // takes the CRDs' place and the SyncerConfig is still there, the same object.
    let bindings = api(
        &mb,
        &common::edge::ar("apis.kcp.io", "v1alpha1", "APIBinding", "apibindings"),
        None,
    );
    eventually(20, "bind-edge Bound in the mailbox", || {
        let bindings = bindings.clone();
        async move {
            let b = bindings.get("bind-edge").await.ok()?;
            (b.data["status"]["phase"] == "Bound").then_some(())
        }
    })
    .await;
    common::edge::served(&mb, "SyncerConfig", "syncerconfigs").await;
    let crds = call(
        &mb,
        "GET",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/syncerconfigs.edge.kubestellar.io",
        None,
    )
    .await;
    assert_eq!(crds.0, 404, "the CRD went: {}", crds.1);
    let configs = api(&mb, &edge("SyncerConfig", "syncerconfigs"), None);
    let still = configs.get("kept").await.unwrap();
    assert_eq!(still.metadata.uid, kept.metadata.uid);
    assert_eq!(still.data["spec"], kept.data["spec"]);

    // The inventory binds too (what `ferry ensure location` now does): its
    // SyncTarget is the same object, so its mailbox stays the same.
    bind_espw(&imw, "bind-espw").await;
    let target = api(&imw, &edge("SyncTarget", "synctargets"), None)
        .get("florin")
        .await
        .unwrap();
    assert_eq!(target.metadata.uid, target_uid);
    get_ok(&mb, "/apis/edge.kubestellar.io/v2alpha1/syncerconfigs/kept").await;
    assert_eq!(
        configs.list(&ListParams::default()).await.unwrap().items.len(),
        1,
        "nothing new, nothing lost"
    );
    // A new SyncTarget's mailbox is born bound.
    let second = location(&hub, &imw_cluster, "guilder", json!({"env": "prod"})).await;
    get_ok(
        &client(&hub, &second).await,
        "/apis/apis.kcp.io/v1alpha1/apibindings/bind-edge",
    )
    .await;
}

/// KubeStellar's combined status is part of its API: a workload management
/// workspace that bound the ESPW's export (and installed no CRD) serves
/// StatusCollectors and CombinedStatuses through that binding at once, so
/// `kubectl get combinedstatuses` works there, and an EdgePlacement's
/// StatusCollector combines what the cluster returned.
#[tokio::test(flavor = "multi_thread")]
async fn a_workspace_bound_to_the_kubestellar_export_has_combined_status_through_it() {
    use common::edge::{
        collector, combined_status_table, combined_status_when, copies_in, deployments, place_web,
        result_rows, return_status, web,
    };
    let hub = TestHub::start().await;
    kubestellar_init(&hub).await;
    let imw = common::edge::workspace(&hub, "imw1").await;
    let florin = location(&hub, &imw, "florin", json!({"env": "prod"})).await;
    common::tenants::ready_workspace(&hub, "shop").await;
    let wmw = client(&hub, "root:shop").await;
    bind_espw(&wmw, "bind-espw").await;
    for resource in ["statuscollectors", "combinedstatuses"] {
        let path = format!("/apis/control.kubestellar.io/v1alpha1/{resource}");
        eventually(15, &format!("{resource} served before any exists"), || async {
            (call(&wmw, "GET", &path, None).await.0 == 200).then_some(())
        })
        .await;
    }
    expect_status_because(
        &wmw,
        "GET",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/combinedstatuses.control.kubestellar.io",
        None,
        404,
        "through the binding, not a CRD of the workspace's own",
    )
    .await;

    web(&wmw).await;
    apply(
        &wmw,
        collector(
            "count",
            json!({"combinedFields": [{"name": "n", "type": "COUNT"}]}),
        ),
    )
    .await;
    place_web(&wmw, "shop", json!({"matchLabels": {"env": "prod"}}), &["count"]).await;
    copies_in(&hub, std::slice::from_ref(&florin)).await;
    return_status(
        &hub,
        &florin,
        &deployments(),
        "shop",
        "web",
        common::edge::available(2),
    )
    .await;
    let cs = combined_status_when(&wmw, "shop", "shop", 20, "web's combined status", |cs| {
        cs["summary"] == "2/2 available on 1 cluster"
    })
    .await;
    assert_eq!(result_rows(&cs, "count").unwrap(), vec![vec![json!(1)]], "{cs}");
    let table = combined_status_table(&hub, "root:shop", "shop");
    assert!(
        table.contains("deployments.apps/web") && table.contains("2/2 available on 1 cluster"),
        "{table}"
    );
}
