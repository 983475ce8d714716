//! Discovery documents: `/version`, `/api`, `/apis`, `/apis/{group}`, the
//! group-version resource lists, and aggregated discovery
//! (`apidiscovery.k8s.io/v2` `APIGroupDiscoveryList`).
//!
//! Every builder is pure: it takes the resources one workspace serves
//! (possibly several versions of a group) and returns the JSON body.
//! Groups appear in the order their first resource appears in the input;
//! versions within a group are sorted by Kubernetes version priority, the
//! first being the preferred version.

use std::cmp::Ordering;

use base64::Engine;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::registry::ResourceInfo;

/// Kubernetes major version the hub reports.
pub const KUBERNETES_MAJOR: &str = "1";
/// Kubernetes minor version the hub reports (the API level it implements).
pub const KUBERNETES_MINOR: &str = "33";
/// `gitVersion` in `/version`. The `+ferry-…` part is semver build metadata,
/// so version checks (`>= 1.33.0`) treat the hub as 1.33.0; a pre-release
/// suffix (`-ferry`) would make it compare lower than 1.33.0.
pub const GIT_VERSION: &str = concat!("v1.33.0+ferry-v", env!("CARGO_PKG_VERSION"));

/// Content type of an aggregated discovery v2 response.
pub const AGGREGATED_V2_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
/// Content type of an aggregated discovery v2beta1 response.
pub const AGGREGATED_V2BETA1_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";

/// The verbs of a status-like subresource.
const GET_PATCH_UPDATE: &[&str] = &["get", "patch", "update"];

/// Which `apidiscovery.k8s.io` version an aggregated discovery response uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggregatedVersion {
    V2,
    V2Beta1,
}

impl AggregatedVersion {
    /// `apiVersion` of the `APIGroupDiscoveryList`.
    pub fn api_version(self) -> &'static str {
        match self {
            AggregatedVersion::V2 => "apidiscovery.k8s.io/v2",
            AggregatedVersion::V2Beta1 => "apidiscovery.k8s.io/v2beta1",
        }
    }

    /// The response `Content-Type`; clients only parse the body as aggregated
    /// discovery when it is set.
    pub fn content_type(self) -> &'static str {
        match self {
            AggregatedVersion::V2 => AGGREGATED_V2_CONTENT_TYPE,
            AggregatedVersion::V2Beta1 => AGGREGATED_V2BETA1_CONTENT_TYPE,
        }
    }
}

/// Picks the aggregated discovery version an `Accept` header asks for, in the
/// client's order of preference (kubectl and kube-rs list v2 first, then
/// v2beta1, then plain `application/json`). `None` means: serve the legacy
/// `APIVersions`/`APIGroupList` document.
pub fn negotiate_aggregated(accept: &str) -> Option<AggregatedVersion> {
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default();
        if !media.eq_ignore_ascii_case("application/json") {
            continue;
        }
        let (mut group, mut version, mut kind, mut quality_zero) = (None, None, None, false);
        for param in parts {
            let (key, value) = param.split_once('=').unwrap_or((param, ""));
            let value = value.trim().trim_matches('"');
            match key.trim().to_ascii_lowercase().as_str() {
                "g" => group = Some(value),
                "v" => version = Some(value),
                "as" => kind = Some(value),
                "q" => quality_zero = value.parse::<f32>().is_ok_and(|q| q <= 0.0),
                _ => {}
            }
        }
        if quality_zero || group != Some("apidiscovery.k8s.io") || kind != Some("APIGroupDiscoveryList") {
            continue;
        }
        match version {
            Some("v2") => return Some(AggregatedVersion::V2),
            Some("v2beta1") => return Some(AggregatedVersion::V2Beta1),
            _ => {}
        }
    }
    None
}

/// `/version`.
pub fn version() -> Value {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    };
    json!({
        "major": KUBERNETES_MAJOR,
        "minor": KUBERNETES_MINOR,
        "emulationMajor": KUBERNETES_MAJOR,
        "emulationMinor": KUBERNETES_MINOR,
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "32",
        "gitVersion": GIT_VERSION,
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": "n/a (rust)",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, arch),
    })
}

/// `/api` (legacy, non-aggregated form).
pub fn core_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}],
    })
}

/// `/apis`: an `APIGroupList` of every non-core group.
pub fn api_group_list(resources: &[ResourceInfo]) -> Value {
    let groups: Vec<Value> = group_views(resources)
        .iter()
        .filter(|g| !g.name.is_empty())
        .map(api_group_body)
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`: an `APIGroup`, or `None` if nothing in `group` is served.
pub fn api_group(resources: &[ResourceInfo], group: &str) -> Option<Value> {
    if group.is_empty() {
        return None;
    }
    let view = group_views(resources).into_iter().find(|g| g.name == group)?;
    let mut body = json!({"kind": "APIGroup", "apiVersion": "v1"});
    merge(&mut body, api_group_body(&view));
    Some(body)
}

/// `/api/v1` (group `""`) and `/apis/{group}/{version}`: an
/// `APIResourceList`, or `None` if the group version is not served.
///
/// Each resource is followed by its subresources (`deployments/status`,
/// `deployments/scale`, `pods/ephemeralcontainers`, ...).
pub fn api_resource_list(resources: &[ResourceInfo], group: &str, version: &str) -> Option<Value> {
    let served = crate::registry::served_at(resources, group, version)?;
    let mut entries = Vec::new();
    for r in served {
        let mut entry = json!({
            "name": r.resource,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": r.verbs,
        });
        if !r.short_names.is_empty() {
            entry["shortNames"] = json!(r.short_names);
        }
        if !r.categories.is_empty() {
            entry["categories"] = json!(r.categories);
        }
        entry["storageVersionHash"] = json!(storage_version_hash(resources, r));
        entries.push(entry);
        for sub in subresources(r) {
            let mut entry = json!({
                "name": format!("{}/{}", r.resource, sub.name),
                "singularName": "",
                "namespaced": r.namespaced,
            });
            if sub.group != r.group || sub.version != r.version {
                entry["group"] = json!(sub.group);
                entry["version"] = json!(sub.version);
            }
            entry["kind"] = json!(sub.kind);
            entry["verbs"] = json!(sub.verbs);
            entries.push(entry);
        }
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": entries,
    }))
}

/// Aggregated discovery (`apidiscovery.k8s.io/v2`) for `/api` (`core`: the
/// core group only) or `/apis` (every other group).
pub fn aggregated_discovery(resources: &[ResourceInfo], core: bool) -> Value {
    aggregated_discovery_as(resources, core, AggregatedVersion::V2)
}

/// [`aggregated_discovery`] in the given `apidiscovery.k8s.io` version (the
/// v2beta1 and v2 shapes are identical for what the hub serves).
pub fn aggregated_discovery_as(resources: &[ResourceInfo], core: bool, version: AggregatedVersion) -> Value {
    let items: Vec<Value> = group_views(resources)
        .iter()
        .filter(|g| g.name.is_empty() == core)
        .map(|g| {
            let mut metadata = Map::new();
            if !g.name.is_empty() {
                metadata.insert("name".into(), json!(g.name));
            }
            metadata.insert("creationTimestamp".into(), Value::Null);
            let versions: Vec<Value> = g
                .versions
                .iter()
                .map(|(v, served)| {
                    let resources: Vec<Value> = served.iter().map(|r| aggregated_resource(r)).collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            json!({"metadata": metadata, "versions": versions})
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": version.api_version(),
        "metadata": {},
        "items": items,
    })
}

/// Orders Kubernetes API versions by priority: GA before beta before alpha,
/// higher major then higher minor first (`v2 > v1 > v1beta2 > v1beta1 >
/// v1alpha1`); versions not of the `vN[alpha|betaM]` form sort last, by name.
/// `Ordering::Less` means `a` is preferred over `b`.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    match (version_key(a), version_key(b)) {
        (Some(ka), Some(kb)) => ka.0.cmp(&kb.0).then(kb.1.cmp(&ka.1)).then(kb.2.cmp(&ka.2)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

/// `(stability: 0 GA / 1 beta / 2 alpha, major, minor)`.
fn version_key(v: &str) -> Option<(u8, u64, u64)> {
    let rest = v.strip_prefix('v')?;
    let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    let major: u64 = rest[..digits].parse().ok().filter(|m| *m > 0)?;
    let tail = &rest[digits..];
    if tail.is_empty() {
        return Some((0, major, 0));
    }
    let (stability, minor) = if let Some(m) = tail.strip_prefix("beta") {
        (1, m)
    } else {
        (2, tail.strip_prefix("alpha")?)
    };
    if minor.is_empty() || !minor.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((stability, major, minor.parse().ok()?))
}

/// The storage version hash of a resource: the first 8 bytes of the SHA-256
/// of `group/storageVersion/kind`, base64 (as kube-apiserver computes it).
/// The storage version is the group's version flagged `storage_version`, or
/// the resource's own version if none is flagged.
fn storage_version_hash(all: &[ResourceInfo], r: &ResourceInfo) -> String {
    let storage = all
        .iter()
        .find(|o| o.group == r.group && o.resource == r.resource && o.storage_version)
        .unwrap_or(r);
    let digest = Sha256::digest(format!("{}/{}/{}", storage.group, storage.version, storage.kind));
    base64::engine::general_purpose::STANDARD.encode(&digest[..8])
}

/// A group with its versions in priority order, each with its resources.
struct GroupView<'a> {
    name: &'a str,
    versions: Vec<(&'a str, Vec<&'a ResourceInfo>)>,
}

fn group_views(resources: &[ResourceInfo]) -> Vec<GroupView<'_>> {
    let mut groups: Vec<GroupView<'_>> = Vec::new();
    for r in resources {
        let index = match groups.iter().position(|g| g.name == r.group) {
            Some(i) => i,
            None => {
                groups.push(GroupView {
                    name: &r.group,
                    versions: Vec::new(),
                });
                groups.len() - 1
            }
        };
        let versions = &mut groups[index].versions;
        match versions.iter_mut().find(|(v, _)| *v == r.version) {
            Some((_, served)) => served.push(r),
            None => versions.push((&r.version, vec![r])),
        }
    }
    for g in &mut groups {
        g.versions.sort_by(|a, b| compare_versions(a.0, b.0));
    }
    own_groups_first(&mut groups);
    groups
}

/// Whether `g` serves a built-in resource that yields its plural
/// ([`ResourceInfo::yields_plural`]).
fn yields(g: &GroupView<'_>) -> bool {
    g.versions.iter().flat_map(|(_, rs)| rs).any(|r| r.yields_plural)
}

/// A group the workspace added itself (CRDs or an APIBinding) serving a
/// plural of a group that yields its plurals (kcp TMC's, which the hub
/// serves built in in every workspace and whose `locations` and
/// `synctargets` KubeStellar reuses) moves just ahead of the first such
/// group. kubectl resolves a plural served by several groups to the first
/// group discovery lists, so in a KubeStellar inventory workspace
/// `kubectl get locations` means KubeStellar's Locations, as the user put
/// them there; where only the built-ins are served, nothing moves.
fn own_groups_first(groups: &mut Vec<GroupView<'_>>) {
    let Some(first) = groups.iter().position(yields) else {
        return;
    };
    let resources = |g: &GroupView<'_>| -> Vec<(String, bool)> {
        g.versions
            .iter()
            .flat_map(|(_, rs)| rs.iter().map(|r| (r.resource.clone(), r.from_crd)))
            .collect()
    };
    let plurals: std::collections::HashSet<String> = groups
        .iter()
        .filter(|g| yields(g))
        .flat_map(|g| resources(g).into_iter().map(|(r, _)| r))
        .collect();
    let (mut moving, mut staying) = (Vec::new(), Vec::new());
    for (i, g) in std::mem::take(groups).into_iter().enumerate() {
        let rs = resources(&g);
        let own = i > first && rs.iter().all(|(_, crd)| *crd) && rs.iter().any(|(r, _)| plurals.contains(r));
        if own {
            moving.push(g);
        } else {
            staying.push(g);
        }
    }
    staying.splice(first..first, moving);
    *groups = staying;
}

/// `name`, `versions` and `preferredVersion` of an `APIGroup`.
fn api_group_body(g: &GroupView<'_>) -> Value {
    let versions: Vec<Value> = g
        .versions
        .iter()
        .map(|(v, _)| json!({"groupVersion": format!("{}/{}", g.name, v), "version": v}))
        .collect();
    let preferred = versions.first().cloned().unwrap_or(Value::Null);
    json!({"name": g.name, "versions": versions, "preferredVersion": preferred})
}

fn aggregated_resource(r: &ResourceInfo) -> Value {
    let mut entry = json!({
        "resource": r.resource,
        "responseKind": {"group": r.group, "version": r.version, "kind": r.kind},
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular,
        "verbs": r.verbs,
    });
    if !r.short_names.is_empty() {
        entry["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        entry["categories"] = json!(r.categories);
    }
    let subs: Vec<Value> = subresources(r)
        .into_iter()
        .map(|s| {
            json!({
                "subresource": s.name,
                "responseKind": {"group": s.group, "version": s.version, "kind": s.kind},
                "verbs": s.verbs,
            })
        })
        .collect();
    if !subs.is_empty() {
        entry["subresources"] = Value::Array(subs);
    }
    entry
}

/// How a subresource is described in discovery.
struct Subresource {
    name: String,
    group: String,
    version: String,
    kind: String,
    verbs: &'static [&'static str],
}

/// The subresources of `r`: `status`, `scale`, then the extra ones in order.
fn subresources(r: &ResourceInfo) -> Vec<Subresource> {
    let mut names: Vec<&str> = Vec::new();
    if r.status_subresource {
        names.push("status");
    }
    if r.scale_subresource.is_some() {
        names.push("scale");
    }
    for extra in &r.extra_subresources {
        if !names.contains(&extra.as_str()) {
            names.push(extra);
        }
    }
    names.into_iter().map(|name| subresource_shape(r, name)).collect()
}

/// The verbs discovery lists for subresource `name` of `r`, or `None` when
/// `r` has no such subresource.
pub fn subresource_verbs(r: &ResourceInfo, name: &str) -> Option<&'static [&'static str]> {
    subresources(r)
        .into_iter()
        .find(|s| s.name == name)
        .map(|s| s.verbs)
}

/// Kind and verbs of a subresource as kube-apiserver reports them; unknown
/// subresources are treated as views of the parent object (get/patch/update).
fn subresource_shape(r: &ResourceInfo, name: &str) -> Subresource {
    let own = |kind: &str, verbs: &'static [&'static str]| {
        (r.group.as_str(), r.version.as_str(), kind.to_string(), verbs)
    };
    let (group, version, kind, verbs): (&str, &str, String, &'static [&'static str]) = match name {
        "scale" => ("autoscaling", "v1", "Scale".into(), GET_PATCH_UPDATE),
        "eviction" => ("policy", "v1", "Eviction".into(), &["create"]),
        "token" => ("authentication.k8s.io", "v1", "TokenRequest".into(), &["create"]),
        "log" => own(&r.kind, &["get"]),
        "binding" => own("Binding", &["create"]),
        "exec" => own("PodExecOptions", &["create", "get"]),
        "attach" => own("PodAttachOptions", &["create", "get"]),
        "portforward" => own("PodPortForwardOptions", &["create", "get"]),
        "proxy" => own(
            &format!("{}ProxyOptions", r.kind),
            &["create", "delete", "get", "patch", "update"],
        ),
        "finalize" => own(&r.kind, &["update"]),
        _ => own(&r.kind, GET_PATCH_UPDATE),
    };
    Subresource {
        name: name.to_string(),
        group: group.into(),
        version: version.into(),
        kind,
        verbs,
    }
}

fn merge(target: &mut Value, extra: Value) {
    if let (Value::Object(target), Value::Object(extra)) = (target, extra) {
        target.extend(extra);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::registry::{ScalePaths, ALL_VERBS};

    /// A fully served resource with no subresources.
    pub(crate) fn resource(group: &str, version: &str, kind: &str, namespaced: bool) -> ResourceInfo {
        let singular = kind.to_ascii_lowercase();
        ResourceInfo {
            group: group.into(),
            version: version.into(),
            resource: format!("{singular}s"),
            singular,
            kind: kind.into(),
            list_kind: format!("{kind}List"),
            namespaced,
            short_names: Vec::new(),
            categories: Vec::new(),
            verbs: ALL_VERBS.iter().map(|v| v.to_string()).collect(),
            status_subresource: false,
            scale_subresource: None,
            extra_subresources: Vec::new(),
            printer_columns: Vec::new(),
            schema: None,
            selectable_fields: Vec::new(),
            storage_version: false,
            from_crd: false,
            binding: None,
            terminating: false,
            yields_plural: false,
        }
    }

    #[test]
    fn a_workspaces_own_group_comes_before_a_yielding_one_with_the_same_plural() {
        let names = |rs: &[ResourceInfo]| -> Vec<String> {
            group_views(rs).iter().map(|g| g.name.to_string()).collect()
        };
        let built_in = |group, kind| ResourceInfo {
            yields_plural: true,
            ..resource(group, "v1alpha1", kind, false)
        };
        let own = |group, version, kind| ResourceInfo {
            from_crd: true,
            ..resource(group, version, kind, false)
        };
        let places = built_in("places.example.org", "Location");
        let targets = built_in("targets.example.org", "SyncTarget");
        let other = own("example.com", "v1", "Widget");
        let core = resource("", "v1", "Pod", true);
        // Only the built-ins: as listed.
        let alone = [core.clone(), targets.clone(), places.clone(), other.clone()];
        assert_eq!(
            names(&alone),
            ["", "targets.example.org", "places.example.org", "example.com"]
        );
        // The workspace's own group serving their plurals: ahead of them; others stay.
        let mine = |kind| own("mine.example.net", "v2alpha1", kind);
        let both = [core, targets, places, other, mine("Location"), mine("SyncTarget")];
        assert_eq!(
            names(&both),
            [
                "",
                "mine.example.net",
                "targets.example.org",
                "places.example.org",
                "example.com"
            ]
        );
        // A built-in that does not yield keeps its place.
        let plain = [resource("", "v1", "Location", false), mine("Location")];
        assert_eq!(names(&plain), ["", "mine.example.net"]);
    }

    /// A small workspace: core pods and namespaces, apps deployments, and a
    /// CRD served at v1alpha1, v1 and v1beta1 (storage v1).
    pub(crate) fn sample() -> Vec<ResourceInfo> {
        let mut pods = resource("", "v1", "Pod", true);
        pods.short_names = vec!["po".into()];
        pods.categories = vec!["all".into()];
        pods.status_subresource = true;
        pods.extra_subresources = vec!["ephemeralcontainers".into(), "eviction".into(), "log".into()];
        let namespaces = resource("", "v1", "Namespace", false);
        let mut deployments = resource("apps", "v1", "Deployment", true);
        deployments.short_names = vec!["deploy".into()];
        deployments.status_subresource = true;
        deployments.scale_subresource = Some(ScalePaths {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            label_selector: Some(".status.selector".into()),
        });
        let widget = |version: &str, storage: bool| {
            let mut w = resource("example.com", version, "Widget", true);
            w.from_crd = true;
            w.storage_version = storage;
            w.status_subresource = true;
            w.schema = Some(Arc::new(json!({
                "type": "object",
                "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}},
            })));
            w
        };
        vec![
            pods,
            namespaces,
            deployments,
            widget("v1alpha1", false),
            widget("v1", true),
            widget("v1beta1", false),
        ]
    }

    #[test]
    fn versions_sort_by_kubernetes_priority() {
        let mut versions = vec![
            "v1alpha1",
            "foo1",
            "v1beta1",
            "v2",
            "v1",
            "v1beta2",
            "v11alpha2",
            "v3beta1",
            "foo10",
        ];
        versions.sort_by(|a, b| compare_versions(a, b));
        assert_eq!(
            versions,
            vec![
                "v2",
                "v1",
                "v3beta1",
                "v1beta2",
                "v1beta1",
                "v11alpha2",
                "v1alpha1",
                "foo1",
                "foo10"
            ]
        );
    }

    #[test]
    fn version_reports_1_33() {
        let v = version();
        assert_eq!(v["major"], "1");
        assert_eq!(v["minor"], "33");
        assert!(v["gitVersion"].as_str().unwrap().starts_with("v1.33.0+ferry"));
        let info: k8s_openapi::apimachinery::pkg::version::Info = serde_json::from_value(v).unwrap();
        assert_eq!(info.minor, "33");
    }

    #[test]
    fn core_versions_lists_v1() {
        let v: k8s_openapi::apimachinery::pkg::apis::meta::v1::APIVersions =
            serde_json::from_value(core_versions()).unwrap();
        assert_eq!(v.versions, vec!["v1".to_string()]);
    }

    #[test]
    fn group_list_prefers_highest_crd_version_and_skips_core() {
        let list = api_group_list(&sample());
        let parsed: k8s_openapi::apimachinery::pkg::apis::meta::v1::APIGroupList =
            serde_json::from_value(list.clone()).unwrap();
        let names: Vec<&str> = parsed.groups.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(names, vec!["apps", "example.com"]);
        let widgets = &parsed.groups[1];
        assert_eq!(
            widgets.preferred_version.as_ref().unwrap().group_version,
            "example.com/v1"
        );
        let versions: Vec<&str> = widgets.versions.iter().map(|v| v.version.as_str()).collect();
        assert_eq!(versions, vec!["v1", "v1beta1", "v1alpha1"]);
        assert_eq!(parsed.groups[0].preferred_version.as_ref().unwrap().version, "v1");
    }

    #[test]
    fn api_group_is_served_per_group() {
        let group = api_group(&sample(), "example.com").unwrap();
        assert_eq!(group["kind"], "APIGroup");
        assert_eq!(group["preferredVersion"]["version"], "v1");
        assert!(api_group(&sample(), "missing.io").is_none());
        assert!(api_group(&sample(), "").is_none());
    }

    #[test]
    fn resource_list_includes_subresources() {
        let list = api_resource_list(&sample(), "apps", "v1").unwrap();
        let parsed: k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList =
            serde_json::from_value(list).unwrap();
        assert_eq!(parsed.group_version, "apps/v1");
        let names: Vec<&str> = parsed.resources.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            vec!["deployments", "deployments/status", "deployments/scale"]
        );
        let deploy = &parsed.resources[0];
        assert_eq!(deploy.kind, "Deployment");
        assert!(deploy.namespaced);
        assert_eq!(deploy.short_names.as_deref(), Some(&["deploy".to_string()][..]));
        assert_eq!(deploy.storage_version_hash.as_deref().map(str::len), Some(12));
        let status = &parsed.resources[1];
        assert_eq!(
            (status.kind.as_str(), status.verbs.clone()),
            ("Deployment", vec!["get".into(), "patch".into(), "update".into()])
        );
        let scale = &parsed.resources[2];
        assert_eq!(
            (
                scale.group.as_deref(),
                scale.version.as_deref(),
                scale.kind.as_str()
            ),
            (Some("autoscaling"), Some("v1"), "Scale")
        );

        let core = api_resource_list(&sample(), "", "v1").unwrap();
        assert_eq!(core["groupVersion"], "v1");
        let names: Vec<&str> = core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            vec![
                "pods",
                "pods/status",
                "pods/ephemeralcontainers",
                "pods/eviction",
                "pods/log",
                "namespaces"
            ]
        );
        assert!(api_resource_list(&sample(), "apps", "v1beta1").is_none());
    }

    #[test]
    fn storage_version_hash_follows_the_storage_version() {
        let all = sample();
        let hash = |v: &str| {
            let list = api_resource_list(&all, "example.com", v).unwrap();
            list["resources"][0]["storageVersionHash"]
                .as_str()
                .unwrap()
                .to_string()
        };
        assert_eq!(hash("v1alpha1"), hash("v1"));
        // Known value: kube-apiserver's hash for apps/v1 Deployment.
        let apps = api_resource_list(&all, "apps", "v1").unwrap();
        assert_eq!(apps["resources"][0]["storageVersionHash"], "8aSe+NMegvE=");
    }

    #[test]
    fn aggregated_discovery_parses_as_kube_v2() {
        use kube::core::discovery::v2::APIGroupDiscoveryList;
        let apis: APIGroupDiscoveryList =
            serde_json::from_value(aggregated_discovery(&sample(), false)).unwrap();
        let names: Vec<String> = apis
            .items
            .iter()
            .map(|g| g.metadata.clone().unwrap().name.unwrap())
            .collect();
        assert_eq!(names, vec!["apps", "example.com"]);
        let widgets = &apis.items[1];
        let versions: Vec<&str> = widgets
            .versions
            .iter()
            .map(|v| v.version.as_deref().unwrap())
            .collect();
        assert_eq!(versions, vec!["v1", "v1beta1", "v1alpha1"]);
        assert_eq!(widgets.versions[0].freshness.as_deref(), Some("Current"));

        let deploy = &apis.items[0].versions[0].resources[0];
        assert_eq!(deploy.resource.as_deref(), Some("deployments"));
        assert_eq!(deploy.scope.as_deref(), Some("Namespaced"));
        assert_eq!(deploy.singular_resource.as_deref(), Some("deployment"));
        let kind = deploy.response_kind.as_ref().unwrap();
        assert_eq!(
            (
                kind.group.as_deref(),
                kind.version.as_deref(),
                kind.kind.as_deref()
            ),
            (Some("apps"), Some("v1"), Some("Deployment"))
        );
        let subs: Vec<&str> = deploy
            .subresources
            .iter()
            .map(|s| s.subresource.as_deref().unwrap())
            .collect();
        assert_eq!(subs, vec!["status", "scale"]);
        assert_eq!(
            deploy.subresources[1]
                .response_kind
                .as_ref()
                .unwrap()
                .kind
                .as_deref(),
            Some("Scale")
        );

        let core_json = aggregated_discovery(&sample(), true);
        assert_eq!(core_json["apiVersion"], "apidiscovery.k8s.io/v2");
        let core: APIGroupDiscoveryList = serde_json::from_value(core_json).unwrap();
        assert_eq!(core.items.len(), 1);
        let ns = &core.items[0].versions[0].resources[1];
        assert_eq!(ns.scope.as_deref(), Some("Cluster"));
        assert_eq!(ns.response_kind.as_ref().unwrap().group.as_deref(), Some(""));

        let beta = aggregated_discovery_as(&sample(), true, AggregatedVersion::V2Beta1);
        assert_eq!(beta["apiVersion"], "apidiscovery.k8s.io/v2beta1");
    }

    #[test]
    fn accept_header_negotiates_aggregated_discovery() {
        let kubectl = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(negotiate_aggregated(kubectl), Some(AggregatedVersion::V2));
        let beta_only =
            "application/json; g=apidiscovery.k8s.io; v=v2beta1; as=APIGroupDiscoveryList, application/json";
        assert_eq!(negotiate_aggregated(beta_only), Some(AggregatedVersion::V2Beta1));
        assert_eq!(negotiate_aggregated("application/json"), None);
        assert_eq!(negotiate_aggregated("*/*"), None);
        let refused = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;q=0";
        assert_eq!(negotiate_aggregated(refused), None);
        assert_eq!(AggregatedVersion::V2.content_type(), AGGREGATED_V2_CONTENT_TYPE);
    }
}
