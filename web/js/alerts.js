// Alerts float over the page: an error in words a person can act on, or a short note.
import { ApiError } from "./api.js";
import { $, el } from "./dom.js";

export function showError(error, doing) {
  const words = error instanceof ApiError ? error.words : String(error && error.message ? error.message : error);
  const alert = el(
    "div",
    { class: "alert", dataset: { code: error && error.code ? error.code : "error" } },
    el("span", {}, doing ? `Could not ${doing}: ${words}` : words),
    el("button", { type: "button", "aria-label": "Dismiss", onclick: () => alert.remove() }, "×"),
  );
  $("alerts").append(alert);
  while ($("alerts").children.length > 3) $("alerts").firstElementChild.remove();
  setTimeout(() => alert.remove(), 15000);
}

export function showNote(words) {
  const note = el("div", { class: "alert note" }, el("span", {}, words),
    el("button", { type: "button", "aria-label": "Dismiss", onclick: () => note.remove() }, "×"));
  $("alerts").append(note);
  setTimeout(() => note.remove(), 6000);
}

/** Run an action, and say in words what failed; returns undefined on failure. A refusal
 * (403) may mean the person's role changed since the page read it: the page hears of it. */
export async function attempt(doing, action) {
  try {
    return await action();
  } catch (error) {
    showError(error, doing);
    if (error instanceof ApiError && error.status === 403) refused();
    return undefined;
  }
}

/** Tell the page an action was refused (403), so it reads the person's role again. */
export function refused() {
  document.dispatchEvent(new CustomEvent("recall:refused"));
}
