//! Registering KubeStellar syncers as a user does: kubeconfigs at a workspace,
//! `ferry` runs, the mailbox of a SyncTarget, and a syncer started from an
//! applied `syncer-gen` manifest exactly as its pod would run it.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use ferry_cli::quickstart::{apply_manifest, in_cluster_config};

use ferry_hub::kubeconfig::AuthInfo;
use ferry_testkit::clients::write_kubeconfig;
use ferry_testkit::{eventually, TestHub};
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::api::{Api, DynamicObject, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::{json, Value};

/// Writes `dir/file`: a kubeconfig for `hub` at `workspace` authenticating with `token`.
pub fn kubeconfig_at(hub: &TestHub, workspace: &str, token: &str, dir: &Path, file: &str) -> PathBuf {
    write_kubeconfig(
        dir.join(file),
        hub,
        Some(workspace),
        AuthInfo::Token(token.to_string()),
    )
}

/// A kubeconfig for `hub`'s admin at `workspace`, in the hub's data directory.
pub fn admin_kubeconfig(hub: &TestHub, workspace: &str, file: &str) -> PathBuf {
    kubeconfig_at(hub, workspace, &hub.running.admin_token, hub.data_dir(), file)
}

/// `ferry ARGS --kubeconfig KUBECONFIG`.
pub fn ferry(args: &[&str], kubeconfig: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .output()
        .unwrap()
}

/// Its stderr, after asserting it succeeded.
pub fn ok(out: Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub use ferry_testkit::resources::workspaces;

/// The name of SyncTarget `target`'s mailbox workspace (in root), once Ready.
pub async fn mailbox_of(hub: &TestHub, target: &str) -> String {
    let workspaces: Api<DynamicObject> = Api::all_with(hub.client("root").await, &workspaces());
    eventually(20, &format!("{target}'s mailbox workspace"), || {
        let workspaces = workspaces.clone();
        async move {
            workspaces
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .find_map(|w| {
                    let ann = w.metadata.annotations.clone().unwrap_or_default();
                    (ann.get("edge.kubestellar.io/sync-target-name")
                        .map(String::as_str)
                        == Some(target)
                        && w.data["status"]["phase"] == "Ready")
                        .then(|| w.metadata.name.clone().unwrap())
                })
        }
    })
    .await
}

/// The documents of a multi-document YAML file.
pub fn manifest_docs(manifest: &Path) -> Vec<Value> {
    serde_saphyr::from_multiple(&std::fs::read_to_string(manifest).unwrap()).unwrap()
}

/// The upstream kubeconfig the Secret `ns/name` holds in `cluster` (what the pod mounts).
pub async fn mounted_kubeconfig(cluster: &TestHub, ns: &str, name: &str) -> String {
    let secret = Api::<Secret>::namespaced(cluster.client("root").await, ns)
        .get(name)
        .await
        .unwrap();
    String::from_utf8(secret.data.unwrap()["kubeconfig"].0.clone()).unwrap()
}

/// A `ferry syncer` process killed when dropped.
pub struct PodSyncer {
    child: Child,
    pub log: PathBuf,
}

impl PodSyncer {
    /// How it exited, once it has.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().unwrap()
    }

    /// What it has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for PodSyncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the syncer of `manifest` (applied to `cluster`) as its pod would: the
/// Deployment's container args and env, its Secret volume at its mount path (under
/// `dir` here) read from the cluster, and the in-cluster identity of its
/// ServiceAccount (a token for it, in place of the pod's projected one).
pub async fn run_as_pod(manifest: &Path, cluster: &TestHub, dir: &Path) -> PodSyncer {
    run_as_pod_for(manifest, cluster, dir, None).await
}

/// [`run_as_pod`], with `--sync-target-name` changed to `sync_target_name` if given
/// (a manifest edited by hand, or applied for the wrong cluster).
pub async fn run_as_pod_for(
    manifest: &Path,
    cluster: &TestHub,
    dir: &Path,
    sync_target_name: Option<&str>,
) -> PodSyncer {
    let docs = manifest_docs(manifest);
    let deployment = docs
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("a Deployment");
    let ns = deployment["metadata"]["namespace"].as_str().unwrap();
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let mount = &container["volumeMounts"][0];
    let mount_path = mount["mountPath"].as_str().unwrap();
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .unwrap();
    let secret = volume["secret"]["secretName"].as_str().unwrap();
    let mounted = dir.join(mount_path.trim_start_matches('/'));
    std::fs::create_dir_all(&mounted).unwrap();
    std::fs::write(
        mounted.join("kubeconfig"),
        mounted_kubeconfig(cluster, ns, secret).await,
    )
    .unwrap();

    let sa = pod["serviceAccountName"].as_str().unwrap();
    let request: k8s_openapi::api::authentication::v1::TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": []}})).unwrap();
    let token = Api::<ServiceAccount>::namespaced(cluster.client("root").await, ns)
        .create_token_request(sa, &Default::default(), &request)
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    let in_cluster = kubeconfig_at(
        cluster,
        "root",
        &token,
        dir,
        &format!("{sa}.in-cluster.kubeconfig"),
    );

    let args: Vec<String> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let a = a.as_str().unwrap();
            // Paths under the mount are under `dir` here; the health port is any free one.
            let a = a.replace(mount_path, &mounted.to_string_lossy());
            if a.starts_with("--health-address=") {
                "--health-address=127.0.0.1:0".to_string()
            } else if let (Some(name), true) = (sync_target_name, a.starts_with("--sync-target-name=")) {
                format!("--sync-target-name={name}")
            } else {
                a
            }
        })
        .collect();
    let log = dir.join(format!("{sa}.log"));
    let child = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(&args)
        .arg("--to-kubeconfig")
        .arg(&in_cluster)
        .env("NAMESPACE", ns)
        .env("HOSTNAME", format!("{sa}-pod"))
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    PodSyncer { child, log }
}

/// `kubectl apply` of a syncer's manifest on `cluster`, and the in-cluster identity
/// its pod gets there (only the manifest's RBAC).
pub async fn install(
    cluster: &TestHub,
    admin: &kube::Client,
    manifest: &str,
    syncer_id: &str,
) -> kube::Config {
    apply_manifest(admin, manifest)
        .await
        .expect("the syncer's manifest applies");
    in_cluster_config(&cluster.running, admin, syncer_id)
        .await
        .expect("in-cluster identity")
}

/// The config of the kubeconfig text `yaml`.
pub async fn config_of(yaml: &str) -> kube::Config {
    kube::Config::from_custom_kubeconfig(
        Kubeconfig::from_yaml(yaml).expect("kubeconfig"),
        &KubeConfigOptions::default(),
    )
    .await
    .expect("config")
}

/// The KubeStellar syncer of SyncTarget `name` (mailbox workspace `mailbox` on
/// `hub`) as `syncer-gen` makes it: its manifest applied to `cluster` (whose
/// admin is `admin`) and the syncer run in this process with the identity that
/// manifest gives it there, heartbeating every half second.
pub async fn generated_syncer(
    hub: &TestHub,
    mailbox: &str,
    name: &str,
    cluster: &TestHub,
    admin: &kube::Client,
) -> ferry_syncer::RunningSyncer {
    let opts = generated_syncer_options(hub, mailbox, name, cluster, admin).await;
    ferry_syncer::start(opts).await.expect("syncer starts")
}

/// The options [`generated_syncer`] runs with: `opts.upstream` is the mailbox
/// identity `syncer-gen` minted.
pub async fn generated_syncer_options(
    hub: &TestHub,
    mailbox: &str,
    name: &str,
    cluster: &TestHub,
    admin: &kube::Client,
) -> ferry_syncer::SyncerOptions {
    let args = ferry_cli::syncer_gen::SyncerGenArgs {
        lifetime: Duration::from_secs(3600),
        ..ferry_cli::syncer_gen::SyncerGenArgs::stand_in(name, cluster.data_dir().join("syncer.yaml"))
    };
    let reg = ferry_cli::syncer_gen::generate(&hub.config(mailbox).await, &args)
        .await
        .expect("syncer-gen");
    let downstream = install(cluster, admin, &reg.manifest, &reg.syncer_id).await;
    let mut opts =
        ferry_syncer::SyncerOptions::new(config_of(&reg.upstream_kubeconfig).await, downstream, name);
    opts.sync_target_uid = Some(reg.sync_target_uid.clone());
    opts.heartbeat_period = Duration::from_millis(500);
    opts.metrics_address = None;
    opts
}
