//! storage.k8s.io/v1 CSIDrivers: kube-apiserver's `SetDefaults_CSIDriver`
//! (with the feature gates 1.36 enables by default).

use serde_json::{json, Value};

use crate::strategy::core::pod_spec::{default_field, object_at};
use crate::strategy::Defaults;

pub static CSI_DRIVER: Defaults = Defaults(defaults);

fn defaults(obj: &mut Value) {
    let Some(spec) = object_at(obj, &["spec"]) else {
        return;
    };
    default_field(spec, "attachRequired", json!(true));
    default_field(spec, "podInfoOnMount", json!(false));
    default_field(spec, "storageCapacity", json!(false));
    default_field(spec, "fsGroupPolicy", json!("ReadWriteOnceWithFSType"));
    if spec
        .get("volumeLifecycleModes")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        spec.insert("volumeLifecycleModes".into(), json!(["Persistent"]));
    }
    default_field(spec, "requiresRepublish", json!(false));
    default_field(spec, "seLinuxMount", json!(false));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csi_driver_defaults() {
        let mut d = json!({"spec": {"podInfoOnMount": true}});
        defaults(&mut d);
        assert_eq!(d["spec"]["attachRequired"], true);
        assert_eq!(d["spec"]["podInfoOnMount"], true);
        assert_eq!(d["spec"]["volumeLifecycleModes"], json!(["Persistent"]));
        assert_eq!(d["spec"]["fsGroupPolicy"], "ReadWriteOnceWithFSType");
    }
}
