"""Chat turns: POST /projects/{projectId}/chat, and for one thread
POST …/clear-context and GET …/context (what the next turn would send)."""

from __future__ import annotations

import gc

# Until recall.cold_start.loaded(), below: no collection while the module loads.
gc.disable()

from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from recall.api.chat import (
    ChatReply,
    ChatRequest,
    ClearedView,
    ContextPreview,
    answer_once,
    recorded,
    replayed,
    turn_deadline,
)
from recall.api.http import caller_id, new_resolver
from recall.cold_start import loaded
from recall.domain.access import Role
from recall.observability import logger, metrics, tracer
from recall.settings import get_settings
from recall.wiring import chat_service, context_service, project_access

app = new_resolver()


@app.post("/projects/<projectId>/chat")
def chat(projectId: str, body: ChatRequest) -> ChatReply:
    user_id = caller_id(app)
    settings = get_settings()
    deadline = turn_deadline(settings, app.lambda_context, settings.chat_model_seconds)
    answer = answer_once(
        settings,
        app.lambda_context,
        app.current_event.headers.get("idempotency-key"),
        {"user": user_id, "project": projectId},
        body.model_dump(mode="json"),
        lambda: recorded(
            lambda: chat_service().turn(
                user_id,
                projectId,
                body.message,
                body.conversation_id,
                body.model,
                preset_id=body.preset_id,
                deadline=deadline,
            )
        ),
        lambda: project_access().require(user_id, projectId, Role.EDITOR),
    )
    reply = replayed(answer)
    logger.info(
        "turn answered",
        extra={
            "conversation_id": reply.conversation.id,
            "conversation_created": reply.conversation.created,
        },
    )
    return reply


@app.post("/projects/<projectId>/conversations/<conversationId>/clear-context")
def clear_context(projectId: str, conversationId: str) -> ClearedView:
    marker = context_service().clear(caller_id(app), projectId, conversationId)
    return ClearedView(conversation_id=conversationId, cleared_after=marker)


@app.get("/projects/<projectId>/conversations/<conversationId>/context")
def preview_context(projectId: str, conversationId: str) -> ContextPreview:
    return ContextPreview.of(*context_service().preview(caller_id(app), projectId, conversationId))


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@metrics.log_metrics
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)


loaded()
