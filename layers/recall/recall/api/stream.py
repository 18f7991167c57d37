"""The WebSocket chat contract: the ``chat`` frame a client sends, the frames a streamed
turn sends back (``start``, ``delta``, ``tool``, then ``done`` or ``error``), and the turn
itself, answered once per idempotency key exactly as ``POST /projects/{projectId}/chat``
answers it: ``done`` carries the HTTP reply's body, ``error`` the HTTP error body."""

from __future__ import annotations

from collections.abc import Callable
import json
import math
import re
import time
from typing import TYPE_CHECKING, Any, Literal, Protocol

from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import Field, ValidationError

from recall.api.bodies import MAX_JSON_DEPTH, json_depth, read_json, top_level_string
from recall.api.chat import ChatReply, ChatRequest, answer_once, recorded, replayed
from recall.api.errors import (
    ErrorAnswer,
    domain_error_answer,
    error_answer,
    field_details,
    unexpected_error_answer,
)
from recall.api.models import Body
from recall.domain.conversations import Conversation
from recall.domain.turn_events import ToolOutcome, TurnListener
from recall.errors import DomainError, Forbidden, Invalid, TooLarge, Unauthenticated
from recall.observability import logger
from recall.settings import Settings
from recall.store.keys import fits_id, fits_user_id

if TYPE_CHECKING:
    from recall.services.chat import TurnOutcome

REQUEST_ID = r"^[A-Za-z0-9_-]{1,64}$"

Frame = dict[str, Any]


class ChatFrame(Body):
    """What a client sends to run a turn: the HTTP route's body, its path's project and
    its ``Idempotency-Key`` header, in one frame."""

    action: Literal["chat"]
    request_id: str | None = Field(default=None, pattern=REQUEST_ID)
    project_id: str
    idempotency_key: str | None = None
    body: ChatRequest


class FrameRefused(Exception):
    """A frame the turn never starts for; ``frame`` is the ``error`` frame that says why."""

    def __init__(self, frame: Frame) -> None:
        super().__init__(frame["body"]["error"]["message"])
        self.frame = frame


def _valid_id(found: Any) -> str | None:
    return found if isinstance(found, str) and re.fullmatch(REQUEST_ID, found) else None


def _request_id_of(document: Any) -> str | None:
    """The frame's ``requestId`` when it is a valid one, so even a refusal carries it."""
    return _valid_id(document.get("requestId") if isinstance(document, dict) else None)


def _unread(text: str, answer: ErrorAnswer) -> FrameRefused:
    """The refusal of a frame that cannot be read whole (too large, too deep, not JSON): it
    still carries the ``requestId`` its top level names, so the client can match it."""
    return FrameRefused(error_frame(_valid_id(top_level_string(text, "requestId")), answer))


def read_frame(text: str | None, max_bytes: int) -> ChatFrame:
    """A ``chat`` frame, or `FrameRefused` with the status and body the HTTP route would
    answer for such a body: 413 too large, 400 not JSON, 422 invalid fields, 403 for a
    project id no project can have. Each carries the frame's ``requestId`` when it has a
    valid one."""
    text = text or ""
    if len(text.encode("utf-8", "surrogatepass")) > max_bytes:
        raise _unread(
            text, error_answer(413, TooLarge.code, f"The frame is over {max_bytes} bytes.")
        )
    if json_depth(text) > MAX_JSON_DEPTH:
        raise _unread(
            text,
            error_answer(
                400, "malformed_json", f"The frame nests more than {MAX_JSON_DEPTH} levels deep."
            ),
        )
    not_json = error_answer(400, "malformed_json", "The frame is not valid JSON.")
    try:
        document = read_json(text)
    except ValueError:  # a number past Python's digits too
        raise _unread(text, not_json) from None
    request_id = _request_id_of(document)
    try:  # a lone surrogate (half a pasted emoji) parses, but is no text to store
        json.dumps(document, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise FrameRefused(error_frame(request_id, not_json)) from None
    try:
        frame = ChatFrame.model_validate(document)
    except ValidationError as invalid:
        raise FrameRefused(
            error_frame(
                request_id,
                error_answer(
                    422,
                    Invalid.code,
                    "Some fields are not valid.",
                    field_details([dict(error) for error in invalid.errors()]),
                ),
            )
        ) from None
    if not fits_id(frame.project_id):
        raise FrameRefused(
            error_frame(
                request_id,
                domain_error_answer(Forbidden("You have no role on this project.")),
            )
        )
    return frame


def request_id_in(text: str | None, max_bytes: int) -> str | None:
    """The frame's ``requestId`` when it has a valid one, whether or not the frame is: a
    frame refused before it is read (its token expired) still names its request."""
    try:
        return read_frame(text, max_bytes).request_id
    except FrameRefused as refused:
        found: str | None = refused.frame["requestId"]
        return found


def caller_of(authorizer: dict[str, Any] | None, now: float) -> str:
    """The ``sub`` the $connect authorizer verified and API Gateway keeps on every later
    frame of the connection; never a user id from a frame. From the token's ``exp``, kept
    beside it, the connection acts for no one, as the HTTP API refuses an expired token;
    one that cannot be read is past. Only ``make dev``'s unsigned demo tokens carry no
    ``exp``, and their connections none: the deployed authorizer requires and keeps it."""
    found = authorizer or {}
    subject = found.get("sub")
    if not isinstance(subject, str) or not subject.strip():
        raise Unauthenticated("Sign in: the connection carries no identity.")
    if not fits_user_id(subject):
        raise Unauthenticated("The token's subject is not one this API can serve.")
    if "exp" in found and not now < _seconds(found["exp"]):
        raise Unauthenticated("The token has expired: connect again with a new one.")
    return subject


def _seconds(value: Any) -> float:
    """A time API Gateway handed on, as text or a number; what is neither is long past."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return -math.inf
    try:
        return float(value)
    except (ValueError, OverflowError):
        return -math.inf


# --- Frames the server sends -------------------------------------------------------------


def error_frame(request_id: str | None, answer: ErrorAnswer) -> Frame:
    """The ``error`` frame for what HTTP would answer: its status, its body and, when it
    says when to try again, ``retryAfter`` seconds."""
    frame: Frame = {
        "type": "error",
        "requestId": request_id,
        "status": answer.status,
        "body": answer.body,
    }
    if answer.retry_after is not None:
        frame["retryAfter"] = answer.retry_after
    return frame


def done_frame(request_id: str | None, reply: ChatReply) -> Frame:
    return {
        "type": "done",
        "requestId": request_id,
        "status": 200,
        "body": reply.model_dump(by_alias=True, mode="json"),
    }


class ConnectionGone(Exception):
    """The client left: API Gateway's management API answered 410 Gone."""


class Connection(Protocol):
    def post(self, frame: Frame) -> None:
        """Send one frame; raises `ConnectionGone` once the client has left."""

    def close(self) -> None:
        """End the connection from the server's side; nothing when the client has left."""


class StreamedTurn:
    """Hears a turn and posts its frames. Text is batched: the first chunk goes out at
    once, later ones once ``min_chars`` have gathered or the oldest waited ``max_seconds``,
    and before any other frame. Once the client is gone nothing more is posted, and the
    turn runs on to its save."""

    def __init__(
        self,
        connection: Connection,
        request_id: str | None,
        min_chars: int,
        max_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._connection = connection
        self._request_id = request_id
        self._min_chars = min_chars
        self._max_seconds = max_seconds
        self._clock = clock
        self._pending: list[str] = []
        self._pending_since = 0.0
        self._sent_text = False
        self.gone = False

    def started(self, conversation: Conversation, created: bool) -> None:
        self._send(
            {
                "type": "start",
                "requestId": self._request_id,
                "conversation": {
                    "id": conversation.conversation_id,
                    "title": conversation.title,
                    "created": created,
                },
            }
        )

    def text(self, chunk: str) -> None:
        if not chunk:
            return
        if not self._pending:
            self._pending_since = self._clock()
        self._pending.append(chunk)
        waited = self._clock() - self._pending_since
        if (
            not self._sent_text
            or sum(len(part) for part in self._pending) >= self._min_chars
            or waited >= self._max_seconds
        ):
            self.flush()

    def tool(self, name: str, key: str | None, outcome: ToolOutcome) -> None:
        self.flush()
        self._send(
            {
                "type": "tool",
                "requestId": self._request_id,
                "tool": name,
                "key": key,
                "outcome": outcome,
            }
        )

    def flush(self) -> None:
        if not self._pending:
            return
        text = "".join(self._pending)
        self._pending = []
        self._sent_text = True
        self._send({"type": "delta", "requestId": self._request_id, "text": text})

    def finish(self, frame: Frame) -> None:
        """The last frame, after any text still waiting."""
        self.flush()
        self._send(frame)

    def _send(self, frame: Frame) -> None:
        if self.gone:
            return
        try:
            self._connection.post(frame)
        except ConnectionGone:
            self.gone = True
            logger.info("client left mid-reply; the turn goes on to its save")
        except Exception:  # a post that fails must not cost the turn: stop posting
            self.gone = True
            logger.exception("posting a frame failed; the turn goes on to its save")


def stream_turn(
    settings: Settings,
    context: LambdaContext | None,
    user_id: str,
    frame: ChatFrame,
    connection: Connection,
    turn: Callable[[TurnListener], TurnOutcome],
    authorise: Callable[[], object],
) -> StreamedTurn:
    """Run ``turn`` for ``frame`` once per idempotency key, as the HTTP route runs it,
    streaming it to ``connection``: a retried frame replays the first answer as ``done``
    (or its ``error``) without running the turn again."""
    streamed = StreamedTurn(
        connection,
        frame.request_id,
        settings.stream_delta_min_chars,
        settings.stream_delta_max_seconds,
    )
    try:
        answer = answer_once(
            settings,
            context,
            frame.idempotency_key,
            {"user": user_id, "project": frame.project_id},
            frame.body.model_dump(mode="json"),
            lambda: recorded(lambda: turn(streamed)),
            authorise,
        )
        reply = replayed(answer)
    except DomainError as error:
        streamed.finish(error_frame(frame.request_id, domain_error_answer(error)))
    except Exception as error:
        streamed.finish(error_frame(frame.request_id, unexpected_error_answer(error)))
    else:
        streamed.finish(done_frame(frame.request_id, reply))
    return streamed
