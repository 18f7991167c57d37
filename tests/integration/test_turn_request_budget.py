"""A chat turn costs a bounded number of DynamoDB requests, whatever the thread's length."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from local.seed import grow_thread
from recall.domain.prompt import ModelReply, ModelRequest
from recall.providers.offline import OfflineProvider
from recall.store.dynamodb import dynamodb_client
from recall.wiring import model_choice
from tests.integration.conftest import Api

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
def counter() -> Iterator[Counter]:
    counting = Counter()
    events = dynamodb_client().meta.events
    events.register("before-call.dynamodb", counting)
    model_choice().use(counting)
    yield counting
    model_choice().use(None)
    events.unregister("before-call.dynamodb", counting)


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
    grow_thread(alice.sub or "", project, thread, length - 2)
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
