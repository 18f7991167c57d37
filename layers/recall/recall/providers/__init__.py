"""Model providers: the one place that knows how a model is reached.

Each provider implements `recall.domain.prompt.ModelProvider`: Bedrock's Converse API in
production, a deterministic offline model for local runs and tests, and the JSON reply
protocol wrapped around either for models without native tool calling. Callers pick one
with `new_provider` from their settings and never import a provider module directly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from recall.domain.prompt import ModelProvider
from recall.providers.bedrock import BedrockProvider
from recall.providers.json_protocol import JsonProtocolProvider
from recall.providers.offline import OfflineProvider

if TYPE_CHECKING:
    from mypy_boto3_bedrock_runtime import BedrockRuntimeClient

PROVIDER_NAMES = ("bedrock", "offline")

__all__ = [
    "PROVIDER_NAMES",
    "BedrockProvider",
    "JsonProtocolProvider",
    "OfflineProvider",
    "new_provider",
]


def new_provider(
    name: str,
    *,
    json_protocol: bool = False,
    bedrock_client: BedrockRuntimeClient | None = None,
    max_attempts: int = 3,
    read_timeout: float = 25.0,
    connect_timeout: float = 5.0,
    cache_model_prefixes: tuple[str, ...] = (),
    offline_chunk_seconds: float = 0.0,
) -> ModelProvider:
    """The provider called `name`, wrapped in the JSON protocol when asked.

    Raises ValueError for an unknown name, so a misspelt setting fails at cold start
    rather than on the first chat turn.
    """
    provider: ModelProvider
    match name.strip().lower():
        case "bedrock":
            provider = BedrockProvider(
                bedrock_client,
                max_attempts=max_attempts,
                read_timeout=read_timeout,
                connect_timeout=connect_timeout,
                cache_model_prefixes=cache_model_prefixes,
            )
        case "offline":
            provider = OfflineProvider(offline_chunk_seconds)
        case _:
            raise ValueError(
                f"Unknown model provider {name!r}; expected one of {', '.join(PROVIDER_NAMES)}"
            )
    return JsonProtocolProvider(provider) if json_protocol else provider
