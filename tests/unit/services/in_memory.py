"""In-memory stand-ins for the stores the services call, and a Recall put together from them
the way ``recall.wiring`` puts the real one together.

Each class has the public methods of its store that a service calls, with the same
arguments and the same outcomes (``None`` for absent, ``NotFound``, ``Conflict``,
``ConversationChanged``), holding plain dicts instead of tables. They keep no keys and make no
calls: a service test reads them back to see what the service did.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from recall.domain import clock
from recall.domain.access import Role, roles_reaching
from recall.domain.conversations import Conversation
from recall.domain.ids import new_id
from recall.domain.jobs import AnyJob
from recall.domain.memory import (
    BACKGROUND_SOURCES,
    Action,
    HistoryRecord,
    MemoryEntry,
    Source,
    is_active,
    sort_for_listing,
)
from recall.domain.messages import Message
from recall.domain.presets import SettingsChange, ThreadSettings
from recall.domain.projects import Member, Project
from recall.domain.prompt import ModelReply, ModelRequest
from recall.domain.turn_memory import MemoryChange
from recall.errors import Conflict, Forbidden, NotFound
from recall.services.access import ProjectAccess
from recall.services.chat import ChatService
from recall.services.context import ContextService
from recall.services.conversations import ConversationService
from recall.services.followups import TurnFollowUps
from recall.services.memories import MemoryService
from recall.services.projects import ProjectService
from recall.services.tool_loop import ToolLoop
from recall.services.turn_context import TurnContextLoader
from recall.settings import Settings
from recall.store.memories import HeldMemory
from recall.store.memory_transactions import TurnMemoryWrites
from recall.store.project_items import ROLE_LOST
from recall.store.turns import ConversationChanged, SavedTurn, TurnReads

Thread = tuple[str, str, str]  # user, project, conversation
ADDED_AT = "2025-01-01T00:00:00.000Z"


def _now_stamp() -> str:
    return clock.stamp(clock.now())


class InMemoryProjects:
    """ProjectStore: projects, and each member's role on them."""

    def __init__(self) -> None:
        self.projects: dict[str, Project] = {}
        self.roles: dict[tuple[str, str], Role] = {}
        self.members_changed = 0
        # Set by a test: the next ``change_member`` calls each lose a race to another owner.
        self.lost_races = 0

    def add(self, owner: str, members: dict[str, Role] | None = None, name: str = "Shop") -> str:
        """Seed a project owned by ``owner``; its id."""
        at = _now_stamp()
        project = Project(
            project_id=new_id(), name=name, created_by=owner, created_at=at, updated_at=at
        )
        self.create(
            project,
            Member(project_id=project.project_id, user_id=owner, role=Role.OWNER, added_at=at),
        )
        for user, role in (members or {}).items():
            self.roles[(project.project_id, user)] = role
        self._recount(project.project_id)
        return project.project_id

    def create(self, project: Project, owner: Member) -> None:
        if project.project_id in self.projects:
            raise Conflict("A project with this id already exists.")
        self.projects[project.project_id] = project.model_copy(update={"owner_count": 1})
        self.roles[(owner.project_id, owner.user_id)] = owner.role

    def get(self, project_id: str) -> Project | None:
        return self.projects.get(project_id)

    def role_check(self, project_id: str, user_id: str, needed: Role) -> dict[str, Any]:
        return {"projectId": project_id, "userId": user_id, "needed": needed}

    def role_of(self, project_id: str, user_id: str) -> Role | None:
        return self.roles.get((project_id, user_id))

    def member_of(self, project_id: str, user_id: str) -> Member | None:
        """Added when the fake began: it keeps roles only."""
        role = self.roles.get((project_id, user_id))
        if role is None:
            return None
        return Member(project_id=project_id, user_id=user_id, role=role, added_at=ADDED_AT)

    def update(
        self,
        project_id: str,
        name: str | None,
        context: dict[str, Any] | None,
        updated_at: str,
        *,
        settings: ThreadSettings | None = None,
        caller_id: str,
        caller_roles: frozenset[Role],
    ) -> Project:
        """Only while ``caller_id`` still has one of ``caller_roles``."""
        if self.roles.get((project_id, caller_id)) not in caller_roles:
            raise Forbidden(ROLE_LOST)
        project = self.projects.get(project_id)
        if project is None:
            raise NotFound("No such project.")
        changes: dict[str, Any] = {"updated_at": updated_at}
        if name is not None:
            changes["name"] = name
        if context is not None:
            changes["context"] = context
        if settings is not None:
            changes["settings"] = settings
        self.projects[project_id] = project.model_copy(update=changes)
        return self.projects[project_id]

    def projects_of(
        self, user_id: str, limit: int, cursor: str | None
    ) -> tuple[list[tuple[Project, Role]], str | None]:
        rows = [
            (self.projects[project_id], role)
            for (project_id, user), role in sorted(self.roles.items())
            if user == user_id and project_id in self.projects
        ]
        start = int(cursor) if cursor else 0
        end = start + limit
        return rows[start:end], str(end) if end < len(rows) else None

    def members(self, project_id: str) -> list[Member]:
        return [
            Member(project_id=project_id, user_id=user, role=role, added_at="")
            for (pid, user), role in sorted(self.roles.items())
            if pid == project_id
        ]

    def members_counted(self, project_id: str) -> int:
        if project_id not in self.projects:
            raise NotFound("No such project.")
        return sum(1 for pid, _ in self.roles if pid == project_id)

    def change_member(
        self,
        member: Member,
        before: Role | None,
        after: Role | None,
        owner_delta: int,
        *,
        caller_id: str,
        caller_roles: frozenset[Role],
    ) -> None:
        """Only while the member's role is still ``before``, an owner would remain and
        ``caller_id`` still has one of ``caller_roles``."""
        project = self.projects.get(member.project_id)
        place = (member.project_id, member.user_id)
        if self.roles.get((member.project_id, caller_id)) not in caller_roles:
            raise Forbidden(ROLE_LOST)
        if self.lost_races:
            self.lost_races -= 1
            raise Conflict("The project's members changed meanwhile.")
        if project is None or self.roles.get(place) is not before:
            raise Conflict("The project's members changed meanwhile.")
        if project.owner_count + owner_delta < 1:
            raise Conflict("The project's members changed meanwhile.")
        if after is None:
            del self.roles[place]
        else:
            self.roles[place] = after
        self.members_changed += 1
        self._recount(member.project_id)

    def _recount(self, project_id: str) -> None:
        owners = sum(
            1 for (pid, _), role in self.roles.items() if pid == project_id and role is Role.OWNER
        )
        self.projects[project_id] = self.projects[project_id].model_copy(
            update={"owner_count": owners}
        )


class InMemoryConversations:
    """ConversationStore: each caller's threads; a thread being deleted reads as gone."""

    def __init__(self) -> None:
        self.threads: dict[Thread, Conversation] = {}
        self.deleting: set[Thread] = set()

    def add(self, user_id: str, project_id: str, **fields: Any) -> Conversation:
        """Seed a thread; ``fields`` override the defaults (title, updated_at, counts…)."""
        at = _now_stamp()
        values: dict[str, Any] = {
            "user_id": user_id,
            "project_id": project_id,
            "conversation_id": new_id(),
            "title": "Seeded",
            "created_at": at,
            "updated_at": at,
            **fields,
        }
        conversation = Conversation(**values)
        self.create(conversation)
        return conversation

    def live_check(self, user_id: str, project_id: str, conversation_id: str) -> dict[str, Any]:
        """A check these stores, which run one call at a time, never need to hold."""
        return {"thread": [user_id, project_id, conversation_id]}

    def create(self, conversation: Conversation, guard: dict[str, Any] | None = None) -> None:
        place = _thread(conversation)
        if place in self.threads:
            raise Conflict("A conversation with this id already exists.")
        self.threads[place] = conversation

    def get(self, user_id: str, project_id: str, conversation_id: str) -> Conversation | None:
        place = (user_id, project_id, conversation_id)
        return None if place in self.deleting else self.threads.get(place)

    def page(
        self,
        user_id: str,
        project_id: str,
        archived: bool,
        limit: int,
        cursor: str | None,
        consistent: bool = False,
    ) -> tuple[list[Conversation], str | None]:
        """Most recently updated first; the cursor is how many rows came before. Always
        consistent."""
        rows = sorted(
            (
                conversation
                for place, conversation in self.threads.items()
                if place[:2] == (user_id, project_id)
                and place not in self.deleting
                and conversation.archived == archived
            ),
            key=lambda row: (row.updated_at, row.conversation_id),
            reverse=True,
        )
        start = int(cursor) if cursor else 0
        end = start + limit
        return rows[start:end], str(end) if end < len(rows) else None

    def latest(self, user_id: str, project_id: str) -> Conversation | None:
        rows, _ = self.page(user_id, project_id, archived=False, limit=1, cursor=None)
        return rows[0] if rows else None

    def update(
        self,
        seen: Conversation,
        at: str,
        *,
        title: str | None,
        archived: bool | None,
        settings: SettingsChange,
    ) -> Conversation:
        """Only what the PATCH names, settings merged into those held now; ``Conflict``
        where the store's write condition would fail."""
        place = _thread(seen)
        held = self.get(*place)
        if held is None:
            raise NotFound("No such conversation.")
        if held.updated_at > at or (archived is None and held.archived != seen.archived):
            raise Conflict("The conversation changed meanwhile.")
        if isinstance(settings, dict) and (held.settings is None) != (seen.settings is None):
            raise Conflict("The conversation changed meanwhile.")
        changes: dict[str, Any] = {"updated_at": at}
        if title is not None:
            changes["title"] = title
        if archived is not None:
            changes["archived"] = archived
        if settings is None:
            changes["settings"] = None
        elif isinstance(settings, dict):
            merged = (held.settings or ThreadSettings()).patched(settings)
            changes["settings"] = merged if merged.given() else None
        self.threads[place] = held.model_copy(update=changes)
        return self.threads[place]

    def mark_cleared(
        self, user_id: str, project_id: str, conversation_id: str, marker: str
    ) -> None:
        place = (user_id, project_id, conversation_id)
        if self.get(*place) is None:
            raise NotFound("No such conversation.")
        self.threads[place] = self.threads[place].model_copy(update={"cleared_after": marker})

    def mark_deleting(self, user_id: str, project_id: str, conversation_id: str) -> None:
        place = (user_id, project_id, conversation_id)
        if place not in self.threads:
            raise NotFound("No such conversation.")
        self.deleting.add(place)

    def delete(self, user_id: str, project_id: str, conversation_id: str) -> None:
        place = (user_id, project_id, conversation_id)
        self.threads.pop(place, None)
        self.deleting.discard(place)

    def abandon(self, conversation: Conversation) -> bool:
        place = (conversation.user_id, conversation.project_id, conversation.conversation_id)
        held = self.threads.get(place)
        if held is None or held.message_count:
            return False
        del self.threads[place]
        return True

    def counted_turn(self, turn: SavedTurn) -> None:
        """What a saved turn does to its thread's counters, last message and window start
        (TurnStore's transaction)."""
        place = _thread(turn.conversation)
        current = self.threads[place]
        self.threads[place] = current.model_copy(
            update={
                "message_count": current.message_count + len(turn.messages),
                "turn_count": current.turn_count + 1,
                "model": turn.model_id,
                "updated_at": turn.at,
                "window_start": turn.window_start,
                "last_message_id": turn.messages[-1].message_id,
                **({"signals_at": turn.at} if turn.signals else {}),
            }
        )


class InMemoryMessages:
    """MessageStore: every message of a thread, in id (creation) order."""

    def __init__(self) -> None:
        self.threads: dict[Thread, list[Message]] = {}

    def add(
        self, user_id: str, project_id: str, conversation_id: str, messages: list[Message]
    ) -> None:
        saved = self.threads.setdefault((user_id, project_id, conversation_id), [])
        saved.extend(messages)
        saved.sort(key=lambda message: message.message_id)

    def of(self, user_id: str, project_id: str, conversation_id: str) -> list[Message]:
        return list(self.threads.get((user_id, project_id, conversation_id), []))

    def page(
        self, user_id: str, project_id: str, conversation_id: str, limit: int, cursor: str | None
    ) -> tuple[list[Message], str | None]:
        """The newest ``limit`` before the cursor (a message id), oldest first."""
        saved = self.of(user_id, project_id, conversation_id)
        before = [m for m in saved if cursor is None or m.message_id < cursor]
        rows = before[-limit:]
        more = len(before) > len(rows)
        return rows, rows[0].message_id if more and rows else None

    def latest_after(
        self,
        user_id: str,
        project_id: str,
        conversation_id: str,
        after: str | None,
        limit: int,
    ) -> list[Message]:
        saved = self.of(user_id, project_id, conversation_id)
        return [m for m in saved if after is None or m.message_id > after][-limit:]

    def delete_thread(self, user_id: str, project_id: str, conversation_id: str) -> int:
        return len(self.threads.pop((user_id, project_id, conversation_id), []))


@dataclass
class _Slot:
    entry: MemoryEntry


class InMemoryMemories:
    """MemoryStore: persistent and thread entries with their history, under the caps.
    An expired entry keeps its slot until written over, as the table's item does."""

    def __init__(self, settings: Settings) -> None:
        self._cap = settings.memory_cap
        self._thread_cap = settings.thread_memory_cap
        self.slots: dict[tuple[str, str, str | None, str], _Slot] = {}
        self.records: dict[tuple[str, str, str | None, str], list[HistoryRecord]] = {}

    def add(self, user_id: str, project_id: str, *entries: MemoryEntry) -> None:
        """Seed entries as if written now."""
        for entry in entries:
            self.write(user_id, project_id, entry, clock.now())

    def entries(self, user_id: str, project_id: str) -> list[MemoryEntry]:
        """Every stored entry of a caller's project, expired or not."""
        return [
            slot.entry
            for (user, project, _, _), slot in self.slots.items()
            if (user, project) == (user_id, project_id)
        ]

    def active(
        self, user_id: str, project_id: str, conversation_id: str | None, now: datetime
    ) -> tuple[list[MemoryEntry], list[MemoryEntry]]:
        persistent = self._active_in(user_id, project_id, None, now)
        if conversation_id is None:
            return persistent, []
        return persistent, self._active_in(user_id, project_id, conversation_id, now)

    def held(
        self, user_id: str, project_id: str, conversation_id: str | None, now: datetime
    ) -> HeldMemory:
        persistent, thread = self.active(user_id, project_id, conversation_id, now)
        return HeldMemory(persistent, thread)

    def held_scope(
        self, user_id: str, project_id: str, conversation_id: str | None, now: datetime
    ) -> HeldMemory:
        entries = self._active_in(user_id, project_id, conversation_id, now)
        return HeldMemory([], entries) if conversation_id else HeldMemory(entries, [])

    def refreshed(
        self, user_id: str, project_id: str, held: HeldMemory, changes: list[MemoryChange]
    ) -> HeldMemory:
        return held

    def reclaim(
        self, user_id: str, project_id: str, conversation_id: str | None, now: datetime
    ) -> bool:
        return False

    def turn_writes(
        self,
        user_id: str,
        project_id: str,
        held: HeldMemory,
        changes: list[MemoryChange],
        now: datetime,
    ) -> TurnMemoryWrites:
        """The changes themselves as the "items", for ``InMemoryTurns.save`` to apply."""
        at = clock.stamp(now)
        stored = [
            change.entry.model_copy(update={"created_at": at, "updated_at": at})
            for change in changes
            if change.entry is not None
        ]
        forgotten = [change.key for change in changes if change.entry is None]
        owner = f"{user_id}#{project_id}"
        items: list[Any] = [(change, now) for change in changes]
        return TurnMemoryWrites("memories", owner, items, {}, stored, forgotten)

    def apply(self, user_id: str, project_id: str, writes: TurnMemoryWrites) -> None:
        for change, now in writes.items:
            if change.entry is not None:
                self.write(user_id, project_id, change.entry, now)
            else:
                self.delete(
                    user_id, project_id, change.key, change.conversation_id, Source.EXPLICIT, now
                )

    def get(
        self, user_id: str, project_id: str, key: str, conversation_id: str | None, now: datetime
    ) -> MemoryEntry | None:
        slot = self.slots.get((user_id, project_id, conversation_id, key))
        return slot.entry if slot is not None and is_active(slot.entry, now) else None

    def history(
        self, user_id: str, project_id: str, key: str, conversation_id: str | None
    ) -> list[HistoryRecord]:
        return list(self.records.get((user_id, project_id, conversation_id, key), []))

    def history_page(
        self,
        user_id: str,
        project_id: str,
        key: str,
        conversation_id: str | None,
        limit: int,
        cursor: str | None,
    ) -> tuple[list[HistoryRecord], str | None]:
        """The newest ``limit`` before the cursor (how many newer came before), oldest first."""
        held = self.history(user_id, project_id, key, conversation_id)
        skip = int(cursor) if cursor else 0
        before = held[: len(held) - skip]
        rows = before[-limit:]
        return rows, str(skip + len(rows)) if len(before) > len(rows) else None

    def write(
        self,
        user_id: str,
        project_id: str,
        entry: MemoryEntry,
        now: datetime,
        reason: str | None = None,
        guard: dict[str, Any] | None = None,
        thread: dict[str, Any] | None = None,
    ) -> tuple[MemoryEntry, bool] | None:
        """``(stored, created)``; ``None`` for a background write that meets an active
        explicit entry or the cap; Conflict for an explicit write over the cap."""
        place = (user_id, project_id, entry.conversation_id, entry.key)
        background = entry.source in BACKGROUND_SOURCES
        slot = self.slots.get(place)
        live = slot is not None and is_active(slot.entry, now)
        if background and slot is not None and live and slot.entry.source == Source.EXPLICIT:
            return None
        if not live:
            in_scope = self._active_in(user_id, project_id, entry.conversation_id, now)
            cap = self._cap if entry.conversation_id is None else self._thread_cap
            if len(in_scope) >= cap:
                if background:
                    return None
                raise Conflict(f"Memory is full: already {cap} {entry.scope} entries.")
        at = clock.stamp(now)
        stored = entry.model_copy(
            update={
                "created_at": slot.entry.created_at if slot is not None and live else at,
                "updated_at": at,
            }
        )
        self.slots[place] = _Slot(stored)
        previous = slot.entry.value if slot is not None and live else None
        self._record(
            place,
            stored,
            Action.UPDATED if previous is not None else Action.CREATED,
            previous,
            stored.value,
            entry.source,
            at,
        )
        return stored, slot is None

    def delete(
        self,
        user_id: str,
        project_id: str,
        key: str,
        conversation_id: str | None,
        source: Source,
        now: datetime,
        guard: dict[str, Any] | None = None,
        thread: dict[str, Any] | None = None,
    ) -> MemoryEntry | None:
        place = (user_id, project_id, conversation_id, key)
        slot = self.slots.get(place)
        if slot is None or not is_active(slot.entry, now):
            return None
        if source in BACKGROUND_SOURCES and slot.entry.source == Source.EXPLICIT:
            return None
        del self.slots[place]
        self._record(
            place, slot.entry, Action.DELETED, slot.entry.value, None, source, clock.stamp(now)
        )
        return slot.entry

    def delete_thread(self, user_id: str, project_id: str, conversation_id: str) -> int:
        """A thread's own entries and their history; how many items went."""
        places = [p for p in self.slots if p[:3] == (user_id, project_id, conversation_id)]
        histories = [p for p in self.records if p[:3] == (user_id, project_id, conversation_id)]
        for place in places:
            del self.slots[place]
        removed = sum(len(self.records.pop(place)) for place in histories)
        return len(places) + removed

    def _active_in(
        self, user_id: str, project_id: str, conversation_id: str | None, now: datetime
    ) -> list[MemoryEntry]:
        return sort_for_listing(
            slot.entry
            for (user, project, thread, _), slot in self.slots.items()
            if (user, project, thread) == (user_id, project_id, conversation_id)
            and is_active(slot.entry, now)
        )

    def _record(
        self,
        place: tuple[str, str, str | None, str],
        entry: MemoryEntry,
        action: Action,
        old: str | None,
        new: str | None,
        source: Source,
        at: str,
    ) -> None:
        self.records.setdefault(place, []).append(
            HistoryRecord(
                key=entry.key,
                scope=entry.scope,
                conversation_id=entry.conversation_id,
                action=action,
                old_value=old,
                new_value=new,
                category=entry.category,
                source=source,
                at=at,
            )
        )


class InMemoryTurns:
    """TurnStore over the other in-memory stores: the one read before the model, the one
    all-or-nothing save after it."""

    def __init__(
        self,
        projects: InMemoryProjects,
        conversations: InMemoryConversations,
        messages: InMemoryMessages,
        memories: InMemoryMemories,
    ) -> None:
        self._projects = projects
        self._conversations = conversations
        self._messages = messages
        self._memories = memories
        # Set by a test: the next saves each find that another turn on the thread saved
        # just before them.
        self.rival_turns = 0
        self.reads: list[str | None] = []  # the conversation id of each read
        self.attempts: list[SavedTurn] = []  # every save tried, landed or not
        self.saved: list[SavedTurn] = []

    def read(
        self,
        user_id: str,
        project_id: str,
        conversation_id: str | None,
        preset_id: str | None = None,
        now: datetime | None = None,
    ) -> TurnReads:
        self.reads.append(conversation_id)
        conversation = None
        if conversation_id:
            conversation = self._conversations.get(user_id, project_id, conversation_id)
        return TurnReads(
            project=self._projects.get(project_id),
            role=self._projects.role_of(project_id, user_id),
            conversation=conversation,
        )

    def save(self, turn: SavedTurn) -> None:
        self.attempts.append(turn)
        place = _thread(turn.conversation)
        self._rival_saves_first(place)
        current = self._conversations.get(*place)
        if current is None:
            raise NotFound("The conversation was deleted.")
        if (current.last_message_id, current.archived) != (
            turn.conversation.last_message_id,
            turn.conversation.archived,
        ):
            raise ConversationChanged(current)
        role = self._projects.role_of(turn.conversation.project_id, turn.conversation.user_id)
        if role not in roles_reaching(Role.EDITOR):
            raise Forbidden("Your role on this project changed: you can no longer chat here.")
        if turn.memory is not None:
            self._memories.apply(place[0], place[1], turn.memory)
        self._messages.add(*place, turn.messages)
        self._conversations.counted_turn(turn)
        self.saved.append(turn)

    def _rival_saves_first(self, place: Thread) -> None:
        """Another turn's save landing first: one more message, in the window."""
        current = self._conversations.get(*place)
        if not self.rival_turns or current is None:
            return
        self.rival_turns -= 1
        at = _now_stamp()
        rival = Message(message_id=new_id(), role="user", content="a rival turn", created_at=at)
        self._messages.add(*place, [rival])
        self._conversations.counted_turn(
            SavedTurn(
                conversation=current,
                messages=[rival],
                window_start=current.window_start or rival.message_id,
                model_id=current.model or "rival",
                at=at,
            )
        )


Step = ModelReply | Exception | Callable[[ModelRequest], ModelReply]


class ScriptedModel:
    """A model provider that answers from a script, one step a call: a reply, an error to
    raise, or a function of the request. ``then`` answers every call after the script."""

    def __init__(self, *steps: Step, then: Step | None = None) -> None:
        self._steps = list(steps)
        self._then = then
        self.requests: list[ModelRequest] = []

    def converse(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        if self._steps:
            step = self._steps.pop(0)
        elif self._then is not None:
            step = self._then
        else:
            raise AssertionError("the model was called more often than the script says")
        if isinstance(step, Exception):
            raise step
        if callable(step):
            return step(request)
        return step


class InMemoryPresets:
    """PresetStore's reads: no preset here (tests/integration covers presets)."""

    def get(self, project_id: str, preset_id: str) -> None:
        return None


class InMemoryJobQueue:
    """The memory jobs queue: what was sent, in order; ``refuse`` makes every send fail."""

    def __init__(self) -> None:
        self.sent: list[AnyJob] = []
        self.refuse: Exception | None = None

    def send(self, jobs: Sequence[AnyJob]) -> int:
        if self.refuse is not None:
            raise self.refuse
        self.sent.extend(jobs)
        return len(jobs)


@dataclass
class InMemoryRecall:
    """Every service of Recall over in-memory stores, put together as ``recall.wiring``
    does; ``model`` answers every turn whatever model id it names."""

    settings: Settings = field(default_factory=Settings)
    model: Any = None
    projects: InMemoryProjects = field(default_factory=InMemoryProjects)
    conversations: InMemoryConversations = field(default_factory=InMemoryConversations)
    messages: InMemoryMessages = field(default_factory=InMemoryMessages)

    def __post_init__(self) -> None:
        settings = self.settings
        self.memories = InMemoryMemories(settings)
        self.turns = InMemoryTurns(self.projects, self.conversations, self.messages, self.memories)
        access = ProjectAccess(self.projects)
        self.project_service = ProjectService(settings, access, self.projects)
        self.conversation_service = ConversationService(
            settings,
            access,
            self.conversations,
            self.messages,
            self.memories,
            InMemoryPresets(),  # type: ignore[arg-type]
        )
        self.memory_service = MemoryService(
            settings,
            access,
            self.conversations,
            self.memories,
        )
        self.loader = TurnContextLoader(
            settings,
            self.turns,
            self.conversations,
            self.messages,
            self.memories,
        )
        self.tool_loop = ToolLoop(self._provider_for, self.memory_service, settings.tool_rounds_max)
        self.jobs = InMemoryJobQueue()
        self.chat_service = ChatService(
            settings,
            self.loader,
            self.tool_loop,
            self.turns,
            self.memory_service,
            self.memories,  # type: ignore[arg-type]
            TurnFollowUps(settings, self.jobs),  # type: ignore[arg-type]
        )
        self.context_service = ContextService(
            settings,
            self.loader,
            self.conversations,
        )

    def _provider_for(self, model_id: str) -> Any:
        if self.model is None:
            raise AssertionError("this test gave Recall no model")
        return self.model


def _thread(conversation: Conversation) -> Thread:
    return (conversation.user_id, conversation.project_id, conversation.conversation_id)


def messages_of(roles: Iterable[str]) -> list[Message]:
    """Saved messages with the given roles, in order, each with a fresh id."""
    at = _now_stamp()
    return [
        Message(message_id=new_id(), role=role, content=f"{role} {n}", created_at=at)
        for n, role in enumerate(roles)
    ]


def thread_with_window(
    recall: InMemoryRecall, user: str, project: str
) -> tuple[str, list[Message]]:
    """A thread of two saved messages (one turn), both in its window."""
    earlier = messages_of(["user", "assistant"])
    thread = recall.conversations.add(
        user,
        project,
        message_count=2,
        turn_count=1,
        window_start=earlier[0].message_id,
        last_message_id=earlier[-1].message_id,
    )
    recall.messages.add(user, project, thread.conversation_id, earlier)
    return thread.conversation_id, earlier
