// What the model sees: the next turn's prompt layer by layer, and the open thread's own
// settings over its preset and project.
import { attempt } from "./alerts.js";
import { get, send } from "./api.js";
import { $, el } from "./dom.js";
import { canEdit, openView, state, threadPath } from "./state.js";

export async function loadContext() {
  const view = $("context-view");
  if (!state.conversation) {
    view.removeAttribute("aria-busy");
    fillThreadSettings();
    view.replaceChildren(el("p", { class: "empty" }, "Open a thread to see what its next turn would send the model."));
    return;
  }
  const asked = openView();
  view.setAttribute("aria-busy", "true"); // until the preview is drawn, as the usage view is
  const preview = await attempt("load the context preview", () => get(threadPath("/context")));
  if (openView() !== asked) return; // another thread's preview is asked for (or none is)
  view.removeAttribute("aria-busy");
  if (!preview) return;
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

export function wireContext() {
  $("refresh-context").addEventListener("click", loadContext);
  $("thread-settings").addEventListener("submit", (event) => {
    event.preventDefault();
    saveThreadSettings(threadOverrides());
  });
  $("thread-follow").addEventListener("click", () => saveThreadSettings(null));
}
