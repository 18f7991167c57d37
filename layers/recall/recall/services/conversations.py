"""Listing, creating, reading, changing and deleting the caller's threads."""

from __future__ import annotations

from aws_lambda_powertools.metrics import MetricUnit

from recall.domain import clock
from recall.domain.access import Role
from recall.domain.conversations import DEFAULT_TITLE, Conversation, Period, period_of
from recall.domain.ids import is_id, new_id
from recall.domain.memory import plain_text, shows_something
from recall.domain.messages import Message
from recall.domain.presets import (
    KEEP,
    PresetCopy,
    SettingsChange,
    ThreadSettings,
    checked_settings,
)
from recall.errors import Conflict, Invalid, NotFound
from recall.observability import logger, metrics
from recall.retry import attempts
from recall.services.access import ProjectAccess
from recall.services.presets import setting_limits, unknown_preset
from recall.settings import Settings
from recall.store.conversations import ConversationStore
from recall.store.keys import fits_id
from recall.store.memories import MemoryStore
from recall.store.messages import MessageStore
from recall.store.presets import PresetStore


class ConversationService:
    def __init__(
        self,
        settings: Settings,
        access: ProjectAccess,
        conversations: ConversationStore,
        messages: MessageStore,
        memories: MemoryStore,
        presets: PresetStore,
    ) -> None:
        self._settings = settings
        self._access = access
        self._conversations = conversations
        self._messages = messages
        self._memories = memories
        self._presets = presets

    def list_conversations(
        self, user_id: str, project_id: str, archived: bool, limit: int, cursor: str | None
    ) -> tuple[list[tuple[Conversation, Period]], str | None]:
        self._access.require(user_id, project_id, Role.VIEWER)
        rows, next_cursor = self._conversations.page(user_id, project_id, archived, limit, cursor)
        now = clock.now()
        return [(row, period_of(row.updated_at, now)) for row in rows], next_cursor

    def create(
        self, user_id: str, project_id: str, title: str | None, preset_id: str | None = None
    ) -> Conversation:
        """A new thread; from ``preset_id``, it keeps a copy of that preset."""
        self._access.require(user_id, project_id, Role.EDITOR)
        preset = None
        if preset_id is not None:
            preset = self._presets.get(project_id, preset_id) if is_id(preset_id) else None
            if preset is None:
                raise unknown_preset()
        at = clock.stamp(clock.now())
        conversation = Conversation(
            user_id=user_id,
            project_id=project_id,
            conversation_id=new_id(),
            title=self._checked_title(title) if title is not None else DEFAULT_TITLE,
            created_at=at,
            updated_at=at,
            preset=PresetCopy.of(preset) if preset else None,
        )
        self._conversations.create(
            conversation, self._access.still(user_id, project_id, Role.EDITOR)
        )
        metrics.add_metric(name="ConversationsCreated", unit=MetricUnit.Count, value=1)
        return conversation

    def get(
        self, user_id: str, project_id: str, conversation_id: str, limit: int, cursor: str | None
    ) -> tuple[Conversation, list[Message], str | None]:
        self._access.require(user_id, project_id, Role.VIEWER)
        conversation = self._owned(user_id, project_id, conversation_id)
        messages, next_cursor = self._messages.page(
            user_id, project_id, conversation_id, limit, cursor
        )
        return conversation, messages, next_cursor

    def update(
        self,
        user_id: str,
        project_id: str,
        conversation_id: str,
        title: str | None,
        archived: bool | None,
        settings: SettingsChange = KEEP,
    ) -> Conversation:
        """Change only what the PATCH names: another PATCH or a turn landing between this
        read and its write keeps its own change. ``settings``: ``KEEP`` leaves the
        overrides, ``None`` drops them (the thread follows its preset and the project
        again), a dict is merged into them (a null stops overriding that one). When the
        thread changed in a way the write depends on (its archive flag, whether it has
        overrides, a later ``updatedAt``), it is read again and the PATCH applied again."""
        self._access.require(user_id, project_id, Role.EDITOR)
        for attempt in attempts(
            self._settings.thread_change_attempts, self._settings.turn_retry_base_seconds
        ):
            seen = self._owned(user_id, project_id, conversation_id)
            if isinstance(settings, dict):
                # Checked as merged, as the thread will hold them; each bound is a single
                # setting's, so the ones merged in by a racing PATCH were checked by it.
                merged = (seen.settings or ThreadSettings()).patched(settings)
                checked_settings(merged, setting_limits(self._settings), "settings")
            cleaned = self._checked_title(title) if title is not None else None
            # Never earlier than the stamp read: a clock behind another writer's would
            # otherwise fail the write's forward-only condition on every attempt.
            at = max(clock.stamp(clock.now()), seen.updated_at)
            try:
                return self._conversations.update(
                    seen, at, title=cleaned, archived=archived, settings=settings
                )
            except Conflict:
                logger.info(
                    "thread changed during its PATCH; applying it again",
                    extra={"attempt": attempt + 1},
                )
        raise Conflict(
            "The conversation kept changing meanwhile; nothing was changed. Try again.",
            retry_after=self._settings.retry_after_seconds,
        )

    def delete(self, user_id: str, project_id: str, conversation_id: str) -> None:
        """Hide the thread, then delete its messages and thread memory, then the
        thread itself; a retry after a failure part-way finishes the job."""
        self._access.require(user_id, project_id, Role.EDITOR)
        if not fits_id(conversation_id):
            raise NotFound("No such conversation.")
        self._conversations.mark_deleting(user_id, project_id, conversation_id)
        messages = self._messages.delete_thread(user_id, project_id, conversation_id)
        memories = self._memories.delete_thread(user_id, project_id, conversation_id)
        self._conversations.delete(user_id, project_id, conversation_id)
        logger.info(
            "conversation deleted",
            extra={
                "conversation_id": conversation_id,
                "messages_deleted": messages,
                "memories_deleted": memories,
            },
        )

    def _owned(self, user_id: str, project_id: str, conversation_id: str) -> Conversation:
        """The caller's thread; an id no thread could have is a 404 without a read."""
        if not fits_id(conversation_id):
            raise NotFound("No such conversation.")
        conversation = self._conversations.get(user_id, project_id, conversation_id)
        if conversation is None:
            raise NotFound("No such conversation.")
        return conversation

    def _checked_title(self, title: str) -> str:
        cleaned = plain_text(title)
        if not shows_something(cleaned) or len(cleaned) > self._settings.title_max_chars:
            raise Invalid(
                f"A title is 1 to {self._settings.title_max_chars} characters, at least one "
                "of them visible.",
                [
                    {
                        "field": "title",
                        "message": f"1 to {self._settings.title_max_chars} characters",
                    }
                ],
            )
        return cleaned
