"""Export and import (backfill) of what a user holds in a project, as documents.

Two documents come in: Recall's own export (``format: recall.export``, version 1 or 2) and
a plain list of threads from elsewhere (``format: threads``). Both are checked whole before
anything is written, with errors that name the thread and message index, then cut into
chunks the worker writes one at a time.

Every id an import creates is derived from the import, itself derived from the caller,
the project and the document's content, so a document sent twice, or a chunk delivered
twice, writes the same items again and creates nothing twice. Message ids are ULIDs whose
time is the message's own ``createdAt`` (never going back within a thread), so imported
threads keep their order and sort before any later turn.

A version 2 export brings the project's presets too (written before any thread, each only
where the project has no preset of its name and room for one more) and each thread's
preset copy and settings: the thread runs as it did, whether or not its ``presetId`` names
a preset here.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from enum import StrEnum
import hashlib
import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from recall.domain.clock import parse
from recall.domain.conversations import DEFAULT_TITLE, Conversation
from recall.domain.exports import (
    ExportDocument,
    ExportedConversation,
    ExportedMessage,
    ExportedPrompt,
    ExportedSettings,
    Wire,
)
from recall.domain.ids import encode
from recall.domain.import_chunks import Chunk, cut_into_chunks
from recall.domain.import_rules import (
    Problems,
    derived_id,
    digest,
    found,
    ms_of,
    stamp_of,
)
from recall.domain.memory import (
    shows_something,
)
from recall.domain.memory_imports import checked_memories
from recall.domain.messages import Message
from recall.domain.numbers import NUMBER_RANGE, unstorable_numbers
from recall.domain.presets import (
    ContextPrompt,
    Preset,
    PresetCopy,
    PresetLimits,
    SettingLimits,
    ThreadSettings,
    checked_preset_name,
    checked_prompts,
    checked_settings,
)
from recall.errors import Invalid

# The plain threads format


class PlainMessage(Wire):
    role: Literal["user", "assistant"]
    content: str
    created_at: str


class PlainThread(Wire):
    title: str | None = None
    messages: list[PlainMessage]


class ThreadsDocument(Wire):
    format: Literal["threads"]
    threads: list[PlainThread]


ImportDocument = Annotated[ExportDocument | ThreadsDocument, Field(discriminator="format")]
_DOCUMENT: TypeAdapter[ExportDocument | ThreadsDocument] = TypeAdapter(ImportDocument)


class ImportLimits(BaseModel):
    """The bounds an import is held to (values from ``Settings``)."""

    threads_max: int
    messages_per_thread_max: int
    message_max_chars: int
    message_max_bytes: int
    title_max_chars: int
    memory_value_max_chars: int
    memory_expiry_max_days: int
    chunk_max_bytes: int
    presets_max: int
    preset: PresetLimits
    settings: SettingLimits


class ImportStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class ImportProgress(BaseModel):
    import_id: str
    user_id: str
    project_id: str
    status: ImportStatus = ImportStatus.QUEUED
    chunks_total: int
    chunks_done: int = 0
    # The numbers of the chunks counted so far: a chunk delivered again is not rerun.
    counted: frozenset[int] = frozenset()
    threads_total: int
    threads_done: int = 0
    messages_done: int = 0
    memories_done: int = 0
    presets_done: int = 0
    errors: list[str] = Field(default_factory=list)
    created_at: str
    updated_at: str

    def next_chunk(self) -> int:
        """The chunk to run next: chunks run in order, so the first not counted."""
        return min(set(range(self.chunks_total)) - self.counted, default=self.chunks_total)

    def stalled(self, now: datetime, stall_seconds: int) -> bool:
        """Not finished and unmoved for ``stall_seconds``: its chunk's job ran out of
        retries (a chunk counted, or the import taken up, moves ``updated_at``)."""
        if self.status not in (ImportStatus.QUEUED, ImportStatus.RUNNING):
            return False
        return now - parse(self.updated_at) >= timedelta(seconds=stall_seconds)


# Parsing and checking


def _where(location: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in location)


def parse_document(body: Any) -> ExportDocument | ThreadsDocument:
    """The document, or Invalid naming each offending field by its path
    (``threads.3.messages.7.createdAt``: thread 3, message 7)."""
    try:
        return _DOCUMENT.validate_python(body)
    except ValidationError as exc:
        details = [
            {
                "field": _where(tuple(error["loc"])),
                "message": str(error["msg"]),
                "type": str(error["type"]),
            }
            for error in exc.errors()[:20]
        ]
        raise Invalid("The import document is not valid.", details) from exc


def document_hash(document: ExportDocument | ThreadsDocument) -> str:
    """The content's hash, whatever the spacing or key order it was sent with."""
    canonical = json.dumps(document.model_dump(mode="json"), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def import_id_of(user_id: str, project_id: str, content_hash: str) -> str:
    """One id per caller, project and document: sending it again finds the same import."""
    return encode(digest("import", user_id, project_id, content_hash), 26)


class _Thread(BaseModel):
    """A thread as checked: its title, stamps and messages, not yet given ids."""

    source_id: str | None
    title: str
    model: str | None
    archived: bool
    created_at: str
    updated_at: str
    messages: list[Message]
    preset: PresetCopy | None = None
    settings: ThreadSettings | None = None
    # The place of the last message before the thread's clear-context marker, if cleared.
    cleared_at: int | None = None


def _prompts(
    sent: list[ExportedPrompt], where: str, limits: ImportLimits, problems: Problems
) -> list[ContextPrompt]:
    prompts = [ContextPrompt(role=prompt.role, content=prompt.content) for prompt in sent]
    try:
        return checked_prompts(prompts, limits.preset)
    except Invalid as exc:
        found(problems, where, exc)
        return []


def _name(name: str, where: str, limits: ImportLimits, problems: Problems) -> str:
    try:
        return checked_preset_name(name, limits.preset.name_max_chars)
    except Invalid as exc:
        found(problems, where, exc)
        return name


def _settings(
    sent: ExportedSettings, where: str, limits: ImportLimits, problems: Problems
) -> ThreadSettings:
    """Settings held to this deployment's bounds (a model it does not allow is refused)."""
    try:
        return checked_settings(sent.settings(), limits.settings, where)
    except Invalid as exc:
        found(problems, "", exc)
        return ThreadSettings()


def _checked_presets(
    document: ExportDocument, limits: ImportLimits, now: datetime, problems: Problems
) -> list[tuple[str, Preset]]:
    """The document's presets, checked as a preset made here is, each with its exported
    id (given its new one by ``plan_import``)."""
    if len(document.presets) > limits.presets_max:
        problems.add("presets", f"at most {limits.presets_max} presets")
        return []
    presets = []
    for index, sent in enumerate(document.presets):
        where = f"presets.{index}"
        created = stamp_of(sent.created_at, f"{where}.createdAt", now, problems)
        updated = stamp_of(sent.updated_at, f"{where}.updatedAt", now, problems)
        if not (created and updated):
            continue
        preset = Preset(
            project_id="",
            preset_id="",
            name=_name(sent.name, where, limits, problems),
            context_prompts=_prompts(sent.context_prompts, where, limits, problems),
            settings=_settings(sent.settings, f"{where}.settings", limits, problems),
            created_by="",
            created_at=created,
            updated_at=updated,
        )
        presets.append((sent.id, preset))
    return presets


def _with_preset_ids(
    import_id: str, presets: list[tuple[str, Preset]], user_id: str, project_id: str
) -> list[Preset]:
    """The presets under ids derived from the import and their place, made by the importer
    in the target project."""
    return [
        preset.model_copy(
            update={
                "project_id": project_id,
                "preset_id": derived_id(ms_of(preset.created_at), import_id, "preset", str(index)),
                "created_by": user_id,
            }
        )
        for index, (_, preset) in enumerate(presets)
    ]


def _checked_messages(
    where: str,
    messages: Sequence[ExportedMessage | PlainMessage],
    limits: ImportLimits,
    now: datetime,
    problems: Problems,
) -> list[Message]:
    if len(messages) > limits.messages_per_thread_max:
        problems.add(f"{where}.messages", f"at most {limits.messages_per_thread_max} messages")
        return []
    checked: list[Message] = []
    for number, sent in enumerate(messages):
        field = f"{where}.messages.{number}"
        at = stamp_of(sent.created_at, f"{field}.createdAt", now, problems)
        if sent.role == "user" and len(sent.content) > limits.message_max_chars:
            problems.add(f"{field}.content", f"at most {limits.message_max_chars} characters")
        if _needs_text(sent) and not shows_something(sent.content):
            problems.add(f"{field}.content", "some text: it must not be blank")
        if isinstance(sent, ExportedMessage):
            for place in _unstorable_numbers(sent, field):
                problems.add(place, NUMBER_RANGE)
        if at is None:
            continue
        values = (
            sent.model_dump(exclude={"id", "created_at"})
            if isinstance(sent, ExportedMessage)
            else {"role": sent.role, "content": sent.content}
        )
        message = Message(message_id="", created_at=at, **values)
        if len(message.model_dump_json()) > limits.message_max_bytes:
            problems.add(field, f"at most {limits.message_max_bytes} bytes as JSON")
            continue
        checked.append(message)
    return checked


def _unstorable_numbers(sent: ExportedMessage, field: str) -> Iterator[str]:
    """Numbers DynamoDB cannot hold in a message's tool inputs or usage, by the fields the
    document names them with: refused here, not rounded or failed by the chunk's write."""
    for index, call in enumerate(sent.tool_calls):
        yield from unstorable_numbers(call.input, f"{field}.toolCalls.{index}.input")
    if sent.usage is not None:
        yield from unstorable_numbers(sent.usage.model_dump(by_alias=True), f"{field}.usage")


def _needs_text(sent: ExportedMessage | PlainMessage) -> bool:
    """A user's message needs text, as chat's does, and so does any message of the plain
    format (text is all it has). A Recall export's own replies may be blank (a turn that
    ended in tool calls, or failed): they import as they were, and no blank text is ever
    sent to a model (the providers leave it out)."""
    return isinstance(sent, PlainMessage) or sent.role == "user"


def _export_threads(
    document: ExportDocument, limits: ImportLimits, now: datetime, problems: Problems
) -> list[_Thread]:
    threads = []
    for index, sent in enumerate(document.conversations):
        where = f"conversations.{index}"
        created = stamp_of(sent.created_at, f"{where}.createdAt", now, problems)
        updated = stamp_of(sent.updated_at, f"{where}.updatedAt", now, problems)
        messages = _checked_messages(where, sent.messages, limits, now, problems)
        if len(sent.title) > limits.title_max_chars:
            problems.add(f"{where}.title", f"at most {limits.title_max_chars} characters")
        preset = None
        if sent.preset is not None:
            copy = sent.preset
            preset = PresetCopy(
                preset_id=copy.preset_id,
                name=_name(copy.name, f"{where}.preset", limits, problems),
                context_prompts=_prompts(copy.context_prompts, f"{where}.preset", limits, problems),
                settings=_settings(copy.settings, f"{where}.preset.settings", limits, problems),
            )
        settings = None
        if sent.settings is not None:
            settings = _settings(sent.settings, f"{where}.settings", limits, problems)
        cleared_at = _cleared_at(sent)
        if created and updated:
            threads.append(
                _Thread(
                    source_id=sent.id,
                    title=sent.title or DEFAULT_TITLE,
                    model=sent.model,
                    archived=sent.archived,
                    created_at=created,
                    updated_at=updated,
                    messages=messages,
                    preset=preset,
                    settings=settings if settings and settings.given() else None,
                    cleared_at=cleared_at,
                )
            )
    return threads


def _cleared_at(sent: ExportedConversation) -> int | None:
    """Where the clear-context marker falls: the last message whose id is not after it
    (the window holds only those after). Ids are new on import, so the imported thread's
    marker is put after the message at the same place."""
    if sent.cleared_after is None:
        return None
    before = [n for n, message in enumerate(sent.messages) if message.id <= sent.cleared_after]
    return before[-1] if before else None


def _plain_threads(
    document: ThreadsDocument, limits: ImportLimits, now: datetime, problems: Problems
) -> list[_Thread]:
    threads = []
    for index, sent in enumerate(document.threads):
        where = f"threads.{index}"
        title = (sent.title or "").strip() or DEFAULT_TITLE
        if len(title) > limits.title_max_chars:
            problems.add(f"{where}.title", f"at most {limits.title_max_chars} characters")
        if not sent.messages:
            problems.add(f"{where}.messages", "at least one message")
            continue
        messages = _checked_messages(where, sent.messages, limits, now, problems)
        if len(messages) == len(sent.messages):
            threads.append(
                _Thread(
                    source_id=None,
                    title=title,
                    model=None,
                    archived=False,
                    created_at=messages[0].created_at,
                    updated_at=max(message.created_at for message in messages),
                    messages=messages,
                )
            )
    return threads


def _with_ids(
    import_id: str,
    index: int,
    thread: _Thread,
    user_id: str,
    project_id: str,
    preset_ids: dict[str, str],
) -> tuple[Conversation, list[Message]]:
    """The thread and its messages under ids derived from the import and their place; its
    preset copy names the imported preset it came from, if the document brought it."""
    conversation_id = derived_id(ms_of(thread.created_at), import_id, str(index))
    messages = []
    at_ms = 0
    for number, message in enumerate(thread.messages):
        at_ms = max(at_ms, ms_of(message.created_at))
        message_id = encode(at_ms, 10) + encode(
            (digest(import_id, str(index)) >> 108 << 60) | number, 16
        )
        messages.append(message.model_copy(update={"message_id": message_id}))
    conversation = Conversation(
        user_id=user_id,
        project_id=project_id,
        conversation_id=conversation_id,
        title=thread.title,
        model=thread.model or next((m.model for m in reversed(messages) if m.model), None),
        archived=thread.archived,
        message_count=len(messages),
        turn_count=sum(1 for message in messages if message.role == "user"),
        created_at=thread.created_at,
        updated_at=thread.updated_at,
        preset=thread.preset.model_copy(
            update={"preset_id": preset_ids.get(thread.preset.preset_id, thread.preset.preset_id)}
        )
        if thread.preset
        else None,
        settings=thread.settings,
        cleared_after=messages[thread.cleared_at].message_id
        if thread.cleared_at is not None
        else None,
    )
    return conversation, messages


class ImportPlan(BaseModel):
    """A checked document cut into chunks, with the numbers its progress counts to."""

    import_id: str
    chunks: list[Chunk]
    threads_total: int


def plan_import(
    user_id: str,
    project_id: str,
    document: ExportDocument | ThreadsDocument,
    limits: ImportLimits,
    now: datetime,
) -> ImportPlan:
    """Check the whole document (Invalid names every offending thread and message, up to
    20), then cut it into chunks of at most ``chunk_max_bytes`` each."""
    problems = Problems()
    count = (
        len(document.conversations)
        if isinstance(document, ExportDocument)
        else len(document.threads)
    )
    if count > limits.threads_max:
        field = "conversations" if isinstance(document, ExportDocument) else "threads"
        problems.add(field, f"at most {limits.threads_max} threads")
        problems.raise_any()
    threads = (
        _export_threads(document, limits, now, problems)
        if isinstance(document, ExportDocument)
        else _plain_threads(document, limits, now, problems)
    )
    import_id = import_id_of(user_id, project_id, document_hash(document))
    checked = (
        _checked_presets(document, limits, now, problems)
        if isinstance(document, ExportDocument)
        else []
    )
    presets = _with_preset_ids(import_id, checked, user_id, project_id)
    preset_ids = {
        source: preset.preset_id for (source, _), preset in zip(checked, presets, strict=True)
    }
    built = [
        _with_ids(import_id, index, thread, user_id, project_id, preset_ids)
        for index, thread in enumerate(threads)
    ]
    thread_ids = {
        thread.source_id: conversation.conversation_id
        for thread, (conversation, _) in zip(threads, built, strict=True)
        if thread.source_id
    }
    memories = (
        checked_memories(document, thread_ids, limits, now, problems)
        if isinstance(document, ExportDocument)
        else []
    )
    problems.raise_any()
    return ImportPlan(
        import_id=import_id,
        chunks=cut_into_chunks(presets, built, memories, limits.chunk_max_bytes),
        threads_total=len(built),
    )
