"""Presets (NextChat's masks) and the settings a thread runs with.

A preset is a project's named starting point: ordered context prompts and settings. A
thread resolves its settings in layers, each one overriding only what it sets: the
deployment's defaults, then the project's defaults, then the preset it started from, then
its own overrides. A thread with no overrides follows the layers under it ("sync with
global"); clearing its overrides makes it follow again."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from recall.domain.memory import plain_text, shows_something
from recall.domain.numbers import FRACTION_RANGE, storable_number
from recall.errors import Invalid


class Stored(BaseModel):
    """camelCase inside the items that hold these (the project, the preset, the thread)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class ThreadSettings(Stored):
    """Settings one layer sets; ``None`` leaves a setting to the layer under it."""

    model: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    window_messages: int | None = None
    use_summary: bool | None = None
    send_memory: bool | None = None

    def given(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)

    def patched(self, changes: dict[str, Any]) -> ThreadSettings:
        """These overrides with ``changes`` applied: a value sets a setting, ``None`` stops
        overriding it (a JSON merge patch)."""
        return ThreadSettings.model_validate({**self.given(), **changes})


class Keep:
    """A thread's PATCH that leaves its settings as they are."""


KEEP = Keep()
# What a thread's PATCH does to its overrides: ``KEEP`` leaves them, ``None`` drops them all
# (the thread follows its preset and the project again), a dict is a merge patch into them
# (a ``None`` inside stops overriding that one setting).
SettingsChange = Keep | dict[str, Any] | None


class EffectiveSettings(BaseModel):
    """What a turn runs with, every setting resolved."""

    model: str
    temperature: float
    max_tokens: int
    window_messages: int
    use_summary: bool
    send_memory: bool


def resolved(base: EffectiveSettings, *layers: ThreadSettings | None) -> EffectiveSettings:
    """``base`` with each layer's settings over it, later layers winning."""
    values = base.model_dump()
    for layer in layers:
        if layer is not None:
            values.update(layer.given())
    return EffectiveSettings.model_validate(values)


class ContextPrompt(Stored):
    role: Literal["user", "assistant"]
    content: str


class Preset(BaseModel):
    project_id: str
    preset_id: str
    name: str
    context_prompts: list[ContextPrompt] = Field(default_factory=list)
    settings: ThreadSettings = Field(default_factory=ThreadSettings)
    created_by: str
    created_at: str
    updated_at: str


class PresetCopy(Stored):
    """What a thread keeps of the preset it started from: enough for every turn without
    reading the preset again, and unchanged when the preset is edited or deleted."""

    preset_id: str
    name: str
    context_prompts: list[ContextPrompt] = Field(default_factory=list)
    settings: ThreadSettings = Field(default_factory=ThreadSettings)

    @classmethod
    def of(cls, preset: Preset) -> PresetCopy:
        return cls(
            preset_id=preset.preset_id,
            name=preset.name,
            context_prompts=preset.context_prompts,
            settings=preset.settings,
        )


class SettingLimits(BaseModel):
    allowed_models: tuple[str, ...]
    default_model: str
    max_tokens_limit: int
    window_messages_max: int


class PresetLimits(BaseModel):
    name_max_chars: int
    prompts_max: int
    prompt_max_chars: int


def model_choices(default: str, allowed: tuple[str, ...]) -> list[str]:
    """Every model a turn or a setting may name, the default first, each once."""
    return [default, *(model for model in allowed if model != default)]


def checked_settings(settings: ThreadSettings, limits: SettingLimits, field: str) -> ThreadSettings:
    """Every setting within its bounds, each failure named by its field under ``field``."""
    details: list[dict[str, str | list[str]]] = []
    allowed = limits.allowed_models
    if settings.model is not None and settings.model not in (limits.default_model, *allowed):
        details.append(
            {
                "field": f"{field}.model",
                "message": "not an allowed model",
                "allowed": model_choices(limits.default_model, allowed),
            }
        )
    temperature = settings.temperature
    if temperature is not None and not (0 <= temperature <= 1 and storable_number(temperature)):
        details.append({"field": f"{field}.temperature", "message": FRACTION_RANGE})
    if settings.max_tokens is not None and not 1 <= settings.max_tokens <= limits.max_tokens_limit:
        details.append(
            {"field": f"{field}.maxTokens", "message": f"from 1 to {limits.max_tokens_limit}"}
        )
    window = settings.window_messages
    if window is not None and not 1 <= window <= limits.window_messages_max:
        details.append(
            {
                "field": f"{field}.windowMessages",
                "message": f"from 1 to {limits.window_messages_max}",
            }
        )
    if details:
        raise Invalid("Some settings are out of bounds.", details)
    return settings


def checked_preset_name(name: str, max_chars: int) -> str:
    cleaned = plain_text(name)
    if not shows_something(cleaned) or len(cleaned) > max_chars:
        raise Invalid(
            f"A preset name is 1 to {max_chars} characters.",
            [{"field": "name", "message": f"1 to {max_chars} characters"}],
        )
    return cleaned


def checked_prompts(prompts: list[ContextPrompt], limits: PresetLimits) -> list[ContextPrompt]:
    details: list[dict[str, str | list[str]]] = []
    if len(prompts) > limits.prompts_max:
        details.append({"field": "contextPrompts", "message": f"at most {limits.prompts_max}"})
    for index, prompt in enumerate(prompts):
        if not shows_something(prompt.content) or len(prompt.content) > limits.prompt_max_chars:
            details.append(
                {
                    "field": f"contextPrompts.{index}.content",
                    "message": f"1 to {limits.prompt_max_chars} characters",
                }
            )
    if details:
        raise Invalid("The context prompts are not valid.", details)
    return prompts
