"""``make dev``'s data across restarts. moto keeps its tables in memory, so every item of
every template table is written to one JSON file (``LOCAL_DATA_DIR``, ``.local-data`` under
the checkout by default, ignored by git) shortly after a write, and loaded into the fresh
tables when the server starts again.

A write only marks the data changed (a botocore hook on this process's DynamoDB clients,
where every handler, worker and job of ``make dev`` runs); a thread writes the file at most
every ``LOCAL_SNAPSHOT_SECONDS`` (2; longer when a write takes longer, so a large store is
not rescanned back to back), off the request path, to a temporary file renamed over the
last one, so a crash loses at most those last seconds and never leaves half a file.
Stopping the server writes it once more. Queued background jobs are not kept: a job lost to
a restart runs again after the next turn that asks for it.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
import json
import os
from pathlib import Path
import tempfile
import threading
import time
from typing import TYPE_CHECKING, Any

import boto3

from local import template
from recall.store.dynamodb import batch_write

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

SNAPSHOT_FILE = "dynamodb.json"
FORMAT = 1
_WRITES = ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems")


def _plain(value: Any) -> Any:
    """An attribute value as JSON: binary (``B``, ``BS``) as base64 text."""
    if isinstance(value, dict):
        return {key: _plain(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [_plain(inner) for inner in value]
    if isinstance(value, bytes | bytearray):
        return {"$b64": base64.b64encode(value).decode()}
    return value


def _typed(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"$b64"}:
            return base64.b64decode(value["$b64"])
        return {key: _typed(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [_typed(inner) for inner in value]
    return value


def forget(folder: Path) -> None:
    """What ``make dev-reset`` forgets in ``folder``: the snapshot and any left half written.
    Nothing else goes, as ``LOCAL_DATA_DIR`` may name a folder that holds other files."""
    for path in [folder / SNAPSHOT_FILE, *folder.glob("tmp*.tmp")]:
        path.unlink(missing_ok=True)


class Snapshots:
    """The snapshot file of one embedded store, and the thread that keeps it current."""

    def __init__(self, folder: Path, endpoint: str, every_seconds: float) -> None:
        self.path = folder / SNAPSHOT_FILE
        self._folder = folder
        self._every = every_seconds
        self._client: DynamoDBClient = boto3.client("dynamodb", endpoint_url=endpoint)
        self._keys = {
            request["TableName"]: [key["AttributeName"] for key in request["KeySchema"]]
            for request in template.create_table_requests()
        }
        self._tables = list(self._keys)
        self._changed = threading.Event()
        self._stopping = threading.Event()
        self._writing = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="recall-snapshots", daemon=True)

    def restore(self) -> int:
        """Load the last snapshot into the (empty) tables; how many items it held. An item
        without its table's current keys (an idempotency record saved before records were
        kept under their caller's user and project) is left out: it could not be stored."""
        if not self.path.exists():
            return 0
        saved = json.loads(self.path.read_text(encoding="utf-8"))
        if saved.get("format") != FORMAT:
            raise ValueError(f"{self.path} is not a snapshot this version can read")
        return sum(
            batch_write(
                self._client,
                table,
                [
                    {"PutRequest": {"Item": _typed(item)}}
                    for item in items
                    if all(key in item for key in self._keys[table])
                ],
            )
            for table, items in saved["tables"].items()
            if table in self._tables
        )

    def watch(self, *emitters: Any) -> None:
        """Mark the data changed after every write the clients behind ``emitters`` make."""
        for emitter in emitters:
            for operation in _WRITES:
                # botocore keeps one handler per unique id, whatever the event: one each.
                emitter.register(
                    f"after-call.dynamodb.{operation}",
                    self._mark,
                    unique_id=f"recall-snapshot-{operation}",
                )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
        if self._changed.is_set():
            self.write()

    def write(self) -> int:
        """Every item of every table to the file, atomically; how many items."""
        with self._writing:
            self._changed.clear()
            tables = {
                table: [_plain(item) for item in self._items(table)] for table in self._tables
            }
            self._folder.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=self._folder, suffix=".tmp")
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump({"format": FORMAT, "tables": tables}, out, separators=(",", ":"))
            os.replace(temporary, self.path)
            return sum(len(items) for items in tables.values())

    def _items(self, table: str) -> Iterator[dict[str, Any]]:
        for page in self._client.get_paginator("scan").paginate(TableName=table):
            yield from page["Items"]

    def _mark(self, **_: Any) -> None:
        self._changed.set()

    def _run(self) -> None:
        """Write when something changed, waiting at least twice as long as the last write
        took, so a large store is not rescanned back to back while requests go on."""
        pause = self._every
        while not self._stopping.wait(pause):
            if not self._changed.is_set():
                continue
            started = time.monotonic()
            try:
                self.write()
            except Exception as error:  # a failed snapshot must not stop the server
                print(f"snapshot not written: {error}", flush=True)
            pause = max(self._every, 2 * (time.monotonic() - started))
