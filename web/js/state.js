// What the console holds in memory, and the small questions every view asks of it.
import { config } from "../config.js";
import { enc } from "./api.js";

export const PAGE = 50;
export const REASONS = {
  viewer: "You are a viewer of this project: you can read everything here but not change it.",
  notOwner: "Only the project's owners manage its members.",
};

export const state = {
  user: null,
  projects: [],
  project: null,
  threads: [],
  threadsCursor: null,
  threadsAsked: 0,
  archived: false,
  conversation: null,
  olderCursor: null,
  loadingOlder: null, // the view whose older page is on its way
  views: 0, // counts the threads (and new chats) opened: an answer for an earlier one is dropped
  memories: [],
  presets: [],
  editingPreset: null,
  threshold: config.nudgeThresholdTurns,
  sending: false,
  signedIn: false, // the first project list answered: a 401 from now on means the session ended
};

export const canEdit = () => state.project && state.project.role !== "viewer";
export const isOwner = () => state.project && state.project.role === "owner";
export const projectPath = (suffix = "") => `/projects/${enc(state.project.id)}${suffix}`;
export const threadPath = (suffix = "") => projectPath(`/conversations/${enc(state.conversation.id)}${suffix}`);
/** The project and thread open now: an answer asked for another is dropped. */
export const openView = () => `${state.project ? state.project.id : ""}/${state.conversation ? state.conversation.id : ""}`;

export function setReason(node, reason) {
  node.hidden = !reason;
  node.textContent = reason || "";
}

export function newKey() {
  if (crypto.randomUUID) return crypto.randomUUID();
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
}
