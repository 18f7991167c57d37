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
  // A streamed turn that hears nothing for this long sends its frame again under its
  // idempotency key; after as long again it fails, with a Retry (README: Streamed replies).
  replySilenceSeconds: 45,
  // How often an import's progress is read; a failed read waits twice as long each time.
  importPollSeconds: 1,
};
