// Which view shows: on a phone one at a time (the tabs at the top), on a desktop three
// columns whose side one shows memory, the model's view or the project.
import { loadContext } from "./context.js";
import { $ } from "./dom.js";
import { loadProjectSettings } from "./project-panel.js";

const SIDE_VIEWS = ["memory", "context", "project"];

export function go(view) {
  document.body.dataset.view = view;
  for (const button of document.querySelectorAll("#phone-tabs [data-go]")) {
    button.setAttribute("aria-current", String(button.dataset.go === view));
  }
  // A side panel already on show is kept current as things change (a turn, another thread
  // or project): shown again, by its tab or a phone's, it is not drawn anew, which would
  // close a form open in it and drop what was typed there.
  if (!SIDE_VIEWS.includes(view) || !$(`${view}-panel`).hidden) return;
  showSide(view);
  if (view === "context") loadContext();
  if (view === "project") loadProjectSettings();
}

/** The side panel `name` shown, the others hidden, with nothing loaded. */
export function showSide(name) {
  for (const side of SIDE_VIEWS) {
    $(`${side}-panel`).hidden = side !== name;
    $(`tab-${side}`).setAttribute("aria-selected", String(side === name));
  }
}

export function wireViews() {
  for (const button of document.querySelectorAll("[data-go]")) {
    button.addEventListener("click", () => go(button.dataset.go));
  }
}
