"""Erasing a member's data in a project (``DELETE …/me``) or a whole project
(``DELETE /projects/{projectId}``, its presets too).

Each erasure writes its marker first (the member item gives way to ``ERASING#<userId>`` in
one transaction; a project item gets ``erasing``), so from that moment the erased user
holds no role: every read answers 403, and a turn's transaction, which checks the role,
can no longer save. Then every table's items of that user and project are deleted, each
found by a Query on its own keys (and their large exports in S3, by their prefix), at most
``erase_items_per_run`` per invocation; the marker goes last. A failure part-way leaves
the marker: a retry of the request, or the worker job queued when the request failed or
ran out of room, goes on from what is left.

That budget pays for work, not only for deletes: each member visited and each thread is
charged the requests it takes whatever it finds (``erase_request_items`` apiece), and a
project's members become erasures, and are listed, only as many as the budget can pay
for, so a project of many members with no data hands on to the worker like one with a
lot of data.
"""

from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError

from recall.domain.access import Role, require
from recall.domain.jobs import EraseJob
from recall.domain.projects import owner_delta
from recall.errors import Conflict, DomainError
from recall.observability import logger
from recall.settings import Settings
from recall.store.conversations import ConversationStore
from recall.store.erasure_markers import ErasureMarkers
from recall.store.exports import ExportStore
from recall.store.idempotency import IdempotencyRecords
from recall.store.imports import ImportStore
from recall.store.jobs import JobQueue
from recall.store.memories import MemoryStore
from recall.store.messages import MessageStore
from recall.store.presets import PresetStore
from recall.store.projects import ProjectStore
from recall.store.sessions import SessionStore
from recall.store.usage import UsageStore

LAST_OWNER = (
    "You are this project's last owner: make someone else an owner first, or delete the project."
)
# The requests a visit takes whatever it finds, each charged as ``erase_request_items``: a
# member's (the Queries of their imports, threads, memory, idempotency records, usage and
# sessions, the S3 listing of their exports, their marker's delete and its part of the
# listing that found it), and a thread's (its messages' Query, the deletes of its item and
# its policy item).
MEMBER_REQUESTS = 9
THREAD_REQUESTS = 3
# A member becoming an erasure is two item writes: the marker's put, the member's delete.
MARKER_WRITES = 2


class ErasureService:
    def __init__(
        self,
        settings: Settings,
        projects: ProjectStore,
        conversations: ConversationStore,
        messages: MessageStore,
        sessions: SessionStore,
        memories: MemoryStore,
        records: IdempotencyRecords,
        imports: ImportStore,
        queue: JobQueue,
        exports: ExportStore,
        presets: PresetStore,
        usage: UsageStore,
    ) -> None:
        self._budget = settings.erase_items_per_run
        self._request_items = settings.erase_request_items
        self._projects = projects
        self._markers = ErasureMarkers(settings, projects)
        self._conversations = conversations
        self._messages = messages
        self._sessions = sessions
        self._memories = memories
        self._records = records
        self._imports = imports
        self._queue = queue
        self._exports = exports
        self._presets = presets
        self._usage = usage

    def erase_me(self, user_id: str, project_id: str) -> bool:
        """Erase everything of the caller in the project and their membership: ``True``
        when it is all gone, ``False`` when the worker finishes it. The last owner is
        refused (Conflict); a caller whose erasure has begun goes on with it, and a member
        an owner removed may still erase what they left."""
        role = self._projects.role_of(project_id, user_id)
        if role is None:
            pending = self._markers.erasure_pending(project_id, user_id)
            if not pending and not self._markers.begin_former_erasure(project_id, user_id):
                require(role, Role.VIEWER)
        else:
            delta = owner_delta(role, None)
            if delta < 0:
                project = self._projects.get(project_id)
                if project is not None and project.owner_count + delta < 1:
                    raise Conflict(LAST_OWNER)
            self._markers.begin_member_erasure(project_id, user_id, role, delta)
            logger.info("erasure begun", extra={"project_id": project_id, "was": role})
        return self._run(EraseJob(user_id=user_id, project_id=project_id))

    def erase_project(self, user_id: str, project_id: str) -> bool:
        """Delete the project with everything of everyone in it, while the caller is an
        owner: ``True`` when it is all gone, ``False`` when the worker finishes it. Once
        an owner began it, any member it has not erased yet (their marker says so) may go
        on with it: it can only finish what was begun."""
        role = self._projects.role_of(project_id, user_id)
        resuming = role is None and self._projects.project_erasing(project_id)
        if not (resuming and self._markers.erasure_pending(project_id, user_id)):
            require(role, Role.OWNER)
            self._markers.begin_project_erasure(project_id, user_id)
            logger.info("project deletion begun", extra={"project_id": project_id})
        return self._run(EraseJob(user_id=user_id, project_id=project_id, whole_project=True))

    def resume(self, job: EraseJob) -> bool:
        """The worker's turn: go on within this run's budget, queueing the job again when
        there is more; ``True`` when it is done (or was already)."""
        done = self._continue(job)
        if not done:
            self._queue.send([job])
        return done

    def _run(self, job: EraseJob) -> bool:
        """Erase within this request's budget; what is left goes to the worker, and so does
        an erasure that failed part-way (its marker stays, so nothing is shown meanwhile)."""
        try:
            done = self._continue(job)
        except (DomainError, ClientError, BotoCoreError):
            self._hand_over_after_failure(job)
            raise
        if not done:
            self._queue.send([job])
            logger.info("erasure handed to the worker", extra={"project_id": job.project_id})
        return done

    def _hand_over_after_failure(self, job: EraseJob) -> None:
        try:
            self._queue.send([job])
        except (DomainError, ClientError, BotoCoreError):
            logger.warning(
                "erasure left for a retry: its job could not be queued",
                extra={"project_id": job.project_id},
            )

    def _continue(self, job: EraseJob) -> bool:
        if job.whole_project:
            return self._continue_project(job.user_id, job.project_id)
        if not self._markers.erasure_pending(job.project_id, job.user_id):
            return True
        return self._member_data(job.user_id, job.project_id, self._budget) >= 0

    def _continue_project(self, caller_id: str, project_id: str) -> bool:
        """Every member becomes an erasure, then each one's data goes, the caller's last
        (their marker lets them retry), then the project item; each step only as far as
        the run's budget goes."""
        if not self._projects.project_erasing(project_id):
            return True
        left = self._budget
        turned = self._markers.for_members(project_id, max(1, left // MARKER_WRITES))
        left -= turned * MARKER_WRITES
        member_cost = MEMBER_REQUESTS * self._request_items
        # Two at least: a page of one could be the caller alone while others are still
        # marked, and the caller's marker must stay until they are done.
        while left > 0 and (
            erasures := self._markers.erasures(project_id, left // member_cost + 2)
        ):
            others = [user for user in erasures if user != caller_id]
            for user_id in others or erasures:
                if left <= 0:
                    return False
                left = self._member_data(user_id, project_id, left)
                if left < 0:
                    return False
        if left <= 0:
            return False
        # Nobody holds a role any more, so no preset is written after these go, and no
        # job counts its model calls once the members' data (what jobs read) is gone.
        self._presets.erase(project_id)
        if self._usage.erase_jobs(project_id, max(1, left)) >= max(1, left):
            return False
        self._markers.end_project_erasure(project_id)
        logger.info("project deleted", extra={"project_id": project_id})
        return True

    def _member_data(self, user_id: str, project_id: str, budget: int) -> int:
        """Delete a user's data in the project, then their marker, spending at most
        ``budget`` (item deletes and the requests of the visit): what is left of it (0
        when the visit took the rest), or -1 when it ran out first."""
        left = budget
        # Imports first, so no chunk starts after this; the threads their chunks wrote to
        # include any whose thread item a later chunk would have created.
        for conversation_id in sorted(self._imports.thread_ids(user_id, project_id)):
            left -= self._messages.erase_thread(user_id, project_id, conversation_id, left)
            if left <= 0:
                return -1
        left -= self._imports.erase(user_id, project_id, left)
        if left <= 0:
            return -1
        while conversation_ids := self._conversations.ids(user_id, project_id, max(1, left)):
            for conversation_id in conversation_ids:
                left -= self._messages.erase_thread(user_id, project_id, conversation_id, left)
                if left <= 0:
                    return -1
                # the thread's item and its policy item
                self._conversations.delete(user_id, project_id, conversation_id)
                left -= THREAD_REQUESTS * self._request_items
                if left <= 0:
                    return -1
        for erase in (
            self._memories.erase,
            self._records.erase,
            self._exports.erase,
            self._usage.erase,
            self._sessions.erase,
        ):
            left -= erase(user_id, project_id, left)
            if left <= 0:
                return -1
        self._markers.end_member_erasure(project_id, user_id)
        logger.info("erasure done", extra={"project_id": project_id})
        # Charged once it is done, so a run always gets through at least one member.
        return max(0, left - MEMBER_REQUESTS * self._request_items)
