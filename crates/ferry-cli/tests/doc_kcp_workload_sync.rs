//! kcp's "Registering Kubernetes Clusters using syncer" document, on Ferry, in its
//! order: an organisation workspace, `kubectl ferry workload sync` writing
//! `syncer.yaml` (with `--resources`, from "Select resources to synchronize"),
//! the manifest applied to the physical cluster and its syncer run as its pod would
//! (the mounted kubeconfig, the Deployment's arguments, an in-cluster token), the
//! SyncTarget going Ready with its `syncedResources`, a workload workspace bound to
//! compute and to `imported-apis`, and a Deployment rolled out. Substitutions: hubs
//! stand in for kcp and the kind cluster, `kubectl ferry` for `kubectl kcp`,
//! `cronjobs.batch` (which the stand-in serves) for `routes.route.openshift.io`.
//! Binding `imported-apis` before the syncer has imported anything is tried too: it
//! says the export is not there yet.

mod common;

use common::kubectl_async::Kubectl;
use ferry_testkit::{client_from, eventually, TestHub};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread")]
async fn the_kcp_workload_sync_document_works_as_written() {
    let kcp_hub = TestHub::start_with(|o| o.compute_workspace = true).await;
    let kind = TestHub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let kcp = Kubectl::admin_of(&kcp_hub, dir, "kcp.kubeconfig");
    let pcluster = Kubectl::admin_of(&kind, dir, "pcluster.kubeconfig");
    let kind_admin = client_from(kind.kubeconfig(), None).await;
    let _kubelet = ferry_cli::quickstart::simulate_kubelet(kind_admin.clone());

    // Create an organization and immediately enter it (type root:universal, as
    // newer kcp releases create by default).
    let out = kcp
        .ok(&["ferry", "workspace", "create", "my-org", "--enter"])
        .await;
    for line in [
        "Workspace \"my-org\" (type root:universal) created. Waiting for it to be ready...",
        "Workspace \"my-org\" (type root:universal) is ready to use.",
        "Current workspace is \"root:my-org\"",
    ] {
        assert!(out.contains(line), "{line:?} not in\n{out}");
    }

    // Enable the syncer for a physical cluster, with a resource no APIExport serves.
    let manifest = dir.join("syncer.yaml");
    kcp.ok(&[
        "ferry",
        "workload",
        "sync",
        "kind",
        "--syncer-image",
        "ghcr.io/kcp-dev/kcp/syncer:v0.7.5",
        "--resources",
        "cronjobs.batch",
        "-o",
        manifest.to_str().unwrap(),
    ])
    .await;

    // Too early: nothing imported yet, so `imported-apis` does not exist, and
    // binding it says so (not that the user lacks "bind").
    kcp.ok(&["ferry", "ws", ".."]).await;
    kcp.ok(&["ferry", "ws", "create", "my-workloads", "--enter"])
        .await;
    let bind_imported_apis = [
        "ferry",
        "bind",
        "compute",
        "root:my-org",
        "--apiexports",
        "root:my-org:imported-apis",
    ];
    let err = kcp.fails(&bind_imported_apis).await;
    assert!(
        err.contains("apiexports.apis.kcp.io \"imported-apis\" not found in workspace \"root:my-org\"")
            && !err.contains("needs \"bind\""),
        "{err}"
    );
    kcp.ok(&["ferry", "ws", "root:my-org"]).await;

    // Apply the manifest to the physical cluster.
    let out = pcluster.ok(&["apply", "-f", manifest.to_str().unwrap()]).await;
    let id = out
        .lines()
        .find_map(|l| l.strip_prefix("namespace/")?.strip_suffix(" created"))
        .unwrap_or_else(|| panic!("no namespace created:\n{out}"))
        .to_string();
    assert!(id.starts_with("kcp-syncer-kind-"), "{id}");
    for created in [
        format!("serviceaccount/{id} created"),
        format!("clusterrole.rbac.authorization.k8s.io/{id} created"),
        format!("clusterrolebinding.rbac.authorization.k8s.io/{id} created"),
        format!("secret/{id} created"),
        format!("deployment.apps/{id} created"),
    ] {
        assert!(out.contains(&created), "{created} not in\n{out}");
    }
    let (_syncer, _args) =
        ferry_cli::quickstart_tmc::start_as_pod(&kind.running, &kind_admin, &id, &dir.join("pod"))
            .await
            .unwrap();
    // ... and it creates a kcp-syncer-kind-xx deployment, all its replicas ready
    // (two on Ferry, one leading: the document's kcp ran one).
    eventually(30, "the syncer's Deployment ready", || async {
        let out = pcluster.ok(&["-n", &id, "get", "deployments"]).await;
        out.lines()
            .filter(|l| l.starts_with(&id))
            .filter_map(|l| l.split_whitespace().nth(1)?.split_once('/'))
            .any(|(ready, wanted)| ready == wanted && ready != "0")
            .then_some(())
    })
    .await;

    // Wait for the kcp sync target to go ready.
    kcp.ok(&[
        "wait",
        "--for=condition=Ready",
        "synctarget/kind",
        "--timeout=60s",
    ])
    .await;
    // Its syncedResources: the kubernetes export's, each Accepted.
    let synced = eventually(60, "every synced resource Accepted", || async {
        let text = kcp
            .ok(&[
                "get",
                "synctarget",
                "kind",
                "-o",
                "jsonpath={.status.syncedResources}",
            ])
            .await;
        let synced: Vec<Value> = serde_json::from_str(&text).ok()?;
        (!synced.is_empty() && synced.iter().all(|r| r["state"] == "Accepted")).then_some(synced)
    })
    .await;
    let resources: Vec<&str> = synced.iter().filter_map(|r| r["resource"].as_str()).collect();
    for r in ["deployments", "services", "ingresses"] {
        assert!(resources.contains(&r), "{r} not in {resources:?}");
    }

    // Bind workspaces to the location workspace: compute, then imported-apis once
    // the syncer has imported cronjobs.
    kcp.ok(&["ferry", "ws", "root:my-workloads"]).await;
    kcp.ok(&["ferry", "bind", "compute", "root:my-org"]).await;
    eventually(60, "imported-apis bound", || async {
        kcp.run(&bind_imported_apis).await.status.success().then_some(())
    })
    .await;

    // Running a workload.
    let out = kcp
        .ok(&[
            "create",
            "deployment",
            "kuard",
            "--image",
            "gcr.io/kuar-demo/kuard-amd64:blue",
        ])
        .await;
    assert!(out.contains("deployment.apps/kuard created"), "{out}");
    let out = kcp
        .ok(&["rollout", "status", "deployment/kuard", "--timeout=60s"])
        .await;
    assert!(
        out.contains("deployment \"kuard\" successfully rolled out"),
        "{out}"
    );
}
