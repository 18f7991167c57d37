"""Bodies of the preset routes (camelCase on the wire, like the rest of the API)."""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field, model_validator

from recall.api.models import Body, SettingsBody, SettingsView, View
from recall.domain.presets import ContextPrompt, Preset


class ContextPromptBody(Body):
    role: Literal["user", "assistant"]
    content: str

    def prompt(self) -> ContextPrompt:
        return ContextPrompt(role=self.role, content=self.content)


class CreatePresetRequest(Body):
    name: str = Field(max_length=1000)
    context_prompts: list[ContextPromptBody] = Field(
        default_factory=list,
        description="Sent in order after the summary, before the thread's window; at most "
        "CONTEXT_PROMPTS_MAX, each at most CONTEXT_PROMPT_MAX_CHARS.",
    )
    settings: SettingsBody = Field(default_factory=SettingsBody)


class UpdatePresetRequest(Body):
    """Each part given replaces the preset's; threads started from it keep their copy."""

    name: str | None = Field(default=None, max_length=1000)
    context_prompts: list[ContextPromptBody] | None = None
    settings: SettingsBody | None = None

    @model_validator(mode="after")
    def _something_to_change(self) -> UpdatePresetRequest:
        if self.name is None and self.context_prompts is None and self.settings is None:
            raise ValueError("give a name, contextPrompts or settings to change")
        return self


class ContextPromptView(View):
    role: str
    content: str


class PresetView(View):
    id: str = Field(validation_alias=AliasChoices("id", "preset_id"))
    name: str
    context_prompts: list[ContextPromptView]
    settings: SettingsView
    created_at: str
    updated_at: str

    @classmethod
    def of(cls, preset: Preset) -> PresetView:
        return cls.model_validate(preset, from_attributes=True)


class PresetList(View):
    presets: list[PresetView]
