//! `spec.filter` of a PublishedResource: which kcp objects sync, by their labels
//! (`filter.resource`) and by the labels of their kcp Namespace (`filter.namespace`),
//! both `metav1.LabelSelector`s. The Namespaces' labels come from a watch of
//! `namespaces` across the virtual workspace ([`NamespaceLabels`]); the export claims
//! `namespaces` whenever a PublishedResource filters by them.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::Api;
use kube::runtime::watcher;
use parking_lot::RwLock;
use serde_json::Value;

use ferry_api::syncagent::ResourceFilter;
use ferry_api::well_known::KCP_CLUSTER_ANNOTATION;

/// Labels of an object, as a map.
pub fn labels_of(obj: &Value) -> BTreeMap<String, String> {
    obj["metadata"]["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `labels` satisfy `selector` (`matchLabels` and every `matchExpressions`
/// requirement; an unknown operator matches nothing).
pub fn matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let by_labels = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let by_expressions = selector.match_expressions.iter().flatten().all(|r| {
        let values = r.values.clone().unwrap_or_default();
        let value = labels.get(&r.key);
        match r.operator.as_str() {
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        }
    });
    by_labels && by_expressions
}

/// The verdict of a filter on one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// It syncs.
    Wanted,
    /// It does not.
    Unwanted,
    /// Its Namespace's labels are not known yet.
    Unknown,
}

/// Applies `filter` to `obj`, whose Namespace has `namespace_labels` (`None`: not
/// known yet; cluster-scoped objects pass the namespace filter).
pub fn judge(
    filter: Option<&ResourceFilter>,
    obj: &Value,
    namespace_labels: Option<Option<&BTreeMap<String, String>>>,
) -> Verdict {
    let Some(filter) = filter else {
        return Verdict::Wanted;
    };
    if let Some(selector) = &filter.resource {
        if !matches(selector, &labels_of(obj)) {
            return Verdict::Unwanted;
        }
    }
    if let Some(selector) = &filter.namespace {
        match namespace_labels {
            None => {}
            Some(None) => return Verdict::Unknown,
            Some(Some(labels)) if !matches(selector, labels) => return Verdict::Unwanted,
            Some(Some(_)) => {}
        }
    }
    Verdict::Wanted
}

/// The labels of every kcp Namespace the virtual workspace shows, by
/// `(logical cluster, name)`.
#[derive(Default)]
pub struct NamespaceLabels {
    labels: RwLock<HashMap<(String, String), BTreeMap<String, String>>>,
    listed: AtomicBool,
}

impl NamespaceLabels {
    /// The labels of namespace `name` in `cluster`, if known.
    pub fn get(&self, cluster: &str, name: &str) -> Option<BTreeMap<String, String>> {
        self.labels
            .read()
            .get(&(cluster.to_string(), name.to_string()))
            .cloned()
    }

    /// Whether the first list is done.
    pub fn is_listed(&self) -> bool {
        self.listed.load(Ordering::Relaxed)
    }

    /// Watches `client`'s namespaces (across clusters) until aborted; calls `changed`
    /// when a namespace's labels change after the first list. A failing watch is
    /// reported at info only while `needed` (some PublishedResource filters by
    /// namespace): otherwise nobody asked for it.
    pub async fn watch(
        self: Arc<Self>,
        client: kube::Client,
        changed: impl Fn() + Send + 'static,
        needed: impl Fn() -> bool + Send + 'static,
    ) {
        let api: Api<Namespace> = Api::all(client);
        let mut stream = watcher(api, watcher::Config::default()).boxed();
        let mut fresh: HashMap<(String, String), BTreeMap<String, String>> = HashMap::new();
        let (mut said, mut said_at_debug) = (false, false);
        while let Some(event) = stream.next().await {
            let key_of = |ns: &Namespace| {
                let meta = &ns.metadata;
                let cluster = meta
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(KCP_CLUSTER_ANNOTATION))
                    .cloned()
                    .unwrap_or_default();
                (cluster, meta.name.clone().unwrap_or_default())
            };
            match event {
                Ok(watcher::Event::Init) => fresh.clear(),
                Ok(watcher::Event::InitApply(ns)) => {
                    fresh.insert(key_of(&ns), ns.metadata.labels.clone().unwrap_or_default());
                }
                Ok(watcher::Event::InitDone) => {
                    *self.labels.write() = std::mem::take(&mut fresh);
                    self.listed.store(true, Ordering::Relaxed);
                    changed();
                }
                Ok(watcher::Event::Apply(ns)) => {
                    let labels = ns.metadata.labels.clone().unwrap_or_default();
                    let old = self.labels.write().insert(key_of(&ns), labels.clone());
                    if old.as_ref() != Some(&labels) {
                        changed();
                    }
                }
                Ok(watcher::Event::Delete(ns)) => {
                    self.labels.write().remove(&key_of(&ns));
                }
                Err(e) => {
                    if !said && needed() {
                        tracing::info!("watching kcp namespaces for spec.filter.namespace failed (does the workspace accept the export's namespaces claim?): {e}");
                        said = true;
                    } else if !said && !said_at_debug {
                        said_at_debug = true;
                        tracing::debug!("watching kcp namespaces failed (no PublishedResource filters by namespace yet): {e}");
                    }
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn filter(v: Value) -> ResourceFilter {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn resource_and_namespace_selectors() {
        let f = filter(json!({
            "resource": { "matchLabels": { "sync": "yes" },
                          "matchExpressions": [{ "key": "tier", "operator": "NotIn", "values": ["free"] }] },
            "namespace": { "matchExpressions": [{ "key": "env", "operator": "In", "values": ["prod"] }] },
        }));
        let obj = |labels: Value| json!({ "metadata": { "labels": labels } });
        let prod: BTreeMap<String, String> = [("env".to_string(), "prod".to_string())].into();
        let dev: BTreeMap<String, String> = [("env".to_string(), "dev".to_string())].into();
        let yes = obj(json!({ "sync": "yes" }));
        assert_eq!(judge(Some(&f), &yes, Some(Some(&prod))), Verdict::Wanted);
        assert_eq!(judge(Some(&f), &yes, Some(Some(&dev))), Verdict::Unwanted);
        assert_eq!(judge(Some(&f), &yes, Some(None)), Verdict::Unknown);
        assert_eq!(judge(Some(&f), &yes, None), Verdict::Wanted, "cluster-scoped");
        let free = obj(json!({ "sync": "yes", "tier": "free" }));
        assert_eq!(judge(Some(&f), &free, Some(Some(&prod))), Verdict::Unwanted);
        assert_eq!(judge(None, &free, None), Verdict::Wanted);
    }
}
