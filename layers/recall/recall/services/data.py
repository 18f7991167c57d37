"""Export and import: a user's threads and memory in a project, out as one document (or,
past what a response carries, JSON Lines behind a link) and back in (or in from another
product) through the worker, a chunk at a time. The export is here; the import is
``DataImports`` (``services/data_imports.py``), which ``DataService`` extends."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from itertools import chain

from botocore.exceptions import BotoCoreError, ClientError

from recall.domain import clock
from recall.domain.access import Role
from recall.domain.exports import (
    ExportDocument,
    ExportedConversation,
    ExportedHistory,
    ExportedMember,
    ExportedMemory,
    ExportedMessage,
    ExportedPreset,
    ExportedPresetCopy,
    ExportedProject,
    ExportedSettings,
    ExportHeader,
    ExportLink,
    ExportRecord,
    answer_size,
    document,
    document_frame,
)
from recall.domain.ids import new_id
from recall.domain.memory import is_active
from recall.errors import Forbidden, TooLarge, Unavailable
from recall.observability import logger
from recall.services.access import ProjectAccess
from recall.services.data_imports import DataImports
from recall.settings import Settings
from recall.store.conversations import ConversationStore
from recall.store.exports import ExportStore
from recall.store.imports import ImportStore
from recall.store.jobs import JobQueue
from recall.store.memories import MemoryStore
from recall.store.messages import MessageStore
from recall.store.presets import PresetStore
from recall.store.projects import ProjectStore


class DataService(DataImports):
    def __init__(
        self,
        settings: Settings,
        access: ProjectAccess,
        projects: ProjectStore,
        conversations: ConversationStore,
        messages: MessageStore,
        memories: MemoryStore,
        imports: ImportStore,
        queue: JobQueue,
        exports: ExportStore,
        presets: PresetStore,
    ) -> None:
        self._settings = settings
        self._access = access
        self._projects = projects
        self._conversations = conversations
        self._messages = messages
        self._memories = memories
        self._imports = imports
        self._queue = queue
        self._exports = exports
        self._presets = presets

    def export(
        self, user_id: str, project_id: str, now: datetime | None = None
    ) -> ExportDocument | ExportLink:
        """Everything the caller holds in the project and the project's presets; an owner
        also gets its settings and members. Up to EXPORT_MAX_BYTES (as the answer is sent,
        ``answer_size``) it is one document;
        past it, what was gathered and the rest go to the exports bucket as JSON Lines, and
        the answer is a link to them, so the data is read once and a long history still
        comes out whole."""
        at = now or clock.now()
        role = self._access.require(user_id, project_id, Role.VIEWER)
        header = ExportHeader(exported_at=clock.stamp(at), project_id=project_id, user_id=user_id)
        records = self._records(user_id, project_id, role, at)
        held: list[tuple[ExportRecord, bytes]] = []
        used = answer_size(document_frame(header))
        for record in records:
            line = record.line()
            held.append((record, line))
            used += answer_size(line)
            if used > self._settings.export_max_bytes:
                gathered = (line for _, line in held)
                rest = (record.line() for record in records)
                return self._write_lines(header, chain(gathered, rest))
        return document(header, (record for record, _ in held))

    def _records(
        self, user_id: str, project_id: str, role: Role, at: datetime
    ) -> Iterator[ExportRecord]:
        """The export's parts in line order, read a page at a time."""
        for conversation in self._conversations.every(user_id, project_id):
            yield ExportRecord(
                "conversation",
                ExportedConversation(
                    id=conversation.conversation_id,
                    title=conversation.title,
                    model=conversation.model,
                    archived=conversation.archived,
                    message_count=conversation.message_count,
                    created_at=conversation.created_at,
                    updated_at=conversation.updated_at,
                    preset=ExportedPresetCopy.of(conversation.preset)
                    if conversation.preset
                    else None,
                    settings=ExportedSettings.of(conversation.settings)
                    if conversation.settings
                    else None,
                    cleared_after=conversation.cleared_after,
                ),
            )
            for message in self._messages.every(user_id, project_id, conversation.conversation_id):
                exported = ExportedMessage(
                    id=message.message_id, **message.model_dump(exclude={"message_id"})
                )
                yield ExportRecord("message", exported, conversation.conversation_id)
        for entry, history in self._memories.every(user_id, project_id):
            if not is_active(entry, at):
                continue
            yield ExportRecord(
                "memory",
                # The export format (version 2) has no saidAt: an import dates entries
                # by their updatedAt.
                ExportedMemory(
                    **entry.model_dump(exclude={"said_at"}),
                    history=[
                        ExportedHistory(
                            **record.model_dump(exclude={"key", "scope", "conversation_id"})
                        )
                        for record in history
                    ],
                ),
            )
        for preset in self._presets.all(project_id):
            yield ExportRecord("preset", ExportedPreset.of(preset))
        if role == Role.OWNER and (project := self._project(project_id)) is not None:
            yield ExportRecord("project", project)

    def _write_lines(self, header: ExportHeader, lines: Iterator[bytes]) -> ExportLink:
        """Stream the lines to the exports bucket, at most EXPORT_LINES_MAX_BYTES of them
        (what one request writes well within API Gateway's 30 s), and link to them. An
        export that fails or grows past it leaves nothing behind."""
        limit = self._settings.export_lines_max_bytes
        user_id, project_id = header.user_id, header.project_id
        try:
            upload = self._exports.start(user_id, project_id, new_id())
        except (ClientError, BotoCoreError) as error:
            raise Unavailable("The export could not be written; try again.") from error
        try:
            upload.write(header.line())
            for line in lines:
                upload.write(line)
                if upload.size > limit:
                    raise TooLarge(
                        f"This export is over {limit} bytes (EXPORT_LINES_MAX_BYTES), more "
                        "than one request can write in time: delete older threads first."
                    )
            size = upload.finish()
        except (ClientError, BotoCoreError) as error:
            upload.abort()
            raise Unavailable("The export could not be written; try again.") from error
        except BaseException:
            upload.abort()
            raise
        try:
            # An erasure begun while this was written has already emptied the prefix.
            self._access.require(user_id, project_id, Role.VIEWER)
        except Forbidden:
            self._exports.delete(upload.key)
            raise
        seconds = self._settings.export_link_seconds
        logger.info("large export written", extra={"bytes": size})
        return ExportLink(
            url=self._exports.link(upload.key, seconds),
            expires_at=clock.stamp(clock.now() + timedelta(seconds=seconds)),
            size=size,
        )

    def _project(self, project_id: str) -> ExportedProject | None:
        project = self._projects.get(project_id)
        if project is None:
            return None
        return ExportedProject(
            name=project.name,
            context=project.context,
            members=[
                ExportedMember(user_id=member.user_id, role=member.role)
                for member in self._projects.members(project_id)
            ],
        )
