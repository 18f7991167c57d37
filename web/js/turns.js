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
    // Another request of the turn still runs (the first, when this one was its resend or
    // retry): the 409 says so, and that one's frames come to this turn. It is running.
    if (frame.type === "error" && frame.status === 409 && turn.ids.length > 1) {
      this.heard(turn);
      return;
    }
    // A 401 answering the frame sent again (the token expired while the turn waited) is that
    // request's alone: the first one, running or lost, is not refused by it, and the socket
    // is not closed by it. The turn fails with a message and keeps listening; the session
    // ends only on an answer of its own (the API's next 401, or the socket closing).
    if (frame.type === "error" && frame.status === 401 && frame.requestId === turn.resentId) {
      clearTimeout(turn.timer);
      turn.failed = true;
      const words = new ApiError(frame.status, frame.body).message;
      const message = `The message sent again was refused (${words}). The first may still answer here.`;
      turn.handlers.error(new ApiError(0, { error: { code: "resend_refused", message } }));
      return;
    }
    if (frame.type === "done" || frame.type === "error") this.forget(turn);
    else this.heard(turn);
    const { handlers } = turn;
    if (frame.type === "start") handlers.start(frame.conversation);
    else if (frame.type === "delta") handlers.delta(frame.text);
    else if (frame.type === "tool") handlers.tool(frame);
    else if (frame.type === "done") handlers.done(frame.body, "stream");
    else if (frame.type === "error") handlers.error(new ApiError(frame.status, frame.body, frame.retryAfter));
  }

  /** A frame came: the turn runs server-side, and a streamed reply may pause long between
   * frames (a tool round, a slow model), so it waits `config.replyStreamSeconds` for the
   * next one, never sending again (its frames would be answered 409, or it would be run). */
  heard(turn) {
    turn.heard = true;
    turn.failed = false; // one that failed and hears its reply after all is running again
    this.listen(turn);
  }

  /** The turn's timer, started again: the short silence while nothing is heard (the frame
   * may have been lost on its way), the stream's wait once something is. */
  listen(turn) {
    clearTimeout(turn.timer);
    const seconds = turn.heard ? config.replyStreamSeconds : config.replySilenceSeconds;
    turn.timer = setTimeout(() => this.silent(turn), seconds * 1000);
  }

  /** Nothing heard yet: the frame goes once more, under a new requestId (so its answers are
   * told apart) and the same key (so the turn runs at most once). Still nothing, or a
   * stream that stopped: the turn fails with a Retry, but keeps listening, so frames that
   * come late are still shown. */
  silent(turn) {
    if (!turn.heard && !turn.resent && turn.socket.readyState === WebSocket.OPEN) {
      turn.resent = true;
      turn.resentId = this.post(turn);
      this.listen(turn);
      return;
    }
    turn.failed = true;
    const message = turn.heard
      ? `The reply stopped: nothing came for ${config.replyStreamSeconds} s. It may still arrive here.`
      : "No answer came, even to the message sent again. If it comes later, it shows here.";
    turn.handlers.error(new ApiError(0, { error: { code: "no_answer", message } }));
  }

  /** The turn's frame, sent under a requestId of its own that the turn answers to. */
  post(turn) {
    const requestId = this.newRequestId();
    turn.ids.push(requestId);
    this.pending.set(requestId, turn);
    turn.socket.send(this.frameOf(turn, requestId));
    return requestId;
  }

  newRequestId() {
    return `turn-${Date.now().toString(36)}-${(this.counter += 1)}`;
  }

  frameOf(turn, requestId) {
    const { projectId, key, body } = turn;
    return JSON.stringify({ action: "chat", requestId, projectId, idempotencyKey: key, body });
  }

  forget(turn) {
    clearTimeout(turn.timer);
    for (const id of turn.ids) this.pending.delete(id);
  }

  /** A socket that closes mid-turn fails its turns; their retry reuses the key. One that
   * already failed and was only listening shows its failure already. */
  lost(socket) {
    if (this.socket === socket) this.socket = null;
    for (const turn of new Set(this.pending.values())) {
      if (turn.socket !== socket) continue;
      this.forget(turn);
      if (turn.failed) continue;
      turn.handlers.error(
        new ApiError(0, {
          error: { code: "connection_lost", message: "The connection closed before the reply ended." },
        }),
      );
    }
  }

  /** One turn; `handlers` hears start, delta, tool, then done(reply, how) or error(ApiError).
   * A retry of a failed turn that is still listening on the socket takes it over: the
   * first run's frames, which may yet come, feed the retry, and its reply is shown once. */
  async send(projectId, body, idempotencyKey, handlers) {
    const turn = { projectId, key: idempotencyKey, body, handlers, ids: [], heard: false, resent: false, resentId: null, failed: false, timer: null };
    // A frame past the limit is never sent: that turn goes over HTTP, whose answer says why.
    const fits = new TextEncoder().encode(this.frameOf(turn, this.newRequestId())).length <= FRAME_MAX_BYTES;
    const socket = fits ? await this.socketOrNull() : null;
    const listening = [...new Set(this.pending.values())].find((one) => one.key === idempotencyKey && one.failed);
    if (listening && listening.socket !== socket) this.forget(listening);
    if (socket && listening && listening.socket === socket) {
      Object.assign(listening, { handlers, failed: false, resent: false, resentId: null });
      this.post(listening);
      this.listen(listening);
      return;
    }
    if (socket) {
      turn.socket = socket;
      this.post(turn);
      this.listen(turn);
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
