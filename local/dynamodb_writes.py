"""The embedded DynamoDB writing the way DynamoDB does: a transaction isolated, undone
item by item, and costing what it names, not what the store holds.

moto backs up every table a ``TransactWriteItems`` names with a deep copy before it starts,
so one turn's transaction took time in proportion to everything ``make dev`` (or a test
run's shared store) had written: a second per turn at 30,000 items. Its rollback then put
the whole copy back, dropping what other requests wrote meanwhile. Here the tables are not
copied: a transaction keeps a copy of only the items it names and puts back only those when
it fails, and every write runs under one lock, so none lands between a transaction's change
and its put-back (which would undo it): the isolation DynamoDB gives a transaction. Reads
take the same lock, so none sees a transaction half done (DynamoDB never shows a write of
a transaction that fails) and none walks a table while a write changes it under moto.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
import copy
import threading
from types import SimpleNamespace
from typing import Any

from moto.dynamodb import models
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import Item
from moto.dynamodb.models.table import Table

_STORE = threading.RLock()
_INSTALLED = "_recall_writes_installed"

Named = dict[tuple[str, str], tuple[dict[str, Any], Item | None]]


def _deepcopy(value: Any, memo: dict[int, Any] | None = None) -> Any:
    """moto's own deep copy, except of a whole table (its transaction backup): the items a
    transaction names are kept by ``transact_write_items`` below instead."""
    return value if isinstance(value, Table) else copy.deepcopy(value, memo)


def _key_of(backend: DynamoDBBackend, action: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    [(kind, body)] = action.items()
    table = backend.get_table(body["TableName"])
    if kind != "Put":
        return body["TableName"], body["Key"]
    names = [table.hash_key_attr] + ([table.range_key_attr] if table.range_key_attr else [])
    return body["TableName"], {name: body["Item"][name] for name in names}


def _named(backend: DynamoDBBackend, actions: Iterable[dict[str, Any]]) -> Named:
    """A copy of each item the transaction names as it is before (``None``: absent). An
    action moto will refuse (no such table, a malformed key) is left for moto to refuse."""
    kept: Named = {}
    for action in actions:
        try:
            table_name, key = _key_of(backend, action)
            before = backend.get_item(table_name, key)
        except Exception:  # noqa: S112 - moto refuses it as DynamoDB would, when it runs
            continue
        kept[(table_name, repr(sorted(key.items())))] = (
            key,
            copy.deepcopy(before) if before is not None else None,
        )
    return kept


def _put_back(backend: DynamoDBBackend, kept: Named) -> None:
    for (table_name, _), (key, before) in kept.items():
        if before is None:
            backend.delete_item(table_name, key)
        else:
            backend.put_item(table_name, before.to_json()["Attributes"])


def _one_at_a_time(request: Callable[..., Any]) -> Callable[..., Any]:
    def locked(*args: Any, **kwargs: Any) -> Any:
        with _STORE:
            return request(*args, **kwargs)

    return locked


def install() -> None:
    """Patch moto's DynamoDB backend in this process (once; later calls do nothing)."""
    if getattr(DynamoDBBackend, _INSTALLED, False):
        return
    transact = DynamoDBBackend.transact_write_items

    def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
        with _STORE:
            kept = _named(self, transact_items)
            try:
                transact(self, transact_items)
            except Exception:
                _put_back(self, kept)
                raise

    models.copy = SimpleNamespace(deepcopy=_deepcopy)  # type: ignore[attr-defined,assignment]
    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    for name in ("put_item", "update_item", "delete_item", "get_item", "query", "scan"):
        setattr(DynamoDBBackend, name, _one_at_a_time(getattr(DynamoDBBackend, name)))
    setattr(DynamoDBBackend, _INSTALLED, True)
