//! Starting hubs for tests: a hub with the built-in controllers on a free
//! loopback port with its state in a temporary directory (or on etcd), and
//! `kubectl` pointed at it.

use std::path::{Path, PathBuf};
use std::process::Output;

use ferry_hub::server::{start, HubOptions, RunningHub};
use ferry_hub::strategy::core::service::ServiceRanges;

/// A kube-rs configuration from `kubeconfig` (its current context), pointed at
/// `workspace` (a kcp path like `root:a`, a logical cluster name, or `*`)
/// when one is given.
pub async fn config_from(kubeconfig: &Path, workspace: Option<&str>) -> kube::Config {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig parses");
    let mut config = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .expect("usable kubeconfig");
    if let Some(ws) = workspace {
        config = ferry_hub::kubeconfig::at_workspace(&config, ws).expect("valid URL");
    }
    config
}

/// A kube-rs client from `kubeconfig`, optionally pointed at `workspace`.
pub async fn client_from(kubeconfig: &Path, workspace: Option<&str>) -> kube::Client {
    kube::Client::try_from(config_from(kubeconfig, workspace).await).expect("client")
}

/// Poll `check` every 20 ms until it returns `Some`, or panic after `secs`
/// naming `what` — tests wait with a deadline, never with a bare sleep.
pub async fn eventually<T, F, Fut>(secs: u64, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out after {secs}s waiting for {what}");
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Set to `etcd` to run the hubs tests start ([`TestHub::start`],
/// [`TestHub::start_with`]) on a fresh etcd each instead of SQLite: the same
/// tests then prove the etcd backend. Hubs over a caller's data directory
/// ([`TestHub::start_in`]) stay on SQLite.
pub const STORAGE_ENV: &str = "FERRY_TEST_STORAGE";

/// Whether [`STORAGE_ENV`] asks for etcd.
pub fn etcd_requested() -> bool {
    std::env::var(STORAGE_ENV).is_ok_and(|v| v == "etcd")
}

/// File in a test hub's data directory recording the ranges it was given, so
/// a restart over the same data keeps them.
const RANGES_FILE: &str = "ferry-test-service-ranges";

/// Every hub a test starts is a distinct cluster, as real clusters are: its
/// own Service cluster-IP range and node-port range ([`ServiceRanges::distinct`]), so an object copied from one
/// hub to another with the addresses its source allocated is refused there
/// as a real cluster refuses it. A hub restarted over the same data directory
/// keeps its ranges. Tests that need kube's defaults set `service_ranges`.
pub fn distinct_cluster_ranges(data_dir: &Path) -> ServiceRanges {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let file = data_dir.join(RANGES_FILE);
    let n = match std::fs::read_to_string(&file)
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
    {
        Some(n) => n,
        None => {
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let _ = std::fs::write(&file, n.to_string());
            n
        }
    };
    ServiceRanges::distinct(n)
}

/// A hub on `127.0.0.1:<free port>` whose data lives as long as this value.
pub struct TestHub {
    pub running: RunningHub,
    dir: Option<tempfile::TempDir>,
    data_dir: PathBuf,
    /// The etcd this hub keeps its objects in, under [`STORAGE_ENV`]`=etcd`.
    pub etcd: Option<TestEtcd>,
    etcd_options: Option<ferry_hub::storage::EtcdOptions>,
}

/// etcds of hubs taken apart with [`TestHub::into_parts`], by data
/// directory, for [`TestHub::start_in`] to restart the hub on.
fn parked() -> &'static std::sync::Mutex<std::collections::HashMap<PathBuf, ParkedEtcd>> {
    static PARKED: std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<PathBuf, ParkedEtcd>>> =
        std::sync::OnceLock::new();
    PARKED.get_or_init(Default::default)
}

struct ParkedEtcd {
    etcd: Option<TestEtcd>,
    options: ferry_hub::storage::EtcdOptions,
}

impl TestHub {
    /// Start a hub in a fresh temporary directory.
    pub async fn start() -> TestHub {
        Self::start_with(|_| {}).await
    }

    /// Start a hub, adjusting its options first.
    pub async fn start_with(adjust: impl FnOnce(&mut HubOptions)) -> TestHub {
        let dir = tempfile::tempdir().expect("temporary directory");
        let data_dir = dir.path().to_path_buf();
        let mut opts = HubOptions::new(&data_dir);
        opts.listen = "127.0.0.1:0".parse().expect("address");
        opts.service_ranges = distinct_cluster_ranges(&data_dir);
        let etcd = if etcd_requested() {
            let etcd =
                TestEtcd::start().unwrap_or_else(|| panic!("{STORAGE_ENV}=etcd but {}", TestEtcd::MISSING));
            opts.etcd = Some(etcd.options());
            Some(etcd)
        } else {
            None
        };
        adjust(&mut opts);
        let etcd_options = opts.etcd.clone();
        let running = start(opts).await.expect("hub starts");
        TestHub {
            running,
            dir: Some(dir),
            data_dir,
            etcd,
            etcd_options,
        }
    }

    /// Start a hub on `etcd` (its own data directory, the given key prefix).
    pub async fn start_on_etcd(etcd: &TestEtcd, prefix: &str) -> TestHub {
        Self::start_on_etcd_with(etcd, prefix, |_| {}).await
    }

    /// [`TestHub::start_on_etcd`], adjusting the options first.
    pub async fn start_on_etcd_with(
        etcd: &TestEtcd,
        prefix: &str,
        adjust: impl FnOnce(&mut HubOptions),
    ) -> TestHub {
        Self::start_with(|o| {
            let mut options = etcd.options();
            options.prefix = prefix.to_string();
            o.etcd = Some(options);
            adjust(o);
        })
        .await
    }

    /// A hub on every member of a three-member etcd, under `prefix`.
    pub async fn start_on_etcd_cluster(cluster: &TestEtcdCluster, prefix: &str) -> TestHub {
        Self::start_with(|o| {
            let mut options = cluster.options();
            options.prefix = prefix.to_string();
            o.etcd = Some(options);
        })
        .await
    }

    /// Start a hub over an existing data directory (which the caller owns).
    /// A hub that ran there on etcd and was taken apart with
    /// [`TestHub::into_parts`] restarts on the same etcd.
    pub async fn start_in(data_dir: &Path) -> TestHub {
        Self::resume(data_dir, "127.0.0.1:0".parse().expect("address")).await
    }

    /// A hub listening on `listen` over `data_dir`, on the etcd a hub taken apart there
    /// left parked, if any.
    async fn resume(data_dir: &Path, listen: std::net::SocketAddr) -> TestHub {
        let mut opts = HubOptions::new(data_dir);
        opts.listen = listen;
        opts.service_ranges = distinct_cluster_ranges(data_dir);
        let parked = parked().lock().expect("parked etcds").remove(data_dir);
        let (etcd, etcd_options) = match parked {
            Some(p) => (p.etcd, Some(p.options)),
            None => (None, None),
        };
        opts.etcd = etcd_options.clone();
        let running = start(opts).await.expect("hub starts");
        TestHub {
            running,
            dir: None,
            data_dir: data_dir.to_path_buf(),
            etcd,
            etcd_options,
        }
    }

    pub fn url(&self) -> &str {
        &self.running.url
    }

    pub fn kubeconfig(&self) -> &Path {
        &self.running.kubeconfig_path
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// An admin kube-rs client addressing `workspace` (`root`, `root:a`, `*`, ...).
    pub async fn client(&self, workspace: &str) -> kube::Client {
        client_from(self.kubeconfig(), Some(workspace)).await
    }

    /// The admin configuration, addressing `workspace`.
    pub async fn config(&self, workspace: &str) -> kube::Config {
        config_from(self.kubeconfig(), Some(workspace)).await
    }

    /// Run `kubectl --kubeconfig <admin> ARGS` (blocking the calling thread).
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_stdin(args, None)
    }

    /// Same, feeding `stdin`.
    pub fn kubectl_stdin(&self, args: &[&str], stdin: Option<&str>) -> Output {
        self.kubectl_as(self.kubeconfig(), args, stdin)
    }

    /// Run `kubectl --server <hub>/clusters/<workspace> ARGS` as admin,
    /// feeding `stdin`.
    pub fn kubectl_in(&self, workspace: &str, args: &[&str], stdin: Option<&str>) -> Output {
        let server = format!("{}/clusters/{workspace}", self.url());
        self.kubectl_stdin(&[&["--server", server.as_str()][..], args].concat(), stdin)
    }

    /// Run `kubectl --kubeconfig <kubeconfig> ARGS` feeding `stdin`: kubectl
    /// as whoever `kubeconfig` authenticates (HOME, and so kubectl's cache,
    /// in the hub's data directory).
    pub fn kubectl_as(&self, kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = std::process::Command::new("kubectl");
        cmd.arg("--kubeconfig").arg(kubeconfig).args(args);
        cmd.env("HOME", &self.data_dir);
        output_feeding(cmd, stdin)
    }

    /// Stops the hub, awaits `outage` (the world without it), then starts a hub with
    /// default options again on the same address over the same data (and etcd): an
    /// outage as its clients see one.
    pub async fn restart_after<T>(self, outage: impl std::future::Future<Output = T>) -> (TestHub, T) {
        let listen = self.running.addr;
        let data_dir = self.data_dir.clone();
        let (running, dir) = self.into_parts();
        running.stop().await;
        let out = outage.await;
        let mut hub = Self::resume(&data_dir, listen).await;
        hub.dir = dir;
        (hub, out)
    }

    /// Stops the hub and starts it again over the same data (and etcd) on another free
    /// port: a hub that moved, as its clients see one (the URLs it advertised, such as a
    /// SyncTarget's virtual workspaces, change once its controllers catch up).
    pub async fn restart_elsewhere(self) -> TestHub {
        let old = self.running.addr;
        let data_dir = self.data_dir.clone();
        let (running, dir) = self.into_parts();
        running.stop().await;
        // Another port, so the old URL answers no more.
        let port = std::iter::repeat_with(crate::net::free_port)
            .find(|port| *port != old.port())
            .expect("a free port");
        let listen = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let mut hub = Self::resume(&data_dir, listen).await;
        hub.dir = dir;
        hub
    }

    /// Keep the data directory after this value is dropped (for restarts).
    pub fn into_parts(mut self) -> (RunningHub, Option<tempfile::TempDir>) {
        let dir = self.dir.take();
        if let Some(options) = self.etcd_options.take() {
            let etcd = self.etcd.take();
            parked()
                .lock()
                .expect("parked etcds")
                .insert(self.data_dir.clone(), ParkedEtcd { etcd, options });
        }
        (self.running, dir)
    }
}

/// Runs `cmd` (kubectl, as the program's name says in a failure) to its end,
/// feeding it `stdin` (none: an empty one), and returns what it printed.
pub fn output_feeding(mut cmd: std::process::Command, stdin: Option<&str>) -> Output {
    use std::io::Write;
    use std::process::Stdio;
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let program = cmd.get_program().to_string_lossy().into_owned();
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("{program} is installed: {e}"));
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .unwrap_or_else(|e| panic!("writing {program}'s stdin: {e}"));
    }
    child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("{program} runs: {e}"))
}

pub use ferry_hub::storage::testing::{EtcdPki, TestEtcd, TestEtcdCluster};

/// [`TestEtcd::start_tls`] with certificates from the hub's own CA code
/// (the certificates a hub makes for itself): etcd serves TLS only and
/// requires a client certificate, which its [`TestEtcd::options`] carry.
pub fn start_tls_etcd() -> Option<TestEtcd> {
    let dir = tempfile::tempdir().expect("temporary directory for certificates");
    let material = ferry_hub::server::tls::ensure_certs(dir.path(), &["127.0.0.1".into()])
        .expect("certificates for etcd");
    let (client_cert, client_key) =
        ferry_hub::server::tls::sign_client_cert(&material, "ferry-hub", &[], 1).expect("client certificate");
    TestEtcd::start_tls(EtcdPki {
        ca_cert: material.ca_cert_pem,
        serving_cert: material.serving_cert_pem,
        serving_key: material.serving_key_pem,
        client_cert,
        client_key,
    })
}
