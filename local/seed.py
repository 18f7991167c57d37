"""Long threads on demand, for benchmarks and tests: saved messages added straight to the
store, as years of chatting would leave them."""

from __future__ import annotations

import contextlib
import json

from local import template
from recall.domain import clock
from recall.domain.access import Role
from recall.domain.conversations import Conversation
from recall.domain.ids import new_id
from recall.domain.messages import Message
from recall.domain.projects import Member, Project
from recall.errors import Conflict
from recall.settings import get_settings
from recall.store.conversations import ConversationStore
from recall.store.messages import MessageStore
from recall.store.projects import ProjectStore


def grow_thread(user_id: str, project_id: str, conversation_id: str, count: int) -> None:
    """Add ``count`` alternating user and assistant messages and count them on the thread."""
    settings = get_settings()
    at = clock.stamp(clock.now())
    messages = [
        Message(
            message_id=new_id(),
            role="user" if n % 2 == 0 else "assistant",
            content=f"old message {n}",
            created_at=at,
        )
        for n in range(count)
    ]
    MessageStore(settings).add(user_id, project_id, conversation_id, messages)
    ConversationStore(settings).count_added_messages(user_id, project_id, conversation_id, count)


DEMO_USER = "demo-user"


def demo_ids() -> tuple[str, str]:
    """The one project id and thread id that every sample event in ``events/`` names."""
    found: dict[str, set[str]] = {"projectId": set(), "conversationId": set()}
    for path in (template.ROOT / "events").glob("*.json"):
        parameters = json.loads(path.read_text()).get("pathParameters") or {}
        for name, values in found.items():
            if name in parameters:
                values.add(parameters[name])
    (project_id,), (conversation_id,) = found["projectId"], found["conversationId"]
    return project_id, conversation_id


def seed_demo() -> tuple[str, str]:
    """The demo project (owned by the events' caller) and its thread, so the sample events
    reach the handlers' real work instead of the 403 a stranger gets."""
    project_id, conversation_id = demo_ids()
    seed_project(DEMO_USER, project_id, conversation_id)
    return project_id, conversation_id


def seed_project(owner_id: str, project_id: str, conversation_id: str) -> None:
    """A project ``owner_id`` owns, with one thread of theirs; already there is fine."""
    settings = get_settings()
    at = clock.stamp(clock.now())
    project = Project(
        project_id=project_id,
        name="Corner Shop",
        context={"type": "store", "currency": "EUR", "itemCount": 42},
        created_by=owner_id,
        created_at=at,
        updated_at=at,
    )
    owner = Member(project_id=project_id, user_id=owner_id, role=Role.OWNER, added_at=at)
    with contextlib.suppress(Conflict):
        ProjectStore(settings).create(project, owner)
    conversations = ConversationStore(settings)
    if conversations.get(owner_id, project_id, conversation_id) is None:
        conversations.create(
            Conversation(
                user_id=owner_id,
                project_id=project_id,
                conversation_id=conversation_id,
                title="Homepage ideas",
                created_at=at,
                updated_at=at,
            )
        )
