"""The WebSocket API's routes: ``$connect`` (after the authorizer; it selects the
``bearer`` subprotocol when the client offered it), ``$disconnect``, and ``chat`` and
``$default``, which read the frame and, once it is a valid ``chat`` frame, hand the turn
to the streaming worker asynchronously and return: a turn may outlive API Gateway's
29-second integration limit. A frame that is not answers one ``error`` frame; one on a
connection whose token has expired answers a 401 and closes the connection."""

from __future__ import annotations

import gc

# Until recall.cold_start.loaded(), below: no collection while the module loads.
gc.disable()

from contextlib import suppress
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from recall.api.errors import domain_error_answer, unexpected_error_answer
from recall.api.stream import (
    Connection,
    ConnectionGone,
    Frame,
    FrameRefused,
    caller_of,
    error_frame,
    read_frame,
    request_id_in,
)
from recall.cold_start import loaded
from recall.domain import clock
from recall.errors import DomainError, Unauthenticated
from recall.observability import logger, metrics, tracer
from recall.settings import get_settings
from recall.wiring import stream_links

OK = {"statusCode": 200}


def connected(event: dict[str, Any]) -> dict[str, Any]:
    headers = {str(key).lower(): str(value) for key, value in (event.get("headers") or {}).items()}
    offered = [part.strip() for part in headers.get("sec-websocket-protocol", "").split(",")]
    if "bearer" in offered:
        return {**OK, "headers": {"Sec-WebSocket-Protocol": "bearer"}}
    return OK


def received(event: dict[str, Any]) -> dict[str, Any]:
    context = event["requestContext"]
    domain, stage, connection_id = context["domainName"], context["stage"], context["connectionId"]
    connection = stream_links().connection(domain, stage, connection_id)
    request_id: str | None = None  # known once the frame is read; its answer carries it
    max_bytes = get_settings().request_body_max_bytes
    try:
        user_id = caller_of(context.get("authorizer"), clock.now().timestamp())
    except Unauthenticated as refused:
        # Every later frame would be refused too (an expired token does not come back to
        # life): the client hears why, for this request, and connects again with a fresh
        # token.
        request_id = request_id_in(event.get("body"), max_bytes)
        _answer(connection, error_frame(request_id, domain_error_answer(refused)))
        _close(connection)
        return OK
    try:
        frame = read_frame(event.get("body"), max_bytes)
        request_id = frame.request_id
        stream_links().hand_off(
            {
                "domainName": domain,
                "stage": stage,
                "connectionId": connection_id,
                "user": user_id,
                "frame": frame.model_dump(by_alias=True, mode="json"),
            }
        )
    except FrameRefused as refused:
        _answer(connection, refused.frame)
    except DomainError as error:
        _answer(connection, error_frame(request_id, domain_error_answer(error)))
    except Exception as error:
        # Lambda refusing the hand-off for a moment (TooManyRequestsException) is a 429
        # with retryAfter, as any dependency's throttling is.
        _answer(connection, error_frame(request_id, unexpected_error_answer(error)))
    return OK


def _answer(connection: Connection, frame: Frame) -> None:
    with suppress(ConnectionGone):  # the client left: no one to tell
        connection.post(frame)


def _close(connection: Connection) -> None:
    """Closed after its 401: a close the management API fails is logged, and the frames
    that follow are refused the same way."""
    try:
        connection.close()
    except Exception:
        logger.exception("closing a connection whose token expired failed")


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    route = event["requestContext"]["routeKey"]
    if route == "$connect":
        return connected(event)
    if route == "$disconnect":
        return OK
    return received(event)


loaded()
