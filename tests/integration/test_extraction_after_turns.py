"""Background extraction after real turns: it waits for enough conversation, not for the
model's tool bookkeeping."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from recall.domain.jobs import ExtractJob
from recall.wiring import job_runner, memory_store
from tests.integration.conftest import Api

MakeProject = Callable[..., str]


def chat(api: Api, project: str, message: str, thread: str | None = None) -> Any:
    body: dict[str, Any] = {"message": message}
    if thread:
        body["conversationId"] = thread
    reply = api.post(f"/projects/{project}/chat", body)
    assert reply.status == 200, reply
    return reply.body


def extract(api: Api, project: str, thread: str) -> None:
    """What the worker does with the extraction job a turn queued."""
    job_runner().run(ExtractJob(user_id=api.sub or "", project_id=project, conversation_id=thread))


def extraction_ran(api: Api, project: str) -> bool:
    return memory_store().meta(api.sub or "", project).last_extraction_at is not None


def test_tool_messages_do_not_make_a_thread_long_enough_to_extract(
    alice: Api, make_project: MakeProject
) -> None:
    # Given two turns that each saved a rule: six messages, two of them the model's tools
    project = make_project(alice)
    thread = chat(alice, project, "Always keep the header dark.")["conversation"]["id"]
    chat(alice, project, "Never use stock photos.", thread)
    shown = alice.get(f"/projects/{project}/conversations/{thread}").body
    assert shown["conversation"]["messageCount"] == 6
    assert [m["role"] for m in shown["messages"]].count("tool") == 2
    # When the worker takes the extraction job
    extract(alice, project, thread)
    # Then four messages of conversation are too few: it did not run
    assert not extraction_ran(alice, project)
    # When a third turn brings the conversation to six
    chat(alice, project, "We always ship on Fridays.", thread)
    extract(alice, project, thread)
    # Then it runs
    assert extraction_ran(alice, project)
