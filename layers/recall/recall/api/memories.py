"""Request and response bodies of the memory routes (camelCase on the wire), mapped
explicitly from the domain's entries and history records.

``category`` arrives as text and is checked by the domain, so a wrong one answers 422
with a message that lists the allowed values, the same check a model's tool call meets.
"""

from __future__ import annotations

from aws_lambda_powertools.event_handler.openapi.params import Path
from pydantic import AwareDatetime, Field

from recall.api.models import Body, View
from recall.domain.memory import (
    Action,
    Category,
    HistoryRecord,
    MemoryEntry,
    Scope,
    Source,
)

# What ``check_key`` accepts, as a JSON Schema pattern: documented only, so the domain's
# check stays the one that answers (422, with its message).
MEMORY_KEY = Path(
    description="1 to 64 of a-z 0-9 _ - and ., not only dots.",
    json_schema_extra={"pattern": r"^[a-z0-9_.-]*[a-z0-9_-][a-z0-9_.-]*$", "maxLength": 64},
)


class PutMemoryRequest(Body):
    value: str = Field(
        min_length=1,
        max_length=10_000,
        description="Plain text; at most the service's memory_value_max_chars (500) once "
        "line breaks and runs of spaces are folded.",
    )
    category: str = Field(
        description="One of: " + ", ".join(Category) + ".",
        json_schema_extra={"enum": list(Category)},
    )
    scope: Scope | None = Field(
        default=None, description="Defaults to thread when conversationId is given."
    )
    conversation_id: str | None = Field(
        default=None, description="The caller's thread, for a thread entry."
    )
    expires_at: AwareDatetime | None = Field(
        default=None, description="After this time the entry is never read again."
    )


class MemoryView(View):
    key: str
    value: str
    category: Category
    scope: Scope
    conversation_id: str | None
    source: Source
    confidence: float
    created_at: str
    updated_at: str
    expires_at: str | None

    @classmethod
    def of(cls, entry: MemoryEntry) -> MemoryView:
        return cls.model_validate(entry, from_attributes=True)


class MemoryList(View):
    memories: list[MemoryView]


class HistoryRecordView(View):
    action: Action
    old_value: str | None
    new_value: str | None
    category: Category | None
    source: Source | None = Field(description="None for an expiry.")
    reason: str | None = Field(
        default=None, description="Why a background job changed (or kept) the entry."
    )
    at: str

    @classmethod
    def of(cls, record: HistoryRecord) -> HistoryRecordView:
        return cls.model_validate(record, from_attributes=True)


class MemoryHistory(View):
    key: str
    scope: Scope
    conversation_id: str | None
    history: list[HistoryRecordView]
    # Earlier changes, when there are more: pass it back as ``cursor``.
    next_cursor: str | None = None

    @classmethod
    def of(
        cls,
        key: str,
        conversation_id: str | None,
        records: list[HistoryRecord],
        next_cursor: str | None = None,
    ) -> MemoryHistory:
        return cls(
            key=key,
            scope=Scope.THREAD if conversation_id else Scope.PERSISTENT,
            conversation_id=conversation_id or None,
            history=[HistoryRecordView.of(record) for record in records],
            next_cursor=next_cursor,
        )
