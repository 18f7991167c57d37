"""Loading what a turn needs, for the turn and for the preview of the next one alike:
authorise, read project, role and thread in one batched request, the thread's newest
messages (its window) in one query, and memory once per scope, all sent at once; and
assemble the context.

Before the model, a turn on an existing thread is one round trip: the ``BatchGetItem``,
the window's query and both memory queries leave together, from a small pool of threads
over the store's one client (boto3 clients are thread-safe, resources and sessions are
not). The thread's memory and messages are read speculatively, before the role and the
thread are known: their keys are the caller's own, they are thrown away unread on a 403 or
a 404, and they are the same reads the turn makes anyway. Later round trips happen only
where a read needs an earlier one's answer: ``latest`` (which thread), a new thread (its
``PutItem``, only once the role allows it), and a window read before the previous turn's
save that the thread read after it (its newest message missing: read again)."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime
import math
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from recall.domain import clock
from recall.domain.access import Role, require
from recall.domain.context import TurnContext, for_thread, turn_context
from recall.domain.conversations import Conversation, title_from_message
from recall.domain.ids import is_id, new_id
from recall.domain.memory import render_memory_block
from recall.domain.messages import Message
from recall.domain.presets import EffectiveSettings, PresetCopy
from recall.domain.turns import LATEST
from recall.domain.usage import MemberUsage, over_budget, refusal_message
from recall.domain.window import belongs_in_window, window_of
from recall.errors import BudgetExceeded, NotFound
from recall.observability import logger, metrics
from recall.services.presets import thread_settings, unknown_preset
from recall.settings import Settings
from recall.store.conversations import ConversationStore
from recall.store.memories import HeldMemory, MemoryStore
from recall.store.messages import MessageStore
from recall.store.turns import TurnReads, TurnStore


@dataclass
class LoadedTurn:
    conversation: Conversation
    created: bool
    window: list[Message]
    context: TurnContext
    memory: HeldMemory
    # What the thread runs with: project defaults, its preset, its own overrides.
    settings: EffectiveSettings
    # The caller's counters for the month, as the turn read them (what it counts over).
    usage: MemberUsage | None = None


class TurnContextLoader:
    def __init__(
        self,
        settings: Settings,
        turns: TurnStore,
        conversations: ConversationStore,
        messages: MessageStore,
        memories: MemoryStore,
    ) -> None:
        self._settings = settings
        self._turns = turns
        self._conversations = conversations
        self._messages = messages
        self._memories = memories
        # Threads start on first use, not here: nothing runs at import or wiring.
        self._pool = ThreadPoolExecutor(
            max_workers=settings.turn_read_concurrency, thread_name_prefix="turn-read"
        )

    def for_turn(
        self,
        user_id: str,
        project_id: str,
        conversation_id: str | None,
        first_message: str,
        now: datetime,
        preset_id: str | None = None,
    ) -> LoadedTurn:
        """An editor's thread, ``latest``, or a new thread titled from ``first_message``
        (created here, so the turn's tools can write thread memory into it) and started from
        ``preset_id``, read in the same batch."""
        persistent: Future[HeldMemory] | None = None
        if conversation_id == LATEST:
            # Which thread is the first read's answer; the persistent entries go with it.
            found = self._pool.submit(self._conversations.latest, user_id, project_id)
            persistent = self._pool.submit(
                self._memories.held_scope, user_id, project_id, None, now
            )
            pending: list[Future[Any]] = [found, persistent]
            wait(pending)
            latest = found.result()
            conversation_id = latest.conversation_id if latest else None
        if conversation_id is None:
            reads, memory, _ = self._read(
                user_id, project_id, None, Role.EDITOR, now, persistent, preset_id
            )
            if preset_id is not None and reads.preset is None:
                raise unknown_preset()
            at = clock.stamp(now)
            conversation = Conversation(
                user_id=user_id,
                project_id=project_id,
                conversation_id=new_id(),
                title=title_from_message(first_message, self._settings.title_max_chars),
                created_at=at,
                updated_at=at,
                preset=PresetCopy.of(reads.preset) if reads.preset else None,
            )
            self._conversations.create(conversation)
            return self._loaded(reads, memory, conversation, [], True, now)
        reads, memory, page = self._read(
            user_id, project_id, conversation_id, Role.EDITOR, now, persistent
        )
        assert reads.conversation is not None
        return self._loaded(reads, memory, reads.conversation, page, False, now)

    def abandon(self, loaded: LoadedTurn) -> None:
        """Undo the thread ``for_turn`` made for a turn that then saved nothing: the
        refusal names no thread, so a retry as told starts another and this one would stay
        in the list, empty. Best effort: the refusal is what the caller must hear."""
        if not loaded.created:
            return
        try:
            self._conversations.abandon(loaded.conversation)
        except Exception:
            logger.exception("an empty thread of a refused turn could not be deleted")

    def for_preview(
        self, user_id: str, project_id: str, conversation_id: str, now: datetime
    ) -> LoadedTurn:
        reads, memory, page = self._read(user_id, project_id, conversation_id, Role.VIEWER, now)
        assert reads.conversation is not None
        return self._loaded(reads, memory, reads.conversation, page, False, now)

    def authorised(
        self, user_id: str, project_id: str, conversation_id: str | None, needed: Role
    ) -> TurnReads:
        """The batched read, once the caller's role is enough; with a conversation id, the
        caller's own live thread or a 404. An id no thread could have is a 404 too, but
        only after the role check, so a stranger still gets 403."""
        wellformed = conversation_id is None or is_id(conversation_id)
        reads = self._turns.read(user_id, project_id, conversation_id if wellformed else None)
        return self._checked(reads, conversation_id, wellformed, needed)

    def _read(
        self,
        user_id: str,
        project_id: str,
        conversation_id: str | None,
        needed: Role,
        now: datetime,
        persistent: Future[HeldMemory] | None = None,
        preset_id: str | None = None,
    ) -> tuple[TurnReads, HeldMemory, list[Message]]:
        """``authorised``, the thread's newest messages and the memory of both scopes, sent
        at once (one round trip). Every request is waited for before any answer is judged,
        so none runs on into the next invocation, and the batch's answer (403, 404) comes
        before any other read's failure: a stranger learns nothing from what was read for
        them speculatively."""
        wellformed = conversation_id is None or is_id(conversation_id)
        thread_id = conversation_id if wellformed else None
        pool = self._pool
        wanted = preset_id if preset_id is not None and is_id(preset_id) else None
        batch = pool.submit(self._turns.read, user_id, project_id, thread_id, wanted, now)
        if persistent is None:
            persistent = pool.submit(self._memories.held_scope, user_id, project_id, None, now)
        thread = newest = None
        if thread_id:
            thread = pool.submit(self._memories.held_scope, user_id, project_id, thread_id, now)
            newest = pool.submit(self._newest, user_id, project_id, thread_id)
        pending: list[Future[Any]] = [batch, persistent]
        wait(pending + ([thread, newest] if thread and newest else []))
        reads = self._checked(batch.result(), conversation_id, wellformed, needed)
        if needed is Role.EDITOR:
            _within_budget(reads, now)
        memory = persistent.result()
        page = newest.result() if newest else []
        return reads, memory.merged(thread.result()) if thread else memory, page

    @staticmethod
    def _checked(
        reads: TurnReads, conversation_id: str | None, wellformed: bool, needed: Role
    ) -> TurnReads:
        require(reads.role, needed)
        if reads.project is None:
            raise NotFound("No such project.")
        if conversation_id is not None and (not wellformed or reads.conversation is None):
            raise NotFound("No such conversation.")
        return reads

    def window(
        self,
        conversation: Conversation,
        size: int | None = None,
        newest: list[Message] | None = None,
    ) -> list[Message]:
        """The thread's window of ``size`` messages (the setting's by default), from its
        newest messages (read here when not given). A page read beside the thread may
        predate the turn the thread has already counted (the two reads are not one
        snapshot); then it is read again, after the thread, which is rare and costs one more
        round trip. A full page that does not reach back to the window's start is read
        again too, as far as a window can span: a window larger than the default (a thread
        whose settings keep more), or turns of several tool rounds or failed replies, which
        the window leaves out."""
        ids = (conversation.user_id, conversation.project_id, conversation.conversation_id)
        settings = self._settings
        size = settings.window_messages if size is None else size
        read = settings.window_page_messages
        if newest is None or _behind(newest, conversation.last_message_id):
            read = max(size + read - settings.window_messages, read)
            newest = self._newest(*ids, read)
        # A turn is its user message, up to TOOL_ROUNDS_MAX tool rounds and its reply, and
        # at least one of them belongs in the window.
        most = size + max(settings.window_evict_step, 0)
        span = most * (2 + settings.tool_rounds_max)
        if read < span and len(newest) == read and _short(newest, conversation, size, most):
            newest = self._newest(*ids, span)
        return window_of(
            newest,
            conversation.window_start,
            conversation.cleared_after,
            size,
            settings.window_max_bytes,
        )

    def _newest(
        self, user_id: str, project_id: str, conversation_id: str, limit: int | None = None
    ) -> list[Message]:
        """Strongly consistent: the window must hold the previous turn's messages."""
        return self._messages.latest_after(
            user_id,
            project_id,
            conversation_id,
            None,
            limit or self._settings.window_page_messages,
        )

    def _loaded(
        self,
        reads: TurnReads,
        memory: HeldMemory,
        conversation: Conversation,
        newest: list[Message],
        created: bool,
        now: datetime,
    ) -> LoadedTurn:
        assert reads.project is not None
        settings = thread_settings(self._settings, reads.project, conversation)
        window = [] if created else self.window(conversation, settings.window_messages, newest)
        context = turn_context(
            reads.project,
            render_memory_block(memory.persistent, memory.thread, now),
            conversation.summary,
            window,
        )
        return LoadedTurn(
            conversation,
            created,
            window,
            for_thread(context, settings, conversation.preset),
            memory,
            settings,
            reads.usage,
        )


def _within_budget(reads: TurnReads, now: datetime) -> None:
    """A turn past the caller's budget is refused here, before the model and before a new
    thread is created, from what the turn's one batched read brought."""
    if reads.usage is None:
        return
    refusal = over_budget(reads.budget, reads.usage, now)
    if refusal is None:
        return
    metrics.add_metric(name="ChatTurnsOverBudget", unit=MetricUnit.Count, value=1)
    raise BudgetExceeded(
        refusal_message(refusal),
        [
            {
                "limit": refusal.limit,
                "used": refusal.used,
                "budget": refusal.budget,
                "resetsAt": clock.stamp(refusal.resets_at),
            }
        ],
        retry_after=max(1, math.ceil((refusal.resets_at - now).total_seconds())),
    )


def _behind(newest: list[Message], last_message_id: str | None) -> bool:
    """Whether a page of newest messages misses the last one a turn saved."""
    if last_message_id is None:
        return False
    return not newest or newest[-1].message_id < last_message_id


def _short(newest: list[Message], conversation: Conversation, size: int, most: int) -> bool:
    """Whether a full page of newest messages may miss some of the window: it reaches back
    neither to the clear-context marker nor to the window's start, and holds fewer of the
    messages that belong in a window than a window can (``most``; ``size`` for a thread
    without a start, which takes its newest ``size``)."""
    if not newest:
        return False
    first = newest[0].message_id
    if conversation.cleared_after is not None and first <= conversation.cleared_after:
        return False
    held = sum(belongs_in_window(message) for message in newest)
    if conversation.window_start is None:
        return held < size
    return first > conversation.window_start and held < most
