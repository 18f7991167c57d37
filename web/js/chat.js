// The chat panel's thread: a new chat or an open thread, its messages a page at a time
// (older ones above), the nudge to a new thread, and the thread's own actions.
import { config } from "../config.js";
import { attempt, showNote } from "./alerts.js";
import { enc, get, send } from "./api.js";
import { loadContext } from "./context.js";
import { asked, confirmed } from "./dialogs.js";
import { $, el } from "./dom.js";
import { loadMemory } from "./memory.js";
import { renderPresetPicker } from "./presets.js";
import { PAGE, projectPath, state, threadPath } from "./state.js";
import { loadThreads, renderThreads } from "./threads.js";
import { go } from "./views.js";

export function newChat(prefill = "") {
  const left = state.conversation; // its thread entries leave the Memory panel with it
  renderNewChatHead();
  $("message-list").replaceChildren();
  $("composer-input").value = prefill;
  renderPresetPicker();
  renderThreads();
  go("chat");
  if (!$("composer-input").disabled) $("composer-input").focus();
  if (left) {
    loadMemory();
    if (!$("context-panel").hidden) loadContext();
  }
}

export async function openThread(id) {
  state.views += 1;
  const view = state.views;
  const detail = await attempt("open the conversation", () =>
    get(projectPath(`/conversations/${enc(id)}?limit=${PAGE}`)),
  );
  // Another thread, a new chat or another project was opened meanwhile: that one stays.
  if (!detail || view !== state.views) return;
  state.conversation = detail.conversation;
  state.olderCursor = detail.nextCursor;
  renderThreadHead();
  const list = $("message-list");
  list.replaceChildren(...messageNodes(detail.messages));
  markCleared();
  $("older").hidden = !state.olderCursor;
  renderThreads();
  maybeNudge(state.conversation.turnCount, state.threshold);
  go("chat");
  scrollToEnd();
  loadMemory();
  if (document.body.dataset.view === "context" || !$("context-panel").hidden) loadContext();
}

/** The head of a chat with no thread yet; what the page shows stays. */
export function renderNewChatHead() {
  state.views += 1;
  state.conversation = null;
  state.olderCursor = null;
  $("chat-title").textContent = "New chat";
  $("thread-actions").hidden = true;
  $("older").hidden = true;
  $("nudge").hidden = true;
}

export function renderThreadHead() {
  const thread = state.conversation;
  renderPresetPicker();
  $("chat-title").textContent = thread.title || "Untitled";
  $("thread-actions").hidden = false;
  $("archive-thread").textContent = thread.archived ? "Restore" : "Archive";
}

async function loadOlder() {
  const view = state.views;
  if (!state.olderCursor || state.loadingOlder === view || !state.conversation) return;
  state.loadingOlder = view;
  const box = $("messages");
  const page = await attempt("load older messages", () =>
    get(threadPath(`?limit=${PAGE}&cursor=${enc(state.olderCursor)}`)),
  );
  if (state.loadingOlder === view) state.loadingOlder = null;
  // The thread it was asked for is no longer the one on screen: its page is dropped.
  if (!page || view !== state.views) return;
  const before = box.scrollHeight;
  state.olderCursor = page.nextCursor;
  $("message-list").prepend(...messageNodes(page.messages));
  markCleared();
  $("older").hidden = !state.olderCursor;
  box.scrollTop += box.scrollHeight - before;
}

export function scrollToEnd() {
  const box = $("messages");
  box.scrollTop = box.scrollHeight;
}

// ---------- messages ----------

export function chip(outcome, key) {
  return el("span", { class: `chip ${outcome}`, dataset: { outcome } }, `${outcome}: ${key ?? "?"}`);
}

function toolChips(message) {
  return (message.toolCalls || []).map((call) => {
    const result = (message.toolResults || []).find((found) => found.toolCallId === call.id);
    const key = call.input && call.input.key;
    const outcome = result && result.isError ? "refused" : call.name === "forget_preference" ? "forgotten" : "saved";
    return chip(outcome, key);
  });
}

function messageNodes(messages) {
  return messages.map((message) => {
    if (message.role === "tool") {
      return el("li", { class: "message tool", dataset: { id: message.id, role: "tool" } }, el("div", { class: "chips" }, toolChips(message)));
    }
    const failed = message.status === "error";
    return el(
      "li",
      { class: `message ${message.role}${failed ? " failed" : ""}`, dataset: { id: message.id, role: message.role, status: message.status } },
      el("span", { class: "who" }, message.role === "user" ? "You" : "Assistant"),
      el("div", { class: "text", dir: "auto" }, message.content),
      failed ? el("p", { class: "error-words" }, `Failed: ${message.error || "the model did not answer"}`) : null,
    );
  });
}

function markCleared() {
  if (!state.conversation) return;
  const after = state.conversation.clearedAfter;
  document.querySelectorAll(".marker").forEach((node) => node.remove());
  if (!after) return;
  // The marker is a time-ordered id like the messages': it goes after the last one older.
  const saved = [...document.querySelectorAll("#message-list .message[data-id]")];
  const older = saved.filter((node) => node.dataset.id <= after);
  if (older.length) older[older.length - 1].after(clearedMarker());
  else if (saved.length && !state.olderCursor) $("message-list").prepend(clearedMarker());
}

function clearedMarker() {
  return el("li", { class: "marker", role: "separator" }, "Context cleared here: the model no longer sees what is above.");
}

// ---------- the nudge ----------

export function maybeNudge(turnCount, threshold) {
  const thread = state.conversation;
  if (!thread || turnCount <= threshold || localStorage.getItem(`recall.nudge.${thread.id}`)) {
    $("nudge").hidden = true;
    return;
  }
  $("nudge-text").textContent =
    `This thread has ${turnCount} turns, past ${threshold}: its oldest turns no longer reach the model. ` +
    "A new thread starts with a clean window and this one's summary.";
  $("nudge").hidden = false;
}

async function newThreadWithSummary() {
  const thread = state.conversation;
  const preview = await attempt("read the thread's summary", () => get(threadPath("/context")));
  if (!preview) return;
  const summary = preview.summary ? ` Summary so far: ${preview.summary}` : "";
  newChat(`Continuing from "${thread.title}".${summary}`);
}

// ---------- thread actions ----------

async function renameThread() {
  const title = await asked("New title", config.titleMaxChars, state.conversation.title);
  if (!title) return;
  const changed = await attempt("rename the conversation", () => send("PATCH", threadPath(), { title }));
  if (changed) {
    state.conversation = { ...state.conversation, ...changed };
    renderThreadHead();
    loadThreads();
  }
}

async function toggleArchive() {
  const archived = !state.conversation.archived;
  const changed = await attempt(archived ? "archive the conversation" : "restore the conversation", () =>
    send("PATCH", threadPath(), { archived }),
  );
  if (!changed) return;
  state.conversation = { ...state.conversation, ...changed };
  renderThreadHead();
  showNote(archived ? `"${changed.title}" archived: find it under Archived.` : `"${changed.title}" restored.`);
  loadThreads();
}

async function deleteThread() {
  const title = state.conversation.title;
  if (!(await confirmed(`Delete "${title}" and all its messages? This cannot be undone.`, "Delete"))) return;
  const done = await attempt("delete the conversation", () => send("DELETE", threadPath()));
  if (done === undefined) return;
  showNote(`"${title}" deleted.`);
  newChat();
  loadThreads();
}

async function clearContext() {
  const cleared = await attempt("clear the context", () => send("POST", threadPath("/clear-context")));
  if (!cleared) return;
  state.conversation = { ...state.conversation, clearedAfter: cleared.clearedAfter };
  document.querySelectorAll(".marker").forEach((node) => node.remove());
  $("message-list").append(clearedMarker());
  scrollToEnd();
  if (!$("context-panel").hidden) loadContext();
}

export function wireChat() {
  $("new-chat").addEventListener("click", () => newChat());
  $("older").addEventListener("click", loadOlder);
  $("messages").addEventListener("scroll", () => {
    if ($("messages").scrollTop < 80) loadOlder();
  });
  $("rename-thread").addEventListener("click", renameThread);
  $("archive-thread").addEventListener("click", toggleArchive);
  $("delete-thread").addEventListener("click", deleteThread);
  $("clear-context").addEventListener("click", clearContext);
  $("nudge-dismiss").addEventListener("click", () => {
    localStorage.setItem(`recall.nudge.${state.conversation.id}`, "dismissed");
    $("nudge").hidden = true;
  });
  $("nudge-new").addEventListener("click", newThreadWithSummary);
}
