//! CustomResourceDefinitions for every kind in this crate, as objects and as YAML.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::{combined_status, control, edge, syncagent, workload};

/// Every CRD Ferry defines, in a stable order.
pub fn all_crds() -> Vec<CustomResourceDefinition> {
    vec![
        edge::SyncerConfig::crd(),
        edge::EdgeSyncConfig::crd(),
        edge::SyncTarget::crd(),
        edge::Location::crd(),
        edge::EdgePlacement::crd(),
        edge::SinglePlacementSlice::crd(),
        edge::PlacementSummary::crd(),
        edge::Customizer::crd(),
        control::CustomTransform::crd(),
        combined_status::StatusCollector::crd(),
        combined_status::CombinedStatus::crd(),
        workload::SyncTarget::crd(),
        syncagent::PublishedResource::crd(),
    ]
}

/// All CRDs as one multi-document YAML stream (`---` separated), ready for
/// `ferry crds | kubectl apply -f -`.
///
/// The CRDs go through `serde_json::Value` first so that YAML sees plain maps, lists and
/// scalars; serde-saphyr quotes strings that would otherwise read back as other types.
pub fn crds_yaml() -> String {
    to_yaml(&all_crds())
}

/// `crds` as one multi-document YAML stream, as [`crds_yaml`] writes them.
pub fn to_yaml(crds: &[CustomResourceDefinition]) -> String {
    let mut out = String::new();
    for crd in crds {
        let value = serde_json::to_value(crd).expect("CRD serializes to JSON");
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&value).expect("JSON value serializes to YAML"));
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}
