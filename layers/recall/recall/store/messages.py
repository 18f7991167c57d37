"""The Messages table: every message of a thread under
``thread = <userId>#<projectId>#<conversationId>``, sorted by its ULID."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pydantic import ConfigDict
from pydantic.alias_generators import to_camel

from recall.domain.messages import Message
from recall.domain.sizes import item_size
from recall.settings import Settings
from recall.store.cursors import (
    encode_cursor,
    position_in,
)
from recall.store.dynamodb import (
    Item,
    batch_delete,
    batch_write,
    delete_found,
    dynamodb_client,
    from_item,
    to_item,
    to_value,
)
from recall.store.keys import thread_key

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class MessageItem(Message):
    """A message as the table holds it: camelCase attributes under its thread."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    thread: str


def message_item(thread: str, message: Message) -> Item:
    record = MessageItem(thread=thread, **message.model_dump())
    return to_item(record.model_dump(by_alias=True, exclude_defaults=True))


def message_from(item: Item) -> Message:
    return Message.model_validate(MessageItem.model_validate(from_item(item)).model_dump())


class MessageStore:
    def __init__(self, settings: Settings, client: DynamoDBClient | None = None) -> None:
        self._table = settings.messages_table
        self._client = client
        self._batch_size = settings.delete_batch_size
        self._page_max_bytes = settings.messages_page_max_bytes

    @property
    def client(self) -> DynamoDBClient:
        return self._client or dynamodb_client()

    def put_request(
        self, user_id: str, project_id: str, conversation_id: str, message: Message
    ) -> dict[str, Any]:
        """A message's put, for a transaction that saves it with the rest of its turn."""
        thread = thread_key(user_id, project_id, conversation_id)
        return {"TableName": self._table, "Item": message_item(thread, message)}

    def page(
        self, user_id: str, project_id: str, conversation_id: str, limit: int, cursor: str | None
    ) -> tuple[list[Message], str | None]:
        """The newest ``limit`` messages before the cursor (fewer when they pass
        ``messages_page_max_bytes``), returned oldest first; the next cursor reaches further
        back, in this thread only."""
        thread = thread_key(user_id, project_id, conversation_id)
        query: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "#thread = :thread",
            "ExpressionAttributeNames": {"#thread": "thread"},
            "ExpressionAttributeValues": {":thread": to_value(thread)},
            "ScanIndexForward": False,
            "Limit": limit,
            "ConsistentRead": True,
        }
        if cursor:
            query["ExclusiveStartKey"] = to_item(
                {
                    "thread": thread,
                    "messageId": position_in(
                        cursor, ("conversationId", conversation_id), "messageId", "conversation"
                    ),
                }
            )
        result = self.client.query(**query)
        items, more = _within(result["Items"], self._page_max_bytes)
        messages = [message_from(item) for item in reversed(items)]
        if items and (more or result.get("LastEvaluatedKey")):
            last = from_item(items[-1])["messageId"]
            return messages, encode_cursor({"conversationId": conversation_id, "messageId": last})
        return messages, None

    def latest_after(
        self,
        user_id: str,
        project_id: str,
        conversation_id: str,
        after: str | None,
        limit: int,
    ) -> list[Message]:
        """The last ``limit`` messages after ``after`` (a clear-context marker), oldest first.
        Strongly consistent: a turn's window must hold the turn saved just before it."""
        condition = "#thread = :thread"
        values: dict[str, Any] = {
            ":thread": to_value(thread_key(user_id, project_id, conversation_id))
        }
        if after:
            condition += " AND #id > :after"
            values[":after"] = to_value(after)
        result = self.client.query(
            TableName=self._table,
            KeyConditionExpression=condition,
            ExpressionAttributeNames={
                "#thread": "thread",
                **({"#id": "messageId"} if after else {}),
            },
            ExpressionAttributeValues=values,
            ScanIndexForward=False,
            Limit=limit,
            ConsistentRead=True,
        )
        return [message_from(item) for item in reversed(result["Items"])]

    def between(
        self,
        user_id: str,
        project_id: str,
        conversation_id: str,
        after: str | None,
        before: str,
        limit: int,
    ) -> tuple[list[Message], bool]:
        """Up to ``limit`` messages strictly after ``after`` and before ``before``, oldest
        first: what left a window that now starts at ``before``; and whether more may
        follow them, when the query stopped at its limit or at DynamoDB's 1 MB page."""
        condition = "#thread = :thread AND #id < :before"
        values: dict[str, Any] = {
            ":thread": to_value(thread_key(user_id, project_id, conversation_id)),
            ":before": to_value(before),
        }
        if after:
            condition = "#thread = :thread AND #id BETWEEN :after AND :before"
            values[":after"] = to_value(after)
        result = self.client.query(
            TableName=self._table,
            KeyConditionExpression=condition,
            ExpressionAttributeNames={"#thread": "thread", "#id": "messageId"},
            ExpressionAttributeValues=values,
            Limit=limit + 2,  # BETWEEN includes both ends, which are not wanted
            ConsistentRead=True,
        )
        found = [message_from(item) for item in result["Items"]]
        between = [m for m in found if m.message_id not in (after, before)]
        return between[:limit], len(between) > limit or "LastEvaluatedKey" in result

    def every(self, user_id: str, project_id: str, conversation_id: str) -> Iterator[Message]:
        """Every message of a thread, oldest first, a page at a time: what an export reads."""
        pages = self.client.get_paginator("query").paginate(
            TableName=self._table,
            KeyConditionExpression="#thread = :thread",
            ExpressionAttributeNames={"#thread": "thread"},
            ExpressionAttributeValues={
                ":thread": to_value(thread_key(user_id, project_id, conversation_id))
            },
            ConsistentRead=True,
        )
        for page in pages:
            yield from map(message_from, page["Items"])

    def add(
        self, user_id: str, project_id: str, conversation_id: str, messages: list[Message]
    ) -> None:
        """Save messages outside a turn (seeding and backfill), in batches."""
        thread = thread_key(user_id, project_id, conversation_id)
        requests: list[Any] = [
            {"PutRequest": {"Item": message_item(thread, message)}} for message in messages
        ]
        batch_write(self.client, self._table, requests)

    def delete_thread(self, user_id: str, project_id: str, conversation_id: str) -> int:
        """Delete every message of a thread, a page of keys at a time."""
        thread = thread_key(user_id, project_id, conversation_id)
        pages = self.client.get_paginator("query").paginate(
            TableName=self._table,
            KeyConditionExpression="#thread = :thread",
            ExpressionAttributeNames={"#thread": "thread", "#id": "messageId"},
            ExpressionAttributeValues={":thread": to_value(thread)},
            ProjectionExpression="#thread, #id",
        )
        return sum(
            batch_delete(self.client, self._table, page["Items"], self._batch_size)
            for page in pages
        )

    def erase_thread(
        self, user_id: str, project_id: str, conversation_id: str, max_items: int
    ) -> int:
        """Delete up to ``max_items`` of a thread's messages; fewer means none are left."""
        query = {
            "TableName": self._table,
            "KeyConditionExpression": "#thread = :thread",
            "ExpressionAttributeNames": {"#thread": "thread"},
            "ExpressionAttributeValues": {
                ":thread": to_value(thread_key(user_id, project_id, conversation_id))
            },
            "ConsistentRead": True,
        }
        return delete_found(
            self.client, query, ("thread", "messageId"), max_items, self._batch_size
        )


def _within(items: list[Item], max_bytes: int) -> tuple[list[Item], bool]:
    """The first items that fit in ``max_bytes`` (always at least one), and whether any
    were left out."""
    total = 0
    for count, item in enumerate(items):
        total += item_size(from_item(item))
        if total > max_bytes and count > 0:
            return items[:count], True
    return items, False
