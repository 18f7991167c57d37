"""What API Gateway does with one of ``make dev``'s HTTP requests once the server has read
it (``local/server.py``): decode the path, route it by ``template.yaml``, authorize it,
build the payload v2 event, refuse it past Lambda's payload limit, invoke the function in
process and read its response back. A path no route takes may be one of the web console's
files (``local/static.py``); ``/_local/`` is this server's own, never the API's.

Two rules are make dev's own, not API Gateway's, because it runs on a developer's machine
beside their browser: it answers only requests addressed to a loopback name (a page on
another site that rebinds its name to 127.0.0.1 would otherwise read the API), and its
``/_local/`` routes take the same local token as the API (no page can send one with a
cross-site form post)."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from functools import cache
import json
import re
import traceback
from typing import Any
from urllib.parse import unquote_to_bytes

from local import cors, embedded, runtime, static, template
from local.background import job_names, run_job
from local.tokens import subject_of
from recall.api.bodies import json_bytes

NOT_FOUND = {"message": "Not Found"}
BAD_REQUEST = {"message": "Bad Request"}
UNAUTHORIZED = {"message": "Unauthorized"}
INTERNAL_ERROR = {"message": "Internal Server Error"}
TOO_LONG = {"message": "Request Too Long"}
NOT_IMPLEMENTED = {"message": "Not Implemented"}
LOOPBACK = re.compile(r"(?:127\.0\.0\.1|localhost|\[::1\])(?::[0-9]{1,5})?", re.IGNORECASE)
NOT_LOOPBACK = {
    "message": "Forbidden: make dev answers only requests to 127.0.0.1, localhost or [::1]"
}
# The server's answers to a request it does not pass on, by status.
REFUSALS = {400: BAD_REQUEST, 403: NOT_LOOPBACK, 413: TOO_LONG, 501: NOT_IMPLEMENTED}
LOCAL = "/_local/"
LOCAL_JOBS = "/_local/jobs/"

BODY_MAX_BYTES = 6_291_456
"""Lambda's limit on a synchronous invocation's payload (6 MB): API Gateway answers a
larger request 413 ``{"message": "Request Too Long"}`` without invoking anything (its own
limit, 10 MB, is above it). Past it the server reads nothing more of the body; a body
read is then held to it again as the event (`recall.api.bodies.json_bytes`), where it is
escaped."""


def gateway_path(raw: str) -> str | None:
    """The path as API Gateway's HTTP API routes it and hands it to the function: percent-
    decoded once, as UTF-8, into ``rawPath`` and ``pathParameters`` alike (so ``%2F``
    separates segments like ``/``). ``raw`` is the request line's, one character a byte
    (``http.server`` reads it as Latin-1). None when the bytes are not UTF-8 text."""
    try:
        data = raw.encode("latin-1")
    except UnicodeEncodeError:  # already text, not the request line's bytes
        data = raw.encode()
    try:
        return unquote_to_bytes(data).decode()
    except UnicodeDecodeError:
        return None


def is_loopback(host: str | None) -> bool:
    """Whether a ``Host`` names this machine's loopback (127.0.0.1, localhost or [::1],
    with or without a port): a DNS-rebinding page's requests carry its own name."""
    return host is not None and LOOPBACK.fullmatch(host) is not None


@cache
def open_routes() -> frozenset[str]:
    """Route keys whose template event opts out of the default authorizer."""
    found = set()
    for resource in template.resources("AWS::Serverless::Function").values():
        for event in resource["Properties"].get("Events", {}).values():
            properties = event.get("Properties", {})
            if event["Type"] == "HttpApi" and (
                properties.get("Auth", {}).get("Authorizer") == "NONE"
            ):
                found.add(f"{properties['Method'].upper()} {properties['Path']}")
    return frozenset(found)


@dataclass
class Reply:
    """What goes back on the wire: API Gateway's reading of a Lambda's v2 response."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    cookies: list[str] = field(default_factory=list)
    body: bytes = b""

    @classmethod
    def of_json(cls, status: int, document: Any) -> Reply:
        return cls(
            status,
            {"content-type": "application/json"},
            [],
            json.dumps(document, separators=(",", ":")).encode(),
        )

    @classmethod
    def of(cls, result: Any) -> Reply:
        """A dict with ``statusCode`` is a full response; anything else is a 200 JSON body,
        as the HTTP API's payload v2 format infers."""
        if not isinstance(result, dict) or "statusCode" not in result:
            text = result if isinstance(result, str) else json.dumps(result)
            return cls(200, {"content-type": "application/json"}, [], text.encode())
        body = result.get("body") or ""
        raw = base64.b64decode(body) if result.get("isBase64Encoded") else str(body).encode()
        headers = {str(key): str(value) for key, value in (result.get("headers") or {}).items()}
        for key, values in (result.get("multiValueHeaders") or {}).items():
            headers[str(key)] = ",".join(str(value) for value in values)
        return cls(int(result["statusCode"]), headers, list(result.get("cookies") or []), raw)


def local_route(
    method: str, path: str, authorization: str | None, store: embedded.EmbeddedStore
) -> Reply:
    """``POST /_local/jobs/<job>``: one maintenance job or a drain of the queue, now, on
    this server's store; 200 with its report. Local only, never in the API, and only for a
    caller with a local token, as the API's routes are."""
    if subject_of(authorization) is None:
        return Reply.of_json(401, UNAUTHORIZED)
    name = path.removeprefix(LOCAL_JOBS)
    if not path.startswith(LOCAL_JOBS) or method.upper() != "POST" or name not in job_names():
        return Reply.of_json(404, {**NOT_FOUND, "jobs": job_names()})
    try:
        return Reply.of_json(200, run_job(name, store))
    except Exception as exc:  # reported to the caller; the server goes on
        traceback.print_exc()
        return Reply.of_json(500, {**INTERNAL_ERROR, "error": repr(exc)})


def handle(
    method: str,
    target: str,
    headers: dict[str, str],
    body: bytes | None,
    store: embedded.EmbeddedStore | None = None,
) -> Reply:
    """One request through API Gateway's steps. ``target`` is the request line's, not yet
    decoded; ``headers`` have lower-case names. With ``store``, the local routes are served
    too."""
    raw_path, _, query = target.partition("?")
    if cors.is_preflight(method, headers):
        return Reply(204, cors.preflight_headers(headers.get("origin")))
    if store is not None and raw_path.startswith(LOCAL):
        return local_route(method, raw_path, headers.get("authorization"), store)
    path = gateway_path(raw_path)
    if path is None:
        return Reply.of_json(400, BAD_REQUEST)
    found = runtime.match_route(method, path)
    if found is None:  # not the API's: the web console's files, else API Gateway's 404
        page = static.console_file(method, raw_path)
        return (
            Reply.of_json(404, NOT_FOUND)
            if page is None
            else Reply(200, page.headers, [], page.body)
        )
    route, _ = found
    sub = None
    if route.route_key not in open_routes():
        sub = subject_of(headers.get("authorization"))
        if sub is None:
            return Reply.of_json(401, UNAUTHORIZED)
    event = runtime.http_event(
        method, path, body=body or None, headers=headers, query=query, sub=sub
    )
    cookie_header = event["headers"].pop("cookie", None)
    if cookie_header:
        event["cookies"] = [part.strip() for part in cookie_header.split(";") if part.strip()]
    if json_bytes(event) > BODY_MAX_BYTES:
        return Reply.of_json(413, TOO_LONG)
    try:
        result = runtime.invoke(route.function, event)  # one at a time: see runtime.invoke
    except Exception:  # a crashed function is API Gateway's 500, and the server goes on
        traceback.print_exc()
        return Reply.of_json(500, INTERNAL_ERROR)
    return Reply.of(result)
