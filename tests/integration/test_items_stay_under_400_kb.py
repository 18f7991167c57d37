"""DynamoDB refuses an item over 400 KB, and moto does not: with the store's client
carrying AWS's limits (``aws_limits``), turns of the longest messages a client may send
(16,000 four-byte characters) against a model whose replies and tool-call inputs are far
larger than any real one all succeed, and no item they leave is over 400 KB: the
messages, the thread, memory, and the idempotency record
that keeps a whole reply."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest

from recall.domain.prompt import ModelReply, ModelRequest, ToolCall, Usage
from recall.domain.tools import SAVE_PREFERENCE
from recall.settings import get_settings
from recall.store.conversation_items import conversation_key
from recall.store.keys import owner_key, thread_key
from recall.wiring import model_choice
from tests.integration.aws_limits import ITEM_MAX_BYTES, item_size
from tests.integration.conftest import Api

GRIN = "\U0001f600"  # four bytes of UTF-8, twelve of ASCII JSON
TURNS = 12


class Verbose:
    """A model that calls a tool with a huge input, then answers at length: each round
    bigger than a whole DynamoDB item, and far over the offline model's longest reply
    (``MODEL_MAX_TOKENS`` × 4 characters)."""

    def converse(self, request: ModelRequest) -> ModelReply:
        last = request.messages[-1]
        if not last.tool_results and request.tools:
            call = ToolCall(
                id="tool-huge",
                name=SAVE_PREFERENCE,
                input={"key": "tone", "value": GRIN * 120_000, "category": "brand"},
            )
            return ModelReply(text=GRIN * 1_000, tool_calls=[call], stop_reason="tool_use")
        return ModelReply(text=GRIN * 150_000, usage=Usage(input_tokens=1, output_tokens=1))


@pytest.fixture
def verbose() -> Iterator[None]:
    model_choice().use(Verbose())
    yield
    model_choice().use(None)


def _items(table: str, attribute: str, prefix: str) -> list[dict[str, Any]]:
    client = boto3.client("dynamodb")
    pages = client.get_paginator("scan").paginate(TableName=table)
    return [
        item
        for page in pages
        for item in page["Items"]
        if item.get(attribute, {}).get("S", "").startswith(prefix)
    ]


def test_turns_of_the_longest_messages_all_land_and_no_item_passes_400_kb(
    alice: Api, make_project: Callable[..., str], verbose: None
) -> None:
    # Given a project and the longest message a client may send
    project = make_project(alice)
    settings = get_settings()
    message = GRIN * settings.message_max_chars
    # When: many turns of the longest message, each with an idempotency key, the thread's
    # window start lost once along the way
    thread = None
    for turn in range(TURNS):
        body = {"message": message, **({"conversationId": thread} if thread else {})}
        reply = alice.post(
            f"/projects/{project}/chat", body, headers={"Idempotency-Key": f"turn-{turn}"}
        )
        # Then every turn lands
        assert reply.status == 200, (turn, reply.status, str(reply.body)[:300])
        thread = reply.body["conversation"]["id"]
        if turn == TURNS // 2:
            # as a thread saved before window starts were kept: the newest messages are read
            boto3.client("dynamodb").update_item(
                TableName=settings.conversations_table,
                Key=conversation_key(alice.sub or "", project, thread),
                UpdateExpression="REMOVE #start",
                ExpressionAttributeNames={"#start": "windowStart"},
            )
        again = alice.post(
            f"/projects/{project}/chat", body, headers={"Idempotency-Key": f"turn-{turn}"}
        )
        assert again.status == 200 and again.body == reply.body
    assert thread is not None
    user = alice.sub or ""
    # And no item they left is over 400 KB
    thread_items = [
        *_items(settings.messages_table, "thread", thread_key(user, project, thread)),
    ]
    owned = [
        *_items(settings.conversations_table, "owner", owner_key(user, project)),
        *_items(settings.memories_table, "owner", owner_key(user, project)),
    ]
    records = _items(settings.idempotency_table, "id", "")
    sizes = [item_size(item) for item in thread_items + owned + records]
    assert len(thread_items) >= 2 * TURNS + 1
    assert max(sizes) <= ITEM_MAX_BYTES
    # And the window still holds the newest exchange, trimmed by bytes, not emptied
    preview = alice.get(f"/projects/{project}/conversations/{thread}/context")
    window = preview.body["window"]
    assert 2 <= len(window) < 2 * TURNS
    assert window[-2]["content"] == message
    # And the thread pages back through every message, a page never over its byte budget
    base = f"/projects/{project}/conversations/{thread}"
    seen, pages, cursor = 0, 0, None
    while True:
        pages += 1
        query = "limit=200" + (f"&cursor={cursor}" if cursor else "")
        page = alice.get(base, query=query)
        assert page.status == 200, page
        seen += len(page.body["messages"])
        cursor = page.body["nextCursor"]
        if not cursor:
            break
    assert seen == len(_items(settings.messages_table, "thread", thread_key(user, project, thread)))
    assert pages > 1  # 200 messages were asked for each time; bytes, not count, split them
