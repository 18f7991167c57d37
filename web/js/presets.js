// Presets: the project's list in its panel, the form that adds or edits one, and the
// picker a new chat starts from.
import { attempt, showError } from "./alerts.js";
import { ApiError, enc, get, send } from "./api.js";
import { confirmed } from "./dialogs.js";
import { $, el } from "./dom.js";
import { canEdit, projectPath, state } from "./state.js";

export async function loadPresets() {
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

export function renderPresetPicker() {
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

export function closePresetForm() {
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

export function wirePresets() {
  $("preset-form").addEventListener("submit", savePreset);
  $("preset-cancel").addEventListener("click", closePresetForm);
}
