"""``make dev`` keeps its data: stop the server (or kill it), start it again over the same
folder, and every project, thread, message, memory entry and import is there; an empty folder (what
``make dev-reset`` leaves of the folder it names) starts empty."""

from __future__ import annotations

import json
from pathlib import Path
import time
import uuid

import pytest

from local.snapshot import SNAPSHOT_FILE
from tests.conftest import wait_for
from tests.e2e.conftest import Caller, DevServer, dev_process

pytestmark = pytest.mark.e2e

QUICK = {"LOCAL_SNAPSHOT_SECONDS": "0.2", "LOCAL_SCHEDULE_SECONDS": "0"}


def write_everything(user: Caller) -> dict[str, str]:
    """A project with a thread of one turn and a memory entry; the ids to read them back."""
    project = user.post("/projects", {"name": "Corner Shop", "context": {"currency": "EUR"}})
    assert project.status == 201, project
    project_id = project.body["id"]
    turn = user.post(f"/projects/{project_id}/chat", {"message": "Hello 👋 there"})
    assert turn.status == 200, turn
    memory = user.put(
        f"/projects/{project_id}/memories/header_dark",
        {"value": "Keep the header dark", "category": "brand"},
    )
    assert memory.status == 201, memory
    at = "2025-03-01T09:00:00Z"
    started = user.post(
        f"/projects/{project_id}/import",
        {
            "format": "threads",
            "threads": [{"messages": [{"role": "user", "content": "Hi", "createdAt": at}]}],
        },
    )
    assert started.status == 202, started
    wait_for(
        lambda: user.get(started.headers["Location"]).body["status"] == "done", 10, "the import"
    )
    return {
        "project": project_id,
        "thread": turn.body["conversation"]["id"],
        "import": started.headers["Location"],
    }


def read_everything(user: Caller, ids: dict[str, str]) -> dict[str, object]:
    project = user.get(f"/projects/{ids['project']}")
    thread = user.get(f"/projects/{ids['project']}/conversations/{ids['thread']}")
    memory = user.get(f"/projects/{ids['project']}/memories")
    history = user.get(f"/projects/{ids['project']}/memories/header_dark/history")
    imported = user.get(ids["import"])
    return {
        "statuses": [project.status, thread.status, memory.status, history.status, imported.status],
        "import": imported.body,
        "project": project.body,
        "messages": thread.body.get("messages") if thread.body else None,
        "conversation": thread.body.get("conversation") if thread.body else None,
        "memories": memory.body,
        "history": history.body,
    }


def caller(running: DevServer, sub: str) -> Caller:
    return Caller(running.url, sub)


def test_a_stopped_server_starts_again_with_everything_it_held(tmp_path: Path) -> None:
    # Given a server that held a project, a thread and memory, then was stopped
    sub = f"user-{uuid.uuid4().hex[:12]}"
    with dev_process(QUICK, tmp_path) as first:
        ids = write_everything(caller(first, sub))
        before = read_everything(caller(first, sub), ids)
    assert before["statuses"] == [200, 200, 200, 200, 200]
    saved = json.loads((tmp_path / SNAPSHOT_FILE).read_text(encoding="utf-8"))
    assert saved["format"] == 1
    # Every table held something but Sessions, which turns no longer write, and Idempotency.
    kept = [
        name for name in saved["tables"] if "Idempotency" not in name and "Sessions" not in name
    ]
    assert kept and all(saved["tables"][name] for name in kept)
    assert not list(tmp_path.glob("*.tmp"))
    # When it starts again over the same folder
    with dev_process(QUICK, tmp_path) as second:
        after = read_everything(caller(second, sub), ids)
        # Then everything reads back the same, and the thread goes on
        assert after == before
        more = caller(second, sub).post(
            f"/projects/{ids['project']}/chat",
            {"message": "And again", "conversationId": ids["thread"]},
        )
        assert more.status == 200, more
        assert more.body["nudge"]["turns"] == 2


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/projects", {"name": "Alone"}),  # a transaction only
        ("POST", "/projects/{project}/conversations", {"title": "Alone"}),  # a put only
    ],
)
def test_every_kind_of_write_is_kept(
    tmp_path: Path, method: str, path: str, body: dict[str, str]
) -> None:
    # Given a server whose only write since its last snapshot is of one kind
    sub = f"user-{uuid.uuid4().hex[:12]}"
    with dev_process(QUICK, tmp_path) as first:
        user = caller(first, sub)
        project = user.post("/projects", {"name": "Shop"}).body["id"]
        time.sleep(1)  # that write is in a snapshot
        done = user.request(method, path.format(project=project), body)
        assert done.status == 201, done
        before = user.get("/projects").body, user.get(f"/projects/{project}/conversations").body
    # When it starts again
    with dev_process(QUICK, tmp_path) as second:
        user = caller(second, sub)
        # Then that write is there
        after = user.get("/projects").body, user.get(f"/projects/{project}/conversations").body
        assert after == before


def test_a_killed_server_loses_at_most_the_last_moments(tmp_path: Path) -> None:
    # Given a server killed without warning a while after its last write
    sub = f"user-{uuid.uuid4().hex[:12]}"
    with dev_process(QUICK, tmp_path, stop=False) as first:
        ids = write_everything(caller(first, sub))
        before = read_everything(caller(first, sub), ids)
        time.sleep(1.5)  # several snapshot periods
        first.process.kill()
    # When it starts again
    with dev_process(QUICK, tmp_path) as second:
        # Then what it had written before is all there
        assert read_everything(caller(second, sub), ids) == before


def test_an_empty_folder_starts_empty(tmp_path: Path) -> None:
    sub = f"user-{uuid.uuid4().hex[:12]}"
    with dev_process(QUICK, tmp_path) as first:
        write_everything(caller(first, sub))
    (tmp_path / SNAPSHOT_FILE).unlink()
    with dev_process(QUICK, tmp_path) as second:
        assert caller(second, sub).get("/projects").body["projects"] == []


def test_make_dev_reset_forgets_the_folder_the_server_loads(tmp_path: Path) -> None:
    # Given data kept in a folder LOCAL_DATA_DIR names (not .local-data), beside a file of
    # the developer's own
    sub = f"user-{uuid.uuid4().hex[:12]}"
    with dev_process(QUICK, tmp_path) as first:
        write_everything(caller(first, sub))
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    # When make dev-reset starts over it (its install step is not remade here; make itself
    # exits with the signal that stops it)
    reset = ("make", "--no-print-directory", "-o", "install", "dev-reset")
    with dev_process(QUICK, tmp_path, command=reset, stop=False) as second:
        # Then the server it starts has forgotten it all, and kept only the other file
        assert caller(second, sub).get("/projects").body["projects"] == []
        assert [path.name for path in tmp_path.iterdir()] == ["notes.txt"]
