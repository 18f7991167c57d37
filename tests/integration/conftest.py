"""The real handlers called in-process with the events API Gateway would send, as
fresh users, over this process's embedded DynamoDB."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
import datetime as dt
import json
import threading
import types
from typing import Any
import uuid

import boto3
import pytest

from local import background, embedded, runtime
from recall.domain.sessions import SessionStep, SessionTally
from recall.settings import Settings, get_settings
from recall.store.dynamodb import dynamodb_client
from recall.store.exports import export_prefix, s3_client
from recall.store.idempotency import persistence_layer
from recall.store.sessions import SessionStore
from recall.wiring import data_service
from tests.integration.aws_limits import AwsLimits, S3Limits, key_limits

S3_LIMITS = S3Limits()


@pytest.fixture(scope="session", autouse=True)
def store_for_every_test(
    embedded_store: embedded.EmbeddedStore,
) -> Iterator[embedded.EmbeddedStore]:
    """The embedded store, with DynamoDB's limits (``aws_limits``) on the store's client and
    the idempotency table's (moto has none), and S3's multipart rules on the exports'
    client, so a request AWS would refuse fails here too.
    The edge reads current items through a client of its own, past the hook."""
    raw = boto3.client("dynamodb")

    def current(table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        found: dict[str, Any] | None = raw.get_item(
            TableName=table, Key=key, ConsistentRead=True
        ).get("Item")
        return found

    edge = AwsLimits(key_limits(), current)
    settings = get_settings()
    idempotency = persistence_layer(settings.idempotency_table, settings.dynamodb_max_attempts)
    clients = [dynamodb_client(), idempotency.client]
    for client in clients:
        client.meta.events.register("before-parameter-build.dynamodb", edge, unique_id="aws-limits")
    s3_client().meta.events.register("before-parameter-build.s3", S3_LIMITS, unique_id="s3-limits")
    yield embedded_store
    for client in clients:
        client.meta.events.unregister("before-parameter-build.dynamodb", unique_id="aws-limits")
    s3_client().meta.events.unregister("before-parameter-build.s3", unique_id="s3-limits")


@pytest.fixture
def s3_limits() -> S3Limits:
    """S3's rules on the exports' client, and the part sizes of uploads since this test began."""
    S3_LIMITS.parts.clear()
    return S3_LIMITS


class Reply:
    """A handler's API Gateway response, decoded."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw
        self.status: int = raw["statusCode"]
        body = raw.get("body") or ""
        self.body: Any = json.loads(body) if body else None
        self.headers: dict[str, str] = raw.get("headers") or {}

    def __repr__(self) -> str:
        return f"Reply({self.status}, {self.body!r})"


class Api:
    """Calls the real handlers with the events API Gateway would send, as one user."""

    def __init__(self, sub: str | None) -> None:
        self.sub = sub

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: str = "",
        headers: dict[str, str] | None = None,
    ) -> Reply:
        event = runtime.http_event(
            method, path, body=body, headers=headers, query=query, sub=self.sub
        )
        found = runtime.match_route(method, path)
        assert found, f"no route for {method} {path}"
        return Reply(runtime.invoke(found[0].function, event))

    def get(self, path: str, **kwargs: Any) -> Reply:
        return self.call("GET", path, **kwargs)

    def post(self, path: str, body: Any = None, **kwargs: Any) -> Reply:
        return self.call("POST", path, body, **kwargs)

    def put(self, path: str, body: Any = None, **kwargs: Any) -> Reply:
        return self.call("PUT", path, body, **kwargs)

    def patch(self, path: str, body: Any = None, **kwargs: Any) -> Reply:
        return self.call("PATCH", path, body, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> Reply:
        return self.call("DELETE", path, **kwargs)


def new_user() -> str:
    return f"user-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def as_user() -> Callable[[str | None], Api]:
    return Api


@pytest.fixture
def alice() -> Api:
    return Api(new_user())


@pytest.fixture
def bob() -> Api:
    return Api(new_user())


@pytest.fixture
def carol() -> Api:
    return Api(new_user())


@pytest.fixture
def make_project() -> Callable[..., str]:
    """Creates a project owned by ``owner``; ``members`` maps other users to roles."""

    def make(owner: Api, members: dict[Api, str] | None = None, **context: Any) -> str:
        reply = owner.post("/projects", {"name": "Corner Shop", "context": context})
        assert reply.status == 201, reply
        project_id: str = reply.body["id"]
        for member, role in (members or {}).items():
            added = owner.put(f"/projects/{project_id}/members/{member.sub}", {"role": role})
            assert added.status == 201, added
        return project_id

    return make


@pytest.fixture
def drain(embedded_store: embedded.EmbeddedStore) -> Callable[[], None]:
    """Run every queued job (import chunks included) until the queue is empty."""

    def run() -> None:
        for poller in background.pollers(embedded_store):
            _, empty = poller.drain(deadline_seconds=60)
            assert empty

    return run


def transactions_after_every_racer_read(monkeypatch: pytest.MonkeyPatch, racers: int) -> None:
    """Race ``racers`` threads as separate Lambda instances would: each thread's first
    transaction waits until every racer has read, then the transactions apply one at a
    time, as DynamoDB applies conditional writes (moto's server does not)."""
    client = dynamodb_client()
    transact = client.transact_write_items
    all_read = threading.Barrier(racers, timeout=20)
    one_at_a_time = threading.Lock()
    first_write: set[int] = set()

    def serialised(**kwargs: Any) -> Any:
        if threading.get_ident() not in first_write:
            first_write.add(threading.get_ident())
            all_read.wait()
        with one_at_a_time:
            return transact(**kwargs)

    monkeypatch.setattr(client, "transact_write_items", serialised)


# Where Powertools' idempotency reads the time, each as ``dt.datetime.now()``: when a
# record's in-progress time ends (now + the Lambda's time left) and whether it has ended.
IDEMPOTENCY_CLOCKS = (
    "aws_lambda_powertools.utilities.idempotency.base",
    "aws_lambda_powertools.utilities.idempotency.persistence.base",
    "aws_lambda_powertools.utilities.idempotency.persistence.datarecord",
    "aws_lambda_powertools.utilities.idempotency.persistence.dynamodb",
)


class RecordClock:
    """The time as the idempotency records see it: stopped when the test begins and moved
    only by ``advance``, so whether an invocation's time has run out is the test's say,
    never a race with the machine's speed."""

    def __init__(self) -> None:
        self.now = dt.datetime.now()

    def advance(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)

    def millis(self) -> int:
        return int(self.now.timestamp() * 1000)

    def lambda_context(self, function: str, seconds_left: float) -> runtime.LambdaContext:
        """A Lambda context with ``seconds_left`` to run, counted on this clock."""
        return ClockedContext(
            function_name=function,
            aws_request_id=f"on-the-record-clock-{uuid.uuid4().hex[:8]}",
            deadline_ms=self.millis() + int(seconds_left * 1000),
            clock=self,
        )


@dataclass
class ClockedContext(runtime.LambdaContext):
    """A Lambda context whose time left is counted on a RecordClock."""

    clock: RecordClock | None = None

    def get_remaining_time_in_millis(self) -> int:
        assert self.clock is not None
        return max(0, self.deadline_ms - self.clock.millis())


@pytest.fixture
def record_clock(monkeypatch: pytest.MonkeyPatch) -> RecordClock:
    clock = RecordClock()

    class Stopped(dt.datetime):
        @classmethod
        def now(cls, tz: dt.tzinfo | None = None) -> Stopped:
            moment = clock.now if tz is None else clock.now.astimezone(tz)
            return cls.combine(moment.date(), moment.time(), moment.tzinfo)

    stopped = types.SimpleNamespace(**{**vars(dt), "datetime": Stopped})
    for module in IDEMPOTENCY_CLOCKS:
        monkeypatch.setattr(f"{module}.dt", stopped)
    return clock


@pytest.fixture
def export_settings() -> Iterator[Callable[..., None]]:
    """Other export limits on the wired data service (``export_max_bytes=0`` makes every
    export a large one), restored afterwards."""
    service = data_service()
    original = service._settings

    def use(**changes: Any) -> None:
        service._settings = original.model_copy(update=changes)

    yield use
    service._settings = original


def exported_objects(user: str, project: str) -> list[str]:
    """The keys of the user's large exports of the project in the exports bucket."""
    listed = s3_client().list_objects_v2(
        Bucket=get_settings().exports_bucket, Prefix=export_prefix(user, project)
    )
    return [found["Key"] for found in listed.get("Contents", [])]


def live_session_item(
    settings: Settings, user_id: str, project_id: str, started_at: str
) -> dict[str, Any]:
    """A live session's item as the turn that started it at ``started_at`` puts it."""
    tally = SessionTally(started_at, started_at, 1, 10)
    step = SessionStep(tally, None, carried=False, started=True, ends=None)
    item: dict[str, Any] = SessionStore(settings).start_request(user_id, project_id, step)["Item"]
    return item
