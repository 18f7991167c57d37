"""A chat turn costs a bounded number of DynamoDB requests, whatever the thread's length."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from recall.domain import clock
from recall.domain.ids import new_id
from recall.domain.messages import Message
from recall.domain.prompt import ModelReply, ModelRequest
from recall.providers.offline import OfflineProvider
from recall.settings import get_settings
from recall.store.dynamodb import dynamodb_client, to_item
from recall.store.messages import MessageStore, thread_of
from recall.wiring import chat_service
from tests.conftest import Api

MakeProject = Callable[..., str]


class Counter:
    """Counts the requests botocore sends on the store's client, and where the model came."""

    def __init__(self) -> None:
        self.operations: list[str] = []
        self.at_model: list[int] = []

    def __call__(self, model: Any, **kwargs: Any) -> None:
        self.operations.append(model.name)

    def converse(self, request: ModelRequest) -> ModelReply:
        self.at_model.append(len(self.operations))
        return OfflineProvider().converse(request)


@pytest.fixture
def counter(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter]:
    counting = Counter()
    events = dynamodb_client().meta.events
    events.register("before-call.dynamodb", counting)
    monkeypatch.setattr(chat_service(), "_provider_for", lambda model_id: counting)
    yield counting
    events.unregister("before-call.dynamodb", counting)


def _grow(user: str, project: str, conversation: str, count: int) -> None:
    """Add ``count`` saved messages to a thread, as years of chatting would."""
    settings = get_settings()
    store = MessageStore(settings)
    thread = thread_of(user, project, conversation)
    items = [
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
    for start in range(0, len(items), 25):
        client.batch_write_item(RequestItems={settings.messages_table: items[start : start + 25]})
    client.update_item(
        TableName=settings.conversations_table,
        Key=to_item({"owner": f"{user}#{project}", "conversationId": conversation}),
        UpdateExpression="ADD messageCount :n",
        ExpressionAttributeValues={":n": {"N": str(count)}},
    )


@pytest.mark.parametrize("length", [10, 1000])
def test_a_turn_reads_three_times_before_the_model_and_writes_once_after(
    alice: Api, make_project: MakeProject, counter: Counter, length: int
) -> None:
    # Given a thread of `length` messages with a live session
    project = make_project(alice)
    thread = alice.post(f"/projects/{project}/chat", {"message": "hello"}).body["conversation"][
        "id"
    ]
    alice.put(f"/projects/{project}/memories/tone", {"value": "warm", "category": "brand"})
    _grow(alice.sub or "", project, thread, length - 2)
    counter.operations.clear()
    counter.at_model.clear()
    # When
    reply = alice.post(
        f"/projects/{project}/chat", {"message": "what next?", "conversationId": thread}
    )
    # Then
    assert reply.status == 200
    [before] = counter.at_model
    assert counter.operations[:before] == ["BatchGetItem", "Query", "Query"]
    assert counter.operations[before:] == ["TransactWriteItems"]


def test_a_new_thread_costs_no_more_than_three_requests_before_the_model(
    alice: Api, make_project: MakeProject, counter: Counter
) -> None:
    project = make_project(alice)
    counter.operations.clear()
    assert alice.post(f"/projects/{project}/chat", {"message": "hello"}).status == 200
    [before] = counter.at_model
    assert counter.operations[:before] == ["BatchGetItem", "PutItem", "Query"]
    assert counter.operations[before:] == ["TransactWriteItems"]
