// Who is signed in, and where the API is. Locally the console mints the same unsigned
// token `make dev` accepts (local/tokens.py demo_token); deployed it takes a pasted JWT.
import { config } from "../config.js";

const TOKEN = "recall.token";
// The API the held token was signed in for: a token is sent nowhere else.
const TOKEN_API = "recall.token.api";
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

/** ?api= (and ?ws=, within limits below) override config.js for this page only. Never
 * remembered: a link that named someone else's server would otherwise get every token
 * pasted on later visits. */
function given(name, fallback) {
  return new URLSearchParams(location.search).get(name) || fallback;
}

// What earlier versions remembered goes, so an old link's server is not used again.
localStorage.removeItem(API);
localStorage.removeItem(WS);

export const apiBase = given("api", config.apiBase || location.origin).replace(/\/$/, "");

/** The host of a ws:// or wss:// address, or null for anything else. */
function socketHost(address) {
  try {
    const url = new URL(address);
    return ["ws:", "wss:"].includes(url.protocol) ? url.host : null;
  } catch {
    return null;
  }
}

const configuredSocket = config.webSocketUrl || apiBase.replace(/^http/, "ws") + "/ws";
const askedSocket = new URLSearchParams(location.search).get("ws");

/** Why a ?ws= address is refused, or null. It is used only on the API's own host or the
 * configured socket's: the socket carries the token, and a link must not send it anywhere
 * the sign-in page does not name. Nor in clear text (ws:) when the API is https: the token
 * the API only ever gets encrypted would cross the network readable. A refused one is not
 * used, and the page says why (replies then arrive over HTTP). */
function socketRefusal(address) {
  const host = socketHost(address);
  if (host === null || ![new URL(apiBase).host, socketHost(configuredSocket)].includes(host)) return "host";
  if (new URL(apiBase).protocol === "https:" && new URL(address).protocol !== "wss:") return "cleartext";
  return null;
}

/** "host" or "cleartext" when the link's ?ws= is refused, else null. */
export const refusedWebSocketReason = askedSocket ? socketRefusal(askedSocket) : null;
const socketAllowed = refusedWebSocketReason === null;
export const refusedWebSocketUrl = socketAllowed ? null : askedSocket;
export const webSocketUrl = socketAllowed ? askedSocket || configuredSocket : null;
/** Where the socket goes when it is not the API's own host: the sign-in page names it too. */
export const webSocketElsewhere =
  webSocketUrl && socketHost(webSocketUrl) !== new URL(apiBase).host ? new URL(webSocketUrl).origin : null;

/** Served by make dev on this machine: the only place local tokens work. */
export const isLocal =
  new URL(apiBase).origin === location.origin &&
  ["127.0.0.1", "localhost", "[::1]"].includes(location.hostname);

/** The token signed in for this page's API, or null. A link naming another API (`?api=`)
 * opened in a signed-in tab would otherwise send it the token this tab already holds,
 * with no paste and no prompt: there the page asks to sign in again. */
export function token() {
  if (sessionStorage.getItem(TOKEN_API) !== apiBase) return null;
  return sessionStorage.getItem(TOKEN);
}

export function signIn(newToken) {
  sessionStorage.setItem(TOKEN, newToken.trim());
  sessionStorage.setItem(TOKEN_API, apiBase);
}

export function signOut() {
  sessionStorage.removeItem(TOKEN);
  sessionStorage.removeItem(TOKEN_API);
}
