// The Project panel: the project's name and members (an owner changes roles and removes
// people), with its usage and presets.
import { attempt, showNote } from "./alerts.js";
import { enc, get, send } from "./api.js";
import { confirmed } from "./dialogs.js";
import { $, el } from "./dom.js";
import { loadPresets } from "./presets.js";
import { loadProjects, refreshRole, relabel, renderProject } from "./projects.js";
import { isOwner, projectPath, state } from "./state.js";
import { loadUsage, wireUsage } from "./usage.js";

export async function loadProjectSettings() {
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

export function wireProjectPanel() {
  $("rename-project").addEventListener("submit", renameProject);
  $("add-member").addEventListener("submit", addMember);
  wireUsage(() => state.project && loadUsage(state.project, state.user));
}
