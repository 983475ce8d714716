//! `meta.k8s.io/v1 Table` output for `kubectl get` (built-in columns and CRD
//! `additionalPrinterColumns`). Pure: objects in, Table JSON out.
//!
//! Kubernetes' built-in kinds get the columns kube-apiserver's printers
//! produce ([`builtin_columns`]; cells computed here, named
//! `builtin:<name>`); custom resources get their CRD's printer columns,
//! evaluated with a small JSONPath subset. A layer above that serves kinds
//! of its own built in writes their columns with the same pieces
//! ([`PrinterColumn::json_path`], [`PrinterColumn::builtin`], [`age`]) and
//! hands them to the server with the kinds; this module knows only
//! Kubernetes' own.

use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

use crate::selector::LabelSelector;

/// One Table column and where its cells come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrinterColumn {
    pub name: String,
    /// OpenAPI type: `string`, `integer`, `number`, `boolean`, `date`.
    pub type_: String,
    pub format: String,
    pub description: String,
    pub priority: i32,
    /// A JSONPath like `.spec.replicas` (CRD columns), or a built-in cell
    /// computation named `builtin:<name>`.
    pub json_path: String,
}

impl PrinterColumn {
    /// A column named `name` of OpenAPI type `type_` whose cells are
    /// computed by the cell function `cell`. Besides those of Kubernetes'
    /// own kinds, a layer above may use the general ones for its kinds'
    /// columns: `str:<pointer>` (a string field), `int:<pointer>`,
    /// `condition:<type>` (that condition's status), `each:<list>:<field>`
    /// (the field of every entry of a list, space-separated),
    /// `true_unless_set:<pointer>,<pointer>...` (`False` when any of the
    /// fields is `true` or a non-empty string, else `True`) and `age`.
    pub fn builtin(name: &str, type_: &str, cell: &str) -> Self {
        PrinterColumn {
            name: name.into(),
            type_: type_.into(),
            format: String::new(),
            description: String::new(),
            priority: 0,
            json_path: format!("builtin:{cell}"),
        }
    }

    /// A column evaluated as a CRD's `additionalPrinterColumns` entry is:
    /// `path` is a JSONPath like `.spec.replicas`.
    pub fn json_path(name: &str, type_: &str, path: &str, description: &str) -> Self {
        PrinterColumn {
            name: name.into(),
            type_: type_.into(),
            format: String::new(),
            description: description.into(),
            priority: 0,
            json_path: path.into(),
        }
    }

    /// Shown only by `kubectl get -o wide`.
    pub fn wide(mut self) -> Self {
        self.priority = 1;
        self
    }

    /// With `description` in the Table's column definition.
    pub fn described(mut self, description: &str) -> Self {
        self.description = description.into();
        self
    }

    /// The `columnDefinitions` entry for this column.
    pub fn definition(&self) -> Value {
        json!({
            "name": self.name,
            "type": self.type_,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }
}

/// What each row's `object` holds, from the `includeObject` query parameter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum IncludeObject {
    /// No `object` in rows.
    None,
    /// A `PartialObjectMetadata` with the object's metadata (the default).
    #[default]
    Metadata,
    /// The whole object.
    Object,
}

impl FromStr for IncludeObject {
    type Err = String;

    /// `None`, `Metadata` or `Object`, as in `includeObject=`; empty means the default.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "" | "Metadata" => Ok(IncludeObject::Metadata),
            "None" => Ok(IncludeObject::None),
            "Object" => Ok(IncludeObject::Object),
            other => Err(format!(
                "includeObject: Unsupported value: \"{other}\": supported values: \"Metadata\", \"None\", \"Object\""
            )),
        }
    }
}

const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, \
     although some resources may allow a client to request the generation of an appropriate name automatically. \
     Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. \
     More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const AGE_DESCRIPTION: &str =
    "CreationTimestamp is a timestamp representing the server time when this object \
     was created. It is represented in RFC3339 form and is in UTC.";

fn name_column() -> PrinterColumn {
    PrinterColumn {
        format: "name".into(),
        ..PrinterColumn::builtin("Name", "string", "name")
    }
    .described(NAME_DESCRIPTION)
}

/// The `Age` column kube-apiserver prints for its kinds (from
/// `.metadata.creationTimestamp`).
pub fn age() -> PrinterColumn {
    PrinterColumn::builtin("Age", "string", "age").described(AGE_DESCRIPTION)
}

fn string(name: &str, cell: &str) -> PrinterColumn {
    PrinterColumn::builtin(name, "string", cell)
}

fn integer(name: &str, cell: &str) -> PrinterColumn {
    PrinterColumn::builtin(name, "integer", cell)
}

/// `Containers`, `Images`, `Selector` (wide) for workloads; `pod_spec` and
/// `selector` are JSON pointers to the pod spec and label selector.
fn workload_wide(pod_spec: &str, selector: Option<&str>) -> Vec<PrinterColumn> {
    let mut cols = vec![
        string("Containers", &format!("containers:{pod_spec}")).wide(),
        string("Images", &format!("images:{pod_spec}")).wide(),
    ];
    if let Some(selector) = selector {
        cols.push(string("Selector", &format!("selector:{selector}")).wide());
    }
    cols
}

/// Columns kube-apiserver prints for a built-in resource, after `Name` (which
/// [`render_table`] adds) and including `Age`.
pub fn builtin_columns(group: &str, resource: &str) -> Vec<PrinterColumn> {
    const POD_TEMPLATE: &str = "/spec/template/spec";
    const ADMISSION: &str = "admissionregistration.k8s.io";
    let mut cols = match (group, resource) {
        ("", "pods") => vec![
            string("Ready", "pod.ready"),
            string("Status", "pod.status"),
            string("Restarts", "pod.restarts"),
            age(),
            string("IP", "pod.ip").wide(),
            string("Node", "pod.node").wide(),
            string("Nominated Node", "pod.nominated_node").wide(),
            string("Readiness Gates", "pod.readiness_gates").wide(),
        ],
        ("apps", "deployments") => vec![
            string("Ready", "ready_of_replicas"),
            integer("Up-to-date", "int:/status/updatedReplicas"),
            integer("Available", "int:/status/availableReplicas"),
            age(),
        ],
        ("apps", "replicasets") => vec![
            integer("Desired", "spec_replicas"),
            integer("Current", "int:/status/replicas"),
            integer("Ready", "int:/status/readyReplicas"),
            age(),
        ],
        ("apps", "statefulsets") => vec![string("Ready", "ready_of_replicas"), age()],
        ("apps", "daemonsets") => vec![
            integer("Desired", "int:/status/desiredNumberScheduled"),
            integer("Current", "int:/status/currentNumberScheduled"),
            integer("Ready", "int:/status/numberReady"),
            integer("Up-to-date", "int:/status/updatedNumberScheduled"),
            integer("Available", "int:/status/numberAvailable"),
            string("Node Selector", "labels:/spec/template/spec/nodeSelector"),
            age(),
        ],
        ("batch", "jobs") => vec![
            string("Status", "job.status"),
            string("Completions", "job.completions"),
            string("Duration", "job.duration"),
            age(),
        ],
        ("batch", "cronjobs") => vec![
            string("Schedule", "str:/spec/schedule"),
            string("Timezone", "none_if_empty:/spec/timeZone"),
            string("Suspend", "cronjob.suspend"),
            integer("Active", "len:/status/active"),
            string("Last Schedule", "since_or_none:/status/lastScheduleTime"),
            age(),
        ],
        ("", "services") => vec![
            string("Type", "service.type"),
            string("Cluster-IP", "service.cluster_ip"),
            string("External-IP", "service.external_ip"),
            string("Port(s)", "service.ports"),
            age(),
            string("Selector", "labels:/spec/selector").wide(),
        ],
        ("", "configmaps") => vec![integer("Data", "configmap.data"), age()],
        ("", "endpoints") => vec![string("Endpoints", "endpoints.endpoints"), age()],
        ("discovery.k8s.io", "endpointslices") => vec![
            string("AddressType", "str:/addressType"),
            string("Ports", "endpointslice.ports"),
            string("Endpoints", "endpointslice.endpoints"),
            age(),
        ],
        ("", "secrets") => vec![string("Type", "str:/type"), integer("Data", "len:/data"), age()],
        ("", "serviceaccounts") => vec![integer("Secrets", "len:/secrets"), age()],
        ("", "namespaces") => vec![string("Status", "namespace.status"), age()],
        ("", "componentstatuses") => {
            return vec![
                string("Status", "componentstatus.status"),
                string("Message", "str:/conditions/0/message"),
                string("Error", "str:/conditions/0/error"),
            ];
        }
        ("", "nodes") => vec![
            string("Status", "node.status"),
            string("Roles", "node.roles"),
            age(),
            string("Version", "str:/status/nodeInfo/kubeletVersion"),
            string("Internal-IP", "node.address:InternalIP").wide(),
            string("External-IP", "node.address:ExternalIP").wide(),
            string("OS-Image", "unknown_if_empty:/status/nodeInfo/osImage").wide(),
            string(
                "Kernel-Version",
                "unknown_if_empty:/status/nodeInfo/kernelVersion",
            )
            .wide(),
            string(
                "Container-Runtime",
                "unknown_if_empty:/status/nodeInfo/containerRuntimeVersion",
            )
            .wide(),
        ],
        ("", "events") | ("events.k8s.io", "events") => {
            return vec![
                string("Last Seen", "event.last_seen"),
                string("Type", "str:/type"),
                string("Reason", "str:/reason"),
                string("Object", "event.object"),
                string("Subobject", "event.subobject").wide(),
                string("Source", "event.source").wide(),
                string("Message", "event.message"),
                string("First Seen", "event.first_seen").wide(),
                integer("Count", "event.count").wide(),
                PrinterColumn {
                    format: "name".into(),
                    ..string("Name", "name")
                }
                .wide(),
            ];
        }
        ("", "persistentvolumeclaims") => vec![
            string("Status", "pvc.status"),
            string("Volume", "str:/spec/volumeName"),
            string("Capacity", "pvc.capacity"),
            string("Access Modes", "pvc.access_modes"),
            string("StorageClass", "pvc.storage_class"),
            string(
                "VolumeAttributesClass",
                "unset_if_empty:/spec/volumeAttributesClassName",
            ),
            age(),
            string("VolumeMode", "unset_if_empty:/spec/volumeMode").wide(),
        ],
        ("networking.k8s.io", "ingresses") => vec![
            string("Class", "none_if_empty:/spec/ingressClassName"),
            string("Hosts", "ingress.hosts"),
            string("Address", "load_balancer:/status/loadBalancer/ingress"),
            string("Ports", "ingress.ports"),
            age(),
        ],
        ("coordination.k8s.io", "leases") => vec![string("Holder", "str:/spec/holderIdentity"), age()],
        (ADMISSION, "mutatingwebhookconfigurations" | "validatingwebhookconfigurations") => {
            vec![integer("Webhooks", "len:/webhooks"), age()]
        }
        (ADMISSION, "validatingadmissionpolicies") => vec![
            integer("Validations", "len:/spec/validations"),
            string("ParamKind", "admission.param_kind"),
            age(),
        ],
        (ADMISSION, "mutatingadmissionpolicies") => vec![
            integer("Mutations", "len:/spec/mutations"),
            string("ParamKind", "admission.param_kind"),
            age(),
        ],
        (ADMISSION, "validatingadmissionpolicybindings" | "mutatingadmissionpolicybindings") => vec![
            string("PolicyName", "str:/spec/policyName"),
            string("ParamRef", "admission.param_ref"),
            age(),
        ],
        // kube declares PreemptionPolicy a default column but fills it only
        // in wide output; the hub shows it where kubectl does.
        ("scheduling.k8s.io", "priorityclasses") => vec![
            integer("Value", "int:/value"),
            PrinterColumn::builtin("Global-Default", "boolean", "bool:/globalDefault"),
            age(),
            string("PreemptionPolicy", "str:/preemptionPolicy").wide(),
        ],
        ("node.k8s.io", "runtimeclasses") => vec![string("Handler", "str:/handler"), age()],
        ("storage.k8s.io", "csidrivers") => vec![
            PrinterColumn::builtin("AttachRequired", "boolean", "csidriver.attach_required"),
            PrinterColumn::builtin("PodInfoOnMount", "boolean", "bool:/spec/podInfoOnMount"),
            PrinterColumn::builtin("StorageCapacity", "boolean", "bool:/spec/storageCapacity"),
            string("TokenRequests", "csidriver.token_requests"),
            PrinterColumn::builtin("RequiresRepublish", "boolean", "bool:/spec/requiresRepublish"),
            string("Modes", "csidriver.modes"),
            age(),
        ],
        ("storage.k8s.io", "csinodes") => vec![integer("Drivers", "len:/spec/drivers"), age()],
        // kube prints no Age for these two.
        ("storage.k8s.io", "csistoragecapacities") => {
            return vec![
                string("StorageClassName", "str:/storageClassName"),
                string("Capacity", "unset_if_empty:/capacity"),
            ];
        }
        ("networking.k8s.io", "ipaddresses") => return vec![string("ParentRef", "ipaddress.parent_ref")],
        ("storage.k8s.io", "volumeattachments") => vec![
            string("Attacher", "str:/spec/attacher"),
            string("PV", "str:/spec/source/persistentVolumeName"),
            string("Node", "str:/spec/nodeName"),
            PrinterColumn::builtin("Attached", "boolean", "bool:/status/attached"),
            age(),
        ],
        ("storage.k8s.io", "volumeattributesclasses") => {
            vec![string("DriverName", "str:/driverName"), age()]
        }
        ("flowcontrol.apiserver.k8s.io", "flowschemas") => vec![
            string("PriorityLevel", "str:/spec/priorityLevelConfiguration/name"),
            string("MatchingPrecedence", "int:/spec/matchingPrecedence"),
            string(
                "DistinguisherMethod",
                "none_if_empty:/spec/distinguisherMethod/type",
            ),
            age(),
            string("MissingPL", "flowschema.missing_pl"),
        ],
        ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations") => vec![
            string("Type", "str:/spec/type"),
            string(
                "NominalConcurrencyShares",
                "value_or_none:/spec/limited/nominalConcurrencyShares",
            ),
            string(
                "Queues",
                "value_or_none:/spec/limited/limitResponse/queuing/queues",
            ),
            string(
                "HandSize",
                "value_or_none:/spec/limited/limitResponse/queuing/handSize",
            ),
            string(
                "QueueLengthLimit",
                "value_or_none:/spec/limited/limitResponse/queuing/queueLengthLimit",
            ),
            age(),
        ],
        ("resource.k8s.io", "resourceclaims") => vec![string("State", "resourceclaim.state"), age()],
        ("resource.k8s.io", "resourceslices") => vec![
            string("Node", "str:/spec/nodeName"),
            string("Driver", "str:/spec/driver"),
            string("Pool", "str:/spec/pool/name"),
            age(),
        ],
        ("networking.k8s.io", "servicecidrs") => vec![string("CIDRs", "join:/spec/cidrs"), age()],
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            vec![PrinterColumn::builtin("Created At", "date", "created_at").described(AGE_DESCRIPTION)]
        }
        _ => vec![age()],
    };
    match (group, resource) {
        ("apps", "deployments" | "replicasets" | "daemonsets") | ("batch", "jobs") => {
            cols.extend(workload_wide(POD_TEMPLATE, Some("/spec/selector")));
        }
        ("apps", "statefulsets") => cols.extend(workload_wide(POD_TEMPLATE, None)),
        ("batch", "cronjobs") => cols.extend(workload_wide(
            "/spec/jobTemplate/spec/template/spec",
            Some("/spec/jobTemplate/spec/selector"),
        )),
        _ => {}
    }
    cols
}

/// Columns from a CRD version's `additionalPrinterColumns`. Without any,
/// kube-apiserver's default for custom resources: `Age` (type `date`, from
/// `.metadata.creationTimestamp`).
pub fn crd_columns(additional_printer_columns: &Value) -> Vec<PrinterColumn> {
    let columns: Vec<PrinterColumn> = additional_printer_columns
        .as_array()
        .map(|cols| {
            cols.iter()
                .filter_map(|c| {
                    let text = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
                    let json_path = text("jsonPath");
                    let name = text("name");
                    (!name.is_empty() && !json_path.is_empty()).then(|| PrinterColumn {
                        name,
                        type_: Some(text("type"))
                            .filter(|t| !t.is_empty())
                            .unwrap_or_else(|| "string".into()),
                        format: text("format"),
                        description: text("description"),
                        priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0) as i32,
                        json_path,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    if columns.is_empty() {
        return vec![PrinterColumn {
            name: "Age".into(),
            type_: "date".into(),
            format: String::new(),
            description: AGE_DESCRIPTION.into(),
            priority: 0,
            json_path: ".metadata.creationTimestamp".into(),
        }];
    }
    columns
}

fn is_name_column(c: &PrinterColumn) -> bool {
    c.name.eq_ignore_ascii_case("name") && matches!(c.json_path.as_str(), ".metadata.name" | "builtin:name")
}

/// Render `objects` as a `meta.k8s.io/v1 Table` with `columns`, prefixed by a
/// `Name` column unless the columns start with one (or carry the name column
/// elsewhere, as events do). `list_meta` becomes the Table's `metadata`
/// (`resourceVersion`, `continue`, ...); ages are computed against `now`.
pub fn render_table(
    columns: &[PrinterColumn],
    objects: &[Value],
    include_object: IncludeObject,
    list_meta: Map<String, Value>,
    now: DateTime<Utc>,
) -> Value {
    let starts_with_name = columns
        .first()
        .is_some_and(|c| c.name.eq_ignore_ascii_case("name"));
    let mut all: Vec<PrinterColumn> = Vec::with_capacity(columns.len() + 1);
    if !starts_with_name && !columns.iter().any(is_name_column) {
        all.push(name_column());
    }
    all.extend(columns.iter().cloned());

    let rows: Vec<Value> = objects
        .iter()
        .map(|obj| {
            let cells: Vec<Value> = all.iter().map(|c| cell(c, obj, now)).collect();
            let mut row = Map::new();
            row.insert("cells".into(), Value::Array(cells));
            match include_object {
                IncludeObject::None => {}
                IncludeObject::Metadata => {
                    row.insert(
                        "object".into(),
                        json!({
                            "kind": "PartialObjectMetadata",
                            "apiVersion": "meta.k8s.io/v1",
                            "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
                        }),
                    );
                }
                IncludeObject::Object => {
                    row.insert("object".into(), obj.clone());
                }
            }
            Value::Object(row)
        })
        .collect();

    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": Value::Object(list_meta),
        "columnDefinitions": all.iter().map(PrinterColumn::definition).collect::<Vec<_>>(),
        "rows": rows,
    })
}

/// One cell: a built-in computation, or a JSONPath result typed by the column.
fn cell(column: &PrinterColumn, obj: &Value, now: DateTime<Utc>) -> Value {
    if let Some(name) = column.json_path.strip_prefix("builtin:") {
        return builtin_cell(name, obj, now);
    }
    match eval_json_path(&column.json_path, obj).first() {
        Some(v) => typed_cell(&column.type_, v, now),
        None => Value::Null,
    }
}

/// kube-apiserver's `cellForJSONValue`: the value converted to the column
/// type (`date` becomes an age like `5m`), or `null` if it does not fit.
fn typed_cell(type_: &str, value: &Value, now: DateTime<Utc>) -> Value {
    match (type_, value) {
        (_, Value::Null) => Value::Null,
        ("integer", Value::Number(n)) => match n.as_i64() {
            Some(i) => Value::from(i),
            None => Value::from(n.as_f64().unwrap_or(0.0) as i64),
        },
        ("number", Value::Number(n)) => Value::from(n.as_f64().unwrap_or(0.0)),
        ("boolean", Value::Bool(b)) => Value::Bool(*b),
        ("date", Value::String(s)) => match parse_time(s) {
            Some(t) => Value::from(human_duration(now - t)),
            None => Value::from("<invalid>"),
        },
        ("integer" | "number" | "boolean" | "date", _) => Value::Null,
        (_, Value::String(s)) => Value::from(s.as_str()),
        (_, other) => Value::from(other.to_string()),
    }
}

fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// How long ago `since` was, as kube's `HumanDuration`, or `<unknown>`.
fn since(value: Option<&Value>, now: DateTime<Utc>) -> String {
    match value.and_then(Value::as_str).and_then(parse_time) {
        Some(t) => human_duration(now - t),
        None => "<unknown>".into(),
    }
}

/// kube's `duration.HumanDuration`: `45s`, `5m30s`, `42m`, `5h10m`, `30h`,
/// `3d4h`, `120d`, `2y45d`, `9y`; `<invalid>` for clearly negative durations.
pub fn human_duration(d: chrono::Duration) -> String {
    let seconds = d.num_seconds();
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

fn str_at<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

fn int_at(obj: &Value, pointer: &str) -> i64 {
    obj.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

fn array_at<'a>(obj: &'a Value, pointer: &str) -> &'a [Value] {
    obj.pointer(pointer)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn or_placeholder(s: &str, placeholder: &str) -> Value {
    Value::from(if s.is_empty() { placeholder } else { s })
}

/// `spec.replicas`, which Kubernetes defaults to 1.
fn spec_replicas(obj: &Value) -> i64 {
    obj.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1)
}

/// `k=v,k2=v2` sorted by key, or `<none>` (kube's `labels.FormatLabels`).
fn format_labels(v: Option<&Value>) -> String {
    let mut pairs: Vec<String> = v
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    pairs.sort();
    if pairs.is_empty() {
        "<none>".into()
    } else {
        pairs.join(",")
    }
}

/// A `metav1.LabelSelector` printed as kubectl prints it, or `<none>`.
fn format_label_selector(v: Option<&Value>) -> String {
    match v.map(LabelSelector::from_label_selector_json) {
        None => "<none>".into(),
        Some(Ok(s)) => Some(s.to_string())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "<none>".into()),
        Some(Err(_)) => "<error>".into(),
    }
}

/// IPs and hostnames of a load balancer status's `ingress` entries.
fn load_balancer_addresses(entries: &[Value]) -> Vec<String> {
    entries
        .iter()
        .filter_map(|e| {
            let ip = str_at(e, "/ip");
            let host = str_at(e, "/hostname");
            (!ip.is_empty())
                .then(|| ip.to_string())
                .or_else(|| (!host.is_empty()).then(|| host.to_string()))
        })
        .collect()
}

fn has_condition(obj: &Value, type_: &str) -> bool {
    array_at(obj, "/status/conditions")
        .iter()
        .any(|c| str_at(c, "/type") == type_ && str_at(c, "/status") == "True")
}

/// The first three entries joined by commas, then `+ N more...` (kubectl's
/// endpoint lists).
fn first_three(entries: impl Iterator<Item = String>, count: usize) -> String {
    let shown: Vec<String> = entries.take(3).collect();
    let joined = shown.join(",");
    if count > shown.len() {
        format!("{joined} + {} more...", count - shown.len())
    } else {
        joined
    }
}

/// `ip:port` for every address and port of an Endpoints (addresses alone
/// for subsets without ports), as kubectl prints them.
fn endpoints_cell(obj: &Value) -> String {
    let subsets = array_at(obj, "/subsets");
    if subsets.is_empty() {
        return "<none>".into();
    }
    let mut all = Vec::new();
    for ss in subsets {
        let ips: Vec<&str> = array_at(ss, "/addresses")
            .iter()
            .filter_map(|a| a.get("ip").and_then(Value::as_str))
            .collect();
        let ports = array_at(ss, "/ports");
        if ports.is_empty() {
            all.extend(ips.iter().map(|ip| ip.to_string()));
        }
        for port in ports {
            let port = int_at(port, "/port");
            for ip in &ips {
                all.push(if ip.contains(':') {
                    format!("[{ip}]:{port}")
                } else {
                    format!("{ip}:{port}")
                });
            }
        }
    }
    let count = all.len();
    first_three(all.into_iter(), count)
}

/// An admission policy binding's `paramRef` as kubectl shows it:
/// `namespace/name`, `*/name` (namespace not said), or the selector.
fn param_ref(param_ref: Option<&Value>) -> String {
    let Some(p) = param_ref else {
        return "<unset>".into();
    };
    match (str_at(p, "/name"), str_at(p, "/namespace")) {
        ("", _) if p.get("selector").is_some() => format_label_selector(p.get("selector")),
        ("", _) => "<unset>".into(),
        (name, "") => format!("*/{name}"),
        (name, ns) => format!("{ns}/{name}"),
    }
}

/// A ResourceClaim's state: `deleted`, `pending`, `allocated`, `reserved`,
/// comma-joined as kubectl shows them.
fn resource_claim_state(obj: &Value) -> String {
    let deleted = obj.pointer("/metadata/deletionTimestamp").is_some();
    let mut states = Vec::new();
    if deleted {
        states.push("deleted");
    }
    if obj.pointer("/status/allocation").is_some_and(|a| !a.is_null()) {
        states.push("allocated");
        if !array_at(obj, "/status/reservedFor").is_empty() {
            states.push("reserved");
        }
    } else if !deleted {
        states.push("pending");
    }
    states.join(",")
}

/// An IPAddress's parent as `resource.group[/namespace]/name`, lower-cased
/// group-resource as kubectl shows it.
fn ip_address_parent(parent: Option<&Value>) -> String {
    let Some(p) = parent else {
        return "<none>".into();
    };
    let mut out = match str_at(p, "/group") {
        "" => str_at(p, "/resource").to_string(),
        group => format!("{}.{group}", str_at(p, "/resource")),
    }
    .to_ascii_lowercase();
    let ns = str_at(p, "/namespace");
    if !ns.is_empty() {
        out.push('/');
        out.push_str(ns);
    }
    out.push('/');
    out.push_str(str_at(p, "/name"));
    out
}

fn builtin_cell(name: &str, obj: &Value, now: DateTime<Utc>) -> Value {
    if let Some((kind, arg)) = name.split_once(':') {
        return match kind {
            "int" => Value::from(int_at(obj, arg)),
            "condition" => Value::from(
                array_at(obj, "/status/conditions")
                    .iter()
                    .find(|c| str_at(c, "/type") == arg)
                    .map(|c| str_at(c, "/status"))
                    .unwrap_or_default(),
            ),
            "str" => Value::from(str_at(obj, arg)),
            // `each:<list>:<field>`: the field of every entry, space-separated.
            "each" => {
                let (list, field) = arg.split_once(':').unwrap_or((arg, ""));
                let values: Vec<&str> = array_at(obj, list)
                    .iter()
                    .map(|e| str_at(e, field))
                    .filter(|v| !v.is_empty())
                    .collect();
                Value::from(values.join(" "))
            }
            "len" => Value::from(match obj.pointer(arg) {
                Some(Value::Array(a)) => a.len(),
                Some(Value::Object(m)) => m.len(),
                _ => 0,
            }),
            "none_if_empty" => or_placeholder(str_at(obj, arg), "<none>"),
            "unset_if_empty" => or_placeholder(str_at(obj, arg), "<unset>"),
            "unknown_if_empty" => or_placeholder(str_at(obj, arg), "<unknown>"),
            "since_or_none" => match obj.pointer(arg) {
                Some(v) if v.is_string() => Value::from(since(Some(v), now)),
                _ => Value::from("<none>"),
            },
            // `true_unless_set:<pointer>,<pointer>...`: whether none of the
            // fields is switched on (`true`, or a non-empty string).
            "true_unless_set" => {
                let set = arg.split(',').any(|p| match obj.pointer(p) {
                    Some(Value::Bool(on)) => *on,
                    Some(Value::String(s)) => !s.is_empty(),
                    _ => false,
                });
                Value::from(if set { "False" } else { "True" })
            }
            "bool" => Value::Bool(obj.pointer(arg).and_then(Value::as_bool).unwrap_or(false)),
            "value_or_none" => obj.pointer(arg).cloned().unwrap_or_else(|| Value::from("<none>")),
            "join" => Value::from(
                array_at(obj, arg)
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            "labels" => Value::from(format_labels(obj.pointer(arg))),
            "selector" => Value::from(format_label_selector(obj.pointer(arg))),
            "containers" | "images" => {
                let field = if kind == "containers" { "/name" } else { "/image" };
                let list: Vec<&str> = array_at(obj, &format!("{arg}/containers"))
                    .iter()
                    .map(|c| str_at(c, field))
                    .collect();
                Value::from(list.join(","))
            }
            "load_balancer" => Value::from(load_balancer_addresses(array_at(obj, arg)).join(",")),
            "node.address" => {
                let addr = array_at(obj, "/status/addresses")
                    .iter()
                    .find(|a| str_at(a, "/type") == arg);
                or_placeholder(addr.map(|a| str_at(a, "/address")).unwrap_or_default(), "<none>")
            }
            _ => Value::Null,
        };
    }
    match name {
        "name" => Value::from(str_at(obj, "/metadata/name")),
        "age" => Value::from(since(obj.pointer("/metadata/creationTimestamp"), now)),
        "created_at" => match str_at(obj, "/metadata/creationTimestamp") {
            "" => Value::Null,
            t => Value::from(t),
        },
        "ready_of_replicas" => Value::from(format!(
            "{}/{}",
            int_at(obj, "/status/readyReplicas"),
            spec_replicas(obj)
        )),
        "spec_replicas" => Value::from(spec_replicas(obj)),
        "pod.ready" | "pod.status" | "pod.restarts" => pod_cell(name, obj, now),
        "pod.ip" => or_placeholder(str_at(obj, "/status/podIP"), "<none>"),
        "pod.node" => or_placeholder(str_at(obj, "/spec/nodeName"), "<none>"),
        "pod.nominated_node" => or_placeholder(str_at(obj, "/status/nominatedNodeName"), "<none>"),
        "pod.readiness_gates" => {
            let gates = array_at(obj, "/spec/readinessGates");
            if gates.is_empty() {
                Value::from("<none>")
            } else {
                let ready = gates
                    .iter()
                    .filter(|g| has_condition(obj, str_at(g, "/conditionType")))
                    .count();
                Value::from(format!("{ready}/{}", gates.len()))
            }
        }
        "job.status" => Value::from(job_status(obj)),
        "job.completions" => Value::from(job_completions(obj)),
        "job.duration" => {
            let start = obj
                .pointer("/status/startTime")
                .and_then(Value::as_str)
                .and_then(parse_time);
            let end = obj
                .pointer("/status/completionTime")
                .and_then(Value::as_str)
                .and_then(parse_time);
            Value::from(match (start, end) {
                (None, _) => String::new(),
                (Some(s), None) => human_duration(now - s),
                (Some(s), Some(e)) => human_duration(e - s),
            })
        }
        "cronjob.suspend" => {
            let suspended = obj
                .pointer("/spec/suspend")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            Value::from(if suspended { "True" } else { "False" })
        }
        "endpoints.endpoints" => Value::from(endpoints_cell(obj)),
        "endpointslice.ports" => {
            let ports: Vec<String> = array_at(obj, "/ports")
                .iter()
                .filter_map(|p| p.get("port").and_then(Value::as_i64))
                .map(|p| p.to_string())
                .collect();
            Value::from(if ports.is_empty() {
                "<unset>".to_string()
            } else {
                ports.join(",")
            })
        }
        "endpointslice.endpoints" => {
            let addresses: Vec<&str> = array_at(obj, "/endpoints")
                .iter()
                .flat_map(|e| array_at(e, "/addresses"))
                .filter_map(Value::as_str)
                .collect();
            Value::from(if addresses.is_empty() {
                "<unset>".to_string()
            } else {
                first_three(addresses.iter().map(|a| a.to_string()), addresses.len())
            })
        }
        "service.type" => or_placeholder(str_at(obj, "/spec/type"), "ClusterIP"),
        "service.cluster_ip" => {
            let first = array_at(obj, "/spec/clusterIPs").first().and_then(Value::as_str);
            or_placeholder(first.unwrap_or(str_at(obj, "/spec/clusterIP")), "<none>")
        }
        "service.external_ip" => Value::from(service_external_ip(obj)),
        "service.ports" => {
            let ports: Vec<String> = array_at(obj, "/spec/ports")
                .iter()
                .map(|p| {
                    let protocol = Some(str_at(p, "/protocol"))
                        .filter(|s| !s.is_empty())
                        .unwrap_or("TCP");
                    match int_at(p, "/nodePort") {
                        0 => format!("{}/{protocol}", int_at(p, "/port")),
                        node => format!("{}:{node}/{protocol}", int_at(p, "/port")),
                    }
                })
                .collect();
            or_placeholder(&ports.join(","), "<none>")
        }
        "admission.param_kind" => match obj.pointer("/spec/paramKind") {
            Some(k) => Value::from(format!("{}/{}", str_at(k, "/apiVersion"), str_at(k, "/kind"))),
            None => Value::from("<unset>"),
        },
        "admission.param_ref" => Value::from(param_ref(obj.pointer("/spec/paramRef"))),
        "csidriver.attach_required" => Value::Bool(
            obj.pointer("/spec/attachRequired")
                .and_then(Value::as_bool)
                .unwrap_or(true),
        ),
        "csidriver.token_requests" => match obj.pointer("/spec/tokenRequests") {
            Some(Value::Array(requests)) => Value::from(
                requests
                    .iter()
                    .map(|t| str_at(t, "/audience"))
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            _ => Value::from("<unset>"),
        },
        "csidriver.modes" => {
            let modes: Vec<&str> = array_at(obj, "/spec/volumeLifecycleModes")
                .iter()
                .filter_map(Value::as_str)
                .collect();
            or_placeholder(&modes.join(","), "<none>")
        }
        "flowschema.missing_pl" => Value::from(
            array_at(obj, "/status/conditions")
                .iter()
                .find(|c| str_at(c, "/type") == "Dangling")
                .map(|c| str_at(c, "/status"))
                .unwrap_or("?"),
        ),
        "resourceclaim.state" => Value::from(resource_claim_state(obj)),
        "ipaddress.parent_ref" => Value::from(ip_address_parent(obj.pointer("/spec/parentRef"))),
        "configmap.data" => {
            let count = |p: &str| obj.pointer(p).and_then(Value::as_object).map_or(0, Map::len);
            Value::from(count("/data") + count("/binaryData"))
        }
        "namespace.status" => or_placeholder(str_at(obj, "/status/phase"), "Active"),
        "componentstatus.status" => {
            let healthy = obj
                .pointer("/conditions")
                .and_then(Value::as_array)
                .and_then(|cs| {
                    cs.iter()
                        .find(|c| c.get("type").and_then(Value::as_str) == Some("Healthy"))
                })
                .and_then(|c| c.get("status").and_then(Value::as_str));
            Value::from(match healthy {
                Some("True") => "Healthy",
                Some("False") => "Unhealthy",
                _ => "Unknown",
            })
        }
        "node.status" => Value::from(node_status(obj)),
        "node.roles" => Value::from(node_roles(obj)),
        "pvc.status" => {
            if obj
                .pointer("/metadata/deletionTimestamp")
                .is_some_and(|v| !v.is_null())
            {
                Value::from("Terminating")
            } else {
                Value::from(str_at(obj, "/status/phase"))
            }
        }
        "pvc.capacity" => bound_pvc_field(obj, |o| Value::from(str_at(o, "/status/capacity/storage"))),
        "pvc.access_modes" => bound_pvc_field(obj, |o| {
            Value::from(access_modes(array_at(o, "/status/accessModes")))
        }),
        "pvc.storage_class" => {
            let class = obj.pointer("/spec/storageClassName").and_then(Value::as_str);
            let annotated = str_at(
                obj,
                "/metadata/annotations/volume.beta.kubernetes.io~1storage-class",
            );
            Value::from(class.unwrap_or(annotated))
        }
        "ingress.hosts" => Value::from(ingress_hosts(array_at(obj, "/spec/rules"))),
        "ingress.ports" => Value::from(if array_at(obj, "/spec/tls").is_empty() {
            "80"
        } else {
            "80, 443"
        }),
        name if name.starts_with("event.") => event_cell(name, obj, now),
        _ => Value::Null,
    }
}

/// PVC capacity and access modes are shown only once the claim is bound.
fn bound_pvc_field(obj: &Value, f: impl Fn(&Value) -> Value) -> Value {
    if str_at(obj, "/spec/volumeName").is_empty() {
        Value::from("")
    } else {
        f(obj)
    }
}

fn access_modes(modes: &[Value]) -> String {
    let has = |m: &str| modes.iter().any(|v| v.as_str() == Some(m));
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(m, _)| has(m))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

fn ingress_hosts(rules: &[Value]) -> String {
    const MAX: usize = 3;
    let hosts: Vec<&str> = rules
        .iter()
        .map(|r| str_at(r, "/host"))
        .filter(|h| !h.is_empty())
        .collect();
    if hosts.is_empty() {
        return "*".into();
    }
    let shown = hosts[..hosts.len().min(MAX)].join(",");
    if rules.len() > MAX {
        format!("{shown} + {} more...", rules.len() - MAX)
    } else {
        shown
    }
}

fn service_external_ip(obj: &Value) -> String {
    let external: Vec<&str> = array_at(obj, "/spec/externalIPs")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    match str_at(obj, "/spec/type") {
        "" | "ClusterIP" | "NodePort" => {
            if external.is_empty() {
                "<none>".into()
            } else {
                external.join(",")
            }
        }
        "LoadBalancer" => {
            let mut ips = load_balancer_addresses(array_at(obj, "/status/loadBalancer/ingress"));
            ips.extend(external.iter().map(|s| s.to_string()));
            if ips.is_empty() {
                "<pending>".into()
            } else {
                ips.join(",")
            }
        }
        "ExternalName" => str_at(obj, "/spec/externalName").into(),
        _ => "<unknown>".into(),
    }
}

fn node_status(obj: &Value) -> String {
    let ready = array_at(obj, "/status/conditions")
        .iter()
        .find(|c| str_at(c, "/type") == "Ready");
    let mut status = vec![match ready {
        Some(c) if str_at(c, "/status") == "True" => "Ready",
        Some(_) => "NotReady",
        None => "Unknown",
    }];
    if obj.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push("SchedulingDisabled");
    }
    status.join(",")
}

fn node_roles(obj: &Value) -> String {
    let mut roles: Vec<String> = obj
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| match k.strip_prefix("node-role.kubernetes.io/") {
                    Some(role) if !role.is_empty() => Some(role.to_string()),
                    Some(_) => None,
                    None if k == "kubernetes.io/role" => {
                        v.as_str().filter(|s| !s.is_empty()).map(String::from)
                    }
                    None => None,
                })
                .collect()
        })
        .unwrap_or_default();
    roles.sort();
    roles.dedup();
    if roles.is_empty() {
        "<none>".into()
    } else {
        roles.join(",")
    }
}

fn job_status(obj: &Value) -> &'static str {
    if has_condition(obj, "Complete") {
        "Complete"
    } else if has_condition(obj, "Failed") {
        "Failed"
    } else if obj
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
    {
        "Terminating"
    } else if has_condition(obj, "Suspended") {
        "Suspended"
    } else if has_condition(obj, "FailureTarget") {
        "FailureTarget"
    } else if has_condition(obj, "SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else {
        "Running"
    }
}

fn job_completions(obj: &Value) -> String {
    let succeeded = int_at(obj, "/status/succeeded");
    match (
        obj.pointer("/spec/completions").and_then(Value::as_i64),
        obj.pointer("/spec/parallelism").and_then(Value::as_i64),
    ) {
        (Some(c), _) => format!("{succeeded}/{c}"),
        (None, Some(p)) if p > 1 => format!("{succeeded}/1 of {p}"),
        _ => format!("{succeeded}/1"),
    }
}

/// A container's `terminated` state as the pod Status column words it.
fn terminated_reason(t: &Value, prefix: &str) -> String {
    match str_at(t, "/reason") {
        "" => match int_at(t, "/signal") {
            0 => format!("{prefix}ExitCode:{}", int_at(t, "/exitCode")),
            sig => format!("{prefix}Signal:{sig}"),
        },
        reason => format!("{prefix}{reason}"),
    }
}

/// kubectl's pod Ready, Status and Restarts columns (sidecar init containers
/// are treated like other init containers).
fn pod_cell(name: &str, pod: &Value, now: DateTime<Utc>) -> Value {
    let statuses = array_at(pod, "/status/containerStatuses");
    let init_statuses = array_at(pod, "/status/initContainerStatuses");
    let total = array_at(pod, "/spec/containers").len();
    let mut restarts = 0;
    let mut last_restart: Option<DateTime<Utc>> = None;
    let mut ready = 0;
    let phase = str_at(pod, "/status/phase");
    let mut reason = match str_at(pod, "/status/reason") {
        "" if phase.is_empty() => "Pending".to_string(),
        "" => phase.to_string(),
        r => r.to_string(),
    };
    let gated = array_at(pod, "/status/conditions")
        .iter()
        .any(|c| str_at(c, "/type") == "PodScheduled" && str_at(c, "/reason") == "SchedulingGated");
    if gated {
        reason = "SchedulingGated".into();
    }

    let mut note_restarts = |c: &Value| {
        restarts += int_at(c, "/restartCount");
        let finished = c
            .pointer("/lastState/terminated/finishedAt")
            .and_then(Value::as_str)
            .and_then(parse_time);
        if finished > last_restart {
            last_restart = finished;
        }
    };

    let mut initializing = false;
    let init_total = array_at(pod, "/spec/initContainers").len();
    for (i, c) in init_statuses.iter().enumerate() {
        note_restarts(c);
        let terminated = c.pointer("/state/terminated").filter(|t| t.is_object());
        let waiting_reason = str_at(c, "/state/waiting/reason");
        match terminated {
            Some(t) if int_at(t, "/exitCode") == 0 => continue,
            Some(t) => reason = terminated_reason(t, "Init:"),
            None if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" => {
                reason = format!("Init:{waiting_reason}")
            }
            None => reason = format!("Init:{i}/{init_total}"),
        }
        initializing = true;
        break;
    }

    if !initializing {
        let mut has_running = false;
        for c in statuses.iter().rev() {
            note_restarts(c);
            let waiting_reason = str_at(c, "/state/waiting/reason");
            let terminated = c.pointer("/state/terminated").filter(|t| t.is_object());
            if !waiting_reason.is_empty() {
                reason = waiting_reason.to_string();
            } else if let Some(t) = terminated {
                reason = terminated_reason(t, "");
            } else if c.get("ready").and_then(Value::as_bool) == Some(true)
                && c.pointer("/state/running").is_some_and(Value::is_object)
            {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            reason = if has_condition(pod, "Ready") {
                "Running"
            } else {
                "NotReady"
            }
            .into();
        }
    }

    let deleting = pod
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null());
    if deleting && str_at(pod, "/status/reason") == "NodeLost" {
        reason = "Unknown".into();
    } else if deleting && phase != "Succeeded" && phase != "Failed" {
        reason = "Terminating".into();
    }

    match name {
        "pod.ready" => Value::from(format!("{ready}/{total}")),
        "pod.status" => Value::from(reason),
        _ => Value::from(match last_restart {
            Some(t) if restarts != 0 => format!("{restarts} ({} ago)", human_duration(now - t)),
            _ => restarts.to_string(),
        }),
    }
}

/// Core `v1` events and `events.k8s.io/v1` events (whose fields are renamed).
fn event_cell(name: &str, ev: &Value, now: DateTime<Utc>) -> Value {
    let first_of = |pointers: &[&str]| -> Option<&Value> {
        pointers
            .iter()
            .filter_map(|p| ev.pointer(p))
            .find(|v| v.as_str().is_some_and(|s| !s.is_empty()))
    };
    let first_seen = || {
        let t = first_of(&["/firstTimestamp", "/deprecatedFirstTimestamp", "/eventTime"]);
        since(t, now)
    };
    let involved = ev
        .get("involvedObject")
        .or_else(|| ev.get("regarding"))
        .unwrap_or(&Value::Null);
    match name {
        "event.last_seen" => Value::from(if let Some(t) = ev.pointer("/series/lastObservedTime") {
            since(Some(t), now)
        } else if let Some(t) = first_of(&["/lastTimestamp", "/deprecatedLastTimestamp"]) {
            since(Some(t), now)
        } else {
            first_seen()
        }),
        "event.first_seen" => Value::from(first_seen()),
        "event.object" => {
            let kind = str_at(involved, "/kind").to_ascii_lowercase();
            Value::from(match str_at(involved, "/name") {
                "" => kind,
                n => format!("{kind}/{n}"),
            })
        }
        "event.subobject" => Value::from(str_at(involved, "/fieldPath")),
        "event.source" => {
            let pick = |a: &str, b: &str| {
                Some(str_at(ev, a))
                    .filter(|s| !s.is_empty())
                    .unwrap_or(str_at(ev, b))
            };
            let component = pick("/source/component", "/reportingController");
            let instance = pick("/source/host", "/reportingInstance");
            Value::from(if instance.is_empty() {
                component.to_string()
            } else {
                format!("{component}, {instance}")
            })
        }
        "event.message" => {
            let msg = first_of(&["/message", "/note"])
                .and_then(Value::as_str)
                .unwrap_or_default();
            Value::from(msg.trim())
        }
        "event.count" => {
            let count = ev
                .pointer("/series/count")
                .or_else(|| ev.get("count"))
                .or_else(|| ev.get("deprecatedCount"))
                .and_then(Value::as_i64)
                .unwrap_or(0);
            Value::from(count.max(1))
        }
        _ => Value::Null,
    }
}

/// One step of a parsed JSONPath.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Wildcard,
    Index(i64),
    /// `[?(@.path)]` (existence) or `[?(@.path op literal)]`.
    Filter {
        path: Vec<Step>,
        compare: Option<(String, Value)>,
    },
}

/// Parse the JSONPath subset CRD printer columns use: `.a.b`, `.a[0]`,
/// `.a[-1]`, `.a[*].b`, `.a['b.c']`, `.a[?(@.type=="Ready")].status`, with
/// optional `{}` and `$`. `None` for anything else.
fn parse_json_path(path: &str) -> Option<Vec<Step>> {
    let mut p = path.trim();
    if let Some(inner) = p.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
        p = inner.trim();
    }
    p = p.strip_prefix('$').unwrap_or(p);
    parse_steps(p)
}

fn parse_steps(mut p: &str) -> Option<Vec<Step>> {
    let mut steps = Vec::new();
    while !p.is_empty() {
        if let Some(rest) = p.strip_prefix('.') {
            if rest.starts_with('.') {
                return None; // recursive descent
            }
            let end = rest.find(['.', '[']).unwrap_or(rest.len());
            match &rest[..end] {
                "" => {}
                "*" => steps.push(Step::Wildcard),
                field => steps.push(Step::Field(field.to_string())),
            }
            p = &rest[end..];
        } else if p.starts_with('[') {
            let end = closing_bracket(p)?;
            steps.push(parse_bracket(&p[1..end])?);
            p = &p[end + 1..];
        } else {
            return None;
        }
    }
    Some(steps)
}

/// Index of the `]` closing the `[` at the start of `p`, skipping quotes.
fn closing_bracket(p: &str) -> Option<usize> {
    let mut quote: Option<char> = None;
    let mut depth = 0;
    for (i, c) in p.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '[') => depth += 1,
            (None, ']') => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

fn unquote(s: &str) -> Option<&str> {
    let s = s.trim();
    s.strip_prefix('\'')
        .and_then(|r| r.strip_suffix('\''))
        .or_else(|| s.strip_prefix('"').and_then(|r| r.strip_suffix('"')))
}

fn parse_bracket(inner: &str) -> Option<Step> {
    let inner = inner.trim();
    if inner == "*" {
        return Some(Step::Wildcard);
    }
    if let Some(field) = unquote(inner) {
        return Some(Step::Field(field.to_string()));
    }
    if let Ok(i) = inner.parse::<i64>() {
        return Some(Step::Index(i));
    }
    let filter = inner.strip_prefix("?(")?.strip_suffix(')')?.trim();
    let rel = filter.strip_prefix('@')?;
    for op in ["==", "!=", "<=", ">=", "<", ">"] {
        if let Some(at) = find_outside_quotes(rel, op) {
            let path = parse_steps(rel[..at].trim())?;
            let literal = rel[at + op.len()..].trim();
            let value = match unquote(literal) {
                Some(s) => Value::from(s),
                None => serde_json::from_str(literal).ok()?,
            };
            return Some(Step::Filter {
                path,
                compare: Some((op.to_string(), value)),
            });
        }
    }
    Some(Step::Filter {
        path: parse_steps(rel.trim())?,
        compare: None,
    })
}

fn find_outside_quotes(s: &str, needle: &str) -> Option<usize> {
    let mut quote: Option<char> = None;
    for (i, c) in s.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if s[i..].starts_with(needle) => return Some(i),
            None => {}
        }
    }
    None
}

fn apply_steps<'a>(steps: &[Step], root: &'a Value) -> Vec<&'a Value> {
    let mut current = vec![root];
    for step in steps {
        let mut next = Vec::new();
        for v in current {
            match step {
                Step::Field(f) => next.extend(v.get(f.as_str())),
                Step::Wildcard => match v {
                    Value::Array(a) => next.extend(a.iter()),
                    Value::Object(m) => next.extend(m.values()),
                    _ => {}
                },
                Step::Index(i) => {
                    if let Some(a) = v.as_array() {
                        let idx = if *i < 0 { a.len() as i64 + i } else { *i };
                        next.extend(usize::try_from(idx).ok().and_then(|idx| a.get(idx)));
                    }
                }
                Step::Filter { path, compare } => {
                    let items: Vec<&Value> = match v {
                        Value::Array(a) => a.iter().collect(),
                        other => vec![other],
                    };
                    next.extend(items.into_iter().filter(|item| {
                        let found = apply_steps(path, item);
                        match compare {
                            None => !found.is_empty(),
                            Some((op, want)) => {
                                found.first().is_some_and(|have| compare_values(have, op, want))
                            }
                        }
                    }));
                }
            }
        }
        current = next;
    }
    current
}

fn compare_values(have: &Value, op: &str, want: &Value) -> bool {
    let ordering = match (have, want) {
        (Value::Number(a), Value::Number(b)) => a.as_f64().partial_cmp(&b.as_f64()),
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        (a, b) if a == b => Some(std::cmp::Ordering::Equal),
        _ => None,
    };
    use std::cmp::Ordering::*;
    match op {
        "==" => ordering == Some(Equal),
        "!=" => ordering != Some(Equal),
        "<" => ordering == Some(Less),
        ">" => ordering == Some(Greater),
        "<=" => matches!(ordering, Some(Less | Equal)),
        ">=" => matches!(ordering, Some(Greater | Equal)),
        _ => false,
    }
}

/// Evaluate `path` against `obj`: every value it selects, in order. An
/// unsupported or malformed path selects nothing.
pub fn eval_json_path<'a>(path: &str, obj: &'a Value) -> Vec<&'a Value> {
    parse_json_path(path)
        .map(|steps| apply_steps(&steps, obj))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_list_three_addresses_then_how_many_more() {
        let ep = json!({"subsets": [
            {"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}], "ports": [{"port": 80}, {"port": 443}]},
            {"addresses": [{"ip": "10.0.0.3"}]},
        ]});
        assert_eq!(
            endpoints_cell(&ep),
            "10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 2 more..."
        );
        assert_eq!(endpoints_cell(&json!({})), "<none>");
        let slice = json!({"endpoints": [{"addresses": ["fd00::1"]}], "ports": [{"port": 6443}]});
        assert_eq!(
            builtin_cell("endpointslice.endpoints", &slice, Utc::now()),
            "fd00::1"
        );
        assert_eq!(builtin_cell("endpointslice.ports", &slice, Utc::now()), "6443");
        assert_eq!(
            builtin_cell("endpointslice.ports", &json!({}), Utc::now()),
            "<unset>"
        );
    }

    fn now() -> DateTime<Utc> {
        parse_time("2024-05-01T12:00:00Z").unwrap()
    }

    #[test]
    fn true_unless_set_is_false_once_any_field_is_switched_on() {
        let cell = |obj: Value| builtin_cell("true_unless_set:/spec/off,/spec/until", &obj, now());
        assert_eq!(cell(json!({})), "True");
        assert_eq!(
            cell(json!({"spec": {"off": false, "until": "", "other": true}})),
            "True"
        );
        assert_eq!(cell(json!({"spec": {"off": true}})), "False");
        assert_eq!(cell(json!({"spec": {"until": "tomorrow"}})), "False");
    }

    fn render(columns: &[PrinterColumn], objects: &[Value]) -> Value {
        render_table(columns, objects, IncludeObject::default(), Map::new(), now())
    }

    fn cells_between(table: &Value, from: usize, to: usize) -> Value {
        Value::Array(table["rows"][0]["cells"].as_array().unwrap()[from..to].to_vec())
    }

    fn column_names(table: &Value) -> Vec<&str> {
        table["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn human_duration_rounds_like_kubernetes() {
        let d = chrono::Duration::seconds;
        assert_eq!(human_duration(d(-5)), "<invalid>");
        assert_eq!(human_duration(d(-1)), "0s");
        assert_eq!(human_duration(d(119)), "119s");
        assert_eq!(human_duration(d(5 * 60)), "5m");
        assert_eq!(human_duration(d(5 * 60 + 30)), "5m30s");
        assert_eq!(human_duration(d(42 * 60 + 30)), "42m");
        assert_eq!(human_duration(d(5 * 3600 + 10 * 60)), "5h10m");
        assert_eq!(human_duration(d(30 * 3600)), "30h");
        assert_eq!(human_duration(d(3 * 86400 + 4 * 3600)), "3d4h");
        assert_eq!(human_duration(d(120 * 86400)), "120d");
        assert_eq!(human_duration(d((2 * 365 + 45) * 86400)), "2y45d");
        assert_eq!(human_duration(d(9 * 365 * 86400)), "9y");
    }

    #[test]
    fn table_has_name_first_and_partial_metadata_rows() {
        let obj = json!({"kind": "ConfigMap", "metadata": {"name": "cfg", "creationTimestamp": "2024-05-01T11:55:00Z"},
                         "data": {"a": "1", "b": "2"}, "binaryData": {"c": ""}});
        let mut meta = Map::new();
        meta.insert("resourceVersion".into(), json!("42"));
        let table = render_table(
            &builtin_columns("", "configmaps"),
            &[obj],
            IncludeObject::Metadata,
            meta,
            now(),
        );
        assert_eq!(table["kind"], "Table");
        assert_eq!(table["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(table["metadata"]["resourceVersion"], "42");
        assert_eq!(column_names(&table), vec!["Name", "Data", "Age"]);
        assert_eq!(table["columnDefinitions"][0]["format"], "name");
        assert_eq!(table["rows"][0]["cells"], json!(["cfg", 3, "5m"]));
        assert_eq!(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(table["rows"][0]["object"]["metadata"]["name"], "cfg");
    }

    #[test]
    fn include_object_controls_row_objects() {
        let obj = json!({"metadata": {"name": "x"}, "spec": {"a": 1}});
        let cols = builtin_columns("", "widgets");
        let none = render_table(
            &cols,
            std::slice::from_ref(&obj),
            IncludeObject::None,
            Map::new(),
            now(),
        );
        assert!(none["rows"][0].get("object").is_none());
        let full = render_table(
            &cols,
            std::slice::from_ref(&obj),
            IncludeObject::Object,
            Map::new(),
            now(),
        );
        assert_eq!(full["rows"][0]["object"], obj);
        assert_eq!("None".parse::<IncludeObject>(), Ok(IncludeObject::None));
        assert_eq!("".parse::<IncludeObject>(), Ok(IncludeObject::Metadata));
        assert!("All".parse::<IncludeObject>().is_err());
    }

    #[test]
    fn unknown_builtin_kinds_show_age() {
        let obj = json!({"metadata": {"name": "x"}});
        let table = render(&builtin_columns("", "limitranges"), &[obj]);
        assert_eq!(column_names(&table), vec!["Name", "Age"]);
        assert_eq!(table["rows"][0]["cells"], json!(["x", "<unknown>"]));
    }

    #[test]
    fn crds_show_raw_created_at() {
        let obj =
            json!({"metadata": {"name": "widgets.example.com", "creationTimestamp": "2024-01-01T00:00:00Z"}});
        let table = render(
            &builtin_columns("apiextensions.k8s.io", "customresourcedefinitions"),
            &[obj],
        );
        assert_eq!(column_names(&table), vec!["Name", "Created At"]);
        assert_eq!(table["columnDefinitions"][1]["type"], "date");
        assert_eq!(
            table["rows"][0]["cells"],
            json!(["widgets.example.com", "2024-01-01T00:00:00Z"])
        );
    }

    #[test]
    fn pod_columns_match_kubectl() {
        let pod = json!({
            "metadata": {"name": "web-0", "creationTimestamp": "2024-05-01T10:00:00Z"},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n1"},
            "status": {"phase": "Running", "podIP": "10.0.0.5", "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 2, "state": {"running": {}},
                 "lastState": {"terminated": {"finishedAt": "2024-05-01T11:50:00Z"}}},
                {"name": "b", "ready": false, "restartCount": 1, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
            ]}
        });
        let table = render(&builtin_columns("", "pods"), &[pod]);
        assert_eq!(
            column_names(&table),
            vec![
                "Name",
                "Ready",
                "Status",
                "Restarts",
                "Age",
                "IP",
                "Node",
                "Nominated Node",
                "Readiness Gates"
            ]
        );
        assert_eq!(
            table["rows"][0]["cells"],
            json!([
                "web-0",
                "1/2",
                "CrashLoopBackOff",
                "3 (10m ago)",
                "120m",
                "10.0.0.5",
                "n1",
                "<none>",
                "<none>"
            ])
        );
        assert_eq!(table["columnDefinitions"][5]["priority"], 1);
    }

    #[test]
    fn pod_status_reports_init_and_terminating() {
        let cols = vec![PrinterColumn::builtin("Status", "string", "pod.status")];
        let init = json!({"metadata": {"name": "p"}, "spec": {"initContainers": [{"name": "i"}, {"name": "j"}], "containers": [{"name": "c"}]},
                          "status": {"phase": "Pending", "initContainerStatuses": [
                              {"name": "i", "state": {"terminated": {"exitCode": 0}}},
                              {"name": "j", "state": {"running": {}}}]}});
        let deleting = json!({"metadata": {"name": "q", "deletionTimestamp": "2024-05-01T11:00:00Z"},
                              "spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Running"}});
        let fresh = json!({"metadata": {"name": "r"}, "spec": {"containers": [{"name": "c"}]}});
        let table = render(&cols, &[init, deleting, fresh]);
        assert_eq!(table["rows"][0]["cells"][1], "Init:1/2");
        assert_eq!(table["rows"][1]["cells"][1], "Terminating");
        assert_eq!(table["rows"][2]["cells"][1], "Pending");
    }

    #[test]
    fn deployment_and_service_columns() {
        let deploy = json!({"metadata": {"name": "web", "creationTimestamp": "2024-04-28T12:00:00Z"},
                            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                                     "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1"}]}}},
                            "status": {"readyReplicas": 2, "updatedReplicas": 3}});
        let table = render(&builtin_columns("apps", "deployments"), &[deploy]);
        assert_eq!(
            column_names(&table),
            vec![
                "Name",
                "Ready",
                "Up-to-date",
                "Available",
                "Age",
                "Containers",
                "Images",
                "Selector"
            ]
        );
        assert_eq!(
            table["rows"][0]["cells"],
            json!(["web", "2/3", 3, 0, "3d", "nginx", "nginx:1", "app=web"])
        );

        let svc = json!({"metadata": {"name": "web"}, "spec": {"type": "NodePort", "clusterIP": "10.96.0.10",
                         "ports": [{"port": 80, "nodePort": 30080}, {"port": 53, "protocol": "UDP"}]}});
        let lb =
            json!({"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.11"}});
        let table = render(&builtin_columns("", "services"), &[svc, lb]);
        assert_eq!(
            table["rows"][0]["cells"],
            json!([
                "web",
                "NodePort",
                "10.96.0.10",
                "<none>",
                "80:30080/TCP,53/UDP",
                "<unknown>",
                "<none>"
            ])
        );
        assert_eq!(table["rows"][1]["cells"][3], "<pending>");
        assert_eq!(table["rows"][1]["cells"][4], "<none>");
    }

    #[test]
    fn node_job_and_cronjob_columns() {
        let node = json!({"metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/control-plane": ""}},
                          "spec": {"unschedulable": true},
                          "status": {"conditions": [{"type": "Ready", "status": "True"}],
                                     "nodeInfo": {"kubeletVersion": "v1.31.0"}}});
        let table = render(&builtin_columns("", "nodes"), &[node]);
        let cells = &table["rows"][0]["cells"];
        assert_eq!(cells[1], "Ready,SchedulingDisabled");
        assert_eq!(cells[2], "control-plane");
        assert_eq!(cells[4], "v1.31.0");

        let job = json!({"metadata": {"name": "j"}, "spec": {"completions": 2},
                         "status": {"succeeded": 2, "startTime": "2024-05-01T11:00:00Z",
                                    "completionTime": "2024-05-01T11:00:30Z",
                                    "conditions": [{"type": "Complete", "status": "True"}]}});
        let table = render(&builtin_columns("batch", "jobs"), &[job]);
        assert_eq!(cells_between(&table, 1, 4), json!(["Complete", "2/2", "30s"]));

        let cron = json!({"metadata": {"name": "c"}, "spec": {"schedule": "*/5 * * * *"},
                          "status": {"active": [{}], "lastScheduleTime": "2024-05-01T11:58:00Z"}});
        let table = render(&builtin_columns("batch", "cronjobs"), &[cron]);
        assert_eq!(
            cells_between(&table, 1, 6),
            json!(["*/5 * * * *", "<none>", "False", 1, "2m"])
        );
    }

    #[test]
    fn events_put_name_last_and_wide() {
        let ev = json!({"metadata": {"name": "web.123"}, "type": "Warning", "reason": "BackOff",
                        "involvedObject": {"kind": "Pod", "name": "web-0"}, "message": "Back-off ",
                        "lastTimestamp": "2024-05-01T11:59:00Z", "count": 4});
        let table = render(&builtin_columns("", "events"), &[ev]);
        let names = column_names(&table);
        assert_eq!(names[0], "Last Seen");
        assert_eq!(names.last(), Some(&"Name"));
        assert_eq!(
            table["rows"][0]["cells"],
            json!([
                "60s",
                "Warning",
                "BackOff",
                "pod/web-0",
                "",
                "",
                "Back-off",
                "<unknown>",
                4,
                "web.123"
            ])
        );
    }

    #[test]
    fn pvc_ingress_lease_columns() {
        let pvc = json!({"metadata": {"name": "data"}, "spec": {"volumeName": "pv-1", "storageClassName": "standard"},
                         "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}});
        let table = render(&builtin_columns("", "persistentvolumeclaims"), &[pvc]);
        assert_eq!(
            cells_between(&table, 1, 7),
            json!(["Bound", "pv-1", "1Gi", "RWO", "standard", "<unset>"])
        );
        let ing = json!({"metadata": {"name": "i"}, "spec": {"ingressClassName": "nginx", "tls": [{}],
                         "rules": [{"host": "a"}, {"host": "b"}, {"host": "c"}, {"host": "d"}]},
                         "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}});
        let table = render(&builtin_columns("networking.k8s.io", "ingresses"), &[ing]);
        assert_eq!(
            cells_between(&table, 1, 5),
            json!(["nginx", "a,b,c + 1 more...", "1.2.3.4", "80, 443"])
        );
        let lease = json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "me"}});
        let table = render(&builtin_columns("coordination.k8s.io", "leases"), &[lease]);
        assert_eq!(table["rows"][0]["cells"][1], "me");
    }

    #[test]
    fn crd_printer_column_with_filter_expression() {
        let cols = crd_columns(&json!([
            {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
            {"name": "Size", "type": "integer", "jsonPath": ".spec.size", "priority": 1},
            {"name": "First", "type": "string", "jsonPath": ".spec.items[0].name"},
            {"name": "Names", "type": "string", "jsonPath": ".spec.items[*].name"},
            {"name": "Enabled", "type": "boolean", "jsonPath": ".spec.enabled"},
            {"name": "Ratio", "type": "number", "jsonPath": ".spec.ratio"},
            {"name": "Started", "type": "date", "jsonPath": ".status.startedAt"},
            {"name": "Missing", "type": "string", "jsonPath": ".spec.nope"}
        ]));
        let obj = json!({"metadata": {"name": "w"},
                         "spec": {"size": 3, "items": [{"name": "x"}, {"name": "y"}], "enabled": true, "ratio": 1},
                         "status": {"startedAt": "2024-05-01T11:00:00Z",
                                    "conditions": [{"type": "Synced", "status": "False"}, {"type": "Ready", "status": "True"}]}});
        let table = render(&cols, &[obj]);
        assert_eq!(table["columnDefinitions"][2]["priority"], 1);
        assert_eq!(
            table["rows"][0]["cells"],
            json!(["w", "True", 3, "x", "x", true, 1.0, "60m", null])
        );
    }

    #[test]
    fn crd_without_columns_gets_age_from_creation_timestamp() {
        let cols = crd_columns(&Value::Null);
        let obj = json!({"metadata": {"name": "w", "creationTimestamp": "2024-05-01T11:59:30Z"}});
        let table = render(&cols, &[obj]);
        assert_eq!(column_names(&table), vec!["Name", "Age"]);
        assert_eq!(table["rows"][0]["cells"], json!(["w", "30s"]));
    }

    #[test]
    fn crd_columns_starting_with_name_are_not_duplicated() {
        let cols = crd_columns(&json!([{"name": "NAME", "type": "string", "jsonPath": ".spec.displayName"}]));
        let table = render(
            &cols,
            &[json!({"metadata": {"name": "w"}, "spec": {"displayName": "Widget"}})],
        );
        assert_eq!(column_names(&table), vec!["NAME"]);
        assert_eq!(table["rows"][0]["cells"], json!(["Widget"]));
    }

    #[test]
    fn json_path_subset() {
        let obj =
            json!({"a": {"b.c": 1, "list": [1, 2, 3], "objs": [{"k": 1, "v": "one"}, {"k": 2, "v": "two"}]}});
        assert_eq!(eval_json_path("{.a['b.c']}", &obj), vec![&json!(1)]);
        assert_eq!(eval_json_path("$.a.list[-1]", &obj), vec![&json!(3)]);
        assert_eq!(eval_json_path(".a.objs[?(@.k > 1)].v", &obj), vec![&json!("two")]);
        assert_eq!(eval_json_path(".a.objs[?(@.v)].k", &obj).len(), 2);
        assert!(eval_json_path("..a", &obj).is_empty());
        assert!(eval_json_path(".a.list[1:2]", &obj).is_empty());
    }
}
