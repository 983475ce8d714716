//! Shared test helpers: kube clients for a test hub, and polling with a deadline.
#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use ferry_hub::testing::TestHub;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// A kube-rs client for `hub`, addressing `workspace` (a kcp path like `root:a`, or `*`).
pub async fn client(hub: &TestHub, workspace: &str) -> kube::Client {
    let kc = Kubeconfig::read_from(hub.kubeconfig()).expect("kubeconfig parses");
    let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("config");
    config.cluster_url = format!("{}/clusters/{workspace}", hub.url())
        .parse()
        .expect("url");
    kube::Client::try_from(config).expect("client")
}

/// Poll `check` every 20 ms until it returns `Some`, or panic after `secs`.
pub async fn eventually<T, F, Fut>(secs: u64, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out after {secs}s waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
