"""MemoryService: explicit writes and deletes, background writes, listing and history."""

from __future__ import annotations

from datetime import timedelta

import pytest

from recall.domain import clock
from recall.domain.access import Role
from recall.domain.ids import new_id
from recall.domain.memory import Action, MemoryEntry, Scope, Source
from recall.errors import Conflict, Forbidden, Invalid, NotFound
from recall.settings import Settings
from tests.unit.services.in_memory import InMemoryRecall

ALICE, BOB, VIEWER, STRANGER = "alice", "bob", "vera", "stranger"


def shop(recall: InMemoryRecall) -> str:
    return recall.projects.add(ALICE, {BOB: Role.EDITOR, VIEWER: Role.VIEWER})


def put(
    recall: InMemoryRecall,
    user: str,
    project: str,
    key: str = "tone",
    *,
    value: str = "warm",
    category: str = "brand",
    scope: Scope | None = None,
    conversation_id: str | None = None,
    expires_in: timedelta | None = None,
) -> tuple[MemoryEntry, bool]:
    expires_at = clock.now() + expires_in if expires_in is not None else None
    return recall.memory_service.put(
        user, project, key, value, category, scope, conversation_id, expires_at
    )


def background(key: str, value: str = "v", **fields: object) -> MemoryEntry:
    return MemoryEntry.model_validate(
        {"key": key, "value": value, "category": "context", "source": Source.EXTRACTED, **fields}
    )


def test_an_entry_without_scope_or_conversation_is_persistent_and_an_upsert() -> None:
    # Given
    recall = InMemoryRecall()
    project = shop(recall)
    # When
    first, created = put(recall, BOB, project, value="warm")
    second, created_again = put(recall, BOB, project, value="  dry \n and short ")
    # Then
    assert (first.scope, first.conversation_id, first.source) == (
        Scope.PERSISTENT,
        None,
        "explicit",
    )
    assert (created, created_again) == (True, False)
    assert second.value == "dry and short"
    assert second.created_at == first.created_at
    assert [e.value for e in recall.memories.active(BOB, project, None, clock.now())[0]] == [
        "dry and short"
    ]


def test_a_conversation_id_is_only_for_scope_thread() -> None:
    # Given Bob's own thread
    recall = InMemoryRecall()
    project = shop(recall)
    thread = recall.conversations.add(BOB, project)
    # When / Then
    with pytest.raises(Invalid) as raised:
        put(recall, BOB, project, scope=Scope.PERSISTENT, conversation_id=thread.conversation_id)
    assert raised.value.details == [
        {"field": "conversationId", "message": "only with scope thread"}
    ]
    assert recall.memories.entries(BOB, project) == []


def test_a_conversation_id_without_scope_makes_a_thread_entry_of_that_thread() -> None:
    # Given
    recall = InMemoryRecall()
    project = shop(recall)
    thread = recall.conversations.add(BOB, project)
    # When
    entry, _ = put(recall, BOB, project, conversation_id=thread.conversation_id)
    # Then
    assert (entry.scope, entry.conversation_id) == (Scope.THREAD, thread.conversation_id)


@pytest.mark.parametrize("conversation_id", [None, ""])
def test_scope_thread_needs_a_conversation_id(conversation_id: str | None) -> None:
    # Given
    recall = InMemoryRecall()
    project = shop(recall)
    # When / Then
    with pytest.raises(Invalid) as raised:
        put(recall, BOB, project, scope=Scope.THREAD, conversation_id=conversation_id)
    assert raised.value.details == [
        {"field": "conversationId", "message": "required with scope thread"}
    ]


def test_scope_thread_needs_a_thread_of_the_callers_own() -> None:
    # Given Alice's thread in the project where Bob is an editor
    recall = InMemoryRecall()
    project = shop(recall)
    alices = recall.conversations.add(ALICE, project)
    # When / Then
    with pytest.raises(NotFound):
        put(recall, BOB, project, scope=Scope.THREAD, conversation_id=alices.conversation_id)
    with pytest.raises(NotFound):
        put(recall, BOB, project, scope=Scope.THREAD, conversation_id=new_id())
    assert recall.memories.entries(BOB, project) == []


def test_expires_at_in_the_past_is_invalid_and_in_the_future_is_kept() -> None:
    # Given
    recall = InMemoryRecall()
    project = shop(recall)
    # When / Then
    with pytest.raises(Invalid) as raised:
        put(recall, BOB, project, expires_in=timedelta(seconds=-1))
    assert raised.value.details == [{"field": "expiresAt", "message": "in the past"}]
    entry, _ = put(recall, BOB, project, expires_in=timedelta(hours=1))
    assert entry.expires_at is not None
    assert clock.parse(entry.expires_at) > clock.now()


@pytest.mark.parametrize(
    ("key", "value", "category", "field"),
    [
        ("Tone", "warm", "brand", "key"),
        ("tone", " \n ", "brand", "value"),
        ("tone", "x" * 11, "brand", "value"),
        ("tone", "warm", "colours", "category"),
    ],
)
def test_a_malformed_key_value_or_category_is_invalid(
    key: str, value: str, category: str, field: str
) -> None:
    # Given values of at most 10 characters
    recall = InMemoryRecall(Settings(memory_value_max_chars=10))
    project = shop(recall)
    # When / Then
    with pytest.raises(Invalid) as raised:
        put(recall, BOB, project, key, value=value, category=category)
    assert raised.value.details is not None
    assert raised.value.details[0]["field"] == field


def test_a_viewer_lists_and_reads_history_but_cannot_write_or_delete() -> None:
    # Given an entry of the viewer's from when they were an editor
    recall = InMemoryRecall()
    project = shop(recall)
    recall.memories.add(VIEWER, project, MemoryEntry(key="tone", value="warm", category="brand"))
    service = recall.memory_service
    # When / Then
    assert [e.key for e in service.list(VIEWER, project, None, None)] == ["tone"]
    records, _ = service.history(VIEWER, project, "tone", None, 100)
    assert [r.action for r in records] == [Action.CREATED]
    with pytest.raises(Forbidden):
        put(recall, VIEWER, project)
    with pytest.raises(Forbidden):
        service.delete(VIEWER, project, "tone", None)
    assert [e.key for e in recall.memories.entries(VIEWER, project)] == ["tone"]


def test_a_stranger_gets_forbidden_on_every_memory_route() -> None:
    # Given
    recall = InMemoryRecall()
    project = shop(recall)
    service = recall.memory_service
    # When / Then
    with pytest.raises(Forbidden):
        service.list(STRANGER, project, None, None)
    with pytest.raises(Forbidden):
        service.history(STRANGER, project, "tone", None, 100)
    with pytest.raises(Forbidden):
        put(recall, STRANGER, project)
    with pytest.raises(Forbidden):
        service.delete(STRANGER, project, "tone", None)


def test_listing_filters_by_category_and_puts_persistent_entries_before_the_threads() -> None:
    # Given
    recall = InMemoryRecall()
    project = shop(recall)
    thread = recall.conversations.add(BOB, project)
    put(recall, BOB, project, "tone", category="brand")
    put(recall, BOB, project, "dark_mode", category="preferences")
    put(recall, BOB, project, "audience", category="brand", conversation_id=thread.conversation_id)
    expired = clock.now() - timedelta(hours=1)
    recall.memories.add(
        BOB, project, MemoryEntry(key="gone", value="v", category="brand", expires_at=expired)
    )
    service = recall.memory_service
    # When
    everything = service.list(BOB, project, None, thread.conversation_id)
    brand = service.list(BOB, project, "brand", thread.conversation_id)
    persistent_brand = service.list(BOB, project, "brand", None)
    # Then
    assert [(e.key, e.scope) for e in everything] == [
        ("tone", Scope.PERSISTENT),
        ("dark_mode", Scope.PERSISTENT),
        ("audience", Scope.THREAD),
    ]
    assert [e.key for e in brand] == ["tone", "audience"]
    assert [e.key for e in persistent_brand] == ["tone"]
    with pytest.raises(Invalid):
        service.list(BOB, project, "colours", None)


def test_listing_with_someone_elses_thread_is_not_found() -> None:
    # Given
    recall = InMemoryRecall()
    project = shop(recall)
    alices = recall.conversations.add(ALICE, project)
    # When / Then
    with pytest.raises(NotFound):
        recall.memory_service.list(BOB, project, None, alices.conversation_id)


def test_delete_removes_an_entry_and_its_history_says_so_while_an_absent_one_is_not_found() -> None:
    # Given
    recall = InMemoryRecall()
    project = shop(recall)
    put(recall, BOB, project, "tone", value="warm")
    put(recall, BOB, project, "tone", value="dry")
    service = recall.memory_service
    # When
    service.delete(BOB, project, "tone", None)
    # Then
    assert service.list(BOB, project, None, None) == []
    history, _ = service.history(BOB, project, "tone", None, 100)
    assert [(r.action, r.old_value, r.new_value) for r in history] == [
        (Action.CREATED, None, "warm"),
        (Action.UPDATED, "warm", "dry"),
        (Action.DELETED, "dry", None),
    ]
    with pytest.raises(NotFound):
        service.delete(BOB, project, "tone", None)
    with pytest.raises(NotFound):
        service.history(BOB, project, "never_saved", None, 100)
    with pytest.raises(Invalid):
        service.delete(BOB, project, "Not A Key", None)


def test_an_explicit_write_past_the_cap_is_a_conflict_unless_it_replaces_a_key() -> None:
    # Given a project memory of at most two entries, both taken
    recall = InMemoryRecall(Settings(memory_cap=2))
    project = shop(recall)
    put(recall, BOB, project, "one")
    put(recall, BOB, project, "two")
    # When / Then
    with pytest.raises(Conflict):
        put(recall, BOB, project, "three")
    _, created = put(recall, BOB, project, "two", value="replaced")
    assert created is False


def test_a_save_preference_call_ties_a_thread_entry_to_the_turns_thread() -> None:
    # Given
    recall = InMemoryRecall()
    thread_id = "01JTHREAD0000000000000000A"
    service = recall.memory_service
    # When
    thread_entry = service.tool_entry(thread_id, "tone", "dry", "brand", "thread")
    persistent = service.tool_entry(thread_id, "lang", "en", "context", "persistent")
    # Then
    assert (thread_entry.scope, thread_entry.conversation_id) == ("thread", thread_id)
    assert (persistent.scope, persistent.conversation_id) == ("persistent", None)
    with pytest.raises(Invalid):
        service.tool_entry(thread_id, "x", "v", "brand", "global")


def test_a_forget_preference_call_says_whether_there_was_an_entry_to_forget() -> None:
    # Given a thread entry the turn read
    recall = InMemoryRecall()
    project = shop(recall)
    thread = recall.conversations.add(BOB, project)
    put(recall, BOB, project, "tone", conversation_id=thread.conversation_id)
    service = recall.memory_service
    held = recall.memories.held(BOB, project, thread.conversation_id, clock.now())
    memory = service.turn_memory(held)

    def forget(scope: str) -> bool:
        return memory.forget(*service.tool_place(thread.conversation_id, "tone", scope))

    # When / Then: a persistent entry of that key there is not
    assert not forget("persistent")
    assert forget("thread")
    assert not forget("thread")
    assert [(c.key, c.entry) for c in memory.changes()] == [("tone", None)]
