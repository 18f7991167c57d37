"""Durable memory through the real handler, over the embedded DynamoDB: every rule of the
memory API, and isolation across users, projects and threads."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from recall.domain import clock
from recall.domain.memory import Category, MemoryEntry, parse_memory_block, render_memory_block
from recall.settings import get_settings
from recall.store.cursors import (
    encode_cursor,
    list_tag,
)
from recall.store.dynamodb import (
    to_item,
)
from recall.store.keys import owner_key as owner_of
from recall.store.memories import MemoryStore
from recall.store.memory_items import entry_sk
from tests.integration.conftest import Api


def memories(project: str) -> str:
    return f"/projects/{project}/memories"


def new_thread(user: Api, project: str) -> str:
    created = user.post(f"/projects/{project}/conversations", {"title": "A thread"})
    assert created.status == 201, created
    thread: str = created.body["id"]
    return thread


def keys_of(reply: Any) -> list[tuple[str, str]]:
    assert reply.status == 200, reply
    return [(m["scope"], m["key"]) for m in reply.body["memories"]]


@pytest.fixture
def project(alice: Api, make_project: Callable[..., str]) -> str:
    return make_project(alice)


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore(get_settings())


def test_first_put_creates_with_201_and_the_next_updates_with_200_keeping_created_at(
    alice: Api, project: str
) -> None:
    # Given
    created = alice.put(f"{memories(project)}/tone", {"value": "warm", "category": "brand"})
    # When
    updated = alice.put(f"{memories(project)}/tone", {"value": "plainspoken", "category": "brand"})
    # Then
    assert created.status == 201, created
    assert created.body["source"] == "explicit" and created.body["scope"] == "persistent"
    assert updated.status == 200, updated
    assert updated.body["value"] == "plainspoken"
    assert updated.body["createdAt"] == created.body["createdAt"]
    assert updated.body["updatedAt"] > created.body["updatedAt"]
    listed = alice.get(memories(project)).body["memories"]
    assert [(m["key"], m["value"]) for m in listed] == [("tone", "plainspoken")]


def test_a_category_outside_the_five_is_422_and_the_message_lists_them(
    alice: Api, project: str
) -> None:
    allowed = "brand, preferences, forbidden, context, history"
    for reply in (
        alice.put(f"{memories(project)}/tone", {"value": "warm", "category": "colours"}),
        alice.get(memories(project), query="category=colours"),
    ):
        assert reply.status == 422, reply
        assert allowed in reply.body["error"]["message"]
        assert reply.body["error"]["details"][0]["field"] == "category"


def test_bad_keys_long_values_and_past_expiries_are_422(alice: Api, project: str) -> None:
    limit = get_settings().memory_value_max_chars
    for reply in (
        alice.put(f"{memories(project)}/Tone", {"value": "warm", "category": "brand"}),
        alice.put(f"{memories(project)}/{'k' * 65}", {"value": "warm", "category": "brand"}),
        alice.put(f"{memories(project)}/tone", {"value": "x" * (limit + 1), "category": "brand"}),
        alice.put(f"{memories(project)}/tone", {"value": " \n ", "category": "brand"}),
        alice.put(
            f"{memories(project)}/tone",
            {"value": "warm", "category": "brand", "expiresAt": "2001-01-01T00:00:00Z"},
        ),
        alice.put(f"{memories(project)}/tone", {"value": "warm", "category": "brand", "x": 1}),
    ):
        assert reply.status == 422, reply
    assert alice.get(memories(project)).body["memories"] == []


def test_a_value_at_the_limit_is_kept_as_one_line_of_plain_text(alice: Api, project: str) -> None:
    limit = get_settings().memory_value_max_chars
    long = alice.put(f"{memories(project)}/long", {"value": "x" * limit, "category": "context"})
    folded = alice.put(
        f"{memories(project)}/folded", {"value": " dark\n\nheader\t ", "category": "context"}
    )
    assert long.status == 201 and len(long.body["value"]) == limit
    assert folded.body["value"] == "dark header"


def test_listing_is_in_block_order_then_key_and_filters_by_category(
    alice: Api, project: str
) -> None:
    # Given
    for key, category in [
        ("decided", "history"),
        ("palette", "preferences"),
        ("tone", "brand"),
        ("no_stock", "forbidden"),
        ("audience", "brand"),
        ("shop_type", "context"),
    ]:
        assert (
            alice.put(f"{memories(project)}/{key}", {"value": "v", "category": category}).status
            == 201
        )
    # When
    everything = alice.get(memories(project))
    brand = alice.get(memories(project), query="category=brand")
    # Then
    assert [k for _, k in keys_of(everything)] == [
        "audience",
        "tone",
        "palette",
        "no_stock",
        "shop_type",
        "decided",
    ]
    assert [k for _, k in keys_of(brand)] == ["audience", "tone"]


def test_the_51st_persistent_entry_is_409_unless_it_replaces_an_existing_key(
    alice: Api, project: str, store: MemoryStore
) -> None:
    # Given 50 entries, the cap
    cap = get_settings().memory_cap
    assert cap == 50
    now = clock.now()
    for index in range(cap - 1):
        entry = MemoryEntry(key=f"rule_{index:02d}", value="v", category=Category.CONTEXT)
        assert store.write(alice.sub or "", project, entry, now)
    assert (
        alice.put(f"{memories(project)}/rule_49", {"value": "v", "category": "context"}).status
        == 201
    )
    # When
    over = alice.put(f"{memories(project)}/one_more", {"value": "v", "category": "context"})
    replacing = alice.put(f"{memories(project)}/rule_00", {"value": "new", "category": "context"})
    # Then
    assert over.status == 409, over
    assert "50" in over.body["error"]["message"] and "full" in over.body["error"]["message"]
    assert replacing.status == 200, replacing
    assert len(alice.get(memories(project)).body["memories"]) == cap
    assert store.meta(alice.sub or "", project).persistent_count == cap
    # And a delete frees a slot
    assert alice.delete(f"{memories(project)}/rule_01").status == 204
    again = alice.put(f"{memories(project)}/one_more", {"value": "v", "category": "context"})
    assert again.status == 201, again


def test_expired_entries_are_not_listed_or_rendered_even_before_any_cleanup(
    alice: Api, project: str, store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an entry that expires in a minute, and one that never does
    start = clock.now()
    expires = clock.stamp(start + timedelta(minutes=1))
    put = alice.put(
        f"{memories(project)}/sale",
        {"value": "20% off", "category": "context", "expiresAt": expires},
    )
    assert put.status == 201 and put.body["expiresAt"] == expires
    alice.put(f"{memories(project)}/tone", {"value": "warm", "category": "brand"})
    assert [k for _, k in keys_of(alice.get(memories(project)))] == ["tone", "sale"]
    # When the clock passes the expiry and no cleanup has run
    later = start + timedelta(minutes=2)
    monkeypatch.setattr(clock, "now", lambda: later)
    listed = alice.get(memories(project))
    # Then the entry is not read, though its item is still stored
    assert [k for _, k in keys_of(listed)] == ["tone"]
    raw = store.client.get_item(
        TableName=get_settings().memories_table,
        Key=to_item({"owner": owner_of(alice.sub or "", project), "sk": entry_sk("sale", None)}),
    )
    assert "Item" in raw
    persistent, thread = store.active(alice.sub or "", project, None, later)
    assert [
        line.key for line in parse_memory_block(render_memory_block(persistent, thread, later))
    ] == ["tone"]
    assert alice.delete(f"{memories(project)}/sale").status == 404


def test_a_thread_entry_needs_the_callers_own_thread(
    alice: Api, bob: Api, make_project: Callable[..., str]
) -> None:
    # Given alice and bob both edit one project, each with a thread
    project = make_project(alice, {bob: "editor"})
    alices = new_thread(alice, project)
    bobs = new_thread(bob, project)
    body = {"value": "dark", "category": "preferences", "scope": "thread"}
    # When / Then
    missing = alice.put(f"{memories(project)}/hero", body)
    assert (
        missing.status == 422 and missing.body["error"]["details"][0]["field"] == "conversationId"
    )
    assert alice.put(f"{memories(project)}/hero", {**body, "conversationId": bobs}).status == 404
    assert (
        alice.put(
            f"{memories(project)}/hero", {**body, "conversationId": "01JNOSUCHTHREAD00000000000"}
        ).status
        == 404
    )
    assert alice.get(memories(project), query=f"conversationId={bobs}").status == 404
    assert (
        alice.get(f"{memories(project)}/hero/history", query=f"conversationId={bobs}").status == 404
    )
    ok = alice.put(f"{memories(project)}/hero", {**body, "conversationId": alices})
    assert ok.status == 201 and ok.body["conversationId"] == alices
    persistent_with_thread = alice.put(
        f"{memories(project)}/hero",
        {"value": "x", "category": "brand", "scope": "persistent", "conversationId": alices},
    )
    assert persistent_with_thread.status == 422


def test_the_same_key_in_each_scope_is_a_separate_entry(alice: Api, project: str) -> None:
    # Given one key, persistent and in a thread
    thread = new_thread(alice, project)
    alice.put(f"{memories(project)}/hero", {"value": "light", "category": "preferences"})
    scoped = alice.put(
        f"{memories(project)}/hero",
        {"value": "dark", "category": "preferences", "conversationId": thread},
    )
    assert scoped.status == 201 and scoped.body["scope"] == "thread"
    # When / Then: without the thread only the persistent entry, with it both, persistent first
    assert keys_of(alice.get(memories(project))) == [("persistent", "hero")]
    both = alice.get(memories(project), query=f"conversationId={thread}")
    assert [(m["scope"], m["value"]) for m in both.body["memories"]] == [
        ("persistent", "light"),
        ("thread", "dark"),
    ]
    # And deleting the thread entry leaves the persistent one
    assert alice.delete(f"{memories(project)}/hero", query=f"conversationId={thread}").status == 204
    assert keys_of(alice.get(memories(project), query=f"conversationId={thread}")) == [
        ("persistent", "hero")
    ]


def test_history_records_create_update_and_delete_with_values_source_and_time(
    alice: Api, project: str
) -> None:
    # Given
    alice.put(f"{memories(project)}/tone", {"value": "warm", "category": "brand"})
    alice.put(f"{memories(project)}/tone", {"value": "cool", "category": "brand"})
    assert alice.delete(f"{memories(project)}/tone").status == 204
    # When
    history = alice.get(f"{memories(project)}/tone/history")
    # Then
    assert history.status == 200, history
    assert history.body["key"] == "tone" and history.body["scope"] == "persistent"
    records = history.body["history"]
    assert [(r["action"], r["oldValue"], r["newValue"], r["source"]) for r in records] == [
        ("created", None, "warm", "explicit"),
        ("updated", "warm", "cool", "explicit"),
        ("deleted", "cool", None, "explicit"),
    ]
    assert [r["at"] for r in records] == sorted(r["at"] for r in records)


def test_a_thread_entrys_history_is_its_own(alice: Api, project: str) -> None:
    thread = new_thread(alice, project)
    alice.put(f"{memories(project)}/hero", {"value": "light", "category": "preferences"})
    alice.put(
        f"{memories(project)}/hero",
        {"value": "dark", "category": "preferences", "conversationId": thread},
    )
    scoped = alice.get(f"{memories(project)}/hero/history", query=f"conversationId={thread}")
    persistent = alice.get(f"{memories(project)}/hero/history")
    assert [r["newValue"] for r in scoped.body["history"]] == ["dark"]
    assert scoped.body["scope"] == "thread" and scoped.body["conversationId"] == thread
    assert [r["newValue"] for r in persistent.body["history"]] == ["light"]


def test_a_long_history_comes_newest_page_first_each_page_oldest_first(
    alice: Api, project: str
) -> None:
    # Given an entry changed seven times
    for n in range(7):
        put = alice.put(f"{memories(project)}/tone", {"value": f"v{n}", "category": "brand"})
        assert put.status in (200, 201), put
    # When its history is read three changes at a time, following each page's cursor
    pages, cursor = [], ""
    while True:
        query = "limit=3" + (f"&cursor={cursor}" if cursor else "")
        page = alice.get(f"{memories(project)}/tone/history", query=query)
        assert page.status == 200, page
        pages.append([record["newValue"] for record in page.body["history"]])
        cursor = page.body["nextCursor"]
        if cursor is None:
            break
    # Then the newest come first, each page in time order, and every change comes once
    assert pages == [["v4", "v5", "v6"], ["v1", "v2", "v3"], ["v0"]]
    # And a short history is one page, with no cursor, as it always was
    whole = alice.get(f"{memories(project)}/tone/history").body
    assert (len(whole["history"]), whole["nextCursor"]) == (7, None)


def test_a_history_cursor_from_another_entry_or_edited_is_a_422(alice: Api, project: str) -> None:
    # Given a cursor into one entry's history
    for key in ("tone", "font"):
        for n in range(2):
            alice.put(f"{memories(project)}/{key}", {"value": f"v{n}", "category": "brand"})
    cursor = alice.get(f"{memories(project)}/tone/history", query="limit=1").body["nextCursor"]
    assert cursor
    # When it is used on another entry, or edited, or the page size is out of bounds
    other = alice.get(f"{memories(project)}/font/history", query=f"cursor={cursor}")
    edited = alice.get(f"{memories(project)}/tone/history", query=f"cursor={cursor[:-4]}")
    entry = list_tag(owner_of(alice.sub or "", project), entry_sk("tone", None))
    nowhere = encode_cursor({"entry": entry, "at": "not-a-record"})
    moved = alice.get(f"{memories(project)}/tone/history", query=f"cursor={nowhere}")
    too_many = alice.get(f"{memories(project)}/tone/history", query="limit=201")
    # Then each is a 422 naming the field
    refused = ((other, "cursor"), (edited, "cursor"), (moved, "cursor"), (too_many, "limit"))
    for reply, field in refused:
        assert reply.status == 422, reply
        assert [d["field"] for d in reply.body["error"]["details"]] == [field]


def test_a_history_cursor_pages_only_the_history_it_was_issued_for(
    alice: Api, bob: Api, make_project: Callable[..., str]
) -> None:
    # Given the same key changed twice by alice in two projects and by bob in the first
    first = make_project(alice, {bob: "editor"})
    second = make_project(alice)
    for api, project in ((alice, first), (alice, second), (bob, first)):
        for n in range(2):
            put = api.put(f"{memories(project)}/tone", {"value": f"v{n}", "category": "brand"})
            assert put.status in (200, 201), put
    history = f"{memories(first)}/tone/history"
    cursor = alice.get(history, query="limit=1").body["nextCursor"]
    # When alice's cursor is used on bob's history, or on her own in the other project
    bobs = bob.get(history, query=f"cursor={cursor}")
    elsewhere = alice.get(f"{memories(second)}/tone/history", query=f"cursor={cursor}")
    # Then each is a 422, while it pages on in her own
    for reply in (bobs, elsewhere):
        assert reply.status == 422, reply
        assert reply.body["error"]["details"][0]["field"] == "cursor"
    assert len(alice.get(history, query=f"cursor={cursor}").body["history"]) == 1


def test_deleting_or_reading_the_history_of_an_absent_entry_is_404(
    alice: Api, project: str
) -> None:
    assert alice.delete(f"{memories(project)}/nothing").status == 404
    assert alice.get(f"{memories(project)}/nothing/history").status == 404
    alice.put(f"{memories(project)}/once", {"value": "v", "category": "context"})
    assert alice.delete(f"{memories(project)}/once").status == 204
    assert alice.delete(f"{memories(project)}/once").status == 404


def test_a_viewer_reads_memory_but_gets_403_on_every_write(
    alice: Api, carol: Api, make_project: Callable[..., str]
) -> None:
    # Given
    project = make_project(alice, {carol: "viewer"})
    alice.put(f"{memories(project)}/tone", {"value": "warm", "category": "brand"})
    # When / Then
    assert carol.get(memories(project)).status == 200
    for reply in (
        carol.put(f"{memories(project)}/tone", {"value": "cold", "category": "brand"}),
        carol.delete(f"{memories(project)}/tone"),
    ):
        assert reply.status == 403, reply
        assert reply.body["error"]["code"] == "forbidden"


def test_a_non_member_gets_403_on_every_memory_route(alice: Api, bob: Api, project: str) -> None:
    alice.put(f"{memories(project)}/tone", {"value": "warm", "category": "brand"})
    for reply in (
        bob.get(memories(project)),
        bob.put(f"{memories(project)}/tone", {"value": "cold", "category": "brand"}),
        bob.delete(f"{memories(project)}/tone"),
        bob.get(f"{memories(project)}/tone/history"),
    ):
        assert reply.status == 403, reply


def test_no_entry_leaks_across_users_projects_or_threads(
    alice: Api, bob: Api, make_project: Callable[..., str]
) -> None:
    # Given two projects both users edit, and two threads of alice's in the first
    first = make_project(alice, {bob: "editor"})
    second = make_project(alice, {bob: "editor"})
    one, two = new_thread(alice, first), new_thread(alice, first)
    bobs = new_thread(bob, first)
    writes: list[tuple[Api, str, str, dict[str, Any]]] = [
        (alice, first, "a_first", {}),
        (alice, second, "a_second", {}),
        (bob, first, "b_first", {}),
        (bob, second, "b_second", {}),
        (alice, first, "a_one", {"conversationId": one}),
        (alice, first, "a_two", {"conversationId": two}),
        (bob, first, "b_thread", {"conversationId": bobs}),
    ]
    for user, project, key, extra in writes:
        put = user.put(f"{memories(project)}/{key}", {"value": key, "category": "context", **extra})
        assert put.status == 201, put
    # Then each listing holds exactly its own entries
    assert keys_of(alice.get(memories(first))) == [("persistent", "a_first")]
    assert keys_of(alice.get(memories(second))) == [("persistent", "a_second")]
    assert keys_of(bob.get(memories(first))) == [("persistent", "b_first")]
    assert keys_of(bob.get(memories(second))) == [("persistent", "b_second")]
    assert keys_of(alice.get(memories(first), query=f"conversationId={one}")) == [
        ("persistent", "a_first"),
        ("thread", "a_one"),
    ]
    assert keys_of(alice.get(memories(first), query=f"conversationId={two}")) == [
        ("persistent", "a_first"),
        ("thread", "a_two"),
    ]
    assert keys_of(bob.get(memories(first), query=f"conversationId={bobs}")) == [
        ("persistent", "b_first"),
        ("thread", "b_thread"),
    ]
    # And nobody can touch another's entry: it is simply not there
    assert bob.delete(f"{memories(first)}/a_first").status == 404
    assert bob.get(f"{memories(first)}/a_first/history").status == 404
    assert alice.delete(f"{memories(second)}/a_first").status == 404
    assert alice.delete(f"{memories(first)}/a_one", query=f"conversationId={two}").status == 404
    assert bob.get(memories(first), query=f"conversationId={one}").status == 404
    assert keys_of(alice.get(memories(first))) == [("persistent", "a_first")]


def test_deleting_a_conversation_deletes_its_thread_memory_and_its_count(
    alice: Api, project: str, store: MemoryStore
) -> None:
    # Given a thread with an entry
    thread = new_thread(alice, project)
    alice.put(
        f"{memories(project)}/hero",
        {"value": "dark", "category": "preferences", "conversationId": thread},
    )
    # When
    assert alice.delete(f"/projects/{project}/conversations/{thread}").status == 204
    # Then nothing of the thread is left under the caller's memory
    query = store.thread_request(alice.sub or "", project, thread)
    assert store.client.query(**query)["Items"] == []
    assert alice.get(memories(project), query=f"conversationId={thread}").status == 404


def test_a_thread_entry_put_racing_its_threads_delete_is_404_and_leaves_nothing(
    alice: Api, project: str, store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a thread, and its delete landing after the PUT found the thread, before it writes
    thread = new_thread(alice, project)
    write = MemoryStore.write
    deleted: list[int] = []

    def after_the_delete(self: MemoryStore, *args: Any, **kwargs: Any) -> Any:
        if not deleted:
            deleted.append(alice.delete(f"/projects/{project}/conversations/{thread}").status)
        return write(self, *args, **kwargs)

    monkeypatch.setattr(MemoryStore, "write", after_the_delete)
    # When
    put = alice.put(
        f"{memories(project)}/hero",
        {"value": "dark", "category": "preferences", "conversationId": thread},
    )
    # Then the entry is refused as the thread's, and nothing of it outlives the thread
    assert deleted == [204]
    assert put.status == 404, put
    owner = owner_of(alice.sub or "", project)
    left = store.client.query(
        TableName=get_settings().memories_table,
        KeyConditionExpression="#owner = :owner",
        ExpressionAttributeNames={"#owner": "owner"},
        ExpressionAttributeValues={":owner": {"S": owner}},
    )["Items"]
    assert [item["sk"]["S"] for item in left if thread in item["sk"]["S"]] == []
