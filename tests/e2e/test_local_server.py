"""The API over real HTTP, through the local server ``make dev`` runs: API Gateway's own
answers (401, 404) come from the server, everything else from the real handlers."""

from __future__ import annotations

import base64
from collections.abc import Callable
import json
import os
import queue
import subprocess
import sys
import threading
import urllib.request
import uuid

import pytest

from local import embedded, server, template
from local.tokens import demo_token
from tests.e2e.conftest import Answer, Caller

pytestmark = pytest.mark.e2e

EXPIRED = base64.urlsafe_b64encode(b'{"sub":"someone","exp":1}').rstrip(b"=").decode()
FUTURE = 9_999_999_999


def claims(**values: object) -> str:
    """A JWT payload of ``someone`` with ``values``, as the token's middle part."""
    text = json.dumps({"sub": "someone", **values}).encode()
    return base64.urlsafe_b64encode(text).rstrip(b"=").decode()


def test_owner_creates_a_project_adds_a_member_and_lists_threads(
    owner: Caller, caller: Callable[[str | None], Caller]
) -> None:
    # Given
    editor = caller(f"editor-{uuid.uuid4().hex[:12]}")
    created = owner.post(
        "/projects",
        {"name": "Corner Shop", "context": {"type": "store", "currency": "EUR", "itemCount": 42}},
    )
    assert created.status == 201, created
    project = created.body["id"]
    # When
    added = owner.put(f"/projects/{project}/members/{editor.sub}", {"role": "editor"})
    first = editor.post(f"/projects/{project}/conversations", {"title": "Homepage ideas"})
    second = editor.post(f"/projects/{project}/conversations", {"title": "Spring campaign"})
    listed = editor.get(f"/projects/{project}/conversations")
    # Then
    assert added.status == 201, added
    assert added.body["role"] == "editor"
    assert (first.status, second.status) == (201, 201)
    assert [thread["id"] for thread in listed.body["conversations"]] == [
        second.body["id"],
        first.body["id"],
    ]
    assert owner.get(f"/projects/{project}/conversations").body["conversations"] == []


def test_malformed_json_is_400(owner: Caller) -> None:
    # When
    reply = owner.post("/projects", raw=b'{"name": "Corner Shop"')
    # Then
    assert reply.status == 400
    assert reply.body["error"]["code"] == "malformed_json"


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "Bearer not-a-jwt",
        f"Bearer {demo_token('someone').split('.')[0]}.e30.sig",
        f"Bearer {demo_token('someone').split('.')[0]}.{EXPIRED}.sig",
        f"Bearer {demo_token('someone').split('.')[0]}.{claims(nbf=FUTURE)}.sig",
        f"Bearer {demo_token('someone').split('.')[0]}.{claims(exp='9999999999')}.sig",
    ],
    ids=["no token", "not a jwt", "no sub claim", "expired", "not yet valid", "exp as text"],
)
def test_request_without_a_usable_token_is_401_like_the_jwt_authorizer(
    caller: Callable[[str | None], Caller], authorization: str | None
) -> None:
    # When
    headers = {"Authorization": authorization} if authorization else {}
    reply = caller(None).get("/projects", headers=headers)
    # Then
    assert reply.status == 401
    assert reply.body == {"message": "Unauthorized"}


def test_unknown_route_is_404_like_api_gateway(owner: Caller) -> None:
    # When
    unknown_path = owner.get("/nothing/here")
    unknown_method = owner.request("DELETE", "/projects")
    # Then
    assert (unknown_path.status, unknown_method.status) == (404, 404)
    assert unknown_path.body == unknown_method.body == {"message": "Not Found"}


def test_non_member_gets_403(owner: Caller, stranger: Caller) -> None:
    # Given
    project = owner.post("/projects", {"name": "Corner Shop"}).body["id"]
    # When
    reply = stranger.get(f"/projects/{project}/conversations")
    # Then
    assert reply.status == 403
    assert reply.body["error"]["code"] == "forbidden"


# Each route that opts out of the authorizer, and what it answers a caller with no token.
PUBLIC_ROUTES: dict[str, Callable[[Answer], bool]] = {
    "GET /openapi.json": lambda reply: (
        reply.body["openapi"].startswith("3.") and "/projects" in reply.body["paths"]
    ),
}


def test_route_opted_out_of_the_authorizer_answers_in_full_without_a_token(
    caller: Callable[[str | None], Caller],
) -> None:
    # Given
    open_routes = server.open_routes()
    assert sorted(open_routes) == sorted(PUBLIC_ROUTES), "say what a new public route answers"
    for route, answered in PUBLIC_ROUTES.items():
        method, path = route.split(" ", 1)
        # When
        reply = caller(None).request(method, path)
        # Then
        assert reply.status == 200, (route, reply)
        assert answered(reply), (route, reply)


def test_python_m_local_server_serves_the_api_until_terminated() -> None:
    # Given
    port = embedded.free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "local.server"],
        cwd=template.ROOT,
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert process.stdout is not None
    stdout = process.stdout

    def pump() -> None:
        for line in stdout:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    seen: list[str] = []
    try:
        # When
        while not any("ready" in line for line in seen):
            try:
                seen.append(lines.get(timeout=60))
            except queue.Empty:
                pytest.fail(f"no ready line within 60 s; output so far: {seen}")
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/projects",
            headers={"Authorization": f"Bearer {demo_token('demo-user')}"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            status, body = response.status, json.loads(response.read())
    finally:
        process.terminate()
        code = process.wait(timeout=30)
    # Then
    assert status == 200
    assert body["projects"] == []
    assert code == 0, "Ctrl-C / SIGTERM should stop the server cleanly"
    ready = [line for line in seen if "ready" in line]
    assert len(ready) == 1
    assert f"http://127.0.0.1:{port}" in ready[0]
    assert "curl" in ready[0]
    assert any("without checking its signature" in line.lower() for line in seen)
