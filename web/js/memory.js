// The Memory panel: the project's entries and the open thread's, by category; each edited,
// forgotten or read back through its history, and new ones added by hand.
import { config } from "../config.js";
import { attempt, showError } from "./alerts.js";
import { enc, get, send } from "./api.js";
import { confirmed } from "./dialogs.js";
import { $, el, when } from "./dom.js";
import { canEdit, openView, projectPath, state } from "./state.js";

const CATEGORIES = ["brand", "preferences", "forbidden", "context", "history"];

export async function loadMemory() {
  if (!state.project) {
    $("memory-list").replaceChildren();
    $("memory-count").textContent = "";
    return;
  }
  const view = openView();
  const query = state.conversation ? `?conversationId=${enc(state.conversation.id)}` : "";
  const page = await attempt("load memory", () => get(projectPath(`/memories${query}`)));
  if (!page || openView() !== view) return false;
  state.memories = page.memories;
  renderMemory();
  return true;
}

/** After the list is drawn again, focus goes back to the entry, or to the panel's heading
 * when it is gone, never to the page's body. */
function focusEntry(entry) {
  const found = document.querySelector(`#memory-list .entry[data-key="${CSS.escape(entry.key)}"][data-scope="${entry.scope}"] button`);
  (found || $("memory-title")).focus();
}

function renderMemory() {
  const persistent = state.memories.filter((entry) => entry.scope === "persistent").length;
  $("memory-count").textContent = `${persistent} of ${config.memoryCap}`;
  const groups = CATEGORIES.map((category) => {
    const entries = state.memories.filter((entry) => entry.category === category);
    if (entries.length === 0) return null;
    return el("section", { class: "category", "aria-label": category }, el("h3", {}, category), entries.map(memoryNode));
  }).filter(Boolean);
  $("memory-list").replaceChildren(
    ...(groups.length ? groups : [el("p", { class: "empty" }, "No memory yet. Say a rule in chat (\"always keep the header dark\") or add one below.")]),
  );
}

function memoryNode(entry) {
  const editable = canEdit();
  const node = el(
    "article",
    { class: "entry", dataset: { key: entry.key, scope: entry.scope } },
    el(
      "header",
      {},
      el("strong", { class: "key" }, entry.key),
      el("span", { class: `badge scope-${entry.scope}` }, entry.scope === "thread" ? "this thread" : "project"),
      el("span", { class: `badge source-${entry.source}` }, entry.source),
    ),
    el("p", { class: "value", dir: "auto" }, entry.value),
    el(
      "p",
      { class: "meta" },
      `changed ${when(entry.updatedAt)}`,
      entry.expiresAt ? ` · expires ${when(entry.expiresAt)}` : " · no expiry",
    ),
    el(
      "div",
      { class: "row" },
      el("button", { type: "button", disabled: !editable, onclick: () => editMemory(entry, node) }, "Edit"),
      el("button", { type: "button", onclick: () => showHistory(entry, node) }, "History"),
      el("button", { type: "button", class: "danger", disabled: !editable, onclick: () => forgetMemory(entry) }, "Forget"),
    ),
  );
  return node;
}

function memoryBody(entry, value, category, expires) {
  const body = { value, category, scope: entry.scope };
  if (entry.scope === "thread") body.conversationId = entry.conversationId;
  if (expires) body.expiresAt = new Date(expires).toISOString();
  return body;
}

function scopeQuery(entry) {
  return entry.scope === "thread" && entry.conversationId ? `?conversationId=${enc(entry.conversationId)}` : "";
}

function editMemory(entry, node) {
  // A project entry and a thread entry may share a key: the ids name the scope and thread too.
  const id = `edit-${entry.scope}-${entry.scope === "thread" ? entry.conversationId : "project"}-${entry.key}`;
  const value = el("textarea", { id, rows: "2", required: true, dir: "auto" });
  value.value = entry.value;
  const category = el("select", { id: `${id}-category` }, CATEGORIES.map((name) => el("option", { value: name, selected: name === entry.category }, name)));
  const form = el(
    "form",
    { class: "stack edit" },
    el("label", { for: id }, "Value"),
    value,
    el("label", { for: `${id}-category` }, "Category"),
    category,
    el("div", { class: "row" }, el("button", { type: "submit", class: "primary" }, "Save"), el("button", { type: "button", onclick: () => { renderMemory(); focusEntry(entry); } }, "Cancel")),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const saved = await attempt("save the entry", () =>
      send("PUT", projectPath(`/memories/${enc(entry.key)}`), memoryBody(entry, value.value.trim(), category.value, entry.expiresAt)),
    );
    if (saved && (await loadMemory())) focusEntry(entry);
  });
  node.querySelector(".value").replaceWith(form);
  value.focus();
}

async function forgetMemory(entry) {
  if (!(await confirmed(`Forget "${entry.key}"? The model will no longer see it.`, "Forget"))) return;
  const done = await attempt("forget the entry", () => send("DELETE", projectPath(`/memories/${enc(entry.key)}${scopeQuery(entry)}`)));
  if (done !== undefined && (await loadMemory())) focusEntry(entry);
}

async function showHistory(entry, node) {
  const existing = node.querySelector(".history-box");
  if (existing) {
    existing.remove();
    return;
  }
  const path = projectPath(`/memories/${enc(entry.key)}/history${scopeQuery(entry)}`);
  const page = (cursor) => {
    const more = cursor ? `${path.includes("?") ? "&" : "?"}cursor=${enc(cursor)}` : "";
    return attempt("read the entry's history", () => get(`${path}${more}`));
  };
  const found = await page(null);
  if (!found) return;
  const list = el("ol", { class: "history", "aria-label": `History of ${entry.key}` }, found.history.map(historyItem));
  // The API gives the latest changes first, a page at a time: earlier ones go above.
  let cursor = found.nextCursor;
  const earlier = el("button", { type: "button", class: "earlier" }, "Earlier changes");
  earlier.hidden = !cursor;
  earlier.addEventListener("click", async () => {
    const older = await page(cursor);
    if (!older) return;
    list.prepend(...older.history.map(historyItem));
    cursor = older.nextCursor;
    earlier.hidden = !cursor;
  });
  node.append(el("div", { class: "history-box" }, earlier, list));
}

function historyItem(record) {
  return el(
    "li",
    { dataset: { action: record.action } },
    el("strong", {}, record.action),
    ` ${when(record.at)}`,
    record.source ? ` · ${record.source}` : "",
    record.reason ? ` · ${record.reason}` : "",
    record.oldValue ? el("div", { class: "old" }, "was: ", el("bdi", {}, record.oldValue)) : null,
    record.newValue ? el("div", { class: "new" }, "now: ", el("bdi", {}, record.newValue)) : null,
  );
}

async function addMemory(event) {
  event.preventDefault();
  const scope = $("memory-scope").value;
  if (scope === "thread" && !state.conversation) {
    showError(new Error("Open a thread first: a thread entry belongs to one thread."), "add the entry");
    return;
  }
  const entry = { scope, conversationId: state.conversation ? state.conversation.id : null };
  const key = $("memory-key").value.trim();
  const saved = await attempt("add the entry", () =>
    send("PUT", projectPath(`/memories/${enc(key)}`), memoryBody(entry, $("memory-value").value.trim(), $("memory-category").value, $("memory-expires").value)),
  );
  if (!saved) return;
  $("memory-form").reset();
  loadMemory();
}

export function wireMemory() {
  $("refresh-memory").addEventListener("click", loadMemory);
  $("memory-form").addEventListener("submit", addMemory);
  $("memory-category").replaceChildren(...CATEGORIES.map((name) => el("option", { value: name }, name)));
}
