"""The Sessions table: one item per thread (``thread = <userId>#<projectId>#<conversationId>``)
holding the active window, the clear-context marker and a version for
optimistic locking. ``ttl`` lets DynamoDB drop idle sessions; ``dueBucket``/``dueAt`` put
each session in the sparse index the prune job reads, so it never scans the table."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from recall.domain import clock
from recall.domain.messages import Message
from recall.domain.session import Session
from recall.errors import Conflict
from recall.settings import Settings
from recall.store.due import due_items
from recall.store.dynamodb import Item, dynamodb_client, from_item, to_item, to_value, translate
from recall.store.keys import due_bucket, due_buckets, thread_key

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class SessionItem(BaseModel):
    """A session as the table holds it; the window keeps each message's own field names."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    thread: str
    window: list[Message] = Field(default_factory=list)
    cleared_after: str | None = None
    version: int = 0
    updated_at: str | None = None
    ttl: int | None = None
    due_bucket: str | None = None
    due_at: str | None = None

    def session(self) -> Session:
        return Session(
            window=self.window,
            cleared_after=self.cleared_after,
            version=self.version,
            updated_at=self.updated_at,
        )


def session_key(user_id: str, project_id: str, conversation_id: str) -> Item:
    return to_item({"thread": thread_key(user_id, project_id, conversation_id)})


def session_from(item: Item) -> Session:
    return SessionItem.model_validate(from_item(item)).session()


class SessionStore:
    def __init__(self, settings: Settings, client: DynamoDBClient | None = None) -> None:
        self._table = settings.sessions_table
        self._client = client
        self._idle = timedelta(seconds=settings.session_idle_seconds)
        self._shards = settings.due_shards
        self._lookback_hours = settings.maintenance_lookback_hours

    @property
    def client(self) -> DynamoDBClient:
        return self._client or dynamodb_client()

    @property
    def table(self) -> str:
        return self._table

    def get(self, user_id: str, project_id: str, conversation_id: str) -> Session | None:
        item = self.client.get_item(
            TableName=self._table,
            Key=session_key(user_id, project_id, conversation_id),
            ConsistentRead=True,
        ).get("Item")
        return session_from(item) if item else None

    def _item(self, thread: str, session: Session) -> Item:
        updated_at = session.updated_at or clock.stamp(clock.now())
        due = clock.parse(updated_at) + self._idle
        due_at = clock.stamp(due)
        record = SessionItem(
            thread=thread,
            window=session.window,
            cleared_after=session.cleared_after,
            version=session.version,
            updated_at=updated_at,
            ttl=int(due.timestamp()),
            due_bucket=due_bucket(thread, due_at, self._shards),
            due_at=due_at,
        )
        values = record.model_dump(by_alias=True, exclude_none=True)
        values["window"] = [message.model_dump(exclude_none=True) for message in session.window]
        return to_item(values)

    def put_request(
        self,
        user_id: str,
        project_id: str,
        conversation_id: str,
        session: Session,
        expected_version: int | None,
    ) -> dict[str, Any]:
        """A conditional put: only over the version this turn read (or none at all)."""
        thread = thread_key(user_id, project_id, conversation_id)
        request: dict[str, Any] = {"TableName": self._table, "Item": self._item(thread, session)}
        if expected_version is None:
            request["ConditionExpression"] = "attribute_not_exists(#thread)"
            request["ExpressionAttributeNames"] = {"#thread": "thread"}
        else:
            request["ConditionExpression"] = "#version = :version"
            request["ExpressionAttributeNames"] = {"#version": "version"}
            request["ExpressionAttributeValues"] = {":version": to_value(expected_version)}
        return request

    def put(
        self,
        user_id: str,
        project_id: str,
        conversation_id: str,
        session: Session,
        expected_version: int | None,
    ) -> None:
        request = self.put_request(user_id, project_id, conversation_id, session, expected_version)
        try:
            self.client.put_item(**request)
        except ClientError as exc:
            raise translate(exc, "The conversation's context changed meanwhile.") from exc

    def prune_idle(self, now: datetime) -> tuple[int, int]:
        """Delete every session idle past ``session_idle_seconds``, reading only the due
        buckets; ``(read, pruned)``. A session a turn touched since it was read has moved to
        a later bucket, and the condition on ``dueAt`` keeps it."""
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
