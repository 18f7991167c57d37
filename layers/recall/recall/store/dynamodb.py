"""The DynamoDB client, item codec and error translation every table module shares."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator, Mapping
from decimal import Decimal
from functools import lru_cache
import json
import time
from typing import TYPE_CHECKING, Any

import boto3
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.config import Config
from botocore.exceptions import ClientError

from recall.errors import Conflict, Invalid, Throttled
from recall.settings import get_settings

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

Item = dict[str, Any]

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()

_THROTTLING = {
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
}


@lru_cache(maxsize=1)
def dynamodb_client() -> DynamoDBClient:
    """Made on first use, never at import, so tests can point it at moto first."""
    attempts = get_settings().dynamodb_max_attempts
    return boto3.client(
        "dynamodb", config=Config(retries={"mode": "standard", "max_attempts": attempts})
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


def _dynamo_ready(value: Any) -> Any:
    if isinstance(value, float):
        return Decimal(str(value))
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


def to_value(value: Any) -> Any:
    return _serializer.serialize(_dynamo_ready(value))


def from_item(item: Mapping[str, Any]) -> dict[str, Any]:
    return {key: _plain(_deserializer.deserialize(value)) for key, value in item.items()}


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def translate(exc: ClientError, conflict_message: str = "The item changed meanwhile.") -> Exception:
    """DynamoDB's error codes as domain errors; anything unexpected is re-raised as is."""
    code = error_code(exc)
    if code in {"ConditionalCheckFailedException", "TransactionConflictException"}:
        return Conflict(conflict_message)
    if code == "TransactionCanceledException":
        reasons = exc.response.get("CancellationReasons", [])
        if any(reason.get("Code") in _THROTTLING for reason in reasons):
            return Throttled("The store is busy; try again shortly.")
        return Conflict(conflict_message)
    if code in _THROTTLING:
        return Throttled("The store is busy; try again shortly.")
    return exc


def cancellation_codes(exc: ClientError) -> list[str]:
    return [
        str(reason.get("Code", "None")) for reason in exc.response.get("CancellationReasons", [])
    ]


def chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def batch_delete(client: DynamoDBClient, table: str, keys: list[Item], batch_size: int = 25) -> int:
    """Delete keys in batches of ``batch_size``, retrying what DynamoDB left unprocessed."""
    deleted = 0
    for batch in chunks(keys, min(batch_size, 25)):
        requests: list[Any] = [{"DeleteRequest": {"Key": key}} for key in batch]
        for attempt in range(8):
            result = client.batch_write_item(RequestItems={table: requests})
            requests = list(result.get("UnprocessedItems", {}).get(table, []))
            if not requests:
                break
            time.sleep(min(0.05 * 2**attempt, 1.0))
        if requests:
            raise Throttled("The store is busy; part of the delete must be retried.")
        deleted += len(batch)
    return deleted


def encode_cursor(values: dict[str, str]) -> str:
    return base64.urlsafe_b64encode(json.dumps(values).encode()).decode().rstrip("=")


def decode_cursor(cursor: str, fields: set[str]) -> dict[str, str]:
    """An opaque cursor back to its values; anything a client tampered with is a 422."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        values = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise Invalid("The cursor is not one this API issued.", [{"field": "cursor"}]) from exc
    if (
        not isinstance(values, dict)
        or set(values) != fields
        or not all(isinstance(v, str) and v for v in values.values())
    ):
        raise Invalid("The cursor is not one this API issued.", [{"field": "cursor"}])
    return values
