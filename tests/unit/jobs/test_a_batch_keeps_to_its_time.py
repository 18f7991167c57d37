"""A worker batch starts a job only while its invocation has time for one more: Lambda ends
an invocation at its Timeout and then returns the whole batch, finished jobs included,
after the queue's visibility timeout, each receive counting toward the dead-letter queue."""

from __future__ import annotations

from local import template
from recall.domain.jobs import AnyJob, SummarizeJob, job_body
from recall.errors import Throttled
from recall.services.jobs import JobBatch
from recall.settings import Settings

RESERVE = 100
JOB_SECONDS = 30


class Invocation:
    """An invocation's clock, and the jobs it ran, each taking ``JOB_SECONDS``."""

    def __init__(self, seconds: float) -> None:
        self.left = seconds
        self.ran: list[AnyJob] = []

    def seconds_left(self) -> float:
        return self.left

    def run(self, job: AnyJob) -> None:
        self.ran.append(job)
        self.left -= JOB_SECONDS


class Queue:
    """The jobs queue as a list, or one that refuses every send."""

    def __init__(self, refuses: bool = False) -> None:
        self.refuses = refuses
        self.jobs: list[AnyJob] = []

    def send(self, jobs: list[AnyJob]) -> int:
        if self.refuses:
            raise Throttled("1 memory jobs were not queued.")
        self.jobs.extend(jobs)
        return len(jobs)


def jobs(count: int) -> list[SummarizeJob]:
    return [
        SummarizeJob(user_id="u", project_id="p", conversation_id=f"c{n}") for n in range(count)
    ]


def run_batch(invocation: Invocation, queue: Queue, batch: list[SummarizeJob]) -> list[str]:
    """The records of the batch through a ``JobBatch``; the ids left to SQS's redelivery."""
    worker = JobBatch(invocation, queue, RESERVE, invocation.seconds_left)  # type: ignore[arg-type]
    for n, job in enumerate(batch):
        worker.run(f"record-{n}", job_body(job))
    return worker.hand_back()


def test_a_job_starts_only_while_the_invocation_has_its_worst_case_left() -> None:
    # Given an invocation of 200 s and ten jobs of 30 s each
    invocation, queue, batch = Invocation(200), Queue(), jobs(10)

    # When
    refused = run_batch(invocation, queue, batch)

    # Then four start (at 200, 170, 140 and 110 s left), and the six others go back to the
    # queue as new messages, none reported as failed
    assert invocation.ran == batch[:4]
    assert queue.jobs == batch[4:]
    assert refused == []


def test_the_first_job_starts_however_little_time_is_left() -> None:
    # Given an invocation with less than the reserve left from the start
    invocation, queue, batch = Invocation(RESERVE / 2), Queue(), jobs(3)

    # When
    run_batch(invocation, queue, batch)

    # Then the first runs, so every invocation moves the queue on
    assert invocation.ran == batch[:1]
    assert queue.jobs == batch[1:]


def test_a_batch_with_time_for_every_job_hands_nothing_back() -> None:
    invocation, queue, batch = Invocation(1_000), Queue(), jobs(10)
    assert run_batch(invocation, queue, batch) == []
    assert (invocation.ran, queue.jobs) == (batch, [])


def test_jobs_the_queue_will_not_take_back_are_left_to_sqs_redelivery() -> None:
    # Given a queue that refuses the jobs handed back
    invocation, queue, batch = Invocation(RESERVE / 2), Queue(refuses=True), jobs(3)

    # When
    refused = run_batch(invocation, queue, batch)

    # Then the records not started are the batch's failures, which SQS delivers again
    assert invocation.ran == batch[:1]
    assert refused == ["record-1", "record-2"]


def test_the_worker_timeout_leaves_the_first_job_its_worst_case() -> None:
    # The reserve covers a job's one model call through all its attempts, and the worker's
    # Timeout exceeds the reserve, so the job every invocation starts can finish
    defaults = Settings()
    worst_case = defaults.model_max_attempts * defaults.model_read_timeout_seconds
    assert defaults.worker_job_reserve_seconds >= worst_case
    assert template.function_timeout("WorkerFunction") > defaults.worker_job_reserve_seconds
