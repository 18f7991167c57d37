"""Local auth, as API Gateway's JWT authorizer decides it but without a signature: the
``sub`` of a bearer token, or ``None`` where the authorizer would answer 401, and the
unsigned demo token the web console's sign-in mints. Anyone can mint one, so this is for
``make dev`` only; a deployed API refuses them."""

from __future__ import annotations

import base64
import json
import math
import time


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def demo_token(sub: str) -> str:
    """An unsigned JWT for ``sub``: enough for this server, rejected by any real API."""
    header = {"alg": "HS256", "typ": "JWT"}
    claims = {"iss": "recall-local", "sub": sub}
    return ".".join(
        (
            _b64url(json.dumps(header, separators=(",", ":")).encode()),
            _b64url(json.dumps(claims, separators=(",", ":")).encode()),
            _b64url(b"local-unsigned"),
        )
    )


def subject_of(authorization: str | None, now: float | None = None) -> str | None:
    """The ``sub`` of a bearer JWT, or None where API Gateway's JWT authorizer would answer
    401: no token, not three parts, an unreadable payload, no ``sub``, expired, not valid
    yet (``nbf``), or a time that is not a number."""
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
    if not isinstance(claims, dict):
        return None
    moment = now or time.time()
    times = {name: claims[name] for name in ("exp", "nbf") if name in claims}
    if not all(isinstance(at, int | float) and not isinstance(at, bool) for at in times.values()):
        return None
    if times.get("exp", math.inf) <= moment or times.get("nbf", -math.inf) > moment:
        return None
    subject = claims.get("sub")
    return subject if isinstance(subject, str) and subject.strip() else None
