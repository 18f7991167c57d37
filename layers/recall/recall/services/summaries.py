"""The rolling summary: messages that left a thread's window are folded into the summary
kept on the conversation, which the next prompt carries as its "earlier turns" layer.
What left is what lies before the window's start, which the thread keeps; clearing the
context starts a new summary.

A model is sent no more of a thread than one request's budget holds, so a fold may cover
only the oldest of what left; it is saved, and the job queues the thread's next fold, so
a long imported thread is summarised one bounded request at a time and a failed request
loses nothing folded before it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from recall.domain.jobs import SummarizeJob
from recall.domain.messages import Message
from recall.domain.prompt import ModelProvider
from recall.domain.summary import RollingSummary, fold, summary_from_reply, uncovered
from recall.domain.summary_prompt import summary_batch, summary_prompt
from recall.domain.usage import Counts
from recall.observability import logger
from recall.services.usage import JobSpend
from recall.settings import Settings
from recall.store.conversations import ConversationStore
from recall.store.jobs import JobQueue
from recall.store.messages import MessageStore


class Summarizer(Protocol):
    def fold(
        self,
        summary: RollingSummary,
        leaving: list[Message],
        spent: Callable[[Counts], None] | None = None,
    ) -> RollingSummary:
        """The summary with the oldest of ``leaving`` folded in, all of them or as many as
        one model request holds; ``spent`` hears what each model call cost."""
        ...


class ExtractiveSummarizer:
    """Offline: stated facts, decisions and open questions, deterministically."""

    def __init__(self, max_chars: int, point_max_chars: int) -> None:
        self._max_chars = max_chars
        self._point_max_chars = point_max_chars

    def fold(
        self,
        summary: RollingSummary,
        leaving: list[Message],
        spent: Callable[[Counts], None] | None = None,
    ) -> RollingSummary:
        return fold(summary, leaving, self._max_chars, point_max_chars=self._point_max_chars)


class ModelSummarizer:
    """With a model: it rewrites the summary, held to the same structure and bound. One
    call folds the oldest messages that fit ``fold_max_chars``, each cut to
    ``message_max_chars``: a model refuses a request beyond its context, and would refuse
    it again on every retry."""

    def __init__(
        self,
        provider: ModelProvider,
        model_id: str,
        max_chars: int,
        point_max_chars: int,
        max_tokens: int,
        *,
        fold_max_chars: int,
        message_max_chars: int,
    ) -> None:
        self._provider = provider
        self._model_id = model_id
        self._max_chars = max_chars
        self._point_max_chars = point_max_chars
        self._max_tokens = max_tokens
        self._fold_max_chars = fold_max_chars
        self._message_max_chars = message_max_chars

    def fold(
        self,
        summary: RollingSummary,
        leaving: list[Message],
        spent: Callable[[Counts], None] | None = None,
    ) -> RollingSummary:
        batch = summary_batch(
            summary,
            leaving,
            fold_max_chars=self._fold_max_chars,
            message_max_chars=self._message_max_chars,
        )
        if not batch:
            return summary
        request = summary_prompt(
            summary,
            batch,
            self._max_chars,
            message_max_chars=self._message_max_chars,
            model_id=self._model_id,
            max_tokens=self._max_tokens,
            temperature=0.0,
        )
        reply = self._provider.converse(request)
        if spent is not None:
            spent(Counts.of(reply.usage, self._model_id))
        return summary_from_reply(
            reply, summary, batch, self._max_chars, point_max_chars=self._point_max_chars
        )


@dataclass
class SummaryReport:
    folded: int
    why: str


class SummaryService:
    def __init__(
        self,
        settings: Settings,
        conversations: ConversationStore,
        messages: MessageStore,
        summarizer: Summarizer,
        queue: JobQueue,
        spend: JobSpend | None = None,
    ) -> None:
        self._settings = settings
        self._conversations = conversations
        self._messages = messages
        self._summarizer = summarizer
        self._queue = queue
        self._spend = spend

    def run(self, job: SummarizeJob, now: datetime) -> SummaryReport:
        """Fold what lies between the summary's end (or the clear-context marker) and the
        window's first message; nothing when the window holds everything since. A fold
        that covered only part of it is saved first, then the same job is queued again for
        the rest: each run makes at most one model call, so it fits a worker's time."""
        ids = (job.user_id, job.project_id, job.conversation_id)
        conversation = self._conversations.get(*ids)
        if conversation is None:
            return SummaryReport(0, "the thread is gone")
        if conversation.window_start is None:
            return SummaryReport(0, "no window to summarise up to")
        starts = [m for m in (conversation.summary_through, conversation.cleared_after) if m]
        leaving, more = self._messages.between(
            *ids,
            max(starts) if starts else None,
            conversation.window_start,
            self._settings.summary_fold_max_messages,
        )
        previous = RollingSummary(
            text=conversation.summary, covers_through=conversation.summary_through
        )
        folded = self._summarizer.fold(
            previous,
            leaving,
            self._spend.meter(conversation.project_id, "summary", now) if self._spend else None,
        )
        if folded.covers_through is None or folded.covers_through == previous.covers_through:
            return SummaryReport(0, "nothing new left the window")
        if not self._conversations.save_summary(conversation, folded.text, folded.covers_through):
            return SummaryReport(0, "the summary or the context changed meanwhile")
        through = folded.covers_through
        covered = sum(message.message_id <= through for message in leaving)
        rest = more or bool(uncovered(folded, leaving))
        logger.info(
            "summary folded",
            extra={"conversation_id": job.conversation_id, "messages": covered, "rest": rest},
        )
        if rest:
            return SummaryReport(covered, self._continue(job))
        return SummaryReport(covered, "folded")

    def _continue(self, job: SummarizeJob) -> str:
        """Queue the thread's next fold. Best effort, as a turn's follow-ups are: what is
        folded is saved, and the next turn whose window moves queues the job again."""
        try:
            self._queue.send([job])
        except Exception:
            logger.exception(
                "summary continuation not queued", extra={"conversation_id": job.conversation_id}
            )
            return "folded part, the rest left for the next job"
        return "folded part, the rest queued"
