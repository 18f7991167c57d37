"""A thread's item is the one truth about its thread: what each turn moves (its counts, its
last message, where its window starts) is written there by the turn's own transaction, so
every reader of a thread reads that item and nothing else."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from recall.domain.jobs import ExtractJob, SummarizeJob
from recall.settings import get_settings
from recall.store.dynamodb import dynamodb_client
from recall.wiring import job_runner
from tests.integration.conftest import Api

MakeProject = Callable[..., str]
READS = {"GetItem", "BatchGetItem", "Query", "Scan"}


@pytest.fixture
def usage_reads() -> Iterator[list[str]]:
    """Every read sent to the usage table from now on, by operation."""
    sent: list[str] = []
    table = get_settings().usage_table

    def note(model: Any, params: dict[str, Any], **_: Any) -> None:
        tables = {params.get("TableName"), *params.get("RequestItems", {})}
        if table in tables and model.name in READS:
            sent.append(model.name)

    events = dynamodb_client().meta.events
    events.register("before-parameter-build.dynamodb", note, unique_id="usage-reads")
    yield sent
    events.unregister("before-parameter-build.dynamodb", unique_id="usage-reads")


def say(api: Api, project: str, text: str, thread: str | None = None) -> str:
    body = {"message": text, **({"conversationId": thread} if thread else {})}
    reply = api.post(f"/projects/{project}/chat", body)
    assert reply.status == 200, reply
    conversation_id: str = reply.body["conversation"]["id"]
    return conversation_id


def counts(row: dict[str, Any]) -> tuple[int, int]:
    return row["messageCount"], row["turnCount"]


def test_every_reader_sees_what_turns_across_three_threads_moved_without_reading_usage(
    alice: Api, make_project: MakeProject, usage_reads: list[str]
) -> None:
    # Given turns that go back and forth between three threads
    project = make_project(alice)
    base = f"/projects/{project}/conversations"
    first = say(alice, project, "one")
    second = say(alice, project, "two")
    say(alice, project, "one again", first)
    third = say(alice, project, "three")
    say(alice, project, "two again", second)
    say(alice, project, "one a third time", first)
    expected = {first: (6, 3), second: (4, 2), third: (2, 1)}
    usage_reads.clear()
    # When every reader reads them
    shown = {t: counts(alice.get(f"{base}/{t}").body["conversation"]) for t in expected}
    listed = {row["id"]: counts(row) for row in alice.get(base).body["conversations"]}
    patched = {
        t: counts(alice.patch(f"{base}/{t}", {"title": f"Thread {t[-4:]}"}).body) for t in expected
    }
    exported = {
        row["id"]: (row["messageCount"], len(row["messages"]))
        for row in alice.get(f"/projects/{project}/export").body["conversations"]
    }
    runner = job_runner()
    for thread in expected:
        ids = {"user_id": alice.sub or "", "project_id": project, "conversation_id": thread}
        runner.run(SummarizeJob(**ids))
        runner.run(ExtractJob(**ids))
    after_jobs = {t: counts(alice.get(f"{base}/{t}").body["conversation"]) for t in expected}
    # Then each sees the counts the turns left, and none read the usage table
    assert shown == listed == patched == after_jobs == expected
    assert exported == {t: (count, count) for t, (count, _) in expected.items()}
    assert usage_reads == []
    # and the list is in the order of the last turns
    assert list(listed) == [first, second, third]
