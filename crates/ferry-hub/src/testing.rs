//! Starting hubs for tests and demos: a hub on a free loopback port with its
//! state in a temporary directory, and `kubectl` pointed at it.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::server::{start, HubOptions, RunningHub};

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

/// A hub on `127.0.0.1:<free port>` whose data lives as long as this value.
pub struct TestHub {
    pub running: RunningHub,
    dir: Option<tempfile::TempDir>,
    data_dir: PathBuf,
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
        adjust(&mut opts);
        let running = start(opts).await.expect("hub starts");
        TestHub {
            running,
            dir: Some(dir),
            data_dir,
        }
    }

    /// Start a hub over an existing data directory (which the caller owns).
    pub async fn start_in(data_dir: &Path) -> TestHub {
        let mut opts = HubOptions::new(data_dir);
        opts.listen = "127.0.0.1:0".parse().expect("address");
        let running = start(opts).await.expect("hub starts");
        TestHub {
            running,
            dir: None,
            data_dir: data_dir.to_path_buf(),
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

    /// Keep the data directory after this value is dropped (for restarts).
    pub fn into_parts(mut self) -> (RunningHub, Option<tempfile::TempDir>) {
        let dir = self.dir.take();
        (self.running, dir)
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
