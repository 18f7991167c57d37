"""The large export: JSON Lines, for what one response cannot carry (``EXPORT_MAX_BYTES``).

The first line is a header; then one line per conversation (without its messages), one per
message (naming its conversation) right after it, one per memory entry (with its history)
and, in an owner's export, one for the project. Each line says what it is in ``type``, so
a reader takes them one at a time and never needs the whole export in memory. Version 2
added the project's presets (one line each) and each conversation's preset copy and own
settings; a version 1 document has none of them, and still imports. The same
parts, put together, are the one-document export (``document``), whose models live here
too: it is also what an import reads back (``recall.domain.imports``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
import json
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    model_validator,
)
from pydantic.alias_generators import to_camel

from recall.domain.memory import Action, Category, Scope, Source
from recall.domain.messages import MessageRole, MessageStatus
from recall.domain.numbers import FRACTION_RANGE, storable_number
from recall.domain.presets import ContextPrompt, Preset, PresetCopy, ThreadSettings

EXPORT_FORMAT: Literal["recall.export"] = "recall.export"
EXPORT_VERSION: Literal[2] = 2
# What an import reads: every version an export was ever written in.
ExportVersion = Literal[1, 2]


class Wire(BaseModel):
    """camelCase on the wire, unknown fields refused (a typo is an error, not a loss)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


# The export document (also the import's first format)


# A message's parts are camelCase as the chat reply and GET conversation give them
# (``toolCallId``, ``inputTokens``); the snake_case names exports wrote before are read too,
# so a document exported then still imports with its usage and tool results.


class ExportedToolCall(Wire):
    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)


class ExportedToolResult(Wire):
    tool_call_id: str
    content: str
    is_error: bool = False


class ExportedUsage(Wire):
    """A reply's token counts: none is below zero (an import refuses one, naming it)."""

    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cache_read_input_tokens: int = Field(default=0, ge=0)
    cache_write_input_tokens: int = Field(default=0, ge=0)


class ExportedMessage(Wire):
    id: str = Field(max_length=64)
    role: MessageRole
    content: str = ""
    tool_calls: list[ExportedToolCall] = Field(default_factory=list)
    tool_results: list[ExportedToolResult] = Field(default_factory=list)
    model: str | None = None
    status: MessageStatus = "complete"
    error: str | None = None
    usage: ExportedUsage | None = None
    created_at: str


class ExportedPrompt(Wire):
    role: Literal["user", "assistant"]
    content: str

    @classmethod
    def of(cls, prompt: ContextPrompt) -> ExportedPrompt:
        return cls(role=prompt.role, content=prompt.content)


class ExportedSettings(Wire):
    """One layer's settings; a setting left out follows the layer under it."""

    model: str | None = None
    temperature: StrictFloat | None = None
    max_tokens: StrictInt | None = None
    window_messages: StrictInt | None = None
    use_summary: StrictBool | None = None
    send_memory: StrictBool | None = None

    @classmethod
    def of(cls, settings: ThreadSettings) -> ExportedSettings:
        return cls(**settings.model_dump())

    def settings(self) -> ThreadSettings:
        return ThreadSettings(**self.model_dump())


class ExportedPresetCopy(Wire):
    """What a thread kept of the preset it started from (``presetId`` names a preset of
    the exported project: it may name nothing where the thread is imported)."""

    preset_id: str = Field(max_length=64)
    name: str
    context_prompts: list[ExportedPrompt] = Field(default_factory=list)
    settings: ExportedSettings = Field(default_factory=ExportedSettings)

    @classmethod
    def of(cls, copy: PresetCopy) -> ExportedPresetCopy:
        return cls(
            preset_id=copy.preset_id,
            name=copy.name,
            context_prompts=[ExportedPrompt.of(prompt) for prompt in copy.context_prompts],
            settings=ExportedSettings.of(copy.settings),
        )


class ExportedPreset(Wire):
    """One of the project's presets."""

    id: str = Field(max_length=64)
    name: str
    context_prompts: list[ExportedPrompt] = Field(default_factory=list)
    settings: ExportedSettings = Field(default_factory=ExportedSettings)
    created_at: str
    updated_at: str

    @classmethod
    def of(cls, preset: Preset) -> ExportedPreset:
        return cls(
            id=preset.preset_id,
            name=preset.name,
            context_prompts=[ExportedPrompt.of(prompt) for prompt in preset.context_prompts],
            settings=ExportedSettings.of(preset.settings),
            created_at=preset.created_at,
            updated_at=preset.updated_at,
        )


class ExportedConversation(Wire):
    id: str = Field(max_length=64)
    title: str
    model: str | None = None
    archived: bool = False
    message_count: int = 0
    created_at: str
    updated_at: str
    # Since version 2: the preset copy it runs with and its own overrides (None: follows).
    preset: ExportedPresetCopy | None = None
    settings: ExportedSettings | None = None
    # The clear-context marker: the model sees only the messages after it (their ids sort
    # after it). Present only on a thread that was cleared, so an export of threads never
    # cleared reads as it did before the field; an import places it after the same message.
    cleared_after: str | None = Field(
        default=None, max_length=64, exclude_if=lambda marker: marker is None
    )
    messages: list[ExportedMessage] = Field(default_factory=list)


class ExportedHistory(Wire):
    action: Action
    old_value: str | None = None
    new_value: str | None = None
    category: Category | None = None
    source: Source | None = None
    reason: str | None = None
    at: str


def _storable(value: float) -> float:
    if not storable_number(value):
        raise ValueError(FRACTION_RANGE)
    return value


class ExportedMemory(Wire):
    key: str
    value: str
    category: Category
    scope: Scope = Scope.PERSISTENT
    conversation_id: str | None = None
    source: Source = Source.EXPLICIT
    confidence: Annotated[float, AfterValidator(_storable)] = Field(default=1.0, ge=0.0, le=1.0)
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
    """Everything one user holds in one project, with the project's presets (any reader
    may read them); ``project`` only in an owner's export."""

    format: Literal["recall.export"] = EXPORT_FORMAT
    version: ExportVersion = EXPORT_VERSION
    exported_at: str
    project_id: str
    user_id: str
    conversations: list[ExportedConversation]
    memories: list[ExportedMemory]
    presets: list[ExportedPreset] = Field(default_factory=list)
    project: ExportedProject | None = None

    @model_validator(mode="after")
    def _fields_of_its_version(self) -> ExportDocument:
        """Presets and thread settings came with version 2: a version 1 document that
        carries them says it is something it is not."""
        if self.version == 1 and (
            self.presets
            or any(c.preset is not None or c.settings is not None for c in self.conversations)
        ):
            raise ValueError("presets and conversation presets or settings need version 2")
        return self


EXPORT_LINES_FORMAT: Literal["recall.export.jsonl"] = "recall.export.jsonl"


class ExportHeader(Wire):
    """The first line of a large export."""

    format: Literal["recall.export.jsonl"] = EXPORT_LINES_FORMAT
    version: Literal[2] = EXPORT_VERSION
    exported_at: str
    project_id: str
    user_id: str

    def line(self) -> bytes:
        return _line(self.model_dump(mode="json", by_alias=True))


class ExportLink(Wire):
    """The answer for a large export: where to fetch its JSON Lines, and until when."""

    format: Literal["recall.export.jsonl"] = EXPORT_LINES_FORMAT
    version: Literal[2] = EXPORT_VERSION
    url: str = Field(description="A pre-signed GET URL of the JSON Lines.")
    expires_at: str = Field(description="When the URL stops working (it may stop sooner).")
    size: int = Field(alias="bytes", description="The JSON Lines' size in bytes.")


ExportedPart = (
    ExportedConversation | ExportedMessage | ExportedMemory | ExportedPreset | ExportedProject
)


@dataclass(frozen=True)
class ExportRecord:
    """One line's worth of an export; a message knows its conversation."""

    kind: Literal["conversation", "message", "memory", "preset", "project"]
    part: ExportedPart
    conversation_id: str | None = None

    def line(self) -> bytes:
        fields = self.part.model_dump(mode="json", by_alias=True, exclude={"messages"})
        named = {"conversationId": self.conversation_id} if self.kind == "message" else {}
        return _line({"type": self.kind, **named, **fields})


def _line(fields: dict[str, object]) -> bytes:
    return answer_text(fields).encode() + b"\n"


def answer_text(value: object, encoder: type[json.JSONEncoder] = json.JSONEncoder) -> str:
    """JSON as the export answers it and writes its lines: UTF-8, never ``\\u`` escapes
    (an emoji is 4 bytes, not the 12 of ``\\ud83d\\ude00``), so what ``answer_size``
    counts is what is sent. ``encoder`` writes what plain JSON cannot (the API's own)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), cls=encoder)


def answer_size(text: bytes) -> int:
    """The bytes ``text`` adds to the export's answer as Lambda hands it to API Gateway:
    the body is a string in Lambda's JSON reply (UTF-8 on the python3.12+ runtimes), where
    each quote and backslash takes one byte more. Never less than the body's own bytes, so
    a total within EXPORT_MAX_BYTES keeps both the body as sent and Lambda's 6 MB reply
    within it. A line counts at least what its part adds to the one document (its ``type``
    and ``conversationId`` outweigh the document's commas and ``messages``)."""
    return len(text) + text.count(b'"') + text.count(b"\\")


def document_frame(header: ExportHeader) -> bytes:
    """The one document with no parts: what it answers besides its parts' lines."""
    empty = ExportDocument(
        exported_at=header.exported_at,
        project_id=header.project_id,
        user_id=header.user_id,
        conversations=[],
        memories=[],
    )
    return answer_text(empty.model_dump(mode="json", by_alias=True)).encode()


def document(header: ExportHeader, records: Iterable[ExportRecord]) -> ExportDocument:
    """The one-document export of the same records."""
    conversations: dict[str, ExportedConversation] = {}
    messages: dict[str, list[ExportedMessage]] = {}
    memories: list[ExportedMemory] = []
    presets: list[ExportedPreset] = []
    project: ExportedProject | None = None
    for record in records:
        part = record.part
        if isinstance(part, ExportedConversation):
            conversations[part.id] = part
        elif isinstance(part, ExportedMessage):
            messages.setdefault(record.conversation_id or "", []).append(part)
        elif isinstance(part, ExportedMemory):
            memories.append(part)
        elif isinstance(part, ExportedPreset):
            presets.append(part)
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
        presets=presets,
        project=project,
    )
