// A chat turn over the WebSocket API (the reply streams in), or over POST …/chat when no
// socket can be opened (the reply arrives whole). Frames follow the lead's contract:
// start, delta…, tool…, then done or error, each carrying the request's requestId.
import { ApiError, enc, request } from "./api.js";
import { token, webSocketUrl } from "./session.js";

const OPEN_TIMEOUT_MS = 4000;
const RETRY_SOCKET_AFTER_MS = 30000;

export class Turns {
  constructor(onTransport) {
    this.socket = null;
    this.pending = new Map();
    this.failedAt = 0;
    this.onTransport = onTransport;
    this.counter = 0;
  }

  /** The open socket, or null when none opens in time (then HTTP for a while). */
  async socketOrNull() {
    if (this.socket && this.socket.readyState === WebSocket.OPEN) return this.socket;
    if (Date.now() - this.failedAt < RETRY_SOCKET_AFTER_MS) return null;
    const opened = await new Promise((resolve) => {
      let socket;
      try {
        socket = new WebSocket(webSocketUrl, ["bearer", token()]);
      } catch {
        resolve(null);
        return;
      }
      const timer = setTimeout(() => {
        socket.close();
        resolve(null);
      }, OPEN_TIMEOUT_MS);
      socket.addEventListener("open", () => {
        clearTimeout(timer);
        resolve(socket);
      });
      socket.addEventListener("error", () => {
        clearTimeout(timer);
        resolve(null);
      });
    });
    if (opened === null) {
      this.failedAt = Date.now();
      this.onTransport("http");
      return null;
    }
    this.socket = opened;
    opened.addEventListener("message", (event) => this.receive(event.data));
    opened.addEventListener("close", () => this.lost(opened));
    this.onTransport("socket");
    return opened;
  }

  receive(data) {
    let frame;
    try {
      frame = JSON.parse(data);
    } catch {
      return;
    }
    const handlers = this.pending.get(frame.requestId);
    if (!handlers) return;
    if (frame.type === "start") handlers.start(frame.conversation);
    else if (frame.type === "delta") handlers.delta(frame.text);
    else if (frame.type === "tool") handlers.tool(frame);
    else if (frame.type === "done") {
      this.pending.delete(frame.requestId);
      handlers.done(frame.body, "stream");
    } else if (frame.type === "error") {
      this.pending.delete(frame.requestId);
      handlers.error(new ApiError(frame.status, frame.body, frame.retryAfter));
    }
  }

  /** A socket that closes mid-turn fails its turns; their retry reuses the key. */
  lost(socket) {
    if (this.socket === socket) this.socket = null;
    for (const [id, handlers] of this.pending) {
      this.pending.delete(id);
      handlers.error(
        new ApiError(0, {
          error: { code: "connection_lost", message: "The connection closed before the reply ended." },
        }),
      );
    }
  }

  /** One turn; `handlers` hears start, delta, tool, then done(reply, how) or error(ApiError). */
  async send(projectId, body, idempotencyKey, handlers) {
    const socket = await this.socketOrNull();
    if (socket) {
      this.counter += 1;
      const requestId = `turn-${Date.now().toString(36)}-${this.counter}`;
      this.pending.set(requestId, handlers);
      socket.send(JSON.stringify({ action: "chat", requestId, projectId, idempotencyKey, body }));
      return;
    }
    try {
      const answer = await request("POST", `/projects/${enc(projectId)}/chat`, body, { idempotencyKey });
      handlers.start(answer.body.conversation);
      handlers.done(answer.body, "whole");
    } catch (error) {
      handlers.error(error);
    }
  }
}
