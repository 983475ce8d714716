//! What a real cluster serves besides the objects clients write: the
//! `default/kubernetes` Service, `componentstatuses`, GET on listed
//! subresources, per-kind field selectors, full OpenAPI schemas for
//! `kubectl explain`, and kube-apiserver's key order.

mod common;

use ferry_hub::testing::TestHub;

fn ok(out: std::process::Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{what} failed:\nstdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_explain_describes_any_field_of_a_built_in_kind() {
    let hub = TestHub::start().await;
    let replicas = ok(
        hub.kubectl(&["explain", "deployment.spec.replicas"]),
        "explain replicas",
    );
    assert!(replicas.contains("FIELD: replicas <integer>"), "{replicas}");
    assert!(replicas.contains("Number of desired pods"), "{replicas}");
    let image = ok(
        hub.kubectl(&["explain", "pod.spec.containers.image"]),
        "explain image",
    );
    assert!(image.contains("Container image name"), "{image}");
    let recursive = ok(
        hub.kubectl(&["explain", "deployment.spec.strategy", "--recursive"]),
        "explain --recursive",
    );
    assert!(
        recursive.contains("rollingUpdate") && recursive.contains("maxSurge"),
        "{recursive}"
    );
    let labels = ok(
        hub.kubectl(&["explain", "configmap.metadata.labels"]),
        "explain labels",
    );
    assert!(labels.contains("map[string]string"), "{labels}");
}
