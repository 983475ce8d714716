//! OpenAPI documents: `/openapi/v3`, `/openapi/v3/{api/v1|apis/g/v}` and a
//! minimal `/openapi/v2` — enough for `kubectl apply` and basic
//! `kubectl explain`.
//!
//! # What kubectl reads, and why the documents look like this
//!
//! * **Field validation.** `kubectl apply`/`create` (default
//!   `--validate=strict`) asks `/openapi/v3` whether the server validates
//!   fields itself: it fetches the group-version document and looks for a
//!   PATCH operation whose `x-kubernetes-group-version-kind` (a single object)
//!   is the kind being applied and whose *operation-level* parameters include
//!   `fieldValidation` (`in: query`). For a group version missing from the
//!   root it checks `Namespace` in `api/v1` instead. When found it skips
//!   client-side validation (which would need protobuf OpenAPI v2) and sends
//!   `fieldValidation=Strict`. Every PATCH here, on objects and their
//!   `status`/`scale` subresources, carries `dryRun`, `fieldManager`,
//!   `fieldValidation` and `force`.
//!
//! * **Client-side apply patches.** `kubectl apply` (not `--server-side`)
//!   computes a strategic merge patch from OpenAPI v3 only when the PATCH
//!   operation's request body lists `application/strategic-merge-patch+json`
//!   (`gvkSupportsPatchOpenAPIV3`); it then takes `x-kubernetes-patch-merge-key`
//!   and `x-kubernetes-patch-strategy` from the kind's component schema
//!   (`buildStrategicMergePatchFromOpenAPIV3`). A permissive built-in schema
//!   would make that fail (`unable to find api field "spec"`, printed as a
//!   warning on every apply) or, with `properties` but no merge keys, silently
//!   replace lists such as `containers` wholesale. Writing out correct patch
//!   metadata for every built-in kind is large and easy to get wrong.
//!
//!   **Choice:** PATCH request bodies list `application/json-patch+json`,
//!   `application/merge-patch+json` and `application/apply-patch+yaml`, but
//!   *not* `application/strategic-merge-patch+json` (for built-ins too, even
//!   though the hub accepts it). kubectl then skips OpenAPI v3 for patch
//!   computation, tries OpenAPI v2 (which it requests as protobuf: the server
//!   should answer 406/404 to that, as [`v2`] is JSON only), and falls back to
//!   the patch metadata compiled into kubectl (`buildStrategicMergeFromBuiltins`),
//!   which is exactly the upstream metadata: applying a Deployment twice with a
//!   changed image sends `{"spec":{"template":{"spec":{"containers":[{"name":
//!   "app","image":"new"}]}}}}` with `$setElementOrder`, merged by `name`.
//!   Custom resources are not registered in kubectl, so they get a JSON merge
//!   patch either way. Built-in component schemas can therefore stay
//!   permissive (`x-kubernetes-preserve-unknown-fields`) without being wrong.
//!
//! * **Workspaces.** The root lists `serverRelativeURL`s rooted at
//!   `/openapi/v3/...`; client-go keeps the kubeconfig's path prefix
//!   (`/clusters/<workspace>`) for such URLs (kubernetes#117463), so the same
//!   documents work under every workspace. The `hash` query parameter is a
//!   digest of the document, so clients refetch when a CRD changes it.

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::discovery::{compare_versions, GIT_VERSION};
use crate::registry::ResourceInfo;

const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1";
const SCALE_SCHEMA: &str = "io.k8s.api.autoscaling.v1.Scale";

/// PATCH request body types advertised (see the module docs for why
/// strategic merge patch is not among them).
pub const PATCH_CONTENT_TYPES: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
];

/// `/openapi/v3`: one entry per served group version (`api/v1`,
/// `apis/{group}/{version}`) pointing at its document.
pub fn v3_root(resources: &[ResourceInfo]) -> Value {
    let mut paths = Map::new();
    for (group, version) in group_versions(resources) {
        let Some(doc) = v3_group_version(resources, group, version) else {
            continue;
        };
        let key = gv_path(group, version);
        let hash = hex_upper(&Sha256::digest(doc.to_string()));
        paths.insert(
            key.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={hash}")}),
        );
    }
    json!({"paths": paths})
}

/// `/openapi/v3/api/v1` (group `""`) or `/openapi/v3/apis/{group}/{version}`:
/// an OpenAPI 3.0 document with the collection, item, `status` and `scale`
/// paths of every resource in the group version, and a component schema per
/// kind (the CRD's `openAPIV3Schema` for custom resources, a permissive one
/// for built-ins). `None` if the group version is not served.
pub fn v3_group_version(resources: &[ResourceInfo], group: &str, version: &str) -> Option<Value> {
    let served: Vec<&ResourceInfo> = resources
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .collect();
    if served.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    let mut schemas = Map::new();
    add_meta_schemas(&mut schemas);
    for r in &served {
        add_resource_paths(&mut paths, r);
        schemas.insert(schema_name(r, &r.kind), v3_kind_schema(r));
        schemas.insert(schema_name(r, &r.list_kind), list_schema(r));
        if r.scale_subresource.is_some() {
            schemas.insert(SCALE_SCHEMA.into(), scale_schema());
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": GIT_VERSION},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// `/openapi/v2`: a minimal Swagger 2.0 document with a definition per kind
/// (tagged `x-kubernetes-group-version-kind`) and no paths. JSON only: kubectl
/// asks for protobuf, and should be refused (406) so it uses its built-in
/// patch metadata.
pub fn v2(resources: &[ResourceInfo]) -> Value {
    let mut definitions = Map::new();
    for r in resources {
        let mut schema = v3_kind_schema(r);
        rewrite_refs(&mut schema);
        definitions.insert(schema_name(r, &r.kind), schema);
    }
    let mut meta = Map::new();
    add_meta_schemas(&mut meta);
    for (name, mut schema) in meta {
        rewrite_refs(&mut schema);
        definitions.insert(name, schema);
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": GIT_VERSION},
        "paths": {},
        "definitions": definitions,
    })
}

// ---------------------------------------------------------------------------
// Paths and operations

/// The action an operation performs, and what it needs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Action {
    List,
    Create,
    DeleteCollection,
    Get,
    Replace,
    Patch,
    Delete,
}

impl Action {
    /// `(HTTP method, x-kubernetes-action, operationId verb, RBAC verb)`.
    fn names(self) -> (&'static str, &'static str, &'static str, &'static str) {
        match self {
            Action::List => ("get", "list", "list", "list"),
            Action::Create => ("post", "post", "create", "create"),
            Action::DeleteCollection => (
                "delete",
                "deletecollection",
                "deletecollection",
                "deletecollection",
            ),
            Action::Get => ("get", "get", "read", "get"),
            Action::Replace => ("put", "put", "replace", "update"),
            Action::Patch => ("patch", "patch", "patch", "patch"),
            Action::Delete => ("delete", "delete", "delete", "delete"),
        }
    }
}

/// What an operation reads and returns.
struct Target<'a> {
    resource: &'a ResourceInfo,
    /// `(group, version, kind)` of the operation's object.
    gvk: (&'a str, &'a str, &'a str),
    /// Component schema of the object.
    schema: String,
    /// Suffix of the operation ID: `Namespaced`, `Status`, ...
    suffix: String,
}

fn add_resource_paths(paths: &mut Map<String, Value>, r: &ResourceInfo) {
    let base = if r.group.is_empty() {
        format!("/api/{}", r.version)
    } else {
        format!("/apis/{}/{}", r.group, r.version)
    };
    let scope = if r.namespaced { "Namespaced" } else { "" };
    let collection = if r.namespaced {
        format!("{base}/namespaces/{{namespace}}/{}", r.resource)
    } else {
        format!("{base}/{}", r.resource)
    };
    let item = format!("{collection}/{{name}}");
    let serves = |verb: &str| r.verbs.iter().any(|v| v == verb);
    let object = Target {
        resource: r,
        gvk: (&r.group, &r.version, &r.kind),
        schema: schema_name(r, &r.kind),
        suffix: format!("{scope}{}", r.kind),
    };

    let collection_ops: Vec<Action> = [Action::List, Action::Create, Action::DeleteCollection]
        .into_iter()
        .filter(|a| serves(a.names().3))
        .collect();
    add_path(paths, &collection, &object, &collection_ops, r.namespaced, false);
    let item_ops: Vec<Action> = [Action::Get, Action::Replace, Action::Patch, Action::Delete]
        .into_iter()
        .filter(|a| serves(a.names().3))
        .collect();
    add_path(paths, &item, &object, &item_ops, r.namespaced, true);
    if r.namespaced && serves("list") {
        let all = Target {
            suffix: format!("{}ForAllNamespaces", r.kind),
            ..object_clone(&object)
        };
        add_path(
            paths,
            &format!("{base}/{}", r.resource),
            &all,
            &[Action::List],
            false,
            false,
        );
    }
    let sub_ops = [Action::Get, Action::Replace, Action::Patch];
    if r.status_subresource {
        let status = Target {
            suffix: format!("{scope}{}Status", r.kind),
            ..object_clone(&object)
        };
        add_path(
            paths,
            &format!("{item}/status"),
            &status,
            &sub_ops,
            r.namespaced,
            true,
        );
    }
    if r.scale_subresource.is_some() {
        let scale = Target {
            resource: r,
            gvk: ("autoscaling", "v1", "Scale"),
            schema: SCALE_SCHEMA.into(),
            suffix: format!("{scope}{}Scale", r.kind),
        };
        add_path(
            paths,
            &format!("{item}/scale"),
            &scale,
            &sub_ops,
            r.namespaced,
            true,
        );
    }
}

fn object_clone<'a>(t: &Target<'a>) -> Target<'a> {
    Target {
        resource: t.resource,
        gvk: t.gvk,
        schema: t.schema.clone(),
        suffix: t.suffix.clone(),
    }
}

fn add_path(
    paths: &mut Map<String, Value>,
    path: &str,
    target: &Target<'_>,
    actions: &[Action],
    namespaced: bool,
    named: bool,
) {
    if actions.is_empty() {
        return;
    }
    let mut item = Map::new();
    for action in actions {
        let (method, _, _, _) = action.names();
        item.insert(method.into(), operation(*action, target));
    }
    let mut params = Vec::new();
    if named {
        params.push(path_param("name", &format!("name of the {}", target.gvk.2)));
    }
    if namespaced {
        params.push(path_param(
            "namespace",
            "object name and auth scope, such as for teams and projects",
        ));
    }
    params.push(query_param(
        "pretty",
        "string",
        "If 'true', then the output is pretty printed.",
    ));
    item.insert("parameters".into(), Value::Array(params));
    paths.insert(path.into(), Value::Object(item));
}

fn operation(action: Action, target: &Target<'_>) -> Value {
    let (_, k8s_action, id_verb, _) = action.names();
    let r = target.resource;
    let object_ref = schema_ref(&target.schema);
    let list_ref = schema_ref(&schema_name(r, &r.list_kind));
    let status_ref = schema_ref(&format!("{META}.Status"));
    let (description, params, body, responses): (String, Vec<Value>, Option<Value>, Value) = match action {
        Action::List => (
            format!("list or watch objects of kind {}", target.gvk.2),
            list_params(),
            None,
            json!({"200": ok(&list_ref, true)}),
        ),
        Action::Create => (
            format!("create a {}", target.gvk.2),
            write_params(false),
            Some(json!({"content": {"*/*": {"schema": object_ref}}, "required": true})),
            json!({"200": ok(&object_ref, false), "201": created(&object_ref), "202": accepted(&object_ref)}),
        ),
        Action::DeleteCollection => (
            format!("delete collection of {}", target.gvk.2),
            [delete_params(), list_params()].concat(),
            Some(delete_body()),
            json!({"200": ok(&status_ref, false)}),
        ),
        Action::Get => (
            format!("read the specified {}", target.gvk.2),
            Vec::new(),
            None,
            json!({"200": ok(&object_ref, false)}),
        ),
        Action::Replace => (
            format!("replace the specified {}", target.gvk.2),
            write_params(false),
            Some(json!({"content": {"*/*": {"schema": object_ref}}, "required": true})),
            json!({"200": ok(&object_ref, false), "201": created(&object_ref)}),
        ),
        Action::Patch => {
            let patch_ref = schema_ref(&format!("{META}.Patch"));
            let content: Map<String, Value> = PATCH_CONTENT_TYPES
                .iter()
                .map(|t| (t.to_string(), json!({"schema": patch_ref})))
                .collect();
            (
                format!("partially update the specified {}", target.gvk.2),
                write_params(true),
                Some(json!({"content": content, "required": true})),
                json!({"200": ok(&object_ref, false), "201": created(&object_ref)}),
            )
        }
        Action::Delete => (
            format!("delete a {}", target.gvk.2),
            delete_params(),
            Some(delete_body()),
            json!({"200": ok(&status_ref, false), "202": accepted(&status_ref)}),
        ),
    };
    let mut op = json!({
        "tags": [tag(r)],
        "description": description,
        "operationId": format!("{id_verb}{}{}", camel_group_version(r), target.suffix),
        "parameters": params,
    });
    if let Some(body) = body {
        op["requestBody"] = body;
    }
    let mut responses = responses;
    responses["401"] = json!({"description": "Unauthorized"});
    op["responses"] = responses;
    op["x-kubernetes-action"] = json!(k8s_action);
    let (group, version, kind) = target.gvk;
    op["x-kubernetes-group-version-kind"] = json!({"group": group, "version": version, "kind": kind});
    op
}

fn ok(schema: &Value, watchable: bool) -> Value {
    let mut content = json!({"application/json": {"schema": schema}, "application/yaml": {"schema": schema}});
    if watchable {
        content["application/json;stream=watch"] = json!({"schema": schema});
    }
    json!({"description": "OK", "content": content})
}

fn created(schema: &Value) -> Value {
    json!({"description": "Created", "content": {"application/json": {"schema": schema}}})
}

fn accepted(schema: &Value) -> Value {
    json!({"description": "Accepted", "content": {"application/json": {"schema": schema}}})
}

fn delete_body() -> Value {
    json!({"content": {"*/*": {"schema": schema_ref(&format!("{META}.DeleteOptions"))}}})
}

fn path_param(name: &str, description: &str) -> Value {
    json!({
        "name": name,
        "in": "path",
        "description": description,
        "required": true,
        "schema": {"type": "string", "uniqueItems": true},
    })
}

fn query_param(name: &str, ty: &str, description: &str) -> Value {
    json!({"name": name, "in": "query", "description": description, "schema": {"type": ty, "uniqueItems": true}})
}

fn write_params(patch: bool) -> Vec<Value> {
    let mut params = vec![
        query_param(
            "dryRun",
            "string",
            "When present, indicates that modifications should not be persisted. Valid value: All.",
        ),
        query_param(
            "fieldManager",
            "string",
            "A name associated with the actor or entity that is making these changes.",
        ),
        query_param(
            "fieldValidation",
            "string",
            "How the server handles unknown or duplicate fields: Ignore, Warn (default) or Strict.",
        ),
    ];
    if patch {
        params.push(query_param(
            "force",
            "boolean",
            "Force is going to \"force\" Apply requests: re-acquire conflicting fields owned by other people.",
        ));
    }
    params
}

fn list_params() -> Vec<Value> {
    vec![
        query_param(
            "allowWatchBookmarks",
            "boolean",
            "Request watch events with type BOOKMARK.",
        ),
        query_param("continue", "string", "The continue token of the previous page."),
        query_param(
            "fieldSelector",
            "string",
            "A selector to restrict the returned objects by their fields.",
        ),
        query_param(
            "labelSelector",
            "string",
            "A selector to restrict the returned objects by their labels.",
        ),
        query_param("limit", "integer", "Maximum number of objects to return."),
        query_param(
            "resourceVersion",
            "string",
            "Which resource versions the request may be served from.",
        ),
        query_param(
            "resourceVersionMatch",
            "string",
            "How resourceVersion is applied to list calls.",
        ),
        query_param(
            "sendInitialEvents",
            "boolean",
            "Start a watch with synthetic events for the current state.",
        ),
        query_param("timeoutSeconds", "integer", "Timeout for the list/watch call."),
        query_param(
            "watch",
            "boolean",
            "Watch for changes to the described resources.",
        ),
    ]
}

fn delete_params() -> Vec<Value> {
    vec![
        query_param(
            "dryRun",
            "string",
            "When present, indicates that modifications should not be persisted. Valid value: All.",
        ),
        query_param(
            "gracePeriodSeconds",
            "integer",
            "The duration in seconds before the object should be deleted.",
        ),
        query_param(
            "propagationPolicy",
            "string",
            "Whether and how garbage collection will be performed.",
        ),
    ]
}

// ---------------------------------------------------------------------------
// Schemas

fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn gvk_extension(group: &str, version: &str, kind: &str) -> Value {
    json!([{"group": group, "version": version, "kind": kind}])
}

/// The component schema of a kind: the CRD's `openAPIV3Schema` with
/// `apiVersion`, `kind` and `metadata` set (as kube-apiserver publishes it),
/// or a permissive object for built-ins.
fn v3_kind_schema(r: &ResourceInfo) -> Value {
    let mut schema = match r.schema.as_deref() {
        Some(Value::Object(crd)) => Value::Object(crd.clone()),
        _ => json!({
            "description": format!("{} ({}): the hub accepts any fields and validates on the server.", r.kind, r.api_version()),
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
        }),
    };
    if schema.get("type").is_none() {
        schema["type"] = json!("object");
    }
    let properties = schema
        .as_object_mut()
        .map(|o| o.entry("properties").or_insert_with(|| json!({})))
        .and_then(Value::as_object_mut);
    if let Some(properties) = properties {
        properties.insert(
            "apiVersion".into(),
            type_meta_property(
                "APIVersion defines the versioned schema of this representation of an object.",
            ),
        );
        properties.insert(
            "kind".into(),
            type_meta_property(
                "Kind is a string value representing the REST resource this object represents.",
            ),
        );
        properties.insert(
            "metadata".into(),
            json!({"allOf": [schema_ref(&format!("{META}.ObjectMeta"))], "default": {}, "description": "Standard object's metadata."}),
        );
    }
    schema["x-kubernetes-group-version-kind"] = gvk_extension(&r.group, &r.version, &r.kind);
    schema
}

fn type_meta_property(description: &str) -> Value {
    json!({"description": description, "type": "string"})
}

fn list_schema(r: &ResourceInfo) -> Value {
    json!({
        "description": format!("{} is a list of {}.", r.list_kind, r.kind),
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": type_meta_property("APIVersion defines the versioned schema of this representation of an object."),
            "items": {"type": "array", "items": {"allOf": [schema_ref(&schema_name(r, &r.kind))], "default": {}}},
            "kind": type_meta_property("Kind is a string value representing the REST resource this object represents."),
            "metadata": {"allOf": [schema_ref(&format!("{META}.ListMeta"))], "default": {}},
        },
        "x-kubernetes-group-version-kind": gvk_extension(&r.group, &r.version, &r.list_kind),
    })
}

fn scale_schema() -> Value {
    json!({
        "description": "Scale represents a scaling request for a resource.",
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"allOf": [schema_ref(&format!("{META}.ObjectMeta"))], "default": {}},
            "spec": {"type": "object", "properties": {"replicas": {"type": "integer", "format": "int32"}}},
            "status": {
                "type": "object",
                "required": ["replicas"],
                "properties": {
                    "replicas": {"type": "integer", "format": "int32"},
                    "selector": {"type": "string"},
                },
            },
        },
        "x-kubernetes-group-version-kind": gvk_extension("autoscaling", "v1", "Scale"),
    })
}

/// The shared `meta.k8s.io/v1` schemas every document references. ObjectMeta
/// carries the upstream patch metadata for its lists, so it is right even
/// for a client that computes patches from it.
fn add_meta_schemas(schemas: &mut Map<String, Value>) {
    let string_map = json!({"type": "object", "additionalProperties": {"type": "string", "default": ""}});
    let string_list = json!({"type": "array", "items": {"type": "string", "default": ""}});
    let time = json!({"type": "string", "format": "date-time"});
    let object_meta = json!({
        "description": "ObjectMeta is metadata that all persisted resources must have.",
        "type": "object",
        "properties": {
            "annotations": string_map,
            "creationTimestamp": time,
            "deletionGracePeriodSeconds": {"type": "integer", "format": "int64"},
            "deletionTimestamp": time,
            "finalizers": {
                "type": "array",
                "items": {"type": "string", "default": ""},
                "x-kubernetes-list-type": "set",
                "x-kubernetes-patch-strategy": "merge",
            },
            "generateName": {"type": "string"},
            "generation": {"type": "integer", "format": "int64"},
            "labels": string_map,
            "managedFields": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            "name": {"type": "string"},
            "namespace": {"type": "string"},
            "ownerReferences": {
                "type": "array",
                "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "x-kubernetes-list-map-keys": ["uid"],
                "x-kubernetes-list-type": "map",
                "x-kubernetes-patch-merge-key": "uid",
                "x-kubernetes-patch-strategy": "merge",
            },
            "resourceVersion": {"type": "string"},
            "selfLink": {"type": "string"},
            "uid": {"type": "string"},
        },
    });
    let list_meta = json!({
        "description": "ListMeta describes metadata that synthetic resources must have.",
        "type": "object",
        "properties": {
            "continue": {"type": "string"},
            "remainingItemCount": {"type": "integer", "format": "int64"},
            "resourceVersion": {"type": "string"},
            "selfLink": {"type": "string"},
        },
    });
    let status = json!({
        "description": "Status is a return value for calls that don't return other objects.",
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "code": {"type": "integer", "format": "int32"},
            "details": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "kind": {"type": "string"},
            "message": {"type": "string"},
            "metadata": {"allOf": [schema_ref(&format!("{META}.ListMeta"))], "default": {}},
            "reason": {"type": "string"},
            "status": {"type": "string"},
        },
        "x-kubernetes-group-version-kind": gvk_extension("", "v1", "Status"),
    });
    let delete_options = json!({
        "description": "DeleteOptions may be provided when deleting an API object.",
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "dryRun": string_list,
            "gracePeriodSeconds": {"type": "integer", "format": "int64"},
            "kind": {"type": "string"},
            "preconditions": {"type": "object", "properties": {"resourceVersion": {"type": "string"}, "uid": {"type": "string"}}},
            "propagationPolicy": {"type": "string"},
        },
    });
    let patch = json!({
        "description": "Patch is provided to give a concrete name and type to the Kubernetes PATCH request body.",
        "type": "object",
    });
    schemas.insert(format!("{META}.ObjectMeta"), object_meta);
    schemas.insert(format!("{META}.ListMeta"), list_meta);
    schemas.insert(format!("{META}.Status"), status);
    schemas.insert(format!("{META}.DeleteOptions"), delete_options);
    schemas.insert(format!("{META}.Patch"), patch);
}

/// Swagger 2.0 keeps definitions under `#/definitions/`.
fn rewrite_refs(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(r)) = map.get_mut("$ref") {
                if let Some(name) = r.strip_prefix("#/components/schemas/") {
                    *r = format!("#/definitions/{name}");
                }
            }
            map.values_mut().for_each(rewrite_refs);
        }
        Value::Array(items) => items.iter_mut().for_each(rewrite_refs),
        _ => {}
    }
}

// ---------------------------------------------------------------------------
// Names

/// Served `(group, version)` pairs: groups in first-seen order, versions by
/// priority.
fn group_versions(resources: &[ResourceInfo]) -> Vec<(&str, &str)> {
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    for r in resources {
        if !pairs.contains(&(r.group.as_str(), r.version.as_str())) {
            pairs.push((&r.group, &r.version));
        }
    }
    let groups: Vec<&str> = pairs.iter().fold(Vec::new(), |mut acc, (g, _)| {
        if !acc.contains(g) {
            acc.push(*g);
        }
        acc
    });
    pairs.sort_by(|a, b| {
        let ga = groups.iter().position(|g| *g == a.0);
        let gb = groups.iter().position(|g| *g == b.0);
        ga.cmp(&gb).then_with(|| compare_versions(a.1, b.1))
    });
    pairs
}

/// `api/v1` or `apis/{group}/{version}`: the key kubectl looks up.
fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// Component schema names in kube-apiserver's style: `io.k8s.api.apps.v1.Deployment`
/// for built-ins, the reversed group for custom resources (`com.example.v1.Widget`).
fn schema_name(r: &ResourceInfo, kind: &str) -> String {
    if r.from_crd {
        let reversed: Vec<&str> = r.group.split('.').rev().collect();
        format!("{}.{}.{kind}", reversed.join("."), r.version)
    } else {
        let package = if r.group.is_empty() {
            "core"
        } else {
            r.group.split('.').next().unwrap_or_default()
        };
        format!("io.k8s.api.{package}.{}.{kind}", r.version)
    }
}

/// Operation tag, e.g. `apps_v1`, `core_v1`, `networking.k8s.io_v1`.
fn tag(r: &ResourceInfo) -> String {
    let group = if r.group.is_empty() { "core" } else { &r.group };
    format!("{group}_{}", r.version)
}

/// `CoreV1`, `AppsV1`, `NetworkingV1` (`.k8s.io` dropped), `ExampleComV1alpha1`.
fn camel_group_version(r: &ResourceInfo) -> String {
    let group = if r.group.is_empty() {
        "core"
    } else {
        r.group.trim_end_matches(".k8s.io")
    };
    let mut out: String = group.split(['.', '-']).map(capitalize).collect();
    out.push_str(&capitalize(&r.version));
    out
}

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    chars
        .next()
        .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

fn hex_upper(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::tests::sample;

    /// kubectl's `supportsQueryParamV3`: the first PATCH operation for the GVK
    /// decides whether `param` is supported.
    fn supports_query_param(doc: &Value, gvk: (&str, &str, &str), param: &str) -> bool {
        for item in doc["paths"].as_object().unwrap().values() {
            let Some(op) = item.get("patch") else { continue };
            let ext = &op["x-kubernetes-group-version-kind"];
            if (
                ext["group"].as_str(),
                ext["version"].as_str(),
                ext["kind"].as_str(),
            ) != (Some(gvk.0), Some(gvk.1), Some(gvk.2))
            {
                continue;
            }
            return op["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == param && p["in"] == "query");
        }
        false
    }

    /// kubectl's `gvkSupportsPatchOpenAPIV3`.
    fn uses_openapi_for_strategic_merge(doc: &Value, gvk: (&str, &str, &str)) -> bool {
        doc["paths"]
            .as_object()
            .unwrap()
            .values()
            .filter_map(|item| item.get("patch"))
            .any(|op| {
                let ext = &op["x-kubernetes-group-version-kind"];
                ext == &json!({"group": gvk.0, "version": gvk.1, "kind": gvk.2})
                    && op["requestBody"]["content"]
                        .get("application/strategic-merge-patch+json")
                        .is_some()
            })
    }

    #[test]
    fn root_lists_each_group_version_with_a_content_hash() {
        let all = sample();
        let root = v3_root(&all);
        let paths = root["paths"].as_object().unwrap();
        let keys: Vec<&str> = paths.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            vec![
                "api/v1",
                "apis/apps/v1",
                "apis/example.com/v1",
                "apis/example.com/v1beta1",
                "apis/example.com/v1alpha1"
            ]
        );
        let url = paths["apis/apps/v1"]["serverRelativeURL"].as_str().unwrap();
        assert!(url.starts_with("/openapi/v3/apis/apps/v1?hash="), "{url}");

        // The hash changes when a CRD's schema does.
        let mut changed = all.clone();
        changed[4].schema = Some(std::sync::Arc::new(json!({"type": "object"})));
        let after = v3_root(&changed);
        assert_ne!(
            after["paths"]["apis/example.com/v1"],
            root["paths"]["apis/example.com/v1"]
        );
        assert_eq!(after["paths"]["apis/apps/v1"], root["paths"]["apis/apps/v1"]);
    }

    #[test]
    fn every_patch_advertises_field_validation() {
        let all = sample();
        let apps = v3_group_version(&all, "apps", "v1").unwrap();
        assert!(supports_query_param(
            &apps,
            ("apps", "v1", "Deployment"),
            "fieldValidation"
        ));
        let core = v3_group_version(&all, "", "v1").unwrap();
        assert!(supports_query_param(
            &core,
            ("", "v1", "Namespace"),
            "fieldValidation"
        ));
        let crd = v3_group_version(&all, "example.com", "v1beta1").unwrap();
        assert!(supports_query_param(
            &crd,
            ("example.com", "v1beta1", "Widget"),
            "fieldValidation"
        ));
        for doc in [&apps, &core, &crd] {
            for item in doc["paths"].as_object().unwrap().values() {
                if let Some(op) = item.get("patch") {
                    let names: Vec<&str> = op["parameters"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|p| p["name"].as_str().unwrap())
                        .collect();
                    assert_eq!(names, vec!["dryRun", "fieldManager", "fieldValidation", "force"]);
                }
            }
        }
        assert!(v3_group_version(&all, "apps", "v2").is_none());
    }

    #[test]
    fn kubectl_computes_strategic_merge_patches_from_its_builtin_metadata() {
        let all = sample();
        let apps = v3_group_version(&all, "apps", "v1").unwrap();
        assert!(!uses_openapi_for_strategic_merge(
            &apps,
            ("apps", "v1", "Deployment")
        ));
        let patch = &apps["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        let types: Vec<&str> = patch["requestBody"]["content"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(types, PATCH_CONTENT_TYPES.to_vec());
    }

    #[test]
    fn paths_cover_collections_items_and_subresources() {
        let all = sample();
        let apps = v3_group_version(&all, "apps", "v1").unwrap();
        let paths = apps["paths"].as_object().unwrap();
        let keys: Vec<&str> = paths.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            vec![
                "/apis/apps/v1/namespaces/{namespace}/deployments",
                "/apis/apps/v1/namespaces/{namespace}/deployments/{name}",
                "/apis/apps/v1/deployments",
                "/apis/apps/v1/namespaces/{namespace}/deployments/{name}/status",
                "/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale",
            ]
        );
        let item = &paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"];
        let methods: Vec<&str> = item.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(methods, vec!["get", "put", "patch", "delete", "parameters"]);
        assert_eq!(item["patch"]["operationId"], "patchAppsV1NamespacedDeployment");
        assert_eq!(item["patch"]["x-kubernetes-action"], "patch");
        let scale = &paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]["patch"];
        assert_eq!(
            scale["x-kubernetes-group-version-kind"],
            json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
        );
        assert!(apps["components"]["schemas"].get(SCALE_SCHEMA).is_some());

        let core = v3_group_version(&all, "", "v1").unwrap();
        let core_paths = core["paths"].as_object().unwrap();
        assert!(core_paths.contains_key("/api/v1/namespaces/{name}"));
        assert_eq!(
            core_paths["/api/v1/namespaces"]["post"]["operationId"],
            "createCoreV1Namespace"
        );

        // Every $ref resolves within the document.
        for doc in [
            &apps,
            &core,
            &v3_group_version(&all, "example.com", "v1").unwrap(),
        ] {
            let text = doc.to_string();
            for piece in text.split("\"#/components/schemas/").skip(1) {
                let name = &piece[..piece.find('"').unwrap()];
                assert!(
                    doc["components"]["schemas"].get(name).is_some(),
                    "dangling $ref {name}"
                );
            }
        }
    }

    #[test]
    fn component_schemas_carry_gvk_and_the_crd_schema() {
        let all = sample();
        let crd = v3_group_version(&all, "example.com", "v1").unwrap();
        let widget = &crd["components"]["schemas"]["com.example.v1.Widget"];
        assert_eq!(
            widget["x-kubernetes-group-version-kind"],
            json!([{"group": "example.com", "version": "v1", "kind": "Widget"}])
        );
        assert_eq!(
            widget["properties"]["spec"]["properties"]["size"]["type"],
            "integer"
        );
        assert_eq!(widget["properties"]["kind"]["type"], "string");
        assert!(widget["properties"]["metadata"]["allOf"][0]["$ref"]
            .as_str()
            .unwrap()
            .ends_with("ObjectMeta"));
        assert!(crd["components"]["schemas"]
            .get("com.example.v1.WidgetList")
            .is_some());

        let apps = v3_group_version(&all, "apps", "v1").unwrap();
        let deployment = &apps["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"];
        assert_eq!(deployment["x-kubernetes-preserve-unknown-fields"], true);
        assert_eq!(
            deployment["x-kubernetes-group-version-kind"][0]["kind"],
            "Deployment"
        );
    }

    #[test]
    fn v2_has_definitions_with_swagger_refs() {
        let doc = v2(&sample());
        assert_eq!(doc["swagger"], "2.0");
        let pod = &doc["definitions"]["io.k8s.api.core.v1.Pod"];
        assert_eq!(pod["x-kubernetes-group-version-kind"][0]["kind"], "Pod");
        let text = doc.to_string();
        assert!(!text.contains("#/components/"));
        assert!(text.contains("#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
    }
}
