"""A chat turn's reads and writes span tables. Each table module builds its own keys and
items; this module puts them into one ``BatchGetItem`` before the model is called (sent
beside the window's query and the memory queries) and one ``TransactWriteItems`` after it,
and reads that transaction's cancellation reasons."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from recall.domain.access import Role
from recall.domain.conversations import ActiveThread, Conversation, with_active
from recall.domain.messages import Message
from recall.domain.presets import Preset
from recall.domain.projects import Project
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
from recall.store.usage import UsageStore

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_FAILED = "ConditionalCheckFailed"


@dataclass
class TurnReads:
    project: Project | None
    role: Role | None
    # As the member's last turns left it, when it is their active thread.
    conversation: Conversation | None
    # The preset a new thread starts from, read in the same request (None: none asked).
    preset: Preset | None = None
    # The caller's budget, on their member item, and their counters for the month, with
    # their active thread.
    budget: Budget | None = None
    usage: MemberUsage | None = None


class Leaving(StrEnum):
    """How a turn that makes its thread the member's active one leaves the thread that was."""

    # Its counters and its place in the list, as its last turn left them.
    PLACED = "placed"
    # Its counters only: something later (a rename, an archive) has its place already.
    COUNTED = "counted"
    # Not at all: it is gone.
    GONE = "gone"


@dataclass
class TurnUsage:
    """What a turn adds to its caller's counters, over the counters the turn read."""

    read: MemberUsage
    counts: Counts
    now: datetime


@dataclass
class SavedTurn:
    """What one turn adds to its thread, saved together or not at all: its messages, what
    it moves on the thread (``active``: kept on the member's usage item, counted over the
    version the turn read), and the memory its tools changed. Only a turn that starts a
    session counts one toward consolidation."""

    conversation: Conversation
    messages: list[Message]
    active: ActiveThread
    session_started: bool
    at: str
    usage: TurnUsage
    memory: TurnMemoryWrites | None = None
    # The user's message carries preference signals: the thread is stamped due extraction.
    signals: bool = False
    leaving: Leaving = Leaving.PLACED


class ConversationChanged(Conflict):
    """The thread was archived or unarchived while the turn ran, or the member left it
    while the turn read it: save again over it as it is now, so none writes back a flag or
    counters it read before."""

    def __init__(self, conversation: Conversation) -> None:
        super().__init__("The conversation changed meanwhile.")
        self.conversation = conversation


class UsageChanged(Conflict):
    """Another turn of the caller's saved meanwhile (their usage item is the lock of all
    their turns), perhaps in this thread: read the thread, its window and the counters
    again and save again."""

    def __init__(self) -> None:
        super().__init__("The caller's usage changed meanwhile.")


class LeftThreadChanged(Conflict):
    """The thread the member leaves was renamed, archived or deleted since its last turn:
    leave it as ``leaving`` says."""

    def __init__(self, leaving: Leaving) -> None:
        super().__init__("The thread the member leaves changed meanwhile.")
        self.leaving = leaving


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
        client: DynamoDBClient | None = None,
    ) -> None:
        self._projects = projects
        self._conversations = conversations
        self._messages = messages
        self._upkeep = upkeep
        self._usage = usage
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
    ) -> TurnReads:
        """The project, the caller's role and budget and, with a thread, the thread as
        saved, or with a preset for a new thread, the preset: one request."""
        project_keys = self._projects.project_and_role_keys(project_id, user_id)
        if preset_id:
            project_keys.append(preset_key(project_id, preset_id))
        request: dict[str, Any] = {
            self._projects.table: {"Keys": project_keys, "ConsistentRead": True},
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
        )

    def usage(self, user_id: str, project_id: str, now: datetime) -> MemberUsage:
        """The caller's counters for the month of ``now`` and their active thread: one
        query, sent beside ``read``'s batch."""
        return self._usage.get(user_id, project_id, now)

    @staticmethod
    def with_usage(reads: TurnReads, usage: MemberUsage) -> TurnReads:
        """``read``'s answer with the counters, its thread as the member's last turns left
        it."""
        thread = reads.conversation
        return replace(
            reads, usage=usage, conversation=with_active(thread, usage.active) if thread else None
        )

    def reread(
        self, user_id: str, project_id: str, conversation_id: str, now: datetime
    ) -> tuple[Conversation | None, MemberUsage]:
        """The thread and the caller's counters again, after a save lost a race, the thread
        laid over with the usage item the save goes over. The counters are read first: a
        turn that lands between the two reads moves them, so the save is refused again
        rather than made over a thread older than its counters."""
        usage = self.usage(user_id, project_id, now)
        thread = self._conversations.get(user_id, project_id, conversation_id, as_saved=True)
        return with_active(thread, usage.active) if thread else None, usage

    def save(self, turn: SavedTurn) -> None:
        """Everything a turn saves, in one transaction: its messages; the caller's counters
        with what the turn moved on its thread, over the version of their usage item the
        turn read (the lock of all their turns); a check that the thread is still there,
        or, when the turn makes it the member's active thread, its item brought up to date
        over the archive flag the turn read and the thread they leave given what its turns
        moved; the memory its tools changed with their counters; for a new session one more
        session toward the consolidation gate; and a check that the caller may still edit.
        Only what is new is written: nothing that grows with the window or the thread, and
        in the active thread no item but the usage item. Refusals are read item by item:
        ``NotFound`` for a deleted thread, ``ConversationChanged``, ``UsageChanged``,
        ``LeftThreadChanged``, ``Forbidden``, ``MemoryChanged``; an item another
        transaction held at that moment is read again the same way, or else
        ``TurnCollided``."""
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
        counted = turn.usage
        was = counted.read.active
        if was is not None and was.conversation_id == conversation.conversation_id:
            add(
                "conversation",
                self._conversations.stayed_request(conversation, turn.at, turn.signals),
            )
        else:
            add(
                "conversation",
                {
                    "Update": self._conversations.joined_request(
                        conversation, turn.active, turn.signals
                    )
                },
            )
            if was is not None and turn.leaving != Leaving.GONE:
                left = self._conversations.left_request(
                    conversation.user_id,
                    conversation.project_id,
                    was,
                    placed=turn.leaving == Leaving.PLACED,
                )
                add("left", {"Update": left})
        if turn.session_started:
            started = self._upkeep.session_started_request(
                conversation.user_id, conversation.project_id, turn.at, moves.pop(None, None)
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
        for item in self._usage.turn_writes(
            conversation.user_id,
            conversation.project_id,
            counted.read,
            counted.counts,
            counted.now,
            turn.active,
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
            # Counters moved first: the thread the turn leaves may be another now.
            if "usage" in failed | met or "left" in met:
                raise UsageChanged() from exc
            if "left" in failed and was is not None:
                left_now = self._conversations.get(
                    conversation.user_id,
                    conversation.project_id,
                    was.conversation_id,
                    as_saved=True,
                )
                raise LeftThreadChanged(Leaving.COUNTED if left_now else Leaving.GONE) from exc
            full = {_scope_of(part) for part in failed if part.startswith(_COUNT)}
            if full or any(part == "memory" or part.startswith(_COUNT) for part in failed | met):
                raise MemoryChanged(full) from exc
            if met:
                raise TurnCollided() from exc
            raise translate(exc) from exc


_COUNT = "count:"


def _count_part(scope: str | None) -> str:
    return _COUNT + (scope or "")


def _scope_of(part: str) -> str | None:
    return part.removeprefix(_COUNT) or None
