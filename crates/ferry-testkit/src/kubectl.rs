//! kubectl as a user runs it: real kubectl with the built `kubectl-ferry`
//! plugin on PATH, its own KUBECONFIG and HOME (also the working directory,
//! where files a command writes land). [`Kubectl`] blocks the calling
//! thread; [`AsyncKubectl`] runs the same commands off an async runtime's
//! threads and can feed standard input and run a document's shell blocks.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::TestHub;

/// Where cargo put the workspace's binaries (`ferry`, `kubectl-ferry`) for
/// the running test: the test executable is in `target/<profile>/deps/`,
/// the binaries one level up. A test of `ferry-cli` has them built.
pub fn binaries_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let deps = exe.parent().expect("the test executable's directory");
    let dir = match deps.file_name() {
        Some(name) if name == "deps" => deps.parent().expect("the target directory"),
        _ => deps,
    };
    assert!(
        dir.join("kubectl-ferry").exists(),
        "kubectl-ferry is not built in {}: run the test through `cargo test -p ferry-cli`",
        dir.display()
    );
    dir.to_path_buf()
}

/// A copy of the hub's admin kubeconfig (at root) in `dir` to edit.
pub fn admin_copy(hub: &TestHub, dir: &Path) -> PathBuf {
    admin_copy_as(hub, dir, "admin.kubeconfig")
}

/// A copy of the hub's admin kubeconfig (at root) kept in `dir` as `file`.
pub fn admin_copy_as(hub: &TestHub, dir: &Path, file: &str) -> PathBuf {
    let kubeconfig = dir.join(file);
    std::fs::copy(hub.kubeconfig(), &kubeconfig).expect("copying the admin kubeconfig");
    kubeconfig
}

/// kubectl with `kubectl-ferry` on PATH and KUBECONFIG set.
#[derive(Clone)]
pub struct Kubectl {
    /// KUBECONFIG: one file, or several joined as kubectl reads them.
    pub kubeconfig: PathBuf,
    path: OsString,
    home: PathBuf,
}

impl Kubectl {
    pub fn new(kubeconfig: impl Into<PathBuf>, home: &Path) -> Kubectl {
        let mut dirs = vec![binaries_dir()];
        dirs.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        Kubectl {
            kubeconfig: kubeconfig.into(),
            path: std::env::join_paths(dirs).expect("PATH"),
            home: home.to_path_buf(),
        }
    }

    /// kubectl on a copy of `hub`'s admin kubeconfig (at root), kept in `dir`
    /// as `file`; `dir` is its HOME.
    pub fn admin_of(hub: &TestHub, dir: &Path, file: &str) -> Kubectl {
        Kubectl::new(admin_copy_as(hub, dir, file), dir)
    }

    /// `program` in this kubectl's environment: KUBECONFIG, PATH (the built
    /// binaries first), HOME, and short errors (no backtraces).
    fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.env("KUBECONFIG", &self.kubeconfig)
            .env("PATH", &self.path)
            .env("HOME", &self.home)
            .env("RUST_BACKTRACE", "0");
        cmd
    }

    /// Runs `kubectl ARGS` in HOME, feeding `stdin`.
    pub fn run_with(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = self.command("kubectl");
        cmd.args(args).current_dir(&self.home);
        crate::output_feeding(cmd, stdin)
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.run_with(args, None)
    }

    /// Run; it must succeed; its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        succeeded(args, self.run(args))
    }

    /// Run; it must succeed; stdout and stderr together, as a terminal shows them.
    pub fn ok_all(&self, args: &[&str]) -> String {
        let out = self.run(args);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "kubectl {args:?} failed: {stdout}{stderr}");
        stdout + &stderr
    }

    /// Run; it must fail without touching `file`; its stderr.
    pub fn fails(&self, args: &[&str], file: &Path) -> String {
        let before = std::fs::read(file).expect("reading the kubeconfig");
        let stderr = failed(args, self.run(args));
        assert_eq!(
            std::fs::read(file).expect("reading the kubeconfig"),
            before,
            "kubectl {args:?} changed the kubeconfig"
        );
        stderr
    }

    /// Runs `script` in `bash -euo pipefail` in `dir`, in this kubectl's
    /// environment: a document's shell block as a user pastes it.
    pub fn shell(&self, script: &str, dir: &Path) -> Output {
        self.command("bash")
            .args(["-euo", "pipefail", "-c", script])
            .current_dir(dir)
            .stdin(Stdio::null())
            .output()
            .expect("bash runs")
    }
}

/// The stdout of a kubectl run that must have succeeded.
fn succeeded(args: &[&str], out: Output) -> String {
    assert!(
        out.status.success(),
        "kubectl {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The stderr of a kubectl run that must have failed.
fn failed(args: &[&str], out: Output) -> String {
    assert!(
        !out.status.success(),
        "kubectl {args:?} succeeded: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// [`Kubectl`] for tests on an async runtime: each run happens on a
/// blocking thread, so the hubs the test started keep serving meanwhile.
#[derive(Clone)]
pub struct AsyncKubectl {
    /// The blocking face, with the same environment.
    pub blocking: Kubectl,
    /// KUBECONFIG.
    pub kubeconfig: PathBuf,
}

impl AsyncKubectl {
    pub fn new(kubeconfig: PathBuf, home: &Path) -> AsyncKubectl {
        Kubectl::new(kubeconfig, home).into()
    }

    /// See [`Kubectl::admin_of`].
    pub fn admin_of(hub: &TestHub, dir: &Path, file: &str) -> AsyncKubectl {
        Kubectl::admin_of(hub, dir, file).into()
    }

    /// Runs `kubectl ARGS` (feeding `stdin`).
    pub async fn run_with(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let kubectl = self.blocking.clone();
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let stdin = stdin.map(str::to_string);
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            kubectl.run_with(&args, stdin.as_deref())
        })
        .await
        .expect("kubectl's thread")
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
        succeeded(args, self.run_with(args, stdin).await)
    }

    /// See [`Kubectl::shell`].
    pub async fn shell(&self, script: &str, dir: &Path) -> Output {
        let kubectl = self.blocking.clone();
        let (script, dir) = (script.to_string(), dir.to_path_buf());
        tokio::task::spawn_blocking(move || kubectl.shell(&script, &dir))
            .await
            .expect("bash's thread")
    }

    /// Runs; it must fail; its stderr.
    pub async fn fails(&self, args: &[&str]) -> String {
        failed(args, self.run(args).await)
    }
}

impl From<Kubectl> for AsyncKubectl {
    fn from(blocking: Kubectl) -> AsyncKubectl {
        AsyncKubectl {
            kubeconfig: blocking.kubeconfig.clone(),
            blocking,
        }
    }
}
