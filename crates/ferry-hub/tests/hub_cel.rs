//! CRD `x-kubernetes-validations` (CEL) rules, end to end with kube-rs and
//! kubectl: valid custom resources are stored, invalid ones get
//! kube-apiserver's 422, and a rule that does not compile refuses its CRD.

mod common;

use common::{call, eventually, expect_status, expect_status_because, post_created, put_ok};
use ferry_testkit::TestHub;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::{json, Value};

const CRDS_PATH: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const SCALERS: &str = "/apis/cel.example.com/v1/namespaces/default/scalers";

/// `scalers.cel.example.com` with `spec_rules` on `spec`.
fn crd(spec_rules: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "scalers.cel.example.com"},
        "spec": {
            "group": "cel.example.com",
            "scope": "Namespaced",
            "names": {"plural": "scalers", "singular": "scaler", "kind": "Scaler", "listKind": "ScalerList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
                    "type": "object",
                    "x-kubernetes-validations": spec_rules,
                    "properties": {
                        "replicas": {"type": "integer"},
                        "minReplicas": {"type": "integer"},
                        "class": {
                            "type": "string",
                            "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "class is immutable"}],
                        },
                        "ports": {"type": "array", "maxItems": 16, "items": {"type": "integer"}},
                    },
                }}}},
            }],
        },
    })
}

fn rules() -> Value {
    json!([
        {"rule": "self.minReplicas <= self.replicas", "message": "minReplicas must not exceed replicas"},
        {"rule": "self.replicas <= 100",
         "messageExpression": "'replicas is ' + string(self.replicas) + ', at most 100 are allowed'"},
        {"rule": "!has(self.ports) || self.ports.all(p, p > 0 && p < 65536)",
         "message": "ports must be 1-65535", "fieldPath": ".ports", "reason": "FieldValueForbidden"},
    ])
}

async fn install(client: &kube::Client) {
    expect_status_because(
        client,
        "POST",
        CRDS_PATH,
        Some(&crd(rules())),
        201,
        "creating the CRD",
    )
    .await;
    eventually(20, "scalers to be served", || async move {
        (call(client, "GET", SCALERS, None).await.0 == 200).then_some(())
    })
    .await;
}

fn scaler(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "cel.example.com/v1", "kind": "Scaler", "metadata": {"name": name}, "spec": spec})
}

fn api(client: &kube::Client) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: "cel.example.com".into(),
        version: "v1".into(),
        api_version: "cel.example.com/v1".into(),
        kind: "Scaler".into(),
        plural: "scalers".into(),
    };
    Api::namespaced_with(client.clone(), "default", &ar)
}

fn dynamic(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(scaler(name, spec)).expect("scaler")
}

/// The 422 kube-rs saw, as (message, [(reason, field)]).
fn invalid(err: kube::Error) -> String {
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 422, "{s:?}");
            assert_eq!(s.reason, "Invalid", "{s:?}");
            s.message
        }
        other => panic!("expected a 422, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cel_rules_accept_valid_and_refuse_invalid_custom_resources() {
    let hub = TestHub::start().await;
    let client = hub.client("root").await;
    install(&client).await;
    let scalers = api(&client);
    let pp = PostParams::default();

    scalers
        .create(
            &pp,
            &dynamic(
                "ok",
                json!({"replicas": 3, "minReplicas": 1, "class": "gold", "ports": [80]}),
            ),
        )
        .await
        .expect("a valid scaler is stored");

    for (name, spec, refusal) in [
        (
            "low",
            json!({"replicas": 1, "minReplicas": 3}),
            "Scaler.cel.example.com \"low\" is invalid: spec: Invalid value: \"object\": minReplicas must not exceed replicas",
        ),
        (
            "big",
            json!({"replicas": 500, "minReplicas": 1}),
            "Scaler.cel.example.com \"big\" is invalid: spec: Invalid value: \"object\": replicas is 500, at most 100 are allowed",
        ),
    ] {
        let msg = invalid(scalers.create(&pp, &dynamic(name, spec)).await.unwrap_err());
        assert_eq!(msg, refusal);
    }

    // fieldPath and reason reach the Status cause.
    let body = expect_status(
        &client,
        "POST",
        SCALERS,
        Some(&scaler(
            "ports",
            json!({"replicas": 1, "minReplicas": 1, "ports": [0]}),
        )),
        422,
    )
    .await;
    assert_eq!(
        body["details"]["causes"],
        json!([{"reason": "FieldValueForbidden", "field": "spec.ports", "message": "Forbidden: ports must be 1-65535"}]),
        "{body}"
    );

    // The transition rule: `class` may not change once set.
    let patch = Patch::Merge(json!({"spec": {"class": "silver"}}));
    let msg = invalid(
        scalers
            .patch("ok", &PatchParams::default(), &patch)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        msg,
        "Scaler.cel.example.com \"ok\" is invalid: spec.class: Invalid value: \"string\": class is immutable"
    );
    let patch = Patch::Merge(json!({"spec": {"replicas": 4}}));
    scalers
        .patch("ok", &PatchParams::default(), &patch)
        .await
        .expect("an update that keeps class is stored");
    // An update that breaks a plain rule is refused too.
    let patch = Patch::Merge(json!({"spec": {"minReplicas": 9}}));
    invalid(
        scalers
            .patch("ok", &PatchParams::default(), &patch)
            .await
            .unwrap_err(),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_sees_cel_rule_failures() {
    let hub = TestHub::start().await;
    let client = hub.client("root").await;
    install(&client).await;
    let good = "apiVersion: cel.example.com/v1\nkind: Scaler\nmetadata: {name: k, namespace: default}\nspec: {replicas: 2, minReplicas: 1}\n";
    let out = hub.kubectl_stdin(&["apply", "-f", "-"], Some(good));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let bad = good.replace("minReplicas: 1", "minReplicas: 5");
    let out = hub.kubectl_stdin(&["apply", "-f", "-"], Some(&bad));
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "The Scaler \"k\" is invalid: spec: Invalid value: \"object\": minReplicas must not exceed replicas"
        ),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_that_does_not_compile_refuses_the_crd() {
    let hub = TestHub::start().await;
    let client = hub.client("root").await;
    let body = expect_status(
        &client,
        "POST",
        CRDS_PATH,
        Some(&crd(json!([{"rule": "self.minReplicas <="}]))),
        422,
    )
    .await;
    let field = "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule";
    assert_eq!(body["details"]["causes"][0]["field"], field, "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!(
            "CustomResourceDefinition.apiextensions.k8s.io \"scalers.cel.example.com\" is invalid: \
             {field}: Invalid value: \"self.minReplicas <=\": compilation failed: "
        )),
        "{message}"
    );
    // Nothing was stored: the same CRD with valid rules is created afresh.
    let body = post_created(&client, CRDS_PATH, &crd(rules())).await;
    // And an update that breaks a rule is refused as well.
    let mut broken = body.clone();
    broken["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        ["x-kubernetes-validations"][0]["rule"] = json!("self.(");
    expect_status(
        &client,
        "PUT",
        &format!("{CRDS_PATH}/scalers.cel.example.com"),
        Some(&broken),
        422,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn editing_a_rule_takes_effect_for_the_next_write() {
    let hub = TestHub::start().await;
    let client = hub.client("root").await;
    install(&client).await;
    post_created(
        &client,
        SCALERS,
        &scaler("a", json!({"replicas": 50, "minReplicas": 1})),
    )
    .await;
    let (_, mut current) = call(
        &client,
        "GET",
        &format!("{CRDS_PATH}/scalers.cel.example.com"),
        None,
    )
    .await;
    current["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        ["x-kubernetes-validations"][1] = json!({"rule": "self.replicas <= 10", "message": "at most 10"});
    put_ok(&client, &format!("{CRDS_PATH}/scalers.cel.example.com"), &current).await;
    eventually(20, "the edited rule to apply", || {
        let client = client.clone();
        async move {
            let (code, body) = call(
                &client,
                "POST",
                SCALERS,
                Some(&scaler("b", json!({"replicas": 50, "minReplicas": 1}))),
            )
            .await;
            (code == 422
                && body["message"]
                    .as_str()
                    .unwrap_or_default()
                    .ends_with("at most 10"))
            .then_some(())
        }
    })
    .await;
}
