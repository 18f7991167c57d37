"""The idempotency table, through Powertools' own DynamoDB persistence layer. It gets a
client of its own so a turn's DynamoDB requests and its idempotency bookkeeping can be
told apart (and counted apart)."""

from __future__ import annotations

from functools import lru_cache

from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
import boto3
from botocore.config import Config


@lru_cache(maxsize=4)
def persistence_layer(table: str, max_attempts: int) -> DynamoDBPersistenceLayer:
    """``max_attempts`` in all, the first try included (as for the store's own client)."""
    config = Config(retries={"mode": "standard", "total_max_attempts": max_attempts})
    client = boto3.client("dynamodb", config=config)
    return DynamoDBPersistenceLayer(table_name=table, boto3_client=client)
