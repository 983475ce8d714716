//! The agent's publishing controllers and its start-up.
//!
//! - *apiresourceschema*: each PublishedResource (on the service cluster, narrowed by
//!   `--published-resource-selector`) is projected from its CRD into an immutable
//!   APIResourceSchema `v<hash>.<plural>.<group>` in the provider workspace, and the
//!   name is recorded in the PublishedResource's `status.resourceSchemaName`. A
//!   PublishedResource that cannot be published (no such CRD, a version not served,
//!   a bad scope) gets condition `Ready=False` naming the field; the others go on.
//! - *apiexport*: the schemas are added to the APIExport's `latestResourceSchemas`
//!   (never removed) and the `events` permission claim is added (existing claims kept).
//! - *sync*: the engine with the [`super::SyncAgent`] profile, reading the APIExport
//!   virtual workspace named by the endpoint slice.
//!
//! Both publishing controllers run as one loop that re-reads the PublishedResources and
//! CRDs every `poll` (the reference watches them).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use ferry_api::syncagent::PublishedResourceSpec;

use super::{Published, SyncAgent};
use crate::engine::Engine;
use crate::profile::{ConfigSource, ResourceType};
use crate::selection::ResourceId;
use crate::{RunningSyncer, SyncerOptions};

/// The controllers `--disabled-controllers` may name.
pub const CONTROLLERS: [&str; 3] = ["apiexport", "apiresourceschema", "sync"];

/// What `ferry syncagent` needs.
#[derive(Clone)]
pub struct SyncAgentOptions {
    /// kcp, pointing at the provider workspace (`--kcp-kubeconfig`).
    pub kcp: kube::Config,
    /// The service cluster (`--kubeconfig` or in-cluster).
    pub service: kube::Config,
    /// `--apiexportendpointslice-ref`.
    pub endpoint_slice: String,
    /// `--namespace`.
    pub namespace: String,
    /// `--agent-name` (default `<slice>-syncagent`).
    pub agent_name: String,
    /// `--published-resource-selector`.
    pub selector: Option<String>,
    /// `--disabled-controllers`.
    pub disabled_controllers: Vec<String>,
    /// How often PublishedResources, CRDs and the endpoint slice are read.
    pub poll: Duration,
    /// Sync workers.
    pub workers: usize,
    /// How often every primary's related objects are synced even if no watch saw a
    /// change (a safety net: watches of the origin resources queue the affected
    /// primaries at once).
    pub related_resync: Duration,
    /// The sync engine's timers and limits (its upstream, downstream, name and profile
    /// are set by [`start`]); `None`: the engine's defaults.
    pub engine: Option<EngineTuning>,
}

/// Engine settings for the sync controller (see [`SyncerOptions`]); `None` keeps the
/// engine's default.
#[derive(Clone, Debug, Default)]
pub struct EngineTuning {
    /// `--qps`.
    pub qps: Option<f32>,
    /// Discovery refresh.
    pub discovery_refresh: Option<Duration>,
    /// Probe period.
    pub probe_period: Option<Duration>,
    /// Per-key backoff, least.
    pub min_backoff: Option<Duration>,
    /// Per-key backoff, most.
    pub max_backoff: Option<Duration>,
    /// `--metrics-address` (also `/healthz` and `/readyz`).
    pub metrics_address: Option<std::net::SocketAddr>,
    /// `--health-address`.
    pub health_address: Option<std::net::SocketAddr>,
}

impl SyncAgentOptions {
    /// Defaults for the agent of endpoint slice `slice`.
    pub fn new(kcp: kube::Config, service: kube::Config, slice: &str, namespace: &str) -> Self {
        SyncAgentOptions {
            kcp,
            service,
            endpoint_slice: slice.to_string(),
            namespace: namespace.to_string(),
            agent_name: format!("{slice}-syncagent"),
            selector: None,
            disabled_controllers: vec![],
            poll: Duration::from_secs(2),
            workers: 4,
            related_resync: super::related_watch::DEFAULT_RESYNC,
            engine: None,
        }
    }

    fn enabled(&self, controller: &str) -> bool {
        !self.disabled_controllers.iter().any(|c| c == controller)
    }
}

/// Checks an `--agent-name` as kcp's api-syncagent does: a DNS-1035 label (at most 63
/// lowercase letters, digits and '-', starting with a letter and ending with a letter
/// or digit), since it is a label value on every copy and part of the agent's
/// fully qualified name. The error names the flag and the fix, in kube's words.
pub fn validate_agent_name(name: &str) -> Result<(), String> {
    let fits = name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if fits {
        return Ok(());
    }
    let shown: String = name.chars().take(80).collect();
    let why = if name.is_empty() {
        "must not be empty".to_string()
    } else if name.len() > 63 {
        format!("must be no more than 63 characters (it has {})", name.len())
    } else {
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name', or 'abc-123')".to_string()
    };
    Err(format!(
        "--agent-name {shown:?} is invalid: {why}; choose a short name such as \"nora\" (or leave it out for <apiexportendpointslice-ref>-syncagent)"
    ))
}

/// The fully qualified name of agent `agent` serving the API group `api_group` (the
/// APIExport's name): `<agentname>.<apigroup>`, e.g. `nora.databases.examplecorp`. It
/// tells apart agents of the same name serving different exports (kcp's api-syncagent
/// documentation, "Sync Agent Naming").
pub fn fully_qualified_name(agent: &str, api_group: &str) -> String {
    format!("{agent}.{api_group}")
}

fn kcp_resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "apis.kcp.io".into(),
        version: "v1alpha1".into(),
        api_version: "apis.kcp.io/v1alpha1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

fn published_resources() -> ApiResource {
    ApiResource {
        group: ferry_api::syncagent::GROUP.into(),
        version: ferry_api::syncagent::VERSION.into(),
        api_version: format!(
            "{}/{}",
            ferry_api::syncagent::GROUP,
            ferry_api::syncagent::VERSION
        ),
        kind: "PublishedResource".into(),
        plural: "publishedresources".into(),
    }
}

fn crds() -> ApiResource {
    ApiResource {
        group: "apiextensions.k8s.io".into(),
        version: "v1".into(),
        api_version: "apiextensions.k8s.io/v1".into(),
        kind: "CustomResourceDefinition".into(),
        plural: "customresourcedefinitions".into(),
    }
}

/// A running agent.
pub struct RunningAgent {
    /// The profile's state.
    pub agent: Arc<SyncAgent>,
    /// The sync controller, unless disabled.
    pub syncer: Option<RunningSyncer>,
    /// The APIExport served (from the endpoint slice).
    pub export: String,
    /// `<agentname>.<apigroup>` (see [`fully_qualified_name`]).
    pub fq_name: String,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl RunningAgent {
    /// Stops every controller.
    pub async fn stop(self) {
        for task in &self.tasks {
            task.abort();
        }
        if let Some(syncer) = self.syncer {
            syncer.stop().await;
        }
    }
}

/// Starts the agent: waits for the endpoint slice to name its virtual workspace, then
/// runs the enabled controllers in the background. Everything it logs is in the span
/// `syncagent{agent=<name>}`.
pub async fn start(opts: SyncAgentOptions) -> anyhow::Result<RunningAgent> {
    let span = tracing::info_span!("syncagent", agent = %opts.agent_name);
    tracing::Instrument::instrument(start_agent(opts), span).await
}

async fn start_agent(opts: SyncAgentOptions) -> anyhow::Result<RunningAgent> {
    for c in &opts.disabled_controllers {
        anyhow::ensure!(
            CONTROLLERS.contains(&c.as_str()),
            "--disabled-controllers: unknown controller {c:?}; known: {}",
            CONTROLLERS.join(", ")
        );
    }
    anyhow::ensure!(!opts.namespace.is_empty(), "--namespace must not be empty");
    // The default (`<slice>-syncagent`) is not checked, as in the reference: a slice
    // name may hold dots.
    if opts.agent_name != format!("{}-syncagent", opts.endpoint_slice) {
        validate_agent_name(&opts.agent_name).map_err(anyhow::Error::msg)?;
    }
    let kcp = kube::Client::try_from(opts.kcp.clone()).context("building the kcp client")?;
    let service =
        kube::Client::try_from(opts.service.clone()).context("building the service cluster client")?;
    let (export, url) = read_slice(&kcp, &opts).await?;
    let agent = SyncAgent::new(&opts.agent_name);
    let publisher = Arc::new(Publisher {
        kcp,
        service,
        export: export.clone(),
        agent: agent.clone(),
        opts: opts.clone(),
    });
    let _ = agent.publisher.set(publisher.clone());
    let _ = agent.state.set(Arc::new(super::state::StateStore::new(
        publisher.service.clone(),
        &opts.namespace,
    )));
    let tasks = vec![crate::spawn(publisher.run())];
    let syncer = if opts.enabled("sync") {
        let mut upstream = opts.kcp.clone();
        upstream.cluster_url = url
            .trim_end_matches('/')
            .parse()
            .with_context(|| format!("endpoint slice {}'s URL {url:?}", opts.endpoint_slice))?;
        let mut sync = SyncerOptions::new(upstream, opts.service.clone(), &opts.agent_name);
        sync.profile = Some(agent.profile());
        sync.workers = opts.workers;
        sync.return_status = true;
        if let Some(t) = &opts.engine {
            sync.qps = t.qps.or(sync.qps);
            sync.discovery_refresh = t.discovery_refresh.unwrap_or(sync.discovery_refresh);
            sync.probe_period = t.probe_period.unwrap_or(sync.probe_period);
            sync.min_backoff = t.min_backoff.unwrap_or(sync.min_backoff);
            sync.max_backoff = t.max_backoff.unwrap_or(sync.max_backoff);
            sync.metrics_address = t.metrics_address;
            sync.health_address = t.health_address;
        }
        Some(crate::start(sync).await?)
    } else {
        None
    };
    let fq_name = fully_qualified_name(&opts.agent_name, &export);
    tracing::info!(agent = %fq_name, %export, virtual_workspace = %url, "api-syncagent started");
    Ok(RunningAgent {
        fq_name,
        agent,
        syncer,
        export,
        tasks,
    })
}

/// The endpoint slice's export name and first endpoint URL, polling until it has one.
async fn read_slice(kcp: &kube::Client, opts: &SyncAgentOptions) -> anyhow::Result<(String, String)> {
    let api: Api<DynamicObject> = Api::all_with(
        kcp.clone(),
        &kcp_resource("APIExportEndpointSlice", "apiexportendpointslices"),
    );
    let name = &opts.endpoint_slice;
    let mut said = String::new();
    loop {
        let why = match api.get(name).await {
            Ok(slice) => {
                let slice = serde_json::to_value(slice).unwrap_or_default();
                let export = slice["spec"]["export"]["name"].as_str().unwrap_or_default();
                match slice["status"]["endpoints"][0]["url"].as_str() {
                    Some(url) if !export.is_empty() && !url.is_empty() => {
                        return Ok((export.to_string(), url.to_string()))
                    }
                    _ => format!("APIExportEndpointSlice {name} has no status.endpoints yet"),
                }
            }
            Err(kube::Error::Api(e)) if e.code == 404 => format!(
                "APIExportEndpointSlice {name} does not exist in the kcp workspace yet (--apiexportendpointslice-ref names it; create the APIExport and its slice there)"
            ),
            Err(e) => format!("reading APIExportEndpointSlice {name} failed: {e}"),
        };
        if why != said {
            tracing::info!("{why}; checking again every {:?}", opts.poll);
            said = why;
        }
        tokio::time::sleep(opts.poll).await;
    }
}

/// Why a PublishedResource cannot be published.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    /// CamelCase reason.
    pub reason: &'static str,
    /// What to fix, naming the field.
    pub message: String,
}

/// The APIResourceSchema a PublishedResource `pr_name` with `spec` makes of `crd` in an
/// export whose group is `group` (unless the projection names one), and what the sync
/// flow needs.
pub fn project(
    pr_name: &str,
    spec: &PublishedResourceSpec,
    crds: &[Value],
    group: &str,
) -> Result<(Value, Published), Invalid> {
    if let Some(m) = &spec.mutation {
        for (steps, field) in [
            (&m.spec, "spec.mutation.spec"),
            (&m.status, "spec.mutation.status"),
        ] {
            super::mutation::validate(steps, field).map_err(|e| Invalid {
                reason: "InvalidMutation",
                message: format!("PublishedResource {pr_name}: {e}"),
            })?;
        }
    }
    for (i, related) in spec.related.iter().enumerate() {
        super::related::validate(related, i).map_err(|message| Invalid {
            reason: "InvalidRelatedResource",
            message: format!("PublishedResource {pr_name}: {message}"),
        })?;
    }
    let res = &spec.resource;
    let crd = crds
        .iter()
        .find(|c| c["spec"]["group"] == res.api_group.as_str() && c["spec"]["names"]["kind"] == res.kind.as_str())
        .ok_or_else(|| Invalid {
            reason: "CRDNotFound",
            message: format!(
                "PublishedResource {pr_name}: spec.resource names kind {:?} in group {:?}, but no CustomResourceDefinition on the service cluster defines it; install the CRD or fix spec.resource",
                res.kind, res.api_group
            ),
        })?;
    let crd_versions: Vec<Value> = crd["spec"]["versions"].as_array().cloned().unwrap_or_default();
    let served = |v: &str| {
        crd_versions
            .iter()
            .find(|cv| cv["name"] == v && cv["served"] == true)
            .cloned()
    };
    let mut selected: Vec<String> = res.versions.clone();
    if selected.is_empty() && !res.version.is_empty() {
        selected.push(res.version.clone());
    }
    if selected.is_empty() {
        selected = crd_versions
            .iter()
            .filter(|v| v["served"] == true)
            .filter_map(|v| v["name"].as_str().map(str::to_string))
            .collect();
    }
    let mut versions = vec![];
    for v in &selected {
        versions.push(served(v).ok_or_else(|| Invalid {
            reason: "VersionNotServed",
            message: format!(
                "PublishedResource {pr_name}: spec.resource.versions names {v:?}, which CRD {} does not serve; pick a served version",
                crd["metadata"]["name"].as_str().unwrap_or_default()
            ),
        })?);
    }
    let storage = versions
        .iter()
        .find(|v| v["storage"] == true)
        .or(versions.last())
        .and_then(|v| v["name"].as_str())
        .ok_or_else(|| Invalid {
            reason: "NoVersion",
            message: format!("PublishedResource {pr_name}: the CRD serves no version to publish"),
        })?
        .to_string();
    let projection = spec.projection.clone().unwrap_or_default();
    let project_version = |v: &str| -> String {
        if let Some(to) = projection.versions.get(v) {
            return to.clone();
        }
        if !projection.version.is_empty() && selected.len() == 1 {
            return projection.version.clone();
        }
        v.to_string()
    };
    let names = &crd["spec"]["names"];
    let crd_kind = names["kind"].as_str().unwrap_or_default().to_string();
    let crd_plural = names["plural"].as_str().unwrap_or_default().to_string();
    let kind = if projection.kind.is_empty() {
        crd_kind.clone()
    } else {
        projection.kind.clone()
    };
    let plural = match (projection.plural.is_empty(), projection.kind.is_empty()) {
        (false, _) => projection.plural.clone(),
        (true, false) => format!("{}s", kind.to_lowercase()),
        (true, true) => crd_plural.clone(),
    };
    let singular = if projection.kind.is_empty() {
        names["singular"]
            .as_str()
            .map_or_else(|| kind.to_lowercase(), str::to_string)
    } else {
        kind.to_lowercase()
    };
    let mut ars_names =
        json!({ "kind": kind, "plural": plural, "singular": singular, "listKind": format!("{kind}List") });
    match &projection.short_names {
        Some(short) => ars_names["shortNames"] = json!(short),
        None if !names["shortNames"].is_null() => ars_names["shortNames"] = names["shortNames"].clone(),
        None => {}
    }
    match &projection.categories {
        Some(cats) => ars_names["categories"] = json!(cats),
        None if !names["categories"].is_null() => ars_names["categories"] = names["categories"].clone(),
        None => {}
    }
    let crd_scope = crd["spec"]["scope"].as_str().unwrap_or("Namespaced").to_string();
    let scope = match projection.scope.as_str() {
        "" => crd_scope.clone(),
        "Cluster" | "Namespaced" => projection.scope.clone(),
        other => {
            return Err(Invalid {
                reason: "InvalidProjection",
                message: format!(
                    "PublishedResource {pr_name}: spec.projection.scope {other:?} is neither \"Cluster\" nor \"Namespaced\""
                ),
            })
        }
    };
    let group = if projection.group.is_empty() {
        group.to_string()
    } else {
        projection.group.clone()
    };
    let ars_versions: Vec<Value> = versions
        .iter()
        .map(|v| {
            let name = v["name"].as_str().unwrap_or_default();
            let mut out = json!({
                "name": project_version(name),
                "served": true,
                "storage": name == storage,
                "schema": v["schema"]["openAPIV3Schema"].clone(),
            });
            for field in ["subresources", "additionalPrinterColumns"] {
                if !v[field].is_null() {
                    out[field] = v[field].clone();
                }
            }
            out
        })
        .collect();
    let ars_spec = json!({ "group": group, "names": ars_names, "scope": scope, "versions": ars_versions });
    let hash = hex::encode(Sha256::digest(ars_spec.to_string().as_bytes()));
    let ars_name = format!("v{}.{plural}.{group}", &hash[..8]);
    let ars = json!({
        "apiVersion": "apis.kcp.io/v1alpha1",
        "kind": "APIResourceSchema",
        "metadata": { "name": ars_name },
        "spec": ars_spec,
    });
    let published = Published {
        name: pr_name.to_string(),
        spec: Arc::new(spec.clone()),
        remote: ResourceType {
            id: ResourceId::new(&group, &project_version(&storage), &plural, scope == "Namespaced"),
            kind,
        },
        local: ResourceType {
            id: ResourceId::new(
                res.api_group.as_str(),
                &storage,
                &crd_plural,
                crd_scope == "Namespaced",
            ),
            kind: crd_kind,
        },
    };
    Ok((ars, published))
}

/// The permission claims the valid PublishedResources `specs` need, as the reference
/// adds them (all with `all: true`): `events` always; `namespaces` when one filters by
/// namespace or has related resources; `core.kcp.io/logicalclusters` with
/// `enableWorkspacePaths`; each related resource, as kcp sees it (projected when
/// it comes from the service cluster), that is not one of the export's own
/// `schemas` (with its `identityHash`).
pub fn permission_claims(specs: &[PublishedResourceSpec], schemas: &[String]) -> Vec<Value> {
    // "<prefix>.<plural>.<group>" → (group, plural)
    let own: BTreeSet<(String, String)> = schemas
        .iter()
        .filter_map(|name| {
            let (_, rest) = name.split_once('.')?;
            let (plural, group) = rest.split_once('.')?;
            Some((group.to_string(), plural.to_string()))
        })
        .collect();
    let mut claims: BTreeMap<(String, String), Value> = BTreeMap::new();
    let mut add = |group: &str, resource: &str, identity: &str| {
        let mut claim = json!({ "group": group, "resource": resource, "all": true });
        if !identity.is_empty() {
            claim["identityHash"] = json!(identity);
        }
        claims
            .entry((group.to_string(), resource.to_string()))
            .or_insert(claim);
    };
    add("", "events", "");
    for spec in specs {
        let namespace_filter = spec.filter.as_ref().is_some_and(|f| f.namespace.is_some());
        if namespace_filter || !spec.related.is_empty() {
            add("", "namespaces", "");
        }
        if spec.enable_workspace_paths {
            add("core.kcp.io", "logicalclusters", "");
        }
        for related in &spec.related {
            let (group, _, resource) = if related.origin == "service" {
                super::related::dest_resource(related)
            } else {
                super::related::origin_resource(related)
            };
            if resource.is_empty() || own.contains(&(group.clone(), resource.clone())) {
                continue;
            }
            add(&group, &resource, &related.identity_hash);
        }
    }
    claims.into_values().collect()
}

/// The indexes of the permission claims a 422 refused for want of an
/// identityHash (`spec.permissionClaims[N].identityHash` in its message).
fn refused_claims(message: &str) -> BTreeSet<usize> {
    const FIELD: &str = "spec.permissionClaims[";
    message
        .match_indices(FIELD)
        .filter_map(|(at, _)| {
            let rest = &message[at + FIELD.len()..];
            let (index, tail) = rest.split_once(']')?;
            tail.starts_with(".identityHash").then(|| index.parse().ok())?
        })
        .collect()
}

fn same_claim(a: &Value, b: &Value) -> bool {
    let group = |c: &Value| c["group"].as_str().unwrap_or_default().to_string();
    group(a) == group(b) && a["resource"] == b["resource"]
}

fn claim_name(c: &Value) -> String {
    let resource = c["resource"].as_str().unwrap_or_default();
    match c["group"].as_str().unwrap_or_default() {
        "" => resource.to_string(),
        group => format!("{resource}.{group}"),
    }
}

/// Whether the condition `old` already says `(status, reason, message)`. A condition
/// written without a message (it is left out when empty) says the empty one: the
/// PublishedResource's status is not written again on every publishing pass.
fn same_condition(old: &Value, (status, reason, message): (&str, &str, &str)) -> bool {
    old["status"] == status
        && old["reason"] == reason
        && old["message"].as_str().unwrap_or_default() == message
}

/// The apiresourceschema and apiexport controllers.
pub struct Publisher {
    kcp: kube::Client,
    service: kube::Client,
    export: String,
    agent: Arc<SyncAgent>,
    opts: SyncAgentOptions,
}

impl Publisher {
    async fn run(self: Arc<Self>) {
        let mut said = String::new();
        loop {
            match self.pass().await {
                Ok(()) => said.clear(),
                Err(e) => {
                    let msg = format!("{e:#}");
                    if msg != said {
                        tracing::warn!(
                            "publishing resources: {msg}; trying again every {:?}",
                            self.opts.poll
                        );
                        said = msg;
                    }
                }
            }
            tokio::time::sleep(self.opts.poll).await;
        }
    }

    /// One pass of both publishing controllers.
    async fn pass(&self) -> anyhow::Result<()> {
        let prs: Api<DynamicObject> = Api::all_with(self.service.clone(), &published_resources());
        let mut lp = ListParams::default();
        if let Some(selector) = &self.opts.selector {
            lp = lp.labels(selector);
        }
        let prs = prs
            .list(&lp)
            .await
            .context(
            "listing PublishedResources on the service cluster (is their CRD installed? `ferry crds | kubectl apply -f -`)",
        )?;
        let crd_api: Api<DynamicObject> = Api::all_with(self.service.clone(), &crds());
        let crds: Vec<Value> = crd_api
            .list(&ListParams::default())
            .await
            .context("listing CRDs on the service cluster")?
            .items
            .into_iter()
            .map(|c| serde_json::to_value(c).unwrap_or_default())
            .collect();
        if let Some(engine) = self.agent.engine.get().and_then(std::sync::Weak::upgrade) {
            engine.metrics.published_resources(prs.items.len());
        }
        let mut published = vec![];
        let mut schemas = vec![];
        let mut specs = vec![];
        for pr in prs.items {
            let pr = serde_json::to_value(pr).unwrap_or_default();
            let name = pr["metadata"]["name"].as_str().unwrap_or_default().to_string();
            let outcome = serde_json::from_value::<PublishedResourceSpec>(pr["spec"].clone())
                .map_err(|e| Invalid {
                    reason: "InvalidSpec",
                    message: format!("PublishedResource {name}: spec does not decode: {e}"),
                })
                .and_then(|spec| {
                    let enabled = spec.synchronization.as_ref().is_none_or(|s| s.enabled);
                    project(&name, &spec, &crds, &self.export).map(|(ars, p)| (ars, p, enabled, spec))
                });
            match outcome {
                Ok((ars, p, enabled, spec)) => {
                    specs.push(spec);
                    let ars_name = ars["metadata"]["name"].as_str().unwrap_or_default().to_string();
                    if self.opts.enabled("apiresourceschema") {
                        self.ensure_schema(&ars).await?;
                        self.write_status(&pr, &ars_name, None).await;
                    }
                    schemas.push(ars_name);
                    if enabled {
                        published.push(p);
                    }
                }
                Err(invalid) => {
                    if self.opts.enabled("apiresourceschema") {
                        self.write_status(&pr, "", Some(&invalid)).await;
                    }
                }
            }
        }
        if self.opts.enabled("apiexport") {
            self.merge_export(&schemas, &permission_claims(&specs, &schemas))
                .await?;
        }
        if self.agent.set_published(published) {
            if let Some(engine) = self.agent.engine.get().and_then(std::sync::Weak::upgrade) {
                engine.selection_changed();
            }
        }
        Ok(())
    }

    /// Creates the schema unless it exists (schemas are immutable: same name, same spec).
    async fn ensure_schema(&self, ars: &Value) -> anyhow::Result<()> {
        let api: Api<DynamicObject> = Api::all_with(
            self.kcp.clone(),
            &kcp_resource("APIResourceSchema", "apiresourceschemas"),
        );
        let name = ars["metadata"]["name"].as_str().unwrap_or_default();
        if api
            .get_opt(name)
            .await
            .with_context(|| format!("reading APIResourceSchema {name}"))?
            .is_some()
        {
            return Ok(());
        }
        let obj: DynamicObject = serde_json::from_value(ars.clone())?;
        match api.create(&PostParams::default(), &obj).await {
            Ok(_) => {
                tracing::info!(schema = name, "created APIResourceSchema");
                Ok(())
            }
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            Err(e) => {
                Err(e).with_context(|| format!("creating APIResourceSchema {name} in the kcp workspace"))
            }
        }
    }

    /// Records the schema name, the `Ready` condition and (for a published resource
    /// that syncs) the `Synced` condition on the PublishedResource, if they changed.
    /// `Synced=False` names the first objects that do not sync and why (a naming
    /// template that fails, two objects mapping to one local name, a copy the
    /// service cluster refused) and counts the rest ([`not_synced_message`]).
    async fn write_status(&self, pr: &Value, schema: &str, invalid: Option<&Invalid>) {
        let name = pr["metadata"]["name"].as_str().unwrap_or_default();
        let (status, reason, message) = match invalid {
            None => (
                "True",
                "Published",
                format!("published as APIResourceSchema {schema}"),
            ),
            Some(i) => ("False", i.reason, i.message.clone()),
        };
        let syncs = invalid.is_none() && self.opts.enabled("sync");
        let synced = syncs.then(|| match self.agent.problems().remove(name) {
            None => ("True", "Synced", String::new()),
            Some((reason, messages)) => ("False", reason, not_synced_message(&messages)),
        });
        let old = |type_: &str| {
            pr["status"]["conditions"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["type"] == type_))
                .cloned()
                .unwrap_or(Value::Null)
        };
        let old_ready = old("Ready");
        let old_synced = old("Synced");
        let old_schema = pr["status"]["resourceSchemaName"].as_str().unwrap_or_default();
        let synced_same = match &synced {
            Some((s, r, m)) => same_condition(&old_synced, (s, r, m)),
            None => old_synced.is_null(),
        };
        if same_condition(&old_ready, (status, reason, &message))
            && synced_same
            && (schema.is_empty() || old_schema == schema)
        {
            return;
        }
        if let Some(i) = invalid {
            tracing::warn!(published_resource = name, reason = i.reason, "{}", i.message);
        }
        let condition = |old: &Value, type_: &str, status: &str, reason: &str, message: &str| {
            let since = if old["status"] == status {
                old["lastTransitionTime"].clone()
            } else {
                json!(ferry_api::timestamp::now())
            };
            let mut c =
                json!({ "type": type_, "status": status, "reason": reason, "lastTransitionTime": since });
            if !message.is_empty() {
                c["message"] = json!(message);
            }
            c
        };
        let mut conditions = vec![condition(&old_ready, "Ready", status, reason, &message)];
        if let Some((s, r, m)) = &synced {
            conditions.push(condition(&old_synced, "Synced", s, r, m));
        }
        let mut body = json!({ "status": { "conditions": conditions } });
        if !schema.is_empty() {
            body["status"]["resourceSchemaName"] = json!(schema);
        }
        let api: Api<DynamicObject> = Api::all_with(self.service.clone(), &published_resources());
        if let Err(e) = api
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&body))
            .await
        {
            tracing::warn!(published_resource = name, "writing status failed: {e}");
        }
    }

    /// Adds `schemas` to the APIExport's `latestResourceSchemas` (never removing one) and
    /// the permission claims `wanted` (keeping every other).
    async fn merge_export(&self, schemas: &[String], wanted: &[Value]) -> anyhow::Result<()> {
        let api: Api<DynamicObject> =
            Api::all_with(self.kcp.clone(), &kcp_resource("APIExport", "apiexports"));
        let name = &self.export;
        let export = api
            .get(name)
            .await
            .with_context(|| format!("reading APIExport {name} in the kcp workspace"))?;
        let mut export = serde_json::to_value(export)?;
        let mut changed = false;
        let mut latest: Vec<Value> = export["spec"]["latestResourceSchemas"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut added = vec![];
        for s in schemas {
            if !latest.iter().any(|l| l == s.as_str()) {
                latest.push(json!(s));
                added.push(s.clone());
            }
        }
        if !added.is_empty() {
            export["spec"]["latestResourceSchemas"] = json!(latest);
            changed = true;
        }
        let mut claims: Vec<Value> = export["spec"]["permissionClaims"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut new_claims = vec![];
        for claim in wanted {
            let has = claims.iter().any(|c| same_claim(c, claim));
            if !has {
                claims.push(claim.clone());
                new_claims.push(claim_name(claim));
            }
        }
        if !new_claims.is_empty() {
            export["spec"]["permissionClaims"] = json!(claims);
            changed = true;
        }
        if !changed {
            return Ok(());
        }
        let obj: DynamicObject = serde_json::from_value(export.clone())?;
        let written = match api.replace(name, &PostParams::default(), &obj).await {
            Ok(written) => written,
            // kcp refuses a claim on a resource that is not built in without the
            // identityHash of the export serving it: the other changes still go
            // in, and the refused claims are named with the fix.
            Err(kube::Error::Api(e))
                if matches!(e.code, 403 | 422) && !refused_claims(&e.message).is_empty() =>
            {
                let refused = refused_claims(&e.message);
                let names: Vec<String> = refused
                    .iter()
                    .filter_map(|i| claims.get(*i))
                    .map(claim_name)
                    .collect();
                tracing::warn!(export = %name, "kcp refused the permission claim(s) of APIExport {name} for {} without identityHash; set identityHash on those related resources of the PublishedResources", names.join(", "));
                let kept: Vec<Value> = claims
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| !refused.contains(i))
                    .map(|(_, c)| c.clone())
                    .collect();
                new_claims.retain(|n| !names.contains(n));
                export["spec"]["permissionClaims"] = json!(kept);
                let obj: DynamicObject = serde_json::from_value(export)?;
                let written = api
                    .replace(name, &PostParams::default(), &obj)
                    .await
                    .with_context(|| format!("updating APIExport {name}"))?;
                crate::engine::events::post(
                    self.kcp.clone(),
                    &serde_json::to_value(&written)?,
                    &crate::transform::ObjectType::new("apis.kcp.io/v1alpha1", "APIExport"),
                    crate::engine::events::EventType::Warning,
                    "PermissionClaimRefused",
                    format!(
                        "Permission claim(s) for {} need the identityHash of the APIExport serving them: set identityHash on that related resource of the PublishedResource.",
                        names.join(", ")
                    ),
                    &fully_qualified_name(&self.opts.agent_name, &self.export),
                );
                written
            }
            Err(e) => return Err(anyhow::Error::new(e).context(format!("updating APIExport {name}"))),
        };
        // The reference's Events on the export, for `kubectl describe apiexport`, from
        // the agent's fully qualified name (their reportingInstance).
        let written = serde_json::to_value(written)?;
        let ty = crate::transform::ObjectType::new("apis.kcp.io/v1alpha1", "APIExport");
        let post = |reason: &str, message: String| {
            crate::engine::events::post(
                self.kcp.clone(),
                &written,
                &ty,
                crate::engine::events::EventType::Normal,
                reason,
                message,
                &fully_qualified_name(&self.opts.agent_name, &self.export),
            );
        };
        if !added.is_empty() {
            tracing::info!(export = %name, "APIExport {name}: added resource schema(s) {}", added.join(", "));
            post(
                "AddingResourceSchemas",
                format!("Added new resource schema(s) {}.", added.join(", ")),
            );
        }
        if !new_claims.is_empty() {
            tracing::info!(export = %name, "APIExport {name}: added permission claim(s) for all {}", new_claims.join(", "));
            post(
                "AddingPermissionClaims",
                format!("Added new permission claim(s) for all {}.", new_claims.join(", ")),
            );
        }
        Ok(())
    }
}

impl ConfigSource for SyncAgent {
    /// The publishing loop runs beside the engine (it also runs when `sync` is
    /// disabled); the engine is only told when the published set changes.
    fn start(self: Arc<Self>, engine: &Arc<Engine>) -> Vec<tokio::task::JoinHandle<()>> {
        let _ = self.engine.set(Arc::downgrade(engine));
        if !self.published().is_empty() {
            engine.selection_changed();
        }
        // Namespace labels for spec.filter.namespace: a change judges every object again.
        let (weak_agent, weak_engine) = (Arc::downgrade(&self), Arc::downgrade(engine));
        let asking = Arc::downgrade(&self);
        let namespaces = self.namespaces.clone().watch(
            engine.up.client_in(Some("*")),
            move || {
                let agent = weak_agent.upgrade();
                if let (Some(agent), Some(engine)) = (agent, weak_engine.upgrade()) {
                    if agent.filters_namespaces() {
                        engine.reconcile_everything();
                    }
                }
            },
            move || asking.upgrade().is_some_and(|agent| agent.filters_namespaces()),
        );
        // Blocked objects are judged again every second: a collision ends when the
        // object holding the name goes.
        let agent = Arc::downgrade(&self);
        let blocked = async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let Some(agent) = agent.upgrade() else { return };
                agent.retry_blocked();
            }
        };
        // Related objects: a worker, watches of their origin resources, and a slow
        // safety resync (see `related_watch`).
        let resync = self
            .publisher
            .get()
            .map_or(super::related_watch::DEFAULT_RESYNC, |p| p.opts.related_resync);
        let agent = Arc::downgrade(&self);
        let resync = async move {
            loop {
                tokio::time::sleep(resync).await;
                let Some(agent) = agent.upgrade() else { return };
                agent.queue_all_related(None);
            }
        };
        let watches = related_watches(
            Arc::downgrade(&self),
            engine.down.client.clone(),
            engine.up.client_in(Some("*")),
        );
        vec![
            crate::spawn(namespaces),
            crate::spawn(blocked),
            crate::spawn(SyncAgent::related_workers(Arc::downgrade(&self))),
            crate::spawn(resync),
            crate::spawn(watches),
        ]
    }
}

/// Aborts its task when dropped: the watches go with the task that started them.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Keeps one watch per origin resource that a related resource names (started and
/// stopped as PublishedResources change), until the agent goes.
async fn related_watches(agent: std::sync::Weak<SyncAgent>, service: kube::Client, kcp: kube::Client) {
    use super::related_watch::{wanted_watches, OriginResource};
    let mut running: BTreeMap<OriginResource, AbortOnDrop> = BTreeMap::new();
    loop {
        let Some(a) = agent.upgrade() else { return };
        let wanted = wanted_watches(&a.published());
        drop(a);
        running.retain(|r, _| wanted.contains(r));
        for r in wanted {
            if running.contains_key(&r) {
                continue;
            }
            let client = if r.service { service.clone() } else { kcp.clone() };
            let task = crate::spawn(watch_related(agent.clone(), client, r.clone()));
            running.insert(r, AbortOnDrop(task));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Watches the origin resource `res` (across consumer clusters for kcp) and hands
/// every change to the agent; after each (re)list, which may hide missed changes,
/// every primary with a related resource of `res` is queued.
async fn watch_related(
    agent: std::sync::Weak<SyncAgent>,
    client: kube::Client,
    res: super::related_watch::OriginResource,
) {
    use futures::StreamExt;
    use kube::runtime::watcher;
    let api_version = if res.group.is_empty() {
        res.version.clone()
    } else {
        format!("{}/{}", res.group, res.version)
    };
    let ar = ApiResource {
        group: res.group.clone(),
        version: res.version.clone(),
        api_version,
        kind: String::new(),
        plural: res.resource.clone(),
    };
    let side = if res.service { "the service cluster" } else { "kcp" };
    let api: Api<DynamicObject> = Api::all_with(client, &ar);
    let mut stream = watcher(api, watcher::Config::default()).boxed();
    let mut said = false;
    while let Some(event) = stream.next().await {
        let Some(agent) = agent.upgrade() else { return };
        match event {
            Ok(watcher::Event::Apply(obj) | watcher::Event::Delete(obj)) => {
                agent.related_event(&res, &serde_json::to_value(obj).unwrap_or_default());
            }
            Ok(watcher::Event::InitDone) => {
                if said {
                    tracing::info!(resource = %ar.plural, "watching related objects in {side} again");
                    said = false;
                }
                agent.queue_all_related(Some(&res));
            }
            Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => {}
            Err(e) => {
                if !said {
                    tracing::info!(resource = %ar.plural, group = %ar.group, "watching related objects in {side} failed (retrying every second; the safety resync covers meanwhile): {e}");
                    said = true;
                }
                drop(agent);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// Objects a `Synced=False` condition names; the rest are counted.
const NAMED_PROBLEMS: usize = 3;

/// `Synced=False`'s message for one message per object that does not sync:
/// that message alone, or how many, the first few, and how many more — a
/// condition stays short however many objects a service cluster refuses.
fn not_synced_message(messages: &[String]) -> String {
    if let [only] = messages {
        return only.clone();
    }
    let named: Vec<&str> = messages.iter().take(NAMED_PROBLEMS).map(String::as_str).collect();
    let mut message = format!("{} objects are not synced: {}", messages.len(), named.join("; "));
    if messages.len() > NAMED_PROBLEMS {
        message.push_str(&format!("; and {} more", messages.len() - NAMED_PROBLEMS));
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd() -> Value {
        json!({
            "metadata": { "name": "databases.example.com" },
            "spec": { "group": "example.com", "scope": "Namespaced",
                "names": { "kind": "Database", "plural": "databases", "singular": "database", "shortNames": ["db"] },
                "versions": [
                    { "name": "v1", "served": true, "storage": false, "schema": { "openAPIV3Schema": { "type": "object" } } },
                    { "name": "v2", "served": true, "storage": true, "schema": { "openAPIV3Schema": { "type": "object" } },
                      "subresources": { "status": {} } },
                    { "name": "v3", "served": false, "storage": false, "schema": { "openAPIV3Schema": { "type": "object" } } }
                ] }
        })
    }

    fn spec(v: Value) -> PublishedResourceSpec {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_condition_without_a_message_is_one_with_the_empty_message() {
        let synced = json!({ "type": "Synced", "status": "True", "reason": "Synced" });
        assert!(same_condition(&synced, ("True", "Synced", "")));
        assert!(!same_condition(&synced, ("True", "Synced", "2 objects wait")));
        assert!(!same_condition(&synced, ("False", "Synced", "")));
        let ready =
            json!({ "status": "True", "reason": "Published", "message": "published as APIResourceSchema x" });
        assert!(same_condition(
            &ready,
            ("True", "Published", "published as APIResourceSchema x")
        ));
        assert!(!same_condition(&Value::Null, ("True", "Published", "")));
    }

    #[test]
    fn agent_names_are_dns_1035_labels() {
        for good in ["nora", "oskar-2", "a", &"a".repeat(63)] {
            assert_eq!(validate_agent_name(good), Ok(()), "{good}");
        }
        for (bad, says) in [
            ("Nora", "DNS-1035"),
            ("2nora", "start with an alphabetic character"),
            ("nora-", "end with an alphanumeric"),
            ("nora.databases", "DNS-1035"),
            ("", "must not be empty"),
            (&"a".repeat(64), "no more than 63 characters (it has 64)"),
        ] {
            let e = validate_agent_name(bad).unwrap_err();
            assert!(
                e.starts_with("--agent-name ") && e.contains(says) && e.contains("\"nora\""),
                "{e}"
            );
        }
        assert_eq!(
            fully_qualified_name("nora", "databases.examplecorp"),
            "nora.databases.examplecorp"
        );
    }

    #[test]
    fn a_crd_is_projected_into_the_exports_group() {
        let s = spec(json!({ "resource": { "apiGroup": "example.com", "kind": "Database" } }));
        let (ars, p) = project("db", &s, &[crd()], "databases.example.io").unwrap();
        let name = ars["metadata"]["name"].as_str().unwrap();
        assert!(
            name.starts_with('v') && name.ends_with(".databases.databases.example.io"),
            "{name}"
        );
        assert_eq!(name.split('.').next().unwrap().len(), 9);
        assert_eq!(ars["spec"]["group"], "databases.example.io");
        assert_eq!(ars["spec"]["names"]["shortNames"], json!(["db"]));
        // Every served version, the CRD's storage version stays the storage version.
        let versions: Vec<_> = ars["spec"]["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["name"].clone())
            .collect();
        assert_eq!(versions, [json!("v1"), json!("v2")]);
        assert_eq!(ars["spec"]["versions"][1]["storage"], true);
        assert_eq!(p.local.id.version, "v2");
        assert_eq!(p.remote.id.group, "databases.example.io");
        // The same input makes the same name (schemas are immutable).
        let (again, _) = project("db", &s, &[crd()], "databases.example.io").unwrap();
        assert_eq!(again["metadata"]["name"], ars["metadata"]["name"]);
    }

    #[test]
    fn projection_renames_kind_plural_versions_and_scope() {
        let s = spec(json!({
            "resource": { "apiGroup": "example.com", "kind": "Database", "versions": ["v2"] },
            "projection": { "kind": "PostgreSQL", "versions": { "v2": "v1beta1" }, "scope": "Cluster", "shortNames": [] }
        }));
        let (ars, p) = project("db", &s, &[crd()], "databases.example.io").unwrap();
        assert_eq!(ars["spec"]["names"]["kind"], "PostgreSQL");
        assert_eq!(ars["spec"]["names"]["plural"], "postgresqls");
        assert_eq!(ars["spec"]["names"]["singular"], "postgresql");
        assert_eq!(ars["spec"]["names"]["shortNames"], json!([]));
        assert_eq!(ars["spec"]["scope"], "Cluster");
        assert_eq!(ars["spec"]["versions"][0]["name"], "v1beta1");
        assert_eq!(p.remote.id.version, "v1beta1");
        assert!(!p.remote.id.namespaced);
        assert!(p.local.id.namespaced);
        assert_eq!(p.local.kind, "Database");
    }

    #[test]
    fn what_cannot_be_published_names_the_field() {
        let missing = spec(json!({ "resource": { "apiGroup": "example.com", "kind": "Nope" } }));
        let e = project("x", &missing, &[crd()], "g").unwrap_err();
        assert_eq!(e.reason, "CRDNotFound");
        assert!(
            e.message.contains("spec.resource") && e.message.contains("Nope"),
            "{}",
            e.message
        );
        let unserved = spec(
            json!({ "resource": { "apiGroup": "example.com", "kind": "Database", "versions": ["v3"] } }),
        );
        let e = project("x", &unserved, &[crd()], "g").unwrap_err();
        assert_eq!(e.reason, "VersionNotServed");
        assert!(
            e.message.contains("spec.resource.versions") && e.message.contains("v3"),
            "{}",
            e.message
        );
        let scope = spec(
            json!({ "resource": { "apiGroup": "example.com", "kind": "Database" }, "projection": { "scope": "Galaxy" } }),
        );
        let e = project("x", &scope, &[crd()], "g").unwrap_err();
        assert_eq!(e.reason, "InvalidProjection");
        assert!(e.message.contains("spec.projection.scope"), "{}", e.message);
    }

    #[test]
    fn a_synced_condition_names_a_few_objects_and_counts_the_rest() {
        let one = vec!["default/big was refused by the service cluster: Too long".to_string()];
        assert_eq!(not_synced_message(&one), one[0]);
        let many: Vec<String> = (0..40)
            .map(|i| format!("default/o{i:02} was refused: no"))
            .collect();
        let message = not_synced_message(&many);
        assert_eq!(
            message,
            "40 objects are not synced: default/o00 was refused: no; default/o01 was refused: no; \
             default/o02 was refused: no; and 37 more"
        );
    }

    #[test]
    fn refused_claims_are_read_from_the_message() {
        let message = "APIExport.apis.kcp.io \"x\" is invalid: [spec.permissionClaims[1].identityHash: Invalid value: \"\": identityHash is required, spec.permissionClaims[3].identityHash: Invalid value, spec.permissionClaims[2].resource: Required value]";
        assert_eq!(refused_claims(message), BTreeSet::from([1, 3]));
        assert!(refused_claims("spec.latestResourceSchemas[0]: Invalid").is_empty());
    }

    #[test]
    fn claims_follow_what_the_published_resources_need() {
        let plain = spec(json!({ "resource": { "apiGroup": "example.com", "kind": "Database" } }));
        assert_eq!(
            permission_claims(std::slice::from_ref(&plain), &[]),
            [json!({ "group": "", "resource": "events", "all": true })]
        );
        let rich = spec(json!({
            "resource": { "apiGroup": "example.com", "kind": "Database" },
            "enableWorkspacePaths": true,
            "related": [
                { "identifier": "creds", "origin": "service", "kind": "Secret", "object": { "reference": { "path": "spec.secret" } } },
                { "identifier": "certs", "origin": "kcp", "group": "cert-manager.io", "version": "v1", "resource": "certificates",
                  "identityHash": "abc", "object": { "reference": { "path": "spec.cert" } } },
                { "identifier": "own", "origin": "kcp", "group": "g", "version": "v1", "resource": "things",
                  "object": { "reference": { "path": "spec.thing" } } },
                // Published too, and projected into the export's group: kcp sees it as g's own.
                { "identifier": "projected", "origin": "service", "group": "example.com", "version": "v1",
                  "resource": "credentials", "projection": { "group": "g" },
                  "object": { "reference": { "path": "spec.credential" } } }
            ]
        }));
        let own = ["v1.things.g".to_string(), "v2ab.credentials.g".to_string()];
        let claims = permission_claims(&[plain, rich], &own);
        let names: Vec<String> = claims.iter().map(claim_name).collect();
        assert_eq!(
            names,
            [
                "events",
                "namespaces",
                "secrets",
                "certificates.cert-manager.io",
                "logicalclusters.core.kcp.io"
            ]
        );
        assert_eq!(claims[3]["identityHash"], "abc");
    }
}
