"""What API Gateway does with a request before any function runs, as ``make dev`` does it:
``python -m local.server`` in a subprocess, spoken to over raw sockets where a client
library would refuse to send what is sent here. The path is percent-decoded the way the
HTTP API decodes it, a body is read as HTTP/1.1 frames it (``Content-Length`` or chunked)
and never past Lambda's 6 MB, and a WebSocket handshake that is not one is answered."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
import json
import socket
from typing import Any, BinaryIO
from urllib.parse import quote, urlsplit
import uuid

import pytest

from local import openapi
from local.server import BODY_MAX_BYTES
from local.tokens import demo_token
from tests.e2e.conftest import Caller, DevServer, dev_process

pytestmark = pytest.mark.e2e

ANSWER_SECONDS = 10  # a server that waited for a body never sent would time out instead
KEY = "dGhlIHNhbXBsZSBub25jZQ=="  # RFC 6455's sample key: 16 bytes in base64


@pytest.fixture(scope="module")
def dev_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    with dev_process({}, tmp_path_factory.mktemp("local-data")) as running:
        yield running


@pytest.fixture
def owner(dev_server: DevServer) -> Caller:
    return Caller(dev_server.url, f"owner-{uuid.uuid4().hex[:12]}")


@dataclass
class Raw:
    """One HTTP response as read off the socket."""

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Wire:
    """A raw connection to the server: bytes out, responses in, one after another."""

    connection: socket.socket
    reader: BinaryIO

    def send(self, data: bytes) -> None:
        self.connection.sendall(data)

    def answer(self) -> Raw:
        status_line = self.reader.readline()
        assert status_line.startswith(b"HTTP/1.1 "), f"no answer: {status_line!r}"
        headers: dict[str, str] = {}
        while (line := self.reader.readline()) not in {b"\r\n", b""}:
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        body = self.reader.read(int(headers.get("content-length", "0")))
        return Raw(int(status_line.split()[1]), headers, body)


@pytest.fixture
def wire(dev_server: DevServer) -> Iterator[Wire]:
    address = urlsplit(dev_server.url)
    opened = socket.create_connection((address.hostname, address.port), ANSWER_SECONDS)
    with opened, opened.makefile("rb") as reader:
        yield Wire(opened, reader)


def request_head(method: str, path: str, sub: str, *headers: str) -> bytes:
    lines = [
        f"{method} {path} HTTP/1.1",
        "Host: 127.0.0.1",
        f"Authorization: Bearer {demo_token(sub)}",
        "Content-Type: application/json",
        *headers,
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def handshake(*headers: str) -> bytes:
    lines = [
        f"GET /ws?token={demo_token('someone')} HTTP/1.1",
        "Host: 127.0.0.1",
        "Upgrade: websocket",
        "Connection: Upgrade",
        *headers,
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


# --- The path, decoded as the HTTP API decodes it ---------------------------------------


def test_a_member_added_with_an_encoded_id_is_that_user(
    dev_server: DevServer, owner: Caller
) -> None:
    # Given: an id as Auth0 and an email sign-in make them, sent encodeURIComponent-style
    member = Caller(dev_server.url, f"auth0|bob dé@example.com {uuid.uuid4().hex[:6]}")
    assert member.sub is not None
    project = owner.post("/projects", {"name": "Corner Shop"}).body["id"]
    # When
    added = owner.put(
        f"/projects/{project}/members/{quote(member.sub, safe='')}", {"role": "viewer"}
    )
    read = member.get(f"/projects/{project}")
    # Then
    assert added.status == 201, added
    assert added.body["userId"] == member.sub
    assert read.status == 200, read
    assert read.body["role"] == "viewer"
    listed = owner.get(f"/projects/{project}/members").body["members"]
    assert member.sub in [row["userId"] for row in listed]


def test_an_encoded_slash_separates_segments_so_no_route_takes_it(owner: Caller) -> None:
    # Given
    project = owner.post("/projects", {"name": "Corner Shop"}).body["id"]
    # When
    added = owner.put(f"/projects/{project}/members/team%2Fbob", {"role": "viewer"})
    # Then: API Gateway's own 404, and nobody was added
    assert (added.status, added.body) == (404, {"message": "Not Found"})
    listed = owner.get(f"/projects/{project}/members").body["members"]
    assert [row["userId"] for row in listed] == [owner.sub]


def test_a_path_whose_escapes_are_not_utf8_is_400(owner: Caller) -> None:
    # Given
    project = owner.post("/projects", {"name": "Corner Shop"}).body["id"]
    # When: a lone surrogate, as UTF-8 bytes no decoder accepts
    added = owner.put(f"/projects/{project}/members/%ED%A0%80", {"role": "viewer"})
    # Then
    assert (added.status, added.body) == (400, {"message": "Bad Request"})


def test_a_target_no_url_parser_reads_is_400_not_a_dropped_connection(wire: Wire) -> None:
    # When: an absolute target whose IPv6 host never closes
    wire.send(request_head("GET", "http://[::1/projects", "someone"))
    answer = wire.answer()
    # Then
    assert (answer.status, answer.json()) == (400, {"message": "Bad Request"})


# --- The body, read as HTTP/1.1 frames it ------------------------------------------------


def test_a_declared_body_over_lambdas_limit_is_413_before_it_is_read(wire: Wire) -> None:
    # When: far more declared than sent; reading it first would wait, or run out of memory
    wire.send(
        request_head("POST", "/projects", "someone", "Content-Length: 99999999999")
        + b'{"name":"x"}'
    )
    answer = wire.answer()
    # Then
    assert (answer.status, answer.json()) == (413, {"message": "Request Too Long"})
    assert answer.headers["connection"] == "close"


def test_a_declared_length_too_long_for_a_number_is_413_not_an_empty_body(wire: Wire) -> None:
    # When: 5,000 digits, more than Python reads as an int (Werkzeug reads it as 0)
    wire.send(request_head("POST", "/projects", "someone", f"Content-Length: {'9' * 5_000}"))
    answer = wire.answer()
    # Then
    assert (answer.status, answer.json()) == (413, {"message": "Request Too Long"})


def test_one_byte_over_the_limit_is_413_and_a_body_under_it_is_read(
    wire: Wire, dev_server: DevServer
) -> None:
    # When
    wire.send(request_head("POST", "/projects", "someone", f"Content-Length: {BODY_MAX_BYTES + 1}"))
    over = wire.answer()
    # Then
    assert over.status == 413
    # A body of spaces leaves its event as large as itself, plus the event's own fields
    under = Caller(dev_server.url, "someone").post("/projects", raw=b" " * (BODY_MAX_BYTES - 9_999))
    assert under.status == 413  # the function's own limit, in its own error body
    assert under.body["error"]["code"] == "payload_too_large"


def quoted_import(messages: int) -> bytes:
    """A threads document of ``messages`` messages of 16,000 quotes: each is two bytes in
    the document (\\") and four in the event that carries it as a string."""
    message = {"role": "user", "content": '"' * 16_000, "createdAt": "2025-03-01T09:00:00Z"}
    thread = {"title": "Quoted", "messages": [message] * messages}
    return json.dumps({"format": "threads", "threads": [thread]}).encode()


def test_an_import_under_6_mb_whose_event_is_over_it_is_api_gateways_413(owner: Caller) -> None:
    # Given: 5.3 MB of document, under IMPORT_MAX_BYTES, that is a 10.5 MB event
    project = owner.post("/projects", {"name": "Corner Shop"}).body["id"]
    document = quoted_import(165)
    assert len(document) < 5_500_000 < BODY_MAX_BYTES < 2 * len(document)
    # When
    answer = owner.post(f"/projects/{project}/import", raw=document)
    # Then: what Lambda's payload limit makes of it on AWS, before any function runs
    assert (answer.status, answer.body) == (413, {"message": "Request Too Long"})


def test_an_import_whose_event_fits_but_is_over_its_own_limit_is_the_functions_413(
    owner: Caller,
) -> None:
    # Given: 2.9 MB of document that is a 5.8 MB event, over IMPORT_MAX_BYTES as the
    # function counts it (as the event carries it), under Lambda's 6 MB
    project = owner.post("/projects", {"name": "Corner Shop"}).body["id"]
    document = quoted_import(90)
    assert 5_500_000 < len(json.dumps(document.decode())) < BODY_MAX_BYTES - 10_000
    # When
    answer = owner.post(f"/projects/{project}/import", raw=document)
    # Then
    assert answer.status == 413, answer
    assert answer.body["error"]["code"] == "payload_too_large"
    assert "over 5500000 bytes" in answer.body["error"]["message"]


def test_expect_100_continue_over_the_limit_gets_the_413_instead_of_the_go_ahead(
    wire: Wire,
) -> None:
    # When
    wire.send(
        request_head(
            "POST", "/projects", "someone", "Content-Length: 99999999999", "Expect: 100-continue"
        )
    )
    answer = wire.answer()
    # Then
    assert answer.status == 413


def test_a_chunked_body_is_read_and_the_connection_goes_on(wire: Wire) -> None:
    # Given: chunks with an extension, then a trailer
    chunks = b'5\r\n{"nam\r\n8;note=x\r\ne":"cl"}\r\n1\r\n \r\n0\r\nX-Checksum: none\r\n\r\n'
    # When
    wire.send(request_head("POST", "/projects", "streamer", "Transfer-Encoding: chunked") + chunks)
    created = wire.answer()
    wire.send(request_head("GET", "/projects", "streamer"))
    listed = wire.answer()
    # Then
    assert created.status == 201, created
    assert created.json()["name"] == "cl"
    assert listed.status == 200, listed
    assert created.json()["id"] in [row["id"] for row in listed.json()["projects"]]


@pytest.mark.parametrize(
    "chunks",
    [b"zz\r\n{}\r\n0\r\n\r\n", b"2\r\n{}0\r\n\r\n", b"-2\r\n{}\r\n0\r\n\r\n"],
    ids=["size not hex", "no line end after the chunk", "negative size"],
)
def test_a_chunked_body_framed_wrongly_is_400(wire: Wire, chunks: bytes) -> None:
    # When
    wire.send(request_head("POST", "/projects", "someone", "Transfer-Encoding: chunked") + chunks)
    answer = wire.answer()
    # Then
    assert (answer.status, answer.json()) == (400, {"message": "Bad Request"})


def test_chunks_adding_up_past_the_limit_are_413_before_they_are_read(wire: Wire) -> None:
    # When: the size line alone, none of its data
    size = f"{BODY_MAX_BYTES + 1:x}".encode()
    wire.send(
        request_head("POST", "/projects", "someone", "Transfer-Encoding: chunked") + size + b"\r\n"
    )
    answer = wire.answer()
    # Then
    assert (answer.status, answer.json()) == (413, {"message": "Request Too Long"})


@pytest.mark.parametrize(
    ("framing", "status"),
    [
        (("Transfer-Encoding: gzip, chunked",), 501),
        (("Transfer-Encoding: chunked, gzip",), 400),
        (("Transfer-Encoding: chunked", "Content-Length: 2"), 400),
        (("Content-Length: 1e3",), 400),
    ],
    ids=["another coding", "chunked not last", "both framings", "length not a number"],
)
def test_a_body_framing_the_server_cannot_read_is_answered(
    wire: Wire, framing: tuple[str, ...], status: int
) -> None:
    # When
    wire.send(request_head("POST", "/projects", "someone", *framing) + b"0\r\n\r\n")
    answer = wire.answer()
    # Then
    assert answer.status == status
    assert set(answer.json()) == {"message"}


# --- A WebSocket handshake that is not one ----------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        ("Sec-WebSocket-Version: 13",),
        ("Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: short"),
        ("Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: c2l4dGVlbiBieXRlcyE="),
        ("Sec-WebSocket-Version: 13", f"Sec-WebSocket-Key: {KEY}", f"Sec-WebSocket-Key: {KEY}"),
        (f"Sec-WebSocket-Key: {KEY}",),
        ("Sec-WebSocket-Version: 13", f"Sec-WebSocket-Key: {KEY}", "Connection: close"),
        ("Sec-WebSocket-Version: 13", f"Sec-WebSocket-Key: {KEY}", "Sec-WebSocket-Protocol: bé"),
    ],
    ids=[
        "no key",
        "key not base64",
        "key not 16 bytes",
        "two keys",
        "no version",
        "connection: close",
        "protocol not ascii",
    ],
)
def test_a_malformed_websocket_handshake_is_400(wire: Wire, headers: tuple[str, ...]) -> None:
    # When
    wire.send(handshake(*headers))
    answer = wire.answer()
    # Then
    assert (answer.status, answer.json()) == (400, {"message": "Bad Request"})


def test_a_websocket_handshake_for_another_version_is_426_naming_13(wire: Wire) -> None:
    # When
    wire.send(handshake("Sec-WebSocket-Version: 8", f"Sec-WebSocket-Key: {KEY}"))
    answer = wire.answer()
    # Then
    assert answer.status == 426
    assert answer.headers["sec-websocket-version"] == "13"


def test_a_well_formed_websocket_handshake_is_still_accepted(wire: Wire) -> None:
    # When
    wire.send(handshake("Sec-WebSocket-Version: 13", f"Sec-WebSocket-Key: {KEY}"))
    answer = wire.reader.readline()
    # Then
    assert answer.startswith(b"HTTP/1.1 101 "), answer


def test_every_operation_documents_the_gateways_own_bad_request() -> None:
    # A request API Gateway cannot read (the framings above) is answered before any route,
    # with its {"message"} body: each operation's 400 says so, beside this API's ErrorBody.
    document = json.loads(openapi.DOCUMENT.read_text())
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            schema = json.dumps(operation["responses"]["400"]["content"])
            assert "#/components/schemas/GatewayMessage" in schema, (method, path)
            assert "#/components/schemas/ErrorBody" in schema, (method, path)
