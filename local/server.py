"""The whole API on one machine (``make dev``): each HTTP request becomes the HTTP API
(payload v2) event API Gateway would send, routed by ``template.yaml`` and handled by the
real function code in-process, over the embedded DynamoDB and SQS (``local/gateway.py``).
Beside the API, the worker drains the memory jobs queue and the maintenance schedules run
on a timer (``local/background.py``), and ``POST /_local/jobs/<job>`` runs one job at once
(``make job``): a local-only route, not part of the API.

Local auth mimics the JWT authorizer's outcomes (401 without a usable token, the ``sub``
claim as the caller) but never checks a signature: anyone can mint a token, so this
server is for local use only, and it answers only requests addressed to loopback.

Werkzeug reads each request: its request handler frames the head into a WSGI environ, its
request object gives the headers, the host and a ``Content-Length`` body held to the
limit. Three things it reads more loosely than API Gateway stay here: a chunked body (its
reader takes no chunk extensions, leaves trailers unread and reads a chunk of any size), a
``Content-Length`` that is not a number (it reads 0, and the body as the next request),
and the connection, kept open for the next request (its server closes it each time)."""

from __future__ import annotations

import argparse
from contextlib import suppress
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
import io
import os
from pathlib import Path
import re
import signal
import socket
import sys
import threading
import time
from types import FrameType
from typing import Any
import warnings

import boto3
from werkzeug.exceptions import BadRequest, Forbidden, HTTPException, RequestEntityTooLarge
from werkzeug.exceptions import NotImplemented as CodingNotImplemented
from werkzeug.http import parse_list_header
from werkzeug.serving import WSGIRequestHandler
from werkzeug.wrappers import Request

from local import cors, embedded, gateway, template, websocket
from local.background import Background, job_names
from local.gateway import BODY_MAX_BYTES, LOCAL_JOBS, Reply, open_routes
from local.snapshot import Snapshots, forget
from local.tokens import demo_token, subject_of
from recall.settings import get_settings
from recall.store.dynamodb import dynamodb_client

__all__ = ["BODY_MAX_BYTES", "LOCAL_JOBS", "LocalApi", "main", "open_routes", "serve"]

HOST = "127.0.0.1"
DEFAULT_PORT = 3000
AUTH_WARNING = (
    "Local auth reads the JWT's sub claim WITHOUT checking its signature: "
    "for local use only, never expose this server."
)
CHUNK_LINE_MAX_BYTES = 4096
"""A chunk's size line (with any extensions), and each trailer line, at most."""
CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")
TRAILER_LINES_MAX = 100
LINGER_SECONDS = 2.0
LINGER_BYTES = 1_048_576
"""After refusing a body it has not read, the server reads and drops this much of it for
this long before closing, so the client reads the answer instead of a reset connection."""
REQUEST_BACKLOG = 128
"""Connections the kernel holds until the server accepts them. socketserver's 5 overflows
under a burst of clients (a browser's parallel requests, a load test): Linux drops the
extra handshakes, which then wait a second to retry, and macOS resets them."""


def read_chunked(rfile: io.BufferedIOBase) -> bytes:
    """A chunked body, each chunk counted against ``BODY_MAX_BYTES`` before it is read;
    `BadRequest` for framing that is not HTTP/1.1's, `RequestEntityTooLarge` past it."""
    parts: list[bytes] = []
    total = 0
    while True:
        line = rfile.readline(CHUNK_LINE_MAX_BYTES + 1)
        found = CHUNK_SIZE.fullmatch(line.split(b";", 1)[0].strip())
        if found is None or len(line) > CHUNK_LINE_MAX_BYTES or not line.endswith(b"\n"):
            raise BadRequest
        size = int(found[0], 16)
        if size == 0:
            break
        total += size
        if total > BODY_MAX_BYTES:
            raise RequestEntityTooLarge
        chunk = rfile.read(size)
        if len(chunk) < size or rfile.readline(2) not in {b"\r\n", b"\n"}:
            raise BadRequest
        parts.append(chunk)
    # Trailers are read and dropped: no field of the event holds them.
    for _ in range(TRAILER_LINES_MAX):
        line = rfile.readline(CHUNK_LINE_MAX_BYTES + 1)
        if line.strip() == b"":
            return b"".join(parts)
        if len(line) > CHUNK_LINE_MAX_BYTES:
            break
    raise BadRequest


def declared_length(values: list[str] | None) -> int:
    """The one ``Content-Length`` (0 when absent) as a number, one past the limit when it
    is too long to be under it; `BadRequest` for anything else (two, or not digits)."""
    text = (values or ["0"])[0].strip() or "0"
    if len(values or []) > 1 or not (text.isascii() and text.isdigit()):
        raise BadRequest
    significant = text.lstrip("0")
    return int(significant or "0") if len(significant) <= 18 else BODY_MAX_BYTES + 1


class _Server(ThreadingHTTPServer):
    """The HTTP server, knowing the store its local routes work on, with what Werkzeug's
    request handler reads of its server."""

    request_queue_size = REQUEST_BACKLOG
    daemon_threads = True
    multithread, multiprocess, ssl_context = True, False, None
    store: embedded.EmbeddedStore | None = None


class _RequestHandler(WSGIRequestHandler):
    """Werkzeug's request handler, every method (``do_*``) served by ``run_wsgi``: here API
    Gateway's steps rather than a WSGI application, on a connection kept open."""

    protocol_version = "HTTP/1.1"

    @property
    def server_version(self) -> str:  # type: ignore[override]
        return "RecallLocal/1"

    def run_wsgi(self) -> None:
        started = time.perf_counter()
        unread = False  # a refused request's body: the connection cannot go on after it
        try:
            try:
                request = Request(self.make_environ())
            except ValueError as unreadable:  # a target no URL parser reads ("//[x")
                raise BadRequest from unreadable
            if not gateway.is_loopback(request.host):  # before anything, the socket too
                print(f"refused a request to host {request.host[:100]!r}", flush=True)
                raise Forbidden
            headers = {name.lower(): value for name, value in request.headers.items()}
            if websocket.is_upgrade(self.path, headers):
                websocket.serve(self, subject_of)
                return
            body = self._body(request)
        except HTTPException as refused:
            unread = self.close_connection = True
            reply = Reply.of_json(refused.code or 400, gateway.REFUSALS[refused.code or 400])
        else:
            store = getattr(self.server, "store", None)
            reply = gateway.handle(self.command, self.path, headers, body or None, store)
        reply.headers.update(cors.answer_headers(self.headers.get("origin")))
        elapsed = (time.perf_counter() - started) * 1000
        print(f"{self.command} {self.path} {reply.status} {elapsed:.0f}ms", flush=True)
        self._send(reply)
        if unread:
            self._linger()

    def _body(self, request: Request) -> bytes:
        """The body as HTTP/1.1 frames it (``Content-Length`` or chunked); 413 past
        ``BODY_MAX_BYTES`` (read no further), 400 for framing that is not HTTP/1.1's, 501
        for a transfer coding other than chunked."""
        coding = request.headers.get("transfer-encoding")
        if coding is None:
            if declared_length(self.headers.get_all("content-length")) > BODY_MAX_BYTES:
                raise RequestEntityTooLarge  # Werkzeug reads 5,000 digits as 0
            return request.get_data()
        codings = [part.lower() for part in parse_list_header(coding)]
        if not codings or codings[-1] != "chunked" or "content-length" in request.headers:
            raise BadRequest
        if codings != ["chunked"]:
            raise CodingNotImplemented
        return read_chunked(self.rfile)

    def _send(self, reply: Reply) -> None:
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
        with suppress(BadRequest):
            if declared_length(self.headers.get_all("content-length")) > BODY_MAX_BYTES:
                return True
        return super().handle_expect_100()

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """Silenced: ``run_wsgi`` prints one shorter line per request (and Werkzeug's line
        parses the target again, which fails on one no URL parser reads)."""

    def log(self, type: str, message: str, *args: Any) -> None:
        """Silenced, as ``http.server``'s own lines were."""


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
