"""BedrockProvider against a real bedrock-runtime client under botocore's Stubber.

The Stubber validates every request against the service model, so these tests fail
if the provider builds a Converse call Bedrock would reject.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

import boto3
from botocore.config import Config
from botocore.exceptions import (
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)
from botocore.stub import Stubber
import pytest

from recall.domain.prompt import (
    ModelError,
    ModelRejected,
    ModelRequest,
    ModelThrottled,
    ModelTimeout,
    ModelUnavailable,
    PromptMessage,
    ToolCall,
    ToolResult,
    ToolSpec,
)
from recall.domain.tools import MEMORY_TOOLS
from recall.providers.bedrock import BedrockProvider
from recall.providers.converse_request import WINDOW_OPENING

MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"
SYSTEM = ["You are a helpful store assistant.", "<project_memory>\n</project_memory>"]
INFERENCE = {"maxTokens": 1024, "temperature": 0.3}
TOOL_CONFIG = {
    "tools": [
        {
            "toolSpec": {
                "name": tool.name,
                "description": tool.description,
                "inputSchema": {"json": tool.input_schema},
            }
        }
        for tool in MEMORY_TOOLS
    ]
}


@pytest.fixture
def provider(client: Any) -> BedrockProvider:
    return BedrockProvider(client)


def converse_response(
    content: list[dict[str, Any]], stop_reason: str = "end_turn", tokens: tuple[int, int] = (10, 5)
) -> dict[str, Any]:
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop_reason,
        "usage": {
            "inputTokens": tokens[0],
            "outputTokens": tokens[1],
            "totalTokens": sum(tokens),
        },
        "metrics": {"latencyMs": 120},
    }


def test_plain_turn_sends_system_messages_and_inference_config(
    provider: BedrockProvider, stubber: Stubber
) -> None:
    # Given
    request = ModelRequest(
        model_id=MODEL,
        system=[*SYSTEM, "   "],
        messages=[
            PromptMessage(role="user", text="Hi"),
            PromptMessage(role="assistant", text="Hello! How can I help?"),
            PromptMessage(role="user", text="Suggest a header colour."),
        ],
    )
    stubber.add_response(
        "converse",
        converse_response([{"text": "Try a deep navy."}], tokens=(42, 6)),
        {
            "modelId": MODEL,
            "system": [{"text": SYSTEM[0]}, {"text": SYSTEM[1]}],
            "messages": [
                {"role": "user", "content": [{"text": "Hi"}]},
                {"role": "assistant", "content": [{"text": "Hello! How can I help?"}]},
                {"role": "user", "content": [{"text": "Suggest a header colour."}]},
            ],
            "inferenceConfig": INFERENCE,
        },
    )

    # When
    reply = provider.converse(request)

    # Then
    assert reply.text == "Try a deep navy."
    assert reply.tool_calls == []
    assert reply.stop_reason == "end_turn"
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (42, 6)


def test_turn_with_tools_sends_tool_config_and_maps_tool_use(
    provider: BedrockProvider, stubber: Stubber
) -> None:
    # Given
    request = ModelRequest(
        model_id=MODEL,
        system=SYSTEM,
        messages=[PromptMessage(role="user", text="Always keep the header dark.")],
        tools=MEMORY_TOOLS,
        max_tokens=300,
        temperature=0.0,
    )
    tool_input = {"key": "header_dark", "value": "always keep the header dark"}
    stubber.add_response(
        "converse",
        converse_response(
            [
                {"text": "I'll remember that."},
                {"toolUse": {"toolUseId": "tu-1", "name": "save_preference", "input": tool_input}},
            ],
            stop_reason="tool_use",
        ),
        {
            "modelId": MODEL,
            "system": [{"text": text} for text in SYSTEM],
            "messages": [
                {"role": "user", "content": [{"text": "Always keep the header dark."}]},
            ],
            "inferenceConfig": {"maxTokens": 300, "temperature": 0.0},
            "toolConfig": TOOL_CONFIG,
        },
    )

    # When
    reply = provider.converse(request)

    # Then
    assert reply.stop_reason == "tool_use"
    assert reply.text == "I'll remember that."
    assert reply.tool_calls == [ToolCall(id="tu-1", name="save_preference", input=tool_input)]


RECORD_SUMMARY = ToolSpec(
    name="record_summary",
    description="Record the summary of earlier turns.",
    input_schema={
        "type": "object",
        "properties": {
            "facts": {"type": "array", "items": {"type": "string"}},
            "decisions": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["facts", "decisions"],
    },
)
RECORD_SUMMARY_CONFIG = {
    "toolSpec": {
        "name": RECORD_SUMMARY.name,
        "description": RECORD_SUMMARY.description,
        "inputSchema": {"json": RECORD_SUMMARY.input_schema},
    }
}


def test_forced_tool_choice_is_sent_and_the_forced_call_comes_back_as_structured_input(
    provider: BedrockProvider, stubber: Stubber
) -> None:
    # Given: a request that must answer through record_summary
    request = ModelRequest(
        model_id=MODEL,
        system=SYSTEM,
        messages=[PromptMessage(role="user", text="We sell candles. We decided on navy.")],
        tools=[RECORD_SUMMARY],
        tool_choice="record_summary",
    )
    structured = {"facts": ["We sell candles"], "decisions": ["Navy header"]}
    stubber.add_response(
        "converse",
        converse_response(
            [{"toolUse": {"toolUseId": "tu-9", "name": "record_summary", "input": structured}}],
            stop_reason="tool_use",
        ),
        {
            "modelId": MODEL,
            "system": [{"text": text} for text in SYSTEM],
            "messages": [
                {
                    "role": "user",
                    "content": [{"text": "We sell candles. We decided on navy."}],
                },
            ],
            "inferenceConfig": INFERENCE,
            "toolConfig": {
                "tools": [RECORD_SUMMARY_CONFIG],
                "toolChoice": {"tool": {"name": "record_summary"}},
            },
        },
    )

    # When
    reply = provider.converse(request)

    # Then
    assert reply.stop_reason == "tool_use"
    assert reply.text == ""
    assert reply.tool_calls == [ToolCall(id="tu-9", name="record_summary", input=structured)]


def test_without_a_forced_choice_no_tool_choice_is_sent_and_the_model_decides(
    provider: BedrockProvider, stubber: Stubber
) -> None:
    # Given: the same tool offered, no choice forced
    request = ModelRequest(
        model_id=MODEL,
        system=SYSTEM,
        messages=[PromptMessage(role="user", text="Hi")],
        tools=[RECORD_SUMMARY],
    )
    stubber.add_response(
        "converse",
        converse_response([{"text": "Hello!"}]),
        {
            "modelId": MODEL,
            "system": [{"text": text} for text in SYSTEM],
            "messages": [{"role": "user", "content": [{"text": "Hi"}]}],
            "inferenceConfig": INFERENCE,
            "toolConfig": {"tools": [RECORD_SUMMARY_CONFIG]},
        },
    )

    # When
    reply = provider.converse(request)

    # Then: the Stubber matched toolConfig exactly, so no toolChoice went out
    assert reply.text == "Hello!"
    assert reply.tool_calls == []


@pytest.mark.parametrize("tools", [[], MEMORY_TOOLS], ids=["no tools", "other tools"])
def test_forcing_a_tool_the_request_does_not_offer_is_rejected_before_calling_bedrock(
    provider: BedrockProvider, stubber: Stubber, tools: list[ToolSpec]
) -> None:
    # Given
    request = ModelRequest(
        model_id=MODEL,
        system=SYSTEM,
        messages=[PromptMessage(role="user", text="Summarise.")],
        tools=tools,
        tool_choice="record_summary",
    )

    # When / Then: no response is queued, so a call would fail the Stubber instead
    with pytest.raises(ModelRejected, match="record_summary"):
        provider.converse(request)


def test_multi_round_tool_use_sends_tool_result_back_and_ends_in_text(
    provider: BedrockProvider, stubber: Stubber
) -> None:
    # Given: round one asks for a tool call
    user = PromptMessage(role="user", text="Never use rounded buttons.")
    tool_input = {
        "key": "no_rounded_buttons",
        "value": "never use rounded buttons",
        "category": "forbidden",
    }
    stubber.add_response(
        "converse",
        converse_response(
            [{"toolUse": {"toolUseId": "tu-7", "name": "save_preference", "input": tool_input}}],
            stop_reason="tool_use",
        ),
        {
            "modelId": MODEL,
            "system": [{"text": text} for text in SYSTEM],
            "messages": [{"role": "user", "content": [{"text": "Never use rounded buttons."}]}],
            "inferenceConfig": INFERENCE,
            "toolConfig": TOOL_CONFIG,
        },
    )
    first = provider.converse(
        ModelRequest(model_id=MODEL, system=SYSTEM, messages=[user], tools=MEMORY_TOOLS)
    )

    # And round two carries the call and its result
    history = [
        user,
        PromptMessage(role="assistant", tool_calls=first.tool_calls),
        PromptMessage(
            role="user",
            tool_results=[ToolResult(tool_call_id="tu-7", content="saved no_rounded_buttons")],
        ),
    ]
    stubber.add_response(
        "converse",
        converse_response([{"text": "Saved: no rounded buttons from now on."}]),
        {
            "modelId": MODEL,
            "system": [{"text": text} for text in SYSTEM],
            "messages": [
                {"role": "user", "content": [{"text": "Never use rounded buttons."}]},
                {
                    "role": "assistant",
                    "content": [
                        {
                            "toolUse": {
                                "toolUseId": "tu-7",
                                "name": "save_preference",
                                "input": tool_input,
                            }
                        }
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "toolResult": {
                                "toolUseId": "tu-7",
                                "content": [{"text": "saved no_rounded_buttons"}],
                                "status": "success",
                            }
                        }
                    ],
                },
            ],
            "inferenceConfig": INFERENCE,
            "toolConfig": TOOL_CONFIG,
        },
    )

    # When
    second = provider.converse(
        ModelRequest(model_id=MODEL, system=SYSTEM, messages=history, tools=MEMORY_TOOLS)
    )

    # Then
    assert first.stop_reason == "tool_use"
    assert second.stop_reason == "end_turn"
    assert second.text == "Saved: no rounded buttons from now on."
    assert second.tool_calls == []


def test_failed_tool_result_is_sent_with_error_status_and_never_empty(
    provider: BedrockProvider, stubber: Stubber
) -> None:
    # Given: the assistant's calls and their results travel on one domain message
    call = ToolCall(id="tu-2", name="forget_preference", input={"key": "header_dark"})
    request = ModelRequest(
        model_id=MODEL,
        system=SYSTEM,
        messages=[
            PromptMessage(role="user", text="Forget header_dark."),
            PromptMessage(
                role="assistant",
                tool_calls=[call],
                tool_results=[ToolResult(tool_call_id="tu-2", content="", is_error=True)],
            ),
        ],
        tools=MEMORY_TOOLS,
    )
    stubber.add_response(
        "converse",
        converse_response([{"text": "That entry does not exist."}]),
        {
            "modelId": MODEL,
            "system": [{"text": text} for text in SYSTEM],
            "messages": [
                {"role": "user", "content": [{"text": "Forget header_dark."}]},
                {
                    "role": "assistant",
                    "content": [
                        {
                            "toolUse": {
                                "toolUseId": "tu-2",
                                "name": "forget_preference",
                                "input": {"key": "header_dark"},
                            }
                        }
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "toolResult": {
                                "toolUseId": "tu-2",
                                "content": [{"text": "(no output)"}],
                                "status": "error",
                            }
                        }
                    ],
                },
            ],
            "inferenceConfig": INFERENCE,
            "toolConfig": TOOL_CONFIG,
        },
    )

    # When / Then
    assert provider.converse(request).text == "That entry does not exist."


def test_consecutive_same_role_messages_are_merged_and_blank_text_is_dropped(
    provider: BedrockProvider, stubber: Stubber
) -> None:
    # Given: a window that opens with the assistant and holds two user messages in a row
    request = ModelRequest(
        model_id=MODEL,
        system=SYSTEM,
        messages=[
            PromptMessage(role="assistant", text="Here is the draft."),
            PromptMessage(role="user", text="Looks good."),
            PromptMessage(role="user", text="  "),
            PromptMessage(role="user", text="Make the title shorter."),
        ],
    )
    stubber.add_response(
        "converse",
        converse_response([{"text": "Done."}]),
        {
            "modelId": MODEL,
            "system": [{"text": text} for text in SYSTEM],
            "messages": [
                {"role": "user", "content": [{"text": WINDOW_OPENING}]},
                {"role": "assistant", "content": [{"text": "Here is the draft."}]},
                {
                    "role": "user",
                    "content": [{"text": "Looks good."}, {"text": "Make the title shorter."}],
                },
            ],
            "inferenceConfig": INFERENCE,
        },
    )

    # When / Then
    assert provider.converse(request).text == "Done."


def test_tool_history_without_tools_is_sent_as_text(
    provider: BedrockProvider, stubber: Stubber
) -> None:
    # Given: a last round offered no tools, so tool blocks would be rejected
    request = ModelRequest(
        model_id=MODEL,
        system=SYSTEM,
        messages=[
            PromptMessage(role="user", text="Always use serif fonts."),
            PromptMessage(
                role="assistant",
                tool_calls=[ToolCall(id="tu-3", name="save_preference", input={"key": "serif"})],
            ),
            PromptMessage(
                role="user", tool_results=[ToolResult(tool_call_id="tu-3", content="ok")]
            ),
        ],
    )
    stubber.add_response(
        "converse",
        converse_response([{"text": "Noted."}]),
        {
            "modelId": MODEL,
            "system": [{"text": text} for text in SYSTEM],
            "messages": [
                {"role": "user", "content": [{"text": "Always use serif fonts."}]},
                {
                    "role": "assistant",
                    "content": [{"text": '[called save_preference {"key": "serif"}]'}],
                },
                {"role": "user", "content": [{"text": "[result of tu-3: ok]"}]},
            ],
            "inferenceConfig": INFERENCE,
        },
    )

    # When / Then
    assert provider.converse(request).text == "Noted."


def test_request_without_messages_is_rejected_before_calling_bedrock(
    provider: BedrockProvider, stubber: Stubber
) -> None:
    request = ModelRequest(model_id=MODEL, system=SYSTEM, messages=[PromptMessage(role="user")])

    with pytest.raises(ModelRejected):
        provider.converse(request)


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("max_tokens", "max_tokens"),
        ("guardrail_intervened", "guardrail"),
        ("content_filtered", "content_filtered"),
        ("model_context_window_exceeded", "max_tokens"),
        ("malformed_model_output", "end_turn"),
    ],
)
def test_bedrock_stop_reasons_fold_into_the_domain_set(
    provider: BedrockProvider, stubber: Stubber, reason: str, expected: str
) -> None:
    stubber.add_response("converse", converse_response([{"text": "…"}], stop_reason=reason))

    reply = provider.converse(
        ModelRequest(model_id=MODEL, system=[], messages=[PromptMessage(role="user", text="Hi")])
    )

    assert reply.stop_reason == expected


@pytest.mark.parametrize(
    ("code", "error_type", "status"),
    [
        ("ThrottlingException", ModelThrottled, 503),
        ("ServiceUnavailableException", ModelUnavailable, 503),
        ("ModelNotReadyException", ModelUnavailable, 503),
        ("ModelTimeoutException", ModelTimeout, 504),
        ("ValidationException", ModelRejected, 502),
        ("AccessDeniedException", ModelRejected, 502),
        ("ResourceNotFoundException", ModelRejected, 502),
        ("ModelErrorException", ModelError, 502),
        ("InternalServerException", ModelError, 502),
        ("SomethingNewException", ModelError, 502),
    ],
)
def test_each_bedrock_error_code_maps_to_its_model_error(
    provider: BedrockProvider,
    stubber: Stubber,
    code: str,
    error_type: type[ModelError],
    status: int,
) -> None:
    # Given
    stubber.add_client_error("converse", service_error_code=code, service_message="nope")

    # When
    with pytest.raises(ModelError) as caught:
        provider.converse(
            ModelRequest(
                model_id=MODEL, system=[], messages=[PromptMessage(role="user", text="Hi")]
            )
        )

    # Then
    assert type(caught.value) is error_type
    assert caught.value.status == status
    assert code in caught.value.message
    assert caught.value.__cause__ is not None


@pytest.mark.parametrize(
    ("failure", "error_type"),
    [
        (ReadTimeoutError(endpoint_url="https://bedrock-runtime"), ModelTimeout),
        (ConnectTimeoutError(endpoint_url="https://bedrock-runtime"), ModelTimeout),
        (ConnectionClosedError(endpoint_url="https://bedrock-runtime"), ModelTimeout),
        (EndpointConnectionError(endpoint_url="https://bedrock-runtime"), ModelError),
    ],
)
def test_transport_failures_map_to_timeout_or_model_error(
    provider: BedrockProvider, client: Any, failure: Exception, error_type: type[ModelError]
) -> None:
    # Given
    request = ModelRequest(
        model_id=MODEL, system=[], messages=[PromptMessage(role="user", text="Hi")]
    )

    # When
    with (
        mock.patch.object(client, "_make_api_call", side_effect=failure),
        pytest.raises(ModelError) as caught,
    ):
        provider.converse(request)

    # Then
    assert type(caught.value) is error_type
    assert type(failure).__name__ in caught.value.message
    assert caught.value.__cause__ is failure


def test_read_timeout_during_send_ends_in_model_timeout() -> None:
    # Given: a client whose HTTP send times out, with retries off to keep the test fast
    client: Any = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
        config=Config(retries={"mode": "standard", "max_attempts": 1}),
    )

    def time_out(**_: Any) -> None:
        raise ReadTimeoutError(endpoint_url="https://bedrock-runtime.us-east-1.amazonaws.com")

    client.meta.events.register("before-send.bedrock-runtime.Converse", time_out)

    # When / Then
    with pytest.raises(ModelTimeout):
        BedrockProvider(client).converse(
            ModelRequest(
                model_id=MODEL, system=[], messages=[PromptMessage(role="user", text="Hi")]
            )
        )


def test_client_is_created_lazily_with_adaptive_retries_and_timeouts() -> None:
    # Given
    with mock.patch("recall.providers.bedrock.boto3.client") as make_client:
        provider = BedrockProvider(max_attempts=4, read_timeout=12.0, connect_timeout=2.0)
        assert make_client.call_count == 0

        # When
        first = provider.client
        second = provider.client

    # Then
    assert first is second
    make_client.assert_called_once()
    (service,) = make_client.call_args.args
    config = make_client.call_args.kwargs["config"]
    assert service == "bedrock-runtime"
    assert config.retries == {"mode": "adaptive", "total_max_attempts": 4}
    assert (config.read_timeout, config.connect_timeout) == (12.0, 2.0)


def test_a_call_within_a_turns_time_tries_once_with_a_read_timeout_inside_it() -> None:
    # Given clients whose every send times out, counted per client
    made: list[tuple[Config, list[int]]] = []
    real = boto3.client

    def make(service: str, config: Config) -> Any:
        client = real(
            service,
            region_name="us-east-1",
            aws_access_key_id="x",
            aws_secret_access_key="x",
            config=config,
        )
        sends: list[int] = []

        def time_out(**_: Any) -> None:
            sends.append(1)
            raise ReadTimeoutError(endpoint_url="https://bedrock-runtime.us-east-1.amazonaws.com")

        client.meta.events.register("before-send.bedrock-runtime.Converse", time_out)
        made.append((config, sends))
        return client

    request = ModelRequest(
        model_id=MODEL, system=[], messages=[PromptMessage(role="user", text="Hi")]
    )
    with mock.patch("recall.providers.bedrock.boto3.client", side_effect=make):
        provider = BedrockProvider(max_attempts=4, read_timeout=25.0, connect_timeout=3.0)
        # When two calls have 7.6 s and 7.2 s left, and one has more than the read timeout
        for left in (7.6, 7.2, 40.0):
            with pytest.raises(ModelTimeout):
                provider.converse(request.model_copy(update={"timeout_seconds": left}))
    # Then the first two share one client whose connect and read wait 7 s in all, once each
    (seven, seven_sends), (capped, capped_sends) = made
    assert seven.connect_timeout + seven.read_timeout == 7
    assert seven.retries == {"mode": "standard", "total_max_attempts": 1}
    assert seven_sends == [1, 1]
    # And a call with time to spare still waits no longer than the timeouts, once
    assert (capped.connect_timeout, capped.read_timeout, capped_sends) == (3, 25, [1])
