//! kcp's api-syncagent document ("Documentation": overview, naming, uniqueness,
//! kcp-awareness, PublishedResources, APIExports, controllers) walked in order, with a
//! hub standing in for kcp (`root:provider` as the org workspace), another hub for the
//! service cluster, and the agent run as `ferry syncagent` with the arguments its pod
//! would get. The document has no commands of its own: each step is what it says a
//! user does, and each assertion is what it says the user then sees.

mod syncagent_kit;

use std::process::{Child, Command, Stdio};

use ferry_testkit::eventually;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{json, Value};
use syncagent_kit::*;

/// The document's example APIExport (its name is the API group consumers see).
const EXPORT: &str = "databases.examplecorp";

fn agent(stage: &Stage, name: &str, extra: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ferry"));
    cmd.args([
        "syncagent",
        "--kcp-kubeconfig",
        stage.provider_kubeconfig.to_str().unwrap(),
        "--kubeconfig",
        stage.service_kubeconfig.to_str().unwrap(),
        "--apiexportendpointslice-ref",
        EXPORT,
        "--namespace=ferry-system",
        &format!("--agent-name={name}"),
        "--metrics-address",
        &free_address(),
    ])
    .args(extra)
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    cmd
}

/// Runs a replica as its Deployment would: leader election on.
fn replica(stage: &Stage) -> Child {
    agent(
        stage,
        "nora",
        &["--enable-leader-election", "--leader-elect-retry-period=200ms"],
    )
    .spawn()
    .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_api_syncagent_document_works_as_written() {
    let prs = ar(
        "syncagent.kcp.io",
        "v1alpha1",
        "PublishedResource",
        "publishedresources",
    );
    let crds = ar(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
    );

    // Overview 1: a kcp user creates the APIExport and hands over a kubeconfig whose
    // server already names the workspace (kcp-awareness: /clusters/root:provider).
    let stage = Stage::start(EXPORT).await;
    let kubeconfig = std::fs::read_to_string(&stage.provider_kubeconfig).unwrap();
    assert!(kubeconfig.contains("/clusters/root:provider"), "{kubeconfig}");
    // The service cluster has the CRD to publish (the document's example) and the
    // PublishedResource CRD, as the agent's Helm chart installs it.
    for crd in ferry_api::crds::all_crds() {
        let crd = serde_json::to_value(crd).unwrap();
        if crd["metadata"]["name"] == "publishedresources.syncagent.kcp.io" {
            create(&stage.service, &crds, None, crd).await;
        }
    }
    create(
        &stage.service,
        &crds,
        None,
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": { "name": "clusters.kubermatic.k8c.io" },
            "spec": { "group": "kubermatic.k8c.io", "scope": "Cluster",
                "names": { "kind": "Cluster", "plural": "clusters", "singular": "cluster", "listKind": "ClusterList" },
                "versions": [{ "name": "v1", "served": true, "storage": true, "subresources": { "status": {} },
                    "schema": { "openAPIV3Schema": { "type": "object", "x-kubernetes-preserve-unknown-fields": true } } }] }
        }),
    )
    .await;
    create(
        &stage.service,
        &ar("", "v1", "Namespace", "namespaces"),
        None,
        json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": "ferry-system" } }),
    )
    .await;

    // "Sync Agent Naming": every agent has a name like "nora" or "oskar"; one that is
    // no DNS label is refused before anything starts, naming the flag and the fix.
    let mut wrong = agent(&stage, "Nora.Databases", &[]).spawn().unwrap();
    let exited = eventually(20, "the agent to refuse the name and exit", || {
        let done = wrong.try_wait().unwrap();
        async move { done }
    })
    .await;
    let output = wrong.wait_with_output().unwrap();
    assert_eq!(exited, output.status);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--agent-name \"Nora.Databases\" is invalid")
            && stderr.contains("DNS-1035")
            && stderr.contains("\"nora\""),
        "{stderr}"
    );

    // Overview 4, "Uniqueness": the agent, two replicas with leader election; only
    // the one holding the Lease works.
    let mut replicas = vec![replica(&stage), replica(&stage)];

    // Overview 5 and "PublishedResources": the service owner publishes
    // kubermatic.k8c.io/v1 Cluster as KubernetesCluster (the group is the export's).
    create(
        &stage.service,
        &prs,
        None,
        json!({ "apiVersion": "syncagent.kcp.io/v1alpha1", "kind": "PublishedResource",
                "metadata": { "name": "publish-kubermatic" },
                "spec": { "resource": { "apiGroup": "kubermatic.k8c.io", "kind": "Cluster", "versions": ["v1"] },
                          "projection": { "kind": "KubernetesCluster" } } }),
    )
    .await;

    // Overview 6 (apiresourceschema controller): an APIResourceSchema in the org
    // workspace, named in the PublishedResource's status.
    let schema = eventually(30, "the APIResourceSchema's name in the status", || async {
        let pr = get(&stage.service, &prs, None, "publish-kubermatic").await?;
        pr["status"]["resourceSchemaName"].as_str().map(str::to_string)
    })
    .await;
    assert!(
        schema.ends_with(&format!(".kubernetesclusters.{EXPORT}")),
        "{schema}"
    );
    let ars = get(
        &stage.provider,
        &ar(
            "apis.kcp.io",
            "v1alpha1",
            "APIResourceSchema",
            "apiresourceschemas",
        ),
        None,
        &schema,
    )
    .await
    .expect("the schema in the org workspace");
    assert_eq!(ars["spec"]["group"], EXPORT);
    assert_eq!(ars["spec"]["names"]["kind"], "KubernetesCluster");

    // Overview 7 (apiexport controller): bundled into the pre-existing APIExport, with
    // Events from the agent's fully qualified name <agentname>.<apigroup>.
    let exports = ar("apis.kcp.io", "v1alpha1", "APIExport", "apiexports");
    eventually(30, "the export to list the schema", || async {
        let export = get(&stage.provider, &exports, None, EXPORT).await?;
        let latest = export["spec"]["latestResourceSchemas"].as_array()?.clone();
        latest.iter().any(|s| s == schema.as_str()).then_some(())
    })
    .await;
    let events = ar("", "v1", "Event", "events");
    let event = eventually(30, "an AddingResourceSchemas Event on the export", || async {
        let api: Api<DynamicObject> = Api::namespaced_with(stage.provider.clone(), "default", &events);
        let list = api.list(&Default::default()).await.ok()?;
        list.items
            .into_iter()
            .map(|e| serde_json::to_value(e).unwrap())
            .find(|e| e["involvedObject"]["kind"] == "APIExport" && e["reason"] == "AddingResourceSchemas")
    })
    .await;
    assert_eq!(event["involvedObject"]["name"], EXPORT);
    assert_eq!(
        event["reportingInstance"], "nora.databases.examplecorp",
        "{event}"
    );
    assert!(event["message"].as_str().unwrap().contains(&schema), "{event}");
    assert_holds_lease(&stage.service).await;

    // Overview 8 and 9 (syncmanager and sync controllers): a consumer binds the export
    // in its workspace; its objects come down, status goes back up.
    create(
        &stage.c1,
        &ar("apis.kcp.io", "v1alpha1", "APIBinding", "apibindings"),
        None,
        json!({ "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIBinding", "metadata": { "name": "kubermatic" },
                "spec": { "reference": { "export": { "path": "root:provider", "name": EXPORT } } } }),
    )
    .await;
    let remote = ar(EXPORT, "v1", "KubernetesCluster", "kubernetesclusters");
    create(
        &stage.c1,
        &remote,
        None,
        json!({ "apiVersion": format!("{EXPORT}/v1"), "kind": "KubernetesCluster",
                "metadata": { "name": "prod" }, "spec": { "version": "1.31" } }),
    )
    .await;
    let source = get(&stage.c1, &remote, None, "prod").await.unwrap();
    let cluster = source["metadata"]["annotations"]["kcp.io/cluster"]
        .as_str()
        .unwrap()
        .to_string();
    let local = ar("kubermatic.k8c.io", "v1", "Cluster", "clusters");
    // A cluster-scoped object: the default name hashes its (empty) namespace and name.
    let name = ferry_syncer::profiles::syncagent::default_name("", "prod");
    let copy = eventually(30, "the Cluster on the service cluster", || async {
        get(&stage.service, &local, None, &name).await
    })
    .await;
    assert_eq!(copy["kind"], "Cluster");
    assert_eq!(copy["spec"]["version"], "1.31");
    assert_eq!(copy["metadata"]["labels"]["syncagent.kcp.io/agent-name"], "nora");
    assert_eq!(
        copy["metadata"]["labels"]["syncagent.kcp.io/remote-object-cluster"],
        cluster.as_str()
    );
    assert_eq!(
        copy["metadata"]["annotations"]["ferry.dev/published-resource"],
        "publish-kubermatic"
    );
    let status_api: Api<DynamicObject> = Api::all_with(stage.service.clone(), &local);
    status_api
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": { "phase": "Running" } })),
        )
        .await
        .unwrap();
    eventually(30, "the service's status in kcp", || async {
        let obj = get(&stage.c1, &remote, None, "prod").await?;
        (obj["status"]["phase"] == "Running").then_some(())
    })
    .await;

    // "To prevent chaos, PublishedResources are immutable": switching the published
    // kind is refused, with what to do instead.
    let api: Api<DynamicObject> = Api::all_with(stage.service.clone(), &prs);
    let refused = api
        .patch(
            "publish-kubermatic",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "resource": { "kind": "User" } } })),
        )
        .await
        .expect_err("a PublishedResource's spec cannot change");
    let message = refused.to_string();
    assert!(
        message.contains("PublishedResources are immutable")
            && message.contains("create a new PublishedResource"),
        "{message}"
    );

    // "APIExports": schemas are never removed, even when their PublishedResource goes.
    api.delete("publish-kubermatic", &Default::default())
        .await
        .unwrap();
    eventually(15, "the PublishedResource gone", || async {
        get(&stage.service, &prs, None, "publish-kubermatic")
            .await
            .is_none()
            .then_some(())
    })
    .await;
    let export = get(&stage.provider, &exports, None, EXPORT).await.unwrap();
    let latest: Vec<Value> = export["spec"]["latestResourceSchemas"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(latest.iter().any(|s| s == schema.as_str()), "{export}");

    for mut r in replicas.drain(..) {
        r.kill().unwrap();
        let _ = r.wait();
    }
}
