"""The caller's threads: GET/POST /projects/{projectId}/conversations and
GET/PATCH/DELETE /projects/{projectId}/conversations/{conversationId}."""

from __future__ import annotations

import gc

# Until recall.cold_start.loaded(), below: no collection while the module loads.
gc.disable()

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from recall.api.http import caller_id, new_resolver, page_limit, page_size
from recall.api.models import (
    ConversationDetail,
    ConversationList,
    ConversationView,
    CreateConversationRequest,
    MessageView,
    UpdateConversationRequest,
)
from recall.cold_start import loaded
from recall.domain.presets import KEEP, SettingsChange
from recall.observability import logger, metrics, tracer
from recall.settings import get_settings
from recall.wiring import conversation_service

app = new_resolver()


@app.get("/projects/<projectId>/conversations")
def list_conversations(
    projectId: str,
    limit: Annotated[int | None, page_limit("conversations_page_max")] = None,
    cursor: Annotated[str | None, Query()] = None,
    archived: Annotated[bool, Query()] = False,
) -> ConversationList:
    settings = get_settings()
    size = page_size(limit, settings.conversations_page_default, settings.conversations_page_max)
    rows, next_cursor = conversation_service().list_conversations(
        caller_id(app), projectId, archived, size, cursor
    )
    return ConversationList(
        conversations=[ConversationView.of(row, period) for row, period in rows],
        next_cursor=next_cursor,
    )


@app.post("/projects/<projectId>/conversations")
def create_conversation(
    projectId: str, body: CreateConversationRequest | None = None
) -> Response[ConversationView]:
    title = body.title if body else None
    preset_id = body.preset_id if body else None
    conversation = conversation_service().create(caller_id(app), projectId, title, preset_id)
    return Response(
        status_code=201,
        content_type=content_types.APPLICATION_JSON,
        body=ConversationView.of(conversation),
    )


@app.get("/projects/<projectId>/conversations/<conversationId>")
def get_conversation(
    projectId: str,
    conversationId: str,
    limit: Annotated[int | None, page_limit("messages_page_max")] = None,
    cursor: Annotated[str | None, Query()] = None,
) -> ConversationDetail:
    settings = get_settings()
    size = page_size(limit, settings.messages_page_default, settings.messages_page_max)
    conversation, messages, next_cursor = conversation_service().get(
        caller_id(app), projectId, conversationId, size, cursor
    )
    return ConversationDetail(
        conversation=ConversationView.of(conversation),
        messages=[MessageView.of(message) for message in messages],
        next_cursor=next_cursor,
    )


@app.patch("/projects/<projectId>/conversations/<conversationId>")
def update_conversation(
    projectId: str, conversationId: str, body: UpdateConversationRequest
) -> ConversationView:
    settings: SettingsChange = KEEP
    if "settings" in body.model_fields_set:
        settings = body.settings.changes() if body.settings is not None else None
    conversation = conversation_service().update(
        caller_id(app), projectId, conversationId, body.title, body.archived, settings
    )
    return ConversationView.of(conversation)


@app.delete("/projects/<projectId>/conversations/<conversationId>")
def delete_conversation(projectId: str, conversationId: str) -> Response[None]:
    conversation_service().delete(caller_id(app), projectId, conversationId)
    return Response(status_code=204)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@metrics.log_metrics
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)


loaded()
