//! OpenAPI documents built once per state of what a workspace serves.
//!
//! Building a document (and hashing every group version for the v3 root)
//! costs time proportional to the CRD schemas served, and anyone who may
//! read discovery may ask for them as often as they like. Documents are kept
//! serialised, keyed by the registry's generation of the workspace (see
//! [`Registry::generation`]): a CRD change moves the workspace to a new
//! generation, so its next request builds afresh, while workspaces with no
//! CRDs share one set. A document is built once however many requests ask
//! at the same time, on the blocking pool, never on an async worker.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::OnceCell;

use crate::registry::{Registry, ResourceInfo};

/// Generations kept (each with whichever of its documents were asked for);
/// the least recently used goes first.
const GENERATIONS_KEPT: usize = 32;

/// One OpenAPI document the hub serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Document {
    /// `/openapi/v2` as JSON.
    V2Json,
    /// `/openapi/v2` as gnostic protobuf.
    V2Protobuf,
    /// `/openapi/v3`.
    V3Root,
    /// `/openapi/v3/api/v1` or `/openapi/v3/apis/{group}/{version}`.
    V3 { group: String, version: String },
}

/// Serialised OpenAPI documents per workspace generation.
#[derive(Default)]
pub struct OpenApiCache {
    /// `(is the /clusters/* wildcard, generation)` -> documents.
    generations: Mutex<HashMap<(bool, u64), Arc<Generation>>>,
    uses: AtomicU64,
}

/// `(group, version)` -> its `/openapi/v3` document, once built.
type GroupVersionDocuments = HashMap<(String, String), Arc<OnceCell<Bytes>>>;

/// What one generation serves, and the documents built from it so far.
struct Generation {
    resources: Arc<Vec<ResourceInfo>>,
    last_used: AtomicU64,
    v2_json: OnceCell<Bytes>,
    v2_protobuf: OnceCell<Bytes>,
    v3_root: OnceCell<Bytes>,
    v3: Mutex<GroupVersionDocuments>,
}

impl OpenApiCache {
    /// `document` as `cluster` (`None`: `/clusters/*`) serves it now;
    /// `None` when it names a group version that is not served.
    pub async fn get(
        &self,
        registry: &Registry,
        cluster: Option<&str>,
        document: Document,
    ) -> Result<Option<Bytes>, tokio::task::JoinError> {
        let generation = self.generation(registry, cluster);
        let resources = generation.resources.clone();
        let built = match document {
            Document::V2Json => {
                generation
                    .v2_json
                    .get_or_try_init(|| build(move || json(&super::v2(&resources))))
                    .await?
            }
            Document::V2Protobuf => {
                generation
                    .v2_protobuf
                    .get_or_try_init(|| build(move || super::v2_protobuf(&resources).into()))
                    .await?
            }
            Document::V3Root => {
                generation
                    .v3_root
                    .get_or_try_init(|| build(move || json(&super::v3_root(&resources))))
                    .await?
            }
            Document::V3 { group, version } => {
                // Only served group versions get a cell, so asking for
                // made-up ones cannot grow the cache.
                if crate::registry::served_at(&resources, &group, &version).is_none() {
                    return Ok(None);
                }
                let cell = generation
                    .v3
                    .lock()
                    .entry((group.clone(), version.clone()))
                    .or_default()
                    .clone();
                let built = cell
                    .get_or_try_init(|| {
                        build(move || {
                            super::v3_group_version(&resources, &group, &version)
                                .map(|doc| json(&doc))
                                .unwrap_or_default()
                        })
                    })
                    .await?;
                return Ok(Some(built.clone()));
            }
        };
        Ok(Some(built.clone()))
    }

    /// The documents of `cluster`'s current generation, made when first asked.
    fn generation(&self, registry: &Registry, cluster: Option<&str>) -> Arc<Generation> {
        let wildcard = cluster.is_none();
        let now = self.uses.fetch_add(1, Ordering::Relaxed) + 1;
        let current = registry.generation(cluster);
        if let Some(g) = self.generations.lock().get(&(wildcard, current)) {
            g.last_used.store(now, Ordering::Relaxed);
            return g.clone();
        }
        let (resources, current) = registry.resources_at_generation(cluster);
        let mut generations = self.generations.lock();
        if generations.len() >= GENERATIONS_KEPT && !generations.contains_key(&(wildcard, current)) {
            let oldest = generations
                .iter()
                .min_by_key(|(_, g)| g.last_used.load(Ordering::Relaxed))
                .map(|(k, _)| *k);
            if let Some(k) = oldest {
                generations.remove(&k);
            }
        }
        generations
            .entry((wildcard, current))
            .or_insert_with(|| {
                Arc::new(Generation {
                    resources: Arc::new(resources),
                    last_used: AtomicU64::new(now),
                    v2_json: OnceCell::new(),
                    v2_protobuf: OnceCell::new(),
                    v3_root: OnceCell::new(),
                    v3: Mutex::default(),
                })
            })
            .clone()
    }
}

fn json(doc: &serde_json::Value) -> Bytes {
    serde_json::to_vec(doc).unwrap_or_default().into()
}

/// Build a document on the blocking pool.
async fn build(f: impl FnOnce() -> Bytes + Send + 'static) -> Result<Bytes, tokio::task::JoinError> {
    tokio::task::spawn_blocking(f).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd_resource(group: &str) -> ResourceInfo {
        let mut r = crate::registry::kubernetes_resources()
            .into_iter()
            .find(|r| r.resource == "configmaps")
            .expect("configmaps are built in");
        r.group = group.into();
        r.version = "v1".into();
        r.resource = "widgets".into();
        r.kind = "Widget".into();
        r.list_kind = "WidgetList".into();
        r.from_crd = true;
        r
    }

    #[tokio::test]
    async fn documents_are_built_once_per_generation_and_rebuilt_after_a_change() {
        let registry = Registry::default();
        let cache = OpenApiCache::default();
        let root = |c| cache.get(&registry, c, Document::V3Root);
        let a = root(Some("a")).await.unwrap().unwrap();
        let again = root(Some("a")).await.unwrap().unwrap();
        assert_eq!(a.as_ptr(), again.as_ptr(), "served from the cache");
        let b = root(Some("b")).await.unwrap().unwrap();
        assert_eq!(a.as_ptr(), b.as_ptr(), "workspaces without CRDs share documents");

        registry.set_crd_resources("a", vec![crd_resource("example.com")]);
        let changed = root(Some("a")).await.unwrap().unwrap();
        assert!(std::str::from_utf8(&changed)
            .unwrap()
            .contains("apis/example.com/v1"));
        let b_after = root(Some("b")).await.unwrap().unwrap();
        assert_eq!(a.as_ptr(), b_after.as_ptr(), "other workspaces keep theirs");
        let wildcard = root(None).await.unwrap().unwrap();
        assert!(std::str::from_utf8(&wildcard)
            .unwrap()
            .contains("apis/example.com/v1"));

        let gv = |g: &str| Document::V3 {
            group: g.into(),
            version: "v1".into(),
        };
        assert!(cache
            .get(&registry, Some("a"), gv("example.com"))
            .await
            .unwrap()
            .is_some());
        assert!(cache
            .get(&registry, Some("b"), gv("example.com"))
            .await
            .unwrap()
            .is_none());
    }

    #[tokio::test]
    async fn old_generations_are_dropped() {
        let registry = Registry::default();
        let cache = OpenApiCache::default();
        for i in 0..(GENERATIONS_KEPT * 2) {
            registry.set_crd_resources(&format!("ws{i}"), vec![crd_resource("example.com")]);
            cache
                .get(&registry, Some(&format!("ws{i}")), Document::V2Json)
                .await
                .unwrap();
        }
        assert_eq!(cache.generations.lock().len(), GENERATIONS_KEPT);
    }
}
