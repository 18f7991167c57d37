"""The rolling summary: messages that left a thread's window are folded into the summary
kept on the conversation, which the next prompt carries as its "earlier turns" layer.
What left is what lies before the window's start, which the thread keeps; clearing the
context starts a new summary."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from recall.domain.jobs import SummarizeJob
from recall.domain.messages import Message
from recall.domain.prompt import ModelProvider
from recall.domain.summary import RollingSummary, fold, summary_from_reply, uncovered
from recall.domain.summary_prompt import summary_prompt
from recall.domain.usage import Counts
from recall.observability import logger
from recall.services.usage import JobSpend
from recall.settings import Settings
from recall.store.conversations import ConversationStore
from recall.store.messages import MessageStore


class Summarizer(Protocol):
    def fold(
        self,
        summary: RollingSummary,
        leaving: list[Message],
        spent: Callable[[Counts], None] | None = None,
    ) -> RollingSummary:
        """``spent`` hears what each model call cost."""
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
    """With a model: it rewrites the summary, held to the same structure and bound."""

    def __init__(
        self,
        provider: ModelProvider,
        model_id: str,
        max_chars: int,
        point_max_chars: int,
        max_tokens: int,
    ) -> None:
        self._provider = provider
        self._model_id = model_id
        self._max_chars = max_chars
        self._point_max_chars = point_max_chars
        self._max_tokens = max_tokens

    def fold(
        self,
        summary: RollingSummary,
        leaving: list[Message],
        spent: Callable[[Counts], None] | None = None,
    ) -> RollingSummary:
        if not uncovered(summary, leaving):
            return summary
        request = summary_prompt(
            summary,
            leaving,
            self._max_chars,
            model_id=self._model_id,
            max_tokens=self._max_tokens,
            temperature=0.0,
        )
        reply = self._provider.converse(request)
        if spent is not None:
            spent(Counts.of(reply.usage, self._model_id))
        return summary_from_reply(
            reply, summary, leaving, self._max_chars, point_max_chars=self._point_max_chars
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
        spend: JobSpend | None = None,
    ) -> None:
        self._settings = settings
        self._conversations = conversations
        self._messages = messages
        self._summarizer = summarizer
        self._spend = spend

    def run(self, job: SummarizeJob, now: datetime) -> SummaryReport:
        """Fold what lies between the summary's end (or the clear-context marker) and the
        window's first message; nothing when the window holds everything since."""
        ids = (job.user_id, job.project_id, job.conversation_id)
        conversation = self._conversations.get(*ids)
        if conversation is None:
            return SummaryReport(0, "the thread is gone")
        if conversation.window_start is None:
            return SummaryReport(0, "no window to summarise up to")
        starts = [m for m in (conversation.summary_through, conversation.cleared_after) if m]
        leaving = self._messages.between(
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
        logger.info(
            "summary folded",
            extra={"conversation_id": job.conversation_id, "messages": len(leaving)},
        )
        return SummaryReport(len(leaving), "folded")
