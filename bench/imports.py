"""An import of THREADS threads of MESSAGES messages (1,000 × 50 by default) through the
queue, with ``make dev``'s own machinery in this process: the embedded store, the Data
function for ``POST …/import``, then the worker invoked by the SQS event source poller,
one chunk at a time, with the progress route read after each.

Memory is Python's own (``tracemalloc``): the peak while the handler checks and cuts the
document, and the peak of each chunk's invocation, measured apart from the data already
stored. The document is bounded by IMPORT_MAX_BYTES and each chunk by
IMPORT_CHUNK_MAX_BYTES, so the chunk's peak stays flat however many threads there are.

    python -m bench.imports [--threads 1000] [--messages 50]
"""

from __future__ import annotations

import argparse
from datetime import timedelta
import json
import time
import tracemalloc
from typing import Any
import warnings

from local import background, embedded, runtime
from recall.domain import clock
from recall.observability import logger
from recall.settings import get_settings

USER = "bench-importer"
MB = 1024 * 1024


def call(method: str, path: str, body: Any = None) -> dict[str, Any]:
    found = runtime.match_route(method, path)
    assert found is not None
    reply: dict[str, Any] = runtime.invoke(
        found[0].function, runtime.http_event(method, path, body=body, sub=USER)
    )
    assert reply["statusCode"] in (200, 201, 202), reply
    return dict(json.loads(reply["body"]), headers=reply.get("headers") or {})


def document(threads: int, messages: int) -> dict[str, Any]:
    """Threads of alternating user and assistant messages a minute apart, a day between
    threads, the last one an hour ago."""
    end = clock.now() - timedelta(hours=1)
    return {
        "format": "threads",
        "threads": [
            {
                "title": f"Thread {n}",
                "messages": [
                    {
                        "role": "user" if m % 2 == 0 else "assistant",
                        "content": f"Message {m} of thread {n}.",
                        "createdAt": clock.stamp(
                            end - timedelta(days=threads - n, minutes=messages - m)
                        ),
                    }
                    for m in range(messages)
                ],
            }
            for n in range(threads)
        ],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=1_000)
    parser.add_argument("--messages", type=int, default=50)
    args = parser.parse_args()
    warnings.filterwarnings("ignore", "No application metrics")
    logger.setLevel("WARNING")
    with embedded.running() as store:
        settings = get_settings()
        project = call("POST", "/projects", {"name": "Bench"})["id"]
        sent = document(args.threads, args.messages)
        size = len(json.dumps(sent))
        tracemalloc.start()
        started = time.perf_counter()
        accepted = call("POST", f"/projects/{project}/import", sent)
        handler_seconds = time.perf_counter() - started
        _, handler_peak = tracemalloc.get_traced_memory()
        location = accepted["headers"]["Location"]
        del sent
        pollers = background.pollers(store)
        chunk_peaks: list[int] = []
        progress = accepted
        print(f"document {size / MB:.1f} MB, accepted in {handler_seconds:.1f} s")
        while progress["status"] in ("queued", "running"):
            for poller in pollers:
                before, _ = tracemalloc.get_traced_memory()
                tracemalloc.reset_peak()
                drained = poller.poll(0)
                _, peak = tracemalloc.get_traced_memory()
                if drained.received:
                    chunk_peaks.append(peak - before)
            progress = call("GET", location)
            print(
                f"  {time.perf_counter() - started:6.1f} s  {progress['status']:<8}"
                f" threads {progress['threadsDone']}/{progress['threadsTotal']}"
                f"  messages {progress['messagesDone']}",
                flush=True,
            )
        total = time.perf_counter() - started
        tracemalloc.stop()
    print()
    print(
        f"| threads × messages | document | chunks (≤ {settings.import_chunk_max_bytes} B)"
        " | total s | handler peak | chunk peak (max) | chunk peak (median) | status |"
    )
    print("|---|---|---|---|---|---|---|---|")
    chunk_peaks.sort()
    median = chunk_peaks[len(chunk_peaks) // 2] if chunk_peaks else 0
    print(
        f"| {args.threads} × {args.messages} | {size / MB:.1f} MB | {len(chunk_peaks)}"
        f" | {total:.0f} | {handler_peak / MB:.0f} MB | {max(chunk_peaks, default=0) / MB:.1f} MB"
        f" | {median / MB:.1f} MB | {progress['status']} |"
    )
    return 0 if progress["status"] == "done" else 1


if __name__ == "__main__":
    raise SystemExit(main())
