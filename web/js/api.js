// The HTTP API: every answer decoded, every error turned into words a person can act on.
import { apiBase, token } from "./session.js";

export class ApiError extends Error {
  constructor(status, body, retryAfter) {
    const info = (body && body.error) || {};
    const words = info.message || (body && body.message) || `The API answered ${status}.`;
    super(words);
    this.status = status;
    this.code = info.code || (status === 0 ? "network" : `http_${status}`);
    this.details = info.details || [];
    this.body = body;
    this.retryAfter = retryAfter;
  }

  /** The message, with the fields a 422 names. */
  get words() {
    const fields = this.details
      .filter((detail) => detail.field)
      .map((detail) => {
        const allowed = Array.isArray(detail.allowed) ? ` (one of ${detail.allowed.join(", ")})` : "";
        return `${detail.field}: ${detail.message || detail.type || "not valid"}${allowed}`;
      })
      .filter((words) => !this.message.includes(words.slice(words.indexOf(": ") + 2)));
    const wait = this.retryAfter ? ` Try again in ${this.retryAfter} s.` : "";
    return [this.message, ...fields].join(" — ") + wait;
  }
}

export async function request(method, path, body, { idempotencyKey, raw } = {}) {
  const headers = { authorization: `Bearer ${token()}` };
  if (body !== undefined) headers["content-type"] = "application/json";
  if (idempotencyKey) headers["idempotency-key"] = idempotencyKey;
  let response;
  try {
    response = await fetch(apiBase + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    throw new ApiError(0, { error: { code: "network", message: `Cannot reach the API at ${apiBase}.` } });
  }
  if (raw && response.ok) return response;
  const text = await response.text();
  let decoded = null;
  try {
    decoded = text ? JSON.parse(text) : null;
  } catch {
    decoded = { error: { code: `http_${response.status}`, message: text.slice(0, 200) } };
  }
  if (!response.ok) {
    // The token expired or was revoked: the page hears of it and returns to sign-in.
    if (response.status === 401) document.dispatchEvent(new CustomEvent("recall:unauthorized"));
    throw new ApiError(response.status, decoded, response.headers.get("retry-after"));
  }
  return { status: response.status, body: decoded, location: response.headers.get("location") };
}

export const get = (path) => request("GET", path).then((answer) => answer.body);
export const send = (method, path, body, options) =>
  request(method, path, body, options).then((answer) => answer.body);

export const enc = encodeURIComponent;
