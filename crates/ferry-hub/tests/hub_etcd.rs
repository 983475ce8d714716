//! The hub on etcd (`--storage etcd`): several hubs on one etcd serve the
//! same objects, etcd decides resourceVersions and conflicts, and an etcd
//! outage is a 503 and a failing `/readyz` until etcd returns. Each test
//! skips (saying so) when the etcd binary is not installed.

mod common;

use std::time::Duration;

use ferry_testkit::{start_tls_etcd, TestEtcd, TestEtcdCluster, TestHub};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use serde_json::{json, Value};

use common::{call, delete_ok, eventually, expect_status_because, get_ok, post_created};

fn configmap(name: &str, value: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default"},
        "data": {"v": value},
    }))
    .expect("configmap")
}

async fn configmaps(hub: &TestHub) -> Api<ConfigMap> {
    Api::namespaced(hub.client("root").await, "default")
}

/// An admin client of `hub` at `root` that does not retry: kube-rs retries
/// 503s by default (for up to minutes), which would hide them.
async fn no_retry_client(hub: &TestHub) -> kube::Client {
    let mut config = hub.config("root").await;
    config.default_retry = false;
    kube::Client::try_from(config).expect("client")
}

/// Waits (`secs`) until `/readyz` answers `code`.
async fn readyz_when(client: &kube::Client, code: u16, secs: u64, what: &str) {
    eventually(secs, what, || async {
        (call(client, "GET", "/readyz", None).await.0 == code).then_some(())
    })
    .await;
}

/// Creates ConfigMap `default/during` (made while etcd is down); returns the status and body.
async fn create_during(client: &kube::Client) -> (u16, Value) {
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "during"}});
    call(
        client,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(&body),
    )
    .await
}

/// The names of the ConfigMaps `configmaps` lists.
async fn names_in(configmaps: &Api<ConfigMap>) -> Vec<String> {
    configmaps
        .list(&Default::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_write_through_one_hub_is_seen_by_a_watch_on_another() {
    let Some(etcd) = TestEtcd::start() else { return };
    let a = TestHub::start_on_etcd(&etcd, "/ferry").await;
    let b = TestHub::start_on_etcd(&etcd, "/ferry").await;
    // One identity: b trusts and accepts what a handed out.
    assert_eq!(
        a.running.ca_pem, b.running.ca_pem,
        "hubs on one etcd share their CA"
    );
    assert_eq!(a.running.admin_token, b.running.admin_token);

    let on_b = configmaps(&b).await;
    let start_rv = on_b
        .list(&Default::default())
        .await
        .expect("list on b")
        .metadata
        .resource_version
        .expect("list resourceVersion");
    let mut events = on_b
        .watch(&WatchParams::default(), &start_rv)
        .await
        .expect("watch on b")
        .boxed();
    let created = configmaps(&a)
        .await
        .create(&PostParams::default(), &configmap("through-a", "1"))
        .await
        .expect("create on a");
    let rv = created
        .metadata
        .resource_version
        .clone()
        .expect("resourceVersion");
    let seen = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(event) = events.next().await {
            if let WatchEvent::Added(cm) = event.expect("watch event") {
                if cm.metadata.name.as_deref() == Some("through-a") {
                    return cm;
                }
            }
        }
        panic!("b's watch ended before the object written through a arrived");
    })
    .await
    .expect("b's watch shows a's write within 10s");
    assert_eq!(seen.metadata.resource_version.as_deref(), Some(rv.as_str()));

    // The resourceVersion is etcd's mod revision of the object's key.
    let mut kv = etcd_client::Client::connect([etcd.url()], None)
        .await
        .expect("etcd client");
    let stored = kv
        .get("/ferry/root//configmaps/default/through-a", None)
        .await
        .expect("etcd get");
    let item = stored.kvs().first().expect("the object is in etcd under its key");
    assert_eq!(item.mod_revision().to_string(), rv);

    // A hub started later reads everything from etcd.
    let c = TestHub::start_on_etcd(&etcd, "/ferry").await;
    let on_c = configmaps(&c)
        .await
        .get("through-a")
        .await
        .expect("c reads a's object");
    assert_eq!(on_c.metadata.resource_version.as_deref(), Some(rv.as_str()));
    // A hub on another prefix does not.
    let other = TestHub::start_on_etcd(&etcd, "/other").await;
    assert!(configmaps(&other)
        .await
        .get_opt("through-a")
        .await
        .expect("get")
        .is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn conflicting_writes_through_two_hubs_give_one_409() {
    let Some(etcd) = TestEtcd::start() else { return };
    let a = TestHub::start_on_etcd(&etcd, "/ferry").await;
    let b = TestHub::start_on_etcd(&etcd, "/ferry").await;
    let (on_a, on_b) = (configmaps(&a).await, configmaps(&b).await);

    // Two creates of one name at once: one wins, the other is AlreadyExists.
    let pp = PostParams::default();
    let (from_a, from_b) = (configmap("race", "a"), configmap("race", "b"));
    let (x, y) = tokio::join!(on_a.create(&pp, &from_a), on_b.create(&pp, &from_b));
    let codes: Vec<u16> = [&x, &y]
        .iter()
        .map(|r| match r {
            Ok(_) => 201,
            Err(kube::Error::Api(e)) => e.code,
            Err(e) => panic!("unexpected error: {e}"),
        })
        .collect();
    let mut sorted = codes.clone();
    sorted.sort();
    assert_eq!(sorted, vec![201, 409], "one create wins: {codes:?}");

    // Two updates from the same read: the second, on the other hub, is 409,
    // even if that hub's cache has not seen the first one yet.
    let read = on_a.get("race").await.expect("get");
    let mut first = read.clone();
    first.data = Some([("v".to_string(), "first".to_string())].into());
    let mut second = read.clone();
    second.data = Some([("v".to_string(), "second".to_string())].into());
    on_a.replace("race", &PostParams::default(), &first)
        .await
        .expect("first update");
    match on_b.replace("race", &PostParams::default(), &second).await {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 409, "{e:?}"),
        other => panic!("the stale update through b must be refused with 409, got {other:?}"),
    }
    // Nothing was lost: both hubs show the first update.
    for api in [&on_a, &on_b] {
        let cm = api.get("race").await.expect("get");
        assert_eq!(cm.data.unwrap_or_default()["v"], "first");
    }
    // An update through b carrying the version just read through a is not a
    // conflict, even when b has not seen that version yet.
    for round in 0..5 {
        let mut fresh = on_a.get("race").await.expect("get through a");
        fresh.data = Some(
            [
                ("v".to_string(), "first".to_string()),
                ("round".to_string(), round.to_string()),
            ]
            .into(),
        );
        on_a.replace("race", &PostParams::default(), &fresh)
            .await
            .expect("update through a");
        let mut next = on_a.get("race").await.expect("get through a");
        next.data = Some([("v".to_string(), "first".to_string())].into());
        let written = on_b
            .replace("race", &PostParams::default(), &next)
            .await
            .expect("update through b at the version read through a");
        // A read through a right after b acknowledged the write shows it.
        let read = on_a.get("race").await.expect("get through a");
        assert_eq!(
            read.metadata.resource_version, written.metadata.resource_version,
            "round {round}: a read through a after b acknowledged a write"
        );
    }
    // A patch (no resourceVersion) through b applies on top of a's update.
    on_b.patch(
        "race",
        &Default::default(),
        &kube::api::Patch::Merge(json!({"data": {"w": "patched"}})),
    )
    .await
    .expect("patch through b");
    let data = on_a
        .get("race")
        .await
        .expect("get through a")
        .data
        .unwrap_or_default();
    assert_eq!(
        (data["v"].as_str(), data["w"].as_str()),
        ("first", "patched"),
        "a shows the patch through b on top of its update"
    );
}

/// Reads of the newest state are consistent across replicas, as
/// kube-apiserver's are: a GET, a LIST or a watch without a resourceVersion
/// through one hub shows every write another hub acknowledged before it.
#[tokio::test(flavor = "multi_thread")]
async fn a_read_through_any_hub_shows_every_write_acknowledged_before_it() {
    let Some(etcd) = TestEtcd::start() else { return };
    // A long controllers' Lease: its renewals would otherwise move a's
    // cache forward every few seconds and hide a missing progress request.
    let quiet =
        |o: &mut ferry_hub::server::HubOptions| o.controllers_lease_duration = Duration::from_secs(300);
    let a = TestHub::start_on_etcd_with(&etcd, "/ferry", quiet).await;
    let b = TestHub::start_on_etcd_with(&etcd, "/ferry", quiet).await;
    let (on_a, on_b) = (configmaps(&a).await, configmaps(&b).await);
    // The `kubernetes` Endpoints name the replica running the controllers
    // (a, which started first) and then stay put: replicas do not take
    // them from each other.
    let endpoints: Api<k8s_openapi::api::core::v1::Endpoints> =
        Api::namespaced(a.client("root").await, "default");
    let a_port = a.running.addr.port() as i32;
    let settled = eventually(10, "the kubernetes Endpoints to name a", || async {
        let e = endpoints.get("kubernetes").await.ok()?;
        let port = e.subsets.as_ref()?.first()?.ports.as_ref()?.first()?.port;
        (port == a_port).then_some(e.metadata.resource_version)
    })
    .await;
    for round in 0..40 {
        let name = format!("round-{round}");
        let created = on_b
            .create(&PostParams::default(), &configmap(&name, "1"))
            .await
            .expect("create through b");
        let rv = created.metadata.resource_version.clone();
        let read = on_a.get(&name).await.unwrap_or_else(|e| {
            panic!("round {round}: a GET through a after b acknowledged the create: {e}")
        });
        assert_eq!(read.metadata.resource_version, rv, "round {round}");
        let listed = on_a.list(&Default::default()).await.expect("list through a");
        assert!(
            listed
                .items
                .iter()
                .any(|cm| cm.metadata.name.as_deref() == Some(&name)),
            "round {round}: a LIST through a shows what b acknowledged"
        );
        on_b.delete(&name, &Default::default())
            .await
            .expect("delete through b");
        assert!(
            on_a.get_opt(&name).await.expect("get through a").is_none(),
            "round {round}: a GET through a after b acknowledged the delete"
        );
    }

    let now = endpoints
        .get("kubernetes")
        .await
        .expect("endpoints")
        .metadata
        .resource_version;
    assert_eq!(
        now, settled,
        "the kubernetes Endpoints changed while nothing moved"
    );

    // Writes under another prefix move etcd's revision without an event on
    // a's watch; etcd's progress notification tells a it is current, so its
    // reads are answered (not 503 after waiting for an event that never comes).
    let c = TestHub::start_on_etcd(&etcd, "/other").await;
    let other = configmaps(&c).await;
    for i in 0..5 {
        other
            .create(&PostParams::default(), &configmap(&format!("elsewhere-{i}"), "1"))
            .await
            .expect("create under /other");
    }
    let client = no_retry_client(&a).await;
    expect_status_because(
        &client,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        None,
        200,
        "a LIST through a after writes under another prefix",
    )
    .await;
    expect_status_because(
        &client,
        "GET",
        "/api/v1/namespaces/default/configmaps/race",
        None,
        404,
        "a GET of an absent object is answered",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn while_etcd_is_down_writes_are_503_and_readyz_fails_until_it_returns() {
    let Some(mut etcd) = TestEtcd::start() else { return };
    let hub = TestHub::start_on_etcd(&etcd, "/ferry").await;
    let client = no_retry_client(&hub).await;
    let on_hub: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    on_hub
        .create(&PostParams::default(), &configmap("before", "1"))
        .await
        .expect("create while etcd is up");
    get_ok(&client, "/readyz").await;

    etcd.stop();
    readyz_when(&client, 503, 15, "/readyz to fail while etcd is down").await;
    expect_status_because(&client, "GET", "/livez", None, 200, "the process itself is live").await;
    let (code, status) = create_during(&client).await;
    assert_eq!(code, 503, "a write while etcd is down: {status}");
    assert_eq!(status["reason"], "ServiceUnavailable");
    // Reads are still served from memory.
    assert!(on_hub.get("before").await.is_ok());

    etcd.resume();
    readyz_when(&client, 200, 30, "/readyz to pass once etcd is back").await;
    let after = on_hub
        .create(&PostParams::default(), &configmap("after", "1"))
        .await
        .expect("create once etcd is back");
    // The cache follows etcd again: the write is listed.
    let names = names_in(&on_hub).await;
    assert!(names.contains(&"after".to_string()), "{names:?}");
    assert!(!names.contains(&"during".to_string()), "{names:?}");
    assert!(after.metadata.resource_version.is_some());
}

/// Two hubs on a three-member etcd: with one member killed the quorum
/// stands and writes go on through both hubs, each seeing the other's; with
/// all three down writes are 503 and `/readyz` fails; when they return the
/// hubs carry on where they were.
#[tokio::test(flavor = "multi_thread")]
async fn three_member_etcd_survives_one_member_and_an_outage_of_all() {
    let Some(mut etcd) = TestEtcdCluster::start() else {
        return;
    };
    let a = TestHub::start_on_etcd_cluster(&etcd, "/ferry").await;
    let b = TestHub::start_on_etcd_cluster(&etcd, "/ferry").await;
    // kube-rs retries 503s by default: these clients would hide one.
    let no_retry = |mut config: kube::Config| {
        config.default_retry = false;
        Api::<ConfigMap>::namespaced(kube::Client::try_from(config).expect("client"), "default")
    };
    let (on_a, on_b) = (no_retry(a.config("root").await), no_retry(b.config("root").await));
    on_a.create(&PostParams::default(), &configmap("before", "1"))
        .await
        .expect("create with three members");

    // Until the two left have a leader (if the dead one led) writes may be
    // refused; from then on the hubs' etcd client, which spreads requests
    // over all three members and keeps picking the dead one, must not fail a
    // single write for it.
    etcd.stop(0);
    let mut attempt = 0;
    eventually(15, "a write to succeed with one member of three down", || {
        attempt += 1;
        let name = format!("settle-{attempt}");
        let on_a = on_a.clone();
        async move {
            on_a.create(&PostParams::default(), &configmap(&name, "1"))
                .await
                .ok()
        }
    })
    .await;
    for i in 0..30 {
        let (api, other) = if i % 2 == 0 {
            (&on_a, &on_b)
        } else {
            (&on_b, &on_a)
        };
        let name = format!("one-down-{i}");
        api.create(&PostParams::default(), &configmap(&name, "1"))
            .await
            .unwrap_or_else(|e| panic!("write {name} with one member of three down: {e}"));
        eventually(10, "the other hub to see the write", || async {
            other.get(&name).await.ok()
        })
        .await;
    }

    // Every member down: 503s and a failing /readyz on both hubs.
    let client = no_retry_client(&a).await;
    etcd.stop_all();
    readyz_when(&client, 503, 15, "/readyz to fail with etcd down").await;
    let (code, status) = create_during(&client).await;
    assert_eq!(code, 503, "a write with etcd down: {status}");
    assert!(on_b.get("before").await.is_ok(), "reads are served from memory");

    etcd.resume_all();
    readyz_when(&client, 200, 30, "/readyz to pass once etcd is back").await;
    on_b.create(&PostParams::default(), &configmap("after", "1"))
        .await
        .expect("write once etcd is back");
    eventually(10, "a to see the write made through b", || async {
        on_a.get("after").await.ok()
    })
    .await;
    let names = names_in(&on_a).await;
    assert_eq!(
        names.iter().filter(|n| n.starts_with("one-down-")).count(),
        30,
        "{names:?}"
    );
    assert!(!names.contains(&"during".to_string()), "{names:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn workspaces_crds_and_rbac_written_through_one_hub_take_effect_on_another() {
    let Some(etcd) = TestEtcd::start() else { return };
    let a = TestHub::start_on_etcd(&etcd, "/ferry").await;
    let b = TestHub::start_on_etcd(&etcd, "/ferry").await;
    let admin_a = a.client("root").await;
    let ws =
        json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": {"name": "team"}});
    post_created(&admin_a, "/apis/tenancy.kcp.io/v1alpha1/workspaces", &ws).await;

    // The workspace made through a is served by b.
    let team_b = b.client("root:team").await;
    eventually(10, "b to serve workspace root:team", || async {
        (call(&team_b, "GET", "/api/v1/namespaces/default", None).await.0 == 200).then_some(())
    })
    .await;

    // A CRD made through a is served by b.
    let team_a = a.client("root:team").await;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    post_created(
        &team_a,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &crd,
    )
    .await;
    let gadget = json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g1"}});
    eventually(10, "b to serve the CRD made through a", || async {
        let (code, _) = call(
            &team_b,
            "POST",
            "/apis/example.com/v1/namespaces/default/gadgets",
            Some(&gadget),
        )
        .await;
        (code == 201).then_some(())
    })
    .await;

    // A ServiceAccount token from a works on b, with the RBAC granted
    // through a, and stops working on b when a revokes it.
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader"}});
    post_created(&team_a, "/api/v1/namespaces/default/serviceaccounts", &sa).await;
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}});
    let body = post_created(
        &team_a,
        "/api/v1/namespaces/default/serviceaccounts/reader/token",
        &request,
    )
    .await;
    let token = body["status"]["token"].as_str().expect("token").to_string();
    let reader_b = common::client_as(&b, "root:team", ferry_hub::kubeconfig::AuthInfo::Token(token)).await;
    let list = "/api/v1/namespaces/default/configmaps";
    expect_status_because(&reader_b, "GET", list, None, 403, "no grant yet").await;
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "reader-view"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": "default"}]});
    let bindings = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings";
    post_created(&team_a, bindings, &binding).await;
    eventually(10, "b to honour the grant made through a", || async {
        (call(&reader_b, "GET", list, None).await.0 == 200).then_some(())
    })
    .await;
    delete_ok(&team_a, &format!("{bindings}/reader-view")).await;
    eventually(10, "b to drop the grant revoked through a", || async {
        (call(&reader_b, "GET", list, None).await.0 == 403).then_some(())
    })
    .await;
}

/// The holder of the controllers' Lease in `root`.
async fn controllers_lease_holder(hub: &TestHub) -> Option<String> {
    let (code, lease) = call(
        &hub.client("root").await,
        "GET",
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/ferry-hub-controllers",
        None,
    )
    .await;
    (code == 200).then(|| {
        lease["spec"]["holderIdentity"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn the_controllers_run_on_the_lease_holder_and_move_when_it_stops() {
    let Some(etcd) = TestEtcd::start() else { return };
    let short = |o: &mut ferry_hub::server::HubOptions| o.controllers_lease_duration = Duration::from_secs(4);
    let a = TestHub::start_on_etcd_with(&etcd, "/ferry", short).await;
    let a_addr = format!("_{}_", a.running.addr);
    eventually(10, "a to take the controllers' Lease", || async {
        controllers_lease_holder(&a).await.filter(|h| h.contains(&a_addr))
    })
    .await;
    let b = TestHub::start_on_etcd_with(&etcd, "/ferry", short).await;
    let b_addr = format!("_{}_", b.running.addr);
    // b stands by while a renews (for longer than the Lease lasts).
    let standby_until = tokio::time::Instant::now() + Duration::from_secs(5);
    while tokio::time::Instant::now() < standby_until {
        let holder = controllers_lease_holder(&b).await.unwrap_or_default();
        assert!(
            holder.contains(&a_addr),
            "a keeps the Lease while it runs, got {holder:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // a stops (giving the Lease up): b takes over at once (well within the
    // Lease's duration), and the API works on through b.
    let (running, _dir) = a.into_parts();
    running.stop().await;
    eventually(3, "b to take the given-up Lease", || async {
        controllers_lease_holder(&b).await.filter(|h| h.contains(&b_addr))
    })
    .await;
    let admin = b.client("root").await;
    post_created(
        &admin,
        "/api/v1/namespaces",
        &json!({"metadata": {"name": "gone"}}),
    )
    .await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    post_created(&admin, "/api/v1/namespaces/gone/configmaps", &cm).await;
    delete_ok(&admin, "/api/v1/namespaces/gone").await;
    eventually(20, "b's namespace controller to finish the deletion", || async {
        (call(&admin, "GET", "/api/v1/namespaces/gone", None).await.0 == 404).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hub_talks_tls_to_etcd_with_a_client_certificate() {
    let Some(etcd) = start_tls_etcd() else { return };
    // etcd requires a client certificate: without one the hub does not start,
    // and says which servers did not answer.
    let mut without = etcd.options();
    without.cert_file = None;
    without.key_file = None;
    let refused = ferry_hub::storage::Etcd::connect(&without)
        .await
        .err()
        .expect("etcd refuses a client without a certificate");
    assert!(format!("{refused:#}").contains(&etcd.url()), "{refused:#}");

    let hub = TestHub::start_with(|o| o.etcd = Some(etcd.options())).await;
    let api = configmaps(&hub).await;
    let made = api
        .create(&PostParams::default(), &configmap("over-tls", "1"))
        .await
        .expect("create through a hub on etcd over TLS");
    let read = api.get("over-tls").await.expect("get");
    assert_eq!(read.metadata.resource_version, made.metadata.resource_version);
}
