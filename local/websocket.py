"""The WebSocket API on ``make dev``'s port, at ``/ws``: ``ws://127.0.0.1:3000/ws``.

Each connection goes through API Gateway's steps, done in-process over wsproto (a sans-IO
WebSocket library) on the HTTP server's own socket: the token (``?token=`` or the
subprotocols ``bearer, <JWT>``) is checked like the HTTP API's local token (no signature:
local only), then the connect, every frame and the disconnect become the events API
Gateway sends the WebSocket functions of ``template.yaml``. The management API's
``PostToConnection`` is answered here too: a post becomes a text frame on the client's
socket, or ``ConnectionGone`` once it has left. The ``chat`` route's asynchronous hand-off
runs the streaming worker on a thread, as Lambda would run it beside the route."""

from __future__ import annotations

import base64
from contextlib import suppress
from http.server import BaseHTTPRequestHandler
import json
import secrets
import threading
import time
import traceback
from typing import Any
from urllib.parse import parse_qs, urlsplit
import uuid

from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Event,
    Ping,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)
from wsproto.utilities import RemoteProtocolError

from local import runtime, template
from local.tokens import expiry_of
from recall.api.stream import Connection, ConnectionGone, Frame
from recall.store.keys import fits_user_id
from recall.wiring import stream_links

PATH = "/ws"
STAGE = "local"
UNAUTHORIZED = b'{"message":"Unauthorized"}'
BAD_REQUEST = b'{"message":"Bad Request"}'
UPGRADE_REQUIRED = b'{"message":"Upgrade Required"}'
# API Gateway's WebSocket message limit: past it, the connection is closed with 1009.
MESSAGE_MAX_BYTES = 128 * 1024
MESSAGE_TOO_BIG = 1009


def is_upgrade(target: str, headers: dict[str, str]) -> bool:
    """Whether a request asks for the WebSocket API: ``/ws`` with ``Upgrade: websocket``."""
    return urlsplit(target).path == PATH and headers.get("upgrade", "").lower() == "websocket"


def function_of(directory: str) -> str:
    """The template function whose ``CodeUri`` is ``functions/<directory>``."""
    (name,) = (name for name, path in template.code_dirs().items() if path.name == directory)
    return name


def token_of(target: str, protocols: list[str]) -> str | None:
    """The JWT from ``?token=``, else the one after ``bearer`` in the subprotocols."""
    query = parse_qs(urlsplit(target).query)
    if query.get("token"):
        return query["token"][0]
    if "bearer" in protocols[:-1]:
        return protocols[protocols.index("bearer") + 1]
    return None


class Client:
    """One open connection: its socket and wsproto state, shared by the reading thread and
    whichever thread posts a frame."""

    def __init__(self, handler: BaseHTTPRequestHandler, socket_state: WSConnection) -> None:
        self._handler = handler
        self._state = socket_state
        self._lock = threading.Lock()
        self.open = True
        self.closing = False

    def received(self, data: bytes) -> list[Event]:
        """What ``data`` from the client holds; under the lock, as wsproto is not thread-safe."""
        with self._lock:
            self._state.receive_data(data)
            return list(self._state.events())

    def send(self, event: Event) -> None:
        with self._lock:
            if not self.open:
                raise ConnectionGone
            try:
                self._handler.connection.sendall(self._state.send(event))
            except OSError as gone:
                self.open = False
                raise ConnectionGone from gone

    def close(self, code: int = 1000, reason: str | None = None) -> None:
        """The server's close, as API Gateway's ``DeleteConnection`` sends it (1000), or for
        a message too big (1009). The reading thread drops what the client still sends and
        ends on its reply: a socket closed with bytes unread is reset, and the reset can
        overtake the close frame, which the client then never reads."""
        with self._lock:
            if not self.open or self.closing:
                return
            self.closing = True
            with suppress(OSError):
                self._handler.connection.sendall(self._state.send(CloseConnection(code, reason)))


class LocalConnections:
    """The management API and the asynchronous hand-off, in-process."""

    def __init__(self) -> None:
        self._clients: dict[str, Client] = {}
        self._lock = threading.Lock()

    def add(self, connection_id: str, client: Client) -> None:
        with self._lock:
            self._clients[connection_id] = client

    def remove(self, connection_id: str) -> None:
        with self._lock:
            client = self._clients.pop(connection_id, None)
        if client is not None:
            client.open = False

    def connection(self, domain: str, stage: str, connection_id: str) -> Connection:
        return _Posting(self, connection_id)

    def post(self, connection_id: str, frame: Frame) -> None:
        with self._lock:
            client = self._clients.get(connection_id)
        if client is None:
            raise ConnectionGone(connection_id)
        client.send(TextMessage(data=json.dumps(frame, ensure_ascii=False)))

    def close(self, connection_id: str) -> None:
        with self._lock:
            client = self._clients.get(connection_id)
        if client is not None:
            client.close()

    def hand_off(self, payload: dict[str, Any]) -> None:
        worker = threading.Thread(
            target=_run_quietly,
            args=(function_of("ws_stream"), payload),
            name="recall-local-stream",
            daemon=True,
        )
        worker.start()


class _Posting:
    def __init__(self, connections: LocalConnections, connection_id: str) -> None:
        self._connections = connections
        self._connection_id = connection_id

    def post(self, frame: Frame) -> None:
        self._connections.post(self._connection_id, frame)

    def close(self) -> None:
        self._connections.close(self._connection_id)


def _run_quietly(function: str, event: dict[str, Any]) -> None:
    """An asynchronous invocation: its result goes nowhere, its crash to the log."""
    try:
        runtime.invoke(function, event)
    except Exception:  # Lambda logs an async invocation's failure; so does make dev
        traceback.print_exc()


CONNECTIONS = LocalConnections()


def websocket_event(
    route: str,
    kind: str,
    connection_id: str,
    sub: str,
    domain: str,
    *,
    body: str | None = None,
    headers: dict[str, str] | None = None,
    query: dict[str, str] | None = None,
    exp: str | None = None,
) -> dict[str, Any]:
    """The event API Gateway's WebSocket API sends a Lambda proxy integration; its
    ``authorizer`` is what the $connect authorizer returned (``exp`` when the token has
    one)."""
    now = int(time.time() * 1000)
    event: dict[str, Any] = {
        "requestContext": {
            "routeKey": route,
            "eventType": kind,
            "messageDirection": "IN",
            "connectionId": connection_id,
            "domainName": domain,
            "stage": STAGE,
            "apiId": "local",
            "requestId": str(uuid.uuid4()),
            "extendedRequestId": str(uuid.uuid4()),
            "requestTimeEpoch": now,
            "connectedAt": now,
            "identity": {"sourceIp": "127.0.0.1"},
            "authorizer": {"principalId": sub, "sub": sub, **({"exp": exp} if exp else {})},
        },
        "isBase64Encoded": False,
    }
    if body is not None:
        event["body"] = body
    if headers is not None:
        event["headers"] = headers
        event["multiValueHeaders"] = {key: [value] for key, value in headers.items()}
    if query:
        event["queryStringParameters"] = query
    return event


def route_of(body: str) -> str:
    """API Gateway's ``$request.body.action`` selection: ``chat``, else ``$default``."""
    try:
        document = json.loads(body)
    except ValueError:
        return "$default"
    return "chat" if isinstance(document, dict) and document.get("action") == "chat" else "$default"


def _is_key(values: list[str]) -> bool:
    """Whether the handshake has one ``Sec-WebSocket-Key`` that is 16 bytes in base64, as
    RFC 6455 asks (none at all is left to wsproto, which refuses it too)."""
    if not values:
        return True
    if len(values) > 1:
        return False
    try:
        return len(base64.b64decode(values[0].strip(), validate=True)) == 16
    except ValueError:
        return False


def _reject(
    handler: BaseHTTPRequestHandler,
    status: int,
    body: bytes,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    """Answer a handshake that is not one with a plain HTTP response, then close."""
    with suppress(OSError):
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.send_header("Connection", "close")
        for name, value in headers or []:
            handler.send_header(name.decode("latin-1"), value.decode("latin-1"))
        handler.end_headers()
        handler.wfile.write(body)
    print(f"{handler.command} {PATH} {status} (not a WebSocket handshake)", flush=True)


def serve(handler: BaseHTTPRequestHandler, subject_of: Any) -> None:
    """Run one WebSocket connection on ``handler``'s socket until it closes. ``subject_of``
    is the local server's token check (the ``sub``, or None for a 401)."""
    handler.close_connection = True
    state = WSConnection(ConnectionType.SERVER)
    lines = [f"{handler.command} {handler.path} HTTP/1.1"]
    lines += [f"{key}: {value}" for key, value in handler.headers.items()]
    if not _is_key(handler.headers.get_all("sec-websocket-key") or []):
        _reject(handler, 400, BAD_REQUEST)
        return
    try:
        state.receive_data(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    except UnicodeDecodeError:
        # wsproto reads the handshake's own headers as ASCII: a byte past it is no handshake.
        _reject(handler, 400, BAD_REQUEST)
        return
    except RemoteProtocolError as malformed:
        # Not a WebSocket handshake (RFC 6455 section 4.2.1): 400, or 426 naming the
        # version this server speaks when the client asked for another.
        hint = malformed.event_hint
        status = hint.status_code if isinstance(hint, RejectConnection) else 400
        extra = hint.headers if isinstance(hint, RejectConnection) and status == 426 else []
        _reject(handler, status, UPGRADE_REQUIRED if status == 426 else BAD_REQUEST, extra)
        return
    request = next((event for event in state.events() if isinstance(event, Request)), None)
    if request is None:
        _reject(handler, 400, BAD_REQUEST)
        return
    token = token_of(request.target, list(request.subprotocols))
    sub = subject_of(token) if token else None
    exp = expiry_of(token)
    if sub is None or not fits_user_id(sub):  # as the $connect authorizer refuses it
        handler.connection.sendall(
            state.send(
                RejectConnection(
                    status_code=401,
                    headers=[(b"content-type", b"application/json")],
                    has_body=True,
                )
            )
            + state.send(RejectData(data=UNAUTHORIZED))
        )
        return
    stream_links().use(CONNECTIONS)
    chat = function_of("ws_chat")
    connection_id = base64.urlsafe_b64encode(secrets.token_bytes(9)).decode()
    domain = str(handler.headers.get("host") or "127.0.0.1")
    headers = {key: value for key, value in handler.headers.items()}
    query = {key: values[0] for key, values in parse_qs(urlsplit(request.target).query).items()}
    connected = runtime.invoke(
        chat,
        websocket_event(
            "$connect", "CONNECT", connection_id, sub, domain, headers=headers, query=query, exp=exp
        ),
    )
    if int(connected.get("statusCode", 500)) != 200:
        handler.connection.sendall(state.send(RejectConnection(status_code=403)))
        return
    chosen = (connected.get("headers") or {}).get("Sec-WebSocket-Protocol")
    client = Client(handler, state)
    client.send(AcceptConnection(subprotocol=chosen))
    CONNECTIONS.add(connection_id, client)
    print(f"WS connect {connection_id}", flush=True)
    try:
        _read(handler, client, chat, connection_id, sub, domain, exp)
    finally:
        CONNECTIONS.remove(connection_id)
        runtime.invoke(
            chat,
            websocket_event("$disconnect", "DISCONNECT", connection_id, sub, domain, exp=exp),
        )
        print(f"WS disconnect {connection_id}", flush=True)


def _read(
    handler: BaseHTTPRequestHandler,
    client: Client,
    chat: str,
    connection_id: str,
    sub: str,
    domain: str,
    exp: str | None,
) -> None:
    """Frames in until the client closes or leaves; each message is one route invocation."""
    parts: list[str] = []
    size = 0
    while client.open:
        try:
            received = handler.rfile.read1(65536)
        except OSError:
            return
        if not received:
            return
        for event in client.received(received):
            if isinstance(event, CloseConnection):
                if not client.closing:  # the client's own close, answered; else its reply
                    with suppress(ConnectionGone):
                        client.send(event.response())
                return
            if client.closing:  # the server has closed: only the client's reply matters
                continue
            if isinstance(event, Ping):
                try:
                    client.send(event.response())
                except ConnectionGone:
                    return
            elif isinstance(event, TextMessage | BytesMessage):
                data_part = event.data
                part = (
                    data_part
                    if isinstance(data_part, str)
                    else data_part.decode("utf-8", "replace")
                )
                size += len(part.encode("utf-8", "surrogatepass"))
                if size > MESSAGE_MAX_BYTES:
                    client.close(MESSAGE_TOO_BIG, "Message too big")
                    parts, size = [], 0
                    continue
                parts.append(part)
                if event.message_finished:
                    body, parts, size = "".join(parts), [], 0
                    started = time.perf_counter()
                    route = route_of(body)
                    runtime.invoke(
                        chat,
                        websocket_event(
                            route, "MESSAGE", connection_id, sub, domain, body=body, exp=exp
                        ),
                    )
                    elapsed = (time.perf_counter() - started) * 1000
                    print(f"WS {route} {connection_id} {elapsed:.0f}ms", flush=True)
