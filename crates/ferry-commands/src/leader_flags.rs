//! `--enable-leader-election` and client-go's `--leader-elect-*` timing flags,
//! shared by `ferry syncer` and `ferry syncagent`.

use std::time::Duration;

use ferry_syncer::leader::LeaderElectionConfig;

/// Leader election flags (names as client-go's components and controller-runtime's
/// managers have them).
#[derive(clap::Args, Clone, Debug)]
pub struct LeaderElectionArgs {
    /// Run as one of several replicas: sync only while holding a coordination.k8s.io/v1
    /// Lease in the cluster this process syncs to (a standby takes over within
    /// --leader-elect-lease-duration once the holder dies; a holder that loses the Lease
    /// stops syncing and exits, to come back as a standby).
    #[arg(long, visible_alias = "leader-elect", default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub enable_leader_election: bool,
    /// How long a standby waits after the Lease last changed before taking it over.
    #[arg(long, default_value = "15s", value_parser = crate::kubeconfig::parse_duration)]
    pub leader_elect_lease_duration: Duration,
    /// How long the holder keeps trying to renew the Lease before it stops syncing.
    #[arg(long, default_value = "10s", value_parser = crate::kubeconfig::parse_duration)]
    pub leader_elect_renew_deadline: Duration,
    /// How often replicas try to acquire, and the holder renews, the Lease.
    #[arg(long, default_value = "2s", value_parser = crate::kubeconfig::parse_duration)]
    pub leader_elect_retry_period: Duration,
}

impl LeaderElectionArgs {
    /// The election for the Lease `namespace/name`, if enabled.
    pub fn config(&self, namespace: &str, name: &str) -> anyhow::Result<Option<LeaderElectionConfig>> {
        if !self.enable_leader_election {
            return Ok(None);
        }
        let mut config = LeaderElectionConfig::new(namespace, name);
        config.lease_duration = self.leader_elect_lease_duration;
        config.renew_deadline = self.leader_elect_renew_deadline;
        config.retry_period = self.leader_elect_retry_period;
        config.validate()?;
        Ok(Some(config))
    }
}

/// The namespace this process runs in: `$NAMESPACE` (the generated manifests set it
/// from the pod), else the pod's service account's, else `default`.
pub fn own_namespace() -> String {
    std::env::var("NAMESPACE")
        .ok()
        .filter(|n| !n.is_empty())
        .or_else(|| std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace").ok())
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: LeaderElectionArgs,
    }

    #[test]
    fn off_by_default_and_client_go_timings_when_on() {
        let off = Cli::try_parse_from(["x"]).unwrap().args;
        assert!(off.config("ns", "l").unwrap().is_none());
        let on = Cli::try_parse_from(["x", "--leader-elect"]).unwrap().args;
        let c = on.config("ns", "syncagent.nora").unwrap().unwrap();
        assert_eq!((c.namespace.as_str(), c.name.as_str()), ("ns", "syncagent.nora"));
        assert_eq!(c.lease_duration, Duration::from_secs(15));
        assert_eq!(c.renew_deadline, Duration::from_secs(10));
        assert_eq!(c.retry_period, Duration::from_secs(2));
        let bad = Cli::try_parse_from([
            "x",
            "--enable-leader-election",
            "--leader-elect-lease-duration=5s",
        ])
        .unwrap()
        .args;
        let err = bad.config("ns", "l").unwrap_err().to_string();
        assert!(err.contains("--leader-elect-renew-deadline"), "{err}");
    }
}
