"""Every key format of Recall's tables, defined once. Project, conversation and message
ids are ULIDs and memory keys are ``[a-z0-9_.-]``, so none contains ``#``; a user id (the
JWT ``sub``) comes first, so an owner key splits back at its last ``#``."""

from __future__ import annotations

import hashlib

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
