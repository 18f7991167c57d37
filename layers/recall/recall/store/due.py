"""Reading the sparse ``byDue`` index that Sessions and Memories share in shape: items that
can expire or fall due carry ``dueBucket`` (an hour and a shard) and ``dueAt``, so a
scheduled job queries a fixed set of buckets for what is due and reads nothing else."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING

from recall.domain import clock
from recall.store.dynamodb import Item, to_value

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

BY_DUE = "byDue"


def due_items(
    client: DynamoDBClient, table: str, buckets: list[str], now: datetime
) -> Iterator[Item]:
    """The index's keys of every item in ``buckets`` whose ``dueAt`` has passed."""
    pages = client.get_paginator("query")
    for bucket in buckets:
        for page in pages.paginate(
            TableName=table,
            IndexName=BY_DUE,
            KeyConditionExpression="#bucket = :bucket AND #dueAt <= :now",
            ExpressionAttributeNames={"#bucket": "dueBucket", "#dueAt": "dueAt"},
            ExpressionAttributeValues={
                ":bucket": to_value(bucket),
                ":now": to_value(clock.stamp(now)),
            },
        ):
            yield from page["Items"]
