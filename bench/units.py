"""What DynamoDB bills for requests the bench records: every request on the store's client,
with the items its writes touched (``Recorder``), priced by DynamoDB's published rules
(``units_of``: see ``bench/turns.py``), and how many sequential round trips they took."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
import json
import math
import threading
import time
from typing import Any

from local import runtime  # noqa: F401  (puts the layer, and so ``recall``, on sys.path)
from recall.domain.sizes import item_size
from recall.store.dynamodb import from_item

# Network each request is given, which moto on loopback all but removes, so requests sent
# one after another cannot pass for requests sent together.
LATENCY_SECONDS = 0.005


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
