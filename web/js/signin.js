// Signing in, the console's start once someone is, and the session's end: a 401 returns to
// sign-in, and the same person signing in again gets their thread and draft back.
import { showError } from "./alerts.js";
import { ApiError } from "./api.js";
import { openThread } from "./chat.js";
import { $, el } from "./dom.js";
import { leaveProject, loadProjects, openProject } from "./projects.js";
import * as session from "./session.js";
import { setReason, state } from "./state.js";
import { go, showSide } from "./views.js";

const ENDED = "recall.ended";
// What a person was writing, and where, when their session ended: given back to them alone.
const RESUME = "recall.resume";

/** Why the link's WebSocket is not used, in words. */
export function refusedSocketWords() {
  const why =
    session.refusedWebSocketReason === "cleartext"
      ? "which is not encrypted (ws:) while the API is https"
      : "which is not on the API's host";
  return `this page's link names the WebSocket ${session.refusedWebSocketUrl}, ${why}, so it is not used.`;
}

function renderSignIn() {
  $("console").hidden = true;
  $("phone-tabs").hidden = true;
  $("project-picker").hidden = true;
  $("who").hidden = true;
  $("sign-in").hidden = false;
  $("api-origin").textContent = session.apiBase;
  $("ws-origin").textContent = session.webSocketElsewhere ? ` and its WebSocket at ${session.webSocketElsewhere}` : "";
  $("ws-refused").hidden = !session.refusedWebSocketUrl;
  if (session.refusedWebSocketUrl) $("ws-refused").textContent = `Streaming off: ${refusedSocketWords()}`;
  $("sign-in-local").hidden = !session.isLocal;
  $("session-ended").hidden = !sessionStorage.getItem(ENDED);
  sessionStorage.removeItem(ENDED);
  document.body.dataset.ready = "sign-in";
  const users = $("demo-users");
  users.replaceChildren(
    ...session.DEMO_USERS.map((user) =>
      el("button", { type: "button", class: "primary", onclick: () => signInAs(session.localToken(user)) }, `Sign in as ${user}`),
    ),
  );
}

function signInAs(token) {
  const claims = session.claimsOf(token);
  if (!claims || typeof claims.sub !== "string") {
    showError(new Error("That is not a JWT with a sub claim."), "sign in");
    return;
  }
  session.signIn(token);
  $("session-ended").hidden = true;
  start();
}

/** A 401 once signed in: the token expired or was revoked. Back to sign-in, which says so;
 * the page loads afresh, so nothing of the session (a socket, a timer) outlives it. */
export function sessionEnded() {
  if (!state.signedIn || !session.token()) return;
  // Kept in localStorage, beside the project the page remembers, with whose it is: only
  // the same person signing in again gets the draft and the thread back.
  localStorage.setItem(
    RESUME,
    JSON.stringify({
      user: state.user,
      projectId: state.project ? state.project.id : null,
      conversationId: state.conversation ? state.conversation.id : null,
      draft: $("composer-input").value,
    }),
  );
  session.signOut();
  sessionStorage.setItem(ENDED, "1");
  location.reload();
}

export async function start() {
  delete document.body.dataset.ready;
  const token = session.token();
  const claims = token ? session.claimsOf(token) : null;
  if (!claims || typeof claims.sub !== "string") {
    renderSignIn();
    return;
  }
  state.user = claims.sub;
  $("sign-in").hidden = true;
  $("console").hidden = false;
  $("phone-tabs").hidden = false;
  $("project-picker").hidden = false;
  $("who").hidden = false;
  $("who-name").textContent = session.isLocal ? `${claims.sub} (local)` : claims.sub;
  $("who-name").title = $("who-name").textContent;
  showSide("memory");
  go("chat");
  if (session.refusedWebSocketUrl) $("transport").textContent = `Streaming off: ${refusedSocketWords()} Replies arrive whole over HTTP.`;
  const resume = resumeFor(claims.sub);
  if (!(await firstProjects())) return;
  if (resume && state.signedIn) await resumeWhereLeft(resume);
  document.body.dataset.ready = "console"; // what the browser tests wait for
}

/** What `user` left when their session ended, or null. Another person's is removed unread. */
function resumeFor(user) {
  let resume = null;
  try {
    resume = JSON.parse(localStorage.getItem(RESUME));
  } catch {
    // not ours to read: removed below
  }
  if (resume && resume.user === user) return resume;
  localStorage.removeItem(RESUME);
  return null;
}

/** The thread open and the draft typed when the session ended, back on screen. */
async function resumeWhereLeft(resume) {
  localStorage.removeItem(RESUME);
  const project = state.projects.find((found) => found.id === resume.projectId);
  if (project && state.project !== project) {
    $("project-select").value = project.id;
    await openProject(project);
  }
  if (project && resume.conversationId) await openThread(resume.conversationId);
  if (resume.draft) $("composer-input").value = resume.draft;
}

/** The person's projects, the first time: a 401 is a token the API refuses (back to
 * sign-in), any other failure leaves no project open, with a Try again. False after a 401. */
async function firstProjects() {
  try {
    await loadProjects();
    state.signedIn = true;
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      session.signOut();
      renderSignIn();
      showError(error, "sign in (the API refused the token)");
      return false;
    }
    showError(error, "load your projects");
    projectsNotLoaded(error);
  }
  return true;
}

/** Nothing open and nothing to act on but Try again, saying what failed. */
function projectsNotLoaded(error) {
  state.projects = [];
  state.project = null;
  $("project-select").replaceChildren(el("option", { value: "" }, "Projects not loaded"));
  leaveProject();
  $("memory-list").replaceChildren();
  const words = error instanceof ApiError ? error.words : String(error && error.message ? error.message : error);
  $("thread-list").replaceChildren(
    el(
      "div",
      { class: "load-failed", role: "status" },
      el("p", {}, `Your projects could not be loaded: ${words}`),
      el("button", { type: "button", class: "primary", onclick: () => firstProjects() }, "Try again"),
    ),
  );
  $("more-threads").hidden = true;
  setReason($("composer-reason"), "Your projects could not be loaded: Try again in the Conversations panel.");
}

export function wireSignIn() {
  $("sign-in-name").addEventListener("submit", (event) => {
    event.preventDefault();
    signInAs(session.localToken($("sign-in-user").value.trim()));
  });
  $("sign-in-token").addEventListener("submit", (event) => {
    event.preventDefault();
    signInAs($("sign-in-jwt").value.trim());
  });
  $("sign-out").addEventListener("click", () => {
    session.signOut();
    location.reload();
  });
  document.addEventListener("recall:unauthorized", sessionEnded);
}
