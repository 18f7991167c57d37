"""Background extraction: durable memory proposed from a thread's recent turns, compared
with what is stored, and written where it adds or corrects something. It runs for a user
and project only once the thread is long enough (in user and assistant messages: tool
messages do not count), and at most once per cooldown (a claim on ``META`` that exactly
one worker wins). It never makes project memory of what the thread holds as its own, nor
brings back a key the user deleted after saying it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
import re
from typing import Any, Protocol

from aws_lambda_powertools.metrics import MetricUnit
from pydantic import BaseModel, Field, ValidationError

from recall.domain import clock
from recall.domain.access import Role
from recall.domain.extraction import (
    ExtractionAction,
    ExtractionDecision,
    decide_extraction,
    deleted_since_said,
    entry_to_write,
    spoken,
    stated_at,
)
from recall.domain.jobs import ExtractJob
from recall.domain.memory import (
    Category,
    HistoryRecord,
    MemoryEntry,
    Source,
    check_key,
    check_value,
)
from recall.domain.memory_proposals import for_this_conversation, propose_memories
from recall.domain.messages import Message
from recall.domain.numbers import FRACTION_RANGE, storable_number
from recall.domain.prompt import ModelProvider, ModelRequest, PromptMessage, ToolSpec
from recall.domain.transcript import clipped, newest_that_fit
from recall.domain.usage import Counts
from recall.errors import Forbidden, Invalid
from recall.observability import logger, metrics
from recall.services.presets import thread_settings
from recall.services.usage import JobSpend
from recall.settings import Settings
from recall.store.conversations import ConversationStore
from recall.store.memories import MemoryStore
from recall.store.memory_upkeep import ExtractionSlot, MemoryUpkeep
from recall.store.messages import MessageStore
from recall.store.projects import ProjectStore


class MemoryExtractor(Protocol):
    def propose(
        self, messages: list[Message], spent: Callable[[Counts], None] | None = None
    ) -> list[MemoryEntry]:
        """``spent`` hears what each model call cost."""
        ...


def _candidate(key: str, value: str, category: Category, confidence: float) -> MemoryEntry:
    return MemoryEntry(
        key=key,
        value=value,
        category=category,
        source=Source.EXTRACTED,
        confidence=confidence,
    )


class RuleExtractor:
    """Offline: the classifier the offline chat model also uses, over the user's words. A
    statement the user scoped to this conversation ("in this conversation, ...") is theirs
    for this thread alone, so it proposes nothing for the project."""

    def propose(
        self, messages: list[Message], spent: Callable[[Counts], None] | None = None
    ) -> list[MemoryEntry]:
        return [
            _candidate(proposal.key, proposal.value, proposal.category, proposal.confidence)
            for message in messages
            if message.role == "user"
            for proposal in propose_memories(message.content)
            if not for_this_conversation(proposal.value)
        ]


RECORD_MEMORIES = "record_memories"


class ProposedEntry(BaseModel):
    key: str
    value: str
    category: Category
    confidence: float = Field(ge=0.0, le=1.0)


class ProposedEntries(BaseModel):
    entries: list[ProposedEntry]


EXTRACTION_INSTRUCTIONS = (
    "Read the conversation and list what the user stated that should be remembered in "
    "later conversations: standing rules, preferences, forbidden things, facts about their "
    "business and decisions. Leave out questions, one-off requests, small talk, anything "
    "only about the current reply and rules the user meant for this conversation alone "
    '("in this conversation", "for this chat"). '
    "Use the user's own words for each value. Call "
    f"{RECORD_MEMORIES} once with every entry (an empty list when there is none)."
)


# A tag that would open or close the transcript's quote, as a message may spell it.
_FRAME_TAG = re.compile(r"<(\s*/?\s*conversation)", re.IGNORECASE)


def _on_one_line(text: str, max_chars: int) -> str:
    """A message as one transcript line that cannot end the quote: a message holding
    ``</conversation>`` would otherwise speak to the model as the request itself. Other
    markup is kept, since values keep the user's own words (a rule about ``<h1>``)."""
    return _FRAME_TAG.sub(r"‹\1", " ".join(clipped(text, max_chars).split()))


class ModelExtractor:
    """With a model: structured output forced through a tool schema, validated on return;
    an answer that does not fit the schema proposes nothing. The model reads the newest
    messages that fit ``transcript_max_chars``, each cut to ``message_max_chars``: a
    request beyond its context is refused, on every retry alike."""

    def __init__(
        self,
        provider: ModelProvider,
        model_id: str,
        max_tokens: int,
        value_max_chars: int,
        *,
        transcript_max_chars: int,
        message_max_chars: int,
    ) -> None:
        self._provider = provider
        self._model_id = model_id
        self._max_tokens = max_tokens
        self._value_max_chars = value_max_chars
        self._transcript_max_chars = transcript_max_chars
        self._message_max_chars = message_max_chars

    def propose(
        self, messages: list[Message], spent: Callable[[Counts], None] | None = None
    ) -> list[MemoryEntry]:
        lines = [f"{m.role}: {_on_one_line(m.content, self._message_max_chars)}" for m in messages]
        newest = newest_that_fit(lines, self._transcript_max_chars)
        transcript = "\n".join(lines[len(lines) - newest :])
        request = ModelRequest(
            model_id=self._model_id,
            system=[EXTRACTION_INSTRUCTIONS],
            messages=[
                PromptMessage(role="user", text=f"<conversation>\n{transcript}\n</conversation>")
            ],
            tools=[
                ToolSpec(
                    name=RECORD_MEMORIES,
                    description="Record what to remember from the conversation.",
                    input_schema=ProposedEntries.model_json_schema(),
                )
            ],
            tool_choice=RECORD_MEMORIES,
            max_tokens=self._max_tokens,
            temperature=0.0,
        )
        reply = self._provider.converse(request)
        if spent is not None:
            spent(Counts.of(reply.usage, self._model_id))
        calls = [call for call in reply.tool_calls if call.name == RECORD_MEMORIES]
        if not calls:
            logger.warning("extraction answered without its tool")
            return []
        try:
            proposed = ProposedEntries.model_validate(calls[0].input)
        except ValidationError as error:
            # Where and how it failed, never the model's input: it quotes the user's words.
            logger.warning(
                "extraction answer does not fit its schema",
                extra={
                    "errors": error.errors(
                        include_url=False, include_context=False, include_input=False
                    )
                },
            )
            return []
        candidates: list[MemoryEntry] = []
        for entry in proposed.entries:
            try:
                if not storable_number(entry.confidence):
                    raise Invalid(FRACTION_RANGE)
                candidates.append(
                    _candidate(
                        check_key(entry.key),
                        check_value(entry.value, self._value_max_chars),
                        entry.category,
                        entry.confidence,
                    )
                )
            except (Invalid, ValidationError):
                logger.info("extracted entry skipped: malformed", extra={"key": entry.key})
        return candidates


@dataclass
class ExtractionReport:
    ran: bool
    why: str
    written: int = 0
    kept: int = 0


class ExtractionService:
    def __init__(
        self,
        settings: Settings,
        conversations: ConversationStore,
        messages: MessageStore,
        memories: MemoryStore,
        upkeep: MemoryUpkeep,
        extractor: MemoryExtractor,
        projects: ProjectStore | None = None,
        spend: JobSpend | None = None,
    ) -> None:
        self._settings = settings
        self._conversations = conversations
        self._messages = messages
        self._memories = memories
        self._upkeep = upkeep
        self._extractor = extractor
        self._projects = projects
        self._spend = spend

    def run(self, job: ExtractJob, now: datetime) -> ExtractionReport:
        """With ``projects``, every write checks the user is still a member, so a job
        queued before their erasure writes nothing back (``Forbidden``, then the thread
        is gone on the retry). A thread whose settings stopped sending memory since the
        job was queued (its own, its preset's or its project's) is not learnt from.

        Long enough means ``extract_min_messages`` user and assistant messages among those
        it reads (the last ``extract_recent_messages`` since the clear-context marker),
        counted before the claim, so a thread too short spends no cooldown. A run that
        raises after the claim gives the slot back before the error reaches SQS."""
        settings = self._settings
        conversation = self._conversations.get(job.user_id, job.project_id, job.conversation_id)
        if conversation is None:
            return ExtractionReport(False, "the thread is gone")
        # Every message counted is an upper bound: below it, nothing needs reading.
        if conversation.message_count < settings.extract_min_messages:
            return ExtractionReport(False, "the thread is too short")
        project = self._projects.get(job.project_id) if self._projects is not None else None
        if not thread_settings(settings, project, conversation).send_memory:
            return ExtractionReport(False, "the thread does not send memory")
        recent = self._messages.latest_after(
            job.user_id,
            job.project_id,
            job.conversation_id,
            conversation.cleared_after,
            settings.extract_recent_messages,
        )
        if spoken(recent) < settings.extract_min_messages:
            return ExtractionReport(False, "the thread is too short")
        guard = (
            self._projects.role_check(job.project_id, job.user_id, Role.VIEWER)
            if self._projects is not None
            else None
        )
        slot = self._upkeep.claim_extraction(job.user_id, job.project_id, now, guard)
        if slot is None:
            if conversation.signals_at is not None:
                until = now + timedelta(seconds=settings.extract_cooldown_seconds)
                self._signals_wait(job, conversation.signals_at, clock.stamp(until))
            return ExtractionReport(False, "extraction ran within the cooldown or the user left")
        report = ExtractionReport(True, "claimed")
        try:
            decisions = self._decide(job, recent, now)
            self._apply(job, decisions, report, now, guard)
        except Forbidden:
            return ExtractionReport(True, "the user left the project", report.written)
        except Exception:
            self._give_back(job, slot)
            raise
        if conversation.signals_at is not None:
            self._signals_read(job, conversation.signals_at)
        metrics.add_metric(name="MemoriesExtracted", unit=MetricUnit.Count, value=report.written)
        logger.info(
            "extraction done",
            extra={"decisions": len(decisions), "written": report.written, "kept": report.kept},
        )
        return report

    def _decide(
        self, job: ExtractJob, recent: list[Message], now: datetime
    ) -> list[ExtractionDecision]:
        settings = self._settings
        stored, thread = self._memories.active(
            job.user_id, job.project_id, job.conversation_id, now
        )
        proposed = self._extractor.propose(
            recent, self._spend.meter(job.project_id, "extraction", now) if self._spend else None
        )
        # Dated by the message it was read from, so consolidation weighs when it was said.
        candidates = [
            candidate.model_copy(update={"said_at": stated_at(candidate, recent) or None})
            for candidate in proposed
        ]
        return decide_extraction(
            candidates,
            stored,
            min_confidence=settings.extract_min_confidence,
            max_new=settings.extract_max_new,
            thread=thread,
            withdrawn=self._deleted_by_user(job, recent),
        )

    def _signals_read(self, job: ExtractJob, seen: str) -> None:
        """The thread's signals were read: turns stop queueing extraction for them. Best
        effort: a stamp left behind only queues one more extraction, which the cooldown
        and the decisions keep from writing anything twice."""
        try:
            cleared = self._conversations.signals_read(
                job.user_id, job.project_id, job.conversation_id, seen
            )
        except Exception:
            logger.exception("thread's signals not marked read")
            return
        logger.info("thread's signals read", extra={"cleared": cleared})

    def _signals_wait(self, job: ExtractJob, seen: str, until: str) -> None:
        """The slot is spent for at most a cooldown from now: turns with no signals of
        their own stop queueing a job the cooldown would refuse. Best effort: a wait not
        written only queues such jobs, as before."""
        try:
            self._conversations.signals_wait(
                job.user_id, job.project_id, job.conversation_id, seen, until
            )
        except Exception:
            logger.exception("thread's wait for extraction not written")

    def _give_back(self, job: ExtractJob, slot: ExtractionSlot) -> None:
        """A run that failed after its claim (the model throttled, a write refused) gives
        the slot back, so SQS's redelivery extracts instead of finding the cooldown spent;
        a redo meets what this run wrote as stored and writes it no second time. Best
        effort: the job's own error is what SQS must see, so a failed give-back is logged."""
        try:
            given = self._upkeep.give_back_extraction(job.user_id, job.project_id, slot)
        except Exception:
            logger.exception("extraction slot not given back")
            return
        logger.info("extraction slot given back", extra={"given": given})

    def _deleted_by_user(
        self, job: ExtractJob, recent: list[Message]
    ) -> Callable[[MemoryEntry], str | None]:
        """Whether the user deleted a candidate's key after saying it: its key's newest
        history record, one record read per key and only for a candidate about to be
        written (at most ``extract_max_new`` of them, plus those it stops)."""
        newest: dict[str, HistoryRecord | None] = {}

        def withdrawn(candidate: MemoryEntry) -> str | None:
            if candidate.key not in newest:
                records, _ = self._memories.history_page(
                    job.user_id, job.project_id, candidate.key, None, 1, None
                )
                newest[candidate.key] = records[-1] if records else None
            return deleted_since_said(newest[candidate.key], stated_at(candidate, recent))

        return withdrawn

    def _apply(
        self,
        job: ExtractJob,
        decisions: list[ExtractionDecision],
        report: ExtractionReport,
        now: datetime,
        guard: dict[str, Any] | None,
    ) -> None:
        for decision in decisions:
            entry = entry_to_write(decision)
            if entry is not None:
                saved = self._memories.write(
                    job.user_id, job.project_id, entry, now, reason=decision.reason, guard=guard
                )
                report.written += saved is not None
            elif decision.action == ExtractionAction.NONE and decision.existing is not None:
                self._memories.note(
                    job.user_id, job.project_id, decision.existing, decision.reason, now, guard
                )
                report.kept += 1
