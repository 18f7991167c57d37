"""Export and import: a user's threads and memory in a project, out as one document and
back in (or in from another product) through the worker, a chunk at a time."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from recall.domain import clock
from recall.domain.access import Role, roles_reaching
from recall.domain.ids import is_id
from recall.domain.imports import (
    ExportDocument,
    ExportedConversation,
    ExportedHistory,
    ExportedMember,
    ExportedMemory,
    ExportedMessage,
    ExportedProject,
    ImportLimits,
    ImportProgress,
    ImportStatus,
    history_record_id,
    parse_document,
    plan_import,
)
from recall.domain.jobs import ImportJob
from recall.domain.memory import is_active
from recall.errors import Conflict, Forbidden, NotFound, TooLarge
from recall.observability import logger
from recall.services.access import ProjectAccess
from recall.settings import Settings
from recall.store.conversations import ConversationStore
from recall.store.imports import ImportStore
from recall.store.jobs import JobQueue
from recall.store.memories import MemoryStore
from recall.store.messages import MessageStore
from recall.store.projects import ProjectStore


class DataService:
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
    ) -> None:
        self._settings = settings
        self._access = access
        self._projects = projects
        self._conversations = conversations
        self._messages = messages
        self._memories = memories
        self._imports = imports
        self._queue = queue

    # Export

    def export(self, user_id: str, project_id: str, now: datetime | None = None) -> ExportDocument:
        """Everything the caller holds in the project; an owner also gets its settings and
        members. Over EXPORT_MAX_BYTES it is refused (413) as soon as it is known, rather
        than cut short or failed by Lambda's 6 MB response limit."""
        at = now or clock.now()
        role = self._access.require(user_id, project_id, Role.VIEWER)
        limit = self._settings.export_max_bytes
        used = 0

        def count(part: ExportedMessage | ExportedConversation | ExportedMemory) -> None:
            nonlocal used
            used += len(part.model_dump_json(by_alias=True))
            if used > limit:
                raise TooLarge(
                    f"This export is over {limit} bytes, more than one response can carry."
                )

        conversations = []
        for conversation in self._conversations.every(user_id, project_id):
            messages = []
            for message in self._messages.every(user_id, project_id, conversation.conversation_id):
                exported_message = ExportedMessage(
                    id=message.message_id, **message.model_dump(exclude={"message_id"})
                )
                count(exported_message)  # message by message: a long thread stops early too
                messages.append(exported_message)
            exported = ExportedConversation(
                id=conversation.conversation_id,
                title=conversation.title,
                model=conversation.model,
                archived=conversation.archived,
                message_count=conversation.message_count,
                created_at=conversation.created_at,
                updated_at=conversation.updated_at,
            )
            count(exported)
            conversations.append(exported.model_copy(update={"messages": messages}))
        memories = []
        for entry, history in self._memories.every(user_id, project_id):
            if not is_active(entry, at):
                continue
            memory = ExportedMemory(
                **entry.model_dump(),
                history=[
                    ExportedHistory(
                        **record.model_dump(exclude={"key", "scope", "conversation_id"})
                    )
                    for record in history
                ],
            )
            count(memory)
            memories.append(memory)
        return ExportDocument(
            exported_at=clock.stamp(at),
            project_id=project_id,
            user_id=user_id,
            conversations=conversations,
            memories=memories,
            project=self._project(project_id) if role == Role.OWNER else None,
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

    # Import

    def limits(self) -> ImportLimits:
        settings = self._settings
        return ImportLimits(
            threads_max=settings.import_threads_max,
            messages_per_thread_max=settings.import_messages_per_thread_max,
            message_max_chars=settings.message_max_chars,
            message_max_bytes=settings.model_message_max_bytes,
            title_max_chars=settings.title_max_chars,
            memory_value_max_chars=settings.memory_value_max_chars,
            chunk_max_bytes=settings.import_chunk_max_bytes,
        )

    def start_import(
        self, user_id: str, project_id: str, body: Any, now: datetime | None = None
    ) -> ImportProgress:
        """Check the whole document, save its chunks and queue the first; the same
        document again answers the import it already started (and queues its first chunk
        again if none has run, in case the queue refused it the first time)."""
        at = now or clock.now()
        self._access.require(user_id, project_id, Role.EDITOR)
        plan = plan_import(user_id, project_id, parse_document(body), self.limits(), at)
        stamp = clock.stamp(at)
        progress = ImportProgress(
            import_id=plan.import_id,
            user_id=user_id,
            project_id=project_id,
            status=ImportStatus.QUEUED if plan.chunks else ImportStatus.DONE,
            chunks_total=len(plan.chunks),
            threads_total=plan.threads_total,
            created_at=stamp,
            updated_at=stamp,
        )
        stored, _ = self._imports.start(progress, plan.chunks, at)
        if stored.status == ImportStatus.QUEUED and stored.chunks_done == 0:
            self._queue.send([self._job(stored, 0)])
        return stored

    def progress(self, user_id: str, project_id: str, import_id: str) -> ImportProgress:
        """An import's progress, for the user who started it only."""
        self._access.require(user_id, project_id, Role.VIEWER)
        found = self._imports.progress(user_id, project_id, import_id) if is_id(import_id) else None
        if found is None:
            raise NotFound("No such import.")
        return found

    @staticmethod
    def _job(progress: ImportProgress, chunk: int) -> ImportJob:
        return ImportJob(
            user_id=progress.user_id,
            project_id=progress.project_id,
            import_id=progress.import_id,
            chunk=chunk,
        )

    def run_chunk(self, job: ImportJob, now: datetime) -> ImportProgress | None:
        """Write one chunk, queue the next, then count this one. Every write is of an item
        with a derived id, so a chunk run twice writes the same items again; the next
        chunk is queued before this one is counted, so a crash in between queues it twice
        rather than never."""
        user_id, project_id = job.user_id, job.project_id
        progress = self._imports.progress(user_id, project_id, job.import_id)
        finished = (ImportStatus.DONE, ImportStatus.FAILED)
        if progress is None or progress.status in finished or job.chunk in progress.counted:
            return progress
        if self._projects.role_of(project_id, user_id) not in roles_reaching(Role.EDITOR):
            logger.info("import chunk not written: its importer may no longer write here")
            return None
        chunk = self._imports.chunk(user_id, project_id, job.import_id, job.chunk)
        if chunk is None:
            self._imports.fail(progress, f"Chunk {job.chunk} is gone (kept only so long).", now)
            return None
        still = self._projects.role_check(project_id, user_id, Role.EDITOR)
        for part in chunk.parts:
            self._messages.add(user_id, project_id, part.conversation_id, part.messages)
            if part.conversation is None:
                continue
            try:
                self._conversations.create(part.conversation, guard=still)
            except Conflict:  # an earlier run of this chunk created it
                continue
            except Forbidden:
                # Removed or erased while the chunk ran: what it wrote goes with them.
                self._messages.erase_thread(
                    user_id,
                    project_id,
                    part.conversation_id,
                    self._settings.import_messages_per_thread_max,
                )
                logger.info("import chunk stopped: its importer may no longer write here")
                return None
        written, errors = 0, []
        for memory in chunk.memories:
            records = [
                (record, history_record_id(job.import_id, memory, number))
                for number, record in enumerate(memory.history)
            ]
            self._memories.add_history(user_id, project_id, records)
            if self._memories.write(user_id, project_id, memory.entry, now, "imported") is None:
                errors.append(
                    f"Memory {memory.entry.key!r} ({memory.entry.scope}) was not imported: an "
                    "explicit entry holds its key, or its scope is full."
                )
            else:
                written += 1
        if job.chunk + 1 < progress.chunks_total:
            self._queue.send([self._job(progress, job.chunk + 1)])
        counted = self._imports.chunk_done(progress, chunk, written, errors, now)
        logger.info(
            "import chunk written",
            extra={"chunk": job.chunk, "chunks": progress.chunks_total, "counted": bool(counted)},
        )
        return counted
