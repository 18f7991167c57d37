"""The worker's side of the queue: each job to the service that does it. A job that
fails raises, so the queue retries it and, after its retries, dead-letters it."""

from __future__ import annotations

from datetime import datetime

from recall.domain import clock
from recall.domain.jobs import (
    AnyJob,
    ConsolidateJob,
    EraseJob,
    ExtractJob,
    ImportJob,
    SummarizeJob,
)
from recall.observability import logger
from recall.services.consolidation import ConsolidationService
from recall.services.data import DataService
from recall.services.erasure import ErasureService
from recall.services.extraction import ExtractionService
from recall.services.summaries import SummaryService


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
