"""Background extraction after real turns: it learns from what the user said, but never
against what they did with their memory (scoped a rule to one thread, deleted it), it
waits for enough conversation, not for the model's tool bookkeeping, and a delivery that
failed is done by SQS's next one."""

from __future__ import annotations

from collections.abc import Callable
import json
from typing import Any

from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
import pytest

from local import embedded, runtime, template
from recall.domain.jobs import ExtractJob, job_body
from recall.domain.memory import MemoryEntry
from recall.domain.messages import Message
from recall.domain.prompt import ModelThrottled
from recall.domain.usage import Counts
from recall.services.extraction import RuleExtractor
from recall.wiring import conversation_store, job_runner, memory_store
from tests.integration.conftest import Api
from tests.integration.queued_jobs import take_queued

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


def project_memory(api: Api, project: str) -> dict[str, dict[str, Any]]:
    listed = api.get(f"/projects/{project}/memories").body["memories"]
    return {entry["key"]: entry for entry in listed if entry["scope"] == "persistent"}


def test_a_rule_for_this_conversation_stays_in_it_after_extraction(
    alice: Api, make_project: MakeProject
) -> None:
    # Given a rule the user scoped to one thread, saved there by the model
    project = make_project(alice)
    first = chat(alice, project, "In this conversation, always use a formal tone.")
    thread = first["conversation"]["id"]
    assert [(m["key"], m["scope"]) for m in first["memoriesSaved"]] == [("formal_tone", "thread")]
    # And two more turns stating project rules, so extraction is due
    chat(alice, project, "Always keep the header dark.", thread)
    chat(alice, project, "We always ship on Fridays.", thread)
    # When the worker extracts from the thread
    extract(alice, project, thread)
    # Then it ran, and the thread's rule is still the thread's alone
    assert extraction_ran(alice, project)
    assert "formal_tone" not in project_memory(alice, project)
    in_thread = alice.get(f"/projects/{project}/memories", query=f"conversationId={thread}").body[
        "memories"
    ]
    [kept] = [entry for entry in in_thread if entry["key"] == "formal_tone"]
    assert (kept["scope"], kept["source"]) == ("thread", "explicit")
    # And another thread's prompt carries the project's rules but not that one
    other = chat(alice, project, "hello")["conversation"]["id"]
    block = alice.get(f"/projects/{project}/conversations/{other}/context").body["memoryBlock"]
    assert "header_dark" in block
    assert "formal" not in block


def test_a_rule_the_user_told_the_model_to_forget_is_not_extracted_again(
    alice: Api, make_project: MakeProject
) -> None:
    # Given a rule saved, then forgotten at the user's word
    project = make_project(alice)
    thread = chat(alice, project, "Always keep the header dark.")["conversation"]["id"]
    forgot = chat(alice, project, "Please forget header_dark", thread)
    assert forgot["memoriesForgotten"] == ["header_dark"]
    # And a third turn that makes extraction due, the rule still among the messages it reads
    chat(alice, project, "We always ship on Fridays.", thread)
    # When the worker extracts
    extract(alice, project, thread)
    # Then it ran, and the forgotten rule stays forgotten
    assert extraction_ran(alice, project)
    assert set(project_memory(alice, project)) == {"ship_fridays"}


def test_a_rule_the_user_deleted_is_not_extracted_again(
    alice: Api, make_project: MakeProject
) -> None:
    # Given a rule saved in a thread, then deleted from the memory list
    project = make_project(alice)
    thread = chat(alice, project, "Always keep the header dark.")["conversation"]["id"]
    chat(alice, project, "What can you do?", thread)
    assert alice.delete(f"/projects/{project}/memories/header_dark").status == 204
    # And a third turn that makes extraction due
    chat(alice, project, "We always ship on Fridays.", thread)
    # When the worker extracts
    extract(alice, project, thread)
    # Then it ran, and the deleted rule stays deleted
    assert extraction_ran(alice, project)
    assert set(project_memory(alice, project)) == {"ship_fridays"}


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


def delivered(body: str) -> Any:
    """The worker's answer to one SQS delivery of a job, in the event Lambda's event source
    sends (the sample event's record, carrying ``body``)."""
    event = json.loads((template.ROOT / "events" / "worker-summarize.json").read_text())
    event["Records"][0]["body"] = body
    return runtime.invoke("WorkerFunction", event)


def test_an_extraction_the_model_failed_runs_when_sqs_delivers_it_again(
    alice: Api, make_project: MakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a thread long enough to extract from, and a model throttled once
    project = make_project(alice)
    thread = chat(alice, project, "Always keep the header dark.")["conversation"]["id"]
    chat(alice, project, "What can you do?", thread)
    chat(alice, project, "We always ship on Fridays.", thread)
    calls: list[int] = []
    propose = RuleExtractor.propose

    def throttled_once(
        self: RuleExtractor, messages: list[Message], spent: Callable[[Counts], None] | None = None
    ) -> list[MemoryEntry]:
        calls.append(len(messages))
        if len(calls) == 1:
            raise ModelThrottled("Bedrock ThrottlingException")
        return propose(self, messages, spent)

    monkeypatch.setattr(RuleExtractor, "propose", throttled_once)
    body = job_body(ExtractJob(user_id=alice.sub or "", project_id=project, conversation_id=thread))
    # When the worker takes the job: the delivery fails, for SQS to deliver it again
    with pytest.raises(BatchProcessingError):
        delivered(body)
    assert not extraction_ran(alice, project)
    # When SQS delivers it again
    assert delivered(body) == {"batchItemFailures": []}
    # Then the model was asked again, and the extraction ran
    assert len(calls) == 2
    assert extraction_ran(alice, project)


def kinds_queued(store: embedded.EmbeddedStore, api: Api) -> list[str]:
    """The kinds of the jobs queued for ``api``'s user, taken off the queue."""
    return [json.loads(body)["kind"] for body in take_queued(store, api.sub or "")]


def test_a_rule_said_while_the_thread_was_short_is_extracted_once_it_is_long_enough(
    alice: Api, make_project: MakeProject, embedded_store: embedded.EmbeddedStore
) -> None:
    # Given a rule said in a thread's first turn, then a question: five messages
    project = make_project(alice)
    thread = chat(alice, project, "I prefer serif fonts for every heading")["conversation"]["id"]
    chat(alice, project, "What should the homepage show first?", thread)
    assert "extract" not in kinds_queued(embedded_store, alice)
    # When a turn with no rule of its own makes the thread long enough
    chat(alice, project, "Thanks, that helps", thread)
    # Then extraction is queued for the rule said earlier
    assert "extract" in kinds_queued(embedded_store, alice)
    # And once it ran, later chatter queues none until a rule is said again
    extract(alice, project, thread)
    assert extraction_ran(alice, project)
    chat(alice, project, "What about the footer?", thread)
    assert "extract" not in kinds_queued(embedded_store, alice)
    chat(alice, project, "Never use stock photos", thread)
    assert "extract" in kinds_queued(embedded_store, alice)


def test_a_rule_said_within_the_cooldown_queues_no_extraction_on_every_later_turn(
    alice: Api, make_project: MakeProject, embedded_store: embedded.EmbeddedStore
) -> None:
    # Given a long thread whose extraction ran, and a rule said within the cooldown,
    # whose own extraction the cooldown refused
    project = make_project(alice)
    thread = chat(alice, project, "Always use a formal tone.")["conversation"]["id"]
    for text in ("What can you do?", "Tell me about candles"):
        chat(alice, project, text, thread)
    extract(alice, project, thread)
    assert extraction_ran(alice, project)
    chat(alice, project, "Never use emojis in replies.", thread)
    assert "extract" in kinds_queued(embedded_store, alice)
    extract(alice, project, thread)
    # When plain turns follow
    for n in range(3):
        chat(alice, project, f"Plain question number {n}", thread)
    # Then none queues an extraction the cooldown would refuse, and the rule waits its turn
    assert "extract" not in kinds_queued(embedded_store, alice)
    waiting = conversation_store().get(alice.sub or "", project, thread)
    assert waiting is not None and waiting.signals_at is not None
    assert waiting.signals_wait_until is not None


def test_an_extraction_leaves_the_stamp_of_a_rule_said_after_it_read_the_thread(
    alice: Api, make_project: MakeProject
) -> None:
    # Given a thread stamped by a rule, read by an extraction, then stamped again
    project = make_project(alice)
    thread = chat(alice, project, "Always keep the header dark.")["conversation"]["id"]
    user = alice.sub or ""
    seen = conversation_store().get(user, project, thread)
    assert seen is not None and seen.signals_at is not None
    chat(alice, project, "Never use stock photos", thread)
    # When the extraction marks what it read
    cleared = conversation_store().signals_read(user, project, thread, seen.signals_at)
    # Then the later rule's stamp stands
    after = conversation_store().get(user, project, thread)
    assert not cleared
    assert after is not None and after.signals_at is not None
    assert after.signals_at > seen.signals_at
    assert conversation_store().signals_read(user, project, thread, after.signals_at)
    cleared_thread = conversation_store().get(user, project, thread)
    assert cleared_thread is not None and cleared_thread.signals_at is None
