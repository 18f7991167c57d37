"""The in-memory stores keep the real stores' shape: a method both have takes the same
parameters, so a store change that a service would feel breaks the fakes here first."""

from __future__ import annotations

from collections.abc import Callable
import inspect

import pytest

from recall.store.conversations import ConversationStore
from recall.store.memories import MemoryStore
from recall.store.messages import MessageStore
from recall.store.projects import ProjectStore
from recall.store.turns import TurnStore
from tests.unit.services.in_memory import (
    InMemoryConversations,
    InMemoryMemories,
    InMemoryMessages,
    InMemoryProjects,
    InMemoryTurns,
)

# Every method of each store that a service calls.
PAIRS = [
    (
        InMemoryProjects,
        ProjectStore,
        {"create", "get", "role_of", "update", "projects_of", "members", "change_member"},
    ),
    (
        InMemoryConversations,
        ConversationStore,
        {"create", "get", "page", "latest", "update", "mark_cleared", "mark_deleting", "delete"},
    ),
    (InMemoryMessages, MessageStore, {"page", "latest_after", "delete_thread"}),
    (InMemoryMemories, MemoryStore, {"active", "write", "delete", "delete_thread", "history"}),
    (InMemoryTurns, TurnStore, {"read", "save"}),
]


def parameters(method: Callable[..., object]) -> list[tuple[str, object]]:
    return [(p.name, p.kind) for p in inspect.signature(method).parameters.values()]


@pytest.mark.parametrize(
    ("fake", "real", "needed"), PAIRS, ids=lambda x: getattr(x, "__name__", "")
)
def test_each_shared_method_takes_the_real_stores_parameters(
    fake: type, real: type, needed: set[str]
) -> None:
    # Given the public methods both classes define
    shared = {
        name
        for name, member in inspect.getmembers(real, inspect.isfunction)
        if not name.startswith("_") and hasattr(fake, name)
    }
    # Then the ones the services call are among them, each with the same parameters
    assert needed <= shared
    for name in sorted(shared):
        assert parameters(getattr(fake, name)) == parameters(getattr(real, name)), name
