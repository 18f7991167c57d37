"""What erasing one member's data in a project costs, by its size (``make bench``).

Over the embedded store: a user with T threads of M messages each (plus the thread's
session and a memory entry) in a shared project is erased through ``ErasureService``, as
``DELETE …/me`` does, then by the worker's runs until nothing is left. Prints, per size,
the items deleted, the DynamoDB requests and the runs it took (one request, then worker
jobs of ``ERASE_ITEMS_PER_RUN`` items each), and the requests per item deleted. Request
counts are exact; the wall time over moto only ranks the sizes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
import sys
import time
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# Like `local.runtime`, put the layer on the path so `python -m bench...` runs from the root.
if str(ROOT / "layers" / "recall") not in sys.path:
    sys.path.insert(0, str(ROOT / "layers" / "recall"))

from local import embedded  # noqa: E402
from local.seed import grow_thread  # noqa: E402

SIZES = ((1, 20), (10, 100), (4, 1_000))


@dataclass
class Counted:
    """DynamoDB requests, and the items their deletes name (batch, single, transaction)."""

    requests: int = 0
    deleted: int = 0

    def __call__(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self.requests += 1
        if model.name == "BatchWriteItem":
            self.deleted += sum(len(requests) for requests in params["RequestItems"].values())
        elif model.name == "DeleteItem":
            self.deleted += 1
        elif model.name == "TransactWriteItems":
            self.deleted += sum("Delete" in item for item in params["TransactItems"])


def erase_one(threads: int, messages: int) -> tuple[int, int, int, float]:
    """``(items deleted, requests, runs, seconds)`` of erasing a member with that much
    data; a run past the first is what a worker job does."""
    from recall.domain import clock
    from recall.domain.access import Role
    from recall.domain.conversations import Conversation
    from recall.domain.ids import new_id
    from recall.domain.jobs import EraseJob
    from recall.domain.memory import Category, MemoryEntry
    from recall.domain.projects import Member, Project
    from recall.store.dynamodb import dynamodb_client
    from recall.wiring import (
        conversation_store,
        erasure_service,
        memory_store,
        project_store,
    )

    owner, user, project_id = f"owner-{new_id()}", f"user-{new_id()}", new_id()
    at = clock.stamp(clock.now())
    projects = project_store()
    projects.create(
        Project(
            project_id=project_id, name="Bench", created_by=owner, created_at=at, updated_at=at
        ),
        Member(project_id=project_id, user_id=owner, role=Role.OWNER, added_at=at),
    )
    projects.change_member(
        Member(project_id=project_id, user_id=user, role=Role.EDITOR, added_at=at),
        None,
        Role.EDITOR,
        0,
        caller_id=owner,
        caller_roles=frozenset({Role.OWNER}),
    )
    for n in range(threads):
        thread = Conversation(
            user_id=user,
            project_id=project_id,
            conversation_id=new_id(),
            title=f"Thread {n}",
            created_at=at,
            updated_at=at,
        )
        conversation_store().create(thread)
        grow_thread(user, project_id, thread.conversation_id, messages)
        entry = MemoryEntry(key=f"note_{n}", value="kept", category=Category.CONTEXT)
        memory_store().write(user, project_id, entry, clock.now())
    counted = Counted()
    events = dynamodb_client().meta.events
    events.register("before-parameter-build.dynamodb", counted, unique_id="bench-erase")
    erasure = erasure_service()
    started = time.perf_counter()
    try:
        runs = 1
        done = erasure.erase_me(user, project_id)
        job = EraseJob(user_id=user, project_id=project_id)
        while not done:
            runs += 1
            done = erasure.resume(job)
    finally:
        events.unregister("before-parameter-build.dynamodb", unique_id="bench-erase")
    return counted.deleted, counted.requests, runs, time.perf_counter() - started


def main() -> int:
    with embedded.running():
        print("threads × messages  deleted  requests  runs  requests/item  seconds")
        for threads, messages in SIZES:
            items, requests, runs, seconds = erase_one(threads, messages)
            print(
                f"{threads:>7} × {messages:<8} {items:>7} {requests:>9} {runs:>5}"
                f" {requests / items:>14.3f} {seconds:>8.2f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
