"""Import (backfill): a document checked whole, saved as chunks and written by the worker
a chunk at a time, each chunk's writes of derived ids, so a chunk run twice writes nothing
twice. ``DataService`` (``services/data.py``) offers these routes and jobs beside the
export."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from recall.domain import clock
from recall.domain.access import Role, roles_reaching
from recall.domain.ids import is_id
from recall.domain.import_rules import ImportLimits
from recall.domain.imports import (
    ImportProgress,
    ImportStatus,
    parse_document,
    plan_import,
)
from recall.domain.jobs import ImportJob
from recall.domain.memory_imports import history_to_add
from recall.domain.presets import Preset
from recall.errors import (
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    Throttled,
    TooLarge,
)
from recall.observability import logger
from recall.services.access import ProjectAccess
from recall.services.presets import preset_limits, setting_limits
from recall.settings import Settings
from recall.store.conversations import ConversationStore
from recall.store.dynamodb import fault_of
from recall.store.imports import ImportStore
from recall.store.jobs import JobQueue
from recall.store.memories import MemoryStore
from recall.store.messages import MessageStore
from recall.store.presets import PresetStore
from recall.store.projects import ProjectStore

# Failures a chunk's own data causes, the same on every retry: a number DynamoDB cannot
# hold (decimal's errors are ArithmeticErrors), a value or shape a check refuses.
FROM_THE_DATA = (ArithmeticError, ValueError, TypeError, LookupError, Invalid, TooLarge)


class DataImports:
    """The import half of ``DataService``, over the stores its constructor keeps."""

    _settings: Settings
    _access: ProjectAccess
    _projects: ProjectStore
    _conversations: ConversationStore
    _messages: MessageStore
    _memories: MemoryStore
    _imports: ImportStore
    _queue: JobQueue
    _presets: PresetStore

    def limits(self) -> ImportLimits:
        settings = self._settings
        return ImportLimits(
            threads_max=settings.import_threads_max,
            messages_per_thread_max=settings.import_messages_per_thread_max,
            message_max_chars=settings.message_max_chars,
            message_max_bytes=settings.model_message_max_bytes,
            title_max_chars=settings.title_max_chars,
            memory_value_max_chars=settings.memory_value_max_chars,
            memory_expiry_max_days=settings.memory_expiry_max_days,
            chunk_max_bytes=settings.import_chunk_max_bytes,
            presets_max=settings.presets_max,
            preset=preset_limits(settings),
            settings=setting_limits(settings),
        )

    def start_import(
        self, user_id: str, project_id: str, body: Any, now: datetime | None = None
    ) -> ImportProgress:
        """Check the whole document, save its chunks and queue the first. The same
        document again answers the import it already started, and queues its first chunk
        again if none has run (in case the queue refused it the first time), or its next
        chunk if it stalled: that chunk's job ran out of retries on faults now passed. One
        already done had its chunks written again by ``start``: they are dropped again."""
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
        stored, created = self._imports.start(progress, plan.chunks, at)
        finished = self._finish_if_counted(stored, at)
        if finished is not None:
            return finished
        if not created and stored.status == ImportStatus.DONE:
            # start wrote the chunks again before it found the import done
            self._drop_chunks(stored, range(len(plan.chunks)))
        if not created and stored.stalled(at, self._settings.import_stall_seconds):
            if not self._imports.take_up(stored, at):
                return stored
            stored = stored.model_copy(update={"updated_at": stamp})
            logger.info("import taken up again", extra={"chunk": stored.next_chunk()})
        elif stored.status != ImportStatus.QUEUED or stored.chunks_done:
            return stored
        self._queue.send([self._job(stored, stored.next_chunk())])
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
        """Write one chunk (below). A failure that comes from the chunk's data (a value
        DynamoDB refuses, one a check refuses) fails every retry alike and would leave the
        import saying ``queued`` or ``running`` for good, so it ends the import ``failed``,
        saying at which chunk; what earlier chunks wrote stays. Anything else (throttling,
        a transient fault, a crash) is raised for the queue's retries."""
        try:
            return self._write_chunk(job, now)
        except (*FROM_THE_DATA, ClientError) as error:
            if isinstance(error, ClientError) and fault_of(error) is not None:
                raise
            logger.exception("import chunk failed for good", extra={"chunk": job.chunk})
            progress = self._imports.progress(job.user_id, job.project_id, job.import_id)
            if progress is not None:
                why = f"Chunk {job.chunk} could not be written; the import stopped there."
                self._fail(progress, why, now)
            return None

    def _write_chunk(self, job: ImportJob, now: datetime) -> ImportProgress | None:
        """Write one chunk, queue the next, then count this one. Every write is of an item
        with a derived id, and a memory entry already held as the chunk brings it is not
        written again (``MemoryStore.write``), so a chunk run twice, even twice at once (a
        second POST while it is queued, or a message delivered twice), writes nothing
        twice; the next chunk is queued before this one is counted, so a crash in between
        queues it twice rather than never."""
        user_id, project_id = job.user_id, job.project_id
        progress = self._imports.progress(user_id, project_id, job.import_id)
        finished = (ImportStatus.DONE, ImportStatus.FAILED)
        if progress is None or progress.status in finished:
            return progress
        if job.chunk in progress.counted:
            return self._finish_if_counted(progress, now) or progress
        if self._projects.role_of(project_id, user_id) not in roles_reaching(Role.EDITOR):
            self._stop_for_role(progress, job.chunk, now)
            return None
        chunk = self._imports.chunk(user_id, project_id, job.import_id, job.chunk)
        if chunk is None:
            self._fail(progress, f"Chunk {job.chunk} is gone (kept only so long).", now)
            return None
        presets_done, errors = 0, []
        ours = set(chunk.import_presets)
        # Names held before this import: its own presets (one run earlier) do not count.
        taken = {
            held.name
            for held in (self._presets.all(project_id) if chunk.presets else [])
            if held.preset_id not in ours
        }
        for preset in chunk.presets:
            try:
                refusal = self._import_preset(preset, user_id, taken)
            except Forbidden:
                self._stop_for_role(progress, job.chunk, now)
                return None
            if refusal:
                errors.append(refusal)
            else:
                presets_done += 1
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
                self._stop_for_role(progress, job.chunk, now)
                return None
        written = 0
        for memory in chunk.memories:
            if memory.history:
                entry = memory.entry
                held = self._memories.history(user_id, project_id, entry.key, entry.conversation_id)
                self._memories.add_history(user_id, project_id, history_to_add(memory, held))
            if memory.history_only:
                continue
            if self._memories.write(user_id, project_id, memory.entry, now, "imported") is None:
                errors.append(
                    f"Memory {memory.entry.key!r} ({memory.entry.scope}) was not imported: an "
                    "explicit entry holds its key, or its scope is full."
                )
            else:
                written += 1
        if job.chunk + 1 < progress.chunks_total:
            self._queue.send([self._job(progress, job.chunk + 1)])
        counted = self._imports.chunk_done(progress, chunk, written, presets_done, errors, now)
        logger.info(
            "import chunk written",
            extra={"chunk": job.chunk, "chunks": progress.chunks_total, "counted": bool(counted)},
        )
        if counted is None:
            return None
        return self._finish_if_counted(counted, now) or counted

    def _finish_if_counted(self, progress: ImportProgress, now: datetime) -> ImportProgress | None:
        """Finish an import whose every chunk is counted but which still says ``queued`` or
        ``running``, and drop its chunks. The run that counts the last chunk does so; and
        since counting and ``done`` are two updates, so does whatever finds the import
        after a run stopped between them: its redelivery (which finds its chunk counted)
        or the document sent again (whose take-over would queue a chunk past the last)."""
        unfinished = (ImportStatus.QUEUED, ImportStatus.RUNNING)
        if progress.status not in unfinished or progress.chunks_done < progress.chunks_total:
            return None
        logger.info("import finished: every chunk is counted")
        done = self._imports.finish(progress, now)
        self._drop_chunks(done, range(done.chunks_total))
        return done

    def _drop_chunks(self, progress: ImportProgress, numbers: Iterable[int]) -> None:
        """Delete chunks nothing will read again: they hold the imported text, which would
        otherwise stay IMPORT_TTL_DAYS after the user deleted the threads it made. A
        failure is logged, never raised: the import stands as it is, and the TTL takes
        the chunks later."""
        try:
            self._imports.drop_chunks(progress, numbers)
        except (ClientError, BotoCoreError, Throttled) as error:
            logger.warning("import chunks left to their ttl", extra={"error": type(error).__name__})

    def _stop_for_role(self, progress: ImportProgress, chunk: int, now: datetime) -> None:
        """The importer may no longer write here (demoted, removed or erased): the import
        ends ``failed``, so it says why rather than ``running`` for good, and the same
        document sent again once they may write starts it over. An erased importer's
        progress is gone with the rest of their data, and stays gone."""
        logger.info("import chunk stopped: its importer may no longer write here")
        why = f"Stopped at chunk {chunk}: the importer's role no longer allows writing here."
        self._fail(progress, why, now)

    def _fail(self, progress: ImportProgress, why: str, now: datetime) -> None:
        """End the import ``failed``, and drop the chunks it counted: sending the document
        again writes every chunk anew before it starts over, and the threads of a counted
        chunk were created or continue in a chunk not counted. Those not counted stay
        until their TTL: an erasure finds in them the threads a chunk never created."""
        if self._imports.fail(progress, why, now):
            self._drop_chunks(progress, progress.counted)

    def _import_preset(self, preset: Preset, importer_id: str, taken: set[str]) -> str | None:
        """Create an imported preset unless the project had one of its name before this
        import (``taken``; the project's own is kept: an import never replaces a preset)
        or is at PRESETS_MAX; why it was not, or ``None``. One an earlier run of the chunk
        created counts as created."""
        project_id = preset.project_id
        if self._presets.get(project_id, preset.preset_id) is not None:
            return None
        if preset.name in taken:
            return (
                f"Preset {preset.name!r} was not imported: the project has a preset of that name."
            )
        try:
            self._presets.create(preset, importer_id)
        except Conflict:
            if self._presets.get(project_id, preset.preset_id) is not None:
                return None
            return (
                f"Preset {preset.name!r} was not imported: the project has as many presets "
                "as PRESETS_MAX allows."
            )
        return None
