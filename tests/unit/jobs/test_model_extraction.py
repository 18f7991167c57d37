"""Extraction and summaries through Bedrock: the request forces the tool whose schema the
answer must fit, under botocore's Stubber (which checks it against the real service
model), and an answer that does not fit proposes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
from botocore.stub import ANY, Stubber
import pytest

from recall.domain.memory import Category, Source
from recall.domain.messages import Message
from recall.providers.bedrock import BedrockProvider
from recall.services.extraction import RECORD_MEMORIES, ModelExtractor

MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"
MESSAGES = [
    Message(message_id="01A", role="user", content="Always keep the header dark.", created_at="t"),
    Message(message_id="01B", role="assistant", content="Noted.", created_at="t"),
]


@pytest.fixture
def client() -> Any:
    return boto3.client(
        "bedrock-runtime", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )


@pytest.fixture
def stubber(client: Any) -> Iterator[Stubber]:
    with Stubber(client) as stub:
        yield stub
        stub.assert_no_pending_responses()


def tool_answer(entries: Any) -> dict[str, Any]:
    return {
        "output": {
            "message": {
                "role": "assistant",
                "content": [
                    {
                        "toolUse": {
                            "toolUseId": "t1",
                            "name": RECORD_MEMORIES,
                            "input": {"entries": entries},
                        }
                    }
                ],
            }
        },
        "stopReason": "tool_use",
        "usage": {"inputTokens": 50, "outputTokens": 20, "totalTokens": 70},
        "metrics": {"latencyMs": 100},
    }


def forced_request() -> dict[str, Any]:
    return {
        "modelId": MODEL,
        "system": ANY,
        "messages": ANY,
        "inferenceConfig": ANY,
        "toolConfig": {
            "tools": ANY,
            "toolChoice": {"tool": {"name": RECORD_MEMORIES}},
        },
    }


def test_extraction_forces_its_tool_and_keeps_what_fits_the_schema(
    client: Any, stubber: Stubber
) -> None:
    # Given a model that answers through the forced tool
    stubber.add_response(
        "converse",
        tool_answer(
            [
                {
                    "key": "header_dark",
                    "value": "Always keep the header dark",
                    "category": "preferences",
                    "confidence": 0.9,
                },
                {"key": "Not A Key!", "value": "x", "category": "brand", "confidence": 0.8},
            ]
        ),
        forced_request(),
    )
    extractor = ModelExtractor(BedrockProvider(client), MODEL, 512, 500)
    # When
    [candidate] = extractor.propose(MESSAGES)
    # Then the well-formed entry is a candidate; the malformed one is dropped
    assert (candidate.key, candidate.category) == ("header_dark", Category.PREFERENCES)
    assert (candidate.source, candidate.confidence) == (Source.EXTRACTED, 0.9)


def test_an_answer_outside_the_schema_proposes_nothing(client: Any, stubber: Stubber) -> None:
    stubber.add_response(
        "converse",
        tool_answer([{"key": "tone", "value": "warm", "category": "mood", "confidence": 2}]),
        forced_request(),
    )
    assert ModelExtractor(BedrockProvider(client), MODEL, 512, 500).propose(MESSAGES) == []
