"""The worker's handler, as Lambda's SQS event source invokes it, with less time left than
one more job may take: the jobs it did not start go back to the queue at once, as new
messages, instead of running past the function's Timeout."""

from __future__ import annotations

from typing import Any
import uuid

from local import embedded, runtime, template
from recall.domain.jobs import SummarizeJob, job_body
from recall.settings import get_settings
from tests.integration.queued_jobs import take_queued

WORKER = "WorkerFunction"


def records(bodies: list[str]) -> dict[str, Any]:
    return {
        "Records": [
            {
                "messageId": str(uuid.uuid4()),
                "receiptHandle": "handle",
                "body": body,
                "attributes": {"ApproximateReceiveCount": "1"},
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:MemoryJobsQueue",
                "awsRegion": "us-east-1",
            }
            for body in bodies
        ]
    }


def test_a_batch_short_of_time_runs_its_first_job_and_hands_the_rest_back(
    embedded_store: embedded.EmbeddedStore,
) -> None:
    # Given ten jobs, and an invocation with less than one job's worst case left
    user = f"user-{uuid.uuid4().hex[:12]}"
    bodies = [
        job_body(SummarizeJob(user_id=user, project_id="p", conversation_id=f"gone-{n}"))
        for n in range(10)
    ]
    seconds = get_settings().worker_job_reserve_seconds // 2
    context = runtime.new_context(WORKER, seconds)

    # When the worker is invoked with them
    reply = runtime.handler_module(WORKER).lambda_handler(records(bodies), context)

    # Then no record is a failure (none waits out the visibility timeout or spends a
    # receive), and the nine not started are on the queue again, as they were
    assert reply == {"batchItemFailures": []}
    assert sorted(take_queued(embedded_store, user)) == sorted(bodies[1:])


def test_a_batch_with_time_for_every_job_hands_nothing_back(
    embedded_store: embedded.EmbeddedStore,
) -> None:
    user = f"user-{uuid.uuid4().hex[:12]}"
    bodies = [
        job_body(SummarizeJob(user_id=user, project_id="p", conversation_id=f"gone-{n}"))
        for n in range(10)
    ]
    context = runtime.new_context(WORKER, template.function_timeout(WORKER))

    reply = runtime.handler_module(WORKER).lambda_handler(records(bodies), context)

    assert reply == {"batchItemFailures": []}
    assert take_queued(embedded_store, user) == []
