"""The Imports table: each import's progress and the chunks the worker writes, under
``owner = <userId>#<projectId>``: ``I#<importId>`` is the progress item and
``I#<importId>#C#<number>`` each chunk (a JSON body well under the 400 KB item limit).
A done import's chunks are deleted once it is done (``drop_chunks``): they hold the
imported text, which must not outlive the threads a user deletes. Both carry a ``ttl``
(IMPORT_TTL_DAYS), so what is left of any import, done or not, goes after it.

A chunk is counted once, by number, in the progress item's ``doneChunks`` set: a chunk
delivered twice writes its (deterministic) items again but moves no counter twice."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError
from pydantic import Field

from recall.domain import clock
from recall.domain.import_chunks import Chunk
from recall.domain.imports import ImportProgress, ImportStatus
from recall.errors import Conflict
from recall.settings import Settings
from recall.store.dynamodb import (
    Item,
    StoredItem,
    batch_delete,
    batch_write,
    delete_found,
    dynamodb_client,
    from_item,
    to_item,
    to_value,
    translate,
)
from recall.store.keys import owner_key

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# Errors kept on the progress item: enough to act on, never enough to fill the item.
ERRORS_KEPT = 50


def progress_sk(import_id: str) -> str:
    return f"I#{import_id}"


def chunk_sk(import_id: str, number: int) -> str:
    return f"{progress_sk(import_id)}#C#{number:06d}"


def import_key(user_id: str, project_id: str, sk: str) -> Item:
    return to_item({"owner": owner_key(user_id, project_id), "sk": sk})


class ProgressItem(StoredItem, ImportProgress):
    """An import's progress as stored: the chunks counted are the number set
    ``doneChunks`` that each chunk's update adds to, so ``chunksDone`` and ``counted``
    are read from it, never stored."""

    owner: str
    sk: str
    chunks_done: int = Field(default=0, exclude=True)
    counted: frozenset[int] = Field(default=frozenset(), exclude=True)
    done_chunks: set[int] = Field(default_factory=set)
    ttl: int

    def progress(self) -> ImportProgress:
        return ImportProgress.model_validate(
            {
                **self.model_dump(include=set(ImportProgress.model_fields)),
                "chunks_done": len(self.done_chunks),
                "counted": frozenset(self.done_chunks),
            }
        )


class ImportStore:
    def __init__(self, settings: Settings, client: DynamoDBClient | None = None) -> None:
        self._table = settings.imports_table
        self._client = client
        self._keep = timedelta(days=settings.import_ttl_days)
        self._batch_size = settings.delete_batch_size

    @property
    def client(self) -> DynamoDBClient:
        return self._client or dynamodb_client()

    def _ttl(self, now: datetime) -> int:
        return int((now + self._keep).timestamp())

    def start(
        self, progress: ImportProgress, chunks: list[Chunk], now: datetime
    ) -> tuple[ImportProgress, bool]:
        """Save the chunks, then the progress item if the import is new or had failed:
        ``(progress, created)``. The same document again finds the import it started, or
        starts a failed one over (every write of a chunk is of a derived id, so what the
        failed run wrote is written again, never twice)."""
        owner = owner_key(progress.user_id, progress.project_id)
        ttl = self._ttl(now)
        batch_write(
            self.client,
            self._table,
            [
                {
                    "PutRequest": {
                        "Item": to_item(
                            {
                                "owner": owner,
                                "sk": chunk_sk(progress.import_id, chunk.number),
                                "body": chunk.model_dump_json(),
                                "ttl": ttl,
                            }
                        )
                    }
                }
                for chunk in chunks
            ],
        )
        values = progress.model_dump(exclude={"chunks_done", "counted", "errors"})
        stored = ProgressItem.model_validate(
            {**values, "owner": owner, "sk": progress_sk(progress.import_id), "ttl": ttl}
        )
        # Under the names the updates use; no chunk is done yet (DynamoDB holds no empty set).
        item = to_item(stored.model_dump(by_alias=True, exclude={"done_chunks"}))
        try:
            self.client.put_item(
                TableName=self._table,
                Item=item,
                ConditionExpression="attribute_not_exists(#sk) OR #status = :failed",
                ExpressionAttributeNames={"#sk": "sk", "#status": "status"},
                ExpressionAttributeValues={":failed": to_value(ImportStatus.FAILED.value)},
            )
        except ClientError as exc:
            if not isinstance(translate(exc), Conflict):
                raise translate(exc) from exc
            found = self.progress(progress.user_id, progress.project_id, progress.import_id)
            if found is None:  # its TTL ran out between the two calls: start it again
                return self.start(progress, chunks, now)
            return found, False
        return progress, True

    def progress(self, user_id: str, project_id: str, import_id: str) -> ImportProgress | None:
        item = self.client.get_item(
            TableName=self._table,
            Key=import_key(user_id, project_id, progress_sk(import_id)),
            ConsistentRead=True,
        ).get("Item")
        return ProgressItem.model_validate(from_item(item)).progress() if item else None

    def chunk(self, user_id: str, project_id: str, import_id: str, number: int) -> Chunk | None:
        item = self.client.get_item(
            TableName=self._table,
            Key=import_key(user_id, project_id, chunk_sk(import_id, number)),
            ConsistentRead=True,
        ).get("Item")
        return Chunk.model_validate_json(from_item(item)["body"]) if item else None

    def chunk_done(
        self,
        progress: ImportProgress,
        chunk: Chunk,
        memories_done: int,
        presets_done: int,
        errors: list[str],
        now: datetime,
    ) -> ImportProgress | None:
        """Count a written chunk once; ``None`` when it was counted already. Once every
        chunk is counted, ``finish`` says the import is done."""
        names = {
            "#done": "doneChunks",
            "#threads": "threadsDone",
            "#messages": "messagesDone",
            "#memories": "memoriesDone",
            "#presets": "presetsDone",
            "#status": "status",
            "#updatedAt": "updatedAt",
            "#errors": "errors",
        }
        values: dict[str, Any] = {
            ":number": {"NS": [str(chunk.number)]},
            ":n": to_value(chunk.number),
            ":threads": to_value(chunk.thread_count()),
            ":messages": to_value(chunk.message_count()),
            ":memories": to_value(memories_done),
            ":presets": to_value(presets_done),
            ":running": to_value(ImportStatus.RUNNING.value),
            ":now": to_value(clock.stamp(now)),
            ":errors": to_value(errors[:ERRORS_KEPT]),
            ":none": to_value([]),
        }
        try:
            result = self.client.update_item(
                TableName=self._table,
                Key=import_key(
                    progress.user_id, progress.project_id, progress_sk(progress.import_id)
                ),
                UpdateExpression=(
                    "ADD #done :number, #threads :threads, #messages :messages,"
                    " #memories :memories, #presets :presets"
                    " SET #status = :running, #updatedAt = :now,"
                    " #errors = list_append(if_not_exists(#errors, :none), :errors)"
                ),
                ConditionExpression="attribute_exists(#status) AND NOT contains(#done, :n)",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if isinstance(translate(exc), Conflict):
                return None
            raise translate(exc) from exc
        return ProgressItem.model_validate(from_item(result["Attributes"])).progress()

    def drop_chunks(self, progress: ImportProgress, numbers: Iterable[int]) -> int:
        """Delete these chunks of the import, by key (no read), in batches: the count
        sent. A chunk already gone counts too; DynamoDB deletes nothing then."""
        keys = [
            import_key(progress.user_id, progress.project_id, chunk_sk(progress.import_id, n))
            for n in numbers
        ]
        return batch_delete(self.client, self._table, keys, self._batch_size)

    def take_up(self, progress: ImportProgress, now: datetime) -> bool:
        """Move a stalled import's ``updatedAt`` to now, on condition nobody moved it
        since it was read: of two requests taking it up at once, one queues its chunk."""
        try:
            self.client.update_item(
                TableName=self._table,
                Key=import_key(
                    progress.user_id, progress.project_id, progress_sk(progress.import_id)
                ),
                UpdateExpression="SET #updatedAt = :now",
                ConditionExpression="#updatedAt = :seen AND #status IN (:queued, :running)",
                ExpressionAttributeNames={"#updatedAt": "updatedAt", "#status": "status"},
                ExpressionAttributeValues={
                    ":now": to_value(clock.stamp(now)),
                    ":seen": to_value(progress.updated_at),
                    ":queued": to_value(ImportStatus.QUEUED.value),
                    ":running": to_value(ImportStatus.RUNNING.value),
                },
            )
        except ClientError as exc:
            if isinstance(translate(exc), Conflict):
                return False
            raise translate(exc) from exc
        return True

    def fail(self, progress: ImportProgress, error: str, now: datetime) -> bool:
        """Stop an import that cannot go on, saying why; ``False`` when it is not running
        any more. One erased meanwhile stays gone (an update would otherwise write its
        progress item again), and one a twin run of its last chunk finished stays done."""
        try:
            self.client.update_item(
                TableName=self._table,
                Key=import_key(
                    progress.user_id, progress.project_id, progress_sk(progress.import_id)
                ),
                UpdateExpression=(
                    "SET #status = :failed, #updatedAt = :now,"
                    " #errors = list_append(if_not_exists(#errors, :none), :error)"
                ),
                ConditionExpression="#status IN (:queued, :running)",
                ExpressionAttributeNames={
                    "#status": "status",
                    "#updatedAt": "updatedAt",
                    "#errors": "errors",
                },
                ExpressionAttributeValues={
                    ":failed": to_value(ImportStatus.FAILED.value),
                    ":queued": to_value(ImportStatus.QUEUED.value),
                    ":running": to_value(ImportStatus.RUNNING.value),
                    ":now": to_value(clock.stamp(now)),
                    ":error": to_value([error]),
                    ":none": to_value([]),
                },
            )
        except ClientError as exc:
            if not isinstance(translate(exc), Conflict):
                raise translate(exc) from exc
            return False
        return True

    def finish(self, progress: ImportProgress, now: datetime) -> ImportProgress:
        """Say ``done`` of an import whose every chunk is counted."""
        self._set_status(progress, ImportStatus.DONE, now)
        return progress.model_copy(
            update={"status": ImportStatus.DONE, "updated_at": clock.stamp(now)}
        )

    def _set_status(self, progress: ImportProgress, status: ImportStatus, now: datetime) -> None:
        self.client.update_item(
            TableName=self._table,
            Key=import_key(progress.user_id, progress.project_id, progress_sk(progress.import_id)),
            UpdateExpression="SET #status = :status, #updatedAt = :now",
            ExpressionAttributeNames={"#status": "status", "#updatedAt": "updatedAt"},
            ExpressionAttributeValues={
                ":status": to_value(status.value),
                ":now": to_value(clock.stamp(now)),
            },
        )

    def thread_ids(self, user_id: str, project_id: str) -> set[str]:
        """Every thread the caller's kept chunks write to: an import stopped part-way has
        messages whose thread item a later chunk would have created, and an erasure finds
        them only through here."""
        found: set[str] = set()
        query = self._owned(user_id, project_id)
        for page in self.client.get_paginator("query").paginate(**query):
            for item in page["Items"]:
                values = from_item(item)
                if "body" in values:
                    chunk = Chunk.model_validate_json(values["body"])
                    found.update(part.conversation_id for part in chunk.parts)
        return found

    def erase(self, user_id: str, project_id: str, max_items: int) -> int:
        """Delete up to ``max_items`` of the caller's progress and chunk items in the
        project; fewer means none are left."""
        query = self._owned(user_id, project_id)
        return delete_found(self.client, query, ("owner", "sk"), max_items, self._batch_size)

    def _owned(self, user_id: str, project_id: str) -> dict[str, Any]:
        """A Query for every item of the caller's imports in the project."""
        return {
            "TableName": self._table,
            "KeyConditionExpression": "#owner = :owner",
            "ExpressionAttributeNames": {"#owner": "owner"},
            "ExpressionAttributeValues": {":owner": to_value(owner_key(user_id, project_id))},
            "ConsistentRead": True,
        }
