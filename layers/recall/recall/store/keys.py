"""Every key format of Recall's tables, defined once. Project, conversation and message
ids are ULIDs and memory keys are ``[a-z0-9_.-]``, so none contains ``#``; a user id (the
JWT ``sub``) comes first, so an owner key splits back at its last ``#``."""

from __future__ import annotations

from datetime import datetime, timedelta
import hashlib

from recall.domain import clock

SEPARATOR = "#"


def owner_key(user_id: str, project_id: str) -> str:
    """The partition of a caller's conversations and memory in one project."""
    return f"{user_id}{SEPARATOR}{project_id}"


def owner_parts(owner: str) -> tuple[str, str]:
    """``(user_id, project_id)`` of an owner key."""
    user_id, project_id = owner.rsplit(SEPARATOR, 1)
    return user_id, project_id


def thread_key(user_id: str, project_id: str, conversation_id: str) -> str:
    """The partition of one thread's messages, and its session's key."""
    return f"{owner_key(user_id, project_id)}{SEPARATOR}{conversation_id}"


def due_bucket(partition: str, due_at: str, shards: int) -> str:
    """``<YYYY-MM-DDTHH>#<shard>``: one hour's due items spread over ``shards`` partitions
    by a stable hash of the item's partition key, so a job reads a few small partitions an
    hour and never the whole table."""
    shard = int.from_bytes(hashlib.sha256(partition.encode()).digest()[:4], "big") % shards
    return f"{due_at[:13]}{SEPARATOR}{shard}"


CONSOLIDATION_BUCKET_PREFIX = "C#"


def consolidation_bucket(owner: str, due_at: str, shards: int) -> str:
    """A due bucket apart from expiring entries', for a user and project whose memory may
    need consolidating: the same index serves both jobs, each reading only its own."""
    return CONSOLIDATION_BUCKET_PREFIX + due_bucket(owner, due_at, shards)


def due_buckets(now: datetime, lookback_hours: int, shards: int, prefix: str = "") -> list[str]:
    """Every bucket a scheduled job reads: each shard of the current hour and of the
    ``lookback_hours`` before it. Their number is fixed, whatever the number of users."""
    hour = now.replace(minute=0, second=0, microsecond=0)
    hours = [clock.stamp(hour - timedelta(hours=back))[:13] for back in range(lookback_hours + 1)]
    return [f"{prefix}{at}{SEPARATOR}{shard}" for at in hours for shard in range(shards)]
