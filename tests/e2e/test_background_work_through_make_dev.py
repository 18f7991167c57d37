"""The background work of ``make dev``, end to end: ``python -m local.server`` in a
subprocess with every duration shortened through its environment, driven over real HTTP.
The schedules' timer ends an idle session and expires a memory entry, and the worker
draining the queue writes a thread's rolling summary; ``make job`` reaches the same server.
Every wait has a deadline of a few seconds, and the server is always terminated (killed if
it will not stop)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
import os
import subprocess
import sys
import uuid

import pytest

from local import template
from tests.conftest import wait_for
from tests.e2e.conftest import Caller, DevServer, dev_process

pytestmark = pytest.mark.e2e

SHORT = {
    "SESSION_IDLE_SECONDS": "3",
    "SESSION_END_GRACE_SECONDS": "0",
    "LOCAL_SCHEDULE_SECONDS": "1",
    "WINDOW_MESSAGES": "4",
    "WINDOW_EVICT_STEP": "0",
    # The scheduled jobs read the due buckets of the current and the past hour only.
    "MAINTENANCE_LOOKBACK_HOURS": "1",
}


@pytest.fixture(scope="module")
def dev_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    with dev_process(SHORT, tmp_path_factory.mktemp("local-data")) as running:
        yield running


@pytest.fixture
def user(dev_server: DevServer) -> Caller:
    return Caller(dev_server.url, f"user-{uuid.uuid4().hex[:12]}")


def new_project(user: Caller) -> str:
    created = user.post("/projects", {"name": "Corner Shop"})
    assert created.status == 201, created
    project: str = created.body["id"]
    return project


def chat(user: Caller, project: str, message: str, thread: str | None = None) -> str:
    body = {"message": message} | ({"conversationId": thread} if thread else {})
    turn = user.post(f"/projects/{project}/chat", body)
    assert turn.status == 200, turn
    conversation: str = turn.body["conversation"]["id"]
    return conversation


def test_a_session_starts_with_a_turn_ends_when_idle_and_the_next_turn_starts_another(
    dev_server: DevServer, user: Caller
) -> None:
    # Given a member's first turn in a project: it starts a session, listed live
    project = new_project(user)
    listed = f"/projects/{project}/sessions"
    thread = chat(user, project, "Hello there")
    chat(user, project, "And hello again", thread)
    (live,) = user.get(listed).body["sessions"]
    assert (live["live"], live["endedAt"], live["turns"]) == (True, None, 2)
    assert live["tokens"] > 0

    def ended() -> list[dict[str, object]]:
        sessions: list[dict[str, object]] = user.get(listed).body["sessions"]
        return sessions if not sessions[0]["live"] else []

    # When SESSION_IDLE_SECONDS pass with no turn, the prune-sessions schedule ends it
    (record,) = wait_for(ended, 15, "the idle session ended by the schedule")
    assert (record["startedAt"], record["turns"], record["tokens"]) == (
        live["startedAt"],
        2,
        live["tokens"],
    )
    assert record["endedAt"] > record["lastTurnAt"] == live["lastTurnAt"]
    assert any("prune-sessions" in line for line in dev_server.lines)
    # Then a turn after that starts a new one, listed first
    chat(user, project, "Back again", thread)
    newest, older = user.get(listed).body["sessions"]
    assert (newest["live"], newest["turns"]) == (True, 1)
    assert newest["startedAt"] > record["endedAt"]
    assert older == record


def test_a_memory_entry_past_its_expiry_gets_an_expired_record(
    dev_server: DevServer, user: Caller
) -> None:
    # Given
    project = new_project(user)
    expires = datetime.now(UTC) + timedelta(seconds=2)
    put = user.put(
        f"/projects/{project}/memories/launch_date",
        {"value": "Launch on Friday", "category": "context", "expiresAt": expires.isoformat()},
    )
    assert put.status == 201, put
    history = f"/projects/{project}/memories/launch_date/history"

    def actions() -> list[str]:
        return [record["action"] for record in user.get(history).body["history"]]

    assert actions() == ["created"]
    # When: the expiry passes and the expire-memories schedule runs
    # Then
    wait_for(lambda: "expired" in actions(), 12, "an expired record in the history")
    assert actions() == ["created", "expired"]


def test_a_thread_longer_than_the_window_gets_a_rolling_summary(
    dev_server: DevServer, user: Caller
) -> None:
    # Given: WINDOW_MESSAGES=4 and no eviction step, so the third turn's six messages push
    # two out of the window
    project = new_project(user)
    thread = chat(user, project, "We sell handmade candles in Lisbon.")
    context = f"/projects/{project}/conversations/{thread}/context"
    chat(user, project, "Our shop opens at nine every morning.", thread)
    assert user.get(context).body["summary"] == ""
    # When
    chat(user, project, "We ship only within Portugal.", thread)
    # Then: the turn queued a summary job, and the worker draining the queue folded it
    summary = wait_for(lambda: user.get(context).body["summary"], 10, "a summary")
    assert "candles" in summary
    assert any("SQS MemoryJobsQueue -> WorkerFunction" in line for line in dev_server.lines)


def test_make_job_reaches_the_running_server(dev_server: DevServer) -> None:
    # When
    port = dev_server.url.rsplit(":", 1)[1]
    run = subprocess.run(
        [sys.executable, "-m", "local.job", "drain"],
        cwd=template.ROOT,
        env={**os.environ, "PORT": port},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    # Then
    assert run.returncode == 0, run.stderr
    assert f"on the running server at {dev_server.url}" in run.stderr
    assert '"job": "drain"' in run.stdout
    assert '"empty": true' in run.stdout
    wait_for(
        lambda: any("POST /_local/jobs/drain 200" in line for line in dev_server.lines),
        5,
        "the server's log line for the job",
    )
