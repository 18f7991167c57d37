"""Scheduled jobs never scan a table: over 10,000 sessions and 10,000 expiring entries of
which 1 % are due, each job issues only queries of its due buckets, and the items it reads
stay within twice the items due.

The tables are the template's own, created under other names for this module, so the
20,000 items stay out of every other test's way. moto answers an index query by looking at
every item of the table, so this module keeps the buckets it reads few (two shards, two
hours back): the number of queries is fixed by those settings, whatever the table holds,
and what is counted here is what DynamoDB would bill: the items the queries return."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
import os
from typing import TYPE_CHECKING, Any

import boto3
import pytest

from local import template
from recall.domain import clock
from recall.domain.ids import new_id
from recall.domain.jobs import ScheduledJob
from recall.domain.memory import Category, MemoryEntry
from recall.services.access import ProjectAccess
from recall.services.consolidation import ConsolidationService
from recall.services.maintenance import Maintenance
from recall.services.sessions import SessionService
from recall.settings import Settings, get_settings
from recall.store.conversations import ConversationStore
from recall.store.dynamodb import batch_write
from recall.store.keys import owner_key
from recall.store.memories import MemoryStore
from recall.store.memory_items import EntryItem
from recall.store.memory_upkeep import MemoryUpkeep
from recall.store.projects import ProjectStore
from recall.store.sessions import SessionStore
from recall.store.usage import UsageStore
from tests.integration.conftest import live_session_item

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# Far from every other test's clock, so only this test's items fall in the buckets read
NOW = datetime.fromisoformat("2001-01-03T12:00:00+00:00")
ITEMS = 10_000
DUE = ITEMS // 100


class Ledger:
    """What the store's client sends and how many items each query hands back."""

    def __init__(self) -> None:
        self.operations: list[str] = []
        self.items_read = 0

    def before(self, model: Any, **kwargs: Any) -> None:
        self.operations.append(model.name)

    def after(self, parsed: Any, model: Any, **kwargs: Any) -> None:
        if model.name in {"Query", "Scan", "GetItem", "BatchGetItem"}:
            self.items_read += int(parsed.get("Count", 1 if parsed.get("Item") else 0))


@pytest.fixture(scope="module")
def client() -> DynamoDBClient:
    """A client of another region of the embedded store: its tables are apart from every
    other test's, down to moto's copies of a region's tables on each transaction."""
    found: DynamoDBClient = boto3.client(
        "dynamodb", region_name="us-west-2", endpoint_url=os.environ["AWS_ENDPOINT_URL_DYNAMODB"]
    )
    return found


@pytest.fixture
def ledger(client: DynamoDBClient) -> Iterator[Ledger]:
    kept = Ledger()
    events = client.meta.events
    events.register("before-call.dynamodb", kept.before)
    events.register("after-call.dynamodb", kept.after)
    yield kept
    events.unregister("before-call.dynamodb", kept.before)
    events.unregister("after-call.dynamodb", kept.after)


def due_at(n: int) -> datetime:
    """The first 1 % fell due in the last two hours; the rest fall due over the next three
    days, many of them within the current hour's buckets."""
    if n < DUE:
        return NOW - timedelta(minutes=(n * 7) % 120)
    return NOW + timedelta(minutes=1 + (n * 37) % (72 * 60))


@pytest.fixture(scope="module")
def settings(client: DynamoDBClient) -> Iterator[Settings]:
    """The template's Sessions and Memories tables (with the Usage and Conversations tables
    the session job reads), made afresh in a region of their own."""
    names = {
        "SessionsTable": "LoadSessions",
        "MemoriesTable": "LoadMemories",
        "UsageTable": "LoadUsage",
        "ConversationsTable": "LoadConversations",
    }
    for request in template.create_table_requests():
        if request["TableName"] in names:
            client.create_table(**{**request, "TableName": names[request["TableName"]]})
    yield get_settings().model_copy(
        update={
            "sessions_table": names["SessionsTable"],
            "memories_table": names["MemoriesTable"],
            "usage_table": names["UsageTable"],
            "conversations_table": names["ConversationsTable"],
            "due_shards": 2,
            "maintenance_lookback_hours": 2,
        }
    )
    for name in names.values():
        client.delete_table(TableName=name)


@pytest.fixture(scope="module")
def seeded(settings: Settings, client: DynamoDBClient) -> tuple[str, str]:
    user, project = f"load-{new_id()}", new_id()
    ends = timedelta(seconds=settings.session_idle_seconds + settings.session_end_grace_seconds)
    # Each a member's own live session, due when it can end
    session_puts = [
        {
            "PutRequest": {
                "Item": live_session_item(
                    settings, f"load-{n}", project, clock.stamp(due_at(n) - ends)
                )
            }
        }
        for n in range(ITEMS)
    ]
    owner = owner_key(user, project)
    entry_puts = [
        {
            "PutRequest": {
                "Item": EntryItem.of(
                    owner,
                    MemoryEntry(
                        key=f"entry_{n}",
                        value=f"entry {n}",
                        category=Category.CONTEXT,
                        created_at=clock.stamp(NOW),
                        updated_at=clock.stamp(NOW),
                        expires_at=clock.stamp(due_at(n)),
                    ),
                    1,
                    settings.due_shards,
                    timedelta(hours=settings.memory_ttl_grace_hours),
                ).item()
            }
        }
        for n in range(ITEMS)
    ]
    batch_write(client, settings.sessions_table, session_puts)
    batch_write(client, settings.memories_table, entry_puts)
    return user, project


def test_pruning_sessions_reads_only_the_due_ones(
    settings: Settings, client: DynamoDBClient, seeded: tuple[str, str], ledger: Ledger
) -> None:
    # Given: each due session's member's usage is read (a batch of two keys), its end
    # written, and its threads queried for signals
    maintenance = maintenance_over(settings, client)
    report = maintenance.run(ScheduledJob.PRUNE_SESSIONS, NOW)
    assert "Scan" not in ledger.operations
    assert set(ledger.operations) <= {"Query", "BatchGetItem", "UpdateItem"}
    assert ledger.operations.count("BatchGetItem") == DUE
    assert report.changed == DUE
    assert ledger.items_read <= 2 * DUE


def test_expiring_memory_reads_only_the_due_entries(
    settings: Settings, client: DynamoDBClient, seeded: tuple[str, str], ledger: Ledger
) -> None:
    # Given an expiry that finds its entries but leaves each one's own delete (one read
    # and one transaction each, tested on a small scale elsewhere) out of this count
    memories = CountedExpiry(settings, client)
    maintenance = maintenance_over(settings, client, memories)
    report = maintenance.run(ScheduledJob.EXPIRE_MEMORIES, NOW)
    assert set(ledger.operations) == {"Query"}
    assert report.read == len(memories.expired) == DUE
    assert ledger.items_read <= 2 * DUE


def test_the_consolidation_fan_out_reads_only_its_own_buckets(
    settings: Settings, client: DynamoDBClient, seeded: tuple[str, str], ledger: Ledger
) -> None:
    maintenance = maintenance_over(settings, client)
    maintenance.run(ScheduledJob.CONSOLIDATE, NOW)
    assert set(ledger.operations) == {"Query"}
    assert ledger.items_read == 0  # 10,000 expiring entries and sessions, none of them read


class NoQueue:
    def send(self, jobs: list[Any]) -> int:
        return len(jobs)


class CountedExpiry(MemoryStore):
    """Counts the entries the expire job hands it, and deletes none."""

    def __init__(self, settings: Settings, client: DynamoDBClient) -> None:
        super().__init__(settings, client)
        self.expired: list[str] = []

    def expire(
        self, user_id: str, project_id: str, key: str, conversation_id: str | None, now: datetime
    ) -> bool:
        self.expired.append(key)
        return True


def maintenance_over(
    settings: Settings, client: DynamoDBClient, memories: MemoryStore | None = None
) -> Maintenance:
    memories = memories or MemoryStore(settings, client)
    upkeep = MemoryUpkeep(settings, client)
    consolidation = ConsolidationService(settings, memories, upkeep, NoQueue())  # type: ignore[arg-type]
    sessions = SessionService(
        settings,
        ProjectAccess(ProjectStore(settings, client)),
        SessionStore(settings, client),
        UsageStore(settings, client),
        ConversationStore(settings, client),
        NoQueue(),  # type: ignore[arg-type]
    )
    return Maintenance(sessions, memories, upkeep, consolidation)
