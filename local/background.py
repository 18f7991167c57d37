"""What AWS does around the functions that no HTTP request reaches, done in-process:

- Lambda's SQS event source: receive up to ``BatchSize`` messages of a template queue, invoke
  the function with the event Lambda would send, delete the messages that succeeded and
  return the ``batchItemFailures`` to the queue;
- EventBridge Scheduler: invoke a function with each ``ScheduleV2`` event's ``Input``, every
  ``LOCAL_SCHEDULE_SECONDS`` (the setting ``local_schedule_seconds``, 60 by default; 0 turns
  the timer off) instead of each schedule's expression.

``make dev`` runs both in daemon threads (``Background``) that log any failure and go on,
and stop with the server; ``make job`` runs one job once (``run_job``).

Locally a failed message is visible again after ``RETRY_DELAY_SECONDS`` (1 s) instead of the
queue's ``VisibilityTimeout`` (720 s), so one that keeps failing reaches the dead-letter
queue within seconds: moto's redrive moves it on the first receive after its
``maxReceiveCount``-th."""

from __future__ import annotations

from collections.abc import Sequence
import copy
from dataclasses import dataclass
import json
import threading
import time
import traceback
from typing import TYPE_CHECKING, Any

import boto3

from local import embedded, runtime, template
from recall.settings import get_settings

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import MessageTypeDef

RETRY_DELAY_SECONDS = 1
POLL_WAIT_SECONDS = 1
DRAIN_DEADLINE_SECONDS = 60
DRAIN = "drain"
REGION = "us-east-1"


def say(text: str) -> None:
    """One log line on stdout, like the server's request lines."""
    print(text, flush=True)


def _message_attribute(value: dict[str, Any]) -> dict[str, Any]:
    """An SQS message attribute as Lambda's event spells it."""
    return {
        "stringValue": value.get("StringValue"),
        "binaryValue": value.get("BinaryValue"),
        "stringListValues": list(value.get("StringListValues", [])),
        "binaryListValues": list(value.get("BinaryListValues", [])),
        "dataType": value.get("DataType"),
    }


def sqs_event(messages: Sequence[MessageTypeDef], queue_arn: str) -> dict[str, Any]:
    """The event Lambda's SQS event source sends a function for these received messages."""
    return {
        "Records": [
            {
                "messageId": message["MessageId"],
                "receiptHandle": message["ReceiptHandle"],
                "body": message["Body"],
                "attributes": dict(message.get("Attributes", {})),
                "messageAttributes": {
                    name: _message_attribute(dict(value))
                    for name, value in message.get("MessageAttributes", {}).items()
                },
                "md5OfBody": message["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": REGION,
            }
            for message in messages
        ]
    }


def failed_ids(reply: Any, message_ids: set[str]) -> set[str]:
    """The messages Lambda returns to the queue after a reply with
    ``ReportBatchItemFailures``: none for an empty or null ``batchItemFailures``, those it
    lists, and all of them when it names an unknown or empty id or is not such a reply."""
    if reply is None or reply == {}:
        return set()
    if not isinstance(reply, dict):
        return set(message_ids)
    failures = reply.get("batchItemFailures")
    if failures is None:
        return set()
    if not isinstance(failures, list):
        return set(message_ids)
    named = {
        failure.get("itemIdentifier") if isinstance(failure, dict) else None for failure in failures
    }
    if not named <= message_ids:
        return set(message_ids)
    return {str(message_id) for message_id in named}


@dataclass
class Drained:
    """What polling a queue did: messages received, deleted after success, returned."""

    received: int = 0
    succeeded: int = 0
    failed: int = 0

    def __iadd__(self, other: Drained) -> Drained:
        self.received += other.received
        self.succeeded += other.succeeded
        self.failed += other.failed
        return self


class QueuePoller:
    """Lambda's event source mapping for one ``SQS`` event of the template."""

    def __init__(
        self,
        source: template.QueueSource,
        queue: embedded.LocalQueue,
        endpoint: str,
        retry_delay: int = RETRY_DELAY_SECONDS,
    ) -> None:
        self.source = source
        self.queue = queue
        self.retry_delay = retry_delay
        self.client: SQSClient = boto3.client("sqs", endpoint_url=endpoint, region_name=REGION)

    def poll(self, wait_seconds: int = 0) -> Drained:
        """One receive (long-polling ``wait_seconds``) and, if it got messages, one
        invocation with them."""
        messages = self.client.receive_message(
            QueueUrl=self.queue.url,
            MaxNumberOfMessages=min(self.source.batch_size, 10),
            WaitTimeSeconds=wait_seconds,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            return Drained()
        started = time.perf_counter()
        handles = {message["MessageId"]: message["ReceiptHandle"] for message in messages}
        failed = self._invoke(sqs_event(messages, self.queue.arn), set(handles))
        done = [message_id for message_id in handles if message_id not in failed]
        if done:
            self.client.delete_message_batch(
                QueueUrl=self.queue.url,
                Entries=[
                    {"Id": str(n), "ReceiptHandle": handles[message_id]}
                    for n, message_id in enumerate(done)
                ],
            )
        if failed:
            self.client.change_message_visibility_batch(
                QueueUrl=self.queue.url,
                Entries=[
                    {
                        "Id": str(n),
                        "ReceiptHandle": handles[message_id],
                        "VisibilityTimeout": self.retry_delay,
                    }
                    for n, message_id in enumerate(sorted(failed))
                ],
            )
        elapsed = (time.perf_counter() - started) * 1000
        say(
            f"SQS {self.queue.name} -> {self.source.function}: {len(messages)} received, "
            f"{len(done)} done, {len(failed)} failed (back in {self.retry_delay} s) "
            f"{elapsed:.0f}ms"
        )
        return Drained(len(messages), len(done), len(failed))

    def _invoke(self, event: dict[str, Any], message_ids: set[str]) -> set[str]:
        try:
            reply = runtime.invoke(self.source.function, event)
        except Exception:  # a crashed invocation returns the whole batch, as on Lambda
            traceback.print_exc()
            return set(message_ids)
        return failed_ids(reply, message_ids) if self.source.reports_failures else set()

    def waiting(self) -> int:
        """Messages visible, in flight or delayed: what a drain still has to see."""
        attributes = self.client.get_queue_attributes(
            QueueUrl=self.queue.url,
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            ],
        )["Attributes"]
        return sum(int(count) for count in attributes.values())

    def dead_letters(self) -> int:
        """Messages waiting in this queue's dead-letter queue (0 without one)."""
        policy = (
            self.client.get_queue_attributes(
                QueueUrl=self.queue.url, AttributeNames=["RedrivePolicy"]
            )
            .get("Attributes", {})
            .get("RedrivePolicy")
        )
        if not policy:
            return 0
        name = json.loads(policy)["deadLetterTargetArn"].rsplit(":", 1)[-1]
        url = self.client.get_queue_url(QueueName=name)["QueueUrl"]
        attributes = self.client.get_queue_attributes(
            QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"])

    def drain(self, deadline_seconds: float = DRAIN_DEADLINE_SECONDS) -> tuple[Drained, bool]:
        """Work the queue until nothing is left in it, failed messages included (each comes
        back after the retry delay until the redrive dead-letters it); ``(totals, empty)``,
        ``empty`` false when the deadline came first."""
        total = Drained()
        deadline = time.monotonic() + deadline_seconds
        while time.monotonic() < deadline:
            batch = self.poll(0)
            total += batch
            if batch.received:
                continue
            if self.waiting() == 0:
                return total, True
            time.sleep(0.2)
        return total, False


def pollers(store: embedded.EmbeddedStore) -> list[QueuePoller]:
    """One poller per ``SQS`` event in the template, over the store's queues."""
    return [
        QueuePoller(source, store.queues[source.queue], store.endpoint)
        for source in template.queue_sources()
    ]


def run_schedule(schedule: template.Schedule) -> Any:
    """Invoke the schedule's function with its ``Input``, as EventBridge Scheduler does."""
    return runtime.invoke(schedule.function, copy.deepcopy(schedule.input))


def run_schedules(schedules: Sequence[template.Schedule]) -> None:
    """One round of the timer: every schedule once, in template order, then one log line.
    A schedule that fails is logged, and the others still run."""
    started = time.perf_counter()
    outcomes = []
    for schedule in schedules:
        try:
            reply = run_schedule(schedule)
        except Exception:
            traceback.print_exc()
            reply = "failed"
        if isinstance(reply, dict):
            reply = {key: value for key, value in reply.items() if key != "job"}
        outcomes.append(f"{schedule.job} {json.dumps(reply, default=str)}")
    elapsed = (time.perf_counter() - started) * 1000
    say(f"SCHEDULES {' | '.join(outcomes)} {elapsed:.0f}ms")


def job_names() -> list[str]:
    """What ``make job JOB=…`` accepts: each schedule's job, and ``drain``."""
    return [schedule.job for schedule in template.schedules()] + [DRAIN]


def run_job(name: str, store: embedded.EmbeddedStore) -> dict[str, Any]:
    """One job, once: a schedule's invocation (its function's reply), or ``drain``: every
    template queue worked until it is empty."""
    if name == DRAIN:
        report: dict[str, Any] = {"job": DRAIN, "received": 0, "succeeded": 0, "failed": 0}
        empty, dead = True, 0
        for poller in pollers(store):
            drained, emptied = poller.drain()
            report["received"] += drained.received
            report["succeeded"] += drained.succeeded
            report["failed"] += drained.failed
            empty, dead = empty and emptied, dead + poller.dead_letters()
        report["empty"], report["deadLettered"] = empty, dead
        return report
    for schedule in template.schedules():
        if schedule.job == name:
            reply = run_schedule(schedule)
            say(f"JOB {name} -> {schedule.function}: {json.dumps(reply, default=str)}")
            return reply if isinstance(reply, dict) else {"job": name, "reply": reply}
    raise KeyError(name)


class Background:
    """The queue pollers and the schedule timer of ``make dev``, in daemon threads. Each
    logs whatever goes wrong and goes on; ``stop`` ends both (within a poll's wait)."""

    def __init__(
        self,
        store: embedded.EmbeddedStore,
        schedule_seconds: float | None = None,
        wait_seconds: int = POLL_WAIT_SECONDS,
        *,
        drain: bool = True,
    ) -> None:
        """``schedule_seconds`` defaults to the setting ``local_schedule_seconds``; ``drain``
        false leaves the queues alone (the timer only)."""
        self.pollers = pollers(store) if drain else []
        self.schedule_seconds = (
            get_settings().local_schedule_seconds if schedule_seconds is None else schedule_seconds
        )
        self.wait_seconds = wait_seconds
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for poller in self.pollers:
            self._spawn(f"recall-local-{poller.queue.name}", self._poll_forever, poller)
        if self.schedule_seconds > 0:
            self._spawn("recall-local-schedules", self._schedule_forever)

    def _spawn(self, name: str, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def stop(self, timeout: float = 30) -> None:
        self._stopping.set()
        for thread in self._threads:
            thread.join(timeout=timeout)

    def _poll_forever(self, poller: QueuePoller) -> None:
        while not self._stopping.is_set():
            try:
                poller.poll(self.wait_seconds)
            except Exception:
                if self._stopping.is_set():
                    return  # the store may already be going away
                traceback.print_exc()
                self._stopping.wait(1)

    def _schedule_forever(self) -> None:
        due = time.monotonic() + self.schedule_seconds
        while not self._stopping.wait(max(0.0, due - time.monotonic())):
            try:
                run_schedules(template.schedules())
            except Exception:
                traceback.print_exc()
            # A round that overran its interval is followed by the next at once, never by
            # a pile of them.
            due = max(due + self.schedule_seconds, time.monotonic())
