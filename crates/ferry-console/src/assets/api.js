// Reads of the hub's API with the signed-in user's own bearer token. The
// token lives in sessionStorage (this tab only, gone when it closes) and is
// sent in the Authorization header, never in a URL.

const TOKEN = "ferry-console-token";
const START = "ferry-console-start";

export function token() {
  return sessionStorage.getItem(TOKEN);
}

/** The workspace the user started from (the root of the tree). */
export function start() {
  return sessionStorage.getItem(START) || "root";
}

export function signIn(bearer, workspace) {
  sessionStorage.setItem(TOKEN, bearer);
  sessionStorage.setItem(START, workspace);
}

export function signOut() {
  sessionStorage.removeItem(TOKEN);
  sessionStorage.removeItem(START);
}

/** A workspace path as kcp spells it: `root`, `root:org:team`. */
export function validWorkspace(path) {
  return /^[a-z0-9]([a-z0-9-]*[a-z0-9])?(:[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/.test(path);
}

/** An answer of the API other than success, with the API's own message. */
export class ApiError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

function headers() {
  return { Authorization: `Bearer ${token()}`, Accept: "application/json" };
}

/** The collection URL of `resource` in `workspace`. */
export function collection(workspace, { group, version, resource }) {
  const base = group ? `/apis/${group}/${version}` : `/api/${version}`;
  return `/clusters/${workspace}${base}/${resource}`;
}

/** GET `url` as JSON; throws ApiError with the API's message on failure. */
export async function get(url, signal) {
  const r = await fetch(url, { headers: headers(), signal, cache: "no-store" });
  const body = await r.json().catch(() => ({}));
  if (!r.ok) {
    throw new ApiError(r.status, body.message || `${r.status} ${r.statusText}`);
  }
  return body;
}

/** An object's key; a `clusters/*` list has the same name in many workspaces. */
function key(o) {
  const cluster = o.metadata.annotations?.["kcp.io/cluster"] || "";
  return `${cluster}|${o.metadata.namespace || ""}/${o.metadata.name}`;
}

function pause(ms, signal) {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => { clearTimeout(t); resolve(); }, { once: true });
  });
}

/**
 * Follow the collection at `url`: list it, then consume its watch stream
 * (`?watch=1`, one JSON event per line) and call `onChange(items)` with the
 * current objects after the list and after every event. When the stream
 * ends or the hub says the resourceVersion is gone, list again. Stops when
 * `signal` aborts, or on 401/403/404, which go to `onError`.
 */
export async function follow(url, signal, onChange, onError) {
  const items = new Map();
  while (!signal.aborted) {
    try {
      const list = await get(url, signal);
      items.clear();
      for (const o of list.items || []) items.set(key(o), o);
      onChange(items);
      const rv = encodeURIComponent(list.metadata.resourceVersion || "");
      const r = await fetch(`${url}?watch=1&allowWatchBookmarks=true&resourceVersion=${rv}`, {
        headers: headers(), signal, cache: "no-store",
      });
      if (!r.ok) throw new ApiError(r.status, `watching ${url}: ${r.status}`);
      const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      let relist = false;
      while (!relist) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let nl;
        while ((nl = buffer.indexOf("\n")) >= 0) {
          const line = buffer.slice(0, nl).trim();
          buffer = buffer.slice(nl + 1);
          if (!line) continue;
          const event = JSON.parse(line);
          if (event.type === "ERROR") { relist = true; break; }
          if (event.type === "BOOKMARK") continue;
          if (event.type === "DELETED") items.delete(key(event.object));
          else items.set(key(event.object), event.object);
          onChange(items);
        }
      }
      if (relist) reader.cancel().catch(() => {});
    } catch (e) {
      if (signal.aborted) return;
      if (e instanceof ApiError && [401, 403, 404].includes(e.code)) {
        onError(e);
        return;
      }
    }
    // The stream closed (the hub's watch timeout, a restart): list again
    // after a breath, so a hub that is down is not hammered.
    await pause(1000, signal);
  }
}
