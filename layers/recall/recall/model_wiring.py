"""Which model answers: ``ModelChoice`` picks the provider for a model id (the settings'
native provider, made once per process on first use, through the JSON reply protocol
for models without native tool calling), and the background jobs' model users are made
from it: the extraction job's extractor and the summary job's summariser. Providers and
services are imported inside the functions that make them, as in ``recall.wiring``."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING

from recall.settings import Settings, get_settings

if TYPE_CHECKING:
    from recall.domain.prompt import ModelProvider
    from recall.services.extraction import MemoryExtractor
    from recall.services.summaries import Summarizer


class ModelChoice:
    """Which provider answers a model id: the settings' provider (``native``, made when
    first asked), through the JSON reply protocol for models without native tool calling.
    ``use`` puts another provider in front of both for chat turns, for tests and local
    tools."""

    def __init__(
        self, settings: Settings, native: Callable[[], ModelProvider] | None = None
    ) -> None:
        self._settings = settings
        self._native = native or _native_provider
        self._chosen: ModelProvider | None = None

    def use(self, provider: ModelProvider | None) -> None:
        """Answer every later turn with ``provider``; ``None`` goes back to the settings'."""
        self._chosen = provider

    def __call__(self, model_id: str) -> ModelProvider:
        if self._chosen is not None:
            return self._chosen
        return self.configured(model_id)

    def configured(self, model_id: str) -> ModelProvider:
        """The settings' provider for ``model_id``, whatever ``use`` put in front: a
        background job asks its model what that model accepts, as a turn does."""
        from recall.providers import JsonProtocolProvider

        native = self._native()
        if model_id.startswith(self._settings.json_protocol_model_prefixes):
            return JsonProtocolProvider(native)
        return native


@lru_cache(maxsize=1)
def _native_provider() -> ModelProvider:
    from recall.providers import new_provider

    settings = get_settings()
    return new_provider(
        settings.model_provider,
        max_attempts=settings.model_max_attempts,
        read_timeout=settings.model_read_timeout_seconds,
        connect_timeout=settings.model_connect_timeout_seconds,
        cache_model_prefixes=settings.prompt_cache_model_prefixes,
        offline_chunk_seconds=settings.offline_stream_chunk_seconds,
    )


def memory_extractor(settings: Settings, models: ModelChoice) -> MemoryExtractor:
    """The extraction job's extractor: the default model through the provider it takes
    (the JSON protocol for a model that cannot be made to call a tool), or rules offline."""
    from recall.services.extraction import ModelExtractor, RuleExtractor

    if settings.model_provider == "offline":
        return RuleExtractor()
    return ModelExtractor(
        models.configured(settings.default_model_id),
        settings.default_model_id,
        settings.model_max_tokens,
        settings.memory_value_max_chars,
        transcript_max_chars=settings.extract_transcript_max_chars,
        message_max_chars=settings.extract_message_max_chars,
    )


def summarizer(settings: Settings, models: ModelChoice) -> Summarizer:
    """The summary job's summariser: the default model through the provider it takes, or
    the extractive fold offline."""
    from recall.services.summaries import ExtractiveSummarizer, ModelSummarizer

    if settings.model_provider == "offline":
        return ExtractiveSummarizer(settings.summary_max_chars, settings.summary_point_max_chars)
    return ModelSummarizer(
        models.configured(settings.default_model_id),
        settings.default_model_id,
        settings.summary_max_chars,
        settings.summary_point_max_chars,
        settings.summary_max_tokens,
        fold_max_chars=settings.summary_fold_max_chars,
        message_max_chars=settings.summary_message_max_chars,
    )
