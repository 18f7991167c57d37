"""An imported document's threads and presets, checked whole (every problem noted with
where it is in the document) and given ids derived from the import and their place, so
the same document always makes the same items. Also the plain threads format
(``format: threads``): a list of threads from elsewhere.

Message ids are ULIDs whose time is the message's own ``createdAt`` (never going back
within a thread), so imported threads keep their order and sort before any later turn. A
version 2 export's presets are checked as a preset made here is, and each thread keeps
its preset copy and settings: it runs as it did, whether or not its ``presetId`` names a
preset here."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Literal

from pydantic import BaseModel

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
from recall.domain.import_rules import (
    ImportLimits,
    Problems,
    derived_id,
    digest,
    found,
    ms_of,
    stamp_of,
)
from recall.domain.memory import shows_something
from recall.domain.messages import Message
from recall.domain.numbers import NUMBER_RANGE, unstorable_numbers
from recall.domain.presets import (
    ContextPrompt,
    Preset,
    PresetCopy,
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


# Checking, then ids


class CheckedThread(BaseModel):
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


def checked_presets(
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


def with_preset_ids(
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


def export_threads(
    document: ExportDocument, limits: ImportLimits, now: datetime, problems: Problems
) -> list[CheckedThread]:
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
                CheckedThread(
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


def plain_threads(
    document: ThreadsDocument, limits: ImportLimits, now: datetime, problems: Problems
) -> list[CheckedThread]:
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
                CheckedThread(
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


def with_ids(
    import_id: str,
    index: int,
    thread: CheckedThread,
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
