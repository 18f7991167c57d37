"""ContextService: clearing a thread's context and previewing the next turn's request."""

from __future__ import annotations

import pytest

from recall.domain.access import Role
from recall.domain.context import token_estimate
from recall.domain.memory import MemoryEntry
from recall.domain.prompt import ModelReply
from recall.domain.session import Session
from recall.errors import Conflict, Forbidden, NotFound
from recall.settings import Settings
from tests.unit.services.in_memory import InMemoryRecall, ScriptedModel, messages_of

ALICE, BOB, VIEWER, STRANGER = "alice", "bob", "vera", "stranger"


def shop(recall: InMemoryRecall) -> str:
    return recall.projects.add(ALICE, {BOB: Role.EDITOR, VIEWER: Role.VIEWER})


def thread_with_window(recall: InMemoryRecall, user: str, project: str) -> tuple[str, Session]:
    earlier = messages_of(["user", "assistant"])
    thread = recall.conversations.add(user, project, message_count=2, turn_count=1)
    place = (user, project, thread.conversation_id)
    recall.messages.add(*place, earlier)
    session = Session(window=earlier, version=1)
    recall.sessions.put(*place, session, None)
    return thread.conversation_id, session


def test_clear_empties_the_window_keeps_history_and_marks_the_thread() -> None:
    # Given
    recall = InMemoryRecall(model=ScriptedModel(ModelReply(text="fresh")))
    project = shop(recall)
    conversation_id, session = thread_with_window(recall, BOB, project)
    # When
    marker = recall.context_service.clear(BOB, project, conversation_id)
    # Then the session starts after the marker, over the version it read
    cleared = recall.sessions.get(BOB, project, conversation_id)
    assert cleared is not None
    assert (cleared.window, cleared.cleared_after, cleared.version) == ([], marker, 2)
    # the thread keeps the marker and the history its messages
    thread = recall.conversations.get(BOB, project, conversation_id)
    assert thread is not None and thread.cleared_after == marker
    assert recall.messages.of(BOB, project, conversation_id) == session.window
    # and the next turn sees no earlier message
    recall.chat_service.turn(BOB, project, "again", conversation_id, None)
    assert [m.text for m in recall.model.requests[0].messages] == ["again"]


def test_clearing_a_thread_without_a_session_starts_one() -> None:
    # Given a thread whose session was pruned
    recall = InMemoryRecall()
    project = shop(recall)
    thread = recall.conversations.add(BOB, project)
    # When
    marker = recall.context_service.clear(BOB, project, thread.conversation_id)
    # Then
    session = recall.sessions.get(BOB, project, thread.conversation_id)
    assert session is not None
    assert (session.window, session.cleared_after, session.version) == ([], marker, 1)


def test_a_viewer_cannot_clear_context_but_can_preview_it() -> None:
    # Given a viewer's own thread
    recall = InMemoryRecall()
    project = shop(recall)
    conversation_id, session = thread_with_window(recall, VIEWER, project)
    # When / Then
    with pytest.raises(Forbidden):
        recall.context_service.clear(VIEWER, project, conversation_id)
    assert recall.sessions.get(VIEWER, project, conversation_id) == session
    context, _, _, _ = recall.context_service.preview(VIEWER, project, conversation_id)
    assert context.window == session.window


def test_a_stranger_can_neither_clear_nor_preview() -> None:
    # Given
    recall = InMemoryRecall()
    project = shop(recall)
    conversation_id, _ = thread_with_window(recall, BOB, project)
    # When / Then
    with pytest.raises(Forbidden):
        recall.context_service.clear(STRANGER, project, conversation_id)
    with pytest.raises(Forbidden):
        recall.context_service.preview(STRANGER, project, conversation_id)


def test_a_malformed_or_someone_elses_thread_is_not_found_for_a_member() -> None:
    # Given
    recall = InMemoryRecall()
    project = shop(recall)
    alices, _ = thread_with_window(recall, ALICE, project)
    service = recall.context_service
    # When / Then
    for conversation_id in ("not-an-id", alices):
        with pytest.raises(NotFound):
            service.clear(BOB, project, conversation_id)
        with pytest.raises(NotFound):
            service.preview(BOB, project, conversation_id)
    with pytest.raises(Forbidden):
        service.clear(STRANGER, project, "not-an-id")
    assert recall.sessions.get(ALICE, project, alices) is not None
    assert recall.conversations.threads[(ALICE, project, alices)].cleared_after is None


def test_clear_retries_over_a_turn_that_saved_meanwhile() -> None:
    # Given a turn that saves between the clear's read and its write
    recall = InMemoryRecall()
    project = shop(recall)
    conversation_id, _ = thread_with_window(recall, BOB, project)
    recall.sessions.rival_turns = 1
    # When
    marker = recall.context_service.clear(BOB, project, conversation_id)
    # Then the rival's message is cleared too
    session = recall.sessions.get(BOB, project, conversation_id)
    assert session is not None
    assert (session.window, session.cleared_after, session.version) == ([], marker, 3)


def test_clear_gives_up_with_conflict_after_turn_retry_max_attempts() -> None:
    # Given two attempts at most, and more rival turns than that
    recall = InMemoryRecall(Settings(turn_retry_max=2))
    project = shop(recall)
    conversation_id, _ = thread_with_window(recall, BOB, project)
    recall.sessions.rival_turns = 3
    # When / Then
    with pytest.raises(Conflict, match="too busy"):
        recall.context_service.clear(BOB, project, conversation_id)
    assert recall.sessions.rival_turns == 1
    session = recall.sessions.get(BOB, project, conversation_id)
    assert session is not None and session.cleared_after is None


def test_the_preview_is_the_next_turns_request_without_the_new_message() -> None:
    # Given a thread with memory and a window
    recall = InMemoryRecall(model=ScriptedModel(ModelReply(text="ok")))
    project = shop(recall)
    conversation_id, session = thread_with_window(recall, BOB, project)
    recall.memories.add(BOB, project, MemoryEntry(key="tone", value="warm", category="brand"))
    # When
    context, request, tokens, _ = recall.context_service.preview(BOB, project, conversation_id)
    # Then it leaves out the new message, and saves and asks nothing
    assert [m.text for m in request.messages] == [m.content for m in session.window]
    assert "tone: warm" in context.memory_block
    assert tokens == token_estimate(request)
    assert recall.turns.attempts == []
    assert recall.model.requests == []
    # and it is what the next turn sends, but for the new message
    recall.chat_service.turn(BOB, project, "next", conversation_id, None)
    sent = recall.model.requests[0]
    assert sent.messages[:-1] == request.messages
    assert sent.messages[-1].text == "next"
    assert request.model_copy(update={"messages": sent.messages}) == sent
