// The page's two dialogs: a yes or no, and one line of text.
import { $ } from "./dom.js";

export function confirmed(text, action = "Confirm") {
  const dialog = $("confirm");
  $("confirm-text").textContent = text;
  $("confirm-ok").textContent = action;
  dialog.returnValue = "";
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
  });
}

export function asked(label, maxLength, value = "") {
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

export function wireDialogs() {
  $("ask-cancel").addEventListener("click", () => $("ask").close("cancel"));
}
