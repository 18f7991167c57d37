"""The large export: JSON Lines, for what one response cannot carry (``EXPORT_MAX_BYTES``).

The first line is a header; then one line per conversation (without its messages), one per
message (naming its conversation) right after it, one per memory entry (with its history)
and, in an owner's export, one for the project. Each line says what it is in ``type``, so
a reader takes them one at a time and never needs the whole export in memory. The same
parts, put together, are the one-document export (``document``), whose models live here
too: it is also what an import reads back (``recall.domain.imports``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from recall.domain.memory import Action, Category, Scope, Source
from recall.domain.messages import MessageRole, MessageStatus
from recall.domain.prompt import ToolCall, ToolResult, Usage

EXPORT_FORMAT: Literal["recall.export"] = "recall.export"
EXPORT_VERSION: Literal[1] = 1


class Wire(BaseModel):
    """camelCase on the wire, unknown fields refused (a typo is an error, not a loss)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


# The export document (also the import's first format)


class ExportedMessage(Wire):
    id: str = Field(max_length=64)
    role: MessageRole
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_results: list[ToolResult] = Field(default_factory=list)
    model: str | None = None
    status: MessageStatus = "complete"
    error: str | None = None
    usage: Usage | None = None
    created_at: str


class ExportedConversation(Wire):
    id: str = Field(max_length=64)
    title: str
    model: str | None = None
    archived: bool = False
    message_count: int = 0
    created_at: str
    updated_at: str
    messages: list[ExportedMessage] = Field(default_factory=list)


class ExportedHistory(Wire):
    action: Action
    old_value: str | None = None
    new_value: str | None = None
    category: Category | None = None
    source: Source | None = None
    reason: str | None = None
    at: str


class ExportedMemory(Wire):
    key: str
    value: str
    category: Category
    scope: Scope = Scope.PERSISTENT
    conversation_id: str | None = None
    source: Source = Source.EXPLICIT
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    expires_at: str | None = None
    created_at: str = ""
    updated_at: str = ""
    history: list[ExportedHistory] = Field(default_factory=list)


class ExportedMember(Wire):
    user_id: str
    role: str


class ExportedProject(Wire):
    name: str
    context: dict[str, Any]
    members: list[ExportedMember]


class ExportDocument(Wire):
    """Everything one user holds in one project; ``project`` only in an owner's export."""

    format: Literal["recall.export"] = EXPORT_FORMAT
    version: Literal[1] = EXPORT_VERSION
    exported_at: str
    project_id: str
    user_id: str
    conversations: list[ExportedConversation]
    memories: list[ExportedMemory]
    project: ExportedProject | None = None


EXPORT_LINES_FORMAT: Literal["recall.export.jsonl"] = "recall.export.jsonl"


class ExportHeader(Wire):
    """The first line of a large export."""

    format: Literal["recall.export.jsonl"] = EXPORT_LINES_FORMAT
    version: Literal[1] = EXPORT_VERSION
    exported_at: str
    project_id: str
    user_id: str

    def line(self) -> bytes:
        return _line(self.model_dump(mode="json", by_alias=True))


class ExportLink(Wire):
    """The answer for a large export: where to fetch its JSON Lines, and until when."""

    format: Literal["recall.export.jsonl"] = EXPORT_LINES_FORMAT
    version: Literal[1] = EXPORT_VERSION
    url: str = Field(description="A pre-signed GET URL of the JSON Lines.")
    expires_at: str = Field(description="When the URL stops working (it may stop sooner).")
    size: int = Field(alias="bytes", description="The JSON Lines' size in bytes.")


ExportedPart = ExportedConversation | ExportedMessage | ExportedMemory | ExportedProject


@dataclass(frozen=True)
class ExportRecord:
    """One line's worth of an export; a message knows its conversation."""

    kind: Literal["conversation", "message", "memory", "project"]
    part: ExportedPart
    conversation_id: str | None = None

    def line(self) -> bytes:
        fields = self.part.model_dump(mode="json", by_alias=True, exclude={"messages"})
        named = {"conversationId": self.conversation_id} if self.kind == "message" else {}
        return _line({"type": self.kind, **named, **fields})


def _line(fields: dict[str, object]) -> bytes:
    return json.dumps(fields, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def document(header: ExportHeader, records: Iterable[ExportRecord]) -> ExportDocument:
    """The one-document export of the same records."""
    conversations: dict[str, ExportedConversation] = {}
    messages: dict[str, list[ExportedMessage]] = {}
    memories: list[ExportedMemory] = []
    project: ExportedProject | None = None
    for record in records:
        part = record.part
        if isinstance(part, ExportedConversation):
            conversations[part.id] = part
        elif isinstance(part, ExportedMessage):
            messages.setdefault(record.conversation_id or "", []).append(part)
        elif isinstance(part, ExportedMemory):
            memories.append(part)
        else:
            project = part
    return ExportDocument(
        exported_at=header.exported_at,
        project_id=header.project_id,
        user_id=header.user_id,
        conversations=[
            conversation.model_copy(update={"messages": messages.get(conversation.id, [])})
            for conversation in conversations.values()
        ],
        memories=memories,
        project=project,
    )
