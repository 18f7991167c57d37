"""A user's data in a project, out and in: GET /projects/{projectId}/export,
POST /projects/{projectId}/import and GET /projects/{projectId}/import/{importId}."""

from __future__ import annotations

import gc

# Until recall.cold_start.loaded(), below: no collection while the module loads.
gc.disable()

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from recall.api.data import EXPORT_CONTENT_TYPE, ImportProgressView, utf8_json
from recall.api.http import caller_id, new_resolver
from recall.cold_start import loaded
from recall.domain.exports import ExportDocument, ExportLink
from recall.domain.imports import ImportDocument
from recall.observability import logger, metrics, tracer
from recall.wiring import data_service

app = new_resolver(serializer=utf8_json)


@app.get("/projects/<projectId>/export")
def export_project(projectId: str) -> Response[ExportDocument | ExportLink]:
    """One document, or past EXPORT_MAX_BYTES a link to the same data as JSON Lines."""
    answer = data_service().export(caller_id(app), projectId)
    return Response(status_code=200, content_type=EXPORT_CONTENT_TYPE, body=answer)


@app.post("/projects/<projectId>/import")
def start_import(
    projectId: str, body: Annotated[ImportDocument, Body()]
) -> Response[ImportProgressView]:
    progress = data_service().start_import(caller_id(app), projectId, body)
    return Response(
        status_code=202,
        content_type=content_types.APPLICATION_JSON,
        body=ImportProgressView.of(progress),
        headers={"Location": f"/projects/{projectId}/import/{progress.import_id}"},
    )


@app.get("/projects/<projectId>/import/<importId>")
def import_progress(projectId: str, importId: str) -> ImportProgressView:
    return ImportProgressView.of(data_service().progress(caller_id(app), projectId, importId))


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@metrics.log_metrics
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)


loaded()
