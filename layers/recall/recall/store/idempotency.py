"""The idempotency table, through Powertools' own DynamoDB persistence layer. It gets a
client of its own so a turn's DynamoDB requests and its idempotency bookkeeping can be
told apart (and counted apart).

A record holds a turn's reply, so it is the caller's data: it is kept under
``owner = <userId>#<projectId>`` with Powertools' hashed key as its sort key, so an
erasure finds every record of a user and project with one Query. Powertools hashes only
what ``event_key_jmespath`` selects; the owner is taken from the same request's ``user``
and ``project`` and put in front of that hash.

A wrapper made once, when its module is imported, stores through ``SettingsRecords``: it
makes nothing itself, and hands each call to ``persistence_layer`` for the settings' table,
made on first use, so importing a handler makes no client and reads no settings."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.utilities.idempotency import (
    BasePersistenceLayer,
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
)
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import DataRecord
import boto3
from botocore.config import Config

from recall.settings import Settings, get_settings
from recall.store.dynamodb import delete_found, dynamodb_client, to_value
from recall.store.keys import SEPARATOR, owner_key

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

OWNER = "owner"
RECORD = "sk"


class CallerRecords(DynamoDBPersistenceLayer):
    """Powertools' layer with each record under its caller's user and project."""

    def __init__(self, table: str, client: DynamoDBClient) -> None:
        super().__init__(
            table_name=table, boto3_client=client, key_attr=OWNER, sort_key_attr=RECORD
        )

    def _get_hashed_idempotency_key(self, data: dict[str, Any]) -> str | None:
        hashed = super()._get_hashed_idempotency_key(data)
        if hashed is None:
            return None
        return f"{owner_key(data['user'], data['project'])}{SEPARATOR}{hashed}"

    def _get_key(self, idempotency_key: str) -> dict[str, Any]:
        user_id, project_id, record = idempotency_key.split(SEPARATOR, 2)
        return {OWNER: {"S": owner_key(user_id, project_id)}, RECORD: {"S": record}}

    def _update_record(self, data_record: DataRecord) -> None:
        """Powertools' completion of a record, only onto a record that is still there: an
        erasure that swept it while the turn ran would otherwise get the reply written back
        under a user and project that hold nothing any more."""
        update = "SET #response_data = :response_data, #expiry = :expiry, #status = :status"
        names = {
            "#owner": OWNER,
            "#expiry": self.expiry_attr,
            "#response_data": self.data_attr,
            "#status": self.status_attr,
        }
        values: dict[str, Any] = {
            ":expiry": {"N": str(data_record.expiry_timestamp)},
            ":response_data": {"S": data_record.response_data},
            ":status": {"S": data_record.status},
        }
        if self.payload_validation_enabled:
            update += ", #validation_key = :validation_key"
            names["#validation_key"] = self.validation_key_attr
            values[":validation_key"] = {"S": data_record.payload_hash}
        self.client.update_item(
            TableName=self.table_name,
            Key=self._get_key(data_record.idempotency_key),
            UpdateExpression=update,
            ConditionExpression="attribute_exists(#owner)",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )

    def _item_to_data_record(self, item: dict[str, Any]) -> DataRecord:
        record = super()._item_to_data_record(item)
        record.idempotency_key = f"{record.idempotency_key}{SEPARATOR}{record.sort_key}"
        return record


@lru_cache(maxsize=4)
def persistence_layer(table: str, max_attempts: int) -> CallerRecords:
    """``max_attempts`` in all, the first try included (as for the store's own client)."""
    config = Config(retries={"mode": "standard", "total_max_attempts": max_attempts})
    return CallerRecords(table, boto3.client("dynamodb", config=config))


class SettingsRecords(BasePersistenceLayer):
    """The process's ``persistence_layer`` for the settings' table, looked up on each call
    (so a layer made again, as a test does after ``cache_clear``, is the one used), its
    records kept for the settings' ``IDEMPOTENCY_TTL_SECONDS``."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # Powertools' is untyped

    @staticmethod
    def _layer() -> CallerRecords:
        settings = get_settings()
        return persistence_layer(settings.idempotency_table, settings.dynamodb_max_attempts)

    def configure(
        self,
        config: IdempotencyConfig,
        function_name: str | None = None,
        key_prefix: str | None = None,
    ) -> None:
        layer = self._layer()
        layer.configure(config, function_name, key_prefix)
        layer.expires_after_seconds = get_settings().idempotency_ttl_seconds
        self.event_key_jmespath = layer.event_key_jmespath

    def get_record(self, data: dict[str, Any]) -> DataRecord | None:
        return self._layer().get_record(data)

    def save_inprogress(
        self, data: dict[str, Any], remaining_time_in_millis: int | None = None
    ) -> None:
        self._layer().save_inprogress(data, remaining_time_in_millis)

    def save_success(self, data: dict[str, Any], result: dict[str, Any]) -> None:
        self._layer().save_success(data, result)

    def delete_record(self, data: dict[str, Any], exception: Exception) -> None:
        self._layer().delete_record(data, exception)

    # The calls above are the layer's whole: it does its own reads and writes.
    def _get_record(self, idempotency_key: str) -> DataRecord:
        return self._layer()._get_record(idempotency_key)

    def _put_record(self, data_record: DataRecord) -> None:
        self._layer()._put_record(data_record)

    def _update_record(self, data_record: DataRecord) -> None:
        self._layer()._update_record(data_record)

    def _delete_record(self, data_record: DataRecord) -> None:
        self._layer()._delete_record(data_record)


class IdempotencyRecords:
    """The records as the caller's data: what an erasure deletes."""

    def __init__(self, settings: Settings, client: DynamoDBClient | None = None) -> None:
        self._table = settings.idempotency_table
        self._client = client
        self._batch_size = settings.delete_batch_size

    @property
    def client(self) -> DynamoDBClient:
        return self._client or dynamodb_client()

    def erase(self, user_id: str, project_id: str, max_items: int) -> int:
        """Delete up to ``max_items`` of the caller's records in the project; fewer means
        none are left."""
        query = {
            "TableName": self._table,
            "KeyConditionExpression": "#owner = :owner",
            "ExpressionAttributeNames": {"#owner": OWNER},
            "ExpressionAttributeValues": {":owner": to_value(owner_key(user_id, project_id))},
            "ConsistentRead": True,
        }
        return delete_found(self.client, query, (OWNER, RECORD), max_items, self._batch_size)
