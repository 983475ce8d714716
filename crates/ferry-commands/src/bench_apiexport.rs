//! `ferry bench hub`'s APIExport block: an export bound into many consumer
//! workspaces, and
//! - watch delivery through the APIExport virtual workspace (`clusters/*`,
//!   creates spread over every consumer) against a plain watch on one
//!   consumer workspace receiving the same number of creates (baseline,
//!   same hub, same run);
//! - the hub's resident memory per bound workspace (workspace + binding),
//!   against the hub before the consumers existed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::ar;
use anyhow::Context;
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DynamicObject, PostParams, WatchEvent, WatchParams};
use kube::core::ApiResource;
use serde_json::{json, Value};

/// What the block measured (latencies in ms).
pub struct Figures {
    pub workspaces: usize,
    pub events: usize,
    pub setup_secs: f64,
    pub virtual_workspace_ms: Vec<f64>,
    pub baseline_ms: Vec<f64>,
    pub rss_before: u64,
    /// After the consumer workspaces exist, before they bind.
    pub rss_workspaces: u64,
    pub rss_after: u64,
}

fn widgets() -> ApiResource {
    ar("bench.ferry.dev", "v1", "Widget", "widgets")
}

/// A client for `base` (a kube config for the hub) addressing `url`.
pub(crate) fn client_at(base: &kube::Config, url: &str) -> anyhow::Result<kube::Client> {
    let mut config = base.clone();
    config.cluster_url = url.parse()?;
    Ok(kube::Client::try_from(config)?)
}

/// Create `obj` of `resource` (in `namespace`), as a success if it exists already.
pub(crate) async fn create(
    client: &kube::Client,
    resource: &ApiResource,
    namespace: Option<&str>,
    obj: Value,
) -> anyhow::Result<()> {
    let obj: DynamicObject = serde_json::from_value(obj)?;
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    };
    match api.create(&PostParams::default(), &obj).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Run the block against the hub at `url` (admin config `base`); `rss`
/// reads the hub process's resident memory.
pub async fn measure(
    base: &kube::Config,
    url: &str,
    workspaces: usize,
    events: usize,
    rss: impl Fn() -> u64,
) -> anyhow::Result<Figures> {
    let root = client_at(base, &format!("{url}/clusters/root"))?;
    let ws = ar("tenancy.kcp.io", "v1alpha1", "Workspace", "workspaces");
    create(&root, &ws, None, json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": {"name": "bench-provider"}})).await?;
    let provider = client_at(base, &format!("{url}/clusters/root:bench-provider"))?;
    wait_until(Duration::from_secs(30), || async {
        Api::<DynamicObject>::all_with(
            provider.clone(),
            &ar("apis.kcp.io", "v1alpha1", "APIExport", "apiexports"),
        )
        .list(&Default::default())
        .await
        .is_ok()
    })
    .await
    .context("the provider workspace never became usable")?;
    create(
        &provider,
        &ar("apis.kcp.io", "v1alpha1", "APIResourceSchema", "apiresourceschemas"),
        None,
        json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIResourceSchema",
               "metadata": {"name": "v1.widgets.bench.ferry.dev"},
               "spec": {"group": "bench.ferry.dev", "scope": "Namespaced",
                        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                        "versions": [{"name": "v1", "served": true, "storage": true,
                                      "schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}]}}),
    )
    .await?;
    create(
        &provider,
        &ar("apis.kcp.io", "v1alpha1", "APIExport", "apiexports"),
        None,
        json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport", "metadata": {"name": "widgets.bench.ferry.dev"},
               "spec": {"latestResourceSchemas": ["v1.widgets.bench.ferry.dev"]}}),
    )
    .await?;
    let rss_before = rss();

    // Consumers: the workspaces first, then a binding in each, 16 at a time.
    let setup = Instant::now();
    let names: Vec<String> = (0..workspaces).map(|i| format!("bench-c{i}")).collect();
    futures::stream::iter(names.clone())
        .map(|name| {
            let (root, ws) = (root.clone(), ws.clone());
            async move {
                create(&root, &ws, None, json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": {"name": name}})).await
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await
        .context("creating consumer workspaces")?;
    let rss_workspaces = rss();
    futures::stream::iter(names.clone())
        .map(|name| {
            let consumer = client_at(base, &format!("{url}/clusters/root:{name}"));
            async move {
                create(
                    &consumer?,
                    &ar("apis.kcp.io", "v1alpha1", "APIBinding", "apibindings"),
                    None,
                    json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIBinding", "metadata": {"name": "widgets"},
                           "spec": {"reference": {"export": {"path": "root:bench-provider", "name": "widgets.bench.ferry.dev"}}}}),
                )
                .await
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await
        .context("binding the export in every consumer")?;
    // Bound everywhere: the last consumer serves widgets.
    for name in [&names[0], &names[names.len() - 1]] {
        let c = client_at(base, &format!("{url}/clusters/root:{name}"))?;
        wait_until(Duration::from_secs(120), || async {
            Api::<DynamicObject>::all_with(c.clone(), &widgets())
                .list(&Default::default())
                .await
                .is_ok()
        })
        .await
        .with_context(|| format!("widgets never served in root:{name}"))?;
    }
    let setup_secs = setup.elapsed().as_secs_f64();
    let rss_after = rss();

    // Every create goes through one client (one connection pool), the
    // workspace in its path, so both phases pay the same per request.
    let writer = client_at(base, url)?;
    // Baseline: a watch on one consumer; `events` creates there.
    let first = client_at(base, &format!("{url}/clusters/root:{}", names[0]))?;
    let baseline_ms = watch_latencies(
        Api::all_with(first, &widgets()),
        &writer,
        (0..events)
            .map(|i| (names[0].clone(), format!("base-{i}")))
            .collect(),
    )
    .await?;
    // Through the virtual workspace: `events` creates spread over every consumer.
    let vw = client_at(
        base,
        &format!("{url}/services/apiexport/root:bench-provider/widgets.bench.ferry.dev/clusters/*"),
    )?;
    let writes = (0..events)
        .map(|i| (names[i % names.len()].clone(), format!("vw-{i}")))
        .collect();
    let virtual_workspace_ms = watch_latencies(Api::all_with(vw, &widgets()), &writer, writes).await?;
    Ok(Figures {
        workspaces,
        events,
        setup_secs,
        virtual_workspace_ms,
        baseline_ms,
        rss_before,
        rss_workspaces,
        rss_after,
    })
}

/// Watch `watched`, create each `(workspace, name)` in turn through
/// `writer` (namespace `default`), and return each create's delivery
/// latency in ms.
async fn watch_latencies(
    watched: Api<DynamicObject>,
    writer: &kube::Client,
    writes: Vec<(String, String)>,
) -> anyhow::Result<Vec<f64>> {
    let rv = watched
        .list_metadata(&Default::default())
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    let sent: Arc<parking_lot::Mutex<HashMap<String, Instant>>> = Default::default();
    let want = writes.len();
    let receiver = {
        let sent = sent.clone();
        let mut stream = watched
            .watch(&WatchParams::default().timeout(290), &rv)
            .await?
            .boxed();
        tokio::spawn(async move {
            let mut out = Vec::with_capacity(want);
            while out.len() < want {
                match stream.try_next().await? {
                    Some(WatchEvent::Added(o)) => {
                        let name = o.metadata.name.unwrap_or_default();
                        if let Some(t) = sent.lock().get(&name) {
                            out.push(t.elapsed().as_secs_f64() * 1000.0);
                        }
                    }
                    Some(_) => {}
                    None => anyhow::bail!("the watch ended after {} of {want} events", out.len()),
                }
            }
            anyhow::Ok(out)
        })
    };
    for (workspace, name) in writes {
        let body = serde_json::to_vec(
            &json!({"apiVersion": "bench.ferry.dev/v1", "kind": "Widget", "metadata": {"name": name}}),
        )?;
        let request = http::Request::post(format!(
            "/clusters/root:{workspace}/apis/bench.ferry.dev/v1/namespaces/default/widgets"
        ))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(body)?;
        sent.lock().insert(name.clone(), Instant::now());
        writer
            .request_text(request)
            .await
            .with_context(|| format!("creating widget {name} in root:{workspace}"))?;
        // A steady pace, as the hub bench's own watch block.
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    tokio::time::timeout(Duration::from_secs(60), receiver)
        .await
        .context("watch events did not all arrive within 60 s")??
}

async fn wait_until<F, Fut>(limit: Duration, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if check().await {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("timed out after {limit:?}")
}
