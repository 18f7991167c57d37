"""The caller's durable memory: listing, explicit writes and deletes over HTTP and from the
model's tool calls, background writes from extraction and consolidation, and history."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from recall.domain import clock
from recall.domain.access import Role
from recall.domain.memory import (
    HistoryRecord,
    MemoryEntry,
    Scope,
    Source,
    check_key,
    check_value,
    expiry_too_far,
    parse_category,
    parse_scope,
)
from recall.domain.turn_memory import TurnMemory
from recall.errors import Conflict, Invalid, NotFound
from recall.observability import metrics
from recall.services.access import ProjectAccess
from recall.settings import Settings
from recall.store.conversations import ConversationStore
from recall.store.keys import fits_id
from recall.store.memories import HeldMemory, MemoryStore


class MemoryService:
    def __init__(
        self,
        settings: Settings,
        access: ProjectAccess,
        conversations: ConversationStore,
        memories: MemoryStore,
    ) -> None:
        self._settings = settings
        self._access = access
        self._conversations = conversations
        self._memories = memories

    def put(
        self,
        user_id: str,
        project_id: str,
        key: str,
        value: str,
        category: str,
        scope: Scope | None,
        conversation_id: str | None,
        expires_at: datetime | None,
    ) -> tuple[MemoryEntry, bool]:
        """An explicit upsert: ``(entry, created)``."""
        self._access.require(user_id, project_id, Role.EDITOR)
        now = clock.now()
        thread = conversation_id or None
        scope = scope or (Scope.THREAD if thread else Scope.PERSISTENT)
        if scope == Scope.PERSISTENT and thread:
            raise Invalid(
                "conversationId is only for thread entries: leave it out or set scope to thread.",
                [{"field": "conversationId", "message": "only with scope thread"}],
            )
        if expires_at is not None and expires_at <= now:
            raise Invalid(
                "expiresAt is in the past.", [{"field": "expiresAt", "message": "in the past"}]
            )
        max_days = self._settings.memory_expiry_max_days
        too_far = expiry_too_far(expires_at, now, max_days) if expires_at is not None else None
        if too_far is not None:
            raise Invalid(f"expiresAt is {too_far}.", [{"field": "expiresAt", "message": too_far}])
        entry = self._explicit(key, value, category, scope, thread, expires_at)
        self._own_thread(user_id, project_id, entry.conversation_id)
        guard = self._access.still(user_id, project_id, Role.EDITOR)
        live = self._live(user_id, project_id, entry.conversation_id)
        saved = self._memories.write(user_id, project_id, entry, now, guard=guard, thread=live)
        if saved is None:  # the store drops background writes only
            raise Conflict("The memory entry was not saved; try again.")
        metrics.add_metric(name="MemoriesSaved", unit=MetricUnit.Count, value=1)
        return saved

    def delete(self, user_id: str, project_id: str, key: str, conversation_id: str | None) -> None:
        self._access.require(user_id, project_id, Role.EDITOR)
        check_key(key)
        thread = self._own_thread(user_id, project_id, conversation_id)
        guard = self._access.still(user_id, project_id, Role.EDITOR)
        live = self._live(user_id, project_id, thread)
        if not self._memories.delete(
            user_id, project_id, key, thread, Source.EXPLICIT, clock.now(), guard, live
        ):
            raise NotFound("No such memory entry.")
        metrics.add_metric(name="MemoriesDeleted", unit=MetricUnit.Count, value=1)

    def history(
        self,
        user_id: str,
        project_id: str,
        key: str,
        conversation_id: str | None,
        limit: int,
        cursor: str | None = None,
    ) -> tuple[list[HistoryRecord], str | None]:
        """The entry's latest changes, oldest first, and a cursor to earlier ones: a page,
        since every change adds one and a whole history can outgrow a response. It
        outlives a deleted entry."""
        self._access.require(user_id, project_id, Role.VIEWER)
        check_key(key)
        thread = self._own_thread(user_id, project_id, conversation_id)
        records, next_cursor = self._memories.history_page(
            user_id, project_id, key, thread, limit, cursor
        )
        if not records and cursor is None:
            raise NotFound("No such memory entry.")
        return records, next_cursor

    # Called by the chat turn, which has authorised the caller as an editor and loaded
    # the (caller's own) conversation already.

    def tool_entry(
        self, conversation_id: str, key: str, value: str, category: str, scope: str
    ) -> MemoryEntry:
        """A ``save_preference`` call's entry, checked; a thread entry belongs to
        ``conversation_id``. The turn saves it with its messages."""
        parsed = parse_scope(scope)
        thread = conversation_id if parsed == Scope.THREAD else None
        return self._explicit(key, value, category, parsed, thread, None)

    def tool_place(self, conversation_id: str, key: str, scope: str) -> tuple[str, str | None]:
        """A ``forget_preference`` call's entry: its key, and its thread or ``None``."""
        thread = conversation_id if parse_scope(scope) == Scope.THREAD else None
        return check_key(key), thread

    def turn_memory(self, held: HeldMemory) -> TurnMemory:
        settings = self._settings
        return TurnMemory(
            held.persistent,
            held.thread,
            settings.memory_cap,
            settings.thread_memory_cap,
            settings.turn_memory_changes_max,
        )

    # ``list`` is defined after every method annotated with ``list[...]``, which it would
    # otherwise shadow inside this class.

    def list(
        self,
        user_id: str,
        project_id: str,
        category: str | None,
        conversation_id: str | None,
    ) -> list[MemoryEntry]:
        """Active persistent entries, then the thread's when one is named; listing order."""
        self._access.require(user_id, project_id, Role.VIEWER)
        wanted = parse_category(category) if category is not None else None
        thread = self._own_thread(user_id, project_id, conversation_id)
        persistent, thread_entries = self._memories.active(user_id, project_id, thread, clock.now())
        return [e for e in persistent + thread_entries if wanted is None or e.category == wanted]

    def _explicit(
        self,
        key: str,
        value: str,
        category: str,
        scope: Scope,
        conversation_id: str | None,
        expires_at: datetime | None,
    ) -> MemoryEntry:
        if scope == Scope.THREAD and not conversation_id:
            raise Invalid(
                "A thread entry needs the conversationId of its thread.",
                [{"field": "conversationId", "message": "required with scope thread"}],
            )
        return MemoryEntry(
            key=check_key(key),
            value=check_value(value, self._settings.memory_value_max_chars),
            category=parse_category(category),
            scope=scope,
            conversation_id=conversation_id if scope == Scope.THREAD else None,
            source=Source.EXPLICIT,
            expires_at=clock.stamp(expires_at) if expires_at else None,
        )

    def _live(
        self, user_id: str, project_id: str, conversation_id: str | None
    ) -> dict[str, Any] | None:
        """For a thread entry's change, the check that its thread is still live as it lands,
        since the thread's delete may sweep its entries between ``_own_thread`` and the
        write."""
        if not conversation_id:
            return None
        return self._conversations.live_check(user_id, project_id, conversation_id)

    def _own_thread(self, user_id: str, project_id: str, conversation_id: str | None) -> str | None:
        """The conversation id if it names one of the caller's threads (an empty one names
        none); anyone else's thread, or none at all, is a 404."""
        if not conversation_id:
            return None
        if (
            not fits_id(conversation_id)
            or self._conversations.get(user_id, project_id, conversation_id) is None
        ):
            raise NotFound("No such conversation.")
        return conversation_id
