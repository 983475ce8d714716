//! The generated CRDs are valid structural schemas with the reference names.

use ferry_api::{all_crds, crds_yaml};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

/// Checks the structural-schema rules kube-apiserver enforces for CRDs that matter here:
/// every node has a `type` (or is int-or-string / preserve-unknown-fields), `nullable`
/// only next to a `type`, no `$ref`, and junctors (`anyOf`...) only in the int-or-string
/// form. Returns the JSON paths of violations.
fn structural_violations(schema: &Value, path: &str, out: &mut Vec<String>) {
    let obj = schema.as_object().expect("schema node is an object");
    let has_type = obj.contains_key("type");
    let int_or_string = obj.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    let preserve = obj.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    if !has_type && !int_or_string && !preserve {
        out.push(format!("{path}: no type"));
    }
    if obj.contains_key("nullable") && !has_type && !int_or_string {
        out.push(format!("{path}: nullable without type"));
    }
    for bad in ["$ref", "definitions", "$defs", "$schema", "title", "default"] {
        if obj.contains_key(bad) {
            out.push(format!("{path}: has {bad}"));
        }
    }
    for junctor in ["anyOf", "oneOf", "allOf"] {
        if obj.contains_key(junctor) && !int_or_string {
            out.push(format!("{path}: {junctor} outside int-or-string"));
        }
    }
    if obj.contains_key("properties") && obj.contains_key("additionalProperties") {
        out.push(format!("{path}: both properties and additionalProperties"));
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        for (name, child) in props {
            structural_violations(child, &format!("{path}.{name}"), out);
        }
    }
    if let Some(items) = obj.get("items") {
        structural_violations(items, &format!("{path}[]"), out);
    }
    if let Some(additional) = obj.get("additionalProperties").filter(|v| v.is_object()) {
        structural_violations(additional, &format!("{path}{{}}"), out);
    }
}

fn schema_of(crd: &CustomResourceDefinition) -> Value {
    let version = &crd.spec.versions[0];
    serde_json::to_value(
        version
            .schema
            .as_ref()
            .unwrap()
            .open_api_v3_schema
            .as_ref()
            .unwrap(),
    )
    .unwrap()
}

#[test]
fn every_crd_schema_is_structural() {
    for crd in all_crds() {
        let mut violations = vec![];
        structural_violations(&schema_of(&crd), "", &mut violations);
        assert!(
            violations.is_empty(),
            "{}: {violations:#?}",
            crd.metadata.name.unwrap()
        );
    }
}

#[test]
fn crds_have_the_reference_names_scopes_and_subresources() {
    let crds = all_crds();
    let summary: Vec<(String, String, Option<Vec<String>>, bool)> = crds
        .iter()
        .map(|crd| {
            (
                crd.metadata.name.clone().unwrap(),
                crd.spec.scope.clone(),
                crd.spec.names.short_names.clone(),
                crd.spec.versions[0].subresources.is_some(),
            )
        })
        .collect();
    let expect = |name: &str, short: Option<&str>, status: bool| {
        (
            name.to_string(),
            if name.starts_with("customizers.") || name.starts_with("combinedstatuses.") {
                "Namespaced"
            } else {
                "Cluster"
            }
            .to_string(),
            short.map(|s| vec![s.to_string()]),
            status,
        )
    };
    assert_eq!(
        summary,
        vec![
            expect("syncerconfigs.edge.kubestellar.io", Some("escfg"), true),
            expect("edgesyncconfigs.edge.kubestellar.io", Some("esc"), true),
            expect("synctargets.edge.kubestellar.io", None, true),
            expect("locations.edge.kubestellar.io", None, true),
            expect("edgeplacements.edge.kubestellar.io", Some("epl"), true),
            expect("singleplacementslices.edge.kubestellar.io", None, false),
            expect("placementsummaries.edge.ferry.dev", None, false),
            expect("customizers.edge.kubestellar.io", None, false),
            expect("customtransforms.control.kubestellar.io", None, false),
            expect("statuscollectors.control.kubestellar.io", None, true),
            expect("combinedstatuses.control.kubestellar.io", None, false),
            expect("synctargets.workload.kcp.io", None, true),
            expect("publishedresources.syncagent.kcp.io", None, true),
        ]
    );
}

#[test]
fn spec_is_never_required() {
    for crd in all_crds() {
        let schema = schema_of(&crd);
        assert!(schema.get("required").is_none(), "{:?}", crd.metadata.name);
    }
}

#[test]
fn cluster_scope_objects_is_nullable_so_null_and_empty_list_both_survive() {
    let crd = &all_crds()[0];
    let objects =
        &schema_of(crd)["properties"]["spec"]["properties"]["clusterScope"]["items"]["properties"]["objects"];
    assert_eq!(objects["type"], "array");
    assert_eq!(objects["nullable"], true);
}

#[test]
fn crds_yaml_is_one_document_per_crd_and_reads_back_identically() {
    let yaml = crds_yaml();
    assert!(yaml.starts_with("---\n"));
    let docs: Vec<&str> = yaml.split("---\n").filter(|d| !d.trim().is_empty()).collect();
    let crds = all_crds();
    assert_eq!(docs.len(), crds.len());
    for (doc, crd) in docs.iter().zip(&crds) {
        let back: CustomResourceDefinition = serde_saphyr::from_str(doc).expect("CRD YAML decodes");
        assert_eq!(&back, crd);
    }
}

#[test]
fn published_resource_spec_is_immutable_through_a_cel_rule() {
    let crd =
        serde_json::to_value(<ferry_api::syncagent::PublishedResource as kube::CustomResourceExt>::crd())
            .unwrap();
    let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    let rules = spec["x-kubernetes-validations"]
        .as_array()
        .expect("a rule on spec");
    assert_eq!(rules.len(), 1, "{spec}");
    assert_eq!(rules[0]["rule"], "self == oldSelf");
    assert_eq!(rules[0]["message"], ferry_api::syncagent::IMMUTABLE_SPEC_MESSAGE);
    // Status stays writable.
    let status = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"];
    assert!(status.get("x-kubernetes-validations").is_none());
}
