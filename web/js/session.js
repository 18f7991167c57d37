// Who is signed in, and where the API is. Locally the console mints the same unsigned
// token `make dev` accepts (local/tokens.py demo_token); deployed it takes a pasted JWT.
import { config } from "../config.js";

const TOKEN = "recall.token";
const API = "recall.api";
const WS = "recall.ws";

export const DEMO_USERS = ["demo-user", "alice", "bob", "carol"];

function base64url(text) {
  const bytes = new TextEncoder().encode(text);
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** The unsigned JWT make dev reads the `sub` of; any real API refuses it. */
export function localToken(user) {
  return [
    base64url(JSON.stringify({ alg: "HS256", typ: "JWT" })),
    base64url(JSON.stringify({ iss: "recall-local", sub: user })),
    base64url("local-unsigned"),
  ].join(".");
}

/** The claims of a JWT, unverified: only to show who is signed in. */
export function claimsOf(token) {
  try {
    const part = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    const bytes = Uint8Array.from(atob(part), (c) => c.charCodeAt(0));
    return JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    return null;
  }
}

/** ?api= and ?ws= override config.js for this page only. Never remembered: a link that
 * named someone else's server would otherwise get every token pasted on later visits. */
function given(name, fallback) {
  return new URLSearchParams(location.search).get(name) || fallback;
}

// What earlier versions remembered goes, so an old link's server is not used again.
localStorage.removeItem(API);
localStorage.removeItem(WS);

export const apiBase = given("api", config.apiBase || location.origin).replace(/\/$/, "");
export const webSocketUrl = given("ws", config.webSocketUrl || apiBase.replace(/^http/, "ws") + "/ws");

/** Served by make dev on this machine: the only place local tokens work. */
export const isLocal =
  new URL(apiBase).origin === location.origin &&
  ["127.0.0.1", "localhost", "[::1]"].includes(location.hostname);

export function token() {
  return sessionStorage.getItem(TOKEN);
}

export function signIn(newToken) {
  sessionStorage.setItem(TOKEN, newToken.trim());
}

export function signOut() {
  sessionStorage.removeItem(TOKEN);
}
