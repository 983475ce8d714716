//! OpenAPI documents: `/openapi/v3`, `/openapi/v3/{api/v1|apis/g/v}` and a
//! minimal `/openapi/v2` (JSON, or gnostic protobuf for kubectl) — enough
//! for `kubectl apply` of objects and `List`s, and `kubectl explain` of any
//! field (from v3, kubectl's default since 1.27).
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
//!   computation, tries OpenAPI v2 (`LookupResource(gvk)` on the protobuf
//!   document; it finds nothing, as v2 has no built-in kinds, see below),
//!   and falls back to the patch metadata compiled into kubectl
//!   (`NewPatchMetaFromStruct`), which is exactly the upstream metadata:
//!   applying a Deployment twice with a changed image sends
//!   `{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"new"}]}}}}`
//!   with `$setElementOrder`, merged by `name`. Custom resources are not
//!   registered in kubectl, so they get a JSON merge patch without any schema
//!   being consulted. Built-in component schemas (full upstream schemas
//!   generated from k8s-openapi, see `builtin`, for `kubectl explain`) may
//!   therefore lack the patch metadata without apply going wrong.
//!
//! * **Lists, and OpenAPI v2.** For `v1/List` kubectl never asks the server
//!   (its `fieldValidation` check answers "unsupported" for that kind), so
//!   under `--validate=strict` it validates every item client-side with
//!   kube-openapi's `proto` validator, on the document from `/openapi/v2`,
//!   requested only as protobuf (`...spec.v2@v1.0+protobuf`); failing to get
//!   it fails the whole command. The items are then sent one by one with
//!   `fieldValidation=Strict`, so the server still validates each of them.
//!   The validator skips an item whose kind has no definition
//!   (`LookupResource` returns nil) and otherwise checks it strictly: unknown
//!   fields, `required` and primitive types, with no notion of
//!   `x-kubernetes-preserve-unknown-fields`.
//!
//!   **Choice:** `/openapi/v2` is served as gnostic protobuf (answered as
//!   `...spec.v2.v1.0+protobuf`, like kube-apiserver: Go's MIME parser
//!   rejects the `@` form in a response) and as JSON, one document with no
//!   paths: the `meta.k8s.io/v1` definitions and, per served CRD version, the
//!   CRD schema tagged with its `x-kubernetes-group-version-kind`, reduced to
//!   what the proto validator parses and no stricter than the hub (see
//!   `v2_schema`). Built-in kinds are left out: given permissive
//!   definitions, the validator would reject their `spec` as an unknown
//!   field and the apply patcher would take its patch metadata from them
//!   (failing on `spec`, or replacing lists wholesale had they properties
//!   without merge keys); given none, the validator skips them (the server
//!   validates) and the patcher uses its compiled-in metadata. A bad custom
//!   resource in a List is thus reported before any item is written, as with
//!   kube-apiserver.
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

mod builtin;
pub mod cache;

pub use builtin::self_contained as self_contained_builtin_schema;
mod v2_proto;

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
        let hash = match builtin_document(resources, group, version) {
            Some(cached) => cached.1.clone(),
            None => {
                let Some(doc) = v3_group_version(resources, group, version) else {
                    continue;
                };
                hex_upper(&Sha256::digest(doc.to_string()))
            }
        };
        let key = gv_path(group, version);
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
/// kind (the CRD's `openAPIV3Schema` for custom resources, the upstream one
/// with everything it references for built-ins). `None` if the group version
/// is not served.
pub fn v3_group_version(resources: &[ResourceInfo], group: &str, version: &str) -> Option<Value> {
    if let Some(cached) = builtin_document(resources, group, version) {
        return Some(cached.0.clone());
    }
    build_group_version(resources, group, version)
}

/// Documents of group versions served only by built-ins, with their hash:
/// the same in every workspace, so built once per process.
type CachedDocument = std::sync::Arc<(Value, String)>;
static BUILTIN_DOCUMENTS: std::sync::LazyLock<
    parking_lot::Mutex<std::collections::HashMap<String, CachedDocument>>,
> = std::sync::LazyLock::new(Default::default);

fn builtin_document(resources: &[ResourceInfo], group: &str, version: &str) -> Option<CachedDocument> {
    let served = crate::registry::served_at(resources, group, version)?;
    if served.iter().any(|r| r.from_crd) {
        return None;
    }
    // Keyed by what shapes the document, not just the group version.
    let mut key = format!("{group}/{version}");
    for r in &served {
        use std::fmt::Write;
        let _ = write!(
            key,
            "|{}:{}:{}:{}:{}:{}",
            r.resource,
            r.kind,
            r.namespaced,
            r.verbs.join(","),
            r.status_subresource,
            r.scale_subresource.is_some()
        );
    }
    if let Some(doc) = BUILTIN_DOCUMENTS.lock().get(&key) {
        return Some(doc.clone());
    }
    let doc = build_group_version(resources, group, version)?;
    let hash = hex_upper(&Sha256::digest(doc.to_string()));
    let cached = std::sync::Arc::new((doc, hash));
    BUILTIN_DOCUMENTS.lock().insert(key, cached.clone());
    Some(cached)
}

fn build_group_version(resources: &[ResourceInfo], group: &str, version: &str) -> Option<Value> {
    let served = crate::registry::served_at(resources, group, version)?;
    let mut paths = Map::new();
    let mut schemas = Map::new();
    add_meta_schemas(&mut schemas);
    schemas.extend(builtin::schemas_with_references(
        ["ObjectMeta", "ListMeta", "Status", "DeleteOptions"]
            .map(|k| format!("{META}.{k}"))
            .iter()
            .map(String::as_str),
    ));
    for r in &served {
        add_resource_paths(&mut paths, r);
        match builtin_schema_name(r) {
            Some(name) => schemas.extend(builtin::schemas_with_references([name.as_str()])),
            None => {
                schemas.insert(schema_name(r, &r.kind), v3_kind_schema(r));
            }
        }
        schemas.insert(schema_name(r, &r.list_kind), list_schema(r));
        if r.scale_subresource.is_some() {
            schemas.extend(builtin::schemas_with_references([SCALE_SCHEMA]));
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": GIT_VERSION},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// The media type of the protobuf `/openapi/v2` response. kubectl asks for
/// `...spec.v2@v1.0+protobuf`, but `@` is not a token character and Go's
/// `mime.ParseMediaType` rejects it in a response (`mime: unexpected content
/// after media subtype`), so kube-apiserver answers with this dotted form.
pub const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// Whether an `Accept` header asks for the protobuf `/openapi/v2` document:
/// `...spec.v2@v1.0+protobuf`, or `...spec.v2.v1.0+protobuf` from old clients.
pub fn accepts_v2_protobuf(accept: &str) -> bool {
    accept.contains("application/com.github.proto-openapi.spec.v2")
}

/// `/openapi/v2` as JSON: a Swagger 2.0 document with no paths, the shared
/// `meta.k8s.io/v1` definitions and one definition per custom resource kind
/// (tagged `x-kubernetes-group-version-kind`). Built-in kinds are left out on
/// purpose; see the module docs.
pub fn v2(resources: &[ResourceInfo]) -> Value {
    let mut definitions = Map::new();
    let mut meta = Map::new();
    add_meta_schemas(&mut meta);
    for (name, schema) in meta {
        let mut schema = v2_schema(&schema);
        if let Some(s) = schema.as_object_mut() {
            s.remove("x-kubernetes-group-version-kind");
        }
        definitions.insert(name, schema);
    }
    for r in resources.iter().filter(|r| r.from_crd) {
        let mut schema = v2_schema(&v3_kind_schema(r));
        schema["x-kubernetes-group-version-kind"] = gvk_extension(&r.group, &r.version, &r.kind);
        definitions.insert(schema_name(r, &r.kind), schema);
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": GIT_VERSION},
        "paths": {},
        "definitions": definitions,
    })
}

/// `/openapi/v2` as gnostic protobuf ([`V2_PROTOBUF`]): the same document as
/// [`v2`].
pub fn v2_protobuf(resources: &[ResourceInfo]) -> Vec<u8> {
    v2_proto::encode(&v2(resources))
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

/// An OpenAPI v3 schema as a Swagger 2.0 schema that kube-openapi's
/// `proto` parser (kubectl's client-side validation) accepts and that is
/// never stricter than the hub. Every result is one of kube-openapi's shapes:
/// a `$ref`, an object with `properties` (unknown fields rejected, `required`
/// checked), an object with an `additionalProperties` schema (a map), an
/// array with one `items` schema, a string/integer/number/boolean, or `{}`
/// (anything). What the proto validator cannot express (preserved unknown
/// fields, int-or-string, embedded resources, `nullable`, `allOf`/`anyOf`/
/// `oneOf`/`not`, value validations) becomes `{}` or is dropped, much as
/// kube-apiserver does when it publishes CRD schemas in v2. Vendor
/// extensions are dropped too; callers add the GVK.
fn v2_schema(v3: &Value) -> Value {
    let Some(s) = v3.as_object() else {
        return json!({});
    };
    let mut out = Map::new();
    if let Some(description) = s.get("description").filter(|d| d.is_string()) {
        out.insert("description".into(), description.clone());
    }
    // `{"allOf": [{"$ref": ...}]}` is how v3 documents attach a description
    // or default to a reference.
    let reference = s.get("$ref").or_else(|| match s.get("allOf") {
        Some(Value::Array(all)) if all.len() == 1 => all[0].get("$ref"),
        _ => None,
    });
    if let Some(Value::String(r)) = reference {
        let name = r.strip_prefix("#/components/schemas/").unwrap_or(r);
        out.insert("$ref".into(), json!(format!("#/definitions/{name}")));
        return Value::Object(out);
    }
    let flag = |key: &str| s.get(key) == Some(&Value::Bool(true));
    if flag("x-kubernetes-preserve-unknown-fields")
        || flag("x-kubernetes-int-or-string")
        || flag("x-kubernetes-embedded-resource")
        || flag("nullable")
    {
        return Value::Object(out);
    }
    match s.get("type").and_then(Value::as_str) {
        Some("object") => {
            if let Some(Value::Object(properties)) = s.get("properties") {
                out.insert("type".into(), json!("object"));
                let converted: Map<String, Value> = properties
                    .iter()
                    .map(|(name, p)| (name.clone(), v2_schema(p)))
                    .collect();
                out.insert("properties".into(), Value::Object(converted));
                if let Some(Value::Array(required)) = s.get("required") {
                    let names: Vec<&Value> = required.iter().filter(|r| r.is_string()).collect();
                    if !names.is_empty() {
                        out.insert("required".into(), json!(names));
                    }
                }
            } else if let Some(values @ Value::Object(_)) = s.get("additionalProperties") {
                out.insert("type".into(), json!("object"));
                out.insert("additionalProperties".into(), v2_schema(values));
            }
        }
        Some("array") => {
            if let Some(items @ Value::Object(_)) = s.get("items") {
                out.insert("type".into(), json!("array"));
                out.insert("items".into(), v2_schema(items));
            }
        }
        Some(t @ ("string" | "integer" | "number" | "boolean")) => {
            out.insert("type".into(), json!(t));
            if let Some(format) = s.get("format").filter(|f| f.is_string()) {
                out.insert("format".into(), format.clone());
            }
        }
        _ => {}
    }
    Value::Object(out)
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
    if let Some(name) = builtin_schema_name(r) {
        // The list kind lives in the same package as the kind.
        let package = name.rsplit_once('.').map_or(name.as_str(), |(p, _)| p);
        return format!("{package}.{kind}");
    }
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

/// The generated component schema of a built-in resource's kind, if any.
fn builtin_schema_name(r: &ResourceInfo) -> Option<String> {
    (!r.from_crd)
        .then(|| builtin::schema_name(&r.group, &r.version, &r.kind))
        .flatten()
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
        // Built-ins have their full upstream schema, with every reference.
        assert!(deployment.get("x-kubernetes-preserve-unknown-fields").is_none());
        assert_eq!(
            deployment["properties"]["spec"]["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"
        );
        assert!(
            apps["components"]["schemas"]["io.k8s.api.core.v1.Container"]["properties"]["image"].is_object()
        );
        assert!(apps["components"]["schemas"]
            .get("io.k8s.api.apps.v1.DeploymentList")
            .is_some());
        assert_eq!(
            deployment["x-kubernetes-group-version-kind"][0]["kind"],
            "Deployment"
        );
    }

    /// kube-openapi's `proto.Definitions.ParseSchema` (what kubectl runs on
    /// the whole v2 document before validating anything): `Err` where it
    /// would fail, which would fail every client-side validation.
    fn kube_openapi_parses(schema: &Value, definitions: &Map<String, Value>) -> Result<(), String> {
        let s = schema.as_object().ok_or("not an object")?;
        if let Some(r) = s.get("$ref") {
            let name = r.as_str().and_then(|r| r.strip_prefix("#/definitions/"));
            return match name {
                _ if s.contains_key("properties") || s.contains_key("type") => Err("$ref with a type".into()),
                Some(n) if definitions.contains_key(n) => Ok(()),
                _ => Err(format!("dangling {r}")),
            };
        }
        let each = |props: &Map<String, Value>| {
            props
                .values()
                .try_for_each(|p| kube_openapi_parses(p, definitions))
        };
        match (s.get("type").and_then(Value::as_str), s.get("properties")) {
            (None, None) => Ok(()),
            (None | Some("object"), Some(Value::Object(props))) => each(props),
            (Some("object"), None) => match s.get("additionalProperties") {
                Some(v @ Value::Object(_)) => kube_openapi_parses(v, definitions),
                _ => Err("object without properties or additionalProperties schema".into()),
            },
            (Some("array"), _) => match s.get("items") {
                Some(v @ Value::Object(_)) => kube_openapi_parses(v, definitions),
                _ => Err("array without one items schema".into()),
            },
            (Some("string" | "integer" | "number" | "boolean"), None) => Ok(()),
            (t, _) => Err(format!("unparseable type {t:?}")),
        }
    }

    #[test]
    fn v2_describes_custom_resources_only() {
        let doc = v2(&sample());
        assert_eq!(doc["swagger"], "2.0");
        let definitions = doc["definitions"].as_object().unwrap();
        // No built-in kind: kubectl then skips them in client-side
        // validation and computes their patches from compiled-in metadata.
        assert!(!definitions.keys().any(|k| k.starts_with("io.k8s.api.")));
        let tagged: Vec<&str> = definitions
            .iter()
            .filter(|(_, d)| d.get("x-kubernetes-group-version-kind").is_some())
            .map(|(k, _)| k.as_str())
            .collect();
        assert_eq!(
            tagged,
            vec![
                "com.example.v1alpha1.Widget",
                "com.example.v1.Widget",
                "com.example.v1beta1.Widget"
            ]
        );
        let widget = &definitions["com.example.v1.Widget"];
        assert_eq!(
            widget["x-kubernetes-group-version-kind"],
            json!([{"group": "example.com", "version": "v1", "kind": "Widget"}])
        );
        assert_eq!(
            widget["properties"]["spec"]["properties"]["size"]["type"],
            "integer"
        );
        assert_eq!(
            widget["properties"]["metadata"]["$ref"],
            "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );
        assert!(!doc.to_string().contains("#/components/"));
        for (name, schema) in definitions {
            kube_openapi_parses(schema, definitions).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        // The protobuf document is the same one.
        assert!(v2_protobuf(&sample()).len() > 100);
    }

    #[test]
    fn v2_schema_keeps_what_kubectl_can_check_and_relaxes_the_rest() {
        let crd = json!({
            "type": "object",
            "required": ["spec"],
            "properties": {
                "spec": {
                    "type": "object",
                    "properties": {
                        "size": {"type": "integer", "format": "int32", "minimum": 1},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"a": {"type": "string"}}},
                        "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                        "maybe": {"type": "string", "nullable": true},
                        "inner": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {}},
                        "loose": {"type": "object"},
                        "anyList": {"type": "array"},
                    },
                },
            },
        });
        let v2 = v2_schema(&crd);
        assert_eq!(v2["required"], json!(["spec"]));
        let spec = &v2["properties"]["spec"]["properties"];
        assert_eq!(spec["size"], json!({"type": "integer", "format": "int32"}));
        assert_eq!(spec["labels"]["additionalProperties"], json!({"type": "string"}));
        assert_eq!(
            spec["tags"],
            json!({"type": "array", "items": {"type": "string"}})
        );
        for anything in ["free", "port", "maybe", "inner", "loose", "anyList"] {
            assert_eq!(spec[anything], json!({}), "{anything}");
        }
        kube_openapi_parses(&v2, &Map::new()).unwrap();
    }

    #[test]
    fn protobuf_is_negotiated_by_its_gnostic_media_types() {
        assert!(accepts_v2_protobuf(
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
        ));
        assert!(accepts_v2_protobuf(
            "application/com.github.proto-openapi.spec.v2.v1.0+protobuf, application/json"
        ));
        assert!(!accepts_v2_protobuf("application/json"));
        assert!(!accepts_v2_protobuf("application/vnd.kubernetes.protobuf"));
    }
}
