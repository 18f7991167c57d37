"""The Memories table, under ``owner = <userId>#<projectId>``: persistent entries
(``M#<key>``), thread entries (``T#<conversationId>#<key>``), the ``META`` counters and
each entry's change history (``H#<entry sort key>#<ulid>``). Keys never contain ``#``,
so every prefix below is unambiguous."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from recall.settings import Settings
from recall.store.dynamodb import batch_delete, dynamodb_client, to_value

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

PERSISTENT_PREFIX = "M#"
THREAD_PREFIX = "T#"
HISTORY_PREFIX = "H#"
META_SK = "META"


def owner_of(user_id: str, project_id: str) -> str:
    return f"{user_id}#{project_id}"


def thread_prefix(conversation_id: str) -> str:
    return f"{THREAD_PREFIX}{conversation_id}#"


class MemoryStore:
    def __init__(self, settings: Settings, client: DynamoDBClient | None = None) -> None:
        self._table = settings.memories_table
        self._client = client
        self._batch_size = settings.delete_batch_size

    @property
    def client(self) -> DynamoDBClient:
        return self._client or dynamodb_client()

    @property
    def table(self) -> str:
        return self._table

    def delete_thread(self, user_id: str, project_id: str, conversation_id: str) -> int:
        """Delete a thread's own entries and their history (the thread is being deleted)."""
        owner = owner_of(user_id, project_id)
        deleted = 0
        for prefix in (
            thread_prefix(conversation_id),
            HISTORY_PREFIX + thread_prefix(conversation_id),
        ):
            query: dict[str, Any] = {
                "TableName": self._table,
                "KeyConditionExpression": "#owner = :owner AND begins_with(#sk, :prefix)",
                "ExpressionAttributeNames": {"#owner": "owner", "#sk": "sk"},
                "ExpressionAttributeValues": {
                    ":owner": to_value(owner),
                    ":prefix": to_value(prefix),
                },
                "ProjectionExpression": "#owner, #sk",
            }
            while True:
                page = self.client.query(**query)
                deleted += batch_delete(self.client, self._table, page["Items"], self._batch_size)
                if "LastEvaluatedKey" not in page:
                    break
                query["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return deleted
