"""``make dev`` runs beside the developer's browser, so it answers only requests addressed to
this machine's loopback (127.0.0.1, localhost or [::1], with any port): a page on another
site whose name was rebound to 127.0.0.1 sends its own name as ``Host``, and is refused
before anything runs, over HTTP and on the WebSocket upgrade alike."""

from __future__ import annotations

from collections.abc import Callable
import http.client
import json
from typing import Any

import pytest

from local import server
from local.tokens import demo_token

pytestmark = pytest.mark.e2e

REFUSED_HOSTS = [
    "evil.example",
    "evil.example:{port}",
    "127.0.0.1.nip.io:{port}",
    "localhost.evil.example",
    "127.0.0.2:{port}",
    "",
]
LOOPBACK_HOSTS = [
    "127.0.0.1",
    "127.0.0.1:{port}",
    "localhost",
    "LocalHost:{port}",
    "[::1]",
    "[::1]:{port}",
]
TOKEN = f"Bearer {demo_token('rebinding-victim')}"


@pytest.fixture
def send(local_api: server.LocalApi) -> Callable[..., tuple[int, Any]]:
    """Sends one request with the ``Host`` given ({port} filled in): its status and body."""
    address, port = local_api.server.server_address[:2]

    def request(method: str, path: str, host: str, headers: dict[str, str]) -> tuple[int, Any]:
        connection = http.client.HTTPConnection(str(address), int(port), timeout=30)
        try:
            connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            connection.putheader("Host", host.format(port=port))
            for name, value in headers.items():
                connection.putheader(name, value)
            connection.endheaders()
            answer = connection.getresponse()
            payload = answer.read() if answer.status != 101 else b""
            return answer.status, json.loads(payload) if payload else None
        finally:
            connection.close()

    return request


@pytest.mark.parametrize("host", REFUSED_HOSTS)
@pytest.mark.parametrize(
    ("method", "path", "headers"),
    [
        ("GET", "/projects", {"Authorization": TOKEN}),
        ("GET", "/", {}),
        ("POST", "/_local/jobs/drain", {"Authorization": TOKEN, "Content-Length": "0"}),
        # a body the framing would refuse 413: the host is refused first
        ("POST", "/projects", {"Authorization": TOKEN, "Content-Length": "99999999999"}),
    ],
    ids=["api", "console", "local job", "oversized body"],
)
def test_a_request_to_another_host_is_refused_before_anything_runs(
    send: Callable[..., tuple[int, Any]],
    host: str,
    method: str,
    path: str,
    headers: dict[str, str],
) -> None:
    # When
    status, body = send(method, path, host, headers)
    # Then
    assert status == 403
    assert "127.0.0.1, localhost or [::1]" in body["message"]


@pytest.mark.parametrize("host", REFUSED_HOSTS[:2])
def test_a_websocket_upgrade_to_another_host_is_refused(
    send: Callable[..., tuple[int, Any]], host: str
) -> None:
    # When
    status, body = send(
        "GET",
        f"/ws?token={demo_token('rebinding-victim')}",
        host,
        {
            "Upgrade": "websocket",
            "Connection": "Upgrade",
            "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        },
    )
    # Then: no socket opened for the page
    assert status == 403
    assert "localhost" in body["message"]


@pytest.mark.parametrize("host", LOOPBACK_HOSTS)
def test_a_request_to_a_loopback_name_is_answered(
    send: Callable[..., tuple[int, Any]], host: str
) -> None:
    # When
    status, body = send("GET", "/projects", host, {"Authorization": TOKEN})
    # Then
    assert status == 200
    assert "projects" in body
