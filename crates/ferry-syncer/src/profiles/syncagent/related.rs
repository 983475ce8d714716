//! `spec.related[]`: objects that travel with each primary object, as the reference's
//! `syncer_related.go` handles them.
//!
//! - `origin: kcp` objects go from the consumer's workspace to the service cluster,
//!   `origin: service` objects (a Secret the service's controller wrote, cert-manager's
//!   flow) from the service cluster to the consumer's workspace.
//! - The origin side's objects are found from the primary on that side (the kcp
//!   object, or its local copy): `object.reference{path,regex}` (a gjson path into the
//!   primary, evaluated on both sides' primaries to pair origin and destination names),
//!   `object.template` (rendered on each side with `.Side`, `.Object`, `.ClusterName`,
//!   `.ClusterPath`), or `object.selector` (labels, keys and values may be templates
//!   over `.LocalObject`/`.RemoteObject`; found names rewritten by `rewrite.regex` or
//!   `rewrite.template`). `object.namespace` picks the namespaces the same ways;
//!   without it, each side's primary's namespace.
//! - The destination copy is the origin object without server-set metadata, as
//!   `projection{group,version,resource}` says (same kind), after `mutation.spec`.
//!   No sync metadata is put on it (the reference's `metadataOnDestination=false`).
//!   Service-origin objects are recorded on the kcp primary as the annotation
//!   `related-resources.syncagent.kcp.io/<identifier>.<index>`.
//! - Cleanup, when the primary is deleted and before it is released: the service-side
//!   copies of kcp-origin objects always; the kcp copies of service-origin objects
//!   with `cleanup: true`.
//!
//! Changes are seen through watches of each origin resource (see [`super::related_watch`]):
//! an event is mapped back to the primaries that resolve to it here ([`Interest`]), and
//! with `watch.byOwner`/`watch.bySelector` also as the reference maps it.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement as K8sRequirement,
};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::ApiResource;
use serde_json::{json, Value};

use ferry_api::syncagent::{
    RegularExpression, RelatedResourceObjectSelector, RelatedResourceObjectSpec, RelatedResourceSpec,
};

use super::filter::labels_of;
use super::mutation;
use super::templating::render;
use crate::transform::strip_server_fields;

/// The annotation prefix recording service-origin related objects on the kcp primary.
pub const RELATED_ANNOTATION_PREFIX: &str = "related-resources.syncagent.kcp.io/";

/// The primary object on both sides, and where the kcp one lives.
pub struct Primaries<'a> {
    /// The kcp object.
    pub remote: &'a Value,
    /// Its copy on the service cluster.
    pub local: &'a Value,
    /// The kcp object's logical cluster.
    pub cluster: &'a str,
}

/// Clients for both sides: the service cluster, and the primary's kcp workspace.
pub struct Sides {
    /// The service cluster.
    pub service: kube::Client,
    /// The primary's logical cluster, through the virtual workspace.
    pub kcp: kube::Client,
}

/// Where origin objects live: the service cluster, or one kcp logical cluster.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Origin {
    /// The service cluster.
    Service,
    /// A consumer's logical cluster.
    Kcp(String),
}

/// Origin objects one primary resolves to (or would, once they exist): what an origin
/// event is matched against to find the primaries it concerns.
#[derive(Debug, Clone, PartialEq)]
pub struct Interest {
    /// Where they live.
    pub origin: Origin,
    /// The origin resource's group.
    pub group: String,
    /// The origin resource.
    pub resource: String,
    /// Their namespace; `None`: any (namespaces found by a selector).
    pub namespace: Option<String>,
    /// Their name; `None`: any the labels match.
    pub name: Option<String>,
    /// Labels they carry (`object.selector`, templates rendered).
    pub labels: Option<LabelSelector>,
}

impl Interest {
    /// Whether the origin object `obj` (of `group`/`resource`, at `origin`) is one.
    pub fn matches(&self, origin: &Origin, group: &str, resource: &str, obj: &Value) -> bool {
        let meta = &obj["metadata"];
        self.origin == *origin
            && self.group == group
            && self.resource == resource
            && self
                .namespace
                .as_ref()
                .is_none_or(|ns| meta["namespace"].as_str().unwrap_or_default() == ns)
            && self
                .name
                .as_ref()
                .is_none_or(|n| meta["name"].as_str() == Some(n.as_str()))
            && self
                .labels
                .as_ref()
                .is_none_or(|sel| super::filter::matches(sel, &labels_of(obj)))
    }
}

/// One origin object and where its copy goes.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// The origin object.
    pub origin: Value,
    /// Destination namespace (empty: cluster-scoped).
    pub namespace: String,
    /// Destination name.
    pub name: String,
}

fn is_service(spec: &RelatedResourceSpec) -> bool {
    spec.origin == "service"
}

/// Where `spec`'s origin objects live for a primary in `cluster`.
pub fn origin_of(spec: &RelatedResourceSpec, cluster: &str) -> Origin {
    if is_service(spec) {
        Origin::Service
    } else {
        Origin::Kcp(cluster.to_string())
    }
}

/// The origin-side resource (`group`/`version`/`resource`, or the deprecated `kind`).
pub fn origin_resource(spec: &RelatedResourceSpec) -> (String, String, String) {
    let resource = match (spec.resource.as_str(), spec.kind.as_str()) {
        ("", "ConfigMap") => "configmaps".to_string(),
        ("", "Secret") => "secrets".to_string(),
        (r, _) => r.to_string(),
    };
    let version = if spec.version.is_empty() {
        "v1".to_string()
    } else {
        spec.version.clone()
    };
    (spec.group.clone(), version, resource)
}

/// The destination-side resource: the origin's with `projection` applied.
pub fn dest_resource(spec: &RelatedResourceSpec) -> (String, String, String) {
    let (mut group, mut version, mut resource) = origin_resource(spec);
    if let Some(p) = &spec.projection {
        if !p.group.is_empty() {
            group = p.group.clone();
        }
        if !p.version.is_empty() {
            version = p.version.clone();
        }
        if !p.resource.is_empty() {
            resource = p.resource.clone();
        }
    }
    (group, version, resource)
}

/// Checks a related resource's spec when publishing; the error names the field.
pub fn validate(spec: &RelatedResourceSpec, index: usize) -> Result<(), String> {
    let at = |f: &str| format!("spec.related[{index}]{f}");
    if spec.identifier.is_empty() {
        return Err(format!("{} must not be empty", at(".identifier")));
    }
    if spec.origin != "service" && spec.origin != "kcp" {
        return Err(format!(
            "{} is {:?}; use \"service\" or \"kcp\"",
            at(".origin"),
            spec.origin
        ));
    }
    if origin_resource(spec).2.is_empty() {
        return Err(format!(
            "{} names no resource; set group, version and resource (or the deprecated kind ConfigMap or Secret)",
            at("")
        ));
    }
    let one_way = |o: &RelatedResourceObjectSpec, field: &str| -> Result<(), String> {
        let n = [o.reference.is_some(), o.template.is_some(), o.selector.is_some()]
            .iter()
            .filter(|b| **b)
            .count();
        if n == 1 {
            Ok(())
        } else {
            Err(format!(
                "{} must have exactly one of reference, template or selector",
                at(field)
            ))
        }
    };
    let object = &spec.object;
    one_way(
        &RelatedResourceObjectSpec {
            selector: object.selector.clone(),
            reference: object.reference.clone(),
            template: object.template.clone(),
        },
        ".object",
    )?;
    if let Some(ns) = &object.namespace {
        one_way(ns, ".object.namespace")?;
    }
    if let Some(m) = &spec.mutation {
        mutation::validate(&m.spec, &at(".mutation.spec")).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// gjson-style values at `path` of `obj` (arrays give one value per element), each
/// through `regex`.
fn reference_values(
    obj: &Value,
    path: &str,
    regex: Option<&RegularExpression>,
) -> Result<Vec<String>, String> {
    let mut cur = Some(obj);
    for seg in path.split('.') {
        cur = cur.and_then(|v| match v {
            Value::Object(m) => m.get(seg),
            Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
            _ => None,
        });
    }
    let text = |v: &Value| match v {
        Value::String(s) => s.trim().to_string(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    let values: Vec<String> = match cur {
        None => return Ok(vec![]),
        Some(Value::Array(items)) => items.iter().map(text).collect(),
        Some(v) => vec![text(v)],
    };
    values.into_iter().map(|v| apply_regex(&v, regex)).collect()
}

fn apply_regex(value: &str, re: Option<&RegularExpression>) -> Result<String, String> {
    let Some(re) = re else {
        return Ok(value.to_string());
    };
    if re.pattern.is_empty() {
        return Ok(re.replacement.clone());
    }
    let compiled =
        regex::Regex::new(&re.pattern).map_err(|e| format!("invalid pattern {:?}: {e}", re.pattern))?;
    Ok(compiled.replace_all(value, re.replacement.as_str()).into_owned())
}

/// The origin and destination primaries of `spec`, and the local/remote pair.
fn sides<'a>(spec: &RelatedResourceSpec, p: &Primaries<'a>) -> (&'a Value, &'a Value) {
    if is_service(spec) {
        (p.local, p.remote)
    } else {
        (p.remote, p.local)
    }
}

fn template_both(
    spec: &RelatedResourceSpec,
    p: &Primaries<'_>,
    template: &str,
) -> Result<(String, String), String> {
    let (origin, dest) = sides(spec, p);
    let (origin_side, dest_side) = if is_service(spec) {
        ("service", "kcp")
    } else {
        ("kcp", "service")
    };
    let ctx = |side: &str, obj: &Value| json!({ "Side": side, "Object": obj, "ClusterName": p.cluster, "ClusterPath": "" });
    Ok((
        render(template, &ctx(origin_side, origin))?,
        render(template, &ctx(dest_side, dest))?,
    ))
}

fn rewrite(
    p: &Primaries<'_>,
    selector: &RelatedResourceObjectSelector,
    value: &str,
    related: Option<&Value>,
) -> Result<String, String> {
    match (&selector.rewrite.regex, &selector.rewrite.template) {
        (Some(re), _) => apply_regex(value, Some(re)),
        (None, Some(t)) => render(
            &t.template,
            &json!({ "Value": value, "RelatedObject": related, "LocalObject": p.local,
                     "RemoteObject": p.remote, "ClusterName": p.cluster, "ClusterPath": "" }),
        ),
        (None, None) => Err("selector.rewrite must have one of regex or template".into()),
    }
}

/// `matchLabels` with templated keys and values (empty keys dropped), as a selector
/// string, plus `matchExpressions`.
fn selector_string(p: &Primaries<'_>, selector: &RelatedResourceObjectSelector) -> Result<String, String> {
    let ctx = json!({ "LocalObject": p.local, "RemoteObject": p.remote, "ClusterName": p.cluster, "ClusterPath": "" });
    let mut parts = vec![];
    for (k, v) in &selector.match_labels {
        let key = render(k, &ctx)?;
        if key.is_empty() {
            continue;
        }
        parts.push(format!("{key}={}", render(v, &ctx)?));
    }
    for r in &selector.match_expressions {
        parts.push(match r.operator.as_str() {
            "In" => format!("{} in ({})", r.key, r.values.join(",")),
            "NotIn" => format!("{} notin ({})", r.key, r.values.join(",")),
            "Exists" => r.key.clone(),
            "DoesNotExist" => format!("!{}", r.key),
            other => return Err(format!("unknown selector operator {other:?}")),
        });
    }
    Ok(parts.join(","))
}

/// The selector of [`selector_string`] as a `LabelSelector` (templates rendered).
fn selector_rendered(
    p: &Primaries<'_>,
    selector: &RelatedResourceObjectSelector,
) -> Result<LabelSelector, String> {
    let ctx = json!({ "LocalObject": p.local, "RemoteObject": p.remote, "ClusterName": p.cluster, "ClusterPath": "" });
    let mut labels = BTreeMap::new();
    for (k, v) in &selector.match_labels {
        let key = render(k, &ctx)?;
        if !key.is_empty() {
            labels.insert(key, render(v, &ctx)?);
        }
    }
    let expressions: Vec<K8sRequirement> = selector
        .match_expressions
        .iter()
        .map(|r| K8sRequirement {
            key: r.key.clone(),
            operator: r.operator.clone(),
            values: Some(r.values.clone()),
        })
        .collect();
    Ok(LabelSelector {
        match_labels: Some(labels),
        match_expressions: Some(expressions),
    })
}

fn api(client: &kube::Client, res: &ApiResource, namespace: &str) -> Api<DynamicObject> {
    if namespace.is_empty() {
        Api::all_with(client.clone(), res)
    } else {
        Api::namespaced_with(client.clone(), namespace, res)
    }
}

fn api_resource((group, version, resource): (String, String, String), kind: &str) -> ApiResource {
    let api_version = if group.is_empty() {
        version.clone()
    } else {
        format!("{group}/{version}")
    };
    ApiResource {
        group,
        version,
        api_version,
        kind: kind.to_string(),
        plural: resource,
    }
}

/// The `kind` of a resource, from the origin objects (or a guess for core types).
fn kind_guess(resource: &str) -> String {
    match resource {
        "secrets" => "Secret".into(),
        "configmaps" => "ConfigMap".into(),
        other => {
            let singular = other.strip_suffix('s').unwrap_or(other);
            let mut c = singular.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect())
                .unwrap_or_default()
        }
    }
}

/// Finds the origin objects of `spec` for the primaries `p`; adds to `interests` where
/// they are looked for (also those that do not exist yet), and to `missing` how many
/// objects named by the primaries do not exist at their origin.
pub async fn resolve(
    spec: &RelatedResourceSpec,
    p: &Primaries<'_>,
    s: &Sides,
    interests: &mut Vec<Interest>,
    missing: &mut usize,
) -> Result<Vec<Resolved>, String> {
    let (origin_primary, dest_primary) = sides(spec, p);
    let ns = |o: &Value| {
        o["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let origin_client = if is_service(spec) { &s.service } else { &s.kcp };
    // Namespaces: origin → destination.
    let namespaces: BTreeMap<String, String> = match &spec.object.namespace {
        None => [(ns(origin_primary), ns(dest_primary))].into(),
        Some(n) => {
            if let Some(r) = &n.reference {
                let o = reference_values(origin_primary, &r.path, r.regex.as_ref())?;
                let d = reference_values(dest_primary, &r.path, r.regex.as_ref())?;
                if o.len() != d.len() {
                    return Err(format!(
                        "object.namespace.reference {:?}: {} values on the origin side, {} on the destination side",
                        r.path,
                        o.len(),
                        d.len()
                    ));
                }
                o.into_iter()
                    .zip(d)
                    .filter(|(a, b)| !a.is_empty() && !b.is_empty())
                    .collect()
            } else if let Some(t) = &n.template {
                let (o, d) = template_both(spec, p, &t.template)?;
                if o.is_empty() || d.is_empty() {
                    return Ok(vec![]);
                }
                [(o, d)].into()
            } else if let Some(sel) = &n.selector {
                let selector = selector_string(p, sel)?;
                let nss: Api<DynamicObject> = Api::all_with(
                    origin_client.clone(),
                    &api_resource(("".into(), "v1".into(), "namespaces".into()), "Namespace"),
                );
                let found = nss
                    .list(&ListParams::default().labels(&selector))
                    .await
                    .map_err(|e| format!("listing namespaces by {selector:?}: {e}"))?;
                let mut out = BTreeMap::new();
                for n in found.items {
                    let name = n.metadata.name.unwrap_or_default();
                    let dest = rewrite(p, sel, &name, None)?;
                    out.insert(name, dest);
                }
                out
            } else {
                return Err("object.namespace has no way to find namespaces".into());
            }
        }
    };
    let origin_res = api_resource(origin_resource(spec), &kind_guess(&origin_resource(spec).2));
    // Namespaces found by a selector may change: any namespace is of interest then.
    let any_namespace = spec
        .object
        .namespace
        .as_ref()
        .is_some_and(|n| n.selector.is_some());
    let interest = |namespace: Option<&str>, name: Option<&str>, labels: Option<LabelSelector>| Interest {
        origin: origin_of(spec, p.cluster),
        group: origin_res.group.clone(),
        resource: origin_res.plural.clone(),
        namespace: namespace.filter(|_| !any_namespace).map(str::to_string),
        name: name.map(str::to_string),
        labels,
    };
    if any_namespace {
        if let Some(sel) = &spec.object.selector {
            interests.push(interest(None, None, Some(selector_rendered(p, sel)?)));
        }
    }
    let mut out = vec![];
    for (origin_ns, dest_ns) in namespaces {
        let names: BTreeMap<String, (String, Option<Value>)> = if let Some(r) = &spec.object.reference {
            let o = reference_values(origin_primary, &r.path, r.regex.as_ref())?;
            let d = reference_values(dest_primary, &r.path, r.regex.as_ref())?;
            if o.len() != d.len() {
                return Err(format!(
                    "object.reference {:?}: {} values on the origin side, {} on the destination side",
                    r.path,
                    o.len(),
                    d.len()
                ));
            }
            o.into_iter()
                .zip(d)
                .filter(|(a, b)| !a.is_empty() && !b.is_empty())
                .map(|(a, b)| (a, (b, None)))
                .collect()
        } else if let Some(t) = &spec.object.template {
            let (o, d) = template_both(spec, p, &t.template)?;
            if o.is_empty() || d.is_empty() {
                continue;
            }
            [(o, (d, None))].into()
        } else if let Some(sel) = &spec.object.selector {
            if !any_namespace {
                interests.push(interest(Some(&origin_ns), None, Some(selector_rendered(p, sel)?)));
            }
            let selector = selector_string(p, sel)?;
            let found = api(origin_client, &origin_res, &origin_ns)
                .list(&ListParams::default().labels(&selector))
                .await
                .map_err(|e| format!("listing {} by {selector:?}: {e}", origin_res.plural))?;
            let mut names = BTreeMap::new();
            for item in found.items {
                let value = serde_json::to_value(&item).unwrap_or_default();
                let name = item.metadata.name.unwrap_or_default();
                let dest = rewrite(p, sel, &name, Some(&value))?;
                names.insert(name, (dest, Some(value)));
            }
            names
        } else {
            return Err("object has no way to find objects".into());
        };
        for (origin_name, (dest_name, found)) in names {
            if found.is_none() {
                interests.push(interest(Some(&origin_ns), Some(&origin_name), None));
            }
            let origin = match found {
                Some(v) => v,
                None => match api(origin_client, &origin_res, &origin_ns)
                    .get_opt(&origin_name)
                    .await
                {
                    Ok(Some(o)) => serde_json::to_value(o).unwrap_or_default(),
                    Ok(None) => {
                        *missing += 1;
                        continue;
                    }
                    Err(e) => {
                        return Err(format!(
                            "reading {} {origin_ns}/{origin_name}: {e}",
                            origin_res.plural
                        ))
                    }
                },
            };
            out.push(Resolved {
                origin,
                namespace: dest_ns.clone(),
                name: dest_name,
            });
        }
    }
    out.sort_by(|a, b| {
        let key = |r: &Resolved| {
            (
                r.origin["metadata"]["namespace"].to_string(),
                r.origin["metadata"]["name"].to_string(),
            )
        };
        key(a).cmp(&key(b))
    });
    Ok(out)
}

/// The destination copy of `r`: without server-set metadata, renamed, mutated.
fn desired(spec: &RelatedResourceSpec, r: &Resolved, existing: Option<&Value>) -> Result<Value, String> {
    let mut copy = r.origin.clone();
    strip_server_fields(&mut copy);
    if let Some(meta) = copy["metadata"].as_object_mut() {
        meta.remove("ownerReferences");
        meta.remove("finalizers");
    }
    if !spec.sync_status {
        if let Some(obj) = copy.as_object_mut() {
            obj.remove("status");
        }
    }
    let (group, version, _) = dest_resource(spec);
    copy["apiVersion"] = json!(if group.is_empty() {
        version
    } else {
        format!("{group}/{version}")
    });
    let ty = crate::transform::ObjectType::new(
        copy["apiVersion"].as_str().unwrap_or_default(),
        copy["kind"].as_str().unwrap_or_default(),
    );
    crate::transform::allocated::drop_allocated(&mut copy, &ty);
    copy["metadata"]["name"] = json!(r.name);
    if r.namespace.is_empty() {
        if let Some(m) = copy["metadata"].as_object_mut() {
            m.remove("namespace");
        }
    } else {
        copy["metadata"]["namespace"] = json!(r.namespace);
    }
    if let Some(m) = &spec.mutation {
        mutation::apply(&m.spec, "mutation.spec", &mut copy, existing).map_err(|e| e.to_string())?;
    }
    Ok(copy)
}

/// Whether `existing` already holds `desired`'s content and labels/annotations.
fn up_to_date(desired: &Value, existing: &Value) -> bool {
    let content = desired
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| !matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status"))
        .all(|(k, v)| crate::transform::is_semantic_subset(v, &existing[k.as_str()]));
    let meta = ["labels", "annotations"].iter().all(|m| {
        crate::transform::is_semantic_subset(&desired["metadata"][*m], &existing["metadata"][*m])
            || desired["metadata"][*m].is_null()
    });
    content && meta
}

/// Syncs the related objects of `spec` for the primaries `p` (see [`resolve`] for
/// `interests` and `missing`). Returns the destination objects written or up to date
/// (for the primary's annotation).
pub async fn sync(
    spec: &RelatedResourceSpec,
    p: &Primaries<'_>,
    s: &Sides,
    interests: &mut Vec<Interest>,
    missing: &mut usize,
) -> Result<Vec<Resolved>, String> {
    let resolved = resolve(spec, p, s, interests, missing).await?;
    let dest_client = if is_service(spec) { &s.kcp } else { &s.service };
    for r in &resolved {
        let kind = r.origin["kind"].as_str().unwrap_or_default().to_string();
        let res = api_resource(dest_resource(spec), &kind);
        let api = api(dest_client, &res, &r.namespace);
        let existing = api
            .get_opt(&r.name)
            .await
            .map_err(|e| format!("reading {} {}/{}: {e}", res.plural, r.namespace, r.name))?
            .map(|o| serde_json::to_value(o).unwrap_or_default());
        let want = desired(spec, r, existing.as_ref())?;
        let written: Value = match existing {
            None => {
                let obj: DynamicObject = serde_json::from_value(want).map_err(|e| e.to_string())?;
                let mut created = api.create(&PostParams::default(), &obj).await;
                if let (Err(kube::Error::Api(e)), false) = (&created, r.namespace.is_empty()) {
                    if e.code == 404 {
                        // The destination namespace does not exist yet.
                        let nss: Api<DynamicObject> = Api::all_with(
                            dest_client.clone(),
                            &api_resource(("".into(), "v1".into(), "namespaces".into()), "Namespace"),
                        );
                        let ns: DynamicObject = serde_json::from_value(
                            json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": r.namespace } }),
                        )
                        .map_err(|e| e.to_string())?;
                        let _ = nss.create(&PostParams::default(), &ns).await;
                        created = api.create(&PostParams::default(), &obj).await;
                    }
                }
                let created = created
                    .map_err(|e| format!("creating {} {}/{}: {e}", res.plural, r.namespace, r.name))?;
                tracing::info!(related = %spec.identifier, object = %format!("{}/{}", r.namespace, r.name), "created related object");
                serde_json::to_value(created).unwrap_or_default()
            }
            Some(existing) if !up_to_date(&want, &existing) => {
                // Content from the origin; the destination's own metadata (uid,
                // resourceVersion, finalizers) and labels/annotations others set stay.
                let mut body = want.clone();
                let mut meta = existing["metadata"].clone();
                for m in ["labels", "annotations"] {
                    let mut merged = existing["metadata"][m].as_object().cloned().unwrap_or_default();
                    if let Some(w) = want["metadata"][m].as_object() {
                        merged.extend(w.clone());
                    }
                    meta[m] = json!(merged);
                }
                if let Some(m) = meta.as_object_mut() {
                    m.remove("managedFields");
                }
                body["metadata"] = meta;
                if !spec.sync_status && !existing["status"].is_null() {
                    body["status"] = existing["status"].clone();
                }
                let obj: DynamicObject = serde_json::from_value(body).map_err(|e| e.to_string())?;
                let replaced = api
                    .replace(&r.name, &PostParams::default(), &obj)
                    .await
                    .map_err(|e| format!("updating {} {}/{}: {e}", res.plural, r.namespace, r.name))?;
                tracing::debug!(related = %spec.identifier, object = %format!("{}/{}", r.namespace, r.name), "updated related object");
                serde_json::to_value(replaced).unwrap_or_default()
            }
            Some(existing) => existing,
        };
        // `syncStatus`: the origin's status follows, through /status where the
        // destination has that subresource (404: it has none, and the main write
        // carried the status).
        let status = &r.origin["status"];
        if spec.sync_status && !status.is_null() && written["status"] != *status {
            let mut body = written.clone();
            body["status"] = status.clone();
            if let Some(m) = body["metadata"].as_object_mut() {
                m.remove("managedFields");
            }
            let body: DynamicObject = serde_json::from_value(body).map_err(|e| e.to_string())?;
            match api.replace_status(&r.name, &PostParams::default(), &body).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => {
                    return Err(format!(
                        "updating the status of {} {}/{}: {e}",
                        res.plural, r.namespace, r.name
                    ))
                }
            }
        }
    }
    Ok(resolved)
}

/// The annotations recording service-origin related objects on the kcp primary.
pub fn annotations(spec: &RelatedResourceSpec, resolved: &[Resolved]) -> BTreeMap<String, String> {
    resolved
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut v =
                json!({ "name": r.name, "apiVersion": r.origin["apiVersion"], "kind": r.origin["kind"] });
            if !r.namespace.is_empty() {
                v["namespace"] = json!(r.namespace);
            }
            (
                format!("{RELATED_ANNOTATION_PREFIX}{}.{i}", spec.identifier),
                v.to_string(),
            )
        })
        .collect()
}

/// Deletes the destination copies `spec` leaves behind when the primary goes (kcp
/// origin: always; service origin: with `cleanup`). Service-origin copies are found
/// through the primary's annotations. Returns whether all are gone.
pub async fn clean_up(
    spec: &RelatedResourceSpec,
    remote: &Value,
    local: Option<&Value>,
    cluster: &str,
    s: &Sides,
) -> Result<bool, String> {
    let mut targets: Vec<(String, String, String)> = vec![];
    if is_service(spec) {
        if !spec.cleanup {
            return Ok(true);
        }
        let prefix = format!("{RELATED_ANNOTATION_PREFIX}{}.", spec.identifier);
        for (k, v) in remote["metadata"]["annotations"]
            .as_object()
            .into_iter()
            .flatten()
        {
            if k.starts_with(&prefix) {
                let v: Value = v
                    .as_str()
                    .and_then(|v| serde_json::from_str(v).ok())
                    .unwrap_or_default();
                targets.push((
                    v["namespace"].as_str().unwrap_or_default().to_string(),
                    v["name"].as_str().unwrap_or_default().to_string(),
                    v["kind"].as_str().unwrap_or_default().to_string(),
                ));
            }
        }
    } else {
        // The local copy may already be gone: the names come from the kcp side, the
        // namespace from the primary's copy or, with no namespace rule, the cluster's.
        let local = local
            .cloned()
            .unwrap_or_else(|| json!({ "metadata": { "namespace": cluster } }));
        let p = Primaries {
            remote,
            local: &local,
            cluster,
        };
        for r in resolve(spec, &p, s, &mut vec![], &mut 0).await? {
            let kind = r.origin["kind"].as_str().unwrap_or_default().to_string();
            targets.push((r.namespace, r.name, kind));
        }
    }
    let client = if is_service(spec) { &s.kcp } else { &s.service };
    let mut all_gone = true;
    for (namespace, name, kind) in targets {
        if name.is_empty() {
            continue;
        }
        let res = api_resource(dest_resource(spec), &kind);
        match api(client, &res, &namespace)
            .delete(&name, &DeleteParams::default())
            .await
        {
            Ok(either) => {
                if either.is_left() {
                    all_gone = false;
                }
                tracing::info!(related = %spec.identifier, object = %format!("{namespace}/{name}"), "deleted related copy");
            }
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(format!("deleting {} {namespace}/{name}: {e}", res.plural)),
        }
    }
    Ok(all_gone)
}

/// A merge patch setting `wanted` on the primary, if any differs.
pub fn annotation_patch(remote: &Value, wanted: &BTreeMap<String, String>) -> Option<Value> {
    let have = labels_of(&json!({ "metadata": { "labels": remote["metadata"]["annotations"].clone() } }));
    let missing: serde_json::Map<String, Value> = wanted
        .iter()
        .filter(|(k, v)| have.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    (!missing.is_empty()).then(|| json!({ "metadata": { "annotations": missing } }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_pair_both_sides_and_bad_specs_name_the_field() {
        let obj = json!({ "spec": { "secretName": "tls", "list": ["a", " b "] } });
        assert_eq!(reference_values(&obj, "spec.secretName", None).unwrap(), ["tls"]);
        assert_eq!(reference_values(&obj, "spec.list", None).unwrap(), ["a", "b"]);
        assert!(reference_values(&obj, "spec.none", None).unwrap().is_empty());
        let re = RegularExpression {
            pattern: "^(.*)$".into(),
            replacement: "x-$1".into(),
        };
        assert_eq!(
            reference_values(&obj, "spec.secretName", Some(&re)).unwrap(),
            ["x-tls"]
        );
        let spec: RelatedResourceSpec =
            serde_json::from_value(json!({ "identifier": "creds", "origin": "elsewhere", "kind": "Secret" }))
                .unwrap();
        assert!(validate(&spec, 2).unwrap_err().contains("spec.related[2].origin"));
        let spec: RelatedResourceSpec = serde_json::from_value(
            json!({ "identifier": "creds", "origin": "service", "kind": "Secret", "object": {} }),
        )
        .unwrap();
        assert!(validate(&spec, 0).unwrap_err().contains("spec.related[0].object"));
        assert_eq!(origin_resource(&spec), ("".into(), "v1".into(), "secrets".into()));
    }
}
