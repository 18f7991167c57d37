"""Turns racing each other, a rival writer and a role change, over a store that applies
writes one at a time as DynamoDB does (moto's threaded server does not): every turn either
lands, in order, with the memory its tools changed, or answers 409 having written
nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
import itertools
import threading
from typing import Any

import boto3
import pytest

from recall.domain import clock
from recall.domain.ids import new_id
from recall.domain.memory import Category, MemoryEntry, Scope, Source
from recall.domain.prompt import ModelReply, ModelRequest, ToolCall
from recall.errors import Conflict
from recall.providers.offline import OfflineProvider
from recall.services.chat import ChatService
from recall.settings import get_settings
from recall.store.conversation_items import conversation_key
from recall.store.dynamodb import dynamodb_client, to_value
from recall.wiring import (
    chat_service_with,
    memory_store,
    model_choice,
)
from tests.integration.conftest import Api

MakeProject = Callable[..., str]
_WRITES = ("transact_write_items", "put_item", "update_item", "delete_item")
_ids = itertools.count()


class SavesItsOwnKey:
    """A model that saves one entry per turn, keyed by the turn's message ("turn 7" saves
    ``turn_7``), then answers. ``before_save`` runs once every turn has called it, so all
    the turns read the thread before any of them saves."""

    def __init__(self, racers: int = 1, before_save: Callable[[], None] | None = None) -> None:
        self._barrier = threading.Barrier(racers, timeout=60)
        self._before_save = before_save

    def converse(self, request: ModelRequest) -> ModelReply:
        last = request.messages[-1]
        if last.tool_results:
            return ModelReply(text=f"Saved {last.tool_results[0].content}.")
        self._barrier.wait()
        if self._before_save is not None:
            self._before_save()
        call = ToolCall(
            id=f"call-{next(_ids)}",
            name="save_preference",
            input={"key": last.text.replace(" ", "_"), "value": "on", "category": "preferences"},
        )
        return ModelReply(tool_calls=[call], stop_reason="tool_use")


@pytest.fixture
def serialised_writes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every write of the store's client applied one at a time; the list collects the
    transactions DynamoDB cancelled."""
    client = dynamodb_client()
    one_at_a_time = threading.Lock()
    cancelled: list[str] = []

    def serialise(name: str) -> None:
        send = getattr(client, name)

        def serialised(**kwargs: Any) -> Any:
            with one_at_a_time:
                try:
                    return send(**kwargs)
                except client.exceptions.TransactionCanceledException:
                    cancelled.append(name)
                    raise

        monkeypatch.setattr(client, name, serialised)

    for name in _WRITES:
        serialise(name)
    return cancelled


@pytest.fixture
def model() -> Iterator[Callable[[Any], None]]:
    yield model_choice().use
    model_choice().use(None)


def chat_giving_up_after(attempts: int) -> ChatService:
    """The chat service as wired, but retrying a lost save at most ``attempts`` times."""
    settings = get_settings().model_copy(
        update={"turn_retry_max": attempts, "turn_retry_base_seconds": 0.001}
    )
    return chat_service_with(settings)


def entry_keys(user: str, project: str) -> set[str]:
    persistent, _ = memory_store().active(user, project, None, clock.now())
    return {entry.key for entry in persistent}


def test_twenty_turns_racing_on_one_thread_land_in_order_or_leave_nothing(
    alice: Api,
    make_project: MakeProject,
    model: Callable[[Any], None],
    serialised_writes: list[str],
) -> None:
    # Given a thread, and twenty turns (as twenty Lambda instances would run them) that all
    # read it before any saves, each saving its own memory entry, each giving up after
    # three tries
    racers = 20
    project = make_project(alice)
    user = alice.sub or ""
    thread = alice.post(f"/projects/{project}/chat", {"message": "start"}).body
    thread_id = thread["conversation"]["id"]
    model(SavesItsOwnKey(racers))
    service = chat_giving_up_after(3)
    landed: dict[str, Any] = {}
    refused: list[str] = []

    def turn(text: str) -> None:
        try:
            landed[text] = service.turn(user, project, text, thread_id, None)
        except Conflict as busy:
            assert busy.retry_after == get_settings().retry_after_seconds
            refused.append(text)

    texts = [f"turn {n}" for n in range(racers)]
    threads = [threading.Thread(target=turn, args=(text,)) for text in texts]
    # When
    for racer in threads:
        racer.start()
    for racer in threads:
        racer.join(90)
    # Then every turn answered, and the race was real: some landed, some gave up
    assert len(landed) + len(refused) == racers
    assert landed and refused, (len(landed), len(refused))
    assert serialised_writes
    # And the thread holds exactly the turns that landed, each user message followed by its
    # tool round and its reply, in the order they saved
    page = alice.get(f"/projects/{project}/conversations/{thread_id}", query="limit=200").body
    messages = page["messages"]
    users = [m["content"] for m in messages if m["role"] == "user"]
    assert sorted(users) == sorted(["start", *landed])
    assert [m["role"] for m in messages] == ["user", "assistant"] + [
        "user",
        "tool",
        "assistant",
    ] * len(landed)
    for text, outcome in landed.items():
        at = [m["id"] for m in messages].index(outcome.user_message.message_id)
        assert messages[at]["content"] == text
        assert messages[at + 2]["id"] == outcome.message.message_id
    detail = page["conversation"]
    assert detail["messageCount"] == len(messages)
    assert detail["turnCount"] == 1 + len(landed)
    # And memory holds the entries of the turns that landed, and none of those refused
    assert entry_keys(user, project) == {text.replace(" ", "_") for text in landed}
    assert all([e.key for e in outcome.memories_saved] for outcome in landed.values())
    assert memory_store().meta(user, project).persistent_count == len(landed)


def test_a_turn_that_gives_up_answers_409_with_retry_after_and_writes_nothing(
    alice: Api,
    make_project: MakeProject,
    model: Callable[[Any], None],
    serialised_writes: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a thread where another turn always saves first
    project = make_project(alice)
    user = alice.sub or ""
    thread_id = alice.post(f"/projects/{project}/chat", {"message": "start"}).body["conversation"][
        "id"
    ]
    pauses: list[float] = []
    monkeypatch.setattr("recall.retry.time.sleep", pauses.append)
    raw = boto3.client("dynamodb")

    def rival_saves_first() -> None:
        raw.update_item(
            TableName=get_settings().conversations_table,
            Key=conversation_key(user, project, thread_id),
            UpdateExpression="SET #last = :rival",
            ExpressionAttributeNames={"#last": "lastMessageId"},
            ExpressionAttributeValues={":rival": to_value(new_id())},
        )

    rival = dynamodb_client().transact_write_items

    def always_second(**kwargs: Any) -> Any:
        rival_saves_first()
        return rival(**kwargs)

    monkeypatch.setattr(dynamodb_client(), "transact_write_items", always_second)
    model(SavesItsOwnKey())
    # When
    busy = alice.post(
        f"/projects/{project}/chat", {"message": "turn 1", "conversationId": thread_id}
    )
    # Then
    assert busy.status == 409, busy
    assert busy.headers.get("Retry-After") == str(get_settings().retry_after_seconds)
    assert busy.body["error"]["code"] == "conflict"
    settings = get_settings()
    assert len(serialised_writes) == settings.turn_retry_max
    # And it paused between tries, each pause drawn from a range that doubles
    assert len(pauses) == settings.turn_retry_max - 1
    ceilings = [settings.turn_retry_base_seconds * 2**n for n in range(len(pauses))]
    assert all(0 <= pause <= ceiling for pause, ceiling in zip(pauses, ceilings, strict=True))
    assert len(set(pauses)) > 1
    monkeypatch.undo()
    detail = alice.get(f"/projects/{project}/conversations/{thread_id}").body
    assert detail["conversation"]["messageCount"] == 2
    assert entry_keys(user, project) == set()


def test_a_turn_saves_over_an_entry_another_writer_changed_while_the_model_ran(
    alice: Api,
    make_project: MakeProject,
    model: Callable[[Any], None],
    serialised_writes: list[str],
) -> None:
    # Given an entry the turn's tool will save again, changed by the memory API while the
    # model runs
    project = make_project(alice)
    user = alice.sub or ""
    path = f"/projects/{project}/memories/turn_1"
    assert alice.put(path, {"value": "first", "category": "preferences"}).status == 201

    def rival() -> None:
        assert alice.put(path, {"value": "meanwhile", "category": "brand"}).status == 200

    model(SavesItsOwnKey(before_save=rival))
    # When
    reply = alice.post(f"/projects/{project}/chat", {"message": "turn 1"})
    # Then the turn read the entry again and saved over it, once
    assert reply.status == 200, reply
    assert serialised_writes == ["transact_write_items"]
    assert [m["key"] for m in reply.body["memoriesSaved"]] == ["turn_1"]
    history = alice.get(f"{path}/history").body["history"]
    assert [(h["oldValue"], h["newValue"]) for h in history] == [
        (None, "first"),
        ("first", "meanwhile"),
        ("meanwhile", "on"),
    ]
    assert memory_store().meta(user, project).persistent_count == 1


def test_a_new_entry_is_left_out_when_its_scope_filled_while_the_model_ran(
    alice: Api,
    make_project: MakeProject,
    model: Callable[[Any], None],
    serialised_writes: list[str],
) -> None:
    # Given a project with room for one more entry, taken while the model runs
    cap = get_settings().memory_cap
    project = make_project(alice)
    user = alice.sub or ""
    keys = {f"k{n}" for n in range(cap)}

    def write(key: str) -> None:
        entry = MemoryEntry(key=key, value="v", category=Category.BRAND, scope=Scope.PERSISTENT)
        saved = memory_store().write(
            user, project, entry.model_copy(update={"source": Source.EXPLICIT}), clock.now()
        )
        assert saved is not None

    for key in sorted(keys)[1:]:
        write(key)

    def rival() -> None:
        write(min(keys))

    model(SavesItsOwnKey(before_save=rival))
    # When
    reply = alice.post(f"/projects/{project}/chat", {"message": "turn 1"})
    # Then the reply and the messages land, without the entry there is no room for
    assert reply.status == 200, reply
    assert reply.body["memoriesSaved"] == []
    assert entry_keys(user, project) == keys
    assert memory_store().meta(user, project).persistent_count == cap
    # And the reply and the saved thread say it was not saved
    note = "Not saved after all, memory is full: turn_1."
    assert note in reply.body["message"]["content"]
    thread = reply.body["conversation"]["id"]
    saved = alice.get(f"/projects/{project}/conversations/{thread}").body["messages"]
    [tool] = [message for message in saved if message["role"] == "tool"]
    [result] = tool["toolResults"]
    assert result["isError"] and "was not saved" in result["content"]
    assert saved[-1]["content"] == reply.body["message"]["content"]


def test_the_offline_models_confirmation_of_a_dropped_entry_is_corrected(
    alice: Api,
    make_project: MakeProject,
    model: Callable[[Any], None],
    serialised_writes: list[str],
) -> None:
    # Given a project one entry short of full, whose last place is taken while the model runs
    cap = get_settings().memory_cap
    project = make_project(alice)
    user = alice.sub or ""

    def write(key: str) -> None:
        entry = MemoryEntry(
            key=key, value="v", category=Category.BRAND, scope=Scope.PERSISTENT
        ).model_copy(update={"source": Source.EXPLICIT})
        assert memory_store().write(user, project, entry, clock.now()) is not None

    for n in range(cap - 1):
        write(f"k{n}")

    class TakesTheLastPlace(OfflineProvider):
        taken = False

        def converse(self, request: ModelRequest) -> ModelReply:
            if not self.taken:
                self.taken = True
                write("rival")
            return super().converse(request)

    model(TakesTheLastPlace())
    # When the user states a rule the offline model saves
    reply = alice.post(f"/projects/{project}/chat", {"message": "Always keep the header dark"})
    # Then its "Saved" is followed by the correction, and nothing claims the entry landed
    assert reply.status == 200, reply
    content = reply.body["message"]["content"]
    assert content.startswith("Saved: header_dark.")
    assert content.endswith(
        "Not saved after all, memory is full: header_dark. "
        "Forget or update an entry, then ask again."
    )
    assert reply.body["memoriesSaved"] == []
    assert "header_dark" not in entry_keys(user, project)


def test_a_member_removed_while_the_model_ran_saves_nothing(
    alice: Api,
    bob: Api,
    make_project: MakeProject,
    model: Callable[[Any], None],
    serialised_writes: list[str],
) -> None:
    # Given an editor whose turn has read his role, then is removed while the model runs
    project = make_project(alice, {bob: "editor"})

    def removed() -> None:
        assert alice.delete(f"/projects/{project}/members/{bob.sub}").status == 204

    model(SavesItsOwnKey(before_save=removed))
    # When
    reply = bob.post(f"/projects/{project}/chat", {"message": "turn 1"})
    # Then the turn is refused as he now is, and nothing of it is saved
    assert reply.status == 403, reply
    assert entry_keys(bob.sub or "", project) == set()
    assert alice.put(f"/projects/{project}/members/{bob.sub}", {"role": "editor"}).status == 201
    listed = bob.get(f"/projects/{project}/conversations").body
    assert all(c["messageCount"] == 0 for c in listed["conversations"])


def test_a_turn_told_its_model_failed_keeps_no_memory(
    alice: Api,
    make_project: MakeProject,
    model: Callable[[Any], None],
) -> None:
    # Given a model that saves an entry, then fails
    project = make_project(alice)

    class SavesThenFails(SavesItsOwnKey):
        def converse(self, request: ModelRequest) -> ModelReply:
            if request.messages[-1].tool_results:
                raise RuntimeError("provider bug")
            return super().converse(request)

    model(SavesThenFails())
    # When
    reply = alice.post(f"/projects/{project}/chat", {"message": "turn 1"})
    # Then
    assert reply.status == 502
    assert entry_keys(alice.sub or "", project) == set()
