"""The whole API on one machine (``make dev``): each HTTP request becomes the HTTP API
(payload v2) event API Gateway would send, routed by ``template.yaml`` and handled by the
real function code in-process, over the embedded DynamoDB and SQS. Beside the API, the
worker drains the memory jobs queue and the maintenance schedules run on a timer
(``local/background.py``), and ``POST /_local/jobs/<job>`` runs one job at once (``make
job``): a local-only route, not part of the API.

Local auth mimics the JWT authorizer's outcomes (401 without a usable token, the ``sub``
claim as the caller) but never checks a signature: anyone can mint a token, so this
server is for local use only."""

from __future__ import annotations

import argparse
import base64
from contextlib import suppress
from dataclasses import dataclass, field
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import json
import os
from pathlib import Path
import re
import signal
import socket
import sys
import threading
import time
import traceback
from types import FrameType
from typing import Any
from urllib.parse import unquote_to_bytes
import warnings

import boto3

from local import cors, embedded, runtime, static, template, websocket
from local.background import Background, job_names, run_job
from local.snapshot import Snapshots, forget
from local.tokens import demo_token, subject_of
from recall.api.bodies import json_bytes
from recall.settings import get_settings
from recall.store.dynamodb import dynamodb_client

HOST = "127.0.0.1"
DEFAULT_PORT = 3000
NOT_FOUND = {"message": "Not Found"}
BAD_REQUEST = {"message": "Bad Request"}
UNAUTHORIZED = {"message": "Unauthorized"}
INTERNAL_ERROR = {"message": "Internal Server Error"}
TOO_LONG = {"message": "Request Too Long"}
NOT_IMPLEMENTED = {"message": "Not Implemented"}
LOCAL_JOBS = "/_local/jobs/"
AUTH_WARNING = (
    "Local auth reads the JWT's sub claim WITHOUT checking its signature: "
    "for local use only, never expose this server."
)


BODY_MAX_BYTES = 6_291_456
"""Lambda's limit on a synchronous invocation's payload (6 MB): API Gateway answers a
larger request 413 ``{"message": "Request Too Long"}`` without invoking anything (its own
limit, 10 MB, is above it). Past it the server reads nothing more of the body; a body
read is then held to it again as the event (`recall.api.bodies.json_bytes`), where it is escaped."""
CHUNK_LINE_MAX_BYTES = 4096
"""A chunk's size line (with any extensions), and each trailer line, at most."""
CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")
TRAILER_LINES_MAX = 100
LINGER_SECONDS = 2.0
LINGER_BYTES = 1_048_576
"""After refusing a body it has not read, the server reads and drops this much of it for
this long before closing, so the client reads the answer instead of a reset connection."""


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


def local_job(method: str, path: str, store: embedded.EmbeddedStore) -> Reply:
    """``POST /_local/jobs/<job>``: one maintenance job or a drain of the queue, now, on
    this server's store; 200 with its report. Local only: no token, never in the API."""
    name = path.removeprefix(LOCAL_JOBS)
    if method.upper() != "POST" or name not in job_names():
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
    """One request through API Gateway's steps: decode the path, route, authorize, build
    the event, refuse it past Lambda's payload limit, invoke. With ``store``, the local-only
    job route is served too; a path no route takes may be one of the web console's files
    (``local/static.py``)."""
    raw_path, _, query = target.partition("?")
    if cors.is_preflight(method, headers):
        return Reply(204, cors.preflight_headers(headers.get("origin")))
    if store is not None and raw_path.startswith(LOCAL_JOBS):
        return local_job(method, raw_path, store)
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


class _RequestHandler(BaseHTTPRequestHandler):
    server_version = "RecallLocal/1"
    protocol_version = "HTTP/1.1"

    def _serve(self) -> None:
        started = time.perf_counter()
        headers: dict[str, str] = {}
        for key, value in self.headers.items():
            name = key.lower()
            headers[name] = f"{headers[name]},{value}" if name in headers else value
        if websocket.is_upgrade(self.path, headers):
            websocket.serve(self, subject_of)
            return
        body = self._body(headers)
        if isinstance(body, Reply):
            reply = body
            self.close_connection = True  # the rest of the body is never read
        else:
            store = getattr(self.server, "store", None)
            reply = handle(self.command, self.path, headers, body or None, store)
        reply.headers.update(cors.answer_headers(headers.get("origin")))
        elapsed = (time.perf_counter() - started) * 1000
        print(f"{self.command} {self.path} {reply.status} {elapsed:.0f}ms", flush=True)
        self.send_response(reply.status)
        for key, value in reply.headers.items():
            if key.lower() not in {"content-length", "connection", "transfer-encoding"}:
                self.send_header(key, value)
        for cookie in reply.cookies:
            self.send_header("Set-Cookie", cookie)
        self.send_header("Content-Length", str(len(reply.body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(reply.body)
        if isinstance(body, Reply):
            self._linger()

    def _body(self, headers: dict[str, str]) -> bytes | Reply:
        """The request's body as HTTP/1.1 frames it (``Content-Length`` or chunked), or the
        answer when it cannot be read: 413 past ``BODY_MAX_BYTES`` (read no further), 400
        for framing that is not HTTP/1.1's, 501 for a transfer coding other than chunked."""
        coding = headers.get("transfer-encoding")
        if coding is not None:
            codings = [part.strip().lower() for part in coding.split(",")]
            if codings[-1] != "chunked" or "content-length" in headers:
                return Reply.of_json(400, BAD_REQUEST)
            if codings != ["chunked"]:
                return Reply.of_json(501, NOT_IMPLEMENTED)
            return self._chunked()
        length = _declared_length(headers)
        if length is None:
            return Reply.of_json(400, BAD_REQUEST)
        if length > BODY_MAX_BYTES:
            return Reply.of_json(413, TOO_LONG)
        return self.rfile.read(length) if length else b""

    def _chunked(self) -> bytes | Reply:
        """A chunked body, each chunk counted against ``BODY_MAX_BYTES`` before it is read."""
        parts: list[bytes] = []
        total = 0
        while True:
            line = self.rfile.readline(CHUNK_LINE_MAX_BYTES + 1)
            found = CHUNK_SIZE.fullmatch(line.split(b";", 1)[0].strip())
            if found is None or len(line) > CHUNK_LINE_MAX_BYTES or not line.endswith(b"\n"):
                return Reply.of_json(400, BAD_REQUEST)
            size = int(found[0], 16)
            if size == 0:
                break
            total += size
            if total > BODY_MAX_BYTES:
                return Reply.of_json(413, TOO_LONG)
            chunk = self.rfile.read(size)
            if len(chunk) < size or self.rfile.readline(2) not in {b"\r\n", b"\n"}:
                return Reply.of_json(400, BAD_REQUEST)
            parts.append(chunk)
        # Trailers are read and dropped: no field of the event holds them.
        for _ in range(TRAILER_LINES_MAX):
            line = self.rfile.readline(CHUNK_LINE_MAX_BYTES + 1)
            if line.strip() == b"":
                return b"".join(parts)
            if len(line) > CHUNK_LINE_MAX_BYTES:
                break
        return Reply.of_json(400, BAD_REQUEST)

    def _linger(self) -> None:
        """Drop what the client still sends of a refused body for a while, then close."""
        with suppress(OSError):
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_WR)
            self.connection.settimeout(LINGER_SECONDS)
            deadline = time.monotonic() + LINGER_SECONDS
            dropped = 0
            while dropped < LINGER_BYTES and time.monotonic() < deadline:
                received = self.connection.recv(65536)
                if not received:
                    break
                dropped += len(received)

    def handle_expect_100(self) -> bool:
        """``Expect: 100-continue`` for a body over the limit gets the 413 instead of the
        go-ahead, so the client never sends it."""
        length = _declared_length({"content-length": self.headers.get("content-length", "")})
        if length is not None and length > BODY_MAX_BYTES:
            return True
        return super().handle_expect_100()

    # http.server dispatches on do_<METHOD>; every method takes the same path.
    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve  # noqa: N815
    do_OPTIONS = do_HEAD = do_TRACE = do_QUERY = _serve  # noqa: N815

    def log_message(self, format: str, *args: Any) -> None:
        """Silenced: ``_serve`` prints one shorter line per request."""


def _declared_length(headers: dict[str, str]) -> int | None:
    """``Content-Length`` as a number (0 when absent), or None when it is not one. A value
    too long to be under the limit is reported as just over it."""
    text = headers.get("content-length") or "0"
    if not (text.isascii() and text.isdigit()):
        return None
    significant = text.lstrip("0")
    return int(significant or "0") if len(significant) <= 18 else BODY_MAX_BYTES + 1


REQUEST_BACKLOG = 128
"""Connections the kernel holds until the server accepts them. socketserver's 5 overflows
under a burst of clients (a browser's parallel requests, a load test): Linux drops the
extra handshakes, which then wait a second to retry, and macOS resets them."""


class _Server(ThreadingHTTPServer):
    """The HTTP server, knowing the store its local-only job route works on."""

    request_queue_size = REQUEST_BACKLOG
    store: embedded.EmbeddedStore | None = None


@dataclass
class LocalApi:
    """A running server, its thread, the store it uses (stopped with it if it owns it) and,
    for ``make dev``, the worker and schedules running beside it."""

    server: ThreadingHTTPServer
    thread: threading.Thread
    store: embedded.EmbeddedStore
    owns_store: bool
    background: Background | None = None
    snapshots: Snapshots | None = None

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def stop(self) -> None:
        if self.background is not None:
            self.background.stop()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)
        if self.snapshots is not None:
            self.snapshots.stop()
        if self.owns_store:
            self.store.stop()


def serve(
    port: int = 0,
    store: embedded.EmbeddedStore | None = None,
    *,
    jobs: bool = False,
    data: Path | None = None,
) -> LocalApi:
    """Serve on ``port`` (0 picks a free one) in a background thread, over ``store`` or, when
    none is given, a newly started embedded store. ``jobs`` also starts the worker draining
    the queue and the schedules' timer (``make dev``); without it, nothing runs a job until
    ``POST /_local/jobs/<job>`` asks. ``data``, a folder, keeps a new store's tables across
    restarts (``local/snapshot.py``): loaded before the first request, kept current after."""
    owns_store = store is None
    active = store or embedded.start()
    snapshots = None
    try:
        if data is not None and owns_store:
            snapshots = Snapshots(data, active.endpoint, get_settings().local_snapshot_seconds)
            snapshots.restore()
            # Clients made later copy the default session's hooks; the store's exists already.
            snapshots.watch(boto3._get_default_session().events, dynamodb_client().meta.events)
        server = _Server((HOST, port), _RequestHandler)
    except (OSError, ValueError):
        if owns_store:
            active.stop()
        raise
    server.daemon_threads = True
    server.store = active
    thread = threading.Thread(target=server.serve_forever, name="recall-local-api", daemon=True)
    thread.start()
    api = LocalApi(server, thread, active, owns_store, snapshots=snapshots)
    if snapshots is not None:
        snapshots.start()
    if jobs:
        api.background = Background(active)
        api.background.start()
    return api


def _stop(signum: int, frame: FrameType | None) -> None:
    """Ctrl-C and ``kill`` stop alike, even where a shell started us ignoring SIGINT."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local.server", description="make dev")
    parser.add_argument(
        "--reset", action="store_true", help="forget the data kept in LOCAL_DATA_DIR first"
    )
    reset = parser.parse_args(argv).reset
    port_text = os.environ.get("PORT", str(DEFAULT_PORT))
    if not port_text.isdigit():
        print(f"PORT must be a port number, not {port_text!r}", file=sys.stderr)
        return 2
    port = int(port_text)
    warnings.filterwarnings("ignore", message="No application metrics")
    print(AUTH_WARNING, flush=True)
    folder = get_settings().local_data_dir
    data = template.ROOT / folder if folder else None
    if reset and data is not None:
        forget(data)
    try:
        api = serve(port, jobs=True, data=data)
    except OSError as exc:
        print(f"cannot listen on {HOST}:{port}: {exc.strerror}; set PORT", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"{exc}; make dev-reset starts empty", file=sys.stderr)
        return 1
    for stop_signal in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop_signal, _stop)
    assert api.background is not None
    timer = api.background.schedule_seconds
    print(
        f"Embedded DynamoDB and SQS on {api.store.endpoint}; the worker drains "
        f"{', '.join(poller.queue.name for poller in api.background.pollers)}; schedules "
        + (f"every {timer:g} s (LOCAL_SCHEDULE_SECONDS)" if timer > 0 else "off")
        + f"; one job now: make job JOB=<{'|'.join(job_names())}>",
        flush=True,
    )
    print(
        f"Data kept in {data} across restarts (make dev-reset starts empty)"
        if data is not None
        else "Data kept in memory only (LOCAL_DATA_DIR is empty)",
        flush=True,
    )
    print(f"Web console on {api.url}/ (local sign-in, no password)", flush=True)
    print(
        f"Recall API ready on {api.url} (Ctrl-C stops) - try: "
        f"curl -H 'Authorization: Bearer {demo_token('demo-user')}' {api.url}/projects",
        flush=True,
    )
    try:
        while api.thread.is_alive():
            api.thread.join(timeout=0.5)
    except KeyboardInterrupt:
        print("stopping", flush=True)
    finally:
        api.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
