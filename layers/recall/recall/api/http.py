"""The HTTP edge shared by every HTTP function: the resolver, the caller's identity, page
sizes, and errors answered as Powertools responses (``recall.api.errors`` makes them)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping
from http import HTTPStatus
import json
import re
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.constants import (
    DEFAULT_OPENAPI_RESPONSE_DESCRIPTION,
    DEFAULT_STATUS_CODE,
)
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from aws_lambda_powertools.shared.types import AnyCallableT
from aws_lambda_powertools.utilities.typing import LambdaContext

from recall.api import contract
from recall.api.bodies import MAX_JSON_DEPTH, json_depth, read_json, size_in_event
from recall.api.errors import (
    ErrorAnswer,
    domain_error_answer,
    error_answer,
    field_details,
    unexpected_error_answer,
)
from recall.errors import DomainError, Forbidden, Invalid, NotFound, TooLarge, Unauthenticated
from recall.settings import Settings, get_settings
from recall.store.keys import fits_id, fits_user_id

# Routes that take a larger body than REQUEST_BODY_MAX_BYTES, and the setting that bounds it:
# the body as the event carries it (`size_in_event`), which Lambda's 6 MB payload limits.
BODY_LIMITS = {"POST /projects/{projectId}/import": "import_max_bytes"}

JSON = "application/json"


def as_response(answer: ErrorAnswer) -> Response[Any]:
    return Response(
        status_code=answer.status,
        content_type=content_types.APPLICATION_JSON,
        body=answer.body,
        headers=answer.headers,
    )


def domain_error_response(error: DomainError) -> Response[Any]:
    return as_response(domain_error_answer(error))


def unexpected_error_response(error: Exception) -> Response[Any]:
    return as_response(unexpected_error_answer(error))


def caller_id(app: APIGatewayHttpResolver) -> str:
    """The JWT ``sub`` that API Gateway's authorizer verified; never a user id from the body."""
    authorizer = app.current_event.request_context.authorizer
    claims = authorizer.jwt_claim if authorizer else None
    subject = (claims or {}).get("sub")
    if not isinstance(subject, str) or not subject.strip():
        raise Unauthenticated("Sign in: the request carries no identity.")
    if not fits_user_id(subject):
        raise Unauthenticated("The token's subject is not one this API can serve.")
    return subject


def _raw_error(status: int, code: str, message: str) -> dict[str, Any]:
    """The error answer as the function returns it, for a request refused before the
    resolver runs (none of these statuses says when to try again)."""
    return {
        "statusCode": status,
        "headers": {"Content-Type": content_types.APPLICATION_JSON},
        "body": json.dumps(error_answer(status, code, message).body),
        "isBase64Encoded": False,
    }


def _escapes_text(text: str) -> bool:
    """Whether every string the JSON escapes is text: ``"\\ud800"`` is valid JSON but a
    lone surrogate, which no UTF-8 can hold and DynamoDB refuses (a 500 once stored).
    Called once the depth is known to be small, so parsing cannot recurse too deep."""
    if "\\u" not in text:
        return True
    try:
        json.dumps(read_json(text), ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    except ValueError:
        return True  # not JSON: the resolver's own parse answers that
    return True


def _body_text(body: str, encoded: bool) -> str | None:
    """The body as text, or None when it is not UTF-8 (API Gateway base64-encodes such a
    body, and Powertools would raise ``UnicodeDecodeError`` decoding it)."""
    try:
        if encoded:
            return base64.b64decode(body, validate=True).decode("utf-8")
        body.encode("utf-8")
    except (binascii.Error, ValueError):
        return None
    return body


def _is_json_array(text: str) -> bool:
    """Whether ``text`` is a well-formed JSON array (malformed JSON is left to the 400);
    called only once the depth check has bounded what ``read_json`` may meet."""
    if not text.lstrip().startswith("["):
        return False
    try:
        read_json(text)
    except ValueError:
        return False
    return True


class JsonResolver(APIGatewayHttpResolver):
    """JSON in, JSON out. A body that is too large, not JSON, not UTF-8 or nested too deeply
    is refused before anything parses it, so no parser ever sees bytes it would fail on
    with a 500 (``UnicodeDecodeError``, ``RecursionError``)."""

    @staticmethod
    def _compile_regex(rule: str, base_regex: str = "^{}$") -> re.Pattern[str]:
        """A path parameter is any one segment, as API Gateway's ``{name}`` is. Powertools'
        own pattern leaves out characters the HTTP API decodes into the path (``"``, ``#``,
        ``?``, ``\\``, emoji, control characters): such a request would be a 404 no route
        instead of reaching the route's own checks."""
        return re.compile(base_regex.format(re.sub(r"<(\w+)>", r"(?P<\1>[^/]+)", rule)))

    def resolve(self, event: Mapping[str, Any], context: LambdaContext) -> dict[str, Any]:
        body = event.get("body") or ""
        settings = get_settings()
        larger = BODY_LIMITS.get(str(event.get("routeKey", "")))
        counted = ""
        if larger:
            limit, size = getattr(settings, larger), size_in_event(body)
            counted = " as the API carries it (a quote or backslash counts two)"
        else:
            limit = settings.request_body_max_bytes
            size = len(body) * 3 // 4 if event.get("isBase64Encoded") else len(body.encode())
        if size > limit:
            return _raw_error(
                413, TooLarge.code, f"The request body is over {limit} bytes{counted}."
            )
        headers = {str(key).lower(): value for key, value in (event.get("headers") or {}).items()}
        media_type = str(headers.get("content-type") or JSON).split(";", 1)[0].strip().lower()
        method = str(event.get("requestContext", {}).get("http", {}).get("method", "")).upper()
        sends_body = bool(body) or method in {"POST", "PUT", "PATCH"}
        if sends_body and media_type != JSON:
            return _raw_error(
                415,
                "unsupported_media_type",
                "Send the body as JSON with the header content-type: application/json.",
            )
        # Media types are case-insensitive (RFC 9110); Powertools' body parser matches the
        # lower-case spelling only, and refuses any other with an exception (a 500).
        event = {**event, "headers": {**headers, "content-type": JSON}}
        text = _body_text(body, bool(event.get("isBase64Encoded")))
        if text is None:
            return _raw_error(400, "malformed_json", "The request body is not UTF-8 text.")
        if json_depth(text) > MAX_JSON_DEPTH:
            return _raw_error(
                400,
                "malformed_json",
                f"The request body nests more than {MAX_JSON_DEPTH} levels deep.",
            )
        if not _escapes_text(text):
            return _raw_error(
                400, "malformed_json", "The request body escapes a character that is not text."
            )
        if method in {"POST", "PUT", "PATCH"} and _is_json_array(text):
            # Powertools would take an array's first item as the body; no route takes one.
            return _raw_error(
                422, Invalid.code, "The request body must be a JSON object, not an array."
            )
        project_id = (event.get("pathParameters") or {}).get("projectId")
        if project_id is not None and not fits_id(str(project_id)):
            # No one has a role on a project id no project can have: the stranger's 403.
            return _raw_error(403, Forbidden.code, "You have no role on this project.")
        return super().resolve(event, context)

    def route(
        self,
        rule: str,
        method: str | list[str] | tuple[str],
        cors: bool | None = None,
        compress: bool = False,
        cache_control: str | None = None,
        summary: str | None = None,
        description: str | None = None,
        responses: dict[int, OpenAPIResponse] | None = None,
        response_description: str = DEFAULT_OPENAPI_RESPONSE_DESCRIPTION,
        tags: list[str] | None = None,
        operation_id: str | None = None,
        include_in_schema: bool = True,
        security: list[dict[str, list[str]]] | None = None,
        openapi_extensions: dict[str, Any] | None = None,
        deprecated: bool = False,
        enable_validation: bool | None = None,
        custom_response_validation_http_code: int | HTTPStatus | None = None,
        status_code: int = DEFAULT_STATUS_CODE,
        middlewares: list[Callable[..., Any]] | None = None,
    ) -> Callable[[AnyCallableT], AnyCallableT]:
        """Every documented route takes its statuses and security from ``contract.ROUTES``,
        so declaring a route never repeats them."""
        if include_in_schema and isinstance(method, str) and responses is None:
            responses = contract.responses(contract.route_key(method, rule))
            security = security or contract.SIGNED_IN
        return super().route(
            rule,
            method,
            cors,
            compress,
            cache_control,
            summary,
            description,
            responses,
            response_description,
            tags,
            operation_id,
            include_in_schema,
            security,
            openapi_extensions,
            deprecated,
            enable_validation,
            custom_response_validation_http_code,
            status_code,
            middlewares,
        )


def new_resolver(serializer: Callable[[Any], str] | None = None) -> APIGatewayHttpResolver:
    """The resolver every function routes with; ``serializer`` writes its JSON bodies
    (Powertools' own, ASCII with ``\\u`` escapes, when not given)."""
    app = JsonResolver(
        enable_validation=True, serializer=serializer, json_body_deserializer=read_json
    )

    def _invalid_request(error: RequestValidationError) -> Response[Any]:
        errors = list(error.errors())
        if any(item.get("type") == "json_invalid" for item in errors):
            return as_response(
                error_answer(400, "malformed_json", "The request body is not valid JSON.")
            )
        return as_response(
            error_answer(422, Invalid.code, "Some fields are not valid.", field_details(errors))
        )

    @app.not_found
    def _no_route(error: NotFoundError) -> Response[Any]:
        return as_response(error_answer(404, NotFound.code, "No such route."))

    app.exception_handler(DomainError)(domain_error_response)
    app.exception_handler(RequestValidationError)(_invalid_request)
    app.exception_handler(Exception)(unexpected_error_response)
    return app


def page_limit(maximum_setting: str) -> Any:
    """The ``limit`` query parameter, documented with its setting's default bounds; only
    ``page_size`` enforces them, with the bounds the settings hold when it runs."""
    maximum = Settings.model_fields[maximum_setting].default
    return Query(
        description=f"1 to {maximum_setting.upper()} ({maximum} by default).",
        json_schema_extra={"minimum": 1, "maximum": maximum},
    )


def page_size(limit: int | None, default: int, maximum: int) -> int:
    """A page size from the query string, within the settings' bounds."""
    if limit is None:
        return default
    if not 1 <= limit <= maximum:
        raise Invalid(
            f"limit is between 1 and {maximum}.",
            [{"field": "limit", "message": f"between 1 and {maximum}"}],
        )
    return limit
