"""$connect of the WebSocket API: a Lambda REQUEST authorizer that verifies the same JWT
the HTTP API's JWT authorizer does (an RSA signature against the issuer's JWKS, ``exp``,
``iss``, and ``aud`` or ``client_id``). Browsers cannot set headers on a WebSocket
connect, so the token comes as ``?token=<JWT>`` or as the subprotocols
``["bearer", "<JWT>"]``. The ``sub`` it returns is who every later frame acts as, until
the token's ``exp``, which it returns too: API Gateway keeps both on the connection, and
the chat route refuses frames after it (a connection outlives its token otherwise).

The keys are read from ``{issuer}/.well-known/jwks.json`` (where Cognito and Auth0 publish
them), waiting at most JWKS_FETCH_TIMEOUT_SECONDS, and kept for JWKS_CACHE_SECONDS by this
container's one ``PyJWKClient``."""

from __future__ import annotations

import gc

# Until recall.cold_start.loaded(), below: no collection while the module loads.
gc.disable()

from functools import lru_cache
from typing import Any

import jwt

from recall.cold_start import loaded
from recall.observability import logger
from recall.settings import get_settings
from recall.store.keys import fits_user_id

# What the HTTP API's JWT authorizer verifies: RSA signatures only (AWS documents no other
# for HTTP APIs), so a token the HTTP API would refuse is no key to the WebSocket API either.
# A key of another type (EC), or a header naming another algorithm (ES256, HS256, none) over
# an RSA key, is refused.
RSA_ALGORITHMS = ["RS256", "RS384", "RS512"]
# The one message API Gateway turns into a 401 on the upgrade.
UNAUTHORIZED = "Unauthorized"


def jwks_url(issuer: str) -> str:
    return f"{issuer.rstrip('/')}/.well-known/jwks.json"


@lru_cache(maxsize=1)
def signing_keys() -> jwt.PyJWKClient:
    settings = get_settings()
    return jwt.PyJWKClient(
        jwks_url(settings.jwt_issuer),
        cache_jwk_set=True,
        lifespan=settings.jwks_cache_seconds,
        timeout=settings.jwks_fetch_timeout_seconds,
    )


def token_of(event: dict[str, Any]) -> str | None:
    """The JWT from the query string, else the one after ``bearer`` in the subprotocols."""
    query = event.get("queryStringParameters") or {}
    if isinstance(query.get("token"), str) and query["token"].strip():
        return str(query["token"]).strip()
    headers = {str(key).lower(): str(value) for key, value in (event.get("headers") or {}).items()}
    offered = [part.strip() for part in headers.get("sec-websocket-protocol", "").split(",")]
    if "bearer" in offered[:-1]:
        return offered[offered.index("bearer") + 1] or None
    return None


def verified_token(token: str) -> tuple[str, int]:
    """The token's ``sub`` and ``exp`` (whole seconds, rounded down), or `jwt.PyJWTError`
    when it is not one the HTTP API would take. The audience is ``aud`` or, as Cognito's
    access tokens carry it, ``client_id``."""
    settings = get_settings()
    key = signing_keys().get_signing_key_from_jwt(token)
    if key.key_type != "RSA":
        raise jwt.InvalidKeyError("the HTTP API's JWT authorizer verifies RSA keys only")
    claims = jwt.decode(
        token,
        key.key,
        algorithms=RSA_ALGORITHMS,
        issuer=settings.jwt_issuer,
        options={"require": ["exp", "iss", "sub"], "verify_aud": False},
    )
    audience = claims.get("aud", claims.get("client_id"))
    audiences = {audience} if isinstance(audience, str) else set(audience or [])
    if not audiences & set(settings.jwt_audience):
        raise jwt.InvalidAudienceError("the token is for another audience")
    subject = claims["sub"]
    if not isinstance(subject, str) or not subject.strip():
        raise jwt.InvalidTokenError("the token names no subject")
    if not fits_user_id(subject):
        # Every frame would be refused (401); refuse the upgrade instead, as documented.
        raise jwt.InvalidTokenError("the token's subject is not one this API can serve")
    return subject, int(claims["exp"])


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    token = token_of(event)
    if token is None:
        raise Exception(UNAUTHORIZED)
    try:
        subject, expires = verified_token(token)
    except jwt.PyJWKClientConnectionError:
        # The issuer's keys could not be read in time: no token can be checked, so none is
        # taken. Refused at once (a 401 the client may retry), not left to time out.
        logger.warning("connect refused: the issuer's keys could not be fetched")
        raise Exception(UNAUTHORIZED) from None
    except jwt.PyJWTError as refused:
        logger.info("connect refused", extra={"reason": type(refused).__name__})
        raise Exception(UNAUTHORIZED) from None
    except Exception as broken:
        # A token that breaks its own check (an integer aud, a key it cannot use) is refused
        # too: an authorizer that raises anything else is API Gateway's 500, not a 401.
        reason = type(broken).__name__
        logger.warning("connect refused: the token broke its check", extra={"reason": reason})
        raise Exception(UNAUTHORIZED) from None
    return {
        "principalId": subject,
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [
                {"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": event["methodArn"]}
            ],
        },
        # API Gateway hands context values on as text, as it would a number: exp is sent so.
        "context": {"sub": subject, "exp": str(expires)},
    }


loaded()
