"""A chat turn costs a bounded number of DynamoDB requests, round trips and write units,
whatever the thread's length: one round trip before the model, one transaction after it,
writing what is new and small counters, never the window."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
import json
import threading
import time
from typing import Any

import boto3
import pytest

import bench.units as units
from local.seed import grow_thread
from recall.domain.ids import new_id
from recall.domain.prompt import ModelReply, ModelRequest
from recall.providers.offline import OfflineProvider
from recall.settings import get_settings
from recall.store.conversation_items import conversation_key
from recall.store.dynamodb import dynamodb_client, to_value
from recall.wiring import model_choice
from tests.integration.conftest import Api

MakeProject = Callable[..., str]

# How far above its floor (its new messages written once, outside a transaction) a turn's
# write units may be: the messages twice (a transaction), the thread's small item twice,
# its entry in the byRecency index moved (a delete and a put), and the caller's usage
# counter item twice (usage is counted inside the turn's transaction, so the counters
# equal the turns' usage). The 3× of issue 10 would need both of the last two gone.
WRITES_OVER_FLOOR = 5

# What the network costs a request in AWS, which moto on loopback all but removes: with it,
# requests sent one after the other cannot pass for requests sent together.
LATENCY_SECONDS = 0.03


@dataclass
class Request:
    operation: str
    started: float
    ended: float = 0.0
    consistent: bool = False


def strongly_consistent(operation: str, body: dict[str, Any]) -> bool:
    """Whether a read sees every write acknowledged before it (``BatchGetItem``: each table)."""
    if operation == "BatchGetItem":
        return all(table.get("ConsistentRead") for table in body["RequestItems"].values())
    return bool(body.get("ConsistentRead"))


class Recorder:
    """Every request botocore sends on the store's client, from ``before-call`` to
    ``after-call``, and when the model was asked."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.model_at: list[float] = []
        self.latency = 0.0
        self._open = threading.local()

    def started(self, model: Any, params: dict[str, Any], **kwargs: Any) -> None:
        body = json.loads(params["body"] or b"{}")
        request = Request(
            model.name, time.perf_counter(), consistent=strongly_consistent(model.name, body)
        )
        self._open.request = request
        self.requests.append(request)

    def ended(self, model: Any, **kwargs: Any) -> None:
        self._open.request.ended = time.perf_counter()

    def converse(self, request: ModelRequest) -> ModelReply:
        self.model_at.append(time.perf_counter())
        return OfflineProvider().converse(request)

    def delay(self, **kwargs: Any) -> None:
        time.sleep(self.latency)

    def start(self) -> None:
        """Record from here on, each request taking the network's latency."""
        self.requests.clear()
        self.model_at.clear()
        self.latency = LATENCY_SECONDS

    def stop(self) -> None:
        self.latency = 0.0

    def before_model(self) -> list[Request]:
        [at] = self.model_at
        return [r for r in self.requests if r.started < at]

    def after_model(self) -> list[str]:
        [at] = self.model_at
        return [r.operation for r in self.requests if r.started >= at]


def round_trips(requests: list[Request]) -> list[list[str]]:
    """Requests grouped into round trips: a request that starts after one of its round
    trip's requests has ended waited for something, so it starts the next one."""
    trips: list[list[Request]] = []
    for request in sorted(requests, key=lambda r: r.started):
        if trips and all(request.started < other.ended for other in trips[-1]):
            trips[-1].append(request)
        else:
            trips.append([request])
    return [sorted(r.operation for r in trip) for trip in trips]


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    recording = Recorder()
    events = dynamodb_client().meta.events

    events.register("before-call.dynamodb", recording.started, unique_id="budget-start")
    events.register("after-call.dynamodb", recording.ended, unique_id="budget-end")
    events.register("before-send.dynamodb", recording.delay, unique_id="budget-latency")
    model_choice().use(recording)
    yield recording
    model_choice().use(None)
    events.unregister("before-call.dynamodb", unique_id="budget-start")
    events.unregister("after-call.dynamodb", unique_id="budget-end")
    events.unregister("before-send.dynamodb", unique_id="budget-latency")


def _thread_with_memory(alice: Api, project: str) -> str:
    thread: str = alice.post(f"/projects/{project}/chat", {"message": "hello"}).body[
        "conversation"
    ]["id"]
    alice.put(f"/projects/{project}/memories/tone", {"value": "warm", "category": "brand"})
    alice.put(
        f"/projects/{project}/memories/topic",
        {"value": "the spring menu", "category": "context", "conversationId": thread},
    )
    return thread


@pytest.mark.parametrize("length", [10, 5000])
def test_a_turn_makes_one_round_trip_before_the_model_and_one_transaction_after(
    alice: Api, make_project: MakeProject, recorder: Recorder, length: int
) -> None:
    # Given a thread of `length` messages, in a project of its own
    project = make_project(alice)
    thread = _thread_with_memory(alice, project)
    grow_thread(alice.sub or "", project, thread, length - 2)
    recorder.start()
    try:
        # When
        reply = alice.post(
            f"/projects/{project}/chat", {"message": "what next?", "conversationId": thread}
        )
        # Then the batch, the window's query and both memory queries were in flight together
        assert reply.status == 200
        before = recorder.before_model()
        assert round_trips(before) == [["BatchGetItem", "Query", "Query", "Query"]]
        assert max(r.started for r in before) < min(r.ended for r in before)
        assert recorder.after_model() == ["TransactWriteItems"]
    finally:
        recorder.stop()
        # Keep the shared Messages table small: moto copies whole tables per transaction.
        alice.delete(f"/projects/{project}/conversations/{thread}")


def test_a_new_thread_reads_in_one_round_trip_then_creates_the_thread(
    alice: Api, make_project: MakeProject, recorder: Recorder
) -> None:
    project = make_project(alice)
    recorder.start()
    assert alice.post(f"/projects/{project}/chat", {"message": "hello"}).status == 200
    assert round_trips(recorder.before_model()) == [["BatchGetItem", "Query"], ["PutItem"]]
    assert recorder.after_model() == ["TransactWriteItems"]


def test_a_new_thread_from_a_preset_reads_the_preset_in_the_same_round_trip(
    alice: Api, make_project: MakeProject, recorder: Recorder
) -> None:
    project = make_project(alice)
    preset = alice.post(
        f"/projects/{project}/presets",
        {"name": "Terse", "contextPrompts": [{"role": "user", "content": "Be terse."}]},
    ).body["id"]
    recorder.start()
    reply = alice.post(f"/projects/{project}/chat", {"message": "hello", "presetId": preset})
    assert reply.status == 200
    # (the thread's item and its policy item, which holds the preset's prompts, together)
    assert round_trips(recorder.before_model()) == [
        ["BatchGetItem", "Query"],
        ["TransactWriteItems"],
    ]
    assert recorder.after_model() == ["TransactWriteItems"]
    # and its later turns carry the preset with the thread: still one round trip
    thread = reply.body["conversation"]["id"]
    recorder.start()
    body = {"message": "and then?", "conversationId": thread}
    assert alice.post(f"/projects/{project}/chat", body).status == 200
    assert round_trips(recorder.before_model()) == [["BatchGetItem", "Query", "Query", "Query"]]
    recorder.stop()


def test_latest_finds_the_thread_first_then_reads_it_in_one_round_trip(
    alice: Api, make_project: MakeProject, recorder: Recorder
) -> None:
    project = make_project(alice)
    _thread_with_memory(alice, project)
    recorder.start()
    reply = alice.post(f"/projects/{project}/chat", {"message": "more", "conversationId": "latest"})
    assert reply.status == 200
    assert round_trips(recorder.before_model()) == [
        ["Query", "Query"],
        ["BatchGetItem", "Query", "Query"],
    ]
    assert recorder.after_model() == ["TransactWriteItems"]


@pytest.mark.parametrize("conversation", ["the thread's id", "latest"])
def test_every_read_before_the_model_sees_every_write_before_it(
    alice: Api, make_project: MakeProject, recorder: Recorder, conversation: str
) -> None:
    # Given a thread just written to (a turn sent right after it must find it as it is)
    project = make_project(alice)
    thread = _thread_with_memory(alice, project)
    recorder.start()
    # When the next turn names it, or asks for the latest thread
    said = {"message": "more", "conversationId": "latest" if conversation == "latest" else thread}
    reply = alice.post(f"/projects/{project}/chat", said)
    # Then it landed there, and every read before the model was strongly consistent
    assert reply.status == 200 and reply.body["conversation"]["id"] == thread
    reads = recorder.before_model()
    assert reads and [r.operation for r in reads if not r.consistent] == []


def test_a_window_read_before_the_last_save_is_read_again_after_the_thread(
    alice: Api, make_project: MakeProject, recorder: Recorder
) -> None:
    # Given a thread that names a newer last message than its window's query finds, as
    # when the query ran just before another turn's save and the thread's read just after
    project = make_project(alice)
    thread = _thread_with_memory(alice, project)
    boto3.client("dynamodb").update_item(
        TableName=get_settings().conversations_table,
        Key=conversation_key(alice.sub or "", project, thread),
        UpdateExpression="SET #last = :last",
        ExpressionAttributeNames={"#last": "lastMessageId"},
        ExpressionAttributeValues={":last": to_value(new_id())},
    )
    recorder.start()
    # When
    reply = alice.post(
        f"/projects/{project}/chat", {"message": "back again", "conversationId": thread}
    )
    # Then one more round trip reads the window again
    assert reply.status == 200
    assert round_trips(recorder.before_model()) == [
        ["BatchGetItem", "Query", "Query", "Query"],
        ["Query"],
    ]
    assert recorder.after_model() == ["TransactWriteItems"]


def test_a_removed_member_gets_403_though_their_thread_memory_was_read_alongside(
    alice: Api, bob: Api, make_project: MakeProject
) -> None:
    # Given bob's thread with thread memory, then bob is removed from the project
    project = make_project(alice, {bob: "editor"})
    thread = _thread_with_memory(bob, project)
    assert alice.delete(f"/projects/{project}/members/{bob.sub}").status == 204
    # When bob chats on it again
    reply = bob.post(f"/projects/{project}/chat", {"message": "hi", "conversationId": thread})
    # Then a 403 that says nothing of the thread or its memory
    assert reply.status == 403
    assert "spring menu" not in str(reply.body)
    assert thread not in str(reply.body)


def test_a_thread_that_does_not_exist_is_404_after_the_speculative_read(
    alice: Api, make_project: MakeProject
) -> None:
    project = make_project(alice)
    missing = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
    reply = alice.post(f"/projects/{project}/chat", {"message": "hi", "conversationId": missing})
    assert reply.status == 404


@dataclass
class TurnWrites:
    units: float  # by DynamoDB's published rules, as ``make bench`` counts them
    floor: int


@contextmanager
def units_counted() -> Iterator[units.Recorder]:
    """``make bench``'s recorder on the store's client: every request with the items its
    writes touched, before and after, read past the hook."""
    raw = boto3.client("dynamodb")
    units.describe_tables(raw)
    recorder = units.Recorder(raw)
    events = dynamodb_client().meta.events
    hooks = [
        ("before-parameter-build.dynamodb", recorder.asked, "units-ask"),
        ("before-call.dynamodb", recorder.started, "units-start"),
        ("after-call.dynamodb", recorder.ended, "units-end"),
    ]
    for event, hook, name in hooks:
        events.register(event, hook, unique_id=name)
    try:
        yield recorder
    finally:
        for event, _, name in hooks:
            events.unregister(event, unique_id=name)


def turn_writes(alice: Api, project: str, thread: str, text: str) -> TurnWrites:
    with units_counted() as recorder:
        reply = alice.post(f"/projects/{project}/chat", {"message": text, "conversationId": thread})
    assert reply.status == 200, reply
    messages = get_settings().messages_table
    new = [
        action["Put"]["Item"]
        for sent in recorder.sent
        if sent.operation == "TransactWriteItems"
        for action in sent.params["TransactItems"]
        if "Put" in action and action["Put"]["TableName"] == messages
    ]
    assert len(new) == 2
    return TurnWrites(
        units=sum(units.units_of(sent).write for sent in recorder.sent),
        floor=sum(units.kb(units.size(item)) for item in new),
    )


def test_a_turn_writes_its_new_messages_and_small_counters_however_long_the_thread(
    alice: Api, make_project: MakeProject
) -> None:
    # Given a thread two turns old: a window of two messages
    project = make_project(alice)
    thread: str = alice.post(f"/projects/{project}/chat", {"message": "hello"}).body[
        "conversation"
    ]["id"]
    question = "what should the spring menu lead with? " * 14
    young = turn_writes(alice, project, thread, question)
    # When the thread grows to a thousand messages and its window fills
    grow_thread(alice.sub or "", project, thread, 1000)
    for n in range(3):
        turn_writes(alice, project, thread, f"and then {n}?")
    old = turn_writes(alice, project, thread, question)
    # and a message four times as long is sent
    longer = turn_writes(alice, project, thread, question * 4)
    try:
        # Then a turn writes at most WRITES_OVER_FLOOR times its new messages
        for turn in (young, old, longer):
            assert turn.units <= WRITES_OVER_FLOOR * turn.floor, turn
        # and the same, however long the thread and its window
        assert old == young
        # and what it writes beyond its messages (twice, in the transaction) stays the same
        # however long the message
        assert longer.floor > young.floor
        assert longer.units - 2 * longer.floor == young.units - 2 * young.floor
    finally:
        alice.delete(f"/projects/{project}/conversations/{thread}")
