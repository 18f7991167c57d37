"""Streamed chat over ``make dev``'s WebSocket API (``ws://127.0.0.1:<port>/ws``), end to
end: ``python -m local.server`` in a subprocess, a real WebSocket client (``websockets``),
the token as the subprotocols or the query string, like a browser would send it. The
offline model pauses between chunks here, so a client can leave mid-reply."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
import json
import socket
import time
from typing import Any
from urllib.parse import urlsplit
import uuid

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, Event, Ping, Request, TextMessage

from local.tokens import demo_token
from tests.conftest import wait_for
from tests.e2e.conftest import Caller, DevServer, dev_process

pytestmark = pytest.mark.e2e

SLOW_CHUNKS = {"OFFLINE_STREAM_CHUNK_SECONDS": "0.05", "STREAM_DELTA_MIN_CHARS": "1"}


@pytest.fixture(scope="module")
def dev_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    with dev_process(SLOW_CHUNKS, tmp_path_factory.mktemp("local-data")) as running:
        yield running


@pytest.fixture
def user(dev_server: DevServer) -> Caller:
    return Caller(dev_server.url, f"user-{uuid.uuid4().hex[:12]}")


def ws_url(dev_server: DevServer) -> str:
    return dev_server.url.replace("http://", "ws://") + "/ws"


def turn(socket: ClientConnection, frame: dict[str, Any]) -> list[dict[str, Any]]:
    """Send one chat frame; every frame answered, up to ``done`` or ``error``."""
    socket.send(json.dumps({"action": "chat", **frame}))
    frames: list[dict[str, Any]] = []
    while not frames or frames[-1]["type"] not in {"done", "error"}:
        frames.append(json.loads(socket.recv(timeout=30)))
    return frames


def test_two_turns_stream_over_one_connection_and_end_with_the_http_reply(
    dev_server: DevServer, user: Caller
) -> None:
    # Given
    project = user.post("/projects", {"name": "Corner Shop"}).body["id"]
    protocols: Any = ["bearer", demo_token(str(user.sub))]
    with connect(ws_url(dev_server), subprotocols=protocols) as socket:
        assert socket.subprotocol == "bearer"
        # When
        first = turn(
            socket, {"requestId": "a", "projectId": project, "body": {"message": "Hello there!"}}
        )
        second = turn(
            socket,
            {
                "requestId": "b",
                "projectId": project,
                "body": {"message": "And the header?", "conversationId": "latest"},
            },
        )
    # Then
    for frames, request_id in ((first, "a"), (second, "b")):
        assert frames[0]["type"] == "start"
        assert frames[-1]["type"] == "done"
        assert {frame["requestId"] for frame in frames} == {request_id}
        deltas = [frame["text"] for frame in frames if frame["type"] == "delta"]
        assert len(deltas) > 1
        assert "".join(deltas) == frames[-1]["body"]["message"]["content"]
    conversation = first[-1]["body"]["conversation"]
    assert second[-1]["body"]["conversation"] == {**conversation, "created": False}
    # And the done body has the HTTP reply's shape
    http = user.post(
        f"/projects/{project}/chat", {"message": "once more", "conversationId": conversation["id"]}
    )
    assert http.status == 200
    assert set(second[-1]["body"]) == set(http.body)
    assert set(second[-1]["body"]["message"]) == set(http.body["message"])


def test_a_client_that_leaves_mid_reply_finds_the_turn_in_its_thread(
    dev_server: DevServer, user: Caller
) -> None:
    # Given
    project = user.post("/projects", {"name": "Corner Shop"}).body["id"]
    url = f"{ws_url(dev_server)}?token={demo_token(str(user.sub))}"
    # When the client leaves after the first delta
    with connect(url) as socket:
        message = "Tell me about the shop, in as many words as you like."
        socket.send(
            json.dumps({"action": "chat", "projectId": project, "body": {"message": message}})
        )
        start = json.loads(socket.recv(timeout=30))
        first = json.loads(socket.recv(timeout=30))
    assert (start["type"], first["type"]) == ("start", "delta")
    thread = start["conversation"]["id"]
    # Then the thread shows the whole turn once the model has finished
    path = f"/projects/{project}/conversations/{thread}"

    def saved() -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = user.get(path).body["messages"]
        return messages

    wait_for(lambda: len(saved()) == 2, 20, "the turn saved after its client left")
    messages = saved()
    assert [message["role"] for message in messages] == ["user", "assistant"]
    assert messages[1]["content"].startswith(first["text"])
    assert len(messages[1]["content"]) > len(first["text"])


def test_a_connect_without_a_usable_token_is_refused_with_401(dev_server: DevServer) -> None:
    with pytest.raises(InvalidStatus) as refused:
        connect(ws_url(dev_server))
    assert refused.value.response.status_code == 401
    bad: Any = ["bearer", "not-a-jwt"]
    with pytest.raises(InvalidStatus):
        connect(ws_url(dev_server), subprotocols=bad)
    # a subject no key can hold would have every frame refused: refused at the upgrade
    for subject in ("auth0#bob", "b" * 1_018):
        with pytest.raises(InvalidStatus) as refused:
            connect(f"{ws_url(dev_server)}?token={demo_token(subject)}")
        assert refused.value.response.status_code == 401


def test_done_is_exactly_what_post_chat_answers_for_the_same_turn(
    dev_server: DevServer, user: Caller
) -> None:
    # Given: a streamed turn under an idempotency key
    project = user.post("/projects", {"name": "Corner Shop"}).body["id"]
    body = {"message": "Always keep the header dark."}
    url = f"{ws_url(dev_server)}?token={demo_token(str(user.sub))}"
    with connect(url) as socket:
        frames = turn(socket, {"projectId": project, "idempotencyKey": "same-turn", "body": body})
    # When: the same turn is asked over HTTP
    http = user.post(f"/projects/{project}/chat", body, headers={"Idempotency-Key": "same-turn"})
    # Then: HTTP answers the very turn the stream saved, body for body
    assert frames[-1]["type"] == "done"
    assert http.status == 200
    assert frames[-1]["body"] == http.body
    thread = http.body["conversation"]["id"]
    saved = user.get(f"/projects/{project}/conversations/{thread}").body["messages"]
    assert [m["role"] for m in saved].count("user") == 1  # one turn, not two


def test_a_viewer_is_refused_on_the_frame_with_the_http_403(
    dev_server: DevServer, user: Caller
) -> None:
    # Given: a viewer of someone else's project
    project = user.post("/projects", {"name": "Corner Shop"}).body["id"]
    viewer = f"viewer-{uuid.uuid4().hex[:12]}"
    assert user.put(f"/projects/{project}/members/{viewer}", {"role": "viewer"}).status == 201
    http = Caller(dev_server.url, viewer).post(f"/projects/{project}/chat", {"message": "hi"})
    # When
    with connect(f"{ws_url(dev_server)}?token={demo_token(viewer)}") as socket:
        frames = turn(socket, {"projectId": project, "body": {"message": "hi"}})
    # Then: no start, no delta: the HTTP route's own 403
    assert [frame["type"] for frame in frames] == ["error"]
    assert (frames[0]["status"], frames[0]["body"]) == (403, http.body)
    assert http.status == 403


def test_a_message_over_api_gateways_128_kb_closes_the_connection_with_1009(
    dev_server: DevServer, user: Caller
) -> None:
    # Given a connection, and frames of exactly 128 KiB and one byte more
    url = f"{ws_url(dev_server)}?token={demo_token(str(user.sub))}"

    def frame(size: int) -> str:
        padding = size - len(json.dumps({"action": "chat", "pad": ""}))
        return json.dumps({"action": "chat", "pad": "x" * padding})

    with connect(url) as socket:
        # When one at the limit is sent, then one over it
        socket.send(frame(128 * 1024))
        answered = json.loads(socket.recv(timeout=30))
        socket.send(frame(128 * 1024 + 1))
        # Then the first is answered as a frame, and the second closes the connection
        with pytest.raises(ConnectionClosed) as closed:
            socket.recv(timeout=30)
    assert answered["type"] == "error"
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009


CLIENTS = 30
FRAGMENT = "x" * 65_536
FRAGMENTS = 64  # 4 MiB in all: more than the socket buffers between client and server hold
SEND_BUFFER_BYTES = 16_384


@contextmanager
def opened_by_hand(url: str) -> Iterator[tuple[socket.socket, WSConnection]]:
    """A WebSocket opened over a plain socket with wsproto, so the test decides when it
    reads (a library client reads on a thread of its own)."""
    address = urlsplit(url)
    state = WSConnection(ConnectionType.CLIENT)
    with socket.create_connection((address.hostname, address.port), timeout=30) as wire:
        wire.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)
        wire.sendall(state.send(Request(host=address.netloc, target=f"/ws?{address.query}")))
        events: list[Event] = []
        while not any(isinstance(event, AcceptConnection) for event in events):
            state.receive_data(wire.recv(65536))
            events += state.events()
        yield wire, state


def close_heard(wire: socket.socket, state: WSConnection) -> int | None:
    """Read up to the server's close: its code, or None when the connection was reset."""
    try:
        while True:
            state.receive_data(wire.recv(65536) or None)
            for event in state.events():
                if isinstance(event, CloseConnection):
                    return event.code if event.code != 1006 else None
    except OSError:
        return None


def close_code_after_sending_an_oversized_message(url: str) -> int | None:
    """Write every fragment of a message over 128 KiB before reading anything (as a client
    busy sending does), then read up to the server's close."""
    with opened_by_hand(url) as (wire, state):
        message = [state.send(TextMessage('{"action": "chat", "pad": "', message_finished=False))]
        message += [state.send(TextMessage(FRAGMENT, message_finished=False))] * FRAGMENTS
        try:
            wire.sendall(b"".join([*message, state.send(TextMessage('"}'))]))
        except OSError:  # reset while writing: the close is never read
            return None
        return close_heard(wire, state)


def test_an_oversized_fragmented_message_closes_every_client_with_1009(
    dev_server: DevServer, user: Caller
) -> None:
    # Given thirty clients, each writing a message four times API Gateway's limit in
    # fragments, so fragments are still unread when the server closes
    url = f"{ws_url(dev_server)}?token={demo_token(str(user.sub))}"
    # When they all send it at once
    with ThreadPoolExecutor(CLIENTS) as pool:
        codes = list(
            pool.map(lambda _: close_code_after_sending_an_oversized_message(url), range(CLIENTS))
        )
    # Then every one of them hears the 1009 close, none a reset connection
    assert codes == [1009] * CLIENTS


def test_nothing_a_client_sends_after_the_1009_close_is_routed(
    dev_server: DevServer, user: Caller
) -> None:
    # Given a message whose fragments past 128 KiB are, alone, a chat frame for a project
    project = user.post("/projects", {"name": "Corner Shop"}).body["id"]
    tail = json.dumps({"action": "chat", "projectId": project, "body": {"message": "tail"}})
    seen = len(dev_server.lines)
    with opened_by_hand(f"{ws_url(dev_server)}?token={demo_token(str(user.sub))}") as (
        wire,
        state,
    ):
        # When it is sent whole, with a ping after it, and the 1009 close answered
        parts = [FRAGMENT] * 3 + [tail]
        wire.sendall(
            b"".join(
                state.send(TextMessage(part, message_finished=at == len(parts) - 1))
                for at, part in enumerate(parts)
            )
            + state.send(Ping())
        )
        assert close_heard(wire, state) == 1009
        wire.sendall(state.send(CloseConnection(1009)))
    # Then the server read to the client's close and routed none of it
    wait_for(
        lambda: any("WS disconnect" in line for line in dev_server.lines[seen:]),
        30,
        "the server's end of the connection",
    )
    assert not [line for line in dev_server.lines[seen:] if line.startswith(("WS chat", "WS $"))]
    assert not [line for line in dev_server.lines[seen:] if "Traceback" in line]
    assert user.get(f"/projects/{project}/conversations").body["conversations"] == []


def test_a_frame_after_the_token_expires_is_a_401_and_the_connection_closes(
    dev_server: DevServer, user: Caller
) -> None:
    # Given a connection whose token expires two seconds from now, acting for its user
    expires = int(time.time()) + 2
    url = f"{ws_url(dev_server)}?token={demo_token(str(user.sub), exp=expires)}"
    with connect(url) as socket:
        socket.send(json.dumps({"action": "chat"}))
        acting = json.loads(socket.recv(timeout=30))
        assert (acting["type"], acting["status"]) == ("error", 422), acting
        # When it sends a frame once the token has expired
        time.sleep(max(0.0, expires - time.time()) + 1)
        socket.send(json.dumps({"action": "chat", "requestId": "late"}))
        # Then the frame is refused with the HTTP API's 401 body, and the server closes
        refused = json.loads(socket.recv(timeout=30))
        assert (refused["type"], refused["requestId"], refused["status"]) == ("error", "late", 401)
        assert refused["body"]["error"]["code"] == "unauthenticated"
        with pytest.raises(ConnectionClosed) as closed:
            socket.recv(timeout=30)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000
