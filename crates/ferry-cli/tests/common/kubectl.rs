//! kubectl as a user runs it: real kubectl with the built `kubectl-ferry`
//! plugin on PATH, its own KUBECONFIG and HOME (also the working directory,
//! where files a command writes land).

#![allow(dead_code)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ferry_hub::testing::TestHub;

/// kubectl with `kubectl-ferry` on PATH and KUBECONFIG set.
pub struct Kubectl {
    kubeconfig: OsString,
    path: OsString,
    home: PathBuf,
}

impl Kubectl {
    pub fn new(kubeconfig: impl Into<OsString>, home: &Path) -> Kubectl {
        let plugin_dir = Path::new(env!("CARGO_BIN_EXE_kubectl-ferry")).parent().unwrap();
        let mut dirs = vec![plugin_dir.to_path_buf()];
        dirs.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        Kubectl {
            kubeconfig: kubeconfig.into(),
            path: std::env::join_paths(dirs).unwrap(),
            home: home.to_path_buf(),
        }
    }

    pub fn run(&self, args: &[&str]) -> Output {
        Command::new("kubectl")
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("PATH", &self.path)
            .env("HOME", &self.home)
            .env("RUST_BACKTRACE", "0")
            .current_dir(&self.home)
            .output()
            .expect("kubectl runs")
    }

    /// Run; it must succeed; its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
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
        let before = std::fs::read(file).unwrap();
        let out = self.run(args);
        assert!(
            !out.status.success(),
            "kubectl {args:?} succeeded: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert_eq!(
            std::fs::read(file).unwrap(),
            before,
            "kubectl {args:?} changed the kubeconfig"
        );
        String::from_utf8(out.stderr).unwrap()
    }
}

/// A copy of the hub's admin kubeconfig (at root) to edit.
pub fn admin_copy(hub: &TestHub, dir: &Path) -> PathBuf {
    let file = dir.join("admin.kubeconfig");
    std::fs::copy(hub.kubeconfig(), &file).unwrap();
    file
}
