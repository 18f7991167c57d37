"""A turn's model calls within its time: each call is told the time left, a throttled
model is asked again only while time is left, and a round with no time left is not asked
at all, so the turn still saves (as a timeout) before its caller stops waiting."""

from __future__ import annotations

from typing import Any

import pytest

from recall.domain.prompt import (
    ModelReply,
    ModelRequest,
    ModelThrottled,
    ModelTimeout,
    PromptMessage,
    ToolCall,
)
from recall.services.memories import HeldMemory
from recall.services.tool_loop import ToolLoop
from tests.unit.services.in_memory import InMemoryRecall, ScriptedModel

REQUEST = ModelRequest(
    model_id="model", system=[], messages=[PromptMessage(role="user", text="Plan the sale.")]
)


class Clock:
    """``time.monotonic`` and ``time.sleep`` for a loop whose model takes ``model_seconds``."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def taking(clock: Clock, seconds: float, reply: ModelReply) -> Any:
    def answer(request: ModelRequest) -> ModelReply:
        clock.now += seconds
        return reply

    return answer


def another_round() -> ModelReply:
    """A tool call the loop answers without memory, so the model is asked again."""
    return ModelReply(
        tool_calls=[ToolCall(id="t1", name="look_it_up", input={})], stop_reason="tool_use"
    )


@pytest.fixture
def recall() -> InMemoryRecall:
    return InMemoryRecall()


def loop(recall: InMemoryRecall, model: ScriptedModel, clock: Clock, attempts: int) -> ToolLoop:
    return ToolLoop(
        lambda _: model,
        recall.memory_service,
        4,
        attempts,
        0.5,
        monotonic=clock.monotonic,
        sleep=clock.sleep,
    )


def converse(tools: ToolLoop, recall: InMemoryRecall, deadline: float | None) -> Any:
    memory = recall.memory_service.turn_memory(HeldMemory([], []))
    return tools.converse(REQUEST, memory, "thread", None, deadline)


def test_each_call_is_told_the_time_left_in_the_turn(recall: InMemoryRecall) -> None:
    # Given a model that takes 6 s a round, two rounds, in a turn of 24 s
    clock = Clock()
    model = ScriptedModel(
        taking(clock, 6, another_round()), taking(clock, 6, ModelReply(text="Done."))
    )
    # When
    exchange = converse(loop(recall, model, clock, 1), recall, clock.now + 24)
    # Then
    assert exchange.failure is None
    assert [request.timeout_seconds for request in model.requests] == [24, 18]


def test_a_round_with_under_a_second_left_is_not_asked_and_the_turn_times_out(
    recall: InMemoryRecall,
) -> None:
    # Given a first round that leaves 0.9 s of the turn
    clock = Clock()
    model = ScriptedModel(taking(clock, 23.1, another_round()))
    # When
    exchange = converse(loop(recall, model, clock, 4), recall, clock.now + 24)
    # Then the second round was never sent, and the turn fails as a model timeout
    assert len(model.requests) == 1
    assert isinstance(exchange.failure, ModelTimeout)
    assert exchange.failure.status == 504


def test_a_throttled_call_is_asked_again_while_the_turn_has_time(recall: InMemoryRecall) -> None:
    # Given a model throttled twice, then answering
    clock = Clock()
    throttled = ModelThrottled("slow down")
    model = ScriptedModel(throttled, throttled, ModelReply(text="Done."))
    # When
    exchange = converse(loop(recall, model, clock, 3), recall, clock.now + 24)
    # Then
    assert exchange.failure is None
    assert exchange.reply is not None and exchange.reply.text == "Done."
    assert len(model.requests) == 3
    assert len(clock.slept) == 2


def test_a_throttled_call_is_not_asked_again_past_its_attempts_or_its_time(
    recall: InMemoryRecall,
) -> None:
    # Given a model always throttled, in a turn with time for many tries but three attempts
    clock = Clock()
    model = ScriptedModel(then=ModelThrottled("slow down"))
    exchange = converse(loop(recall, model, clock, 3), recall, clock.now + 24)
    assert isinstance(exchange.failure, ModelThrottled)
    assert len(model.requests) == 3
    # And one with attempts to spare, whose throttled call leaves under a second
    clock = Clock()

    def slow_refusal(request: ModelRequest) -> ModelReply:
        clock.now += 0.5
        raise ModelThrottled("slow down")

    model = ScriptedModel(then=slow_refusal)
    exchange = converse(loop(recall, model, clock, 10), recall, clock.now + 1.4)
    assert isinstance(exchange.failure, ModelThrottled)
    assert len(model.requests) == 1
    assert clock.slept == []


def test_without_a_deadline_a_call_is_sent_as_it_was(recall: InMemoryRecall) -> None:
    # Given a background caller's loop, which leaves time to the provider's own timeouts
    clock = Clock()
    model = ScriptedModel(ModelReply(text="Done."))
    # When
    exchange = converse(loop(recall, model, clock, 3), recall, None)
    # Then
    assert exchange.failure is None
    assert model.requests == [REQUEST]


class ThrottledMidStream:
    """A streaming model that writes some of its reply, then is throttled."""

    def __init__(self) -> None:
        self.calls = 0

    def converse(self, request: ModelRequest) -> ModelReply:
        raise AssertionError("a listener's turn streams")

    def converse_stream(self, request: ModelRequest, on_text: Any) -> ModelReply:
        self.calls += 1
        on_text("Here is ")
        raise ModelThrottled("slow down")


class Heard:
    def __init__(self) -> None:
        self.texts: list[str] = []

    def started(self, conversation: Any, created: bool) -> None: ...

    def text(self, chunk: str) -> None:
        self.texts.append(chunk)

    def tool(self, name: str, key: str | None, outcome: Any) -> None: ...


def test_a_call_throttled_after_some_reply_was_streamed_is_not_asked_again(
    recall: InMemoryRecall,
) -> None:
    # Given a streamed turn whose model is throttled after its first words
    clock = Clock()
    model = ThrottledMidStream()
    tools = ToolLoop(
        lambda _: model, recall.memory_service, 4, 3, 0.5, clock.monotonic, clock.sleep
    )
    heard = Heard()
    memory = recall.memory_service.turn_memory(HeldMemory([], []))
    # When
    exchange = tools.converse(REQUEST, memory, "thread", heard, clock.now + 24)
    # Then the client heard those words once: asking again would send them twice
    assert isinstance(exchange.failure, ModelThrottled)
    assert (model.calls, heard.texts) == (1, ["Here is "])
