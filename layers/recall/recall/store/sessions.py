"""The Sessions table: one item per thread (``thread = <userId>#<projectId>#<conversationId>``)
holding the active window, the rolling summary, the clear-context marker and a version for
optimistic locking. ``ttl`` lets DynamoDB drop idle sessions; ``dueBucket``/``dueAt`` put
each session in the sparse index the prune job reads, so it never scans the table."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from recall.domain import clock
from recall.domain.messages import Message
from recall.domain.session import Session
from recall.settings import Settings
from recall.store.dynamodb import Item, dynamodb_client, from_item, to_item, translate
from recall.store.keys import due_bucket

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def session_key(thread: str) -> Item:
    return to_item({"thread": thread})


def session_from(item: Item) -> Session:
    values = from_item(item)
    return Session(
        window=[Message.model_validate(message) for message in values.get("window", [])],
        summary=values.get("summary", ""),
        cleared_after=values.get("clearedAfter"),
        version=values.get("version", 0),
        updated_at=values.get("updatedAt"),
    )


class SessionStore:
    def __init__(self, settings: Settings, client: DynamoDBClient | None = None) -> None:
        self._table = settings.sessions_table
        self._client = client
        self._idle_seconds = settings.session_idle_seconds
        self._shards = settings.due_shards

    @property
    def client(self) -> DynamoDBClient:
        return self._client or dynamodb_client()

    @property
    def table(self) -> str:
        return self._table

    def get(self, thread: str) -> Session | None:
        item = self.client.get_item(
            TableName=self._table, Key=session_key(thread), ConsistentRead=True
        ).get("Item")
        return session_from(item) if item else None

    def item(self, thread: str, session: Session) -> Item:
        updated_at = session.updated_at or clock.stamp(clock.now())
        due = clock.parse(updated_at) + timedelta(seconds=self._idle_seconds)
        due_at = clock.stamp(due)
        return to_item(
            {
                "thread": thread,
                "window": [message.model_dump(exclude_none=True) for message in session.window],
                "summary": session.summary or None,
                "clearedAfter": session.cleared_after,
                "version": session.version,
                "updatedAt": updated_at,
                "ttl": int(due.timestamp()),
                "dueBucket": due_bucket(thread, due_at, self._shards),
                "dueAt": due_at,
            }
        )

    def put_request(
        self, thread: str, session: Session, expected_version: int | None
    ) -> dict[str, Any]:
        """A conditional put: only over the version this turn read (or none at all)."""
        request: dict[str, Any] = {"TableName": self._table, "Item": self.item(thread, session)}
        if expected_version is None:
            request["ConditionExpression"] = "attribute_not_exists(#thread)"
            request["ExpressionAttributeNames"] = {"#thread": "thread"}
        else:
            request["ConditionExpression"] = "#version = :version"
            request["ExpressionAttributeNames"] = {"#version": "version"}
            request["ExpressionAttributeValues"] = {
                ":version": to_item({"v": expected_version})["v"]
            }
        return request

    def put(self, thread: str, session: Session, expected_version: int | None) -> None:
        try:
            self.client.put_item(**self.put_request(thread, session, expected_version))
        except ClientError as exc:
            raise translate(exc, "The conversation's context changed meanwhile.") from exc

    def delete(self, thread: str) -> None:
        self.client.delete_item(TableName=self._table, Key=session_key(thread))
