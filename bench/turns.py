"""How a chat turn's cost grows with the thread's length (``make bench``).

Runs turns on a short and a long thread in the same process, over the embedded store with
the offline model, interleaved so machine noise hits both alike, and prints DynamoDB
requests per turn and the median time per turn for each, with their ratio."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any
import warnings

from local import embedded, runtime
from local.seed import grow_thread
from recall.store.dynamodb import dynamodb_client

USER = "bench-user"


def call(method: str, path: str, body: Any = None) -> dict[str, Any]:
    found = runtime.match_route(method, path)
    assert found is not None
    reply: dict[str, Any] = runtime.invoke(
        found[0].function, runtime.http_event(method, path, body=body, sub=USER)
    )
    return reply


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--long", type=int, default=1000)
    args = parser.parse_args()
    warnings.filterwarnings("ignore", "No application metrics")
    with embedded.running():
        project = json.loads(call("POST", "/projects", {"name": "Bench"})["body"])["id"]
        threads: dict[str, str] = {}
        for name, length in (("short", 10), ("long", args.long)):
            reply = json.loads(
                call("POST", f"/projects/{project}/chat", {"message": "hello"})["body"]
            )
            threads[name] = reply["conversation"]["id"]
            grow_thread(USER, project, threads[name], length - 2)
        sent: list[str] = []
        dynamodb_client().meta.events.register(
            "before-call.dynamodb", lambda model, **kwargs: sent.append(model.name)
        )
        times: dict[str, list[float]] = {"short": [], "long": []}
        requests: dict[str, list[int]] = {"short": [], "long": []}
        for n in range(args.turns):
            for name, conversation in threads.items():
                before = len(sent)
                started = time.perf_counter()
                reply = call(
                    "POST",
                    f"/projects/{project}/chat",
                    {"message": f"turn {n}", "conversationId": conversation},
                )
                times[name].append(time.perf_counter() - started)
                requests[name].append(len(sent) - before)
                assert reply["statusCode"] == 200, reply
    short_ms = statistics.median(times["short"]) * 1000
    long_ms = statistics.median(times["long"]) * 1000
    print(f"turns per thread: {args.turns}; long thread: {args.long} messages")
    print(f"short thread: {max(requests['short'])} requests/turn, median {short_ms:.1f} ms")
    print(f"long thread:  {max(requests['long'])} requests/turn, median {long_ms:.1f} ms")
    print(
        f"ratio long/short: requests {max(requests['long']) / max(requests['short']):.2f}, "
        f"time {long_ms / short_ms:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
