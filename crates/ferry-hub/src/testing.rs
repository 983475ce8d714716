//! Starting hubs for tests and demos: a hub on a free loopback port with its
//! state in a temporary directory, and `kubectl` pointed at it.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::server::{start, HubOptions, RunningHub};

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
