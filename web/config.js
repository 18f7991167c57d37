// Where the console finds the API. Served by `make dev`, leave both empty: the API is this
// page's own origin and the WebSocket is its /ws path. Hosted apart from a deployed API,
// set them (or open the page with ?api=…&ws=…, for that page only):
//   apiBase: "https://{apiId}.execute-api.{region}.amazonaws.com",
//   webSocketUrl: "wss://{wsApiId}.execute-api.{region}.amazonaws.com/{stage}",
// and list the page's origin in the stack's CorsAllowedOrigins parameter.
export const config = {
  apiBase: "",
  webSocketUrl: "",
  // The API's defaults (NUDGE_THRESHOLD_TURNS, MEMORY_CAP, TITLE_MAX_CHARS, MESSAGE_MAX_CHARS);
  // a chat reply's nudge corrects the first.
  nudgeThresholdTurns: 120,
  memoryCap: 50,
  titleMaxChars: 80,
  // MESSAGE_MAX_CHARS: a longer message is not sent (the API would refuse it, and over the
  // socket its frame could pass the 128 KB limit).
  messageMaxChars: 16000,
  // A streamed turn that hears nothing at all for this long sends its frame again (a new
  // requestId, the same idempotency key); after as long again it fails, with a Retry, and
  // still shows the reply if it comes later (README: Streamed replies).
  replySilenceSeconds: 45,
  // Once the turn's start frame came it runs on the server: it waits this long between two
  // frames (a tool round, a slow model) before failing; the stream worker's own limit.
  replyStreamSeconds: 300,
  // How often an import's progress is read; a failed read waits twice as long each time.
  importPollSeconds: 1,
};
