"""Memory jobs from the SQS queue: each record is one job, run on its own, so one that fails
is retried (and, after its retries, dead-lettered) without running the others again. A job
starts only while the invocation has time left for one more; the others go back to the
queue (``JobBatch``)."""

from __future__ import annotations

import gc

# Until recall.cold_start.loaded(), below: no collection while the module loads.
gc.disable()

from typing import Any

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from recall.cold_start import loaded
from recall.observability import logger, metrics, tracer
from recall.wiring import job_batch

processor = BatchProcessor(event_type=EventType.SQS)


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    batch = job_batch(lambda: context.get_remaining_time_in_millis() / 1000)

    def run_job(record: SQSRecord) -> None:
        batch.run(record.message_id, record.body)

    response = process_partial_response(
        event=event, record_handler=run_job, processor=processor, context=context
    )
    response["batchItemFailures"] += [
        {"itemIdentifier": record_id} for record_id in batch.hand_back()
    ]
    return response


loaded()
