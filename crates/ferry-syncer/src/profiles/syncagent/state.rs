//! The last-known state of each copy, as the reference keeps it: one Secret per kcp
//! object, `obj-state-<cluster>-<hash>` in the agent's `--namespace`, labelled
//! `syncagent.kcp.io/object-state=true`, holding what the agent last wrote (content
//! fields only). Updates are then three-way merges
//! ([`crate::transform::three_way_update`]) that keep what the service's controllers
//! set. Unlike the reference, the Secret is deleted with the copy.
//!
//! Reads are served from memory: the first read lists every state Secret once (one
//! request after a restart instead of one per object); a state not listed is then
//! read on its own.

use std::collections::HashMap;

use base64::Engine as _;
use kube::api::{Api, DeleteParams, PostParams};
use parking_lot::RwLock;
use serde_json::{json, Value};

use crate::engine::ObjectRef;

/// The label on every state Secret.
pub const STATE_LABEL: &str = "syncagent.kcp.io/object-state";

/// State Secrets in one namespace of the service cluster.
pub struct StateStore {
    client: kube::Client,
    namespace: String,
    cache: RwLock<HashMap<String, Value>>,
    /// Set once every state Secret has been listed into `cache`.
    listed: tokio::sync::OnceCell<()>,
}

/// The content fields of `desired`: what the state records.
pub fn content_of(desired: &Value) -> Value {
    let mut out = desired.clone();
    if let Some(o) = out.as_object_mut() {
        for k in ["apiVersion", "kind", "metadata", "status"] {
            o.remove(k);
        }
    }
    out
}

/// The state a Secret records.
fn state_in(secret: &k8s_openapi::api::core::v1::Secret) -> Option<Value> {
    let bytes = &secret.data.as_ref()?.get("state")?.0;
    serde_json::from_slice(bytes).ok()
}

impl StateStore {
    /// The store in `namespace` of the service cluster `client` reaches.
    pub fn new(client: kube::Client, namespace: &str) -> StateStore {
        StateStore {
            client,
            namespace: namespace.to_string(),
            cache: RwLock::default(),
            listed: tokio::sync::OnceCell::new(),
        }
    }

    /// The Secret's name for the kcp object `source` of resource `group`/`resource`.
    pub fn secret_name(group: &str, resource: &str, source: &ObjectRef) -> String {
        let id = format!(
            "{group}/{resource}/{}/{}",
            source.namespace.as_deref().unwrap_or_default(),
            source.name
        );
        format!("obj-state-{}-{}", source.cluster(), super::sha3short(&id))
    }

    fn api(&self) -> Api<k8s_openapi::api::core::v1::Secret> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// The recorded state, if any.
    pub async fn get(&self, name: &str) -> Option<Value> {
        self.listed.get_or_init(|| self.list_all()).await;
        if let Some(v) = self.cache.read().get(name) {
            return Some(v.clone());
        }
        let secret = self.api().get_opt(name).await.ok()??;
        let state = state_in(&secret)?;
        self.cache.write().insert(name.to_string(), state.clone());
        Some(state)
    }

    /// Whether a state is recorded, without copying it out of the cache.
    pub async fn has(&self, name: &str) -> bool {
        self.listed.get_or_init(|| self.list_all()).await;
        if self.cache.read().contains_key(name) {
            return true;
        }
        self.get(name).await.is_some()
    }

    /// Reads every state Secret into the cache (those written meanwhile win). A failed
    /// list leaves each state to be read on its own.
    async fn list_all(&self) {
        let params = kube::api::ListParams::default().labels(&format!("{STATE_LABEL}=true"));
        let secrets = match self.api().list(&params).await {
            Ok(list) => list.items,
            Err(e) => {
                tracing::debug!(namespace = %self.namespace, "listing the last-known states: {e}");
                return;
            }
        };
        let mut cache = self.cache.write();
        for secret in secrets {
            if let (Some(name), Some(state)) = (secret.metadata.name.clone(), state_in(&secret)) {
                cache.entry(name).or_insert(state);
            }
        }
    }

    /// Records `state` (unless it is what is recorded).
    pub async fn put(&self, name: &str, source: &ObjectRef, state: Value) {
        if self.cache.read().get(name) == Some(&state) {
            return;
        }
        let encoded = base64::engine::general_purpose::STANDARD.encode(state.to_string());
        let body = json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": { "name": name, "namespace": self.namespace,
                "labels": { STATE_LABEL: "true" },
                "annotations": { "syncagent.kcp.io/remote-object": source.to_string() } },
            "data": { "state": encoded },
        });
        let Ok(secret) = serde_json::from_value::<k8s_openapi::api::core::v1::Secret>(body) else {
            return;
        };
        let api = self.api();
        // A state read or written before is a Secret that exists: it is replaced at
        // once (an update is then one request, not a create refused with 409 and a
        // replace); one deleted meanwhile is made again.
        let known = self.cache.read().contains_key(name);
        let replaced = if known {
            match api.replace(name, &PostParams::default(), &secret).await {
                Err(kube::Error::Api(e)) if e.code == 404 => None,
                other => Some(other.map(drop)),
            }
        } else {
            None
        };
        let result = match replaced {
            Some(result) => result,
            None => self.create(&api, name, &secret).await,
        };
        match result {
            Ok(()) => {
                self.cache.write().insert(name.to_string(), state);
            }
            Err(e) => {
                tracing::warn!(secret = name, namespace = %self.namespace, "recording the last-known state failed (the next update is a plain one): {e}")
            }
        }
    }

    /// Creates the state Secret (and the namespace, if missing), or replaces one that
    /// exists.
    async fn create(
        &self,
        api: &Api<k8s_openapi::api::core::v1::Secret>,
        name: &str,
        secret: &k8s_openapi::api::core::v1::Secret,
    ) -> Result<(), kube::Error> {
        let mut result = api.create(&PostParams::default(), secret).await;
        if let Err(kube::Error::Api(e)) = &result {
            if e.code == 404 {
                self.ensure_namespace().await;
                result = api.create(&PostParams::default(), secret).await;
            }
        }
        match result {
            Err(kube::Error::Api(e)) if e.code == 409 => {
                api.replace(name, &PostParams::default(), secret).await.map(drop)
            }
            other => other.map(drop),
        }
    }

    /// Deletes the state (with the copy).
    pub async fn delete(&self, name: &str) -> bool {
        self.cache.write().remove(name);
        match self.api().delete(name, &DeleteParams::default()).await {
            Ok(_) => true,
            Err(kube::Error::Api(e)) if e.code == 404 => true,
            Err(e) => {
                tracing::warn!(secret = name, "deleting the last-known state failed: {e}");
                false
            }
        }
    }

    async fn ensure_namespace(&self) {
        let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(self.client.clone());
        let ns = serde_json::from_value(
            json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": self.namespace } }),
        );
        if let Ok(ns) = ns {
            let _ = api.create(&PostParams::default(), &ns).await;
        }
    }
}
