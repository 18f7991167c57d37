"""The one retry policy for what a batch call leaves unprocessed, against fake clients at
the boto3 edge: bounded, backing off with full jitter, and never really sleeping."""

from __future__ import annotations

import itertools
import statistics
from typing import Any

import pytest

from recall.errors import Throttled
from recall.retry import BACKOFF_CEILING_SECONDS
from recall.settings import Settings
from recall.store.dynamodb import (
    BATCH_GET_MAX_KEYS,
    batch_delete,
    batch_get,
    to_item,
)

RUNAWAY = 1_000


def keys(table: str, count: int) -> list[dict[str, Any]]:
    return [to_item({"pk": f"{table}-{index}"}) for index in range(count)]


class FakeClient:
    """BatchGetItem and BatchWriteItem that process at most ``processed`` keys of each
    table a call (all when ``None``) and return the rest as unprocessed, recording every
    request."""

    def __init__(self, processed: int | None = None) -> None:
        self.processed = processed
        self.requests: list[dict[str, Any]] = []

    def _sent(self, request: dict[str, Any]) -> None:
        self.requests.append(request)
        if len(self.requests) > RUNAWAY:
            raise AssertionError("the retry never stopped")

    def _cut(self, pending: list[Any]) -> int:
        return len(pending) if self.processed is None else self.processed

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        self._sent(RequestItems)
        responses: dict[str, list[Any]] = {}
        unprocessed: dict[str, Any] = {}
        for table, read in RequestItems.items():
            cut = self._cut(read["Keys"])
            responses[table] = read["Keys"][:cut]
            if read["Keys"][cut:]:
                unprocessed[table] = {**read, "Keys": read["Keys"][cut:]}
        return {"Responses": responses, "UnprocessedKeys": unprocessed}

    def batch_write_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        self._sent(RequestItems)
        ((table, writes),) = RequestItems.items()
        left = writes[self._cut(writes) :]
        return {"UnprocessedItems": {table: left} if left else {}}


def ceiling(retry: int, base: float) -> float:
    return min(BACKOFF_CEILING_SECONDS, base * 2**retry)


def test_a_batch_read_that_stays_unprocessed_stops_at_the_bound_then_is_throttled() -> None:
    # Given a store that never processes anything, and the settings' bound
    settings = Settings()
    client = FakeClient(processed=0)
    slept: list[float] = []
    # When
    with pytest.raises(Throttled):
        batch_get(
            client,  # type: ignore[arg-type]
            {"projects": {"Keys": keys("p", 3), "ConsistentRead": True}},
            settings.batch_retry_attempts,
            settings.batch_retry_base_seconds,
            sleep=slept.append,
        )
    # Then exactly the bound of calls, a wait between each two, none after the last
    assert len(client.requests) == settings.batch_retry_attempts == 8
    assert len(slept) == settings.batch_retry_attempts - 1
    base = settings.batch_retry_base_seconds
    assert all(0 <= wait <= ceiling(retry, base) for retry, wait in enumerate(slept))


def test_a_batch_delete_that_stays_unprocessed_follows_the_same_bound() -> None:
    client = FakeClient(processed=0)
    slept: list[float] = []
    with pytest.raises(Throttled, match="part of the batch"):
        batch_delete(
            client,  # type: ignore[arg-type]
            "memories",
            keys("m", 3),
            attempts=4,
            base_seconds=0.01,
            sleep=slept.append,
        )
    assert len(client.requests) == 4
    assert len(slept) == 3
    assert all(0 <= wait <= ceiling(retry, 0.01) for retry, wait in enumerate(slept))


def test_retries_back_off_exponentially_with_full_jitter() -> None:
    # Given many batch reads that never get through, with a recorder for a clock
    runs = 1000
    waits: list[list[float]] = []
    for _ in range(runs):
        slept: list[float] = []
        with pytest.raises(Throttled):
            batch_get(
                FakeClient(processed=0),  # type: ignore[arg-type]
                {"t": {"Keys": keys("t", 1)}},
                5,
                0.01,
                sleep=slept.append,
            )
        waits.append(slept)
    # Then the n-th wait is drawn from nothing up to base * 2**n: spread out (jitter),
    # reaching near its ceiling, and on average twice the one before
    by_retry = list(zip(*waits, strict=True))
    assert len(by_retry) == 4
    for retry, samples in enumerate(by_retry):
        top = ceiling(retry, 0.01)
        assert all(0 <= wait <= top for wait in samples)
        assert max(samples) > 0.9 * top and min(samples) < 0.1 * top
    means = [statistics.fmean(samples) for samples in by_retry]
    assert all(1.6 < later / earlier < 2.4 for earlier, later in itertools.pairwise(means))


def test_no_wait_grows_past_the_ceiling() -> None:
    slept: list[float] = []
    with pytest.raises(Throttled):
        batch_get(
            FakeClient(processed=0),  # type: ignore[arg-type]
            {"t": {"Keys": keys("t", 1)}},
            12,
            0.05,
            sleep=slept.append,
        )
    assert len(slept) == 11 and max(slept) <= BACKOFF_CEILING_SECONDS


def test_a_batch_read_is_split_into_requests_of_at_most_100_keys_and_retries_the_rest() -> None:
    # Given 150 keys in one table and 30 in another, and a store that processes 60 keys of
    # each table a call
    client = FakeClient(processed=60)
    request = {
        "projects": {"Keys": keys("p", 150), "ConsistentRead": True},
        "sessions": {"Keys": keys("s", 30), "ConsistentRead": True},
    }
    slept: list[float] = []
    # When
    found = batch_get(client, request, 5, 0.01, sleep=slept.append)  # type: ignore[arg-type]
    # Then every key is read once, no request named more than 100 keys, and each table
    # kept its read options
    assert sorted(found["projects"], key=str) == sorted(keys("p", 150), key=str)
    assert sorted(found["sessions"], key=str) == sorted(keys("s", 30), key=str)
    sizes = [sum(len(read["Keys"]) for read in sent.values()) for sent in client.requests]
    assert max(sizes) <= BATCH_GET_MAX_KEYS and sum(sizes) > 180
    assert all(read["ConsistentRead"] for sent in client.requests for read in sent.values())
    assert slept


def test_a_batch_delete_deletes_every_key_in_batches_of_at_most_25() -> None:
    client = FakeClient(processed=20)
    deleted = batch_delete(
        client,  # type: ignore[arg-type]
        "memories",
        keys("m", 60),
        attempts=5,
        base_seconds=0.01,
        sleep=lambda _: None,
    )
    assert deleted == 60
    assert all(len(sent["memories"]) <= 25 for sent in client.requests)
    removed = [
        write["DeleteRequest"]["Key"] for sent in client.requests for write in sent["memories"][:20]
    ]
    assert sorted(removed, key=str) == sorted(keys("m", 60), key=str)


def test_nothing_to_read_sends_nothing() -> None:
    client = FakeClient()
    found = batch_get(client, {"projects": {"Keys": []}}, 5, 0.01)  # type: ignore[arg-type]
    assert found == {"projects": []} and client.requests == []
