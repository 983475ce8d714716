//! `ferry syncagent` as a process, with the reference's flag names: it refuses an unknown
//! controller, and with kcp (a hub with `root:provider` exporting `databases.example.io`
//! and `root:c1` binding it) and a service cluster (another hub with a Database CRD and
//! a PublishedResource) it publishes the schema, serves `/readyz`, and syncs a
//! consumer's Database down.

mod syncagent_kit;

use std::path::Path;
use std::process::{Command, Stdio};

use ferry_api::well_known::{SYNCAGENT_CLEANUP_FINALIZER, SYNCAGENT_REMOTE_NAME_ANNOTATION};
use ferry_hub::kubeconfig::{kubeconfig, AuthInfo};
use ferry_testkit::eventually;
use kube::api::{Api, DynamicObject, ListParams};
use serde_json::{json, Value};
use syncagent_kit::*;

const EXPORT: &str = "databases.example.io";

/// `ferry syncagent` as agent `nora` with the reference's flags: the provider
/// workspace's endpoint slice of [`EXPORT`] on one side, the service cluster
/// (its Lease in `ferry-system`) on the other, metrics on `metrics`.
fn agent_command(provider_kubeconfig: &Path, service_kubeconfig: &Path, metrics: &str) -> Command {
    let mut agent = Command::new(env!("CARGO_BIN_EXE_ferry"));
    agent
        .arg("syncagent")
        .arg("--kcp-kubeconfig")
        .arg(provider_kubeconfig)
        .arg("--kubeconfig")
        .arg(service_kubeconfig)
        .args([
            "--apiexportendpointslice-ref",
            EXPORT,
            "--namespace=ferry-system",
            "--agent-name=nora",
            "--metrics-address",
            metrics,
        ])
        .stdout(Stdio::null());
    agent
}

#[tokio::test(flavor = "multi_thread")]
async fn syncagent_takes_the_reference_flags_publishes_and_syncs() {
    let Stage {
        kcp: _kcp,
        service_hub: _service_hub,
        provider_kubeconfig,
        c1,
        service_kubeconfig,
        service,
        ..
    } = Stage::start(EXPORT).await;
    publish_databases(&service).await;
    let prs = published_resources();

    let agent = |extra: &[&str], metrics: &str| {
        agent_command(&provider_kubeconfig, &service_kubeconfig, metrics)
            .arg("--published-resource-selector=team=db")
            .args(extra)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };

    // An unknown controller: it says which ones exist and exits.
    let stderr = refused_to_start(agent(&["--disabled-controllers=bogus"], &free_address())).await;
    assert!(
        stderr.contains("bogus") && stderr.contains("apiresourceschema"),
        "{stderr}"
    );

    // Run as one of two replicas would: it syncs once it holds the Lease
    // syncagent.<agent name> in --namespace on the service cluster.
    create(
        &service,
        &ar("", "v1", "Namespace", "namespaces"),
        None,
        json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": "ferry-system" } }),
    )
    .await;
    let metrics = free_address();
    let mut running = agent(
        &["--enable-leader-election", "--leader-elect-retry-period=200ms"],
        &metrics,
    );
    let schema = eventually(
        30,
        "the schema name in the PublishedResource's status",
        || async {
            let pr = get(&service, &prs, None, "databases").await?;
            pr["status"]["resourceSchemaName"].as_str().map(str::to_string)
        },
    )
    .await;
    assert!(schema.ends_with(".databases.databases.example.io"), "{schema}");
    let addr = metrics.clone();
    eventually(30, "/readyz to answer 200", || {
        let addr = addr.clone();
        async move {
            let code = tokio::task::spawn_blocking(move || status_of(&addr, "/readyz"))
                .await
                .ok()?;
            (code == Some(200)).then_some(())
        }
    })
    .await;

    bind_provider_export(&c1, "databases", EXPORT).await;
    let remote = ar(EXPORT, "v1", "Database", "databases");
    create_database(&c1, EXPORT, "my-db", 1).await;
    let source = get(&c1, &remote, Some("default"), "my-db").await.unwrap();
    let cluster = source["metadata"]["annotations"]["kcp.io/cluster"]
        .as_str()
        .unwrap()
        .to_string();
    let local = ar("example.com", "v1", "Database", "databases");
    let name = ferry_syncer::profiles::syncagent::default_name("default", "my-db");
    let copy = eventually(30, "the Database on the service cluster", || async {
        get(&service, &local, Some(&cluster), &name).await
    })
    .await;
    assert_eq!(copy["metadata"]["labels"]["syncagent.kcp.io/agent-name"], "nora");
    assert_eq!(copy["spec"]["size"], 1);
    // The reference's gauge: the PublishedResources this agent manages.
    let addr = metrics.clone();
    let text = tokio::task::spawn_blocking(move || response_of(&addr, "/metrics"))
        .await
        .unwrap()
        .unwrap_or_default();
    let gauge = text
        .lines()
        .find(|l| l.starts_with("sync_agent_published_resource "))
        .and_then(|l| l.split_whitespace().last()?.parse::<f64>().ok());
    assert_eq!(gauge, Some(1.0), "{text}");
    assert!(
        text.contains("syncer_connection_status{side=\"upstream\"} 1"),
        "the shared metrics too: {text}"
    );
    assert_holds_lease(&service).await;
    running.kill().unwrap();
    let _ = running.wait();
}

/// `ferry syncagent-gen` against the provider workspace, its manifest applied to the
/// service cluster, and the agent run from exactly what its pod would get (the mounted
/// kcp kubeconfig, the Deployment's arguments, a token of its ServiceAccount): it
/// publishes and syncs with only the rights the two sides gave it.
#[tokio::test(flavor = "multi_thread")]
async fn syncagent_gen_installs_an_agent_that_works_with_only_its_rights() {
    let Stage {
        kcp: _kcp,
        service_hub,
        provider_kubeconfig,
        provider,
        c1,
        service,
        ..
    } = Stage::start(EXPORT).await;
    eventually(10, "the export's endpoint slice", || async {
        get(
            &provider,
            &ar(
                "apis.kcp.io",
                "v1alpha1",
                "APIExportEndpointSlice",
                "apiexportendpointslices",
            ),
            None,
            EXPORT,
        )
        .await
    })
    .await;

    // Without an endpoint slice of that name it says what to do.
    let dir = service_hub.data_dir().to_path_buf();
    let manifest = dir.join("agent.yaml");
    let gen = |slice: &str| {
        Command::new(env!("CARGO_BIN_EXE_ferry"))
            .args([
                "syncagent-gen",
                "nora",
                "--apiexportendpointslice-ref",
                slice,
                "--resources",
                "databases.example.com",
                "--kubeconfig",
                provider_kubeconfig.to_str().unwrap(),
                "-o",
                manifest.to_str().unwrap(),
            ])
            .output()
            .unwrap()
    };
    let missing = gen("nope.example.io");
    assert!(!missing.status.success());
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(
        stderr.contains("APIExportEndpointSlice nope.example.io does not exist"),
        "{stderr}"
    );
    let made = gen(EXPORT);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let applied = service_hub.kubectl(&["apply", "-f", manifest.to_str().unwrap()]);
    assert!(
        applied.status.success(),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );

    // What the pod gets.
    let id = "ferry-syncagent-nora";
    let secret = eventually(10, "the kcp kubeconfig Secret", || async {
        get(
            &service,
            &ar("", "v1", "Secret", "secrets"),
            Some("ferry-system"),
            id,
        )
        .await
    })
    .await;
    let kcp_text = {
        use base64::Engine as _;
        let data = secret["data"]["kubeconfig"].as_str().unwrap();
        String::from_utf8(base64::engine::general_purpose::STANDARD.decode(data).unwrap()).unwrap()
    };
    let kcp_file = dir.join("kcp.kubeconfig");
    std::fs::write(&kcp_file, &kcp_text).unwrap();
    let token: Value = service
        .request(
            http::Request::post(format!(
                "/api/v1/namespaces/ferry-system/serviceaccounts/{id}/token"
            ))
            .header("content-type", "application/json")
            .body(
                serde_json::to_vec(
                    &json!({ "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {} }),
                )
                .unwrap(),
            )
            .unwrap(),
        )
        .await
        .unwrap();
    let in_cluster = dir.join("in-cluster.kubeconfig");
    std::fs::write(
        &in_cluster,
        kubeconfig(
            "in-cluster",
            service_hub.url(),
            &service_hub.running.ca_pem,
            AuthInfo::Token(token["status"]["token"].as_str().unwrap().to_string()),
            "in-cluster",
            None,
        ),
    )
    .unwrap();
    let deployment = get(
        &service,
        &ar("apps", "v1", "Deployment", "deployments"),
        Some("ferry-system"),
        id,
    )
    .await
    .unwrap();
    let metrics = free_address();
    let mut args: Vec<String> = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .filter(|a| !a.starts_with("--metrics-address"))
        .map(|a| match a.strip_prefix("--kcp-kubeconfig=") {
            Some(_) => format!("--kcp-kubeconfig={}", kcp_file.display()),
            None => a.to_string(),
        })
        .collect();
    assert_eq!(args[0], "syncagent");
    assert_eq!(deployment["spec"]["replicas"], 2, "a pair electing a leader");
    assert!(args.iter().any(|a| a == "--enable-leader-election"), "{args:?}");
    args.push(format!("--kubeconfig={}", in_cluster.display()));
    args.push(format!("--metrics-address={metrics}"));

    // The kcp token is the agent's and no more.
    let agent_kcp = client(&kcp_file).await;
    let secrets: Api<DynamicObject> =
        Api::namespaced_with(agent_kcp, "default", &ar("", "v1", "Secret", "secrets"));
    match secrets.list(&Default::default()).await {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 403, "{e:?}"),
        other => panic!("the agent's kcp token reads the provider's Secrets: {other:?}"),
    }

    let mut running = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    create(&service, &ar("syncagent.kcp.io", "v1alpha1", "PublishedResource", "publishedresources"), None,
        json!({ "apiVersion": "syncagent.kcp.io/v1alpha1", "kind": "PublishedResource", "metadata": { "name": "databases" },
                "spec": { "resource": { "apiGroup": "example.com", "kind": "Database", "versions": ["v1"] } } }))
    .await;
    bind_provider_export(&c1, "databases", EXPORT).await;
    let remote = ar(EXPORT, "v1", "Database", "databases");
    eventually(30, "Databases served in root:c1", || async {
        Api::<DynamicObject>::namespaced_with(c1.clone(), "default", &remote)
            .list(&Default::default())
            .await
            .ok()
            .map(drop)
    })
    .await;
    create_database(&c1, EXPORT, "my-db", 2).await;
    let source = get(&c1, &remote, Some("default"), "my-db").await.unwrap();
    let cluster = source["metadata"]["annotations"]["kcp.io/cluster"]
        .as_str()
        .unwrap()
        .to_string();
    let name = ferry_syncer::profiles::syncagent::default_name("default", "my-db");
    let copy = eventually(30, "the Database on the service cluster", || async {
        get(
            &service,
            &ar("example.com", "v1", "Database", "databases"),
            Some(&cluster),
            &name,
        )
        .await
    })
    .await;
    assert_eq!(copy["spec"]["size"], 2);
    // It leads through its Lease, which its rights on the service cluster allow.
    assert_holds_lease(&service).await;
    running.kill().unwrap();
    let output = running.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("code: 403") && !stderr.to_lowercase().contains("forbidden"),
        "the agent lacked a right: {stderr}"
    );
}

/// A consumer object's name in the kill -9 test.
fn killed_name(i: usize) -> String {
    format!("db-{i}")
}

/// kill -9 in the middle of the initial sync, then a restart: every consumer object
/// ends up with one copy, one last-known state and the finalizer once, and deleting
/// them all leaves nothing behind (no copy, no state Secret, no object held by the
/// finalizer). The first agent is throttled (`--qps`) so that the kill lands mid-sync.
#[tokio::test(flavor = "multi_thread")]
async fn an_agent_killed_mid_initial_sync_resumes_with_nothing_orphaned_or_doubled() {
    const OBJECTS: usize = 60;
    let Stage {
        kcp: _kcp,
        service_hub: _service_hub,
        provider_kubeconfig,
        c1,
        service_kubeconfig,
        service,
        ..
    } = Stage::start(EXPORT).await;
    publish_databases(&service).await;
    let agent = |extra: &[&str]| {
        agent_command(&provider_kubeconfig, &service_kubeconfig, &free_address())
            .args(extra)
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    // The schema first (an agent that does not sync), so the objects exist before
    // the syncing agent starts.
    let mut publisher = agent(&["--disabled-controllers=sync"]);
    eventually(30, "the schema in the PublishedResource's status", || async {
        let pr = get(&service, &published_resources(), None, "databases").await?;
        pr["status"]["resourceSchemaName"].as_str().map(drop)
    })
    .await;
    bind_provider_export(&c1, "databases", EXPORT).await;
    let remote = ar(EXPORT, "v1", "Database", "databases");
    for i in 0..OBJECTS {
        create_database(&c1, EXPORT, &killed_name(i), i).await;
    }
    publisher.kill().unwrap();
    let _ = publisher.wait();

    let local: Api<DynamicObject> =
        Api::all_with(service.clone(), &ar("example.com", "v1", "Database", "databases"));
    let copies = ListParams::default().labels("syncagent.kcp.io/agent-name=nora");
    let states: Api<DynamicObject> = Api::namespaced_with(
        service.clone(),
        "ferry-system",
        &ar("", "v1", "Secret", "secrets"),
    );
    let state_selector = ListParams::default().labels("syncagent.kcp.io/object-state=true");
    let sources: Api<DynamicObject> = Api::namespaced_with(c1.clone(), "default", &remote);

    // 10 requests a second, three per object: the kill comes a few copies in, once
    // one of them has its state (the agent's writes for several objects overlap, so
    // the first copies may be made before any state is).
    let mut first = agent(&["--qps=10"]);
    let made = eventually(60, "the first copies, one with its state", || async {
        let made = local.list(&copies).await.ok()?.items;
        let recorded = states.list(&state_selector).await.ok()?.items;
        let with_state = made.iter().any(|copy| {
            let source = &copy.metadata.annotations.as_ref().unwrap()[SYNCAGENT_REMOTE_NAME_ANNOTATION];
            recorded.iter().any(|state| {
                state.metadata.annotations.as_ref().unwrap()["syncagent.kcp.io/remote-object"]
                    .ends_with(&format!("/{source}"))
            })
        });
        (made.len() >= 3 && with_state).then_some(made.len())
    })
    .await;
    first.kill().unwrap();
    let _ = first.wait();
    let copied = local.list(&copies).await.unwrap().items;
    assert!(
        (made..OBJECTS).contains(&copied.len()),
        "killed mid-sync: {} of {OBJECTS} copies",
        copied.len()
    );
    // Finalizers are written ahead of copies (pipelined), never after: whatever the
    // kill cut short, no copy exists whose object is not held for its clean-up.
    let held: Vec<String> = sources
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|s| {
            s.metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == SYNCAGENT_CLEANUP_FINALIZER)
        })
        .filter_map(|s| s.metadata.name)
        .collect();
    for copy in &copied {
        let source = &copy.metadata.annotations.as_ref().unwrap()[SYNCAGENT_REMOTE_NAME_ANNOTATION];
        assert!(
            held.contains(source),
            "the copy of {source} exists but {source} does not hold the finalizer"
        );
    }

    // A kill between a copy's create and its state's (they are written side by
    // side) leaves a copy without a last-known state; made certain here by
    // deleting one. The restarted agent records it again.
    let copied_sources: Vec<&String> = copied
        .iter()
        .map(|c| &c.metadata.annotations.as_ref().unwrap()[SYNCAGENT_REMOTE_NAME_ANNOTATION])
        .collect();
    let recorded = states.list(&state_selector).await.unwrap().items;
    let dropped = recorded
        .iter()
        .find(|state| {
            let remote = &state.metadata.annotations.as_ref().unwrap()["syncagent.kcp.io/remote-object"];
            copied_sources
                .iter()
                .any(|name| remote.ends_with(&format!("/{name}")))
        })
        .and_then(|state| state.metadata.name.clone())
        .expect("a copy's state recorded before the kill");
    states.delete(&dropped, &Default::default()).await.unwrap();

    let mut second = agent(&[]);
    let listed = eventually(60, "every copy and its state", || async {
        let copies = local.list(&copies).await.ok()?.items;
        let states = states.list(&state_selector).await.ok()?.items;
        (copies.len() >= OBJECTS && states.len() >= OBJECTS).then_some((copies, states))
    })
    .await;
    let (copies_made, states_made) = listed;
    let mut names: Vec<String> = copies_made
        .iter()
        .map(|c| c.metadata.annotations.as_ref().unwrap()[SYNCAGENT_REMOTE_NAME_ANNOTATION].clone())
        .collect();
    names.sort();
    let mut wanted: Vec<String> = (0..OBJECTS).map(killed_name).collect();
    wanted.sort();
    assert_eq!(names, wanted, "one copy per object");
    assert_eq!(states_made.len(), OBJECTS, "one last-known state per object");
    for source in sources.list(&ListParams::default()).await.unwrap().items {
        assert_eq!(
            source.metadata.finalizers.unwrap_or_default(),
            vec![SYNCAGENT_CLEANUP_FINALIZER.to_string()],
            "{:?}",
            source.metadata.name
        );
    }

    // Deleted: the copies go, then their states, then the objects themselves.
    for i in 0..OBJECTS {
        sources
            .delete(&killed_name(i), &Default::default())
            .await
            .unwrap();
    }
    eventually(60, "no object, copy or state left", || async {
        let left = sources.list(&ListParams::default()).await.ok()?.items.len()
            + local.list(&copies).await.ok()?.items.len()
            + states.list(&state_selector).await.ok()?.items.len();
        (left == 0).then_some(())
    })
    .await;
    second.kill().unwrap();
    let _ = second.wait();
}
