"""How a Lambda process puts services together: once, lazily, from the settings. Services,
stores and providers are imported inside the function that builds them, so each handler loads
only what its routes use (a shorter cold start). Which model answers, and the background
jobs' model users, are ``recall.model_wiring``'s."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING

from recall.model_wiring import ModelChoice, memory_extractor, summarizer
from recall.settings import Settings, get_settings

if TYPE_CHECKING:
    from recall.api.connections import LinkChoice
    from recall.services.access import ProjectAccess
    from recall.services.chat import ChatService
    from recall.services.consolidation import ConsolidationService
    from recall.services.context import ContextService
    from recall.services.conversations import ConversationService
    from recall.services.data import DataService
    from recall.services.erasure import ErasureService
    from recall.services.jobs import JobBatch, JobRunner
    from recall.services.maintenance import Maintenance
    from recall.services.memories import MemoryService
    from recall.services.presets import PresetService
    from recall.services.projects import ProjectService
    from recall.services.sessions import SessionService
    from recall.services.turn_context import TurnContextLoader
    from recall.services.usage import UsageService
    from recall.store.conversations import ConversationStore
    from recall.store.exports import ExportStore
    from recall.store.imports import ImportStore
    from recall.store.jobs import JobQueue
    from recall.store.memories import MemoryStore
    from recall.store.memory_upkeep import MemoryUpkeep
    from recall.store.messages import MessageStore
    from recall.store.presets import PresetStore
    from recall.store.projects import ProjectStore
    from recall.store.sessions import SessionStore
    from recall.store.turns import TurnStore
    from recall.store.usage import UsageStore


@lru_cache(maxsize=1)
def model_choice() -> ModelChoice:
    return ModelChoice(get_settings())


@lru_cache(maxsize=1)
def project_store() -> ProjectStore:
    from recall.store.projects import ProjectStore

    return ProjectStore(get_settings())


@lru_cache(maxsize=1)
def conversation_store() -> ConversationStore:
    from recall.store.conversations import ConversationStore

    return ConversationStore(get_settings())


@lru_cache(maxsize=1)
def message_store() -> MessageStore:
    from recall.store.messages import MessageStore

    return MessageStore(get_settings())


@lru_cache(maxsize=1)
def session_store() -> SessionStore:
    from recall.store.sessions import SessionStore

    return SessionStore(get_settings())


@lru_cache(maxsize=1)
def memory_store() -> MemoryStore:
    from recall.store.memories import MemoryStore

    return MemoryStore(get_settings())


@lru_cache(maxsize=1)
def import_store() -> ImportStore:
    from recall.store.imports import ImportStore

    return ImportStore(get_settings())


@lru_cache(maxsize=1)
def export_store() -> ExportStore:
    from recall.store.exports import ExportStore

    return ExportStore(get_settings())


@lru_cache(maxsize=1)
def memory_upkeep() -> MemoryUpkeep:
    from recall.store.memory_upkeep import MemoryUpkeep

    return MemoryUpkeep(get_settings())


@lru_cache(maxsize=1)
def usage_store() -> UsageStore:
    from recall.store.usage import UsageStore

    return UsageStore(get_settings())


@lru_cache(maxsize=1)
def preset_store() -> PresetStore:
    from recall.store.presets import PresetStore

    return PresetStore(get_settings(), project_store())


@lru_cache(maxsize=1)
def preset_service() -> PresetService:
    from recall.services.presets import PresetService

    return PresetService(get_settings(), project_access(), preset_store())


@lru_cache(maxsize=1)
def usage_service() -> UsageService:
    from recall.services.usage import UsageService

    return UsageService(get_settings(), project_access(), project_store(), usage_store())


@lru_cache(maxsize=1)
def project_access() -> ProjectAccess:
    from recall.services.access import ProjectAccess

    return ProjectAccess(project_store())


@lru_cache(maxsize=1)
def project_service() -> ProjectService:
    from recall.services.projects import ProjectService

    return ProjectService(get_settings(), project_access(), project_store())


@lru_cache(maxsize=1)
def conversation_service() -> ConversationService:
    from recall.services.conversations import ConversationService

    return ConversationService(
        get_settings(),
        project_access(),
        conversation_store(),
        message_store(),
        memory_store(),
        preset_store(),
    )


@lru_cache(maxsize=1)
def erasure_service() -> ErasureService:
    from recall.services.erasure import ErasureService
    from recall.store.idempotency import IdempotencyRecords

    return ErasureService(
        get_settings(),
        project_store(),
        conversation_store(),
        message_store(),
        session_store(),
        memory_store(),
        IdempotencyRecords(get_settings()),
        import_store(),
        job_queue(),
        export_store(),
        preset_store(),
        usage_store(),
    )


@lru_cache(maxsize=1)
def data_service() -> DataService:
    from recall.services.data import DataService

    return DataService(
        get_settings(),
        project_access(),
        project_store(),
        conversation_store(),
        message_store(),
        memory_store(),
        import_store(),
        job_queue(),
        export_store(),
        preset_store(),
    )


@lru_cache(maxsize=1)
def memory_service() -> MemoryService:
    from recall.services.memories import MemoryService

    return MemoryService(get_settings(), project_access(), conversation_store(), memory_store())


@lru_cache(maxsize=1)
def turn_store() -> TurnStore:
    from recall.store.turns import TurnStore

    return TurnStore(
        project_store(),
        conversation_store(),
        message_store(),
        memory_upkeep(),
        usage_store(),
        session_store(),
    )


@lru_cache(maxsize=1)
def turn_context_loader() -> TurnContextLoader:
    from recall.services.turn_context import TurnContextLoader

    return TurnContextLoader(
        get_settings(), turn_store(), conversation_store(), message_store(), memory_store()
    )


@lru_cache(maxsize=1)
def chat_service() -> ChatService:
    return chat_service_with(get_settings())


def chat_service_with(settings: Settings) -> ChatService:
    """The chat service over the wired stores, tuned by ``settings`` (tests shorten its
    retries this way)."""
    from recall.services.chat import ChatService
    from recall.services.followups import TurnFollowUps
    from recall.services.tool_loop import ToolLoop

    return ChatService(
        settings,
        turn_context_loader(),
        ToolLoop(
            model_choice(),
            memory_service(),
            settings.tool_rounds_max,
            settings.model_max_attempts,
            settings.model_retry_base_seconds,
        ),
        turn_store(),
        memory_service(),
        memory_store(),
        TurnFollowUps(settings, job_queue()),
    )


@lru_cache(maxsize=1)
def context_service() -> ContextService:
    from recall.services.context import ContextService

    return ContextService(get_settings(), turn_context_loader(), conversation_store())


@lru_cache(maxsize=1)
def job_queue() -> JobQueue:
    from recall.store.jobs import JobQueue

    return JobQueue(get_settings())


@lru_cache(maxsize=1)
def consolidation_service() -> ConsolidationService:
    from recall.services.consolidation import ConsolidationService

    return ConsolidationService(get_settings(), memory_store(), memory_upkeep(), job_queue())


@lru_cache(maxsize=1)
def job_runner() -> JobRunner:
    from recall.services.extraction import ExtractionService
    from recall.services.jobs import JobRunner
    from recall.services.summaries import SummaryService
    from recall.services.usage import JobSpend

    settings = get_settings()
    return JobRunner(
        ExtractionService(
            settings,
            conversation_store(),
            message_store(),
            memory_store(),
            memory_upkeep(),
            memory_extractor(settings, model_choice()),
            project_store(),
            JobSpend(usage_store()),
        ),
        SummaryService(
            settings,
            conversation_store(),
            message_store(),
            summarizer(settings, model_choice()),
            job_queue(),
            JobSpend(usage_store()),
        ),
        consolidation_service(),
        erasure_service(),
        data_service(),
    )


def job_batch(seconds_left: Callable[[], float]) -> JobBatch:
    """One worker invocation's batch, timed by that invocation's clock."""
    from recall.services.jobs import JobBatch

    return JobBatch(
        job_runner(), job_queue(), get_settings().worker_job_reserve_seconds, seconds_left
    )


@lru_cache(maxsize=1)
def maintenance() -> Maintenance:
    from recall.services.maintenance import Maintenance

    return Maintenance(session_service(), memory_store(), memory_upkeep(), consolidation_service())


@lru_cache(maxsize=1)
def session_service() -> SessionService:
    from recall.services.sessions import SessionService

    return SessionService(
        get_settings(),
        project_access(),
        session_store(),
        usage_store(),
        conversation_store(),
        job_queue(),
    )


@lru_cache(maxsize=1)
def stream_links() -> LinkChoice:
    from recall.api.connections import AwsLinks, LinkChoice

    return LinkChoice(AwsLinks(get_settings().stream_function_name))
