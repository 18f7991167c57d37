"""The streaming worker: one chat turn handed off by the WebSocket ``chat`` route (an
asynchronous invocation, so it runs past API Gateway's 29-second limit), its frames
posted back to the client as the turn runs. A client that left does not stop the turn:
it is saved, once, like any other."""

from __future__ import annotations

import gc

# Until recall.cold_start.loaded(), below: no collection while the module loads.
gc.disable()

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from recall.api.chat import turn_deadline
from recall.api.stream import ChatFrame, stream_turn
from recall.cold_start import loaded
from recall.domain.access import Role
from recall.observability import logger, metrics, tracer
from recall.settings import get_settings
from recall.wiring import chat_service, project_access, stream_links


class HandOff(BaseModel):
    """What the ``chat`` route hands over: where to post, as whom, and the valid frame."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    domain_name: str
    stage: str
    connection_id: str
    user: str
    frame: ChatFrame


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    hand_off = HandOff.model_validate(event)
    user_id, frame, body = hand_off.user, hand_off.frame, hand_off.frame.body
    # A streamed turn may outlast API Gateway's 30 s: only this function's time bounds it.
    deadline = turn_deadline(get_settings(), context, None)
    streamed = stream_turn(
        get_settings(),
        context,
        user_id,
        frame,
        stream_links().connection(hand_off.domain_name, hand_off.stage, hand_off.connection_id),
        lambda listener: chat_service().turn(
            user_id,
            frame.project_id,
            body.message,
            body.conversation_id,
            body.model,
            listener,
            preset_id=body.preset_id,
            deadline=deadline,
        ),
        lambda: project_access().require(user_id, frame.project_id, Role.EDITOR),
    )
    logger.info("streamed turn answered", extra={"client_left": streamed.gone})
    return {"clientLeft": streamed.gone}


loaded()
