"""Faults put on a botocore client below its retry handler: an armed request's HTTP attempts
are answered with an AWS error (or a dropped connection) instead of being sent, so
botocore's own retry policy sees them exactly as it would see AWS's, and the test sees
which attempts it made and what backoff it asked for."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
import json
import threading
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders
from botocore.exceptions import EndpointConnectionError
from botocore.retries.standard import ExponentialBackoff

# A fault persists for this many attempts: once (a retry recovers) or past any retry bound.
ONCE = 1
ALWAYS = 1_000


@dataclass(frozen=True)
class Fault:
    """One AWS failure as the wire carries it: an error code with its HTTP status (and,
    for a cancelled transaction, its reasons), or no answer at all (``status`` 0)."""

    name: str
    code: str
    status: int
    reasons: tuple[str, ...] = ()
    only_on: str | None = None  # an operation this fault can come from, or any

    @property
    def dropped(self) -> bool:
        return self.status == 0

    def fits(self, operation: str) -> bool:
        return self.only_on is None or self.only_on == operation

    def response(self, url: str) -> AWSResponse:
        body: dict[str, Any] = {"__type": f"com.amazonaws.dynamodb.v20120810#{self.code}"}
        body["message"] = f"injected {self.name}"
        if self.reasons:
            body["CancellationReasons"] = [{"Code": reason} for reason in self.reasons]
        raw = _Raw(json.dumps(body).encode())
        headers = HTTPHeaders()
        headers["content-type"] = "application/x-amz-json-1.0"
        headers["x-amzn-requestid"] = "injected-fault"
        return AWSResponse(url, self.status, headers, raw)


class _Raw:
    """The little of urllib3's response AWSResponse reads."""

    def __init__(self, content: bytes) -> None:
        self._content = content

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._content


THROTTLES = (
    Fault("provisioned throughput exceeded", "ProvisionedThroughputExceededException", 400),
    Fault("throttling", "ThrottlingException", 400),
    Fault("request limit exceeded", "RequestLimitExceeded", 400),
    Fault(
        "transaction cancelled by throttling",
        "TransactionCanceledException",
        400,
        ("None", "ThrottlingError"),
        only_on="TransactWriteItems",
    ),
)
TRANSIENTS = (
    Fault("internal server error", "InternalServerError", 500),
    Fault("service unavailable", "ServiceUnavailable", 503),
    Fault("connection refused", "", 0),
)

# SQS's own word for throttling (not DynamoDB's): botocore retries it, then raises it.
QUEUE_THROTTLED = Fault("queue throttled", "RequestThrottled", 400)


@dataclass
class Injector:
    """Records every request a client makes (one per API call, whatever its retries), and
    answers the armed one's attempts with ``fault`` for ``times`` attempts.

    A turn sends some requests at once, from several threads, so their order varies from
    run to run: a request is known by its operation and how many of that operation came
    before it in ``plan`` (a clean run's requests), and each thread remembers which request
    it is sending."""

    requests: list[str] = field(default_factory=list)
    attempts: list[str] = field(default_factory=list)
    faulted: list[str] = field(default_factory=list)
    target: tuple[str, int] | int | None = None
    fault: Fault | None = None
    times: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _sending: threading.local = field(default_factory=threading.local)

    def arm(self, at: int, fault: Fault, times: int, plan: list[str] | None = None) -> None:
        """Fault the ``at``-th request: of ``plan`` (by operation and occurrence) when
        given, else of this run's order."""
        self.requests.clear()
        self.attempts.clear()
        self.faulted.clear()
        self.target = (plan[at], plan[:at].count(plan[at])) if plan and at >= 0 else at
        self.fault, self.times = fault, times

    def disarm(self) -> None:
        self.target, self.fault = None, None

    def on_call(self, model: Any, **_: Any) -> None:
        with self._lock:
            name = model.name
            self._sending.request = (name, self.requests.count(name), len(self.requests))
            self.requests.append(name)

    def on_send(self, request: Any, **_: Any) -> AWSResponse | None:
        name, occurrence, index = getattr(self._sending, "request", ("?", 0, -1))
        with self._lock:
            self.attempts.append(name)
            armed = self.fault is not None and self.target in ((name, occurrence), index)
            if not armed or self.fault is None or len(self.faulted) >= self.times:
                return None
            self.faulted.append(name)
            fault = self.fault
        if fault.dropped:
            raise EndpointConnectionError(endpoint_url=request.url)
        return fault.response(request.url)


@contextmanager
def injected(client: Any, service: str = "dynamodb") -> Iterator[Injector]:
    """An injector on ``client`` for the block: ``before-call`` counts requests,
    ``before-send`` (one per HTTP attempt, under the retry handler) answers the faults."""
    injector = Injector()
    events = client.meta.events
    events.register(f"before-call.{service}", injector.on_call, unique_id="fault-calls")
    events.register(f"before-send.{service}", injector.on_send, unique_id="fault-sends")
    try:
        yield injector
    finally:
        events.unregister(f"before-call.{service}", unique_id="fault-calls")
        events.unregister(f"before-send.{service}", unique_id="fault-sends")


@dataclass
class Collisions:
    """The transactions a client sent under ``colliding``, and how many were cancelled."""

    sent: int = 0
    cancelled: int = 0


@contextmanager
def colliding(
    client: Any, at: Callable[[dict[str, Any]], bool], times: int
) -> Iterator[Collisions]:
    """DynamoDB cancelling the client's next ``times`` transactions because another
    transaction was writing an item that ``at`` picks at that very moment: reason
    ``TransactionConflict`` on those items, ``None`` on the rest, as AWS sends it when two
    transactions touch one item at once. The embedded store serialises transactions, so
    it never does; botocore does not retry it."""
    seen = Collisions()

    def on_send(request: Any, **_: Any) -> AWSResponse | None:
        seen.sent += 1
        if seen.cancelled >= times:
            return None
        seen.cancelled += 1
        items = json.loads(request.body)["TransactItems"]
        reasons = tuple("TransactionConflict" if at(item) else "None" for item in items)
        met = Fault("transaction conflict", "TransactionCanceledException", 400, reasons)
        return met.response(request.url)

    events = client.meta.events
    events.register("before-send.dynamodb.TransactWriteItems", on_send, unique_id="collide")
    try:
        yield seen
    finally:
        events.unregister("before-send.dynamodb.TransactWriteItems", unique_id="collide")


@dataclass
class Backoffs:
    """The delays botocore's standard retry mode asked for; none of them is slept."""

    asked: list[float] = field(default_factory=list)


@contextmanager
def no_backoff_sleep() -> Iterator[Backoffs]:
    """botocore's backoff has no setting of its own, so the delay it computes is recorded
    and replaced by zero: the retries stay, the run stays fast."""
    backoffs = Backoffs()
    original = ExponentialBackoff.delay_amount

    def instant(self: ExponentialBackoff, context: Any) -> float:
        backoffs.asked.append(original(self, context))
        return 0.0

    ExponentialBackoff.delay_amount = instant  # type: ignore[method-assign]
    try:
        yield backoffs
    finally:
        ExponentialBackoff.delay_amount = original  # type: ignore[method-assign]
