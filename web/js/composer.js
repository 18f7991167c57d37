// The composer and a turn: what cannot be sent stays in the box with the reason; a sent
// message streams its reply in (or gets it whole over HTTP), and a failed one keeps a Retry
// that sends the very same request again.
import { config } from "../config.js";
import { refused, showError } from "./alerts.js";
import { chip, maybeNudge, openThread, renderNewChatHead, renderThreadHead, scrollToEnd } from "./chat.js";
import { loadContext } from "./context.js";
import { $, el } from "./dom.js";
import { loadMemory } from "./memory.js";
import { renderPresetPicker } from "./presets.js";
import { refusedSocketWords, sessionEnded } from "./signin.js";
import { REASONS, canEdit, newKey, setReason, state } from "./state.js";
import { loadThreads, renderThreads } from "./threads.js";
import { Turns } from "./turns.js";
import { budgetRefusal, loadUsage } from "./usage.js";

const turns = new Turns((how) => {
  $("transport").textContent =
    how === "socket"
      ? "Replies stream over the WebSocket API."
      : how === "refused"
        ? `Streaming off: ${refusedSocketWords()} Replies arrive whole over HTTP.`
        : "Streaming unavailable: replies arrive whole over HTTP.";
});

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

export function wireComposer() {
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
}
