"""Data put in the store without going through the API: long threads for benchmarks and
tests (saved messages added straight to the store, as years of chatting would leave them),
and the demo project that the sample events in ``events/`` name."""

from __future__ import annotations

from collections.abc import Callable
import contextlib
import json
from typing import NamedTuple

from local import template
from recall.domain import clock
from recall.domain.access import Role
from recall.domain.conversations import Conversation
from recall.domain.ids import new_id
from recall.domain.imports import ImportProgress, ImportStatus
from recall.domain.memory import Category, MemoryEntry
from recall.domain.messages import Message
from recall.domain.presets import ContextPrompt, Preset, ThreadSettings
from recall.domain.projects import Member, Project
from recall.errors import Conflict
from recall.settings import get_settings
from recall.store.conversations import ConversationStore
from recall.store.imports import ImportStore
from recall.store.messages import MessageStore
from recall.store.presets import PresetStore
from recall.store.projects import ProjectStore


def grow_thread(
    user_id: str,
    project_id: str,
    conversation_id: str,
    count: int,
    content: Callable[[int], str] = "old message {}".format,
) -> list[Message]:
    """Add ``count`` alternating user and assistant messages (the ``n``-th saying
    ``content(n)``) and count them on the thread."""
    settings = get_settings()
    at = clock.stamp(clock.now())
    messages = [
        Message(
            message_id=new_id(),
            role="user" if n % 2 == 0 else "assistant",
            content=content(n),
            created_at=at,
        )
        for n in range(count)
    ]
    MessageStore(settings).add(user_id, project_id, conversation_id, messages)
    ConversationStore(settings).count_added_messages(user_id, project_id, conversation_id, count)
    return messages


DEMO_USER = "demo-user"
DEMO_CO_OWNER = "demo-co-owner"
DEMO_MEMORY_VALUE = "dark navy, no bright colours"


class DemoIds(NamedTuple):
    """What the sample events in ``events/`` name, read from their path parameters."""

    project_id: str
    conversation_id: str
    memory_key: str
    member_id: str
    import_id: str
    preset_id: str


_PATH_PARAMETERS = {
    "project_id": "projectId",
    "conversation_id": "conversationId",
    "memory_key": "key",
    "member_id": "userId",
    "import_id": "importId",
    "preset_id": "presetId",
}


def demo_ids() -> DemoIds:
    """The one value of each path parameter the sample events share, so the seed follows
    the events when one of them changes."""
    found: dict[str, set[str]] = {name: set() for name in _PATH_PARAMETERS.values()}
    for path in (template.ROOT / "events").glob("*.json"):
        parameters = json.loads(path.read_text()).get("pathParameters") or {}
        for name, values in found.items():
            if name in parameters:
                values.add(parameters[name])
    chosen: dict[str, str] = {}
    for field, name in _PATH_PARAMETERS.items():
        if len(found[name]) != 1:
            raise ValueError(f"events/ should name exactly one {name}, found {found[name]}")
        chosen[field] = found[name].pop()
    return DemoIds(**chosen)


def seed_demo() -> DemoIds:
    """What the sample events name, so each reaches its handler's success path instead of
    the 403 a stranger gets or the 404 of a missing item: the project (owned by the events'
    caller), its thread, a persistent memory entry with its history, and a viewer the member
    events change and remove. Anything already there is left as it is, so seeding again
    after an event restores only what that event deleted."""
    ids = demo_ids()
    seed_project(DEMO_USER, ids.project_id, ids.conversation_id)
    settings = get_settings()
    projects = ProjectStore(settings)
    # A second owner, so the events' caller may erase themselves (the last owner may not),
    # and through whom the caller is added back after they did.
    _seed_member(projects, ids.project_id, DEMO_CO_OWNER, Role.OWNER, DEMO_USER)
    _seed_member(projects, ids.project_id, DEMO_USER, Role.OWNER, DEMO_CO_OWNER)
    _seed_member(projects, ids.project_id, ids.member_id, Role.VIEWER, DEMO_USER)
    # Imported here, not at the top: importing the memory store creates Powertools' Logger,
    # which writes to whatever sys.stdout is at that moment, and ``local.invoke`` imports
    # this module before it sends stdout to stderr to keep its own output pure JSON.
    from recall.store.memories import MemoryStore

    seed_import(DEMO_USER, ids.project_id, ids.import_id)
    seed_preset(DEMO_USER, ids.project_id, ids.preset_id)
    memories = MemoryStore(settings)
    now = clock.now()
    persistent, _ = memories.active(DEMO_USER, ids.project_id, None, now)
    if all(entry.key != ids.memory_key for entry in persistent):
        entry = MemoryEntry(key=ids.memory_key, value=DEMO_MEMORY_VALUE, category=Category.BRAND)
        memories.write(DEMO_USER, ids.project_id, entry, now)
    return ids


def _seed_member(
    projects: ProjectStore, project_id: str, user_id: str, role: Role, by: str
) -> None:
    """``user_id`` as a ``role`` of the project, added by the owner ``by``, unless they
    already belong to it."""
    if projects.role_of(project_id, user_id) is not None:
        return
    member = Member(
        project_id=project_id, user_id=user_id, role=role, added_at=clock.stamp(clock.now())
    )
    projects.members_counted(project_id)  # kept from here on, in a project made before
    with contextlib.suppress(Conflict):  # another seeding added them meanwhile
        projects.change_member(
            member,
            before=None,
            after=role,
            owner_delta=int(role is Role.OWNER),
            caller_id=by,
            caller_roles=frozenset({Role.OWNER}),
        )


def seed_import(user_id: str, project_id: str, import_id: str) -> None:
    """A finished import of ``user_id``'s, for the progress event to read; there already
    is fine."""
    at = clock.stamp(clock.now())
    done = ImportProgress(
        import_id=import_id,
        user_id=user_id,
        project_id=project_id,
        status=ImportStatus.DONE,
        chunks_total=0,
        threads_total=0,
        created_at=at,
        updated_at=at,
    )
    ImportStore(get_settings()).start(done, [], clock.now())


def seed_preset(user_id: str, project_id: str, preset_id: str) -> None:
    """A preset of the project, made by ``user_id``; already there is fine."""
    settings = get_settings()
    presets = PresetStore(settings, ProjectStore(settings))
    if presets.get(project_id, preset_id) is not None:
        return
    at = clock.stamp(clock.now())
    presets.create(
        Preset(
            project_id=project_id,
            preset_id=preset_id,
            name="Brand voice",
            context_prompts=[
                ContextPrompt(role="user", content="Answer as the Corner Shop's own voice."),
                ContextPrompt(role="assistant", content="Friendly, brief, and local."),
            ],
            settings=ThreadSettings(temperature=0.4),
            created_by=user_id,
            created_at=at,
            updated_at=at,
        ),
        user_id,
    )


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
