"""What a turn leaves for later: extraction once the thread is long enough and holds a user
message with preference signals that no extraction has read yet (this turn's, or an earlier
one stamped on the thread as ``signals_at``, unless an extraction the cooldown refused
said to wait until ``signals_wait_until``; never from a thread that does not send memory:
it neither reads nor writes project memory), and a summary job when messages left the window.
Queued after the turn is saved; a failure here is logged and counted, and never reaches
the reply."""

from __future__ import annotations

from aws_lambda_powertools.metrics import MetricUnit

from recall.domain.conversations import Conversation
from recall.domain.jobs import AnyJob, ExtractJob, SummarizeJob
from recall.observability import logger, metrics
from recall.settings import Settings
from recall.store.jobs import JobQueue


class TurnFollowUps:
    def __init__(self, settings: Settings, queue: JobQueue) -> None:
        self._settings = settings
        self._queue = queue

    def jobs_after(
        self,
        conversation: Conversation,
        messages_now: int,
        *,
        signals: bool,
        left_window: bool,
        sends_memory: bool,
        at: str,
    ) -> list[AnyJob]:
        """The jobs a turn saved at ``at`` (a stamp) leaves: see the module text."""
        ids = {
            "user_id": conversation.user_id,
            "project_id": conversation.project_id,
            "conversation_id": conversation.conversation_id,
        }
        jobs: list[AnyJob] = []
        # Every message, tool ones too: an upper bound. The worker counts only user and
        # assistant messages, before it claims its slot.
        long_enough = messages_now >= self._settings.extract_min_messages
        waiting = (conversation.signals_wait_until or "") > at
        due = signals or (conversation.signals_at is not None and not waiting)
        if sends_memory and long_enough and due:
            jobs.append(ExtractJob(**ids))
        if left_window:
            jobs.append(SummarizeJob(**ids))
        return jobs

    def queue(self, jobs: list[AnyJob]) -> None:
        """Never raises: the turn is saved and answered whatever happens here."""
        if not jobs:
            return
        try:
            self._queue.send(jobs)
        except Exception:
            logger.exception(
                "memory jobs not queued", extra={"kinds": [job.kind.value for job in jobs]}
            )
            metrics.add_metric(name="MemoryJobsNotQueued", unit=MetricUnit.Count, value=len(jobs))
