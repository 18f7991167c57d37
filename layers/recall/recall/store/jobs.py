"""The memory jobs queue (SQS): what a turn or a schedule asks the worker to do later."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

import boto3
from botocore.config import Config

from recall.domain.jobs import AnyJob, job_body
from recall.errors import Throttled
from recall.settings import Settings, get_settings

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

SEND_BATCH_MAX = 10  # SQS's limit for SendMessageBatch


@lru_cache(maxsize=1)
def sqs_client() -> SQSClient:
    """Made on first use, never at import, so tests can point it at moto first. Short
    timeouts and few attempts in all (the ``JOB_QUEUE_*`` settings): a turn queues its
    jobs after its work is saved, and waits for the queue no longer than it must."""
    settings = get_settings()
    timeout = settings.job_queue_timeout_seconds
    config = Config(
        connect_timeout=timeout,
        read_timeout=timeout,
        retries={"mode": "standard", "total_max_attempts": settings.job_queue_max_attempts},
    )
    return boto3.client("sqs", config=config)


class JobQueue:
    def __init__(self, settings: Settings, client: SQSClient | None = None) -> None:
        self._url = settings.memory_jobs_queue_url
        self._client = client

    @property
    def client(self) -> SQSClient:
        return self._client or sqs_client()

    def send(self, jobs: Sequence[AnyJob]) -> int:
        """Queue every job, ten to a request; ``Throttled`` names the ones SQS refused, so
        the caller can log them (a turn) or fail and be retried (a schedule)."""
        if not self._url:
            raise Throttled("No memory jobs queue is configured (MEMORY_JOBS_QUEUE_URL).")
        refused: list[str] = []
        for start in range(0, len(jobs), SEND_BATCH_MAX):
            batch = jobs[start : start + SEND_BATCH_MAX]
            result = self.client.send_message_batch(
                QueueUrl=self._url,
                Entries=[
                    {"Id": str(index), "MessageBody": job_body(job)}
                    for index, job in enumerate(batch)
                ],
            )
            refused += [failure["Id"] for failure in result.get("Failed", [])]
        if refused:
            raise Throttled(f"{len(refused)} memory jobs were not queued.")
        return len(jobs)
