"""What users write stays out of the logs: at INFO, the level a deployment runs at, no log
line of the ``recall`` logger carries a message's text or a memory entry's value, through
a turn that states a rule (so memory is saved), the background jobs it queues, and a
memory write. Each record is checked as CloudWatch gets it: Powertools' JSON line, with
every ``extra`` field."""

from __future__ import annotations

import ast
from collections.abc import Callable
import logging
from pathlib import Path

import boto3
from botocore.stub import Stubber
import pytest

from local import background, embedded, template
from recall.domain import clock
from recall.domain.messages import Message
from recall.observability import logger as recall_logger
from recall.providers.bedrock import BedrockProvider
from recall.services.extraction import RECORD_MEMORIES, ModelExtractor
from recall.wiring import memory_store
from tests.integration.conftest import Api

MakeProject = Callable[..., str]

RULE = "Always paint the shop header quokka-lantern teal"
VALUE = "zanzibar-umbrella 4471, never vermilion"
SECRET_WORDS = ("quokka-lantern", "zanzibar-umbrella", "vermilion")


# What ``logging.LogRecord`` sets itself: an ``extra`` key among them makes the call raise.
RESERVED = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}
SOURCES = [
    *sorted((template.ROOT / "layers" / "recall" / "recall").rglob("*.py")),
    *sorted((template.ROOT / "functions").rglob("*.py")),
]


def log_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    formatter = recall_logger.registered_formatter
    return [formatter.format(record) for record in caplog.records]


def test_a_turn_that_saves_memory_and_a_memory_write_log_none_of_their_words(
    alice: Api,
    make_project: MakeProject,
    embedded_store: embedded.EmbeddedStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given a thread long enough for extraction to run after the next turn
    project = make_project(alice)
    thread = alice.post(f"/projects/{project}/chat", {"message": "hello"}).body
    thread_id = thread["conversation"]["id"]
    for message in ("what can you do?", "tell me about headers"):
        alice.post(f"/projects/{project}/chat", {"message": message, "conversationId": thread_id})
    # When, logging at INFO, a turn states a rule, the worker runs what it queued, and an
    # entry is written with a value of its own
    with caplog.at_level(logging.INFO, logger="recall"):
        reply = alice.post(
            f"/projects/{project}/chat", {"message": RULE, "conversationId": thread_id}
        )
        for poller in background.pollers(embedded_store):
            poller.drain(deadline_seconds=30)
        written = alice.put(
            f"/projects/{project}/memories/header_colour", {"value": VALUE, "category": "brand"}
        )
    # Then both happened, and were logged
    assert reply.status == 200, reply
    assert written.status in (200, 201), written
    saved = memory_store().active(alice.sub or "", project, None, clock.now())[0]
    assert any("quokka-lantern" in entry.value for entry in saved), saved
    lines = log_lines(caplog)
    assert any('"turn answered"' in line for line in lines), lines
    # And no line carries a word of the message or of either value
    leaking = [line for line in lines if any(word in line for word in SECRET_WORDS)]
    assert not leaking, "log lines with user content:\n" + "\n".join(leaking)


def test_an_extraction_answer_outside_its_schema_is_logged_without_the_words_it_quotes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given a model whose forced tool answer quotes the user and breaks the schema
    client = boto3.client("bedrock-runtime", region_name="us-east-1")
    entry = {"key": "header", "value": VALUE, "category": RULE, "confidence": 7}
    answer = {
        "output": {
            "message": {
                "role": "assistant",
                "content": [
                    {
                        "toolUse": {
                            "toolUseId": "t1",
                            "name": RECORD_MEMORIES,
                            "input": {"entries": [entry]},
                        }
                    }
                ],
            }
        },
        "stopReason": "tool_use",
        "usage": {"inputTokens": 50, "outputTokens": 20, "totalTokens": 70},
        "metrics": {"latencyMs": 100},
    }
    said = [Message(message_id="01A", role="user", content=RULE, created_at="t")]
    extractor = ModelExtractor(
        BedrockProvider(client),
        "anthropic.claude",
        512,
        500,
        transcript_max_chars=100_000,
        message_max_chars=8_000,
    )
    # When
    with Stubber(client) as stub, caplog.at_level(logging.INFO, logger="recall"):
        stub.add_response("converse", answer)
        proposed = extractor.propose(said)
    # Then nothing is proposed, the failure is logged with where it failed, and no word of it
    assert proposed == []
    lines = log_lines(caplog)
    assert any("does not fit its schema" in line and "category" in line for line in lines), lines
    assert not [line for line in lines if any(word in line for word in SECRET_WORDS)], lines


def _extra_keys(source: Path) -> list[tuple[int, str]]:
    """The literal keys of every ``extra={…}`` a call in ``source`` passes."""
    found = []
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                if keyword.arg == "extra" and isinstance(keyword.value, ast.Dict):
                    found += [
                        (node.lineno, key.value)
                        for key in keyword.value.keys
                        if isinstance(key, ast.Constant) and isinstance(key.value, str)
                    ]
    return found


def test_no_log_call_names_a_field_the_log_record_reserves() -> None:
    """At WARNING (tests, make dev) an INFO call with ``extra={"created": …}`` is never
    built; at INFO (a deployment) it raises and the request fails."""
    # When
    clashes = [
        f"{source.relative_to(template.ROOT)}:{line} extra key {key!r}"
        for source in SOURCES
        for line, key in _extra_keys(source)
        if key in RESERVED
    ]
    # Then
    assert SOURCES
    assert not clashes, "\n".join(clashes)
