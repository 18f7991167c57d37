"""The API's contract beyond its success bodies: every status each route can answer, the
bodies those answers carry, and which routes need a token. One table, read by the resolver
when a route is declared, so the OpenAPI document lists exactly what the code returns and
the contract test (schemathesis) can hold the code to it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse, OpenAPIResponseHeader
from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler.openapi.models import SecurityScheme

BEARER = "jwt"


def security_schemes() -> dict[str, SecurityScheme]:
    """How the document says a token is sent. Only the document needs it: Powertools'
    OpenAPI models cost a third of ``import boto3``, so no handler imports them."""
    from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer

    return {
        BEARER: HTTPBearer(
            bearerFormat="JWT",
            description="The identity provider's JWT, checked by API Gateway's JWT authorizer; "
            "its `sub` is the caller.",
        )
    }


SIGNED_IN: list[dict[str, list[str]]] = [{BEARER: []}]


class ErrorInfo(BaseModel):
    code: str = Field(description="Stable and machine-readable: validation_error, forbidden…")
    message: str = Field(description="For people; may change.")
    details: list[dict[str, str | list[str]]] = Field(
        default=[],
        description="Left out when empty. For 422, one object per field ({field, message?, "
        "type?, allowed?}); for 502/503/504, the ids of the messages the failed turn saved.",
    )


class ErrorBody(BaseModel):
    """Every error this API's own code answers."""

    error: ErrorInfo


class GatewayMessage(BaseModel):
    """What API Gateway answers by itself, e.g. its JWT authorizer's
    ``{"message": "Unauthorized"}``: not this API's error body."""

    message: str


# Any request may carry a body, and the edge refuses a bad one before routing (400, 413,
# 415); every route needs a token (401) and reads DynamoDB, which may throttle (429) or keep
# failing past the client's retries (503).
EVERY_ROUTE = (400, 401, 413, 415, 429, 503)
# API Gateway answers these itself too, before any function runs, with GatewayMessage
# (400: a request it cannot read, such as a Content-Length that is not a number).
GATEWAY_TOO = frozenset({400, 401, 413, 429})

WHY: dict[int, str] = {
    400: "Malformed JSON: not JSON, not UTF-8, or nested more than 32 levels deep; or a "
    "request API Gateway cannot read, such as a malformed Content-Length (its GatewayMessage).",
    401: 'No usable token: API Gateway\'s JWT authorizer answers {"message": "Unauthorized"}; '
    "a `sub` no key can hold is this API's ErrorBody.",
    403: "No role on the project, or too low a role.",
    404: "Not found, or not the caller's.",
    409: "A conflict: a rule the change would break, or a race lost too often (then with "
    "`Retry-After`; nothing was saved).",
    413: "The request body, or the chat message, is too large (over API Gateway's own "
    "limit, its GatewayMessage).",
    415: "A body that is not sent as application/json.",
    422: "Some fields are not valid; `details` names them.",
    429: "DynamoDB is throttling (ErrorBody, with `Retry-After`), or API Gateway's route "
    "throttling (GatewayMessage); try again shortly. On a chat turn, also the caller's "
    "budget reached (`budget_exceeded`, `Retry-After` until the period resets).",
    502: "The model rejected or failed the turn; the turn's messages are saved.",
    503: "DynamoDB kept failing past its retries (`unavailable`, nothing saved), or, on a "
    "chat turn, the model is throttled or unavailable (the turn's messages are saved); "
    "with `Retry-After`.",
    504: "The model timed out; the turn's messages are saved.",
}

# Statuses whose answer may say when to try again; a generated client reads the header.
RETRY_AFTER: dict[str, OpenAPIResponseHeader] = {
    "Retry-After": {
        "description": "Seconds to wait before trying again, where the answer says to.",
        "schema": {"type": "integer"},
    }
}
MAY_RETRY_AFTER = frozenset({409, 429, 503})

# Request headers a route reads besides the token, documented as its parameters.
IDEMPOTENCY_KEY: dict[str, Any] = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": (
        "Makes the turn safe to send again: the same key (per caller and project) with the "
        "same body answers what the first answered, without a second turn; with another "
        "body it is a 422. 1 to 255 characters."
    ),
    "schema": {"type": "string", "minLength": 1, "maxLength": 255},
}
REQUEST_HEADERS: dict[str, list[dict[str, Any]]] = {
    "POST /projects/{projectId}/chat": [IDEMPOTENCY_KEY],
}

SUCCESS: dict[int, str] = {
    200: "OK",
    201: "Created",
    202: "Accepted: the work goes on in the background; the body says how far it is.",
    204: "Done; no body.",
}


@dataclass(frozen=True)
class Contract:
    """A route's success statuses and the errors it may answer besides ``EVERY_ROUTE``."""

    success: tuple[int, ...]
    errors: tuple[int, ...] = ()

    def statuses(self) -> list[int]:
        return sorted({*self.success, *EVERY_ROUTE, *self.errors})


_OK = (200,)
_CREATED = (201,)
_UPSERTED = (200, 201)
_DONE = (204,)
_ERASED = (202, 204)
_ACCEPTED = (202,)
_CONVERSATION = "/projects/{projectId}/conversations/{conversationId}"
_MEMORY = "/projects/{projectId}/memories/{key}"
_PRESET = "/projects/{projectId}/presets/{presetId}"

ROUTES: dict[str, Contract] = {
    "POST /projects": Contract(_CREATED, (422,)),
    "GET /projects": Contract(_OK, (422,)),
    "GET /projects/{projectId}": Contract(_OK, (403,)),
    "PATCH /projects/{projectId}": Contract(_OK, (403, 422)),
    "GET /projects/{projectId}/members": Contract(_OK, (403,)),
    "PUT /projects/{projectId}/members/{userId}": Contract(_UPSERTED, (403, 409, 422)),
    "DELETE /projects/{projectId}/members/{userId}": Contract(_DONE, (403, 404, 409)),
    # 204 once everything is erased; 202 when the worker finishes it (ERASE_ITEMS_PER_RUN).
    "DELETE /projects/{projectId}/me": Contract(_ERASED, (403, 409)),
    "DELETE /projects/{projectId}": Contract(_ERASED, (403, 409)),
    "PUT /projects/{projectId}/members/{userId}/budget": Contract(_OK, (403, 404, 422)),
    "GET /projects/{projectId}/usage": Contract(_OK, (403, 422)),
    "GET /projects/{projectId}/sessions": Contract(_OK, (403, 422)),
    "GET /projects/{projectId}/presets": Contract(_OK, (403,)),
    # 409: the project has PRESETS_MAX presets already.
    "POST /projects/{projectId}/presets": Contract(_CREATED, (403, 409, 422)),
    f"GET {_PRESET}": Contract(_OK, (403, 404)),
    f"PATCH {_PRESET}": Contract(_OK, (403, 404, 422)),
    f"DELETE {_PRESET}": Contract(_DONE, (403, 404)),
    "GET /projects/{projectId}/conversations": Contract(_OK, (403, 422)),
    "POST /projects/{projectId}/conversations": Contract(_CREATED, (403, 422)),
    f"GET {_CONVERSATION}": Contract(_OK, (403, 404, 422)),
    # 409: the thread kept changing under the PATCH (THREAD_CHANGE_ATTEMPTS), or its item
    # was in another write at that moment (a turn saving on it).
    f"PATCH {_CONVERSATION}": Contract(_OK, (403, 404, 409, 422)),
    f"DELETE {_CONVERSATION}": Contract(_DONE, (403, 404, 409)),
    # 422: a JSON array as the body, though the route reads none.
    f"POST {_CONVERSATION}/clear-context": Contract(_OK, (403, 404, 409, 422)),
    f"GET {_CONVERSATION}/context": Contract(_OK, (403, 404)),
    "POST /projects/{projectId}/chat": Contract(_OK, (403, 404, 409, 422, 502, 503, 504)),
    "GET /projects/{projectId}/memories": Contract(_OK, (403, 404, 422)),
    f"PUT {_MEMORY}": Contract(_UPSERTED, (403, 404, 409, 422)),
    f"DELETE {_MEMORY}": Contract(_DONE, (403, 404, 409, 422)),
    f"GET {_MEMORY}/history": Contract(_OK, (403, 404, 422)),
    # An export over EXPORT_LINES_MAX_BYTES is a 413 too: more than one request can write.
    "GET /projects/{projectId}/export": Contract(_OK, (403,)),
    "POST /projects/{projectId}/import": Contract(_ACCEPTED, (403, 422)),
    "GET /projects/{projectId}/import/{importId}": Contract(_OK, (403, 404)),
}


def route_key(method: str, rule: str) -> str:
    """``GET /projects/<projectId>`` (Powertools' rule) as the template's route key."""
    return f"{method.upper()} {rule.replace('<', '{').replace('>', '}')}"


def responses(key: str) -> dict[int, OpenAPIResponse]:
    """The route's documented responses; a route missing from ``ROUTES`` is a KeyError when
    its module loads, so no route goes undocumented."""
    contract = ROUTES[key]
    documented: dict[int, OpenAPIResponse] = {}
    for status in contract.statuses():
        if status in contract.success:
            # Without "content", Powertools documents the handler's return type; 204 has none.
            documented[status] = (
                {"description": SUCCESS[status], "content": {}}
                if status == 204
                else {"description": SUCCESS[status]}
            )
        else:
            body: Any = GatewayMessage | ErrorBody if status in GATEWAY_TOO else ErrorBody
            documented[status] = {
                "description": WHY[status],
                "content": {"application/json": {"model": body}},
            }
            if status in MAY_RETRY_AFTER:
                documented[status]["headers"] = RETRY_AFTER
    return documented
