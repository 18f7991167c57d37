"""A chat turn's reads and writes span tables. Each table module builds its own keys and
items; this module puts them into one ``BatchGetItem`` before the model is called (sent
beside the window's query and the memory queries) and one ``TransactWriteItems`` after it,
and reads that transaction's cancellation reasons."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from recall.domain import clock
from recall.domain.access import Role
from recall.domain.conversations import Conversation
from recall.domain.messages import Message
from recall.domain.presets import Preset
from recall.domain.projects import Project
from recall.domain.sessions import SessionStep
from recall.domain.usage import Budget, Counts, MemberUsage
from recall.errors import Conflict, Forbidden, NotFound
from recall.store.conversation_items import thread_from, thread_keys
from recall.store.conversations import ConversationStore
from recall.store.dynamodb import (
    COLLISION,
    batch_get,
    cancellation_codes,
    dynamodb_client,
    error_code,
    from_item,
    translate,
)
from recall.store.memory_transactions import TurnMemoryWrites
from recall.store.memory_upkeep import MemoryUpkeep
from recall.store.messages import MessageStore
from recall.store.presets import is_preset_item, preset_from, preset_key
from recall.store.projects import ProjectStore
from recall.store.sessions import SessionStore
from recall.store.usage import UsageStore

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_FAILED = "ConditionalCheckFailed"


@dataclass
class TurnReads:
    project: Project | None
    role: Role | None
    conversation: Conversation | None
    # The preset a new thread starts from, read in the same request (None: none asked).
    preset: Preset | None = None
    # The caller's budget, on their member item, and their counters for the month.
    budget: Budget | None = None
    usage: MemberUsage | None = None


@dataclass
class TurnUsage:
    """What a turn adds to its caller's counters and session, over what the turn read."""

    read: MemberUsage
    counts: Counts
    now: datetime
    session: SessionStep


@dataclass
class SavedTurn:
    """What one turn adds to its thread, saved together or not at all: its messages, the
    thread's counters and window start over the last message the turn read, the memory its
    tools changed, and its count, which may start the member's next session (one more
    toward consolidation) and end the one before."""

    conversation: Conversation
    messages: list[Message]
    window_start: str | None
    model_id: str
    at: str
    memory: TurnMemoryWrites | None = None
    usage: TurnUsage | None = None
    # The user's message carries preference signals: the thread is stamped due extraction.
    signals: bool = False


class ConversationChanged(Conflict):
    """Another turn saved first, or the thread was archived or unarchived while the turn
    ran: save again over it as it is now, so turns land in order and none writes back a
    flag it read before the model."""

    def __init__(self, conversation: Conversation) -> None:
        super().__init__("The conversation changed meanwhile.")
        self.conversation = conversation


class UsageChanged(Conflict):
    """Another turn of the caller's moved their counters to a new day meanwhile: read
    them again and count again."""

    def __init__(self) -> None:
        super().__init__("The caller's usage changed meanwhile.")


class SessionEnded(Conflict):
    """The session this turn ends was ended meanwhile (by the prune-sessions job): save
    again without ending it."""

    def __init__(self) -> None:
        super().__init__("The member's last session ended meanwhile.")


class MemoryChanged(Conflict):
    """A memory entry the turn changes moved since the turn read it, or a scope's counter
    had no room left (``full``: ``None`` for persistent, else the thread's id)."""

    def __init__(self, full: set[str | None]) -> None:
        super().__init__("A memory entry changed meanwhile.")
        self.full = full


class TurnCollided(Conflict):
    """Another transaction was writing one of the turn's items at that very moment (the
    caller's usage counter from a turn in another tab, their member item): nothing failed
    a condition, so save the same again."""

    def __init__(self) -> None:
        super().__init__("Another write met the turn's save.")


class TurnStore:
    def __init__(
        self,
        projects: ProjectStore,
        conversations: ConversationStore,
        messages: MessageStore,
        upkeep: MemoryUpkeep,
        usage: UsageStore,
        sessions: SessionStore,
        client: DynamoDBClient | None = None,
    ) -> None:
        self._projects = projects
        self._conversations = conversations
        self._messages = messages
        self._upkeep = upkeep
        self._usage = usage
        self._sessions = sessions
        self._client = client

    @property
    def client(self) -> DynamoDBClient:
        return self._client or dynamodb_client()

    def read(
        self,
        user_id: str,
        project_id: str,
        conversation_id: str | None,
        preset_id: str | None = None,
        now: datetime | None = None,
    ) -> TurnReads:
        """The project, the caller's role and budget, their counters for the month of
        ``now`` (and last month's session tally) and, with a thread, the thread, or with a
        preset for a new thread, the preset: one request."""
        now = now or clock.now()
        project_keys = self._projects.project_and_role_keys(project_id, user_id)
        if preset_id:
            project_keys.append(preset_key(project_id, preset_id))
        request: dict[str, Any] = {
            self._projects.table: {"Keys": project_keys, "ConsistentRead": True},
            self._usage.table: {
                "Keys": self._usage.turn_keys(user_id, project_id, now),
                "ConsistentRead": True,
            },
        }
        if conversation_id:
            request[self._conversations.table] = {
                "Keys": thread_keys(user_id, project_id, conversation_id),
                "ConsistentRead": True,
            }
        found = batch_get(self.client, request)
        project_items = found.get(self._projects.table, [])
        presets = [item for item in project_items if is_preset_item(from_item(item))]
        project, role, budget = self._projects.read_project_and_role(
            [item for item in project_items if not is_preset_item(from_item(item))]
        )
        return TurnReads(
            project=project,
            role=role,
            conversation=thread_from(found.get(self._conversations.table, [])),
            preset=preset_from(presets[0]) if presets else None,
            budget=budget,
            usage=self._usage.member_usage(found.get(self._usage.table, []), now),
        )

    def usage(self, user_id: str, project_id: str, now: datetime) -> MemberUsage:
        return self._usage.get(user_id, project_id, now)

    def save(self, turn: SavedTurn) -> None:
        """Everything a turn saves, in one transaction: its messages, the thread's counters
        and window start over the version the turn read, the memory its tools changed with
        their counters, for a new session one more session toward the consolidation gate,
        and a check that the caller may still edit. Only what is new is written: nothing
        that grows with the window or the thread. Refusals are read item by item:
        ``NotFound`` for a deleted thread, ``ConversationChanged``, ``Forbidden``,
        ``MemoryChanged``; an item another transaction held at that moment is read again
        the same way, or else ``TurnCollided``."""
        conversation = turn.conversation
        owner = (conversation.user_id, conversation.project_id, conversation.conversation_id)
        memory = turn.memory
        moves = dict(memory.moves) if memory else {}
        items: list[Any] = []
        parts: list[str] = []

        def add(part: str, item: dict[str, Any]) -> None:
            items.append(item)
            parts.append(part)

        for message in turn.messages:
            add("message", {"Put": self._messages.put_request(*owner, message)})
        add(
            "conversation",
            {
                "Update": self._conversations.turn_update_request(
                    conversation,
                    len(turn.messages),
                    turn.model_id,
                    turn.at,
                    turn.window_start,
                    turn.messages[-1].message_id,
                    turn.signals,
                )
            },
        )
        session = turn.usage.session if turn.usage is not None else None
        if session is not None and session.started:
            user_id, project_id = conversation.user_id, conversation.project_id
            add(_SESSION, {"Put": self._sessions.start_request(user_id, project_id, session)})
            if session.ends is not None:
                ended = self._sessions.end_request(user_id, project_id, session.ends, turn.at)
                add(_SESSION_END, {"Update": ended})
            started = self._upkeep.session_started_request(
                user_id, project_id, turn.at, moves.pop(None, None)
            )
            add(_count_part(None), {"Update": started})
        add(
            "role",
            {
                "ConditionCheck": self._projects.role_check(
                    conversation.project_id, conversation.user_id, Role.EDITOR
                )
            },
        )
        if memory:
            for item in memory.items:
                add("memory", item)
            for scope, move in moves.items():
                add(_count_part(scope), move.update(memory.table))
        if turn.usage is not None:
            counted = turn.usage
            for item in self._usage.turn_writes(
                conversation.user_id,
                conversation.project_id,
                counted.read,
                counted.counts,
                counted.now,
                counted.session,
            ):
                add("usage", item)
        try:
            self.client.transact_write_items(TransactItems=items)
        except ClientError as exc:
            if error_code(exc) != "TransactionCanceledException":
                raise translate(exc) from exc
            reasons = list(zip(parts, cancellation_codes(exc), strict=False))
            failed = {part for part, code in reasons if code == _FAILED}
            # Another transaction on one of the items (DynamoDB's TransactionConflict):
            # what it wrote is read again like a failed condition, the rest saved again.
            met = {part for part, code in reasons if code == COLLISION and not failed}
            if "conversation" in failed | met:
                now = self._conversations.get(*owner)
                if now is None:
                    raise NotFound("The conversation was deleted.") from exc
                raise ConversationChanged(now) from exc
            if "role" in failed:
                raise Forbidden(
                    "Your role on this project changed: you can no longer chat here."
                ) from exc
            if _SESSION_END in failed:
                raise SessionEnded() from exc
            if {"usage", _SESSION} & (failed | met) or _SESSION_END in met:
                raise UsageChanged() from exc
            full = {_scope_of(part) for part in failed if part.startswith(_COUNT)}
            if full or any(part == "memory" or part.startswith(_COUNT) for part in failed | met):
                raise MemoryChanged(full) from exc
            if met:
                raise TurnCollided() from exc
            raise translate(exc) from exc


_COUNT = "count:"
_SESSION = "session"
_SESSION_END = "session-end"


def _count_part(scope: str | None) -> str:
    return _COUNT + (scope or "")


def _scope_of(part: str) -> str | None:
    return part.removeprefix(_COUNT) or None
