"""The background work of ``make dev``, end to end: ``python -m local.server`` in a
subprocess with every duration shortened through its environment, driven over real HTTP.
The schedules' timer prunes a session item left behind and expires a memory entry, and the
worker draining the queue writes a thread's rolling summary; ``make job`` reaches the same
server.

What has no API route (a session item) is written to and read from the embedded store whose
endpoint the server prints when it starts. Every wait has a deadline of a few seconds, and
the server is always terminated (killed if it will not stop)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
import os
import subprocess
import sys
import uuid

import boto3
import pytest

from local import template
from recall.domain import clock
from recall.settings import get_settings
from tests.conftest import wait_for
from tests.e2e.conftest import Caller, DevServer, dev_process
from tests.integration.conftest import session_left_behind

pytestmark = pytest.mark.e2e

SHORT = {
    "SESSION_IDLE_SECONDS": "3",
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


def test_a_session_item_left_behind_is_pruned_once_idle_past_session_idle_seconds(
    dev_server: DevServer, user: Caller
) -> None:
    # Given: a thread, and a session item as turns wrote them before the window moved to
    # the Messages table, put in the embedded store the server printed
    sessions = boto3.client("dynamodb", endpoint_url=dev_server.store, region_name="us-east-1")
    project = new_project(user)
    thread = chat(user, project, "Hello there")
    settings = get_settings().model_copy(
        update={"session_idle_seconds": int(SHORT["SESSION_IDLE_SECONDS"])}
    )
    now = clock.stamp(clock.now())
    item = session_left_behind(settings, user.sub or "", project, thread, now)
    sessions.put_item(TableName="SessionsTable", Item=item)

    def session_exists() -> bool:
        found = sessions.get_item(TableName="SessionsTable", Key={"thread": item["thread"]})
        return "Item" in found

    assert session_exists()
    # When: SESSION_IDLE_SECONDS pass
    # Then: the prune-sessions schedule deletes it; the thread itself stays
    wait_for(lambda: not session_exists(), 10, "the idle session pruned")
    assert user.get(f"/projects/{project}/conversations/{thread}").status == 200
    assert any("prune-sessions" in line for line in dev_server.lines)


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
