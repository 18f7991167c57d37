"""The scheduled jobs. Each reads only what is due (a fixed set of sharded hour buckets of
a sparse index), so its cost follows what is due, never the number of users."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel

from recall.domain.jobs import ScheduledJob
from recall.errors import Throttled, Unavailable
from recall.observability import logger
from recall.services.consolidation import ConsolidationService
from recall.services.sessions import SessionService
from recall.store.memories import MemoryStore
from recall.store.memory_upkeep import MemoryUpkeep


class MaintenanceReport(BaseModel):
    job: ScheduledJob
    read: int
    changed: int


class Maintenance:
    def __init__(
        self,
        sessions: SessionService,
        memories: MemoryStore,
        upkeep: MemoryUpkeep,
        consolidation: ConsolidationService,
    ) -> None:
        self._sessions = sessions
        self._memories = memories
        self._upkeep = upkeep
        self._consolidation = consolidation

    def run(self, job: ScheduledJob, now: datetime) -> MaintenanceReport:
        """Idempotent: run twice at one moment, the second run finds nothing left to do."""
        if job == ScheduledJob.PRUNE_SESSIONS:
            read, changed = self._sessions.prune(now)
        elif job == ScheduledJob.EXPIRE_MEMORIES:
            read, changed = self._expire(now)
        else:
            read, changed = self._consolidation.fan_out(now)
        return MaintenanceReport(job=job, read=read, changed=changed)

    def _expire(self, now: datetime) -> tuple[int, int]:
        """Each due entry on its own: one that cannot be expired (its writes keep failing)
        holds up none after it, though a busy or failing table ends the run at once. The
        run still fails once all were tried, so the schedule's retry and the error alarm
        see it; the next run reads the same buckets again."""
        due = list(self._upkeep.due_expiries(now))
        changed = failed = 0
        for entry in due:
            try:
                changed += self._memories.expire(
                    entry.user_id, entry.project_id, entry.key, entry.conversation_id, now
                )
            except (Throttled, Unavailable):
                raise  # the table is busy or down for all of them: asking on only adds load
            except Exception:
                failed += 1
                logger.exception(
                    "a due memory entry could not be expired", extra={"key": entry.key}
                )
        if failed:
            raise Unavailable(
                f"{failed} of {len(due)} due memory entries could not be expired; "
                "the next run takes them up."
            )
        return len(due), changed
