// What the console shows of each kind: one section per collection, each row
// built from the object alone. Everything reaches the page as text nodes
// (never as HTML), so nothing an object holds can run in the page.

/** An element with attributes and children (strings become text nodes). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v !== undefined && v !== null && v !== false) el.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** A link to workspace `path`'s page. */
export function wsLink(path, text = path) {
  return h("a", { href: `#/ws/${path}`, "data-workspace": path }, text);
}

/** `12s ago`, `3m ago`, `2h ago` from an RFC 3339 time; `never` without one. */
export function age(time, now = Date.now()) {
  if (!time) return "never";
  const s = Math.max(0, Math.round((now - Date.parse(time)) / 1000));
  if (Number.isNaN(s)) return time;
  if (s < 120) return `${s}s ago`;
  if (s < 7200) return `${Math.round(s / 60)}m ago`;
  if (s < 172800) return `${Math.round(s / 3600)}h ago`;
  return `${Math.round(s / 86400)}d ago`;
}

function condition(o, type) {
  return (o.status?.conditions || []).find((c) => c.type === type);
}

/** Each condition as a badge; a false one shows its reason and message. */
function conditions(o) {
  const list = o.status?.conditions || [];
  if (!list.length) return "none yet";
  return h("ul", { class: "conditions" }, list.map((c) => {
    const good = c.status === "True";
    const why = good ? "" : [c.reason, c.message].filter(Boolean).join(": ");
    return h("li", { class: good ? "ok" : "bad", title: [c.reason, c.message].filter(Boolean).join(": ") },
      `${c.type}=${c.status}`, why ? h("span", { class: "why" }, ` ${why}`) : null);
  }));
}

function yesNo(v) {
  return h("span", { class: v ? "ok" : "bad" }, v ? "yes" : "no");
}

/** A problem, red, with what the user can do about it. */
function problem(reason, message, fix) {
  return h("div", { class: "problem" },
    h("strong", {}, reason), " ", h("span", { class: "message" }, message),
    fix ? h("div", { class: "fix" }, fix) : null);
}

/** The mailbox workspace of a KubeStellar SyncTarget: `<inventory cluster>-mb-<uid>`. */
function mailbox(o, ctx) {
  const suffix = `-mb-${o.metadata.uid}`;
  for (const path of ctx.known) if (path.endsWith(suffix)) return wsLink(path);
  return ctx.cluster ? wsLink(`root:${ctx.cluster}${suffix}`) : `…${suffix}`;
}

function heartbeat(o, ctx) {
  const at = o.status?.lastSyncerHeartbeatTime;
  return h("span", { class: at ? "" : "bad", title: at || "no heartbeat yet" }, age(at, ctx.now));
}

/**
 * The version of the syncer behind a heartbeat (`ferry --version`'s, e.g.
 * `0.1.0 (commit abc123def456)`), or where to find it (`elsewhere`).
 */
function version(o, elsewhere) {
  const v = o.status?.syncerVersion;
  if (v) return h("span", { class: "version" }, v);
  return elsewhere || h("span", { class: "empty" }, "not reported");
}

/**
 * A cluster's row. kcp TMC syncers report on their SyncTarget; KubeStellar
 * syncers report on the SyncerConfig in the target's mailbox, which `elsewhere`
 * names when the SyncTarget itself carries no heartbeat.
 */
function syncTargetRow(o, ctx, view, elsewhere) {
  const ready = condition(o, "Ready");
  const schedulable = !o.spec?.unschedulable && (!ready || ready.status === "True");
  const reported = Boolean(o.status?.lastSyncerHeartbeatTime || o.status?.conditions?.length);
  return {
    bad: ready && ready.status !== "True",
    cells: [o.metadata.name,
      reported || !elsewhere ? heartbeat(o, ctx) : elsewhere,
      reported || !elsewhere ? conditions(o) : elsewhere,
      yesNo(schedulable),
      o.status?.syncerIdentifier || "not reported",
      // A KubeStellar syncer's version is on its SyncerConfig only, even
      // when the hub has carried its heartbeat to the SyncTarget.
      version(o, elsewhere || ""),
      view],
  };
}

const REFUSED = "refused: ";

/**
 * A destination's last drift: someone changed the copy in the cluster and its
 * syncer restored it. When, how often, and which fields (never their values).
 */
function drift(d, ctx) {
  if (!d) return h("span", { class: "empty" }, "none");
  const times = d.corrections === 1 ? "1 correction" : `${d.corrections || 0} corrections`;
  return h("div", { class: "drift", title: d.time || "" },
    `restored ${age(d.time, ctx.now)} (${times}): `,
    h("span", { class: "fields" }, (d.fields || []).join(", ")));
}

/**
 * The sections of a workspace page. Each is shown when the workspace serves
 * its resource and holds objects (`always`: even when empty); `rows(object,
 * ctx)` gives one or more table rows, each `{cells, bad}`.
 */
/** A CombinedStatus value (KubeStellar's tagged union) as text. */
function cell(v) {
  switch (v?.type) {
    case "String": return v.string ?? "";
    case "Number": return v.float ?? "";
    case "Bool": return String(v.bool);
    case "Object": return JSON.stringify(v.object);
    case "Array": return JSON.stringify(v.array);
    default: return "null";
  }
}

/** One result of a CombinedStatus: its table, or what keeps it from having one. */
function combinedResult(r) {
  if (r.error) {
    // Left out as the object's StatusCollectors would cost too much together.
    const overBudget = r.error.startsWith("not evaluated: ");
    return h("div", {}, h("strong", {}, r.name), " ",
      overBudget
        ? problem("Over the cost budget:", r.error.slice("not evaluated: ".length),
          "See the CombinedStatus's Evaluated condition.")
        : problem("Not evaluated:", r.error, "Fix the StatusCollector; its Valid condition names the field."));
  }
  const errors = (r.rowErrors || []).map((e) =>
    h("li", { class: "bad" }, `${e.wec?.clusterId || ""} ${e.columnName || "filter"}: ${e.error}`));
  return h("div", {}, h("strong", {}, r.name),
    h("table", { class: "result" },
      h("tr", {}, (r.columnNames || []).map((c) => h("th", {}, c))),
      (r.rows || []).map((row) => h("tr", {}, (row.columns || []).map((v) => h("td", {}, cell(v)))))),
    errors.length ? h("ul", { class: "plain" }, errors) : "");
}

/**
 * The APIBindings of export `name` in workspace `path`, as its virtual
 * workspace shows them to the export's owner: in every workspace bound to it,
 * named by logical cluster (kcp never tells an owner its consumers' paths).
 */
export function exportBindings(path, name) {
  return `/services/apiexport/${path}/${encodeURIComponent(name)}/clusters/*/apis/apis.kcp.io/v1alpha1/apibindings`;
}

/**
 * One line per consumer's binding: where, its name, its phase, and how many
 * of the export's `claims` permission claims it accepted.
 */
function bindingsOfExport(items, claims) {
  if (!items.size) return h("span", { class: "empty" }, "no workspace binds it yet");
  const rows = [...items.values()].sort((a, b) => cluster(a).localeCompare(cluster(b)));
  return h("ul", { class: "plain bindings" }, rows.map((b) => {
    const accepted = (b.spec?.permissionClaims || []).filter((c) => c.state === "Accepted").length;
    const ready = condition(b, "Ready");
    const bad = ready && ready.status !== "True";
    return h("li", { class: bad ? "bad" : "", "data-cluster": cluster(b) },
      h("span", { class: "cluster" }, cluster(b)), ` ${b.metadata.name}: `,
      h("span", { class: b.status?.phase === "Bound" ? "ok" : "bad" }, b.status?.phase || "pending"),
      claims ? ` · ${accepted}/${claims} claims accepted` : "",
      bad ? h("span", { class: "why" }, ` ${[ready.reason, ready.message].filter(Boolean).join(": ")}`) : null);
  }));
}

/** The logical cluster an object from a `clusters/*` list lives in. */
function cluster(o) {
  return o.metadata?.annotations?.["kcp.io/cluster"] || "";
}

export const SECTIONS = [
  {
    id: "workspaces", title: "Workspaces", group: "tenancy.kcp.io", version: "v1alpha1", resource: "workspaces",
    always: true,
    columns: ["Name", "Type", "Phase", "Logical cluster"],
    rows: (o, ctx) => [{
      bad: o.status?.phase && o.status.phase !== "Ready",
      cells: [wsLink(`${ctx.path}:${o.metadata.name}`, o.metadata.name), o.spec?.type?.name || "",
        o.status?.phase || "", o.spec?.cluster || ""],
    }],
  },
  {
    id: "edge-synctargets", title: "Clusters (KubeStellar SyncTargets)", group: "edge.kubestellar.io",
    version: "v2alpha1", resource: "synctargets",
    columns: ["Name", "Heartbeat", "Conditions", "Schedulable", "Syncer", "Version", "Mailbox"],
    rows: (o, ctx) => [syncTargetRow(o, ctx, mailbox(o, ctx), "in its mailbox")],
  },
  {
    id: "syncerconfigs", title: "Syncer (KubeStellar SyncerConfig in this mailbox)", group: "edge.kubestellar.io",
    version: "v2alpha1", resource: "syncerconfigs",
    columns: ["Name", "Heartbeat", "Conditions", "Version"],
    rows: (o, ctx) => [{
      bad: (o.status?.conditions || []).some((c) => c.status === "False"),
      cells: [o.metadata.name, heartbeat(o, ctx), conditions(o), version(o, "")],
    }],
  },
  {
    id: "tmc-synctargets", title: "Clusters (kcp TMC SyncTargets)", group: "workload.kcp.io",
    version: "v1alpha1", resource: "synctargets",
    columns: ["Name", "Heartbeat", "Conditions", "Schedulable", "Syncer", "Version", "Syncer view"],
    rows: (o, ctx) => [syncTargetRow(o, ctx,
      h("ul", { class: "plain" }, (o.status?.virtualWorkspaces || []).map((v) => h("li", {}, v.syncerURL || v.url || ""))))],
  },
  {
    id: "edgeplacements", title: "EdgePlacements", group: "edge.kubestellar.io", version: "v2alpha1",
    resource: "edgeplacements",
    columns: ["Name", "Ready", "Refused copies", "Where", "What"],
    rows: (o) => {
      const ready = condition(o, "Ready");
      const bad = ready && ready.status !== "True";
      const state = !ready ? "not yet placed"
        : bad ? problem(ready.reason, ready.message,
          ready.reason === "CopiesRefused"
            ? "Change the objects named so the clusters' API servers accept them; each new version is sent again."
            : "See the condition's message.")
          : h("span", { class: "ok" }, `${ready.reason || "Ready"}`);
      const where = (o.spec?.locationSelectors || []).map((s) => JSON.stringify(s.matchLabels || s)).join(" or ");
      const what = (o.spec?.downsync || []).map((d) =>
        `${(d.resources || []).join(",")}${d.apiGroup ? "." + d.apiGroup : ""}${d.namespaces ? " in " + d.namespaces.join(",") : ""}`).join("; ");
      return [{ bad, cells: [o.metadata.name, state, String(o.status?.refusedCount ?? 0), where, what] }];
    },
  },
  {
    id: "placed", title: "Placed objects (one row per destination cluster)", group: "edge.ferry.dev",
    version: "v1alpha1", resource: "placementsummaries",
    columns: ["Object", "Cluster", "Copied", "Reported status", "Drift", "Mailbox", "Updated"],
    rows: (o, ctx) => {
      const obj = o.object || {};
      const name = `${obj.resource}${obj.group ? "." + obj.group : ""} ${obj.namespace ? obj.namespace + "/" : ""}${obj.name}`;
      const dests = o.destinations || [];
      if (!dests.length) return [{ bad: false, cells: [name, "no destination", "", "", "", "", ""] }];
      return dests.map((d) => {
        const digest = d.statusDigest || "";
        const refused = digest.startsWith(REFUSED);
        const status = refused
          ? problem("Refused by the cluster:", digest.slice(REFUSED.length),
            "Change the object so the cluster's API server accepts it; the syncer sends each new version again.")
          : digest;
        return {
          bad: refused,
          cells: [name, d.cluster, yesNo(d.synced), status, drift(d.drift, ctx), wsLink(d.mailbox), age(d.lastUpdate, ctx.now)],
        };
      });
    },
  },
  {
    id: "combined", title: "Combined status (one per placed object and placement)", group: "control.kubestellar.io",
    version: "v1alpha1", resource: "combinedstatuses",
    columns: ["Object", "Placement", "Summary", "Results"],
    rows: (o) => {
      const failed = (o.results || []).filter((r) => r.error || (r.rowErrors || []).length);
      const ns = o.metadata.namespace ? o.metadata.namespace + "/" : "";
      // kcp TMC Placements' are labelled so; the rest are EdgePlacements'.
      const kind = o.metadata.labels?.["status.ferry.dev/tmc-placement"] ? "Placement (kcp)" : "EdgePlacement";
      return [{
        bad: failed.length > 0,
        cells: [`${o.subject || ""}`.replace("/", " " + ns), `${kind} ${o.placement || ""}`, o.summary || "",
          h("div", {}, (o.results || []).map(combinedResult))],
      }];
    },
  },
  {
    id: "placements", title: "Placements (kcp)", group: "scheduling.kcp.io", version: "v1alpha1", resource: "placements",
    columns: ["Name", "Phase", "Location workspace", "Conditions"],
    rows: (o) => [{
      bad: (o.status?.conditions || []).some((c) => c.status === "False"),
      cells: [o.metadata.name, o.status?.phase || "", o.spec?.locationWorkspace || "", conditions(o)],
    }],
  },
  {
    id: "apibindings", title: "APIBindings", group: "apis.kcp.io", version: "v1alpha1", resource: "apibindings",
    columns: ["Name", "Export", "Phase", "Bound resources", "Conditions"],
    rows: (o) => {
      const ref = o.spec?.reference?.export || {};
      return [{
        bad: (o.status?.conditions || []).some((c) => c.status === "False"),
        cells: [o.metadata.name, `${ref.path ? ref.path + ":" : ""}${ref.name || ""}`, o.status?.phase || "",
          (o.status?.boundResources || []).map((r) => `${r.resource}.${r.group}`).join(", "), conditions(o)],
      }];
    },
  },
  {
    id: "apiexports", title: "APIExports", group: "apis.kcp.io", version: "v1alpha1", resource: "apiexports",
    columns: ["Name", "Schemas", "Permission claims", "Identity", "Conditions", "Bound in (logical clusters)"],
    rows: (o, ctx) => [{
      bad: (o.status?.conditions || []).some((c) => c.status === "False"),
      cells: [o.metadata.name,
        h("ul", { class: "plain" }, (o.spec?.latestResourceSchemas || []).map((s) => h("li", {}, s))),
        h("ul", { class: "plain" }, (o.spec?.permissionClaims || []).map((c) =>
          h("li", {}, `${c.resource}${c.group ? "." + c.group : ""}${c.identityHash ? " (identity " + c.identityHash.slice(0, 8) + "…)" : ""}`))),
        (o.status?.identityHash || "").slice(0, 12), conditions(o),
        ctx.live(`bindings of ${o.metadata.name}`, exportBindings(ctx.path, o.metadata.name),
          (items) => bindingsOfExport(items, (o.spec?.permissionClaims || []).length),
          (e) => e.code === 403
            ? "not shown: reading who binds this export needs get, list and watch on apiexports/content"
            : `not shown: ${e.message}`)],
    }],
  },
  {
    id: "apiresourceschemas", title: "APIResourceSchemas", group: "apis.kcp.io", version: "v1alpha1",
    resource: "apiresourceschemas",
    columns: ["Name", "Group", "Kind", "Scope", "Versions"],
    rows: (o) => [{
      bad: false,
      cells: [o.metadata.name, o.spec?.group || "", o.spec?.names?.kind || "", o.spec?.scope || "",
        (o.spec?.versions || []).map((v) => v.name).join(", ")],
    }],
  },
  {
    id: "publishedresources", title: "PublishedResources (api-syncagent)", group: "syncagent.kcp.io",
    version: "v1alpha1", resource: "publishedresources",
    columns: ["Name", "Source", "Resource in kcp", "Conditions"],
    rows: (o) => {
      const r = o.spec?.resource || {};
      const p = o.status?.resourceSchemaName || o.spec?.projection?.kind || "";
      return [{
        bad: (o.status?.conditions || []).some((c) => c.status === "False"),
        cells: [o.metadata.name, `${r.kind || ""}.${r.apiGroup || ""}/${r.version || ""}`, p, conditions(o)],
      }];
    },
  },
];
