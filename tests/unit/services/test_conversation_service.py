"""ConversationService: who may list, start, read, change and delete which threads."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from recall.domain import clock
from recall.domain.access import Role
from recall.domain.conversations import DEFAULT_TITLE, Conversation, Period
from recall.domain.ids import new_id
from recall.domain.memory import Category, MemoryEntry, Scope
from recall.errors import Conflict, Forbidden, Invalid, NotFound
from recall.settings import Settings
from tests.unit.services.in_memory import InMemoryConversations, InMemoryRecall, messages_of

ALICE, BOB, VIEWER, STRANGER = "alice", "bob", "vera", "stranger"


def shop(recall: InMemoryRecall) -> str:
    return recall.projects.add(ALICE, {BOB: Role.EDITOR, VIEWER: Role.VIEWER})


def test_an_editor_starts_a_thread_titled_as_asked_or_by_default() -> None:
    # Given
    recall = InMemoryRecall()
    project = shop(recall)
    # When
    named = recall.conversation_service.create(BOB, project, "  Header \n colours ")
    unnamed = recall.conversation_service.create(BOB, project, None)
    # Then
    assert named.title == "Header colours"
    assert unnamed.title == DEFAULT_TITLE
    assert recall.conversations.get(BOB, project, named.conversation_id) == named
    assert named.created_at == named.updated_at


def test_a_viewer_cannot_start_a_conversation() -> None:
    # Given
    recall = InMemoryRecall()
    project = shop(recall)
    # When / Then
    with pytest.raises(Forbidden):
        recall.conversation_service.create(VIEWER, project, "Mine")
    assert recall.conversations.threads == {}


@pytest.mark.parametrize("route", ["get", "update", "delete"])
def test_a_stranger_gets_forbidden_before_any_thread_lookup(route: str) -> None:
    # Given a thread id nobody has, which a lookup would answer with NotFound
    recall = InMemoryRecall()
    project = shop(recall)
    service = recall.conversation_service
    calls = {
        "get": lambda: service.get(STRANGER, project, new_id(), 50, None),
        "update": lambda: service.update(STRANGER, project, new_id(), "New", None),
        "delete": lambda: service.delete(STRANGER, project, new_id()),
    }
    # When / Then
    with pytest.raises(Forbidden):
        calls[route]()


def test_a_stranger_cannot_list_threads_and_gets_no_empty_list() -> None:
    # Given
    recall = InMemoryRecall()
    project = shop(recall)
    # When / Then
    with pytest.raises(Forbidden):
        recall.conversation_service.list_conversations(STRANGER, project, False, 50, None)


def test_another_users_thread_is_not_found_for_every_route() -> None:
    # Given Alice's thread, and Bob an editor of the same project
    recall = InMemoryRecall()
    project = shop(recall)
    mine = recall.conversations.add(ALICE, project, title="Alice's")
    service = recall.conversation_service
    # When / Then
    with pytest.raises(NotFound):
        service.get(BOB, project, mine.conversation_id, 50, None)
    with pytest.raises(NotFound):
        service.update(BOB, project, mine.conversation_id, "Taken", None)
    with pytest.raises(NotFound):
        service.delete(BOB, project, mine.conversation_id)
    rows, _ = service.list_conversations(BOB, project, False, 50, None)
    assert rows == []
    # and Alice's thread is as it was
    assert recall.conversations.get(ALICE, project, mine.conversation_id) == mine


@pytest.mark.parametrize("title", ["", "   \n\t ", "x" * 11, "eleven char"])
def test_a_blank_or_over_long_title_is_invalid(title: str) -> None:
    # Given titles of at most 10 characters
    recall = InMemoryRecall(Settings(title_max_chars=10))
    project = shop(recall)
    thread = recall.conversations.add(BOB, project, title="Before")
    # When / Then
    with pytest.raises(Invalid) as raised:
        recall.conversation_service.create(BOB, project, title)
    assert raised.value.details == [{"field": "title", "message": "1 to 10 characters"}]
    with pytest.raises(Invalid):
        recall.conversation_service.update(BOB, project, thread.conversation_id, title, None)
    assert recall.conversations.get(BOB, project, thread.conversation_id) == thread


def test_a_title_of_exactly_the_limit_is_kept_after_its_blanks_fold() -> None:
    # Given
    recall = InMemoryRecall(Settings(title_max_chars=10))
    project = shop(recall)
    # When
    created = recall.conversation_service.create(BOB, project, "  ten  \n chars ")
    # Then
    assert created.title == "ten chars"
    assert recall.conversation_service.create(BOB, project, "x" * 10).title == "x" * 10


def test_a_viewer_reads_their_threads_but_cannot_rename_archive_or_delete_them() -> None:
    # Given a thread of the viewer's from when they were an editor
    recall = InMemoryRecall()
    project = shop(recall)
    thread = recall.conversations.add(VIEWER, project, title="Old notes")
    recall.messages.add(VIEWER, project, thread.conversation_id, messages_of(["user"]))
    service = recall.conversation_service
    # When
    read, messages, _ = service.get(VIEWER, project, thread.conversation_id, 50, None)
    # Then
    assert read == thread
    assert [m.role for m in messages] == ["user"]
    with pytest.raises(Forbidden):
        service.update(VIEWER, project, thread.conversation_id, "New", None)
    with pytest.raises(Forbidden):
        service.update(VIEWER, project, thread.conversation_id, None, True)
    with pytest.raises(Forbidden):
        service.delete(VIEWER, project, thread.conversation_id)
    assert recall.conversations.get(VIEWER, project, thread.conversation_id) == thread


def test_renaming_or_archiving_keeps_what_was_not_asked_and_moves_updated_at() -> None:
    # Given
    recall = InMemoryRecall()
    project = shop(recall)
    old = clock.stamp(clock.now() - timedelta(days=3))
    thread = recall.conversations.add(BOB, project, title="Before", updated_at=old)
    service = recall.conversation_service
    # When
    renamed = service.update(BOB, project, thread.conversation_id, "After", None)
    archived = service.update(BOB, project, thread.conversation_id, None, True)
    # Then
    assert (renamed.title, renamed.archived) == ("After", False)
    assert (archived.title, archived.archived) == ("After", True)
    assert archived.updated_at > old
    live, _ = service.list_conversations(BOB, project, False, 50, None)
    shelved, _ = service.list_conversations(BOB, project, True, 50, None)
    assert live == []
    assert [row.conversation_id for row, _ in shelved] == [thread.conversation_id]


class AlwaysChanged(InMemoryConversations):
    """A thread some other request changes between every read and write of a PATCH."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def update(self, seen: Conversation, at: str, **change: Any) -> Conversation:
        self.writes += 1
        raise Conflict("The conversation changed meanwhile.")


def test_a_patch_on_a_thread_that_keeps_changing_gives_up_with_a_retry_after() -> None:
    # Given a thread that changes under every attempt
    conversations = AlwaysChanged()
    recall = InMemoryRecall(Settings(thread_change_attempts=3), conversations=conversations)
    project = shop(recall)
    thread = conversations.add(BOB, project, title="Before")
    # When
    with pytest.raises(Conflict) as refused:
        recall.conversation_service.update(BOB, project, thread.conversation_id, "After", None)
    # Then it tried THREAD_CHANGE_ATTEMPTS times, and says when to come back
    assert conversations.writes == 3
    assert refused.value.retry_after == recall.settings.retry_after_seconds
    assert conversations.get(BOB, project, thread.conversation_id) == thread


def test_threads_are_listed_newest_first_with_the_period_they_were_last_updated_in() -> None:
    # Given
    recall = InMemoryRecall()
    project = shop(recall)
    now = clock.now()
    ages = {"today": 0, "yesterday": 1, "last week": 5, "last month": 20, "long ago": 90}
    for title, days in ages.items():
        at = clock.stamp(now - timedelta(days=days))
        recall.conversations.add(BOB, project, title=title, created_at=at, updated_at=at)
    # When
    rows, cursor = recall.conversation_service.list_conversations(BOB, project, False, 3, None)
    more, end = recall.conversation_service.list_conversations(BOB, project, False, 3, cursor)
    # Then
    assert [(row.title, period) for row, period in rows + more] == [
        ("today", Period.TODAY),
        ("yesterday", Period.YESTERDAY),
        ("last week", Period.PREVIOUS_7_DAYS),
        ("last month", Period.PREVIOUS_30_DAYS),
        ("long ago", Period.OLDER),
    ]
    assert cursor is not None
    assert end is None


def test_delete_removes_messages_and_thread_memory_and_nothing_else() -> None:
    # Given two threads of Bob's, each with messages and thread memory
    recall = InMemoryRecall()
    project = shop(recall)
    gone = recall.conversations.add(BOB, project)
    kept = recall.conversations.add(BOB, project)
    for thread in (gone, kept):
        place = (BOB, project, thread.conversation_id)
        recall.messages.add(*place, messages_of(["user", "assistant"]))
        recall.memories.add(
            BOB,
            project,
            MemoryEntry(
                key="tone",
                value="dry",
                category=Category.BRAND,
                scope=Scope.THREAD,
                conversation_id=thread.conversation_id,
            ),
        )
    recall.memories.add(BOB, project, MemoryEntry(key="lang", value="en", category="context"))
    # When
    recall.conversation_service.delete(BOB, project, gone.conversation_id)
    # Then
    assert recall.conversations.get(BOB, project, gone.conversation_id) is None
    assert recall.conversations.threads.keys() == {(BOB, project, kept.conversation_id)}
    assert recall.messages.of(BOB, project, gone.conversation_id) == []
    keys = {(e.conversation_id, e.key) for e in recall.memories.entries(BOB, project)}
    assert keys == {(kept.conversation_id, "tone"), (None, "lang")}
    assert recall.memories.history(BOB, project, "tone", gone.conversation_id) == []
    assert len(recall.messages.of(BOB, project, kept.conversation_id)) == 2


def test_a_delete_that_stops_part_way_hides_the_thread_and_a_retry_finishes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a thread whose thread memory delete fails once
    recall = InMemoryRecall()
    project = shop(recall)
    thread = recall.conversations.add(BOB, project)
    place = (BOB, project, thread.conversation_id)
    recall.messages.add(*place, messages_of(["user"]))
    real_delete = recall.memories.delete_thread

    def fails_once(*args: str) -> int:
        monkeypatch.setattr(recall.memories, "delete_thread", real_delete)
        raise RuntimeError("the store went away")

    monkeypatch.setattr(recall.memories, "delete_thread", fails_once)
    service = recall.conversation_service
    # When
    with pytest.raises(RuntimeError):
        service.delete(*place)
    # Then the thread is already gone to its owner
    with pytest.raises(NotFound):
        service.get(BOB, project, thread.conversation_id, 50, None)
    assert service.list_conversations(BOB, project, False, 50, None)[0] == []
    # and a retry finishes the job
    service.delete(*place)
    assert recall.conversations.threads == {}
    assert recall.messages.of(*place) == []
