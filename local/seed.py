"""Long threads on demand, for benchmarks and tests: saved messages added straight to the
store, as years of chatting would leave them."""

from __future__ import annotations

from typing import Any

from recall.domain import clock
from recall.domain.ids import new_id
from recall.domain.messages import Message
from recall.settings import get_settings
from recall.store.dynamodb import dynamodb_client, to_item
from recall.store.messages import MessageStore, thread_of


def grow_thread(user_id: str, project_id: str, conversation_id: str, count: int) -> None:
    """Add ``count`` alternating user and assistant messages and count them on the thread."""
    settings = get_settings()
    store = MessageStore(settings)
    thread = thread_of(user_id, project_id, conversation_id)
    requests: list[Any] = [
        {
            "PutRequest": {
                "Item": store.put_request(
                    thread,
                    Message(
                        message_id=new_id(),
                        role="user" if n % 2 == 0 else "assistant",
                        content=f"old message {n}",
                        created_at=clock.stamp(clock.now()),
                    ),
                )["Item"]
            }
        }
        for n in range(count)
    ]
    client = dynamodb_client()
    for start in range(0, len(requests), 25):
        client.batch_write_item(
            RequestItems={settings.messages_table: requests[start : start + 25]}
        )
    client.update_item(
        TableName=settings.conversations_table,
        Key=to_item({"owner": f"{user_id}#{project_id}", "conversationId": conversation_id}),
        UpdateExpression="ADD #count :n",
        ExpressionAttributeNames={"#count": "messageCount"},
        ExpressionAttributeValues={":n": {"N": str(count)}},
    )
