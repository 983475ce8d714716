//! Seed 003's Database service on hubs, as `ferry quickstart --profile syncagent` and
//! `ferry bench sync --profile syncagent` set it up: the service cluster's `Database`
//! CRD and the PublishedResource for it, the provider workspace's APIExport, and
//! consumer workspaces bound to the export.
//!
//! Every step is the request a user's `kubectl` would make; each waits (polling with
//! no deadline of its own: callers bound the whole setup) until what it made is
//! served.

use std::time::Duration;

use anyhow::Context;
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::ApiResource;
use serde_json::{json, Value};

use crate::ar;
use crate::quickstart::{apply_object, wait_ready_workspaces};

/// The APIExport (and its endpoint slice) in the provider workspace.
pub const EXPORT: &str = "databases.example.io";
/// The provider workspace (a child of `root`).
pub const PROVIDER: &str = "provider";
/// The agent's namespace on the service cluster.
pub const AGENT_NAMESPACE: &str = "ferry-system";

/// The Database consumers see.
pub fn remote_databases() -> ApiResource {
    ar(EXPORT, "v1", "Database", "databases")
}

/// The Database on the service cluster.
pub fn local_databases() -> ApiResource {
    ar("example.com", "v1", "Database", "databases")
}

/// A Database `namespace/name` of `resource` (the consumers' or the service cluster's):
/// every Database the quickstart and the bench make has this spec.
pub fn database(resource: &ApiResource, namespace: &str, name: &str) -> DynamicObject {
    DynamicObject::new(name, resource)
        .within(namespace)
        .data(json!({ "spec": { "engine": "postgres", "storageGB": 10 } }))
}

/// The service cluster's CRD (with a status subresource, so status comes back).
fn database_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": { "name": "databases.example.com" },
        "spec": { "group": "example.com", "scope": "Namespaced",
            "names": { "kind": "Database", "plural": "databases", "singular": "database", "listKind": "DatabaseList" },
            "versions": [{ "name": "v1", "served": true, "storage": true, "subresources": { "status": {} },
                "additionalPrinterColumns": [{ "name": "Phase", "type": "string", "jsonPath": ".status.phase" }],
                "schema": { "openAPIV3Schema": { "type": "object", "x-kubernetes-preserve-unknown-fields": true } } }] }
    })
}

/// What the service owner publishes: Databases, with their credentials Secret
/// (`<name>-credentials`, made by the service) coming back if `credentials`.
pub fn published_resource(credentials: bool) -> Value {
    let mut pr = json!({
        "apiVersion": "syncagent.kcp.io/v1alpha1", "kind": "PublishedResource",
        "metadata": { "name": "databases" },
        "spec": { "resource": { "apiGroup": "example.com", "kind": "Database", "versions": ["v1"] } }
    });
    if credentials {
        pr["spec"]["related"] = json!([{
            "identifier": "credentials", "origin": "service", "kind": "Secret",
            "object": { "template": { "template": "{{ .Object.metadata.name }}-credentials" } },
        }]);
    }
    pr
}

/// Installs the PublishedResource and Database CRDs on the service cluster and applies
/// `published` once PublishedResources are served.
pub async fn install_service(service: &kube::Client, published: &Value) -> anyhow::Result<()> {
    let crds: Api<DynamicObject> = Api::all_with(
        service.clone(),
        &ar(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
        ),
    );
    let pr_crd = ferry_api::crds::all_crds()
        .into_iter()
        .map(|c| serde_json::to_value(c).unwrap_or_default())
        .find(|c| c["metadata"]["name"] == "publishedresources.syncagent.kcp.io")
        .context("Ferry defines the PublishedResource CRD")?;
    for crd in [pr_crd, database_crd()] {
        let obj: DynamicObject = serde_json::from_value(crd)?;
        match crds.create(&PostParams::default(), &obj).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e).context("installing a CRD on the service cluster"),
        }
    }
    while apply_object(service, published).await.is_err() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Creates the workspaces `names` in `root` (those that exist are kept), `concurrency`
/// at once, and waits until all are Ready.
pub async fn create_workspaces(
    root: &kube::Client,
    names: &[&str],
    concurrency: usize,
) -> anyhow::Result<()> {
    let workspace = ar("tenancy.kcp.io", "v1alpha1", "Workspace", "workspaces");
    let api: Api<DynamicObject> = Api::all_with(root.clone(), &workspace);
    futures::stream::iter(names)
        .map(|name| {
            let (api, ws) = (api.clone(), DynamicObject::new(name, &workspace));
            async move {
                match api.create(&PostParams::default(), &ws).await {
                    Ok(_) => Ok(()),
                    Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
                    Err(e) => Err(e).with_context(|| format!("creating workspace root:{name}")),
                }
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<Vec<()>>()
        .await?;
    wait_ready_workspaces(root, names).await
}

/// Creates the APIExport [`EXPORT`] in the provider workspace `provider`.
pub async fn create_export(provider: &kube::Client) -> anyhow::Result<()> {
    apply_object(
        provider,
        &json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport", "metadata": {"name": EXPORT}, "spec": {}}),
    )
    .await?;
    Ok(())
}

/// Waits until the agent has published the Database schema into the APIExport and
/// the export claims every resource in `claims`; returns the export's permission
/// claims (what a consumer accepts when it binds).
pub async fn wait_published(provider: &kube::Client, claims: &[&str]) -> anyhow::Result<Vec<Value>> {
    let exports: Api<DynamicObject> = Api::all_with(
        provider.clone(),
        &ar("apis.kcp.io", "v1alpha1", "APIExport", "apiexports"),
    );
    loop {
        let export = exports.get(EXPORT).await?;
        let schemas = export.data["spec"]["latestResourceSchemas"]
            .as_array()
            .map_or(0, Vec::len);
        let have = export.data["spec"]["permissionClaims"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if schemas > 0 && claims.iter().all(|r| have.iter().any(|c| c["resource"] == *r)) {
            return Ok(have);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `kubectl ferry bind apiexport root:provider:databases.example.io
/// --accept-all-permission-claims` in the consumer workspace `consumer` (`claims` from
/// [`wait_published`]); waits until Databases are served there.
pub async fn bind(consumer: &kube::Client, claims: &[Value]) -> anyhow::Result<()> {
    let accepted: Vec<Value> = claims
        .iter()
        .cloned()
        .map(|mut c| {
            c["state"] = json!("Accepted");
            c
        })
        .collect();
    apply_object(
        consumer,
        &json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIBinding", "metadata": {"name": "databases"},
                "spec": {"reference": {"export": {"path": format!("root:{PROVIDER}"), "name": EXPORT}},
                         "permissionClaims": accepted}}),
    )
    .await?;
    let dbs: Api<DynamicObject> = Api::namespaced_with(consumer.clone(), "default", &remote_databases());
    while dbs.list(&Default::default()).await.is_err() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}
