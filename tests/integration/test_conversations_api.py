"""Conversations through the real handler, over the embedded DynamoDB."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
import json
import time
from typing import Any
from urllib.parse import quote

import boto3
import pytest

from local import template
from recall.domain import clock
from recall.domain.ids import new_id
from recall.domain.messages import Message
from recall.settings import get_settings
from recall.store.conversation_items import conversation_key
from recall.store.cursors import (
    encode_cursor,
)
from recall.store.dynamodb import (
    dynamodb_client,
)
from recall.store.keys import owner_key, thread_key
from recall.store.messages import MessageStore
from recall.wiring import conversation_store
from tests.integration.conftest import Api, Reply

MakeProject = Callable[..., str]


def start(api: Api, project: str, title: str | None = None) -> dict[str, Any]:
    reply = api.post(f"/projects/{project}/conversations", {"title": title} if title else None)
    assert reply.status == 201, reply
    body: dict[str, Any] = reply.body
    return body


def test_editor_starts_a_conversation_and_sees_it_listed(
    alice: Api, make_project: MakeProject
) -> None:
    project = make_project(alice)
    # When
    created = start(alice, project, "Homepage ideas")
    # Then
    listed = alice.get(f"/projects/{project}/conversations")
    assert listed.status == 200
    [row] = listed.body["conversations"]
    assert row["id"] == created["id"]
    assert row["title"] == "Homepage ideas"
    assert row["period"] == "today"
    assert listed.body["nextCursor"] is None


def test_another_users_threads_are_invisible_and_404(
    alice: Api, bob: Api, make_project: MakeProject
) -> None:
    # Given a shared project where both are editors
    project = make_project(alice, {bob: "editor"})
    thread = start(alice, project)["id"]
    # Then bob sees none of alice's threads and each of them is 404 to him
    assert bob.get(f"/projects/{project}/conversations").body["conversations"] == []
    assert bob.get(f"/projects/{project}/conversations/{thread}").status == 404
    assert bob.patch(f"/projects/{project}/conversations/{thread}", {"title": "x"}).status == 404
    assert bob.delete(f"/projects/{project}/conversations/{thread}").status == 404
    assert alice.get(f"/projects/{project}/conversations/{thread}").status == 200


def test_a_thread_id_under_another_project_is_404(alice: Api, make_project: MakeProject) -> None:
    first, second = make_project(alice), make_project(alice)
    thread = start(alice, first)["id"]
    assert alice.get(f"/projects/{second}/conversations/{thread}").status == 404
    assert alice.get(f"/projects/{second}/conversations").body["conversations"] == []


def test_non_member_gets_403_on_every_conversation_route_not_an_empty_list(
    alice: Api, bob: Api, make_project: MakeProject
) -> None:
    project = make_project(alice)
    thread = start(alice, project)["id"]
    base = f"/projects/{project}/conversations"
    for reply in (
        bob.get(base),
        bob.post(base, {"title": "mine"}),
        bob.get(f"{base}/{thread}"),
        bob.patch(f"{base}/{thread}", {"title": "x"}),
        bob.delete(f"{base}/{thread}"),
    ):
        assert reply.status == 403, reply
        assert reply.body == {
            "error": {"code": "forbidden", "message": reply.body["error"]["message"]}
        }


def test_viewer_reads_own_threads_but_cannot_start_rename_or_delete(
    alice: Api, bob: Api, make_project: MakeProject
) -> None:
    # Given bob was an editor with a thread, then became a viewer
    project = make_project(alice, {bob: "editor"})
    thread = start(bob, project)["id"]
    assert alice.put(f"/projects/{project}/members/{bob.sub}", {"role": "viewer"}).status == 200
    base = f"/projects/{project}/conversations"
    # Then he reads, but every write is 403
    assert bob.get(base).status == 200
    assert bob.get(f"{base}/{thread}").status == 200
    assert bob.post(base, {"title": "new"}).status == 403
    assert bob.patch(f"{base}/{thread}", {"title": "renamed"}).status == 403
    assert bob.delete(f"{base}/{thread}").status == 403


def test_sixty_threads_page_as_fifty_newest_first_then_ten(
    alice: Api, make_project: MakeProject
) -> None:
    project = make_project(alice)
    ids = [start(alice, project, f"thread {n}")["id"] for n in range(60)]
    # When
    first = alice.get(f"/projects/{project}/conversations")
    rest = alice.get(
        f"/projects/{project}/conversations", query=f"cursor={first.body['nextCursor']}"
    )
    # Then
    assert [row["id"] for row in first.body["conversations"]] == ids[::-1][:50]
    assert [row["id"] for row in rest.body["conversations"]] == ids[::-1][50:]
    assert rest.body["nextCursor"] is None


def test_renaming_a_thread_moves_it_to_the_top(alice: Api, make_project: MakeProject) -> None:
    project = make_project(alice)
    oldest, _, _ = (start(alice, project, f"t{n}")["id"] for n in range(3))
    renamed = alice.patch(
        f"/projects/{project}/conversations/{oldest}", {"title": "Spring campaign"}
    )
    assert renamed.status == 200
    assert renamed.body["title"] == "Spring campaign"
    rows = alice.get(f"/projects/{project}/conversations").body["conversations"]
    assert rows[0]["id"] == oldest


@contextmanager
def landing_first(meanwhile: Callable[[], Any]) -> Iterator[None]:
    """``meanwhile`` (another request) runs once, just before the next write to a thread
    leaves for DynamoDB: after that request read the thread, before its write lands, as
    another Lambda's request could."""
    table = get_settings().conversations_table
    ran: list[bool] = []

    def before_the_write(params: dict[str, Any], **_: Any) -> None:
        if params.get("TableName") == table and not ran:
            ran.append(True)
            meanwhile()

    events = dynamodb_client().meta.events
    hook = "before-parameter-build.dynamodb.UpdateItem"
    events.register(hook, before_the_write, unique_id="landing-first")
    try:
        yield
    finally:
        events.unregister(hook, unique_id="landing-first")
    assert ran, "nothing wrote to the thread"


def one_millisecond(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every request from now on stamps the same instant, as two Lambdas may: their
    ``updatedAt`` cannot tell their writes apart."""
    instant = clock.now()
    monkeypatch.setattr(clock, "now", lambda: instant)


def test_a_rename_racing_an_archive_keeps_the_archive(
    alice: Api, make_project: MakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a live thread, and requests in one millisecond
    project = make_project(alice)
    thread = start(alice, project, "Draft")["id"]
    one_millisecond(monkeypatch)
    path = f"/projects/{project}/conversations/{thread}"
    archive: list[Reply] = []
    # When an archive lands between a rename's read and its write
    with landing_first(lambda: archive.append(alice.patch(path, {"archived": True}))):
        renamed = alice.patch(path, {"title": "Spring campaign"})
    # Then both changes hold, and the rename answers the thread as written
    assert archive[0].status == 200 and archive[0].body["archived"] is True
    assert renamed.status == 200, renamed
    assert (renamed.body["title"], renamed.body["archived"]) == ("Spring campaign", True)
    shown = alice.get(path).body["conversation"]
    assert (shown["title"], shown["archived"]) == ("Spring campaign", True)
    # And the thread is listed with the archived ones, not the live ones
    base = f"/projects/{project}/conversations"
    assert alice.get(base).body["conversations"] == []
    archived = alice.get(base, query="archived=true").body["conversations"]
    assert [row["id"] for row in archived] == [thread]


@pytest.mark.parametrize(
    "before",
    [None, {"useSummary": False, "windowMessages": 4}],
    ids=["a thread without overrides", "a thread with overrides"],
)
def test_two_settings_patches_of_different_settings_keep_both(
    alice: Api,
    make_project: MakeProject,
    monkeypatch: pytest.MonkeyPatch,
    before: dict[str, Any] | None,
) -> None:
    # Given a thread, with or without overrides of its own, and requests in one millisecond
    project = make_project(alice)
    thread = start(alice, project)["id"]
    path = f"/projects/{project}/conversations/{thread}"
    if before is not None:
        assert alice.patch(path, {"settings": before}).status == 200
    one_millisecond(monkeypatch)
    other: list[Reply] = []
    # When one PATCH sets maxTokens between another's read and its write
    with landing_first(lambda: other.append(alice.patch(path, {"settings": {"maxTokens": 500}}))):
        first = alice.patch(path, {"settings": {"temperature": 0.2, "useSummary": None}})
    # Then the thread overrides both, and still what neither named
    assert other[0].status == 200 and first.status == 200, (other, first)
    settings = alice.get(path).body["conversation"]["settings"]
    assert (settings["temperature"], settings["maxTokens"]) == (0.2, 500)
    assert settings["useSummary"] is None
    assert settings["windowMessages"] == (4 if before else None)
    assert first.body["settings"] == settings


def test_a_patch_never_moves_a_thread_back_behind_a_turn_saved_meanwhile(
    alice: Api, make_project: MakeProject
) -> None:
    # Given a thread
    project = make_project(alice)
    thread = start(alice, project)["id"]
    path = f"/projects/{project}/conversations/{thread}"
    after_turn: list[dict[str, Any]] = []

    def a_later_turn() -> None:
        time.sleep(0.005)  # a clock tick past the rename's stamp
        body = {"message": "hi", "conversationId": thread}
        assert alice.post(f"/projects/{project}/chat", body).status == 200
        after_turn.append(alice.get(path).body["conversation"])

    # When a turn saves between a rename's read and its write
    with landing_first(a_later_turn):
        renamed = alice.patch(path, {"title": "Spring campaign"})
    # Then the thread keeps both, and its updatedAt is not older than the turn's
    assert renamed.status == 200, renamed
    shown = alice.get(path).body["conversation"]
    assert (shown["title"], shown["messageCount"]) == ("Spring campaign", 2)
    assert shown["updatedAt"] >= after_turn[0]["updatedAt"]


def test_limit_is_bounded_and_archived_threads_are_listed_apart(
    alice: Api, make_project: MakeProject
) -> None:
    project = make_project(alice)
    kept, archived = start(alice, project)["id"], start(alice, project)["id"]
    assert (
        alice.patch(f"/projects/{project}/conversations/{archived}", {"archived": True}).status
        == 200
    )
    base = f"/projects/{project}/conversations"
    assert [r["id"] for r in alice.get(base).body["conversations"]] == [kept]
    assert [r["id"] for r in alice.get(base, query="archived=true").body["conversations"]] == [
        archived
    ]
    assert alice.patch(f"{base}/{archived}", {"archived": False}).status == 200
    assert len(alice.get(base).body["conversations"]) == 2
    assert alice.get(base, query="limit=101").status == 422
    assert alice.get(base, query="limit=0").status == 422
    assert len(alice.get(base, query="limit=1").body["conversations"]) == 1


@pytest.mark.parametrize("cursor", ["not-base64!", "eyJ4IjoxfQ", "W10"])
def test_a_tampered_cursor_is_422_not_500(
    alice: Api, make_project: MakeProject, cursor: str
) -> None:
    project = make_project(alice)
    reply = alice.get(f"/projects/{project}/conversations", query=f"cursor={cursor}")
    assert reply.status == 422
    assert reply.body["error"]["details"][0]["field"] == "cursor"


def test_bad_patch_bodies_are_422(alice: Api, make_project: MakeProject) -> None:
    project = make_project(alice)
    thread = start(alice, project)["id"]
    base = f"/projects/{project}/conversations/{thread}"
    assert alice.patch(base, {}).status == 422
    assert alice.patch(base, {"title": "   "}).status == 422
    assert alice.patch(base, {"archived": "yes"}).status == 422
    assert alice.patch(base, {"owner": "me"}).status == 422


def _seed_thread(user: str, project: str, conversation: str, count: int) -> list[str]:
    settings = get_settings()
    store = MessageStore(settings)
    client = boto3.client("dynamodb")
    ids = []
    for n in range(count):
        message = Message(
            message_id=new_id(),
            role="user" if n % 2 == 0 else "assistant",
            content=f"message {n}",
            created_at=clock.stamp(clock.now()),
        )
        client.put_item(**store.put_request(user, project, conversation, message))
        ids.append(message.message_id)
    return ids


def _items_under(table: str, key: str, prefix: str) -> list[dict[str, Any]]:
    pages = boto3.client("dynamodb").get_paginator("scan").paginate(TableName=table)
    items = [item for page in pages for item in page["Items"]]
    return [item for item in items if item.get(key, {}).get("S", "").startswith(prefix)]


def test_messages_page_newest_first_and_each_page_reads_oldest_first(
    alice: Api, make_project: MakeProject
) -> None:
    project = make_project(alice)
    thread = start(alice, project)["id"]
    ids = _seed_thread(alice.sub or "", project, thread, 7)
    base = f"/projects/{project}/conversations/{thread}"
    newest = alice.get(base, query="limit=3")
    assert [m["id"] for m in newest.body["messages"]] == ids[4:]
    older = alice.get(base, query=f"limit=3&cursor={newest.body['nextCursor']}")
    assert [m["id"] for m in older.body["messages"]] == ids[1:4]


def test_deleting_a_thread_leaves_nothing_behind_in_any_table(
    alice: Api, make_project: MakeProject
) -> None:
    # Given a thread with messages and thread-scoped memory
    project = make_project(alice)
    thread = start(alice, project)["id"]
    keep = start(alice, project)["id"]
    user = alice.sub or ""
    _seed_thread(user, project, thread, 60)
    _seed_thread(user, project, keep, 2)
    owner = owner_key(user, project)
    memories = template.table_names()["MemoriesTable"]
    for conversation in (thread, keep):
        saved = alice.put(
            f"/projects/{project}/memories/tone",
            {
                "value": "warm",
                "category": "brand",
                "scope": "thread",
                "conversationId": conversation,
            },
        )
        assert saved.status == 201, saved
    # When
    deleted = alice.delete(f"/projects/{project}/conversations/{thread}")
    # Then nothing of the thread remains, and the other thread is untouched
    assert deleted.status == 204
    prefix = thread_key(user, project, thread)
    assert _items_under("MessagesTable", "thread", prefix) == []
    assert _items_under("SessionsTable", "thread", prefix) == []
    assert _items_under("ConversationsTable", "owner", owner) != []
    remaining = [i["sk"]["S"] for i in _items_under(memories, "owner", owner)]
    assert remaining and all(keep in sk and thread not in sk for sk in remaining), remaining
    assert len(_items_under("MessagesTable", "thread", thread_key(user, project, keep))) == 2
    assert alice.get(f"/projects/{project}/conversations/{thread}").status == 404
    assert alice.delete(f"/projects/{project}/conversations/{thread}").status == 404


def test_a_thread_is_grouped_by_the_day_it_was_last_updated_not_created(
    alice: Api, make_project: MakeProject
) -> None:
    # Given threads created long ago but updated yesterday and two days back, and one
    # created yesterday but updated today
    project = make_project(alice)
    now = clock.now()
    long_ago = clock.stamp(now - timedelta(days=40))
    yesterday = clock.stamp(now - timedelta(days=1))
    two_days_back = clock.stamp(now - timedelta(days=2))
    dates = {
        start(alice, project)["id"]: (long_ago, yesterday),
        start(alice, project)["id"]: (long_ago, two_days_back),
        start(alice, project)["id"]: (yesterday, clock.stamp(now)),
    }
    client = boto3.client("dynamodb")
    for thread, (created, updated) in dates.items():
        client.update_item(
            TableName=get_settings().conversations_table,
            Key=conversation_key(alice.sub or "", project, thread),
            UpdateExpression="SET createdAt = :created, updatedAt = :updated",
            ExpressionAttributeValues={":created": {"S": created}, ":updated": {"S": updated}},
        )
    # When
    listed = alice.get(f"/projects/{project}/conversations").body["conversations"]
    # Then
    periods = {row["id"]: row["period"] for row in listed}
    assert sorted(periods.values()) == ["previous7Days", "today", "yesterday"]
    assert [periods[thread] for thread in dates] == ["yesterday", "previous7Days", "today"]


def _cursor(values: dict[str, str]) -> str:
    return base64.urlsafe_b64encode(json.dumps(values).encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    ["not a cursor!", "%%%", _cursor({"messageId": "01M8P5NRC1BQPGBAEWYPK5R3EB", "extra": "x"})],
    ids=["does-not-decode", "not-base64", "extra-field"],
)
def test_a_messages_cursor_this_api_did_not_issue_is_422_not_the_newest_page(
    alice: Api, make_project: MakeProject, cursor: str
) -> None:
    # Given a thread with more than one page of messages
    project = make_project(alice)
    thread = start(alice, project)["id"]
    _seed_thread(alice.sub or "", project, thread, 5)
    base = f"/projects/{project}/conversations/{thread}"
    issued = alice.get(base, query="limit=2").body["nextCursor"]
    assert issued and alice.get(base, query=f"limit=2&cursor={issued}").status == 200
    # When
    reply = alice.get(base, query=f"limit=2&cursor={quote(cursor)}")
    # Then
    assert reply.status == 422, reply
    assert reply.body["error"]["details"][0]["field"] == "cursor"


class Requests:
    """Each request botocore sends on the store's client: its operation and tables."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, set[str]]] = []
        self.owners: list[str] = []

    def __call__(self, params: dict[str, Any], model: Any, **kwargs: Any) -> None:
        tables = set(params.get("RequestItems", {}))
        tables |= {params["TableName"]} if "TableName" in params else set()
        for item in params.get("TransactItems", []):
            tables |= {request["TableName"] for request in item.values()}
        self.sent.append((model.name, tables))
        values = params.get("ExpressionAttributeValues", {})
        for name in (":owner", ":thread"):
            owner = values.get(name, {}).get("S")
            if owner:
                self.owners.append(owner)


@pytest.fixture
def requests() -> Iterator[Requests]:
    counting = Requests()
    events = dynamodb_client().meta.events
    events.register("provide-client-params.dynamodb", counting)
    yield counting
    events.unregister("provide-client-params.dynamodb", counting)


def test_a_stranger_is_refused_before_any_thread_is_looked_up(
    alice: Api, make_project: MakeProject, requests: Requests
) -> None:
    # Given alice's thread
    project = make_project(alice)
    thread = start(alice, project)["id"]
    stranger = Api("stranger")
    base = f"/projects/{project}/conversations/{thread}"
    projects = get_settings().projects_table
    thread_routes = (
        lambda: stranger.get(base),
        lambda: stranger.patch(base, {"title": "x"}),
        lambda: stranger.delete(base),
    )
    for call in thread_routes:
        requests.sent.clear()
        # When
        reply = call()
        # Then one request, for the role, and no thread is read
        assert reply.status == 403, reply
        assert requests.sent == [("GetItem", {projects})], requests.sent
    # And clear-context reads role and thread in one batch: nothing follows a refusal
    requests.sent.clear()
    assert stranger.post(f"{base}/clear-context").status == 403
    assert [operation for operation, _ in requests.sent] == ["BatchGetItem"], requests.sent
    # And the turn and its preview send the window's and the memory queries beside the
    # batch, on the caller's own partitions only (nothing of alice's), and nothing follows
    # the refusal
    settings = get_settings()
    memories, messages = settings.memories_table, settings.messages_table
    for call in (
        lambda: stranger.get(f"{base}/context"),
        lambda: stranger.post(
            f"/projects/{project}/chat", {"message": "hi", "conversationId": thread}
        ),
    ):
        requests.sent.clear()
        requests.owners.clear()
        reply = call()
        assert reply.status == 403, reply
        assert sorted(operation for operation, _ in requests.sent) == [
            "BatchGetItem",
            "Query",
            "Query",
            "Query",
        ], requests.sent
        queried = sorted(tables.pop() for op, tables in requests.sent if op == "Query")
        assert queried == sorted([memories, memories, messages])
        assert requests.owners and all(o.startswith("stranger#") for o in requests.owners)


def test_a_cursor_from_the_archived_list_is_refused_on_the_live_list(
    alice: Api, make_project: Callable[..., str]
) -> None:
    # Given two archived threads and two live ones
    project = make_project(alice)
    base = f"/projects/{project}/conversations"
    threads = [start(alice, project)["id"] for _ in range(4)]
    for thread in threads[:2]:
        assert alice.patch(f"{base}/{thread}", {"archived": True}).status == 200
    archived_cursor = alice.get(base, query="archived=true&limit=1").body["nextCursor"]
    live_cursor = alice.get(base, query="limit=1").body["nextCursor"]
    # When / Then: each cursor pages its own list and no other (DynamoDB would refuse a start
    # key outside the query's range; moto would not)
    assert alice.get(base, query=f"archived=true&cursor={archived_cursor}").status == 200
    assert alice.get(base, query=f"cursor={live_cursor}").status == 200
    assert alice.get(base, query=f"cursor={archived_cursor}").status == 422
    assert alice.get(base, query=f"archived=true&cursor={live_cursor}").status == 422


def test_a_list_cursor_pages_only_the_list_it_was_issued_for(
    alice: Api, bob: Api, make_project: Callable[..., str]
) -> None:
    # Given alice's threads in two projects, bob's in the first, and a cursor into each list
    first = make_project(alice, {bob: "editor"})
    second = make_project(alice)
    for api, project in ((alice, first), (alice, first), (alice, second), (alice, second)):
        start(api, project)
    for _ in range(2):
        start(bob, first)
    alices_first = alice.get(f"/projects/{first}/conversations", query="limit=1").body
    alices_second = alice.get(f"/projects/{second}/conversations", query="limit=1").body
    bobs_first = bob.get(f"/projects/{first}/conversations", query="limit=1").body
    # When each is used on a list it was not issued for, then it is a 422
    for api, project, cursor in (
        (alice, first, alices_second["nextCursor"]),
        (alice, first, bobs_first["nextCursor"]),
        (bob, first, alices_first["nextCursor"]),
    ):
        reply = api.get(f"/projects/{project}/conversations", query=f"cursor={cursor}")
        assert reply.status == 422, reply
        assert reply.body["error"]["details"] == [
            {"field": "cursor", "message": "from another list"}
        ]
    # And on its own list it pages on
    own = alice.get(
        f"/projects/{first}/conversations", query=f"cursor={alices_first['nextCursor']}"
    )
    assert own.status == 200 and len(own.body["conversations"]) == 1


def test_an_edited_list_cursor_is_a_422(alice: Api, make_project: Callable[..., str]) -> None:
    project = make_project(alice)
    base = f"/projects/{project}/conversations"
    for _ in range(2):
        start(alice, project)
    issued = alice.get(base, query="limit=1").body["nextCursor"]
    values = json.loads(base64.urlsafe_b64decode(issued + "=" * (-len(issued) % 4)))
    values["conversationId"] = "01JSOMEONEELSEAAAAAAAAAAAA"
    edited = encode_cursor(values)
    assert alice.get(base, query=f"cursor={edited}").status == 422


def test_a_title_of_80_characters_is_kept_and_one_of_81_is_422(
    alice: Api, make_project: MakeProject
) -> None:
    project = make_project(alice)
    kept = alice.post(f"/projects/{project}/conversations", {"title": "t" * 80})
    over = alice.post(f"/projects/{project}/conversations", {"title": "t" * 81})
    assert kept.status == 201
    assert kept.body["title"] == "t" * 80
    assert over.status == 422
    assert over.body["error"]["details"][0]["field"] == "title"


def test_names_and_titles_are_one_line_of_text_like_memory_values(
    alice: Api, make_project: MakeProject
) -> None:
    # A control character (NUL, a bell) is a space, as in a memory value, wherever it is sent
    project = make_project(alice)
    sent = "a\x00b\x07 c\nd"
    thread = alice.post(f"/projects/{project}/conversations", {"title": sent})
    renamed = alice.patch(f"/projects/{project}", {"name": sent})
    preset = alice.post(f"/projects/{project}/presets", {"name": sent})
    assert [thread.body["title"], renamed.body["name"], preset.body["name"]] == ["a b c d"] * 3


def test_a_thread_answered_alone_carries_its_period_as_the_list_does(
    alice: Api, make_project: MakeProject
) -> None:
    project = make_project(alice)
    created = alice.post(f"/projects/{project}/conversations", {"title": "t"})
    thread = created.body["id"]
    shown = alice.get(f"/projects/{project}/conversations/{thread}").body["conversation"]
    renamed = alice.patch(f"/projects/{project}/conversations/{thread}", {"title": "u"})
    listed = alice.get(f"/projects/{project}/conversations").body["conversations"]
    periods = [created.body["period"], shown["period"], renamed.body["period"]]
    assert periods == [listed[0]["period"]] * 3


def test_abandoning_a_thread_keeps_it_once_a_turn_saved_into_it(
    alice: Api, make_project: Callable[..., str]
) -> None:
    # Given a thread with a saved turn, and one made for a turn that saved nothing
    project = make_project(alice)
    store = conversation_store()
    said = alice.post(f"/projects/{project}/chat", {"message": "hello"}).body["conversation"]
    used = store.get(alice.sub or "", project, said["id"])
    assert used is not None
    fresh = {"conversation_id": new_id(), "message_count": 0, "last_message_id": None}
    empty = used.model_copy(update=fresh)
    store.create(empty)
    # When a refused turn abandons each
    assert store.abandon(used) is False
    assert store.abandon(empty) is True
    # Then the used one stays, whole, and the empty one is gone
    assert store.get(alice.sub or "", project, said["id"]) == used
    assert store.get(alice.sub or "", project, empty.conversation_id) is None
