//! `ferry quickstart --exit` runs to completion and its table matches what the
//! hubs hold afterwards.

#[path = "common/edge_syncer.rs"]
mod edge_syncer;

use std::process::Command;

use ferry_testkit::TestHub;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};

fn resource(kind: &str) -> ApiResource {
    let (g, plural) = match kind {
        "Namespace" => ("", "namespaces"),
        "ConfigMap" => ("", "configmaps"),
        "Deployment" => ("apps", "deployments"),
        other => panic!("unexpected kind {other}"),
    };
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(g, "v1", kind), plural)
}

/// Runs `ferry quickstart --exit ARGS --dir DIR` twice in the same directory, as a
/// user trying it again does: both runs must succeed, the second must not be much
/// slower than the first (it must not wait out anything the first one left), and
/// neither may warn about files the quickstart wrote itself, and the second run's
/// hub listens where the first one's did (what the first run wrote and printed still
/// reaches it). The second run's output, which the callers check against the hubs.
fn quickstart_twice(args: &[&str], dir: &std::path::Path) -> std::process::Output {
    let hub_address = || {
        let kubeconfig = std::fs::read_to_string(dir.join("hub/admin.kubeconfig")).unwrap();
        kubeconfig
            .lines()
            .find_map(|l| l.trim().strip_prefix("server: "))
            .map(str::to_owned)
            .unwrap()
    };
    let run = || {
        let started = std::time::Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
            .arg("quickstart")
            .args(args)
            .args(["--exit", "--dir"])
            .arg(dir)
            .output()
            .unwrap();
        (out, started.elapsed())
    };
    let (first, first_took) = run();
    let first_address = hub_address();
    let (second, second_took) = run();
    assert_eq!(
        hub_address(),
        first_address,
        "re-running quickstart {args:?} in the same directory moved the hub"
    );
    for (attempt, out) in [("first", &first), ("second", &second)] {
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "the {attempt} quickstart {args:?} failed:\n{stdout}\n{stderr}"
        );
        assert!(
            !stderr.contains("0644") && !stderr.contains("WARN"),
            "the {attempt} quickstart {args:?} warns (about files it wrote itself?): {stderr}"
        );
        assert!(!stdout.contains("Look around"), "{stdout}");
    }
    // Nothing the first run left waits out a delay: the kcp TMC syncer's 30 s
    // namespace clean-up (the first run drained one target, the second drains
    // the other, so the namespace goes back) must not show here.
    assert!(
        second_took <= first_took * 2 + std::time::Duration::from_secs(10),
        "re-running quickstart {args:?} in the same directory took {second_took:?}, the first run {first_took:?}"
    );
    second
}

/// Run twice in one directory (the second run's table is the one checked).
#[tokio::test(flavor = "multi_thread")]
async fn quickstart_lands_the_workload_and_its_table_matches_the_hubs() {
    let dir = tempfile::tempdir().unwrap();
    let out = quickstart_twice(&["--timeout", "120s"], dir.path());
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();

    // Rows: CLUSTER KIND [NS/]NAME SYNCED REPORTED...
    let rows: Vec<Vec<String>> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("CLUSTER"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect();
    assert!(
        !stdout.contains("Look around"),
        "with --exit the hubs are stopped: no commands to look around them\n{stdout}"
    );
    assert_eq!(rows.len(), 9, "3 objects for florin, 6 for guilder:\n{stdout}");
    assert!(
        rows.iter().all(|r| r[3] == "yes"),
        "every object synced:\n{stdout}"
    );

    // The WMW summary: every object of example1 once, commonstuff on both
    // clusters, specialstuff on guilder only, as executing counts and clusters.
    let summary: Vec<Vec<String>> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("WMW root:example-wmw"))
        .skip(2)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect();
    assert_eq!(summary.len(), 6, "{stdout}");
    for row in &summary {
        let (executing, clusters) = if row[1].contains("specialstuff") {
            ("1", "guilder")
        } else {
            ("2", "florin,guilder")
        };
        assert_eq!(
            (row[2].as_str(), row[3].as_str()),
            (executing, clusters),
            "{stdout}"
        );
    }

    let hub = TestHub::start_in(&dir.path().join("hub")).await;
    // The WMW holds what the summary says: the annotation on the object, and a
    // PlacementSummary per object naming its clusters.
    let wmw = hub.client("root:example-wmw").await;
    let commond = Api::<DynamicObject>::namespaced_with(wmw.clone(), "commonstuff", &resource("Deployment"))
        .get("commond")
        .await
        .unwrap();
    assert_eq!(
        commond.metadata.annotations.unwrap_or_default()["kubestellar.io/executing-count"],
        "2"
    );
    let summaries = Api::<DynamicObject>::all_with(
        wmw,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("edge.ferry.dev", "v1alpha1", "PlacementSummary"),
            "placementsummaries",
        ),
    );
    let speciald = summaries
        .get("deployments.apps.specialstuff.speciald")
        .await
        .unwrap();
    assert_eq!(speciald.data["destinations"][0]["cluster"], "guilder");
    assert_eq!(speciald.data["destinations"].as_array().unwrap().len(), 1);
    for cluster in ["florin", "guilder"] {
        let mailbox = format!("root:{}", edge_syncer::mailbox_of(&hub, cluster).await);
        let stand_in = TestHub::start_in(&dir.path().join(cluster)).await;
        let down = stand_in.client("root").await;
        let up = hub.client(&mailbox).await;
        for row in rows.iter().filter(|r| r[0] == *cluster) {
            let ar = resource(&row[1]);
            let (ns, name) = match row[2].split_once('/') {
                Some((ns, name)) => (Some(ns), name),
                None => (None, row[2].as_str()),
            };
            let api = |c: &kube::Client| match ns {
                Some(ns) => Api::<DynamicObject>::namespaced_with(c.clone(), ns, &ar),
                None => Api::<DynamicObject>::all_with(c.clone(), &ar),
            };
            let copy = api(&down)
                .get(name)
                .await
                .unwrap_or_else(|e| panic!("{cluster} lacks {row:?}: {e}"));
            assert!(copy
                .metadata
                .annotations
                .unwrap_or_default()
                .contains_key("edge.kubestellar.io/downsynced"));
            if row[1] == "Deployment" {
                let upstream = api(&up).get(name).await.unwrap();
                let reported = format!(
                    "{}/{}",
                    upstream.data["status"]["availableReplicas"], upstream.data["spec"]["replicas"]
                );
                assert_eq!(
                    row[4], reported,
                    "the table's reported status is what the mailbox holds"
                );
            }
        }
        stand_in.running.stop().await;
    }
}

/// `ferry quickstart --profile tmc --exit`: seed 002's walkthrough (workload sync,
/// bind compute, a Deployment whose status comes back) and seed 004's examples (a
/// LoadBalancer Service's ingress set downstream appears upstream; a ConfigMap and a
/// Secret), then a drain that moves everything to the other target. Its tables must
/// match what the hubs hold afterwards: the copies on the target they moved to, none
/// left on the drained one.
#[tokio::test(flavor = "multi_thread")]
async fn quickstart_tmc_walks_seed_002_and_drain_moves_the_workload() {
    let dir = tempfile::tempdir().unwrap();
    // Twice in the same directory: the second run finds the target the first one
    // drained, and must still pass (the tables checked below are its own).
    let out = quickstart_twice(&["--profile", "tmc", "--timeout", "150s"], dir.path());
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("In root:"),
        "the output starts with its tables, not kcp's binding lines:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    // Two tables: OBJECT(kind name) TARGET DOWNSTREAM REPORTED...
    let tables: Vec<Vec<Vec<String>>> = stdout
        .split("OBJECT ")
        .skip(1)
        .map(|t| {
            t.lines()
                .skip(1)
                .take_while(|l| !l.trim().is_empty())
                .map(|l| l.split_whitespace().map(String::from).collect())
                .collect()
        })
        .collect();
    assert_eq!(tables.len(), 2, "{stdout}");
    let (before, after) = (&tables[0], &tables[1]);
    assert_eq!(before.len(), 4, "{stdout}");
    assert_eq!(after.len(), 4, "{stdout}");
    let drained = before[0][2].clone();
    let moved_to = after[0][2].clone();
    assert_ne!(drained, moved_to, "drain moves the workload:\n{stdout}");
    for (table, target) in [(before, &drained), (after, &moved_to)] {
        for row in table {
            assert_eq!(&row[2], target, "one namespace, one target:\n{stdout}");
            assert!(
                row[3].starts_with("kcp-"),
                "copied into a kcp-<hash> namespace:\n{stdout}"
            );
        }
        let deployment = table.iter().find(|r| r[0] == "Deployment").unwrap();
        assert_eq!(deployment[4..], ["1/1", "available"], "{stdout}");
        let service = table.iter().find(|r| r[0] == "Service").unwrap();
        assert_eq!(service[4], "ingress", "{stdout}");
    }

    // The hubs agree: every copy is on the target it moved to, none is left on the
    // drained one, and the user's Deployment carries the status that came back.
    let kinds = |kind: &str| match kind {
        "Deployment" => {
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("apps", "v1", kind), "deployments")
        }
        "Service" => ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", kind), "services"),
        "ConfigMap" => resource("ConfigMap"),
        _ => ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Secret"), "secrets"),
    };
    let new = TestHub::start_in(&dir.path().join(&moved_to)).await;
    let new = new.client("root").await;
    let old = TestHub::start_in(&dir.path().join(&drained)).await;
    let old = old.client("root").await;
    for row in after {
        let (ns, name) = row[3].split_once('/').unwrap();
        let copy = Api::<DynamicObject>::namespaced_with(new.clone(), ns, &kinds(&row[0]))
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("{moved_to} lacks {row:?}: {e}"));
        assert!(copy
            .metadata
            .labels
            .unwrap_or_default()
            .contains_key("internal.workload.kcp.io/cluster"));
        let left = Api::<DynamicObject>::all_with(old.clone(), &kinds(&row[0]))
            .list(&kube::api::ListParams::default().labels("internal.workload.kcp.io/cluster"))
            .await
            .unwrap();
        assert!(
            left.items
                .iter()
                .all(|o| o.metadata.name.as_deref() != Some(name)),
            "{drained} still holds {}: {:?}",
            row[1],
            left.items.iter().map(|o| &o.metadata.name).collect::<Vec<_>>()
        );
    }
    let hub = TestHub::start_in(&dir.path().join("hub")).await;
    let app = hub.client("root:app").await;
    let kuard = Api::<DynamicObject>::namespaced_with(app, "default", &kinds("Deployment"))
        .get("kuard")
        .await
        .unwrap();
    assert_eq!(kuard.data["status"]["availableReplicas"], 1);
}

/// `ferry quickstart --profile syncagent --exit`: seed 003's flow. Its table (per
/// consumer object: the copy on the service cluster, the status back, the credentials
/// Secret back) must match what the hubs hold afterwards; run twice in one directory.
#[tokio::test(flavor = "multi_thread")]
async fn quickstart_syncagent_publishes_syncs_and_returns_status_and_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let out = quickstart_twice(&["--profile", "syncagent", "--timeout", "90s"], dir.path());
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    // Rows: WORKSPACE OBJECT SERVICE-COPY STATUS CREDENTIALS
    let rows: Vec<Vec<String>> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("WORKSPACE"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect();
    assert_eq!(rows.len(), 3, "one Database in team-a, two in team-b:\n{stdout}");
    let hub = TestHub::start_in(&dir.path().join("hub")).await;
    let service = TestHub::start_in(&dir.path().join("service")).await;
    let down = service.client("root").await;
    let remote = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("databases.example.io", "v1", "Database"),
        "databases",
    );
    let local = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Database"),
        "databases",
    );
    for row in &rows {
        assert_eq!(row[3], "Ready", "{stdout}");
        let up = hub.client(&row[0]).await;
        let name = row[1].trim_start_matches("database/");
        let (ns, local_name) = row[2].split_once('/').expect("namespace/name");
        let copy = Api::<DynamicObject>::namespaced_with(down.clone(), ns, &local)
            .get(local_name)
            .await
            .unwrap_or_else(|e| panic!("the service cluster lacks {row:?}: {e}"));
        assert_eq!(copy.data["spec"]["engine"], "postgres");
        let source = Api::<DynamicObject>::namespaced_with(up.clone(), "default", &remote)
            .get(name)
            .await
            .unwrap();
        assert_eq!(source.data["status"]["phase"], "Ready");
        let secrets =
            |c: &kube::Client, ns: &str| Api::<k8s_openapi::api::core::v1::Secret>::namespaced(c.clone(), ns);
        let returned = secrets(&up, "default")
            .get(row[4].trim_start_matches("secret/"))
            .await
            .unwrap();
        let original = secrets(&down, ns)
            .get(&format!("{local_name}-credentials"))
            .await
            .unwrap();
        assert_eq!(
            returned.data, original.data,
            "the credentials came back as the service wrote them"
        );
    }
}

/// A quickstart that runs out of time says which step it was waiting at.
#[test]
fn a_quickstart_timeout_names_the_step_it_waited_at() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args([
            "quickstart",
            "--profile",
            "tmc",
            "--exit",
            "--timeout",
            "1ms",
            "--dir",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("it was waiting at: starting the hub"),
        "stderr: {stderr}"
    );
}

/// The quickstarts' stand-in kubelet marks a Deployment available even when
/// its first status write is refused: it retries as a controller's work
/// queue would, since no other event of the Deployment may come.
#[tokio::test(flavor = "multi_thread")]
async fn the_stand_in_kubelet_retries_a_refused_status_write() {
    use serde_json::json;
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, "kubelet-token,kubelet,u-kubelet\n").unwrap();
    let hub = TestHub::start_with(|o| o.token_auth_file = Some(tokens.clone())).await;
    let admin = hub.client("root").await;
    let roles = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", "ClusterRole"),
        "clusterroles",
    );
    let roles: Api<DynamicObject> = Api::all_with(admin.clone(), &roles);
    let role = |status_rights: bool| {
        let mut rules = vec![
            json!({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list", "watch"]}),
        ];
        if status_rights {
            rules.push(
                json!({"apiGroups": ["apps"], "resources": ["deployments/status"], "verbs": ["patch"]}),
            );
        }
        serde_json::from_value::<DynamicObject>(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "stand-in-kubelet"}, "rules": rules,
        }))
        .unwrap()
    };
    roles.create(&Default::default(), &role(false)).await.unwrap();
    let bindings = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding"),
        "clusterrolebindings",
    );
    let binding: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "stand-in-kubelet"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "stand-in-kubelet"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "kubelet"}],
    }))
    .unwrap();
    Api::<DynamicObject>::all_with(admin.clone(), &bindings)
        .create(&Default::default(), &binding)
        .await
        .unwrap();
    let mut config = hub.config("root").await;
    config.auth_info = kube::config::AuthInfo {
        token: Some("kubelet-token".to_string().into()),
        ..Default::default()
    };
    let kubelet = ferry_cli::quickstart::simulate_kubelet(kube::Client::try_from(config).unwrap());

    let deployments: Api<DynamicObject> =
        Api::namespaced_with(admin.clone(), "default", &resource("Deployment"));
    let web: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}
    }))
    .unwrap();
    deployments.create(&Default::default(), &web).await.unwrap();
    // Its first write is refused (403, counted on the hub's /metrics) ...
    let refused = |scrape: &str| {
        scrape.lines().any(|l| {
            l.starts_with("apiserver_request_total{")
                && [
                    "verb=\"PATCH\"",
                    "resource=\"deployments\"",
                    "subresource=\"status\"",
                    "code=\"403\"",
                ]
                .iter()
                .all(|h| l.contains(h))
        })
    };
    let mut top = hub.config("root").await;
    top.cluster_url = hub.url().parse().unwrap();
    let top = kube::Client::try_from(top).unwrap();
    ferry_testkit::eventually(20, "the kubelet's status write refused", || async {
        let req = http::Request::get("/metrics").body(Vec::new()).unwrap();
        let scrape = top.request_text(req).await.unwrap_or_default();
        refused(&scrape).then_some(())
    })
    .await;
    // ... and once the rights come, a retry lands.
    let mut granted = role(true);
    granted.metadata.resource_version = roles
        .get("stand-in-kubelet")
        .await
        .unwrap()
        .metadata
        .resource_version;
    roles
        .replace("stand-in-kubelet", &Default::default(), &granted)
        .await
        .unwrap();
    ferry_testkit::eventually(20, "web marked available", || async {
        let d = deployments.get("web").await.ok()?;
        (d.data["status"]["availableReplicas"] == 2).then_some(())
    })
    .await;
    kubelet.abort();
}

/// `ferry quickstart --exit ARGS --timeout 90s --dir DIR`, once.
fn quickstart_once(args: &[&str], dir: &std::path::Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ferry"))
        .arg("quickstart")
        .args(args)
        .args(["--exit", "--timeout", "90s", "--dir"])
        .arg(dir)
        .output()
        .unwrap()
}

/// At `-v 1`, with standard error not a terminal (no progress line), the
/// quickstart logs each step it waits at, the api-syncagent logs nothing
/// about a namespace filter no PublishedResource sets (its namespace watch
/// failing where no filter needs it is debug detail), and each of its lines
/// names the agent.
#[test]
fn at_v1_the_quickstart_logs_its_steps_and_nothing_about_an_unset_namespace_filter() {
    let dir = tempfile::tempdir().unwrap();
    let out = quickstart_once(&["--profile", "syncagent", "-v", "1"], dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the quickstart failed: {stderr}");
    for step in [
        "starting the hub and the stand-in service cluster",
        "waiting for copies, status and credentials",
    ] {
        assert!(stderr.contains(step), "the step {step:?} is not logged: {stderr}");
    }
    assert!(
        !stderr
            .lines()
            .any(|l| l.contains("namespace") && l.contains("filter")),
        "a line about a namespace filter nobody configured:\n{stderr}"
    );
    let anonymous: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains(" ferry_syncer") && !l.contains("syncagent{agent="))
        .collect();
    assert!(
        anonymous.is_empty(),
        "agent lines that do not say which agent they are about: {anonymous:#?}"
    );
}

/// `kubectl get publishedresources` on the service cluster answers "is it
/// working": READY from the agent's condition and the SCHEMA it published.
#[tokio::test(flavor = "multi_thread")]
async fn kubectl_get_publishedresources_shows_ready_and_schema() {
    let dir = tempfile::tempdir().unwrap();
    let out = quickstart_once(&["--profile", "syncagent"], dir.path());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let service = TestHub::start_in(&dir.path().join("service")).await;
    let out = service.kubectl(&["get", "publishedresources"]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<Vec<&str>> = table.lines().map(|l| l.split_whitespace().collect()).collect();
    let column = |name: &str| rows[0].iter().position(|c| *c == name);
    let (ready, schema) = (column("READY"), column("SCHEMA"));
    assert!(ready.is_some() && schema.is_some(), "{table}");
    assert_eq!(rows.len(), 2, "one PublishedResource:\n{table}");
    assert_eq!(rows[1][ready.unwrap()], "True", "{table}");
    assert!(
        rows[1][schema.unwrap()].ends_with(".databases.example.io"),
        "the APIResourceSchema it published:\n{table}"
    );
}
