"""The worker's side of the queue: each job to the service that does it. A job that
fails raises, so the queue retries it and, after its retries, dead-letters it. A batch's
jobs start only while the invocation has time for one more (``JobBatch``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from aws_lambda_powertools.metrics import MetricUnit

from recall.domain import clock
from recall.domain.jobs import (
    AnyJob,
    ConsolidateJob,
    EraseJob,
    ExtractJob,
    ImportJob,
    SummarizeJob,
    job_of,
)
from recall.observability import logger, metrics
from recall.services.consolidation import ConsolidationService
from recall.services.data import DataService
from recall.services.erasure import ErasureService
from recall.services.extraction import ExtractionService
from recall.services.summaries import SummaryService
from recall.store.jobs import JobQueue


class JobRunner:
    def __init__(
        self,
        extraction: ExtractionService,
        summaries: SummaryService,
        consolidation: ConsolidationService,
        erasure: ErasureService,
        data: DataService,
    ) -> None:
        self._extraction = extraction
        self._summaries = summaries
        self._consolidation = consolidation
        self._erasure = erasure
        self._data = data

    def run(self, job: AnyJob, now: datetime | None = None) -> None:
        at = now or clock.now()
        report: object
        if isinstance(job, ExtractJob):
            report = self._extraction.run(job, at)
        elif isinstance(job, SummarizeJob):
            report = self._summaries.run(job, at)
        elif isinstance(job, EraseJob):
            report = "done" if self._erasure.resume(job) else "handed on"
        elif isinstance(job, ImportJob):
            report = self._data.run_chunk(job, at)
        else:
            assert isinstance(job, ConsolidateJob)
            report = self._consolidation.run(job, at)
        logger.info("job done", extra={"kind": job.kind, "report": repr(report)})


class JobBatch:
    """One worker invocation's records, run one after another. Lambda ends an invocation
    at its Timeout and then returns every record of the batch, finished ones included, to
    the queue after its visibility timeout, each receive counting toward the dead-letter
    queue. So a record starts only while ``seconds_left`` covers ``reserve_seconds``, one
    job's worst case (each job makes at most one model call, and the reserve covers it
    through all its attempts), so a job that starts can finish its model call. The first
    always starts: an invocation begins with the whole Timeout, longer than the reserve,
    and so every invocation moves the queue on.

    The records not started are handed back as new messages of the same jobs rather than
    reported as failures: a reported failure would wait out the queue's visibility timeout
    (720 s) and spend one of its three receives without having run. Only when that send
    fails are they reported, for SQS to redeliver; a job sent twice is harmless, as every
    job is idempotent."""

    def __init__(
        self,
        runner: JobRunner,
        queue: JobQueue,
        reserve_seconds: float,
        seconds_left: Callable[[], float],
    ) -> None:
        self._runner = runner
        self._queue = queue
        self._reserve_seconds = reserve_seconds
        self._seconds_left = seconds_left
        self._started = 0
        self._not_started: list[tuple[str, AnyJob]] = []

    def run(self, record_id: str, body: str) -> None:
        """Run the record's job, or keep it for ``hand_back`` when time is short."""
        job = job_of(body)
        if self._started and self._seconds_left() < self._reserve_seconds:
            self._not_started.append((record_id, job))
            return
        self._started += 1
        self._runner.run(job)

    def hand_back(self) -> list[str]:
        """Queue the jobs not started again; the ids of the records whose jobs could not
        be queued, for the batch's ``batchItemFailures``."""
        if not self._not_started:
            return []
        refused: list[str] = []
        try:
            self._queue.send([job for _, job in self._not_started])
        except Exception:
            logger.exception("jobs not handed back")
            refused = [record_id for record_id, _ in self._not_started]
        logger.info(
            "jobs handed back",
            extra={
                "started": self._started,
                "handed_back": len(self._not_started),
                "left_to_redelivery": len(refused),
            },
        )
        metrics.add_metric(
            name="JobsHandedBack", unit=MetricUnit.Count, value=len(self._not_started)
        )
        return refused
