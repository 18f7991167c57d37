// A chat turn over the WebSocket API (the reply streams in), or over POST …/chat when no
// socket can be opened (the reply arrives whole). Frames follow the lead's contract:
// start, delta…, tool…, then done or error, each carrying the request's requestId.
import { config } from "../config.js";
import { ApiError, enc, request } from "./api.js";
import { token, webSocketUrl } from "./session.js";

const OPEN_TIMEOUT_MS = 4000;
const RETRY_SOCKET_AFTER_MS = 30000;
// API Gateway's WebSocket message limit (make dev's too): a bigger frame closes the socket.
const FRAME_MAX_BYTES = 128 * 1024;

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
    if (webSocketUrl === null) {
      this.onTransport("refused");
      return null;
    }
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
    const turn = this.pending.get(frame.requestId);
    if (!turn) return;
    const { handlers } = turn;
    // A frame sent again while the first still runs is answered 409: the first one's frames
    // (same requestId) are still to come, so the turn waits on.
    if (frame.type === "error" && frame.status === 409 && turn.resent) return;
    this.listen(frame.requestId);
    if (frame.type === "start") handlers.start(frame.conversation);
    else if (frame.type === "delta") handlers.delta(frame.text);
    else if (frame.type === "tool") handlers.tool(frame);
    else if (frame.type === "done") {
      this.forget(frame.requestId);
      handlers.done(frame.body, "stream");
    } else if (frame.type === "error") {
      this.forget(frame.requestId);
      handlers.error(new ApiError(frame.status, frame.body, frame.retryAfter));
    }
  }

  /** The turn's silence timer, started again: after `config.replySilenceSeconds` with no
   * frame the frame is sent once more under its key (which never runs a turn twice), and
   * after as long again the turn fails, with a Retry. */
  listen(requestId) {
    const turn = this.pending.get(requestId);
    if (!turn) return;
    clearTimeout(turn.timer);
    turn.timer = setTimeout(() => this.silent(requestId), config.replySilenceSeconds * 1000);
  }

  silent(requestId) {
    const turn = this.pending.get(requestId);
    if (!turn) return;
    if (!turn.resent && turn.socket.readyState === WebSocket.OPEN) {
      turn.resent = true;
      turn.socket.send(turn.frame);
      this.listen(requestId);
      return;
    }
    this.forget(requestId);
    turn.handlers.error(
      new ApiError(0, {
        error: { code: "no_answer", message: "No answer came, even to the message sent again." },
      }),
    );
  }

  forget(requestId) {
    const turn = this.pending.get(requestId);
    if (turn) clearTimeout(turn.timer);
    this.pending.delete(requestId);
  }

  /** A socket that closes mid-turn fails its turns; their retry reuses the key. */
  lost(socket) {
    if (this.socket === socket) this.socket = null;
    for (const [id, turn] of this.pending) {
      if (turn.socket !== socket) continue;
      this.forget(id);
      turn.handlers.error(
        new ApiError(0, {
          error: { code: "connection_lost", message: "The connection closed before the reply ended." },
        }),
      );
    }
  }

  /** One turn; `handlers` hears start, delta, tool, then done(reply, how) or error(ApiError). */
  async send(projectId, body, idempotencyKey, handlers) {
    const requestId = `turn-${Date.now().toString(36)}-${(this.counter += 1)}`;
    const frame = JSON.stringify({ action: "chat", requestId, projectId, idempotencyKey, body });
    // A frame past the limit is never sent: that turn goes over HTTP, whose answer says why.
    const fits = new TextEncoder().encode(frame).length <= FRAME_MAX_BYTES;
    const socket = fits ? await this.socketOrNull() : null;
    if (socket) {
      this.pending.set(requestId, { handlers, socket, frame, resent: false, timer: null });
      socket.send(frame);
      this.listen(requestId);
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
