"""An import through ``make dev`` end to end: ``python -m local.server`` in a subprocess,
the document sent over real HTTP, its chunks written by the worker as the server's poller
takes them from the queue, and the progress route read until it is done. Small chunks, so
a small document still spans several (``bench/imports.py`` runs 1,000 threads × 50)."""

from __future__ import annotations

from collections.abc import Iterator
import time
from typing import Any
import uuid

import pytest

from tests.e2e.conftest import Caller, DevServer, dev_process

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def dev_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    with dev_process(
        {"IMPORT_CHUNK_MAX_BYTES": "4000"}, tmp_path_factory.mktemp("local-data")
    ) as running:
        yield running


def test_an_import_is_written_chunk_by_chunk_with_its_progress(dev_server: DevServer) -> None:
    # Given
    user = Caller(dev_server.url, f"user-{uuid.uuid4().hex[:12]}")
    project = user.post("/projects", {"name": "Corner Shop"}).body["id"]
    document: dict[str, Any] = {
        "format": "threads",
        "threads": [
            {
                "title": f"Thread {n}",
                "messages": [
                    {
                        "role": "user" if m % 2 == 0 else "assistant",
                        "content": f"message {m} of thread {n}",
                        "createdAt": f"2025-03-{n + 1:02d}T09:{m:02d}:00Z",
                    }
                    for m in range(20)
                ],
            }
            for n in range(10)
        ],
    }
    # When
    started = user.post(f"/projects/{project}/import", document)
    seen: list[tuple[str, int, int]] = []
    deadline = time.monotonic() + 60
    progress = started.body
    while progress["status"] in ("queued", "running") and time.monotonic() < deadline:
        time.sleep(0.2)
        progress = user.get(started.headers["Location"]).body
        seen.append((progress["status"], progress["threadsDone"], progress["messagesDone"]))
    listed = user.get(f"/projects/{project}/conversations?limit=100").body["conversations"]
    # Then
    assert started.status == 202, started
    assert started.body["status"] == "queued" and started.body["threadsTotal"] == 10
    assert progress["status"] == "done", seen
    assert (progress["threadsDone"], progress["messagesDone"]) == (10, 200)
    assert len({done for _, _, done in seen}) > 2, f"progress seen only at {seen}"
    assert [done for _, _, done in seen] == sorted(done for _, _, done in seen)
    assert [row["title"] for row in listed] == [f"Thread {n}" for n in reversed(range(10))]
