// Your data in the project: an export to download, an import followed to its end, and
// erasing everything of yours there.
import { config } from "../config.js";
import { attempt, showError, showNote } from "./alerts.js";
import { ApiError, enc, get, request, send } from "./api.js";
import { confirmed } from "./dialogs.js";
import { $, el } from "./dom.js";
import { loadMemory } from "./memory.js";
import { loadPresets } from "./presets.js";
import { loadProjects } from "./projects.js";
import { projectPath, state } from "./state.js";
import { loadThreads } from "./threads.js";

const IMPORT_POLL_FAILURES = 5; // checks of an import's progress failed in a row before the page gives up

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

export function wireData() {
  $("export").addEventListener("click", exportProject);
  $("import-file").addEventListener("change", importFile);
  $("erase-me").addEventListener("click", eraseMe);
}
