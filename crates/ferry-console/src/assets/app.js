// The console's pages: sign-in, the workspace tree, and one page per
// workspace whose sections follow the API's watches. The location's fragment
// says which page (`#/ws/root:org`); the token never appears in it.

import { ApiError, collection, follow, get, signIn, signOut, start, token, validWorkspace } from "./api.js";
import { SECTIONS, h, wsLink } from "./views.js";

const WORKSPACES = { group: "tenancy.kcp.io", version: "v1alpha1", resource: "workspaces" };
/** How deep the tree reads below the start workspace. */
const TREE_DEPTH = 3;

const main = document.getElementById("main");
const tree = document.getElementById("tree");
const who = document.getElementById("who");
const signOutButton = document.getElementById("sign-out");

/** Workspace paths the tree has seen, with their logical clusters. */
const known = new Map();
/** Stops the current page's watches when the user moves on. */
let page = new AbortController();

signOutButton.addEventListener("click", () => {
  signOut();
  location.hash = "#/";
  route();
});
window.addEventListener("hashchange", route);
route();

function route() {
  page.abort();
  page = new AbortController();
  const signedIn = Boolean(token());
  signOutButton.hidden = !signedIn;
  who.textContent = signedIn ? `signed in · tree from ${start()}` : "";
  const match = location.hash.match(/^#\/ws\/(.+)$/);
  if (!signedIn) return showSignIn();
  if (!tree.dataset.start || tree.dataset.start !== start()) showTree(start());
  const path = match ? decodeURIComponent(match[1]) : start();
  if (!validWorkspace(path)) {
    main.replaceChildren(h("p", { class: "problem" }, `${path} is not a workspace path (like root:org).`));
    return;
  }
  showWorkspace(path, page.signal);
}

function showSignIn() {
  tree.replaceChildren();
  delete tree.dataset.start;
  const bearer = h("input", { id: "token", type: "password", autocomplete: "off", required: "", size: 40 });
  const workspace = h("input", { id: "workspace", type: "text", value: "root", required: "", size: 40 });
  const error = h("p", { class: "problem", id: "sign-in-error", hidden: "" });
  const form = h("form", { id: "sign-in" },
    h("h1", {}, "Sign in"),
    h("p", {}, "Use the bearer token kubectl uses for this hub. It stays in this browser tab and is sent only to the hub's API; the hub shows you exactly what it would show kubectl."),
    h("label", { for: "token" }, "Token"), bearer,
    h("label", { for: "workspace" }, "Start at workspace"), workspace,
    h("p", { class: "hint" }, "The tree shows this workspace and the workspaces below it that you may list."),
    error,
    h("button", { type: "submit", id: "sign-in-button" }, "Sign in"));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const ws = workspace.value.trim();
    if (!validWorkspace(ws)) {
      error.textContent = `${ws} is not a workspace path; write it like root or root:org.`;
      error.hidden = false;
      return;
    }
    signIn(bearer.value.trim(), ws);
    location.hash = `#/ws/${ws}`;
    route();
  });
  main.replaceChildren(form);
}

/** The tree from `root`: each workspace the user may list the children of. */
async function showTree(root) {
  tree.dataset.start = root;
  known.clear();
  const list = h("ul", { class: "tree" });
  tree.replaceChildren(h("h2", {}, "Workspaces"), list);
  list.append(await treeNode(root, TREE_DEPTH, true));
}

async function treeNode(path, depth, isRoot) {
  const item = h("li", {}, wsLink(path, isRoot ? path : path.split(":").pop()));
  if (depth === 0) return item;
  try {
    const children = await get(collection(path, WORKSPACES));
    const names = (children.items || []).map((w) => {
      known.set(`${path}:${w.metadata.name}`, w.spec?.cluster || "");
      return `${path}:${w.metadata.name}`;
    }).sort();
    if (names.length) {
      item.append(h("ul", {}, await Promise.all(names.map((n) => treeNode(n, depth - 1, false)))));
    }
  } catch (e) {
    if (isRoot) item.append(h("p", { class: "problem", id: "tree-error" }, denied(path, e)));
  }
  return item;
}

/** What the user reads when the hub refuses them something. */
function denied(path, e) {
  if (e instanceof ApiError && e.code === 401) {
    return "The hub did not accept this token. Sign out and sign in with a token kubectl can use.";
  }
  if (e instanceof ApiError && e.code === 403) {
    return `You may not list the workspaces in ${path}. Sign in again starting from a workspace you belong to, e.g. root:<your workspace>. (${e.message})`;
  }
  return `Reading ${path}: ${e.message}`;
}

/** The page of workspace `path`: a live section for each kind it serves. */
async function showWorkspace(path, signal) {
  const crumbs = path.split(":").map((_, i, parts) => parts.slice(0, i + 1).join(":"));
  const header = h("h1", {}, crumbs.flatMap((c, i) => [i ? ":" : "", wsLink(c, c.split(":").pop())]));
  const body = h("div", { id: "sections" }, h("p", {}, "Reading…"));
  const hidden = h("p", { class: "hint", id: "not-shown", hidden: "" });
  main.replaceChildren(header, body, hidden);
  let groups;
  try {
    const discovery = await get(`/clusters/${path}/apis`, signal);
    groups = new Set((discovery.groups || []).map((g) => g.name));
    if (signal.aborted) return;
  } catch (e) {
    if (signal.aborted) return;
    body.replaceChildren(h("p", { class: "problem", id: "workspace-error" },
      e instanceof ApiError && e.code === 403
        ? `You may not read workspace ${path}. Ask its owner for access, or sign in with another token. (${e.message})`
        : denied(path, e)));
    return;
  }
  body.replaceChildren();
  const notShown = [];
  const live = liveCells(signal);
  const ctx = () => ({ path, now: Date.now(), known: [...known.keys()], cluster: known.get(path) || "", live });
  for (const s of SECTIONS.filter((s) => groups.has(s.group))) {
    const tbody = h("tbody", {}, h("tr", {}, h("td", { colspan: s.columns.length }, "Reading…")));
    const section = h("section", { id: s.id, "data-resource": `${s.resource}.${s.group}` },
      h("h2", {}, s.title),
      h("table", {}, h("thead", {}, h("tr", {}, s.columns.map((c) => h("th", {}, c)))), tbody));
    body.append(section);
    follow(collection(path, s), signal, (items) => {
      const rows = [];
      for (const o of [...items.values()].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name))) {
        for (const r of s.rows(o, ctx())) {
          rows.push(h("tr", { class: r.bad ? "bad-row" : null, "data-name": o.metadata.name },
            r.cells.map((c) => h("td", {}, c))));
        }
      }
      if (!rows.length) rows.push(h("tr", {}, h("td", { colspan: s.columns.length, class: "empty" }, "none")));
      tbody.replaceChildren(...rows);
      // A kind with no objects here stays out of the way until one arrives.
      section.hidden = !items.size && !s.always;
    }, (e) => {
      section.remove();
      if (e.code === 404) return;
      // What the token may not list is left out, and named once below.
      notShown.push(`${s.resource}.${s.group}`);
      hidden.textContent = e.code === 403
        ? `Not shown, as your token may not list them here: ${notShown.join(", ")}.`
        : `Not shown: ${notShown.join(", ")} (${e.message}).`;
      hidden.hidden = false;
    });
  }
}

/**
 * A cell that follows a collection of its own (an export's bindings, in its
 * virtual workspace) while the page is open: `live(key, url, render, denied)`
 * returns the same element for the same key on every redraw of its row, and
 * its watch runs once.
 */
function liveCells(signal) {
  const cells = new Map();
  return (key, url, render, denied) => {
    let cell = cells.get(key);
    if (!cell) {
      cell = h("div", { class: "live", "data-live": key }, "Reading…");
      cells.set(key, cell);
      follow(url, signal, (items) => cell.replaceChildren(render(items)),
        (e) => cell.replaceChildren(h("span", { class: "empty" }, denied(e))));
    }
    return cell;
  };
}
