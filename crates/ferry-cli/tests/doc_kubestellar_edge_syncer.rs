//! KubeStellar's edge-syncer document, run in order: the example1 set-up up to
//! the mailbox controller (a hub as kcp, SyncTargets `florin` and `guilder` in
//! `root:imw1`), "Register KubeStellar Syncer on the target clusters" for both
//! (distinct stand-in hubs as the kind clusters, `kubectl ferry` for `kubectl
//! kubestellar`, `kubectl ferry ws` for `kubectl ws`, each syncer run as its pod
//! runs it), then the deep-dive's claims: the default EdgeSyncConfig, SyncerConfigs
//! driving downsync, return of reported state (default on, switchable), upsync, and
//! delete propagation (default on, switchable).

#[path = "common/edge_syncer.rs"]
mod edge_syncer;
#[path = "common/kubectl.rs"]
mod kubectl;

use std::path::Path;

use edge_syncer::{run_as_pod, PodSyncer};
use ferry_testkit::{eventually, TestHub};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kubectl::Kubectl;
use serde_json::{json, Value};

fn edge(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("edge.kubestellar.io", "v2alpha1", kind),
        plural,
    )
}

/// One target cluster registered as the document does it.
struct Registered {
    mailbox: String,
    id: String,
    cluster: TestHub,
    _syncer: PodSyncer,
}

/// "For the target cluster of `<name>`": find the mailbox workspace name from the
/// inventory workspace, syncer-gen in it, apply the manifest to the cluster, check
/// the syncer's Deployment is there, and run the syncer as its pod would.
async fn register(k: &Kubectl, name: &str, dir: &Path) -> Registered {
    k.ok_all(&["ferry", "ws", "root:imw1"]);
    let listed = k.ok_all(&["get", "synctargets.edge.kubestellar.io"]);
    assert!(listed.contains(name), "{listed}");
    let jsonpath = "jsonpath={.metadata.annotations['kcp\\.io/cluster']}-mb-{.metadata.uid}";
    let mbws = k.ok_all(&["get", "synctargets.edge.kubestellar.io", name, "-o", jsonpath]);
    let mbws = mbws.trim().to_string();
    assert!(mbws.contains("-mb-"), "mailbox workspace name = {mbws}");

    let said = k.ok_all(&["ferry", "ws", &format!("root:{mbws}")]);
    assert!(said.contains(&format!("root:{mbws}")), "{said}");
    let file = format!("{name}-syncer.yaml");
    let said = k.ok_all(&[
        "ferry",
        "syncer-gen",
        name,
        "--syncer-image",
        "quay.io/kubestellar/syncer:v0.2.2",
        "-o",
        &file,
    ]);
    let prefix = format!("kubestellar-syncer-{name}-");
    let id = said
        .split(|c: char| c.is_whitespace() || c == '"' || c == '/' || c == ',')
        .find(|w| w.starts_with(&prefix))
        .unwrap_or_else(|| panic!("syncer-gen names kubestellar-syncer-{name}-<hash>: {said}"))
        .to_string();
    assert_eq!(id.len(), prefix.len() + 8, "{id}");
    for line in [
        format!("Wrote the workload cluster's manifest to {file} for namespace \"{id}\""),
        format!("kubectl apply -f \"{file}\""),
        format!("kubectl get deployment -n \"{id}\" {id}"),
    ] {
        assert!(said.contains(&line), "syncer-gen says {line:?}: {said}");
    }

    // KUBECONFIG=~/.kube/config kubectl --context kind-<name> apply -f <name>-syncer.yaml
    let cluster = TestHub::start().await;
    let manifest = dir.join(&file);
    let applied = String::from_utf8_lossy(
        &cluster
            .kubectl(&["apply", "-f", manifest.to_str().unwrap()])
            .stdout,
    )
    .into_owned();
    let mut rest = applied.as_str();
    for line in [
        format!("namespace/{id} created"),
        format!("serviceaccount/{id} created"),
        format!("secret/{id}-token created"),
        format!("clusterrole.rbac.authorization.k8s.io/{id} created"),
        format!("clusterrolebinding.rbac.authorization.k8s.io/{id} created"),
        format!("secret/{id} created"),
        format!("deployment.apps/{id} created"),
    ] {
        let at = rest
            .find(&line)
            .unwrap_or_else(|| panic!("kubectl apply says {line:?}, in the document's order: {applied}"));
        rest = &rest[at + line.len()..];
    }
    let deploys = String::from_utf8_lossy(&cluster.kubectl(&["get", "deploy", "-A"]).stdout).into_owned();
    assert!(
        deploys
            .lines()
            .any(|l| l.split_whitespace().take(2).eq([id.as_str(), id.as_str()])),
        "the syncer's Deployment in its namespace: {deploys}"
    );
    let syncer = run_as_pod(&manifest, &cluster, dir).await;
    Registered {
        mailbox: mbws,
        id,
        cluster,
        _syncer: syncer,
    }
}

async fn apply(api: &Api<DynamicObject>, name: &str, doc: Value) {
    api.patch(name, &PatchParams::apply("doc").force(), &Patch::Apply(&doc))
        .await
        .unwrap();
}

/// Applies the SyncerConfig `doc` with `spec`, and waits until the syncer has
/// acted on this generation of it (its conditions observe it).
async fn syncer_config(configs: &Api<DynamicObject>, spec: Value) {
    let doc = json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "SyncerConfig",
                     "metadata": {"name": "doc"}, "spec": spec});
    apply(configs, "doc", doc).await;
    let generation = configs.get("doc").await.unwrap().metadata.generation;
    eventually(20, "the syncer to act on the SyncerConfig", || {
        let configs = configs.clone();
        async move {
            let c = configs.get("doc").await.ok()?;
            let conditions = c.data["status"]["conditions"].as_array()?.clone();
            conditions
                .iter()
                .any(|c| {
                    c["type"] == "Syncing"
                        && c["status"] == "True"
                        && c["observedGeneration"].as_i64() == generation
                })
                .then_some(())
        }
    })
    .await;
}

async fn namespace(client: &kube::Client, name: &str) {
    let doc = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    Api::<Namespace>::all(client.clone())
        .patch(name, &PatchParams::apply("doc"), &Patch::Apply(&doc))
        .await
        .unwrap();
}

fn cm(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": {"from": "mailbox"}})
}

/// Creates ConfigMap `name` in the mailbox and waits for it on the cluster: every
/// change made before it on either side has been seen by then.
async fn barrier(up: &Api<ConfigMap>, down: &Api<ConfigMap>, name: &str) {
    up.patch(name, &PatchParams::apply("doc"), &Patch::Apply(&cm("apps", name)))
        .await
        .unwrap();
    eventually(20, &format!("ConfigMap {name} on the cluster"), || {
        let down = down.clone();
        async move { down.get_opt(name).await.ok().flatten() }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_edge_syncer_document_runs_as_written() {
    // example1 up to the mailbox controller: kcp (a hub), root:imw1 with florin and guilder.
    let hub = TestHub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("admin.kubeconfig");
    std::fs::copy(hub.kubeconfig(), &kubeconfig).unwrap();
    let k = Kubectl::new(kubeconfig, dir.path());
    k.ok_all(&["ferry", "ws", "root"]);
    k.ok_all(&["ferry", "ws", "create", "imw1", "--enter"]);
    k.ok_all(&[
        "ferry",
        "ensure",
        "location",
        "florin",
        "loc-name=florin",
        "env=prod",
    ]);
    k.ok_all(&[
        "ferry",
        "ensure",
        "location",
        "guilder",
        "loc-name=guilder",
        "env=prod",
        "extended=yes",
    ]);
    for target in ["florin", "guilder"] {
        edge_syncer::mailbox_of(&hub, target).await;
    }

    // Register KubeStellar Syncer on the target clusters: guilder, then florin.
    let guilder = register(&k, "guilder", dir.path()).await;
    let florin = register(&k, "florin", dir.path()).await;
    assert_ne!(guilder.mailbox, florin.mailbox);

    // syncer-gen created the default EdgeSyncConfig <name>, empty, in each mailbox.
    for r in [&guilder, &florin] {
        let mb = hub.client(&format!("root:{}", r.mailbox)).await;
        let name = if r.id.contains("-guilder-") {
            "guilder"
        } else {
            "florin"
        };
        let esc = Api::<DynamicObject>::all_with(mb, &edge("EdgeSyncConfig", "edgesyncconfigs"))
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("the default EdgeSyncConfig {name}: {e}"));
        assert!(
            esc.data["spec"].as_object().is_none_or(|s| s.is_empty()),
            "{:?}",
            esc.data
        );
    }

    // Downsyncing: the syncer consumes the SyncerConfigs in the mailbox workspace.
    let mb = hub.client(&format!("root:{}", guilder.mailbox)).await;
    let down = guilder.cluster.client("root").await;
    let configs = Api::<DynamicObject>::all_with(mb.clone(), &edge("SyncerConfig", "syncerconfigs"));
    namespace(&mb, "apps").await;
    let up_cms = Api::<ConfigMap>::namespaced(mb.clone(), "apps");
    let down_cms = Api::<ConfigMap>::namespaced(down.clone(), "apps");
    let up_deploys = Api::<Deployment>::namespaced(mb.clone(), "apps");
    let down_deploys = Api::<Deployment>::namespaced(down.clone(), "apps");
    let web = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "apps"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    up_deploys
        .patch("web", &PatchParams::apply("doc"), &Patch::Apply(&web))
        .await
        .unwrap();
    let downsync = json!({"namespaceScope": {"namespaces": ["apps"], "resources": [
        {"group": "", "resource": "configmaps", "apiVersion": "v1"},
        {"group": "apps", "resource": "deployments", "apiVersion": "v1"}]},
        "upsync": [{"apiGroup": "", "resources": ["configmaps"], "namespaces": ["reports"], "names": ["*"]}]});
    syncer_config(&configs, downsync.clone()).await;
    barrier(&up_cms, &down_cms, "first").await;
    eventually(20, "the Deployment on guilder", || {
        let down_deploys = down_deploys.clone();
        async move { down_deploys.get_opt("web").await.ok().flatten() }
    })
    .await;

    // Return of reported state: on by default.
    let report =
        |ready: i32| json!({"status": {"replicas": 1, "readyReplicas": ready, "availableReplicas": ready}});
    down_deploys
        .patch_status("web", &PatchParams::default(), &Patch::Merge(&report(1)))
        .await
        .unwrap();
    eventually(20, "guilder's reported state in the mailbox", || {
        let up_deploys = up_deploys.clone();
        async move { (up_deploys.get("web").await.ok()?.status?.ready_replicas == Some(1)).then_some(()) }
    })
    .await;
    // ... and configurable in SyncerConfig: off, the mailbox keeps what it had.
    let mut spec = downsync.clone();
    spec["returnReportedState"] = json!(false);
    syncer_config(&configs, spec).await;
    down_deploys
        .patch_status("web", &PatchParams::default(), &Patch::Merge(&report(0)))
        .await
        .unwrap();
    barrier(&up_cms, &down_cms, "after-report").await;
    let kept = up_deploys
        .get("web")
        .await
        .unwrap()
        .status
        .unwrap()
        .ready_replicas;
    assert_eq!(
        kept,
        Some(1),
        "with returnReportedState: false the reported state does not return"
    );
    // Back on: the cluster's current state returns.
    syncer_config(&configs, downsync.clone()).await;
    eventually(20, "the reported state returning again", || {
        let up_deploys = up_deploys.clone();
        async move {
            (up_deploys
                .get("web")
                .await
                .ok()?
                .status?
                .ready_replicas
                .unwrap_or(0)
                == 0)
                .then_some(())
        }
    })
    .await;

    // Resource upsyncing: what SyncerConfig's upsync names comes up to the mailbox.
    namespace(&down, "reports").await;
    let policy_report = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "policy-report", "namespace": "reports"}, "data": {"pass": "3"}});
    Api::<ConfigMap>::namespaced(down.clone(), "reports")
        .patch(
            "policy-report",
            &PatchParams::apply("doc"),
            &Patch::Apply(&policy_report),
        )
        .await
        .unwrap();
    let upsynced = Api::<ConfigMap>::namespaced(mb.clone(), "reports");
    eventually(20, "the upsynced report in the mailbox", || {
        let upsynced = upsynced.clone();
        async move { upsynced.get_opt("policy-report").await.ok().flatten() }
    })
    .await;

    // Downsyncing: deleting in the mailbox deletes on the cluster, according to SyncerConfig.
    up_cms.delete("first", &DeleteParams::default()).await.unwrap();
    eventually(20, "the deletion propagated to guilder", || {
        let down_cms = down_cms.clone();
        async move { down_cms.get_opt("first").await.ok()?.is_none().then_some(()) }
    })
    .await;
    let mut spec = downsync.clone();
    spec["propagateDeletion"] = json!(false);
    syncer_config(&configs, spec).await;
    up_cms
        .delete("after-report", &DeleteParams::default())
        .await
        .unwrap();
    barrier(&up_cms, &down_cms, "after-delete").await;
    assert!(
        down_cms.get_opt("after-report").await.unwrap().is_some(),
        "with propagateDeletion: false the copy stays on the cluster"
    );
    syncer_config(&configs, downsync).await;
    eventually(20, "the kept copy deleted once deletion propagates again", || {
        let down_cms = down_cms.clone();
        async move {
            down_cms
                .get_opt("after-report")
                .await
                .ok()?
                .is_none()
                .then_some(())
        }
    })
    .await;

    // florin's syncer serves florin's mailbox only.
    let florin_mb = hub.client(&format!("root:{}", florin.mailbox)).await;
    let florin_configs =
        Api::<DynamicObject>::all_with(florin_mb.clone(), &edge("SyncerConfig", "syncerconfigs"));
    namespace(&florin_mb, "apps").await;
    syncer_config(
        &florin_configs,
        json!({"namespaceScope": {"namespaces": ["apps"], "resources": [
        {"group": "", "resource": "configmaps", "apiVersion": "v1"}]}}),
    )
    .await;
    let florin_down = Api::<ConfigMap>::namespaced(florin.cluster.client("root").await, "apps");
    barrier(&Api::namespaced(florin_mb, "apps"), &florin_down, "florin-only").await;
    assert!(
        florin_down.get_opt("after-delete").await.unwrap().is_none(),
        "guilder's objects never reach florin"
    );
}
