"""What a chat turn costs as its thread grows (``make bench``).

For threads of 10, 100, 1,000 and 5,000 messages of realistic size (550-character user
messages, replies of about the same size), over the embedded store with a model that
answers at once, one measured turn (after enough turns to fill the window) is recorded
request by request on the store's client: when it started and ended (each request is given
``LATENCY_SECONDS`` of network, which moto on loopback all but removes, so requests sent
one after another cannot pass for requests sent together), what it asked and what came
back. From that the table shows requests and sequential round trips before and after the
model, and the request units DynamoDB's published rules charge for those requests and item
sizes (moto's consumed-capacity figures are placeholders):

- writes: ``ceil(item KB)`` WRU per item written (the larger of the item before and after),
  twice that inside a transaction; every index whose entry the write adds, changes or
  removes costs ``ceil(projected KB)`` more, twice when the index key moved (a delete and a
  put);
- reads: ``ceil(item / 4 KB)`` RRU per item read strongly consistent (a missing item
  counts as one), half for eventually consistent; a query sums the sizes it returns, then
  rounds up to 4 KB; a transaction's ``ConditionCheck`` is a transactional read, two RRU
  per 4 KB;
- price: on-demand, us-east-1, ``WRU_PRICE`` and ``RRU_PRICE`` dollars per million units.

``floor`` is what writing the turn's new messages once costs (``ceil(KB)`` each, no
transaction, no index); ``writes/floor`` is how far the turn's writes are above it. Prompt
tokens are estimated at four characters a token, beside the full replay (every message of
the thread sent again). Below the table, each handler module's import time as a ratio to
``import boto3`` alone (the median CPU time of fresh interpreters), with the recall
package as the layer's build ships it: with its bytecode, as boto3 has its own. Prefix
reuse and time to first delta come from ``bench/prompt_cache.py`` when it exists
(``measure(length)`` returning those two cells), else ``—``."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
import importlib
import importlib.util
import json
import sys
import time
from typing import Any
import warnings

import boto3

from bench.import_times import IMPORT_RUNS, import_ratios
from bench.units import Recorder, describe_tables, kb, round_trips, size, units_of
from local import embedded, runtime
from local.seed import grow_thread
from recall.domain.prompt import ModelReply, ModelRequest, Usage
from recall.observability import logger
from recall.settings import get_settings
from recall.store.dynamodb import dynamodb_client
from recall.wiring import model_choice

USER = "bench-user"
LENGTHS = (10, 100, 1000, 5000)
MESSAGE_CHARS = 550
WRU_PRICE = 0.625  # dollars per million write request units, on demand, us-east-1
RRU_PRICE = 0.125  # dollars per million read request units, on demand, us-east-1


def text_of(n: int, chars: int = MESSAGE_CHARS) -> str:
    """Prose-like text of exactly ``chars`` characters."""
    words = f"turn {n}: the header stays dark navy and the menu lists seasonal dishes. "
    return (words * (chars // len(words) + 1))[:chars]


class Model:
    """Answers at once with a reply about as long as the user's message."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []
        self.at: list[float] = []

    def converse(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        self.at.append(time.perf_counter())
        return ModelReply(
            text=text_of(len(self.requests), MESSAGE_CHARS - 20),
            usage=Usage(input_tokens=prompt_tokens(request), output_tokens=130),
        )


def prompt_tokens(request: ModelRequest) -> int:
    chars = sum(len(part) for part in request.system) + sum(
        len(m.text) + len(json.dumps([c.model_dump() for c in m.tool_calls]))
        for m in request.messages
    )
    return chars // 4


def call(method: str, path: str, body: Any = None) -> dict[str, Any]:
    found = runtime.match_route(method, path)
    assert found is not None
    reply: dict[str, Any] = runtime.invoke(
        found[0].function, runtime.http_event(method, path, body=body, sub=USER)
    )
    assert reply["statusCode"] in (200, 201, 204), reply
    return reply


def grow(project: str, thread: str, count: int) -> int:
    """``count`` alternating user messages and replies of realistic size; their characters."""
    messages = grow_thread(
        USER,
        project,
        thread,
        count,
        lambda n: text_of(n, MESSAGE_CHARS if n % 2 == 0 else MESSAGE_CHARS - 20),
    )
    return sum(len(m.content) for m in messages)


@dataclass
class Row:
    length: int
    before: int
    trips_before: int
    after: int
    trips_after: int
    wru: float
    rru: float
    tokens: int
    replay: int
    floor: int

    @property
    def cost(self) -> float:
        """Dollars per million turns."""
        return self.wru * WRU_PRICE + self.rru * RRU_PRICE


def measure(length: int, model: Model, recorder: Recorder, warm_turns: int) -> Row:
    """One thread of ``length`` messages in a project of its own, its window filled by
    ``warm_turns`` turns; then the measured turn, its ``length``-th message. The thread
    is deleted afterwards (moto copies whole tables in every transaction)."""
    project = json.loads(call("POST", "/projects", {"name": f"Bench {length}"})["body"])["id"]
    for key, value in (("tone", "warm, brief"), ("header", "dark navy"), ("currency", "EUR")):
        call(
            "PUT",
            f"/projects/{project}/memories/{key}",
            {"value": value, "category": "preferences"},
        )
    first = json.loads(call("POST", f"/projects/{project}/chat", {"message": text_of(0)})["body"])
    thread = first["conversation"]["id"]
    chars = grow(project, thread, length - 2 * (warm_turns + 2))
    for n in range(warm_turns):
        call("POST", f"/projects/{project}/chat", {"message": text_of(n), "conversationId": thread})
    recorder.sent.clear()
    model.at.clear()
    call("POST", f"/projects/{project}/chat", {"message": text_of(99), "conversationId": thread})
    [at] = model.at
    request = model.requests[-1]
    before = [s for s in recorder.sent if s.started < at]
    after = [s for s in recorder.sent if s.started >= at]
    units = [units_of(s) for s in recorder.sent]
    new_messages = [
        item["Put"]["Item"]
        for s in after
        if s.operation == "TransactWriteItems"
        for item in s.params["TransactItems"]
        if "Put" in item and item["Put"]["TableName"] == get_settings().messages_table
    ]
    system = sum(len(part) for part in request.system) // 4
    thread_chars = chars + (2 * warm_turns + 2) * MESSAGE_CHARS + MESSAGE_CHARS
    call("DELETE", f"/projects/{project}/conversations/{thread}")
    return Row(
        length=length,
        before=len(before),
        trips_before=round_trips(before),
        after=len(after),
        trips_after=round_trips(after),
        wru=sum(u.write for u in units),
        rru=sum(u.read for u in units),
        tokens=prompt_tokens(request),
        replay=system + thread_chars // 4,
        floor=sum(kb(size(item)) for item in new_messages),
    )


def prompt_cache_cells(length: int) -> tuple[str, str]:
    """Prefix reuse and time to first delta, from ``bench/prompt_cache.py`` when present."""
    if importlib.util.find_spec("bench.prompt_cache") is None:
        return "—", "—"
    module = importlib.import_module("bench.prompt_cache")
    cells = getattr(module, "measure", None)
    if cells is None:
        return "—", "—"
    reuse, first = cells(length)
    return str(reuse), str(first)


@contextmanager
def recording(model: Model) -> Iterator[Recorder]:
    raw = boto3.client("dynamodb")
    describe_tables(raw)
    recorder = Recorder(raw)
    events = dynamodb_client().meta.events
    events.register("before-parameter-build.dynamodb", recorder.asked, unique_id="bench-ask")
    events.register("before-call.dynamodb", recorder.started, unique_id="bench-start")
    events.register("after-call.dynamodb", recorder.ended, unique_id="bench-end")
    events.register("before-send.dynamodb", recorder.delay, unique_id="bench-latency")
    model_choice().use(model)
    try:
        yield recorder
    finally:
        model_choice().use(None)
        events.unregister("before-parameter-build.dynamodb", unique_id="bench-ask")
        events.unregister("before-call.dynamodb", unique_id="bench-start")
        events.unregister("after-call.dynamodb", unique_id="bench-end")
        events.unregister("before-send.dynamodb", unique_id="bench-latency")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lengths", type=int, nargs="*", default=list(LENGTHS))
    parser.add_argument("--no-imports", action="store_true", help="skip the import timing")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", "No application metrics")
    logger.setLevel("WARNING")
    window_turns = get_settings().window_messages // 2
    model = Model()
    with embedded.running():
        with recording(model) as recorder:
            rows = [
                measure(length, model, recorder, min(window_turns, (length - 4) // 2))
                for length in args.lengths
            ]
        # Measured on the same store, without the recorder's simulated latency.
        cells = {row.length: prompt_cache_cells(row.length) for row in rows}
    print(
        f"One turn (DynamoDB on demand, us-east-1: ${WRU_PRICE}/M WRU, ${RRU_PRICE}/M RRU;"
        f" {MESSAGE_CHARS}-character messages; tokens ≈ characters / 4)"
    )
    header = (
        "| messages | requests before (round trips) | after (round trips) | WRU | RRU "
        "| $ per M turns | prompt tokens | full replay | floor WRU | writes/floor "
        "| prefix reuse | first delta |"
    )
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for row in rows:
        reuse, first = cells[row.length]
        print(
            f"| {row.length:,} | {row.before} ({row.trips_before}) | {row.after} "
            f"({row.trips_after}) | {row.wru:g} | {row.rru:g} | {row.cost:.2f} "
            f"| {row.tokens:,} | {row.replay:,} | {row.floor} | {row.wru / row.floor:.1f} "
            f"| {reuse} | {first} |"
        )
    if not args.no_imports:
        print()
        print(
            f"Import CPU time, median of {IMPORT_RUNS} rounds of fresh interpreters (a bare"
            " start, import boto3, the handler), less the bare start:"
        )
        print("| module | ms | × import boto3 | × import boto3, collector off |")
        print("|---|---|---|---|")
        for name, seconds, ratio, uncollected in import_ratios():
            label = name if name == "boto3 alone" else f"functions/{name}/app.py"
            print(f"| {label} | {seconds * 1000:.0f} | {ratio:.2f} | {uncollected:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
