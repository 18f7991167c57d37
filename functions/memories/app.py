"""The caller's durable memory: GET /projects/{projectId}/memories,
PUT/DELETE /projects/{projectId}/memories/{key} and
GET /projects/{projectId}/memories/{key}/history."""

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
from recall.api.memories import (
    MEMORY_KEY,
    MemoryHistory,
    MemoryList,
    MemoryView,
    PutMemoryRequest,
)
from recall.cold_start import loaded
from recall.observability import logger, metrics, tracer
from recall.settings import get_settings
from recall.wiring import memory_service

app = new_resolver()


@app.get("/projects/<projectId>/memories")
def list_memories(
    projectId: str,
    category: Annotated[str | None, Query()] = None,
    conversationId: Annotated[str | None, Query()] = None,
) -> MemoryList:
    entries = memory_service().list(caller_id(app), projectId, category, conversationId)
    return MemoryList(memories=[MemoryView.of(entry) for entry in entries])


@app.put("/projects/<projectId>/memories/<key>")
def put_memory(
    projectId: str, key: Annotated[str, MEMORY_KEY], body: PutMemoryRequest
) -> Response[MemoryView]:
    entry, created = memory_service().put(
        caller_id(app),
        projectId,
        key,
        body.value,
        body.category,
        body.scope,
        body.conversation_id,
        body.expires_at,
    )
    return Response(
        status_code=201 if created else 200,
        content_type=content_types.APPLICATION_JSON,
        body=MemoryView.of(entry),
    )


@app.delete("/projects/<projectId>/memories/<key>")
def delete_memory(
    projectId: str,
    key: Annotated[str, MEMORY_KEY],
    conversationId: Annotated[str | None, Query()] = None,
) -> Response[None]:
    memory_service().delete(caller_id(app), projectId, key, conversationId)
    return Response(status_code=204)


@app.get("/projects/<projectId>/memories/<key>/history")
def memory_history(
    projectId: str,
    key: Annotated[str, MEMORY_KEY],
    conversationId: Annotated[str | None, Query()] = None,
    limit: Annotated[int | None, page_limit("memory_history_page_max")] = None,
    cursor: Annotated[str | None, Query()] = None,
) -> MemoryHistory:
    settings = get_settings()
    size = page_size(limit, settings.memory_history_page_default, settings.memory_history_page_max)
    records, next_cursor = memory_service().history(
        caller_id(app), projectId, key, conversationId, size, cursor
    )
    return MemoryHistory.of(key, conversationId, records, next_cursor)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@metrics.log_metrics
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)


loaded()
