"""A thread's settings resolve in layers: deployment defaults < project defaults < its
preset < its own overrides; dropping the overrides makes it follow again."""

from __future__ import annotations

import pytest

from recall.domain.context import TurnContext, assemble, for_thread, turn_context
from recall.domain.messages import Message
from recall.domain.presets import (
    ContextPrompt,
    EffectiveSettings,
    PresetCopy,
    SettingLimits,
    ThreadSettings,
    checked_settings,
    model_choices,
    resolved,
)
from recall.domain.projects import Project
from recall.errors import Invalid

BASE = EffectiveSettings(
    model="base-model",
    temperature=0.3,
    max_tokens=1024,
    window_messages=20,
    use_summary=True,
    send_memory=True,
)
LIMITS = SettingLimits(
    allowed_models=("model-a", "model-b"),
    default_model="base-model",
    max_tokens_limit=4096,
    window_messages_max=50,
)


def test_each_layer_overrides_only_what_it_sets() -> None:
    project = ThreadSettings(max_tokens=500, window_messages=8)
    preset = ThreadSettings(temperature=0.1, max_tokens=300)
    thread = ThreadSettings(temperature=0.9)
    settings = resolved(BASE, project, preset, thread)
    assert settings == BASE.model_copy(
        update={"temperature": 0.9, "max_tokens": 300, "window_messages": 8}
    )


def test_a_thread_without_overrides_follows_its_preset_and_project() -> None:
    preset = ThreadSettings(temperature=0.1)
    assert resolved(BASE, ThreadSettings(model="model-a"), preset, None) == BASE.model_copy(
        update={"temperature": 0.1, "model": "model-a"}
    )


def test_a_null_in_a_patch_stops_overriding_that_setting_only() -> None:
    overrides = ThreadSettings(temperature=0.9, max_tokens=200)
    patched = overrides.patched({"temperature": None, "use_summary": False})
    assert patched == ThreadSettings(max_tokens=200, use_summary=False)
    assert resolved(BASE, None, ThreadSettings(temperature=0.1), patched).temperature == 0.1


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        (ThreadSettings(temperature=1.01), "settings.temperature"),
        (ThreadSettings(temperature=-0.1), "settings.temperature"),
        (ThreadSettings(max_tokens=0), "settings.maxTokens"),
        (ThreadSettings(max_tokens=4097), "settings.maxTokens"),
        (ThreadSettings(window_messages=0), "settings.windowMessages"),
        (ThreadSettings(window_messages=51), "settings.windowMessages"),
        (ThreadSettings(model="not-allowed"), "settings.model"),
    ],
)
def test_settings_out_of_bounds_are_named_by_field(settings: ThreadSettings, field: str) -> None:
    with pytest.raises(Invalid) as refused:
        checked_settings(settings, LIMITS, "settings")
    assert [detail["field"] for detail in refused.value.details] == [field]


def test_settings_at_their_bounds_are_kept() -> None:
    settings = ThreadSettings(
        model="model-b", temperature=1, max_tokens=4096, window_messages=50, use_summary=False
    )
    assert checked_settings(settings, LIMITS, "settings") == settings


def _context(window: list[Message]) -> TurnContext:
    project = Project(project_id="p", name="Shop", created_by="u", created_at="t", updated_at="t")
    return turn_context(project, "<memory>tone: warm</memory>", "- earlier point", window)


def _messages(count: int) -> list[Message]:
    return [
        Message(
            message_id=f"m{index:03}",
            role="user" if index % 2 == 0 else "assistant",
            content=f"message {index}",
            created_at="t",
        )
        for index in range(count)
    ]


def test_preset_prompts_come_after_the_summary_and_before_the_window() -> None:
    preset = PresetCopy(
        preset_id="x",
        name="Copy",
        context_prompts=[
            ContextPrompt(role="user", content="Be a copywriter."),
            ContextPrompt(role="assistant", content="Understood."),
        ],
    )
    context = for_thread(_context(_messages(2)), BASE, preset)
    request = assemble(context, "new", "m", 10, 0.1)
    assert request.system[-1].startswith("<conversation_summary>")
    assert [m.text for m in request.messages] == [
        "Be a copywriter.",
        "Understood.",
        "message 0",
        "message 1",
        "new",
    ]
    # the prompts repeat on every turn: they are part of the cached prefix
    assert request.stable_messages == 4


def test_without_the_summary_the_window_is_exactly_its_size_and_no_summary_is_sent() -> None:
    settings = BASE.model_copy(update={"use_summary": False, "window_messages": 3})
    context = for_thread(_context(_messages(7)), settings, None)
    assert context.summary == ""
    assert [m.content for m in context.window] == ["message 4", "message 5", "message 6"]
    assert all("conversation_summary" not in part for part in context.system())


def test_without_memory_there_is_no_memory_block_and_no_memory_tool() -> None:
    settings = BASE.model_copy(update={"send_memory": False})
    context = for_thread(_context(_messages(2)), settings, None)
    request = assemble(context, "new", "m", 10, 0.1)
    assert context.memory_block == ""
    assert request.tools == []
    assert all("tone: warm" not in part for part in request.system)


def test_the_models_offered_are_the_default_first_then_each_allowed_one_once() -> None:
    assert model_choices("b", ("a", "b", "c")) == ["b", "a", "c"]
    assert model_choices("x", ("a",)) == ["x", "a"]
