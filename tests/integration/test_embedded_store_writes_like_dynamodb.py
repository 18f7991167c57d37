"""The embedded store (``make dev``'s and the tests') writes as DynamoDB does: a transaction
that fails leaves exactly the items it named as they were, costs what it names rather than
what the store holds, and never undoes, nor loses, what other requests write meanwhile."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
import time
from typing import TYPE_CHECKING, Any
import uuid

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table
import pytest

from local.embedded import EmbeddedStore
from recall.settings import get_settings

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

WRITERS = 4
WRITES_EACH = 40
CHECK_SECONDS = 0.01


@pytest.fixture
def client(embedded_store: EmbeddedStore) -> DynamoDBClient:
    return boto3.client(
        "dynamodb",
        endpoint_url=embedded_store.endpoint,
        config=Config(max_pool_connections=2 * WRITERS, retries={"total_max_attempts": 1}),
    )


def key(owner: str, period: str) -> dict[str, Any]:
    return {"owner": {"S": owner}, "period": {"S": period}}


def failing_transaction(table: str, owner: str) -> list[dict[str, Any]]:
    """Adds to the counter, creates an item, then fails on a check of an absent item."""
    return [
        {
            "Update": {
                "TableName": table,
                "Key": key(owner, "counter"),
                "UpdateExpression": "ADD #n :five",
                "ExpressionAttributeNames": {"#n": "n"},
                "ExpressionAttributeValues": {":five": {"N": "5"}},
            }
        },
        {"Put": {"TableName": table, "Item": {**key(owner, "new"), "n": {"N": "1"}}}},
        {
            "ConditionCheck": {
                "TableName": table,
                "Key": key(owner, "absent"),
                "ConditionExpression": "attribute_exists(#o)",
                "ExpressionAttributeNames": {"#o": "owner"},
            }
        },
    ]


def counter(client: DynamoDBClient, table: str, owner: str) -> int:
    item = client.get_item(TableName=table, Key=key(owner, "counter"), ConsistentRead=True)
    return int(item["Item"]["n"]["N"])


def start_counter(client: DynamoDBClient, table: str, owner: str) -> None:
    client.put_item(TableName=table, Item={**key(owner, "counter"), "n": {"N": "1"}})


def test_a_failed_transaction_leaves_the_items_it_named_as_they_were(
    client: DynamoDBClient,
) -> None:
    # Given a counter
    table, owner = get_settings().usage_table, f"writes-{uuid.uuid4().hex}"
    start_counter(client, table, owner)

    # When a transaction that adds to it and creates an item fails on its last check
    with pytest.raises(ClientError) as refused:
        client.transact_write_items(TransactItems=failing_transaction(table, owner))  # type: ignore[arg-type]

    # Then it is cancelled, the counter is as it was and the new item was never made
    assert refused.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert counter(client, table, owner) == 1
    assert "Item" not in client.get_item(TableName=table, Key=key(owner, "new"))


def test_a_transaction_never_copies_a_whole_table(
    client: DynamoDBClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given tables that refuse to be copied whole (a copy costs what the store holds)
    def refuse(table: Table, memo: Any) -> Table:
        raise AssertionError(f"{table.name} copied whole")

    monkeypatch.setattr(Table, "__deepcopy__", refuse, raising=False)
    table, owner = get_settings().usage_table, f"writes-{uuid.uuid4().hex}"
    start_counter(client, table, owner)

    # When a transaction lands and another fails
    client.transact_write_items(
        TransactItems=[{"Put": {"TableName": table, "Item": {**key(owner, "landed")}}}]
    )
    with pytest.raises(ClientError) as refused:
        client.transact_write_items(TransactItems=failing_transaction(table, owner))  # type: ignore[arg-type]

    # Then both answered as DynamoDB would
    assert refused.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert "Item" in client.get_item(TableName=table, Key=key(owner, "landed"))


@pytest.fixture
def slow_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failing transaction's check of the absent item takes a while (moto runs in this
    process), so other requests land while it is half done."""
    read = DynamoDBBackend.get_item

    def slow_check(backend: DynamoDBBackend, table: str, keys: dict[str, Any], *rest: Any) -> Any:
        if keys.get("period") == {"S": "absent"}:
            time.sleep(CHECK_SECONDS)
        return read(backend, table, keys, *rest)

    monkeypatch.setattr(DynamoDBBackend, "get_item", slow_check)


def test_writes_made_while_transactions_fail_are_all_kept(
    client: DynamoDBClient, slow_checks: None
) -> None:
    # Given a counter, and as many writers adding to it as there are transactions that add
    # to it too but fail on their last check, which takes a while (moto runs in this process)
    table, owner = get_settings().usage_table, f"writes-{uuid.uuid4().hex}"
    start_counter(client, table, owner)

    def add() -> None:
        for _ in range(WRITES_EACH):
            client.update_item(
                TableName=table,
                Key=key(owner, "counter"),
                UpdateExpression="ADD #n :one",
                ExpressionAttributeNames={"#n": "n"},
                ExpressionAttributeValues={":one": {"N": "1"}},
            )

    def fail() -> None:
        for _ in range(WRITES_EACH // 4):
            with pytest.raises(ClientError) as refused:
                client.transact_write_items(TransactItems=failing_transaction(table, owner))  # type: ignore[arg-type]
            assert refused.value.response["Error"]["Code"] == "TransactionCanceledException"

    # When they all run at once
    with ThreadPoolExecutor(2 * WRITERS) as pool:
        done = [pool.submit(add) for _ in range(WRITERS)] + [
            pool.submit(fail) for _ in range(WRITERS)
        ]
        for future in done:
            future.result()

    # Then every add is kept, and nothing of the failed transactions
    assert counter(client, table, owner) == 1 + WRITERS * WRITES_EACH


def test_no_read_sees_what_a_failing_transaction_wrote_before_it_failed(
    client: DynamoDBClient, slow_checks: None
) -> None:
    # Given transactions that create an item, then fail on a check that takes a while
    table, owner = get_settings().usage_table, f"writes-{uuid.uuid4().hex}"
    start_counter(client, table, owner)

    def fail() -> None:
        for _ in range(WRITES_EACH // 4):
            with pytest.raises(ClientError):
                client.transact_write_items(TransactItems=failing_transaction(table, owner))  # type: ignore[arg-type]

    def seen() -> int:
        """How many reads saw the new item, or the owner holding more than its counter."""
        new, times = key(owner, "new"), 0
        for _ in range(WRITES_EACH):
            times += "Item" in client.get_item(TableName=table, Key=new)
            held = client.query(
                TableName=table,
                KeyConditionExpression="#o = :o",
                ExpressionAttributeNames={"#o": "owner"},
                ExpressionAttributeValues={":o": {"S": owner}},
            )["Items"]
            times += len(held) > 1
        return times

    # When others read the item and the owner's items while they run
    with ThreadPoolExecutor(2 * WRITERS) as pool:
        failing = [pool.submit(fail) for _ in range(WRITERS)]
        reads = [pool.submit(seen) for _ in range(WRITERS)]
        for future in failing:
            future.result()

        # Then none saw what they wrote
        assert [future.result() for future in reads] == [0] * WRITERS
