//! `ferry quickstart --profile syncagent`: kcp's api-syncagent on one machine, as
//! seed 003 describes it.
//!
//! A hub with a provider workspace (`root:provider`, holding the APIExport
//! `databases.example.io`) and two consumer workspaces; a second hub standing in for
//! the service cluster, with a `Database` CRD, a PublishedResource for it (its
//! credentials Secret as a related resource) and a tiny built-in "service
//! controller" that marks each Database ready and writes its credentials Secret. The
//! agent publishes the CRD, the consumers bind the export and create Databases, and
//! the closing table shows, per consumer object, its copy on the service cluster,
//! the status that came back and the credentials Secret returned to the consumer.

use std::time::Duration;

use anyhow::{bail, Context};
use ferry_server::server::RunningHub;
use ferry_server::strategy::core::service::ServiceRanges;
use futures::StreamExt;
use indicatif::ProgressBar;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::{watcher, WatchStreamExt};
use serde_json::json;

use ferry_syncer::profiles::syncagent::{self, SyncAgentOptions};

use crate::database_service::{self, local_databases, remote_databases, AGENT_NAMESPACE, EXPORT, PROVIDER};
use crate::quickstart::{admin_config, hub_options, progress, start_hub, QuickstartArgs, Step};

/// The consumer workspaces and the Databases each creates.
const CONSUMERS: &[(&str, &[&str])] = &[("team-a", &["orders"]), ("team-b", &["orders", "users"])];

/// One row of the closing table.
#[derive(Debug, Clone)]
pub struct Row {
    pub workspace: String,
    pub object: String,
    pub local: String,
    pub status: String,
    pub credentials: String,
}

impl Row {
    fn landed(&self) -> bool {
        self.local != "-" && self.status != "pending" && self.credentials != "-"
    }
}

/// The service's controller: every Database gets `status.phase: Ready` and a
/// credentials Secret `<name>-credentials` beside it.
fn service_controller(client: kube::Client) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &local_databases());
        let mut events = watcher(api, watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .boxed();
        while let Some(event) = events.next().await {
            let Ok(db) = event else { continue };
            let (Some(name), Some(ns)) = (db.metadata.name.clone(), db.metadata.namespace.clone()) else {
                continue;
            };
            if db.data["status"]["phase"] == "Ready" || db.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), &ns);
            let secret = json!({ "apiVersion": "v1", "kind": "Secret",
                "metadata": { "name": format!("{name}-credentials"), "namespace": ns },
                "stringData": { "username": "app", "password": format!("generated-for-{}", &name[..8.min(name.len())]),
                                "host": format!("{name}.{ns}.svc:5432") } });
            if let Ok(secret) = serde_json::from_value(secret) {
                let _ = secrets.create(&PostParams::default(), &secret).await;
            }
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &local_databases());
            let status =
                json!({ "status": { "phase": "Ready", "endpoint": format!("{name}.{ns}.svc:5432") } });
            if let Err(e) = api
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await
            {
                tracing::debug!(database = %name, "setting status failed: {e}");
            }
        }
    })
}

pub async fn run(args: QuickstartArgs) -> anyhow::Result<()> {
    let pb = progress(false);
    let result = tokio::time::timeout(args.timeout, quickstart(&args, &pb)).await;
    pb.finish_and_clear();
    let (hub, service, agent, controller, rows) = match result {
        Ok(r) => r?,
        Err(_) => return Err(crate::quickstart::timed_out(args.timeout, &pb)),
    };
    println!("Databases the consumers made of APIExport root:{PROVIDER}:{EXPORT}:\n");
    print_table(&rows);
    let all_landed = rows.iter().all(Row::landed);
    // With --exit everything is stopped below: nothing is left to look at.
    if !args.exit {
        let dir = args.dir.display();
        println!("\nLook around:");
        println!("  export KUBECONFIG={dir}/hub/admin.kubeconfig");
        println!("  kubectl ferry ws use root:{PROVIDER}; kubectl get apiexports,apiresourceschemas");
        for (ws, _) in CONSUMERS {
            println!("  kubectl ferry ws use root:{ws}; kubectl get databases,secrets");
        }
        println!(
            "  KUBECONFIG={dir}/service/admin.kubeconfig kubectl get publishedresources,databases,secrets -A   # the service cluster"
        );
        println!("\nSyncing until Ctrl-C.");
        let _ = tokio::signal::ctrl_c().await;
    }
    controller.abort();
    agent.stop().await;
    service.stop().await;
    hub.stop().await;
    if args.exit && !all_landed {
        bail!("not everything landed; see the table above");
    }
    Ok(())
}

type Outcome = (
    RunningHub,
    RunningHub,
    syncagent::RunningAgent,
    tokio::task::JoinHandle<()>,
    Vec<Row>,
);

async fn quickstart(args: &QuickstartArgs, pb: &ProgressBar) -> anyhow::Result<Outcome> {
    pb.step("starting the hub and the stand-in service cluster");
    let hub = start_hub(hub_options(args.dir.join("hub")))
        .await
        .context("starting the hub")?;
    let mut opts = hub_options(args.dir.join("service"));
    opts.mailbox_controller = false;
    // A distinct cluster, as a real one is: its own service and node-port ranges.
    opts.service_ranges = ServiceRanges::distinct(crate::quickstart::stand_in_index("service"));
    let service_hub = start_hub(opts).await.context("starting the service cluster")?;

    let root = kube::Client::try_from(admin_config(&hub, "root").await?)?;
    let mut names = vec![PROVIDER];
    names.extend(CONSUMERS.iter().map(|(ws, _)| *ws));
    pb.step(format!("kubectl ferry ws create {}", names.join(", ")));
    database_service::create_workspaces(&root, &names, 1).await?;
    let provider_config = admin_config(&hub, &format!("root:{PROVIDER}")).await?;
    let provider = kube::Client::try_from(provider_config.clone())?;
    pb.step(format!("creating APIExport {EXPORT} in root:{PROVIDER}"));
    database_service::create_export(&provider).await?;

    pb.step("installing the Database and PublishedResource CRDs on the service cluster, then kubectl apply -f published-databases.yaml");
    let service_config = admin_config(&service_hub, "root").await?;
    let service = kube::Client::try_from(service_config.clone())?;
    database_service::install_service(&service, &database_service::published_resource(true)).await?;
    let controller = service_controller(service.clone());

    pb.step(format!(
        "ferry syncagent --apiexportendpointslice-ref {EXPORT} --namespace {AGENT_NAMESPACE} --agent-name nora"
    ));
    let mut agent_opts = SyncAgentOptions::new(provider_config, service_config, EXPORT, AGENT_NAMESPACE);
    agent_opts.agent_name = "nora".into();
    agent_opts.poll = Duration::from_millis(500);
    agent_opts.engine = Some(syncagent::EngineTuning {
        discovery_refresh: Some(Duration::from_millis(500)),
        ..Default::default()
    });
    let agent = syncagent::start(agent_opts).await.context("starting the agent")?;

    pb.step("waiting for the export to list the Database schema and claim secrets");
    let claims = database_service::wait_published(&provider, &["secrets"]).await?;

    let mut consumers = vec![];
    for (ws, objects) in CONSUMERS {
        pb.step(format!(
            "kubectl ferry ws use root:{ws}; kubectl ferry bind apiexport root:{PROVIDER}:{EXPORT} --accept-all-permission-claims"
        ));
        let client = kube::Client::try_from(admin_config(&hub, &format!("root:{ws}")).await?)?;
        database_service::bind(&client, &claims).await?;
        let dbs: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &remote_databases());
        for name in *objects {
            pb.step(format!("creating Database {name} in root:{ws}"));
            let obj = database_service::database(&remote_databases(), "default", name);
            match dbs.create(&PostParams::default(), &obj).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => return Err(e).with_context(|| format!("creating Database {name} in root:{ws}")),
            }
        }
        consumers.push((ws.to_string(), client));
    }

    pb.step("waiting for copies, status and credentials");
    let rows = loop {
        let rows = table(&consumers, &service).await;
        if rows.iter().all(Row::landed) {
            break rows;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    Ok((hub, service_hub, agent, controller, rows))
}

async fn table(consumers: &[(String, kube::Client)], service: &kube::Client) -> Vec<Row> {
    let mut rows = vec![];
    for (ws, client) in consumers {
        let dbs: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &remote_databases());
        let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), "default");
        for (_, names) in CONSUMERS.iter().filter(|(w, _)| w == ws) {
            for name in *names {
                let db = dbs.get_opt(name).await.ok().flatten();
                let cluster = db
                    .as_ref()
                    .and_then(|d| d.metadata.annotations.as_ref()?.get("kcp.io/cluster").cloned())
                    .unwrap_or_default();
                let local_name = syncagent::default_name("default", name);
                let locals: Api<DynamicObject> =
                    Api::namespaced_with(service.clone(), &cluster, &local_databases());
                let local = if cluster.is_empty() {
                    None
                } else {
                    locals.get_opt(&local_name).await.ok().flatten()
                };
                let status = db
                    .as_ref()
                    .and_then(|d| d.data["status"]["phase"].as_str().map(str::to_string))
                    .unwrap_or_else(|| "pending".into());
                let credentials = secrets
                    .get_opt(&format!("{name}-credentials"))
                    .await
                    .ok()
                    .flatten()
                    .map_or("-".to_string(), |s| {
                        format!("secret/{}", s.metadata.name.unwrap_or_default())
                    });
                rows.push(Row {
                    workspace: format!("root:{ws}"),
                    object: format!("database/{name}"),
                    local: local.map_or("-".to_string(), |_| format!("{cluster}/{local_name}")),
                    status,
                    credentials,
                });
            }
        }
    }
    rows
}

fn print_table(rows: &[Row]) {
    let header = Row {
        workspace: "WORKSPACE".into(),
        object: "OBJECT".into(),
        local: "SERVICE COPY".into(),
        status: "STATUS".into(),
        credentials: "CREDENTIALS".into(),
    };
    let all: Vec<&Row> = std::iter::once(&header).chain(rows).collect();
    let w = |f: fn(&Row) -> &str| all.iter().map(|r| f(r).len()).max().unwrap_or(0);
    let (w1, w2, w3, w4) = (
        w(|r| &r.workspace),
        w(|r| &r.object),
        w(|r| &r.local),
        w(|r| &r.status),
    );
    for r in all {
        println!(
            "{:w1$}  {:w2$}  {:w3$}  {:w4$}  {}",
            r.workspace, r.object, r.local, r.status, r.credentials
        );
    }
}
