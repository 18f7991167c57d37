"""AWS's key-size limits on the store's client, which moto does not enforce: a request
whose partition key is over 2,048 bytes or sort key over 1,024 bytes fails with the
``ValidationException`` DynamoDB answers, so a test catches an id that would be a 500 on
AWS. A key (a read, an update, a delete) meets the table's own key schema; an item
written meets its indexes' too, as DynamoDB refuses an item whose index key is too large."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from botocore.exceptions import ClientError

from local import template

PARTITION_MAX_BYTES = 2_048
SORT_MAX_BYTES = 1_024


class TableLimits(NamedTuple):
    keys: dict[str, int]
    items: dict[str, int]


def _limits(schemas: list[list[dict[str, str]]]) -> dict[str, int]:
    limits: dict[str, int] = {}
    for schema in schemas:
        for part in schema:
            limit = PARTITION_MAX_BYTES if part["KeyType"] == "HASH" else SORT_MAX_BYTES
            limits[part["AttributeName"]] = min(limits.get(part["AttributeName"], limit), limit)
    return limits


def key_limits() -> dict[str, TableLimits]:
    """Each template table's key attributes with their limits."""
    found = {}
    for request in template.create_table_requests():
        indexes = [
            index["KeySchema"]
            for kind in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes")
            for index in request.get(kind, [])
        ]
        found[request["TableName"]] = TableLimits(
            _limits([request["KeySchema"]]), _limits([request["KeySchema"], *indexes])
        )
    return found


def _parts(table: str, part: dict[str, Any]) -> Iterator[tuple[str, bool, dict[str, Any]]]:
    if "Key" in part:
        yield table, False, part["Key"]
    if "Item" in part:
        yield table, True, part["Item"]


def _checked(params: dict[str, Any]) -> Iterator[tuple[str, bool, dict[str, Any]]]:
    """``(table, written, item or key)`` for everything a request names by key."""
    table = str(params.get("TableName", ""))
    yield from _parts(table, params)
    if "ExclusiveStartKey" in params:
        yield table, False, params["ExclusiveStartKey"]
    for action in params.get("TransactItems", []):
        for part in action.values():
            yield from _parts(str(part.get("TableName", "")), part)
    for name, requests in params.get("RequestItems", {}).items():
        if isinstance(requests, dict):
            yield from ((name, False, key) for key in requests.get("Keys", []))
        else:
            for request in requests:
                for part in request.values():
                    yield from _parts(name, part)


def _size(value: dict[str, Any]) -> int:
    text = value.get("S")
    return len(text.encode("utf-8")) if isinstance(text, str) else len(value.get("B", b""))


def check_key_sizes(limits: dict[str, TableLimits], params: dict[str, Any], **_: Any) -> None:
    """Raise DynamoDB's ``ValidationException`` for a key attribute over its limit, and for
    a query's key value over the partition key's."""
    too_large = []
    for table, written, item in _checked(params):
        if table not in limits:
            continue
        bounds = limits[table].items if written else limits[table].keys
        too_large += [
            name for name, value in item.items() if _size(value) > bounds.get(name, 2**31)
        ]
    if "KeyConditionExpression" in params:
        values = params.get("ExpressionAttributeValues", {})
        too_large += [name for name, value in values.items() if _size(value) > PARTITION_MAX_BYTES]
    if too_large:
        raise ClientError(
            {
                "Error": {
                    "Code": "ValidationException",
                    "Message": "One or more parameter values were invalid: Size of key "
                    f"{too_large} has exceeded the maximum size limit",
                }
            },
            "DynamoDB",
        )
