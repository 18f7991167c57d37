"""A project's presets: editors create, change and delete them, viewers read them. Also
the bounds every settings layer (project, preset, thread) is checked against, and how a
thread's settings resolve from them."""

from __future__ import annotations

from recall.domain import clock
from recall.domain.access import Role
from recall.domain.conversations import Conversation
from recall.domain.ids import is_id, new_id
from recall.domain.presets import (
    ContextPrompt,
    EffectiveSettings,
    Preset,
    PresetLimits,
    SettingLimits,
    ThreadSettings,
    checked_preset_name,
    checked_prompts,
    checked_settings,
    resolved,
)
from recall.domain.projects import Project
from recall.errors import Invalid, NotFound
from recall.observability import logger
from recall.services.access import ProjectAccess
from recall.settings import Settings
from recall.store.presets import PresetStore


def setting_limits(settings: Settings) -> SettingLimits:
    return SettingLimits(
        allowed_models=settings.allowed_model_ids,
        default_model=settings.default_model_id,
        max_tokens_limit=settings.model_max_tokens_limit,
        window_messages_max=settings.window_messages_max,
    )


def preset_limits(settings: Settings) -> PresetLimits:
    return PresetLimits(
        name_max_chars=settings.preset_name_max_chars,
        prompts_max=settings.context_prompts_max,
        prompt_max_chars=settings.context_prompt_max_chars,
    )


def deployment_defaults(settings: Settings) -> EffectiveSettings:
    """The bottom layer: the deployment's own model settings and window."""
    return EffectiveSettings(
        model=settings.default_model_id,
        temperature=settings.model_temperature,
        max_tokens=settings.model_max_tokens,
        window_messages=settings.window_messages,
        use_summary=True,
        send_memory=True,
    )


def thread_settings(
    settings: Settings, project: Project | None, conversation: Conversation | None
) -> EffectiveSettings:
    """Deployment defaults < project defaults < the thread's preset < its own overrides."""
    preset = conversation.preset if conversation else None
    return resolved(
        deployment_defaults(settings),
        project.settings if project else None,
        preset.settings if preset else None,
        conversation.settings if conversation else None,
    )


def unknown_preset() -> Invalid:
    return Invalid(
        "No such preset in this project.",
        [{"field": "presetId", "message": "not a preset of this project"}],
    )


class PresetService:
    def __init__(self, settings: Settings, access: ProjectAccess, presets: PresetStore) -> None:
        self._settings = settings
        self._access = access
        self._presets = presets

    def list_presets(self, user_id: str, project_id: str) -> list[Preset]:
        self._access.require(user_id, project_id, Role.VIEWER)
        return self._presets.all(project_id)

    def get(self, user_id: str, project_id: str, preset_id: str) -> Preset:
        self._access.require(user_id, project_id, Role.VIEWER)
        return self._found(project_id, preset_id)

    def create(
        self,
        user_id: str,
        project_id: str,
        name: str,
        prompts: list[ContextPrompt],
        settings: ThreadSettings,
    ) -> Preset:
        self._access.require(user_id, project_id, Role.EDITOR)
        at = clock.stamp(clock.now())
        preset = Preset(
            project_id=project_id,
            preset_id=new_id(),
            name=checked_preset_name(name, self._settings.preset_name_max_chars),
            context_prompts=checked_prompts(prompts, self._limits()),
            settings=checked_settings(settings, setting_limits(self._settings), "settings"),
            created_by=user_id,
            created_at=at,
            updated_at=at,
        )
        self._presets.create(preset, user_id)
        logger.info("preset created", extra={"project_id": project_id})
        return preset

    def update(
        self,
        user_id: str,
        project_id: str,
        preset_id: str,
        name: str | None,
        prompts: list[ContextPrompt] | None,
        settings: ThreadSettings | None,
    ) -> Preset:
        """Each given part replaces the preset's; threads started from it keep their copy."""
        self._access.require(user_id, project_id, Role.EDITOR)
        preset = self._found(project_id, preset_id)
        limits = setting_limits(self._settings)
        changed = preset.model_copy(
            update={
                "name": checked_preset_name(name, self._settings.preset_name_max_chars)
                if name is not None
                else preset.name,
                "context_prompts": checked_prompts(prompts, self._limits())
                if prompts is not None
                else preset.context_prompts,
                "settings": checked_settings(settings, limits, "settings")
                if settings is not None
                else preset.settings,
                "updated_at": clock.stamp(clock.now()),
            }
        )
        self._presets.replace(changed, user_id)
        return changed

    def delete(self, user_id: str, project_id: str, preset_id: str) -> None:
        self._access.require(user_id, project_id, Role.EDITOR)
        if not is_id(preset_id):
            raise NotFound("No such preset.")
        self._presets.delete(project_id, preset_id, user_id)

    def for_new_thread(self, project_id: str, preset_id: str) -> Preset:
        """The preset a new thread starts from, once the caller's role allowed it; one the
        project does not have is a 422 on the field that named it."""
        preset = self._presets.get(project_id, preset_id) if is_id(preset_id) else None
        if preset is None:
            raise unknown_preset()
        return preset

    def _found(self, project_id: str, preset_id: str) -> Preset:
        preset = self._presets.get(project_id, preset_id) if is_id(preset_id) else None
        if preset is None:
            raise NotFound("No such preset.")
        return preset

    def _limits(self) -> PresetLimits:
        return preset_limits(self._settings)
