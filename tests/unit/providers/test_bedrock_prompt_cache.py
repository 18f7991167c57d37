"""Cache points on Bedrock, under botocore's Stubber: it validates each request against the
real service model, so a cache point where Converse takes none fails here."""

from __future__ import annotations

from typing import Any

from botocore.stub import Stubber
import pytest

from recall.domain.context import SYSTEM_TEXT, assemble, turn_context
from recall.domain.messages import Message
from recall.domain.projects import Project
from recall.domain.prompt import ModelRequest
from recall.domain.tools import TOOL_INSTRUCTIONS
from recall.providers.bedrock import BedrockProvider, caches_prompts
from recall.providers.converse_request import converse_params
from recall.settings import Settings

CACHING = "anthropic.claude-3-5-haiku-20241022-v1:0"
NOT_CACHING = "mistral.mistral-large-2407-v1:0"
PREFIXES = Settings().prompt_cache_model_prefixes
AT = "2026-11-29T09:30:00.000Z"
CACHE_POINT = {"cachePoint": {"type": "default"}}
MEMORY = "<project_memory>\n[brand]\ntone: warm\n</project_memory>"
PROJECT_CONTEXT = "<project_context>\nname: Corner Shop\ncurrency: EUR\n</project_context>"
SUMMARY = "<conversation_summary>\nWe chose a dark header.\n</conversation_summary>"


def turn(model_id: str) -> ModelRequest:
    """A real turn's request: every layer, a window of two messages, the new message."""
    project = Project(
        project_id="p1",
        name="Corner Shop",
        context={"currency": "EUR"},
        created_by="u1",
        created_at=AT,
        updated_at=AT,
    )
    window = [
        Message(message_id="m1", role="user", content="earlier", created_at=AT),
        Message(message_id="m2", role="assistant", content="reply", created_at=AT),
    ]
    context = turn_context(project, MEMORY, "We chose a dark header.", window)
    return assemble(context, "next", model_id, 1024, 0.3)


def reply(usage: dict[str, int]) -> dict[str, Any]:
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": "ok"}]}},
        "stopReason": "end_turn",
        "usage": usage,
        "metrics": {"latencyMs": 80},
    }


def expected(model_id: str, cached: bool) -> dict[str, Any]:
    request = turn(model_id)
    tool_config = converse_params(request)["toolConfig"]
    point = [CACHE_POINT] if cached else []
    return {
        "modelId": model_id,
        "system": [
            {"text": SYSTEM_TEXT},
            {"text": TOOL_INSTRUCTIONS},
            {"text": MEMORY},
            {"text": PROJECT_CONTEXT},
            {"text": SUMMARY},
            *point,
        ],
        "messages": [
            {"role": "user", "content": [{"text": "earlier"}]},
            {"role": "assistant", "content": [{"text": "reply"}, *point]},
            {"role": "user", "content": [{"text": "next"}]},
        ],
        "inferenceConfig": {"maxTokens": 1024, "temperature": 0.3},
        "toolConfig": tool_config,
    }


def test_a_caching_model_gets_cache_points_after_the_system_part_and_after_the_window(
    client: Any, stubber: Stubber
) -> None:
    # Given a model with prompt caching
    provider = BedrockProvider(client, cache_model_prefixes=PREFIXES)
    usage = {
        "inputTokens": 12,
        "outputTokens": 3,
        "totalTokens": 2115,
        "cacheReadInputTokens": 2048,
        "cacheWriteInputTokens": 52,
    }
    stubber.add_response("converse", reply(usage), expected(CACHING, cached=True))

    # When
    answer = provider.converse(turn(CACHING))

    # Then the tools carry none (the system's point covers them) and the usage reports the
    # cache's tokens beside the others
    assert answer.usage.model_dump() == {
        "input_tokens": 12,
        "output_tokens": 3,
        "cache_read_input_tokens": 2048,
        "cache_write_input_tokens": 52,
    }


def test_a_model_without_prompt_caching_gets_no_cache_points(client: Any, stubber: Stubber) -> None:
    provider = BedrockProvider(client, cache_model_prefixes=PREFIXES)
    usage = {"inputTokens": 2112, "outputTokens": 3, "totalTokens": 2115}
    stubber.add_response("converse", reply(usage), expected(NOT_CACHING, cached=False))

    answer = provider.converse(turn(NOT_CACHING))

    assert (answer.usage.cache_read_input_tokens, answer.usage.cache_write_input_tokens) == (0, 0)


def test_the_cache_point_follows_the_window_when_it_ends_with_the_users_message() -> None:
    # A window whose last reply failed ends with a user message; the new one joins its turn
    request = turn(CACHING)
    request.messages = [request.messages[0], request.messages[2]]
    request.stable_messages = 1
    params = converse_params(request, cache_points=True)
    assert params["messages"] == [
        {"role": "user", "content": [{"text": "earlier"}, CACHE_POINT, {"text": "next"}]}
    ]


def test_requests_other_than_a_turn_mark_nothing_and_get_no_cache_points() -> None:
    request = ModelRequest(model_id=CACHING, system=["summarise"], messages=turn(CACHING).messages)
    params = converse_params(request, cache_points=True)
    assert CACHE_POINT not in params.get("system", [])
    assert all(CACHE_POINT not in message["content"] for message in params["messages"])


@pytest.mark.parametrize(
    ("model_id", "caches"),
    [
        ("anthropic.claude-3-5-haiku-20241022-v1:0", True),
        ("us.anthropic.claude-3-7-sonnet-20250219-v1:0", True),
        ("global.anthropic.claude-sonnet-4-5-20250929-v1:0", True),
        ("eu.amazon.nova-pro-v1:0", True),
        ("amazon.nova-micro-v1:0", True),
        ("anthropic.claude-3-5-sonnet-20241022-v2:0", False),
        ("meta.llama3-70b-instruct-v1:0", False),
        ("recall-offline", False),
    ],
)
def test_which_models_take_cache_points_is_the_settings_prefix_list(
    model_id: str, caches: bool
) -> None:
    assert caches_prompts(model_id, PREFIXES) is caches
