"""The Sessions table: one item per thread (``thread = <userId>#<projectId>#<conversationId>``)
holding the active window, the rolling summary and the clear-context marker."""

from __future__ import annotations

from typing import TYPE_CHECKING

from recall.settings import Settings
from recall.store.dynamodb import Item, dynamodb_client, to_item

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def session_key(thread: str) -> Item:
    return to_item({"thread": thread})


class SessionStore:
    def __init__(self, settings: Settings, client: DynamoDBClient | None = None) -> None:
        self._table = settings.sessions_table
        self._client = client

    @property
    def client(self) -> DynamoDBClient:
        return self._client or dynamodb_client()

    @property
    def table(self) -> str:
        return self._table

    def delete(self, thread: str) -> None:
        self.client.delete_item(TableName=self._table, Key=session_key(thread))
