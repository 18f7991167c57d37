"""Projects and members: POST/GET /projects, GET/PATCH/DELETE /projects/{projectId},
GET /projects/{projectId}/members, PUT/DELETE /projects/{projectId}/members/{userId},
PUT /projects/{projectId}/members/{userId}/budget, GET /projects/{projectId}/usage,
GET /projects/{projectId}/sessions, DELETE /projects/{projectId}/me, and the project's
presets: GET/POST /projects/{projectId}/presets, GET/PATCH/DELETE
/projects/{projectId}/presets/{presetId}."""

from __future__ import annotations

import gc

# Until recall.cold_start.loaded(), below: no collection while the module loads.
gc.disable()

from importlib.resources import files
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from recall.api.http import caller_id, new_resolver, page_limit, page_size
from recall.api.models import (
    BudgetView,
    CreateProjectRequest,
    ErasureView,
    MemberList,
    MemberView,
    ProjectList,
    ProjectView,
    SetMemberRequest,
    UpdateProjectRequest,
)
from recall.api.presets import CreatePresetRequest, PresetList, PresetView, UpdatePresetRequest
from recall.api.usage import (
    BudgetBody,
    MemberBudgetView,
    SessionList,
    SessionView,
    UsageReportView,
)
from recall.cold_start import loaded
from recall.domain import clock
from recall.domain.access import Role
from recall.domain.usage import Period
from recall.observability import logger, metrics, tracer
from recall.settings import get_settings
from recall.wiring import (
    erasure_service,
    preset_service,
    project_service,
    session_service,
    usage_service,
)

app = new_resolver()


@app.post("/projects")
def create_project(body: CreateProjectRequest) -> Response[ProjectView]:
    project = project_service().create(caller_id(app), body.name, body.context)
    return Response(
        status_code=201,
        content_type=content_types.APPLICATION_JSON,
        body=ProjectView.of(project, Role.OWNER),
    )


@app.get("/projects")
def list_projects(
    limit: Annotated[int | None, page_limit("projects_page_max")] = None,
    cursor: Annotated[str | None, Query()] = None,
) -> ProjectList:
    settings = get_settings()
    rows, next_cursor = project_service().list_projects(
        caller_id(app),
        page_size(limit, settings.projects_page_max, settings.projects_page_max),
        cursor,
    )
    return ProjectList(
        projects=[ProjectView.of(project, role) for project, role in rows], next_cursor=next_cursor
    )


@app.get("/projects/<projectId>")
def get_project(projectId: str) -> ProjectView:
    return ProjectView.of(*project_service().get(caller_id(app), projectId))


@app.patch("/projects/<projectId>")
def update_project(projectId: str, body: UpdateProjectRequest) -> ProjectView:
    project, role = project_service().update(
        caller_id(app),
        projectId,
        body.name,
        body.context,
        body.settings.settings() if body.settings is not None else None,
    )
    return ProjectView.of(project, role)


@app.get("/projects/<projectId>/members")
def list_members(projectId: str) -> MemberList:
    members = project_service().members(caller_id(app), projectId)
    return MemberList(members=[MemberView.of(member) for member in members])


@app.put("/projects/<projectId>/members/<userId>")
def set_member(projectId: str, userId: str, body: SetMemberRequest) -> Response[MemberView]:
    member, added = project_service().set_member(caller_id(app), projectId, userId, body.role)
    return Response(
        status_code=201 if added else 200,
        content_type=content_types.APPLICATION_JSON,
        body=MemberView.of(member),
    )


@app.delete("/projects/<projectId>/members/<userId>")
def remove_member(projectId: str, userId: str) -> Response[None]:
    project_service().remove_member(caller_id(app), projectId, userId)
    return Response(status_code=204)


@app.put("/projects/<projectId>/members/<userId>/budget")
def set_budget(projectId: str, userId: str, body: BudgetBody) -> MemberBudgetView:
    """Owners only; ``{}`` clears the member's budget."""
    member = usage_service().set_budget(caller_id(app), projectId, userId, body.budget())
    return MemberBudgetView(user_id=member.user_id, budget=BudgetView.of(member.budget))


@app.get("/projects/<projectId>/usage")
def get_usage(
    projectId: str,
    period: Annotated[Period, Query(description="day or month (UTC)")] = "day",
    date: Annotated[
        str | None, Query(description="YYYY-MM-DD for a day, YYYY-MM for a month; now by default")
    ] = None,
) -> UsageReportView:
    """The caller's usage in the period and the project's memory upkeep; owners also get
    every member's."""
    caller = caller_id(app)
    report = usage_service().report(caller, projectId, period, date)
    return UsageReportView.of(projectId, caller, report)


@app.get("/projects/<projectId>/sessions")
def list_sessions(
    projectId: str,
    limit: Annotated[int | None, page_limit("sessions_page_max")] = None,
    cursor: Annotated[str | None, Query()] = None,
) -> SessionList:
    """The caller's sessions in the project: the live one first, then ended ones, newest
    first."""
    settings = get_settings()
    sessions, next_cursor = session_service().page(
        caller_id(app),
        projectId,
        page_size(limit, settings.sessions_page_default, settings.sessions_page_max),
        cursor,
        clock.now(),
    )
    return SessionList(
        sessions=[SessionView.of(session) for session in sessions], next_cursor=next_cursor
    )


@app.delete("/projects/<projectId>/me")
def erase_me(projectId: str) -> Response[ErasureView | None]:
    """Everything of the caller in the project, and their membership."""
    return _erased(projectId, erasure_service().erase_me(caller_id(app), projectId))


@app.delete("/projects/<projectId>")
def delete_project(projectId: str) -> Response[ErasureView | None]:
    """The project, with everything of everyone in it (owners only)."""
    return _erased(projectId, erasure_service().erase_project(caller_id(app), projectId))


@app.get("/projects/<projectId>/presets")
def list_presets(projectId: str) -> PresetList:
    presets = preset_service().list_presets(caller_id(app), projectId)
    return PresetList(presets=[PresetView.of(preset) for preset in presets])


@app.post("/projects/<projectId>/presets")
def create_preset(projectId: str, body: CreatePresetRequest) -> Response[PresetView]:
    preset = preset_service().create(
        caller_id(app),
        projectId,
        body.name,
        [prompt.prompt() for prompt in body.context_prompts],
        body.settings.settings(),
    )
    return Response(
        status_code=201, content_type=content_types.APPLICATION_JSON, body=PresetView.of(preset)
    )


@app.get("/projects/<projectId>/presets/<presetId>")
def get_preset(projectId: str, presetId: str) -> PresetView:
    return PresetView.of(preset_service().get(caller_id(app), projectId, presetId))


@app.patch("/projects/<projectId>/presets/<presetId>")
def update_preset(projectId: str, presetId: str, body: UpdatePresetRequest) -> PresetView:
    preset = preset_service().update(
        caller_id(app),
        projectId,
        presetId,
        body.name,
        [prompt.prompt() for prompt in body.context_prompts]
        if body.context_prompts is not None
        else None,
        body.settings.settings() if body.settings is not None else None,
    )
    return PresetView.of(preset)


@app.delete("/projects/<projectId>/presets/<presetId>")
def delete_preset(projectId: str, presetId: str) -> Response[None]:
    """Threads started from the preset keep their copy of it."""
    preset_service().delete(caller_id(app), projectId, presetId)
    return Response(status_code=204)


def _erased(project_id: str, done: bool) -> Response[ErasureView | None]:
    if done:
        return Response(status_code=204)
    return Response(
        status_code=202,
        content_type=content_types.APPLICATION_JSON,
        body=ErasureView(project_id=project_id),
    )


@app.get("/openapi.json", include_in_schema=False)
def openapi_document() -> Response[str]:
    """The whole API's OpenAPI document, written by ``python -m local.openapi``."""
    return Response(
        status_code=200,
        content_type=content_types.APPLICATION_JSON,
        body=(files("recall.api") / "openapi.json").read_text(),
    )


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@metrics.log_metrics
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)


loaded()
