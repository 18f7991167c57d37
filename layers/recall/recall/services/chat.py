"""One chat turn: load (one round trip: the batched read, the window's query and memory once
per scope), ask the model and run its memory tools, then save everything in one
transaction: the messages, the thread's counters and window start, and the memory the
tools changed. When another turn on the thread saved first, the save is retried in order
after a jittered pause; a turn that gives up has written nothing and answers 409 with
``Retry-After``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from aws_lambda_powertools.metrics import MetricUnit

from recall.domain import clock
from recall.domain.context import assemble
from recall.domain.conversations import Conversation
from recall.domain.memory import MemoryEntry
from recall.domain.memory_proposals import carries_signals
from recall.domain.messages import Message
from recall.domain.prompt import Usage
from recall.domain.sessions import session_step
from recall.domain.turn_events import TurnListener
from recall.domain.turn_memory import TurnMemory
from recall.domain.turns import (
    Exchange,
    checked_message,
    checked_model,
    turn_messages,
    with_unsaved,
)
from recall.domain.usage import Counts
from recall.domain.window import next_window
from recall.errors import Conflict, Invalid, ModelFailed
from recall.observability import logger, metrics
from recall.retry import attempts
from recall.services.followups import TurnFollowUps
from recall.services.memories import MemoryService
from recall.services.tool_loop import ToolLoop
from recall.services.turn_context import LoadedTurn, TurnContextLoader
from recall.settings import Settings
from recall.store.memories import HeldMemory, MemoryStore
from recall.store.memory_transactions import TurnMemoryWrites
from recall.store.turns import (
    ConversationChanged,
    MemoryChanged,
    SavedTurn,
    SessionEnded,
    TurnCollided,
    TurnStore,
    TurnUsage,
    UsageChanged,
)


@dataclass
class Nudge:
    show: bool
    turns: int
    threshold: int


@dataclass
class TurnOutcome:
    conversation: Conversation
    created: bool
    message: Message
    user_message: Message
    memories_saved: list[MemoryEntry]
    memories_forgotten: list[str]
    nudge: Nudge
    usage: Usage


class ChatService:
    def __init__(
        self,
        settings: Settings,
        loader: TurnContextLoader,
        tools: ToolLoop,
        turns: TurnStore,
        memory: MemoryService,
        memories: MemoryStore,
        followups: TurnFollowUps,
    ) -> None:
        self._settings = settings
        self._loader = loader
        self._tools = tools
        self._turns = turns
        self._memory = memory
        self._memories = memories
        self._followups = followups

    def turn(
        self,
        user_id: str,
        project_id: str,
        text: str,
        conversation_id: str | None,
        model: str | None,
        listener: TurnListener | None = None,
        preset_id: str | None = None,
        deadline: float | None = None,
    ) -> TurnOutcome:
        """One turn; a ``listener`` (the WebSocket stream) hears it while it runs and
        changes nothing it saves. ``preset_id`` starts a new thread from that preset; a
        ``model`` named here wins over the thread's settings for this turn. The model is
        done by ``deadline`` (``time.monotonic`` seconds), or the turn saves a timeout."""
        settings = self._settings
        text = checked_message(text, settings.message_max_chars)
        chosen = checked_model(model, settings.default_model_id, settings.allowed_model_ids)
        if preset_id is not None and conversation_id is not None:
            raise Invalid(
                "A preset starts a new thread: leave out conversationId to use one.",
                [{"field": "presetId", "message": "only when starting a new thread"}],
            )
        now = clock.now()
        loaded = self._loader.for_turn(user_id, project_id, conversation_id, text, now, preset_id)
        conversation = loaded.conversation
        if listener is not None:
            listener.started(conversation, loaded.created)
        thread = loaded.settings
        model_id = chosen if model is not None else thread.model
        request = assemble(loaded.context, text, model_id, thread.max_tokens, thread.temperature)
        memory = self._memory.turn_memory(loaded.memory)
        exchange = self._tools.converse(
            request, memory, conversation.conversation_id, listener, deadline
        )
        signals = carries_signals(text)
        try:
            saved, left_window, written = self._save(
                loaded, text, model_id, exchange, memory, signals
            )
        except Exception:
            self._loader.abandon(loaded)
            raise
        self._followups.queue(
            self._followups.jobs_after(
                conversation,
                conversation.message_count + len(saved),
                signals=signals,
                left_window=left_window and loaded.settings.use_summary,
                sends_memory=loaded.settings.send_memory,
                at=clock.stamp(now),
            )
        )
        user_message, assistant = saved[0], saved[-1]
        metrics.add_metric(name="ChatTurns", unit=MetricUnit.Count, value=1)
        if exchange.failure is not None:
            metrics.add_metric(name="ChatTurnsFailed", unit=MetricUnit.Count, value=1)
            raise ModelFailed(
                exchange.failure.message,
                exchange.failure.status,
                exchange.failure.code,
                [
                    {
                        "conversationId": conversation.conversation_id,
                        "userMessageId": user_message.message_id,
                        "assistantMessageId": assistant.message_id,
                    }
                ],
            )
        turns = conversation.turn_count + 1
        threshold = settings.nudge_threshold_turns
        return TurnOutcome(
            conversation=conversation,
            created=loaded.created,
            message=assistant,
            user_message=user_message,
            memories_saved=written.stored if written else [],
            memories_forgotten=written.forgotten if written else [],
            nudge=Nudge(show=turns > threshold, turns=turns, threshold=threshold),
            usage=exchange.usage,
        )

    def _save(
        self,
        loaded: LoadedTurn,
        text: str,
        model_id: str,
        exchange: Exchange,
        memory: TurnMemory,
        signals: bool,
    ) -> tuple[list[Message], bool, TurnMemoryWrites | None]:
        """One transaction. When another turn on the thread saved first (or it was archived
        or unarchived), re-read the thread and its window and save again with fresh ids, so
        both turns land in order; when a memory entry moved meanwhile, re-read it. A save
        that met another transaction at the same moment (DynamoDB cancels both sides' items
        alike) is saved again the same way. Also says whether messages left the window (a
        summary has something to fold)."""
        settings = self._settings
        conversation, window = loaded.conversation, loaded.window
        user_id, project_id = conversation.user_id, conversation.project_id
        held = loaded.memory
        counters = loaded.usage
        # A failed reply is counted by its tokens, not as a turn; memory tools cost nothing.
        counts = Counts.of(
            exchange.usage,
            model_id,
            turns=0 if exchange.failure is not None else 1,
            tool_rounds=len(exchange.rounds),
        )
        idle = timedelta(seconds=settings.session_idle_seconds)
        # The member's last session was ended by the prune job while the turn ran.
        previous_ended = False
        # Entries the tools saved that could not land: the thread and reply say so.
        unsaved: list[tuple[str, str | None]] = []
        for attempt in attempts(settings.turn_retry_max, settings.turn_retry_base_seconds):
            now = clock.now()
            at = clock.stamp(now)
            told = with_unsaved(exchange, unsaved)
            saved = turn_messages(text, model_id, told, at, settings.model_message_max_bytes)
            kept = next_window(
                window,
                saved,
                loaded.settings.window_messages,
                settings.window_max_bytes,
                settings.window_evict_step,
            )
            # The member's first turn, or one after the idle time, starts a session.
            usage = None
            if counters is not None:
                step = session_step(
                    counters.session,
                    counters.session_carried,
                    now,
                    counts.turns,
                    counts.total_tokens,
                    idle,
                    previous_ended,
                )
                usage = TurnUsage(counters, counts, now, step)
            # A turn the client is told failed keeps no memory its tools asked for.
            changes = memory.changes() if exchange.failure is None else []
            written = (
                self._memories.turn_writes(user_id, project_id, held, changes, now)
                if changes
                else None
            )
            try:
                self._turns.save(
                    SavedTurn(
                        conversation=conversation,
                        messages=saved,
                        window_start=kept[0].message_id if kept else None,
                        model_id=model_id,
                        at=at,
                        memory=written,
                        usage=usage,
                        signals=signals,
                    )
                )
            except ConversationChanged as changed:
                logger.info("thread changed during the turn; saving again")
                conversation = changed.conversation
                window = self._loader.window(conversation, loaded.settings.window_messages)
                continue
            except UsageChanged:
                logger.info("usage moved to a new day during the turn; counting again")
                counters = self._turns.usage(user_id, project_id, now)
                continue
            except SessionEnded:
                logger.info("the member's last session ended during the turn; saving again")
                previous_ended = True
                continue
            except TurnCollided:
                logger.info("another write met the turn's save; saving again")
                continue
            except MemoryChanged as changed:
                logger.info(
                    "memory changed during the turn; retrying", extra={"attempt": attempt + 1}
                )
                held = self._memories.refreshed(user_id, project_id, held, changes)
                for scope in changed.full:
                    if not self._memories.reclaim(user_id, project_id, scope, now):
                        unsaved += self._drop_new(memory, held, scope)
                continue
            ids = {message.message_id for message in kept}
            left = any(message.message_id not in ids for message in window)
            # A window with no start yet is the newest few of a thread that may hold older
            # messages not folded yet.
            left = left or (
                conversation.window_start is None and conversation.message_count > len(window)
            )
            return saved, left, written
        metrics.add_metric(name="ChatTurnsGivenUp", unit=MetricUnit.Count, value=1)
        raise Conflict(
            "The conversation is too busy; nothing of this turn was saved. Try again.",
            retry_after=settings.retry_after_seconds,
        )

    @staticmethod
    def _drop_new(
        memory: TurnMemory, held: HeldMemory, scope: str | None
    ) -> list[tuple[str, str | None]]:
        """A scope filled while the model ran: the turn's new entries there cannot land,
        and the turn saves without them rather than fail the reply. Returns the places of
        those it dropped, for the reply to own up to."""
        dropped = []
        for change in memory.changes():
            if change.entry is None or change.conversation_id != scope or held.holds(change):
                continue
            memory.drop(change)
            dropped.append(change.place)
            logger.warning(
                "memory entry not saved: its scope filled during the turn",
                extra={"key": change.key, "scope": change.entry.scope},
            )
        return dropped
