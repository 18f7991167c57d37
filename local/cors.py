"""CORS for ``make dev``'s API as the HTTP API answers it when the template's
``CorsAllowedOrigins`` is set: a preflight from a listed origin gets the allowed methods and
headers, and every answer to a listed origin names it. Origins come from
``CORS_ALLOWED_ORIGINS``; none by default, so only same-origin pages (the console served at
``/``) can call the API from a browser."""

from __future__ import annotations

ALLOW_METHODS = "GET,POST,PUT,PATCH,DELETE,OPTIONS"
ALLOW_HEADERS = "authorization,content-type,idempotency-key"
EXPOSE_HEADERS = "location,retry-after"
MAX_AGE_SECONDS = "600"


def origins() -> tuple[str, ...]:
    from recall.settings import get_settings  # the layer is on sys.path once runtime loads

    return get_settings().cors_allowed_origins


def allowed(origin: str | None) -> bool:
    return origin is not None and origin in origins()


def is_preflight(method: str, headers: dict[str, str]) -> bool:
    """A browser asking before a cross-origin request, answered only when CORS is on (as
    API Gateway does; without CORS it routes OPTIONS like any method, to a 404)."""
    return (
        method.upper() == "OPTIONS"
        and "origin" in headers
        and "access-control-request-method" in headers
        and bool(origins())
    )


def preflight_headers(origin: str | None) -> dict[str, str]:
    """A preflight's answer: permissions for a listed origin, nothing for another."""
    if not allowed(origin):
        return {"vary": "origin"}
    return {
        **answer_headers(origin),
        "access-control-allow-methods": ALLOW_METHODS,
        "access-control-allow-headers": ALLOW_HEADERS,
        "access-control-max-age": MAX_AGE_SECONDS,
    }


def answer_headers(origin: str | None) -> dict[str, str]:
    """Added to every answer: a listed origin may read it (and its Location, Retry-After)."""
    if origin is None or not allowed(origin):
        return {}
    return {
        "access-control-allow-origin": origin,
        "access-control-expose-headers": EXPOSE_HEADERS,
        "vary": "origin",
    }
