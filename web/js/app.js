// The console: projects, threads, the chat, memory, the model's view and usage, over the API.
import { config } from "../config.js";
import { attempt, refused, showError, showNote } from "./alerts.js";
import { ApiError, enc, get, request, send } from "./api.js";
import { $, el, when } from "./dom.js";
import * as session from "./session.js";
import { Turns } from "./turns.js";
import { budgetRefusal, loadUsage, wireUsage } from "./usage.js";

const CATEGORIES = ["brand", "preferences", "forbidden", "context", "history"];
const PERIODS = [
  ["today", "Today", ["today"]],
  ["yesterday", "Yesterday", ["yesterday"]],
  ["week", "This week", ["previous7Days"]],
  ["earlier", "Earlier", ["previous30Days", "older", null, undefined]],
];
const PAGE = 50;
const THREADS_PAGE_MAX = 100; // the API's largest conversations page
const IMPORT_POLL_FAILURES = 5; // checks of an import's progress failed in a row before the page gives up
const PROJECT_NAME_MAX = 120;
const SIDE_VIEWS = ["memory", "context", "project"];
const REASONS = {
  viewer: "You are a viewer of this project: you can read everything here but not change it.",
  notOwner: "Only the project's owners manage its members.",
};

const state = {
  user: null,
  projects: [],
  project: null,
  threads: [],
  threadsCursor: null,
  threadsAsked: 0,
  archived: false,
  conversation: null,
  olderCursor: null,
  loadingOlder: null, // the view whose older page is on its way
  views: 0, // counts the threads (and new chats) opened: an answer for an earlier one is dropped
  memories: [],
  presets: [],
  editingPreset: null,
  threshold: config.nudgeThresholdTurns,
  sending: false,
  signedIn: false, // the first project list answered: a 401 from now on means the session ended
};

const ENDED = "recall.ended";
// What a person was writing, and where, when their session ended: given back to them alone.
const RESUME = "recall.resume";

const turns = new Turns((how) => {
  $("transport").textContent =
    how === "socket"
      ? "Replies stream over the WebSocket API."
      : how === "refused"
        ? `Streaming off: ${refusedSocketWords()} Replies arrive whole over HTTP.`
        : "Streaming unavailable: replies arrive whole over HTTP.";
});

function refusedSocketWords() {
  const why =
    session.refusedWebSocketReason === "cleartext"
      ? "which is not encrypted (ws:) while the API is https"
      : "which is not on the API's host";
  return `this page's link names the WebSocket ${session.refusedWebSocketUrl}, ${why}, so it is not used.`;
}

// ---------- dialogs ----------

function confirmed(text, action = "Confirm") {
  const dialog = $("confirm");
  $("confirm-text").textContent = text;
  $("confirm-ok").textContent = action;
  dialog.returnValue = "";
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
  });
}

function asked(label, maxLength, value = "") {
  const dialog = $("ask");
  $("ask-label").textContent = label;
  $("ask-input").maxLength = maxLength; // typed past the API's limit, text would meet a 422
  $("ask-input").value = value;
  dialog.returnValue = "";
  dialog.showModal();
  $("ask-input").select();
  return new Promise((resolve) => {
    dialog.addEventListener(
      "close",
      () => resolve(dialog.returnValue === "ok" && $("ask-input").value.trim() ? $("ask-input").value.trim() : null),
      { once: true },
    );
  });
}

function newKey() {
  if (crypto.randomUUID) return crypto.randomUUID();
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
}

const canEdit = () => state.project && state.project.role !== "viewer";
const isOwner = () => state.project && state.project.role === "owner";
const projectPath = (suffix = "") => `/projects/${enc(state.project.id)}${suffix}`;
const threadPath = (suffix = "") => projectPath(`/conversations/${enc(state.conversation.id)}${suffix}`);
/** The project and thread open now: an answer asked for another is dropped. */
const openView = () => `${state.project ? state.project.id : ""}/${state.conversation ? state.conversation.id : ""}`;

// ---------- views (phone: one at a time; desktop: three columns) ----------

function go(view) {
  document.body.dataset.view = view;
  for (const button of document.querySelectorAll("#phone-tabs [data-go]")) {
    button.setAttribute("aria-current", String(button.dataset.go === view));
  }
  if (SIDE_VIEWS.includes(view)) {
    for (const name of SIDE_VIEWS) {
      $(`${name}-panel`).hidden = name !== view;
      $(`tab-${name}`).setAttribute("aria-selected", String(name === view));
    }
    if (view === "context") loadContext();
    if (view === "project") loadProjectSettings();
  }
}

// ---------- sign-in ----------

function renderSignIn() {
  $("console").hidden = true;
  $("phone-tabs").hidden = true;
  $("project-picker").hidden = true;
  $("who").hidden = true;
  $("sign-in").hidden = false;
  $("api-origin").textContent = session.apiBase;
  $("ws-origin").textContent = session.webSocketElsewhere ? ` and its WebSocket at ${session.webSocketElsewhere}` : "";
  $("ws-refused").hidden = !session.refusedWebSocketUrl;
  if (session.refusedWebSocketUrl) $("ws-refused").textContent = `Streaming off: ${refusedSocketWords()}`;
  $("sign-in-local").hidden = !session.isLocal;
  $("session-ended").hidden = !sessionStorage.getItem(ENDED);
  sessionStorage.removeItem(ENDED);
  document.body.dataset.ready = "sign-in";
  const users = $("demo-users");
  users.replaceChildren(
    ...session.DEMO_USERS.map((user) =>
      el("button", { type: "button", class: "primary", onclick: () => signInAs(session.localToken(user)) }, `Sign in as ${user}`),
    ),
  );
}

function signInAs(token) {
  const claims = session.claimsOf(token);
  if (!claims || typeof claims.sub !== "string") {
    showError(new Error("That is not a JWT with a sub claim."), "sign in");
    return;
  }
  session.signIn(token);
  $("session-ended").hidden = true;
  start();
}

/** A 401 once signed in: the token expired or was revoked. Back to sign-in, which says so;
 * the page loads afresh, so nothing of the session (a socket, a timer) outlives it. */
function sessionEnded() {
  if (!state.signedIn || !session.token()) return;
  // Kept in localStorage, beside the project the page remembers, with whose it is: only
  // the same person signing in again gets the draft and the thread back.
  localStorage.setItem(
    RESUME,
    JSON.stringify({
      user: state.user,
      projectId: state.project ? state.project.id : null,
      conversationId: state.conversation ? state.conversation.id : null,
      draft: $("composer-input").value,
    }),
  );
  session.signOut();
  sessionStorage.setItem(ENDED, "1");
  location.reload();
}

// ---------- projects ----------

async function loadProjects(selectId) {
  const projects = [];
  let cursor = null;
  do {
    const page = await get(`/projects?limit=100${cursor ? `&cursor=${enc(cursor)}` : ""}`);
    projects.push(...page.projects);
    cursor = page.nextCursor;
  } while (cursor);
  state.projects = projects;
  const select = $("project-select");
  select.replaceChildren(
    ...projects.map((project) => el("option", { value: project.id }, projectLabel(project))),
  );
  if (projects.length === 0) {
    select.append(el("option", { value: "" }, "No project yet"));
    state.project = null;
    leaveProject();
    loadThreads();
    loadMemory();
    return;
  }
  const wanted = selectId || localStorage.getItem(`recall.project.${state.user}`);
  const chosen = projects.find((project) => project.id === wanted) || projects[0];
  select.value = chosen.id;
  await openProject(chosen);
}

/** How the project picker names a project: its name and the person's role in it. */
function projectLabel(project) {
  return `${project.name} (${project.role})`;
}

/** The picker's entry for a project whose name or role changed in place. */
function relabel(project) {
  const option = [...$("project-select").options].find((one) => one.value === project.id);
  if (option) option.textContent = projectLabel(project);
}

async function openProject(project) {
  state.project = project;
  localStorage.setItem(`recall.project.${state.user}`, project.id);
  leaveProject();
  const loading = (words) => el("p", { class: "empty", "aria-busy": "true" }, words);
  $("thread-list").replaceChildren(loading("Loading conversations…"));
  $("memory-list").replaceChildren(loading("Loading memory…"));
  // The old project's members left the screen with it: an open Project panel reads the new one's.
  if (!$("project-panel").hidden) loadProjectSettings();
  await Promise.all([loadThreads(), loadMemory(), loadPresets()]);
}

/** Nothing of the project left stays on screen or clickable: another opens, or none is left. */
function leaveProject() {
  state.conversation = null;
  state.archived = false;
  $("show-archived").checked = false;
  state.threads = [];
  state.threadsCursor = null;
  state.memories = [];
  state.presets = [];
  closePresetForm();
  renderProject();
  newChat();
  $("memory-count").textContent = "";
  $("preset-list").replaceChildren();
  $("member-list").replaceChildren();
  $("import-progress").textContent = "";
  loadContext();
}

/** After a refusal, the open project's role as the API has it now: the controls follow a
 * demotion (or a promotion) without a reload, and a project the person left drops out. */
async function refreshRole() {
  const project = state.project;
  if (!project) return;
  let fresh;
  try {
    fresh = await get(`/projects/${enc(project.id)}`);
  } catch (error) {
    if (error instanceof ApiError && error.status === 403 && state.project === project) {
      await attempt("load your projects", () => loadProjects());
    }
    return;
  }
  if (state.project !== project || fresh.role === project.role) return;
  project.role = fresh.role;
  relabel(project);
  renderProject();
  if (state.conversation) renderThreadHead();
}

function setReason(node, reason) {
  node.hidden = !reason;
  node.textContent = reason || "";
}

function renderProject() {
  const project = state.project;
  $("who-role").textContent = project ? project.role : "";
  const viewer = project && !canEdit();
  const noProject = !project;
  for (const id of ["new-chat", "composer-input", "send", "rename-thread", "archive-thread", "clear-context", "delete-thread", "refresh-memory"]) {
    $(id).disabled = noProject || (viewer && id !== "refresh-memory");
  }
  for (const control of $("memory-form").elements) control.disabled = noProject || viewer;
  setReason($("composer-reason"), noProject ? "Create a project to start chatting." : viewer ? REASONS.viewer : "");
  setReason(document.querySelector('[data-reason="edit"]'), viewer ? REASONS.viewer : "");
  const owner = isOwner();
  for (const control of $("rename-project").elements) control.disabled = noProject || viewer;
  for (const control of $("add-member").elements) control.disabled = !owner;
  for (const control of $("preset-form").elements) control.disabled = noProject || viewer;
  for (const control of document.querySelectorAll("#usage button")) {
    if (noProject) control.disabled = true;
    else if (control.id !== "usage-later") control.disabled = false; // Later follows the period shown
  }
  if (noProject) $("usage-back").hidden = true;
  setReason(document.querySelector('[data-reason="own"]'), project && !owner ? (viewer ? REASONS.viewer : REASONS.notOwner) : "");
  $("import-file").disabled = noProject || viewer;
  $("export").disabled = noProject;
  $("erase-me").disabled = noProject;
  $("project-name").value = project ? project.name : "";
  if (noProject) $("usage-view").replaceChildren(el("p", { class: "empty" }, "No project yet."));
}

async function createProject() {
  const name = await asked("Name of the new project", PROJECT_NAME_MAX);
  if (!name) return;
  const created = await attempt("create the project", () => send("POST", "/projects", { name }));
  if (created) await attempt("load your projects", () => loadProjects(created.id));
}

// ---------- conversations panel ----------

async function loadThreads(more = false) {
  if (!state.project) {
    $("thread-list").replaceChildren(el("p", { class: "empty" }, "No project yet: create one above."));
    $("more-threads").hidden = true;
    return;
  }
  state.threadsAsked += 1;
  const asked = state.threadsAsked;
  // Read again after an action, the list keeps as many threads as it showed (pages that
  // More added included), up to 100 a request.
  const want = more ? PAGE : Math.max(PAGE, state.threads.length);
  let cursor = more ? state.threadsCursor : null;
  const found = [];
  do {
    const query = new URLSearchParams({ limit: String(Math.min(THREADS_PAGE_MAX, want - found.length)) });
    if (cursor) query.set("cursor", cursor);
    if (state.archived) query.set("archived", "true");
    const page = await attempt("load your conversations", () => get(projectPath(`/conversations?${query}`)));
    if (!page || asked !== state.threadsAsked) return; // a later load answers instead
    found.push(...page.conversations);
    cursor = page.nextCursor;
  } while (cursor && found.length < want);
  state.threads = more ? [...state.threads, ...found] : found;
  state.threadsCursor = cursor;
  renderThreads();
}

function renderThreads() {
  const list = $("thread-list");
  const groups = PERIODS.map(([id, label, periods]) => {
    const threads = state.threads.filter((thread) => periods.includes(thread.period));
    if (threads.length === 0) return null;
    return el(
      "section",
      { class: "period", "aria-label": label, dataset: { period: id } },
      el("h3", {}, label),
      el(
        "ul",
        {},
        threads.map((thread) =>
          el(
            "li",
            {},
            el(
              "button",
              {
                type: "button",
                class: "thread",
                dataset: { id: thread.id },
                "aria-current": state.conversation && state.conversation.id === thread.id ? "true" : "false",
                onclick: () => openThread(thread.id),
              },
              el("span", { class: "title", dir: "auto" }, thread.title || "Untitled"),
              el("span", { class: "meta" }, `${thread.turnCount} ${thread.turnCount === 1 ? "turn" : "turns"} · ${when(thread.updatedAt)}`),
            ),
          ),
        ),
      ),
    );
  }).filter(Boolean);
  list.replaceChildren(
    ...(groups.length
      ? groups
      : [el("p", { class: "empty" }, state.archived ? "No archived conversations." : "No conversations yet: say something to start one.")]),
  );
  $("more-threads").hidden = !state.threadsCursor;
}

function newChat(prefill = "") {
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

async function openThread(id) {
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
function renderNewChatHead() {
  state.views += 1;
  state.conversation = null;
  state.olderCursor = null;
  $("chat-title").textContent = "New chat";
  $("thread-actions").hidden = true;
  $("older").hidden = true;
  $("nudge").hidden = true;
}

function renderThreadHead() {
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

function scrollToEnd() {
  const box = $("messages");
  box.scrollTop = box.scrollHeight;
}

// ---------- messages ----------

function chip(outcome, key) {
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

// ---------- a turn ----------

/** Why a message cannot be sent now, or null. */
function turnRefusal(text) {
  if (!state.project) return "No project is open: your message stays here.";
  if (!canEdit()) return REASONS.viewer;
  const length = [...text].length; // characters as the API counts them, not UTF-16 units
  if (length > config.messageMaxChars) {
    return `Your message is ${length.toLocaleString()} characters; the API takes at most ${config.messageMaxChars.toLocaleString()}. Shorten it or split it: it stays here.`;
  }
  return null;
}

async function sendTurn(text, retry) {
  if (!text.trim() || turnRefusal(text) || state.sending) return;
  state.sending = true;
  $("send").disabled = true;
  const key = retry ? retry.key : newKey();
  const list = $("message-list");
  if (retry) retry.node.remove();
  const asked = retry
    ? retry.asked
    : el("li", { class: "message user pending", dataset: { role: "user" } }, el("span", { class: "who" }, "You"), el("div", { class: "text", dir: "auto" }, text));
  if (!retry) list.append(asked);
  const textNode = el("div", { class: "text", dir: "auto", "aria-live": "polite", "aria-atomic": "false" });
  const chips = el("div", { class: "chips" });
  const reply = el(
    "li",
    { class: "message assistant", dataset: { role: "assistant", streaming: "true", deltas: "0" }, "aria-busy": "true" },
    el("span", { class: "who" }, "Assistant"),
    chips,
    textNode,
  );
  list.append(reply);
  scrollToEnd();
  // A retry sends the very body its key was first used with: the API refuses a key reused
  // with another body, and a new chat's first try had no conversationId yet.
  const body = retry ? retry.body : { message: text };
  if (!retry && state.conversation) body.conversationId = state.conversation.id;
  else if (!retry && $("preset-select").value) body.presetId = $("preset-select").value;
  const projectId = state.project.id;
  let ended = false;
  // Once: a turn that failed may still hear its reply later, when Send is another turn's.
  const finished = () => {
    if (ended) return;
    ended = true;
    state.sending = false;
    $("send").disabled = !canEdit();
    $("composer-wait").hidden = true;
    reply.removeAttribute("aria-busy");
    delete reply.dataset.streaming;
  };
  /** A turn shown failed whose reply comes after all (it was only late) shows it instead. */
  const unfail = () => {
    reply.classList.remove("failed");
    delete reply.dataset.status;
    delete reply.dataset.code;
    reply.querySelectorAll(".error-words, .retry").forEach((node) => node.remove());
  };
  let made = null; // the thread this turn made, when it made one
  const view = state.views; // what was open when the message was sent
  await turns.send(projectId, body, key, {
    start(conversation) {
      if (conversation.created) made = conversation.id;
      // The person may have opened another thread or project meanwhile: theirs stays open,
      // one still loading too (the list is not drawn yet, but a click counted a view).
      if (!reply.isConnected || state.views !== view) return;
      if (!state.conversation || state.conversation.id !== conversation.id) {
        state.views += 1;
        state.conversation = { id: conversation.id, title: conversation.title, archived: false, turnCount: 0 };
        renderThreadHead();
      }
    },
    delta(piece) {
      unfail();
      textNode.textContent += piece;
      reply.dataset.deltas = String(Number(reply.dataset.deltas) + 1);
      scrollToEnd();
    },
    tool(frame) {
      unfail();
      chips.append(chip(frame.outcome, frame.key));
    },
    done(answer, how) {
      finished();
      unfail();
      const message = answer.message;
      textNode.textContent = message.content;
      reply.dataset.id = message.id;
      reply.dataset.status = message.status;
      reply.dataset.transport = how;
      if (chips.children.length === 0) {
        for (const saved of answer.memoriesSaved || []) chips.append(chip("saved", saved.key));
        for (const forgotten of answer.memoriesForgotten || []) chips.append(chip("forgotten", forgotten));
      }
      if (message.status === "error") {
        reply.classList.add("failed");
        reply.append(el("p", { class: "error-words" }, `Failed: ${message.error || "the model did not answer"}`));
      }
      asked.classList.remove("pending");
      state.threshold = answer.nudge.threshold;
      if (!state.project || state.project.id !== projectId) return; // another project is open now
      // The count goes to the thread the turn was on, which need not be the open one.
      const threadId = answer.conversation.id;
      for (const thread of [state.conversation, ...state.threads]) {
        if (thread && thread.id === threadId) thread.turnCount = answer.nudge.turns;
      }
      renderThreads();
      loadThreads();
      refreshUsage();
      if (!state.conversation || state.conversation.id !== threadId) return;
      // The thread was opened again while the reply came: the list drawn then has no room
      // for this turn, so its newest page is read again.
      if (!reply.isConnected) {
        openThread(threadId);
        return;
      }
      if (answer.nudge.show) maybeNudge(answer.nudge.turns, answer.nudge.threshold);
      scrollToEnd();
      if ((answer.memoriesSaved || []).length || (answer.memoriesForgotten || []).length) loadMemory();
      if (!$("context-panel").hidden) loadContext();
    },
    error(error) {
      finished();
      if (!reply.isConnected) {
        // Its thread was opened again (or another one): the failure is said in an alert,
        // and a thread still open shows what was saved of the turn.
        showError(error, "get the reply");
        const threadId = made || body.conversationId;
        if (threadId && state.project && state.project.id === projectId && state.conversation && state.conversation.id === threadId) openThread(threadId);
      }
      if (error.status === 403) refused();
      if (error.status === 401) {
        // The message the token was refused for goes back in the box, to be kept as the draft.
        if (!$("composer-input").value.trim()) $("composer-input").value = text;
        sessionEnded();
      }
      // A save the API refused takes back the thread the turn made (the refusal names no
      // thread), so the next message starts one; a model failure was saved, and names it.
      // A turn that lost its socket, heard no answer or had its resend refused may still be
      // running, and be saved: its thread stays open, with the message and a Retry.
      const unheard = ["connection_lost", "no_answer", "resend_refused"].includes(error.code);
      const saved = unheard || error.details.some((detail) => detail.conversationId);
      if (made && !saved && state.conversation && state.conversation.id === made) {
        renderNewChatHead();
        renderPresetPicker();
        renderThreads();
      }
      unfail(); // a second failure (a late error frame) replaces the first one's words
      reply.classList.add("failed");
      reply.dataset.status = "failed";
      reply.dataset.code = error.code || "error";
      // A budget refusal says what ran out and when it comes back; a retry asks once more.
      const refusal = budgetRefusal(error);
      reply.append(
        el("p", { class: "error-words" }, refusal ? `Not sent: ${refusal}` : `Failed: ${error.words}`),
        el("button", { type: "button", class: "retry", onclick: () => sendTurn(text, { key, body, node: reply, asked }) }, "Retry"),
      );
      scrollToEnd();
      if (state.project && state.project.id === projectId) {
        loadThreads();
        refreshUsage();
      }
    },
  });
}

/** The usage shown again after a turn, when the project panel is open. */
function refreshUsage() {
  if (state.project && !$("project-panel").hidden) loadUsage(state.project, state.user);
}

// ---------- the nudge ----------

function maybeNudge(turnCount, threshold) {
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

// ---------- memory ----------

async function loadMemory() {
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

// ---------- what the model sees ----------

async function loadContext() {
  const view = $("context-view");
  if (!state.conversation) {
    fillThreadSettings();
    view.replaceChildren(el("p", { class: "empty" }, "Open a thread to see what its next turn would send the model."));
    return;
  }
  const asked = openView();
  const preview = await attempt("load the context preview", () => get(threadPath("/context")));
  if (!preview || openView() !== asked) return;
  fillThreadSettings();
  const layer = (name, id, content) =>
    el("section", { class: "layer", dataset: { layer: id } }, el("h3", {}, name), content);
  const text = (value) => (value ? el("pre", { dir: "auto" }, value) : el("p", { class: "empty" }, "(empty)"));
  const systemParts = preview.system.filter((part) => part !== preview.memoryBlock && part !== preview.projectContext);
  view.replaceChildren(
    el("p", { class: "tokens", dataset: { tokens: String(preview.tokenEstimate) } }, `≈ ${preview.tokenEstimate.toLocaleString()} tokens for ${preview.model}`),
    layer("Settings", "settings", el("p", {}, settingsWords(preview.settings))),
    // The system parts besides the memory block and project context, shown in their own layers.
    el(
      "details",
      { class: "layer", dataset: { layer: "system" } },
      el("summary", {}, el("h3", {}, `System (${systemParts.length} parts)`)),
      systemParts.map((part) => el("pre", {}, part)),
    ),
    layer("Memory block", "memory", text(preview.memoryBlock)),
    layer("Project context", "project", text(preview.projectContext)),
    layer("Summary", "summary", text(preview.summary)),
    layer(
      `Preset prompts (${preview.contextPrompts.length})`,
      "prompts",
      preview.contextPrompts.length
        ? el("ol", { class: "window" }, preview.contextPrompts.map((prompt) => el("li", {}, el("strong", {}, `${prompt.role}: `), el("bdi", {}, prompt.content))))
        : text(""),
    ),
    layer(
      `Window (${preview.window.length} messages)`,
      "window",
      preview.window.length
        ? el("ol", { class: "window" }, preview.window.map((message) => el("li", {}, el("strong", {}, `${message.role}: `), el("bdi", {}, message.content))))
        : text(""),
    ),
  );
}

function settingsWords(settings) {
  return [
    `${settings.model}`,
    `temperature ${settings.temperature}`,
    `up to ${settings.maxTokens} tokens`,
    `${settings.windowMessages} messages`,
    settings.useSummary ? "with the summary" : "exact short context",
    settings.sendMemory ? "with project memory" : "without project memory",
  ].join(" · ");
}

function fillThreadSettings() {
  const box = $("thread-settings-box");
  box.hidden = !state.conversation;
  if (!state.conversation) return;
  const own = state.conversation.settings || {};
  const shown = (value) => (value === null || value === undefined ? "" : String(value));
  $("thread-temperature").value = shown(own.temperature);
  $("thread-max-tokens").value = shown(own.maxTokens);
  $("thread-window").value = shown(own.windowMessages);
  $("thread-summary").value = shown(own.useSummary);
  $("thread-memory").value = shown(own.sendMemory);
  for (const control of $("thread-settings").elements) control.disabled = !canEdit();
}

async function saveThreadSettings(settings) {
  const changed = await attempt("change the thread's settings", () => send("PATCH", threadPath(), { settings }));
  if (!changed) return;
  state.conversation = changed;
  loadContext();
}

function threadOverrides() {
  const number = (id) => ($(id).value === "" ? null : Number($(id).value));
  const flag = (id) => ($(id).value === "" ? null : $(id).value === "true");
  return {
    temperature: number("thread-temperature"),
    maxTokens: number("thread-max-tokens"),
    windowMessages: number("thread-window"),
    useSummary: flag("thread-summary"),
    sendMemory: flag("thread-memory"),
  };
}

// ---------- presets ----------

async function loadPresets() {
  if (!state.project) return;
  const project = state.project.id;
  const found = await attempt("load the presets", () => get(projectPath("/presets")));
  if (!found || !state.project || state.project.id !== project) return;
  state.presets = found.presets;
  renderPresetPicker();
  const editor = canEdit();
  $("preset-list").replaceChildren(
    ...(state.presets.length
      ? state.presets.map((preset) =>
          el(
            "li",
            { dataset: { preset: preset.id } },
            el(
              "span",
              { class: "member" },
              el("bdi", {}, preset.name),
              ` (${preset.contextPrompts.length} ${preset.contextPrompts.length === 1 ? "prompt" : "prompts"})`,
              el("span", { class: "meta preset-settings" }, presetSettingsWords(preset.settings)),
            ),
            el("button", { type: "button", disabled: !editor, onclick: () => editPreset(preset) }, "Edit"),
            el("button", { type: "button", class: "danger", disabled: !editor, onclick: () => deletePreset(preset) }, "Delete"),
          ),
        )
      : [el("li", { class: "empty" }, "No presets yet.")]),
  );
  for (const control of $("preset-form").elements) control.disabled = !editor;
}

/** What a preset sets itself; the rest follows the project. */
function presetSettingsWords(settings) {
  const own = [
    settings.model ? `model ${settings.model}` : null,
    settings.maxTokens ? `up to ${settings.maxTokens} tokens` : null,
    settings.temperature !== null && settings.temperature !== undefined ? `temperature ${settings.temperature}` : null,
    settings.windowMessages ? `${settings.windowMessages} messages` : null,
    settings.useSummary === false ? "exact short context" : null,
    settings.sendMemory === false ? "without project memory" : null,
  ].filter(Boolean);
  return own.length ? own.join(" · ") : "follows the project";
}

function renderPresetPicker() {
  const select = $("preset-select");
  const chosen = select.value;
  select.replaceChildren(
    el("option", { value: "" }, "No preset"),
    ...state.presets.map((preset) => el("option", { value: preset.id }, preset.name)),
  );
  select.value = state.presets.some((preset) => preset.id === chosen) ? chosen : "";
  $("preset-pick").hidden = Boolean(state.conversation) || !state.presets.length || !canEdit();
}

/** The form filled with a preset's prompts and settings; saving changes that preset. */
function editPreset(preset) {
  const shown = (value) => (value === null || value === undefined ? "" : String(value));
  state.editingPreset = preset.id;
  $("preset-form-title").textContent = `Edit ${preset.name}`;
  $("preset-cancel").hidden = false;
  $("preset-name").value = preset.name;
  $("preset-prompts").value = preset.contextPrompts.map((prompt) => `${prompt.role}: ${prompt.content}`).join("\n");
  $("preset-temperature").value = shown(preset.settings.temperature);
  $("preset-window").value = shown(preset.settings.windowMessages);
  $("preset-model").value = shown(preset.settings.model);
  $("preset-max-tokens").value = shown(preset.settings.maxTokens);
  $("preset-no-summary").checked = preset.settings.useSummary === false;
  $("preset-no-memory").checked = preset.settings.sendMemory === false;
  $("preset-add").open = true;
  $("preset-name").focus();
}

function closePresetForm() {
  state.editingPreset = null;
  $("preset-form").reset();
  $("preset-form-title").textContent = "Add a preset";
  $("preset-cancel").hidden = true;
  $("preset-add").open = false;
}

/** The models a 422 named as allowed, offered in the model box from then on. */
function offerModels(error) {
  const allowed = error instanceof ApiError ? error.details.flatMap((detail) => detail.allowed || []) : [];
  if (allowed.length) $("preset-models").replaceChildren(...allowed.map((model) => el("option", { value: model })));
}

async function savePreset(event) {
  event.preventDefault();
  const contextPrompts = [];
  for (const line of $("preset-prompts").value.split("\n")) {
    const found = /^\s*(user|assistant)\s*:\s*(.+)$/i.exec(line);
    if (found) contextPrompts.push({ role: found[1].toLowerCase(), content: found[2].trim() });
    else if (line.trim()) {
      showError(new Error(`"${line.trim()}" does not start with user: or assistant:`), "save the preset");
      return;
    }
  }
  const settings = {};
  if ($("preset-temperature").value !== "") settings.temperature = Number($("preset-temperature").value);
  if ($("preset-window").value !== "") settings.windowMessages = Number($("preset-window").value);
  if ($("preset-model").value.trim() !== "") settings.model = $("preset-model").value.trim();
  if ($("preset-max-tokens").value !== "") settings.maxTokens = Number($("preset-max-tokens").value);
  if ($("preset-no-summary").checked) settings.useSummary = false;
  if ($("preset-no-memory").checked) settings.sendMemory = false;
  const body = { name: $("preset-name").value.trim(), contextPrompts, settings };
  const editing = state.editingPreset;
  try {
    if (editing) await send("PATCH", projectPath(`/presets/${enc(editing)}`), body);
    else await send("POST", projectPath("/presets"), body);
  } catch (error) {
    offerModels(error);
    showError(error, "save the preset");
    return;
  }
  closePresetForm();
  loadPresets();
}

async function deletePreset(preset) {
  if (!(await confirmed(`Delete the preset ${preset.name}? Threads started from it keep their copy.`, "Delete"))) return;
  const done = await attempt(`delete ${preset.name}`, () => send("DELETE", projectPath(`/presets/${enc(preset.id)}`)));
  if (done !== undefined) loadPresets();
}

// ---------- project settings ----------

async function loadProjectSettings() {
  if (!state.project) return false;
  renderProject();
  loadPresets();
  loadUsage(state.project, state.user);
  const project = state.project.id;
  const found = await attempt("load the members", () => get(projectPath("/members")));
  if (!found || !state.project || state.project.id !== project) return false; // another project is open now
  const owner = isOwner();
  $("member-list").replaceChildren(
    ...found.members.map((member) => {
      const role = el(
        "select",
        { "aria-label": `Role of ${member.userId}`, disabled: !owner },
        ["owner", "editor", "viewer"].map((name) => el("option", { value: name, selected: name === member.role }, name)),
      );
      role.addEventListener("change", async () => {
        const changed = await attempt(`change ${member.userId}'s role`, () =>
          send("PUT", projectPath(`/members/${enc(member.userId)}`), { role: role.value }),
        );
        if (!changed) role.value = member.role;
        // Their own role: the page's controls follow it before the list is drawn again.
        if (changed && member.userId === state.user) await refreshRole();
        if (await loadProjectSettings()) focusMember(member.userId);
      });
      return el(
        "li",
        { dataset: { user: member.userId } },
        el("span", { class: "member" }, member.userId, member.userId === state.user ? " (you)" : ""),
        role,
        el("button", { type: "button", class: "danger", disabled: !owner, onclick: () => removeMember(member.userId) }, "Remove"),
      );
    }),
  );
  return true;
}

async function removeMember(userId) {
  if (!(await confirmed(`Remove ${userId} from ${state.project.name}?`, "Remove"))) return;
  const name = state.project.name;
  const done = await attempt(`remove ${userId}`, () => send("DELETE", projectPath(`/members/${enc(userId)}`)));
  if (done === undefined) return;
  if (userId === state.user) {
    // They left the project: it goes from the picker, and another one opens.
    showNote(`You have left ${name}.`);
    localStorage.removeItem(`recall.project.${state.user}`);
    await attempt("load your projects", () => loadProjects());
    return;
  }
  if (await loadProjectSettings()) focusMember(userId);
}

/** Focus back on the member's role after the list is drawn again, or on the list's heading. */
function focusMember(userId) {
  const found = document.querySelector(`#member-list li[data-user="${CSS.escape(userId)}"] select`);
  (found || $("members-title")).focus();
}

async function addMember(event) {
  event.preventDefault();
  const userId = $("member-user").value.trim();
  const added = await attempt(`add ${userId}`, () => send("PUT", projectPath(`/members/${enc(userId)}`), { role: $("member-role").value }));
  if (!added) return;
  $("member-user").value = "";
  loadProjectSettings();
}

async function renameProject(event) {
  event.preventDefault();
  const project = state.project;
  const changed = await attempt("rename the project", () => send("PATCH", projectPath(), { name: $("project-name").value.trim() }));
  if (!changed || state.project !== project) return;
  // Only the name changed: the open thread, the members and the rest stay as they are.
  project.name = changed.name;
  relabel(project);
  renderProject();
}

async function exportProject() {
  const answer = await attempt("export your data", () => request("GET", projectPath("/export"), undefined, { raw: true }));
  if (!answer) return;
  const blob = await answer.blob();
  let large = null;
  try {
    const head = JSON.parse(await blob.text());
    if (head.format === "recall.export.jsonl") large = head;
  } catch {
    // not JSON: saved as it came
  }
  if (large) {
    // Past one response's size: JSON Lines behind a pre-signed link, saved as an attachment.
    showNote(`Your export is large (${large.bytes.toLocaleString()} bytes): it downloads as JSON Lines; the link works until ${new Date(large.expiresAt).toLocaleTimeString()}.`);
    save(large.url);
    return;
  }
  const href = URL.createObjectURL(blob);
  save(href, `recall-${state.project.id}.json`);
  setTimeout(() => URL.revokeObjectURL(href), 1000);
}

function save(href, name) {
  const link = el("a", { href, download: name || "" });
  document.body.append(link);
  link.click();
  link.remove();
}

async function importFile() {
  const file = $("import-file").files[0];
  if (!file) return;
  const progress = $("import-progress");
  let document_;
  try {
    document_ = JSON.parse(await file.text());
  } catch {
    showError(new Error(`${file.name} is not JSON.`), "import");
    return;
  }
  const project = state.project.id; // followed there even if another project opens meanwhile
  const started = await attempt("import", () => send("POST", projectPath("/import"), document_));
  $("import-file").value = "";
  if (!started) return;
  let status = started;
  let failures = 0;
  let wait = config.importPollSeconds;
  while (status.status === "queued" || status.status === "running") {
    const shown = `Importing: ${status.threadsDone} of ${status.threadsTotal} threads, ${status.messagesDone} messages, ${status.memoriesDone} memory entries, ${status.presetsDone} presets`;
    progress.textContent = failures ? `${shown} (checking again in ${Math.ceil(wait)} s)` : shown;
    await new Promise((resolve) => setTimeout(resolve, wait * 1000));
    try {
      status = await get(`/projects/${enc(project)}/import/${enc(started.id)}`);
      failures = 0;
      wait = config.importPollSeconds;
    } catch (error) {
      // A throttled or unavailable API, or the network, passes: ask again, waiting longer
      // each time (at least what Retry-After says), and give up only after several.
      const passing = error instanceof ApiError && (error.status === 0 || error.status === 429 || error.status >= 500);
      failures += 1;
      if (!passing || failures >= IMPORT_POLL_FAILURES) {
        progress.textContent = `${shown}. Lost track of the import: ${error instanceof ApiError ? error.words : error} It may still finish: reload the page later to see its threads.`;
        if (!passing) showError(error, "follow the import");
        return;
      }
      wait = Math.max(Number(error.retryAfter) || 0, config.importPollSeconds * 2 ** failures);
    }
  }
  const errors = (status.errors || []).length ? ` ${status.errors.length} problems: ${status.errors.map((e) => (typeof e === "string" ? e : e.message || JSON.stringify(e))).join("; ")}` : "";
  progress.textContent = `Import ${status.status}: ${status.threadsDone} threads, ${status.messagesDone} messages, ${status.memoriesDone} memory entries, ${status.presetsDone} presets.${errors}`;
  if (!state.project || state.project.id !== project) return;
  loadThreads();
  loadMemory();
  loadPresets(); // the list and the new chat's picker
}

async function eraseMe() {
  const name = state.project.name;
  if (!(await confirmed(`Erase everything of yours in ${name} (threads, messages, memory, history) and leave it? This cannot be undone.`, "Erase"))) return;
  const done = await attempt("erase your data", () => send("DELETE", projectPath("/me")));
  if (done === undefined) return;
  showNote(`Your data in ${name} is erased, and you have left it.`);
  localStorage.removeItem(`recall.project.${state.user}`);
  await attempt("load your projects", () => loadProjects());
}

// ---------- wiring ----------

function wire() {
  $("sign-in-name").addEventListener("submit", (event) => {
    event.preventDefault();
    signInAs(session.localToken($("sign-in-user").value.trim()));
  });
  $("sign-in-token").addEventListener("submit", (event) => {
    event.preventDefault();
    signInAs($("sign-in-jwt").value.trim());
  });
  $("sign-out").addEventListener("click", () => {
    session.signOut();
    location.reload();
  });
  $("project-select").addEventListener("change", () => {
    const project = state.projects.find((found) => found.id === $("project-select").value);
    if (project) openProject(project);
  });
  $("new-project").addEventListener("click", createProject);
  $("new-chat").addEventListener("click", () => newChat());
  $("show-archived").addEventListener("change", () => {
    state.archived = $("show-archived").checked;
    state.threads = []; // the other list starts at its first page
    loadThreads();
  });
  $("more-threads").addEventListener("click", () => loadThreads(true));
  $("older").addEventListener("click", loadOlder);
  $("messages").addEventListener("scroll", () => {
    if ($("messages").scrollTop < 80) loadOlder();
  });
  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = $("composer-input").value;
    if (!text.trim()) return;
    if (state.sending) {
      // One turn at a time: the message waits in the box until the reply has ended.
      $("composer-wait").hidden = false;
      return;
    }
    // What cannot be sent stays in the box, and the page says why.
    const refusal = turnRefusal(text);
    setReason($("composer-note"), refusal);
    if (refusal) return;
    $("composer-input").value = "";
    sendTurn(text);
  });
  $("composer-input").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("composer").requestSubmit();
    }
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
  $("ask-cancel").addEventListener("click", () => $("ask").close("cancel"));
  $("refresh-memory").addEventListener("click", loadMemory);
  $("refresh-context").addEventListener("click", loadContext);
  $("memory-form").addEventListener("submit", addMemory);
  $("memory-category").replaceChildren(...CATEGORIES.map((name) => el("option", { value: name }, name)));
  $("rename-project").addEventListener("submit", renameProject);
  $("add-member").addEventListener("submit", addMember);
  $("export").addEventListener("click", exportProject);
  $("import-file").addEventListener("change", importFile);
  $("erase-me").addEventListener("click", eraseMe);
  $("preset-form").addEventListener("submit", savePreset);
  $("preset-cancel").addEventListener("click", closePresetForm);
  $("thread-settings").addEventListener("submit", (event) => {
    event.preventDefault();
    saveThreadSettings(threadOverrides());
  });
  $("thread-follow").addEventListener("click", () => saveThreadSettings(null));
  wireUsage(() => state.project && loadUsage(state.project, state.user));
  document.addEventListener("recall:refused", refreshRole);
  document.addEventListener("recall:unauthorized", sessionEnded);
  for (const button of document.querySelectorAll("[data-go]")) {
    button.addEventListener("click", () => go(button.dataset.go));
  }
}

async function start() {
  delete document.body.dataset.ready;
  const token = session.token();
  const claims = token ? session.claimsOf(token) : null;
  if (!claims || typeof claims.sub !== "string") {
    renderSignIn();
    return;
  }
  state.user = claims.sub;
  $("sign-in").hidden = true;
  $("console").hidden = false;
  $("phone-tabs").hidden = false;
  $("project-picker").hidden = false;
  $("who").hidden = false;
  $("who-name").textContent = session.isLocal ? `${claims.sub} (local)` : claims.sub;
  $("who-name").title = $("who-name").textContent;
  for (const name of SIDE_VIEWS) {
    $(`${name}-panel`).hidden = name !== "memory";
    $(`tab-${name}`).setAttribute("aria-selected", String(name === "memory"));
  }
  go("chat");
  if (session.refusedWebSocketUrl) $("transport").textContent = `Streaming off: ${refusedSocketWords()} Replies arrive whole over HTTP.`;
  const resume = resumeFor(claims.sub);
  if (!(await firstProjects())) return;
  if (resume && state.signedIn) await resumeWhereLeft(resume);
  document.body.dataset.ready = "console"; // what the browser tests wait for
}

/** What `user` left when their session ended, or null. Another person's is removed unread. */
function resumeFor(user) {
  let resume = null;
  try {
    resume = JSON.parse(localStorage.getItem(RESUME));
  } catch {
    // not ours to read: removed below
  }
  if (resume && resume.user === user) return resume;
  localStorage.removeItem(RESUME);
  return null;
}

/** The thread open and the draft typed when the session ended, back on screen. */
async function resumeWhereLeft(resume) {
  localStorage.removeItem(RESUME);
  const project = state.projects.find((found) => found.id === resume.projectId);
  if (project && state.project !== project) {
    $("project-select").value = project.id;
    await openProject(project);
  }
  if (project && resume.conversationId) await openThread(resume.conversationId);
  if (resume.draft) $("composer-input").value = resume.draft;
}

/** The person's projects, the first time: a 401 is a token the API refuses (back to
 * sign-in), any other failure leaves no project open, with a Try again. False after a 401. */
async function firstProjects() {
  try {
    await loadProjects();
    state.signedIn = true;
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      session.signOut();
      renderSignIn();
      showError(error, "sign in (the API refused the token)");
      return false;
    }
    showError(error, "load your projects");
    projectsNotLoaded(error);
  }
  return true;
}

/** Nothing open and nothing to act on but Try again, saying what failed. */
function projectsNotLoaded(error) {
  state.projects = [];
  state.project = null;
  $("project-select").replaceChildren(el("option", { value: "" }, "Projects not loaded"));
  leaveProject();
  $("memory-list").replaceChildren();
  const words = error instanceof ApiError ? error.words : String(error && error.message ? error.message : error);
  $("thread-list").replaceChildren(
    el(
      "div",
      { class: "load-failed", role: "status" },
      el("p", {}, `Your projects could not be loaded: ${words}`),
      el("button", { type: "button", class: "primary", onclick: () => firstProjects() }, "Try again"),
    ),
  );
  $("more-threads").hidden = true;
  setReason($("composer-reason"), "Your projects could not be loaded: Try again in the Conversations panel.");
}

wire();
start();
