"""Local auth, as API Gateway's JWT authorizer decides it but without a signature: the
``sub`` of a bearer token, or ``None`` where the authorizer would answer 401, and the
unsigned demo token the web console's sign-in mints. Anyone can mint one, so this is for
``make dev`` only; a deployed API refuses them."""

from __future__ import annotations

import base64
import json
import math
import time
from typing import Any


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def demo_token(sub: str, exp: int | None = None) -> str:
    """An unsigned JWT for ``sub``: enough for this server, rejected by any real API. With
    ``exp`` it expires then, as a real token does; the console's never does."""
    header = {"alg": "HS256", "typ": "JWT"}
    claims: dict[str, Any] = {"iss": "recall-local", "sub": sub}
    if exp is not None:
        claims["exp"] = exp
    return ".".join(
        (
            _b64url(json.dumps(header, separators=(",", ":")).encode()),
            _b64url(json.dumps(claims, separators=(",", ":")).encode()),
            _b64url(b"local-unsigned"),
        )
    )


def _claims(authorization: str | None) -> dict[str, Any] | None:
    """The payload of a bearer JWT, unverified, or None when there is none to read."""
    if not authorization:
        return None
    token = authorization.strip()
    if token[:7].lower() == "bearer ":
        token = token[7:].strip()
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = parts[1] + "=" * (-len(parts[1]) % 4)
        claims = json.loads(base64.urlsafe_b64decode(payload))
    except (ValueError, TypeError):
        return None
    return claims if isinstance(claims, dict) else None


def expiry_of(authorization: str | None) -> str | None:
    """The token's ``exp`` in whole seconds, as text, as the $connect authorizer keeps it on
    a WebSocket connection; None for a token without one (the demo token)."""
    expires = (_claims(authorization) or {}).get("exp")
    if isinstance(expires, bool) or not isinstance(expires, int | float):
        return None
    return str(math.floor(expires)) if math.isfinite(expires) else str(expires)


def subject_of(authorization: str | None, now: float | None = None) -> str | None:
    """The ``sub`` of a bearer JWT, or None where API Gateway's JWT authorizer would answer
    401: no token, not three parts, an unreadable payload, no ``sub``, expired, not valid
    yet (``nbf``), or a time that is not a number."""
    claims = _claims(authorization)
    if claims is None:
        return None
    moment = now or time.time()
    times = {name: claims[name] for name in ("exp", "nbf") if name in claims}
    if not all(isinstance(at, int | float) and not isinstance(at, bool) for at in times.values()):
        return None
    if times.get("exp", math.inf) <= moment or times.get("nbf", -math.inf) > moment:
        return None
    subject = claims.get("sub")
    return subject if isinstance(subject, str) and subject.strip() else None
