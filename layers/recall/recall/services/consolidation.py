"""Consolidation: one user's project memory tidied (duplicates merged, contradictions
resolved for the newer value, vague entries pruned, the cap kept) once all three gates
pass. Its only writes are deletes of entries exactly as the plan read them, each recorded
in history with the reason, so no value the user said is ever rewritten."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from aws_lambda_powertools.metrics import MetricUnit

from recall.domain.consolidation import plan_consolidation
from recall.domain.jobs import ConsolidateJob
from recall.observability import logger, metrics
from recall.settings import Settings
from recall.store.jobs import JobQueue
from recall.store.memories import MemoryStore
from recall.store.memory_upkeep import ConsolidationSlot, MemoryUpkeep


@dataclass
class ConsolidationReport:
    ran: bool
    why: str
    retired: int = 0


class ConsolidationService:
    def __init__(
        self,
        settings: Settings,
        memories: MemoryStore,
        upkeep: MemoryUpkeep,
        queue: JobQueue,
    ) -> None:
        self._settings = settings
        self._memories = memories
        self._upkeep = upkeep
        self._queue = queue

    def fan_out(self, now: datetime) -> tuple[int, int]:
        """One job per user and project due for consolidation: ``(read, queued)``."""
        jobs = [
            ConsolidateJob(user_id=user_id, project_id=project_id)
            for user_id, project_id in self._upkeep.due_consolidations(now)
        ]
        queued = self._queue.send(jobs) if jobs else 0
        return len(jobs), queued

    def run(self, job: ConsolidateJob, now: datetime) -> ConsolidationReport:
        # Read before the claim: the memory gate counts unexpired entries, which only this
        # read tells apart from expired ones the expire job has not deleted yet
        held = self._memories.held(job.user_id, job.project_id, None, now)
        entries = held.persistent
        expired = len(held.items) - len(entries)
        slot = self._upkeep.claim_consolidation(
            job.user_id, job.project_id, now, active=len(entries), expired=expired
        )
        if slot is None:
            return ConsolidationReport(False, self._not_yet(job, now, len(entries)))
        settings = self._settings
        report = ConsolidationReport(True, "claimed")
        try:
            plan = plan_consolidation(
                entries,
                now,
                cap=settings.memory_cap,
                min_value_chars=settings.consolidate_min_value_chars,
                min_confidence=settings.consolidate_prune_confidence,
            )
            for action in plan.actions:
                reason = f"{action.step.value}: {action.reason}"
                report.retired += self._memories.retire(
                    job.user_id, job.project_id, action.deleted, reason, now
                )
        except Exception:
            self._give_back(job, slot)
            raise
        metrics.add_metric(name="MemoriesConsolidated", unit=MetricUnit.Count, value=report.retired)
        logger.info(
            "consolidation done",
            extra={"planned": len(plan.actions), "retired": report.retired},
        )
        return report

    def _give_back(self, job: ConsolidateJob, slot: ConsolidationSlot) -> None:
        """A run that failed part-way gives the slot back (the day, the sessions, the
        schedule), so SQS's redelivery plans again over what is left and finishes: what
        this run retired is gone, and an entry is only ever retired as it was read. Best
        effort: the job's own error is what SQS must see, so a failed give-back is logged."""
        try:
            given = self._upkeep.give_back_consolidation(job.user_id, job.project_id, slot)
        except Exception:
            logger.exception("consolidation slot not given back")
            return
        logger.info("consolidation slot given back", extra={"given": given})

    def _not_yet(self, job: ConsolidateJob, now: datetime, active: int) -> str:
        """Why the slot was refused, and the schedule moved to match: to when the time gate
        opens, or out until the next session when a count gate holds it (``active``: the
        unexpired entries read)."""
        meta = self._memories.meta(job.user_id, job.project_id)
        settings = self._settings
        seen = meta.consolidation_due_at
        if seen is None:
            return "not scheduled"
        counts_pass = (
            meta.sessions_since_consolidation >= settings.consolidate_min_sessions
            and active >= settings.consolidate_min_memories
        )
        opens = self._upkeep.consolidation_opens_at(meta.last_consolidation_at)
        if counts_pass and opens is not None and opens > now:
            self._upkeep.reschedule_consolidation(job.user_id, job.project_id, seen, opens)
            return "the last consolidation is too recent"
        self._upkeep.unschedule_consolidation(job.user_id, job.project_id, seen)
        return "too few sessions or entries"
