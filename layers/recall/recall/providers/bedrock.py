"""Amazon Bedrock, through the model-agnostic Converse API.

Converse gives one request shape and native tool calling for every Bedrock chat model,
so the chat service never learns a vendor's own format. The request is
``converse_request``'s and the reply ``converse_reply``'s; this module sends one, on a
client made on first use, and is the only one that turns Bedrock's errors into
`ModelError`s. ConverseStream takes the same request; its events are assembled into the
same reply, and an error raised inside the stream maps like one raised by the call.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final, cast

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    ReadTimeoutError,
)
from urllib3.exceptions import ReadTimeoutError as StreamReadTimeout

from recall.domain.prompt import (
    ModelError,
    ModelRejected,
    ModelReply,
    ModelRequest,
    ModelThrottled,
    ModelTimeout,
    ModelUnavailable,
    TextSink,
)
from recall.providers.converse_reply import model_reply, streamed_reply
from recall.providers.converse_request import converse_params

if TYPE_CHECKING:
    from mypy_boto3_bedrock_runtime import BedrockRuntimeClient
    from mypy_boto3_bedrock_runtime.type_defs import ConverseStreamRequestTypeDef

_ERRORS_BY_CODE: Final[dict[str, type[ModelError]]] = {
    "ThrottlingException": ModelThrottled,
    "ServiceUnavailableException": ModelUnavailable,
    "ModelNotReadyException": ModelUnavailable,
    "ModelTimeoutException": ModelTimeout,
    "ValidationException": ModelRejected,
    "AccessDeniedException": ModelRejected,
    "ResourceNotFoundException": ModelRejected,
}
_TIMEOUTS: Final = (ReadTimeoutError, ConnectTimeoutError, ConnectionClosedError)


def caches_prompts(model_id: str, prefixes: tuple[str, ...]) -> bool:
    """Whether a model id, or an inference profile id (``us.``, ``eu.``, ``global.``… before
    a model id), names a model that takes cache points."""
    return model_id.startswith(prefixes) or model_id.partition(".")[2].startswith(prefixes)


class BedrockProvider:
    """A `ModelProvider` backed by `bedrock-runtime` `converse`."""

    def __init__(
        self,
        client: BedrockRuntimeClient | None = None,
        *,
        max_attempts: int = 3,
        read_timeout: float = 25.0,
        connect_timeout: float = 5.0,
        cache_model_prefixes: tuple[str, ...] = (),
    ) -> None:
        self._client = client
        self._injected = client is not None
        self._cache_model_prefixes = cache_model_prefixes
        self._read_timeout = read_timeout
        self._connect_timeout = connect_timeout
        self._config = Config(
            retries={"mode": "adaptive", "total_max_attempts": max_attempts},
            read_timeout=read_timeout,
            connect_timeout=connect_timeout,
        )
        self._timed: dict[tuple[int, int], BedrockRuntimeClient] = {}

    @property
    def client(self) -> BedrockRuntimeClient:
        """The injected client, or one made on first use so imports stay free of AWS."""
        if self._client is None:
            self._client = boto3.client("bedrock-runtime", config=self._config)
        return self._client

    def _client_within(self, timeout: float | None) -> BedrockRuntimeClient:
        """The client for a call that must end within ``timeout`` seconds: botocore's
        timeouts are the client's, and its retries would wait them out again on every
        attempt, so such a call gets a client whose connect and read timeouts add up to
        at most that many whole seconds (a few, made once each) and that tries once; the
        turn retries within its own time."""
        if timeout is None or self._injected:
            return self.client
        seconds = int(timeout)
        connect = max(1, min(int(self._connect_timeout), seconds // 4))
        read = max(1, min(seconds - connect, int(self._read_timeout)))
        if (connect, read) not in self._timed:
            config = Config(
                retries={"mode": "standard", "total_max_attempts": 1},
                read_timeout=read,
                connect_timeout=connect,
            )
            self._timed[(connect, read)] = boto3.client("bedrock-runtime", config=config)
        return self._timed[(connect, read)]

    def converse(self, request: ModelRequest) -> ModelReply:
        """Send one Converse request and map the reply, or raise a `ModelError`."""
        params = converse_params(
            request, cache_points=caches_prompts(request.model_id, self._cache_model_prefixes)
        )
        try:
            response = self._client_within(request.timeout_seconds).converse(**params)
        except (ClientError, BotoCoreError) as exc:
            raise model_error(exc, request.model_id) from exc
        return model_reply(response)

    def converse_stream(self, request: ModelRequest, on_text: TextSink) -> ModelReply:
        """Send one ConverseStream request, hand its text to ``on_text`` as it arrives and
        return the reply ``converse`` would have; a failure, before or during the stream,
        raises the same `ModelError`."""
        params = converse_params(
            request, cache_points=caches_prompts(request.model_id, self._cache_model_prefixes)
        )
        try:
            # The same request: it differs from Converse's only in a guardrail we never set.
            timeout = request.timeout_seconds
            ends = None if timeout is None else time.monotonic() + timeout
            client = self._client_within(timeout)
            response = client.converse_stream(**cast("ConverseStreamRequestTypeDef", params))
            return streamed_reply(response["stream"], on_text, ends)
        except (ClientError, BotoCoreError) as exc:
            raise model_error(exc, request.model_id) from exc
        except StreamReadTimeout as exc:
            # A wait for the next event past the read timeout, raised by urllib3 as the
            # stream is read, not by botocore.
            raise ModelTimeout(f"Bedrock stopped streaming for model {request.model_id}") from exc


def model_error(exc: ClientError | BotoCoreError, model_id: str) -> ModelError:
    """The `ModelError` for a failed call. An error event inside a stream names its code
    as the stream's member (``throttlingException``), the call as the exception's name."""
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = error.get("Code", "Unknown")
        code = code[:1].upper() + code[1:]
        detail = error.get("Message", "") or str(exc)
        error_type = _ERRORS_BY_CODE.get(code, ModelError)
        return error_type(f"Bedrock {code} for model {model_id}: {detail}")
    if isinstance(exc, _TIMEOUTS):
        return ModelTimeout(f"Bedrock {type(exc).__name__} for model {model_id}: {exc}")
    return ModelError(f"Bedrock {type(exc).__name__} for model {model_id}: {exc}")
