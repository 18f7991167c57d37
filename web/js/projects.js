// The project picker and the open project: opening one leaves everything of the last one,
// and the controls follow the person's role in it (read again after a refusal).
import { attempt } from "./alerts.js";
import { ApiError, enc, get, send } from "./api.js";
import { newChat, renderThreadHead } from "./chat.js";
import { loadContext } from "./context.js";
import { asked } from "./dialogs.js";
import { $, el } from "./dom.js";
import { loadMemory } from "./memory.js";
import { closePresetForm, loadPresets } from "./presets.js";
import { loadProjectSettings } from "./project-panel.js";
import { REASONS, canEdit, isOwner, setReason, state } from "./state.js";
import { loadThreads } from "./threads.js";

const PROJECT_NAME_MAX = 120;

export async function loadProjects(selectId) {
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
export function relabel(project) {
  const option = [...$("project-select").options].find((one) => one.value === project.id);
  if (option) option.textContent = projectLabel(project);
}

export async function openProject(project) {
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
export function leaveProject() {
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
export async function refreshRole() {
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

export function renderProject() {
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

export function wireProjects() {
  $("project-select").addEventListener("change", () => {
    const project = state.projects.find((found) => found.id === $("project-select").value);
    if (project) openProject(project);
  });
  $("new-project").addEventListener("click", createProject);
  document.addEventListener("recall:refused", refreshRole);
}
