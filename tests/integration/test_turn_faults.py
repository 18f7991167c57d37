"""A chat turn under faults: DynamoDB throttled or failing at each of its requests in turn,
the model failing, the queue refusing its jobs, the process dying before the save. Every
reply tells the truth about what was saved, and the thread the store reads back stays
consistent: counters equal the messages stored, no orphan, no duplicate turn."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
import logging
import time
from typing import Any

import boto3
import pytest

from local import runtime
from local.seed import grow_thread
from recall.domain import clock
from recall.domain.conversations import Conversation
from recall.domain.ids import new_id
from recall.domain.memory import MemoryEntry
from recall.domain.messages import Message
from recall.domain.prompt import (
    ModelError,
    ModelReply,
    ModelRequest,
    ModelThrottled,
    ModelTimeout,
    ModelUnavailable,
    ToolCall,
)
from recall.providers.offline import OfflineProvider
from recall.settings import get_settings
from recall.store.conversation_items import conversation_key
from recall.store.dynamodb import dynamodb_client, to_value
from recall.store.idempotency import persistence_layer
from recall.store.jobs import sqs_client
from recall.wiring import (
    conversation_store,
    memory_store,
    message_store,
    model_choice,
)
from tests.integration.conftest import Api, RecordClock, Reply
from tests.integration.fault_injection import (
    ALWAYS,
    ONCE,
    THROTTLES,
    TRANSIENTS,
    Backoffs,
    Fault,
    Injector,
    colliding,
    injected,
    no_backoff_sleep,
)

MakeProject = Callable[..., str]
FAULTS = THROTTLES + TRANSIENTS


@pytest.fixture
def backoffs() -> Iterator[Backoffs]:
    with no_backoff_sleep() as asked:
        yield asked


@pytest.fixture
def store_faults(backoffs: Backoffs) -> Iterator[Injector]:
    with injected(dynamodb_client()) as injector:
        yield injector


@pytest.fixture
def model() -> Iterator[Callable[[Any], None]]:
    yield model_choice().use
    model_choice().use(None)


class Failing:
    """A provider that fails as Bedrock does, mapped to the domain's model errors."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def converse(self, request: ModelRequest) -> ModelReply:
        raise self.error


@dataclass
class Thread:
    """One thread as the store reads it back."""

    conversation: Conversation | None
    messages: list[Message]


@dataclass
class Snapshot:
    """Everything of one user in one project a turn could change."""

    threads: dict[str, Thread]
    memories: list[MemoryEntry]
    sessions_started: int

    def thread(self, conversation_id: str) -> Thread:
        return self.threads.get(conversation_id) or Thread(None, [])


def snapshot(user: str, project: str, thread: str | None = None) -> Snapshot:
    """Read through the store's own reads: ``thread``, or every live and archived thread
    of the project when a turn may have started one."""
    ids = [thread] if thread else []
    if not thread:
        for archived in (False, True):
            conversations, _ = conversation_store().page(user, project, archived, 100, None)
            ids += [conversation.conversation_id for conversation in conversations]
    threads: dict[str, Thread] = {}
    persistent, memories = memory_store().active(user, project, thread, clock.now())
    for cid in ids:
        conversation = conversation_store().get(user, project, cid)
        if conversation is None:
            continue
        messages, _ = message_store().page(user, project, cid, 1000, None)
        threads[cid] = Thread(conversation, messages)
        if cid != thread:
            memories += memory_store().active(user, project, cid, clock.now())[1]
    memories = persistent + memories
    meta = memory_store().meta(user, project)
    return Snapshot(threads, memories, meta.sessions_since_consolidation)


def assert_consistent(state: Snapshot) -> None:
    """Counters equal what is stored; the window starts at a stored message."""
    for cid, thread in state.threads.items():
        conversation = thread.conversation
        assert conversation is not None, f"thread {cid} listed but unreadable"
        assert conversation.message_count == len(thread.messages), "orphan or missing messages"
        assert len({m.message_id for m in thread.messages}) == len(thread.messages)
        stored = {m.message_id for m in thread.messages}
        assert conversation.window_start in stored | {None}


def turn_added(before: Snapshot, after: Snapshot) -> dict[str, list[Message]]:
    """The messages each thread gained: a thread is never rewritten, only appended to."""
    added: dict[str, list[Message]] = {}
    for cid, thread in after.threads.items():
        old = before.thread(cid).messages
        assert thread.messages[: len(old)] == old, "a turn changed saved messages"
        if len(thread.messages) > len(old):
            added[cid] = thread.messages[len(old) :]
    return added


def assert_the_reply_is_what_was_saved(
    reply: Reply, sent: str, before: Snapshot, after: Snapshot
) -> None:
    """A 2xx is a saved turn; a 429/503 from the store saved nothing; a model failure
    saved the user's message and the error, as the API documents."""
    assert_consistent(after)
    added = turn_added(before, after)
    for cid, messages in added.items():
        old, new = before.thread(cid).conversation, after.thread(cid).conversation
        assert new is not None
        turns = new.turn_count - (old.turn_count if old else 0)
        assert turns == 1 == sum(m.role == "user" for m in messages), "turn count off"
    if reply.status == 200:
        [(cid, messages)] = added.items()
        assert cid == reply.body["conversation"]["id"]
        assert messages[0].role == "user" and messages[0].content == sent
        assert messages[-1].message_id == reply.body["message"]["id"]
        assert messages[-1].status == "complete"
        assert all(m.role == "tool" for m in messages[1:-1])
        saved = after.thread(cid).conversation
        assert saved is not None and saved.last_message_id == messages[-1].message_id
        return
    error = reply.body["error"]
    assert reply.status != 500, reply
    if error["code"].startswith("model_"):
        [ids] = error["details"]
        [(cid, messages)] = added.items()
        assert cid == ids["conversationId"]
        assert [m.message_id for m in (messages[0], messages[-1])] == [
            ids["userMessageId"],
            ids["assistantMessageId"],
        ]
        assert messages[0].content == sent and messages[-1].status == "error"
        return
    assert reply.status in (429, 503), reply
    assert error["code"] == ("throttled" if reply.status == 429 else "unavailable")
    assert reply.headers.get("Retry-After") == str(get_settings().retry_after_seconds)
    assert added == {}, "a refused turn saved messages"
    assert after.sessions_started == before.sessions_started
    # A new thread, made before the model, goes again: the refusal names no thread, so a
    # retry as told starts another
    assert set(after.threads) <= set(before.threads), "a refused turn left a thread"
    for cid, thread in after.threads.items():
        assert thread.conversation == before.thread(cid).conversation
    assert after.memories == before.memories, "a refused turn wrote memory"


@dataclass
class Scenario:
    """A kind of turn: how to set up its thread, and the body each attempt sends."""

    name: str
    prepare: Callable[[Api, str], str | None]
    message: Callable[[int], str]
    thread_of: Callable[[str | None], str | None] = lambda thread: thread
    # A turn that starts a thread gets a project of its own each time, so the store reads
    # back one thread, not every thread the earlier attempts left.
    fresh_project: bool = False


def _with_turns(count: int) -> Callable[[Api, str], str | None]:
    def prepare(api: Api, project: str) -> str | None:
        thread: str | None = None
        for n in range(count):
            body: dict[str, Any] = {"message": f"tell me idea {n}"}
            if thread:
                body["conversationId"] = thread
            reply = api.post(f"/projects/{project}/chat", body)
            assert reply.status == 200, reply
            thread = reply.body["conversation"]["id"]
        return thread

    return prepare


def started_thread(api: Api, project: str) -> str:
    """A thread with one saved turn."""
    thread = _with_turns(1)(api, project)
    assert thread
    return thread


def _page_behind(api: Api, project: str) -> str | None:
    thread = _with_turns(1)(api, project)
    assert thread
    _claim_a_newer_turn(api.sub or "", project, thread)
    return thread


def _claim_a_newer_turn(user: str, project: str, thread: str) -> None:
    """The thread names a last message newer than any its window's query finds, as when
    the query ran just before another turn's save and the thread's read just after: the
    turn reads its window again."""
    boto3.client("dynamodb").update_item(
        TableName=get_settings().conversations_table,
        Key=conversation_key(user, project, thread),
        UpdateExpression="SET #last = :last",
        ExpressionAttributeNames={"#last": "lastMessageId"},
        ExpressionAttributeValues={":last": to_value(new_id())},
    )


EXISTING = Scenario("an existing thread", _with_turns(1), lambda n: f"what about {n}?")
# One of each kind botocore and the store tell apart: a throttle, a 5xx, no answer at all.
KINDS = [THROTTLES[0], TRANSIENTS[0], TRANSIENTS[2]]
SCENARIOS = [
    Scenario(
        "a new thread", lambda api, project: None, lambda n: f"hello number {n}", fresh_project=True
    ),
    Scenario(
        "the latest thread", _with_turns(1), lambda n: f"more on {n}", lambda thread: "latest"
    ),
    Scenario("a window page behind its thread", _page_behind, lambda n: f"back again {n}"),
]


def _long_enough_to_extract(api: Api, project: str) -> str | None:
    thread = _with_turns(1)(api, project)
    assert thread
    grow_thread(api.sub or "", project, thread, get_settings().extract_min_messages - 2)
    return thread


# A rule stated on a thread long enough for extraction: a save_preference call (requests
# of its own during the model loop), and an extraction job queued after the save.
MEMORY_TOOL = Scenario(
    "a memory tool call", _long_enough_to_extract, lambda n: f"Always sign off as Team {n}."
)


def say(api: Api, project: str, text: str, thread: str | None, **kwargs: Any) -> Reply:
    body: dict[str, Any] = {"message": text}
    if thread:
        body["conversationId"] = thread
    return api.post(f"/projects/{project}/chat", body, **kwargs)


def recorded_requests(
    injector: Injector, api: Api, project: str, scenario: Scenario, thread: str | None
) -> list[str]:
    """One clean turn of the scenario, recording the store's requests in order."""
    injector.arm(-1, FAULTS[0], 0)
    reply = say(api, project, scenario.message(999), scenario.thread_of(thread))
    assert reply.status == 200, reply
    requests = list(injector.requests)
    if scenario.prepare is _page_behind:
        _claim_a_newer_turn(api.sub or "", project, thread or "")
    return requests


def run_faulted(
    injector: Injector,
    api: Api,
    project: str,
    scenario: Scenario,
    thread: str | None,
    fault: Fault,
    requests: list[str],
    *,
    new_project: Callable[[], str] | None = None,
    persistences: tuple[int, ...] = (ONCE, ALWAYS),
) -> list[tuple[int, str, int, int]]:
    """For each request of the turn in turn, the fault once (botocore's retry recovers)
    and always (its retries run out); every reply checked against what the store holds."""
    user = api.sub or ""
    settings = get_settings()
    outcomes = []
    after: Snapshot | None = None
    for index, operation in enumerate(requests):
        if not fault.fits(operation):
            continue
        for times in persistences:
            if scenario.fresh_project and new_project is not None:
                project, after = new_project(), None
            before = after or snapshot(user, project, thread)
            text = scenario.message(index * 10 + times % 7)
            injector.arm(index, fault, times, plan=requests)
            reply = say(api, project, text, scenario.thread_of(thread))
            injector.disarm()
            # The requests of a round trip leave in any order: the armed one was sent.
            assert injector.faulted[:1] == [operation], (operation, injector.requests)
            after = snapshot(user, project, thread)
            assert_the_reply_is_what_was_saved(reply, text, before, after)
            faulted = len(injector.faulted)
            outcomes.append((index, operation, times, reply.status))
            if fault.code == "TransactionCanceledException":
                # DynamoDB cancelled it: botocore does not retry, the caller may
                assert (faulted, reply.status) == (1, 429), (operation, reply)
            elif times == ONCE:
                assert (faulted, reply.status) == (1, 200), (operation, reply)
            else:
                assert faulted == settings.dynamodb_max_attempts, (operation, faulted)
                assert reply.status == (503 if fault in TRANSIENTS else 429), (operation, reply)
            if scenario.prepare is _page_behind and reply.status == 200:
                _claim_a_newer_turn(user, project, thread or "")
                after = None
    return outcomes


@pytest.mark.parametrize("fault", FAULTS, ids=lambda fault: fault.name)
def test_every_store_fault_at_every_request_of_a_turn_is_retried_or_refused_never_half_saved(
    alice: Api,
    make_project: MakeProject,
    store_faults: Injector,
    backoffs: Backoffs,
    fault: Fault,
) -> None:
    # Given a thread: BatchGetItem, three Queries (its window, both memory scopes), then
    # the model, then TransactWriteItems
    project = make_project(alice)
    thread = EXISTING.prepare(alice, project)
    requests = recorded_requests(store_faults, alice, project, EXISTING, thread)
    assert sorted(requests[:-1]) == ["BatchGetItem", "Query", "Query", "Query"]
    assert requests[-1] == "TransactWriteItems"
    # When each request in turn fails once, then always; then each reply is the truth
    outcomes = run_faulted(store_faults, alice, project, EXISTING, thread, fault, requests)
    assert outcomes, "the fault fits no request of this turn"
    if fault.code != "TransactionCanceledException":
        # And botocore backed off before each of its retries
        assert len(backoffs.asked) == sum(
            1 if times == ONCE else get_settings().dynamodb_max_attempts - 1
            for _, _, times, _ in outcomes
        )


@pytest.mark.parametrize("fault", KINDS, ids=lambda fault: fault.name)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda scenario: scenario.name)
def test_a_store_fault_at_any_request_of_other_turn_shapes_saves_all_or_nothing(
    alice: Api,
    make_project: MakeProject,
    store_faults: Injector,
    scenario: Scenario,
    fault: Fault,
) -> None:
    # Given a new thread (its PutItem), "latest" (its byRecency Query) or a window page
    # behind its thread (the Query that reads the window again)
    project = make_project(alice)
    thread = scenario.prepare(alice, project)
    requests = recorded_requests(store_faults, alice, project, scenario, thread)
    assert requests[-1] == "TransactWriteItems"
    # When each request in turn fails past its retries, then nothing of the turn is saved
    run_faulted(
        store_faults,
        alice,
        project,
        scenario,
        thread,
        fault,
        requests,
        new_project=lambda: make_project(alice),
        persistences=(ALWAYS,),
    )


class ModelCalls:
    """The offline model, noting how many store requests the turn had made at each call."""

    def __init__(self, injector: Injector) -> None:
        self.injector = injector
        self.at: list[int] = []

    def converse(self, request: ModelRequest) -> ModelReply:
        self.at.append(len(self.injector.requests))
        return OfflineProvider().converse(request)


@dataclass
class ToolTurn:
    """A turn whose model calls save_preference, and where its requests fall."""

    project: str
    thread: str
    requests: list[str]
    before_model: int  # requests before the first model call
    tools: range  # the tool's own requests, between the model's calls


@pytest.fixture
def tool_turn(
    alice: Api, make_project: MakeProject, store_faults: Injector, model: Callable[[Any], None]
) -> ToolTurn:
    project = make_project(alice)
    thread = MEMORY_TOOL.prepare(alice, project)
    assert thread
    calls = ModelCalls(store_faults)
    model(calls)
    requests = recorded_requests(store_faults, alice, project, MEMORY_TOOL, thread)
    assert len(calls.at) >= 2, "the model called no tool"
    assert requests[-1] == "TransactWriteItems"
    return ToolTurn(project, thread, requests, calls.at[0], range(calls.at[0], calls.at[-1]))


def test_the_memory_tools_send_no_request_of_their_own(tool_turn: ToolTurn) -> None:
    # Their changes wait for the turn's one transaction, so no store fault can fall
    # between the model's calls
    assert len(tool_turn.tools) == 0, tool_turn.requests[tool_turn.before_model :]
    assert tool_turn.requests[tool_turn.before_model :] == ["TransactWriteItems"]


@pytest.mark.parametrize("fault", [THROTTLES[1], TRANSIENTS[2]], ids=lambda fault: fault.name)
def test_a_store_fault_before_the_memory_tool_runs_saves_nothing_of_the_turn(
    alice: Api, store_faults: Injector, tool_turn: ToolTurn, fault: Fault
) -> None:
    # When a request before the model (and its tool) fails, then nothing of the turn is
    # saved, memory included
    run_faulted(
        store_faults,
        alice,
        tool_turn.project,
        MEMORY_TOOL,
        tool_turn.thread,
        fault,
        tool_turn.requests[: tool_turn.before_model],
        persistences=(ALWAYS,),
    )


@pytest.mark.parametrize(
    "fault", [THROTTLES[1], THROTTLES[3], TRANSIENTS[2]], ids=lambda fault: fault.name
)
def test_a_turn_refused_at_its_save_leaves_no_memory_entry_its_tools_wrote(
    alice: Api, store_faults: Injector, tool_turn: ToolTurn, fault: Fault
) -> None:
    user, project, thread = alice.sub or "", tool_turn.project, tool_turn.thread
    before = snapshot(user, project, thread)
    text = MEMORY_TOOL.message(8)
    # When the turn's save (its last request) is refused past its retries
    store_faults.arm(len(tool_turn.requests) - 1, fault, ALWAYS)
    reply = say(alice, project, text, thread)
    store_faults.disarm()
    assert store_faults.faulted and set(store_faults.faulted) == {"TransactWriteItems"}
    assert reply.status in (429, 503), reply
    # Then nothing of the turn stays: no message, and no memory entry its tool wrote
    assert_the_reply_is_what_was_saved(reply, text, before, snapshot(user, project, thread))


def written_to(table: str, action: str | None = None) -> Callable[[dict[str, Any]], bool]:
    """A transaction's item on the table a setting names (of one action, when given)."""

    def picks(item: dict[str, Any]) -> bool:
        name = getattr(get_settings(), table)
        return any(
            part.get("TableName") == name and action in (None, kind) for kind, part in item.items()
        )

    return picks


MET_AT = {
    "the thread": written_to("conversations_table", "Update"),
    "the caller's usage counter": written_to("usage_table"),
    "the caller's role check": written_to("projects_table", "ConditionCheck"),
}


@pytest.mark.parametrize("where", MET_AT.values(), ids=MET_AT.keys())
def test_a_save_that_met_another_transaction_is_saved_again_and_lands_once(
    alice: Api, make_project: MakeProject, where: Callable[[dict[str, Any]], bool]
) -> None:
    # Given a thread, and a turn whose save meets another transaction on one of its items
    # (a turn on the same thread, or the same user's turn in another tab)
    project = make_project(alice)
    thread = started_thread(alice, project)
    user = alice.sub or ""
    before = snapshot(user, project, thread)
    with colliding(dynamodb_client(), where, ONCE) as collisions:
        reply = say(alice, project, "once more", thread)
    # Then it is saved again, once, in order
    assert reply.status == 200, reply
    assert (collisions.sent, collisions.cancelled) == (2, 1)
    after = snapshot(user, project, thread)
    assert_the_reply_is_what_was_saved(reply, "once more", before, after)
    assert [m.role for m in turn_added(before, after)[thread]] == ["user", "assistant"]


def test_a_turn_whose_tool_memory_met_another_transaction_saves_it_on_the_next_try(
    alice: Api, store_faults: Injector, tool_turn: ToolTurn
) -> None:
    user, project, thread = alice.sub or "", tool_turn.project, tool_turn.thread
    before = snapshot(user, project, thread)
    text = MEMORY_TOOL.message(5)
    with colliding(dynamodb_client(), written_to("memories_table"), ONCE) as collisions:
        reply = say(alice, project, text, thread)
    assert reply.status == 200, reply
    assert collisions.cancelled == 1
    after = snapshot(user, project, thread)
    assert_the_reply_is_what_was_saved(reply, text, before, after)
    assert reply.body["memoriesSaved"], reply.body
    assert after.memories != before.memories


def test_a_save_that_keeps_meeting_other_transactions_gives_up_with_409_and_retry_after(
    alice: Api, make_project: MakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given every save of the turn meets another transaction on the thread
    project = make_project(alice)
    thread = started_thread(alice, project)
    user = alice.sub or ""
    before = snapshot(user, project, thread)
    monkeypatch.setattr("recall.retry.time.sleep", lambda _: None)
    met = written_to("conversations_table", "Update")
    with colliding(dynamodb_client(), met, ALWAYS) as collisions:
        reply = say(alice, project, "busy?", thread)
    # Then the turn tried as often as its setting allows, saved nothing, and says when
    # to come back
    settings = get_settings()
    assert collisions.cancelled == settings.turn_retry_max
    assert (reply.status, reply.body["error"]["code"]) == (409, "conflict"), reply
    assert reply.headers.get("Retry-After") == str(settings.retry_after_seconds)
    assert turn_added(before, snapshot(user, project, thread)) == {}


def test_clearing_the_context_as_a_turn_saves_on_the_thread_is_a_409_to_retry_not_a_404(
    alice: Api, make_project: MakeProject
) -> None:
    # Given the clear's write meets a turn's transaction on the thread's item
    project = make_project(alice)
    thread = started_thread(alice, project)
    path = f"/projects/{project}/conversations/{thread}/clear-context"
    with colliding(dynamodb_client(), written_to("conversations_table"), ONCE):
        busy = alice.post(path)
    # Then the thread is not called gone: the client is told to come back
    assert (busy.status, busy.body["error"]["code"]) == (409, "conflict"), busy
    assert busy.headers.get("Retry-After") == str(get_settings().retry_after_seconds)
    # And the same request then clears it
    assert alice.post(path).status == 200


def test_renaming_a_thread_as_a_turn_saves_on_it_reads_it_again_and_lands(
    alice: Api, make_project: MakeProject, store_faults: Injector
) -> None:
    # Given the rename's update meets a turn's transaction on the thread's item
    project = make_project(alice)
    thread = started_thread(alice, project)
    path = f"/projects/{project}/conversations/{thread}"
    met = Fault("in a transaction", "TransactionConflictException", 400)
    store_faults.arm(0, met, ALWAYS, plan=["UpdateItem"])
    renamed = alice.patch(path, {"title": "Renamed"})
    store_faults.disarm()
    # Then the thread is not called gone: the PATCH reads it again and lands
    assert store_faults.faulted[:1] == ["UpdateItem"]
    assert (renamed.status, renamed.body["title"]) == (200, "Renamed"), renamed
    listed = alice.get(f"/projects/{project}/conversations").body["conversations"]
    assert [row["title"] for row in listed] == ["Renamed"]


MODEL_FAULTS = [
    (ModelThrottled("Bedrock ThrottlingException: slow down"), 503, "model_throttled"),
    (ModelUnavailable("Bedrock ServiceUnavailableException"), 503, "model_unavailable"),
    (ModelTimeout("Bedrock read timed out"), 504, "model_timeout"),
    (ModelError("Bedrock ModelErrorException: the model failed"), 502, "model_error"),
    (TimeoutError("the provider's socket timed out"), 502, "model_error"),
]


@pytest.mark.parametrize(
    ("error", "status", "code"), MODEL_FAULTS, ids=lambda value: str(value)[:30]
)
def test_a_model_failure_saves_the_message_and_the_error_and_answers_as_documented(
    alice: Api,
    make_project: MakeProject,
    model: Callable[[Any], None],
    error: Exception,
    status: int,
    code: str,
) -> None:
    project = make_project(alice)
    thread = started_thread(alice, project)
    user = alice.sub or ""
    before = snapshot(user, project)
    model(Failing(error))
    reply = say(alice, project, "are you there?", thread)
    assert (reply.status, reply.body["error"]["code"]) == (status, code)
    assert_the_reply_is_what_was_saved(reply, "are you there?", before, snapshot(user, project))
    # A throttled or unavailable model may be asked again later: it says when
    assert ("Retry-After" in reply.headers) == (status == 503)
    # And the next turn works on the same thread
    model(None)
    assert say(alice, project, "try again", thread).status == 200
    assert_consistent(snapshot(user, project))


@pytest.mark.parametrize("fault", KINDS, ids=lambda fault: fault.name)
def test_a_failed_model_turn_whose_save_is_refused_saves_nothing(
    alice: Api,
    make_project: MakeProject,
    model: Callable[[Any], None],
    store_faults: Injector,
    fault: Fault,
) -> None:
    # Given the model fails, and the save after it is refused past its retries
    project = make_project(alice)
    thread = started_thread(alice, project)
    model(Failing(ModelThrottled("slow down")))
    requests = recorded_requests_failing(store_faults, alice, project, thread)
    user = alice.sub or ""
    before = snapshot(user, project)
    store_faults.arm(len(requests) - 1, fault, ALWAYS)
    reply = say(alice, project, "anyone?", thread)
    store_faults.disarm()
    # Then the store's refusal is the answer, and nothing was saved
    assert reply.status in (429, 503), reply
    assert_the_reply_is_what_was_saved(reply, "anyone?", before, snapshot(user, project))


def recorded_requests_failing(injector: Injector, api: Api, project: str, thread: str) -> list[str]:
    injector.arm(-1, FAULTS[0], 0)
    reply = say(api, project, "first try", thread)
    assert reply.status == 503, reply
    return list(injector.requests)


SQS_FAULTS = [
    Fault("queue throttled", "ThrottlingException", 400),
    Fault("queue internal error", "InternalError", 500),
    Fault("queue unreachable", "", 0),
]


@pytest.mark.parametrize(
    ("fault", "times"),
    [(SQS_FAULTS[0], ONCE), *((fault, ALWAYS) for fault in SQS_FAULTS)],
    ids=lambda value: (
        value.name if isinstance(value, Fault) else {ONCE: "once"}.get(value, "always")
    ),
)
def test_a_queue_fault_never_fails_or_delays_the_saved_turn(
    alice: Api,
    make_project: MakeProject,
    backoffs: Backoffs,
    caplog: pytest.LogCaptureFixture,
    fault: Fault,
    times: int,
) -> None:
    # Given a turn that queues an extraction job
    project = make_project(alice)
    thread = MEMORY_TOOL.prepare(alice, project)
    user = alice.sub or ""
    before = snapshot(user, project)
    text = MEMORY_TOOL.message(1)
    # When the queue fails
    with injected(sqs_client(), "sqs") as queue, caplog.at_level(logging.ERROR, "recall"):
        queue.arm(0, fault, times)
        reply = say(alice, project, text, thread)
    # Then the turn is saved and answered as it would have been
    assert reply.status == 200, reply
    assert_the_reply_is_what_was_saved(reply, text, before, snapshot(user, project))
    assert queue.requests == ["SendMessageBatch"]
    # And the queue was given no more attempts than its setting: the reply waits little
    settings = get_settings()
    assert len(queue.attempts) <= settings.job_queue_max_attempts
    config = sqs_client().meta.config
    timeouts = {getattr(config, "connect_timeout"), getattr(config, "read_timeout")}  # noqa: B009
    assert timeouts == {settings.job_queue_timeout_seconds}
    # And a failure that outlasts the retry is logged, not hidden
    lost = any("memory jobs not queued" in record.getMessage() for record in caplog.records)
    assert lost == (times == ALWAYS)


class SimulatedCrash(BaseException):
    """The Lambda process dying: no ``except Exception`` in the stack sees it."""


def crash_at_save(model: Any, **_: Any) -> None:
    if model.name == "TransactWriteItems":
        raise SimulatedCrash


def chat_event(api: Api, project: str, body: dict[str, Any], key: str) -> dict[str, Any]:
    return runtime.http_event(
        "POST",
        f"/projects/{project}/chat",
        body=body,
        headers={"Idempotency-Key": key},
        sub=api.sub,
    )


def invoke_chat(
    event: dict[str, Any], seconds_left: float, clock: RecordClock | None = None
) -> Reply:
    """The chat function with a Lambda context that has ``seconds_left`` to run, on the
    machine's clock or on the idempotency records' ``clock``."""
    context = (
        clock.lambda_context("ChatFunction", seconds_left)
        if clock
        else runtime.LambdaContext(
            function_name="ChatFunction",
            aws_request_id="crash-test",
            deadline_ms=int((time.time() + seconds_left) * 1000),
        )
    )
    return Reply(runtime.handler_module("ChatFunction").lambda_handler(event, context))


def test_a_turn_that_crashed_before_its_save_completes_exactly_once_on_retry(
    alice: Api, make_project: MakeProject, record_clock: RecordClock
) -> None:
    # Given a thread, and a keyed turn whose Lambda, with 30 s to run, dies between the
    # model and the save (every invocation's time on the records' clock)
    project = make_project(alice)
    thread = started_thread(alice, project)
    user = alice.sub or ""
    before = snapshot(user, project)
    event = chat_event(alice, project, {"message": "one more", "conversationId": thread}, "k-1")
    events = dynamodb_client().meta.events
    events.register("before-call.dynamodb.TransactWriteItems", crash_at_save, unique_id="crash")
    try:
        with pytest.raises(SimulatedCrash):
            invoke_chat(event, seconds_left=30, clock=record_clock)
    finally:
        events.unregister("before-call.dynamodb.TransactWriteItems", unique_id="crash")
    assert snapshot(user, project).threads == before.threads
    # When retried while the crashed invocation could still be running, 0.1 s before its end
    record_clock.advance(29.9)
    running = invoke_chat(event, seconds_left=30, clock=record_clock)
    # Then it is a clear 409 that says when to come back, not a 500
    assert running.status == 409, running
    assert running.body["error"]["code"] == "conflict"
    assert running.headers.get("Retry-After") == str(get_settings().retry_after_seconds)
    # When retried once the crashed invocation's time ran out
    record_clock.advance(0.2)
    retried = invoke_chat(event, seconds_left=30, clock=record_clock)
    # Then the turn completes exactly once: one user message, one reply, counters + 2
    assert retried.status == 200, retried
    after = snapshot(user, project)
    assert_the_reply_is_what_was_saved(retried, "one more", before, after)
    old, new = before.thread(thread).conversation, after.thread(thread).conversation
    assert old is not None and new is not None
    assert (new.message_count, new.turn_count) == (old.message_count + 2, old.turn_count + 1)
    # And a later retry replays it without saving again
    again = invoke_chat(event, seconds_left=30, clock=record_clock)
    assert (again.status, again.body) == (200, retried.body)
    assert snapshot(user, project).threads == after.threads


@pytest.mark.parametrize("fault", KINDS, ids=lambda fault: fault.name)
def test_a_keyed_turn_whose_idempotency_record_cannot_be_started_saves_nothing(
    alice: Api, make_project: MakeProject, backoffs: Backoffs, fault: Fault
) -> None:
    project = make_project(alice)
    thread = started_thread(alice, project)
    user = alice.sub or ""
    before = snapshot(user, project)
    settings = get_settings()
    client = persistence_layer(settings.idempotency_table, settings.dynamodb_max_attempts).client
    headers = {"Idempotency-Key": f"start-{fault.name}"}
    with injected(client) as records:
        records.arm(0, fault, ALWAYS)
        reply = say(alice, project, "keyed", thread, headers=headers)
    assert records.requests[0] == "PutItem"
    assert_the_reply_is_what_was_saved(reply, "keyed", before, snapshot(user, project))
    # And the same key then runs the turn once
    assert say(alice, project, "keyed", thread, headers=headers).status == 200


def test_a_keyed_turn_saved_but_not_recorded_answers_its_reply_not_an_error(
    alice: Api, make_project: MakeProject, backoffs: Backoffs, record_clock: RecordClock
) -> None:
    # Given the idempotency record cannot be completed after the turn saved
    project = make_project(alice)
    thread = started_thread(alice, project)
    user = alice.sub or ""
    before = snapshot(user, project)
    settings = get_settings()
    client = persistence_layer(settings.idempotency_table, settings.dynamodb_max_attempts).client
    headers = {"Idempotency-Key": "saved-not-recorded"}
    with injected(client) as records:
        records.arm(1, TRANSIENTS[0], ALWAYS)
        reply = say(alice, project, "keyed", thread, headers=headers)
    assert records.requests == ["PutItem", "UpdateItem"]
    # Then the client gets the saved turn, since a 5xx would invite a second turn
    assert reply.status == 200, reply
    after = snapshot(user, project)
    assert_the_reply_is_what_was_saved(reply, "keyed", before, after)
    # And a retry while the record says in progress is a 409 to come back later, not a rerun
    again = say(alice, project, "keyed", thread, headers=headers)
    assert again.status == 409 and "Retry-After" in again.headers
    assert snapshot(user, project).threads == after.threads


class Slow:
    """A model that takes ``seconds`` a round and always wants another round."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.timeouts: list[float | None] = []

    def converse(self, request: ModelRequest) -> ModelReply:
        self.timeouts.append(request.timeout_seconds)
        time.sleep(self.seconds)
        return ModelReply(
            tool_calls=[ToolCall(id=f"t{len(self.timeouts)}", name="look_it_up", input={})],
            stop_reason="tool_use",
        )


def test_a_turn_whose_model_outlasts_its_time_saves_the_timeout_and_answers_504_in_time(
    alice: Api, make_project: MakeProject, model: Callable[[Any], None]
) -> None:
    # Given a thread, a model that takes 1.2 s a round, and a function with 2 s to spare
    # past the time it keeps for the save
    project = make_project(alice)
    thread = started_thread(alice, project)
    user = alice.sub or ""
    before = snapshot(user, project)
    slow = Slow(1.2)
    model(slow)
    body = {"message": "are you there?", "conversationId": thread}
    seconds_left = get_settings().turn_save_reserve_seconds + 2
    # When
    started = time.monotonic()
    reply = invoke_chat(chat_event(alice, project, body, "k-slow"), seconds_left)
    # Then the second round was not asked, and the turn saved its timeout in time
    assert time.monotonic() - started < seconds_left
    assert (reply.status, reply.body["error"]["code"]) == (504, "model_timeout")
    assert len(slow.timeouts) == 1
    assert slow.timeouts[0] is not None and slow.timeouts[0] <= 2
    assert_the_reply_is_what_was_saved(reply, "are you there?", before, snapshot(user, project))
