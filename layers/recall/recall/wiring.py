"""How a Lambda process puts services together: once, lazily, from the settings."""

from __future__ import annotations

from functools import lru_cache

from recall.domain.prompt import ModelProvider
from recall.providers import JsonProtocolProvider, new_provider
from recall.services.access import ProjectAccess
from recall.services.chat import ChatService
from recall.services.conversations import ConversationService
from recall.services.memories import MemoryService
from recall.services.projects import ProjectService
from recall.settings import get_settings
from recall.store.conversations import ConversationStore
from recall.store.memories import MemoryStore
from recall.store.messages import MessageStore
from recall.store.projects import ProjectStore
from recall.store.sessions import SessionStore
from recall.store.turns import TurnStore


@lru_cache(maxsize=1)
def project_store() -> ProjectStore:
    return ProjectStore(get_settings())


@lru_cache(maxsize=1)
def project_access() -> ProjectAccess:
    return ProjectAccess(project_store())


@lru_cache(maxsize=1)
def project_service() -> ProjectService:
    return ProjectService(get_settings(), project_access(), project_store())


@lru_cache(maxsize=1)
def conversation_service() -> ConversationService:
    settings = get_settings()
    return ConversationService(
        settings,
        project_access(),
        ConversationStore(settings),
        MessageStore(settings),
        SessionStore(settings),
        MemoryStore(settings),
    )


@lru_cache(maxsize=1)
def memory_service() -> MemoryService:
    settings = get_settings()
    return MemoryService(
        settings, project_access(), ConversationStore(settings), MemoryStore(settings)
    )


@lru_cache(maxsize=1)
def model_provider() -> ModelProvider:
    settings = get_settings()
    return new_provider(
        settings.model_provider,
        max_attempts=settings.model_max_attempts,
        read_timeout=settings.model_read_timeout_seconds,
        connect_timeout=settings.model_connect_timeout_seconds,
    )


@lru_cache(maxsize=1)
def json_protocol_provider() -> ModelProvider:
    return JsonProtocolProvider(model_provider())


def provider_for(model_id: str) -> ModelProvider:
    """Models without native tool calling answer through the JSON reply protocol."""
    if model_id.startswith(get_settings().json_protocol_model_prefixes):
        return json_protocol_provider()
    return model_provider()


@lru_cache(maxsize=1)
def chat_service() -> ChatService:
    settings = get_settings()
    projects = project_store()
    conversations = ConversationStore(settings)
    sessions = SessionStore(settings)
    return ChatService(
        settings,
        TurnStore(projects, conversations, sessions),
        conversations,
        MessageStore(settings),
        sessions,
        MemoryStore(settings),
        memory_service(),
        provider_for,
    )
