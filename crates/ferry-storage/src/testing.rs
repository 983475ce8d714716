//! etcd processes for tests of `--storage etcd`: one member or a
//! three-member cluster on free loopback ports, stopped when dropped.

use std::path::{Path, PathBuf};

use crate::EtcdOptions;

/// PEM material for an etcd that serves TLS only and requires client
/// certificates: a CA, etcd's serving certificate and key (for
/// `127.0.0.1`), and a client certificate and key signed by the CA.
pub struct EtcdPki {
    pub ca_cert: String,
    pub serving_cert: String,
    pub serving_key: String,
    pub client_cert: String,
    pub client_key: String,
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
    /// certificates (`--client-cert-auth`) from `pki`'s CA; its
    /// [`TestEtcd::options`] carry the CA and the client certificate.
    pub fn start_tls(pki: EtcdPki) -> Option<TestEtcd> {
        let mut etcd = Self::start_in(None)?;
        etcd.stop();
        let dir = etcd.dir.path().join("pki");
        std::fs::create_dir_all(&dir).expect("pki directory");
        let write = |name: &str, pem: &str| {
            let path = dir.join(name);
            std::fs::write(&path, pem).expect("write certificate");
            path
        };
        etcd.tls = Some([
            write("ca.crt", &pki.ca_cert),
            write("client.crt", &pki.client_cert),
            write("client.key", &pki.client_key),
        ]);
        write("etcd.crt", &pki.serving_cert);
        write("etcd.key", &pki.serving_key);
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
            client_port: free_port(),
            peer_port: free_port(),
            metrics_port: free_port(),
            tls: None,
            name: "test".into(),
            initial_cluster: None,
        };
        etcd.resume();
        Some(etcd)
    }

    /// `http://127.0.0.1:PORT` (`https://` with TLS).
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.client_port)
    }

    /// Options for a hub on this etcd, under a prefix of its own.
    pub fn options(&self) -> EtcdOptions {
        let mut o = EtcdOptions::new(vec![self.url()]);
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
                client_port: free_port(),
                peer_port: free_port(),
                metrics_port: free_port(),
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
    pub fn options(&self) -> EtcdOptions {
        let mut o = EtcdOptions::new(self.members.iter().map(TestEtcd::url).collect());
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

/// A free loopback port below the kernel's ephemeral range, for a server a test
/// starts (an etcd member, a hub, a browser driver). A port found by
/// binding port 0 is free only until the kernel hands it out again — to an
/// outgoing connection or a hub binding port 0 in a test running beside — and
/// etcd, started a moment later, then cannot bind it (a three-member cluster
/// never became healthy in two runs of the suite that way).
pub fn free_port() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .filter(|low| *low > 11_000)
        .unwrap_or(32_768);
    for _ in 0..1_000 {
        // A fresh random number per call, without another dependency.
        let random = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        let port = 10_000 + (random % u64::from(ephemeral_low - 10_000)) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}
