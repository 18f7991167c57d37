"""The DynamoDB client, item codec and error translation every table module shares."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from decimal import Context, Decimal
from functools import lru_cache
import threading
import time
from typing import TYPE_CHECKING, Any

import boto3
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.config import Config
from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError
from botocore.retries.standard import (
    RetryContext,
    ThrottledRetryableChecker,
    TransientRetryableChecker,
)
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from recall import retry
from recall.domain.numbers import NUMBER_MAX_DIGITS, storable_number
from recall.errors import Conflict, DomainError, Throttled, Unavailable
from recall.settings import get_settings

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

Item = dict[str, Any]

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()

BATCH_GET_MAX_KEYS = 100
BATCH_WRITE_MAX_ITEMS = 25

_THROTTLING = {
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
}


_making_client = threading.Lock()


def dynamodb_client() -> DynamoDBClient:
    """The process's one client. A client is thread-safe once made, but making one through
    boto3's default session is not: a turn's first requests go out from several threads at
    once, so the first of them makes it under a lock and the others wait for it."""
    with _making_client:
        return _new_client()


@lru_cache(maxsize=1)
def _new_client() -> DynamoDBClient:
    """Made on first use, never at import, so tests can point it at moto first. botocore's
    standard mode retries throttling, 5xx and dropped connections with jittered backoff;
    ``total_max_attempts`` counts the first try, so the setting means attempts in all
    (botocore's ``max_attempts`` would add one)."""
    attempts = get_settings().dynamodb_max_attempts
    return boto3.client(
        "dynamodb", config=Config(retries={"mode": "standard", "total_max_attempts": attempts})
    )


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, list):
        return [_plain(part) for part in value]
    if isinstance(value, dict):
        return {key: _plain(part) for key, part in value.items()}
    if isinstance(value, set):
        return {_plain(part) for part in value}
    return value


_EXACT = Context(prec=NUMBER_MAX_DIGITS)
# Every integer under this has at most 38 digits: DynamoDB holds it as it is.
_INT_EXACT = 10**NUMBER_MAX_DIGITS


class UnstorableNumber(ValueError):
    """A number DynamoDB cannot hold exactly reached the codec. Writers check what they are
    sent (``storable_number``) and turns keep a model's such numbers as text, so this is a
    bug; it is refused, never rounded to fit."""


def _dynamo_ready(value: Any) -> Any:
    if isinstance(value, bool) or (isinstance(value, int) and abs(value) < _INT_EXACT):
        return value
    if isinstance(value, int | float):
        if not storable_number(value):
            # The value is left out: it may be the caller's content.
            raise UnstorableNumber(
                "A number DynamoDB cannot hold exactly (more than 38 significant digits, "
                "or out of its range) was refused rather than rounded."
            )
        if isinstance(value, float):
            return Decimal(str(value))
        # At most 38 significant digits: dropping the trailing zeros is exact.
        return Decimal(value).normalize(_EXACT)
    if isinstance(value, list):
        return [_dynamo_ready(part) for part in value]
    if isinstance(value, dict):
        return {key: _dynamo_ready(part) for key, part in value.items()}
    return value


def to_item(values: Mapping[str, Any]) -> Item:
    """Plain values to DynamoDB's typed form; ``None`` values are left out."""
    return {
        key: _serializer.serialize(_dynamo_ready(value))
        for key, value in values.items()
        if value is not None
    }


class StoredItem(BaseModel):
    """Base of the tables' item models: attribute names on the wire are the fields'
    camelCase. Read with ``Model.model_validate(from_item(item))``, write with ``.item()``."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    def item(self) -> Item:
        return to_item(self.model_dump(mode="json", by_alias=True, exclude_none=True))


def to_value(value: Any) -> Any:
    return _serializer.serialize(_dynamo_ready(value))


def from_item(item: Mapping[str, Any]) -> dict[str, Any]:
    return {key: _plain(_deserializer.deserialize(value)) for key, value in item.items()}


# A transaction's cancellation reason for an item another transaction held at that moment.
COLLISION = "TransactionConflict"
_CONFLICTS = {"ConditionalCheckFailed", COLLISION}
_THROTTLED_REASONS = _THROTTLING | {"ProvisionedThroughputExceeded", "ThrottlingError"}


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


_TRANSIENT = {
    "InternalServerError",
    "ServiceUnavailable",
    "RequestTimeout",
    "RequestTimeoutException",
}
# botocore's own lists of what any AWS service means by "slow down" (SQS's
# RequestThrottled, Lambda's TooManyRequestsException, S3's SlowDown, ...) and by a
# passing fault: the codes its standard retry mode retries.
_ANY_THROTTLING = ThrottledRetryableChecker()
_ANY_TRANSIENT = TransientRetryableChecker()
BUSY = "The store is busy; try again shortly."
UNAVAILABLE = "The store is unavailable for a moment; nothing was saved, try again shortly."
SERVICE_BUSY = "A service we depend on is busy; nothing was done, try again shortly."


def collided(exc: ClientError) -> bool:
    """Whether DynamoDB refused the write only because another transaction was writing one
    of its items at that moment (``TransactionConflict``): nothing failed a condition, so
    the same write may land if sent again. botocore does not retry it."""
    code = error_code(exc)
    if code == "TransactionConflictException":
        return True
    if code != "TransactionCanceledException":
        return False
    reasons = set(cancellation_codes(exc))
    return COLLISION in reasons and reasons <= {COLLISION, "None"}


def translate(exc: ClientError, conflict_message: str = "The item changed meanwhile.") -> Exception:
    """DynamoDB's error codes, and any service's throttling and passing faults, as domain
    errors; anything unexpected is re-raised as is. Throttling and transient faults reach
    here only once botocore's retries ran out. A collision with another transaction is a
    ``Conflict`` that says when to try again."""
    code = error_code(exc)
    if collided(exc):
        return Conflict(conflict_message, retry_after=get_settings().retry_after_seconds)
    if code == "ConditionalCheckFailedException":
        return Conflict(conflict_message)
    if code == "TransactionCanceledException":
        # Read the reasons exactly: only a failed condition or a competing transaction is a
        # conflict; a reason like ValidationError is a request DynamoDB refused (a bug).
        reasons = set(cancellation_codes(exc))
        if reasons & _THROTTLED_REASONS:
            return Throttled(BUSY)
        if not reasons or (reasons & _CONFLICTS and reasons <= _CONFLICTS | {"None"}):
            return Conflict(conflict_message)
        return exc
    if code in _THROTTLING:
        return Throttled(BUSY)
    # Another service's codes (SQS, Lambda, KMS, S3, ...), as botocore's standard retry
    # mode reads them: its throttling, then its passing faults.
    context = RetryContext(attempt_number=1, parsed_response=exc.response)
    if _ANY_THROTTLING.is_retryable(context):
        return Throttled(SERVICE_BUSY)
    status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
    if code in _TRANSIENT or status >= 500:
        return Unavailable(UNAVAILABLE)
    if _ANY_TRANSIENT.is_retryable(context):
        return Unavailable(SERVICE_BUSY)
    return exc


def fault_of(exc: BaseException) -> DomainError | None:
    """What an AWS call's failure means to a caller once its retries ran out: throttling
    (``Throttled``), a transient fault or a connection that never answered
    (``Unavailable``), of DynamoDB or any other service, or None for anything else (a
    bug). Follows ``raise … from`` causes, so a fault a library wrapped (the idempotency
    layer does) is still recognised."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ClientError):
            found = translate(seen)
            return found if isinstance(found, (Throttled, Unavailable)) else None
        if isinstance(seen, (BotoConnectionError, HTTPClientError)):
            return Unavailable(UNAVAILABLE)
        seen = seen.__cause__
    return None


def cancellation_codes(exc: ClientError) -> list[str]:
    return [
        str(reason.get("Code", "None")) for reason in exc.response.get("CancellationReasons", [])
    ]


def chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _until_processed(
    send: Callable[[Any], Any],
    requests: Any,
    attempts: int,
    base_seconds: float,
    sleep: Callable[[float], None],
    busy: str,
) -> None:
    """What a batch call leaves unprocessed, under the retry policy (``recall.retry``):
    ``send`` returns what is left; at most ``attempts`` calls, then ``Throttled``."""
    for _ in retry.attempts(attempts, base_seconds, sleep=sleep):
        requests = send(requests)
        if not requests:
            return
    raise Throttled(busy)


def _get_requests(request_items: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """``request_items`` as requests of at most ``BATCH_GET_MAX_KEYS`` keys across all
    tables, each table keeping its own read options."""
    pairs = [(table, key) for table, read in request_items.items() for key in read["Keys"]]
    for part in chunks(pairs, BATCH_GET_MAX_KEYS):
        request: dict[str, Any] = {}
        for table, key in part:
            request.setdefault(table, {**request_items[table], "Keys": []})["Keys"].append(key)
        yield request


def _retry_policy(attempts: int | None, base_seconds: float | None) -> tuple[int, float]:
    """The given bound and base delay, the settings' ``batch_retry_*`` where not given."""
    if attempts is None or base_seconds is None:
        settings = get_settings()
        attempts = settings.batch_retry_attempts if attempts is None else attempts
        if base_seconds is None:
            base_seconds = settings.batch_retry_base_seconds
    return attempts, base_seconds


def batch_get(
    client: DynamoDBClient,
    request_items: Mapping[str, Any],
    attempts: int | None = None,
    base_seconds: float | None = None,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, list[Item]]:
    """Every item ``request_items`` (BatchGetItem's ``RequestItems``) names that exists, by
    table. Unprocessed keys are retried with backoff; ``Throttled`` if some are still
    unprocessed after ``attempts`` calls (the settings' ``batch_retry_*`` by default)."""
    attempts, base_seconds = _retry_policy(attempts, base_seconds)
    found: dict[str, list[Item]] = {table: [] for table in request_items}

    def send(pending: dict[str, Any]) -> dict[str, Any]:
        result = client.batch_get_item(RequestItems=pending)
        for table, items in result.get("Responses", {}).items():
            found.setdefault(table, []).extend(items)
        return dict(result.get("UnprocessedKeys", {}))

    for request in _get_requests(request_items):
        _until_processed(
            send, request, attempts, base_seconds, sleep, "The store is busy; try again shortly."
        )
    return found


def batch_write(
    client: DynamoDBClient,
    table: str,
    requests: list[Any],
    batch_size: int = BATCH_WRITE_MAX_ITEMS,
    *,
    attempts: int | None = None,
    base_seconds: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Send put or delete requests in batches of ``batch_size`` (at most 25), retrying what
    DynamoDB left unprocessed with ``batch_get``'s policy; ``attempts`` and
    ``base_seconds`` default to the settings' ``batch_retry_*``."""
    attempts, base_seconds = _retry_policy(attempts, base_seconds)

    def send(pending: list[Any]) -> list[Any]:
        result = client.batch_write_item(RequestItems={table: pending})
        return list(result.get("UnprocessedItems", {}).get(table, []))

    written = 0
    for batch in chunks(requests, min(batch_size, BATCH_WRITE_MAX_ITEMS)):
        _until_processed(
            send,
            batch,
            attempts,
            base_seconds,
            sleep,
            "The store is busy; part of the batch must be retried.",
        )
        written += len(batch)
    return written


def batch_delete(
    client: DynamoDBClient,
    table: str,
    keys: list[Item],
    batch_size: int = BATCH_WRITE_MAX_ITEMS,
    **retry: Any,
) -> int:
    """Delete keys in batches, with ``batch_write``'s retries."""
    requests = [{"DeleteRequest": {"Key": key}} for key in keys]
    return batch_write(client, table, requests, batch_size, **retry)


def delete_found(
    client: DynamoDBClient,
    query: dict[str, Any],
    keys: tuple[str, ...],
    max_items: int,
    batch_size: int = BATCH_WRITE_MAX_ITEMS,
) -> int:
    """Delete what ``query`` (Query kwargs over one partition) finds, at most ``max_items``,
    reading only the ``keys`` attributes; the count deleted. An erasure calls this again
    until it deletes fewer than it may: each call starts over from what is left."""
    names = {f"#k{n}": key for n, key in enumerate(keys)}
    request = {
        **query,
        "ProjectionExpression": ", ".join(names),
        "ExpressionAttributeNames": {**query.get("ExpressionAttributeNames", {}), **names},
        "Limit": max(1, max_items),
    }
    deleted = 0
    for page in client.get_paginator("query").paginate(**request):
        found = page["Items"][: max_items - deleted]
        deleted += batch_delete(client, query["TableName"], found, batch_size)
        if deleted >= max_items:
            break
    return deleted
