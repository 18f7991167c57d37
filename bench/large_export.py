"""What a large export costs, by its size (``make bench``).

Over the embedded store (moto's DynamoDB and S3 on loopback, in a process of its own): a
user with one project of threads of 16 KB messages exports it through
``DataService.export`` past ``EXPORT_MAX_BYTES``, as ``GET …/export`` does. Prints, per
size, the JSON Lines' bytes, the parts uploaded, the Python heap's peak (``tracemalloc``)
while it is written, and the rate. The peak shows memory stays flat whatever the size; the
rate over moto on a shared machine is a floor for what ``EXPORT_LINES_MAX_BYTES`` allows in
API Gateway's 30 s (Lambda reads DynamoDB and writes S3 faster than moto over loopback)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
import os
from pathlib import Path
import subprocess
import sys
import time
import tracemalloc
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# Like `local.runtime`, put the layer on the path so `python -m bench...` runs from the root.
if str(ROOT / "layers" / "recall") not in sys.path:
    sys.path.insert(0, str(ROOT / "layers" / "recall"))

from local import embedded  # noqa: E402
from local.seed import grow_thread  # noqa: E402

MESSAGE_CHARS = 16_000
SIZES_MB = (8, 24, 48)
PER_THREAD = 500


def export_one(megabytes: int) -> tuple[int, int, int, float]:
    """``(bytes, parts, peak heap bytes, seconds)`` of exporting that much."""
    from recall.domain import clock
    from recall.domain.access import Role
    from recall.domain.conversations import Conversation
    from recall.domain.exports import ExportLink
    from recall.domain.ids import new_id
    from recall.domain.projects import Member, Project
    from recall.store.exports import s3_client
    from recall.wiring import conversation_store, data_service, project_store

    user, project_id = f"user-{new_id()}", new_id()
    at = clock.stamp(clock.now())
    project_store().create(
        Project(project_id=project_id, name="Bench", created_by=user, created_at=at, updated_at=at),
        Member(project_id=project_id, user_id=user, role=Role.OWNER, added_at=at),
    )
    messages = megabytes * 1_000_000 // MESSAGE_CHARS
    for first in range(0, messages, PER_THREAD):
        thread = Conversation(
            user_id=user,
            project_id=project_id,
            conversation_id=new_id(),
            title=f"Thread {first}",
            created_at=at,
            updated_at=at,
        )
        conversation_store().create(thread)
        count = min(PER_THREAD, messages - first)
        grow_thread(user, project_id, thread.conversation_id, count, lambda n: "x" * MESSAGE_CHARS)
    parts = 0

    def counted(**_: Any) -> None:
        nonlocal parts
        parts += 1

    s3_client().meta.events.register("before-call.s3.UploadPart", counted)
    tracemalloc.start()
    started = time.perf_counter()
    link = data_service().export(user, project_id)
    seconds = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    s3_client().meta.events.unregister("before-call.s3.UploadPart", counted)
    assert isinstance(link, ExportLink)
    return link.size, parts, peak, seconds


@contextmanager
def store_elsewhere() -> Iterator[None]:
    """The embedded store in a process of its own, so the heap measured here is the
    export's, not moto's copy of every item and part."""
    port = embedded.free_port()
    child = subprocess.Popen(  # noqa: S603 (this interpreter, this file's own script)
        [sys.executable, "-c", SERVE.format(port=port)], cwd=ROOT, stdout=subprocess.PIPE
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
        endpoint = f"http://127.0.0.1:{port}"
        os.environ.update(embedded.FAKE_AWS)
        os.environ.update(embedded.local_environment(endpoint))
        from recall.settings import get_settings

        get_settings.cache_clear()
        yield
    finally:
        child.terminate()
        child.wait()


SERVE = """
import sys, time
sys.path.insert(0, "layers/recall")
from local import embedded
embedded.start({port})
print("ready", flush=True)
time.sleep(3600)
"""


def main() -> None:
    with store_elsewhere():
        print("| JSON Lines | parts | heap peak | seconds | MB/s |")
        print("|---|---|---|---|---|")
        for megabytes in SIZES_MB:
            size, parts, peak, seconds = export_one(megabytes)
            print(
                f"| {size / 1e6:.1f} MB | {parts} | {peak / 1e6:.1f} MB | {seconds:.1f} | "
                f"{size / 1e6 / seconds:.1f} |"
            )


if __name__ == "__main__":
    main()
