"""Time to first delta of a streamed turn (``make bench``), against the offline model's
first chunk: what our code adds before the first text reaches the client.

Each measured turn goes through the real WebSocket functions in-process, over the running
embedded store: the ``chat`` frame into the route function, its hand-off run at once (a
deployed hand-off adds Lambda's asynchronous start), the streaming worker loading the
thread, assembling the prompt and asking the offline model, whose first chunk is
timestamped, then the first ``delta`` frame as it is posted. *first delta* is frame in to
that post; *model* is the offline model's share of it (its call to its first chunk), so
the rest is ours: validation, the hand-off, the turn's one batched read and the prompt.
Threads are grown to each length first, so the load is the one a long thread costs. The
ratio is to a whole ``POST /chat`` turn on the same thread (offline model, same store),
which a shared machine's speed moves far less than either number alone."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass
import io
import json
import statistics
import time
from typing import Any
import warnings

from local import embedded, runtime
from local.seed import grow_thread
from local.websocket import function_of, websocket_event
from recall import wiring
from recall.api.stream import Connection, Frame
from recall.domain.prompt import ModelReply, ModelRequest, TextSink
from recall.observability import logger
from recall.providers.offline import OfflineProvider

USER = "bench-stream-user"
TURNS = 7
LENGTHS = (10, 100, 1_000, 5_000)


class TimedModel:
    """The offline model, noting when it was asked and when it handed over its first chunk."""

    def __init__(self) -> None:
        self._inner = OfflineProvider()
        self.asked = 0.0
        self.first_chunk = 0.0

    def converse(self, request: ModelRequest) -> ModelReply:
        return self._inner.converse(request)

    def converse_stream(self, request: ModelRequest, on_text: TextSink) -> ModelReply:
        self.asked = time.perf_counter()
        self.first_chunk = 0.0

        def timed(chunk: str) -> None:
            if not self.first_chunk:
                self.first_chunk = time.perf_counter()
            on_text(chunk)

        return self._inner.converse_stream(request, timed)


class TimedLinks:
    """Frames kept with the moment they were posted; the hand-off runs the worker at once."""

    def __init__(self) -> None:
        self.posted: list[tuple[float, Frame]] = []

    def connection(self, domain: str, stage: str, connection_id: str) -> Connection:
        links = self

        class Timed:
            def post(self, frame: Frame) -> None:
                links.posted.append((time.perf_counter(), frame))

            def close(self) -> None:
                """A streamed turn never closes its connection."""

        return Timed()

    def hand_off(self, payload: dict[str, Any]) -> None:
        runtime.invoke(function_of("ws_stream"), payload)


@dataclass
class FirstDelta:
    length: int
    first_delta_ms: float
    model_ms: float
    http_turn_ms: float

    @property
    def ours_ms(self) -> float:
        return self.first_delta_ms - self.model_ms


def _call(method: str, path: str, body: Any = None) -> dict[str, Any]:
    found = runtime.match_route(method, path)
    assert found is not None, path
    reply: dict[str, Any] = runtime.invoke(
        found[0].function, runtime.http_event(method, path, body=body, sub=USER)
    )
    assert reply["statusCode"] in (200, 201), reply
    answer: dict[str, Any] = json.loads(reply["body"])
    return answer


@contextmanager
def _timed(model: TimedModel, links: TimedLinks) -> Iterator[None]:
    wiring.model_choice().use(model)
    wiring.stream_links().use(links)
    try:
        yield
    finally:
        wiring.model_choice().use(None)
        wiring.stream_links().use(None)


def first_delta(length: int, turns: int = TURNS) -> FirstDelta:
    """The median over ``turns`` streamed turns on a thread of ``length`` messages."""
    project = _call("POST", "/projects", {"name": "Stream bench"})["id"]
    thread = _call("POST", f"/projects/{project}/chat", {"message": "Hello!"})
    conversation = thread["conversation"]["id"]
    grow_thread(USER, project, conversation, max(0, length - 2))
    model, links = TimedModel(), TimedLinks()
    totals: list[float] = []
    models: list[float] = []
    whole: list[float] = []
    with _timed(model, links):
        for n in range(turns + 1):  # the first warms the worker's imports and clients
            frame = {
                "action": "chat",
                "projectId": project,
                "body": {
                    "message": f"What about the header, take {n}?",
                    "conversationId": conversation,
                },
            }
            links.posted.clear()
            event = websocket_event(
                "chat", "MESSAGE", f"bench-{n}", USER, "bench", body=json.dumps(frame)
            )
            sent = time.perf_counter()
            runtime.invoke(function_of("ws_chat"), event)
            at = next(moment for moment, posted in links.posted if posted["type"] == "delta")
            started = time.perf_counter()
            _call("POST", f"/projects/{project}/chat", frame["body"])
            if n:
                totals.append(at - sent)
                models.append(model.first_chunk - model.asked)
                whole.append(time.perf_counter() - started)
    return FirstDelta(
        length,
        statistics.median(totals) * 1000,
        statistics.median(models) * 1000,
        statistics.median(whole) * 1000,
    )


def cell(length: int) -> str:
    """``make bench``'s *first delta* cell for a thread of ``length`` messages."""
    with redirect_stdout(io.StringIO()):
        measured = first_delta(length)
    return (
        f"{measured.first_delta_ms:.0f} ms, {measured.first_delta_ms / measured.http_turn_ms:.2f}"
        " × turn"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=TURNS)
    args = parser.parse_args()
    warnings.filterwarnings("ignore", "No application metrics")
    logger.setLevel("WARNING")
    with embedded.running(), redirect_stdout(io.StringIO()):
        rows = [first_delta(length, args.turns) for length in LENGTHS]
    print(f"Time to first delta, median of {args.turns} streamed turns (offline model):")
    print(
        "| messages | first delta ms | model's first chunk ms | ours ms | HTTP turn ms | × turn |"
    )
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row.length:,} | {row.first_delta_ms:.1f} | {row.model_ms:.1f} "
            f"| {row.ours_ms:.1f} | {row.http_turn_ms:.1f} "
            f"| {row.first_delta_ms / row.http_turn_ms:.2f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
