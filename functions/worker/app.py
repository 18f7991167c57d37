"""Memory jobs from the SQS queue: each record is one job, run on its own, so one that fails
is retried (and, after its retries, dead-lettered) without running the others again."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from recall.domain.jobs import job_of
from recall.observability import logger, metrics, tracer
from recall.wiring import job_runner

processor = BatchProcessor(event_type=EventType.SQS)


def run_job(record: SQSRecord) -> None:
    job_runner().run(job_of(record.body))


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    return process_partial_response(
        event=event, record_handler=run_job, processor=processor, context=context
    )
