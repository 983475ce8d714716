//! Starting hubs for tests and demos: a hub on a free loopback port with its
//! state in a temporary directory, and `kubectl` pointed at it.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::server::{start, HubOptions, RunningHub};
use crate::strategy::core::service::ServiceRanges;

/// A kube-rs configuration from `kubeconfig` (its current context), pointed at
/// `workspace` (a kcp path like `root:a`, a logical cluster name, or `*`)
/// when one is given.
pub async fn config_from(kubeconfig: &Path, workspace: Option<&str>) -> kube::Config {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig parses");
    let mut config = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .expect("usable kubeconfig");
    if let Some(ws) = workspace {
        config = crate::kubeconfig::at_workspace(&config, ws).expect("valid URL");
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
    etcd_options: Option<crate::storage::EtcdOptions>,
}

/// etcds of hubs taken apart with [`TestHub::into_parts`], by data
/// directory, for [`TestHub::start_in`] to restart the hub on.
fn parked() -> &'static parking_lot::Mutex<std::collections::HashMap<PathBuf, ParkedEtcd>> {
    static PARKED: std::sync::OnceLock<parking_lot::Mutex<std::collections::HashMap<PathBuf, ParkedEtcd>>> =
        std::sync::OnceLock::new();
    PARKED.get_or_init(Default::default)
}

struct ParkedEtcd {
    etcd: Option<TestEtcd>,
    options: crate::storage::EtcdOptions,
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
        let parked = parked().lock().remove(data_dir);
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
        use std::io::Write;
        use std::process::{Command, Stdio};
        let mut cmd = Command::new("kubectl");
        cmd.arg("--kubeconfig").arg(self.kubeconfig()).args(args);
        cmd.env("HOME", &self.data_dir);
        cmd.stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("kubectl is installed");
        if let Some(input) = stdin {
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(input.as_bytes())
                .expect("write stdin");
        }
        child.wait_with_output().expect("kubectl runs")
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

    /// Keep the data directory after this value is dropped (for restarts).
    pub fn into_parts(mut self) -> (RunningHub, Option<tempfile::TempDir>) {
        let dir = self.dir.take();
        if let Some(options) = self.etcd_options.take() {
            let etcd = self.etcd.take();
            parked()
                .lock()
                .insert(self.data_dir.clone(), ParkedEtcd { etcd, options });
        }
        (self.running, dir)
    }
}

/// A one-member etcd on free loopback ports with its data in a temporary
/// directory, stopped when dropped. For tests of `--storage etcd`.
pub struct TestEtcd {
    /// A shell that runs etcd and stops it when its stdin closes: when this
    /// value is dropped, and when the test process dies however it dies, so
    /// no etcd outlives its test.
    child: Option<std::process::Child>,
    binary: PathBuf,
    dir: tempfile::TempDir,
    client_port: u16,
    peer_port: u16,
    /// Plain-HTTP `/health`, whether clients talk TLS or not.
    metrics_port: u16,
    /// With TLS: the CA etcd's certificates chain to, and a client
    /// certificate and key etcd requires (files in `dir`).
    tls: Option<[PathBuf; 3]>,
    /// The member's name, and `--initial-cluster` (every member's
    /// `name=peer URL`) when it is one of several.
    name: String,
    initial_cluster: Option<String>,
}

impl TestEtcd {
    /// What a test says when it cannot run.
    pub const MISSING: &'static str =
        "the etcd binary is not installed (apt-get install etcd-server, or set FERRY_ETCD to its path)";

    /// The etcd binary: `$FERRY_ETCD`, else `etcd` on `PATH`, else `/usr/bin/etcd`.
    pub fn binary() -> Option<PathBuf> {
        if let Some(p) = std::env::var_os("FERRY_ETCD") {
            return Some(PathBuf::from(p));
        }
        let on_path = std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join("etcd"))
                .find(|p| p.is_file())
        });
        on_path.or_else(|| Some(PathBuf::from("/usr/bin/etcd")).filter(|p| p.is_file()))
    }

    /// Start etcd, or `None` (with a line on stderr saying why the caller
    /// skips) when the binary is not installed. Its data is in memory where
    /// the machine has a RAM-backed `/dev/shm` (etcd fsyncs every write).
    pub fn start() -> Option<TestEtcd> {
        Self::start_in(Path::new("/dev/shm").is_dir().then_some(Path::new("/dev/shm")))
    }

    /// [`TestEtcd::start`] with its data in the system's temporary directory
    /// (on disk, for benchmarks).
    pub fn start_on_disk() -> Option<TestEtcd> {
        Self::start_in(None)
    }

    /// [`TestEtcd::start`] serving TLS only and requiring client
    /// certificates (`--client-cert-auth`), from a CA of its own; its
    /// [`TestEtcd::options`] carry the CA and a client certificate.
    pub fn start_tls() -> Option<TestEtcd> {
        let mut etcd = Self::start_in(None)?;
        etcd.stop();
        let pki = etcd.dir.path().join("pki");
        std::fs::create_dir_all(&pki).expect("pki directory");
        let material = crate::server::tls::ensure_certs(etcd.dir.path(), &["127.0.0.1".into()])
            .expect("certificates for etcd");
        let (client_cert, client_key) =
            crate::server::tls::sign_client_cert(&material, "ferry-hub", &[], 1).expect("client certificate");
        let write = |name: &str, pem: &str| {
            let path = pki.join(name);
            std::fs::write(&path, pem).expect("write certificate");
            path
        };
        etcd.tls = Some([
            write("ca.crt", &material.ca_cert_pem),
            write("client.crt", &client_cert),
            write("client.key", &client_key),
        ]);
        write("etcd.crt", &material.serving_cert_pem);
        write("etcd.key", &material.serving_key_pem);
        etcd.resume();
        Some(etcd)
    }

    fn start_in(parent: Option<&Path>) -> Option<TestEtcd> {
        let Some(binary) = Self::binary() else {
            eprintln!("skipping: {}", Self::MISSING);
            return None;
        };
        let dir = match parent {
            Some(p) => tempfile::tempdir_in(p),
            None => tempfile::tempdir(),
        }
        .expect("temporary directory for etcd");
        let mut etcd = TestEtcd {
            child: None,
            binary,
            dir,
            client_port: Self::free_port(),
            peer_port: Self::free_port(),
            metrics_port: Self::free_port(),
            tls: None,
            name: "test".into(),
            initial_cluster: None,
        };
        etcd.resume();
        Some(etcd)
    }

    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port")
    }

    /// `http://127.0.0.1:PORT` (`https://` with TLS).
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.client_port)
    }

    /// Options for a hub on this etcd, under a prefix of its own.
    pub fn options(&self) -> crate::storage::EtcdOptions {
        let mut o = crate::storage::EtcdOptions::new(vec![self.url()]);
        o.prefix = format!("/ferry-test/{}", uuid::Uuid::new_v4().simple());
        if let Some([ca, cert, key]) = &self.tls {
            o.ca_file = Some(ca.clone());
            o.cert_file = Some(cert.clone());
            o.key_file = Some(key.clone());
        }
        o
    }

    /// Stop etcd, keeping its data for [`TestEtcd::resume`].
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            drop(child.stdin.take());
            let _ = child.wait();
        }
    }

    /// (Re)start etcd on the same ports and data, and wait until it serves.
    pub fn resume(&mut self) {
        self.spawn();
        self.wait_healthy();
    }

    fn peer_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.peer_port)
    }

    /// (Re)start the etcd process without waiting for it (a member of a
    /// cluster is healthy only once a quorum runs).
    fn spawn(&mut self) {
        use std::process::{Command, Stdio};
        self.stop();
        let peer = self.peer_url();
        let initial_cluster = self
            .initial_cluster
            .clone()
            .unwrap_or_else(|| format!("{}={peer}", self.name));
        let mut tls_args: Vec<String> = Vec::new();
        if self.tls.is_some() {
            let pki = self.dir.path().join("pki");
            tls_args = vec![
                format!("--cert-file={}", pki.join("etcd.crt").display()),
                format!("--key-file={}", pki.join("etcd.key").display()),
                format!("--trusted-ca-file={}", pki.join("ca.crt").display()),
                "--client-cert-auth".into(),
            ];
        }
        let child = Command::new("sh")
            .arg("-c")
            .arg(r#""$0" "$@" & pid=$!; read -r _; kill -9 $pid; wait $pid"#)
            .arg(&self.binary)
            .arg(format!("--name={}", self.name))
            .arg(format!("--data-dir={}", self.dir.path().join("data").display()))
            .arg(format!("--listen-client-urls={}", self.url()))
            .arg(format!("--advertise-client-urls={}", self.url()))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster={initial_cluster}"))
            .arg(format!(
                "--listen-metrics-urls=http://127.0.0.1:{}",
                self.metrics_port
            ))
            .args(&tls_args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("etcd starts");
        self.child = Some(child);
    }

    fn wait_healthy(&self) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !self.healthy() {
            assert!(
                std::time::Instant::now() < deadline,
                "etcd on {} did not become healthy in 20s",
                self.url()
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Whether `GET /health` answers `"health":"true"`.
    fn healthy(&self) -> bool {
        use std::io::{Read, Write};
        let Ok(mut tcp) = std::net::TcpStream::connect(("127.0.0.1", self.metrics_port)) else {
            return false;
        };
        let _ = tcp.set_read_timeout(Some(std::time::Duration::from_secs(2)));
        let request = format!(
            "GET /health HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n",
            self.metrics_port
        );
        if tcp.write_all(request.as_bytes()).is_err() {
            return false;
        }
        let mut answer = String::new();
        let _ = tcp.read_to_string(&mut answer);
        answer.contains("\"health\":\"true\"")
    }
}

impl Drop for TestEtcd {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A three-member etcd cluster on free loopback ports (data in memory where
/// `/dev/shm` exists), each member stopped when dropped. Hubs on it are given
/// every member's URL, as `--etcd-servers` lists them.
pub struct TestEtcdCluster {
    /// The members; stop and resume them one by one to fail them.
    pub members: Vec<TestEtcd>,
}

impl TestEtcdCluster {
    /// Start three members and wait until all are healthy, or `None` (saying
    /// why on stderr) without the etcd binary.
    pub fn start() -> Option<TestEtcdCluster> {
        let shm = Path::new("/dev/shm");
        Self::start_in(shm.is_dir().then_some(shm))
    }

    /// [`TestEtcdCluster::start`] with the members' data in the system's
    /// temporary directory (on disk, for benchmarks).
    pub fn start_on_disk() -> Option<TestEtcdCluster> {
        Self::start_in(None)
    }

    fn start_in(parent: Option<&Path>) -> Option<TestEtcdCluster> {
        let Some(binary) = TestEtcd::binary() else {
            eprintln!("skipping: {}", TestEtcd::MISSING);
            return None;
        };
        let mut members: Vec<TestEtcd> = (0..3)
            .map(|i| TestEtcd {
                child: None,
                binary: binary.clone(),
                dir: match parent {
                    Some(p) => tempfile::tempdir_in(p),
                    None => tempfile::tempdir(),
                }
                .expect("temporary directory for etcd"),
                client_port: TestEtcd::free_port(),
                peer_port: TestEtcd::free_port(),
                metrics_port: TestEtcd::free_port(),
                tls: None,
                name: format!("m{i}"),
                initial_cluster: None,
            })
            .collect();
        let initial = members
            .iter()
            .map(|m| format!("{}={}", m.name, m.peer_url()))
            .collect::<Vec<_>>()
            .join(",");
        for m in &mut members {
            m.initial_cluster = Some(initial.clone());
            m.spawn();
        }
        for m in &members {
            m.wait_healthy();
        }
        Some(TestEtcdCluster { members })
    }

    /// Every member's client URL, comma-separated (`--etcd-servers`).
    pub fn urls(&self) -> String {
        self.members
            .iter()
            .map(TestEtcd::url)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Options for a hub on this cluster (all members), under a prefix of its own.
    pub fn options(&self) -> crate::storage::EtcdOptions {
        let mut o = crate::storage::EtcdOptions::new(self.members.iter().map(TestEtcd::url).collect());
        o.prefix = format!("/ferry-test/{}", uuid::Uuid::new_v4().simple());
        o
    }

    /// Kill member `i` (its data kept for [`TestEtcdCluster::resume`]).
    pub fn stop(&mut self, i: usize) {
        self.members[i].stop();
    }

    /// Restart member `i` and wait until it is healthy again.
    pub fn resume(&mut self, i: usize) {
        self.members[i].resume();
    }

    /// Kill every member.
    pub fn stop_all(&mut self) {
        for m in &mut self.members {
            m.stop();
        }
    }

    /// Restart every member together and wait until the cluster is healthy.
    pub fn resume_all(&mut self) {
        for m in &mut self.members {
            m.spawn();
        }
        for m in &self.members {
            m.wait_healthy();
        }
    }
}

/// A hub running as a separate `ferry hub` process (for crash tests and
/// benchmarks that measure the hub's own memory).
pub struct HubProcess {
    pub child: std::process::Child,
    pub url: String,
    pub kubeconfig: PathBuf,
}

impl HubProcess {
    /// Start `ferry hub` from `binary` on a free loopback port and wait for
    /// its ready line.
    pub fn spawn(binary: &Path, data_dir: &Path, extra_args: &[&str]) -> anyhow::Result<HubProcess> {
        use std::io::{BufRead, BufReader};
        use std::process::{Command, Stdio};
        let mut child = Command::new(binary)
            .arg("hub")
            .arg("--data-dir")
            .arg(data_dir)
            .args(["--listen", "127.0.0.1:0"])
            .args(extra_args)
            .env("FERRY_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        let line = lines.next().transpose()?.unwrap_or_default();
        // Keep draining stdout so the child never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines.by_ref() {});
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("https://"))
            .ok_or_else(|| anyhow::anyhow!("ferry hub did not print its URL (got {line:?})"))?
            .to_string();
        Ok(HubProcess {
            child,
            url,
            kubeconfig: data_dir.join("admin.kubeconfig"),
        })
    }

    /// Resident memory of the hub process, in bytes (Linux).
    pub fn rss_bytes(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb * 1024)
    }

    /// SIGKILL: no chance to flush anything.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for HubProcess {
    fn drop(&mut self) {
        self.kill();
    }
}
