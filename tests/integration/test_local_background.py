"""What ``make dev`` runs beside the API (``local/background.py``): Lambda's SQS event
source for the worker (receive, invoke, delete what succeeded, return the failures soon, so
the redrive dead-letters what keeps failing) and the schedules' timer, over the run's
embedded DynamoDB and SQS."""

from __future__ import annotations

from collections.abc import Callable, Iterator
import json
import threading
import time
from typing import Any

import boto3
import pytest

from local import embedded, runtime, template
from local.background import Background, QueuePoller, failed_ids, run_job
from local.seed import grow_thread
from recall.domain.ids import new_id
from recall.domain.jobs import ExtractJob, SummarizeJob, job_body
from recall.wiring import job_runner
from tests.conftest import wait_for
from tests.integration.conftest import Api

WORKER = "WorkerFunction"


@pytest.fixture
def sqs(embedded_store: embedded.EmbeddedStore) -> Any:
    return boto3.client("sqs", endpoint_url=embedded_store.endpoint, region_name="us-east-1")


@pytest.fixture
def empty_queues(embedded_store: embedded.EmbeddedStore, sqs: Any) -> None:
    """The run's queues hold what every earlier test's turns queued: start from nothing
    (received and deleted: SQS allows one purge a minute)."""
    for queue in embedded_store.queues.values():
        while messages := sqs.receive_message(QueueUrl=queue.url, MaxNumberOfMessages=10).get(
            "Messages"
        ):
            sqs.delete_message_batch(
                QueueUrl=queue.url,
                Entries=[
                    {"Id": str(n), "ReceiptHandle": message["ReceiptHandle"]}
                    for n, message in enumerate(messages)
                ],
            )


@pytest.fixture
def poller(embedded_store: embedded.EmbeddedStore, empty_queues: None) -> QueuePoller:
    (source,) = [source for source in template.queue_sources() if source.function == WORKER]
    return QueuePoller(source, embedded_store.queues[source.queue], embedded_store.endpoint)


@pytest.fixture
def invocations(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """Every invocation the local runtime makes from now on, passed on to the real one."""
    seen: list[tuple[str, dict[str, Any]]] = []
    real = runtime.invoke

    def recording(function: str, event: dict[str, Any]) -> Any:
        seen.append((function, json.loads(json.dumps(event))))
        return real(function, event)

    monkeypatch.setattr(runtime, "invoke", recording)
    return seen


def counts(sqs: Any, url: str) -> dict[str, int]:
    attributes = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return {name.removeprefix("ApproximateNumberOf"): int(n) for name, n in attributes.items()}


def a_job_for_a_missing_thread() -> str:
    return job_body(SummarizeJob(user_id="nobody", project_id=new_id(), conversation_id=new_id()))


def test_drain_deletes_what_succeeded_and_redrives_what_keeps_failing(
    poller: QueuePoller,
    sqs: Any,
    embedded_store: embedded.EmbeddedStore,
    invocations: list[tuple[str, dict[str, Any]]],
) -> None:
    # Given: a job the worker finishes (its thread is gone: nothing to do) and a body it
    # cannot read, so the worker reports that record alone as a batch item failure
    good, bad = a_job_for_a_missing_thread(), '{"kind": "no-such-job"}'
    for body in (good, bad):
        sqs.send_message(QueueUrl=poller.queue.url, MessageBody=body)
    dead_letter_url = embedded_store.queues["MemoryJobsDeadLetterQueue"].url
    started = time.monotonic()
    # When
    drained, empty = poller.drain(deadline_seconds=15)
    # Then: the good one once; the bad one back within the local retry delay each time,
    # received three times (maxReceiveCount), then moved to the dead-letter queue
    elapsed = time.monotonic() - started
    assert empty, f"the queue never emptied: {counts(sqs, poller.queue.url)}"
    assert (drained.received, drained.succeeded, drained.failed) == (4, 1, 3)
    assert elapsed < 3 * poller.retry_delay + 5, elapsed
    assert counts(sqs, poller.queue.url) == {"Messages": 0, "MessagesNotVisible": 0}
    dead = sqs.receive_message(QueueUrl=dead_letter_url, MaxNumberOfMessages=10)["Messages"]
    assert [message["Body"] for message in dead] == [bad]
    records = [record for function, event in invocations for record in event["Records"]]
    assert {function for function, _ in invocations} == {WORKER}
    assert [r["body"] for r in records].count(good) == 1
    assert [r["attributes"]["ApproximateReceiveCount"] for r in records if r["body"] == bad] == [
        "1",
        "2",
        "3",
    ]


def test_worker_gets_the_event_lambdas_sqs_event_source_sends(
    poller: QueuePoller, sqs: Any, invocations: list[tuple[str, dict[str, Any]]]
) -> None:
    # Given
    bodies = [a_job_for_a_missing_thread() for _ in range(12)]
    for body in bodies:
        sqs.send_message(QueueUrl=poller.queue.url, MessageBody=body)
    # When
    drained, empty = poller.drain(deadline_seconds=15)
    # Then: batches of at most BatchSize, each record shaped as Lambda sends it
    assert empty and drained.succeeded == 12
    events = [event for function, event in invocations if function == WORKER]
    assert all(1 <= len(event["Records"]) <= poller.source.batch_size for event in events)
    records = [record for event in events for record in event["Records"]]
    assert sorted(record["body"] for record in records) == sorted(bodies)
    for record in records:
        assert record["eventSource"] == "aws:sqs"
        assert record["eventSourceARN"] == poller.queue.arn
        assert record["awsRegion"] == "us-east-1"
        assert record["messageId"] and record["receiptHandle"] and record["md5OfBody"]
        assert record["attributes"]["ApproximateReceiveCount"] == "1"
        assert {"SentTimestamp", "ApproximateFirstReceiveTimestamp"} <= set(record["attributes"])
        assert record["messageAttributes"] == {}


def test_a_crashed_invocation_returns_the_whole_batch(
    poller: QueuePoller, sqs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given: the worker crashes before reporting anything
    sqs.send_message(QueueUrl=poller.queue.url, MessageBody=a_job_for_a_missing_thread())

    def crash(function: str, event: dict[str, Any]) -> Any:
        raise RuntimeError("worker crashed")

    monkeypatch.setattr(runtime, "invoke", crash)
    # When
    first = poller.poll(0)
    # Then: nothing deleted; the message is back after the retry delay
    assert (first.received, first.succeeded, first.failed) == (1, 0, 1)
    again = wait_for(lambda: poller.poll(0).received, poller.retry_delay + 3, "message back")
    assert again == 1


@pytest.mark.parametrize(
    ("reply", "failed"),
    [
        ({"batchItemFailures": []}, set()),
        (None, set()),
        ({}, set()),
        ({"batchItemFailures": [{"itemIdentifier": "b"}]}, {"b"}),
        ({"batchItemFailures": [{"itemIdentifier": "zz"}]}, {"a", "b"}),
        ({"batchItemFailures": [{"itemIdentifier": ""}]}, {"a", "b"}),
        ({"batchItemFailures": "b"}, {"a", "b"}),
        ("not a response", {"a", "b"}),
    ],
)
def test_partial_batch_replies_are_read_as_lambda_reads_them(reply: Any, failed: set[str]) -> None:
    assert failed_ids(reply, {"a", "b"}) == failed


def test_make_dev_drains_a_turns_summary_job_as_it_arrives(
    embedded_store: embedded.EmbeddedStore,
    empty_queues: None,
    alice: Api,
    make_project: Callable[..., str],
) -> None:
    # Given: a thread with more saved messages than the window holds, so the next turn
    # moves some out of the window and queues a summary job
    project = make_project(alice)
    thread = alice.post(f"/projects/{project}/conversations", {"title": "Shop"}).body["id"]
    grow_thread(alice.sub or "", project, thread, 30)
    context = f"/projects/{project}/conversations/{thread}/context"
    assert alice.get(context).body["summary"] == ""
    worker = Background(embedded_store, schedule_seconds=0)
    worker.start()
    try:
        # When
        turn = alice.post(
            f"/projects/{project}/chat",
            {"message": "We sell candles.", "conversationId": thread},
        )
        assert turn.status == 200, turn
        # Then
        summary = wait_for(lambda: alice.get(context).body["summary"], 10, "a summary")
    finally:
        worker.stop(timeout=10)
    assert "old message" in summary
    assert not any(running.is_alive() for running in worker._threads)


def test_schedules_run_each_input_on_a_timer_and_survive_a_failing_round(
    embedded_store: embedded.EmbeddedStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given: a maintenance function that fails its first call and then reports, recorded
    calls: list[tuple[str, dict[str, Any]]] = []
    lock = threading.Lock()

    def maintenance(function: str, event: dict[str, Any]) -> Any:
        with lock:
            calls.append((function, event))
            if len(calls) == 1:
                raise RuntimeError("first round fails")
        return {"job": event.get("job"), "read": 0, "changed": 0}

    monkeypatch.setattr(runtime, "invoke", maintenance)
    expected = [(schedule.function, schedule.input) for schedule in template.schedules()]
    timer = Background(embedded_store, schedule_seconds=0.2, drain=False)
    # When
    timer.start()
    try:
        wait_for(lambda: len(calls) >= 3 * len(expected), 5, "three rounds of schedules")
    finally:
        timer.stop(timeout=5)
    # Then: every round invokes each schedule's function with its Input, in template order
    assert expected and ("MaintenanceFunction", {"job": "prune-sessions"}) in expected
    rounds = len(calls) // len(expected)
    assert calls[: rounds * len(expected)] == expected * rounds
    assert not any(running.is_alive() for running in timer._threads)


def test_run_job_runs_one_schedule_by_its_job_name(embedded_store: embedded.EmbeddedStore) -> None:
    # When
    report = run_job("expire-memories", embedded_store)
    # Then
    assert report["job"] == "expire-memories"
    assert {"read", "changed"} <= set(report)
    with pytest.raises(KeyError):
        run_job("no-such-job", embedded_store)


@pytest.fixture(autouse=True)
def _no_leftover_threads() -> Iterator[None]:
    before = set(threading.enumerate())
    yield
    leftover = [
        thread.name
        for thread in set(threading.enumerate()) - before
        if thread.name.startswith("recall-local-") and thread.is_alive()
    ]
    assert not leftover, leftover


def test_a_failing_extraction_leaves_the_turn_as_answered_and_is_dead_lettered(
    poller: QueuePoller,
    sqs: Any,
    embedded_store: embedded.EmbeddedStore,
    alice: Api,
    make_project: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a worker whose extraction fails every time (the store down, a bug…)
    runner = job_runner()
    real_run = runner.run

    def failing(job: Any, now: Any = None) -> None:
        if isinstance(job, ExtractJob):
            raise RuntimeError("extraction broke")
        real_run(job, now)

    monkeypatch.setattr(runner, "run", failing)
    # And a thread whose latest turn queued an extraction
    project = make_project(alice)
    thread = alice.post(f"/projects/{project}/chat", {"message": "hello"}).body["conversation"]
    for text in ("what can you do?", "Always keep the header dark."):
        reply = alice.post(
            f"/projects/{project}/chat", {"message": text, "conversationId": thread["id"]}
        )
        assert reply.status == 200, reply
    before = alice.get(f"/projects/{project}/conversations/{thread['id']}").body
    # When the worker drains the queue
    drained, empty = poller.drain(deadline_seconds=15)
    # Then the extraction was tried three times and waits in the dead-letter queue
    assert empty and drained.failed == 3
    dead_letter_url = embedded_store.queues["MemoryJobsDeadLetterQueue"].url
    dead = sqs.receive_message(QueueUrl=dead_letter_url, MaxNumberOfMessages=10)["Messages"]
    assert [json.loads(message["Body"])["kind"] for message in dead] == ["extract"]
    # And the thread is exactly as the turn left it
    assert alice.get(f"/projects/{project}/conversations/{thread['id']}").body == before
    assert before["messages"][-1]["id"] == reply.body["message"]["id"]
