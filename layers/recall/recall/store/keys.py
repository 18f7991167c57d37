"""Every key format of Recall's tables, defined once, and the sizes of the ids that go in
them. Project, conversation and message ids are ULIDs and memory keys are ``[a-z0-9_.-]``,
so none contains ``#``; nor may a user id (the JWT ``sub``): it comes first in every joined
key, which splits back at its ``#``.

DynamoDB refuses a partition key over 2,048 bytes and a sort key over 1,024 bytes (moto
does not), so every id a client sends is bounded here, before any key is built from it:
a user id is at most what fits after the longest prefix a Projects sort key puts before
one (``ERASING#``), and a project or conversation id gets half of what a thread key
(``<user>#<project>#<conversation>``) leaves after the longest user id."""

from __future__ import annotations

from datetime import datetime, timedelta
import hashlib

from recall.domain import clock

SEPARATOR = "#"
PARTITION_KEY_MAX_BYTES = 2_048
SORT_KEY_MAX_BYTES = 1_024
# The Projects table's sort keys that end in a user id: a member, the marker of an erasure
# under way, a member an owner removed. A user id must fit after the longest of them.
MEMBER_PREFIX = "MEMBER#"
ERASING_PREFIX = "ERASING#"
FORMER_PREFIX = "FORMER#"
USER_SORT_KEY_PREFIXES = (MEMBER_PREFIX, ERASING_PREFIX, FORMER_PREFIX)
USER_ID_MAX_BYTES = SORT_KEY_MAX_BYTES - max(
    len(prefix.encode()) for prefix in USER_SORT_KEY_PREFIXES
)
ID_MAX_BYTES = (PARTITION_KEY_MAX_BYTES - USER_ID_MAX_BYTES - 2 * len(SEPARATOR)) // 2


def _fits(value: str, max_bytes: int) -> bool:
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        return False
    return 0 < size <= max_bytes and SEPARATOR not in value


def fits_user_id(user_id: str) -> bool:
    """Whether ``user_id`` can go into every key that holds a user id, and could be a
    token's ``sub`` (never blank)."""
    return _fits(user_id, USER_ID_MAX_BYTES) and bool(user_id.strip())


def fits_id(value: str) -> bool:
    """Whether a project or conversation id from a client can go into every key that holds
    one; an id that cannot was never issued, so it names nothing."""
    return _fits(value, ID_MAX_BYTES)


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
