"""The Sessions table: one item per thread (``thread = <userId>#<projectId>#<conversationId>``)
that held the thread's window until turns began to read the window from the Messages
table. Nothing writes it now; ``dueBucket``/``dueAt`` put each item left in the sparse
index the prune job reads, so the job drains the table without ever scanning it, and a
thread's delete removes its item."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from recall.errors import Conflict
from recall.settings import Settings
from recall.store.due import due_items
from recall.store.dynamodb import Item, dynamodb_client, to_item, translate
from recall.store.keys import due_buckets, thread_key

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def session_key(user_id: str, project_id: str, conversation_id: str) -> Item:
    return to_item({"thread": thread_key(user_id, project_id, conversation_id)})


class SessionStore:
    def __init__(self, settings: Settings, client: DynamoDBClient | None = None) -> None:
        self._table = settings.sessions_table
        self._client = client
        self._shards = settings.due_shards
        self._lookback_hours = settings.maintenance_lookback_hours

    @property
    def client(self) -> DynamoDBClient:
        return self._client or dynamodb_client()

    @property
    def table(self) -> str:
        return self._table

    def prune_idle(self, now: datetime) -> tuple[int, int]:
        """Delete every item whose ``dueAt`` (its last turn and ``session_idle_seconds``)
        has passed, reading only the due buckets; ``(read, pruned)``. The condition on
        ``dueAt`` deletes only the item that was read."""
        buckets = due_buckets(now, self._lookback_hours, self._shards)
        read = pruned = 0
        for due in due_items(self.client, self._table, buckets, now):
            read += 1
            try:
                self.client.delete_item(
                    TableName=self._table,
                    Key={"thread": due["thread"]},
                    ConditionExpression="#dueAt = :dueAt",
                    ExpressionAttributeNames={"#dueAt": "dueAt"},
                    ExpressionAttributeValues={":dueAt": due["dueAt"]},
                )
            except ClientError as exc:
                if not isinstance(translate(exc), Conflict):
                    raise
                continue
            pruned += 1
        return read, pruned

    def delete(self, user_id: str, project_id: str, conversation_id: str) -> None:
        self.client.delete_item(
            TableName=self._table, Key=session_key(user_id, project_id, conversation_id)
        )
