//! Secrets' data and tokens never appear in the hub's logs, even at trace level.

use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

#[tokio::test(flavor = "multi_thread")]
async fn secret_values_and_tokens_stay_out_of_trace_logs() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("hub.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["-v", "5", "hub", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .env("FERRY_LOG", "trace")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let kubeconfig = dir.path().join("admin.kubeconfig");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !kubeconfig.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the hub never wrote its kubeconfig"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let kc = Kubeconfig::read_from(&kubeconfig).unwrap();
    let client = kube::Client::try_from(
        kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .unwrap(),
    )
    .unwrap();

    let plaintext = "swordfish-7d1c";
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "s"}, "stringData": {"password": plaintext}
    }))
    .unwrap();
    Api::<Secret>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let request: TokenRequest =
        serde_json::from_value(serde_json::json!({"spec": {"audiences": []}})).unwrap();
    let token = Api::<ServiceAccount>::namespaced(client.clone(), "default")
        .create_token_request("default", &PostParams::default(), &request)
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    // A rejected credential must not be echoed either.
    let mut bad = kube::Config::from_custom_kubeconfig(
        Kubeconfig::read_from(&kubeconfig).unwrap(),
        &KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    bad.auth_info.token = Some("bogus-token-4b2e".to_string().into());
    let _ = Api::<Secret>::namespaced(kube::Client::try_from(bad).unwrap(), "default")
        .get("s")
        .await;
    let admin_token = std::fs::read_to_string(dir.path().join("admin.token")).unwrap();

    let _ = child.kill();
    let _ = child.wait();
    let logs = std::fs::read_to_string(&log).unwrap();
    assert!(logs.len() > 100, "trace logging produced almost nothing: {logs}");
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(plaintext);
    for (what, needle) in [
        ("secret value", plaintext),
        ("base64 secret value", encoded.as_str()),
        ("service-account token", token.as_str()),
        ("rejected token", "bogus-token-4b2e"),
        ("admin token", admin_token.trim()),
    ] {
        assert!(!logs.contains(needle), "the {what} appears in the hub's logs");
    }
}
