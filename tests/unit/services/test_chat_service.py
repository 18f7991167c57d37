"""ChatService with TurnContextLoader and ToolLoop: one chat turn, from the caller's role to
the one save, over in-memory stores and a scripted model."""

from __future__ import annotations

from datetime import timedelta
import json

import pytest

from recall.domain import clock
from recall.domain.access import Role
from recall.domain.ids import new_id
from recall.domain.memory import MemoryEntry, Scope
from recall.domain.messages import Message
from recall.domain.prompt import (
    ModelReply,
    ModelRequest,
    ModelThrottled,
    ModelTimeout,
    ToolCall,
    Usage,
)
from recall.errors import Conflict, Forbidden, Invalid, ModelFailed, NotFound, TooLarge
from recall.providers.offline import OfflineProvider
from recall.services.chat import TurnOutcome
from recall.settings import Settings
from tests.unit.services.in_memory import (
    InMemoryRecall,
    ScriptedModel,
    messages_of,
    thread_with_window,
)

ALICE, BOB, VIEWER, STRANGER = "alice", "bob", "vera", "stranger"


def shop(recall: InMemoryRecall) -> str:
    return recall.projects.add(ALICE, {BOB: Role.EDITOR, VIEWER: Role.VIEWER})


def said(text: str, tokens: int = 0) -> ModelReply:
    return ModelReply(text=text, usage=Usage(input_tokens=tokens, output_tokens=tokens))


def calling(*calls: ToolCall, text: str = "Noted.", tokens: int = 0) -> ModelReply:
    return ModelReply(
        text=text,
        tool_calls=list(calls),
        stop_reason="tool_use",
        usage=Usage(input_tokens=tokens, output_tokens=tokens),
    )


def save(key: str, value: str = "v", category: str = "preferences", **more: str) -> ToolCall:
    return ToolCall(
        id=f"call-{key}",
        name="save_preference",
        input={"key": key, "value": value, "category": category, **more},
    )


def forget(key: str, **more: str) -> ToolCall:
    return ToolCall(id=f"forget-{key}", name="forget_preference", input={"key": key, **more})


def turn(
    recall: InMemoryRecall,
    user: str,
    project: str,
    text: str = "hello",
    conversation_id: str | None = None,
    model: str | None = None,
) -> TurnOutcome:
    return recall.chat_service.turn(user, project, text, conversation_id, model)


def window_now(recall: InMemoryRecall, user: str, project: str, thread: str) -> list[Message]:
    """The window the next turn on the thread reads."""
    conversation = recall.conversations.get(user, project, thread)
    assert conversation is not None
    return recall.loader.window(conversation)


# Which thread


def test_a_first_message_starts_a_thread_titled_from_it() -> None:
    # Given
    recall = InMemoryRecall(model=OfflineProvider())
    project = shop(recall)
    # When
    outcome = turn(recall, BOB, project, "  Make the header\n  dark blue ")
    # Then
    assert outcome.created is True
    assert outcome.conversation.title == "Make the header dark blue"
    stored = recall.conversations.get(BOB, project, outcome.conversation.conversation_id)
    assert stored is not None
    assert (stored.title, stored.turn_count, stored.message_count) == (
        "Make the header dark blue",
        1,
        2,
    )
    assert outcome.user_message.content == "Make the header\n  dark blue"


def test_latest_continues_the_callers_most_recent_thread() -> None:
    # Given two threads of Bob's and a newer one of Alice's
    recall = InMemoryRecall(model=OfflineProvider())
    project = shop(recall)
    now = clock.now()
    recall.conversations.add(BOB, project, updated_at=clock.stamp(now - timedelta(days=2)))
    newer = recall.conversations.add(BOB, project, updated_at=clock.stamp(now - timedelta(days=1)))
    recall.conversations.add(ALICE, project, updated_at=clock.stamp(now))
    # When
    outcome = turn(recall, BOB, project, "more", "latest")
    # Then
    assert outcome.created is False
    assert outcome.conversation.conversation_id == newer.conversation_id
    assert len(recall.conversations.threads) == 3


def test_latest_without_any_thread_starts_one() -> None:
    # Given
    recall = InMemoryRecall(model=OfflineProvider())
    project = shop(recall)
    # When
    outcome = turn(recall, BOB, project, "first words", "latest")
    # Then
    assert outcome.created is True
    assert outcome.conversation.title == "first words"


@pytest.mark.parametrize("user", [VIEWER, STRANGER])
@pytest.mark.parametrize("target", ["new", "latest", "own"])
def test_a_viewer_or_a_stranger_cannot_chat_and_nothing_is_asked_or_saved(
    user: str, target: str
) -> None:
    # Given a thread of the caller's own (from when they could edit)
    recall = InMemoryRecall(model=ScriptedModel())
    project = shop(recall)
    own = recall.conversations.add(user, project)
    conversation_id = {"new": None, "latest": "latest", "own": own.conversation_id}[target]
    # When / Then
    with pytest.raises(Forbidden):
        turn(recall, user, project, "hello", conversation_id)
    assert recall.model.requests == []
    assert list(recall.conversations.threads.values()) == [own]
    assert recall.turns.attempts == []


@pytest.mark.parametrize("malformed", ["not-an-id", "01ARZ3NDEKTSV4RRFFQ69G5FA", "#" * 26])
def test_a_malformed_conversation_id_is_not_found_for_an_editor_but_forbidden_for_a_stranger(
    malformed: str,
) -> None:
    # Given
    recall = InMemoryRecall(model=ScriptedModel())
    project = shop(recall)
    # When / Then
    with pytest.raises(NotFound):
        turn(recall, BOB, project, "hello", malformed)
    with pytest.raises(Forbidden):
        turn(recall, STRANGER, project, "hello", malformed)
    # and no store was ever asked for that id
    assert recall.turns.reads == [None, None]
    assert recall.model.requests == []


def test_another_users_thread_is_not_found() -> None:
    # Given
    recall = InMemoryRecall(model=ScriptedModel())
    project = shop(recall)
    alices = recall.conversations.add(ALICE, project)
    # When / Then
    with pytest.raises(NotFound):
        turn(recall, BOB, project, "hello", alices.conversation_id)
    assert recall.turns.attempts == []


def test_a_project_that_is_gone_is_not_found_even_with_a_role_left_on_it() -> None:
    # Given a role that outlived its project
    recall = InMemoryRecall(model=ScriptedModel())
    project = shop(recall)
    del recall.projects.projects[project]
    # When / Then
    with pytest.raises(NotFound, match="project"):
        turn(recall, BOB, project)


@pytest.mark.parametrize(
    ("text", "model", "error"),
    [
        ("   \n ", None, Invalid),
        ("x" * 11, None, TooLarge),
        ("hello", "some.other-model", Invalid),
    ],
)
def test_a_blank_or_long_message_or_a_model_not_allowed_is_refused_before_any_read(
    text: str, model: str | None, error: type[Exception]
) -> None:
    # Given messages of at most 10 characters
    recall = InMemoryRecall(Settings(message_max_chars=10), model=ScriptedModel())
    project = shop(recall)
    # When / Then
    with pytest.raises(error):
        turn(recall, BOB, project, text, None, model)
    assert recall.turns.reads == []
    assert recall.conversations.threads == {}


def test_an_allowed_model_answers_and_is_kept_on_the_thread() -> None:
    # Given
    settings = Settings()
    chosen = settings.allowed_model_ids[1]
    recall = InMemoryRecall(settings, model=ScriptedModel(said("hi")))
    project = shop(recall)
    # When
    outcome = turn(recall, BOB, project, "hello", None, chosen)
    # Then
    assert recall.model.requests[0].model_id == chosen
    assert outcome.message.model == chosen
    stored = recall.conversations.get(BOB, project, outcome.conversation.conversation_id)
    assert stored is not None and stored.model == chosen


# What the model sees


def test_the_model_sees_memory_project_context_the_window_then_the_new_message() -> None:
    # Given persistent memory, memory of this thread and of another, and a window
    recall = InMemoryRecall(model=ScriptedModel(said("ok")))
    project = shop(recall)
    recall.projects.update(
        project,
        None,
        {"currency": "EUR"},
        clock.stamp(clock.now()),
        caller_id=ALICE,
        caller_roles=frozenset({Role.OWNER}),
    )
    conversation_id, window = thread_with_window(recall, BOB, project)
    other = recall.conversations.add(BOB, project)
    recall.memories.add(
        BOB,
        project,
        MemoryEntry(key="tone", value="warm", category="brand"),
        MemoryEntry(
            key="here",
            value="this",
            category="context",
            conversation_id=conversation_id,
            scope=Scope.THREAD,
        ),
        MemoryEntry(
            key="there",
            value="that",
            category="context",
            conversation_id=other.conversation_id,
            scope=Scope.THREAD,
        ),
    )
    # When
    turn(recall, BOB, project, "and now?", conversation_id)
    # Then
    request = recall.model.requests[0]
    system = "\n".join(request.system)
    assert "<project_memory>\n[brand]\ntone: warm\n</project_memory>" in system
    assert "<thread_memory>\n[context]\nhere: this\n</thread_memory>" in system
    assert "there: that" not in system
    assert "currency: EUR" in system
    assert [(m.role, m.text) for m in request.messages] == [
        ("user", window[0].content),
        ("assistant", window[1].content),
        ("user", "and now?"),
    ]
    assert [tool.name for tool in request.tools] == ["save_preference", "forget_preference"]


def test_a_new_thread_sees_persistent_memory_and_no_thread_memory() -> None:
    # Given memory of another thread
    recall = InMemoryRecall(model=ScriptedModel(said("ok")))
    project = shop(recall)
    other = recall.conversations.add(BOB, project)
    recall.memories.add(
        BOB,
        project,
        MemoryEntry(key="tone", value="warm", category="brand"),
        MemoryEntry(
            key="there",
            value="that",
            category="context",
            conversation_id=other.conversation_id,
            scope=Scope.THREAD,
        ),
    )
    # When
    turn(recall, BOB, project, "hello")
    # Then
    system = "\n".join(recall.model.requests[0].system)
    assert "tone: warm" in system
    assert "<thread_memory>" not in system


def test_a_thread_without_a_window_start_reads_its_window_after_the_clear_marker() -> None:
    # Given a thread no turn has given a window start: two messages before the marker,
    # then a user message, a tool round, a failed reply, a user message and a reply
    recall = InMemoryRecall(Settings(window_messages=4), model=ScriptedModel(said("ok")))
    project = shop(recall)
    before = messages_of(["user", "assistant"])
    marker = new_id()
    after = messages_of(["user", "tool", "assistant", "user", "assistant"])
    after[2] = after[2].model_copy(update={"status": "error"})
    thread = recall.conversations.add(
        BOB, project, message_count=7, turn_count=3, cleared_after=marker
    )
    recall.messages.add(BOB, project, thread.conversation_id, before + after)
    # When
    turn(recall, BOB, project, "next", thread.conversation_id)
    # Then the model sees the user messages and complete replies after the marker
    assert [m.text for m in recall.model.requests[0].messages] == [
        after[0].content,
        after[3].content,
        after[4].content,
        "next",
    ]
    # and the turn gives the thread the start of that window
    saved = recall.turns.saved[0]
    assert saved.window_start == after[0].message_id


# What the turn saves


def test_the_turn_saves_the_user_message_tool_rounds_and_reply_in_one_save() -> None:
    # Given an existing thread with a window
    recall = InMemoryRecall(
        model=ScriptedModel(calling(save("dark_mode"), tokens=3), said("Saved it.", tokens=5))
    )
    project = shop(recall)
    conversation_id, window = thread_with_window(recall, BOB, project)
    # When
    outcome = turn(recall, BOB, project, "Always use dark mode", conversation_id)
    # Then one save carries everything
    assert len(recall.turns.attempts) == 1
    saved = recall.turns.saved[0]
    assert [m.role for m in saved.messages] == ["user", "tool", "assistant"]
    user, tool, reply = saved.messages
    assert user.content == "Always use dark mode"
    assert [c.name for c in tool.tool_calls] == ["save_preference"]
    assert json.loads(tool.tool_results[0].content) == {"saved": "dark_mode", "scope": "persistent"}
    assert (reply.content, reply.status) == ("Saved it.", "complete")
    assert reply.usage == Usage(input_tokens=8, output_tokens=8)
    assert saved.conversation.last_message_id == window[-1].message_id
    # over the last message it read, with the window holding no tool round
    assert saved.window_start == window[0].message_id
    assert window_now(recall, BOB, project, conversation_id) == [*window, user, reply]
    # and the outcome is what was saved
    assert (outcome.user_message, outcome.message) == (user, reply)
    assert [e.key for e in outcome.memories_saved] == ["dark_mode"]
    assert outcome.usage == Usage(input_tokens=8, output_tokens=8)
    stored = recall.conversations.get(BOB, project, conversation_id)
    assert stored is not None
    assert (stored.message_count, stored.turn_count) == (5, 2)
    assert recall.messages.of(BOB, project, conversation_id)[-3:] == saved.messages


def test_each_turn_saves_over_the_last_message_the_one_before_left() -> None:
    # Given
    recall = InMemoryRecall(model=OfflineProvider())
    project = shop(recall)
    # When
    first = turn(recall, BOB, project, "one")
    thread = first.conversation.conversation_id
    turn(recall, BOB, project, "two", thread)
    # Then
    one, two = recall.turns.saved
    assert one.conversation.last_message_id is None
    assert two.conversation.last_message_id == one.messages[-1].message_id
    stored = recall.conversations.get(BOB, project, thread)
    assert stored is not None and stored.last_message_id == two.messages[-1].message_id
    window = window_now(recall, BOB, project, thread)
    assert [m.role for m in window] == ["user", "assistant", "user", "assistant"]


@pytest.mark.parametrize("new_thread", [False, True])
def test_a_lost_race_rereads_the_thread_and_saves_again_with_fresh_ids(new_thread: bool) -> None:
    # Given another turn on the thread that saves while the model answers
    recall = InMemoryRecall(model=ScriptedModel(said("mine")))
    project = shop(recall)
    if new_thread:
        conversation_id, window = None, []
    else:
        conversation_id, window = thread_with_window(recall, BOB, project)
    recall.turns.rival_turns = 1
    # When
    outcome = turn(recall, BOB, project, "hello", conversation_id)
    # Then the second save goes over the rival's message, with new ids
    first, second = recall.turns.attempts
    assert recall.turns.saved == [second]
    rival = recall.messages.of(BOB, project, second.conversation.conversation_id)[-3]
    assert second.conversation.last_message_id == rival.message_id
    assert {m.message_id for m in first.messages}.isdisjoint(m.message_id for m in second.messages)
    assert [m.content for m in second.messages] == ["hello", "mine"]
    # and both turns land in order, the model asked once
    thread = outcome.conversation.conversation_id
    assert [m.content for m in window_now(recall, BOB, project, thread)] == [
        *(m.content for m in window),
        "a rival turn",
        "hello",
        "mine",
    ]
    assert outcome.user_message.message_id == second.messages[0].message_id
    assert len(recall.model.requests) == 1


def test_a_turn_saves_on_its_last_allowed_attempt() -> None:
    # Given two attempts at most, and one rival turn
    recall = InMemoryRecall(Settings(turn_retry_max=2), model=ScriptedModel(said("ok")))
    project = shop(recall)
    conversation_id, _ = thread_with_window(recall, BOB, project)
    recall.turns.rival_turns = 1
    # When
    turn(recall, BOB, project, "hello", conversation_id)
    # Then
    assert len(recall.turns.attempts) == 2
    assert len(recall.turns.saved) == 1


def test_a_turn_that_keeps_losing_gives_up_with_conflict_after_turn_retry_max_attempts() -> None:
    # Given two attempts at most, and more rival turns than that
    recall = InMemoryRecall(Settings(turn_retry_max=2), model=ScriptedModel(said("ok")))
    project = shop(recall)
    conversation_id, _ = thread_with_window(recall, BOB, project)
    recall.turns.rival_turns = 5
    # When / Then
    with pytest.raises(Conflict, match="too busy"):
        turn(recall, BOB, project, "hello", conversation_id)
    assert len(recall.turns.attempts) == 2
    assert recall.turns.saved == []
    saved = recall.messages.of(BOB, project, conversation_id)
    assert [m.content for m in saved[2:]] == ["a rival turn", "a rival turn"]


def test_a_thread_deleted_while_the_model_answers_is_not_found_and_nothing_is_saved() -> None:
    # Given a model during whose answer the thread is deleted
    recall = InMemoryRecall()
    project = shop(recall)
    conversation_id, _ = thread_with_window(recall, BOB, project)

    def delete_then_answer(request: ModelRequest) -> ModelReply:
        recall.conversation_service.delete(BOB, project, conversation_id)
        return said("too late")

    recall.model = ScriptedModel(delete_then_answer)
    # When / Then
    with pytest.raises(NotFound):
        turn(recall, BOB, project, "hello", conversation_id)
    assert len(recall.turns.attempts) == 1
    assert recall.messages.of(BOB, project, conversation_id) == []


# When the model fails


def test_a_model_failure_still_saves_the_user_message_and_an_error_reply() -> None:
    # Given a model that times out
    recall = InMemoryRecall(model=ScriptedModel(ModelTimeout("The model took too long.")))
    project = shop(recall)
    conversation_id, window = thread_with_window(recall, BOB, project)
    # When
    with pytest.raises(ModelFailed) as raised:
        turn(recall, BOB, project, "hello", conversation_id)
    # Then the error names what was saved
    failed = raised.value
    assert (failed.status, failed.code, failed.message) == (
        504,
        "model_timeout",
        "The model took too long.",
    )
    saved = recall.turns.saved[0]
    user, reply = saved.messages
    assert failed.details == [
        {
            "conversationId": conversation_id,
            "userMessageId": user.message_id,
            "assistantMessageId": reply.message_id,
        }
    ]
    assert (user.role, user.content) == ("user", "hello")
    assert (reply.role, reply.status, reply.content, reply.error) == (
        "assistant",
        "error",
        "",
        "The model took too long.",
    )
    # and the failed reply stays out of the window
    assert window_now(recall, BOB, project, conversation_id) == [*window, user]


def test_an_unexpected_provider_error_is_a_502_model_failure() -> None:
    # Given a provider with a bug
    recall = InMemoryRecall(model=ScriptedModel(RuntimeError("boom")))
    project = shop(recall)
    # When / Then
    with pytest.raises(ModelFailed) as raised:
        turn(recall, BOB, project)
    assert (raised.value.status, raised.value.code) == (502, "model_error")
    assert "RuntimeError" in raised.value.message
    assert [m.status for m in recall.turns.saved[0].messages] == ["complete", "error"]


def test_a_failure_after_a_tool_round_keeps_the_round_but_not_its_memory() -> None:
    # Given a model that saves a preference, then is throttled
    recall = InMemoryRecall(model=ScriptedModel(calling(save("tone")), ModelThrottled("busy")))
    project = shop(recall)
    # When
    with pytest.raises(ModelFailed) as raised:
        turn(recall, BOB, project, "Always be brief")
    # Then
    assert raised.value.status == 503
    assert [m.role for m in recall.turns.saved[0].messages] == ["user", "tool", "assistant"]
    assert recall.memories.entries(BOB, project) == []


# The model's memory tools


def test_tool_rounds_are_bounded_and_the_last_round_is_sent_with_no_tools() -> None:
    # Given a model that calls a tool whenever it may, and two rounds at most
    recall = InMemoryRecall(
        Settings(tool_rounds_max=2), model=ScriptedModel(then=calling(save("again")))
    )
    project = shop(recall)
    # When
    outcome = turn(recall, BOB, project, "hello")
    # Then
    requests = recall.model.requests
    assert [len(r.tools) for r in requests] == [2, 2, 0]
    assert [m.role for m in recall.turns.saved[0].messages] == [
        "user",
        "tool",
        "tool",
        "assistant",
    ]
    # each later request carries the calls and their results
    assert [(m.role, bool(m.tool_calls), bool(m.tool_results)) for m in requests[2].messages] == [
        ("user", False, False),
        ("assistant", True, False),
        ("user", False, True),
        ("assistant", True, False),
        ("user", False, True),
    ]
    assert outcome.message.content == "Noted."


def test_a_reply_that_calls_tools_but_ends_its_turn_runs_them_and_asks_no_more() -> None:
    # Given
    reply = calling(save("tone"), text="Done, and here is my answer.")
    recall = InMemoryRecall(
        model=ScriptedModel(reply.model_copy(update={"stop_reason": "end_turn"}))
    )
    project = shop(recall)
    # When
    outcome = turn(recall, BOB, project, "Always be brief")
    # Then
    assert len(recall.model.requests) == 1
    assert [m.role for m in recall.turns.saved[0].messages] == ["user", "tool", "assistant"]
    assert outcome.message.content == "Done, and here is my answer."
    assert [e.key for e in outcome.memories_saved] == ["tone"]


def test_a_save_preference_call_without_scope_saves_a_persistent_entry() -> None:
    # Given
    recall = InMemoryRecall(
        model=ScriptedModel(calling(save("tone", "brief", "brand")), said("ok"))
    )
    project = shop(recall)
    # When
    outcome = turn(recall, BOB, project, "Always be brief")
    # Then
    (entry,) = recall.memories.entries(BOB, project)
    assert (entry.key, entry.value, entry.scope, entry.conversation_id) == (
        "tone",
        "brief",
        Scope.PERSISTENT,
        None,
    )
    assert outcome.memories_saved == [entry]


def test_a_thread_scoped_save_in_a_new_thread_belongs_to_that_thread() -> None:
    # Given
    recall = InMemoryRecall(model=ScriptedModel(calling(save("tone", scope="thread")), said("ok")))
    project = shop(recall)
    # When
    outcome = turn(recall, BOB, project, "Be brief in this conversation")
    # Then
    (entry,) = recall.memories.entries(BOB, project)
    assert (entry.scope, entry.conversation_id) == (
        Scope.THREAD,
        outcome.conversation.conversation_id,
    )


def test_a_bad_tool_call_is_an_error_result_the_model_reads_not_a_failed_turn() -> None:
    # Given calls without a value, with a category not among the five, and of no known tool
    bad = [
        ToolCall(id="a", name="save_preference", input={"key": "tone", "category": "brand"}),
        save("tone", category="colours"),
        save("Bad Key"),
        ToolCall(id="d", name="delete_everything", input={}),
    ]
    recall = InMemoryRecall(model=ScriptedModel(calling(*bad), said("Sorry.")))
    project = shop(recall)
    # When
    outcome = turn(recall, BOB, project, "hello")
    # Then
    results = recall.model.requests[1].messages[-1].tool_results
    assert [r.is_error for r in results] == [True, True, True, True]
    assert "invalid input" in results[0].content
    assert "category must be one of" in results[1].content
    assert "memory key" in results[2].content
    assert results[3].content == "Unknown tool 'delete_everything'."
    assert outcome.message.content == "Sorry."
    assert outcome.memories_saved == []
    assert recall.memories.entries(BOB, project) == []


def test_forget_preference_forgets_an_entry_or_says_there_was_none() -> None:
    # Given
    recall = InMemoryRecall(
        model=ScriptedModel(calling(forget("tone"), forget("nothing")), said("Forgotten."))
    )
    project = shop(recall)
    recall.memories.add(BOB, project, MemoryEntry(key="tone", value="warm", category="brand"))
    # When
    outcome = turn(recall, BOB, project, "forget the tone")
    # Then
    forgotten, missing = recall.model.requests[1].messages[-1].tool_results
    assert (forgotten.is_error, json.loads(forgotten.content)) == (False, {"forgotten": "tone"})
    assert (missing.is_error, missing.content) == (True, "No memory entry 'nothing' to forget.")
    assert outcome.memories_forgotten == ["tone"]
    assert recall.memories.entries(BOB, project) == []


# The nudge


def test_the_nudge_shows_only_past_the_threshold() -> None:
    # Given a threshold of two turns
    recall = InMemoryRecall(Settings(nudge_threshold_turns=2), model=OfflineProvider())
    project = shop(recall)
    conversation_id = None
    nudges = []
    # When
    for text in ("one", "two", "three"):
        outcome = turn(recall, BOB, project, text, conversation_id)
        conversation_id = outcome.conversation.conversation_id
        nudges.append((outcome.nudge.show, outcome.nudge.turns, outcome.nudge.threshold))
    # Then
    assert nudges == [(False, 1, 2), (False, 2, 2), (True, 3, 2)]


def test_a_thread_with_a_window_reads_as_message_history_to_the_offline_model() -> None:
    # Given the offline model, which counts what reached it
    recall = InMemoryRecall(model=OfflineProvider())
    project = shop(recall)
    conversation_id, _ = thread_with_window(recall, BOB, project)
    # When
    outcome = turn(recall, BOB, project, "what do you see?", conversation_id)
    # Then
    assert "0 memory entries and 2 earlier messages" in outcome.message.content
