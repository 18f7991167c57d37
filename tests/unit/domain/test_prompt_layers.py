"""The order of a prompt's layers is the product's: memory before project context."""

from __future__ import annotations

from recall.domain.context import SYSTEM_TEXT, assemble, turn_context
from recall.domain.messages import Message
from recall.domain.projects import Project
from recall.domain.tools import TOOL_INSTRUCTIONS

AT = "2026-11-29T09:30:00.000Z"


def test_the_layers_reach_the_model_in_order_memory_before_project_context() -> None:
    # Given every layer of a turn
    project = Project(
        project_id="p1",
        name="Corner Shop",
        context={"currency": "EUR"},
        created_by="u1",
        created_at=AT,
        updated_at=AT,
    )
    memory = "<project_memory>\n[brand]\ntone: warm\n</project_memory>"
    window = [
        Message(message_id="m1", role="user", content="earlier", created_at=AT),
        Message(message_id="m2", role="assistant", content="reply", created_at=AT),
    ]
    context = turn_context(project, memory, "We chose a dark header.", window)
    # When
    request = assemble(context, "next", "model-1", 1024, 0.2)
    # Then system text, tool instructions, memory, project context, summary; then the
    # window and the new message
    assert request.system == [
        SYSTEM_TEXT,
        TOOL_INSTRUCTIONS,
        memory,
        "<project_context>\nname: Corner Shop\ncurrency: EUR\n</project_context>",
        "<conversation_summary>\nWe chose a dark header.\n</conversation_summary>",
    ]
    assert [(m.role, m.text) for m in request.messages] == [
        ("user", "earlier"),
        ("assistant", "reply"),
        ("user", "next"),
    ]


def test_a_turn_marks_the_system_part_and_the_window_as_what_repeats_next_turn() -> None:
    project = Project(
        project_id="p1", name="Shop", context={}, created_by="u1", created_at=AT, updated_at=AT
    )
    window = [
        Message(message_id="m1", role="user", content="earlier", created_at=AT),
        Message(message_id="m2", role="assistant", content="reply", created_at=AT),
    ]
    request = assemble(turn_context(project, "", "", window), "next", "model-1", 1024, 0.2)
    # every system part, the summary last as it changes most; the window, not the new message
    assert request.stable_system == len(request.system) == 3
    assert request.stable_messages == 2
