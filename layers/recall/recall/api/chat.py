"""Bodies of the chat routes, and the idempotent reply of a turn."""

from __future__ import annotations

from collections.abc import Callable
import threading
import time
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyPersistenceLayerError,
    IdempotencyValidationError,
)
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import AliasChoices, Field

from recall.api.models import Body, EffectiveSettingsView, MessageView, UsageView, View
from recall.domain.context import TurnContext
from recall.domain.presets import EffectiveSettings
from recall.domain.prompt import ModelRequest
from recall.errors import InProgress, Invalid, ModelFailed
from recall.observability import logger
from recall.settings import Settings
from recall.store.idempotency import SettingsRecords

if TYPE_CHECKING:
    from recall.services.chat import TurnOutcome


class ChatRequest(Body):
    message: str = Field(
        description="The user's message; over the MESSAGE_MAX_CHARS setting (16,000 by "
        "default) it is a 413."
    )
    conversation_id: str | None = Field(
        default=None, description='A thread id, "latest", or nothing to start a new thread.'
    )
    model: str | None = Field(
        default=None, description="This turn's model, over the thread's settings for it."
    )
    preset_id: str | None = Field(
        default=None,
        description="Start the new thread from this preset of the project (only without "
        "conversationId).",
    )


class TurnConversationView(View):
    id: str = Field(validation_alias=AliasChoices("id", "conversation_id"))
    title: str
    created: bool


class SavedMemoryView(View):
    key: str
    value: str
    category: str
    scope: str


class NudgeView(View):
    show: bool
    turns: int
    threshold: int


class ChatReply(View):
    conversation: TurnConversationView
    message: MessageView
    memories_saved: list[SavedMemoryView]
    memories_forgotten: list[str]
    nudge: NudgeView
    usage: UsageView

    @classmethod
    def of(cls, outcome: TurnOutcome) -> ChatReply:
        """The outcome's parts, read from their attributes; its thread with ``created``."""
        thread = {**dict(outcome.conversation), "created": outcome.created}
        return cls.model_validate({**vars(outcome), "conversation": thread}, from_attributes=True)


class WindowMessageView(View):
    role: str
    content: str = Field(validation_alias=AliasChoices("content", "text"))


class ContextPreview(View):
    model: str
    system: list[str]
    tool_instructions: str
    memory_block: str
    project_context: str
    summary: str
    context_prompts: list[WindowMessageView] = Field(
        description="The thread's preset's prompts, sent after the summary, before the window."
    )
    window: list[WindowMessageView]
    tools: list[str]
    settings: EffectiveSettingsView = Field(
        description="What the thread runs with: project defaults, its preset, its overrides."
    )
    token_estimate: int

    @classmethod
    def of(
        cls,
        context: TurnContext,
        request: ModelRequest,
        tokens: int,
        settings: EffectiveSettings,
    ) -> ContextPreview:
        prompts = len(context.context_prompts)
        return cls(
            model=request.model_id,
            system=request.system,
            tool_instructions=context.tool_instructions,
            memory_block=context.memory_block,
            project_context=context.project_context,
            summary=context.summary,
            context_prompts=[
                WindowMessageView.model_validate(message, from_attributes=True)
                for message in request.messages[:prompts]
            ],
            window=[
                WindowMessageView.model_validate(message, from_attributes=True)
                for message in request.messages[prompts:]
            ],
            tools=[tool.name for tool in request.tools],
            settings=EffectiveSettingsView.model_validate(settings, from_attributes=True),
            token_estimate=tokens,
        )


class ClearedView(View):
    conversation_id: str
    cleared_after: str


Answer = dict[str, Any]


def turn_deadline(
    settings: Settings, context: LambdaContext | None, model_seconds: float | None
) -> float:
    """When a turn's model must be done (``time.monotonic`` seconds): within
    ``model_seconds`` of now, if given, and in any case TURN_SAVE_RESERVE_SECONDS before
    the function's own time runs out, so the turn saves what happened either way."""
    limits = [] if model_seconds is None else [float(model_seconds)]
    if context is not None:
        left = context.get_remaining_time_in_millis() / 1000
        limits.append(left - settings.turn_save_reserve_seconds)
    if not limits:
        limits.append(float(settings.chat_model_seconds))
    return time.monotonic() + min(limits)


def recorded(turn: Callable[[], TurnOutcome]) -> Answer:
    """A turn's answer as the idempotency record keeps it: the reply, or the model's
    failure (the turn saved its messages, so a retry must not run it again)."""
    try:
        outcome = turn()
    except ModelFailed as failure:
        return {
            "failure": {
                "message": failure.message,
                "status": failure.status,
                "code": failure.code,
                "details": failure.details,
            }
        }
    return {"reply": ChatReply.of(outcome).model_dump(by_alias=True, mode="json")}


def replayed(answer: Answer) -> ChatReply:
    """The reply of a recorded answer; a recorded failure is raised again, so the one
    error handler shapes its body."""
    if "failure" in answer:
        raise ModelFailed(**answer["failure"])
    return ChatReply.model_validate(answer["reply"])


# The prefix of every chat turn's idempotency record.
TURN_RECORDS = "chat-turn"


class _TurnConfig(IdempotencyConfig):
    """Powertools' configuration of the turns' records, whose Lambda context (what an
    in-progress record's expiry is counted from) is the calling thread's: ``make dev`` runs
    the chat route and the WebSocket worker in one process, each with its own context."""

    def __init__(self, **options: Any) -> None:
        self._contexts = threading.local()
        super().__init__(**options)

    @property
    def lambda_context(self) -> LambdaContext | None:
        context: LambdaContext | None = getattr(self._contexts, "context", None)
        return context

    @lambda_context.setter
    def lambda_context(self, context: LambdaContext | None) -> None:
        self._contexts.context = context


_TURNS = _TurnConfig(
    event_key_jmespath="[user, project, key]", payload_validation_jmespath="payload"
)


def _produced(request: dict[str, Any], produce: Callable[[], Answer], kept: list[Answer]) -> Answer:
    """The turn's answer, also kept in ``kept``: a record that cannot be completed once the
    turn ran still answers with it (``answer_once``)."""
    kept.append(produce())
    return kept[0]


# Made once, at import; the records are the settings' table's, reached on first use.
_answered_once: Callable[..., Answer] = idempotent_function(
    _produced,
    data_keyword_argument="request",
    # Not the function's name, Powertools' default: the chat route and the WebSocket
    # worker are two functions in AWS, and one key must find one record from either.
    key_prefix=TURN_RECORDS,
    persistence_store=SettingsRecords(),
    config=_TURNS,
)


def answer_once(
    settings: Settings,
    context: LambdaContext | None,
    idempotency_key: str | None,
    scope: dict[str, str],
    payload: dict[str, Any],
    produce: Callable[[], Answer],
    authorise: Callable[[], object],
) -> Answer:
    """``produce`` once per caller, project and ``Idempotency-Key``: a retry gets the first
    answer (a failed turn's too, since its messages were saved) and stores nothing twice.
    With a key, ``authorise`` runs before the record is read, so a caller who lost their
    role since is refused rather than answered from it."""
    if not idempotency_key:
        return produce()
    if len(idempotency_key) > 255:
        raise Invalid(
            "An Idempotency-Key is at most 255 characters.",
            [{"field": "Idempotency-Key", "message": "at most 255 characters"}],
        )
    authorise()
    # This invocation's, or none: never an earlier one's on this thread.
    _TURNS.lambda_context = context
    produced: list[Answer] = []
    try:
        answer = _answered_once(
            request={**scope, "key": idempotency_key, "payload": payload},
            produce=produce,
            kept=produced,
        )
    except IdempotencyValidationError as exc:
        raise Invalid(
            "This Idempotency-Key was used with a different request body.",
            [{"field": "Idempotency-Key", "message": "reuse a key only to retry the same request"}],
        ) from exc
    except IdempotencyAlreadyInProgressError as exc:
        raise InProgress(
            "A request with this Idempotency-Key is still in progress.",
            retry_after=settings.retry_after_seconds,
        ) from exc
    except IdempotencyPersistenceLayerError:
        if not produced:
            raise  # nothing ran: the error handler makes it a 429 or 503, never a 500
        # The turn is saved; only its record could not be completed (a fault, or an
        # erasure swept it meanwhile). Its answer is still the truth, and a 5xx now would
        # invite a retry that runs the turn again once the in-progress window has passed.
        logger.warning("turn answered; its idempotency record could not be completed")
        return produced[0]
    return answer
