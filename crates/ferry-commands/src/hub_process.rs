//! A hub running as a separate `ferry hub` process, for crash tests and
//! benchmarks that measure the hub's own memory. It lives beside the `hub`
//! command, whose ready line it reads.

use std::path::{Path, PathBuf};

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
