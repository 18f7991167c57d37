"""The Messages table: every message of a thread under
``thread = <userId>#<projectId>#<conversationId>``, sorted by its ULID."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from recall.domain.messages import Message
from recall.settings import Settings
from recall.store.dynamodb import (
    Item,
    batch_delete,
    decode_cursor,
    dynamodb_client,
    encode_cursor,
    from_item,
    to_item,
    to_value,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def message_item(thread: str, message: Message) -> Item:
    return to_item(
        {
            "thread": thread,
            "messageId": message.message_id,
            "role": message.role,
            "content": message.content,
            "toolCalls": [call.model_dump() for call in message.tool_calls] or None,
            "toolResults": [result.model_dump() for result in message.tool_results] or None,
            "model": message.model,
            "status": message.status,
            "error": message.error,
            "usage": message.usage.model_dump() if message.usage else None,
            "createdAt": message.created_at,
        }
    )


def message_from(item: Item) -> Message:
    values = from_item(item)
    return Message(
        message_id=values["messageId"],
        role=values["role"],
        content=values.get("content", ""),
        tool_calls=values.get("toolCalls", []),
        tool_results=values.get("toolResults", []),
        model=values.get("model"),
        status=values.get("status", "complete"),
        error=values.get("error"),
        usage=values.get("usage"),
        created_at=values["createdAt"],
    )


class MessageStore:
    def __init__(self, settings: Settings, client: DynamoDBClient | None = None) -> None:
        self._table = settings.messages_table
        self._client = client
        self._batch_size = settings.delete_batch_size

    @property
    def client(self) -> DynamoDBClient:
        return self._client or dynamodb_client()

    def put_request(self, thread: str, message: Message) -> dict[str, Any]:
        return {"TableName": self._table, "Item": message_item(thread, message)}

    def page(self, thread: str, limit: int, cursor: str | None) -> tuple[list[Message], str | None]:
        """The newest ``limit`` messages before the cursor, returned oldest first; the next
        cursor reaches further back."""
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
            start = decode_cursor(cursor, {"messageId"})
            query["ExclusiveStartKey"] = to_item({"thread": thread, **start})
        result = self.client.query(**query)
        messages = [message_from(item) for item in reversed(result["Items"])]
        last = result.get("LastEvaluatedKey")
        next_cursor = encode_cursor({"messageId": from_item(last)["messageId"]}) if last else None
        return messages, next_cursor

    def latest_after(self, thread: str, after: str | None, limit: int) -> list[Message]:
        """The last ``limit`` messages after ``after`` (a clear-context marker), oldest first."""
        condition = "#thread = :thread"
        values: dict[str, Any] = {":thread": to_value(thread)}
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

    def delete_thread(self, thread: str) -> int:
        """Delete every message of a thread, a page of keys at a time."""
        deleted = 0
        query: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "#thread = :thread",
            "ExpressionAttributeNames": {"#thread": "thread", "#id": "messageId"},
            "ExpressionAttributeValues": {":thread": to_value(thread)},
            "ProjectionExpression": "#thread, #id",
        }
        while True:
            page = self.client.query(**query)
            deleted += batch_delete(self.client, self._table, page["Items"], self._batch_size)
            if "LastEvaluatedKey" not in page:
                return deleted
            query["ExclusiveStartKey"] = page["LastEvaluatedKey"]
