//! kcp TMC placement and scheduling on a hub: a workspace with two
//! SyncTargets gets a default Location; a Placement in another workspace
//! selects it; namespaces the Placement selects are spread over the targets
//! (label `state.workload.kcp.io/<key>=Sync`) and every object in them
//! follows, later ones too. A cordoned target gets no new namespaces; an
//! evicted one loses them, with kcp's deletion handshake: the old key gets
//! `deletion.internal.workload.kcp.io/<key>` and its label goes only once
//! the syncer's finalizer is gone. An object deleted upstream waits for
//! its syncer the same way.

mod common;
use common::tmc::*;
use common::{admin, create, delete_ok, eventually, ok, post_created};
use ferry_api::workload::sync_target_key;
use ferry_testkit::TestHub;
use serde_json::{json, Value};

struct World {
    hub: TestHub,
    /// Logical cluster of root:loc (the SyncTargets' workspace).
    loc: String,
    east: String,
    west: String,
}

/// root:loc with SyncTargets east and west; root:app with a Placement
/// selecting namespaces labelled `purpose=workload`.
async fn world() -> World {
    let hub = TestHub::start().await;
    let loc = workspace(&hub, "loc").await;
    workspace(&hub, "app").await;
    sync_target(&hub, "root:loc", "east", json!({"region": "east"})).await;
    sync_target(&hub, "root:loc", "west", json!({"region": "west"})).await;
    placement(
        &hub,
        "root:app",
        "compute",
        "root:loc",
        json!([{}]),
        json!({"matchLabels": {"purpose": "workload"}}),
    )
    .await;
    World {
        east: sync_target_key(&loc, "east"),
        west: sync_target_key(&loc, "west"),
        hub,
        loc,
    }
}

fn ns_path(name: &str) -> String {
    format!("/api/v1/namespaces/{name}")
}

fn cm_path(ns: &str, name: &str) -> String {
    format!("/api/v1/namespaces/{ns}/configmaps/{name}")
}

/// Wait until the namespace is on exactly one target, with `Sync`; returns its key.
async fn scheduled(hub: &TestHub, ns: &str) -> String {
    let obj = wait_for(
        hub,
        "root:app",
        &ns_path(ns),
        &format!("namespace {ns} scheduled"),
        |o| {
            let s = states(o);
            s.len() == 1 && s.values().all(|v| v == "Sync")
        },
    )
    .await;
    states(&obj).into_keys().next().expect("one key")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_placement_spreads_namespaces_over_targets_and_their_objects_follow() {
    let w = world().await;
    let hub = &w.hub;

    // kcp's default Location: every SyncTarget of the workspace.
    let loc = wait_for(
        hub,
        "root:loc",
        &format!("{SCHEDULING}/locations/default"),
        "the default Location counts both targets",
        |l| l["status"]["instances"] == 2,
    )
    .await;
    assert_eq!(loc["spec"]["resource"]["resource"], "synctargets", "{loc}");
    assert_eq!(loc["spec"]["instanceSelector"], json!({}), "{loc}");
    assert!(loc["status"]["availableInstances"].is_number(), "{loc}");

    // Objects made before scheduling get labelled too.
    namespace(hub, "root:app", "ns-0", json!({"purpose": "workload"})).await;
    configmap(hub, "root:app", "ns-0", "early").await;
    for i in 1..6 {
        namespace(
            hub,
            "root:app",
            &format!("ns-{i}"),
            json!({"purpose": "workload"}),
        )
        .await;
    }
    namespace(hub, "root:app", "elsewhere", json!({"purpose": "other"})).await;

    let p = wait_for(
        hub,
        "root:app",
        &format!("{SCHEDULING}/placements/compute"),
        "the Placement is Bound",
        |p| p["status"]["phase"] == "Bound",
    )
    .await;
    assert_eq!(
        p["status"]["selectedLocation"],
        json!({"path": "root:loc", "locationName": "default"})
    );
    let mut on_east = 0;
    for i in 0..6 {
        let key = scheduled(hub, &format!("ns-{i}")).await;
        assert!(key == w.east || key == w.west, "{key}");
        if key == w.east {
            on_east += 1;
        }
    }
    assert_eq!(on_east, 3, "six namespaces over two targets: three each");
    // The placement annotation marks what the Placement selects, and only that.
    let ns0 = get(hub, "root:app", &ns_path("ns-0")).await;
    assert_eq!(annotation(&ns0, "scheduling.kcp.io/placement"), Some(""));
    let other = get(hub, "root:app", &ns_path("elsewhere")).await;
    assert!(states(&other).is_empty(), "{other}");
    assert_eq!(annotation(&other, "scheduling.kcp.io/placement"), None);

    // Objects carry their namespace's label: earlier ones and later ones.
    let key0 = states(&ns0).into_keys().next().unwrap();
    let early = wait_for(
        hub,
        "root:app",
        &cm_path("ns-0", "early"),
        "early labelled",
        |o| !states(o).is_empty(),
    )
    .await;
    assert_eq!(states(&early), [(key0.clone(), "Sync".to_string())].into());
    post_created(
        &admin(hub, "root:app").await,
        "/api/v1/namespaces/ns-0/pods",
        &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                     "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
    )
    .await;
    create(
        hub,
        "root:app",
        "/api/v1/namespaces/ns-0/secrets",
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "late"}, "stringData": {"a": "b"}}),
    )
    .await;
    let late = wait_for(
        hub,
        "root:app",
        "/api/v1/namespaces/ns-0/secrets/late",
        "a later secret labelled",
        |o| !states(o).is_empty(),
    )
    .await;
    assert_eq!(states(&late), [(key0.clone(), "Sync".to_string())].into());
    // Pods are the syncer's to upsync, never labelled for downsync (the
    // secret made after it is labelled, so the pod's turn has passed).
    let pod = get(hub, "root:app", "/api/v1/namespaces/ns-0/pods/p").await;
    assert!(states(&pod).is_empty(), "{pod}");
    // Nothing in an unselected namespace.
    configmap(hub, "root:app", "elsewhere", "cm").await;
    barrier(hub, "ns-1", "barrier").await;
    let cm = get(hub, "root:app", &cm_path("elsewhere", "cm")).await;
    assert!(states(&cm).is_empty(), "{cm}");

    // kubectl sees the Placement as a user would.
    let args = [
        "get",
        "placements.scheduling.kcp.io",
        "compute",
        "-o",
        "jsonpath={.status.phase}",
    ];
    assert_eq!(
        ok(hub.kubectl_in("root:app", &args, None), "kubectl get placements"),
        "Bound"
    );

    // A namespace relabelled away from the Placement leaves its target,
    // and its objects with it (no syncer holds them).
    admin_patch(
        hub,
        "root:app",
        &ns_path("ns-0"),
        json!({"metadata": {"labels": {"purpose": "none"}}}),
    )
    .await;
    wait_for(hub, "root:app", &ns_path("ns-0"), "ns-0 unscheduled", |o| {
        states(o).is_empty() && annotation(o, "scheduling.kcp.io/placement").is_none()
    })
    .await;
    wait_for(
        hub,
        "root:app",
        &cm_path("ns-0", "early"),
        "early unlabelled",
        |o| {
            states(o).is_empty()
                && annotation(o, &format!("deletion.internal.workload.kcp.io/{key0}")).is_none()
        },
    )
    .await;

    // A workspace without Placements: labels set by hand are the user's.
    workspace(hub, "manual").await;
    let by_hand = format!("{STATE_PREFIX}{}", w.east);
    namespace(hub, "root:manual", "work", json!({by_hand.clone(): "Sync"})).await;
    create(
        hub,
        "root:manual",
        "/api/v1/namespaces/work/configmaps",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "alone"}}),
    )
    .await;
    // Barrier: a later change elsewhere has been handled.
    barrier(hub, "ns-2", "after-manual").await;
    let ns = get(hub, "root:manual", &ns_path("work")).await;
    assert_eq!(states(&ns), [(w.east.clone(), "Sync".to_string())].into(), "{ns}");
    assert!(annotation(&ns, &format!("deletion.internal.workload.kcp.io/{}", w.east)).is_none());
    let alone = get(hub, "root:manual", &cm_path("work", "alone")).await;
    assert!(states(&alone).is_empty(), "{alone}");
    let _ = w.loc;
}

/// ConfigMap `ns/name` in `root:app`, once labelled: a barrier, so the
/// scheduler has handled what came before it.
async fn barrier(hub: &TestHub, ns: &str, name: &str) {
    configmap(hub, "root:app", ns, name).await;
    wait_for(hub, "root:app", &cm_path(ns, name), "barrier labelled", |o| {
        !states(o).is_empty()
    })
    .await;
}

/// Merges `spec` into SyncTarget `name`'s in `root:loc`.
async fn target_spec(hub: &TestHub, name: &str, spec: Value) {
    let path = format!("{WORKLOAD}/synctargets/{name}");
    admin_patch(hub, "root:loc", &path, json!({ "spec": spec })).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cordoned_targets_get_no_new_namespaces_and_evicted_ones_hand_theirs_over() {
    let w = world().await;
    let hub = &w.hub;

    // East cordoned: everything new goes west.
    target_spec(hub, "east", json!({"unschedulable": true})).await;
    for ns in ["a1", "a2", "a3"] {
        namespace(hub, "root:app", ns, json!({"purpose": "workload"})).await;
    }
    for ns in ["a1", "a2", "a3"] {
        assert_eq!(
            scheduled(hub, ns).await,
            w.west,
            "{ns} avoids the cordoned target"
        );
    }

    // West cordoned instead: a new namespace goes east; the others stay west.
    target_spec(hub, "east", json!({"unschedulable": false})).await;
    target_spec(hub, "west", json!({"unschedulable": true})).await;
    namespace(hub, "root:app", "mover", json!({"purpose": "workload"})).await;
    assert_eq!(scheduled(hub, "mover").await, w.east);
    assert_eq!(scheduled(hub, "a1").await, w.west, "cordoning evicts nothing");
    target_spec(hub, "west", json!({"unschedulable": false})).await;

    // East's syncer holds the namespace and an object in it.
    let east_finalizer = format!("workload.kcp.io/syncer-{}", w.east);
    configmap(hub, "root:app", "mover", "cm").await;
    wait_for(hub, "root:app", &cm_path("mover", "cm"), "cm on east", |o| {
        states(o).contains_key(&w.east)
    })
    .await;
    for path in [ns_path("mover"), cm_path("mover", "cm")] {
        admin_patch(
            hub,
            "root:app",
            &path,
            json!({"metadata": {"finalizers": [east_finalizer]}}),
        )
        .await;
    }

    // East evicted (evictAfter passed): mover moves west; east is told, keeps its label.
    target_spec(hub, "east", json!({"evictAfter": "2020-01-01T00:00:00Z"})).await;
    let deletion_east = format!("deletion.internal.workload.kcp.io/{}", w.east);
    let ns = wait_for(hub, "root:app", &ns_path("mover"), "mover moves west", |o| {
        states(o).get(&w.west).map(String::as_str) == Some("Sync")
    })
    .await;
    assert!(annotation(&ns, &deletion_east).is_some(), "{ns}");
    assert!(
        states(&ns).contains_key(&w.east),
        "held by east's finalizer: {ns}"
    );
    let cm = wait_for(hub, "root:app", &cm_path("mover", "cm"), "cm follows west", |o| {
        states(o).contains_key(&w.west) && annotation(o, &deletion_east).is_some()
    })
    .await;
    assert!(states(&cm).contains_key(&w.east), "{cm}");
    // A barrier: a later object is labelled, so the controller has been
    // through the namespace again, and the old label is still there.
    configmap(hub, "root:app", "mover", "barrier").await;
    wait_for(
        hub,
        "root:app",
        &cm_path("mover", "barrier"),
        "barrier labelled",
        |o| states(o).contains_key(&w.west),
    )
    .await;
    let ns = get(hub, "root:app", &ns_path("mover")).await;
    assert!(states(&ns).contains_key(&w.east), "{ns}");

    // East's syncer lets go: the old labels and annotations go.
    for path in [cm_path("mover", "cm"), ns_path("mover")] {
        admin_patch(hub, "root:app", &path, json!({"metadata": {"finalizers": null}})).await;
    }
    for path in [ns_path("mover"), cm_path("mover", "cm")] {
        wait_for(hub, "root:app", &path, "east's label removed", |o| {
            !states(o).contains_key(&w.east)
                && annotation(o, &deletion_east).is_none()
                && states(o).contains_key(&w.west)
        })
        .await;
    }

    // A later eviction time: the timer moves west's namespaces east when it comes.
    target_spec(hub, "east", json!({"evictAfter": null})).await;
    let soon = (chrono::Utc::now() + chrono::Duration::seconds(3))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    target_spec(hub, "west", json!({"evictAfter": soon})).await;
    assert_eq!(
        states(&get(hub, "root:app", &ns_path("a1")).await)
            .get(&w.west)
            .map(String::as_str),
        Some("Sync"),
        "nothing moves before the time"
    );
    for ns in ["a1", "a2", "a3", "mover"] {
        wait_for(hub, "root:app", &ns_path(ns), "moved east at evictAfter", |o| {
            states(o).keys().collect::<Vec<_>>() == vec![&w.east]
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_deleted_upstream_stays_until_its_syncer_lets_go() {
    let w = world().await;
    let hub = &w.hub;
    namespace(hub, "root:app", "work", json!({"purpose": "workload"})).await;
    let key = scheduled(hub, "work").await;
    configmap(hub, "root:app", "work", "cm").await;
    wait_for(hub, "root:app", &cm_path("work", "cm"), "cm labelled", |o| {
        states(o).contains_key(&key)
    })
    .await;
    let finalizer = format!("workload.kcp.io/syncer-{key}");
    admin_patch(
        hub,
        "root:app",
        &cm_path("work", "cm"),
        json!({"metadata": {"finalizers": [finalizer]}}),
    )
    .await;
    delete_ok(&admin(hub, "root:app").await, &cm_path("work", "cm")).await;
    let cm = wait_for(
        hub,
        "root:app",
        &cm_path("work", "cm"),
        "the syncer is told",
        |o| annotation(o, &format!("deletion.internal.workload.kcp.io/{key}")).is_some(),
    )
    .await;
    assert!(cm["metadata"]["deletionTimestamp"].is_string(), "{cm}");
    assert_eq!(
        annotation(&cm, &format!("deletion.internal.workload.kcp.io/{key}")),
        cm["metadata"]["deletionTimestamp"].as_str()
    );
    admin_patch(
        hub,
        "root:app",
        &cm_path("work", "cm"),
        json!({"metadata": {"finalizers": null}}),
    )
    .await;
    eventually(10, "the configmap is gone", || async {
        try_get(hub, "root:app", &cm_path("work", "cm"))
            .await
            .is_none()
            .then_some(())
    })
    .await;
    let _: Value = json!(w.loc);
}

fn rv(obj: &Value) -> String {
    obj["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Two Placements on two Locations: a change of one Location's SyncTargets
/// moves only the namespaces of the Placement on it; the other Placement's
/// namespace is not written at all (its resourceVersion stays), and a
/// namespace both select keeps the other Placement's target.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_change_moves_only_the_namespaces_of_placements_on_its_location() {
    let hub = TestHub::start().await;
    let loc = workspace(&hub, "loc").await;
    workspace(&hub, "app").await;
    for group in ["a", "b"] {
        location(
            &hub,
            "root:loc",
            &format!("loc-{group}"),
            json!({"loc": group}),
            json!({"matchLabels": {"group": group}}),
        )
        .await;
    }
    for (name, group) in [("a1", "a"), ("a2", "a"), ("b1", "b")] {
        sync_target(&hub, "root:loc", name, json!({"group": group})).await;
    }
    for group in ["a", "b"] {
        placement(
            &hub,
            "root:app",
            &format!("on-{group}"),
            "root:loc",
            json!([{"matchLabels": {"loc": group}}]),
            json!({"matchLabels": {format!("on-{group}"): "yes"}}),
        )
        .await;
    }
    for (ns, on) in [("ns-a1", "on-a"), ("ns-a2", "on-a"), ("ns-b", "on-b")] {
        namespace(&hub, "root:app", ns, json!({on: "yes"})).await;
    }
    let key = |name: &str| sync_target_key(&loc, name);
    let (a1, a2, b1) = (key("a1"), key("a2"), key("b1"));
    let first = scheduled(&hub, "ns-a1").await;
    let second = scheduled(&hub, "ns-a2").await;
    assert_eq!(
        [&first, &second]
            .into_iter()
            .collect::<std::collections::BTreeSet<_>>(),
        [&a1, &a2].into_iter().collect(),
        "the two namespaces of on-a spread over loc-a's two targets"
    );
    assert_eq!(
        scheduled(&hub, "ns-b").await,
        b1,
        "on-b's namespace is on loc-b's target"
    );
    namespace(&hub, "root:app", "ns-both", json!({"on-a": "yes", "on-b": "yes"})).await;
    let both = wait_for(
        &hub,
        "root:app",
        &ns_path("ns-both"),
        "ns-both on a target of each Location",
        |o| {
            let s = states(o);
            s.len() == 2 && s.contains_key(&b1) && (s.contains_key(&a1) || s.contains_key(&a2))
        },
    )
    .await;
    let ns_b = get(&hub, "root:app", &ns_path("ns-b")).await;
    let ns_second = get(&hub, "root:app", &ns_path("ns-a2")).await;

    // ns-a1's target deleted: ns-a1 moves to loc-a's other target.
    let gone = if first == a1 { "a1" } else { "a2" };
    delete_ok(
        &admin(&hub, "root:loc").await,
        &format!("{WORKLOAD}/synctargets/{gone}"),
    )
    .await;
    wait_for(
        &hub,
        "root:app",
        &ns_path("ns-a1"),
        "ns-a1 moves to the other target of its Location",
        |o| states(o).into_iter().collect::<Vec<_>>() == vec![(second.clone(), "Sync".to_string())],
    )
    .await;
    // ns-both keeps on-b's target, and has loc-a's remaining one.
    let both_moved = states(&both).contains_key(&key(gone));
    let both_before = both;
    let both = wait_for(
        &hub,
        "root:app",
        &ns_path("ns-both"),
        "ns-both on loc-a's remaining target and still on b1",
        |o| {
            states(o)
                == [
                    (second.clone(), "Sync".to_string()),
                    (b1.clone(), "Sync".to_string()),
                ]
                .into()
        },
    )
    .await;
    if !both_moved {
        assert_eq!(
            rv(&both),
            rv(&both_before),
            "ns-both was not on the deleted target: not written"
        );
    }

    // A new target of loc-b: a member it may use, but ns-b keeps its own.
    sync_target(&hub, "root:loc", "b2", json!({"group": "b"})).await;
    wait_for(
        &hub,
        "root:loc",
        &format!("{SCHEDULING}/locations/loc-b"),
        "loc-b counts its second target",
        |l| l["status"]["instances"] == 2,
    )
    .await;
    // Barriers: later objects in both namespaces are labelled, so the
    // scheduler has handled both target changes.
    barrier(&hub, "ns-b", "after").await;
    barrier(&hub, "ns-a2", "after").await;
    let ns_b_after = get(&hub, "root:app", &ns_path("ns-b")).await;
    assert_eq!(
        rv(&ns_b_after),
        rv(&ns_b),
        "on-b's namespace is not written: {ns_b_after}"
    );
    assert_eq!(states(&ns_b_after), [(b1, "Sync".to_string())].into());
    let both_after = get(&hub, "root:app", &ns_path("ns-both")).await;
    assert_eq!(
        rv(&both_after),
        rv(&both),
        "ns-both keeps b1 and is not written: {both_after}"
    );
    let ns_second_after = get(&hub, "root:app", &ns_path("ns-a2")).await;
    assert_eq!(
        rv(&ns_second_after),
        rv(&ns_second),
        "a namespace on loc-a's remaining target is not written: {ns_second_after}"
    );
}
