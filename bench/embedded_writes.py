"""What one transaction costs the embedded store as it fills (``python -m bench.embedded_writes``).

A turn-sized transaction (two message puts) on the Messages table, timed (median of
``REPEATS``) with 0, 2,000, 10,000 and 30,000 messages already in it: once over moto as it
is, once as ``make dev`` and the tests run it (``local/dynamodb_writes.py``), each in a
fresh interpreter since the change is to the whole process. Wall time over loopback on a
shared machine: the ratio to the empty store, taken in the same run, is what to read."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
import statistics
import subprocess
import sys
import time
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "layers" / "recall") not in sys.path:
    sys.path.insert(0, str(ROOT / "layers" / "recall"))

from local import dynamodb_writes, embedded  # noqa: E402

FILLED = (0, 2_000, 10_000, 30_000)
REPEATS = 5
TEXT = "x" * 550


def measure(patched: bool) -> list[float]:
    """Milliseconds per transaction at each of ``FILLED``."""
    import boto3
    from moto.server import ThreadedMotoServer

    os.environ.update(embedded.FAKE_AWS)
    if patched:
        dynamodb_writes.install()
    port = embedded.free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    try:
        embedded.create_tables(endpoint)
        client = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
        table = next(name for name in client.list_tables()["TableNames"] if "Messages" in name)

        def message(n: int) -> dict[str, Any]:
            return {
                "thread": {"S": f"bench#p#t{n % 50}"},
                "messageId": {"S": f"{n:026d}"},
                "text": {"S": TEXT},
            }

        timings: list[float] = []
        held = 0
        for filled in FILLED:
            for start in range(held, filled, 25):
                batch = [{"PutRequest": {"Item": message(n)}} for n in range(start, start + 25)]
                client.batch_write_item(RequestItems={table: batch})  # type: ignore[dict-item]
            held = filled
            spent = []
            for repeat in range(REPEATS):
                first = 10**9 + 2 * repeat
                began = time.perf_counter()
                client.transact_write_items(
                    TransactItems=[
                        {"Put": {"TableName": table, "Item": message(n)}}
                        for n in (first, first + 1)
                    ]
                )
                spent.append((time.perf_counter() - began) * 1000)
            timings.append(statistics.median(spent))
        return timings
    finally:
        server.stop()


def _timings_in_a_fresh_interpreter(run: str) -> list[float]:
    command = [sys.executable, "-m", "bench.embedded_writes", "--run", run]
    done = subprocess.run(command, cwd=ROOT, check=True, capture_output=True, text=True)  # noqa: S603
    return list(json.loads(done.stdout))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--run", choices=("as-is", "patched"))
    args = parser.parse_args()
    if args.run:
        print(json.dumps(measure(args.run == "patched")))
        return 0
    results = {run: _timings_in_a_fresh_interpreter(run) for run in ("as-is", "patched")}
    print("| messages held | moto as is (ms) | × empty | embedded store (ms) | × empty |")
    print("|---|---|---|---|---|")
    for index, filled in enumerate(FILLED):
        plain, ours = results["as-is"][index], results["patched"][index]
        print(
            f"| {filled:,} | {plain:.0f} | {plain / results['as-is'][0]:.1f} "
            f"| {ours:.1f} | {ours / results['patched'][0]:.1f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
