//! Objects on one server (a hub, or a workspace of one) addressed
//! dynamically, the objects tests make, and the usual syncer stage: an
//! upstream hub with a mailbox workspace and a hub standing in for the
//! workload cluster.

use crate::TestHub;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use serde_json::{json, Value};

use crate::eventually;
use crate::resources::{
    cluster_role_bindings, cluster_roles, crds, events, service_accounts, syncer_configs,
};
use crate::tenants::{binding, cluster_role_object, service_account_subject};

/// A kube-rs config for `hub`'s admin; `workspace` adds the `/clusters/<path>` prefix.
pub async fn kube_config(hub: &TestHub, workspace: Option<&str>) -> kube::Config {
    crate::config_from(hub.kubeconfig(), workspace).await
}

/// A kube-rs config for `hub` at `workspace` that authenticates with bearer
/// `token` instead of the admin's (a service account's, say).
pub async fn token_config(hub: &TestHub, workspace: &str, token: &str) -> kube::Config {
    let kubeconfig =
        ferry_hub::kubeconfig::admin_kubeconfig(&hub.running.url, &hub.running.ca_pem, token, workspace);
    kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::from_yaml(&kubeconfig).expect("kubeconfig parses"),
        &Default::default(),
    )
    .await
    .expect("config")
}

/// Objects on one server (a workspace or a whole hub), addressed dynamically.
#[derive(Clone)]
pub struct Cluster {
    pub client: kube::Client,
}

impl Cluster {
    pub async fn of(hub: &TestHub, workspace: Option<&str>) -> Cluster {
        Cluster {
            client: kube::Client::try_from(kube_config(hub, workspace).await).expect("client"),
        }
    }

    pub fn api(&self, ar: &ApiResource, ns: Option<&str>) -> Api<DynamicObject> {
        match ns {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, ar),
            None => Api::all_with(self.client.clone(), ar),
        }
    }

    /// Creates `obj` (namespace taken from its metadata).
    pub async fn create(&self, ar: &ApiResource, obj: Value) -> Value {
        let ns = obj["metadata"]["namespace"].as_str().map(str::to_owned);
        let dynamic: DynamicObject = serde_json::from_value(obj).expect("object");
        let made = self
            .api(ar, ns.as_deref())
            .create(&PostParams::default(), &dynamic)
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "creating {}: {e}",
                    dynamic.metadata.name.clone().unwrap_or_default()
                )
            });
        serde_json::to_value(made).unwrap()
    }

    pub async fn get(&self, ar: &ApiResource, ns: Option<&str>, name: &str) -> Option<Value> {
        match self.api(ar, ns).get(name).await {
            Ok(o) => Some(serde_json::to_value(o).unwrap()),
            Err(kube::Error::Api(s)) if s.code == 404 => None,
            Err(e) => panic!("getting {name}: {e}"),
        }
    }

    pub async fn list(&self, ar: &ApiResource, ns: Option<&str>) -> Vec<Value> {
        self.api(ar, ns)
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .into_iter()
            .map(|o| serde_json::to_value(o).unwrap())
            .collect()
    }

    pub async fn merge(&self, ar: &ApiResource, ns: Option<&str>, name: &str, patch: Value) -> Value {
        let made = self
            .api(ar, ns)
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap_or_else(|e| panic!("patching {name}: {e}"));
        serde_json::to_value(made).unwrap()
    }

    /// Writes `status` through the `/status` subresource, as a controller would.
    pub async fn set_status(&self, ar: &ApiResource, ns: Option<&str>, name: &str, status: Value) -> Value {
        let made = self
            .api(ar, ns)
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await
            .unwrap_or_else(|e| panic!("writing status of {name}: {e}"));
        serde_json::to_value(made).unwrap()
    }

    pub async fn delete(&self, ar: &ApiResource, ns: Option<&str>, name: &str) {
        match self.api(ar, ns).delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => panic!("deleting {name}: {e}"),
        }
    }

    /// `ar` `ns/name` here, once `pred` holds for it ([`wait_for`]).
    pub async fn when(
        &self,
        ar: &ApiResource,
        ns: &str,
        name: &str,
        what: &str,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        wait_for(self, ar, Some(ns), name, what, pred).await
    }

    /// Waits (15 s at most) until `ar` lists here, in `ns` or cluster-wide:
    /// the server serves it (after a CRD or an APIBinding made it). `what`
    /// names the wait in the failure.
    pub async fn wait_served(&self, ar: &ApiResource, ns: Option<&str>, what: &str) {
        eventually(15, what, || async {
            self.api(ar, ns).list(&Default::default()).await.ok().map(drop)
        })
        .await;
    }

    /// Waits until `ar` `ns/name` is gone from here ([`wait_gone`]).
    pub async fn gone(&self, ar: &ApiResource, ns: &str, name: &str, what: &str) {
        wait_gone(self, ar, Some(ns), name, what).await
    }

    /// ServiceAccount `namespace/name` here, holding ClusterRole `role` with
    /// `rules` through a ClusterRoleBinding of the same name; returns a token
    /// for it (TokenRequest), bound to this workspace — an agent's identity
    /// as a provider's set-up would make it.
    pub async fn service_account_with_rules(
        &self,
        (namespace, name): (&str, &str),
        role: &str,
        rules: Value,
    ) -> String {
        self.create(
            &service_accounts(),
            json!({ "apiVersion": "v1", "kind": "ServiceAccount", "metadata": { "name": name, "namespace": namespace } }),
        )
        .await;
        self.create(&cluster_roles(), cluster_role_object(role, rules))
            .await;
        self.create(
            &cluster_role_bindings(),
            service_account_binding(role, (namespace, name)),
        )
        .await;
        let body = json!({ "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {} });
        let request = http::Request::post(format!(
            "/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"
        ))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&body).expect("json"))
        .expect("request");
        let answer: Value = self
            .client
            .request(request)
            .await
            .unwrap_or_else(|e| panic!("a token for {namespace}/{name}: {e}"));
        answer["status"]["token"].as_str().expect("a token").to_string()
    }
}

/// ClusterRoleBinding `role` of ClusterRole `role` to ServiceAccount
/// `namespace/name`, across the workspace.
pub fn service_account_binding(role: &str, (namespace, name): (&str, &str)) -> Value {
    binding(
        "ClusterRoleBinding",
        role,
        "ClusterRole",
        role,
        service_account_subject(namespace, name),
    )
}

/// A namespaced CRD in group `example.com`, version v1, with a status subresource.
pub fn crd(kind: &str, plural: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": format!("{plural}.example.com") },
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": { "kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List") },
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": { "status": {} },
                "schema": { "openAPIV3Schema": { "type": "object", "x-kubernetes-preserve-unknown-fields": true } }
            }]
        }
    })
}

/// Creates workspace `root:<name>` on `hub` with Ferry's CRDs installed (a mailbox
/// workspace), and returns its path.
pub async fn mailbox(hub: &TestHub, name: &str) -> String {
    let ws = workspace(hub, name).await;
    for crd in ferry_api::all_crds() {
        ws.create(&crds(), serde_json::to_value(crd).unwrap()).await;
    }
    format!("root:{name}")
}

/// Workspace `root:<name>` on `hub`, once it serves.
pub async fn workspace(hub: &TestHub, name: &str) -> Cluster {
    crate::workspaces::ready_workspace(hub, name).await;
    Cluster::of(hub, Some(&format!("root:{name}"))).await
}

/// The usual stage: an upstream hub with mailbox workspace `root:mb`, and a hub
/// standing in for the workload cluster.
pub struct Stage {
    pub up: TestHub,
    pub wec: TestHub,
    /// The mailbox's path (`root:mb`).
    pub ws: String,
    /// The mailbox workspace.
    pub mb: Cluster,
    /// The workload cluster.
    pub down: Cluster,
}

impl Stage {
    pub async fn start() -> Stage {
        let up = TestHub::start().await;
        let wec = TestHub::start().await;
        let ws = mailbox(&up, "mb").await;
        let mb = Cluster::of(&up, Some(&ws)).await;
        let down = Cluster::of(&wec, None).await;
        Stage {
            up,
            wec,
            ws,
            mb,
            down,
        }
    }

    /// The stage taken apart: the upstream hub, the workload cluster's hub,
    /// the mailbox's path, the mailbox and the workload cluster.
    pub fn parts(self) -> (TestHub, TestHub, String, Cluster, Cluster) {
        (self.up, self.wec, self.ws, self.mb, self.down)
    }
}

pub fn namespace(name: &str) -> Value {
    json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": name } })
}

pub fn configmap(ns: &str, name: &str, data: Value) -> Value {
    json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": name, "namespace": ns }, "data": data })
}

/// SyncerConfig `the-one` in mailbox `mb`: `resources` (group, resource; all v1)
/// in namespace `namespace`.
pub async fn sync_in(mb: &Cluster, namespace: &str, resources: &[(&str, &str)]) {
    let resources: Vec<Value> = resources
        .iter()
        .map(|(group, resource)| json!({ "group": group, "apiVersion": "v1", "resource": resource }))
        .collect();
    mb.create(
        &syncer_configs(),
        syncer_config(
            "the-one",
            json!({ "namespaceScope": { "namespaces": [namespace], "resources": resources } }),
        ),
    )
    .await;
}

/// SyncerConfig `the-one` in `mb`, downsyncing every object of each
/// `(group, resource)` (at `v1`) in namespace `default`.
pub async fn sync_in_default(mb: &Cluster, resources: &[(&str, &str)]) {
    sync_in(mb, "default", resources).await;
}

pub fn syncer_config(name: &str, spec: Value) -> Value {
    json!({ "apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "SyncerConfig", "metadata": { "name": name }, "spec": spec })
}

/// Waits for an object to exist; returns it.
pub async fn wait_present(
    cluster: &Cluster,
    ar: &ApiResource,
    ns: Option<&str>,
    name: &str,
    what: &str,
) -> Value {
    wait_for(cluster, ar, ns, name, what, |_| true).await
}

/// Waits for an object to exist and satisfy `pred`; returns it.
pub async fn wait_for(
    cluster: &Cluster,
    ar: &ApiResource,
    ns: Option<&str>,
    name: &str,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    eventually(15, what, || async {
        cluster.get(ar, ns, name).await.filter(|o| pred(o))
    })
    .await
}

/// Waits for an object to be gone.
pub async fn wait_gone(cluster: &Cluster, ar: &ApiResource, ns: Option<&str>, name: &str, what: &str) {
    eventually(15, what, || async {
        cluster.get(ar, ns, name).await.is_none().then_some(())
    })
    .await;
}

pub fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj["metadata"]["annotations"][key].as_str()
}

pub fn label<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj["metadata"]["labels"][key].as_str()
}

pub fn resource_version(obj: &Value) -> String {
    obj["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// `<reason>: <message>` of each Event in `namespace` of `ws` about the object `name`.
pub async fn events_about(ws: &Cluster, namespace: &str, name: &str) -> Vec<String> {
    ws.list(&events(), Some(namespace))
        .await
        .into_iter()
        .filter(|e| e["involvedObject"]["name"] == name)
        .map(|e| {
            format!(
                "{}: {}",
                e["reason"].as_str().unwrap_or_default(),
                e["message"].as_str().unwrap_or_default()
            )
        })
        .collect()
}
