// The Conversations panel: the project's threads by period, a page at a time, or the
// archived ones.
import { attempt } from "./alerts.js";
import { get } from "./api.js";
import { openThread } from "./chat.js";
import { $, el, when } from "./dom.js";
import { PAGE, projectPath, state } from "./state.js";

const PERIODS = [
  ["today", "Today", ["today"]],
  ["yesterday", "Yesterday", ["yesterday"]],
  ["week", "This week", ["previous7Days"]],
  ["earlier", "Earlier", ["previous30Days", "older", null, undefined]],
];
const THREADS_PAGE_MAX = 100; // the API's largest conversations page

export async function loadThreads(more = false) {
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

export function renderThreads() {
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

export function wireThreads() {
  $("show-archived").addEventListener("change", () => {
    state.archived = $("show-archived").checked;
    state.threads = []; // the other list starts at its first page
    loadThreads();
  });
  $("more-threads").addEventListener("click", () => loadThreads(true));
}
