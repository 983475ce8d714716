//! Every built-in resource of a Kubernetes 1.36 API server is served, so a
//! chart's cluster-level objects (webhook configurations, PriorityClasses,
//! RuntimeClasses, CSI drivers, ...) can be written into a workspace: kubectl
//! applies, lists and explains them, and the hub refuses what kube refuses.

mod common;

use common::ok;
use ferry_testkit::TestHub;
use serde_json::{json, Value};

const CHART: &str = include_str!("data/builtins/chart.yaml");

/// What `kubectl api-resources` of a 1.36 API server lists that the hub
/// once lacked (`bindings`, pods' create-only binding, is deliberately not
/// served: the hub schedules nothing).
const KUBE_1_36_RESOURCES: &[(&str, &str)] = &[
    ("mutatingwebhookconfigurations", "admissionregistration.k8s.io/v1"),
    (
        "validatingwebhookconfigurations",
        "admissionregistration.k8s.io/v1",
    ),
    ("validatingadmissionpolicies", "admissionregistration.k8s.io/v1"),
    (
        "validatingadmissionpolicybindings",
        "admissionregistration.k8s.io/v1",
    ),
    ("mutatingadmissionpolicies", "admissionregistration.k8s.io/v1"),
    (
        "mutatingadmissionpolicybindings",
        "admissionregistration.k8s.io/v1",
    ),
    ("priorityclasses", "scheduling.k8s.io/v1"),
    ("runtimeclasses", "node.k8s.io/v1"),
    ("csidrivers", "storage.k8s.io/v1"),
    ("csinodes", "storage.k8s.io/v1"),
    ("csistoragecapacities", "storage.k8s.io/v1"),
    ("volumeattachments", "storage.k8s.io/v1"),
    ("volumeattributesclasses", "storage.k8s.io/v1"),
    ("flowschemas", "flowcontrol.apiserver.k8s.io/v1"),
    ("prioritylevelconfigurations", "flowcontrol.apiserver.k8s.io/v1"),
    ("deviceclasses", "resource.k8s.io/v1"),
    ("resourceclaims", "resource.k8s.io/v1"),
    ("resourceclaimtemplates", "resource.k8s.io/v1"),
    ("resourceslices", "resource.k8s.io/v1"),
    ("ipaddresses", "networking.k8s.io/v1"),
    ("servicecidrs", "networking.k8s.io/v1"),
];

#[tokio::test(flavor = "multi_thread")]
async fn api_resources_lists_every_builtin_of_kube_1_36() {
    let hub = TestHub::start().await;
    let listed = ok(hub.kubectl(&["api-resources", "--no-headers"]), "api-resources");
    for (resource, group_version) in KUBE_1_36_RESOURCES {
        assert!(
            listed.lines().any(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.first() == Some(resource) && cols.contains(group_version)
            }),
            "{resource} ({group_version}) missing from api-resources:\n{listed}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_apply_of_chart_kinds_succeeds_and_get_shows_kubes_columns() {
    let hub = TestHub::start().await;
    let applied = ok(hub.kubectl_stdin(&["apply", "-f", "-"], Some(CHART)), "apply");
    assert!(
        applied.contains("validatingwebhookconfiguration.admissionregistration.k8s.io/demo-webhook created"),
        "{applied}"
    );
    assert_eq!(
        applied.lines().filter(|l| l.ends_with(" created")).count(),
        17,
        "{applied}"
    );

    // Columns as kube's printers name them, with the values kube would show.
    for (resource, header, row) in [
        (
            "validatingwebhookconfigurations",
            "NAME WEBHOOKS AGE",
            "demo-webhook 1",
        ),
        (
            "priorityclasses",
            "NAME VALUE GLOBAL-DEFAULT AGE",
            "demo-high 1000000 false",
        ),
        ("runtimeclasses", "NAME HANDLER AGE", "gvisor runsc"),
        (
            "csidrivers",
            "NAME ATTACHREQUIRED PODINFOONMOUNT STORAGECAPACITY TOKENREQUESTS REQUIRESREPUBLISH MODES AGE",
            "csi.demo.example.io true true false <unset> false Persistent,Ephemeral",
        ),
        (
            "validatingadmissionpolicies",
            "NAME VALIDATIONS PARAMKIND AGE",
            "demo-replicas 1 <unset>",
        ),
        (
            "validatingadmissionpolicybindings",
            "NAME POLICYNAME PARAMREF AGE",
            "demo-replicas demo-replicas <unset>",
        ),
        (
            "prioritylevelconfigurations",
            "NAME TYPE NOMINALCONCURRENCYSHARES QUEUES HANDSIZE QUEUELENGTHLIMIT AGE",
            "demo-controllers Limited 30 64 8 50",
        ),
        (
            "flowschemas",
            "NAME PRIORITYLEVEL MATCHINGPRECEDENCE DISTINGUISHERMETHOD AGE MISSINGPL",
            "demo-controllers demo-controllers 1000 ByUser",
        ),
        ("servicecidrs", "NAME CIDRS AGE", "extra-range 10.200.0.0/16"),
        (
            "mutatingadmissionpolicies",
            "NAME MUTATIONS PARAMKIND AGE",
            "demo-sidecar-label 1 <unset>",
        ),
        (
            "volumeattributesclasses",
            "NAME DRIVERNAME AGE",
            "fast csi.demo.example.io",
        ),
        (
            "csistoragecapacities",
            "NAME STORAGECLASSNAME CAPACITY",
            "zone-a standard 100Gi",
        ),
        (
            "ipaddresses",
            "NAME PARENTREF",
            "10.200.0.10 services/default/demo",
        ),
    ] {
        let table = ok(hub.kubectl(&["get", resource]), resource);
        let lines: Vec<String> = table
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        assert_eq!(lines[0], header, "{resource}:\n{table}");
        assert!(
            lines.iter().any(|l| l.starts_with(row)),
            "{resource}: no row starting {row:?}:\n{table}"
        );
    }
    let wide = ok(
        hub.kubectl(&["get", "pc", "demo-high", "-o", "wide"]),
        "get pc wide",
    );
    assert!(
        wide.contains("PREEMPTIONPOLICY") && wide.contains("PreemptLowerPriority"),
        "{wide}"
    );

    // kube's defaults are stored.
    let vwc: Value = serde_json::from_str(&ok(
        hub.kubectl(&[
            "get",
            "validatingwebhookconfiguration",
            "demo-webhook",
            "-o",
            "json",
        ]),
        "get vwc",
    ))
    .expect("json");
    let hook = &vwc["webhooks"][0];
    assert_eq!(hook["failurePolicy"], "Fail");
    assert_eq!(hook["matchPolicy"], "Equivalent");
    assert_eq!(hook["timeoutSeconds"], 10);
    assert_eq!(hook["namespaceSelector"], json!({}));
    assert_eq!(hook["rules"][0]["scope"], "*");
    assert_eq!(hook["clientConfig"]["service"]["port"], 443);
    let mwc: Value = serde_json::from_str(&ok(
        hub.kubectl(&[
            "get",
            "mutatingwebhookconfiguration",
            "demo-webhook",
            "-o",
            "json",
        ]),
        "get mwc",
    ))
    .expect("json");
    assert_eq!(mwc["webhooks"][0]["reinvocationPolicy"], "Never");
    assert_eq!(mwc["webhooks"][0]["failurePolicy"], "Ignore");

    // A second apply of the same chart is accepted (kubectl reports the
    // webhook whose `rules`, an atomic list, kube defaulted as `configured`,
    // as it does against kube-apiserver) and the defaults stay.
    let again = ok(
        hub.kubectl_stdin(&["apply", "-f", "-"], Some(CHART)),
        "second apply",
    );
    assert!(
        again
            .lines()
            .all(|l| l.ends_with(" unchanged") || l.ends_with(" configured")),
        "{again}"
    );
    assert!(
        again.contains("mutatingwebhookconfiguration.admissionregistration.k8s.io/demo-webhook unchanged"),
        "{again}"
    );
    let timeout = ok(
        hub.kubectl(&[
            "get",
            "validatingwebhookconfiguration",
            "demo-webhook",
            "-o",
            "jsonpath={.webhooks[0].timeoutSeconds}",
        ]),
        "get timeout",
    );
    assert_eq!(timeout, "10");

    // Server-side apply merges the webhooks by name, as kube's schema says.
    let server_side = ok(
        hub.kubectl_stdin(
            &["apply", "--server-side", "--force-conflicts", "-f", "-"],
            Some(CHART),
        ),
        "server-side apply",
    );
    assert!(
        server_side.contains(
            "validatingwebhookconfiguration.admissionregistration.k8s.io/demo-webhook serverside-applied"
        ),
        "{server_side}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_explain_validatingwebhookconfiguration_webhooks() {
    let hub = TestHub::start().await;
    let explained = ok(
        hub.kubectl(&["explain", "validatingwebhookconfiguration.webhooks"]),
        "explain",
    );
    assert!(
        explained.contains("GROUP:      admissionregistration.k8s.io"),
        "{explained}"
    );
    for field in [
        "sideEffects",
        "admissionReviewVersions",
        "failurePolicy",
        "clientConfig",
    ] {
        assert!(explained.contains(field), "{field} not explained:\n{explained}");
    }
    let pc = ok(hub.kubectl(&["explain", "priorityclass.value"]), "explain pc");
    assert!(pc.contains("FIELD: value <integer>"), "{pc}");
    let claim = ok(
        hub.kubectl(&["explain", "resourceclaimtemplate.spec.spec.devices"]),
        "explain claim template",
    );
    assert!(
        claim.contains("VERSION:    v1") && claim.contains("requests"),
        "{claim}"
    );
}

/// A write answered with `code` whose message contains `message`.
async fn refused(client: &kube::Client, method: &str, path: &str, body: Value, code: u16, message: &str) {
    let (got, status) = match method {
        "PATCH" => common::tmc::merge_patch(client, path, &body).await,
        _ => common::call(client, method, path, Some(&body)).await,
    };
    assert_eq!(got, code, "{method} {path}: {status}");
    let text = status["message"].as_str().unwrap_or_default();
    assert!(
        text.contains(message),
        "{method} {path}: {text:?} lacks {message:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn kubes_refusals_come_back_with_kubes_messages() {
    let hub = TestHub::start().await;
    let admin = common::admin(&hub, "root").await;

    // A v1 webhook must say it has no side effects and which reviews it reads.
    let vwc = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";
    let webhook = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "no-side-effects"},
        "webhooks": [{
            "name": "check.demo.example.io",
            "clientConfig": {"url": "https://check.demo.example.io/"},
        }],
    });
    refused(
        &admin,
        "POST",
        vwc,
        webhook.clone(),
        422,
        "ValidatingWebhookConfiguration.admissionregistration.k8s.io \"no-side-effects\" is invalid: \
         [webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun, \
         webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1]",
    )
    .await;
    let mut fixed = webhook;
    fixed["webhooks"][0]["sideEffects"] = json!("None");
    fixed["webhooks"][0]["admissionReviewVersions"] = json!(["v1"]);
    let (code, body) = common::call(&admin, "POST", vwc, Some(&fixed)).await;
    assert_eq!(code, 201, "{body}");

    // A PriorityClass's value is fixed once created.
    let pcs = "/apis/scheduling.k8s.io/v1/priorityclasses";
    let pc = |name: &str, value: i64, global: bool| {
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
               "metadata": {"name": name}, "value": value, "globalDefault": global})
    };
    let (code, body) = common::call(&admin, "POST", pcs, Some(&pc("batch", 100, true))).await;
    assert_eq!(code, 201, "{body}");
    refused(
        &admin,
        "PATCH",
        &format!("{pcs}/batch"),
        json!({"value": 200}),
        422,
        "PriorityClass.scheduling.k8s.io \"batch\" is invalid: value: Forbidden: may not be changed in an update.",
    )
    .await;
    // Only one global default (kube's Priority admission plugin answers 403).
    refused(
        &admin,
        "POST",
        pcs,
        pc("another-default", 50, true),
        403,
        "priorityclasses.scheduling.k8s.io \"another-default\" is forbidden: \
         PriorityClass batch is already marked as default. Only one default can exist",
    )
    .await;
    let (code, body) = common::call(&admin, "POST", pcs, Some(&pc("not-default", 50, false))).await;
    assert_eq!(code, 201, "{body}");
    refused(
        &admin,
        "POST",
        pcs,
        pc("too-high", 1_000_000_001, false),
        422,
        "value: Forbidden: maximum allowed value of a user defined priority is 1000000000",
    )
    .await;

    // A RuntimeClass names its handler, once.
    let rcs = "/apis/node.k8s.io/v1/runtimeclasses";
    refused(
        &admin,
        "POST",
        rcs,
        json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "kata"}}),
        422,
        "RuntimeClass.node.k8s.io \"kata\" is invalid: handler: Required value",
    )
    .await;
    let kata = json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                      "metadata": {"name": "kata"}, "handler": "kata"});
    let (code, body) = common::call(&admin, "POST", rcs, Some(&kata)).await;
    assert_eq!(code, 201, "{body}");
    refused(
        &admin,
        "PATCH",
        &format!("{rcs}/kata"),
        json!({"handler": "kata-qemu"}),
        422,
        "handler: Invalid value: \"kata-qemu\": field is immutable",
    )
    .await;
}
