//! KubeStellar placement on the hub: EdgePlacements in a workload management
//! workspace (WMW), the where-resolver's SinglePlacementSlices, the placement
//! translator filling mailbox workspaces (copies and SyncerConfig `the-one`),
//! and reported state coming back to the WMW.

mod common;

use common::edge::*;
use common::{client, eventually, ok};
use ferry_hub::controllers::placement::reported::REPORTED_FROM_ANNOTATION;
use ferry_hub::controllers::placement::{PLACED_LABEL, RETURNED_LABEL};
use ferry_testkit::TestHub;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use kube::ResourceExt;
use serde_json::{json, Value};

/// The seed's example1 workload in the WMW: commonstuff (labelled common=si) with a
/// ConfigMap and Deployment, specialstuff (special=yes) with the same.
async fn example1_workload(wmw: &kube::Client) {
    for (ns, labels, deploy) in [
        ("commonstuff", json!({"common": "si"}), "commond"),
        ("specialstuff", json!({"special": "yes"}), "speciald"),
    ] {
        apply(
            wmw,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}}),
        )
        .await;
        apply(
            wmw,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "httpd-htdocs", "namespace": ns, "labels": {"app.kubernetes.io/part-of": "my-app"}},
                   "data": {"index.html": format!("<html>{ns}</html>")}}),
        )
        .await;
        apply(wmw, deployment(ns, deploy, 1)).await;
    }
}

/// [`example1`] with its workload in `root:wmw1` (once both clusters' stand-in
/// syncers run, when `syncers`): the mailboxes of florin and guilder and a
/// client of the WMW.
async fn example1_with_workload(hub: &TestHub, syncers: bool) -> (String, String, kube::Client) {
    let (florin, guilder) = example1(hub).await;
    if syncers {
        stand_in_syncer(hub, &florin).await;
        stand_in_syncer(hub, &guilder).await;
    }
    let wmw = client(hub, "root:wmw1").await;
    example1_workload(&wmw).await;
    (florin, guilder, wmw)
}

/// [`example1_with_workload`] with EdgePlacements `edge-placement-c` and
/// `edge-placement-s` applied.
async fn example1_placed(hub: &TestHub, syncers: bool) -> (String, String, kube::Client) {
    let placed = example1_with_workload(hub, syncers).await;
    apply(&placed.2, placement_c()).await;
    apply(&placed.2, placement_s()).await;
    placed
}

/// The syncer of `mailbox`'s cluster reports on its `the-one` that the
/// cluster refused commond (a priority class it does not have); returns the
/// mailbox's SyncerConfigs.
async fn refuse_commond(hub: &TestHub, mailbox: &str) -> Api<DynamicObject> {
    let configs = api(
        &client(hub, mailbox).await,
        &edge("SyncerConfig", "syncerconfigs"),
        None,
    );
    let refused = json!({"status": {"refusedCount": 1, "refused": [{
        "resource": "apps/deployments", "namespace": "commonstuff", "name": "commond", "side": "downstream",
        "message": "Deployment.apps \"commond\" is invalid: spec.template.spec.priorityClassName: Invalid value: \"gold\""}]}});
    configs
        .patch_status("the-one", &PatchParams::default(), &Patch::Merge(&refused))
        .await
        .unwrap();
    configs
}

/// Waits (20 s) until the translator has placed `object` (`resource ns/name`)
/// in `mailbox`.
async fn placed_in(hub: &TestHub, mailbox: &str, object: &str, what: &str) {
    eventually(20, what, || async move {
        placed(hub, mailbox)
            .await
            .contains(&object.to_string())
            .then_some(())
    })
    .await;
}

/// `r` in namespace `ns` of workspace `mailbox` (a mailbox, mostly).
async fn in_mailbox(hub: &TestHub, mailbox: &str, r: &ApiResource, ns: &str) -> Api<DynamicObject> {
    api(&client(hub, mailbox).await, r, Some(ns))
}

fn edge_placements(wmw: &kube::Client) -> Api<DynamicObject> {
    api(wmw, &edge("EdgePlacement", "edgeplacements"), None)
}

/// Deletes `name`; it must succeed.
async fn delete(objects: &Api<DynamicObject>, name: &str) {
    objects.delete(name, &DeleteParams::default()).await.unwrap();
}

/// Merge-patches `name` with `patch`; it must succeed.
async fn merge(objects: &Api<DynamicObject>, name: &str, patch: Value) {
    objects
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
}

/// Merge-patches `name`'s status with `status`; it must succeed.
async fn merge_status(objects: &Api<DynamicObject>, name: &str, status: Value) {
    objects
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .unwrap();
}

/// Object `name` once `check` holds for it (waiting up to `secs`).
async fn object_when(
    objects: &Api<DynamicObject>,
    name: &str,
    secs: u64,
    what: &str,
    check: impl Fn(&DynamicObject) -> bool,
) -> DynamicObject {
    let check = &check;
    eventually(secs, what, || async move {
        let o = objects.get_opt(name).await.ok()??;
        check(&o).then_some(o)
    })
    .await
}

/// Condition `type_` of `name` once its status is `status` (waiting up to
/// `secs`): its status and message.
async fn condition_when(
    objects: &Api<DynamicObject>,
    name: &str,
    (type_, status): (&str, &str),
    secs: u64,
    what: &str,
) -> (String, String) {
    let o = object_when(objects, name, secs, what, |o| condition(o, type_).0 == status).await;
    condition(&o, type_)
}

/// The `kubestellar.io/executing-count` annotation of a WMW object.
fn executing_count(o: &DynamicObject) -> Option<&str> {
    o.annotations()
        .get("kubestellar.io/executing-count")
        .map(String::as_str)
}

/// Waits (`secs`) until object `name` is gone.
async fn object_gone(objects: &Api<DynamicObject>, name: &str, secs: u64, what: &str) {
    eventually(secs, what, || async move {
        matches!(objects.get_opt(name).await, Ok(None)).then_some(())
    })
    .await;
}

fn deployment(ns: &str, name: &str, replicas: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": name, "namespace": ns},
           "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                    "template": {"metadata": {"labels": {"app": name}},
                                 "spec": {"containers": [{"name": "httpd", "image": "library/httpd:2.4"}]}}}})
}

/// EdgePlacement `special`: specialstuff's deployments to the extended
/// locations, with singleton reported state.
fn placement_special() -> Value {
    json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "EdgePlacement", "metadata": {"name": "special"},
           "spec": {"locationSelectors": [{"matchLabels": {"extended": "yes"}}], "wantSingletonReportedState": true,
                    "downsync": [{"apiGroup": "apps", "resources": ["deployments"], "namespaces": ["specialstuff"]}]}})
}

fn placement_c() -> Value {
    json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "EdgePlacement",
           "metadata": {"name": "edge-placement-c"},
           "spec": {"locationSelectors": [{"matchLabels": {"env": "prod"}}],
                    "downsync": [
                        {"apiGroup": "", "resources": ["configmaps"], "namespaces": ["commonstuff"], "objectNames": ["httpd-htdocs"]},
                        {"apiGroup": "apps", "resources": ["deployments"], "namespaces": ["commonstuff"]}],
                    "wantSingletonReportedState": false,
                    "upsync": [{"apiGroup": "group1.test", "resources": ["sprockets"], "namespaces": ["orbital"], "names": ["george"]}]}})
}

fn placement_s() -> Value {
    json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "EdgePlacement",
           "metadata": {"name": "edge-placement-s"},
           "spec": {"locationSelectors": [{"matchLabels": {"env": "prod", "extended": "yes"}}],
                    "downsync": [
                        {"apiGroup": "", "resources": ["configmaps"], "namespaceSelectors": [{"matchLabels": {"special": "yes"}}],
                         "labelSelectors": [{"matchLabels": {"app.kubernetes.io/part-of": "my-app"}}]},
                        {"apiGroup": "apps", "resources": ["deployments"], "namespaceSelectors": [{"matchLabels": {"special": "yes"}}],
                         "objectNames": ["speciald"]}]}})
}

#[tokio::test(flavor = "multi_thread")]
async fn where_resolver_keeps_the_single_placement_slice_live() {
    let hub = TestHub::start().await;
    let (_florin, _guilder) = example1(&hub).await;
    let wmw = client(&hub, "root:wmw1").await;
    apply(&wmw, placement_s()).await;
    apply(&wmw, placement_c()).await;
    let slices = api(&wmw, &edge("SinglePlacementSlice", "singleplacementslices"), None);
    let targets_of = |slice: &DynamicObject| -> Vec<String> {
        slice.data["destinations"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|d| {
                format!(
                    "{}@{}",
                    d["syncTargetName"].as_str().unwrap(),
                    d["locationName"].as_str().unwrap()
                )
            })
            .collect()
    };
    object_when(
        &slices,
        "edge-placement-c",
        15,
        "edge-placement-c to reach florin and guilder",
        |slice| targets_of(slice) == ["florin@florin", "guilder@guilder"],
    )
    .await;
    let slice = object_when(
        &slices,
        "edge-placement-s",
        10,
        "edge-placement-s's slice",
        |_| true,
    )
    .await;
    assert_eq!(targets_of(&slice), ["guilder@guilder"]);
    let d = &slice.data["destinations"][0];
    assert!(d["syncTargetUID"].as_str().is_some_and(|u| !u.is_empty()) && d["cluster"].as_str().is_some());
    let placements = edge_placements(&wmw);
    object_when(
        &placements,
        "edge-placement-c",
        10,
        "matchingLocationCount 2 on edge-placement-c",
        |o| o.data["status"]["matchingLocationCount"] == 2,
    )
    .await;

    // florin's Location gains extended=yes: edge-placement-s now reaches it too.
    let imw = client(&hub, "root:imw1").await;
    label_location(&hub, "florin", json!({"extended": "yes"})).await;
    object_when(
        &slices,
        "edge-placement-s",
        10,
        "edge-placement-s to follow the Location's labels",
        |slice| targets_of(slice) == ["florin@florin", "guilder@guilder"],
    )
    .await;
    // guilder's SyncTarget goes: gone from every slice.
    delete(&api(&imw, &edge("SyncTarget", "synctargets"), None), "guilder").await;
    eventually(10, "guilder to leave the slices", || {
        let s = slices.clone();
        async move {
            let c = s.get("edge-placement-c").await.ok()?;
            let sp = s.get("edge-placement-s").await.ok()?;
            (targets_of(&c) == ["florin@florin"] && targets_of(&sp) == ["florin@florin"]).then_some(())
        }
    })
    .await;
    // The slice belongs to its placement.
    delete(&placements, "edge-placement-s").await;
    object_gone(
        &slices,
        "edge-placement-s",
        10,
        "the slice to go with its placement",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn translator_fills_mailboxes_with_copies_and_the_syncer_config() {
    let hub = TestHub::start().await;
    let (florin, guilder, wmw) = example1_placed(&hub, false).await;

    let common = [
        "configmaps commonstuff/httpd-htdocs",
        "deployments commonstuff/commond",
        "namespaces commonstuff",
        "syncerconfigs the-one",
    ];
    let special = [
        "configmaps commonstuff/httpd-htdocs",
        "configmaps specialstuff/httpd-htdocs",
        "deployments commonstuff/commond",
        "deployments specialstuff/speciald",
        "namespaces commonstuff",
        "namespaces specialstuff",
        "syncerconfigs the-one",
    ];
    eventually(
        20,
        "florin's and guilder's mailboxes to hold their objects",
        || {
            let (hub, florin, guilder) = (&hub, florin.clone(), guilder.clone());
            async move {
                (placed(hub, &florin).await == common && placed(hub, &guilder).await == special).then_some(())
            }
        },
    )
    .await;
    // The SyncerConfig names exactly what is there, and the placements' upsync.
    let spec = the_one(&hub, &guilder).await.unwrap();
    assert_eq!(
        spec["clusterScope"],
        json!([{"group": "", "resource": "namespaces", "apiVersion": "v1", "objects": ["commonstuff", "specialstuff"]}])
    );
    assert_eq!(
        spec["namespacedObjects"][1],
        json!({"group": "apps", "resource": "deployments", "apiVersion": "v1", "objectsByNamespace": [
            {"namespace": "commonstuff", "names": ["commond"]}, {"namespace": "specialstuff", "names": ["speciald"]}]})
    );
    assert_eq!(spec["upsync"][0]["apiGroup"], "group1.test");
    assert!(the_one(&hub, &florin).await.unwrap()["upsync"].is_array());

    // A change in the WMW reaches every copy; the copy's own status is kept.
    let mb = client(&hub, &florin).await;
    let copies = api(&mb, &deployments(), Some("commonstuff"));
    merge_status(&copies, "commond", json!({"replicas": 1, "readyReplicas": 1})).await;
    apply(&wmw, deployment("commonstuff", "commond", 3)).await;
    for mailbox in [&florin, &guilder] {
        let c = in_mailbox(&hub, mailbox, &deployments(), "commonstuff").await;
        object_when(&c, "commond", 10, "the copy to follow the WMW object", |o| {
            o.data["spec"]["replicas"] == 3
        })
        .await;
    }
    assert_eq!(
        copies.get("commond").await.unwrap().data["status"]["readyReplicas"],
        1
    );

    // Create-only objects are not updated.
    apply(
        &wmw,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "httpd-htdocs", "namespace": "commonstuff",
                            "annotations": {"edge.kubestellar.io/downsync-overwrite": "false"}},
               "data": {"index.html": "<html>changed</html>"}}),
    )
    .await;
    // An object the translator did not place is never touched.
    let mine = api(&mb, &configmaps(), Some("commonstuff"));
    mine.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "hand-made", "namespace": "commonstuff"}, "data": {"a": "b"}}))
        .unwrap(),
    )
    .await
    .unwrap();

    // Dropping specialstuff from the placement removes exactly its copies.
    let placements = edge_placements(&wmw);
    delete(&placements, "edge-placement-s").await;
    eventually(15, "guilder's mailbox to lose the special objects", || {
        let (hub, guilder) = (&hub, guilder.clone());
        async move { (placed(hub, &guilder).await == common).then_some(()) }
    })
    .await;
    let spec = the_one(&hub, &guilder).await.unwrap();
    assert_eq!(spec["clusterScope"][0]["objects"], json!(["commonstuff"]));
    assert!(mine.get_opt("hand-made").await.unwrap().is_some());
    let cm = mine.get("httpd-htdocs").await.unwrap();
    assert_eq!(
        cm.data["data"]["index.html"], "<html>commonstuff</html>",
        "create-only copy left as it was"
    );

    // No placement at all: the mailboxes empty out, the SyncerConfig says nothing.
    delete(&placements, "edge-placement-c").await;
    eventually(15, "the mailboxes to empty", || {
        let (hub, florin) = (&hub, florin.clone());
        async move { (placed(hub, &florin).await == ["syncerconfigs the-one"]).then_some(()) }
    })
    .await;
    assert_eq!(the_one(&hub, &florin).await.unwrap(), json!({}));
    // commonstuff held a hand-made object: released to it, not deleted.
    assert!(mine.get_opt("hand-made").await.unwrap().is_some());
    let ns = get(&mb, &ar("", "v1", "Namespace", "namespaces"), None, "commonstuff")
        .await
        .unwrap();
    assert!(!ns.labels().contains_key(PLACED_LABEL));
    let other = client(&hub, &guilder).await;
    assert!(get(
        &other,
        &ar("", "v1", "Namespace", "namespaces"),
        None,
        "commonstuff"
    )
    .await
    .is_none_or(|n| n.metadata.deletion_timestamp.is_some()));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_older_edge_placement_form_is_accepted_and_kubectl_lists_placements() {
    let hub = TestHub::start().await;
    let (florin, _guilder, _wmw) = example1_with_workload(&hub, false).await;
    let yaml = r#"
apiVersion: edge.kubestellar.io/v2alpha1
kind: EdgePlacement
metadata:
  name: edge-placement-old
spec:
  locationSelectors:
  - matchLabels: {"loc-name": "florin"}
  namespaceSelector:
    matchLabels: {"common": "si"}
  nonNamespacedObjects:
  - apiGroup: ""
    resources: [ "namespaces" ]
    resourceNames: [ "specialstuff" ]
"#;
    ok(
        hub.kubectl_in("root:wmw1", &["apply", "-f", "-"], Some(yaml)),
        "kubectl apply",
    );
    eventually(20, "the older form's objects in florin's mailbox", || {
        let (hub, florin) = (&hub, florin.clone());
        async move {
            let placed = placed(hub, &florin).await;
            (placed
                == [
                    "configmaps commonstuff/httpd-htdocs",
                    "deployments commonstuff/commond",
                    "namespaces commonstuff",
                    "namespaces specialstuff",
                    "syncerconfigs the-one",
                ])
            .then_some(())
        }
    })
    .await;
    let text = ok(
        hub.kubectl_in("root:wmw1", &["get", "edgeplacements"], None),
        "kubectl get edgeplacements",
    );
    assert!(
        text.contains("MATCHING LOCATIONS") && text.contains("EXECUTING"),
        "{text}"
    );
    let row = text
        .lines()
        .find(|l| l.starts_with("edge-placement-old"))
        .unwrap();
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cols[1], "1", "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn two_wmws_wanting_different_objects_under_one_name_get_a_steady_conflict() {
    let hub = TestHub::start().await;
    let (florin, _) = example1(&hub).await;
    workspace(&hub, "wmw2").await;
    let (one, two) = (client(&hub, "root:wmw1").await, client(&hub, "root:wmw2").await);
    for (c, text) in [(&one, "one"), (&two, "two")] {
        apply(
            c,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shared"}}),
        )
        .await;
        apply(
            c,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "shared"},
                   "data": {"who": text}}),
        )
        .await;
        apply(
            c,
            json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "EdgePlacement",
                   "metadata": {"name": format!("p-{text}")},
                   "spec": {"locationSelectors": [{"matchLabels": {"loc-name": "florin"}}],
                            "downsync": [{"apiGroup": "", "resources": ["configmaps"], "namespaces": ["shared"]}]}}),
        )
        .await;
    }
    let mb = in_mailbox(&hub, &florin, &configmaps(), "shared").await;
    let placements_one = edge_placements(&one);
    let placements_two = edge_placements(&two);
    let (p1, p2) = (placements_one.clone(), placements_two.clone());
    let message = eventually(20, "a Conflict condition on both placements", || {
        let (p1, p2) = (p1.clone(), p2.clone());
        async move {
            let a = condition(&p1.get("p-one").await.ok()?, "Conflict");
            let b = condition(&p2.get("p-two").await.ok()?, "Conflict");
            (a.0 == "True" && b.0 == "True").then_some((a.1, b.1))
        }
    })
    .await;
    // Each side is told about its own placement and which copy stays,
    // never the other workspace's path or placement.
    let (holder, other) = message;
    assert!(
        holder.contains("(EdgePlacement p-one)") && holder.contains("the copy from this workspace stays"),
        "{holder}"
    );
    assert!(
        other.contains("(EdgePlacement p-two)") && other.contains("this workspace's is not placed there"),
        "{other}"
    );
    for (message, not) in [(&holder, ["wmw2", "p-two"]), (&other, ["wmw1", "p-one"])] {
        assert!(not.iter().all(|n| !message.contains(n)), "{message}");
    }
    let copy = mb.get("cfg").await.unwrap();
    assert_eq!(copy.data["data"]["who"], "one");
    // No flapping: the copy and the placements stay as they are.
    let (rv, p_rv) = (
        copy.metadata.resource_version.clone(),
        placements_two
            .get("p-two")
            .await
            .unwrap()
            .metadata
            .resource_version,
    );
    // Nudge the translator with an unrelated change, then look again.
    apply(&two, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nudge", "namespace": "default"}})).await;
    let mut stable = 0;
    eventually(10, "several passes without a write", || {
        stable += 1;
        let (mb, p2, rv, p_rv, stable) = (
            mb.clone(),
            placements_two.clone(),
            rv.clone(),
            p_rv.clone(),
            stable,
        );
        async move {
            let now = mb.get("cfg").await.ok()?;
            let p = p2.get("p-two").await.ok()?;
            assert_eq!(now.metadata.resource_version, rv, "the copy flapped");
            assert_eq!(
                p.metadata.resource_version, p_rv,
                "the placement's status flapped"
            );
            (stable > 25).then_some(())
        }
    })
    .await;
    // The holder leaves: the other side's copy takes its place, the conflict clears.
    delete(&placements_one, "p-one").await;
    let (mb2, p2) = (mb.clone(), placements_two.clone());
    eventually(15, "wmw2's copy and no conflict", || {
        let (mb, p2) = (mb2.clone(), p2.clone());
        async move {
            let copy = mb.get("cfg").await.ok()?;
            let c = condition(&p2.get("p-two").await.ok()?, "Conflict");
            (copy.data["data"]["who"] == "two" && c.0 == "False").then_some(())
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_selectors_and_unknown_resources_are_conditions_naming_the_field() {
    let hub = TestHub::start().await;
    let (florin, _, wmw) = example1_with_workload(&hub, false).await;
    apply(
        &wmw,
        json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "EdgePlacement", "metadata": {"name": "bad"},
               "spec": {"locationSelectors": [{"matchExpressions": [{"key": "env", "operator": "Sometimes", "values": ["prod"]}]}],
                        "downsync": [
                            {"apiGroup": "apps", "resources": ["deploymnets"], "namespaces": ["commonstuff"]},
                            {"apiGroup": "", "resources": ["configmaps"], "labelSelectors": [{"matchLabels": {"bad key!": "x"}}]}]}}),
    )
    .await;
    apply(&wmw, placement_c()).await;
    let placements = edge_placements(&wmw);
    let (status, message) = condition_when(
        &placements,
        "bad",
        ("InvalidSpec", "True"),
        15,
        "an InvalidSpec condition",
    )
    .await;
    assert_eq!(status, "True");
    for field in [
        "spec.locationSelectors[0]",
        "spec.downsync[0].resources[0]",
        "spec.downsync[1].labelSelectors[0]",
    ] {
        assert!(message.contains(field), "{field} not named in: {message}");
    }
    assert!(message.contains("deploymnets"), "{message}");
    // The good placement works all the same.
    placed_in(
        &hub,
        &florin,
        "deployments commonstuff/commond",
        "edge-placement-c's objects in florin's mailbox",
    )
    .await;
    condition_when(
        &placements,
        "edge-placement-c",
        ("Ready", "True"),
        10,
        "edge-placement-c to be Ready",
    )
    .await;
    // Fixing the spec clears the condition.
    apply(
        &wmw,
        json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "EdgePlacement", "metadata": {"name": "bad"},
               "spec": {"locationSelectors": [{"matchLabels": {"env": "prod"}}],
                        "downsync": [{"apiGroup": "apps", "resources": ["deployments"], "namespaces": ["commonstuff"]}]}}),
    )
    .await;
    condition_when(
        &placements,
        "bad",
        ("InvalidSpec", "False"),
        15,
        "InvalidSpec to clear",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sync_target_going_away_takes_its_copies_with_it() {
    let hub = TestHub::start().await;
    let (florin, guilder, wmw) = example1_with_workload(&hub, false).await;
    apply(&wmw, placement_c()).await;
    eventually(20, "copies in both mailboxes", || {
        let (hub, florin, guilder) = (&hub, florin.clone(), guilder.clone());
        async move {
            let ok = |p: Vec<String>| p.contains(&"deployments commonstuff/commond".to_string());
            (ok(placed(hub, &florin).await) && ok(placed(hub, &guilder).await)).then_some(())
        }
    })
    .await;
    let imw = client(&hub, "root:imw1").await;
    delete(&api(&imw, &edge("SyncTarget", "synctargets"), None), "guilder").await;
    let gone = in_mailbox(&hub, &guilder, &deployments(), "commonstuff").await;
    eventually(15, "guilder's copies to go", || {
        let gone = gone.clone();
        async move {
            match gone.get_opt("commond").await {
                Ok(Some(_)) => None,
                _ => Some(()),
            }
        }
    })
    .await;
    let slices = api(&wmw, &edge("SinglePlacementSlice", "singleplacementslices"), None);
    object_when(
        &slices,
        "edge-placement-c",
        10,
        "the slice to name florin only",
        |s| {
            s.data["destinations"]
                .as_array()
                .is_some_and(|d| d.len() == 1 && d[0]["syncTargetName"] == "florin")
        },
    )
    .await;
    assert!(placed(&hub, &florin)
        .await
        .contains(&"deployments commonstuff/commond".to_string()));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restart_mid_translation_converges_without_duplicates_or_orphans() {
    let first = TestHub::start().await;
    let (florin, guilder, wmw) = example1_placed(&first, false).await;
    placed_in(
        &first,
        &guilder,
        "deployments specialstuff/speciald",
        "guilder's special copies",
    )
    .await;
    // Change everything at once and stop the hub while it translates.
    delete(&edge_placements(&wmw), "edge-placement-s").await;
    apply(&wmw, deployment("commonstuff", "commond", 5)).await;
    let (running, dir) = first.into_parts();
    running.stop().await;
    let dir = dir.expect("the first hub's data directory");

    let hub = TestHub::start_in(dir.path()).await;
    let common = [
        "configmaps commonstuff/httpd-htdocs",
        "deployments commonstuff/commond",
        "namespaces commonstuff",
        "syncerconfigs the-one",
    ];
    for mailbox in [&florin, &guilder] {
        let c = in_mailbox(&hub, mailbox, &deployments(), "commonstuff").await;
        eventually(20, "the mailbox to converge after the restart", || {
            let (hub, mailbox, c) = (&hub, mailbox.clone(), c.clone());
            async move {
                let replicas = c.get("commond").await.ok()?.data["spec"]["replicas"].clone();
                (placed(hub, &mailbox).await == common && replicas == 5).then_some(())
            }
        })
        .await;
        let spec = the_one(&hub, mailbox).await.unwrap();
        assert_eq!(spec["clusterScope"][0]["objects"], json!(["commonstuff"]));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn reported_state_and_upsynced_reports_come_back_to_the_wmw() {
    let hub = TestHub::start().await;
    // Both clusters' syncers run (an executing copy is one a syncer acknowledged).
    let (florin, guilder, wmw) = example1_with_workload(&hub, true).await;
    // Kyverno-like: a CRD for policy reports and a policy (a ConfigMap standing in).
    let report_crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "policyreports.wgpolicyk8s.io"},
        "spec": {"group": "wgpolicyk8s.io", "scope": "Namespaced",
                 "names": {"kind": "PolicyReport", "plural": "policyreports", "singular": "policyreport", "listKind": "PolicyReportList"},
                 "versions": [{"name": "v1alpha2", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    apply(&wmw, report_crd).await;
    apply(
        &wmw,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "policy", "namespace": "commonstuff"},
               "data": {"rule": "require-labels"}}),
    )
    .await;
    apply(
        &wmw,
        json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "EdgePlacement", "metadata": {"name": "kyverno"},
               "spec": {"locationSelectors": [{"matchLabels": {"env": "prod"}}],
                        "downsync": [
                            {"apiGroup": "apiextensions.k8s.io", "resources": ["customresourcedefinitions"], "objectNames": ["policyreports.wgpolicyk8s.io"]},
                            {"apiGroup": "", "resources": ["configmaps"], "namespaces": ["commonstuff"], "objectNames": ["policy"]}],
                        "upsync": [{"apiGroup": "wgpolicyk8s.io", "resources": ["policyreports"], "namespaces": ["*"], "names": ["*"]}]}}),
    )
    .await;
    apply(&wmw, placement_special()).await;

    // The CRD reaches the mailboxes, and with it the kind the syncer upsyncs into.
    let reports = ar("wgpolicyk8s.io", "v1alpha2", "PolicyReport", "policyreports");
    for (mailbox, target) in [(&florin, "florin"), (&guilder, "guilder")] {
        let mb = client(&hub, mailbox).await;
        let a = api(&mb, &reports, Some("commonstuff"));
        eventually(
            20,
            "the placed CRD to serve PolicyReports and the policy in the mailbox",
            || {
                let (a, hub, mailbox) = (a.clone(), &hub, mailbox.clone());
                async move {
                    a.list(&ListParams::default()).await.ok()?;
                    placed(hub, &mailbox)
                        .await
                        .contains(&"configmaps commonstuff/policy".to_string())
                        .then_some(())
                }
            },
        )
        .await;
        // What the syncer does with a report made on the cluster.
        a.create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "wgpolicyk8s.io/v1alpha2", "kind": "PolicyReport",
                "metadata": {"name": "polr-ns-commonstuff", "namespace": "commonstuff",
                             "annotations": {"edge.kubestellar.io/upsynced": "PolicyReport/commonstuff/polr-ns-commonstuff"}},
                "summary": {"pass": 1, "fail": if target == "florin" { 0 } else { 2 }}}))
            .unwrap(),
        )
        .await
        .unwrap();
    }
    // Reports from both clusters, listed in the WMW, each labelled with its cluster.
    let in_wmw = api(&wmw, &reports, Some("commonstuff"));
    let listed = eventually(20, "both clusters' reports in the WMW", || {
        let in_wmw = in_wmw.clone();
        async move {
            let list = in_wmw
                .list(&ListParams::default().labels(RETURNED_LABEL))
                .await
                .ok()?;
            let mut names: Vec<(String, String, i64)> = list
                .items
                .iter()
                .map(|o| {
                    (
                        o.metadata.name.clone().unwrap(),
                        o.labels()[RETURNED_LABEL].clone(),
                        o.data["summary"]["fail"].as_i64().unwrap_or(-1),
                    )
                })
                .collect();
            names.sort();
            (names.len() == 2).then_some(names)
        }
    })
    .await;
    assert_eq!(
        listed,
        [
            ("florin-polr-ns-commonstuff".to_string(), "florin".to_string(), 0),
            (
                "guilder-polr-ns-commonstuff".to_string(),
                "guilder".to_string(),
                2
            )
        ]
    );
    // Executing count on each placed WMW object.
    let cms = api(&wmw, &configmaps(), Some("commonstuff"));
    object_when(&cms, "policy", 10, "executing-count 2 on the policy", |o| {
        executing_count(o) == Some("2")
    })
    .await;
    // The singleton placement's one copy reports its status into the WMW Deployment.
    let copy = in_mailbox(&hub, &guilder, &deployments(), "specialstuff").await;
    object_when(
        &copy,
        "speciald",
        15,
        "speciald's copy in guilder's mailbox",
        |_| true,
    )
    .await;
    merge_status(
        &copy,
        "speciald",
        json!({"replicas": 1, "availableReplicas": 1, "readyReplicas": 1}),
    )
    .await;
    let wmw_deploy = api(&wmw, &deployments(), Some("specialstuff"));
    object_when(&wmw_deploy, "speciald", 15, "speciald's status in the WMW", |d| {
        d.data["status"]["availableReplicas"] == 1 && executing_count(d) == Some("1")
    })
    .await;
    // A report gone from a mailbox goes from the WMW.
    delete(
        &in_mailbox(&hub, &florin, &reports, "commonstuff").await,
        "polr-ns-commonstuff",
    )
    .await;
    object_gone(
        &in_wmw,
        "florin-polr-ns-commonstuff",
        15,
        "florin's report to leave the WMW",
    )
    .await;
}

/// `(cluster, synced, statusDigest, lastUpdate)` of each destination in a summary.
fn destinations(s: &DynamicObject) -> Vec<(String, bool, String, String)> {
    s.data["destinations"]
        .as_array()
        .map(|ds| {
            ds.iter()
                .map(|d| {
                    (
                        d["cluster"].as_str().unwrap_or_default().to_string(),
                        d["synced"].as_bool().unwrap_or(false),
                        d["statusDigest"].as_str().unwrap_or_default().to_string(),
                        d["lastUpdate"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn placement_summaries_list_every_destination_and_follow_reported_status() {
    let hub = TestHub::start().await;
    let (florin, guilder, wmw) = example1_placed(&hub, true).await;
    let sums = api(&wmw, &summaries(), None);

    // commond goes to both clusters, speciald to guilder only; no status yet.
    eventually(20, "summaries naming each object's clusters", || {
        let sums = sums.clone();
        async move {
            let c = sums
                .get_opt("deployments.apps.commonstuff.commond")
                .await
                .ok()??;
            let s = sums
                .get_opt("deployments.apps.specialstuff.speciald")
                .await
                .ok()??;
            let cd = destinations(&c);
            let sd = destinations(&s);
            (c.data["executingCount"] == 2
                && cd.len() == 2
                && cd
                    .iter()
                    .all(|d| d.1 && d.2 == "no status yet" && !d.3.is_empty())
                && sd.len() == 1
                && sd[0].0 == "guilder"
                && sd[0].1)
                .then_some(())
        }
    })
    .await;
    sums.get_opt("configmaps.core.commonstuff.httpd-htdocs")
        .await
        .unwrap()
        .expect("the ConfigMap has a summary too");

    // florin's syncer reports status into its mailbox copy: only florin's entry changes.
    let before = destinations(&sums.get("deployments.apps.commonstuff.commond").await.unwrap());
    let florin_copies = in_mailbox(&hub, &florin, &deployments(), "commonstuff").await;
    merge_status(
        &florin_copies,
        "commond",
        json!({"replicas": 1, "availableReplicas": 1}),
    )
    .await;
    let after = eventually(15, "florin's status digest", || {
        let sums = sums.clone();
        async move {
            let d = destinations(&sums.get("deployments.apps.commonstuff.commond").await.ok()?);
            d.iter()
                .any(|d| d.0 == "florin" && d.2 == "1/1 available")
                .then_some(d)
        }
    })
    .await;
    let guilder_before = before.iter().find(|d| d.0 == "guilder").unwrap();
    let guilder_after = after.iter().find(|d| d.0 == "guilder").unwrap();
    assert_eq!(guilder_before, guilder_after, "guilder's entry is untouched");

    // kubectl shows one row per object with its clusters and digests.
    let out = hub.kubectl_in("root:wmw1", &["get", "placementsummaries"], None);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let row = text
        .lines()
        .find(|l| l.starts_with("deployments.apps.commonstuff.commond"))
        .unwrap_or_else(|| {
            panic!(
                "no commond row:\n{text}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    assert!(
        row.contains("florin,guilder") && row.contains("2/2") && row.contains("florin: 1/1 available"),
        "{text}"
    );

    // guilder's cluster refuses the copy: its syncer lists it on the-one, and
    // the summary says so for guilder alone, with the cluster's message.
    refuse_commond(&hub, &guilder).await;
    let refused_now = eventually(15, "guilder's refusal in the summary", || {
        let sums = sums.clone();
        async move {
            let d = destinations(&sums.get("deployments.apps.commonstuff.commond").await.ok()?);
            d.iter()
                .any(|d| d.0 == "guilder" && !d.1 && d.2.starts_with("refused: Deployment.apps"))
                .then_some(d)
        }
    })
    .await;
    assert!(
        refused_now.iter().any(|d| d.0 == "florin" && d.1),
        "florin's copy is still synced: {refused_now:?}"
    );

    // Without edge-placement-s, speciald's summary goes; guilder's copies of it too.
    delete(&edge_placements(&wmw), "edge-placement-s").await;
    object_gone(
        &sums,
        "deployments.apps.specialstuff.speciald",
        15,
        "speciald's summary to go",
    )
    .await;
}

/// EdgePlacement `edge-placement-c` once its Ready condition's status is
/// `want` (waiting up to `secs`), and that condition.
async fn c_ready(
    placements: &Api<DynamicObject>,
    want: &str,
    secs: u64,
    what: &str,
) -> (DynamicObject, Value) {
    let ready = |p: &DynamicObject| {
        p.data["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
            .cloned()
    };
    let p = object_when(placements, "edge-placement-c", secs, what, |p| {
        ready(p).is_some_and(|c| c["status"] == want)
    })
    .await;
    let c = ready(&p).expect("a Ready condition");
    (p, c)
}

/// A copy a destination's cluster refuses (as its syncer lists it on the
/// mailbox's `the-one`) is counted in the EdgePlacement's status and keeps it
/// from `Ready=True`, naming the object, the SyncTarget and the cluster's
/// message; once the refusal clears, so does the condition.
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_copy_keeps_its_placement_not_ready_and_counted_until_it_clears() {
    let hub = TestHub::start().await;
    let (_, guilder, wmw) = example1_with_workload(&hub, false).await;
    apply(&wmw, placement_c()).await;
    let placements = edge_placements(&wmw);
    c_ready(&placements, "True", 20, "edge-placement-c to be Ready").await;

    // guilder's syncer reports that its cluster refused commond.
    let configs = refuse_commond(&hub, &guilder).await;
    let (p, ready_condition) = c_ready(
        &placements,
        "False",
        15,
        "edge-placement-c not Ready for the refusal",
    )
    .await;
    assert_eq!(ready_condition["reason"], "CopiesRefused", "{ready_condition}");
    assert_eq!(p.data["status"]["refusedCount"], 1);
    assert_eq!(
        ready_condition["message"],
        "1 copy refused by their clusters: deployments.apps commonstuff/commond on guilder: \
         Deployment.apps \"commond\" is invalid: spec.template.spec.priorityClassName: Invalid value: \"gold\""
    );

    // The cluster takes the copy: the refusal goes, and Ready comes back.
    merge_status(
        &configs,
        "the-one",
        json!({"refusedCount": null, "refused": null}),
    )
    .await;
    let (p, _) = c_ready(&placements, "True", 15, "edge-placement-c Ready again").await;
    assert_eq!(p.data["status"]["refusedCount"], 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_placement_matching_no_location_is_not_ready_until_one_matches() {
    let hub = TestHub::start().await;
    let (_, _, wmw) = example1_with_workload(&hub, false).await;
    let mut nowhere = placement_c();
    nowhere["spec"]["locationSelectors"] = json!([{"matchLabels": {"env": "staging"}}]);
    apply(&wmw, nowhere).await;
    let placements = edge_placements(&wmw);
    let (_, c) = c_ready(
        &placements,
        "False",
        15,
        "edge-placement-c evaluated and not Ready",
    )
    .await;
    assert_eq!(c["reason"], "NoLocations", "{c}");
    assert!(
        c["message"]
            .as_str()
            .unwrap()
            .contains("no Location reached: a Location is used only when it matches a locationSelector"),
        "{c}"
    );

    // florin's Location joins staging: the placement reaches it and is Ready.
    label_location(&hub, "florin", json!({"env": "staging"})).await;
    let (_, c) = c_ready(&placements, "True", 15, "edge-placement-c Ready on florin").await;
    assert_eq!(c["reason"], "Placed", "{c}");
}

// ---------------------------------------------------------------- singleton status on the move

/// `special` (a singleton placement reaching Locations labelled extended=yes,
/// guilder in example1) with its Deployments `reported` and `written` placed
/// in guilder's mailbox, and guilder's status on `reported` returned to the WMW;
/// returns the WMW client and florin's and guilder's mailbox paths.
async fn singleton_stage(hub: &TestHub) -> (kube::Client, String, String) {
    let (florin, guilder) = example1(hub).await;
    let wmw = client(hub, "root:wmw1").await;
    apply(
        &wmw,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "specialstuff"}}),
    )
    .await;
    for name in ["reported", "written"] {
        apply(&wmw, deployment("specialstuff", name, 1)).await;
    }
    apply(&wmw, placement_special()).await;
    wait_copy(hub, &guilder, "reported").await;
    report_from(
        hub,
        &guilder,
        "reported",
        json!({"replicas": 1, "readyReplicas": 1, "availableReplicas": 1}),
    )
    .await;
    wmw_status(&wmw, "reported", "guilder's status on the WMW object", |s| {
        s["availableReplicas"] == 1
    })
    .await;
    (wmw, florin, guilder)
}

async fn wait_copy(hub: &TestHub, mailbox: &str, name: &str) {
    let copy = in_mailbox(hub, mailbox, &deployments(), "specialstuff").await;
    object_when(&copy, name, 20, "the copy in the mailbox", |_| true).await;
}

/// What the syncer does when its cluster reports on the copy of `name`.
async fn report_from(hub: &TestHub, mailbox: &str, name: &str, status: Value) {
    merge_status(
        &in_mailbox(hub, mailbox, &deployments(), "specialstuff").await,
        name,
        status,
    )
    .await;
}

async fn wmw_status(
    wmw: &kube::Client,
    name: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> DynamicObject {
    let a = api(wmw, &deployments(), Some("specialstuff"));
    object_when(&a, name, 15, what, |d| done(&d.data["status"])).await
}

/// Merges `labels` into Location `name`'s in `root:imw1`.
async fn label_location(hub: &TestHub, name: &str, labels: Value) {
    let imw = client(hub, "root:imw1").await;
    merge(
        &api(&imw, &edge("Location", "locations"), None),
        name,
        json!({"metadata": {"labels": labels}}),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_singleton_object_whose_location_stops_matching_loses_only_the_status_its_cluster_reported() {
    let hub = TestHub::start().await;
    let (wmw, _, _) = singleton_stage(&hub).await;
    // Someone other than the cluster writes `written`'s status.
    merge_status(
        &api(&wmw, &deployments(), Some("specialstuff")),
        "written",
        json!({"replicas": 7, "observedGeneration": 1}),
    )
    .await;

    label_location(&hub, "guilder", json!({"extended": null})).await;
    let a = api(&wmw, &deployments(), Some("specialstuff"));
    let d = object_when(
        &a,
        "reported",
        15,
        "guilder's status cleared, and the record of it",
        |d| {
            d.data["status"].get("availableReplicas").is_none()
                && !d.annotations().contains_key(REPORTED_FROM_ANNOTATION)
        },
    )
    .await;
    assert!(
        d.data["status"].as_object().is_none_or(|o| o.is_empty()),
        "nothing of guilder's status stays: {}",
        d.data["status"]
    );
    let written = get(&wmw, &deployments(), Some("specialstuff"), "written")
        .await
        .unwrap();
    assert_eq!(
        written.data["status"]["replicas"], 7,
        "a status the cluster did not report stays"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_singleton_object_moved_to_another_cluster_shows_the_new_clusters_status_never_the_old() {
    let hub = TestHub::start().await;
    let (wmw, florin, guilder) = singleton_stage(&hub).await;

    // The placement moves from guilder to florin.
    label_location(&hub, "florin", json!({"extended": "yes"})).await;
    label_location(&hub, "guilder", json!({"extended": null})).await;
    wait_copy(&hub, &florin, "reported").await;
    wmw_status(
        &wmw,
        "reported",
        "guilder's status cleared before florin reports",
        |s| s.get("availableReplicas").is_none(),
    )
    .await;
    report_from(
        &hub,
        &florin,
        "reported",
        json!({"replicas": 1, "readyReplicas": 0, "unavailableReplicas": 1}),
    )
    .await;
    let d = wmw_status(&wmw, "reported", "florin's status on the WMW object", |s| {
        s["unavailableReplicas"] == 1
    })
    .await;
    assert_eq!(
        d.annotations()
            .get(REPORTED_FROM_ANNOTATION)
            .map(|a| a.split(' ').next().unwrap()),
        Some(florin.as_str()),
        "the status is recorded as florin's"
    );
    let old = in_mailbox(&hub, &guilder, &deployments(), "specialstuff").await;
    object_gone(&old, "reported", 15, "guilder's copy to go").await;
    let d = get(&wmw, &deployments(), Some("specialstuff"), "reported")
        .await
        .unwrap();
    assert_eq!(
        d.data["status"]["readyReplicas"], 0,
        "guilder's status never comes back"
    );
    assert!(
        d.data["status"].get("availableReplicas").is_none(),
        "{}",
        d.data["status"]
    );
}

// ---------------------------------------------------------------- customization

fn customizers() -> ApiResource {
    edge("Customizer", "customizers")
}

/// commonstuff in the WMW and an EdgePlacement sending its ConfigMaps and
/// Deployments to every env=prod Location (florin and guilder).
async fn customization_stage(wmw: &kube::Client) {
    apply(
        wmw,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "commonstuff"}}),
    )
    .await;
    apply(
        wmw,
        json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "EdgePlacement",
               "metadata": {"name": "customized"},
               "spec": {"locationSelectors": [{"matchLabels": {"env": "prod"}}],
                        "downsync": [{"apiGroup": "", "resources": ["configmaps"], "namespaces": ["commonstuff"]},
                                     {"apiGroup": "apps", "resources": ["deployments"], "namespaces": ["commonstuff"]}]}}),
    )
    .await;
}

fn configmap(name: &str, opted_in: bool, text: &str) -> Value {
    let annotations = if opted_in {
        json!({"edge.kubestellar.io/expand-parameters": "true"})
    } else {
        json!({})
    };
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "commonstuff", "annotations": annotations},
           "data": {"index.html": text}})
}

/// `data["index.html"]` of ConfigMap `name` in a mailbox, once it is `want`.
async fn wait_text(hub: &TestHub, mailbox: &str, name: &str, want: &str) {
    let c = in_mailbox(hub, mailbox, &configmaps(), "commonstuff").await;
    let what = format!("{name} in {mailbox} to read {want:?}");
    object_when(&c, name, 15, &what, |o| o.data["data"]["index.html"] == want).await;
}

async fn wait_env(hub: &TestHub, mailbox: &str, want: &str) {
    let c = in_mailbox(hub, mailbox, &deployments(), "commonstuff").await;
    let what = format!("commond's env in {mailbox} to be {want:?}");
    object_when(&c, "commond", 15, &what, |o| {
        o.data["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] == want
    })
    .await;
}

/// The `CustomizationError` condition of EdgePlacement `customized` once `done` holds for it.
async fn wait_customization(wmw: &kube::Client, what: &str, done: impl Fn(&str, &str) -> bool) -> String {
    let o = object_when(&edge_placements(wmw), "customized", 15, what, |o| {
        let (status, message) = condition(o, "CustomizationError");
        done(&status, &message)
    })
    .await;
    condition(&o, "CustomizationError").1
}

#[tokio::test(flavor = "multi_thread")]
async fn customized_copies_differ_per_destination_and_follow_labels_and_customizers() {
    let hub = TestHub::start().await;
    let (florin, guilder) = example1(&hub).await;
    let wmw = client(&hub, "root:wmw1").await;
    customization_stage(&wmw).await;
    // KubeStellar's example1: the web page says where it runs; the
    // Deployment's env comes from a Customizer that is itself expanded.
    apply(
        &wmw,
        configmap("httpd-htdocs", true, "Running in %(loc-name), 100%% %%(sure)."),
    )
    .await;
    apply(&wmw, configmap("untouched", false, "Running in %(loc-name).")).await;
    apply(
        &wmw,
        json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "Customizer",
               "metadata": {"name": "example-customizer", "namespace": "commonstuff",
                            "annotations": {"edge.kubestellar.io/expand-parameters": "true"}},
               "replacements": [{"path": "$.spec.template.spec.containers.0.env.0.value", "value": "\"env is %(env) in %(loc-name)\""},
                                {"path": "$.metadata.labels.where", "value": "\"%(loc-name)\""}]}),
    )
    .await;
    let mut d = deployment("commonstuff", "commond", 1);
    d["metadata"]["annotations"] = json!({"edge.kubestellar.io/customizer": "example-customizer"});
    d["spec"]["template"]["spec"]["containers"][0]["env"] =
        json!([{"name": "EXAMPLE_VAR", "value": "example value"}]);
    apply(&wmw, d).await;

    for (mailbox, name) in [(&florin, "florin"), (&guilder, "guilder")] {
        wait_text(
            &hub,
            mailbox,
            "httpd-htdocs",
            &format!("Running in {name}, 100% %(sure)."),
        )
        .await;
        wait_env(&hub, mailbox, &format!("env is prod in {name}")).await;
        wait_text(&hub, mailbox, "untouched", "Running in %(loc-name).").await;
        let copy = get(
            &client(&hub, mailbox).await,
            &deployments(),
            Some("commonstuff"),
            "commond",
        )
        .await
        .unwrap();
        assert_eq!(copy.labels()["where"], name);
        assert_eq!(
            copy.labels()[PLACED_LABEL],
            "true",
            "the translator's mark survives"
        );
    }
    // The WMW objects themselves are not expanded.
    let source = get(&wmw, &configmaps(), Some("commonstuff"), "httpd-htdocs")
        .await
        .unwrap();
    assert_eq!(
        source.data["data"]["index.html"],
        "Running in %(loc-name), 100%% %%(sure)."
    );
    // The copies are written before the placement's status, so the
    // condition is waited for, not read once.
    wait_customization(&wmw, "CustomizationError to say False", |s, _| s == "False").await;

    // A Location's label changes: only its destination's copies are re-expanded.
    label_location(&hub, "florin", json!({"loc-name": "florin-2"})).await;
    wait_text(
        &hub,
        &florin,
        "httpd-htdocs",
        "Running in florin-2, 100% %(sure).",
    )
    .await;
    wait_env(&hub, &florin, "env is prod in florin-2").await;
    wait_text(
        &hub,
        &guilder,
        "httpd-htdocs",
        "Running in guilder, 100% %(sure).",
    )
    .await;

    // The Customizer changes: every copy of the object that names it follows.
    merge(&api(&wmw, &customizers(), Some("commonstuff")), "example-customizer", json!({"replacements": [
                {"path": "$.spec.template.spec.containers[0].env[0].value", "value": "\"v2 for %(loc-name)\""}]})).await;
    wait_env(&hub, &florin, "v2 for florin-2").await;
    wait_env(&hub, &guilder, "v2 for guilder").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_undefined_parameter_is_a_condition_that_holds_back_only_that_copy() {
    let hub = TestHub::start().await;
    let (florin, guilder) = example1(&hub).await;
    let imw = client(&hub, "root:imw1").await;
    label_location(&hub, "guilder", json!({"zone": "z-g"})).await;
    let wmw = client(&hub, "root:wmw1").await;
    customization_stage(&wmw).await;
    apply(&wmw, configmap("zoned", true, "zone %(zone)")).await;
    apply(&wmw, configmap("httpd-htdocs", true, "Running in %(loc-name).")).await;

    // florin has no zone: its zoned copy is held back and the placement says why;
    // the other object, and guilder, are placed.
    let message = wait_customization(&wmw, "the CustomizationError condition naming zoned", |s, m| {
        s == "True" && m.contains("configmaps commonstuff/zoned for SyncTarget florin")
    })
    .await;
    assert!(message.contains("%(zone)"), "{message}");
    assert!(!message.contains("guilder"), "{message}");
    wait_text(&hub, &guilder, "zoned", "zone z-g").await;
    wait_text(&hub, &florin, "httpd-htdocs", "Running in florin.").await;
    wait_text(&hub, &guilder, "httpd-htdocs", "Running in guilder.").await;
    let florin_cms = in_mailbox(&hub, &florin, &configmaps(), "commonstuff").await;
    assert!(florin_cms.get_opt("zoned").await.unwrap().is_none());
    let p = get(&wmw, &edge("EdgePlacement", "edgeplacements"), None, "customized")
        .await
        .unwrap();
    assert_eq!(condition(&p, "Ready").0, "False");
    let summary = get(&wmw, &summaries(), None, "configmaps.core.commonstuff.zoned")
        .await
        .unwrap();
    let florin_row = destinations(&summary)
        .into_iter()
        .find(|d| d.0 == "florin")
        .unwrap();
    assert!(
        !florin_row.1 && florin_row.2.contains("not customized"),
        "{florin_row:?}"
    );

    // The fix comes as an annotation of florin's SyncTarget: converges, no restart.
    merge(
        &api(&imw, &edge("SyncTarget", "synctargets"), None),
        "florin",
        json!({"metadata": {"annotations": {"zone": "z-f"}}}),
    )
    .await;
    wait_text(&hub, &florin, "zoned", "zone z-f").await;
    wait_customization(&wmw, "CustomizationError to clear", |s, _| s == "False").await;

    // A new undefined parameter: the copies already placed stay as they were.
    apply(&wmw, configmap("zoned", true, "zone %(zone) in %(rack)")).await;
    let message = wait_customization(&wmw, "the condition to name both destinations", |s, m| {
        s == "True" && m.contains("SyncTarget florin") && m.contains("SyncTarget guilder")
    })
    .await;
    assert!(message.contains("%(rack)"), "{message}");
    wait_text(&hub, &florin, "zoned", "zone z-f").await;
    wait_text(&hub, &guilder, "zoned", "zone z-g").await;

    // A Customizer that does not exist is named. The WMW predates the kind
    // (its CRD is removed here): the translator installs it.
    let crds: Api<CustomResourceDefinition> = Api::all(wmw.clone());
    crds.delete("customizers.edge.kubestellar.io", &DeleteParams::default())
        .await
        .unwrap();
    let c = api(&wmw, &customizers(), Some("commonstuff"));
    eventually(15, "the Customizer kind to go", || {
        let c = c.clone();
        async move { c.list(&ListParams::default()).await.is_err().then_some(()) }
    })
    .await;
    let mut d = deployment("commonstuff", "commond", 1);
    d["metadata"]["annotations"] = json!({"edge.kubestellar.io/customizer": "absent"});
    apply(&wmw, d).await;
    wait_customization(&wmw, "the condition to name the missing Customizer", |s, m| {
        s == "True"
            && m.contains("deployments.apps commonstuff/commond for SyncTarget florin")
            && m.contains("Customizer commonstuff/absent does not exist")
    })
    .await;
    let florin_deploys = in_mailbox(&hub, &florin, &deployments(), "commonstuff").await;
    assert!(florin_deploys.get_opt("commond").await.unwrap().is_none());
    eventually(15, "the Customizer kind to be served again", || {
        let c = c.clone();
        async move { c.list(&ListParams::default()).await.ok().map(|_| ()) }
    })
    .await;
    // Created, it applies.
    apply(
        &wmw,
        json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "Customizer",
               "metadata": {"name": "absent", "namespace": "commonstuff"},
               "replacements": [{"path": "$.spec.replicas", "value": "4"}]}),
    )
    .await;
    object_when(
        &florin_deploys,
        "commond",
        15,
        "commond with 4 replicas in florin's mailbox",
        |o| o.data["spec"]["replicas"] == 4,
    )
    .await;
    wait_customization(&wmw, "only zoned's problem to remain", |s, m| {
        s == "True" && !m.contains("absent")
    })
    .await;
    // A customized copy the mailbox refuses is a customization problem too.
    merge(
        &api(&wmw, &customizers(), Some("commonstuff")),
        "absent",
        json!({"replacements": [{"path": "$.spec.replicas", "value": "\"four\""}]}),
    )
    .await;
    wait_customization(&wmw, "the condition to say the copy was refused", |s, m| {
        s == "True"
            && m.contains(
                "deployments.apps commonstuff/commond for SyncTarget florin: the customized copy was refused",
            )
    })
    .await;
}

/// Changes to WMW objects are handled per object (an object pass): several
/// in one burst all reach every mailbox that wants them, the last of quick
/// successive writes wins, and a mailbox that wants none of them is not
/// written at all.
#[tokio::test(flavor = "multi_thread")]
async fn object_changes_in_one_burst_all_arrive_and_leave_other_mailboxes_unwritten() {
    let hub = TestHub::start().await;
    let (florin, guilder, wmw) = example1_placed(&hub, false).await;
    eventually(
        20,
        "florin's and guilder's mailboxes to hold their objects",
        || {
            let (hub, florin, guilder) = (&hub, florin.clone(), guilder.clone());
            async move {
                (placed(hub, &florin).await.len() == 4 && placed(hub, &guilder).await.len() == 7)
                    .then_some(())
            }
        },
    )
    .await;
    let florin_mb = client(&hub, &florin).await;
    let florin_cm = api(&florin_mb, &configmaps(), Some("commonstuff"));
    let configs = api(&florin_mb, &edge("SyncerConfig", "syncerconfigs"), None);
    let rv = |o: DynamicObject| o.resource_version().unwrap_or_default();
    let cm_before = rv(florin_cm.get("httpd-htdocs").await.unwrap());
    let the_one_before = rv(configs.get("the-one").await.unwrap());

    // One burst: a changed object, a new one, and two quick writes of a third.
    for (name, data) in [
        ("httpd-htdocs", json!({"index.html": "<html>changed</html>"})),
        ("extra", json!({"a": "b"})),
    ] {
        apply(
            &wmw,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": name, "namespace": "specialstuff", "labels": {"app.kubernetes.io/part-of": "my-app"}},
                   "data": data}),
        )
        .await;
    }
    apply(&wmw, deployment("specialstuff", "speciald", 2)).await;
    apply(&wmw, deployment("specialstuff", "speciald", 4)).await;

    let special_cm = in_mailbox(&hub, &guilder, &configmaps(), "specialstuff").await;
    object_when(
        &special_cm,
        "httpd-htdocs",
        20,
        "the changed ConfigMap in guilder's mailbox",
        |o| o.data["data"]["index.html"] == "<html>changed</html>",
    )
    .await;
    object_when(
        &special_cm,
        "extra",
        20,
        "the new ConfigMap in guilder's mailbox",
        |_| true,
    )
    .await;
    let special_d = in_mailbox(&hub, &guilder, &deployments(), "specialstuff").await;
    object_when(
        &special_d,
        "speciald",
        20,
        "the last write of speciald in guilder's mailbox",
        |o| o.data["spec"]["replicas"] == 4,
    )
    .await;
    eventually(20, "guilder's the-one to list the new ConfigMap", || {
        let hub = &hub;
        let guilder = guilder.clone();
        async move {
            let spec = the_one(hub, &guilder).await?;
            spec.to_string().contains("\"extra\"").then_some(())
        }
    })
    .await;
    // A full pass has run since (it refreshes the reported state): it too
    // left florin's mailbox, which wants none of the changed objects, alone.
    eventually(20, "the new ConfigMap's PlacementSummary", || {
        let wmw = wmw.clone();
        async move {
            let summaries = api(
                &wmw,
                &ar(
                    "edge.ferry.dev",
                    "v1alpha1",
                    "PlacementSummary",
                    "placementsummaries",
                ),
                None,
            );
            let list = summaries.list(&ListParams::default()).await.ok()?;
            list.items
                .iter()
                .any(|s| s.data["object"]["name"] == "extra")
                .then_some(())
        }
    })
    .await;
    assert_eq!(
        rv(florin_cm.get("httpd-htdocs").await.unwrap()),
        cm_before,
        "florin's copy rewritten"
    );
    assert_eq!(
        rv(configs.get("the-one").await.unwrap()),
        the_one_before,
        "florin's the-one rewritten"
    );
    assert_eq!(placed(&hub, &florin).await.len(), 4);
}

/// Workspaces that place nothing cost the placement translator nothing:
/// making thirty of them and writing in each makes no translator pass,
/// while a new Location (the twin) makes exactly one. Each pass is counted
/// on the hub's `/metrics` once it is done.
#[tokio::test(flavor = "multi_thread")]
async fn workspaces_that_place_nothing_make_no_translator_pass() {
    let hub = TestHub::start().await;
    let imw = client(&hub, "root:imw1").await;
    workspace(&hub, "imw1").await;
    // The translator's passes once one more than `floor` is done.
    let pass_after = |floor: f64, what: &'static str| {
        let hub = &hub;
        async move {
            eventually(15, what, || async {
                let n = translator_passes(hub).await;
                (n > floor).then_some(n)
            })
            .await
        }
    };
    let location = |name: &str| {
        json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "Location",
               "metadata": {"name": name},
               "spec": {"resource": {"group": "edge.kubestellar.io", "version": "v2alpha1", "resource": "synctargets"},
                        "instanceSelector": {"matchLabels": {"id": name}}}})
    };
    // A pass that is done, so none is left over from the start.
    let started = translator_passes(&hub).await;
    apply(&imw, location("first")).await;
    let before = pass_after(started, "the first Location's pass").await;
    for i in 0..30 {
        let name = format!("tenant{i}");
        ferry_testkit::workspaces::ready_workspace(&hub, &name).await;
        let tenant = client(&hub, &format!("root:{name}")).await;
        let cms: Api<DynamicObject> = Api::namespaced_with(
            tenant,
            "default",
            &ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
        );
        let cm = serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
                                                "metadata": {"name": "own"}, "data": {"i": i.to_string()}}))
        .unwrap();
        cms.create(&PostParams::default(), &cm)
            .await
            .unwrap_or_else(|e| panic!("a ConfigMap in {name}: {e}"));
    }
    let quiet = translator_passes(&hub).await;
    apply(&imw, location("second")).await;
    let after = pass_after(quiet, "the second Location's pass").await;
    assert_eq!(
        (quiet - before, after - before),
        (0.0, 1.0),
        "translator passes while 30 workspaces were made and written in, and in all with the second Location"
    );
}

/// The placement translator's passes so far, from the hub's `/metrics`.
async fn translator_passes(hub: &TestHub) -> f64 {
    let scrape = common::scrape_metrics(hub).await;
    common::metric_sum(
        &scrape,
        "ferry_controller_events_total",
        &[r#"name="PlacementTranslator""#],
    )
}
