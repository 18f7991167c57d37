"""An import runs as its importer's role when each chunk runs, not when it was sent: an
importer made a viewer meanwhile gets nothing more from it, memory included."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from recall.wiring import import_store, memory_store, message_store
from tests.integration.conftest import Api
from tests.integration.test_export_and_import import MakeProject
from tests.integration.test_import_rules import exported, exported_thread

TONE = {
    "key": "tone",
    "value": "warm and brief",
    "category": "brand",
    "history": [{"action": "created", "newValue": "warm and brief", "at": "2025-05-01T09:00:00Z"}],
}
CONVERSATION = exported_thread(
    [
        ("user", "Plan the spring sale", "2025-05-01T09:00:00.000Z"),
        ("assistant", "Sure.", "2025-05-01T09:00:01.000Z"),
    ],
    "2025-05-01T09:00:00.000Z",
    "2025-05-01T09:00:01.000Z",
)


@pytest.mark.parametrize(
    "document",
    [exported([TONE]), exported([TONE], CONVERSATION)],
    ids=["memory alone", "a thread and memory"],
)
def test_an_importer_made_a_viewer_before_the_chunk_runs_gets_nothing_from_it(
    alice: Api,
    bob: Api,
    make_project: MakeProject,
    drain: Callable[[], None],
    document: dict[str, Any],
) -> None:
    # Given bob, an editor, has an import queued
    project = make_project(alice, {bob: "editor"})
    started = bob.post(f"/projects/{project}/import", document)
    assert started.status == 202, started
    # When alice makes him a viewer, then the chunk runs
    demoted = alice.put(f"/projects/{project}/members/{bob.sub}", {"role": "viewer"})
    assert demoted.status == 200, demoted
    drain()
    # Then no thread, message, memory entry or history record of the chunk is his
    user = str(bob.sub)
    assert bob.get(f"/projects/{project}/conversations").body["conversations"] == []
    assert not [
        message
        for made in import_store().thread_ids(user, project)
        for message in message_store().latest_after(user, project, made, None, 9)
    ]
    assert bob.get(f"/projects/{project}/memories").body["memories"] == []
    assert memory_store().history(user, project, "tone", None) == []
    # And the import ended failed, saying why
    progress = bob.get(started.headers["Location"]).body
    assert progress["status"] == "failed", progress
    assert progress["errors"] == [
        "Stopped at chunk 0: the importer's role no longer allows writing here."
    ]
