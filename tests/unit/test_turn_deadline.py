"""When a turn's model must be done: inside API Gateway's wait for an HTTP turn, and for
every turn early enough in its function's time to save what happened."""

from __future__ import annotations

import time

import pytest

from local.runtime import LambdaContext
from recall.api.chat import turn_deadline
from recall.settings import Settings


def context(seconds_left: float) -> LambdaContext:
    return LambdaContext("ChatFunction", deadline_ms=int((time.time() + seconds_left) * 1000))


def seconds_until(deadline: float) -> float:
    return deadline - time.monotonic()


def test_an_http_turn_has_chat_model_seconds_though_its_function_has_longer() -> None:
    settings = Settings()
    left = seconds_until(turn_deadline(settings, context(60), settings.chat_model_seconds))
    assert left == pytest.approx(settings.chat_model_seconds, abs=0.5)


def test_a_turn_keeps_the_save_reserve_of_a_function_near_its_end() -> None:
    settings = Settings()
    left = seconds_until(turn_deadline(settings, context(12), settings.chat_model_seconds))
    assert left == pytest.approx(12 - settings.turn_save_reserve_seconds, abs=0.5)


def test_a_streamed_turn_is_bounded_by_its_function_alone() -> None:
    settings = Settings()
    left = seconds_until(turn_deadline(settings, context(300), None))
    assert left == pytest.approx(300 - settings.turn_save_reserve_seconds, abs=0.5)


def test_the_http_budget_leaves_room_inside_api_gateways_30_seconds() -> None:
    settings = Settings()
    assert settings.chat_model_seconds + settings.turn_save_reserve_seconds <= 30
