//! The reference systems' example YAML decodes into Ferry's types and encodes back
//! to the same document.

use ferry_api::edge::{EdgePlacement, Location, SyncTarget, SyncerConfig};
use ferry_api::syncagent::PublishedResource;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

fn yaml_value(yaml: &str) -> Value {
    serde_saphyr::from_str(yaml).expect("valid YAML")
}

/// Decodes `yaml` as `T`, encodes it again and checks that nothing was lost or added.
fn round_trip<T: DeserializeOwned + Serialize + PartialEq + std::fmt::Debug>(yaml: &str) -> T {
    let typed: T = serde_saphyr::from_str(yaml).expect("decodes as the typed object");
    let encoded = serde_json::to_value(&typed).unwrap();
    assert_eq!(
        encoded,
        yaml_value(yaml),
        "re-encoded object differs from the document"
    );
    let again: T = serde_json::from_value(encoded).unwrap();
    assert_eq!(again, typed);
    typed
}

// From seeds/001 (KubeStellar-Syncer page, "Create SyncTarget and Location objects").
const FLORIN_SYNC_TARGET: &str = r#"
apiVersion: edge.kubestellar.io/v2alpha1
kind: SyncTarget
metadata:
  name: florin
  labels:
    id: florin
    loc-name: florin
    env: prod
"#;

const GUILDER_LOCATION: &str = r#"
apiVersion: edge.kubestellar.io/v2alpha1
kind: Location
metadata:
  name: guilder
  labels:
    loc-name: guilder
    env: prod
    extended: yes
spec:
  resource: {group: edge.kubestellar.io, version: v2alpha1, resource: synctargets}
  instanceSelector:
    matchLabels: {id: guilder}
"#;

// KubeStellar test/e2e/kubestellar-syncer/testdata/kyverno/syncer-config.yaml (shortened).
const KYVERNO_SYNCER_CONFIG: &str = r#"
apiVersion: edge.kubestellar.io/v2alpha1
kind: SyncerConfig
metadata:
  name: syncer-config
spec:
  namespaceScope:
    namespaces:
    - kyverno
    - policy
    resources:
    - apiVersion: v1
      group: ""
      resource: configmaps
    - apiVersion: v1
      group: apps
      resource: deployments
    - apiVersion: v1
      group: kyverno.io
      resource: policies
  clusterScope:
  - apiVersion: v1
    group: apiextensions.k8s.io
    resource: customresourcedefinitions
    objects:
    - clusterpolicies.kyverno.io
    - policyreports.wgpolicyk8s.io
  - apiVersion: v1
    group: rbac.authorization.k8s.io
    resource: clusterrolebindings
    objects:
    - kyverno
  - apiVersion: v1
    group: kyverno.io
    resource: clusterpolicies
    objects:
    - "*"
  upsync:
  - apiGroup: wgpolicyk8s.io
    resources:
    - policyreports
    - clusterpolicyreports
    namespaces:
    - policy
    names:
    - "*"
"#;

// KubeStellar testdata/syncerconfig/syncer-config-namespaced-objects.yaml, plus the
// two special `objects` values.
const NAMESPACED_OBJECTS_SYNCER_CONFIG: &str = r#"
apiVersion: edge.kubestellar.io/v2alpha1
kind: SyncerConfig
metadata:
  name: syncer-config-wildcard
spec:
  namespacedObjects:
  - apiVersion: v1
    group: ""
    resource: configmaps
    objectsByNamespace:
    - namespace: test
      names:
      - sampleupsyncs.my.domain
  clusterScope:
  - apiVersion: v1alpha1
    group: my.domain
    resource: sampledownsyncs
  - apiVersion: v1
    group: ""
    resource: namespaces
    objects: []
  upsync:
  - apiGroup: my.domain
    resources:
    - sampleupsyncs
    names:
    - "*"
"#;

// KubeStellar docs, example1 (EdgePlacement for the common workload).
const EDGE_PLACEMENT: &str = r#"
apiVersion: edge.kubestellar.io/v2alpha1
kind: EdgePlacement
metadata:
  name: edge-placement-c
spec:
  locationSelectors:
  - matchLabels: {"env":"prod"}
  downsync:
  - apiGroup: ""
    resources: [ configmaps ]
    namespaces: [ commonstuff ]
    objectNames: [ httpd-htdocs ]
  - apiGroup: apps
    resources: [ replicasets ]
    namespaces: [ commonstuff ]
  wantSingletonReportedState: true
  upsync:
  - apiGroup: "group1.test"
    resources: ["sprockets", "flanges"]
    namespaces: ["orbital"]
    names: ["george", "cosmo"]
status:
  matchingLocationCount: 2
"#;

#[test]
fn sync_target_without_spec_decodes_with_default_spec() {
    let target: SyncTarget = serde_saphyr::from_str(FLORIN_SYNC_TARGET).unwrap();
    assert_eq!(target.metadata.name.as_deref(), Some("florin"));
    assert_eq!(target.metadata.labels.as_ref().unwrap()["env"], "prod");
    assert!(!target.spec.unschedulable);
    assert!(target.status.is_none());

    let mut expected = yaml_value(FLORIN_SYNC_TARGET);
    expected["spec"] = json!({ "unschedulable": false });
    assert_eq!(serde_json::to_value(&target).unwrap(), expected);
}

#[test]
fn location_round_trips_and_keeps_yes_as_a_string_label() {
    // An untyped YAML reader takes `yes` for a boolean (YAML 1.1); a label is a string.
    let location: Location = serde_saphyr::from_str(GUILDER_LOCATION).unwrap();
    let mut expected = yaml_value(GUILDER_LOCATION);
    expected["metadata"]["labels"]["extended"] = json!("yes");
    assert_eq!(serde_json::to_value(&location).unwrap(), expected);
    assert_eq!(location.metadata.labels.as_ref().unwrap()["extended"], "yes");
    assert_eq!(location.spec.resource.resource, "synctargets");
    let selector = location.spec.instance_selector.unwrap();
    assert_eq!(selector.match_labels.unwrap()["id"], "guilder");
}

#[test]
fn kyverno_syncer_config_round_trips() {
    let config: SyncerConfig = round_trip(KYVERNO_SYNCER_CONFIG);
    assert_eq!(config.spec.namespace_scope.namespaces, ["kyverno", "policy"]);
    assert_eq!(config.spec.namespace_scope.resources[0].group, "");
    assert_eq!(
        config.spec.cluster_scope[2].objects.as_deref(),
        Some(&["*".to_string()][..])
    );
    assert_eq!(config.spec.upsync[0].api_group, "wgpolicyk8s.io");
}

#[test]
fn absent_objects_and_empty_objects_stay_distinct() {
    let config: SyncerConfig = round_trip(NAMESPACED_OBJECTS_SYNCER_CONFIG);
    assert_eq!(config.spec.cluster_scope[0].objects, None, "absent means all");
    assert_eq!(
        config.spec.cluster_scope[1].objects,
        Some(vec![]),
        "[] means none"
    );
    assert_eq!(
        config.spec.namespaced_objects[0].objects_by_namespace[0].namespace,
        "test"
    );
}

#[test]
fn edge_placement_round_trips() {
    let placement: EdgePlacement = round_trip(EDGE_PLACEMENT);
    assert_eq!(placement.spec.downsync[0].api_group.as_deref(), Some(""));
    assert!(placement.spec.want_singleton_reported_state);
    assert_eq!(placement.status.unwrap().matching_location_count, 2);
}

#[test]
fn syncer_config_without_spec_decodes_as_empty() {
    let config: SyncerConfig = serde_json::from_value(json!({
        "apiVersion": "edge.kubestellar.io/v2alpha1",
        "kind": "SyncerConfig",
        "metadata": { "name": "the-one" }
    }))
    .unwrap();
    assert_eq!(config.spec, Default::default());
}

#[test]
fn published_resource_round_trips() {
    round_trip::<PublishedResource>(
        r#"
apiVersion: syncagent.kcp.io/v1alpha1
kind: PublishedResource
metadata:
  name: publish-certmanager-certs
spec:
  resource:
    kind: Certificate
    apiGroup: cert-manager.io
    versions: [v1]
  naming:
    namespace: "{{ .ClusterName }}"
    name: "{{ .Object.metadata.name }}"
  projection:
    kind: Cert
    shortNames: []
  related:
  - identifier: tls-secret
    origin: service
    kind: Secret
    object:
      reference:
        path: spec.secretName
"#,
    );
}
