//! KubeStellar placement across tenants, tried from an attacker's side: a
//! tenant who installs the edge API in its own workspace places onto no
//! cluster whose inventory workspace did not grant it `bind` on the
//! Location, gets nothing up from such a cluster and learns nothing about
//! it; a grant reaches exactly what it names, and revoking it removes the
//! copies; a SyncTarget's owner narrows what comes up from its cluster.

mod common;

use common::edge::*;
use common::tenants::{bind_cluster_role, Tenants, RBAC};
use common::{client, delete_ok, eventually, post_created, token, user_kubeconfig};
use ferry_api::well_known::UPSYNCED_ANNOTATION;
use ferry_hub::controllers::placement::grant::UPSYNC_ALLOW_ANNOTATION;
use ferry_hub::controllers::placement::{PLACED_LABEL, RETURNED_LABEL};
use ferry_hub::kinds::edge::PLACED_BY_ANNOTATION;
use ferry_testkit::TestHub;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::ResourceExt;
use serde_json::{json, Value};

/// The inventory of example1 (`root:imw1`: florin and guilder), administered
/// by alice; each cluster has upsynced a Secret and a ConfigMap into its
/// mailbox, as its syncer would. Returns the two mailbox paths.
async fn alices_inventory(t: &Tenants) -> (String, String) {
    let (florin, guilder) = example1(&t.hub).await;
    bind_cluster_role(&t.hub, "root:imw1", "alice-admin", "cluster-admin", "alice").await;
    for (mailbox, target) in [(&florin, "florin"), (&guilder, "guilder")] {
        let mb = client(&t.hub, mailbox).await;
        for (r, kind, name, body) in [
            (
                secrets(),
                "Secret",
                "db-password",
                json!({"stringData": {"password": format!("{target}-s3cret")}}),
            ),
            (
                configmaps(),
                "ConfigMap",
                "health",
                json!({"data": {"ok": "true"}}),
            ),
        ] {
            let mut obj = json!({"apiVersion": "v1", "kind": kind,
                "metadata": {"name": name, "namespace": "default",
                             "annotations": {UPSYNCED_ANNOTATION: format!("{kind}/default/{name}")}}});
            obj.as_object_mut()
                .unwrap()
                .extend(body.as_object().unwrap().clone());
            api(&mb, &r, Some("default"))
                .create(&PostParams::default(), &serde_json::from_value(obj).unwrap())
                .await
                .unwrap();
        }
    }
    (florin, guilder)
}

/// What an attacker places: a ClusterRoleBinding to cluster-admin and a
/// ConfigMap asking for the cluster's parameters, on every Location, with
/// everything of the core group coming back up; the EdgePlacement claims
/// to have been written by the admin.
async fn place_everything(c: &kube::Client, name: &str, selector: Value) {
    apply(
        c,
        json!({"apiVersion": format!("{RBAC}/v1"), "kind": "ClusterRoleBinding", "metadata": {"name": "pwn"},
               "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "cluster-admin"},
               "subjects": [{"kind": "User", "apiGroup": RBAC, "name": "mal"}]}),
    )
    .await;
    apply(
        c,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "probe", "namespace": "default",
                            "annotations": {"edge.kubestellar.io/expand-parameters": "true"}},
               "data": {"where": "%(loc-name) %(env)"}}),
    )
    .await;
    let forged = json!({"username": "admin", "groups": ["system:masters"]}).to_string();
    apply(
        c,
        json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "EdgePlacement",
               "metadata": {"name": name, "annotations": {PLACED_BY_ANNOTATION: forged}},
               "spec": {"locationSelectors": [selector],
                        "downsync": [
                            {"apiGroup": RBAC, "resources": ["clusterrolebindings"], "objectNames": ["pwn"]},
                            {"apiGroup": "", "resources": ["configmaps"], "namespaces": ["default"], "objectNames": ["probe"]}],
                        "upsync": [{"apiGroup": "", "resources": ["*"], "namespaces": ["*"], "names": ["*"]}]}}),
    )
    .await;
}

/// What the translator copied into a mailbox of what [`place_everything`]
/// places (`resource name`).
async fn copies(hub: &TestHub, mailbox: &str) -> Vec<String> {
    let mb = client(hub, mailbox).await;
    let labelled = ListParams::default().labels(PLACED_LABEL);
    let bindings = ar(RBAC, "v1", "ClusterRoleBinding", "clusterrolebindings");
    let mut out = Vec::new();
    for r in [bindings, configmaps()] {
        let list = kube::Api::<DynamicObject>::all_with(mb.clone(), &r)
            .list(&labelled)
            .await
            .unwrap();
        out.extend(
            list.items
                .iter()
                .map(|o| format!("{} {}", r.plural, o.name_any())),
        );
    }
    out.sort();
    out
}

/// The placement once the translator has written its status.
async fn evaluated(c: &kube::Client, name: &str) -> DynamicObject {
    let placements = api(c, &edge("EdgePlacement", "edgeplacements"), None);
    eventually(20, "the placement's status", || {
        let placements = placements.clone();
        async move {
            let p = placements.get(name).await.ok()?;
            p.data["status"]["conditions"].is_array().then_some(p)
        }
    })
    .await
}

fn placer(p: &DynamicObject) -> String {
    let recorded: Value = serde_json::from_str(&p.annotations()[PLACED_BY_ANNOTATION]).unwrap();
    recorded["username"].as_str().unwrap().to_string()
}

/// Names of the objects in `workspace` that came up from a cluster.
async fn returned(hub: &TestHub, workspace: &str, r: kube::core::ApiResource) -> Vec<String> {
    let c = client(hub, workspace).await;
    let list = kube::Api::<DynamicObject>::all_with(c, &r)
        .list(&ListParams::default().labels(RETURNED_LABEL))
        .await
        .unwrap();
    let mut names: Vec<String> = list.items.iter().map(|o| o.name_any()).collect();
    names.sort();
    names
}

/// Everything of the edge API the placer's workspace holds, as text.
async fn edge_objects_as_text(c: &kube::Client) -> String {
    let mut text = String::new();
    for (kind, plural) in [
        ("EdgePlacement", "edgeplacements"),
        ("SinglePlacementSlice", "singleplacementslices"),
    ] {
        let list = api(c, &edge(kind, plural), None)
            .list(&ListParams::default())
            .await
            .unwrap();
        text.push_str(&serde_json::to_string(&list.items).unwrap());
    }
    if let Ok(list) = api(c, &summaries(), None).list(&ListParams::default()).await {
        text.push_str(&serde_json::to_string(&list.items).unwrap());
    }
    text
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tenant_placement_reaches_no_cluster_it_was_not_granted_and_learns_nothing_of_it() {
    let t = Tenants::start().await;
    let (florin, guilder) = alices_inventory(&t).await;
    t.workspace("mal", Some("mal")).await;
    let mal = t.client_as("mal", "root:mal").await;
    install_edge_api(&mal).await;
    place_everything(&mal, "grab", json!({})).await;

    let p = evaluated(&mal, "grab").await;
    for mailbox in [&florin, &guilder] {
        assert_eq!(copies(&t.hub, mailbox).await, Vec::<String>::new(), "{mailbox}");
        let the_one = the_one(&t.hub, mailbox).await.unwrap_or_default();
        assert!(
            the_one["upsync"].as_array().is_none_or(Vec::is_empty),
            "{the_one}"
        );
    }
    assert_eq!(
        returned(&t.hub, "root:mal", secrets()).await,
        Vec::<String>::new()
    );
    assert_eq!(
        returned(&t.hub, "root:mal", configmaps()).await,
        Vec::<String>::new()
    );
    assert_eq!(
        placer(&p),
        "mal",
        "the forged placer was replaced by the requester"
    );
    assert_eq!(p.data["status"]["matchingLocationCount"], 0);
    let (_, message) = condition(&p, "Ready");
    assert!(
        message.contains("bind"),
        "the placer is told how to get a Location: {message}"
    );
    // With kubectl, as the tenant would: told at once that nothing is granted.
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("mal.kubeconfig");
    std::fs::write(
        &kubeconfig,
        user_kubeconfig(&t.hub, "root:mal", token("mal-token")),
    )
    .unwrap();
    let more = json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "EdgePlacement",
        "metadata": {"name": "grab-more"}, "spec": {"locationSelectors": [{}]}});
    let out = t.hub.kubectl_stdin(
        &["--kubeconfig", kubeconfig.to_str().unwrap(), "create", "-f", "-"],
        Some(&more.to_string()),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("Warning: EdgePlacement \"grab-more\" reaches no cluster yet")
            && stderr.contains("\"bind\""),
        "{stderr}"
    );
    evaluated(&mal, "grab-more").await;
    let text = edge_objects_as_text(&mal).await;
    for secret in ["florin", "guilder", "imw1", "prod", "extended", "mb-"] {
        assert!(!text.contains(secret), "root:mal learns {secret:?}: {text}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_admins_own_placement_still_reaches_every_mailbox_as_its_recorded_placer() {
    let t = Tenants::start().await;
    let (florin, guilder) = alices_inventory(&t).await;
    let wmw = client(&t.hub, "root:wmw1").await;
    place_everything(&wmw, "everywhere", json!({"matchLabels": {"env": "prod"}})).await;
    for mailbox in [&florin, &guilder] {
        eventually(20, "the copies in every mailbox", || async {
            (copies(&t.hub, mailbox).await == ["clusterrolebindings pwn", "configmaps probe"]).then_some(())
        })
        .await;
    }
    let p = evaluated(&wmw, "everywhere").await;
    assert_eq!(placer(&p), "admin");
    assert_eq!(p.data["status"]["matchingLocationCount"], 2);
    let slices = api(&wmw, &edge("SinglePlacementSlice", "singleplacementslices"), None);
    let slice = eventually(10, "the slice with both destinations", || {
        let slices = slices.clone();
        async move {
            let s = slices.get("everywhere").await.ok()?;
            (s.data["destinations"].as_array()?.len() == 2).then_some(s)
        }
    })
    .await;
    assert!(slice.annotations()[PLACED_BY_ANNOTATION].contains("\"admin\""));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_location_granted_by_its_owner_is_reached_alone_and_revoking_removes_the_copies() {
    let t = Tenants::start().await;
    let (florin, guilder) = alices_inventory(&t).await;
    t.workspace("bob", Some("bob")).await;
    let bob = t.client_as("bob", "root:bob").await;
    install_edge_api(&bob).await;
    // alice, who administers the inventory, grants bob guilder and nothing else.
    let alice = t.client_as("alice", "root:imw1").await;
    post_created(
        &alice,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        &json!({"metadata": {"name": "place-on-guilder"},
            "rules": [{"apiGroups": ["edge.kubestellar.io"], "resources": ["locations"],
                       "verbs": ["bind"], "resourceNames": ["guilder"]}]}),
    )
    .await;
    let grant = json!({"metadata": {"name": "bob-places-on-guilder"},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "place-on-guilder"},
        "subjects": [{"kind": "User", "apiGroup": RBAC, "name": "bob"}]});
    let bindings = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings";
    post_created(&alice, bindings, &grant).await;

    place_everything(&bob, "mine", json!({"matchLabels": {"env": "prod"}})).await;
    eventually(20, "bob's copies in guilder's mailbox", || async {
        (copies(&t.hub, &guilder).await == ["clusterrolebindings pwn", "configmaps probe"]).then_some(())
    })
    .await;
    assert_eq!(
        copies(&t.hub, &florin).await,
        Vec::<String>::new(),
        "florin was not granted"
    );
    let p = evaluated(&bob, "mine").await;
    assert_eq!(p.data["status"]["matchingLocationCount"], 1);
    assert!(!edge_objects_as_text(&bob).await.contains("florin"));
    let mb = client(&t.hub, &guilder).await;
    let probe = get(&mb, &configmaps(), Some("default"), "probe").await.unwrap();
    assert_eq!(
        probe.data["data"]["where"], "guilder prod",
        "a granted destination's parameters"
    );

    delete_ok(&alice, &format!("{bindings}/bob-places-on-guilder")).await;
    eventually(20, "bob's copies gone from guilder's mailbox", || async {
        copies(&t.hub, &guilder).await.is_empty().then_some(())
    })
    .await;
    let slices = api(&bob, &edge("SinglePlacementSlice", "singleplacementslices"), None);
    eventually(10, "bob's slice to be empty", || {
        let slices = slices.clone();
        async move {
            let s = slices.get("mine").await.ok()?;
            s.data["destinations"].as_array()?.is_empty().then_some(())
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn secrets_come_up_only_when_the_sync_target_owner_allows_them() {
    let t = Tenants::start().await;
    let (florin, _) = alices_inventory(&t).await;
    let wmw = client(&t.hub, "root:wmw1").await;
    place_everything(
        &wmw,
        "florin-only",
        json!({"matchLabels": {"loc-name": "florin"}}),
    )
    .await;
    // Without an allow-list: the ConfigMap comes up, the Secret does not.
    eventually(20, "florin's health report in the WMW", || async {
        (returned(&t.hub, "root:wmw1", configmaps()).await == ["florin-health"]).then_some(())
    })
    .await;
    assert_eq!(
        returned(&t.hub, "root:wmw1", secrets()).await,
        Vec::<String>::new()
    );

    // The owner allows Secrets only: the Secret comes up, the ConfigMap's copy goes.
    let alice = t.client_as("alice", "root:imw1").await;
    api(&alice, &edge("SyncTarget", "synctargets"), None)
        .patch(
            "florin",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {UPSYNC_ALLOW_ANNOTATION: "secrets"}}})),
        )
        .await
        .unwrap();
    eventually(20, "only the Secret up from florin", || async {
        let secrets = returned(&t.hub, "root:wmw1", secrets()).await;
        let configmaps = returned(&t.hub, "root:wmw1", configmaps()).await;
        (secrets == ["florin-db-password"] && configmaps.is_empty()).then_some(())
    })
    .await;
    let the_one = the_one(&t.hub, &florin).await.unwrap();
    assert_eq!(
        the_one["upsync"],
        json!([{"resources": ["secrets"], "namespaces": ["*"], "names": ["*"]}]),
        "the syncer is asked for what the owner allows"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_placement_written_before_placers_were_recorded_reaches_nothing_until_applied_again() {
    let t = Tenants::start().await;
    let (florin, _) = alices_inventory(&t).await;
    let wmw = client(&t.hub, "root:wmw1").await;
    let selector = json!({"matchLabels": {"loc-name": "florin"}});
    place_everything(&wmw, "older", selector.clone()).await;
    let both = ["clusterrolebindings pwn", "configmaps probe"];
    eventually(20, "the copies in florin's mailbox", || async {
        (copies(&t.hub, &florin).await == both).then_some(())
    })
    .await;

    // As stored by a hub from before placers were recorded.
    let hub = &t.hub.running.hub;
    let key = ferry_hub::storage::ObjectKey {
        cluster: hub.workspaces.resolve("root:wmw1").unwrap().name,
        resource: "edge.kubestellar.io/edgeplacements".into(),
        namespace: String::new(),
        name: "older".into(),
    };
    let mut stored = hub.store.get(&key).unwrap().value();
    stored["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove(PLACED_BY_ANNOTATION);
    hub.store
        .put(key, ferry_hub::storage::Expect::Exists, stored)
        .unwrap();
    eventually(20, "the copies gone and the placement told why", || async {
        let p = api(&wmw, &edge("EdgePlacement", "edgeplacements"), None)
            .get("older")
            .await
            .ok()?;
        let (ready, message) = condition(&p, "Ready");
        (copies(&t.hub, &florin).await.is_empty() && ready == "False" && message.contains("apply it again"))
            .then_some(())
    })
    .await;

    // Applying the same placement again (as the quickstart does on every run) records the placer.
    place_everything(&wmw, "older", selector).await;
    eventually(20, "the copies back in florin's mailbox", || async {
        (copies(&t.hub, &florin).await == both).then_some(())
    })
    .await;
    assert_eq!(placer(&evaluated(&wmw, "older").await), "admin");
}
