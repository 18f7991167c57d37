"""A turn heard while it runs (the WebSocket stream): the listener learns the thread
before the model is asked, the reply text as written and each tool call as it runs, and
the turn saves exactly what it saves unheard."""

from __future__ import annotations

from typing import Any

from recall.domain.access import Role
from recall.domain.conversations import Conversation
from recall.domain.prompt import ModelReply, ModelRequest, ToolCall
from recall.providers.offline import OfflineProvider
from tests.unit.services.in_memory import InMemoryRecall, ScriptedModel

BOB = "bob"


class Heard:
    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def started(self, conversation: Conversation, created: bool) -> None:
        self.events.append(("started", conversation.conversation_id, created))

    def text(self, chunk: str) -> None:
        self.events.append(("text", chunk))

    def tool(self, name: str, key: str | None, outcome: str) -> None:
        self.events.append(("tool", name, key, outcome))


def shop(recall: InMemoryRecall) -> str:
    return recall.projects.add("alice", {BOB: Role.EDITOR})


def test_the_listener_hears_the_thread_then_the_text_that_joins_to_the_reply() -> None:
    # Given
    recall = InMemoryRecall(model=OfflineProvider())
    project = shop(recall)
    heard = Heard()
    # When
    outcome = recall.chat_service.turn(BOB, project, "What about the header?", None, None, heard)
    # Then
    assert heard.events[0] == ("started", outcome.conversation.conversation_id, True)
    text = "".join(event[1] for event in heard.events[1:] if event[0] == "text")
    assert text == outcome.message.content
    assert len(heard.events) > 3


def test_each_tool_call_is_heard_with_its_key_and_outcome_after_its_rounds_text() -> None:
    # Given a model that saves one entry, forgets a missing one, makes a bad call, then answers
    calls = [
        ToolCall(
            id="s",
            name="save_preference",
            input={"key": "header_dark", "value": "dark", "category": "brand"},
        ),
        ToolCall(id="f", name="forget_preference", input={"key": "nothing_here"}),
        ToolCall(id="b", name="save_preference", input={"value": "no key"}),
    ]
    model = ScriptedModel(
        ModelReply(text="Noted.", tool_calls=calls, stop_reason="tool_use"),
        ModelReply(text="Saved."),
    )
    recall = InMemoryRecall(model=model)
    project = shop(recall)
    heard = Heard()
    # When
    outcome = recall.chat_service.turn(BOB, project, "Keep the header dark.", None, None, heard)
    # Then
    assert heard.events[1:] == [
        ("text", "Noted."),
        ("tool", "save_preference", "header_dark", "saved"),
        ("tool", "forget_preference", "nothing_here", "refused"),
        ("tool", "save_preference", None, "refused"),
        ("text", "Saved."),
    ]
    assert outcome.message.content == "Saved."
    assert [entry.key for entry in outcome.memories_saved] == ["header_dark"]


def test_a_forget_that_finds_its_entry_is_heard_as_forgotten() -> None:
    # Given a saved entry
    recall = InMemoryRecall(model=OfflineProvider())
    project = shop(recall)
    recall.chat_service.turn(BOB, project, "Always keep the header dark.", None, None)
    heard = Heard()
    # When
    recall.chat_service.turn(BOB, project, "Forget the header rule.", "latest", None, heard)
    # Then
    assert ("tool", "forget_preference", "header_dark", "forgotten") in heard.events


def test_a_heard_turn_saves_what_an_unheard_one_saves() -> None:
    # Given two projects with the same offline model
    recall = InMemoryRecall(model=OfflineProvider())
    heard_project, quiet_project = shop(recall), shop(recall)
    # When
    heard = recall.chat_service.turn(
        BOB, heard_project, "Never use stock photos.", None, None, Heard()
    )
    quiet = recall.chat_service.turn(BOB, quiet_project, "Never use stock photos.", None, None)
    # Then
    assert heard.message.content == quiet.message.content
    assert [entry.key for entry in heard.memories_saved] == [
        entry.key for entry in quiet.memories_saved
    ]
    assert len(recall.turns.saved) == 2


def test_a_provider_that_cannot_stream_is_heard_as_one_chunk() -> None:
    # Given a scripted model (converse only)
    model = ScriptedModel(ModelReply(text="All at once."))
    recall = InMemoryRecall(model=model)
    project = shop(recall)
    heard = Heard()
    # When
    recall.chat_service.turn(BOB, project, "hello", None, None, heard)
    # Then
    assert heard.events[1:] == [("text", "All at once.")]
    assert isinstance(model.requests[0], ModelRequest)
