"""ContextService: clearing a thread's context and previewing the next turn's request."""

from __future__ import annotations

import pytest

from recall.domain.access import Role
from recall.domain.context import token_estimate
from recall.domain.memory import MemoryEntry
from recall.domain.prompt import ModelReply, ModelRequest
from recall.errors import Forbidden, NotFound
from tests.unit.services.in_memory import (
    InMemoryRecall,
    ScriptedModel,
    thread_with_window,
)

ALICE, BOB, VIEWER, STRANGER = "alice", "bob", "vera", "stranger"


def shop(recall: InMemoryRecall) -> str:
    return recall.projects.add(ALICE, {BOB: Role.EDITOR, VIEWER: Role.VIEWER})


def test_clear_empties_the_window_keeps_history_and_marks_the_thread() -> None:
    # Given
    recall = InMemoryRecall(model=ScriptedModel(ModelReply(text="fresh")))
    project = shop(recall)
    conversation_id, window = thread_with_window(recall, BOB, project)
    # When
    marker = recall.context_service.clear(BOB, project, conversation_id)
    # Then the thread keeps the marker, and the history its messages
    thread = recall.conversations.get(BOB, project, conversation_id)
    assert thread is not None and thread.cleared_after == marker
    assert recall.messages.of(BOB, project, conversation_id) == window
    # and the next turn sees no earlier message
    recall.chat_service.turn(BOB, project, "again", conversation_id, None)
    assert [m.text for m in recall.model.requests[0].messages] == ["again"]


def test_a_turn_racing_a_clear_lands_after_the_marker() -> None:
    # Given a clear that lands while the model answers
    recall = InMemoryRecall()
    project = shop(recall)
    conversation_id, _ = thread_with_window(recall, BOB, project)

    def clear_then_answer(request: ModelRequest) -> ModelReply:
        recall.context_service.clear(BOB, project, conversation_id)
        return ModelReply(text="late")

    recall.model = ScriptedModel(clear_then_answer)
    # When
    recall.chat_service.turn(BOB, project, "hello", conversation_id, None)
    # Then its messages fall after the marker, and the next window holds them alone
    [saved] = recall.turns.saved
    thread = recall.conversations.get(BOB, project, conversation_id)
    assert thread is not None and thread.cleared_after is not None
    assert all(m.message_id > thread.cleared_after for m in saved.messages)
    window = recall.loader.window(thread)
    assert [m.content for m in window] == ["hello", "late"]


def test_a_viewer_cannot_clear_context_but_can_preview_it() -> None:
    # Given a viewer's own thread
    recall = InMemoryRecall()
    project = shop(recall)
    conversation_id, window = thread_with_window(recall, VIEWER, project)
    # When / Then
    with pytest.raises(Forbidden):
        recall.context_service.clear(VIEWER, project, conversation_id)
    stored = recall.conversations.get(VIEWER, project, conversation_id)
    assert stored is not None and (stored.cleared_after, stored.last_message_id) == (
        None,
        window[-1].message_id,
    )
    context, _, _, _ = recall.context_service.preview(VIEWER, project, conversation_id)
    assert context.window == window


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
    assert recall.conversations.threads[(ALICE, project, alices)].cleared_after is None


def test_the_preview_is_the_next_turns_request_without_the_new_message() -> None:
    # Given a thread with memory and a window
    recall = InMemoryRecall(model=ScriptedModel(ModelReply(text="ok")))
    project = shop(recall)
    conversation_id, window = thread_with_window(recall, BOB, project)
    recall.memories.add(BOB, project, MemoryEntry(key="tone", value="warm", category="brand"))
    # When
    context, request, tokens, _ = recall.context_service.preview(BOB, project, conversation_id)
    # Then it leaves out the new message, and saves and asks nothing
    assert [m.text for m in request.messages] == [m.content for m in window]
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
