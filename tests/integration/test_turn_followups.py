"""What a turn leaves for the worker: queued after the turn is saved, and never a risk to
the reply."""

from __future__ import annotations

from collections.abc import Callable, Iterator
import logging
from typing import Any

from botocore.stub import Stubber
import pytest

from recall.domain.jobs import SummarizeJob
from recall.store.jobs import sqs_client
from recall.wiring import job_runner
from tests.integration.conftest import Api

MakeProject = Callable[..., str]


@pytest.fixture
def refusing_queue() -> Iterator[Stubber]:
    """The queue as an outage shows it: every send refused."""
    stub = Stubber(sqs_client())
    for _ in range(10):
        stub.add_client_error("send_message_batch", "ServiceUnavailable", http_status_code=503)
    with stub:
        yield stub


def chat(api: Api, project: str, message: str, thread: str | None = None) -> Any:
    body: dict[str, Any] = {"message": message}
    if thread:
        body["conversationId"] = thread
    return api.post(f"/projects/{project}/chat", body)


def test_a_turn_whose_jobs_cannot_be_queued_still_answers_and_saves(
    alice: Api,
    make_project: MakeProject,
    refusing_queue: Stubber,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given a thread long enough for extraction, and a queue that refuses everything
    project = make_project(alice)
    thread = chat(alice, project, "hello").body["conversation"]["id"]
    chat(alice, project, "what can you do?", thread)
    # When a turn states a rule (extraction is due)
    with caplog.at_level(logging.ERROR, logger="recall"):
        reply = chat(alice, project, "Always keep the header dark.", thread)
    # Then the reply and the thread are what they would be with a queue
    assert reply.status == 200, reply
    assert reply.body["message"]["status"] == "complete"
    saved = alice.get(f"/projects/{project}/conversations/{thread}").body
    assert saved["conversation"]["messageCount"] >= 6
    assert saved["messages"][-1]["id"] == reply.body["message"]["id"]
    # And the failure was logged, not hidden
    assert any("memory jobs not queued" in record.getMessage() for record in caplog.records)


def test_the_threads_context_shows_the_summary_of_what_left_the_window(
    alice: Api, make_project: MakeProject
) -> None:
    # Given a thread longer than the window grows (30 messages, then it drops back to 20)
    project = make_project(alice)
    thread = chat(alice, project, "We sell handmade candles in Lisbon.").body["conversation"]["id"]
    for n in range(15):
        chat(alice, project, f"Tell me idea number {n} for the shop window.", thread)
    assert alice.get(f"/projects/{project}/conversations/{thread}/context").body["summary"] == ""
    # When the worker folds what left the window
    job_runner().run(
        SummarizeJob(user_id=alice.sub or "", project_id=project, conversation_id=thread)
    )
    # Then the next turn's context carries it, as its own layer
    context = alice.get(f"/projects/{project}/conversations/{thread}/context").body
    assert "handmade candles" in context["summary"]
    assert context["summary"].startswith("<conversation_summary>")
    assert len(context["window"]) == 20
