"""The Memories table's writes of one entry, apart from the reads and batch writes
(``store/memories.py``): the flow of each change (read the entry, send the one
transaction ``memory_transactions`` builds for it, and on a refusal re-read and retry under
``recall.retry``'s policy, give way to an explicit entry, or make room), and the expiry of
one entry.

The cap. An expired entry still holds its slot until it is deleted, so when a write hits
the cap the store first expires what is past its time (and repairs a counter that
DynamoDB's TTL left behind), then tries once more: a user never meets a cap made of
entries they cannot see. Background writes may replace an expired explicit entry: it is
gone for every reader already.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from recall.domain.memory import (
    BACKGROUND_SOURCES,
    MemoryEntry,
    Source,
    is_active,
)
from recall.errors import Conflict, Forbidden, NotFound
from recall.observability import logger
from recall.retry import attempts
from recall.settings import Settings
from recall.store.dynamodb import (
    Item,
    cancellation_codes,
    collided,
    dynamodb_client,
    from_item,
    to_value,
    translate,
)
from recall.store.keys import owner_key
from recall.store.memory_items import (
    EntryItem,
    counter,
    entry_sk,
    is_entry,
    item_key,
    prefix_query,
    scope_prefix,
)
from recall.store.memory_transactions import MemoryTransactions, kept_times

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_FAILED = "ConditionalCheckFailed"


def _guarded(
    request: list[Any], guard: dict[str, Any] | None, thread: dict[str, Any] | None = None
) -> list[Any]:
    """The request with the thread's check, then the caller's role check, last, so the
    items' indexes stay put."""
    checks = [check for check in (thread, guard) if check is not None]
    return [*request, *({"ConditionCheck": check} for check in checks)]


def _refused(
    exc: ClientError, guard: dict[str, Any] | None = None, thread: dict[str, Any] | None = None
) -> list[str]:
    """Why DynamoDB refused a transaction, item by item (``[]`` when it conflicted with
    another one): the caller re-reads and decides. A failed ``guard`` (the last item) is
    Forbidden, a failed ``thread`` check (just before it) NotFound; any other error is
    raised."""
    codes = cancellation_codes(exc)
    if guard is not None and codes[-1:] == [_FAILED]:
        raise Forbidden("Your role on this project changed: it no longer allows this.") from exc
    if thread is not None:
        at = len(codes) - 1 - (guard is not None)
        if 0 <= at < len(codes) and codes[at] == _FAILED:
            raise NotFound("No such conversation.") from exc
    if _FAILED in codes:
        return codes
    error = translate(exc)
    if isinstance(error, Conflict):
        return codes
    raise error from exc


class MemoryWrites:
    """The writes of ``MemoryStore``, with the client and the reads of one entry or one
    query that both sides use."""

    def __init__(self, settings: Settings, client: DynamoDBClient | None = None) -> None:
        self._table = settings.memories_table
        self._client = client
        self._batch_size = settings.delete_batch_size
        self._batch_attempts = settings.batch_retry_attempts
        self._batch_base_seconds = settings.batch_retry_base_seconds
        self._transactions = MemoryTransactions(settings)
        self._attempts = settings.memory_write_attempts
        self._backoff_seconds = settings.batch_retry_base_seconds
        self._retry_after = settings.retry_after_seconds

    @property
    def client(self) -> DynamoDBClient:
        return self._client or dynamodb_client()

    def reclaim(
        self, user_id: str, project_id: str, conversation_id: str | None, now: datetime
    ) -> bool:
        """Free the slots expired entries hold in one scope; True when one may have opened."""
        return self._reclaim(owner_key(user_id, project_id), conversation_id, now)

    def write(
        self,
        user_id: str,
        project_id: str,
        entry: MemoryEntry,
        now: datetime,
        reason: str | None = None,
        guard: dict[str, Any] | None = None,
        thread: dict[str, Any] | None = None,
    ) -> tuple[MemoryEntry, bool] | None:
        """Create or update one entry: ``(stored entry, created)``. A background write
        (extracted, consolidated) that meets an active explicit entry, or the cap, is
        dropped and logged (``None``); an explicit write over the cap is a Conflict.
        ``guard``, a ``ConditionCheck`` on the caller's role, joins the transaction: when
        it fails the write is Forbidden. So does ``thread``, a thread entry's check that its
        thread is live: when it fails the write is NotFound.

        An imported entry already stored exactly as it comes, its own times included
        (``kept_times``), is not written again: a chunk run twice, even twice at once, adds
        no second history record and no version. Every other write lands, the same value
        or not."""
        owner = owner_key(user_id, project_id)
        sk = entry_sk(entry.key, entry.conversation_id)
        background = entry.source in BACKGROUND_SOURCES
        reclaimed = False
        for _ in attempts(self._attempts, self._backoff_seconds):
            current = self._current(owner, sk)
            if current is not None and kept_times(entry) and current.entry() == entry:
                return entry, False
            stored, request = self._transactions.write(owner, entry, current, now, reason)
            try:
                self.client.transact_write_items(TransactItems=_guarded(request, guard, thread))
            except ClientError as exc:
                codes = _refused(exc, guard, thread)
                if current is None and codes[1:2] == [_FAILED]:
                    if not reclaimed:
                        reclaimed = True
                        if self._reclaim(owner, entry.conversation_id, now):
                            continue
                    self._over_cap(entry, background, exc)
                    return None
                if codes[:1] == [_FAILED] and background and self._explicit_holds(owner, sk, now):
                    logger.info(
                        "background memory write skipped: explicit entry holds the key",
                        extra={"key": entry.key, "source": entry.source},
                    )
                    return None
                continue
            return stored, current is None
        raise Conflict(
            "The memory entry changed too often meanwhile; try again.",
            retry_after=self._retry_after,
        )

    def delete(
        self,
        user_id: str,
        project_id: str,
        key: str,
        conversation_id: str | None,
        source: Source,
        now: datetime,
        guard: dict[str, Any] | None = None,
        thread: dict[str, Any] | None = None,
    ) -> MemoryEntry | None:
        """Delete one active entry with its history record; ``None`` when there is none. A
        background delete never removes an explicit entry (the condition says so).
        ``guard`` and ``thread`` as for ``write``."""
        owner = owner_key(user_id, project_id)
        sk = entry_sk(key, conversation_id)
        background = source in BACKGROUND_SOURCES
        for _ in attempts(self._attempts, self._backoff_seconds):
            current = self._current(owner, sk)
            if current is None or not is_active(current.entry(), now):
                return None
            removal = self._transactions.removal(owner, current, source, now)
            try:
                self.client.transact_write_items(TransactItems=_guarded(removal, guard, thread))
            except ClientError as exc:
                codes = _refused(exc, guard, thread)
                if codes[:1] == [_FAILED] and background and self._explicit_holds(owner, sk, now):
                    return None
                continue
            return current.entry()
        raise Conflict(
            "The memory entry changed too often meanwhile; try again.",
            retry_after=self._retry_after,
        )

    def retire(
        self, user_id: str, project_id: str, entry: MemoryEntry, reason: str, now: datetime
    ) -> bool:
        """Consolidation's delete, explicit entries included, but only of the entry exactly
        as its plan read it (a change since then wins); ``False`` when it changed or went.
        The whole entry is compared: an imported one keeps its document's ``updatedAt``, so
        a change does not always move it."""
        owner = owner_key(user_id, project_id)
        current = self._current(owner, entry_sk(entry.key, entry.conversation_id))
        if current is None or current.entry() != entry:
            return False
        request = self._transactions.removal(
            owner, current, Source.CONSOLIDATED, now, reason, consolidating=True
        )
        try:
            self.client.transact_write_items(TransactItems=request)
        except ClientError as exc:
            _refused(exc)  # raises anything but a refusal or a conflict
            return False
        return True

    def note(
        self,
        user_id: str,
        project_id: str,
        entry: MemoryEntry,
        reason: str,
        now: datetime,
        guard: dict[str, Any] | None = None,
    ) -> None:
        """Record in an entry's history that a background job left it as it is, and why.
        ``guard`` as for ``write``."""
        note = self._transactions.note(owner_key(user_id, project_id), entry, reason, now)
        if guard is None:
            self.client.put_item(**note)
            return
        try:
            self.client.transact_write_items(TransactItems=_guarded([{"Put": note}], guard))
        except ClientError as exc:
            _refused(exc, guard)

    def expire(
        self, user_id: str, project_id: str, key: str, conversation_id: str | None, now: datetime
    ) -> bool:
        """Delete an entry past its expiry, recording it; ``False`` if it is absent, still
        active, or was renewed meanwhile. The expire job calls this for what ``byDue`` lists."""
        return self._expire(owner_key(user_id, project_id), entry_sk(key, conversation_id), now)

    def _all(self, query: dict[str, Any]) -> list[Item]:
        pages = self.client.get_paginator("query").paginate(**query)
        return [item for page in pages for item in page["Items"]]

    def _current(self, owner: str, sk: str) -> EntryItem | None:
        item = self.client.get_item(
            TableName=self._table, Key=item_key(owner, sk), ConsistentRead=True
        ).get("Item")
        return EntryItem.model_validate(from_item(item)) if item else None

    def _explicit_holds(self, owner: str, sk: str, now: datetime) -> bool:
        current = self._current(owner, sk)
        entry = current.entry() if current else None
        return entry is not None and entry.source == Source.EXPLICIT and is_active(entry, now)

    def _over_cap(self, entry: MemoryEntry, background: bool, exc: ClientError) -> None:
        """An explicit write over the cap is the caller's to resolve; a background one is
        dropped, and said so in the log."""
        cap = self._transactions.cap(entry.conversation_id)
        where = (
            "your memory in this project" if entry.conversation_id is None else "this conversation"
        )
        if not background:
            raise Conflict(
                f"Memory is full: {where} already holds {cap} {entry.scope} entries. Update or "
                f"delete one before adding {entry.key!r}."
            ) from exc
        logger.warning(
            "background memory write dropped: cap reached",
            extra={"key": entry.key, "source": entry.source, "scope": entry.scope, "cap": cap},
        )

    def _expire(self, owner: str, sk: str, now: datetime) -> bool:
        """Delete the entry if it has expired; ``False`` when it has not, or changed (its
        owner renewed it). A delete that only met another transaction (a turn's, on the
        entry's counter) is read again and sent again, not taken for a change: the entry's
        due bucket may be past the schedule's look-back by its next run."""
        for attempt in attempts(self._attempts, self._backoff_seconds):
            current = self._current(owner, sk)
            if current is None or is_active(current.entry(), now):
                return False
            try:
                self.client.transact_write_items(
                    TransactItems=self._transactions.removal(owner, current, None, now)
                )
            except ClientError as exc:
                if collided(exc) and attempt + 1 < self._attempts:
                    continue
                error = translate(exc)
                if isinstance(error, Conflict) and not collided(exc):
                    return False
                raise error from exc
            return True
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _reclaim(self, owner: str, conversation_id: str | None, now: datetime) -> bool:
        """Free the slots of expired entries, then set the counter to the number of entry
        items if it drifted (TTL deletes bypass it). True when a slot may have opened."""
        query = prefix_query(self._table, owner, scope_prefix(conversation_id))
        freed = 0
        for item in filter(is_entry, self._all(query)):
            stored = EntryItem.model_validate(from_item(item))
            if not is_active(stored.entry(), now):
                freed += self._expire(owner, stored.sk, now)
        key, attribute = counter(owner, conversation_id)
        found = self.client.get_item(TableName=self._table, Key=key, ConsistentRead=True)
        seen = from_item(found.get("Item", {})).get(attribute)
        actual = sum(1 for item in self._all(query) if is_entry(item))
        if seen is None or seen == actual:
            return freed > 0
        try:
            self.client.update_item(
                TableName=self._table,
                Key=key,
                UpdateExpression="SET #count = :actual",
                ConditionExpression="#count = :seen",
                ExpressionAttributeNames={"#count": attribute},
                ExpressionAttributeValues={":actual": to_value(actual), ":seen": to_value(seen)},
            )
        except ClientError as exc:
            error = translate(exc)
            if isinstance(error, Conflict):
                return freed > 0
            raise error from exc
        logger.warning(
            "memory counter repaired", extra={"attribute": attribute, "was": seen, "now": actual}
        )
        return True
