"""A large export through ``make dev`` end to end: ``python -m local.server`` in a
subprocess with a small EXPORT_MAX_BYTES, the export asked for over real HTTP, and its
pre-signed link, which names the server's embedded S3, downloaded like any URL."""

from __future__ import annotations

from collections.abc import Iterator
import json
import urllib.request
import uuid

import pytest

from tests.e2e.conftest import Caller, DevServer, dev_process

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def dev_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    with dev_process(
        {"EXPORT_MAX_BYTES": "1000"}, tmp_path_factory.mktemp("local-data")
    ) as running:
        yield running


def test_a_large_export_is_a_link_make_dev_serves(dev_server: DevServer) -> None:
    # Given a project whose threads are past EXPORT_MAX_BYTES
    user = Caller(dev_server.url, f"user-{uuid.uuid4().hex[:12]}")
    project = user.post("/projects", {"name": "Corner Shop"}).body["id"]
    for n in range(3):
        said = user.post(f"/projects/{project}/chat", {"message": f"Plan {n}: " + "x" * 500})
        assert said.status == 200, said
    # When
    reply = user.get(f"/projects/{project}/export")
    with urllib.request.urlopen(reply.body["url"], timeout=30) as answer:  # noqa: S310
        body = answer.read()
    # Then the link is the embedded S3's, and it answers the JSON Lines
    assert reply.status == 200, reply
    assert reply.body["url"].startswith("http://127.0.0.1:")
    lines = [json.loads(line) for line in body.decode().splitlines()]
    assert lines[0]["format"] == "recall.export.jsonl" and lines[0]["projectId"] == project
    kinds = [line["type"] for line in lines[1:]]
    assert kinds.count("conversation") == 3 and kinds.count("message") == 6
    assert kinds[-1] == "project"
    assert reply.body["bytes"] == len(body)
