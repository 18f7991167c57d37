"""The member's active thread: a turn in the thread they last talked in writes its messages
and their usage item, which holds what the turn moved on the thread; the thread's item
catches up when they turn to another thread. Every reader sees the thread as its turns
left it, and the list puts it where its last turn belongs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
import threading
from typing import Any
from unittest.mock import ANY

from botocore.exceptions import ClientError
import pytest

from recall.domain import clock
from recall.domain.conversations import ActiveThread
from recall.domain.ids import new_id
from recall.domain.prompt import ModelReply, ModelRequest
from recall.domain.usage import month_of
from recall.providers.offline import OfflineProvider
from recall.settings import get_settings
from recall.store.conversation_items import conversation_key
from recall.store.dynamodb import dynamodb_client, from_item
from recall.store.usage import UsageStore
from recall.wiring import (
    chat_service,
    conversation_service,
    conversation_store,
    message_store,
    model_choice,
    turn_store,
)
from tests.integration.conftest import Api

MakeProject = Callable[..., str]


def say(api: Api, project: str, text: str, thread: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"message": text}
    if thread:
        body["conversationId"] = thread
    reply = api.post(f"/projects/{project}/chat", body)
    assert reply.status == 200, reply
    conversation: dict[str, Any] = reply.body["conversation"]
    return conversation


def listed(api: Api, project: str, query: str = "") -> list[dict[str, Any]]:
    reply = api.get(f"/projects/{project}/conversations", query=query)
    assert reply.status == 200, reply
    rows: list[dict[str, Any]] = reply.body["conversations"]
    return rows


def every_page(api: Api, project: str, limit: int, archived: bool = False) -> list[str]:
    """The list's ids, page by page; every page but the last is full."""
    ids: list[str] = []
    cursor = None
    for _ in range(50):
        query = f"limit={limit}&archived={'true' if archived else 'false'}"
        reply = api.get(
            f"/projects/{project}/conversations",
            query=query + (f"&cursor={cursor}" if cursor else ""),
        )
        assert reply.status == 200, reply
        page = [row["id"] for row in reply.body["conversations"]]
        ids += page
        cursor = reply.body.get("nextCursor")
        if not cursor:
            return ids
        assert len(page) == limit, (limit, len(ids))
    raise AssertionError("the list never ended")


def first_cursor(api: Api, project: str, limit: int) -> str:
    cursor: str = api.get(f"/projects/{project}/conversations", query=f"limit={limit}").body[
        "nextCursor"
    ]
    return cursor


def thread_reads() -> list[str]:
    """The requests sent from now on to the Conversations table, by operation and index."""
    sent: list[str] = []
    table = get_settings().conversations_table

    def note(model: Any, params: dict[str, Any], **_: Any) -> None:
        tables = {params.get("TableName"), *params.get("RequestItems", {})}
        if table in tables:
            sent.append(f"{model.name} {params.get('IndexName', '')}".strip())

    events = dynamodb_client().meta.events
    events.unregister("before-parameter-build.dynamodb", unique_id="active-thread-ops")
    events.register("before-parameter-build.dynamodb", note, unique_id="active-thread-ops")
    return sent


@pytest.fixture(autouse=True)
def _stop_counting() -> Iterator[None]:
    yield
    dynamodb_client().meta.events.unregister(
        "before-parameter-build.dynamodb", unique_id="active-thread-ops"
    )


def shown(api: Api, project: str, thread: str) -> dict[str, Any]:
    reply = api.get(f"/projects/{project}/conversations/{thread}")
    assert reply.status == 200, reply
    body: dict[str, Any] = reply.body["conversation"]
    return body


def raw_item(user: str, project: str, thread: str) -> dict[str, Any] | None:
    """The thread's item as the table holds it, past every reader (``None``: none)."""
    item = (
        dynamodb_client()
        .get_item(
            TableName=get_settings().conversations_table,
            Key=conversation_key(user, project, thread),
            ConsistentRead=True,
        )
        .get("Item")
    )
    return from_item(item) if item else None


def saved_item(user: str, project: str, thread: str) -> dict[str, Any]:
    item = raw_item(user, project, thread)
    assert item is not None
    return item


def latest_usage(user: str, project: str) -> dict[str, Any]:
    usage = UsageStore(get_settings(), dynamodb_client())
    found = dynamodb_client().query(**usage.latest_request(user, project))["Items"]
    return from_item(found[0]) if found else {}


def counts(row: dict[str, Any]) -> tuple[int, int]:
    return row["messageCount"], row["turnCount"]


def test_turns_in_one_thread_leave_its_item_alone_and_every_reader_sees_them(
    alice: Api, make_project: MakeProject
) -> None:
    # Given a thread, and three more turns in it
    project = make_project(alice)
    user = alice.sub or ""
    thread = say(alice, project, "one")["id"]
    first = saved_item(user, project, thread)
    for text in ("two", "three", "four"):
        say(alice, project, text, thread)
    # Then its item is as the first turn left it; the member's usage item holds the rest
    assert saved_item(user, project, thread) == first
    assert latest_usage(user, project)["active"]["conversationId"] == thread
    # and the thread's page, the list and the export all count four turns
    assert counts(shown(alice, project, thread)) == (8, 4)
    assert [counts(row) for row in listed(alice, project)] == [(8, 4)]
    exported = alice.get(f"/projects/{project}/export").body["conversations"]
    assert [(t["messageCount"], len(t["messages"])) for t in exported] == [(8, 8)]


def test_turning_to_another_thread_writes_what_the_first_ones_turns_moved_onto_it(
    alice: Api, make_project: MakeProject
) -> None:
    # Given two turns in one thread, then one in another
    project = make_project(alice)
    user = alice.sub or ""
    first = say(alice, project, "one")["id"]
    say(alice, project, "two", first)
    second = say(alice, project, "elsewhere")["id"]
    # Then the first thread's item holds its two turns, its last message and its place
    item = saved_item(user, project, first)
    assert (item["messageCount"], item["turnCount"]) == (4, 2)
    newest = alice.get(f"/projects/{project}/conversations/{first}").body["messages"]
    assert item["lastMessageId"] == newest[-1]["id"]
    assert item["recency"] == f"L#{item['lastTurnAt']}#{first}"
    # and the second thread is the active one, first in the list
    assert latest_usage(user, project)["active"]["conversationId"] == second
    assert [row["id"] for row in listed(alice, project)] == [second, first]
    # When the member goes back to the first thread
    say(alice, project, "back", first)
    # Then each thread counts its own turns
    assert counts(shown(alice, project, first)) == (6, 3)
    assert counts(shown(alice, project, second)) == (2, 1)
    assert [row["id"] for row in listed(alice, project)] == [first, second]


def test_each_member_and_project_has_an_active_thread_of_its_own(
    alice: Api, bob: Api, make_project: MakeProject
) -> None:
    # Given alice and bob in two shared projects, each talking in their own threads
    one, two = make_project(alice, {bob: "editor"}), make_project(alice, {bob: "editor"})
    threads = {
        (api.sub, project): say(api, project, f"{api.sub} in {project}")["id"]
        for api in (alice, bob)
        for project in (one, two)
    }
    # When alice talks on in her thread of the first project
    for text in ("more", "and more"):
        say(alice, one, text, threads[(alice.sub, one)])
    # Then only that thread moved, and each member's usage item in each project names
    # their own thread
    for (user, project), thread in threads.items():
        assert latest_usage(user or "", project)["active"]["conversationId"] == thread
        api = alice if user == alice.sub else bob
        expected = (6, 3) if (user, project) == (alice.sub, one) else (2, 1)
        assert counts(shown(api, project, thread)) == expected
        assert [row["id"] for row in listed(api, project)] == [thread]
        # and no one reads another's thread
        other = bob if api is alice else alice
        assert other.get(f"/projects/{project}/conversations/{thread}").status == 404


def test_the_list_puts_the_active_thread_where_its_last_turn_belongs_on_every_page(
    alice: Api, make_project: MakeProject
) -> None:
    # Given two threads, then one made active, then four threads started after it
    project = make_project(alice)

    def started(count: int) -> list[str]:
        base = f"/projects/{project}/conversations"
        return [alice.post(base, {"title": f"T{n}"}).body["id"] for n in range(count)]

    older = started(2)
    active = say(alice, project, "one")["id"]
    newer = started(4)
    # When the member talks in the active thread again (its index entry stays behind)
    say(alice, project, "two", active)
    # Then it is first, whatever the page size, and every thread is listed once
    expected = [active, *reversed(newer), *reversed(older)]
    assert [row["id"] for row in listed(alice, project)] == expected
    for limit in (1, 2, 3, 5, 6, 7, 8):
        assert every_page(alice, project, limit) == expected, limit
    assert counts(listed(alice, project, "limit=1")[0]) == (4, 2)
    # and a later page reads no thread item: its place is on the first
    cursor = first_cursor(alice, project, 2)
    sent = thread_reads()
    second = listed(alice, project, "limit=2&cursor=" + cursor)
    assert [row["id"] for row in second] == expected[2:4]
    assert sent == ["Query byRecency"]
    # When it is renamed, which moves its entry to the top
    base = f"/projects/{project}/conversations"
    assert alice.patch(f"{base}/{active}", {"title": "Renamed"}).status == 200
    # Then still each thread once, on full pages
    for limit in (1, 2, 3, 5, 6, 7, 8):
        assert every_page(alice, project, limit) == expected, limit


def test_a_thread_renamed_after_its_last_turn_keeps_the_renames_place_when_left(
    alice: Api, make_project: MakeProject
) -> None:
    # Given an active thread renamed after its last turn, and an older thread
    project = make_project(alice)
    user = alice.sub or ""
    older = say(alice, project, "older")["id"]
    renamed = say(alice, project, "one")["id"]
    say(alice, project, "two", renamed)
    base = f"/projects/{project}/conversations"
    patched = alice.patch(f"{base}/{renamed}", {"title": "Renamed"})
    assert patched.status == 200 and counts(patched.body) == (4, 2)
    rename = saved_item(user, project, renamed)["updatedAt"]
    # When the member turns back to the older thread
    say(alice, project, "back", older)
    # Then the renamed thread's item has its turns, its new title and the rename's place
    item = saved_item(user, project, renamed)
    assert (item["messageCount"], item["turnCount"], item["title"]) == (4, 2, "Renamed")
    assert item["updatedAt"] == rename and item["recency"] == f"L#{rename}#{renamed}"
    assert [row["id"] for row in listed(alice, project)] == [older, renamed]


def test_an_archived_active_thread_is_listed_with_the_archived_ones_with_its_turns(
    alice: Api, make_project: MakeProject
) -> None:
    # Given an active thread with two turns, then archived, and another live thread
    project = make_project(alice)
    other = say(alice, project, "other")["id"]
    active = say(alice, project, "one")["id"]
    say(alice, project, "two", active)
    base = f"/projects/{project}/conversations"
    assert alice.patch(f"{base}/{active}", {"archived": True}).status == 200
    # Then the live list holds only the other, the archived list the active one, counted
    assert [row["id"] for row in listed(alice, project)] == [other]
    archived = listed(alice, project, "archived=true")
    assert [(row["id"], counts(row)) for row in archived] == [(active, (4, 2))]
    # and "latest" is the live one
    reply = alice.post(f"/projects/{project}/chat", {"message": "hi", "conversationId": "latest"})
    assert reply.body["conversation"]["id"] == other


def test_latest_is_the_active_thread_even_when_threads_started_after_it_sit_above_it(
    alice: Api, make_project: MakeProject
) -> None:
    # Given an active thread, then two threads started after it, then a turn in it
    project = make_project(alice)
    active = say(alice, project, "one")["id"]
    for n in range(2):
        alice.post(f"/projects/{project}/conversations", {"title": f"T{n}"})
    say(alice, project, "two", active)
    # When a turn asks for the latest thread
    reply = alice.post(f"/projects/{project}/chat", {"message": "3", "conversationId": "latest"})
    # Then it lands in the active thread
    assert reply.body["conversation"]["id"] == active
    assert counts(shown(alice, project, active)) == (6, 3)


def test_a_thread_gone_while_active_is_not_written_back_when_the_member_moves_on(
    alice: Api, make_project: MakeProject
) -> None:
    # Given an active thread whose item went while the usage item still names it (a delete
    # racing the member's turn elsewhere)
    project = make_project(alice)
    user = alice.sub or ""
    gone = say(alice, project, "one")["id"]
    dynamodb_client().delete_item(
        TableName=get_settings().conversations_table, Key=conversation_key(user, project, gone)
    )
    # When the member talks in another thread
    other = say(alice, project, "elsewhere")["id"]
    # Then the turn lands, and no item is made for the gone thread
    assert latest_usage(user, project)["active"]["conversationId"] == other
    assert raw_item(user, project, gone) is None
    assert [row["id"] for row in listed(alice, project)] == [other]


def test_deleting_the_active_thread_takes_its_name_off_the_usage_item(
    alice: Api, make_project: MakeProject
) -> None:
    project = make_project(alice)
    user = alice.sub or ""
    thread = say(alice, project, "one")["id"]
    version = latest_usage(user, project)["version"]
    assert alice.delete(f"/projects/{project}/conversations/{thread}").status == 204
    kept = latest_usage(user, project)
    assert "active" not in kept and kept["version"] == version + 1
    # and the usage counted stays
    assert kept["turns"] == 1


def _as_last_month(user: str, project: str, now: datetime) -> str:
    """Move the member's month item back a month, as if this month had no turn yet."""
    settings = get_settings()
    client = dynamodb_client()
    usage = UsageStore(settings, client)
    this_month = usage.month_key(user, project, month_of(now))
    item = client.get_item(TableName=settings.usage_table, Key=this_month)["Item"]
    year, month = now.year, now.month - 1
    if month == 0:
        year, month = year - 1, 12
    earlier = f"{year:04d}-{month:02d}"
    client.put_item(TableName=settings.usage_table, Item={**item, "period": {"S": f"M#{earlier}"}})
    client.delete_item(TableName=settings.usage_table, Key=this_month)
    return earlier


@pytest.mark.parametrize("back_to", ["the same thread", "another thread"])
def test_the_first_turn_of_a_month_takes_the_active_thread_over_from_the_last_months_item(
    alice: Api, make_project: MakeProject, back_to: str
) -> None:
    # Given two turns in a thread, counted in a month item that is now last month's
    project = make_project(alice)
    user = alice.sub or ""
    thread = say(alice, project, "one")["id"]
    say(alice, project, "two", thread)
    earlier = _as_last_month(user, project, clock.now())
    # Then readers still find the thread's turns there
    assert counts(shown(alice, project, thread)) == (4, 2)
    # When the month's first turn comes
    same = back_to == "the same thread"
    now_in = say(alice, project, "three", thread if same else None)["id"]
    # Then this month's item holds the active thread, and last month's gives it up, keeps
    # its counters and starts to expire
    kept = latest_usage(user, project)
    assert kept["period"] == f"M#{month_of(clock.now())}"
    assert kept["active"]["conversationId"] == now_in and "expiresAt" not in kept
    before = from_item(
        dynamodb_client().get_item(
            TableName=get_settings().usage_table,
            Key={"owner": {"S": f"{user}#{project}"}, "period": {"S": f"M#{earlier}"}},
        )["Item"]
    )
    assert "active" not in before and before["turns"] == 2
    assert before["expiresAt"] > datetime.now(UTC).timestamp()
    # and the thread counts every turn
    assert counts(shown(alice, project, thread)) == ((6, 3) if same else (4, 2))


def test_a_turn_that_read_a_thread_before_the_member_left_it_reads_it_again(
    alice: Api, make_project: MakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an active thread with two turns (its item still holds the first), and another
    project = make_project(alice)
    other = say(alice, project, "other")["id"]
    thread = say(alice, project, "one")["id"]
    say(alice, project, "two", thread)
    # And a turn in the other thread landing between the next turn's read of the thread's
    # item and its read of the usage item (its item now holds both turns; the usage item
    # names the other thread)
    store = turn_store()
    read, usage = store.read, store.usage
    item_read = threading.Event()
    rival: list[str] = []

    def read_then_mark(*args: Any, **kwargs: Any) -> Any:
        found = read(*args, **kwargs)
        item_read.set()
        return found

    def usage_after_a_rival(*args: Any, **kwargs: Any) -> Any:
        if not rival:
            rival.append("saving")
            # (through the service: the local runtime runs one chat invocation at a time)
            outcome = chat_service().turn(alice.sub or "", project, "meanwhile", other, None)
            rival[0] = outcome.conversation.conversation_id
            assert item_read.wait(10)
        return usage(*args, **kwargs)

    monkeypatch.setattr(store, "read", read_then_mark)
    monkeypatch.setattr(store, "usage", usage_after_a_rival)
    # When the turn in the first thread saves
    say(alice, project, "three", thread)
    monkeypatch.undo()
    # Then it saved over the thread as the member left it: every turn counted
    assert rival == [other]
    messages = alice.get(f"/projects/{project}/conversations/{thread}").body["messages"]
    assert counts(shown(alice, project, thread)) == (len(messages), 3) == (6, 3)


def test_the_months_first_turn_waits_for_a_turn_still_saving_into_last_months_item(
    alice: Api, make_project: MakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an active thread counted in last month's item
    project = make_project(alice)
    user = alice.sub or ""
    thread = say(alice, project, "one")["id"]
    earlier = _as_last_month(user, project, clock.now())
    # And a turn of last month saving into it just before the month's first turn saves
    client = dynamodb_client()
    transact = client.transact_write_items
    sent: list[int] = []

    def last_months_turn_first(**kwargs: Any) -> Any:
        if not sent:
            client.update_item(
                TableName=get_settings().usage_table,
                Key={"owner": {"S": f"{user}#{project}"}, "period": {"S": f"M#{earlier}"}},
                UpdateExpression="ADD #version :one, #turns :one",
                ExpressionAttributeNames={"#version": "version", "#turns": "turns"},
                ExpressionAttributeValues={":one": {"N": "1"}},
            )
        sent.append(len(kwargs["TransactItems"]))
        return transact(**kwargs)

    monkeypatch.setattr(client, "transact_write_items", last_months_turn_first)
    # When the month's first turn saves
    say(alice, project, "two", thread)
    monkeypatch.undo()
    # Then its first save was refused and it saved again over what that turn left
    assert len(sent) == 2
    assert counts(shown(alice, project, thread)) == (4, 2)


@pytest.mark.parametrize("placed", [True, False], ids=["with its place", "counts only"])
@pytest.mark.parametrize("how", ["gone", "being deleted"])
def test_leaving_a_thread_that_is_gone_or_being_deleted_writes_nothing_to_it(
    alice: Api, make_project: MakeProject, placed: bool, how: str
) -> None:
    # Given a thread whose item is gone, or marked for a delete in progress
    project = make_project(alice)
    user = alice.sub or ""
    thread = say(alice, project, "one")["id"]
    store = conversation_store()
    if how == "gone":
        store.delete(user, project, thread)
    else:
        store.mark_deleting(user, project, thread)
    before = (
        dynamodb_client()
        .get_item(
            TableName=get_settings().conversations_table,
            Key=conversation_key(user, project, thread),
        )
        .get("Item")
    )
    # When a turn elsewhere would write its counts on it
    active = ActiveThread(
        conversation_id=thread,
        message_count=4,
        turn_count=2,
        last_message_id=new_id(),
        at=clock.stamp(clock.now()),
    )
    # Then the write is refused, and the item stays as it was
    with pytest.raises(ClientError, match="ConditionalCheckFailed"):
        dynamodb_client().update_item(**store.left_request(user, project, active, placed))
    after = (
        dynamodb_client()
        .get_item(
            TableName=get_settings().conversations_table,
            Key=conversation_key(user, project, thread),
        )
        .get("Item")
    )
    assert after == before


class DeletesTheThread:
    """The offline model, deleting the turn's thread while it answers: whole, or only
    marked, as a delete that has begun."""

    def __init__(self, user: str, project: str, thread: str, whole: bool) -> None:
        self.place = (user, project, thread)
        self.whole = whole

    def converse(self, request: ModelRequest) -> ModelReply:
        if self.whole:
            conversation_service().delete(*self.place)
        else:
            conversation_store().mark_deleting(*self.place)
        return OfflineProvider().converse(request)


@pytest.mark.parametrize("whole", [True, False], ids=["deleted", "being deleted"])
@pytest.mark.parametrize("signals", [False, True], ids=["plain", "with preference signals"])
def test_a_turn_in_the_active_thread_racing_its_delete_saves_nothing(
    alice: Api, make_project: MakeProject, signals: bool, whole: bool
) -> None:
    # Given an active thread, and a model during whose answer it is deleted
    project = make_project(alice)
    user = alice.sub or ""
    thread = say(alice, project, "one")["id"]
    model_choice().use(DeletesTheThread(user, project, thread, whole))
    try:
        # When the member talks in it
        text = "I prefer short answers" if signals else "two"
        reply = alice.post(f"/projects/{project}/chat", {"message": text, "conversationId": thread})
    finally:
        model_choice().use(None)
    # Then the turn is refused as the thread is gone, and none of it is left
    assert reply.status == 404, reply
    left = message_store().latest_after(user, project, thread, None, 10)
    if whole:
        assert raw_item(user, project, thread) is None
        assert left == []
        assert "active" not in latest_usage(user, project)
    else:
        assert [m.content for m in left if m.role == "user"] == ["one"]
        assert latest_usage(user, project)["active"]["turnCount"] == 1


@pytest.mark.parametrize("active", [True, False], ids=["the active thread", "another thread"])
def test_a_turn_leaves_an_archive_made_meanwhile_standing(
    alice: Api, make_project: MakeProject, active: bool
) -> None:
    # Given a thread, the active one or not, archived while the model answers its next turn
    project = make_project(alice)
    thread = say(alice, project, "one")["id"]
    if not active:
        say(alice, project, "elsewhere")
    base = f"/projects/{project}/conversations"

    class ArchivesTheThread:
        def converse(self, request: ModelRequest) -> ModelReply:
            assert alice.patch(f"{base}/{thread}", {"archived": True}).status == 200
            return OfflineProvider().converse(request)

    model_choice().use(ArchivesTheThread())
    try:
        say(alice, project, "two", thread)
    finally:
        model_choice().use(None)
    # Then the turn saved, and the thread is archived, counted, in the archived list only,
    # also once the member has moved on to another thread
    assert [row["id"] for row in listed(alice, project)] == ([] if active else [ANY])
    assert thread not in [row["id"] for row in listed(alice, project)]
    say(alice, project, "a new one")
    assert thread not in [row["id"] for row in listed(alice, project)]
    assert [(row["id"], counts(row)) for row in listed(alice, project, "archived=true")] == [
        (thread, (4, 2))
    ]
