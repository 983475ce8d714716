//! kcp TMC scheduling from an attacker's side. `mal` is cluster-admin of
//! `root:mal` only; `alice`'s compute is SyncTarget `east` in
//! `root:victim-compute`. A Placement may use another workspace's Locations
//! only while that workspace grants its writer `bind` on
//! `locations.scheduling.kcp.io`: without it the Placement is refused, with
//! the same words for a workspace that does not exist; with it the
//! Placement schedules, and revoking it unschedules and empties the
//! target's syncer view. Nobody but the hub sets `state.workload.kcp.io/*`
//! and the other keys the scheduler and syncers own — not a tenant's
//! cluster-admin, not a user with `edit` in a namespace.

mod common;
use common::tenants::{bind_cluster_role, cluster_role, cluster_role_object, Tenants, RBAC};
use common::tmc::*;
use common::{
    admin, call, create, delete_ok, eventually, expect_status, get_ok, post_created, put_ok, rbac_path,
};
use ferry_api::workload::sync_target_key;
use serde_json::{json, Value};

const VICTIM: &str = "root:victim-compute";
const NOWHERE: &str = "root:nowhere";

struct World {
    t: Tenants,
    /// root:victim-compute's logical cluster.
    victim: String,
    east_uid: String,
    /// East's sync target key.
    east: String,
}

/// root:victim-compute (alice's) with SyncTarget east and its default
/// Location; root:mal (mal's), nothing granted.
async fn world() -> World {
    let t = Tenants::start().await;
    let victim = t.workspace("victim-compute", Some("alice")).await;
    t.workspace("mal", Some("mal")).await;
    let east_uid = sync_target(&t.hub, VICTIM, "east", json!({"region": "east"})).await;
    wait_for(
        &t.hub,
        VICTIM,
        &format!("{SCHEDULING}/locations/default"),
        "the default Location",
        |_| true,
    )
    .await;
    World {
        east: sync_target_key(&victim, "east"),
        t,
        victim,
        east_uid,
    }
}

fn placement_body(name: &str, location_workspace: &str) -> Value {
    json!({"apiVersion": "scheduling.kcp.io/v1alpha1", "kind": "Placement",
           "metadata": {"name": name},
           "spec": {"locationWorkspace": location_workspace, "locationSelectors": [{}],
                    "namespaceSelector": {"matchLabels": {"purpose": "workload"}}}})
}

/// POST Placement `name` on `location_workspace` as `client`.
async fn place(client: &kube::Client, name: &str, location_workspace: &str) -> (u16, Value) {
    let body = placement_body(name, location_workspace);
    call(client, "POST", &format!("{SCHEDULING}/placements"), Some(&body)).await
}

fn message(body: &Value) -> String {
    body["message"].as_str().unwrap_or_default().to_string()
}

/// Grant `user` `bind` on every Location of root:victim-compute.
async fn grant(w: &World, user: &str) {
    cluster_role(
        &w.t.hub,
        VICTIM,
        "location-binder",
        json!([{"apiGroups": ["scheduling.kcp.io"], "resources": ["locations"], "verbs": ["bind"]}]),
    )
    .await;
    bind_cluster_role(
        &w.t.hub,
        VICTIM,
        &format!("{user}-binds"),
        "location-binder",
        user,
    )
    .await;
}

impl World {
    /// What east's syncer view lists of `resource` across every workspace.
    async fn east_sees(&self, resource: &str) -> Vec<String> {
        let view = sync_view(&self.t.hub, "syncer", &self.victim, "east", &self.east_uid, "*").await;
        let list = get_ok(&view, &format!("/api/v1/{resource}")).await;
        item_names(&list)
    }

    /// As `user` in root:mal: namespace `work` (selected), ConfigMap `cm` and Secret `s` in it.
    async fn mal_workload(&self, user: &str) {
        let c = self.t.client_as(user, "root:mal").await;
        let (code, body) = workload_namespace_as(&c, "work").await;
        assert_eq!(code, 201, "{body}");
        for (resource, obj) in [
            (
                "configmaps",
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"k": "v"}}),
            ),
            (
                "secrets",
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"p": "x"}}),
            ),
        ] {
            post_created(&c, &format!("/api/v1/namespaces/work/{resource}"), &obj).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_placement_on_ungranted_compute_is_refused_like_one_on_no_workspace_and_labels_nothing() {
    let w = world().await;
    let mal = w.t.client_as("mal", "root:mal").await;
    w.mal_workload("mal").await;

    // Another tenant's compute, and a workspace that does not exist: one answer.
    let (code, victim) = place(&mal, "p", VICTIM).await;
    assert_eq!(code, 403, "{victim}");
    let (code, nowhere) = place(&mal, "p", NOWHERE).await;
    assert_eq!(code, 403, "{nowhere}");
    assert_eq!(message(&victim).replace(VICTIM, NOWHERE), message(&nowhere));
    assert!(
        message(&victim).contains("bind") && message(&victim).contains("locations.scheduling.kcp.io"),
        "{victim}"
    );
    assert!(
        !message(&victim).contains(&w.east),
        "the target's key is not disclosed: {victim}"
    );

    // Nor by the back door: a Placement of its own workspace turned onto
    // the victim's, or a status naming the victim's Location.
    let (code, body) = place(&mal, "own", "root:mal").await;
    assert_eq!(code, 201, "{body}");
    let path = format!("{SCHEDULING}/placements/own");
    expect_merge_patch(
        &mal,
        &path,
        &json!({"spec": {"locationWorkspace": VICTIM}}),
        403,
        "",
    )
    .await;
    let forged = json!({"status": {"phase": "Bound",
        "selectedLocation": {"path": VICTIM, "locationName": "default"},
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    expect_merge_patch(&mal, &format!("{path}/status"), &forged, 200, "").await;
    // A barrier: a granted Placement elsewhere, written after the forged
    // status, has been scheduled.
    w.t.workspace("granted", None).await;
    create(
        &w.t.hub,
        "root:granted",
        &format!("{SCHEDULING}/placements"),
        placement_body("p", VICTIM),
    )
    .await;
    namespace(
        &w.t.hub,
        "root:granted",
        "barrier",
        json!({"purpose": "workload"}),
    )
    .await;
    wait_for(
        &w.t.hub,
        "root:granted",
        "/api/v1/namespaces/barrier",
        "barrier on east",
        |o| states(o).contains_key(&w.east),
    )
    .await;
    let work = get(&w.t.hub, "root:mal", "/api/v1/namespaces/work").await;
    assert!(
        states(&work).is_empty(),
        "mal's namespace is on no target: {work}"
    );
    let cm = get(&w.t.hub, "root:mal", "/api/v1/namespaces/work/configmaps/cm").await;
    assert!(states(&cm).is_empty(), "{cm}");
    assert!(w.east_sees("configmaps").await.is_empty());
    assert!(w.east_sees("secrets").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_placement_schedules_and_revoking_the_grant_unschedules() {
    let w = world().await;
    grant(&w, "mal").await;
    let mal = w.t.client_as("mal", "root:mal").await;
    w.mal_workload("mal").await;
    let (code, body) = place(&mal, "compute", VICTIM).await;
    assert_eq!(code, 201, "{body}");
    // The requester is the hub's to record, whatever the client sent.
    assert!(
        annotation(&body, "scheduling.ferry.dev/requester").is_some_and(|r| r.contains("\"mal\"")),
        "{body}"
    );

    let on_east = |o: &Value| states(o).get(&w.east).map(String::as_str) == Some("Sync");
    wait_for(
        &w.t.hub,
        "root:mal",
        "/api/v1/namespaces/work",
        "work on east",
        on_east,
    )
    .await;
    wait_for(
        &w.t.hub,
        "root:mal",
        "/api/v1/namespaces/work/configmaps/cm",
        "cm on east",
        on_east,
    )
    .await;
    eventually(20, "east's syncer sees mal's ConfigMap and Secret", || async {
        (w.east_sees("configmaps").await == ["cm"] && w.east_sees("secrets").await == ["s"]).then_some(())
    })
    .await;
    wait_for(
        &w.t.hub,
        "root:mal",
        &format!("{SCHEDULING}/placements/compute"),
        "Bound",
        |p| p["status"]["phase"] == "Bound",
    )
    .await;

    // Revoked: the namespace and its objects leave east, the view empties,
    // and the Placement says what one to a missing workspace says.
    let binding = rbac_path(None, "clusterrolebindings/mal-binds");
    delete_ok(&admin(&w.t.hub, VICTIM).await, &binding).await;
    let off = |o: &Value| states(o).is_empty();
    wait_for(
        &w.t.hub,
        "root:mal",
        "/api/v1/namespaces/work",
        "work off east",
        off,
    )
    .await;
    wait_for(
        &w.t.hub,
        "root:mal",
        "/api/v1/namespaces/work/configmaps/cm",
        "cm off east",
        off,
    )
    .await;
    assert!(w.east_sees("configmaps").await.is_empty());
    assert!(w.east_sees("secrets").await.is_empty());
    let revoked = wait_for(
        &w.t.hub,
        "root:mal",
        &format!("{SCHEDULING}/placements/compute"),
        "Pending",
        |p| p["status"]["phase"] == "Pending",
    )
    .await;
    assert!(revoked["status"].get("selectedLocation").is_none(), "{revoked}");

    // The admin's Placement to a workspace that does not exist reads the same.
    create(
        &w.t.hub,
        "root:mal",
        &format!("{SCHEDULING}/placements"),
        placement_body("ghost", NOWHERE),
    )
    .await;
    let ghost = wait_for(
        &w.t.hub,
        "root:mal",
        &format!("{SCHEDULING}/placements/ghost"),
        "ghost Pending",
        |p| p["status"]["conditions"][0]["reason"].is_string(),
    )
    .await;
    let condition = |p: &Value| {
        let c = &p["status"]["conditions"][0];
        (
            c["reason"].clone(),
            c["message"].as_str().unwrap_or_default().to_string(),
        )
    };
    let (reason, text) = condition(&revoked);
    let (ghost_reason, ghost_text) = condition(&ghost);
    assert_eq!(reason, ghost_reason);
    assert_eq!(
        text.replace(VICTIM, NOWHERE).replace("\"mal\"", "\"admin\""),
        ghost_text,
        "{revoked}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nobody_but_the_hub_sets_scheduling_labels_by_hand() {
    let w = world().await;
    grant(&w, "mal").await;
    let state = format!("{STATE_PREFIX}{}", w.east);
    let mal = w.t.client_as("mal", "root:mal").await;

    // A tenant's cluster-admin labelling its own namespace or ConfigMap for east.
    let ns = json!({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": "sneak", "labels": {state.clone(): "Sync"}}});
    let body = expect_status(&mal, "POST", "/api/v1/namespaces", Some(&ns), 403).await;
    assert!(
        message(&body).contains(&state) && message(&body).contains("scheduler"),
        "{body}"
    );
    namespace(&w.t.hub, "root:mal", "solo", json!({})).await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "sneak", "labels": {state.clone(): "Sync"}}});
    expect_status(&mal, "POST", "/api/v1/namespaces/solo/configmaps", Some(&cm), 403).await;
    configmap(&w.t.hub, "root:mal", "solo", "plain").await;
    expect_merge_patch(
        &mal,
        "/api/v1/namespaces/solo/configmaps/plain",
        &json!({"metadata": {"labels": {state.clone(): "Sync"}}}),
        403,
        "",
    )
    .await;
    // The other keys the scheduler and the syncers own.
    for (labels, annotations) in [
        (
            json!({}),
            json!({format!("deletion.internal.workload.kcp.io/{}", w.east): "2026-01-01T00:00:00Z"}),
        ),
        (
            json!({}),
            json!({format!("finalizers.workload.kcp.io/{}", w.east): "x"}),
        ),
        (json!({}), json!({"scheduling.kcp.io/placement": ""})),
    ] {
        let body = json!({"metadata": {"labels": labels, "annotations": annotations}});
        expect_merge_patch(
            &mal,
            "/api/v1/namespaces/solo/configmaps/plain",
            &body,
            403,
            &body,
        )
        .await;
    }

    // A user with only `edit` in one namespace of a granted workspace.
    let (code, body) = place(&mal, "compute", VICTIM).await;
    assert_eq!(code, 201, "{body}");
    create(
        &w.t.hub,
        "root:mal",
        &rbac_path(Some("solo"), "rolebindings"),
        json!({"apiVersion": format!("{RBAC}/v1"), "kind": "RoleBinding", "metadata": {"name": "bob-edit"},
               "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "edit"},
               "subjects": [{"kind": "User", "apiGroup": RBAC, "name": "bob"}]}),
    )
    .await;
    let bob = w.t.client_as("bob", "root:mal").await;
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d", "labels": {state.clone(): "Sync"}},
        "spec": {"selector": {"matchLabels": {"app": "d"}},
                 "template": {"metadata": {"labels": {"app": "d"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    let body = expect_status(
        &bob,
        "POST",
        "/apis/apps/v1/namespaces/solo/deployments",
        Some(&deployment),
        403,
    )
    .await;
    assert!(message(&body).contains(&state), "{body}");

    // Nothing reached east.
    assert!(w.east_sees("configmaps").await.is_empty());

    // What the scheduler labelled stays writable with its labels unchanged
    // (kubectl apply of an object read back, kubectl edit).
    let (code, body) = workload_namespace_as(&mal, "work").await;
    assert_eq!(code, 201, "{body}");
    let cm_path = "/api/v1/namespaces/work/configmaps/cm";
    post_created(
        &mal,
        "/api/v1/namespaces/work/configmaps",
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}),
    )
    .await;
    let mut labelled = wait_for(&w.t.hub, "root:mal", cm_path, "cm on east", |o| {
        !states(o).is_empty()
    })
    .await;
    labelled["data"] = json!({"k": "edited"});
    let body = put_ok(&mal, cm_path, &labelled).await;
    assert_eq!(states(&body), states(&labelled));
    expect_merge_patch(
        &mal,
        cm_path,
        &json!({"metadata": {"labels": {state.clone(): null}}}),
        403,
        "removing it is refused too",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_syncer_view_shows_only_workspaces_granted_to_its_target() {
    let w = world().await;
    // The admin may still label by hand (kcp's privileged users may); in a
    // workspace with no Placement on east's workspace, east's syncer does
    // not see it.
    let state = format!("{STATE_PREFIX}{}", w.east);
    let stray = w.t.workspace("stray", None).await;
    namespace(&w.t.hub, "root:stray", "work", json!({state.clone(): "Sync"})).await;
    create(
        &w.t.hub,
        "root:stray",
        "/api/v1/namespaces/work/configmaps",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "stray", "labels": {state.clone(): "Sync"}}}),
    )
    .await;
    // Its twin in a granted workspace shows.
    grant(&w, "mal").await;
    let mal = w.t.client_as("mal", "root:mal").await;
    w.mal_workload("mal").await;
    let (code, body) = place(&mal, "compute", VICTIM).await;
    assert_eq!(code, 201, "{body}");
    eventually(20, "east's syncer sees mal's ConfigMap", || async {
        (w.east_sees("configmaps").await == ["cm"]).then_some(())
    })
    .await;
    assert_eq!(w.east_sees("namespaces").await, ["work"]);
    // Nor does its upsyncer write there.
    let up = sync_view(&w.t.hub, "upsyncer", &w.victim, "east", &w.east_uid, &stray).await;
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {state.clone(): "Upsync"}},
                     "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    let (code, body) = call(&up, "POST", "/api/v1/namespaces/work/pods", Some(&pod)).await;
    assert!(code == 403 || code == 404, "{code}: {body}");
}

/// A grant naming Locations (`resourceNames`) opens the syncer view while it
/// names one of the location workspace's Locations, and closes it once it
/// names none: the view asks by the Locations' names, as admission does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_by_location_name_opens_the_syncer_view_only_while_it_names_a_location() {
    let w = world().await;
    let binder = |names: &[&str]| {
        json!([{"apiGroups": ["scheduling.kcp.io"], "resources": ["locations"],
                "resourceNames": names, "verbs": ["bind"]}])
    };
    cluster_role(&w.t.hub, VICTIM, "location-binder", binder(&["default"])).await;
    bind_cluster_role(&w.t.hub, VICTIM, "mal-binds", "location-binder", "mal").await;
    let mal = w.t.client_as("mal", "root:mal").await;
    w.mal_workload("mal").await;
    let (code, body) = place(&mal, "compute", VICTIM).await;
    assert_eq!(code, 201, "{body}");
    eventually(
        20,
        "east's syncer sees mal's ConfigMap through the named grant",
        || async { (w.east_sees("configmaps").await == ["cm"]).then_some(()) },
    )
    .await;
    // The grant now names only a Location that does not exist.
    let admin_victim = admin(&w.t.hub, VICTIM).await;
    let role = cluster_role_object("location-binder", binder(&["elsewhere"]));
    put_ok(
        &admin_victim,
        &format!("{}/location-binder", rbac_path(None, "clusterroles")),
        &role,
    )
    .await;
    eventually(20, "east's syncer no longer sees mal's workspace", || async {
        w.east_sees("configmaps").await.is_empty().then_some(())
    })
    .await;
    assert!(w.east_sees("namespaces").await.is_empty());
}
