"""Local auth, as API Gateway's JWT authorizer decides it but without a signature: the
``sub`` of a bearer token, or ``None`` where the authorizer would answer 401, and the
unsigned demo token ``make dev`` prints (the console mints its own, ``web/js/session.js``).
PyJWT reads and writes them, as it verifies the deployed ones (``functions/ws_authorizer``),
but never checks a signature here: anyone can mint one, so this is for ``make dev`` only; a
deployed API refuses them."""

from __future__ import annotations

import math
from typing import Any, TypeGuard

import jwt

ISSUER = "recall-local"
# The claims make dev checks, as API Gateway's JWT authorizer does: a string ``sub``, and
# ``exp`` and ``nbf`` (when there) against the clock. Never the signature.
CHECKED: Any = {
    "verify_signature": False,
    "verify_exp": True,
    "verify_nbf": True,
    "verify_sub": True,
    "require": ["sub"],
}


def demo_token(sub: str, exp: int | None = None) -> str:
    """An unsigned JWT (``alg: none``) for ``sub``: enough for this server, refused by any
    real API. With ``exp`` it expires then, as a real token does; without, it never does."""
    claims: dict[str, Any] = {"iss": ISSUER, "sub": sub}
    if exp is not None:
        claims["exp"] = exp
    return jwt.encode(claims, "", algorithm="none")


def _token(authorization: str) -> str:
    """The JWT of an ``Authorization`` header (``Bearer <JWT>``) or of a bare token."""
    token = authorization.strip()
    return token[7:].strip() if token[:7].lower() == "bearer " else token


def _claims(authorization: str | None, options: Any) -> dict[str, Any] | None:
    """The payload of a bearer JWT, unverified, or None when there is none to read or
    PyJWT refuses it under ``options``."""
    if not authorization:
        return None
    try:
        claims: dict[str, Any] = jwt.decode(_token(authorization), options=options)
    except (jwt.PyJWTError, ValueError, TypeError):
        return None
    return claims


def _is_time(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def expiry_of(authorization: str | None) -> str | None:
    """The token's ``exp`` in whole seconds, as text, as the $connect authorizer keeps it on
    a WebSocket connection; None for a token without one (the demo token)."""
    expires = (_claims(authorization, {"verify_signature": False}) or {}).get("exp")
    if not _is_time(expires):
        return None
    return str(math.floor(expires)) if math.isfinite(expires) else str(expires)


def subject_of(authorization: str | None) -> str | None:
    """The ``sub`` of a bearer JWT, or None where API Gateway's JWT authorizer would answer
    401: no token, not a JWT, no ``sub`` or a blank one, expired (``exp``), not valid yet
    (``nbf``), or a time that is not a number."""
    claims = _claims(authorization, CHECKED)
    if claims is None:
        return None
    if not all(_is_time(claims[name]) for name in ("exp", "nbf") if name in claims):
        return None
    subject = claims["sub"]
    return subject if isinstance(subject, str) and subject.strip() else None
