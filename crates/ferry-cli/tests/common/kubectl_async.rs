//! The async twin of `kubectl.rs`, for tests on the async runtime (it runs kubectl off
//! the runtime's threads and can feed standard input).
//!
//! Real kubectl, with the built `kubectl-ferry` plugin on PATH and a kubeconfig of
//! the test's own (so `kubectl ferry ws` may edit it), as a user runs the
//! documents' commands.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use ferry_hub::testing::TestHub;

/// kubectl with `kubectl-ferry` on PATH and KUBECONFIG set.
pub struct Kubectl {
    pub kubeconfig: PathBuf,
    path: OsString,
    home: PathBuf,
}

impl Kubectl {
    /// kubectl on a copy of `hub`'s admin kubeconfig (at root), kept in `dir`
    /// as `file`.
    pub fn admin_of(hub: &TestHub, dir: &Path, file: &str) -> Kubectl {
        let kubeconfig = dir.join(file);
        std::fs::copy(hub.kubeconfig(), &kubeconfig).unwrap();
        Kubectl::new(kubeconfig, dir)
    }

    pub fn new(kubeconfig: PathBuf, home: &Path) -> Kubectl {
        let plugin_dir = Path::new(env!("CARGO_BIN_EXE_kubectl-ferry")).parent().unwrap();
        let mut dirs = vec![plugin_dir.to_path_buf()];
        dirs.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        Kubectl {
            kubeconfig,
            path: std::env::join_paths(dirs).unwrap(),
            home: home.to_path_buf(),
        }
    }

    /// Runs `kubectl ARGS` (feeding `stdin`), off the async runtime's threads.
    pub async fn run_with(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = Command::new("kubectl");
        cmd.args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("PATH", &self.path)
            .env("HOME", &self.home)
            .env("RUST_BACKTRACE", "0")
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let stdin = stdin.map(str::to_string);
        tokio::task::spawn_blocking(move || {
            use std::io::Write;
            let mut child = cmd.spawn().expect("kubectl is installed");
            if let Some(input) = stdin {
                child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
            }
            child.wait_with_output().expect("kubectl runs")
        })
        .await
        .unwrap()
    }

    pub async fn run(&self, args: &[&str]) -> Output {
        self.run_with(args, None).await
    }

    /// Runs; it must succeed; its stdout.
    pub async fn ok(&self, args: &[&str]) -> String {
        self.ok_with(args, None).await
    }

    /// Runs with `stdin`; it must succeed; its stdout.
    pub async fn ok_with(&self, args: &[&str], stdin: Option<&str>) -> String {
        let out = self.run_with(args, stdin).await;
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    /// Runs `script` in `bash -euo pipefail` in `dir`, with this kubectl's KUBECONFIG,
    /// PATH (the built `ferry` and `kubectl-ferry` first) and HOME: a document's
    /// shell block as a user pastes it.
    pub async fn shell(&self, script: &str, dir: &Path) -> Output {
        let mut cmd = Command::new("bash");
        cmd.args(["-euo", "pipefail", "-c", script])
            .env("KUBECONFIG", &self.kubeconfig)
            .env("PATH", &self.path)
            .env("HOME", &self.home)
            .env("RUST_BACKTRACE", "0")
            .current_dir(dir)
            .stdin(Stdio::null());
        tokio::task::spawn_blocking(move || cmd.output().expect("bash runs"))
            .await
            .unwrap()
    }

    /// Runs; it must fail; its stderr.
    pub async fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        assert!(
            !out.status.success(),
            "kubectl {args:?} succeeded: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stderr).to_string()
    }
}
