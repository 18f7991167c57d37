"""The API's edges: the HTTP API's resolver (``recall.api.http``), the WebSocket API's
frames (``recall.api.stream``) and what both answer, errors included
(``recall.api.errors``). Empty on purpose: a WebSocket function imports none of the HTTP
resolver, Powertools' event handler and its OpenAPI machinery."""
