"""How a Lambda process puts services together: once, lazily, from the settings."""

from __future__ import annotations

from functools import lru_cache

from recall.services.access import ProjectAccess
from recall.services.conversations import ConversationService
from recall.services.projects import ProjectService
from recall.settings import get_settings
from recall.store.conversations import ConversationStore
from recall.store.memories import MemoryStore
from recall.store.messages import MessageStore
from recall.store.projects import ProjectStore
from recall.store.sessions import SessionStore


@lru_cache(maxsize=1)
def project_store() -> ProjectStore:
    return ProjectStore(get_settings())


@lru_cache(maxsize=1)
def project_access() -> ProjectAccess:
    return ProjectAccess(project_store())


@lru_cache(maxsize=1)
def project_service() -> ProjectService:
    return ProjectService(get_settings(), project_store())


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
