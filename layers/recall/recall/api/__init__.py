"""The HTTP edge shared by every function: the resolver, the caller's identity and the one
place where errors become status codes and the API's error body
``{"error": {"code", "message", "details"?}}``."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping
from http import HTTPStatus
from itertools import accumulate
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
from recall.errors import (
    Conflict,
    DomainError,
    Forbidden,
    Invalid,
    ModelFailed,
    NotFound,
    Throttled,
    TooLarge,
    Unauthenticated,
    Unavailable,
)
from recall.observability import logger
from recall.settings import Settings, get_settings
from recall.store.dynamodb import fault_of
from recall.store.keys import fits_id, fits_user_id

STATUS: dict[type[DomainError], int] = {
    Unauthenticated: 401,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    TooLarge: 413,
    Invalid: 422,
    Throttled: 429,
    Unavailable: 503,
}

# Routes that take a larger body than REQUEST_BODY_MAX_BYTES, and the setting that bounds it:
# the body as the event carries it (`size_in_event`), which Lambda's 6 MB payload limits.
BODY_LIMITS = {"POST /projects/{projectId}/import": "import_max_bytes"}

# Statuses that say "the same request may succeed later", so they carry Retry-After.
RETRY_LATER = {429, 503}
JSON = "application/json"


def error_response(
    status: int,
    code: str,
    message: str,
    details: list[dict[str, Any]] | None = None,
    retry_after: int | None = None,
) -> Response[Any]:
    """The error body; a 429 or 503 (and any error with ``retry_after`` seconds) says when
    to try again, so a client backs off instead of hammering a busy dependency."""
    error: dict[str, Any] = {"code": code, "message": message}
    if details:
        error["details"] = details
    if retry_after is None and status in RETRY_LATER:
        retry_after = get_settings().retry_after_seconds
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body={"error": error},
        headers=headers,
    )


def _status_of(error: DomainError) -> int:
    if isinstance(error, ModelFailed):
        return error.status
    for kind in type(error).__mro__:
        if kind in STATUS:
            return STATUS[kind]
    return 400


# Where a request's value came from, which pydantic puts first in an error's location.
_SOURCES = frozenset({"body", "query", "path", "header"})
# The labels pydantic gives a union's branches in a location: not fields a client sent.
_BRANCHES = frozenset({"str", "int", "float", "bool", "none"})


def field_name(location: tuple[Any, ...]) -> str:
    """The field as a client names it: ``limit``, not ``query.limit``; ``context.a``, not
    ``context.a.str``; ``threads.0.role``, not the tagged union's ``threads.threads.0.role``
    or ``recall.export.conversations`` (a tag is a ``format`` value; no field has a dot)."""
    parts = list(location)
    if parts and parts[0] in _SOURCES:
        parts = parts[1:]
    if len(parts) > 1 and isinstance(parts[0], str) and (parts[0] == parts[1] or "." in parts[0]):
        parts = parts[1:]
    kept = [
        str(part)
        for part in parts
        if not (isinstance(part, str) and (part in _BRANCHES or "[" in part))
    ]
    return ".".join(kept) or "body"


def field_details(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each error once per field: a value that fits no branch of a union is one error."""
    details: dict[str, dict[str, Any]] = {}
    for error in errors:
        field = field_name(tuple(error.get("loc", ())))
        details.setdefault(
            field,
            {
                "field": field,
                "message": str(error.get("msg", "")),
                "type": str(error.get("type", "")),
            },
        )
    return list(details.values())


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


def json_bytes(value: object) -> int:
    """The bytes ``value`` takes written as JSON in an invocation payload, which Lambda
    counts against its 6 MB: UTF-8, with each quote and backslash in a string escaped (two
    bytes) and each control character too (up to six)."""
    return len(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))


def size_in_event(body: str) -> int:
    """The bytes ``body`` takes in the API Gateway event, where it is a JSON string (its
    two quotes left out), so a body of 5.3 MB of quotes is 10.5 MB."""
    return json_bytes(body) - 2


def _raw_error(status: int, code: str, message: str) -> dict[str, Any]:
    return {
        "statusCode": status,
        "headers": {"Content-Type": content_types.APPLICATION_JSON},
        "body": json.dumps({"error": {"code": code, "message": message}}),
        "isBase64Encoded": False,
    }


MAX_JSON_DEPTH = 32
# A string to its closing quote, or to the end of the text when it never closes: an
# unclosed string must still be one match, or every escaped quote inside it starts a new
# scan to the end, and a body of 80 KB took 20 s.
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\[\s\S])*(?:"|\\?\Z)')
_NOT_BRACKET = re.compile(r"[^\[\]{}]")


def json_depth(text: str) -> int:
    """How deeply ``text``'s arrays and objects nest, without a recursive parser: strings
    are dropped, then the brackets left are counted, so a body 10,000 levels deep is
    measured, not parsed."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    steps = (1 if char in "[{" else -1 for char in brackets)
    return max(accumulate(steps, initial=0))


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON.")


def read_json(text: str | bytes) -> Any:
    """A client's JSON, or `json.JSONDecodeError` for anything that is not JSON, the one
    error Powertools turns into a 400: Python's own parser raises a plain `ValueError` for
    an integer over 4,300 digits (a 500 once it reached the resolver's last resort), and
    reads ``NaN``, ``Infinity`` and ``-Infinity``, which RFC 8259 has no place for."""
    try:
        return json.loads(text, parse_constant=_not_json)
    except json.JSONDecodeError:
        raise
    except ValueError as exc:
        raise json.JSONDecodeError(str(exc), str(text), 0) from exc


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
            return error_response(400, "malformed_json", "The request body is not valid JSON.")
        return error_response(
            422, Invalid.code, "Some fields are not valid.", field_details(errors)
        )

    @app.not_found
    def _no_route(error: NotFoundError) -> Response[Any]:
        return error_response(404, NotFound.code, "No such route.")

    app.exception_handler(DomainError)(domain_error_response)
    app.exception_handler(RequestValidationError)(_invalid_request)
    app.exception_handler(Exception)(unexpected_error_response)
    return app


def domain_error_response(error: DomainError) -> Response[Any]:
    """The answer to a domain error, over HTTP and in a WebSocket ``error`` frame alike."""
    return error_response(
        _status_of(error),
        error.code,
        error.message,
        error.details,
        retry_after=error.retry_after,
    )


def unexpected_error_response(error: Exception) -> Response[Any]:
    """The answer to any other error: a dependency that kept failing is a 429 or 503."""
    fault = fault_of(error)
    if fault is not None:
        # A dependency still throttled or failing after botocore's retries: the
        # request may be sent again, so it is a 429 or 503, never a 500.
        logger.warning(
            "dependency failed after its retries",
            extra={"error_type": type(error).__name__, "status_code": _status_of(fault)},
        )
        return domain_error_response(fault)
    logger.exception("unexpected error")
    return error_response(500, "internal_error", "Something went wrong on our side.")


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
