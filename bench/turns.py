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
import atexit
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
import functools
import importlib
import importlib.util
import json
import math
import os
from pathlib import Path
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any
import warnings

import boto3

from local import embedded, layer, runtime
from local.seed import grow_thread
from recall.domain.prompt import ModelReply, ModelRequest, Usage
from recall.domain.sizes import item_size
from recall.observability import logger
from recall.settings import get_settings
from recall.store.dynamodb import dynamodb_client, from_item
from recall.wiring import model_choice

USER = "bench-user"
LENGTHS = (10, 100, 1000, 5000)
MESSAGE_CHARS = 550
LATENCY_SECONDS = 0.005
WRU_PRICE = 0.625  # dollars per million write request units, on demand, us-east-1
RRU_PRICE = 0.125  # dollars per million read request units, on demand, us-east-1
IMPORT_RUNS = 7
ROOT = Path(__file__).resolve().parent.parent


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


@dataclass
class Sent:
    operation: str
    params: dict[str, Any]
    started: float
    ended: float = 0.0
    parsed: dict[str, Any] = field(default_factory=dict)
    # Items as they were before and after a write, by (table, key), read past the hook.
    before: dict[tuple[str, str], dict[str, Any] | None] = field(default_factory=dict)
    after: dict[tuple[str, str], dict[str, Any] | None] = field(default_factory=dict)


class Recorder:
    """Every request on the store's client, with the items its writes touched."""

    def __init__(self, raw: Any) -> None:
        self.sent: list[Sent] = []
        self._raw = raw
        self._open = threading.local()

    def asked(self, params: dict[str, Any], **kwargs: Any) -> None:
        self._open.params = dict(params)

    def started(self, model: Any, **kwargs: Any) -> None:
        params: dict[str, Any] = self._open.params
        sent = Sent(model.name, params, time.perf_counter())
        for table, key in written_keys(model.name, params):
            sent.before[(table, json.dumps(key, sort_keys=True))] = self._current(table, key)
        self._open.sent = sent
        self.sent.append(sent)

    def ended(self, model: Any, parsed: dict[str, Any], **kwargs: Any) -> None:
        sent: Sent = self._open.sent
        sent.ended = time.perf_counter()
        sent.parsed = parsed
        for table, key in written_keys(model.name, sent.params):
            sent.after[(table, json.dumps(key, sort_keys=True))] = self._current(table, key)

    @staticmethod
    def delay(**kwargs: Any) -> None:
        time.sleep(LATENCY_SECONDS)

    def _current(self, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        found: dict[str, Any] | None = self._raw.get_item(
            TableName=table, Key=key, ConsistentRead=True
        ).get("Item")
        return found


def written_keys(operation: str, params: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The (table, key) of every item a request writes or checks."""
    if operation == "TransactWriteItems":
        found = []
        for action in params["TransactItems"]:
            [body] = action.values()
            key = body.get("Key") or _key_of(body["TableName"], body["Item"])
            found.append((body["TableName"], key))
        return found
    if operation in ("PutItem", "UpdateItem", "DeleteItem"):
        return [
            (params["TableName"], params.get("Key") or _key_of(params["TableName"], params["Item"]))
        ]
    return []


_KEYS: dict[str, list[str]] = {}
_INDEXES: dict[str, list[dict[str, Any]]] = {}


def describe_tables(raw: Any) -> None:
    for table in raw.list_tables()["TableNames"]:
        description = raw.describe_table(TableName=table)["Table"]
        _KEYS[table] = [k["AttributeName"] for k in description["KeySchema"]]
        _INDEXES[table] = description.get("GlobalSecondaryIndexes", []) + description.get(
            "LocalSecondaryIndexes", []
        )


def _key_of(table: str, item: Mapping[str, Any]) -> dict[str, Any]:
    return {name: item[name] for name in _KEYS[table]}


def size(item: Mapping[str, Any] | None) -> int:
    return item_size(from_item(item)) if item else 0


def kb(n: int) -> int:
    return max(1, math.ceil(n / 1024))


def four_kb(n: int) -> int:
    return max(1, math.ceil(n / 4096))


def projected(table: str, index: Mapping[str, Any], item: dict[str, Any] | None) -> int:
    """The size of an item's entry in an index, by the index's projection."""
    if item is None:
        return 0
    kind = index["Projection"]["ProjectionType"]
    if kind == "ALL":
        return size(item)
    keep = {k["AttributeName"] for k in index["KeySchema"]} | set(_KEYS[table])
    if kind == "INCLUDE":
        keep |= set(index["Projection"].get("NonKeyAttributes", []))
    return size({k: v for k, v in item.items() if k in keep})


def index_units(table: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> int:
    """Write units of the table's indexes for one item going from ``before`` to ``after``."""
    units = 0
    for index in _INDEXES.get(table, []):
        names = [k["AttributeName"] for k in index["KeySchema"]]
        had = before is not None and all(n in before for n in names)
        has = after is not None and all(n in after for n in names)
        if not had and not has:
            continue

        if had and has:
            assert before is not None and after is not None
            if any(before[n] != after[n] for n in names):
                units += kb(projected(table, index, before)) + kb(projected(table, index, after))
            elif (
                projected(table, index, before) != projected(table, index, after) or before != after
            ):
                units += kb(max(projected(table, index, before), projected(table, index, after)))
        else:
            units += kb(max(projected(table, index, before), projected(table, index, after)))
    return units


@dataclass
class Units:
    read: float = 0.0
    write: float = 0.0


def units_of(sent: Sent) -> Units:
    units = Units()
    op, params, parsed = sent.operation, sent.params, sent.parsed
    if op == "BatchGetItem":
        for table, asked in params["RequestItems"].items():
            factor = 1.0 if asked.get("ConsistentRead") else 0.5
            got = {
                json.dumps(_key_of(table, item), sort_keys=True): item
                for item in parsed.get("Responses", {}).get(table, [])
            }
            for key in asked["Keys"]:
                units.read += factor * four_kb(size(got.get(json.dumps(key, sort_keys=True))))
    elif op in ("Query", "Scan"):
        factor = 1.0 if params.get("ConsistentRead") else 0.5
        units.read += factor * four_kb(sum(size(item) for item in parsed.get("Items", [])))
    elif op == "GetItem":
        factor = 1.0 if params.get("ConsistentRead") else 0.5
        units.read += factor * four_kb(size(parsed.get("Item")))
    elif op == "TransactWriteItems":
        for action in params["TransactItems"]:
            [(kind, body)] = action.items()
            table = body["TableName"]
            key = json.dumps(body.get("Key") or _key_of(table, body["Item"]), sort_keys=True)
            before, after = sent.before[(table, key)], sent.after[(table, key)]
            if kind == "ConditionCheck":
                units.read += 2 * four_kb(size(before))
            else:
                units.write += 2 * kb(max(size(before), size(after)))
                units.write += index_units(table, before, after)
    elif op in ("PutItem", "UpdateItem", "DeleteItem"):
        for (table, _), before in sent.before.items():
            after = next(iter(sent.after.values()))
            units.write += kb(max(size(before), size(after))) + index_units(table, before, after)
    return units


def round_trips(sent: list[Sent]) -> int:
    """Requests in sequence: one that starts after one of its round trip's requests has
    ended waited for it, so it starts the next round trip."""
    trips: list[list[Sent]] = []
    for request in sorted(sent, key=lambda s: s.started):
        if trips and all(request.started < other.ended for other in trips[-1]):
            trips[-1].append(request)
        else:
            trips.append([request])
    return len(trips)


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


@functools.cache
def deployed_layer() -> Path:
    """The recall package as ``layers/recall/Makefile`` builds it for the layer, compiled by
    this interpreter: deployed, a code folder is read-only, so without its bytecode every
    cold start compiles each module again (and so did every run here, under
    ``PYTHONDONTWRITEBYTECODE``)."""
    built = Path(tempfile.mkdtemp(prefix="recall-layer-"))
    atexit.register(shutil.rmtree, built, ignore_errors=True)
    return layer.build(built)


def import_seconds(code: str) -> float:
    """The median CPU time (user and system) of fresh interpreters running ``code``: on a
    shared machine it varies far less than wall time, and an import is nearly all CPU."""
    return statistics.median(cpu_seconds(code) for _ in range(IMPORT_RUNS))


def cpu_seconds(code: str) -> float:
    """One fresh interpreter's CPU time running ``code``, over the layer as it ships."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(deployed_layer()), str(ROOT)]),
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_LAMBDA_FUNCTION_NAME": "bench",
    }
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    # Our own interpreter on our own code: nothing untrusted reaches the command.
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=ROOT)  # noqa: S603
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


# `import boto3` with the collector off, as a handler imports it (recall/cold_start.py).
BOTO3_UNCOLLECTED = "import gc; gc.disable(); import boto3"


def import_ratios() -> list[tuple[str, float, float, float]]:
    """Each handler module's import time, and its ratio to ``import boto3`` alone, both
    less the bare interpreter's start. Each of ``IMPORT_RUNS`` rounds runs a bare start,
    ``import boto3`` and the handler back to back, and the ratio is the median of the
    rounds' own: this machine's speed drifts within a run, and a boto3 timed once, minutes
    before a handler, carried that drift into the handler's ratio. A handler imports with
    the collector off, boto3 included, so the last figure is the ratio to an ``import
    boto3`` with the collector off too: how much of the gain is not the collector's part
    of boto3's own import."""
    rows = []
    boto_seconds: list[float] = []
    uncollected_seconds: list[float] = []
    for app in sorted((ROOT / "functions").glob("*/app.py")):
        code = f"import sys; sys.path.insert(0, {str(app.parent)!r}); import app"
        seconds, ratios, uncollected_ratios = [], [], []
        for _ in range(IMPORT_RUNS):
            bare = cpu_seconds("pass")
            boto = cpu_seconds("import boto3") - bare
            uncollected = cpu_seconds(BOTO3_UNCOLLECTED) - bare
            own = cpu_seconds(code) - bare
            boto_seconds.append(boto)
            uncollected_seconds.append(uncollected)
            seconds.append(own)
            ratios.append(own / boto)
            uncollected_ratios.append(own / uncollected)
        rows.append(
            (
                app.parent.name,
                statistics.median(seconds),
                statistics.median(ratios),
                statistics.median(uncollected_ratios),
            )
        )
    boto = statistics.median(boto_seconds)
    rows.insert(0, ("boto3 alone", boto, 1.0, boto / statistics.median(uncollected_seconds)))
    return rows


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
